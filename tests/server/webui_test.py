#!/usr/bin/env python3
"""The chat page at / in a real browser (issue 21): Debian's chromium driven
by puppeteer-core (webui_test.mjs) against the real alice-llm-server.

usage: webui_test.py SERVER_BINARY BACKEND_LIB_DIR NPM_DIR
Skips (exit 77, with the reason) when no chromium is installed here; CI
installs Debian's `chromium` (.ci/run), so there it always runs. The browser
is $ALICE_CHROMIUM, else chromium / chromium-browser on PATH. Installs the npm
dependencies like sdk_test.py (same NPM_DIR, same lock), starts the server
with an API key and hands the test its port, key and log file.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sdk_test  # noqa: E402
import test_server  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    binary, libdir, npm_dir = sys.argv[1:]
    chromium = os.environ.get("ALICE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP webui browser test: no chromium here (as root: apt-get install -y chromium; CI installs it)")
        return 77
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print(f"FAIL node and npm are needed for the browser test. Run as root:\n  {sdk_test.APT}")
        return 1
    err = sdk_test.npm_install(npm, npm_dir)
    if err:
        print(f"FAIL {err}")
        return 1
    test = os.path.join(npm_dir, "webui_test.mjs")
    shutil.copy(os.path.join(HERE, "webui_test.mjs"), test)
    test_server.configure([binary, libdir])
    key = "sk-alice-page"
    # a 4096 context: the Stop check's answer (3000 tokens) runs for many seconds
    s = test_server.Server("--api-key", key, "--metrics-no-auth", "--parallel", "2", "--ctx-size", "4096")
    try:
        env = dict(os.environ, ALICE_PORT=str(s.port), ALICE_KEY=key, ALICE_LOG=s.log.name, ALICE_CHROMIUM=chromium)
        rc = subprocess.run([node, test], env=env, timeout=600).returncode
    finally:
        if s.stop() != 0:
            print("FAIL server did not exit 0")
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
