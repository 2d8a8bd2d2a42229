#!/usr/bin/env python3
"""The paged KV cache over real HTTP (stdlib only): a 256-slot server whose
KV pool is sized by --kv-cells (far below 256 x ctx-size) serves 64
concurrent greedy requests, each equal to its output alone; requests that
cannot get their blocks wait in the queue (never an error mid-generation);
/metrics shows the pool (alice_kv_blocks_*); --kv-cells below --ctx-size is
refused at startup; a long shared prompt prefix is reported as cached.

usage: test_kv_pool.py SERVER_BINARY BACKEND_LIB_DIR
"""
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (Server, check)
import test_ops as to  # noqa: E402  (parse_metrics)

COMP = "/v1/completions"
check = ts.check
NO_EOG = ts.NO_EOG
BACKEND = os.environ.get("ALICE_TEST_BACKEND", "cpu")

WORDS = ["Prince", "Andrew", "looked", "at", "the", "sky", "Natasha", "danced", "old", "count", "Pierre",
         "window", "Moscow", "burning", "morning", "field", "war", "peace", "snow", "horses"]


def prompt(i):
    n = 3 + (i * 7) % 40
    return f"{i}: " + " ".join(WORDS[(i * 3 + j * 5) % len(WORDS)] for j in range(n))


def gen(s, p, n, out=None, i=None):
    st, js, _ = s.post(COMP, {"prompt": p, "max_tokens": n, "temperature": 0, "logit_bias": NO_EOG}, timeout=600)
    r = (st, js["choices"][0]["text"] if st == 200 else js, js.get("usage") if st == 200 else None,
         js["choices"][0].get("finish_reason") if st == 200 else None)
    if out is not None:
        out[i] = r
    return r


def metrics(s):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    vals, _, bad = to.parse_metrics(text)
    check("metrics parse", not bad, bad[:3])
    return vals


def run_all(s, jobs):
    out = [None] * len(jobs)
    th = [threading.Thread(target=gen, args=(s, p, n, out, i)) for i, (p, n) in enumerate(jobs)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return out


def test_small_pool():
    # 256 slots of 512 positions would be 131072 cells; the pool is 2048 (128 blocks)
    s = ts.Server("--backend", BACKEND, "--parallel", "256", "--ctx-size", "512", "--kv-cells", "2048",
                  "--queue", "256")
    try:
        v = metrics(s)
        check("256 slots", v.get("alice_slots_total") == 256, v.get("alice_slots_total"))
        check("pool cells from --kv-cells", v.get("alice_kv_cache_cells_total") == 2048,
              v.get("alice_kv_cache_cells_total"))
        check("pool blocks", v.get("alice_kv_blocks_total") == 2048 / v.get("alice_kv_block_cells", 1) and
              v.get("alice_kv_blocks_used") == 0 and v.get("alice_kv_blocks_available") == v.get("alice_kv_blocks_total"),
              {k: x for k, x in v.items() if k.startswith("alice_kv")})
        check("startup log names the pool", "KV pool 2048 cells" in s.logtext(), s.logtext()[-2000:])
        # 64 concurrent greedy requests (16 tokens each) == alone, on a
        # server that reuses no cached prefix: a request that finds its
        # prompt cached prefills only the last token, a one-row step, where
        # alone it came from the prompt's chunk (a GEMM on a GPU: other bits)
        jobs = [(prompt(i), 16) for i in range(64)]
        fresh = ts.Server("--backend", BACKEND, "--parallel", "256", "--ctx-size", "512", "--kv-cells", "2048",
                          "--queue", "256", "--no-prefix-cache")
        try:
            alone = [gen(fresh, p, n) for p, n in jobs]
            busy = run_all(fresh, jobs)
        finally:
            fresh.stop()
        check("64 concurrent requests all 200", all(r[0] == 200 for r in busy), [r for r in busy if r[0] != 200][:3])
        bad = [i for i in range(64) if busy[i][1] != alone[i][1]]
        check("64 concurrent greedy == alone", not bad, [(jobs[i][0], alone[i][1], busy[i][1]) for i in bad[:3]])
        run_all(s, jobs)  # the cached server serves them too (fills its pool for what follows)
        # long generations: 300 tokens need 20 blocks each, so only ~6 fit at
        # once; the others wait for blocks, none fails
        w0 = metrics(s).get("alice_kv_waited_requests_total", 0)
        long_jobs = [(prompt(100 + i), 300) for i in range(14)]
        res = run_all(s, long_jobs)
        check("long requests all complete", all(r[0] == 200 and r[3] == "length" for r in res),
              [r[:1] + r[3:] for r in res])
        check("long requests generate 300 tokens", all(r[2] and r[2]["completion_tokens"] == 300 for r in res),
              [r[2] for r in res])
        v = metrics(s)
        check("some requests waited for KV blocks", v.get("alice_kv_waited_requests_total", 0) > w0,
              (w0, v.get("alice_kv_waited_requests_total")))
        check("idle: used blocks are cached, none reserved",
              v.get("alice_kv_blocks_cached") == v.get("alice_kv_blocks_used") and
              v.get("alice_kv_blocks_available") + v.get("alice_kv_blocks_used") == v.get("alice_kv_blocks_total"),
              {k: x for k, x in v.items() if k.startswith("alice_kv")})
        # the same long prompt again, with another tail: the shared prefix
        # comes from the cache (whole blocks when another slot holds it)
        base = " ".join(WORDS[j % len(WORDS)] for j in range(60))
        st, js, _ = s.post(COMP, {"prompt": base + " alpha", "max_tokens": 4, "temperature": 0})
        st2, js2, _ = s.post(COMP, {"prompt": base + " beta gamma delta", "max_tokens": 4, "temperature": 0})
        cached = (js2.get("usage", {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0) if st2 == 200 else 0
        check("shared prefix reported as cached tokens", st == 200 and st2 == 200 and cached >= 48,
              (st, st2, js2.get("usage") if st2 == 200 else js2))
    finally:
        rc = s.stop()
        check("server exits cleanly", rc == 0, rc)


def test_pool_below_context():
    port = ts.free_port()
    e = dict(os.environ)
    e["ALICE_BACKEND_PATH"] = ts.LIBDIR
    p = subprocess.run([ts.BIN, "--port", str(port), "--backend", BACKEND, "--ctx-size", "512", "--kv-cells", "256"],
                       env=e, capture_output=True, text=True, timeout=120)
    check("--kv-cells below --ctx-size refused", p.returncode != 0 and "KV pool" in (p.stdout + p.stderr),
          (p.returncode, (p.stdout + p.stderr)[-500:]))
    p = subprocess.run([ts.BIN, "--kv-cells", "x"], env=e, capture_output=True, text=True, timeout=60)
    check("--kv-cells must be a number", p.returncode != 0 and "--kv-cells" in p.stderr, p.stderr[-300:])


def main():
    ts.configure(sys.argv[1:3])
    test_pool_below_context()
    test_small_pool()
    print(f"{ts.passed} passed, {ts.failed} failed")
    sys.exit(1 if ts.failed else 0)


if __name__ == "__main__":
    main()
