#!/usr/bin/env bash
# A prefill's products of one input as one GEMM (backends/cuda/matmul.cu,
# gemm_multi): its tests on the GPU, then pp114 / pp512 grouped against one
# by one (ALICE_CUDA_GEMM_GROUP=0) and against an earlier build's CUDA
# backend in $BUILD/old, per-kernel times of a pp114 forward (ncu), one
# server client. Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf
# models/llama-spm-Q4_K_M.gguf models/llama-spm-Q8_0.gguf refs/...; there:
# . scripts/device/setup.sh .devbuild && scripts/device/group_run.sh [test ab kern server]
set -u
stages=${*:-test ab kern server}
. "$(dirname "$0")/lib.sh" group
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mk llama-1b Q4_K_M
m=/tmp/llama-1b-Q4_K_M.gguf
if has test; then
  timeout 300 "$b/bin/backends_test_gemm_group_cuda" > "$out/gg.log" 2>&1; echo "gemm_group: rc $? $(syn "$out/gg.log")"; grep -E "outside|no group|FAIL" "$out/gg.log" | head -6
  timeout 300 "$b/bin/backends_test_wcache_cuda" > "$out/wc.log" 2>&1; echo "wcache: rc $? $(syn "$out/wc.log")"; grep -E "differ|FAIL" "$out/wc.log" | head -4
  ALICE_TEST_OPS=MUL_MAT,ATTENTION,GLU timeout 300 "$b/bin/backends_test_ops" > "$out/ops.log" 2>&1; echo "ops MUL_MAT,ATTENTION,GLU: rc $? $(syn "$out/ops.log")"; grep -E "\[cuda\].*(FAIL|fail)" "$out/ops.log" | head -4
  ALICE_TEST_BACKEND=cuda timeout 400 "$b/bin/core_test_fusion" > "$out/fu.log" 2>&1; echo "fusion (fixtures carried: Q4_K_M, Q8_0; the others fail to open): rc $? $(syn "$out/fu.log")"; grep -E "differ" "$out/fu.log" | head -6
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$m" timeout 400 "$b/bin/core_test_batch_invariance" --filter='batch/decode_*' > "$out/inv.log" 2>&1; echo "batch invariance (decode beside prefill on the carried fixtures, 1B 64 rows): rc $? $(syn "$out/inv.log")"; grep -E "differ|llama-spm" "$out/inv.log" | grep -v "No such\|open" | head -6
  for f in llama-spm-Q4_K_M llama-spm-Q8_0; do
    ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/core_test_parity" --verbose --filter="parity/$(echo $f | tr '-' '_')" > "$out/par_$f.log" 2>&1
    echo "parity $f: rc $? $(syn "$out/par_$f.log") $(grep -m1 -E 'worst' "$out/par_$f.log")"
  done
  ALICE_TEST_BACKEND=cuda timeout 300 "$b/bin/server_test_engine" > "$out/engine.log" 2>&1; echo "engine on cuda: rc $? $(syn "$out/engine.log")"
fi
pp() { timeout 120 "$b/bin/alice-bench" -m "$m" --backend cuda -p "$1" -n 0 -r 5 --warmup-ms 200 2>/dev/null | grep "pp$1" | awk -F'|' '{print $8}'; }
if has ab; then
  for r in 1 2 3; do
    for p in 114 512; do
      echo "r$r pp$p: group $(pp $p) | one by one $(ALICE_CUDA_GEMM_GROUP=0 pp $p) | old $(ALICE_BACKEND_PATH=$PWD/$b/old pp $p)"
    done
  done
  for v in new old; do
    bp=${ALICE_BACKEND_PATH:-}; [ $v = old ] && bp=$PWD/$b/old
    echo "$v pp114 host: $(ALICE_BACKEND_PATH=$bp ALICE_CUDA_PROFILE=2 timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 114 -n 0 -r 10 2>&1 | grep 'launched plainly' | cut -c1-240)"
  done
fi
if has kern; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  for v in ${KERN_GROUPS:-1 0}; do
    timeout 300 "$ncu" --metrics gpu__time_duration.sum --cache-control none --clock-control none --csv --print-units base \
      env ALICE_CUDA_GEMM_GROUP=$v "$b/bin/alice-bench" -m "$m" --backend cuda -p 114 -n 0 -r 2 > "$out/kern$v.csv" 2> "$out/kern$v.err"
    echo "== ncu pp114 ALICE_CUDA_GEMM_GROUP=$v: rc $?"; python3 scripts/device/ncu_fwd.py "$out/kern$v.csv" 2>&1 | head -22
  done
fi
if has server; then
  for v in ${SERVERS:-new old new}; do
    bp=${ALICE_BACKEND_PATH:-}; [ $v = old ] && bp=$PWD/$b/old
    echo "== server, $v build"; M=$m OUT=$out/p$v ALICE_BACKEND_PATH=$bp scripts/device/pipe_run.sh server1 2>&1 | tail -7
  done
  for p in 0 512; do timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p $p -n 128 -r 3 2>/dev/null | grep -E "tg128"; done
fi
