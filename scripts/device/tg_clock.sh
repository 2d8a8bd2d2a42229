#!/usr/bin/env bash
# Why decode-only runs (-p 0) measure slower than tg after a prefill
# (issue: CUDA repacked decode): tg128 of the 1B Q4_K_M on cuda with -p 0,
# -p 0 after --warmup-ms 1000, and -p 512, each in a fresh process, while
# nvidia-smi logs SM / memory clocks and power every 50 ms.
# there: . scripts/device/setup.sh .devbuild && OUT=$OUT scripts/device/tg_clock.sh
# (SHAPE=llama-8b TYPE=F16 ROUNDS=1 for another model: made there)
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/tg_clock}
mkdir -p "$out"
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
shape=${SHAPE:-llama-1b} type=${TYPE:-Q4_K_M}
m=/tmp/$shape-$type.gguf
[ -f "$m" ] || timeout 300 "$b/bin/alice-mkmodel" --shape "$shape" --type "$type" --vocab "$voc" -o "$m" --threads 16 > "$out/mk.log" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate --format=csv,noheader -lms 50 > "$out/clocks.csv" 2>&1 &
smi=$!
for round in $(seq ${ROUNDS:-2}); do
  for args in "-p 0" "-p 0 --warmup-ms 1000" "-p 512"; do
    sleep 3 # let the GPU fall idle as between separate runs
    echo "$(date -u +%T.%N | cut -c1-12) start $args" >> "$out/marks.txt"
    r=$(timeout 120 "$b/bin/alice-bench" -m "$m" --backend cuda $args -n 128 -r 3 2>/dev/null | grep -E "tg128" | awk -F'|' '{print $8}')
    echo "$(date -u +%T.%N | cut -c1-12) end $args" >> "$out/marks.txt"
    echo "round $round, $args: tg128 $r"
  done
done
kill $smi 2>/dev/null
# the clocks in each run's window
awk -F', ' '{print $1, $2, $3, $4, $5}' "$out/clocks.csv" | sed -n '1~10p' | head -80
