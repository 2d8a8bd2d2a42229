#!/usr/bin/env bash
# Whole-product check on the GPU device machine, CUDA and Vulkan, in one run:
#   FIXTURES="..." bench/cuda/perf_pack.sh BUILD      (here)
#   tar xzf .devpack/bundle.tar.gz && . scripts/device/setup.sh .devbuild && scripts/device/validate.sh [bench [shape:type ...]]
# (carry .devpack .devfix .gl). Op tests, parity (plain and hybrid) on cuda
# and vulkan for every carried fixture, the SSM op test, CUDA error
# handling, batch invariance on cuda, the server test on both backends;
# with `bench`, alice-bench tg128/pp512 on synthetic 1B/8B models (vocab from
# a carried llama-bpe model). Logs under $OUT; a summary is printed last.
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/validate_out}
mkdir -p "$out"
t0=$(date +%s)
summary=""
add() { summary="$summary$1 (+$(( $(date +%s) - t0 )) s)"$'\n'; }
syn() { grep -E 'Synthesis' "$1" | tail -1 | sed 's/.*Synthesis: //'; }

timeout 90 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
add "ops: rc $? $(syn "$out/ops.log"); cuda not ok $(grep '^\[cuda\]' "$out/ops.log" | grep -vc ' ok:'), vulkan not ok $(grep '^\[vulkan\]' "$out/ops.log" | grep -vc ' ok:')"
timeout 60 "$b/bin/backends_test_ops_ssm" > "$out/ssm.log" 2>&1; add "ops_ssm: rc $? $(syn "$out/ssm.log")"
timeout 60 "$b/bin/backends_test_cuda_errors" > "$out/err.log" 2>&1; add "cuda_errors: rc $? $(syn "$out/err.log")"
timeout 60 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" --quick > "$out/cuda_bench.log" 2>&1
add "cuda-bench --quick: rc $? $(grep -E '^(PASS|FAIL)' "$out/cuda_bench.log" | tail -1)"

models=""
for be in cuda vulkan; do
  for m in .devfix/models/*.gguf; do
    n=$(basename "$m" .gguf); id=$(echo "$n" | tr '-' '_')
    [ "$be" = cuda ] && models="$models${models:+,}$n"
    case "$n" in gemma2*|qwen35*) t=core_test_parity_hybrid; f="parity_hybrid/$id" ;; *) t=core_test_parity; f="parity/$id" ;; esac
    ALICE_TEST_BACKEND=$be timeout 90 "$b/bin/$t" --filter="$f" >> "$out/parity_$be.log" 2>&1
    add "parity $be $n: rc $?"
  done
  ALICE_TEST_BACKEND=$be timeout 60 "$b/bin/core_test_parity_hybrid" --filter='recurrent_state/*' >> "$out/parity_$be.log" 2>&1
  add "recurrent_state $be: rc $?"
done
m1=$(ls .devfix/models/*.gguf | grep -v -E 'gemma2|qwen35' | head -1)
n1=$(basename "$m1" .gguf); id1=$(echo "$n1" | tr '-' '_')
ALICE_CUDA_GEMM_PRECISE=1 ALICE_TEST_BACKEND=cuda timeout 60 "$b/bin/core_test_parity" --filter="parity/$id1" >> "$out/parity_cuda.log" 2>&1
add "parity cuda GEMM_PRECISE $n1: rc $?"
ALICE_TEST_BACKEND=cuda timeout 90 "$b/bin/core_test_batch_invariance" --jobs=4 > "$out/inv.log" 2>&1
add "batch invariance cuda: rc $? $(syn "$out/inv.log")"
for be in cuda vulkan; do
  timeout 150 python3 tests/server/test_backends.py --backend $be --models "$models" > "$out/srv_$be.txt" 2>&1
  add "server $be: rc $? $(tail -1 "$out/srv_$be.txt")"
done

if [ "${1:-}" = bench ]; then
  voc=$(ls .devfix/models/llama3-bpe-*.gguf .devfix/vocab/ggml-vocab-llama-bpe.gguf 2>/dev/null | head -1)
  shift
  list=${*:-llama-1b:Q4_K_M llama-1b:Q8_0 llama-1b:F16 llama-8b:F16 llama-8b:Q4_K_M}
  for st in $list; do
    IFS=: read -r shape type <<<"$st"
    f=/tmp/$shape-$type.gguf
    timeout 150 "$b/bin/alice-mkmodel" --shape "$shape" --type "$type" --vocab "$voc" -o "$f" --threads 16 >> "$out/mk.log" 2>&1
    timeout 120 "$b/bin/alice-bench" -m "$f" --backend cuda -p 512 -n 128 -r 3 >> "$out/bench.log" 2>&1
    add "bench $shape $type: rc $? $(grep '^| ' "$out/bench.log" | tail -2 | awk -F'|' '{printf "%s %s; ", $7, $8}')"
    rm -f "$f"
  done
fi
grep -hE "^parity .*backend|over the|FAIL" "$out"/parity_*.log | cut -c1-400 | head -60
grep -hE "^FAIL" "$out"/srv_*.txt | cut -c1-300 | head -10
echo "==== summary"
printf '%s' "$summary"
