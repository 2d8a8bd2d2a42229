#!/usr/bin/env python3
"""POST /v1/embeddings and /embeddings over real HTTP (stdlib only).

  - the qwen3 fixture served with --embeddings --pooling last: a string, an
    array of strings, an array of token ids and an array of arrays of token
    ids give OpenAI's shape (object list, data[i] = {object embedding,
    index, embedding}, the model echoed, usage.prompt_tokens/total_tokens),
    unit vectors equal to llama.cpp's (tests/data/embeddings, 1e-4);
    base64 decodes (little-endian float32) to exactly the float vectors;
    inputs sent together and concurrently give the same vectors bit for
    bit as alone;
  - errors are 400 with an OpenAI error body: empty input, empty string,
    empty token array, bad types, token ids out of range, an input longer
    than the context, bad encoding_format; the generation routes are
    refused by an embeddings server;
  - --pooling none: /v1/embeddings refuses it, /embeddings returns one
    unit vector per token;
  - a generation server (the bundled model, no --embeddings) refuses
    /v1/embeddings with a 400 that names --embeddings;
  - a BERT (alice-mkmodel --arch bert, the model of tests/data/embeddings)
    serves embeddings without --embeddings (an encoder is an embedding
    model): texts through the WordPiece tokenizer give llama.cpp's vectors,
    and chat is refused; on the vulkan and cuda backends (where built and
    a device probes) its load fails naming the NORM op.

usage: test_embeddings.py SERVER_BINARY BACKEND_LIB_DIR FIXTURES_DIR DATA_DIR
"""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402

check = ts.check
EMB = "/v1/embeddings"
TOL = 1e-4  # llama.cpp's vectors: same weights and op order (test_embed.c measures 0 on the CPU)


def unit(v):
    return abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-5


def close(a, b):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= TOL


def test_qwen3(fixtures, data):
    with open(os.path.join(data, "embeddings", "qwen3-BF16-last.json")) as f:
        ref = json.load(f)
    cases = ref["cases"]
    path = os.path.join(fixtures, "models", "qwen3-BF16.gguf")
    s = ts.Server("--model", path, "--embeddings", "--pooling", "last", "--parallel", "4", "--ctx-size", "64")
    try:
        st, js, _ = s.post(EMB, {"input": cases[0]["text"], "model": "my-embedder"})
        ok = check("string input 200", st == 200, js)
        if ok:
            check("shape: object list, model echoed", js["object"] == "list" and js["model"] == "my-embedder", js)
            d = js["data"]
            check("one item: object embedding, index 0", len(d) == 1 and d[0]["object"] == "embedding"
                  and d[0]["index"] == 0, d)
            check("usage prompt_tokens = total_tokens = tokens of the input",
                  js["usage"] == {"prompt_tokens": len(cases[0]["tokens"]),
                                  "total_tokens": len(cases[0]["tokens"])}, js["usage"])
            check("string input equals llama.cpp", close(d[0]["embedding"], cases[0]["embedding"]))
            check("unit length", unit(d[0]["embedding"]))
        texts = [c["text"] for c in cases]
        st, js, _ = s.post(EMB, {"input": texts})
        ok = check("array of strings 200", st == 200, js)
        batched = None
        if ok:
            batched = [it["embedding"] for it in sorted(js["data"], key=lambda it: it["index"])]
            check("indices 0..n-1 in order", [it["index"] for it in js["data"]] == list(range(len(texts))))
            check("every input equals llama.cpp",
                  all(close(v, c["embedding"]) for v, c in zip(batched, cases)))
            check("usage sums the inputs", js["usage"]["prompt_tokens"] == sum(len(c["tokens"]) for c in cases),
                  js["usage"])
        st, js, _ = s.post(EMB, {"input": cases[1]["tokens"]})
        ok = check("array of token ids 200", st == 200, js)
        if ok and batched:
            check("token ids == the text's vector, bit for bit", js["data"][0]["embedding"] == batched[1])
        st, js, _ = s.post(EMB, {"input": [c["tokens"] for c in cases]})
        ok = check("array of arrays of token ids 200", st == 200, js)
        if ok and batched:
            check("arrays of ids == the texts' vectors, bit for bit",
                  [it["embedding"] for it in js["data"]] == batched)
        st, js, _ = s.post(EMB, {"input": texts, "encoding_format": "base64"})
        ok = check("base64 200", st == 200, js)
        if ok and batched:
            dec = [list(struct.unpack("<%df" % (len(base64.b64decode(it["embedding"])) // 4),
                                      base64.b64decode(it["embedding"]))) for it in js["data"]]
            # json floats print as doubles of the same float32 value
            check("base64 decodes to the float vectors exactly",
                  all(len(a) == len(b) and all(struct.pack("<f", x) == struct.pack("<f", y) for x, y in zip(a, b))
                      for a, b in zip(dec, batched)))
        # alone vs concurrently: bit for bit
        alone = []
        for t in texts:
            st, js, _ = s.post(EMB, {"input": t})
            alone.append(js["data"][0]["embedding"] if st == 200 else None)
        check("alone == sent together (bit for bit)", batched is not None and alone == batched)
        got = [None] * 8

        def worker(i):
            st, js, _ = s.post(EMB, {"input": texts[i % len(texts)]})
            got[i] = js["data"][0]["embedding"] if st == 200 else None

        th = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        check("8 concurrent requests == alone (bit for bit)",
              all(got[i] == alone[i % len(texts)] for i in range(8)))
        st, js, _ = s.post(EMB, {"input": [t for t in texts for _ in range(17)]})  # 68 = --parallel 4 + --queue 64
        check("68 inputs in one request (all slots + the whole queue)", st == 200 and len(js["data"]) == 68
              and all(js["data"][i]["embedding"] == batched[i // 17] for i in range(68)), st)
        # errors
        for name, body, param in [
            ("missing input", {"model": "x"}, "input"),
            ("empty array", {"input": []}, "input"),
            ("empty string", {"input": ""}, "input"),
            ("empty string in array", {"input": ["a", ""]}, "input"),
            ("empty token array", {"input": [[]]}, "input"),
            ("number input", {"input": 5}, "input"),
            ("object input", {"input": {"a": 1}}, "input"),
            ("mixed array", {"input": ["a", 5]}, "input"),
            ("float token", {"input": [1.5, 2]}, "input"),
            ("token out of range", {"input": [10 ** 9]}, "input"),
            ("negative token", {"input": [[1, -1]]}, "input"),
            ("too long for the context", {"input": [1] * 65}, "input"),
            ("more inputs than --parallel + --queue", {"input": ["a"] * 69}, "input"),
            ("nested too deep", {"input": [[[1]]]}, "input"),
            ("null input", {"input": None}, "input"),
            ("bad encoding_format", {"input": "a", "encoding_format": "int8"}, "encoding_format"),
            ("model not a string", {"input": "a", "model": 5}, "model"),
        ]:
            st, js, _ = s.post(EMB, body)
            check(f"error: {name} -> 400 with an OpenAI error body", st == 400 and ts.is_error(js, param), (st, js))
        st, js, _ = s.post(EMB, "{not json")
        check("error: bad JSON -> 400", st == 400 and ts.is_error(js), (st, js))
        for route in ("/v1/chat/completions", "/v1/completions"):
            st, js, _ = s.post(route, {"messages": [{"role": "user", "content": "hi"}], "prompt": "hi"})
            check(f"embeddings server refuses {route} with 400", st == 400 and ts.is_error(js)
                  and "embeddings" in js["error"]["message"], (st, js))
        st, _, _ = s.req("GET", "/health")
        check("still healthy after the errors", st == 200)
    finally:
        s.stop()

    s = ts.Server("--model", path, "--embeddings", "--pooling", "none", "--parallel", "2")
    try:
        st, js, _ = s.post(EMB, {"input": "Hello world"})
        check("pooling none: /v1/embeddings refuses with 400", st == 400 and ts.is_error(js), (st, js))
        st, js, _ = s.post("/embeddings", {"input": cases[1]["tokens"]})
        ok = check("pooling none: /embeddings 200", st == 200, js)
        if ok:
            vs = js["data"][0]["embedding"]
            check("pooling none: one unit vector per token",
                  len(vs) == len(cases[1]["tokens"]) and all(unit(v) for v in vs), len(vs))
            # the last token's vector is last pooling's vector
            check("pooling none: last row == last pooling (llama.cpp)", close(vs[-1], cases[1]["embedding"]))
    finally:
        s.stop()


def test_generation_server():
    s = ts.Server("--parallel", "1")  # the bundled generative model, no --embeddings
    try:
        st, js, _ = s.post(EMB, {"input": "hello"})
        check("generation server refuses /v1/embeddings with 400 naming --embeddings",
              st == 400 and ts.is_error(js) and "--embeddings" in js["error"]["message"], (st, js))
        st, js, _ = s.post("/v1/completions", {"prompt": "Once", "max_tokens": 2})
        check("generation server still generates", st == 200, (st, js))
    finally:
        s.stop()


def test_bert(fixtures, data):
    with open(os.path.join(data, "embeddings", "bert-synth-F32-mean.json")) as f:
        ref = json.load(f)
    mk = os.path.join(os.path.dirname(os.path.abspath(ts.BIN)), "alice-mkmodel")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bert-F32.gguf")
        r = subprocess.run([mk, "--arch", "bert", "--type", "F32", "--vocab",
                            os.path.join(fixtures, "vocab", "ggml-vocab-bert-bge.gguf"), "-o", path],
                           capture_output=True, text=True)
        if not check("alice-mkmodel --arch bert", r.returncode == 0, r.stderr):
            return
        s = ts.Server("--model", path, "--parallel", "2")  # no --embeddings: an encoder implies it
        try:
            texts = [c["text"] for c in ref["cases"]]
            st, js, _ = s.post(EMB, {"input": texts})
            ok = check("bert: texts 200 without --embeddings", st == 200, js)
            if ok:
                vs = [it["embedding"] for it in js["data"]]
                check("bert: texts (WordPiece, [CLS] ... [SEP]) equal llama.cpp (mean pooling)",
                      all(close(v, c["embedding"]) for v, c in zip(vs, ref["cases"])))
                check("bert: usage counts [CLS] and [SEP]",
                      js["usage"]["prompt_tokens"] == sum(len(c["tokens"]) for c in ref["cases"]), js["usage"])
            st, js, _ = s.post("/tokenize", {"content": texts[1], "add_special": True})
            check("bert: /tokenize == llama.cpp's tokens", st == 200 and js["tokens"] == ref["cases"][1]["tokens"],
                  js)
            st, js, _ = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
            check("bert: chat refused with 400", st == 400 and ts.is_error(js), (st, js))
            st, js, _ = s.post(EMB, {"input": [[101] * 600]})
            check("bert: an input past its 512 positions -> 400", st == 400 and ts.is_error(js, "input"), (st, js))
        finally:
            s.stop()
        gpu_backends_refuse(path)


def gpu_backends_refuse(path):
    """The GPU backends have no NORM (LayerNorm) kernel yet: loading a BERT on
    one must stop the server with an error naming the op (where the backend
    is built and its device probes; else there is nothing to check)."""
    for b in ("vulkan", "cuda"):
        if not os.path.exists(os.path.join(ts.LIBDIR, f"libalice-backend-{b}.so")):
            print(f"skip bert on {b}: backend not built")
            continue
        env = dict(os.environ, ALICE_BACKEND_PATH=ts.LIBDIR)
        p = subprocess.Popen([ts.BIN, "--model", path, "--backend", b, "--port", str(ts.free_port()), "--threads", "2"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            log, _ = p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            p.kill()
            log, _ = p.communicate()
            check(f"bert on {b}: the load fails", False, "the server kept running: " + log[-600:])
            continue
        if p.returncode != 0 and "NORM" not in log:
            print(f"skip bert on {b}: no usable device ({log.strip().splitlines()[-1] if log.strip() else p.returncode})")
            continue
        check(f"bert on {b}: load fails naming the NORM op", p.returncode == 1 and "cannot run NORM" in log, log[-600:])


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ts.configure(sys.argv[1:3])
    fixtures, data = sys.argv[3], sys.argv[4]
    groups = [test_generation_server]
    if os.path.isdir(os.path.join(fixtures, "models")):
        groups.append(lambda: test_qwen3(fixtures, data))
        groups.append(lambda: test_bert(fixtures, data))
    else:
        print(f"fixtures not found in {fixtures}: qwen3 checks skipped")
    for t in groups:
        try:
            t()
        except Exception as ex:
            check("test group raised", False, repr(ex))
    print(f"{ts.passed} passed, {ts.failed} failed")
    sys.exit(1 if ts.failed else 0)


if __name__ == "__main__":
    main()
