#!/usr/bin/env python3
"""Run an npm end-to-end test against the real alice-llm-server:
openai_sdk_test.mjs (the official `openai` npm package; the default) or
anthropic_sdk_test.mjs (`@anthropic-ai/sdk`).

usage: sdk_test.py SERVER_BINARY BACKEND_LIB_DIR NPM_DIR FIXTURES_DIR [TEST.mjs]
Installs package.json's exact dependency versions into NPM_DIR (git-ignored,
in the build tree) when they are not there yet (one install at a time: the
tests share NPM_DIR), starts the server with an API key and runs the test
with node; a second server on the qwen3 fixture (a template with tools)
serves the tool-calling parts (ALICE_TOOLS_BASE_URL). Fails (never skips)
when node/npm are missing.
"""
import fcntl
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server  # noqa: E402

APT = "apt-get update && apt-get install -y nodejs npm"


def npm_install(npm, npm_dir):
    """package.json's dependencies into npm_dir unless every exact version is
    there already; None, or the failure's text."""
    os.makedirs(npm_dir, exist_ok=True)
    with open(os.path.join(HERE, "package.json")) as f:
        want = json.load(f)["dependencies"]
    with open(os.path.join(npm_dir, ".install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # ctest may run the npm tests side by side
        have = {}
        for name in want:
            try:
                with open(os.path.join(npm_dir, "node_modules", name, "package.json")) as f:
                    have[name] = json.load(f)["version"]
            except OSError:
                pass
        if have == want:
            return None
        shutil.copy(os.path.join(HERE, "package.json"), os.path.join(npm_dir, "package.json"))
        r = subprocess.run([npm, "install", "--prefix", npm_dir, "--no-audit", "--no-fund",
                            "--no-package-lock"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"npm install {want} into {npm_dir}:\n{r.stdout}\n{r.stderr}"
    return None


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    binary, libdir, npm_dir, fixtures = sys.argv[1:5]
    name = sys.argv[5] if len(sys.argv) == 6 else "openai_sdk_test.mjs"
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print(f"FAIL node and npm are needed for the SDK tests. Run as root:\n  {APT}")
        print("0 passed, 1 failed")
        return 1
    err = npm_install(npm, npm_dir)
    if err:
        print(f"FAIL {err}")
        print("0 passed, 1 failed")
        return 1
    # run the test from NPM_DIR so its imports resolve there
    test = os.path.join(npm_dir, name)
    shutil.copy(os.path.join(HERE, name), test)

    test_server.configure([binary, libdir])
    key = "sk-alice-test"
    s = test_server.Server("--api-key", key)
    t = None
    se = None
    rc = 1
    try:
        t = test_server.Server("--api-key", key, "--model", os.path.join(fixtures, "models", "qwen3-BF16.gguf"),
                               "--ctx-size", "1024", "--no-prefix-cache")
        # the same model as an embeddings server, for embeddings.create
        se = test_server.Server("--api-key", key, "--embeddings", "--pooling", "mean", "--parallel", "2")
        env = dict(os.environ, ALICE_BASE_URL=f"http://127.0.0.1:{s.port}/v1", ALICE_API_KEY_FOR_TEST=key,
                   ALICE_TOOLS_BASE_URL=f"http://127.0.0.1:{t.port}/v1",
                   ALICE_EMBED_BASE_URL=f"http://127.0.0.1:{se.port}/v1")
        r = subprocess.run([node, test], env=env, timeout=600)
        rc = r.returncode
    finally:
        for srv in (s, t, se):
            if srv and srv.stop() != 0:
                print("FAIL server did not exit 0")
                rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
