#!/usr/bin/env bash
# K-quant decode mat-vec with R rows per warp (ALICE_CUDA_ROWS1=2|4) against
# the one-row kernel (0): bit identity (mm_invariance, op test) and tg128.
# Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf; there:
# . scripts/device/setup.sh .devbuild && scripts/device/rows1_run.sh [check bench]
set -u
b=${BUILD:-.devbuild}; out=${OUT:-/tmp/rows1_out}; mkdir -p "$out"
stages=${*:-check bench}
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
syn() { grep -E 'Synthesis' "$1" | tail -1 | sed 's/.*Synthesis: //'; }
mk() { [ -f "/tmp/$1-$2.gguf" ] || timeout 200 "$b/bin/alice-mkmodel" --shape "$1" --type "$2" --vocab "$voc" -o "/tmp/$1-$2.gguf" --threads 16 >> "$out/mk.log" 2>&1; }
tg() { timeout 100 "$b/bin/alice-bench" -m "$1" --backend cuda -p 0 -n 128 -r 3 --warmup-ms 400 2>/dev/null | grep tg128 | awk -F'|' '{print $8}'; }
if has check; then
  for r in 4 2; do
    ALICE_CUDA_ROWS1=$r timeout 300 "$b/bin/backends_test_mm_invariance" > "$out/mminv$r.log" 2>&1; echo "ROWS1=$r mm_invariance: rc $? $(syn "$out/mminv$r.log")"
    grep -E "differ" "$out/mminv$r.log" | head -3
  done
  ALICE_CUDA_ROWS1=4 timeout 300 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1; echo "ROWS1=4 ops: rc $? $(syn "$out/ops.log")"; grep FAIL "$out/ops.log" | head -5
fi
if has bench; then
  for m in llama-8b llama-1b; do mk $m Q4_K_M; for rd in 1 2; do
    echo "$m Q4_K_M tg128 round $rd: ROWS1=0 $(ALICE_CUDA_ROWS1=0 tg /tmp/$m-Q4_K_M.gguf) | 2 $(ALICE_CUDA_ROWS1=2 tg /tmp/$m-Q4_K_M.gguf) | 4 $(ALICE_CUDA_ROWS1=4 tg /tmp/$m-Q4_K_M.gguf)"
  done; done
fi
