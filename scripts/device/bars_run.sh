#!/usr/bin/env bash
# Where the open issues' GPU bars stand, in one call (the bars are set on
# the H200): CUDA tg128 / pp512 of 1B Q4_K_M, Q8_0, F16 and 8B Q4_K_M;
# the one-client server against tg128 (pipe_run.sh server1); batched decode
# at 16 / 64 rows (1B) and 64 (8B); Vulkan against CUDA on the 1B files.
# there: . scripts/device/setup.sh .devbuild && OUT=$OUT scripts/device/bars_run.sh [STAGES]
# (default "cuda server batch vulkan"); carry .devpack (bundle with
# alice-bench alice-mkmodel alice-llm-server, the llama-bpe vocab,
# loadgen.py) and .gl for the vulkan stage.
set -u
here=$(dirname "$0")
stages=${*:-cuda server batch vulkan}
. "$here/lib.sh" bars
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
ones="Q4_K_M Q8_0 F16"
for t in $ones; do mk llama-1b $t; done
has cuda || has batch && mk llama-8b Q4_K_M
row() { awk -F'|' -v m="$1" '/pp512|tg128/ {print m, $7, $8}'; }
if has cuda; then
  for m in llama-1b-Q4_K_M llama-1b-Q8_0 llama-1b-F16 llama-8b-Q4_K_M; do
    timeout 120 "$b/bin/alice-bench" -m /tmp/$m.gguf --backend cuda -p 512 -n 128 -r 3 2>/dev/null | row "$m (-p 512)"
    timeout 60 "$b/bin/alice-bench" -m /tmp/$m.gguf --backend cuda -p 0 -n 128 -r 3 2>/dev/null | row "$m (-p 0)"
  done
fi
if has server; then
  M=/tmp/llama-1b-Q4_K_M.gguf "$here/pipe_run.sh" tg server1
fi
if has batch; then
  timeout 150 "$b/bin/alice-bench" -m /tmp/llama-1b-Q4_K_M.gguf --backend cuda -p 128 -n 128 --batch 16,64 2>/dev/null | grep "^| Llama"
  timeout 200 "$b/bin/alice-bench" -m /tmp/llama-8b-Q4_K_M.gguf --backend cuda -p 128 -n 128 --batch 64 2>/dev/null | grep "^| Llama"
fi
if has vulkan; then
  for m in llama-1b-Q4_K_M llama-1b-Q8_0; do
    timeout 200 "$b/bin/alice-bench" -m /tmp/$m.gguf --backend vulkan -p 512 -n 128 -r 2 > "$out/vk-$m.log" 2>&1
    row "$m vulkan" < "$out/vk-$m.log"; grep -iE "error|fail" "$out/vk-$m.log" | head -3
  done
fi
