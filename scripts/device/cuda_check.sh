#!/usr/bin/env bash
# CUDA backend on the device machine: kernel self-check + microbench, the op
# test, fixture parity, and (optionally) alice-bench on synthetic models.
#   . scripts/device/setup.sh build-dev && scripts/device/cuda_check.sh [stages...]
# stages: bench (alice-cuda-bench), ops (backends_test_ops), parity
# (core_test_parity on the carried fixtures), model:<shape>:<type> (alice-bench).
# Logs go to $OUT (when set) and a summary is printed last.
set -u
b=${BUILD:-build-dev}
out=${OUT:-/tmp/cuda_out}
mkdir -p "$out"
summary=""
add() { summary="$summary$1"$'\n'; }
for stage in "$@"; do
  case "$stage" in
  bench)
    ALICE_CUDA_FUSE=0 timeout 240 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" 2>&1 | tee "$out/cuda_bench.log"
    add "bench: rc ${PIPESTATUS[0]}"
    ;;
  quick)
    timeout 120 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" --quick 2>&1 | tee "$out/cuda_bench.log"
    add "quick: rc ${PIPESTATUS[0]}"
    ;;
  ops)
    timeout 300 "$b/bin/backends_test_ops" --jobs=4 > "$out/ops.log" 2>&1
    rc=$?
    grep -E "^\[cuda\]" "$out/ops.log" | grep -v " ok:" | head -40
    add "ops: rc $rc; cuda cases ok $(grep -c '^\[cuda\].* ok:' "$out/ops.log"), not ok $(grep '^\[cuda\]' "$out/ops.log" | grep -vc ' ok:')"
    grep -E "Synthesis|tested" "$out/ops.log" | tail -2
    ;;
  parity)
    filt=""
    for m in .devfix/models/*.gguf; do
      n=$(basename "$m" .gguf); id=$(echo "$n" | tr '-' '_')
      ALICE_TEST_BACKEND=cuda timeout 300 "$b/bin/core_test_parity" --filter="parity/$id" >> "$out/parity.log" 2>&1
      add "parity $n: rc $?"
    done
    grep -E "worst|parity/|Synthesis|FAIL|fail" "$out/parity.log" | tail -40
    ;;
  model:*)
    IFS=: read -r _ shape type <<<"$stage"
    f=/tmp/$shape-$type.gguf
    [ -f "$f" ] || "$b/bin/alice-mkmodel" --shape "$shape" --type "$type" --vocab .devfix/vocab/ggml-vocab-llama-bpe.gguf -o "$f" --threads 16 > "$out/mk.log" 2>&1
    timeout 300 "$b/bin/alice-bench" -m "$f" --backend cuda -p 512 -n 128 -r 3 2>&1 | tee -a "$out/alice_bench.log" | tail -4
    add "model $shape $type: rc ${PIPESTATUS[0]}"
    ;;
  esac
done
echo "==== summary"
printf '%s' "$summary"
