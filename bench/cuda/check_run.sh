#!/usr/bin/env bash
# One device run of the CUDA correctness checks plus a decode benchmark
# (pack with bench/cuda/perf_pack.sh BUILD first; carry .devpack, .devfix):
#   tar xzf .devpack/bundle.tar.gz && . scripts/device/setup.sh .devbuild && bench/cuda/check_run.sh
# ops (backends_test_ops, cuda and cpu), core_test_parity on cuda for every
# carried fixture, core_test_batch_invariance on cuda, test_backends.py
# --backend cuda on the carried fixtures, then alice-bench on a synthetic 1B
# Q4_K_M (pp512 + tg128). Logs under $OUT; a summary is printed last.
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/cuda_out}
mkdir -p "$out"
t0=$(date +%s)
summary=""
add() { summary="$summary$1 (+$(( $(date +%s) - t0 )) s)"$'\n'; echo "== $1"; }
timeout 60 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
add "ops: rc $?; cuda ok $(grep -c '^\[cuda\].* ok:' "$out/ops.log"), cuda not ok $(grep '^\[cuda\]' "$out/ops.log" | grep -vc ' ok:'); $(grep -E 'Synthesis' "$out/ops.log" | tail -1)"
grep '^\[cuda\]' "$out/ops.log" | grep -v ' ok:' | head -10
if [ -x "$b/bin/alice-cuda-bench" ]; then
  timeout 60 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" --quick > "$out/cuda_bench.log" 2>&1
  add "alice-cuda-bench --quick: rc $? $(grep -E '^(PASS|FAIL)' "$out/cuda_bench.log" | tail -1)"
  grep -E "X$" "$out/cuda_bench.log" | head -8
fi
models=""
for m in .devfix/models/*.gguf; do
  n=$(basename "$m" .gguf); id=$(echo "$n" | tr '-' '_'); models="$models${models:+,}$n"
  ALICE_TEST_BACKEND=cuda timeout 60 "$b/bin/core_test_parity" --filter="parity/$id" >> "$out/parity.log" 2>&1
  add "parity $n: rc $?"
done
grep -E "^parity .*backend cuda|over the|FAIL" "$out/parity.log" | head -40
ALICE_TEST_BACKEND=cuda timeout 90 "$b/bin/core_test_batch_invariance" --jobs=4 > "$out/inv.log" 2>&1
add "batch invariance (cuda): rc $? $(grep -E 'Synthesis' "$out/inv.log" | tail -1)"
grep -E "differ|FAIL|fixture|load" "$out/inv.log" | head -12
timeout 120 python3 tests/server/test_backends.py --backend cuda --models "$models" > "$out/srv_cuda.txt" 2>&1
add "test_backends cuda: rc $? $(tail -1 "$out/srv_cuda.txt")"
grep -E "^FAIL" "$out/srv_cuda.txt" | cut -c1-300 | head -10
f=/tmp/llama-1b-Q4_K_M.gguf
timeout 60 "$b/bin/alice-mkmodel" --shape llama-1b --type Q4_K_M --vocab .devfix/vocab/ggml-vocab-llama-bpe.gguf -o "$f" --threads 16 > "$out/mk.log" 2>&1
timeout 60 "$b/bin/alice-bench" -m "$f" --backend cuda -p 512 -n 128 -r 3 > "$out/bench.log" 2>&1
add "bench 1B Q4_K_M: rc $? $(grep '^| ' "$out/bench.log" | tail -2 | tr '\n' ' ')"
echo "==== summary"
printf '%s' "$summary"
