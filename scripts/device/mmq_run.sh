#!/usr/bin/env bash
# The integer tensor-core prefill GEMM (backends/cuda/mmq.cu) on the GPU
# device: correctness (mm_prefill on cuda, and with ALICE_CUDA_MMQ=0 to
# show the old F16 path misses it; op test; invariance), parity of the
# carried quantized fixtures with and without it, and alice-bench pp / tg.
# Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf
# models/llama-spm-... refs/llama-spm-...; there: . scripts/device/setup.sh
# .devbuild && scripts/device/mmq_run.sh [check parity mm bench bench8b]
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/mmq_out}
mkdir -p "$out"
stages=${*:-check parity bench}
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
syn() { grep -E 'Synthesis' "$1" | tail -1 | sed 's/.*Synthesis: //'; }
mk() { [ -f "/tmp/$1-$2.gguf" ] || timeout 200 "$b/bin/alice-mkmodel" --shape "$1" --type "$2" --vocab "$voc" -o "/tmp/$1-$2.gguf" --threads 16 >> "$out/mk.log" 2>&1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
if has check; then
  export ALICE_CUDA_MMQ=1 # the integer GEMM (its build default may be off)
  ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/backends_test_mm_prefill" --verbose > "$out/mmp.log" 2>&1
  echo "mm_prefill: rc $? $(syn "$out/mmp.log")"; grep -E "cuda" "$out/mmp.log" | grep -E "ERR|worst" | cut -c1-160 | head -40
  ALICE_CUDA_MMQ=0 timeout 120 "$b/bin/backends_test_mm_prefill" --verbose > "$out/mmp0.log" 2>&1
  echo "mm_prefill, ALICE_CUDA_MMQ=0 (F16 GEMM; expected to fail): rc $? $(syn "$out/mmp0.log")"; grep -E "\[cuda\]" "$out/mmp0.log" | cut -c1-140 | head -12
  timeout 200 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
  echo "ops: rc $? $(syn "$out/ops.log")"; grep -E "FAIL|fail" "$out/ops.log" | head -10
  timeout 200 "$b/bin/backends_test_mm_invariance" > "$out/mminv.log" 2>&1; echo "mm_invariance: rc $? $(syn "$out/mminv.log")"
  mk llama-1b Q4_K_M
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL=/tmp/llama-1b-Q4_K_M.gguf timeout 200 "$b/bin/core_test_batch_invariance" > "$out/inv.log" 2>&1
  echo "batch invariance cuda: rc $? $(syn "$out/inv.log")"; grep -E "differ|FAIL" "$out/inv.log" | head -5
  unset ALICE_CUDA_MMQ
fi
if has parity; then
  for mode in 1 0; do
    for m in .devfix/models/*.gguf; do
      n=$(basename "$m" .gguf); id=$(echo "$n" | tr '-' '_')
      ALICE_CUDA_MMQ=$mode ALICE_FIXTURES_DIR=.devfix ALICE_TEST_BACKEND=cuda timeout 90 "$b/bin/core_test_parity" --filter="parity/$id" > "$out/par_${mode}_$n.log" 2>&1
      echo "MMQ=$mode rc $? $(grep '^parity ' "$out/par_${mode}_$n.log" | sed 's/(bounds.*;/;/')"
    done
  done
fi
bench() { # model: pp512/tg128 and pp114 with the integer GEMM and without
  for mode in 1 0; do
    ALICE_CUDA_MMQ=$mode timeout 120 "$b/bin/alice-bench" -m "$1" --backend cuda -p 512 -n 128 -r 3 2>/dev/null | grep -E "pp512|tg128" | sed "s/^/MMQ=$mode /"
    ALICE_CUDA_MMQ=$mode timeout 60 "$b/bin/alice-bench" -m "$1" --backend cuda -p 114 -n 0 -r 3 2>/dev/null | grep -E "pp114" | sed "s/^/MMQ=$mode /"
  done
}
if has mm; then # one MUL_MAT node: ms and GFLOP/s, integer GEMM against the F16 one
  for shp in "2048 8192 512" "8192 2048 512" "4096 14336 512" "2048 2048 114" "2048 512 114"; do
    for mode in "ALICE_CUDA_MMQ=1" "ALICE_CUDA_MMQ_BN=32" "ALICE_CUDA_MMQ_BN=64" "ALICE_CUDA_MMQ=0"; do
      env ALICE_CUDA_MMQ=1 $mode timeout 60 "$b/bin/bench_mul_mat" cuda 1 $shp Q4_K Q6_K Q8_0 2>&1 | grep "K=" | sed "s/^/$mode: /"
    done
  done
fi
if has bench; then
  for t in Q4_K_M Q8_0; do mk llama-1b $t; bench /tmp/llama-1b-$t.gguf; done
fi
if has bench8b; then
  mk llama-8b Q4_K_M; bench /tmp/llama-8b-Q4_K_M.gguf
fi
