#!/usr/bin/env bash
# Check (and, as root, install) the Debian packages the build and tests need.
# Not root and something missing: print the exact apt-get line and fail.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git python3 curl
      libevent-dev libjson-c-dev libcriterion-dev
      libvulkan-dev glslc mesa-vulkan-drivers
      clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node + npm (the openai-SDK test): any install will do (the image may ship nodesource's)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "deps: missing Debian packages. Run as root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
