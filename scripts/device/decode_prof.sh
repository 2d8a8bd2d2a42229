#!/usr/bin/env bash
# Where a CUDA decode token's time goes: ALICE_CUDA_LDNA A/B for the packed
# Q8_0 mat-vec, ALICE_CUDA_PROFILE=1 per-op tables, and an nsys kernel
# summary when nsys is there. Here: scripts/device/pack.sh BUILD
# vocab/ggml-vocab-llama-bpe.gguf; there: . scripts/device/setup.sh .devbuild
# && scripts/device/decode_prof.sh [ldna prof nsys]
set -u
stages=${*:-ldna prof nsys}
. "$(dirname "$0")/lib.sh" dprof
tg() { timeout 120 "$b/bin/alice-bench" -m "$1" --backend cuda -p 0 -n 128 -r 3 --warmup-ms 500 2>/dev/null | grep tg128 | awk -F'|' '{print $8}'; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
if has ldna; then
  for m in llama-1b:Q8_0 llama-8b:Q8_0 llama-8b:Q4_K_M; do
    mk ${m%%:*} ${m##*:}; f=/tmp/${m%%:*}-${m##*:}.gguf
    for r in 1 2; do
      echo "$m tg128 (-p 0, warm-up 500 ms) round $r: LDNA default $(tg $f) | LDNA=1 $(ALICE_CUDA_LDNA=1 tg $f) | PACK=0 $(ALICE_PACK=0 tg $f)"
    done
  done
fi
if has prof; then
  for m in llama-1b:Q4_K_M llama-1b:Q8_0 llama-8b:Q4_K_M; do
    mk ${m%%:*} ${m##*:}; f=/tmp/${m%%:*}-${m##*:}.gguf
    echo "== ALICE_CUDA_PROFILE=1 $m, -p 512 -n 64 -r 1"
    ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m $f --backend cuda -p 512 -n 64 -r 1 2>&1 >/dev/null | grep -v "^20..-" | head -60
  done
fi
if has nsys && command -v nsys >/dev/null; then
  mk llama-1b Q4_K_M
  timeout 200 nsys profile -o "$out/n1b" --force-overwrite true --cuda-graph-trace=node -t cuda \
    "$b/bin/alice-bench" -m /tmp/llama-1b-Q4_K_M.gguf --backend cuda -p 0 -n 64 -r 1 > "$out/nsys.log" 2>&1
  timeout 120 nsys stats --report cuda_gpu_kern_sum --format csv "$out/n1b.nsys-rep" > "$out/kern.csv" 2>/dev/null
  echo "== nsys 1B Q4_K_M -p 0 -n 64 (kernel, total ns, instances, avg ns)"
  head -40 "$out/kern.csv" | awk -F'","' '{gsub(/"/,""); print $2, $3, $4, $9}' | cut -c1-200
  rm -f "$out"/*.nsys-rep "$out"/*.sqlite
elif has nsys; then echo "nsys: not found"; fi
