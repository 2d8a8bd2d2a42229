#!/usr/bin/env bash
# Which Vulkan fusion changes the logits on this device: core_test_fusion
# with only one fusion on at a time (ALICE_TEST_FUSE_ON).
set -u
b=${BUILD:-.devbuild}
for f in ${FUSIONS:-norm normq rope mv}; do
  ALICE_TEST_FUSE_ON=$f ALICE_TEST_BACKEND=vulkan timeout 120 "$b/bin/core_test_fusion" --jobs=4 > "${OUT:-/tmp}/fd-$f.log" 2>&1
  echo "fusion $f only: $(grep Synthesis "${OUT:-/tmp}/fd-$f.log")"
  grep -E "logits differ" "${OUT:-/tmp}/fd-$f.log" | sed 's/.*models\///' | head -8
done
