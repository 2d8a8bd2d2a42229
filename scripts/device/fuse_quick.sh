#!/usr/bin/env bash
# The decode fusions of session 33 in the least device time: their test
# (core_test_decode_fuse_cuda), batch invariance on the 1B (64 rows) with
# both on, and tg128 of the 1B Q4_K_M with each switch on and off,
# interleaved.
# there: . scripts/device/setup.sh .devbuild && scripts/device/fuse_quick.sh
set -u
stages=""
. "$(dirname "$0")/lib.sh" fq
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mk llama-1b Q4_K_M
f=/tmp/llama-1b-Q4_K_M.gguf
timeout 150 "$b/bin/core_test_decode_fuse_cuda" > "$out/d.log" 2>&1
echo "decode fusions: rc $? $(syn "$out/d.log")"; grep -E "differ|never ran|ran with" "$out/d.log" | head -5
ALICE_CUDA_ROPE_MV=1 ALICE_CUDA_ATT_XQ=1 ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$f" timeout 120 "$b/bin/core_test_batch_invariance" --filter='batch/decode_many_rows_model' > "$out/i.log" 2>&1
echo "batch invariance (1B, 64 rows): rc $? $(syn "$out/i.log")"; grep -E "differ" "$out/i.log" | head -3
for r in 1 2; do
  for v in "ALICE_CUDA_ROPE_MV=1 ALICE_CUDA_ATT_XQ=1" "ALICE_CUDA_ROPE_MV=0 ALICE_CUDA_ATT_XQ=1" "ALICE_CUDA_ROPE_MV=1 ALICE_CUDA_ATT_XQ=0" "ALICE_CUDA_ROPE_MV=0 ALICE_CUDA_ATT_XQ=0"; do
    echo "r$r tg128 -p 0 $v: $(env $v timeout 60 "$b/bin/alice-bench" -m "$f" --backend cuda -p 0 -n 128 -r 3 --warmup-ms 300 2>/dev/null | grep tg128 | awk -F'|' '{print $8}')"
  done
done
