#!/usr/bin/env bash
# Server probes on the GPU device (issue: throughput under concurrency):
# 1B Q4_K_M, 64 clients greedy / temperature 0.8 / top_k 40 / T 0.8 with frequency and presence
# penalties (LOGIT_ADJUST), with the
# device top-k (default) and with whole rows read back (ALICE_TOPK=0), and
# one client against alice-bench tg. Run after batch_run.sh made the model.
b=${BUILD:-.devbuild}; m1=${M:-/tmp/llama-1b-Q4_K_M.gguf}
# each level's line, then /metrics' TTFT and inter-token p50/p95 (over the last 4096 gaps)
mval() { curl -s localhost:8112/metrics | awk -v k="$1" '$1 == k {print $2}'; }
lg() {
  local s0 t0; s0=$(mval alice_engine_steps_total); t0=$(mval alice_generated_tokens_total)
  timeout ${T:-90} python3 .devfix/loadgen.py --port 8112 --max-tokens 128 --prompt-words 100 "$@" 2>&1 | tail -1
  curl -s localhost:8112/metrics | grep -E '^alice_(inter_token_ms|time_to_first_token_ms)\{' | sed 's/alice_//; s/_ms{quantile="0\.\(.*\)"}/ p\1/' | tr '\n' ' '
  echo "steps $(( $(mval alice_engine_steps_total) - s0 )) tokens $(( $(mval alice_generated_tokens_total) - t0 ))"
}
serve() {
  env "$@" "$b/bin/alice-llm-server" --model "$m1" --backend cuda --parallel ${PAR:-256} --port 8112 --ctx-size 512 > /tmp/srv.log 2>&1 &
  sp=$!
  for i in $(seq 1 90); do curl -sf localhost:8112/health >/dev/null 2>&1 && break; sleep 1; done
  lg --concurrency ${WARM:-64} --requests-per-client 1 --max-tokens 32 > /dev/null # warm-up: every batch size's graph captured
}
for mode in ALICE_TOPK=1 ${AB-ALICE_TOPK=0}; do
  serve $mode
  echo "== $mode, 64 clients: greedy / temperature 0.8 / temperature 0.8 top_k 40 / T 0.8 + penalties"
  lg --concurrency 64 --requests-per-client 2 --extra '{"temperature": 0}'
  lg --concurrency 64 --requests-per-client 2
  lg --concurrency 64 --requests-per-client 2 --extra '{"top_k": 40}'
  lg --concurrency 64 --requests-per-client 2 --extra '{"frequency_penalty": 0.5, "presence_penalty": 0.3}'
  curl -s localhost:8112/metrics | grep '^alice_token_picks_total'
  if [ $mode = ALICE_TOPK=1 ] && [ -z "${QUICK:-}" ]; then
    echo "== 256 clients greedy, 16 clients greedy"
    T=150 lg --concurrency 256 --requests-per-client 1 --extra '{"temperature": 0}'
    lg --concurrency 16 --requests-per-client 2 --extra '{"temperature": 0}'
  fi
  kill $sp; wait $sp 2>/dev/null
done
[ -n "${NO_ONE:-}" ] && exit 0
PAR=1 serve ALICE_TOPK=1
echo "== 1 client (parallel 1): greedy / temperature 0.8"
lg --concurrency 1 --requests-per-client 3 --extra '{"temperature": 0}'
lg --concurrency 1 --requests-per-client 3
kill $sp; wait $sp 2>/dev/null
timeout 60 "$b/bin/alice-bench" -m "$m1" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | tail -2
