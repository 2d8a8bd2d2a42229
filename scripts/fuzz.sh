#!/usr/bin/env bash
# Build the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang + ASan/UBSan
# and run each for a bounded time over its committed corpus. A finding fails.
set -euo pipefail
secs=${1:-30}
cd "$(dirname "$0")/.."
shopt -s nullglob
targets=(tests/fuzz/fuzz_*.c)
if [ ${#targets[@]} -eq 0 ]; then echo "fuzz: no targets"; exit 0; fi
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DALICE_FUZZ=ON \
      -DALICE_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz
fails=0
for src in "${targets[@]}"; do
  name=$(basename "$src" .c)
  corpus=tests/fuzz/corpus/${name#fuzz_}
  work=build-fuzz/corpus-${name#fuzz_}
  rm -rf "$work"; mkdir -p "$work"
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/ 2>/dev/null || true
  echo "fuzz: $name for ${secs}s"
  if ! build-fuzz/bin/$name -max_total_time="$secs" -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix=build-fuzz/"$name"- "$work" > build-fuzz/"$name".log 2>&1; then
    echo "fuzz: $name FOUND A CRASH:"; tail -40 build-fuzz/"$name".log; fails=$((fails+1))
  else
    grep -E "stat::number_of_executed_units" build-fuzz/"$name".log || true
  fi
done
if [ $fails -ne 0 ]; then echo "fuzz: $fails target(s) failed"; exit 1; fi
echo "fuzz: all ${#targets[@]} target(s) ran ${secs}s without a finding"
