#!/usr/bin/env python3
"""Tool calling and reasoning output end to end (issue 20).

usage: test_tool_calls.py SERVER_BINARY LIBDIR FIXTURES_DIR

On the qwen3 (Hermes <tool_call> JSON) and qwen35 (Qwen3.5 XML) fixture
models, random-weight models that only a grammar makes call anything:

 a. 50 seeds per model at temperature 1.0, alternately tool_choice
    "required" and a named function (every 10th with parallel_tool_calls):
    finish_reason "tool_calls", calls of the allowed functions with unique
    call_ ids, arguments a JSON object string valid against the function's
    parameters schema;
 b. for every 5th seed the same request streamed: the deltas (index, id,
    type and name first, then argument fragments as they are generated)
    assemble to the same calls, content and reasoning as the non-streamed
    response;
 c. request validation: unknown tool_choice name, malformed tools, a
    required call without tools or with response_format -> 400 naming the
    field; malformed history tool_calls -> 400;
 d. history: an assistant message's tool_calls (arguments as objects) and
    a tool result reach the template (/apply-template), tools too;
 f. the generic fallback (tests/data/templates/generic-tools.jinja: a
    template that shows tools in no known call format): the system message
    tells the model the {"tool_calls": [...]} JSON, and forced calls in that
    JSON validate and stream alike;
 g. Llama 3.1's template (../templates) on the llama3-bpe fixture: a forced
    call in its {"name", "parameters"} JSON; control tokens (its call
    marker <|python_tag|> is one) reach the parse as text with tools, and
    stay out of the text without;
 e. reasoning: qwen35's prompt opens <think>, so the text goes to
    reasoning_content (and delta.reasoning_content); enable_thinking false
    and --reasoning-format none keep it in content; tool_choice "auto" and
    "none" answer normally.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

CHAT = "/v1/chat/completions"
SEEDS = 50

WX = {"type": "object",
      "properties": {"c": {"type": "string", "maxLength": 3},
                     "d": {"type": "integer", "minimum": 1, "maximum": 7},
                     "m": {"type": "boolean"}},
      "required": ["c", "d"]}
PICK = {"type": "object", "properties": {"k": {"enum": ["a", "b"]}}, "required": ["k"]}
TOOLS = [{"type": "function", "function": {"name": "wx", "description": "weather", "parameters": WX}},
         {"type": "function", "function": {"name": "pick", "parameters": PICK}}]
SCHEMAS = {"wx": WX, "pick": PICK}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    sys.stdout.flush()
    return cond


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, binary, libdir, model, extra=()):
        self.port = free_port()
        # --no-prefix-cache: streamed and non-streamed runs of one seed must
        # prefill alike to sample alike (see test_grammar_e2e.py)
        args = [binary, "--port", str(self.port), "--backend", "cpu", "--threads", "2",
                "--parallel", "4", "--ctx-size", "1024", "--no-prefix-cache", "--model", model, *extra]
        env = dict(os.environ)
        env["ALICE_BACKEND_PATH"] = libdir
        env.pop("ALICE_API_KEY", None)
        self.log = tempfile.NamedTemporaryFile("w+", prefix="alice-tools-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < 60:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.logtext()}")
            try:
                if self.req("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not become ready")

    def logtext(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def req(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            js = json.loads(raw) if raw else None
        except ValueError:
            js = None
        return r.status, js

    def stream(self, body):
        """The assembled message and finish_reason of a streamed choice."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        c.request("POST", CHAT, body=json.dumps(dict(body, stream=True)).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {raw[:500]!r}")
        content, reasoning, calls, finish, done = [], [], [], None, False
        for line in raw.split(b"\n"):
            if not line.startswith(b"data: "):
                continue
            if line[6:] == b"[DONE]":
                done = True
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices", []):
                d = ch.get("delta", {})
                if d.get("content"):
                    content.append(d["content"])
                if d.get("reasoning_content"):
                    reasoning.append(d["reasoning_content"])
                for tc in d.get("tool_calls", []):
                    i = tc["index"]
                    if i == len(calls):
                        check("id" in tc and tc.get("type") == "function" and "name" in tc.get("function", {}),
                              f"the first delta of call {i} carries id, type and name: {tc}")
                        calls.append({"id": tc.get("id"), "name": tc["function"].get("name"), "arguments": ""})
                    check(i < len(calls), f"tool call delta index {i} follows the earlier ones")
                    if i < len(calls):
                        frag = tc.get("function", {}).get("arguments", "")
                        calls[i]["arguments"] += frag
                        calls[i]["fragments"] = calls[i].get("fragments", 0) + (1 if frag else 0)
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        check(done, "the stream ends with [DONE]")
        return {"content": "".join(content) or None, "reasoning": "".join(reasoning) or None,
                "calls": calls}, finish

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        os.unlink(self.log.name)


def validate(v, s, path="$"):
    """Problems of v against the keyword subset of WX / PICK."""
    if "enum" in s:
        return [] if any(type(v) is type(e) and v == e for e in s["enum"]) else [f"{path}: {v!r} not in enum"]
    t = s.get("type")
    errs = []
    if t == "object":
        if not isinstance(v, dict):
            return [f"{path}: not an object"]
        props = s.get("properties", {})
        errs += [f"{path}: missing {k!r}" for k in s.get("required", []) if k not in v]
        for k, x in v.items():
            errs += validate(x, props[k], f"{path}.{k}") if k in props else [f"{path}: extra key {k!r}"]
    elif t == "string":
        if not isinstance(v, str) or len(v) > s.get("maxLength", 1 << 60):
            errs.append(f"{path}: {v!r} not a string of at most {s.get('maxLength')}")
    elif t == "integer":
        if type(v) is not int or not s["minimum"] <= v <= s["maximum"]:
            errs.append(f"{path}: {v!r} not an integer in range")
    elif t == "boolean":
        if type(v) is not bool:
            errs.append(f"{path}: {v!r} not a boolean")
    return errs


def body_for(seed):
    b = {"messages": [{"role": "system", "content": "Use the tools."},
                      {"role": "user", "content": "What is the weather in Oslo?"}],
         "tools": TOOLS, "temperature": 1.0, "seed": seed, "max_tokens": 200}
    b["tool_choice"] = "required" if seed % 2 == 0 else {"type": "function", "function": {"name": "pick"}}
    if seed % 10 == 0:
        b["parallel_tool_calls"] = True
    return b


def check_calls(tag, body, msg, finish):
    calls = msg.get("tool_calls") or []
    if not check(finish == "tool_calls" and calls, f"{tag}: finish_reason tool_calls with calls, got {finish} {msg}"):
        return
    named = body["tool_choice"] != "required"
    check(len(calls) == 1 or body.get("parallel_tool_calls"), f"{tag}: one call without parallel_tool_calls")
    ids = [c.get("id") for c in calls]
    check(all(isinstance(i, str) and i.startswith("call_") for i in ids) and len(set(ids)) == len(ids),
          f"{tag}: unique call_ ids {ids}")
    for c in calls:
        check(c.get("type") == "function", f"{tag}: type function")
        name = c["function"]["name"]
        check(name in SCHEMAS and (not named or name == "pick"), f"{tag}: allowed function name {name}")
        try:
            args = json.loads(c["function"]["arguments"])
        except (ValueError, TypeError):
            check(False, f"{tag}: arguments are JSON text: {c['function']['arguments']!r}")
            continue
        if name in SCHEMAS:
            errs = validate(args, SCHEMAS[name])
            check(not errs, f"{tag}: arguments {args} valid: {errs}")


def run_seeds(srv, tag):
    def one(seed):
        body = body_for(seed)
        st, js = srv.req("POST", CHAT, body)
        if not check(st == 200, f"{tag} seed {seed}: HTTP {st} {js}"):
            return
        ch = js["choices"][0]
        check_calls(f"{tag} seed {seed}", body, ch["message"], ch["finish_reason"])
        if seed % 5:
            return
        smsg, sfinish = srv.stream(body)
        want = [(c["function"]["name"], c["function"]["arguments"]) for c in ch["message"].get("tool_calls", [])]
        got = [(c["name"], c["arguments"]) for c in smsg["calls"]]
        check(got == want and sfinish == ch["finish_reason"],
              f"{tag} seed {seed}: streamed calls {got} {sfinish} == non-streamed {want} {ch['finish_reason']}")
        fragments.extend(c.get("fragments", 0) for c in smsg["calls"])
        check(smsg["content"] == ch["message"].get("content") and
              smsg["reasoning"] == ch["message"].get("reasoning_content"),
              f"{tag} seed {seed}: streamed content/reasoning equal the non-streamed ones")
    fragments = []
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(one, range(SEEDS)))
    # a forced call's arguments stream as the model writes them
    check(fragments and max(fragments) > 1, f"{tag}: arguments arrive in several fragments: {fragments}")


def expect_400(srv, body, param, needle):
    st, js = srv.req("POST", CHAT, body)
    err = (js or {}).get("error", {})
    check(st == 400 and err.get("param") == param and needle in err.get("message", ""),
          f"400 on {param} with '{needle}': got {st} {js}")


def validation(srv):
    base = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    expect_400(srv, dict(base, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
               "tool_choice", "'nope', which is not in 'tools'")
    expect_400(srv, dict(base, tools=TOOLS, tool_choice="sometimes"), "tool_choice", "must be")
    expect_400(srv, dict(base, tools={"a": 1}), "tools", "must be an array")
    expect_400(srv, dict(base, tools=[{"type": "retrieval"}]), "tools", "tools[0].type")
    expect_400(srv, dict(base, tools=[{"type": "function", "function": {"description": "x"}}]),
               "tools", "tools[0].function.name")
    expect_400(srv, dict(base, tools=[{"type": "function", "function": {"name": "a b"}}]),
               "tools", "tools[0].function.name")
    expect_400(srv, dict(base, tools=[{"type": "function", "function": {"name": "f", "parameters": 3}}]),
               "tools", "parameters must be a JSON Schema object")
    expect_400(srv, dict(base, tools=TOOLS + TOOLS[:1]), "tools", "used twice")
    expect_400(srv, dict(base, tool_choice="required"), "tool_choice", "needs a non-empty 'tools'")
    expect_400(srv, dict(base, tools=TOOLS, tool_choice="required", response_format={"type": "json_object"}),
               "tool_choice", "response_format")
    expect_400(srv, dict(base, tools=[{"type": "function", "function": {"name": "f", "parameters":
                                                                         {"type": "wat"}}}],
                         tool_choice="required"), "tools", "tool 'f'")
    bad_hist = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "wx", "arguments": "{not json"}}]}]
    expect_400(srv, dict(base, messages=bad_hist), "messages", "arguments must be a JSON object")
    expect_400(srv, dict(base, messages=[{"role": "function", "content": "x"}]), "messages", "not supported")


def history(srv):
    msgs = [{"role": "user", "content": "weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_abc", "type": "function", "function": {"name": "wx", "arguments": "{\"c\": \"Osl\", \"d\": 2}"}}]},
            {"role": "tool", "tool_call_id": "call_abc", "name": "wx", "content": "sunny, 21 C"}]
    st, js = srv.req("POST", "/apply-template", {"messages": msgs, "tools": TOOLS})
    p = (js or {}).get("prompt", "")
    check(st == 200, f"apply-template with tool history: {st} {js}")
    check('<tool_call>\n{"name": "wx", "arguments": {"c": "Osl", "d": 2}}\n</tool_call>' in p,
          f"the assistant's call is rendered with its arguments as an object: {p!r}")
    check("<tool_response>\nsunny, 21 C\n</tool_response>" in p, f"the tool result is rendered: {p!r}")
    check('"name": "pick"' in p and "<tools>" in p, f"the tools are rendered: {p!r}")
    st, js = srv.req("POST", "/apply-template", {"messages": msgs, "tools": TOOLS, "tool_choice": "none"})
    check(st == 200 and "<tools>" not in js["prompt"], "tool_choice none does not show the tools")
    # the final answer after a tool result (the agent loop's last step)
    st, js = srv.req("POST", CHAT, {"messages": msgs, "tools": TOOLS, "max_tokens": 8, "seed": 1})
    check(st == 200 and js["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"),
          f"a conversation with tool history answers: {st} {js}")


def reasoning(srv_think, srv_none):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "seed": 7, "temperature": 1.0}
    st, js = srv_think.req("POST", CHAT, body)
    m = js["choices"][0]["message"]
    check(st == 200 and m.get("reasoning_content") and not m.get("content"),
          f"qwen35 opens <think>: the text is reasoning_content: {m}")
    smsg, _ = srv_think.stream(body)
    check(smsg["reasoning"] == m.get("reasoning_content") and smsg["content"] is None,
          f"streamed as delta.reasoning_content: {smsg} vs {m}")
    st, js = srv_think.req("POST", CHAT, dict(body, chat_template_kwargs={"enable_thinking": False}))
    m = js["choices"][0]["message"]
    check(st == 200 and m.get("content") and "reasoning_content" not in m,
          f"enable_thinking false: all content: {m}")
    st, js2 = srv_none.req("POST", CHAT, body)
    m2 = js2["choices"][0]["message"]
    check(st == 200 and "reasoning_content" not in m2 and m2.get("content"),
          f"--reasoning-format none: the text stays in content: {m2}")
    for choice in ("auto", "none"):
        st, js = srv_think.req("POST", CHAT, dict(body, tools=TOOLS, tool_choice=choice))
        ch = (js or {}).get("choices", [{}])[0]
        check(st == 200 and ch.get("finish_reason") in ("stop", "length", "tool_calls"),
              f"tool_choice {choice}: {st} {js}")


def generic(binary, libdir, fixtures):
    tmpl = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "templates", "generic-tools.jinja")
    srv = Server(binary, libdir, os.path.join(fixtures, "models", "qwen3-BF16.gguf"), ["--chat-template-file", tmpl])
    try:
        st, js = srv.req("POST", "/apply-template", {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS})
        p = (js or {}).get("prompt", "")
        check(st == 200 and '{"tool_calls": [{"name": "<function name>"' in p and '"name": "wx"' in p,
              f"generic: the system message shows the tools and the JSON to answer with: {p!r}")
        for seed in range(6):
            body = body_for(seed)
            st, js = srv.req("POST", CHAT, body)
            if not check(st == 200, f"generic seed {seed}: HTTP {st} {js}"):
                continue
            ch = js["choices"][0]
            check_calls(f"generic seed {seed}", body, ch["message"], ch["finish_reason"])
            if seed % 3 == 0:
                smsg, sfinish = srv.stream(body)
                want = [(c["function"]["name"], c["function"]["arguments"])
                        for c in ch["message"].get("tool_calls", [])]
                got = [(c["name"], c["arguments"]) for c in smsg["calls"]]
                check(got == want and sfinish == ch["finish_reason"],
                      f"generic seed {seed}: streamed {got} == non-streamed {want}")
    finally:
        srv.stop()


def llama3(binary, libdir, fixtures):
    tmpl = os.path.join(fixtures, "..", "templates", "meta-llama-Llama-3.1-8B-Instruct.jinja")
    srv = Server(binary, libdir, os.path.join(fixtures, "models", "llama3-bpe-F16.gguf"),
                 ["--chat-template-file", tmpl, "--ctx-size", "2048"])
    try:
        for seed in range(4):
            body = dict(body_for(seed), parallel_tool_calls=False)
            st, js = srv.req("POST", CHAT, body)
            if check(st == 200, f"llama3 seed {seed}: HTTP {st} {js}"):
                ch = js["choices"][0]
                check_calls(f"llama3 seed {seed}", body, ch["message"], ch["finish_reason"])
        # token 128010 is a control token (<|reserved_special_token_5|>) in this vocabulary
        base = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "seed": 1,
                "logit_bias": {"128010": 100}}
        st, js = srv.req("POST", CHAT, dict(base, tools=TOOLS))
        check(st == 200 and js["choices"][0]["message"]["content"].startswith("<|reserved_special_token_5|>"),
              f"llama3 with tools: control tokens reach the text: {js}")
        st, js = srv.req("POST", CHAT, base)
        check(st == 200 and js["choices"][0]["message"]["content"] == "",
              f"llama3 without tools: control tokens stay out of the text: {js}")
    finally:
        srv.stop()


def main():
    binary, libdir, fixtures = sys.argv[1:4]
    t0 = time.time()
    for model, tag in (("qwen3-BF16.gguf", "qwen3"), ("qwen35-F16.gguf", "qwen35")):
        srv = Server(binary, libdir, os.path.join(fixtures, "models", model))
        try:
            if tag == "qwen3":
                validation(srv)
                history(srv)
            run_seeds(srv, tag)
            if tag == "qwen35":
                none = Server(binary, libdir, os.path.join(fixtures, "models", model), ["--reasoning-format", "none"])
                try:
                    reasoning(srv, none)
                finally:
                    none.stop()
        finally:
            srv.stop()
        print(f"{tag}: done at {time.time() - t0:.1f} s")
    generic(binary, libdir, fixtures)
    print(f"generic: done at {time.time() - t0:.1f} s")
    llama3(binary, libdir, fixtures)
    print(f"llama3: done at {time.time() - t0:.1f} s")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all tool-call checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
