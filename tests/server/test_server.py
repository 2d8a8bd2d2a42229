#!/usr/bin/env python3
"""End-to-end tests of alice-llm-server over real HTTP (stdlib only).

Starts the real server binary on free loopback ports with the bundled
tiny-tolstoy model on the CPU backend and checks every route, status code,
error body, SSE framing byte by byte, stop strings, seeds, logprobs, grammar,
disconnect cancellation, queue limits, concurrency determinism, signals and
exit codes.

usage: test_server.py SERVER_BINARY BACKEND_LIB_DIR [MODEL]
Prints one line per check and a final "N passed, N failed"; exit 1 on failure.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

BIN = LIBDIR = MODEL = None  # set by configure()


def configure(argv):
    global BIN, LIBDIR, MODEL
    if len(argv) < 2:
        sys.exit("usage: test_server.py SERVER_BINARY BACKEND_LIB_DIR [MODEL]")
    BIN, LIBDIR = argv[0], argv[1]
    MODEL = argv[2] if len(argv) > 2 else None

passed = 0
failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"PASS {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")
    sys.stdout.flush()
    return cond


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, *extra, env=None, wait=True):
        self.port = free_port()
        args = [BIN, "--port", str(self.port), "--threads", "2"]
        if MODEL:
            args += ["--model", MODEL]
        args += list(extra)
        e = dict(os.environ)
        e["ALICE_BACKEND_PATH"] = LIBDIR
        e.pop("ALICE_API_KEY", None)
        if env:
            e.update(env)
        self.log = open(f"/tmp/alice-srv-test-{self.port}.log", "w+")
        self.proc = subprocess.Popen(args, env=e, stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=60):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.logtext()}")
            try:
                st, _, _ = self.req("GET", "/health")
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not become ready")

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def req(self, method, path, body=None, headers=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        try:
            js = json.loads(raw) if raw else None
        except ValueError:
            js = None
        return r.status, js, hdrs

    def post(self, path, body, **kw):
        return self.req("POST", path, body, **kw)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def is_error(js, status_param=None):
    if not isinstance(js, dict) or "error" not in js:
        return False
    e = js["error"]
    ok = all(k in e for k in ("message", "type", "param", "code")) and isinstance(e["message"], str)
    if status_param is not None:
        ok = ok and e["param"] == status_param
    return ok


def raw_stream(port, path, body, read_all=True, headers=None):
    """POST and return (status line + headers text, body bytes) without any
    client-side SSE/chunk parsing (chunked transfer decoded by hand)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    s.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n{extra}Connection: close\r\n\r\n".encode() + data
    )
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    if not read_all:
        return head.decode(), rest, s
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    s.close()
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while rest:
            line, _, rest = rest.partition(b"\r\n")
            n = int(line.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2 :]
        rest = out
    return head.decode(), rest, None


def parse_sse(body):
    """Strict framing: every event is exactly b'data: ' + payload + b'\\n\\n'."""
    events = []
    pos = 0
    while pos < len(body):
        if not body.startswith(b"data: ", pos):
            return None, f"event at byte {pos} does not start with 'data: ': {body[pos:pos+40]!r}"
        end = body.find(b"\n\n", pos)
        if end < 0:
            return None, f"event at byte {pos} is not terminated by a blank line"
        payload = body[pos + 6 : end]
        if b"\n" in payload:
            return None, "an event spans several lines"
        events.append(payload)
        pos = end + 2
    return events, ""


# tiny-tolstoy's end-of-generation tokens (<|endoftext|> 0, <|im_end|> 2):
# banning them makes a run last exactly max_tokens.
NO_EOG = {"0": -100, "2": -100}

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"


def chat_body(text, **kw):
    b = {"model": "tiny", "messages": [{"role": "user", "content": text}], "temperature": 0, "max_tokens": 16}
    b.update(kw)
    return b


def test_info(s):
    st, js, h = s.req("GET", "/health")
    check("health 200", st == 200 and js["status"] == "ok", js)
    for k in ("model", "architecture", "backend", "vocab_size", "chat_template", "slots_busy", "slots_total"):
        check(f"health has {k}", k in js, js)
    check("health values", js["architecture"] == "llama" and js["backend"] == "cpu" and js["vocab_size"] == 4096
          and js["chat_template"] == "gguf" and js["chat_format"] == "chatml" and js["slots_total"] == 4, js)
    st, js, h = s.req("GET", "/v1/models")
    ok = st == 200 and js["object"] == "list" and len(js["data"]) == 1
    check("models list", ok, js)
    if ok:
        m = js["data"][0]
        check("models entry", m["id"] == "tiny-tolstoy-Q8_0" and m["object"] == "model" and "meta" in m, m)
        check("models meta", m["meta"]["n_ctx"] == 512 and m["meta"]["backend"] == "cpu"
              and m["meta"]["n_vocab"] == 4096, m)
    st, js, h = s.req("GET", "/v1/models/tiny-tolstoy-Q8_0")
    check("models/{id}", st == 200 and js["id"] == "tiny-tolstoy-Q8_0" and "meta" in js, (st, js))
    st, js, h = s.req("GET", "/v1/models/gpt-4")
    check("models/{unknown} 404", st == 404 and is_error(js, "model") and js["error"]["code"] == "model_not_found",
          (st, js))
    st, js, h = s.req("HEAD", "/health")
    check("HEAD health 200", st == 200)


def test_routing_errors(s):
    st, js, h = s.req("GET", "/nope")
    check("404 unknown route", st == 404 and is_error(js), (st, js))
    st, js, h = s.req("GET", CHAT)
    check("405 wrong method", st == 405 and is_error(js) and "POST" in h.get("allow", ""), (st, js, h))
    st, js, h = s.req("DELETE", "/v1/models")
    check("405 on models", st == 405 and "GET" in h.get("allow", ""), (st, h))
    st, js, h = s.req("OPTIONS", CHAT, headers={"Origin": "http://x", "Access-Control-Request-Method": "POST"})
    check("OPTIONS 204, no CORS headers by default (--cors-origin)",
          st == 204 and "POST" in h.get("allow", "") and not any(k.startswith("access-control") for k in h), (st, h))
    st, js, h = s.req("GET", "/health?x=1")
    check("query string ignored", st == 200)


def test_validation(s):
    cases = [
        ("bad json", CHAT, b'{"messages": [', None),
        ("trailing garbage", CHAT, b'{"messages": []} x', None),
        ("not an object", CHAT, b'[1,2]', None),
        ("empty body", CHAT, b'', None),
        ("messages missing", CHAT, {"model": "x"}, "messages"),
        ("messages not array", CHAT, {"messages": "hi"}, "messages"),
        ("messages empty", CHAT, {"messages": []}, "messages"),
        ("bad role", CHAT, {"messages": [{"role": "wizard", "content": "x"}]}, "messages"),
        ("image part", CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages"),
        ("content number", CHAT, {"messages": [{"role": "user", "content": 5}]}, "messages"),
        ("temperature type", CHAT, chat_body("x", temperature="hot"), "temperature"),
        ("temperature range", CHAT, chat_body("x", temperature=3), "temperature"),
        ("top_p range", CHAT, chat_body("x", top_p=1.5), "top_p"),
        ("top_k negative", CHAT, chat_body("x", top_k=-1), "top_k"),
        ("min_p range", CHAT, chat_body("x", min_p=2), "min_p"),
        ("max_tokens zero", CHAT, chat_body("x", max_tokens=0), "max_tokens"),
        ("max_tokens float", CHAT, chat_body("x", max_tokens=1.5), "max_tokens"),
        ("max_completion_tokens type", CHAT, chat_body("x", max_completion_tokens="10"), "max_completion_tokens"),
        ("n zero", CHAT, chat_body("x", n=0), "n"),
        ("stream type", CHAT, chat_body("x", stream="yes"), "stream"),
        ("stop too many", CHAT, chat_body("x", stop=["a", "b", "c", "d", "e"]), "stop"),
        ("stop type", CHAT, chat_body("x", stop=5), "stop"),
        ("presence range", CHAT, chat_body("x", presence_penalty=3), "presence_penalty"),
        ("frequency type", CHAT, chat_body("x", frequency_penalty=[]), "frequency_penalty"),
        ("repeat_penalty zero", CHAT, chat_body("x", repeat_penalty=0), "repeat_penalty"),
        ("logit_bias key", CHAT, chat_body("x", logit_bias={"abc": 1}), "logit_bias"),
        ("logit_bias value", CHAT, chat_body("x", logit_bias={"5": 500}), "logit_bias"),
        ("logit_bias vocab", CHAT, chat_body("x", logit_bias={"999999": 1}), "logit_bias"),
        ("top_logprobs range", CHAT, chat_body("x", logprobs=True, top_logprobs=21), "top_logprobs"),
        ("top_logprobs without logprobs", CHAT, chat_body("x", top_logprobs=2), "top_logprobs"),
        ("seed type", CHAT, chat_body("x", seed="abc"), "seed"),
        ("stream_options without stream", CHAT, chat_body("x", stream_options={"include_usage": True}), "stream_options"),
        ("grammar invalid", CHAT, chat_body("x", grammar="root ::= (("), "grammar"),
        ("grammar type", CHAT, chat_body("x", grammar=5), "grammar"),
        ("prompt missing", COMP, {"max_tokens": 3}, "prompt"),
        ("prompt type", COMP, {"prompt": 5}, "prompt"),
        ("prompt bad entry", COMP, {"prompt": ["a", 5]}, "prompt"),
        ("prompt token out of vocab", COMP, {"prompt": [1, 2, 99999]}, "prompt"),
        ("completion logprobs range", COMP, {"prompt": "a", "logprobs": 50}, "logprobs"),
        ("model type", COMP, {"prompt": "a", "model": 5}, "model"),
    ]
    for name, path, body, param in cases:
        st, js, h = s.post(path, body)
        check(f"400 {name}", st == 400 and is_error(js, param) and js["error"]["type"] == "invalid_request_error",
              (st, js))
    st, js, h = s.post(COMP, {"prompt": ["a"] * 64, "n": 16, "max_tokens": 1})
    check("400 more sequences than slots + queue", st == 400 and is_error(js, "n"), (st, js))
    st, js, h = s.post(CHAT, chat_body("x", max_tokens=2, unknown_field={"a": 1}, model="gpt-4o"))
    check("unknown fields ignored, other model name accepted", st == 200, (st, js))
    long_prompt = "the " * 700
    st, js, h = s.post(COMP, {"prompt": long_prompt, "max_tokens": 5})
    msg = js["error"]["message"] if is_error(js) else ""
    check("400 prompt longer than context states both numbers",
          st == 400 and "512" in msg and any(ch.isdigit() for ch in msg.replace("512", "")), (st, js))
    st, js, h = s.post(COMP, {"prompt": "the " * 100, "max_tokens": 450})
    msg = js["error"]["message"] if is_error(js) else ""
    check("400 prompt + max_tokens beyond context", st == 400 and js["error"]["param"] == "max_tokens"
          and "450" in msg and "512" in msg, (st, js))
    big = json.dumps({"prompt": "a" * (1536 * 1024)})
    st, js, h = s.post(COMP, big)
    check("413 body too large (JSON error)", st == 413 and is_error(js), (st, js))


def test_chat(s):
    st, js, h = s.post(CHAT, chat_body("Who is Pierre?", max_tokens=12))
    ok = st == 200
    check("chat 200", ok, (st, js))
    if not ok:
        return
    check("chat shape", js["object"] == "chat.completion" and js["id"].startswith("chatcmpl-")
          and isinstance(js["created"], int) and js["model"] == "tiny-tolstoy-Q8_0", js)
    c = js["choices"][0]
    check("chat message", c["index"] == 0 and c["message"]["role"] == "assistant"
          and isinstance(c["message"]["content"], str) and len(c["message"]["content"]) > 0, c)
    check("chat finish length", c["finish_reason"] == "length", c)
    u = js["usage"]
    check("usage fields", all(k in u for k in ("prompt_tokens", "completion_tokens", "total_tokens",
                                                "tokens_per_second", "decode_ms")), u)
    check("usage numbers", u["completion_tokens"] == 12 and u["total_tokens"] == u["prompt_tokens"] + 12
          and u["prompt_tokens"] > 5, u)
    # content parts
    st, js2, h = s.post(CHAT, {"messages": [{"role": "user", "content": [{"type": "text", "text": "Who is "},
                                                                         {"type": "text", "text": "Pierre?"}]}],
                               "temperature": 0, "max_tokens": 12})
    check("content parts == string content", st == 200 and js2["choices"][0]["message"]["content"]
          == c["message"]["content"], (st, js2))
    # max_completion_tokens wins
    st, js3, h = s.post(CHAT, chat_body("Who is Pierre?", max_tokens=12, max_completion_tokens=3))
    check("max_completion_tokens", st == 200 and js3["usage"]["completion_tokens"] == 3, js3)
    # natural stop: a long enough budget ends with stop
    st, js4, h = s.post(CHAT, chat_body("Hello", max_tokens=400))
    check("chat natural end is stop", st == 200 and js4["choices"][0]["finish_reason"] in ("stop", "length"), js4)
    # n = 2 with a seed: independent choices with indexes
    st, js5, h = s.post(CHAT, chat_body("Tell me about the war.", n=2, temperature=1.0, seed=7, max_tokens=8))
    check("n=2 choices", st == 200 and [c["index"] for c in js5["choices"]] == [0, 1]
          and js5["usage"]["completion_tokens"] == 16, js5)


def test_completions(s):
    st, js, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 10, "temperature": 0})
    ok = st == 200
    check("completions 200", ok, (st, js))
    if not ok:
        return
    check("completions shape", js["object"] == "text_completion" and js["id"].startswith("cmpl-")
          and js["choices"][0]["index"] == 0 and isinstance(js["choices"][0]["text"], str), js)
    # greedy, this prompt ends with an end-of-generation token before 10 tokens
    check("natural end: finish_reason stop", js["choices"][0]["finish_reason"] == "stop"
          and js["usage"]["completion_tokens"] < 10, js)
    text = js["choices"][0]["text"]
    st, jl, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 10, "temperature": 0,
                              "logit_bias": NO_EOG})
    check("token limit: finish_reason length", st == 200 and jl["choices"][0]["finish_reason"] == "length"
          and jl["usage"]["completion_tokens"] == 10 and jl["choices"][0]["text"].startswith(text), jl)
    st, js2, h = s.post(COMP, {"prompt": ["Prince Andrew looked at", "Natasha said"], "max_tokens": 10,
                               "temperature": 0, "n": 2})
    ok = st == 200 and len(js2["choices"]) == 4
    check("prompt array x n: one choice per prompt per n", ok and [c["index"] for c in js2["choices"]] == [0, 1, 2, 3], js2)
    if ok:
        check("prompt array choice 0 == single prompt", js2["choices"][0]["text"] == text
              and js2["choices"][1]["text"] == text, js2)
    # token prompt
    st, tj, h = s.post("/tokenize", {"content": "Prince Andrew looked at"})
    st, js3, h = s.post(COMP, {"prompt": tj["tokens"], "max_tokens": 10, "temperature": 0})
    check("token-id prompt == text prompt", st == 200 and js3["choices"][0]["text"] == text, js3)
    st, js4, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 4, "temperature": 0, "echo": True})
    check("echo prepends the prompt", st == 200 and js4["choices"][0]["text"].startswith("Prince Andrew looked at"), js4)
    # ignore_eos (llama-server's extension): the same greedy run goes on past its end-of-generation token
    st, je, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 10, "temperature": 0,
                              "ignore_eos": True})
    check("ignore_eos: runs to max_tokens", st == 200 and je["choices"][0]["finish_reason"] == "length"
          and je["usage"]["completion_tokens"] == 10 and je["choices"][0]["text"].startswith(text), je)
    st, jc, h = s.post(CHAT, chat_body("Hello", max_tokens=6, temperature=0, ignore_eos=True))
    check("ignore_eos (chat): runs to max_tokens", st == 200 and jc["choices"][0]["finish_reason"] == "length"
          and jc["usage"]["completion_tokens"] == 6, jc)
    st, jb, h = s.post(COMP, {"prompt": "x", "ignore_eos": "yes"})
    check("ignore_eos must be a boolean", is_error(jb, "ignore_eos") and st == 400, (st, jb))
    return text


def test_tokenize(s):
    st, js, h = s.post("/tokenize", {"content": "Hello, Natasha!"})
    ok = st == 200 and isinstance(js["tokens"], list) and all(isinstance(t, int) for t in js["tokens"])
    check("tokenize", ok, js)
    if not ok:
        return
    st, js2, h = s.post("/detokenize", {"tokens": js["tokens"]})
    check("detokenize round trip", st == 200 and js2["content"] == "Hello, Natasha!", js2)
    st, js3, h = s.post("/tokenize", {"content": "<|im_start|>user", "add_special": True})
    check("tokenize special", st == 200 and js3["tokens"][0] == 1, js3)
    st, js4, h = s.post("/tokenize", {"content": 5})
    check("tokenize 400", st == 400 and is_error(js4, "content"), js4)
    st, js5, h = s.post("/detokenize", {"tokens": [1, -5]})
    check("detokenize 400", st == 400 and is_error(js5, "tokens"), js5)


def stream_events(s, path, body):
    head, raw, _ = raw_stream(s.port, path, body)
    events, err = parse_sse(raw)
    return head, raw, events, err


def test_stream(s):
    body = chat_body("Who is Pierre?", max_tokens=12, stream=True)
    head, raw, events, err = stream_events(s, CHAT, body)
    check("stream status 200", head.startswith("HTTP/1.1 200"), head)
    check("stream content-type", "content-type: text/event-stream" in head.lower(), head)
    check("SSE framing byte by byte", events is not None, err)
    if not events:
        return
    check("stream ends with [DONE]", events[-1] == b"[DONE]" and raw.endswith(b"data: [DONE]\n\n"), raw[-40:])
    chunks = [json.loads(e) for e in events[:-1]]
    ids = {c["id"] for c in chunks}
    created = {c["created"] for c in chunks}
    check("same id and created on every chunk", len(ids) == 1 and len(created) == 1, (ids, created))
    check("chunk object", all(c["object"] == "chat.completion.chunk" for c in chunks))
    check("first chunk carries the role", chunks[0]["choices"][0]["delta"].get("role") == "assistant", chunks[0])
    fin = chunks[-1]["choices"][0]
    check("final chunk has finish_reason", fin["finish_reason"] == "length" and fin["delta"] == {}, chunks[-1])
    check("middle chunks have no finish_reason", all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]))
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    st, js, h = s.post(CHAT, chat_body("Who is Pierre?", max_tokens=12))
    check("streamed text == non-streamed text", text == js["choices"][0]["message"]["content"], (text, js))
    # include_usage
    body = chat_body("Who is Pierre?", max_tokens=5, stream=True, stream_options={"include_usage": True})
    head, raw, events, err = stream_events(s, CHAT, body)
    ok = events is not None and len(events) >= 3
    check("include_usage stream framing", ok, err)
    if ok:
        last = json.loads(events[-2])
        check("usage chunk with choices []", last["choices"] == [] and last["usage"]["completion_tokens"] == 5, last)
        others = [json.loads(e) for e in events[:-2]]
        check("other chunks carry usage null", all("usage" in c and c["usage"] is None for c in others))
    # completions stream
    body = {"prompt": "Prince Andrew looked at", "max_tokens": 10, "temperature": 0, "stream": True,
            "logit_bias": NO_EOG}
    head, raw, events, err = stream_events(s, COMP, body)
    ok = events is not None and events[-1] == b"[DONE]"
    check("completions stream framing", ok, err)
    if ok:
        chunks = [json.loads(e) for e in events[:-1]]
        text = "".join(c["choices"][0]["text"] for c in chunks)
        st, js, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 10, "temperature": 0,
                                  "logit_bias": NO_EOG})
        check("completions streamed text == non-streamed", text == js["choices"][0]["text"], (text, js))
        check("completions final finish_reason", chunks[-1]["choices"][0]["finish_reason"] == "length", chunks[-1])
        check("completions chunk object", all(c["object"] == "text_completion" for c in chunks))
    # errors before streaming are plain JSON
    st, js, h = s.post(CHAT, chat_body("x", stream=True, temperature=9))
    check("stream request validation error is JSON 400", st == 400 and is_error(js, "temperature"), js)


def test_stop(s):
    base = {"prompt": "Prince Andrew looked at", "max_tokens": 24, "temperature": 0, "logit_bias": NO_EOG}
    st, js, h = s.post(COMP, base)
    full = js["choices"][0]["text"]
    # a stop string in the middle of the text, likely across token boundaries
    mid = len(full) // 2
    stop = full[mid:mid + 5]
    if not stop.strip():
        stop = full[mid - 3:mid + 2]
    st, js2, h = s.post(COMP, dict(base, stop=[stop]))
    out = js2["choices"][0]["text"]
    check("stop string cuts the output", out == full[:full.index(stop)], (stop, out, full))
    check("stop finish_reason", js2["choices"][0]["finish_reason"] == "stop", js2)
    head, raw, events, err = stream_events(s, COMP, dict(base, stop=stop, stream=True))
    chunks = [json.loads(e) for e in events[:-1]] if events else []
    text = "".join(c["choices"][0]["text"] for c in chunks)
    check("streamed stop: held-back text never leaks", text == out, (text, out))
    check("streamed stop finish_reason", chunks and chunks[-1]["choices"][0]["finish_reason"] == "stop")
    # a stop string that never occurs changes nothing
    st, js3, h = s.post(COMP, dict(base, stop=["\u00a7\u00a7never"]))
    check("absent stop string", js3["choices"][0]["text"] == full, js3)


def test_sampling(s):
    body = chat_body("Tell me about Moscow.", temperature=1.0, seed=1234, max_tokens=16)
    a = s.post(CHAT, body)[1]["choices"][0]["message"]["content"]
    b = s.post(CHAT, body)[1]["choices"][0]["message"]["content"]
    check("same seed, same output", a == b, (a, b))
    outs = {s.post(CHAT, dict(body, seed=k))[1]["choices"][0]["message"]["content"] for k in range(4)}
    check("different seeds vary", len(outs) > 1, outs)
    # logit_bias ban of the greedy first token changes the output
    st, js, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 1, "temperature": 0,
                              "logprobs": 1})
    first = js["choices"][0]["text"]
    tok = s.post("/tokenize", {"content": first})[1]["tokens"]
    st, js2, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 1, "temperature": 0,
                               "logit_bias": {str(tok[0]): -100}})
    check("logit_bias -100 bans a token", st == 200 and js2["choices"][0]["text"] != first, (first, js2))
    st, js3, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 8, "temperature": 0,
                               "frequency_penalty": 2.0, "presence_penalty": 2.0, "repeat_penalty": 1.3,
                               "top_k": 40, "top_p": 0.9, "min_p": 0.05})
    check("penalties and truncation accepted", st == 200, js3)


def test_logprobs(s):
    st, js, h = s.post(CHAT, chat_body("Who is Pierre?", max_tokens=4, logprobs=True, top_logprobs=3))
    ok = st == 200 and js["choices"][0]["logprobs"] is not None
    check("chat logprobs present", ok, js)
    if ok:
        content = js["choices"][0]["logprobs"]["content"]
        check("chat logprobs one entry per token", len(content) == 4, content)
        e = content[0]
        check("chat logprob entry shape", set(e) >= {"token", "logprob", "bytes", "top_logprobs"}
              and e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
              and all(set(t) >= {"token", "logprob", "bytes"} for t in e["top_logprobs"]), e)
        check("greedy token is the top alternative", abs(e["top_logprobs"][0]["logprob"] - e["logprob"]) < 1e-6, e)
        joined = "".join(c["token"] for c in content)
        check("logprob tokens spell the content", joined == js["choices"][0]["message"]["content"], (joined, js))
        check("bytes match token", bytes(e["bytes"]).decode("utf-8", "replace") == e["token"], e)
    st, js, h = s.post(COMP, {"prompt": "Prince Andrew looked at", "max_tokens": 4, "temperature": 0, "logprobs": 2,
                              "logit_bias": NO_EOG})
    ok = st == 200 and js["choices"][0]["logprobs"] is not None
    check("completions logprobs present", ok, js)
    if ok:
        lp = js["choices"][0]["logprobs"]
        check("legacy logprobs format", len(lp["tokens"]) == 4 and len(lp["token_logprobs"]) == 4
              and len(lp["top_logprobs"]) == 4 and len(lp["text_offset"]) == 4
              and isinstance(lp["top_logprobs"][0], dict) and len(lp["top_logprobs"][0]) <= 2, lp)
    head, raw, events, err = stream_events(s, CHAT, chat_body("Who is Pierre?", max_tokens=4, logprobs=True,
                                                             stream=True))
    chunks = [json.loads(e) for e in events[:-1]] if events else []
    n = sum(len(c["choices"][0]["logprobs"]["content"]) for c in chunks if c["choices"][0].get("logprobs"))
    check("streamed chat logprobs cover every token", n == 4, chunks)
    st, js, h = s.post(CHAT, chat_body("Who is Pierre?", max_tokens=2))
    check("logprobs null when not asked", js["choices"][0]["logprobs"] is None, js)


def test_grammar(s):
    st, js, h = s.post(CHAT, chat_body("Is Pierre rich?", grammar='root ::= "yes" | "no"', max_tokens=10))
    check("grammar constrains output", st == 200 and js["choices"][0]["message"]["content"] in ("yes", "no")
          and js["choices"][0]["finish_reason"] == "stop", js)
    # a grammar whose only tokens are all banned: the client's mistake, a 400
    bias = {}
    for d in "0123456789":
        t = s.post("/tokenize", {"content": d})[1]["tokens"]
        bias[str(t[0])] = -100
    st, js, h = s.post(COMP, {"prompt": "hi", "max_tokens": 3, "grammar": "root ::= [0-9]", "logit_bias": bias})
    check("nothing samplable under grammar + logit_bias is a 400", st == 400 and is_error(js), (st, js))
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                               "rich": {"type": "boolean"}},
              "required": ["name", "age", "rich"]}
    st, js, h = s.post(CHAT, chat_body("Describe Pierre as JSON.", max_tokens=150,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "person", "schema": schema}}))
    obj = None
    if st == 200:
        try:
            obj = json.loads(js["choices"][0]["message"]["content"])
        except ValueError:
            pass
    check("response_format json_schema: valid JSON of the schema",
          isinstance(obj, dict) and set(obj) == {"name", "age", "rich"} and isinstance(obj["name"], str)
          and len(obj["name"]) <= 12 and isinstance(obj["age"], int) and 0 <= obj["age"] <= 120
          and isinstance(obj["rich"], bool) and js["choices"][0]["finish_reason"] == "stop", (st, js))
    st, js, h = s.post(CHAT, chat_body("JSON please", max_tokens=5, response_format={"type": "json_object"}))
    check("response_format json_object starts an object", st == 200
          and js["choices"][0]["message"]["content"].startswith("{"), (st, js))
    st, js, h = s.post(CHAT, chat_body("x", response_format={"type": "json_schema", "json_schema": {
        "schema": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}}}))
    check("unsupported schema is a 400 on response_format", st == 400 and is_error(js, "response_format"), js)
    st, js, h = s.post(CHAT, chat_body("x", response_format={"type": "xml"}))
    check("unknown response_format type is a 400", st == 400 and is_error(js, "response_format"), js)
    st, js, h = s.post(CHAT, chat_body("x", response_format={"type": "json_object"}, grammar='root ::= "a"'))
    check("grammar + JSON response_format is a 400", st == 400 and is_error(js, "response_format"), js)
    st, js, h = s.post(CHAT, chat_body("Hi", max_tokens=3, response_format={"type": "text"}))
    check("response_format text is plain", st == 200, js)
    g = 'root ::= [a-z]{1,6} " " [0-9] [0-9]'
    st, js, h = s.post(COMP, {"prompt": "Count:", "grammar": g, "max_tokens": 40, "temperature": 0.8, "seed": 3})
    txt = js["choices"][0]["text"] if st == 200 else ""
    import re
    check("grammar regex shape", st == 200 and re.fullmatch(r"[a-z]+ [0-9][0-9]", txt) is not None, js)


def gen_alone(s, prompt, n_tokens):
    st, js, h = s.post(COMP, {"prompt": prompt, "max_tokens": n_tokens, "temperature": 0, "logit_bias": NO_EOG})
    return js["choices"][0]["text"]


def test_concurrency(s):
    prompts = ["Prince Andrew looked at", "Natasha", "The old count said", "Pierre went to the window and",
               "In the morning the", "Moscow was burning"]
    alone = [gen_alone(s, p, 20) for p in prompts]
    results = [None] * len(prompts)

    def worker(i):
        results[i] = gen_alone(s, prompts[i], 20)

    # 6 requests on 4 slots: batching, prefill mixed with decode, and queueing
    for rnd in range(2):
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        bad = [i for i in range(len(prompts)) if results[i] != alone[i]]
        check(f"concurrent greedy == alone (round {rnd})", not bad,
              [(prompts[i], alone[i], results[i]) for i in bad])


def slots_busy(s):
    return s.req("GET", "/health")[1]["slots_busy"]


def wait_idle(s, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if slots_busy(s) == 0:
            return time.time() - t0
        time.sleep(0.02)
    return None


def cancelled_lines(s):
    return [l for l in s.logtext().splitlines() if " 499 prompt=" in l]


def test_disconnect(s):
    # streaming: read the first content chunk, then drop the connection
    body = chat_body("Tell me a long story.", max_tokens=480, stream=True, logit_bias=NO_EOG)
    head, rest, sock = raw_stream(s.port, CHAT, body, read_all=False)
    while b'"content":"' not in rest.replace(b'"content":""', b""):
        rest += sock.recv(4096)
    busy = slots_busy(s)
    sock.close()
    t = wait_idle(s, 5)
    check("stream disconnect frees the slot", busy == 1 and t is not None and t < 2, (busy, t))
    time.sleep(0.1)
    lines = cancelled_lines(s)
    n = int(lines[-1].split("completion=")[1].split()[0]) if lines else -1
    check("stream disconnect cancels generation early (logged 499)", 0 <= n < 400, lines)
    # non-streaming: send, then close without reading
    data = json.dumps(chat_body("Tell me a long story.", max_tokens=480, logit_bias=NO_EOG)).encode()
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    busy = 0
    for _ in range(250):  # wait until the engine has it in a slot
        busy = slots_busy(s)
        if busy:
            break
        time.sleep(0.02)
    sock.close()
    t = wait_idle(s, 5)
    check("non-stream disconnect frees the slot", busy == 1 and t is not None and t < 2, (busy, t))
    time.sleep(0.1)
    lines2 = cancelled_lines(s)
    n = int(lines2[-1].split("completion=")[1].split()[0]) if len(lines2) > len(lines) else -1
    check("non-stream disconnect cancels generation early (logged 499)", 0 <= n < 400, lines2)
    st, js, h = s.post(CHAT, chat_body("Who is Pierre?", max_tokens=3))
    check("server healthy after disconnects", st == 200, js)


def test_auth():
    s = Server("--api-key", "sekret")
    try:
        st, js, h = s.req("GET", "/v1/models")
        check("401 missing key", st == 401 and is_error(js) and js["error"]["type"] == "authentication_error", js)
        st, js, h = s.req("GET", "/v1/models", headers={"Authorization": "Bearer nope"})
        check("401 wrong key", st == 401 and is_error(js), js)
        st, js, h = s.req("GET", "/v1/models", headers={"Authorization": "Bearer sekret"})
        check("200 right key", st == 200, js)
        st, js, h = s.post(CHAT, chat_body("hi", max_tokens=2), headers={"Authorization": "Bearer sekret"})
        check("chat with key", st == 200, js)
        st, js, h = s.req("GET", "/health")
        check("/health needs no key", st == 200, js)
    finally:
        s.stop()
    s = Server(env={"ALICE_API_KEY": "envkey"})
    try:
        st, js, h = s.req("GET", "/v1/models")
        check("ALICE_API_KEY env enables auth", st == 401, js)
        st, js, h = s.req("GET", "/v1/models", headers={"Authorization": "Bearer envkey"})
        check("ALICE_API_KEY accepted", st == 200, js)
    finally:
        s.stop()


def test_queue_full():
    # the slot must still be busy when the third request comes: 4000 tokens
    # (seconds; 480 took ~0.15 s once decode got faster) in a 4096-cell context
    s = Server("--parallel", "1", "--queue", "1", "--max-body", "2k", "--ctx-size", "4096")
    try:
        socks = []
        for i in range(2):
            data = json.dumps(chat_body("Tell me a long story.", max_tokens=4000, stream=True,
                                        logit_bias=NO_EOG)).encode()
            sock = socket.create_connection(("127.0.0.1", s.port))
            sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
            socks.append(sock)
            time.sleep(0.2)
        st, js, h = s.post(CHAT, chat_body("hi", max_tokens=2))
        check("503 when the queue is full", st == 503 and is_error(js) and "retry-after" in h, (st, js, h))
        for sock in socks:
            sock.close()
        t = wait_idle(s, 5)
        check("queue drains after disconnects", t is not None, t)
        st, js, h = s.post(CHAT, chat_body("hi", max_tokens=2))
        check("serving again after queue drained", st == 200, js)
        st, js, h = s.post(COMP, {"prompt": "x" * 3000})
        check("--max-body honoured (413)", st == 413 and is_error(js), (st, js))
    finally:
        s.stop()


def test_process():
    r = subprocess.run([BIN, "--bogus"], capture_output=True, text=True)
    check("bad flag exits 2", r.returncode == 2 and "bogus" in r.stderr, r)
    r = subprocess.run([BIN, "--port", "notaport"], capture_output=True, text=True)
    check("bad value exits 2", r.returncode == 2 and "port" in r.stderr, r)
    r = subprocess.run([BIN, "--chat-template", "nonsense"], capture_output=True, text=True)
    check("bad chat template exits 2", r.returncode == 2, r)
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    flags = ["--model", "--backend", "--hybrid", "--host", "--port", "--ctx-size", "--parallel", "--threads",
             "--api-key", "--max-body", "--queue", "--chat-template", "--backend-dir", "--log-format",
             "--help", "--version"]
    check("--help lists every flag", r.returncode == 0 and all(f in r.stdout for f in flags), r.stdout)
    r = subprocess.run([BIN, "--version"], capture_output=True, text=True)
    check("--version", r.returncode == 0 and "alice-llm-server" in r.stdout, r)
    # While the model loads the socket is already open: 503 + Retry-After.
    # A FIFO as the model file holds the loader in open() until we write.
    fifo = f"/tmp/alice-srv-test-fifo-{os.getpid()}.gguf"
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    port = free_port()
    e = dict(os.environ, ALICE_BACKEND_PATH=LIBDIR)
    p = subprocess.Popen([BIN, "--port", str(port), "--model", fifo], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=e)
    try:
        st = js = h = None
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                r = c.getresponse()
                st, js, h = r.status, json.loads(r.read()), {k.lower(): v for k, v in r.getheaders()}
                c.close()
                break
            except OSError:
                time.sleep(0.05)
        check("503 while loading, with Retry-After and an OpenAI error body",
              st == 503 and is_error(js) and js["error"]["code"] == "model_loading" and "retry-after" in h,
              (st, js, h))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("POST", CHAT, body=json.dumps(chat_body("x")), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        check("503 on /v1 while loading", r.status == 503, r.status)
        c.close()
        try:  # not a mappable GGUF: the load fails (maybe before we write)
            with open(fifo, "wb") as f:
                f.write(b"GGUF" + b"\0" * 60)
        except BrokenPipeError:
            pass
        out, _ = p.communicate(timeout=30)
        check("load failure after the socket opened exits 1 naming the file", p.returncode == 1 and fifo in out,
              (p.returncode, out))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.unlink(fifo)
    # SIGTERM while the model is still loading: exit 0 without waiting for it
    os.mkfifo(fifo)
    p = subprocess.Popen([BIN, "--port", str(free_port()), "--model", fifo], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=e)
    try:
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=10)
        check("SIGTERM while loading exits 0", rc == 0, rc)
    except subprocess.TimeoutExpired:
        check("SIGTERM while loading exits 0", False, "hung")
        p.kill()
        p.wait()
    finally:
        os.unlink(fifo)
    # model load failure: the socket opens first, then the process exits 1 naming the file
    port = free_port()
    e = dict(os.environ, ALICE_BACKEND_PATH=LIBDIR)
    r = subprocess.run([BIN, "--port", str(port), "--model", "/nonexistent/m.gguf"], capture_output=True,
                       text=True, env=e, timeout=30)
    check("missing model exits 1 naming the file", r.returncode == 1 and "/nonexistent/m.gguf" in r.stderr, r)
    # SIGTERM finishes in-flight work and exits 0
    s = Server("--log-format", "json")
    result = {}

    def inflight():
        result["r"] = s.post(CHAT, chat_body("Who is Pierre?", max_tokens=20))

    t = threading.Thread(target=inflight)
    t.start()
    time.sleep(0.3)
    rc = s.stop(signal.SIGTERM)
    t.join()
    st = result.get("r", (0,))[0]
    check("SIGTERM: in-flight request finishes", st == 200, result)
    check("SIGTERM exits 0", rc == 0, rc)
    lines = [l for l in open(s.log.name).read().splitlines() if l.strip()]
    try:
        objs = [json.loads(l) for l in lines]
        ok = any(o.get("event") == "request" and o.get("path") == CHAT and o.get("status") == 200 for o in objs)
    except ValueError:
        ok = False
    check("--log-format json: every line is JSON, request line has fields", ok, lines[-5:])
    s = Server()
    rc = s.stop(signal.SIGINT)
    check("SIGINT exits 0", rc == 0, rc)


def main():
    configure(sys.argv[1:])
    s = Server()
    try:
        for t in (test_info, test_routing_errors, test_validation, test_chat, test_completions, test_tokenize,
                  test_stream, test_stop, test_sampling, test_logprobs, test_grammar, test_concurrency,
                  test_disconnect):
            try:
                t(s)
            except Exception as ex:  # a crash in one group is a failure, not an abort
                check(f"{t.__name__} raised", False, repr(ex))
        log = s.logtext()
        check("one log line per request with id/method/path/status/tokens",
              "POST /v1/chat/completions 200 prompt=" in log and "completion=" in log and "req " in log)
    finally:
        rc = s.stop()
        check("main server exits 0 on SIGTERM", rc == 0, rc)
    for t in (test_auth, test_queue_full, test_process):
        try:
            t()
        except Exception as ex:
            check(f"{t.__name__} raised", False, repr(ex))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
