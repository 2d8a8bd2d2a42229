#!/usr/bin/env bash
# Decode mat-vec with R rows per warp (ALICE_CUDA_ROWS1=2|4; default K-quants
# 2, packed Q8_0 4) against the one-row kernel (0): bit identity
# (mm_invariance, op test, batch invariance) and tg128 of Q4_K_M and Q8_0.
# Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf; there:
# . scripts/device/setup.sh .devbuild && scripts/device/rows1_run.sh [check bench]
set -u
stages=${*:-check bench}
. "$(dirname "$0")/lib.sh" rows1
tg() { timeout 100 "$b/bin/alice-bench" -m "$1" --backend cuda -p 0 -n 128 -r 3 --warmup-ms 400 2>/dev/null | grep tg128 | awk -F'|' '{print $8}'; }
RS=${RS:-4 2}
if has check; then
  for r in $RS; do
    ALICE_CUDA_ROWS1=$r timeout 300 "$b/bin/backends_test_mm_invariance" > "$out/mminv$r.log" 2>&1; echo "ROWS1=$r mm_invariance: rc $? $(syn "$out/mminv$r.log")"
    grep -E "differ" "$out/mminv$r.log" | head -3
  done
  [ -n "${NOOPS:-}" ] || { ALICE_CUDA_ROWS1=4 timeout 300 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1; echo "ROWS1=4 ops: rc $? $(syn "$out/ops.log")"; grep FAIL "$out/ops.log" | head -5; }
  mk llama-1b Q4_K_M
  for r in $RS; do
    ALICE_CUDA_ROWS1=$r ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL=/tmp/llama-1b-Q4_K_M.gguf timeout 300 "$b/bin/core_test_batch_invariance" --filter 'batch/decode_many_rows_model' > "$out/inv$r.log" 2>&1
    echo "ROWS1=$r batch invariance 1B Q4_K_M (64 rows): rc $? $(syn "$out/inv$r.log")"
  done
fi
if has bench; then
  for t in Q4_K_M Q8_0; do for m in llama-8b llama-1b; do mk $m $t; for rd in $(seq 1 ${ROUNDS:-2}); do
    line="$m $t tg128 round $rd: ROWS1=0 $(ALICE_CUDA_ROWS1=0 tg /tmp/$m-$t.gguf)"
    for r in $RS; do line="$line | $r $(ALICE_CUDA_ROWS1=$r tg /tmp/$m-$t.gguf)"; done
    echo "$line"
  done; done; done
fi
