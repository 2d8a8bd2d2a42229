#!/usr/bin/env bash
# Session 20, second call: tg128 / pp512 with the rows-per-warp defaults (the
# table's measure, -p 512 -n 128 -r 3) and the one-client server bar.
# there: . scripts/device/setup.sh .devbuild && scripts/device/s20_h200.sh
set -u
here=$(dirname "$0")
stages=""
. "$here/lib.sh" s20h
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mk llama-1b Q4_K_M; mk llama-1b Q8_0; mk llama-8b Q4_K_M
for m in llama-1b-Q4_K_M llama-1b-Q8_0 llama-8b-Q4_K_M; do
  timeout 120 "$b/bin/alice-bench" -m /tmp/$m.gguf --backend cuda -p 512 -n 128 -r 3 2>/dev/null | grep -E "pp512|tg128" | awk -F'|' -v m=$m '{print m, $7, $8}'
done
M=/tmp/llama-1b-Q4_K_M.gguf "$here/pipe_run.sh" server1
