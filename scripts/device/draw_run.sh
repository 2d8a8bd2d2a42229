#!/usr/bin/env bash
# The temperature draw (SAMPLE_TEMP, backends/cuda/topk.cu) on the GPU: its
# op cases (edges included) and the engine's device == host sampling, then
# where a one-client step's time goes, greedy against T 0.8 (bench B = 1,
# per-op profile), and one server client, also with 16 cells per attention
# split (ALICE_CUDA_ATT_CHUNK). Here: scripts/device/pack.sh BUILD
# vocab/ggml-vocab-llama-bpe.gguf; there: . scripts/device/setup.sh .devbuild
# && scripts/device/draw_run.sh [STAGES] (ops attn steps prof tg batch pprof
# server chunk16 chunk32 suite ab pphost final); ab compares against the CUDA backend in
# $BUILD/old (an earlier commit's .so); attn needs core_test_parity, backends_test_ops,
# core_test_batch_invariance and the llama-spm-Q4_K_M fixture in .devfix
set -u
stages=${*:-ops steps prof server}
. "$(dirname "$0")/lib.sh" draw
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mk llama-1b Q4_K_M
m=/tmp/llama-1b-Q4_K_M.gguf
if has ops; then
  ALICE_TEST_OPS=SAMPLE_TEMP,LOGSUMEXP,TOPK timeout 200 "$b/bin/backends_test_ops" --verbose > "$out/ops.log" 2>&1
  echo "ops SAMPLE_TEMP/LOGSUMEXP/TOPK: rc $? $(syn "$out/ops.log")"; grep -E "\[cuda\].*(FAIL|fail|differ)" "$out/ops.log" | head -8
  grep -cE "\[cuda\] (SAMPLE_TEMP|LOGSUMEXP).* ok" "$out/ops.log"
  ALICE_TEST_BACKEND=cuda timeout 200 "$b/bin/server_test_engine" --filter='engine/backend_sampling*' > "$out/engine.log" 2>&1
  echo "engine backend == host sampling on cuda: rc $? $(syn "$out/engine.log")"; grep -E "FAIL|Assert" "$out/engine.log" | head -5
fi
if has attn; then # decode attention (splits merged by one warp): op cases, batch invariance, parity
  ALICE_TEST_OPS=ATTENTION timeout 300 "$b/bin/backends_test_ops" --verbose > "$out/attn.log" 2>&1
  echo "ops ATTENTION: rc $? $(syn "$out/attn.log")"; grep -E "\[cuda\].*(FAIL|fail|differ)" "$out/attn.log" | head -8
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$m" timeout 200 "$b/bin/core_test_batch_invariance" > "$out/inv.log" 2>&1
  echo "batch invariance cuda (1B, 64 rows, and the rest): rc $? $(syn "$out/inv.log")"; grep -E "differ|FAIL" "$out/inv.log" | head -5
  for f in .devfix/models/*.gguf; do
    id=$(basename "$f" .gguf | tr '-' '_')
    ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/core_test_parity" --verbose --filter="parity/$id" > "$out/par_$id.log" 2>&1
    echo "parity $id: rc $? $(syn "$out/par_$id.log") $(grep -m1 -E 'worst' "$out/par_$id.log")"
  done
fi
if has tg; then
  for c in 16 32 16 32; do for d in 0 114; do
    echo "chunk $c d$d: $(ALICE_CUDA_ATT_CHUNK=$c timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -d $d -r 3 2>/dev/null | grep tg128 | awk -F'|' '{print $8}')"
  done; done
fi
if has batch; then
  for c in 16 32; do echo "chunk $c: $(ALICE_CUDA_ATT_CHUNK=$c timeout 150 "$b/bin/alice-bench" -m "$m" --backend cuda -p 128 -n 128 --batch 1,16,64 2>/dev/null | grep "^| Llama" | awk -F'|' '{printf "B=%s %s (pipelined %s); ", $4, $8, $13}')"; done
fi
if has pprof; then # where a 114-token prefill's time goes (graphs off: groups include launch gaps)
  ALICE_CUDA_PROFILE=1 timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 114 -n 0 -r 10 > "$out/pprof.log" 2>&1
  grep -E "cuda profile|^  pre " "$out/pprof.log" | head -24
  for p in 114 512; do timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p $p -n 0 -r 5 2>/dev/null | grep -E "pp$p"; done
fi
if has suite; then # the CUDA backend's op, engine and error tests (the CUDA .so alone on the path)
  mkdir -p "$b/cudaonly" && ln -sf "$PWD/$b/lib/libalice-backend-cuda.so" "$b/cudaonly/"
  ALICE_BACKEND_PATH=$PWD/$b/cudaonly timeout 400 "$b/bin/backends_test_ops" --jobs=8 > "$out/opsall.log" 2>&1
  echo "ops (cuda): rc $? $(syn "$out/opsall.log")"; grep -E "FAIL|differ" "$out/opsall.log" | head -8
  ALICE_TEST_BACKEND=cuda timeout 300 "$b/bin/server_test_engine" > "$out/engine.log" 2>&1
  echo "engine on cuda: rc $? $(syn "$out/engine.log")"; grep -E "FAIL|Assert" "$out/engine.log" | head -5
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$m" timeout 200 "$b/bin/core_test_batch_invariance" --filter="batch/decode_many_rows_model" > "$out/inv.log" 2>&1
  echo "batch invariance cuda (1B, 64 rows): rc $? $(syn "$out/inv.log")"
fi
if has ab; then # this build against $b/old: engine steps greedy / T 0.8, tg128
  for r in 1 2; do for v in new old; do
    bp=${ALICE_BACKEND_PATH:-}; [ $v = old ] && bp=$PWD/$b/old
    for t in 0 0.8; do
      echo "$v r$r temp $t: $(ALICE_BACKEND_PATH=$bp timeout 150 "$b/bin/alice-bench" -m "$m" --backend cuda -p 128 -n 128 --batch 1,64 --temp $t 2>/dev/null | grep "^| Llama" | awk -F'|' '{printf "B=%s %s (pipelined %s); ", $4, $8, $13}')"
    done
    echo "$v r$r: $(ALICE_BACKEND_PATH=$bp timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128 | awk -F'|' '{print $7 $8}')"
  done; done
fi
if has serverold; then M=$m OUT=$out/pold ALICE_BACKEND_PATH=$PWD/$b/old scripts/device/pipe_run.sh server1 2>&1 | tail -8; fi
if has pphost; then # is a short prefill launch-bound? host enqueue time against its GPU span
  for p in 114 512; do
    ALICE_CUDA_PROFILE=2 timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p $p -n 0 -r 10 > "$out/pphost$p.log" 2>&1
    echo "pp$p: $(grep -E "pp$p" "$out/pphost$p.log" | awk -F'|' '{print $8}') $(grep 'launched plainly' "$out/pphost$p.log")"
    echo "pp$p, ALICE_CUDA_PDL=0: $(ALICE_CUDA_PDL=0 ALICE_CUDA_PROFILE=2 timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p $p -n 0 -r 10 2>&1 | grep -E "pp$p|launched plainly" | awk -F'|' '{print $8 $0}' | cut -c1-260 | tr '\n' ' ')"
  done
fi
if has final; then # the bars' measures: one client (a second server: the first after heavy work ran slow), tg, batches
  for r in 1 2; do M=$m OUT=$out/f$r scripts/device/pipe_run.sh server1 2>&1 | tail -8; done
  for p in 0 512; do timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p $p -n 128 -r 3 2>/dev/null | grep -E "pp512|tg128"; done
  for t in 0 0.8; do echo "temp $t: $(timeout 200 "$b/bin/alice-bench" -m "$m" --backend cuda -p 128 -n 128 --batch 1,16,64 --temp $t 2>/dev/null | grep "^| Llama" | awk -F'|' '{printf "B=%s %s (pipelined %s); ", $4, $8, $13}')"; done
fi
if has steps; then # greedy / T 0.8 alternating, and tg128
  for r in 1 2; do for t in 0 0.8; do
    timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 114 -n 128 --batch 1 --temp $t 2>/dev/null | grep -E "^\| Llama" | awk -F'|' -v t=$t '{print "B = 1, temp " t ": step ms " $10 ", pipelined " $12 " (" $13 " t/s)"}'
  done; done
  timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128
fi
if has prof; then
  for t in 0 0.8; do
    ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m "$m" --backend cuda -p 114 -n 64 --batch 1 --temp $t > "$out/prof_t$t.log" 2>&1
    echo "== engine B = 1, temperature $t: $(grep -E '^  dec (TOPK|SAMPLE_TEMP)' "$out/prof_t$t.log")"
  done
fi
if has server; then M=$m OUT=$out/p1 scripts/device/pipe_run.sh server1 2>&1 | tail -8; fi
if has chunk16; then M=$m OUT=$out/p16 ALICE_CUDA_ATT_CHUNK=16 scripts/device/pipe_run.sh server1 2>&1 | tail -8; fi
if has chunk32; then M=$m OUT=$out/p32 ALICE_CUDA_ATT_CHUNK=32 scripts/device/pipe_run.sh server1 2>&1 | tail -8; fi
timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128
