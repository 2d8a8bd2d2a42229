#!/usr/bin/env python3
"""Connection and auth hardening of alice-llm-server (issue 26), each item
reproduced over 127.0.0.1 and bounded in time:

- descriptor exhaustion under `prlimit --nofile=128`: connections opened
  until the server runs out of descriptors; it must not spin (CPU under 20%
  over a few seconds, from /proc/PID/stat), must not flood its log (under
  100 lines a minute) and must serve again once the connections close;
- --max-connections: the listener pauses at the cap and resumes;
- --request-deadline: a slowloris client (a header line a second) is
  dropped;
- unauthenticated uploads: 150 of 5 MB each grow the server's VmRSS by
  under 20 MB (401 from the head, body never read); no "100 Continue" for
  a bad key; a Content-Length over --max-body is a JSON 413 before the body;
- a stream queued for 3x --timeout still ends with [DONE] (SSE comment
  heartbeats while it waits);
- /tokenize, /detokenize, /metrics need the key (--metrics-no-auth opens
  /metrics); duplicate Content-Length, a NUL in Authorization, a NUL in a
  message role are 400s; control characters in a path are escaped in the
  text log; an unresolvable --host is named clearly.

usage: test_hardening_conn.py SERVER_BINARY BACKEND_LIB_DIR
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (Server, check)

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
KEY = "sk-hard"
AUTH = {"Authorization": "Bearer " + KEY}
check = ts.check
CLK = os.sysconf("SC_CLK_TCK")


def raw(port, data, timeout=10, read=True):
    """Send raw bytes, return what the server answers until it closes (or timeout)."""
    so = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        so.sendall(data)
        if not read:
            return so
        out = b""
        t0 = time.time()
        while time.time() - t0 < timeout:
            try:
                d = so.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not d:
                break
            out += d
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                cl = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                if cl and len(body) >= int(cl[0].split(b":")[1]):
                    break
        return out
    finally:
        if read:
            so.close()


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def body_json(resp):
    try:
        return json.loads(resp.partition(b"\r\n\r\n")[2])
    except ValueError:
        return None


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])  # utime + stime


def vm_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def metric(s, name):
    c = ts.http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def log_lines(s):
    return s.logtext().count("\n")


def chat_body(text, **kw):
    b = {"messages": [{"role": "user", "content": text}]}
    b.update(kw)
    return b


# ---- small items ----

def test_small():
    s = ts.Server("--api-key", KEY)
    try:
        for path, body in (("/tokenize", {"content": "x"}), ("/detokenize", {"tokens": [1]})):
            st, js, h = s.post(path, body)
            check(f"{path} needs the key (401)", st == 401 and ts.is_error(js), (st, js))
            st, js, h = s.post(path, body, headers=AUTH)
            check(f"{path} with the key", st == 200, (st, js))
        st, js, h = s.req("GET", "/metrics")
        check("/metrics needs the key (401)", st == 401, st)
        st, _, h = s.req("GET", "/metrics", headers=AUTH)
        check("/metrics with the key", st == 200, st)
        st, js, h = s.req("GET", "/health")
        check("/health stays open", st == 200, st)

        # two Content-Length headers
        body = json.dumps({"content": "abc"}).encode()
        r = raw(s.port, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                b"\r\nContent-Length: %d\r\nContent-Length: 2\r\n\r\n" % len(body) + body)
        check("two Content-Length headers: 400", status_of(r) == 400 and ts.is_error(body_json(r)), r[:200])
        r = raw(s.port, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                b"\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(body)) + body)
        check("two equal Content-Length headers: 400", status_of(r) == 400, r[:200])
        # NUL inside Authorization (the key, then junk)
        r = raw(s.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                b"\x00junk\r\n\r\n")
        check("NUL in Authorization: 400", status_of(r) == 400 and ts.is_error(body_json(r)), r[:200])
        # NUL in a message role
        data = b'{"messages":[{"role":"user\\u0000x","content":"hi"}],"max_tokens":1}'
        st, js, h = s.post(CHAT, data, headers=AUTH)
        check("NUL in a message role: 400", st == 400 and ts.is_error(js, "messages"), (st, js))
        # control characters in the path: escaped in the text log
        r = raw(s.port, b"GET /v1/mo\x1b[31mdels\x07 HTTP/1.1\r\nHost: x\r\n" +
                b"Authorization: Bearer " + KEY.encode() + b"\r\n\r\n")
        time.sleep(0.3)
        log = s.logtext()
        check("control characters in the path never reach the log raw",
              "\x1b" not in log and "\x07" not in log and "\\x1b" in log, log[-400:])
        st, js, h = s.req("GET", "/v1/models", headers=AUTH)
        check("still serving", st == 200, st)
    finally:
        s.stop()

    s = ts.Server("--api-key", KEY, "--metrics-no-auth")
    try:
        st, _, _ = s.req("GET", "/metrics")
        check("--metrics-no-auth opens /metrics", st == 200, st)
        st, _, _ = s.post("/tokenize", {"content": "x"})
        check("--metrics-no-auth leaves /tokenize closed", st == 401, st)
    finally:
        s.stop()

    p = subprocess.run([ts.BIN, "--host", "no-such-host.invalid", "--port", "0"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, ALICE_BACKEND_PATH=ts.LIBDIR))
    out = p.stdout + p.stderr
    check("unresolvable --host: exit 1 and a clear message",
          p.returncode == 1 and "resolve" in out and "no-such-host.invalid" in out and "Success" not in out,
          (p.returncode, out[-300:]))


# ---- bodies before auth ----

def test_bodies_before_auth():
    s = ts.Server("--api-key", KEY, "--max-body", "1m")
    try:
        # Expect: 100-continue with a bad key: 401, never 100
        r = raw(s.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
                b"Content-Length: 5000000\r\nExpect: 100-continue\r\n\r\n", timeout=5)
        check("100-continue with a bad key: 401 and no 100", status_of(r) == 401 and b"100 Continue" not in r,
              r[:200])
        r = raw(s.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n"
                b"Expect: 100-continue\r\n\r\n", timeout=5)
        check("100-continue without a key: 401", status_of(r) == 401 and b"100 Continue" not in r, r[:200])
        # with a body: unknown route and wrong method are answered from the head too
        r = raw(s.port, b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n", timeout=5)
        check("body for an unknown route: 404 from the head", status_of(r) == 404 and ts.is_error(body_json(r)),
              r[:200])
        r = raw(s.port, b"POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n", timeout=5)
        check("body for a GET route: 405 with Allow from the head",
              status_of(r) == 405 and b"Allow: GET" in r and ts.is_error(body_json(r)), r[:300])
        # over --max-body with the key: JSON 413 before the body
        r = raw(s.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                b"\r\nContent-Length: 5000000\r\n\r\n", timeout=5)
        check("Content-Length over --max-body: JSON 413 before the body",
              status_of(r) == 413 and ts.is_error(body_json(r)), r[:200])

        time.sleep(0.5)
        rss0 = vm_rss_kb(s.proc.pid)
        chunk = b"x" * (1 << 20)
        head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % (5 << 20))
        n401 = 0

        def upload():
            nonlocal n401
            try:
                so = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            except OSError:
                return
            try:
                so.sendall(head)
                for _ in range(5):
                    so.sendall(chunk)
            except OSError:
                pass
            try:
                d = so.recv(4096)
                if d.startswith(b"HTTP/1.1 401"):
                    n401 += 1
            except OSError:
                pass
            so.close()

        t0 = time.time()
        for batch in range(15):
            th = [threading.Thread(target=upload) for _ in range(10)]
            for t in th:
                t.start()
            for t in th:
                t.join(30)
        time.sleep(1.0)
        rss1 = vm_rss_kb(s.proc.pid)
        grow = (rss1 - rss0) / 1024
        check(f"150 unauthenticated 5 MB uploads: RSS +{grow:.1f} MB < 20 MB ({n401} saw 401, "
              f"{time.time() - t0:.1f} s)", grow < 20 and n401 > 0, (rss0, rss1))
        st, js, h = s.req("GET", "/v1/models", headers=AUTH)
        check("serving after the uploads", st == 200, st)
    finally:
        s.stop()


# ---- slowloris and the cap ----

def test_deadline_and_cap():
    s = ts.Server("--request-deadline", "2", "--timeout", "30")
    try:
        so = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        t0 = time.time()
        so.sendall(b"GET /health HTTP/1.1\r\n")
        closed = False
        try:
            for i in range(8):
                time.sleep(1)
                so.sendall(b"X-Slow-%d: y\r\n" % i)
        except OSError:
            closed = True
        if not closed:
            try:
                so.settimeout(3)
                closed = so.recv(100) == b""
            except OSError:
                closed = True
        dt = time.time() - t0
        so.close()
        check(f"slowloris (a header line a second) dropped by --request-deadline 2 ({dt:.1f} s)",
              closed and dt < 6, dt)
        v = metric(s, "alice_connections_deadline_closed_total")
        check("/metrics counts the connection closed by the deadline", v is not None and v >= 1, v)

    finally:
        s.stop()
    s = ts.Server("--max-connections", "8")
    try:
        # the cap: 8 idle connections fill it; a 9th waits, then is served
        idle = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(8)]
        time.sleep(0.5)
        res = {}

        def late():
            try:
                res["st"] = s.req("GET", "/health", timeout=15)[0]
                res["t"] = time.time()
            except OSError as e:
                res["err"] = e

        th = threading.Thread(target=late)
        th.start()
        time.sleep(1.0)
        waiting = "st" not in res
        t_close = time.time()
        for c in idle:
            c.close()
        th.join(15)
        check("--max-connections 8: a 9th connection waits for a free one",
              waiting and res.get("st") == 200 and res.get("t", 0) >= t_close, res)
    finally:
        s.stop()


# ---- descriptor exhaustion ----

def test_fd_exhaustion():
    if not shutil.which("prlimit"):
        check("prlimit available (descriptor exhaustion test skipped)", True)
        return
    port = ts.free_port()
    logf = open(f"/tmp/alice-srv-test-{port}.log", "w+")
    env = dict(os.environ, ALICE_BACKEND_PATH=ts.LIBDIR)
    env.pop("ALICE_API_KEY", None)
    proc = subprocess.Popen(["prlimit", "--nofile=128", ts.BIN, "--port", str(port), "--threads", "2",
                             "--max-connections", "1000"], env=env, stdout=logf, stderr=subprocess.STDOUT)

    class S:
        pass

    s = S()
    s.port, s.proc, s.log = port, proc, logf
    s.req = lambda *a, **k: ts.Server.req(s, *a, **k)
    s.logtext = lambda: ts.Server.logtext(s)
    socks = []
    try:
        ts.Server.wait_ready(s)
        # open connections until the server has no descriptor left (it stops accepting)
        for _ in range(300):
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        time.sleep(1.0)
        lines0 = log_lines(s)
        c0, t0 = cpu_ticks(proc.pid), time.time()
        time.sleep(4.0)
        c1, t1 = cpu_ticks(proc.pid), time.time()
        lines1 = log_lines(s)
        cpu = (c1 - c0) / CLK / (t1 - t0)
        rate = (lines1 - lines0) * 60 / (t1 - t0)
        check(f"out of descriptors ({len(socks)} connections): server CPU {cpu * 100:.0f}% < 20%", cpu < 0.20,
              cpu)
        check(f"out of descriptors: {rate:.0f} log lines a minute < 100", rate < 100, s.logtext()[-500:])
        check("out of descriptors: the warning was written", "accept" in s.logtext(), s.logtext()[-300:])
        for so in socks:
            so.close()
        socks = []
        time.sleep(1.0)
        st, js, h = s.req("GET", "/health", timeout=10)
        check("serves again once the connections close", st == 200, st)
        v = metric(s, "alice_accept_errors_total")
        check("/metrics counts the accept errors", v is not None and v >= 1, v)
    finally:
        for so in socks:
            so.close()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logf.close()


# ---- --timeout never cuts a waiting stream ----

def test_stream_waits():
    s = ts.Server("--parallel", "1", "--timeout", "1")
    try:
        # 3 x 16 choices of 480 tokens on one slot: seconds ahead of the
        # stream even on a fast machine (~5 s at 4.6k tokens/s)
        long_body = chat_body("Tell me a long story.", max_tokens=480, ignore_eos=True, n=16)
        res = {}

        def long_req(k):
            res[k] = s.post(CHAT, long_body, timeout=300)[0]

        ths = [threading.Thread(target=long_req, args=(k,)) for k in range(3)]
        for t in ths:
            t.start()
        time.sleep(0.5)
        t0 = time.time()
        head, body, _ = ts.raw_stream(s.port, CHAT, chat_body("Hi", max_tokens=4, stream=True))
        dt = time.time() - t0
        for t in ths:
            t.join(300)
        check(f"a stream queued {dt:.1f} s (>= 3x --timeout 1) ends with [DONE]",
              dt >= 3 and body.rstrip().endswith(b"data: [DONE]"), (dt, body[-200:]))
        check("the stream carried keep-alive comments while it waited", b": keep-alive" in body, body[:200])
        check("the long requests completed", [res.get(k) for k in range(3)] == [200] * 3, res)
    finally:
        s.stop()


def main():
    ts.configure(sys.argv[1:])
    t0 = time.time()
    only = os.environ.get("ONLY")
    for t in (test_small, test_bodies_before_auth, test_deadline_and_cap, test_fd_exhaustion, test_stream_waits):
        if only and t.__name__ != only:
            continue
        t1 = time.time()
        try:
            t()
        except Exception as e:  # a crash is a failure, the rest still runs
            check(f"{t.__name__} raised", False, repr(e))
        print(f"-- {t.__name__}: {time.time() - t1:.1f} s")
    print(f"{ts.passed} passed, {ts.failed} failed ({time.time() - t0:.1f} s)")
    sys.exit(1 if ts.failed else 0)


if __name__ == "__main__":
    main()
