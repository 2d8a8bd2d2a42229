#!/usr/bin/env python3
"""Speculative decoding through alice-llm-server over real HTTP (stdlib
only): --model-draft (tiny-tolstoy Q4_0 drafting for the bundled Q8_0) and
--spec ngram give the same greedy text as no speculation for 20 prompts,
alone and 4 concurrent; usage reports draft_tokens / draft_accepted_tokens,
/metrics alice_draft_tokens_total / alice_draft_accepted_total;
"speculative": false drafts nothing; a draft with another vocabulary, or
--spec draft without a draft, is refused at start naming the files.

usage: test_spec_http.py SERVER_BINARY BACKEND_LIB_DIR SHARED_MODELS_DIR FIXTURES_DIR
"""
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (Server, check)
from test_ops import parse_metrics  # noqa: E402

COMP = "/v1/completions"
check = ts.check

PROMPTS = [
    "Prince Andrew looked at", "Natasha", "The old count said", "Pierre went to the window and",
    "In the morning the", "Moscow was burning", "The princess", "He said that he",
    "Napoleon", "The soldiers were", "She looked at him and said", "It was a",
    "Rostov", "The count and the countess", "At that moment", "Denisov",
    "The carriage", "Prince Vasili", "When he came in", "The French",
]
BAN_EOG = {"0": -100, "2": -100}


def complete(s, prompt, extra=None):
    body = {"prompt": prompt, "max_tokens": 32, "temperature": 0, "logit_bias": BAN_EOG}
    body.update(extra or {})
    st, js, _ = s.post(COMP, body)
    if st != 200:
        return None, js
    return js["choices"][0]["text"], js["usage"]


def run_all(s, concurrent):
    out = [None] * len(PROMPTS)
    usage = [None] * len(PROMPTS)

    def one(i):
        out[i], usage[i] = complete(s, PROMPTS[i])

    if not concurrent:
        for i in range(len(PROMPTS)):
            one(i)
        return out, usage
    for i0 in range(0, len(PROMPTS), 4):
        th = [threading.Thread(target=one, args=(i,)) for i in range(i0, min(i0 + 4, len(PROMPTS)))]
        for t in th:
            t.start()
        for t in th:
            t.join()
    return out, usage


def metrics(s):
    st, _, _ = s.req("GET", "/metrics")
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    vals, _, _ = parse_metrics(text)
    return vals


def test_equal(draft):
    s = ts.Server("--backend", "cpu", "--parallel", "4")
    try:
        plain, _ = run_all(s, False)
    finally:
        s.stop()
    check("plain: every prompt answered", all(t is not None for t in plain))
    for name, flags in (("draft", ["--model-draft", draft, "--draft-max", "8", "--draft-p-min", "0"]),
                        ("ngram", ["--spec", "ngram", "--spec-ngram", "2"])):
        s = ts.Server("--backend", "cpu", "--parallel", "4", *flags)
        try:
            for mode in ("alone", "4 concurrent"):
                got, usage = run_all(s, mode != "alone")
                diff = [i for i in range(len(PROMPTS)) if got[i] != plain[i]]
                check(f"{name} {mode}: greedy text equals no speculation", not diff,
                      [(PROMPTS[i], got[i], plain[i]) for i in diff[:2]])
                drafted = sum(u["draft_tokens"] for u in usage if u)
                accepted = sum(u["draft_accepted_tokens"] for u in usage if u)
                check(f"{name} {mode}: usage counts drafts, some accepted", drafted > 0 and 0 < accepted <= drafted,
                      (drafted, accepted))
                print(f"  {name} {mode}: {drafted} drafted, {accepted} accepted")
            st, js, _ = s.req("GET", "/health")
            check(f"{name}: /health says speculative {name}", st == 200 and js.get("speculative") == name, js)
            vals = metrics(s)
            check(f"{name}: /metrics draft counters", vals.get("alice_draft_tokens_total", 0) > 0 and
                  0 < vals.get("alice_draft_accepted_total", 0) <= vals["alice_draft_tokens_total"], vals)
            _, u = complete(s, "Natasha", {"speculative": False})
            check(f"{name}: speculative false drafts nothing", u and u["draft_tokens"] == 0, u)
            _, u = complete(s, "Natasha", {"speculative.n_max": 2})
            check(f"{name}: speculative.n_max accepted", u and "draft_tokens" in u, u)
            st, js, _ = s.post(COMP, {"prompt": "x", "speculative": 3})
            check(f"{name}: speculative must be a boolean (400)", st == 400 and js["error"]["param"] == "speculative",
                  (st, js))
            st, js, _ = s.post(COMP, {"prompt": "x", "speculative.n_max": 99})
            check(f"{name}: speculative.n_max out of range (400)", st == 400, (st, js))
        finally:
            s.stop()


def start_fails(*flags):
    args = [ts.BIN, "--port", "0", "--backend", "cpu"] + list(flags)
    env = dict(os.environ, ALICE_BACKEND_PATH=ts.LIBDIR)
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test_refused(fixtures):
    other = os.path.join(fixtures, "models", "llama-spm-Q8_0.gguf")
    rc, out = start_fails("--model-draft", other)
    check("draft with another vocabulary: exit 1 naming both files",
          rc == 1 and other in out and "tiny-tolstoy-Q8_0.gguf" in out and "vocabulary" in out, (rc, out[-600:]))
    rc, out = start_fails("--spec", "draft")
    check("--spec draft without --model-draft: exit 2", rc == 2 and "--model-draft" in out, (rc, out))
    rc, out = start_fails("--draft-max", "40")
    check("--draft-max 40: exit 2", rc == 2 and "--draft-max" in out, (rc, out))
    rc, out = start_fails("--spec", "bogus")
    check("--spec bogus: exit 2", rc == 2 and "--spec" in out, (rc, out))


def main():
    argv = sys.argv[1:]
    ts.configure(argv[:2])
    draft = os.path.join(argv[2], "tiny-tolstoy-Q4_0.gguf")
    test_equal(draft)
    test_refused(argv[3])
    print(f"{ts.passed} passed, {ts.failed} failed")
    sys.exit(1 if ts.failed else 0)


if __name__ == "__main__":
    main()
