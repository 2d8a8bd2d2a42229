#!/usr/bin/env bash
# F16 copies of quantized weights (backends/cuda/wcache.cu) on the GPU:
# their test, fixture parity and batch invariance with them, then pp114 /
# pp512 with and without them (ALICE_CUDA_WCACHE_MB=0) and one server client
# against tg128 (pipe_run.sh server1). Here: scripts/device/pack.sh BUILD
# vocab/ggml-vocab-llama-bpe.gguf models/<fixtures> refs/<their refs>; there:
# . scripts/device/setup.sh .devbuild && scripts/device/wcache_run.sh [STAGES]
# (wtest check rate server steps prof chunk snsys; snsys needs nsys, which the
# device image lacked on 2026-12-07)
set -u
stages=${*:-check rate server}
. "$(dirname "$0")/lib.sh" wcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mk llama-1b Q4_K_M
m=/tmp/llama-1b-Q4_K_M.gguf
if has check || has wtest; then
  timeout 120 "$b/bin/backends_test_wcache_cuda" --verbose > "$out/wc.log" 2>&1; echo "wcache test: rc $? $(syn "$out/wc.log")"
  grep -E "differ|fell|copy|FAIL" "$out/wc.log" | head -8
fi
if has check; then
  for f in .devfix/models/*.gguf; do
    id=$(basename "$f" .gguf | tr '-' '_')
    ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/core_test_parity" --filter="parity/$id" > "$out/par_$id.log" 2>&1
    echo "parity $id: rc $? $(syn "$out/par_$id.log") $(grep -m1 -E 'worst' "$out/par_$id.log")"
  done
  ALICE_TEST_BACKEND=cuda ALICE_INV_MODEL="$m" timeout 200 "$b/bin/core_test_batch_invariance" --filter="batch/decode_many_rows_model" > "$out/inv.log" 2>&1
  echo "batch invariance cuda (1B model file and the rest): rc $? $(syn "$out/inv.log")"; grep -E "differ|FAIL" "$out/inv.log" | head -5
fi
if has rate; then
  for r in $(seq 1 ${ROUNDS:-2}); do
    for mb in "" 0; do
      for p in 114 512; do
        v=$(ALICE_CUDA_WCACHE_MB=$mb timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p $p -n 0 -r 5 --warmup-ms 300 2>/dev/null | grep "pp$p" | awk -F'|' '{print $8}')
        echo "round $r, copies ${mb:-on}: pp$p $v"
      done
    done
  done
fi
if has server; then
  timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128
  M=$m OUT=$out/p1 scripts/device/pipe_run.sh server1 2>&1 | tail -8
  M=$m OUT=$out/p0 ALICE_CUDA_WCACHE_MB=0 scripts/device/pipe_run.sh server1 2>&1 | tail -8
  timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128
fi
if has steps; then # a one-row step: bench tg at depth 0 / 114, the engine's B = 1 (greedy, T 0.8)
  for d in 0 114; do timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -d $d -r 3 2>/dev/null | grep tg128; done
  for t in 0 0.8; do timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 114 -n 128 --batch 1 --temp $t 2>/dev/null | grep -E "^\| (model|Llama)"; done
fi
if has prof; then # per-op times (ALICE_CUDA_PROFILE=1, no graph replay): a B = 1 step greedy / T 0.8, tg at d0 / d114
  for t in 0 0.8; do
    ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m "$m" --backend cuda -p 114 -n 64 --batch 1 --temp $t > "$out/prof_t$t.log" 2>&1
    echo "== engine B = 1, temperature $t (dec rows)"; grep -E "cuda profile|^  dec " "$out/prof_t$t.log" | head -16
  done
  for d in 0 114; do
    ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 64 -d $d -r 1 > "$out/prof_d$d.log" 2>&1
    echo "== tg64 at depth $d (dec rows)"; grep -E "cuda profile|^  dec " "$out/prof_d$d.log" | head -16
  done
fi
if has chunk; then # decode attention's cells per split (ALICE_CUDA_ATT_CHUNK) at depth 114, and the generic kernel
  for c in 16 32 64 128; do echo "chunk $c: $(ALICE_CUDA_ATT_CHUNK=$c timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -d 114 -r 3 2>/dev/null | grep tg128 | awk -F'|' '{print $8}')"; done
  echo "generic k_attn: $(ALICE_CUDA_ATT_DEC=0 timeout 60 "$b/bin/alice-bench" -m "$m" --backend cuda -p 0 -n 128 -d 114 -r 3 2>/dev/null | grep tg128 | awk -F'|' '{print $8}')"
fi
if has snsys; then M=$m OUT=$out/sn scripts/device/pipe_run.sh snsys 2>&1 | tail -60; fi
