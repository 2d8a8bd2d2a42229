#!/usr/bin/env bash
# Pack a build for one device run of perf_run.sh: the build (bin + lib) and
# its libraries gzipped into .devpack/ (the CUDA module is ~15 MB raw, too
# much beside the parity fixtures under the 64 MiB carry limit), fixtures in
# .devfix/. Then `run` with carry [".devpack", ".devfix"] and a command
# starting with:
#   tar xzf .devpack/bundle.tar.gz && . scripts/device/setup.sh .devbuild && bench/cuda/perf_run.sh ...
#   [FIXTURES="name ..."] bench/cuda/perf_pack.sh [BUILD_DIR]   (default build-cudaperf)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cudaperf}
fxm=${FIXTURES:-llama2-spm-F16 llama-spm-Q8_0 llama-spm-Q4_K_M qwen3-BF16 gemma2-F32 llama-spm-Q4_0}
fx=""
for m in $fxm; do fx="$fx models/$m.gguf refs/$m.json refs/$m.bin"; done
scripts/device/pack.sh "$build" $fx vocab/ggml-vocab-llama-bpe.gguf > /dev/null
strip --strip-debug .devbuild/bin/* .devbuild/lib/*.so
grep -qx '/.devpack/' .git/info/exclude 2>/dev/null || echo '/.devpack/' >> .git/info/exclude
rm -rf .devpack && mkdir .devpack && tar czf .devpack/bundle.tar.gz .devbuild .devlibs
du -sh .devpack .devfix
