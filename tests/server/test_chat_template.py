#!/usr/bin/env python3
"""Chat templates in alice-llm-server, over real HTTP (stdlib only).

  - the model's own tokenizer.chat_template is rendered (Jinja) by default:
    for every fixture model with a chat reference, POST /apply-template of
    the reference messages tokenizes to exactly llama.cpp's chat prompt ids
    (its `chat_jinja` prompt where the Jinja text differs from llama.cpp's
    built-in formatter, else `chat`), one BOS at most, and a chat request's
    usage.prompt_tokens is that many; /health and /v1/models say "gguf";
  - chat_template_kwargs reach the template (a test template that prints a
    kwarg; Qwen3's enable_thinking); bad kwargs are a 400;
  - a template's raise_exception is a 400 with its message (a test template
    that wants alternating roles; Gemma 2's "System role not supported");
  - a trailing assistant message is continued (prefill): the text ends with
    its content, the template's end-of-turn cut; an empty one is just the
    generation prompt;
  - a GGUF template that does not compile: a warning, the built-in family;
  - --chat-template NAME forces a built-in format (no kwargs: 400), and
    --chat-template-file with a broken file stops the server at startup
    naming the file and the line.

usage: test_chat_template.py SERVER_BINARY BACKEND_LIB_DIR FIXTURES_DIR DATA_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402

check = ts.check
CHAT = "/v1/chat/completions"
APPLY = "/apply-template"
FIXTURE_MODELS = ["llama3-bpe-F16", "qwen3-BF16", "qwen35-F16", "gemma2-F32", "llama2-spm-F16",
                  "qwen2-Q4_K_M", "llama-spm-Q8_0"]


def apply(s, messages, **kw):
    st, js, _ = s.post(APPLY, dict(messages=messages, **kw))
    return st, js


def tokenize(s, text, add_special=True):
    st, js, _ = s.post("/tokenize", {"content": text, "add_special": add_special, "parse_special": True})
    return js["tokens"] if st == 200 else None


def bos_text(s):
    """The BOS token's text when the tokenizer adds BOS, else None."""
    with_bos, without = tokenize(s, "x"), tokenize(s, "x", add_special=False)
    if len(with_bos) == len(without):
        return None
    st, js, _ = s.post("/detokenize", {"tokens": with_bos[:1]})
    return js["content"]


def test_fixture(fixtures, name):
    path = os.path.join(fixtures, "models", name + ".gguf")
    if not os.path.exists(path):
        print(f"skip {name}: not in {fixtures}")
        return
    with open(os.path.join(fixtures, "refs", name + ".json")) as f:
        ref = json.load(f)
    chat = next(p for p in ref["prompts"] if p["id"] == "chat")
    want = next((p for p in ref["prompts"] if p["id"] == "chat_jinja"), chat)
    s = ts.Server("--model", path, "--parallel", "1")
    try:
        st, h, _ = s.req("GET", "/health")
        check(f"[{name}] /health chat_template gguf", st == 200 and h["chat_template"] == "gguf", h)
        st, js, _ = s.req("GET", "/v1/models")
        check(f"[{name}] /v1/models meta chat_template gguf", js["data"][0]["meta"]["chat_template"] == "gguf", js)
        st, js = apply(s, chat["messages"])
        ok = check(f"[{name}] apply-template 200", st == 200, js)
        if ok:
            bos = bos_text(s)
            check(f"[{name}] no leading BOS text left when the tokenizer adds BOS",
                  bos is None or not js["prompt"].startswith(bos), (bos, js["prompt"][:40]))
            toks = tokenize(s, js["prompt"])
            check(f"[{name}] Jinja prompt tokens == llama.cpp's {want['id']} ids", toks == want["tokens"],
                  (js["prompt"], toks, want["tokens"]))
        st, js, _ = s.post(CHAT, {"messages": chat["messages"], "max_tokens": 1, "temperature": 0})
        check(f"[{name}] chat usage.prompt_tokens == {want['id']} n_tokens",
              st == 200 and js["usage"]["prompt_tokens"] == want["n_tokens"], (st, js))
        # a trailing assistant message is continued
        msgs = [m for m in chat["messages"] if m["role"] != "system"] + \
            [{"role": "assistant", "content": "Paperclips hold"}]
        st, js = apply(s, msgs)
        check(f"[{name}] prefill: text ends with the assistant's content", st == 200 and
              js["prompt"].endswith("Paperclips hold"), (st, js))
        st, js, _ = s.post(CHAT, {"messages": msgs, "max_tokens": 2, "temperature": 0})
        check(f"[{name}] prefill: chat 200", st == 200, (st, js))
        if name == "qwen3-BF16":
            st, js = apply(s, chat["messages"], chat_template_kwargs={"enable_thinking": False})
            check(f"[{name}] chat_template_kwargs enable_thinking false: empty think block",
                  st == 200 and js["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), (st, js))
        if name == "gemma2-F32":
            st, js = apply(s, [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}])
            check(f"[{name}] the template's raise_exception: 400 with its message",
                  st == 400 and ts.is_error(js, "messages") and "System role not supported" in js["error"]["message"],
                  (st, js))
    finally:
        s.stop()


def test_file(data):
    s = ts.Server("--chat-template-file", os.path.join(data, "templates", "kwargs.jinja"))
    try:
        st, h, _ = s.req("GET", "/health")
        check("file: /health chat_template file", h["chat_template"] == "file", h)
        bos = bos_text(s) or ""
        msgs = [{"role": "user", "content": "Hi"}]
        st, js = apply(s, msgs)
        # the template starts with {{ bos_token }}: removed when the tokenizer
        # adds BOS itself, else kept (one special token)
        lead = js["prompt"][:js["prompt"].find("<user>")] if st == 200 else None
        check("file: the template's bos_token: removed if the tokenizer adds BOS, else one token",
              lead == "" if bos else lead is not None and len(tokenize(s, lead, add_special=False)) == 1, (bos, js))
        check("file: rendered, no kwarg", st == 200 and js["prompt"] == lead + "<user>Hi</user>\n<assistant>", (st, js))
        st, js = apply(s, msgs, chat_template_kwargs={"greeting": "hello"})
        check("file: chat_template_kwargs reach the template",
              st == 200 and js["prompt"] == lead + "[greeting=hello]<user>Hi</user>\n<assistant>", (st, js))
        st, jc, _ = s.post(CHAT, {"messages": msgs, "max_tokens": 1, "chat_template_kwargs": {"greeting": "hello"}})
        toks = tokenize(s, bos + js["prompt"], add_special=False)
        check("file: chat prompt has exactly one BOS (the template's bos_token, not a second)",
              st == 200 and jc["usage"]["prompt_tokens"] == len(toks), (jc, toks))
        # list-of-parts content is joined for a template that reads strings
        st, js = apply(s, [{"role": "user", "content": [{"type": "text", "text": "H"}, {"type": "text", "text": "i"}]}])
        check("file: text parts as one string", st == 200 and js["prompt"] == lead + "<user>Hi</user>\n<assistant>", (st, js))
        # raise_exception -> 400 with the template's message
        st, js = apply(s, [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        check("file: raise_exception is a 400 with the template's message",
              st == 400 and ts.is_error(js, "messages") and "roles must alternate" in js["error"]["message"], (st, js))
        st, js, _ = s.post(CHAT, {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})
        check("file: raise_exception on /v1/chat/completions too", st == 400 and ts.is_error(js, "messages"), (st, js))
        # prefill: the assistant's text continued, the end-of-turn cut
        pre = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Once upon"}]
        st, js = apply(s, pre)
        check("file: prefill continues the assistant's text",
              st == 200 and js["prompt"] == lead + "<user>Hi</user>\n<assistant>Once upon", (st, js))
        pre[1]["content"] = "Once upon "
        st, js = apply(s, pre)
        check("file: prefill keeps trailing space the template kept",
              st == 200 and js["prompt"] == lead + "<user>Hi</user>\n<assistant>Once upon ", (st, js))
        pre[1]["content"] = "  "
        st, js = apply(s, pre)
        check("file: an empty assistant message is just the generation prompt",
              st == 200 and js["prompt"] == lead + "<user>Hi</user>\n<assistant>", (st, js))
        pre[1]["content"] = "Once upon"
        st, js, _ = s.post(CHAT, {"messages": pre, "max_tokens": 3})
        check("file: prefill chat 200", st == 200 and js["choices"][0]["message"]["role"] == "assistant", (st, js))
        # bad chat_template_kwargs
        for label, kw, ep in (("not an object", [1], CHAT), ("reserved key", {"messages": []}, CHAT),
                              ("reserved add_generation_prompt", {"add_generation_prompt": False}, APPLY)):
            st, js, _ = s.post(ep, {"messages": msgs, "chat_template_kwargs": kw})
            check(f"file: chat_template_kwargs {label}: 400", st == 400 and ts.is_error(js, "chat_template_kwargs"),
                  (st, js))
        st, js, _ = s.post("/v1/completions", {"prompt": "x", "chat_template_kwargs": {"a": 1}})
        check("file: chat_template_kwargs on /v1/completions: 400",
              st == 400 and ts.is_error(js, "chat_template_kwargs"), (st, js))
    finally:
        s.stop()


def test_builtin_and_default():
    s = ts.Server("--chat-template", "chatml")
    try:
        st, h, _ = s.req("GET", "/health")
        check("builtin: /health chat_template chatml", h["chat_template"] == "chatml", h)
        msgs = [{"role": "user", "content": "Hi"}]
        st, builtin = apply(s, msgs)
        check("builtin: rendered", st == 200 and builtin["prompt"] == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
              (st, builtin))
        st, js = apply(s, msgs, chat_template_kwargs={"enable_thinking": False})
        check("builtin: chat_template_kwargs cannot be honoured: 400",
              st == 400 and ts.is_error(js, "chat_template_kwargs"), (st, js))
        st, js = apply(s, msgs, chat_template_kwargs={})
        check("builtin: empty chat_template_kwargs is fine", st == 200, (st, js))
        st, js = apply(s, msgs + [{"role": "assistant", "content": "Once"}])
        check("builtin: prefill", st == 200 and js["prompt"] == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce",
              (st, js))
    finally:
        s.stop()
    s = ts.Server()
    try:
        st, h, _ = s.req("GET", "/health")
        check("default model: its GGUF template", h["chat_template"] == "gguf" and h["chat_format"] == "chatml", h)
        st, js = apply(s, [{"role": "user", "content": "Hi"}])
        check("default model: GGUF ChatML render == built-in chatml", st == 200 and js == builtin, (js, builtin))
    finally:
        s.stop()


def test_gguf_fallback():
    """A GGUF whose template does not compile: a warning naming the file and
    the error, then the built-in family (here ChatML) renders."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "tiny-tolstoy-Q8_0.gguf")
    if not os.path.exists(src):
        print("skip gguf fallback: no bundled model")
        return
    with open(src, "rb") as f:
        b = bytearray(f.read())
    i = b.find(b"{% endfor %}{% if add_generation_prompt %}")
    if not check("fallback: the bundled model's template found", i > 0):
        return
    b[i:i + 12] = b"{% endfxr %}"  # same length: the GGUF stays valid
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "broken-template.gguf")
        with open(path, "wb") as f:
            f.write(b)
        s = ts.Server("--model", path)
        try:
            st, h, _ = s.req("GET", "/health")
            check("fallback: built-in chatml", h["chat_template"] == "chatml", h)
            log = s.logtext()
            check("fallback: a warning naming the file and the error",
                  "warn" in log and path in log and "endfxr" in log and "built-in 'chatml'" in log, log)
            st, js = apply(s, [{"role": "user", "content": "Hi"}])
            check("fallback: renders", st == 200 and js["prompt"] == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
                  (st, js))
        finally:
            s.stop()


def run_bad(*args):
    env = dict(os.environ, ALICE_BACKEND_PATH=ts.LIBDIR)
    p = subprocess.run([ts.BIN, "--port", str(ts.free_port()), *args], env=env, capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stderr


def test_startup(data):
    broken = os.path.join(data, "templates", "broken.jinja")
    rc, err = run_bad("--chat-template-file", broken)
    check("broken --chat-template-file: startup error naming the file and the line",
          rc == 1 and broken in err and "line 1" in err, (rc, err))
    rc, err = run_bad("--chat-template-file", os.path.join(data, "templates", "missing.jinja"))
    check("missing --chat-template-file: startup error", rc == 1 and "missing.jinja" in err, (rc, err))
    rc, err = run_bad("--chat-template", "chatml", "--chat-template-file", broken)
    check("--chat-template with --chat-template-file: bad command line", rc == 2 and "combined" in err, (rc, err))


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ts.configure(sys.argv[1:3])
    fixtures, data = sys.argv[3], sys.argv[4]
    for t in (lambda: test_startup(data), lambda: test_file(data), test_builtin_and_default,
              test_gguf_fallback):
        try:
            t()
        except Exception as ex:
            check("test group raised", False, repr(ex))
    if os.path.isdir(os.path.join(fixtures, "models")):
        for name in FIXTURE_MODELS:
            try:
                test_fixture(fixtures, name)
            except Exception as ex:
                check(f"[{name}] raised", False, repr(ex))
    else:
        print(f"fixtures not found in {fixtures}: fixture checks skipped")
    print(f"{ts.passed} passed, {ts.failed} failed")
    sys.exit(1 if ts.failed else 0)


if __name__ == "__main__":
    main()
