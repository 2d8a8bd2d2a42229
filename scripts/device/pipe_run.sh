#!/usr/bin/env bash
# Pipelined steps on the GPU device (issue: throughput under concurrency):
# correctness (op tests: TOPK k = 1, FEED; engine pipelined == step by step
# and device == host sampling on cuda; batch invariance), then alice-bench
# tg / --batch (with the pipelined column) and the server at 1 and 64
# clients. Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf;
# there: . scripts/device/setup.sh .devbuild && scripts/device/pipe_run.sh [STAGES]
# (default "check bench server"); carry .devbuild .devlibs .devfix.
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/pipe_out}
mkdir -p "$out"
stages=${*:-check bench server}
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
m1=${M:-/tmp/llama-1b-Q4_K_M.gguf}
[ -f "$m1" ] || timeout 200 "$b/bin/alice-mkmodel" --shape llama-1b --type Q4_K_M --vocab "$voc" -o "$m1" --threads 16 > "$out/mk.log" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
if has check; then
  timeout 150 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
  echo "ops: rc $? $(grep Synthesis "$out/ops.log")"; grep -E "FAIL|fail" "$out/ops.log" | head -10
  ALICE_TEST_BACKEND=cuda timeout 200 "$b/bin/server_test_engine" > "$out/engine.log" 2>&1
  echo "engine on cuda: rc $? $(grep Synthesis "$out/engine.log")"; grep -E "FAIL|Assert|fed" "$out/engine.log" | head -10
  timeout 60 "$b/bin/backends_test_cuda_errors" ${ERR_FILTER:+--filter="$ERR_FILTER"} > "$out/err.log" 2>&1; echo "cuda_errors: rc $? $(grep Synthesis "$out/err.log")"
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$m1" timeout 200 "$b/bin/core_test_batch_invariance" --filter="batch/decode_many_rows_model" > "$out/inv.log" 2>&1
  echo "batch invariance cuda (1B, 64 rows): rc $? $(grep Synthesis "$out/inv.log")"; grep -E "differ|FAIL" "$out/inv.log" | head -5
fi
if has pprof; then
  echo "== per-op, prefill of 114 tokens"
  ALICE_CUDA_PROFILE=1 timeout 60 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 114 -n 1 -r 3 > "$out/pprof.log" 2>&1
  grep -A25 -i "cuda profile" "$out/pprof.log" | grep -E "profile|pre " | head -22
  for p in 114 512; do timeout 60 "$b/bin/alice-bench" -m "$m1" --backend cuda -p $p -n 0 -r 3 2>/dev/null | grep -E "pp$p"; done
fi
if has tprof; then # where a one-row step's time goes, greedy against drawn
  for t in 0 0.8; do
    echo "== one-row step, --temp $t (ALICE_CUDA_PROFILE=1: groups include launch gaps)"
    ALICE_CUDA_PROFILE=1 timeout 60 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch 1 --temp $t > "$out/tprof$t.log" 2>&1
    grep -iE "dec|graph" "$out/tprof$t.log" | grep -v "^|" | head -30
    ALICE_CUDA_PROFILE=2 timeout 60 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch 1 --temp $t 2>&1 | grep -iE "profile|step" | head -8
  done
fi
if has tg || has bench; then
  timeout 60 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128
fi
if has bench; then
  timeout 150 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch ${BATCHES:-1,16,64} 2>/dev/null | grep "^| Llama"
  timeout 60 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 128 -n 128 --batch 1,64 --temp 0.8 2>/dev/null | grep "^| Llama"
fi
mval() { curl -s localhost:8113/metrics | awk -v k="$1" '$1 == k {print $2}'; }
lg() {
  local s0 f0; s0=$(mval alice_engine_steps_total); f0=$(mval alice_steps_fed_total)
  timeout ${T:-90} python3 .devfix/loadgen.py --port 8113 --max-tokens 128 --prompt-words 100 "$@" 2>&1 | tail -1
  curl -s localhost:8113/metrics | grep -E '^alice_inter_token_ms\{' | sed 's/alice_//; s/_ms{quantile="0\.\(.*\)"}/ p\1/' | tr '\n' ' '
  echo "steps $(( $(mval alice_engine_steps_total) - s0 )) fed $(( $(mval alice_steps_fed_total) - f0 ))"
}
serve() {
  env "$@" "$b/bin/alice-llm-server" --model "$m1" --backend cuda --parallel ${PAR:-64} --port 8113 --ctx-size 512 > "$out/srv.log" 2>&1 &
  sp=$!
  for i in $(seq 1 90); do curl -sf localhost:8113/health >/dev/null 2>&1 && break; sleep 1; done
  lg --concurrency ${WARM:-4} --requests-per-client ${WARM_RPC:-1} --max-tokens 32 > /dev/null
}
if has server64; then # M=the 8B: the 64-client bar for it
  WARM=64 serve
  echo "== $(basename "$m1"), 64 clients: temperature 0.8 / greedy"
  T=150 lg --concurrency 64 --requests-per-client 2
  T=150 lg --concurrency 64 --requests-per-client 2 --extra '{"temperature": 0}'
  kill $sp; wait $sp 2>/dev/null
fi
if has server1; then # one client only: greedy / T 0.8 alternating, pipelined
  PAR=1 WARM=1 WARM_RPC=4 serve ALICE_ENGINE_TRACE=1
  echo "== 1 client (parallel 1): greedy / temperature 0.8, twice"
  for i in 1 2; do
    lg --concurrency 1 --requests-per-client 3 --extra '{"temperature": 0}'
    lg --concurrency 1 --requests-per-client 3
  done
  kill $sp; wait $sp 2>/dev/null
  echo "prefill steps (ms from launch to done): $(grep 'engine step' "$out/srv.log" | awk '$3 > 1 {print $3 "t:" $8}' | tail -8 | tr '\n' ' ')"
  echo "decode steps, mean launch-to-done ms: $(grep 'engine step' "$out/srv.log" | awk '$3 == 1 {s += $8; n++} END {if (n) printf "%.3f over %d", s / n, n}')"
fi
if has server; then
  for mode in ALICE_PIPELINE=1 ALICE_PIPELINE=0; do
    PAR=1 WARM=1 WARM_RPC=4 serve $mode ALICE_ENGINE_TRACE=1
    echo "== $mode, 1 client (parallel 1): greedy / temperature 0.8 / greedy / temperature 0.8"
    lg --concurrency 1 --requests-per-client 3 --extra '{"temperature": 0}'
    lg --concurrency 1 --requests-per-client 3
    lg --concurrency 1 --requests-per-client 3 --extra '{"temperature": 0}'
    lg --concurrency 1 --requests-per-client 3
    kill $sp; wait $sp 2>/dev/null
    echo "prefill steps (ms from launch to done): $(grep 'engine step' "$out/srv.log" | awk '$3 > 1 {print $3 "t:" $8}' | tail -8 | tr '\n' ' ')"
  done
  for mode in ALICE_PIPELINE=1 ALICE_PIPELINE=0; do
    WARM=64 serve $mode
    echo "== $mode, 64 clients: temperature 0.8 / greedy / temperature 0.8"
    lg --concurrency 64 --requests-per-client 2
    lg --concurrency 64 --requests-per-client 2 --extra '{"temperature": 0}'
    lg --concurrency 64 --requests-per-client 2
    kill $sp; wait $sp 2>/dev/null
  done
fi
if has snsys; then # one client: the server's GPU timeline against alice-bench tg's (nsys, graph nodes traced)
  nsys=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
  [ -n "$nsys" ] || echo "nsys: not found"
  gpu_sum() { # $1 report: kernel table; gaps between kernels on the GPU
    timeout 120 "$nsys" stats --report cuda_gpu_kern_sum --format csv "$1.nsys-rep" 2>/dev/null | head -22 | awk -F'","' '{gsub(/"/,""); print $2, $3, $4, $9}' | cut -c1-150
    timeout 120 "$nsys" stats --report cuda_gpu_trace --format csv "$1.nsys-rep" 2>/dev/null > "$1.trace.csv"
    awk -F'","' 'NR > 1 && $0 !~ /Memcpy|Memset/ {gsub(/"/,""); s = $1; d = $2; if (e) { g = s - e; if (g < 2e6) { gs += g; if (g > 3000) { nb++; bs += g } } } e = s + d; k += d; n++}
      END {printf "kernels %d, busy %.2f ms, gaps under 2 ms %.2f ms, of which %d over 3 us: %.2f ms\n", n, k / 1e6, gs / 1e6, nb, bs / 1e6}' "$1.trace.csv"
  }
  if [ -n "$nsys" ]; then
    timeout 120 "$nsys" profile -o "$out/tg" --force-overwrite true -t cuda --cuda-graph-trace=node "$b/bin/alice-bench" -m "$m1" --backend cuda -p 0 -n 128 -r 3 > "$out/nsys_tg.log" 2>&1
    echo "== nsys alice-bench tg128 x 3 (+ warm-up): $(grep tg128 "$out/nsys_tg.log" | awk -F'|' '{print $8}')"; gpu_sum "$out/tg"
    timeout 150 "$nsys" profile -o "$out/srv" --force-overwrite true -t cuda --cuda-graph-trace=node "$b/bin/alice-llm-server" --model "$m1" --backend cuda --parallel 1 --port 8113 --ctx-size 512 > "$out/nsys_srv.log" 2>&1 &
    for i in $(seq 1 90); do curl -sf localhost:8113/health >/dev/null 2>&1 && break; sleep 1; done
    timeout 60 python3 .devfix/loadgen.py --port 8113 --concurrency 1 --requests-per-client 3 --max-tokens 128 --prompt-words 100 | tail -1
    echo "steps $(curl -s localhost:8113/metrics | awk '$1 == "alice_engine_steps_total" {print $2}')"
    pkill -TERM -x alice-llm-server; wait
    echo "== nsys server, one client, 3 requests T 0.8"; gpu_sum "$out/srv"
    rm -f "$out"/*.nsys-rep "$out"/*.sqlite
  fi
fi
