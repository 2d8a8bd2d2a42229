#!/usr/bin/env bash
# Weights repacked at load (backends/cuda/pack.cu) on the GPU device:
# the op test's packed cases, invariance and parity with packing on and off
# (ALICE_PACK=0), then alice-bench tg/pp A/B on the same card.
# Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf
# models/llama-spm-Q8_0.gguf refs/llama-spm-Q8_0.{json,bin}; there:
# . scripts/device/setup.sh .devbuild && scripts/device/repack_run.sh [check parity bench]
set -u
stages=${*:-check parity bench}
. "$(dirname "$0")/lib.sh" repack
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
TYPES=${TYPES:-Q8_0 Q4_K_M}
if has check; then
  timeout 300 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
  echo "ops: rc $? $(syn "$out/ops.log")"; grep -E "FAIL|fail" "$out/ops.log" | head -10
  grep -E "^\[cuda\].*pack" "$out/ops.log" | cut -c1-150
  timeout 200 "$b/bin/backends_test_mm_invariance" > "$out/mminv.log" 2>&1; echo "mm_invariance: rc $? $(syn "$out/mminv.log")"
  for t in $TYPES; do
    mk llama-1b $t
    ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL=/tmp/llama-1b-$t.gguf timeout 300 "$b/bin/core_test_batch_invariance" > "$out/inv_$t.log" 2>&1
    echo "batch invariance cuda 1B $t: rc $? $(syn "$out/inv_$t.log")"; grep -E "differ|FAIL|repacked" "$out/inv_$t.log" | head -5
  done
fi
if has parity; then
  for pk in 1 0; do
    for m in .devfix/models/*.gguf; do
      n=$(basename "$m" .gguf); id=$(echo "$n" | tr '-' '_')
      ALICE_PACK=$pk ALICE_FIXTURES_DIR=.devfix ALICE_TEST_BACKEND=cuda timeout 90 "$b/bin/core_test_parity" --filter="parity/$id" > "$out/par_${pk}_$n.log" 2>&1
      echo "PACK=$pk rc $? $(grep '^parity ' "$out/par_${pk}_$n.log" | sed 's/(bounds.*;/;/') $(grep -c repacked "$out/par_${pk}_$n.log") repack log lines"
    done
  done
fi
if has bench; then
  for t in $TYPES; do
    mk llama-1b $t
    for r in 1 2; do
      for pk in 0 1; do
        ALICE_PACK=$pk timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend cuda -p 512 -n 128 -r 3 2>"$out/bench_${t}_$pk.err" | grep -E "pp512|tg128" | sed "s/^/1B $t PACK=$pk round $r: /"
      done
    done
    grep -h repacked "$out/bench_${t}_1.err" | head -1
  done
fi
if has bench8b; then
  for t in $TYPES; do
    mk llama-8b $t
    for pk in 0 1; do
      ALICE_PACK=$pk timeout 200 "$b/bin/alice-bench" -m /tmp/llama-8b-$t.gguf --backend cuda -p 512 -n 128 -r 3 2>/dev/null | grep -E "pp512|tg128" | sed "s/^/8B $t PACK=$pk: /"
    done
  done
fi
