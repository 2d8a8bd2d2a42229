#!/usr/bin/env python3
"""Soak test of alice-llm-server (stdlib only).

Starts the real server on the CPU backend (--parallel 4) and drives it with
N requests from concurrent clients: chat and completions, streaming and not,
GBNF grammars and json_schema response formats, random max_tokens, ~10%
malformed bodies, ~10% clients that disconnect mid-stream, a few oversized
bodies. Checks:
  - the server never crashes and answers /health at the end;
  - every well-formed request gets a complete, well-formed answer
    (JSON body, or SSE chunks ending in [DONE] with a finish_reason);
  - malformed bodies get 4xx JSON errors, oversized ones 413;
  - greedy answers under load equal the single-request answers recorded
    before the load for a few fixed prompts;
  - the server's resident memory (VmRSS) at the end is within 10% of the
    value after a concurrent warm-up.

usage: soak.py SERVER_BINARY BACKEND_LIB_DIR [--requests N] [--clients C]
               [--model PATH] [--seed S]
Exit 0 when every check passes.
"""
import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

MAX_BODY = 64 * 1024

GREEDY_PROMPTS = [
    ("chat", "Tell me about the war."),
    ("chat", "Who was Pierre?"),
    ("completion", "Once upon a time"),
    ("completion", "The prince said"),
]
GREEDY_MAX = 24

RANDOM_PROMPTS = [
    "Natasha looked at", "In the evening the countess", "The soldiers marched",
    "What did Andrew think of Napoleon?", "Write a short letter.", "Moscow was burning and",
    "Describe the ball.", "He said nothing, but",
]

MALFORMED = [
    b"{", b"[]", b"null", b"\xff\xfe\x00", b'{"messages": 5}', b'{"messages": []}',
    b'{"messages":[{"content":"x"}]}', b'{"messages":[{"role":"wizard","content":"x"}]}',
    b'{"prompt": 1.5}', b'{"prompt": []}', b'{"messages":[{"role":"user","content":"x"}],"max_tokens":-3}',
    b'{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}',
    b'{"messages":[{"role":"user","content":"x"}],"n":0}',
    b'{"messages":[{"role":"user","content":"x"}],"grammar":"root ::= ("}',
    b'{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}',
    b'{"messages":[{"role":"user","content":"x"}]} trailing',
    b'{"messages":[{"role":"user","content":"x"}],"logit_bias":{"abc":1}}',
    b'{"prompt":"x","stream_options":{"include_usage":true}}',
]

GRAMMAR = 'root ::= ("yes" | "no") " " [a-z]{1,6}'
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def add(self, kind):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def fail(self, what):
        with self.lock:
            self.failures.append(what)
            if len(self.failures) <= 20:
                print("FAIL", what[:600], flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def route(kind):
    return "/v1/chat/completions" if kind == "chat" else "/v1/completions"


def body_for(kind, prompt, **kw):
    b = {"messages": [{"role": "user", "content": prompt}]} if kind == "chat" else {"prompt": prompt}
    b.update(kw)
    return b


def choice_text(kind, c):
    if kind == "chat":
        return (c.get("message") or {}).get("content")
    return c.get("text")


def delta_text(kind, c):
    if kind == "chat":
        return (c.get("delta") or {}).get("content") or ""
    return c.get("text") or ""


class Client:
    def __init__(self, port, timeout=600):
        self.port = port
        self.timeout = timeout

    def raw(self, path, data, read_partial=False):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if read_partial:
            r.read(40)
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
            return r.status, None, {}
        raw = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, raw, hdrs

    def run(self, kind, body):
        """Send a well-formed request; return (text, finish, usage) or raise on a bad answer."""
        st, raw, hdrs = self.raw(route(kind), json.dumps(body).encode())
        if st != 200:
            raise AssertionError(f"status {st}: {raw[:300]!r}")
        if not body.get("stream"):
            js = json.loads(raw)
            ch = js["choices"]
            if len(ch) != body.get("n", 1):
                raise AssertionError(f"{len(ch)} choices")
            c = ch[0]
            text = choice_text(kind, c)
            if not isinstance(text, str) or c.get("finish_reason") not in ("stop", "length"):
                raise AssertionError(f"bad choice {c}")
            u = js.get("usage") or {}
            if u.get("completion_tokens", -1) < 0 or u.get("prompt_tokens", 0) < 1:
                raise AssertionError(f"bad usage {u}")
            if "max_tokens" in body and u["completion_tokens"] > body["max_tokens"] * body.get("n", 1):
                raise AssertionError(f"usage {u} beyond max_tokens {body['max_tokens']}")
            return text, c["finish_reason"], u
        if not hdrs.get("content-type", "").startswith("text/event-stream"):
            raise AssertionError(f"stream content-type {hdrs.get('content-type')}")
        txt = raw.decode("utf-8")
        events = [e for e in txt.split("\n\n") if e.strip()]
        if not events or events[-1].strip() != "data: [DONE]":
            raise AssertionError(f"stream does not end with [DONE]: {txt[-200:]!r}")
        parts, finish, usage = [], None, None
        for e in events[:-1]:
            if not e.startswith("data: "):
                raise AssertionError(f"bad SSE event {e[:100]!r}")
            js = json.loads(e[6:])
            if "error" in js:
                raise AssertionError(f"error event {js}")
            if js.get("usage"):
                usage = js["usage"]
            for c in js.get("choices", []):
                if c.get("index", 0) == 0:
                    parts.append(delta_text(kind, c))
                    if c.get("finish_reason"):
                        finish = c["finish_reason"]
        if finish not in ("stop", "length"):
            raise AssertionError(f"stream finish_reason {finish}")
        return "".join(parts), finish, usage


def record_references(cl):
    refs = {}
    for kind, p in GREEDY_PROMPTS:
        text, fin, _ = cl.run(kind, body_for(kind, p, temperature=0, max_tokens=GREEDY_MAX))
        refs[(kind, p)] = text
    return refs


def one_request(cl, rng, refs, stats):
    r = rng.random()
    kind = "chat" if rng.random() < 0.6 else "completion"
    try:
        if r < 0.10:
            data = rng.choice(MALFORMED)
            k = "completion" if data.startswith(b'{"prompt"') else "chat"
            st, raw, hdrs = cl.raw(route(k), data)
            js = json.loads(raw)
            if not (400 <= st < 500) or "error" not in js or not js["error"].get("message"):
                raise AssertionError(f"malformed {data[:60]!r}: {st} {raw[:200]!r}")
            if not hdrs.get("content-type", "").startswith("application/json"):
                raise AssertionError("malformed: error not JSON")
            stats.add("malformed")
        elif r < 0.20:
            p = rng.choice(RANDOM_PROMPTS)
            st, _, _ = cl.raw(route(kind), json.dumps(body_for(kind, p, stream=True, max_tokens=64)).encode(),
                              read_partial=True)
            if st != 200:
                raise AssertionError(f"disconnect request: status {st}")
            stats.add("disconnect")
        elif r < 0.23:
            big = "x" * (MAX_BODY + rng.randint(1, 4 * MAX_BODY))
            st, raw, _ = cl.raw(route(kind), json.dumps(body_for(kind, big)).encode())
            js = json.loads(raw)
            if st != 413 or "error" not in js:
                raise AssertionError(f"oversized: {st} {raw[:200]!r}")
            stats.add("oversized")
        elif r < 0.40:
            k, p = rng.choice(GREEDY_PROMPTS)
            stream = rng.random() < 0.5
            text, fin, _ = cl.run(k, body_for(k, p, temperature=0, max_tokens=GREEDY_MAX, stream=stream))
            if text != refs[(k, p)]:
                raise AssertionError(f"greedy {k} {p!r} differs under load: {text!r} vs {refs[(k, p)]!r}")
            stats.add("greedy")
        elif r < 0.50:
            stream = rng.random() < 0.5
            text, fin, _ = cl.run(kind, body_for(kind, rng.choice(RANDOM_PROMPTS), grammar=GRAMMAR,
                                                 max_tokens=rng.randint(1, 12), stream=stream))
            w = text.split(" ")
            if w[0] not in ("yes", "no", "y", "n", "ye", "") or (fin == "stop" and (len(w) != 2 or not w[1].isalpha())):
                raise AssertionError(f"grammar output {text!r} ({fin})")
            stats.add("grammar")
        elif r < 0.60:
            stream = rng.random() < 0.5
            rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
            text, fin, _ = cl.run(kind, body_for(kind, rng.choice(RANDOM_PROMPTS), response_format=rf,
                                                 max_tokens=64, stream=stream, temperature=rng.random())) 
            if fin == "stop":
                js = json.loads(text)
                if set(js) != {"name", "age"} or not isinstance(js["age"], int):
                    raise AssertionError(f"schema output {text!r}")
            stats.add("json_schema")
        else:
            stream = rng.random() < 0.5
            kw = {"max_tokens": rng.randint(1, 48), "stream": stream, "temperature": rng.choice([0, 0.7, 1.0]),
                  "seed": rng.randint(0, 1000)}
            if rng.random() < 0.2:
                kw["n"] = 2
                kw["stream"] = False
            elif stream and rng.random() < 0.5:
                kw["stream_options"] = {"include_usage": True}
            if rng.random() < 0.2:
                kw["stop"] = ["."]
            cl.run(kind, body_for(kind, rng.choice(RANDOM_PROMPTS), **kw))
            stats.add("random")
    except (AssertionError, ValueError, KeyError, TypeError) as e:
        stats.fail(f"{type(e).__name__}: {e}")
    except OSError as e:
        stats.fail(f"connection: {e}")


def drive(cl, n, clients, seed, refs, stats, progress=True):
    counter = {"i": 0}
    lock = threading.Lock()
    t0 = time.time()

    def worker(wid):
        rng = random.Random(seed * 1000 + wid)
        while True:
            with lock:
                if counter["i"] >= n:
                    return
                counter["i"] += 1
                i = counter["i"]
            one_request(cl, rng, refs, stats)
            if progress and i % 250 == 0:
                print(f"  {i}/{n} requests, {time.time() - t0:.0f}s", flush=True)

    ts = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("libdir")
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--model")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    port = free_port()
    args = [a.server, "--backend", "cpu", "--parallel", "4", "--threads", str(a.threads), "--port", str(port),
            "--max-body", str(MAX_BODY), "--queue", "256"]
    if a.model:
        args += ["--model", a.model]
    env = dict(os.environ)
    env["ALICE_BACKEND_PATH"] = a.libdir
    env.pop("ALICE_API_KEY", None)
    log = open(f"/tmp/alice-soak-{port}.log", "w+")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    cl = Client(port)
    ok = False
    try:
        t0 = time.time()
        while True:
            if proc.poll() is not None:
                sys.exit(f"server exited early ({proc.returncode}); log {log.name}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() - t0 > 120:
                sys.exit("server not ready after 120 s")
            time.sleep(0.1)

        refs = record_references(cl)
        print(f"recorded {len(refs)} single-request greedy answers", flush=True)
        stats = Stats()
        warm = max(40, a.requests // 20)
        drive(cl, warm, a.clients, a.seed + 7, refs, stats, progress=False)
        rss0 = rss_kb(proc.pid)
        print(f"warm-up: {warm} requests, VmRSS {rss0} kB", flush=True)
        t1 = time.time()
        drive(cl, a.requests, a.clients, a.seed, refs, stats)
        dt = time.time() - t1
        rss1 = rss_kb(proc.pid)
        alive = proc.poll() is None
        health = None
        t2 = time.time()
        while alive and time.time() - t2 < 30:  # cancelled streams end within a step
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/health")
            r = c.getresponse()
            health = (r.status, json.loads(r.read()))
            if health[1].get("slots_busy") == 0 and health[1].get("queued") == 0:
                break
            time.sleep(0.2)
        growth = (rss1 - rss0) / rss0 if rss0 > 0 else 1.0
        print(f"soak: {a.requests} requests from {a.clients} clients in {dt:.1f}s "
              f"({a.requests / dt:.2f} req/s); by kind {json.dumps(stats.counts, sort_keys=True)}")
        print(f"soak: VmRSS after warm-up {rss0} kB, at end {rss1} kB ({growth * 100:+.1f}%)")
        print(f"soak: health {health}")
        fails = list(stats.failures)
        if not alive:
            fails.append(f"server died with {proc.returncode}")
        elif not health or health[0] != 200 or health[1].get("slots_busy") != 0 or health[1].get("queued") != 0:
            fails.append(f"health after the soak: {health}")
        if growth > 0.10:
            fails.append(f"VmRSS grew {growth * 100:.1f}% (> 10%)")
        print(f"soak: {len(fails)} failure(s)")
        for f in fails[:20]:
            print("  ", f[:300])
        ok = not fails
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                rc = proc.wait(60)
                if rc != 0:
                    print(f"soak: server exit code {rc} after SIGTERM")
                    ok = False
            except subprocess.TimeoutExpired:
                proc.kill()
                print("soak: server did not stop within 60 s of SIGTERM")
                ok = False
        log.close()
    if not ok:
        print(f"server log: {log.name}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
