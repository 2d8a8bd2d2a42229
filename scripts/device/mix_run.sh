#!/usr/bin/env bash
# A Q4_K_M layer's Q6_K V in the Q/K mat-vec launch (mmvq.cu, set.mix),
# ROPE / KV_WRITE in that launch (rope.cuh), the o-proj's rounding in the
# attention kernel: their tests on the GPU, then decode tg128 against
# ALICE_CUDA_MIX=0 (V in a launch of its own; AB_OFF lists other
# VAR=VALUE switches), interleaved,
# and the per-kernel times of a decode step (ncu, clocks and caches as
# they are). Here: scripts/device/pack.sh BUILD
# vocab/ggml-vocab-llama-bpe.gguf [fixtures]; there:
# . scripts/device/setup.sh .devbuild && scripts/device/mix_run.sh [test ab kern]
set -u
stages=${*:-test ab kern}
. "$(dirname "$0")/lib.sh" mix
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mk llama-1b Q4_K_M
f1=/tmp/llama-1b-Q4_K_M.gguf
tg() { timeout 120 "$b/bin/alice-bench" -m "$1" --backend cuda -p "$2" -n 128 -r 3 --warmup-ms 300 2>/dev/null | grep tg128 | awk -F'|' '{print $8}'; }
if has test; then
  ALICE_TEST_OPS=MUL_MAT timeout 300 "$b/bin/backends_test_ops" > "$out/ops.log" 2>&1; echo "ops MUL_MAT: rc $? $(syn "$out/ops.log")"; grep -E "\[cuda\].*(FAIL|fail)" "$out/ops.log" | head -4
  timeout 300 "$b/bin/backends_test_mm_invariance" > "$out/mmi.log" 2>&1; echo "mm invariance: rc $? $(syn "$out/mmi.log")"; grep -E "differ|FAIL" "$out/mmi.log" | head -4
  timeout 120 "$b/bin/backends_test_mix_cuda" > "$out/mix.log" 2>&1; echo "mix: rc $? $(syn "$out/mix.log")"; grep -E "differ|share" "$out/mix.log" | head -4
  [ -x "$b/bin/core_test_decode_fuse_cuda" ] && { timeout 300 "$b/bin/core_test_decode_fuse_cuda" > "$out/dfu.log" 2>&1; echo "decode fusions (rope in the mat-vec, rounding in the attention): rc $? $(syn "$out/dfu.log")"; grep -E "differ|never ran|ran with" "$out/dfu.log" | head -4; }
  ALICE_TEST_BACKEND=cuda timeout 400 "$b/bin/core_test_fusion" > "$out/fu.log" 2>&1; echo "fusion (fixtures carried: Q4_K_M, Q8_0; the others fail to open): rc $? $(syn "$out/fu.log")"; grep -E "differ" "$out/fu.log" | head -6
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$f1" timeout 400 "$b/bin/core_test_batch_invariance" --filter='batch/decode_*' > "$out/inv.log" 2>&1; echo "batch invariance (1B 64 rows; fixtures not carried fail to open): rc $? $(syn "$out/inv.log")"; grep -E "differ" "$out/inv.log" | head -4
  ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/core_test_parity" --verbose --filter="parity/llama_spm_Q4_K_M" > "$out/par.log" 2>&1
  echo "parity llama-spm-Q4_K_M: rc $? $(grep -m1 -E 'worst' "$out/par.log" | cut -c1-120)"
fi
if has ab; then # AB_OFF: one or more VAR=VALUE settings, each against the default
  for m in ${MODELS:-llama-1b:Q4_K_M llama-8b:Q4_K_M}; do
    mk ${m%%:*} ${m##*:}; f=/tmp/${m%%:*}-${m##*:}.gguf
    for r in 1 2; do
      for p in 0 512; do
        line="$m r$r tg128 -p $p: default $(tg $f $p)"
        for off in ${AB_OFF:-ALICE_CUDA_MIX=0}; do line="$line | $off $(export $off; tg $f $p)"; done
        echo "$line"
      done
    done
  done
fi
if has kern; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  timeout 300 "$ncu" --metrics gpu__time_duration.sum,dram__bytes_read.sum --cache-control none --clock-control none --csv --print-units base \
    "$b/bin/alice-bench" -m $f1 --backend cuda -p 0 -n 6 -r 1 > "$out/dkern.csv" 2> "$out/dkern.err"
  echo "== ncu 1B Q4_K_M decode step: rc $?"; python3 scripts/device/ncu_fwd.py "$out/dkern.csv" 2>&1 | head -14
fi
