#!/usr/bin/env bash
# Where a short CUDA prefill's time goes (a server request's 114-token
# prompt): pp114 / pp512 with the F16 path and with the integer MMQ GEMM,
# ALICE_CUDA_PROFILE=1 tables, and an nsys kernel / API summary (GPU busy
# time against wall time) when nsys is there. Here: scripts/device/pack.sh
# BUILD vocab/ggml-vocab-llama-bpe.gguf; there: . scripts/device/setup.sh
# .devbuild && scripts/device/prefill_prof.sh [check rate prof nsys kern ncu]
set -u
stages=${*:-check rate prof nsys}
. "$(dirname "$0")/lib.sh" pprof
P=${P:-114}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
if has check; then # the integer GEMM on the GPU: K split and not, against the CPU arithmetic
  for sp in 0 1; do
    ALICE_CUDA_MMQ_SPLIT=$sp ALICE_CUDA_MMQ=1 ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/backends_test_mm_prefill" > "$out/mmp$sp.log" 2>&1
    echo "mm_prefill cuda MMQ=1 (split off: $sp): rc $? $(syn "$out/mmp$sp.log")"; grep -E "FAIL|off|worst" "$out/mmp$sp.log" | head -5
  done
  ALICE_CUDA_MMQ=1 timeout 120 "$b/bin/backends_test_mm_invariance" > "$out/mmi.log" 2>&1; echo "mm_invariance MMQ=1: rc $? $(syn "$out/mmi.log")"
fi
pp() { timeout 120 "$b/bin/alice-bench" -m "$1" --backend cuda -p "$2" -n 0 -r 5 --warmup-ms 300 2>/dev/null | grep "pp$2" | awk -F'|' '{print $8}'; }
for m in ${MODELS:-llama-1b:Q4_K_M}; do
  mk ${m%%:*} ${m##*:}; f=/tmp/${m%%:*}-${m##*:}.gguf
  if has rate; then
    for r in 1 2; do
      echo "$m round $r: pp$P F16 path $(ALICE_CUDA_MMQ=0 pp $f $P) | MMQ $(ALICE_CUDA_MMQ=1 pp $f $P) | MMQ unsplit $(ALICE_CUDA_MMQ_SPLIT=1 ALICE_CUDA_MMQ=1 pp $f $P)"
      for p2 in ${P2:-256 512}; do
        echo "$m round $r: pp$p2 F16 path $(ALICE_CUDA_MMQ=0 pp $f $p2) | MMQ $(ALICE_CUDA_MMQ=1 pp $f $p2)"
      done
    done
  fi
  if has prof; then
    for q in 0 1; do
      echo "== ALICE_CUDA_PROFILE=1 ALICE_CUDA_MMQ=$q $m, -p $P -n 1 -r 3"
      ALICE_CUDA_MMQ=$q ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m $f --backend cuda -p $P -n 1 -r 3 2>&1 >/dev/null | grep -v "^20..-" | grep -v " dec" | head -40
    done
  fi
  nsys=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
  if has nsys && [ -n "$nsys" ]; then
    for q in 0 1; do
      timeout 200 "$nsys" profile -o "$out/p$q" --force-overwrite true -t cuda \
        env ALICE_CUDA_MMQ=$q "$b/bin/alice-bench" -m $f --backend cuda -p $P -n 0 -r 20 > "$out/nsys$q.log" 2>&1
      echo "== nsys $m MMQ=$q -p $P -n 0 -r 20 (+ warm-up): kernels (name, total ns, instances, avg ns)"
      timeout 120 "$nsys" stats --report cuda_gpu_kern_sum --format csv "$out/p$q.nsys-rep" > "$out/kern$q.csv" 2>/dev/null
      head -30 "$out/kern$q.csv" | awk -F'","' '{gsub(/"/,""); print $2, $3, $4, $9}' | cut -c1-160
      awk -F'","' 'NR > 1 {gsub(/"/,""); s += $2; n += $3} END {printf "kernel time total %.1f ms over %d launches\n", s / 1e6, n}' "$out/kern$q.csv"
      timeout 120 "$nsys" stats --report cuda_api_sum --format csv "$out/p$q.nsys-rep" 2>/dev/null | head -12 | awk -F'","' '{gsub(/"/,""); print $2, $3, $4, $8}' | cut -c1-120
      grep "pp$P" "$out/nsys$q.log"
      rm -f "$out"/p$q.nsys-rep "$out"/p$q.sqlite
    done
  elif has nsys; then echo "nsys: not found"; fi
done
# kern: every kernel of one prefill forward timed by Nsight Compute (no
# cache flush, clocks as they are): GPU busy time against the forward's span
if has kern; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  if [ -z "$ncu" ]; then echo "ncu: not found"; else
    for m in ${MODELS:-llama-1b:Q4_K_M}; do
      mk ${m%%:*} ${m##*:}; f=/tmp/${m%%:*}-${m##*:}.gguf
      for q in ${KERN_MMQ:-0}; do
        timeout 400 "$ncu" --metrics gpu__time_duration.sum --cache-control none --clock-control none --csv \
          --print-units base env ALICE_CUDA_MMQ=$q "$b/bin/alice-bench" -m $f --backend cuda -p $P -n 0 -r 2 \
          > "$out/kern_$q.csv" 2> "$out/kern_$q.err"
        echo "== ncu $m pp$P ALICE_CUDA_MMQ=$q: rc $?"; python3 scripts/device/ncu_fwd.py "$out/kern_$q.csv"
      done
    done
  fi
fi
# Nsight Compute on the integer GEMM: one launch each of (K N M type) shapes
if has ncu; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  if [ -z "$ncu" ]; then echo "ncu: not found"; else
    for s in ${NCU_SHAPES:-2048:2048:114:Q4_K 2048:8192:512:Q4_K 8192:2048:114:Q6_K}; do
      IFS=: read -r K N M T <<< "$s"
      echo "== ncu k_mmq K=$K N=$N M=$M $T"
      ALICE_CUDA_MMQ=1 ALICE_BENCH_SECS=0.2 timeout 120 "$ncu" --kernel-name-base mangled --kernel-name regex:k_mmqILi --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
        --section MemoryWorkloadAnalysis "$b/bin/bench_mul_mat" cuda 0 $K $N $M $T > "$out/ncu_${K}_${N}_${M}_${T}.log" 2>&1
      grep -E "Duration|Throughput|Occupancy|Registers Per|Shared Memory Config|Dynamic Shared|Block Limit|Warp Cycles Per Issued|Issue Slot|No Eligible|Active Warps|Eligible Warps|Stall|stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" "$out/ncu_${K}_${N}_${M}_${T}.log" | grep -v "^==PROF==" | cut -c1-150 | head -40
    done
  fi
fi
