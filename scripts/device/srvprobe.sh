# server probes: sampling vs greedy, slots
b=.devbuild; m1=/tmp/llama-1b-Q4_K_M.gguf
for par in 256 1; do
  "$b/bin/alice-llm-server" --model "$m1" --backend cuda --parallel $par --port 8112 --ctx-size 512 > /tmp/srv$par.log 2>&1 &
  sp=$!
  for i in $(seq 1 60); do curl -sf localhost:8112/health >/dev/null 2>&1 && break; sleep 1; done
  echo "== parallel $par, temperature 0.8 / greedy"
  timeout 60 python3 .devfix/loadgen.py --port 8112 --concurrency 1 --requests-per-client 3 --max-tokens 128 --prompt-words 100 2>&1 | tail -1
  timeout 60 python3 .devfix/loadgen.py --port 8112 --concurrency 1 --requests-per-client 3 --max-tokens 128 --prompt-words 100 --extra '{"temperature": 0}' 2>&1 | tail -1
  if [ $par = 256 ]; then timeout 90 python3 .devfix/loadgen.py --port 8112 --concurrency 64 --requests-per-client 2 --max-tokens 128 --prompt-words 100 --extra '{"temperature": 0}' 2>&1 | tail -1; fi
  kill $sp; wait $sp 2>/dev/null
done
