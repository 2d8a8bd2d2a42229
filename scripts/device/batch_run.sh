#!/usr/bin/env bash
# Concurrency figures on the GPU device machine (issue: throughput under
# concurrency). Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf;
# there: . scripts/device/setup.sh .devbuild && scripts/device/batch_run.sh [STAGES]
# carry .devbuild .devlibs .devfix. Stages (default "tg batch prof server"):
#   ops     backends_test_ops and backends_test_cuda_errors
#   check   alice-cuda-bench --quick, fixture parity and the server test on cuda (carried fixtures)
#   inv     op-level batched MUL_MAT == columns alone; core_test_batch_invariance on cuda (fixtures + 1B)
#   tg      alice-bench -p 512 -n 128 (single stream)
#   batch   alice-bench --batch 1,4,16,64,256
#   ab      the batch stage again with ALICE_CUDA_MMVQ_TC=0
#   variants the batch stage at B=16, 64 for mat-vec variants (rows per warp, column groups)
#   prof    ALICE_CUDA_PROFILE=1 per-op time at B=64
#   ncu     Nsight Compute on the batched mat-vec kernels at B=64
#   prof1   ALICE_CUDA_PROFILE=1 per-op time at B=1: tg path and engine path
#   gap     ALICE_CUDA_PROFILE=2 (host before launch / GPU / wait / between steps): tg and B=1
#   server  loadgen.py at 1/16/64/256 clients through the server, /metrics p50/p95 after each level
#           (WARM=N: one untimed round of N clients first, so captures and first-use costs are out)
#   b8      the batch stage on the 8B Q4_K_M shape
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/batch_out}
mkdir -p "$out"
stages=${*:-tg batch prof server}
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
mk() { [ -f "/tmp/$1-$2.gguf" ] || timeout 200 "$b/bin/alice-mkmodel" --shape "$1" --type "$2" --vocab "$voc" -o "/tmp/$1-$2.gguf" --threads 16 >> "$out/mk.log" 2>&1; echo "/tmp/$1-$2.gguf"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if has ops; then
  timeout 150 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
  echo "ops: rc $? $(grep Synthesis "$out/ops.log")"; grep -E "FAIL|fail" "$out/ops.log" | head -10
  timeout 60 "$b/bin/backends_test_cuda_errors" > "$out/err.log" 2>&1; echo "cuda_errors: rc $? $(grep Synthesis "$out/err.log")"
fi
if has check; then
  timeout 60 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" --quick > "$out/cbench.log" 2>&1
  echo "cuda-bench --quick: rc $? $(grep -E '^(PASS|FAIL)' "$out/cbench.log" | tail -1)"
  ms=""
  for m in .devfix/models/*.gguf; do
    n=$(basename "$m" .gguf); id=$(echo "$n" | tr '-' '_')
    case "$n" in gemma2*|qwen35*) t=core_test_parity_hybrid; f="parity_hybrid/$id" ;; *) t=core_test_parity; f="parity/$id"; ms="$ms${ms:+,}$n" ;; esac
    ALICE_TEST_BACKEND=cuda timeout 90 "$b/bin/$t" --filter="$f" >> "$out/parity.log" 2>&1
    echo "parity cuda $n: rc $?"
  done
  grep -hE "over the|FAIL" "$out/parity.log" | cut -c1-300 | head -10
  timeout 200 python3 tests/server/test_backends.py --backend cuda --models "$ms" > "$out/srv.txt" 2>&1
  echo "server cuda ($ms): rc $? $(tail -1 "$out/srv.txt")"; grep -E "^FAIL" "$out/srv.txt" | head -5
fi
m1=$(mk llama-1b Q4_K_M)
if has inv; then
  timeout 200 "$b/bin/backends_test_mm_invariance" > "$out/mminv.log" 2>&1
  echo "mm invariance (op level, all backends): rc $? $(grep Synthesis "$out/mminv.log")"; grep -E "differ|FAIL" "$out/mminv.log" | head -10
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$m1" timeout 300 "$b/bin/core_test_batch_invariance" --filter="${INV_FILTER:-batch/decode_many_rows_model}" > "$out/inv.log" 2>&1
  echo "batch invariance cuda (fixtures + 1B Q4_K_M, 64 rows): rc $? $(grep Synthesis "$out/inv.log")"; grep -E "differ|FAIL|fail" "$out/inv.log" | head -10
fi
if has tg; then
  timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 512 -n 128 -r 3 2>>"$out/err.log" | tee -a "$out/bench.log"
fi
if has batch; then
  timeout 240 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch ${BATCHES:-1,4,16,64,256} 2>>"$out/err.log" | tee -a "$out/bench.log"
fi
if has ab; then
  echo "== ALICE_CUDA_MMVQ_TC=0 (batched columns on the mat-vec kernels)"
  ALICE_CUDA_MMVQ_TC=0 timeout 240 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch ${BATCHES:-1,4,16,64,256} 2>>"$out/err.log" | tee -a "$out/bench.log"
fi
if has variants; then
  for v in "ALICE_CUDA_MMVQ_ROWS=2" "ALICE_CUDA_MMVQ_GWARPS=32768" "ALICE_CUDA_MMVQ_ROWS=2 ALICE_CUDA_MMVQ_GWARPS=32768" "ALICE_CUDA_MMVQ_GWARPS=65536"; do
    echo "== $v"
    env $v timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 64 -n 64 --batch 16,64 2>>"$out/err.log" | grep "^| Llama"
  done
fi
if has prof; then
  ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 16 -n 32 --batch 64 > "$out/prof.log" 2>&1
  grep -A40 -i "profile" "$out/prof.log" | head -60
fi
if has prof1; then
  echo "== per-op, tg path (-p 0 -n 64)"
  ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 0 -n 64 -r 1 > "$out/prof1a.log" 2>&1
  grep -A40 -i "profile" "$out/prof1a.log" | head -45
  echo "== per-op, engine path B = 1 (-p 128)"
  ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 64 --batch 1 > "$out/prof1b.log" 2>&1
  grep -A40 -i "profile" "$out/prof1b.log" | head -45
fi
if has gap; then
  ALICE_CUDA_PROFILE=2 timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 512 -n 128 -r 1 2>&1 | grep -iE "step|tg|host|gpu" | head -8
  ALICE_CUDA_PROFILE=2 timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch 1 2>&1 | grep -iE "step|host|gpu|Llama" | head -8
  ALICE_CUDA_PROFILE=2 ALICE_TOPK=0 timeout 120 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch 1 2>&1 | grep -iE "step|host|gpu|Llama" | head -8
fi
if has b8; then
  m8=$(mk llama-8b Q4_K_M)
  timeout 240 "$b/bin/alice-bench" -m "$m8" --backend cuda -p 128 -n 128 --batch 1,16,64 2>>"$out/err.log" | tee -a "$out/bench.log"
fi
if has ncu; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 200 "$ncu" --clock-control none -k regex:k_mmvq --launch-skip 200 --launch-count 6 --section SpeedOfLight --section Occupancy --section LaunchStats \
    "$b/bin/alice-bench" -m "$m1" --backend cuda -p 16 -n 8 --batch 64 > "$out/ncu.log" 2>&1
  grep -E "k_mmvq|Duration|Throughput|Achieved Occupancy|Registers Per|Block Limit|Grid Size|Waves" "$out/ncu.log" | head -80
fi
if has server; then
  ${SRV_PROF:+env ALICE_CUDA_PROFILE=2} "$b/bin/alice-llm-server" --model "$m1" --backend cuda --parallel ${PAR:-64} --port 8111 --ctx-size 512 > "$out/server.log" 2>&1 &
  sp=$!
  for i in $(seq 1 60); do curl -sf localhost:8111/health >/dev/null 2>&1 && break; sleep 1; done
  [ -n "${WARM:-}" ] && timeout 120 python3 .devfix/loadgen.py --port 8111 --concurrency $WARM --requests-per-client 1 --max-tokens 32 --prompt-words 100 > /dev/null 2>&1
  for c in $(echo ${CLIENTS:-1,16,64} | tr , ' '); do
    timeout 300 python3 .devfix/loadgen.py --port 8111 --concurrency $c --requests-per-client ${RPC:-2} --max-tokens 128 --prompt-words 100 ${LG_EXTRA:+--extra "$LG_EXTRA"} 2>&1 | tail -1
    curl -s localhost:8111/metrics | grep -E '^alice_(inter_token_ms|time_to_first_token_ms)\{' | tr '\n' ' '; echo
  done
  kill $sp; wait $sp 2>/dev/null; grep -A8 "cuda steps\|profile" "$out/server.log" | head -20
fi
