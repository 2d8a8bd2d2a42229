#!/usr/bin/env bash
# The paged KV cache on the CUDA backend (device machine): the op test
# (paged ATTENTION bit-identical to the contiguous layout, every kernel
# regime), the engine over a small pool, and the server with --parallel 256
# and a small --kv-cells, each on cuda.
#   . scripts/device/setup.sh .devbuild && scripts/device/paged_check.sh
# Needs in .devbuild/bin: backends_test_ops, server_test_kv_paged,
# alice-llm-server (and core_test_batch_invariance / core_test_parity_hybrid
# when present, with FULL=1); fixtures: models/qwen35-F16.gguf (+ refs/qwen35-F16.*).
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/paged_out}
mkdir -p "$out"
summary=""
add() { summary="$summary$1"$'\n'; }
timeout 300 "$b/bin/backends_test_ops" --jobs=4 --filter='ops/attention_paged*' > "$out/ops_paged.log" 2>&1
add "ops/attention_paged: rc $? ($(grep -c '^\[cuda\].*bit-identical' "$out/ops_paged.log") cuda cases bit-identical)"
grep -E '^\[cuda\]' "$out/ops_paged.log" | grep -v bit-identical | head -20
timeout 300 "$b/bin/backends_test_ops" --jobs=4 --filter='ops/backend_op*' > "$out/ops.log" 2>&1
add "ops/backend_op: rc $? ($(grep '^\[cuda\]' "$out/ops.log" | grep -vc ' ok:') cuda cases not ok)"
grep -E '^\[cuda\]' "$out/ops.log" | grep -v ' ok:' | head -20
ALICE_TEST_BACKEND=cuda timeout 600 "$b/bin/server_test_kv_paged" --jobs=1 > "$out/kv_paged.log" 2>&1
add "server_test_kv_paged (cuda): rc $?"
grep -E 'waited|FAIL|Assert|Synthesis' "$out/kv_paged.log" | head -20
if [ -n "${FULL:-}" ] && [ -x "$b/bin/core_test_parity_hybrid" ]; then
  ALICE_TEST_BACKEND=cuda timeout 600 "$b/bin/core_test_parity_hybrid" --jobs=1 > "$out/parity_hybrid.log" 2>&1
  add "core_test_parity_hybrid (cuda): rc $?"
  grep -E 'FAIL|Synthesis' "$out/parity_hybrid.log" | head -10
fi
if [ -n "${FULL:-}" ] && [ -x "$b/bin/core_test_batch_invariance" ]; then
  ALICE_TEST_BACKEND=cuda timeout 600 "$b/bin/core_test_batch_invariance" --jobs=1 > "$out/batch_inv.log" 2>&1
  add "core_test_batch_invariance (cuda): rc $? (fixtures not carried fail: see the log)"
  grep -E 'FAIL|Synthesis|Assert' "$out/batch_inv.log" | head -20
fi
ALICE_TEST_BACKEND=cuda timeout 600 python3 tests/server/test_kv_pool.py "$b/bin/alice-llm-server" "$b/lib" > "$out/kv_pool_http.log" 2>&1
add "test_kv_pool.py (cuda): rc $?"
grep -E '^FAIL|passed' "$out/kv_pool_http.log" | head -20
echo "---- summary"
printf '%s' "$summary"
