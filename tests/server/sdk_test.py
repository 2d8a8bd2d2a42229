#!/usr/bin/env python3
"""Run openai_sdk_test.mjs (the official `openai` npm package) against the
real alice-llm-server.

usage: sdk_test.py SERVER_BINARY BACKEND_LIB_DIR NPM_DIR
Installs package.json's exact openai version into NPM_DIR (git-ignored, in
the build tree) when it is not there yet, starts the server with an API key
and runs the test with node. Fails (never skips) when node/npm are missing.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server  # noqa: E402

APT = "apt-get update && apt-get install -y nodejs npm"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    binary, libdir, npm_dir = sys.argv[1:]
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print(f"FAIL node and npm are needed for the openai SDK test. Run as root:\n  {APT}")
        print("0 passed, 1 failed")
        return 1
    os.makedirs(npm_dir, exist_ok=True)
    with open(os.path.join(HERE, "package.json")) as f:
        want = json.load(f)["dependencies"]["openai"]
    have = None
    try:
        with open(os.path.join(npm_dir, "node_modules", "openai", "package.json")) as f:
            have = json.load(f)["version"]
    except OSError:
        pass
    if have != want:
        shutil.copy(os.path.join(HERE, "package.json"), os.path.join(npm_dir, "package.json"))
        r = subprocess.run([npm, "install", "--prefix", npm_dir, "--no-audit", "--no-fund",
                            "--no-package-lock"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL npm install openai@{want} into {npm_dir}:\n{r.stdout}\n{r.stderr}")
            print("0 passed, 1 failed")
            return 1
    # run the test from NPM_DIR so `import 'openai'` resolves there
    test = os.path.join(npm_dir, "openai_sdk_test.mjs")
    shutil.copy(os.path.join(HERE, "openai_sdk_test.mjs"), test)

    test_server.configure([binary, libdir])
    key = "sk-alice-test"
    s = test_server.Server("--api-key", key)
    # the same model as an embeddings server, for embeddings.create
    se = test_server.Server("--api-key", key, "--embeddings", "--pooling", "mean", "--parallel", "2")
    try:
        env = dict(os.environ, ALICE_BASE_URL=f"http://127.0.0.1:{s.port}/v1", ALICE_API_KEY_FOR_TEST=key,
                   ALICE_EMBED_BASE_URL=f"http://127.0.0.1:{se.port}/v1")
        r = subprocess.run([node, test], env=env, timeout=600)
        rc = r.returncode
    finally:
        if s.stop() != 0:
            print("FAIL server did not exit 0")
            rc = 1
        if se.stop() != 0:
            print("FAIL embeddings server did not exit 0")
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
