#!/usr/bin/env bash
# Session 20 device call: rows-per-warp decode by default (K-quants and
# packed Q8_0): bits (mm_invariance, op test, batch invariance) and tg128;
# on an H200 the one-client server bar.
# there: . scripts/device/setup.sh .devbuild && scripts/device/s20_run.sh [check bench server]
set -u
stages=${*:-check bench server}
here=$(dirname "$0")
. "$here/lib.sh" s20
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $gpu"
tg() { timeout 100 "$b/bin/alice-bench" -m "$1" --backend cuda -p 0 -n 128 -r 3 --warmup-ms 400 2>/dev/null | grep tg128 | awk -F'|' '{print $8}'; }
mk llama-1b Q4_K_M; mk llama-1b Q8_0
if has check; then
  timeout 300 "$b/bin/backends_test_mm_invariance" > "$out/mminv.log" 2>&1; echo "mm_invariance: rc $? $(syn "$out/mminv.log")"; grep differ "$out/mminv.log" | head -3
  timeout 300 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1; echo "ops: rc $? $(syn "$out/ops.log")"; grep FAIL "$out/ops.log" | head -5
  for t in Q4_K_M Q8_0; do
    ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL=/tmp/llama-1b-$t.gguf timeout 300 "$b/bin/core_test_batch_invariance" --filter 'batch/decode_many_rows_model' > "$out/inv$t.log" 2>&1
    echo "batch invariance 1B $t (64 rows): rc $? $(syn "$out/inv$t.log")"
  done
fi
if has bench; then
  mk llama-8b Q8_0
  for rd in 1 2; do for m in llama-1b-Q8_0 llama-8b-Q8_0; do
    echo "$m tg128 round $rd: ROWS1=0 $(ALICE_CUDA_ROWS1=0 tg /tmp/$m.gguf) | 2 $(tg /tmp/$m.gguf) | 4 $(ALICE_CUDA_ROWS1=4 tg /tmp/$m.gguf)"
  done; done
  mk llama-8b Q4_K_M
  for m in llama-1b-Q4_K_M llama-8b-Q4_K_M; do
    echo "$m tg128: default $(tg /tmp/$m.gguf) | MMV_TARGET=16384 $(ALICE_CUDA_MMV_TARGET=16384 tg /tmp/$m.gguf) | ROWS1=0 $(ALICE_CUDA_ROWS1=0 tg /tmp/$m.gguf)"
  done
fi
if has server; then case "$gpu" in *H200*) M=/tmp/llama-1b-Q4_K_M.gguf "$here/pipe_run.sh" server1 ;; esac; fi
