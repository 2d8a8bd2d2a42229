#!/usr/bin/env bash
# Vulkan speed on the GPU device (issue: Vulkan fast on the boards it is
# for): per-shader profile of decode steps (ALICE_VK_PROFILE=1), then
# alice-bench pp/tg on vulkan and, for the ratio, cuda; optionally the op test.
# Here: scripts/device/pack.sh BUILD vocab/ggml-vocab-llama-bpe.gguf;
# there: . scripts/device/setup.sh .devbuild && scripts/device/vk_run.sh [STAGES]
# (default "prof bench"; also "ops", "inv", "fuse", "nofuse", "parity", "nocm", "profp", "attn0" (the tiled attention), "q6x", "bench8b",
# "launch" (graph_launch test), "ab" (tg128 default / ALICE_PACK=0 / ALICE_VK_GATHER=0 / ALICE_VK_SPIN=0), "pgeom" (packed mat-vec geometries),
# "abv" (this build's Vulkan backend against an earlier one in $BUILD/old, and ALICE_VK_FA=0; ABV also takes
# nowvec, noxh and mmcS/Y/Z), "mmc" (the prefill GEMM's tiles: op test and one product's time),
# "engine" (server_test_engine on vulkan: device sampling, pipelined steps), "batchab" (vulkan --batch against
# $BUILD/old's backend), "batch" (alice-bench --batch,
# greedy and T 0.8, vulkan and cuda), "server" (alice-llm-server on vulkan, this build against $BUILD/old:
# loadgen at 1 and 16 clients; needs .devfix/loadgen.py)); carry .devbuild .devlibs .devfix .gl.
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/vk_out}
mkdir -p "$out"
stages=${*:-prof bench}
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
types=${TYPES:-Q4_K_M Q8_0}
for t in $types; do
  m=/tmp/llama-1b-$t.gguf
  [ -f "$m" ] || timeout 200 "$b/bin/alice-mkmodel" --shape llama-1b --type $t --vocab "$voc" -o "$m" --threads 16 > "$out/mk-$t.log" 2>&1
done
if has ops; then
  ALICE_TEST_BACKEND=vulkan timeout 300 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
  echo "ops on vulkan: rc $? $(grep Synthesis "$out/ops.log")"; grep -E "FAIL|fail" "$out/ops.log" | head -10
fi
if has launch; then
  timeout 120 "$b/bin/backends_test_vulkan_launch" --jobs=1 > "$out/launch.log" 2>&1
  echo "vulkan launch test: rc $? $(grep Synthesis "$out/launch.log")"; grep -E "FAIL|fail" "$out/launch.log" | head -5
fi
if has inv; then
  ALICE_TEST_BACKEND=vulkan ALICE_INV_MODEL=/tmp/llama-1b-Q4_K_M.gguf timeout 300 "$b/bin/core_test_batch_invariance" --filter="batch/decode_many_rows_model" > "$out/inv.log" 2>&1
  echo "batch invariance vulkan (1B, 64 rows): rc $? $(grep Synthesis "$out/inv.log")"; grep -E "differ|FAIL" "$out/inv.log" | head -5
fi
if has fuse; then
  # fused == node by node, bit for bit (tests/core/test_fusion.c), on both GPU backends
  for be in ${FUSE_BACKENDS:-vulkan cuda}; do
    ALICE_TEST_BACKEND=$be timeout 240 "$b/bin/core_test_fusion" --jobs=4 > "$out/fuse-$be.log" 2>&1
    echo "fusion on $be: rc $? $(grep Synthesis "$out/fuse-$be.log")"; grep -E "differ|FAIL" "$out/fuse-$be.log" | head -6
  done
fi
if has parity; then
  # the fixtures carried in .devfix/models that have references
  for m in .devfix/models/*.gguf; do
    n=$(basename "$m" .gguf); id=$(echo "$n" | tr '-' '_')
    [ -f ".devfix/refs/$n.json" ] || continue
    ALICE_TEST_BACKEND=vulkan timeout 200 "$b/bin/core_test_parity" --filter="parity/$id" > "$out/parity-$n.log" 2>&1
    echo "parity vulkan $n: rc $? $(grep -E 'worst' "$out/parity-$n.log" | head -2 | tr '\n' ' ')"
  done
fi
if has ab; then
  # the step as one submission (gathered writes, reads behind the graph) and
  # the packed Q8_0 / Q6_K weights, each against its off switch, interleaved
  for pass in $(seq 1 ${PASSES:-2}); do
    for t in $types; do
      for e in "" ALICE_PACK=0 ALICE_VK_GATHER=0 ALICE_VK_SPIN=0; do
        echo "== $t ${e:-default} (pass $pass): $(env $e timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan -p 0 -n 128 -r 3 --warmup-ms 300 2>/dev/null | grep -E 'tg128' | awk -F'|' '{print $8}')"
      done
    done
  done
fi
if has abv; then
  # pp512 / tg128 of this build's Vulkan backend, of an earlier commit's
  # (its .so in $b/old) and of this one with a comparison switch (ABV: nofa
  # ALICE_VK_FA=0, nomvq: actq.comp rounds the decode products' activations,
  # nogq: actq.comp rounds the attention and GLU outputs for the next product,
  # anyq: the first compute queue family (graphics too)),
  # interleaved
  for pass in $(seq 1 ${PASSES:-2}); do
    for t in $types; do
      for v in ${ABV:-new old nofa}; do
        bp=$ALICE_BACKEND_PATH; e=
        [ $v = old ] && bp=$PWD/$b/old
        [ $v = nofa ] && e=ALICE_VK_FA=0
        [ $v = nomvq ] && e=ALICE_VK_FUSE=norm,normq,rope,mv
        [ $v = nogq ] && e=ALICE_VK_FUSE=norm,normq,rope,mv,mvq
        [ $v = anyq ] && e=ALICE_VK_QUEUE=any
        [ $v = nowvec ] && e=ALICE_VK_MMC_WVEC=0
        [ $v = noxh ] && e=ALICE_VK_MMC_XH=0
        case $v in mmc?) e=ALICE_VK_MMC=${v#mmc} ;; esac
        echo "== $t $v (pass $pass): $(env $e ALICE_BACKEND_PATH=$bp timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan -p 512 -n 128 -r 2 --warmup-ms 300 2>/dev/null | grep -E 'pp512|tg128' | awk -F'|' '{print $7 $8}' | tr '\n' ' ')"
      done
    done
  done
fi
if has mmc; then
  # the prefill GEMM: MUL_MAT's op cases under each of mmc.comp's tiles
  # (ALICE_VK_MMC) and without its vector weight loads (ALICE_VK_MMC_WVEC=0),
  # then one product's time a call (weights cold: copies filling 64 MB)
  for e in ALICE_VK_MMC=S ALICE_VK_MMC=Y ALICE_VK_MMC=Z ALICE_VK_MMC_WVEC=0 ALICE_VK_MMC_XH=0; do
    env $e ALICE_TEST_OPS=MUL_MAT ALICE_TEST_BACKEND=vulkan timeout 200 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops-$e.log" 2>&1
    echo "MUL_MAT ops on vulkan, $e: rc $? $(grep Synthesis "$out/ops-$e.log")"; grep -E "FAIL|fail" "$out/ops-$e.log" | head -4
  done
  for sh in "2048 2048 512" "2048 8192 512" "8192 2048 512" "4096 14336 512"; do
    for e in ${MMC_VARIANTS:-ALICE_VK_MMC=S ALICE_VK_MMC=Y ALICE_VK_MMC=Z ALICE_VK_MMC_XH=0}; do
      env $e ALICE_BENCH_COLD_MB=64 ALICE_BENCH_SECS=0.4 timeout 60 "$b/bin/bench_mul_mat" vulkan 0 $sh ${MMC_TYPES:-Q4_K F16} 2>&1 | sed "s/^/$e /" | grep -E "GFLOP|rror"
    done
  done
fi
if has pgeom; then
  # mat-vec geometries of the packed types (ALICE_VK_MVX=TYPE:RW,KS,U2)
  for g in default 1,1,0 2,2,1 1,2,1 4,2,1 default; do
    e=; [ "$g" = default ] || e="Q6_KP:$g"
    echo "== Q4_K_M, Q6_KP geometry $g: $(ALICE_VK_MVX=$e timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-Q4_K_M.gguf --backend vulkan -p 0 -n 128 -r 3 --warmup-ms 300 2>/dev/null | grep -E 'tg128' | awk -F'|' '{print $8}')"
  done
  for g in default 2,2,1 4,1,0 1,1,1 default; do
    e=; [ "$g" = default ] || e="Q8_0P:$g"
    echo "== Q8_0, Q8_0P geometry $g: $(ALICE_VK_MVX=$e timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-Q8_0.gguf --backend vulkan -p 0 -n 128 -r 3 --warmup-ms 300 2>/dev/null | grep -E 'tg128' | awk -F'|' '{print $8}')"
  done
fi
if has nofuse; then
  for t in $types; do
    echo "== $t, ALICE_VK_FUSE=0: $(ALICE_VK_FUSE=0 timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan -p 0 -n 128 -r 2 2>/dev/null | grep -E 'tg128')"
  done
fi
if has prof; then
  for t in $types; do
    echo "== $t decode, ALICE_VK_PROFILE=1 (-p 0 -n 64)"
    ALICE_VK_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan -p 0 -n 64 -r 1 > "$out/prof-$t.log" 2>&1
    grep -A24 "vulkan profile:" "$out/prof-$t.log" | head -24
  done
fi
if has profp; then
  for t in $types; do
    echo "== $t prefill, ALICE_VK_PROFILE=1 (-p 512 -n 0)"
    ALICE_VK_PROFILE=2 timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan -p 512 -n 0 -r 2 > "$out/profp-$t.log" 2>&1
    grep "vulkan profile: graph" "$out/profp-$t.log" | tail -3
    grep -A18 "vulkan profile: [0-9]* graphs" "$out/profp-$t.log" | head -18
  done
fi
if has bench; then
  for t in $types; do
    timeout 200 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan,cuda -p 512 -n 128 -r 2 2>/dev/null | grep -E "pp512|tg128"
  done
fi
if has nocm; then
  for t in $types; do
    echo "== $t, ALICE_VK_COOPMAT=0: $(ALICE_VK_COOPMAT=0 timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan -p 512 -n 0 -r 2 2>/dev/null | grep -E 'pp512')"
  done
fi
if has attn0; then
  # attnt.comp (opt-in, ALICE_VK_ATTN_TILED=1) against attn.comp, the default
  for t in $types; do
    echo "== $t, ALICE_VK_ATTN_TILED=1: $(ALICE_VK_ATTN_TILED=1 timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-$t.gguf --backend vulkan -p 512 -n 128 -r 3 2>/dev/null | grep -E 'pp512|tg128' | tr '\n' ' ')"
  done
fi
if has q6x; then
  # the Q6_K decode mat-vec's geometry in a whole model (ffn_down and the
  # output): ALICE_VK_MVX=Q6_K:RW,KS,U2 against the default (1,1,0)
  for g in default 2,2,1 1,1,1 1,2,1 2,2,1 default; do
    e=; [ "$g" = default ] || e="Q6_K:$g"
    echo "== Q4_K_M, Q6_K geometry $g: $(ALICE_VK_MVX=$e timeout 120 "$b/bin/alice-bench" -m /tmp/llama-1b-Q4_K_M.gguf --backend vulkan -p 0 -n 128 -r 3 --warmup-ms 500 2>/dev/null | grep -E 'tg128' | awk -F'|' '{print $8}')"
  done
fi
if has bench8b; then
  m8=/tmp/llama-8b-Q4_K_M.gguf
  [ -f "$m8" ] || timeout 300 "$b/bin/alice-mkmodel" --shape llama-8b --type Q4_K_M --vocab "$voc" -o "$m8" --threads 16 > "$out/mk-8b.log" 2>&1
  for be in vulkan cuda; do
    timeout 300 "$b/bin/alice-bench" -m "$m8" --backend $be -p 512 -n 128 -r 2 > "$out/b8-$be.log" 2>&1
    grep -E "pp512|tg128|failed|error" "$out/b8-$be.log" | head -4
  done
fi
if has engine; then
  ALICE_TEST_BACKEND=vulkan timeout 300 "$b/bin/server_test_engine" --jobs=4 > "$out/engine.log" 2>&1
  echo "engine on vulkan: rc $? $(grep Synthesis "$out/engine.log")"; grep -A3 "Assertion" "$out/engine.log" | head -10
fi
if has batchab; then
  # batched decode steps on vulkan, this build against $b/old's backend
  # (BATCHAB="new mvt8": ALICE_VK_MVT=8, eight columns a mat-vec workgroup)
  for v in ${BATCHAB:-new old new old}; do
    bp=$ALICE_BACKEND_PATH; e=; [ $v = old ] && bp=$PWD/$b/old; [ $v = mvt8 ] && e=ALICE_VK_MVT=8
    env $e ALICE_BACKEND_PATH=$bp timeout 200 "$b/bin/alice-bench" -m /tmp/llama-1b-Q4_K_M.gguf --backend vulkan --batch ${BATCHES:-1,4,16} -p 16 -n 64 2>/dev/null | grep "^| Llama" | sed "s/^/$v /"
  done
fi
if has batch; then
  for t in 0 0.8; do
    timeout 200 "$b/bin/alice-bench" -m /tmp/llama-1b-Q4_K_M.gguf --backend vulkan,cuda --batch ${BATCHES:-1,16} -p 16 -n 128 --temp $t 2>/dev/null | grep "^| Llama" | sed "s/^/T $t /"
  done
fi
if has server; then
  # the server on vulkan, this build's backend against $b/old's: one client
  # greedy and at T 0.8, 16 clients at T 0.8 (steps fed on the device: FEED)
  mval() { curl -s localhost:8113/metrics | awk -v k="$1" '$1 == k {print $2}'; }
  for v in new old new old; do
    bp=$ALICE_BACKEND_PATH; [ $v = old ] && bp=$PWD/$b/old
    ALICE_BACKEND_PATH=$bp "$b/bin/alice-llm-server" --model /tmp/llama-1b-Q4_K_M.gguf --backend vulkan --parallel 16 --port 8113 --ctx-size 512 > "$out/srv-$v.log" 2>&1 &
    sp=$!
    for i in $(seq 1 90); do curl -sf localhost:8113/health >/dev/null 2>&1 && break; sleep 1; done
    timeout 60 python3 .devfix/loadgen.py --port 8113 --max-tokens 32 --prompt-words 100 --concurrency 4 --requests-per-client 1 > /dev/null 2>&1
    echo "== vulkan server, $v backend: 1 client greedy, 1 client T 0.8, 16 clients T 0.8 (loadgen: clients | requests | tok/s | ...)"
    for a in "1 3 0" "1 3 0.8" "16 2 0.8"; do
      set -- $a; f0=$(mval alice_steps_fed_total)
      echo "$(timeout 90 python3 .devfix/loadgen.py --port 8113 --max-tokens 128 --prompt-words 100 --concurrency $1 --requests-per-client $2 --extra "{\"temperature\": $3}" 2>&1 | tail -1) steps fed $(( $(mval alice_steps_fed_total) - ${f0:-0} ))"
    done
    kill $sp; wait $sp 2>/dev/null
  done
fi
