#!/usr/bin/env bash
# CUDA backend on the device machine: kernel self-check + microbench, the op
# test, fixture parity, and (optionally) alice-bench on synthetic models.
#   . scripts/device/setup.sh build-dev && scripts/device/cuda_check.sh [stages...]
# stages: bench (alice-cuda-bench), ops (backends_test_ops), parity
# (core_test_parity on the carried fixtures), model:<shape>:<type> (alice-bench).
# Logs go to $OUT (when set) and a summary is printed last.
# BUILD (default build-dev) names the carried build. A full build dir is ~45 MB, too much
# with fixtures under the 64 MiB carry limit; a slim copy works as well:
#   mkdir -p build-slim/bin build-slim/lib && cp build-dev/bin/{alice-cuda-bench,backends_test_ops,\
#     core_test_parity,alice-bench,alice-mkmodel} build-slim/bin && cp build-dev/lib/libalice-backend-{cpu,cuda}.so \
#     build-slim/lib && strip --strip-debug build-slim/bin/* build-slim/lib/*.so
#   scripts/device/pack.sh build-slim <fixtures...>;  carry build-slim .devlibs .devfix;
#   command: . scripts/device/setup.sh build-slim && BUILD=build-slim scripts/device/cuda_check.sh ...
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
  pdebug)
    # per-position errors of one fixture in three modes (fusion off, graphs off)
    for mode in "" "ALICE_CUDA_FUSE=0" "ALICE_CUDA_GRAPHS=0"; do
      env $mode ALICE_PARITY_VERBOSE=1 ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/core_test_parity" --filter="parity/${PDEBUG:-llama2_spm_F16}" > "$out/pdebug.log" 2>&1
      echo "== mode [$mode]"; grep -E "top-10 error ([1-9]|0\.[3-9])" "$out/pdebug.log" | head -8; grep "^parity" "$out/pdebug.log"
    done
    ;;
  model:*)
    IFS=: read -r _ shape type <<<"$stage"
    f=/tmp/$shape-$type.gguf
    [ -f "$f" ] || "$b/bin/alice-mkmodel" --shape "$shape" --type "$type" --vocab .devfix/vocab/ggml-vocab-llama-bpe.gguf -o "$f" --threads 16 > "$out/mk.log" 2>&1
    timeout 300 "$b/bin/alice-bench" -m "$f" --backend cuda -p 512 -n 128 -r 3 > "$out/ab_$shape-$type.log" 2>&1
    rc=$?
    tail -3 "$out/ab_$shape-$type.log"
    add "model $shape $type: rc $rc $(grep '^| ' "$out/ab_$shape-$type.log" | tail -1)"
    rm -f "$f"
    ;;
  esac
done
echo "==== summary"
printf '%s' "$summary"
