#!/usr/bin/env bash
# Source this at the start of a device `run` command (bash):  . scripts/device/setup.sh BUILD_DIR
# Makes a copied tree look like the one the binaries were built in: the
# compiled-in source/build/fixture paths (/work/main, /work/shared/fixtures)
# point at this copy, the carried libraries and the Vulkan loader are found.
build=${1:-build-dev}
here=$(pwd)
if [ "$here" != /work/main ]; then
  mkdir -p /work/shared
  [ -e /work/main ] || ln -s "$here" /work/main
  # /work/main/.. resolves to the parent of this copy
  mkdir -p "$(dirname "$here")/shared"
  [ -e "$(dirname "$here")/shared/fixtures" ] || ln -s "$here/.devfix" "$(dirname "$here")/shared/fixtures"
  [ -e /work/shared/fixtures ] || ln -s "$here/.devfix" /work/shared/fixtures
fi
if [ -d .gl ]; then for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig; fi
export LD_LIBRARY_PATH="$here/.devlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export ALICE_BACKEND_PATH="$here/$build/lib"
export ALICE_FIXTURES_DIR="$here/.devfix" ALICE_BUILD_DIR="$here/$build" ALICE_SOURCE_DIR="$here"
if ! ls /usr/share/vulkan/icd.d/nvidia_icd.json >/dev/null 2>&1 && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
echo "device setup: tree $here, build $build, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
