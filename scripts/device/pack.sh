#!/usr/bin/env bash
# Prepare a run on the GPU device machine (see scripts/device/README).
#   scripts/device/pack.sh BUILD_DIR [FIXTURE_RELPATH ...]
# Copies into git-ignored folders that the device `run` call must `carry`:
#   .devlibs/  shared libraries our binaries need that a bare CUDA image lacks
#              (json-c, libevent, criterion and its deps, the Vulkan loader; never
#              glibc, CUDA or the GPU driver: its Vulkan ICD comes with the driver)
#   .devfix/   the named fixture files (relative to ../shared/fixtures), same layout
#   .devbuild/ BUILD_DIR's bin/ and lib/*.so only (a whole build dir is too big to carry)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: pack.sh BUILD_DIR [fixture ...]}; shift
grep -qx '/.devlibs/' .git/info/exclude 2>/dev/null || echo '/.devlibs/' >> .git/info/exclude
grep -qx '/.devfix/' .git/info/exclude 2>/dev/null || echo '/.devfix/' >> .git/info/exclude
grep -qx '/.devbuild/' .git/info/exclude 2>/dev/null || echo '/.devbuild/' >> .git/info/exclude
rm -rf .devbuild && mkdir -p .devbuild/bin .devbuild/lib
cp -a "$build"/bin/. .devbuild/bin/
cp -a "$build"/lib/*.so .devbuild/lib/
rm -rf .devlibs && mkdir -p .devlibs
for f in "$build"/bin/* "$build"/lib/*.so; do
  [ -f "$f" ] || continue
  ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    libcuda.so*|libcudart.so*|libcublas*|libnvidia*|libGL*|libEGL*) ;;
    *) cp -L "$lib" .devlibs/ ;;
  esac
done
rm -rf .devfix && mkdir -p .devfix
for f in "$@"; do
  mkdir -p ".devfix/$(dirname "$f")"
  cp -L "../shared/fixtures/$f" ".devfix/$f"
done
du -sh .devlibs .devfix .devbuild 2>/dev/null
