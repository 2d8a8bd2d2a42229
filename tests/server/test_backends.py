#!/usr/bin/env python3
"""alice-llm-server on one backend (cpu, cuda, vulkan) against llama.cpp's
reference outputs of the fixture models, over real HTTP (stdlib only).

For each fixture model, `alice-llm-server --backend B --model M --parallel 4`:
  - /health reports backend B; a bad request gets a 400 OpenAI error body;
  - every reference prompt's text tokenizes (/tokenize) to the reference ids;
  - every text prompt through POST /v1/completions (temperature 0,
    max_tokens 24) continues as llama.cpp's greedy continuation; the chat
    prompt's messages through /v1/chat/completions likewise, and its SSE
    stream gives the same text (one completions prompt is streamed too);
  - 4 different prompts sent at once each give the text they give alone
    (prefill chunks and decode tokens of other requests in the same steps);
  - on a fresh `--parallel 1` server (one slot, so every request lands in
    the previous one's slot, prefix cache on): a request sent after a
    different one gives exactly the text it gave alone (issue 9: on qwen35
    this is the recurrent-state isolation check), in both orders; then the
    first 12 tokens of a prompt whose continuation matched llama.cpp's fully,
    and a follow-up whose prompt is that prompt + the reference's first 12
    generated ids: it must reuse the slot's whole cached sequence (KV, or the
    recurrent state on qwen35) and continue as llama.cpp's steps 12-23.
    (Re-sending the same prompt, which reuses all but its last token, is not
    compared: prefilling one token instead of the whole prompt may flip a
    near-tie, README "Known limits"; seen on Vulkan with llama-spm-Q8_0.)

Which continuations must match (the rule of tests/support/parity_run.c): every
prompt is compared; the greedy continuation must be identical for all 24 steps
except that it may part at a step where the reference's own top-1/top-2 logit
margin is below the parity bound of the model's storage type (F32 0.2, F16
0.4, BF16 1.0, quantized 2.5: rounding may legitimately pick the other token
there; the comparison stops at that step). The server returns text, not ids,
so the match is made on the token pieces' bytes: the number of reference
tokens whose concatenated pieces (token_pieces_hex) the server's text starts
with is the step where it parted. A reference continuation that reaches an
end-of-generation token is compared up to it (the server stops there).

Backends that cannot run here (no device, plugin not built) print
"skipped: <the probe's reason>" and exit 77 (ctest SKIP_RETURN_CODE).

usage: test_backends.py [--backend cpu|cuda|vulkan] [--server BIN] [--lib DIR]
                        [--fixtures DIR] [--models M1,M2,...] [--threads N]
Defaults: $ALICE_TEST_BACKEND (else cpu), $ALICE_BUILD_DIR/bin/alice-llm-server,
$ALICE_BACKEND_PATH (else $ALICE_BUILD_DIR/lib), $ALICE_FIXTURES_DIR; models:
the representative set below, those present in FIXTURES/models (the fixtures
directory itself must exist; models named with --models must exist).
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (Server, check, raw_stream, parse_sse)

SKIP = 77
CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
N_GEN = 24
DEFAULT_MODELS = ["llama2-spm-F16", "llama-spm-Q8_0", "llama-spm-Q4_K_M", "llama3-bpe-F16", "qwen2-Q4_K_M",
                  "qwen3-BF16", "gemma2-F32", "qwen35-F16"]
# tests/core/test_parity.c's bounds (max top-10 logit error) per storage type
BOUNDS = [("-F32", 0.2), ("-F16", 0.4), ("-BF16", 1.0), ("-Q8_0", 2.5), ("-Q5_1", 2.5), ("-Q5_0", 2.5),
          ("-Q4_K_M", 2.5), ("-Q4_1", 2.5), ("-Q4_0", 2.5), ("-IQ4_XS", 2.5), ("-Q3_K_M", 2.5)]
check = ts.check


class Skip(Exception):
    pass


def bound_for(model):
    for suf, b in BOUNDS:
        if model.endswith(suf):
            return b
    raise SystemExit(f"{model}: no parity bound stated for its type")


def start(args, model, *extra):
    """A server on `model`; Skip when the backend itself cannot run here."""
    # --reasoning-format none: the chat text is compared whole with llama.cpp's
    # continuation, so a <think> block must stay in content
    s = ts.Server("--backend", args.backend, "--model", model, "--reasoning-format", "none", *extra, wait=False)
    try:
        s.wait_ready(timeout=args.load_timeout)
    except RuntimeError as e:
        log = s.logtext()
        s.stop()
        b = args.backend
        for line in log.splitlines():
            if f"backend '{b}' not found" in line or (f"backend '{b}' (" in line and "cannot run here" in line):
                raise Skip(line.split(": ", 1)[-1] if "cannot load model" in line else line)
        raise RuntimeError(f"{os.path.basename(model)} on {b}: {e}")
    return s


def ref_pieces(p):
    return [bytes.fromhex(h) for h in p["generation"]["token_pieces_hex"]]


def utf8_prefix(b):
    """b as the server has sent it so far: invalid bytes as U+FFFD, a trailing
    unfinished character held back (it waits for the next token)."""
    for k in range(1, min(3, len(b)) + 1):
        c = b[-k]
        if c & 0xC0 == 0x80:
            continue  # continuation byte: look further back for the lead
        need = 2 if c & 0xE0 == 0xC0 else 3 if c & 0xF0 == 0xE0 else 4 if c & 0xF8 == 0xF0 else 1
        if need > k:
            b = b[:-k]
        break
    return b.decode("utf-8", errors="replace")


def ref_agreement(p, text, start=0):
    """(steps of the reference continuation from `start` that text follows,
    steps compared, text of the reference, margins from start)."""
    g = p["generation"]
    pieces = ref_pieces(p)[start:]
    n = (N_GEN if g["first_eog_step"] is None else g["first_eog_step"]) - start
    margins = [s["top"][0][1] - s["top"][1][1] for s in g["steps"][start:]]
    full = b"".join(pieces[:n]).decode("utf-8", errors="replace")
    if text == full:
        return n, n, full, margins
    j = 0
    while j < n and text.startswith(utf8_prefix(b"".join(pieces[: j + 1]))):
        j += 1
    return j, n, full, margins


def compare_ref(label, p, text, finish, bound, start=0):
    """The rule in the module docstring, for reference steps start..; the
    step where the text parted (relative to start) is returned."""
    j, n, full, margins = ref_agreement(p, text, start)
    what = "greedy continuation == llama.cpp's" + (f" from step {start}" if start else "")
    if text == full:
        ok = finish == ("length" if n + start == N_GEN else "stop")
        check(f"{label}: {what}, all {n} steps", ok, (finish, text))
        return n
    if j >= n:  # our text is the reference's plus more: cannot be (max_tokens / eog)
        check(f"{label}: {what}", False, (text, full))
        return j
    check(f"{label}: {what} for {j} steps, then parts where the reference's margin is {margins[j]:.3f} "
          f"(near-tie if < {bound})", margins[j] < bound, f"got {text!r}, reference {full!r}")
    return j


def why_differs(p, got, alone):
    """For a failure message: where each text parts from llama.cpp's."""
    out = []
    for what, t in (("alone", alone), ("this", got)):
        if t is None:
            out.append(f"{what}: no reply")
            continue
        j, n, _, m = ref_agreement(p, t)
        out.append(f"{what}: follows the reference for {j}/{n} steps" +
                   (f", parts where its margin is {m[j]:.3f}" if j < n else ""))
    return "; ".join(out)


def completion(s, prompt, stream=False, timeout=600, max_tokens=N_GEN):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    if not stream:
        st, js, _ = s.post(COMP, body, timeout=timeout)
        if st != 200:
            return None, None, (st, js)
        c = js["choices"][0]
        return c["text"], c["finish_reason"], js
    body["stream"] = True
    head, raw, _ = ts.raw_stream(s.port, COMP, body)
    events, err = ts.parse_sse(raw)
    if not events or events[-1] != b"[DONE]":
        return None, None, (head, err, raw[-200:])
    chunks = [json.loads(e) for e in events[:-1]]
    return "".join(c["choices"][0]["text"] for c in chunks), chunks[-1]["choices"][0]["finish_reason"], None


def chat(s, messages, stream=False):
    body = {"messages": messages, "max_tokens": N_GEN, "temperature": 0}
    if not stream:
        st, js, _ = s.post(CHAT, body, timeout=600)
        if st != 200:
            return None, None, (st, js)
        c = js["choices"][0]
        return c["message"]["content"], c["finish_reason"], js
    body["stream"] = True
    head, raw, _ = ts.raw_stream(s.port, CHAT, body)
    events, err = ts.parse_sse(raw)
    if not events or events[-1] != b"[DONE]":
        return None, None, (head, err, raw[-200:])
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    return text, chunks[-1]["choices"][0]["finish_reason"], None


def completions_prompt(p):
    """User text goes in as text (the server never parses special tokens in
    it); a text prompt whose reference parsed special tokens (chat_jinja) is
    sent as its token ids."""
    return p["tokens"] if p["parse_special"] else p["text"]


N_MANY = 64


def many_concurrent(args, name, path, texts):
    """64 greedy requests at once (64 rows in each decode step), each equal
    to the same request alone on the same server. A small --batch-size makes
    prompts share steps with decodes and longer prompts take several chunks."""
    b = args.backend
    s = start(args, path, "--parallel", str(N_MANY), "--no-prefix-cache", "--ctx-size", "256", "--batch-size", "24")
    try:
        prompts = [f"{texts[i % len(texts)]['text'][:60 + 7 * (i % 5)]} {i}" for i in range(N_MANY)]
        alone = [completion(s, q, max_tokens=12)[0] for q in prompts]
        res = {}
        go = threading.Barrier(N_MANY)

        def worker(i):
            go.wait()
            res[i] = completion(s, prompts[i], max_tokens=12)[0]
        th = [threading.Thread(target=worker, args=(i,)) for i in range(N_MANY)]
        t1 = time.time()
        for t in th:
            t.start()
        for t in th:
            t.join()
        bad = [(i, alone[i], res.get(i)) for i in range(N_MANY) if alone[i] is None or res.get(i) != alone[i]]
        check(f"[{name}] {b}: {N_MANY} concurrent greedy requests == each alone ({time.time() - t1:.2f} s)",
              not bad, bad[:3])
    finally:
        s.stop()


def test_model(args, name):
    b = args.backend
    path = os.path.join(args.fixtures, "models", name + ".gguf")
    with open(os.path.join(args.fixtures, "refs", name + ".json")) as f:
        ref = json.load(f)
    bound = bound_for(name)
    texts = [p for p in ref["prompts"] if p["kind"] == "text"]
    chats = [p for p in ref["prompts"] if p["kind"] == "chat"]
    for p in ref["prompts"]:
        g = p["generation"]
        check(f"[{name}] ref {p['id']}: continuation has no control token (server renders none)",
              g["text"] == g["text_special"], g["text_special"])
    alone, matched = {}, {}
    t0 = time.time()
    s = start(args, path, "--parallel", "4", "--no-prefix-cache")
    print(f"[{name}] {b}: loaded in {time.time() - t0:.1f} s")
    try:
        st, h, _ = s.req("GET", "/health")
        check(f"[{name}] /health reports backend {b}", st == 200 and h["backend"] == b and h["slots_total"] == 4,
              (st, h))
        st, js, _ = s.req("GET", "/v1/models")
        check(f"[{name}] /v1/models meta backend {b}", st == 200 and js["data"][0]["meta"]["backend"] == b, (st, js))
        st, js, _ = s.post(COMP, {"prompt": "x", "temperature": "hot"})
        check(f"[{name}] bad request: 400 OpenAI error", st == 400 and ts.is_error(js, "temperature"), (st, js))
        st, js, _ = s.post(CHAT, b"{not json")
        check(f"[{name}] malformed body: 400 OpenAI error", st == 400 and ts.is_error(js), (st, js))
        st, js, _ = s.post(COMP, {"prompt": [1, h["vocab_size"]], "max_tokens": 2})
        check(f"[{name}] token id out of the vocabulary: 400 OpenAI error", st == 400 and ts.is_error(js, "prompt"),
              (st, js))
        st, js, _ = s.post(COMP, {"prompt": [10] * (h["n_ctx"] + 1), "max_tokens": 2})
        check(f"[{name}] prompt longer than the context: 400 OpenAI error", st == 400 and ts.is_error(js, "prompt"),
              (st, js))
        for p in texts + chats:
            st, js, _ = s.post("/tokenize", {"content": p["text"], "add_special": p["add_special"],
                                             "parse_special": p["parse_special"]})
            check(f"[{name}] /tokenize {p['id']} == reference ids", st == 200 and js["tokens"] == p["tokens"],
                  (st, js, p["tokens"]))
        # every text prompt alone (the first of them is the first request of this server)
        for p in texts:
            t1 = time.time()
            text, fin, js = completion(s, completions_prompt(p))
            if not check(f"[{name}] {b} completions {p['id']}: 200", text is not None, js):
                continue
            alone[p["id"]] = text
            check(f"[{name}] {b} completions {p['id']}: prompt tokens", js["usage"]["prompt_tokens"] == p["n_tokens"],
                  (js["usage"], p["n_tokens"]))
            matched[p["id"]] = compare_ref(f"[{name}] {b} completions {p['id']}", p, text, fin, bound)
            print(f"  {p['id']}: {time.time() - t1:.2f} s")
        # one streamed completion: chunks split at UTF-8 boundaries
        p = next(q for q in texts if q["id"] == "unicode") if any(q["id"] == "unicode" for q in texts) else texts[0]
        text, fin, err = completion(s, completions_prompt(p), stream=True)
        check(f"[{name}] {b} completions {p['id']}: streamed == non-streamed",
              text is not None and text == alone.get(p["id"]), (err, text, alone.get(p["id"])))
        # chat: the server's template must give llama.cpp's chat prompt
        for p in chats:
            text, fin, js = chat(s, p["messages"])
            if not check(f"[{name}] {b} chat: 200", text is not None, js):
                continue
            cands = [q for q in ref["prompts"] if q["id"].startswith("chat") and
                     q["n_tokens"] == js["usage"]["prompt_tokens"]]
            if check(f"[{name}] {b} chat: prompt tokens as a reference chat prompt", len(cands) >= 1,
                     (js["usage"], [(q["id"], q["n_tokens"]) for q in ref["prompts"]])):
                q = cands[0]
                compare_ref(f"[{name}] {b} chat ({q['id']})", q, text, fin, bound)
            stext, sfin, err = chat(s, p["messages"], stream=True)
            check(f"[{name}] {b} chat: SSE stream text == non-streamed", stext == text and sfin == fin,
                  (err, stext, text))
        # batching: 4 different prompts at once, the long one's prefill beside the others' decodes
        ids = [i for i in ("plain", "code", "long", "unicode", "spaces") if i in alone][:4]
        pm = {p["id"]: p for p in texts}
        for rnd in range(2):
            res = {}
            go = threading.Barrier(len(ids))

            def worker(i):
                go.wait()
                res[i] = completion(s, completions_prompt(pm[i]))[0]
            th = [threading.Thread(target=worker, args=(i,)) for i in ids]
            t1 = time.time()
            for t in th:
                t.start()
            for t in th:
                t.join()
            bad = [(i, alone[i], res.get(i), why_differs(pm[i], res.get(i), alone[i]))
                   for i in ids if res.get(i) != alone[i]]
            check(f"[{name}] {b}: 4 concurrent requests ({', '.join(ids)}) == alone "
                  f"(round {rnd}, {time.time() - t1:.2f} s)", not bad, bad)
        # the same 4 prompts as one request: admitted together, surely batched
        st, js, _ = s.post(COMP, {"prompt": [completions_prompt(pm[i]) for i in ids], "max_tokens": N_GEN,
                                  "temperature": 0}, timeout=600)
        got = {}
        if st == 200:
            for c in js["choices"]:
                got[ids[c["index"]]] = c["text"]
        bad = [(i, alone[i], got.get(i), why_differs(pm[i], got.get(i), alone[i]))
               for i in ids if got.get(i) != alone[i]]
        check(f"[{name}] {b}: the 4 prompts in one request == alone", st == 200 and not bad, (st, bad))
    finally:
        s.stop()
    if b != "vulkan":  # lavapipe is too slow for 128 more requests per model
        many_concurrent(args, name, path, texts)
    # One slot, prefix cache on: each request lands in the previous one's
    # slot. `first` is a prompt whose reply matched the reference for all 24
    # steps (so its generated ids are the reference's).
    full = [p for p in texts if matched.get(p["id"]) == N_GEN]
    first = full[0] if full else texts[0]
    other = next(p for p in texts if p is not first)
    rec = " (recurrent state)" if "qwen35" in name else ""
    s = start(args, path, "--parallel", "1")
    try:
        a = completion(s, completions_prompt(other))[0]
        check(f"[{name}] {b} slot reuse: {other['id']} first == alone", a == alone.get(other["id"]),
              (a, alone.get(other["id"]), why_differs(other, a, alone.get(other["id"]))))
        text, _, js = completion(s, completions_prompt(first))
        check(f"[{name}] {b} slot reuse: {first['id']} after {other['id']} == {first['id']} alone{rec}",
              text is not None and text == alone.get(first["id"]),
              (text, alone.get(first["id"]), why_differs(first, text, alone.get(first["id"]))))
        a = completion(s, completions_prompt(other))[0]
        check(f"[{name}] {b} slot reuse: {other['id']} after {first['id']} == alone{rec}", a == alone.get(other["id"]),
              (a, alone.get(other["id"]), why_differs(other, a, alone.get(other["id"]))))
        if full:
            # The first half of the continuation (its slot held `other`: no
            # prefix is reused, the prompt is prefilled as when alone), then
            # prompt + those 12 tokens as ids: the slot's whole cached
            # sequence (prompt + 11 decoded tokens) is its prefix, so the KV /
            # recurrent state is reused, and the reply must be the
            # reference's steps 12-23 (under the near-tie rule).
            h = N_GEN // 2
            text, fin, js = completion(s, completions_prompt(first), max_tokens=h)
            check(f"[{name}] {b} slot reuse: {first['id']} with max_tokens {h} == the start of its 24 tokens",
                  text is not None and alone.get(first["id"], "").startswith(text.rstrip("\ufffd")),
                  (text, alone.get(first["id"])))
            follow = first["tokens"] + first["generation"]["tokens"][:h]
            text, fin, js = completion(s, follow, max_tokens=N_GEN - h)
            if check(f"[{name}] {b} slot reuse: follow-up 200", text is not None, js):
                cached = js["usage"]["prompt_tokens_details"]["cached_tokens"]
                n_seq = len(first["tokens"]) + h - 1
                check(f"[{name}] {b} slot reuse: the follow-up reused the cached sequence{rec} "
                      f"({cached} of {len(follow)} prompt tokens)", cached == n_seq, (cached, n_seq))
                compare_ref(f"[{name}] {b} slot reuse: follow-up{rec}", first, text, fin, bound, start=h)
        else:
            print(f"note: [{name}] {b}: no prompt followed llama.cpp's continuation for all 24 steps; "
                  f"the cached-sequence follow-up is not run")
    finally:
        s.stop()


def main():
    env = os.environ
    build = env.get("ALICE_BUILD_DIR", "")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default=env.get("ALICE_TEST_BACKEND") or "cpu")
    ap.add_argument("--server", default=os.path.join(build, "bin", "alice-llm-server") if build else None)
    ap.add_argument("--lib", default=env.get("ALICE_BACKEND_PATH") or (os.path.join(build, "lib") if build else None))
    ap.add_argument("--fixtures", default=env.get("ALICE_FIXTURES_DIR"))
    ap.add_argument("--models", default=None, help="comma-separated fixture names (default: the representative set)")
    ap.add_argument("--threads", default="2", help="--threads for the server (CPU work)")
    ap.add_argument("--load-timeout", type=float, default=600)
    args = ap.parse_args()
    if not args.server or not args.lib:
        sys.exit("test_backends.py: give --server and --lib (or set ALICE_BUILD_DIR)")
    if not args.fixtures or not os.path.isdir(os.path.join(args.fixtures, "models")):
        print(f"FAIL fixtures directory missing: {args.fixtures!r} (--fixtures or ALICE_FIXTURES_DIR)")
        sys.exit(1)
    ts.BIN, ts.LIBDIR, ts.MODEL = args.server, args.lib, None
    if args.models:
        models = [m for m in args.models.split(",") if m]
    else:
        models = [m for m in DEFAULT_MODELS if os.path.exists(os.path.join(args.fixtures, "models", m + ".gguf"))]
        missing = sorted(set(DEFAULT_MODELS) - set(models))
        if missing:
            print(f"note: not in {args.fixtures}/models, not tested: {', '.join(missing)}")
        check("at least one fixture model present", bool(models), args.fixtures)
    if args.threads != "2":
        orig = ts.Server.__init__

        def init(self, *extra, **kw):
            orig(self, "--threads", args.threads, *extra, **kw)
        ts.Server.__init__ = init  # a later --threads wins over test_server's 2
    t_all = time.time()
    for m in models:
        t0 = time.time()
        try:
            if check(f"[{m}] fixture present", os.path.exists(os.path.join(args.fixtures, "models", m + ".gguf"))):
                test_model(args, m)
        except Skip as e:
            print(f"skipped: {e}")
            sys.exit(SKIP)
        except (RuntimeError, OSError, KeyError, TypeError, ValueError) as e:
            check(f"[{m}] {args.backend}: ran to the end", False, repr(e))
        print(f"FIGURE [{m}] {args.backend}: {time.time() - t0:.1f} s")
        sys.stdout.flush()
    print(f"FIGURE backend {args.backend}: {len(models)} models in {time.time() - t_all:.1f} s")
    print(f"{ts.passed} passed, {ts.failed} failed")
    sys.exit(1 if ts.failed else 0)


if __name__ == "__main__":
    main()
