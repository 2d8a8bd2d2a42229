#!/usr/bin/env bash
# Decode mat-vec geometries on the GPU device: bench_mul_mat (cold weights,
# one column) on cuda, then vulkan with each ALICE_VK_MVX=RW,KS,U2[,AV] variant
# (those backends/vulkan/CMakeLists.txt builds),
# over the 1B shapes. There: . scripts/device/setup.sh .devbuild && scripts/device/mv_sweep.sh
set -u
b=${BUILD:-.devbuild}
export ALICE_BENCH_COLD_MB=${COLD:-300} ALICE_BENCH_SECS=${SECS:-0.25}
shapes=${SHAPES:-"2048x2048 2048x8192 8192x2048"}
variants=${VARIANTS:-"4,1,0 4,2,1 2,2,1 1,1,0 1,1,1 1,2,1 4,2,1,1 1,1,0,1"}
for sh in $shapes; do
  K=${sh%x*}; N=${sh#*x}
  echo "== K=$K N=$N"
  echo "cuda: $("$b/bin/bench_mul_mat" cuda 0 $K $N 1 ${TYPES_MV:-Q4_K Q6_K Q8_0} 2>/dev/null | awk '{for(i=1;i<NF;i++) if($(i+1)=="GB/s") g=$i; printf "%s %s ms %s GB/s; ", $1, $5, g}')"
  echo "vk default: $("$b/bin/bench_mul_mat" vulkan 0 $K $N 1 ${TYPES_MV:-Q4_K Q6_K Q8_0} 2>/dev/null | awk '{for(i=1;i<NF;i++) if($(i+1)=="GB/s") g=$i; printf "%s %s ms %s GB/s; ", $1, $5, g}')"
  for v in $variants; do
    echo "vk $v: $(ALICE_VK_MVX=$v "$b/bin/bench_mul_mat" vulkan 0 $K $N 1 ${TYPES_MV:-Q4_K Q6_K Q8_0} 2>/dev/null | awk '{for(i=1;i<NF;i++) if($(i+1)=="GB/s") g=$i; printf "%s %s ms %s GB/s; ", $1, $5, g}')"
  done
done
