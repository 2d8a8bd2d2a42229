#!/usr/bin/env bash
# Session 20 device call: rows-per-warp decode for F16 (ALICE_CUDA_ROWS1
# forces R for every type): bits (mm_invariance, op test, batch invariance)
# and tg128; on an H200 the one-client server bar.
# there: . scripts/device/setup.sh .devbuild && scripts/device/s20_run.sh [check bench server]
set -u
stages=${*:-check bench server}
here=$(dirname "$0")
. "$here/lib.sh" s20
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $gpu"
tg() { timeout 150 "$b/bin/alice-bench" -m "$1" --backend cuda -p 0 -n 128 -r 3 --warmup-ms 400 2>/dev/null | grep tg128 | awk -F'|' '{print $8}'; }
mk llama-1b F16
if has check; then
  for r in 2 4; do
    ALICE_CUDA_ROWS1=$r timeout 300 "$b/bin/backends_test_mm_invariance" > "$out/mminv$r.log" 2>&1; echo "ROWS1=$r mm_invariance: rc $? $(syn "$out/mminv$r.log")"; grep differ "$out/mminv$r.log" | head -3
  done
  ALICE_CUDA_ROWS1=2 timeout 300 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1; echo "ROWS1=2 ops: rc $? $(syn "$out/ops.log")"; grep FAIL "$out/ops.log" | head -5
  ALICE_CUDA_ROWS1=2 ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL=/tmp/llama-1b-F16.gguf timeout 300 "$b/bin/core_test_batch_invariance" --filter 'batch/decode_many_rows_model' > "$out/invF16.log" 2>&1
  echo "ROWS1=2 batch invariance 1B F16 (64 rows): rc $? $(syn "$out/invF16.log")"
fi
if has bench; then
  mk llama-8b F16
  for rd in 1; do for m in llama-1b-F16 llama-8b-F16; do
    echo "$m tg128 round $rd: ROWS1=0 $(ALICE_CUDA_ROWS1=0 tg /tmp/$m.gguf) | 2 $(ALICE_CUDA_ROWS1=2 tg /tmp/$m.gguf) | 4 $(ALICE_CUDA_ROWS1=4 tg /tmp/$m.gguf)"
  done; done
fi
if has server; then case "$gpu" in *H200*) mk llama-1b Q4_K_M; M=/tmp/llama-1b-Q4_K_M.gguf "$here/pipe_run.sh" server1 ;; esac; fi
