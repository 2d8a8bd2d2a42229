#!/usr/bin/env bash
# One device run of the CUDA backend's checks and benchmarks (see
# scripts/device/README.md for packing and carrying the build):
#   . scripts/device/setup.sh .devbuild && bench/cuda/perf_run.sh STAGE...
# stages: tools, bench, benchold (ALICE_CUDA_MMVQ=0), ops, parity, parity0
# (fusion off), prof:<shape>:<type> (alice-bench with ALICE_CUDA_PROFILE=1),
# model:<shape>:<type> (alice-bench -p 512 -n 128 -r 3), steps:<shape>:<type>
# (tg128 with ALICE_CUDA_PROFILE=2: a decode step's wall time split),
# ncu:<shape>:<type> (Nsight Compute: each decode kernel's duration and DRAM
# bytes, summed per kernel over 7 decode steps). Logs under $OUT;
# a summary is printed last.
set -u
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/cuda_out}
mkdir -p "$out"
summary=""
add() { summary="$summary$1"$'\n'; echo "== $1"; }
mk() { # shape type -> path of the model (made once)
  local f=/tmp/$1-$2.gguf
  [ -f "$f" ] || "$b/bin/alice-mkmodel" --shape "$1" --type "$2" --vocab .devfix/vocab/ggml-vocab-llama-bpe.gguf \
    -o "$f" --threads 16 >> "$out/mk.log" 2>&1
  echo "$f"
}
t0=$(date +%s)
for stage in "$@"; do
  case "$stage" in
  tools)
    { which nsys ncu compute-sanitizer; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv; } 2>&1 | head -8
    ;;
  quick)
    timeout 120 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" --quick > "$out/cuda_bench.log" 2>&1
    rc=$?; grep -E "X|FAIL|PASS|fused|attention" "$out/cuda_bench.log" | head -40
    add "quick: rc $rc"
    ;;
  bench)
    timeout 150 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" > "$out/cuda_bench.log" 2>&1
    rc=$?; grep -E "X|FAIL|PASS|fused|attention|copy|^\| (Q|F)" "$out/cuda_bench.log" | head -60
    add "bench: rc $rc"
    ;;
  benchold)
    ALICE_CUDA_MMVQ=0 timeout 150 "$b/bin/alice-cuda-bench" "$b/lib/libalice-backend-cuda.so" > "$out/cuda_bench_old.log" 2>&1
    rc=$?; grep -E "PASS|FAIL|^\| (Q|F)" "$out/cuda_bench_old.log" | head -30
    add "benchold: rc $rc"
    ;;
  ops)
    timeout 200 "$b/bin/backends_test_ops" --jobs=8 > "$out/ops.log" 2>&1
    rc=$?
    grep -E "^\[cuda\]" "$out/ops.log" | grep -v " ok:" | head -20
    add "ops: rc $rc; cuda ok $(grep -c '^\[cuda\].* ok:' "$out/ops.log"), not ok $(grep '^\[cuda\]' "$out/ops.log" | grep -vc ' ok:'); cpu ok $(grep -c '^\[cpu\].* ok:' "$out/ops.log"); $(grep -E 'Synthesis' "$out/ops.log" | tail -1)"
    ;;
  parity|parity0)
    pt() { # model name -> test binary and filter
      case "$1" in gemma2*|qwen35*) echo "core_test_parity_hybrid parity_hybrid/$(echo "$1" | tr '-' '_')" ;;
      *) echo "core_test_parity parity/$(echo "$1" | tr '-' '_')" ;; esac
    }
    for m in .devfix/models/*.gguf; do
      n=$(basename "$m" .gguf); read -r t f <<<"$(pt "$n")"
      if [ "$stage" = parity0 ]; then e="ALICE_CUDA_FUSE=0"; else e="ALICE_CUDA_FUSE=1"; fi
      env $e ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/$t" --filter="$f" >> "$out/$stage.log" 2>&1
      add "$stage $n: rc $?"
    done
    grep -E "worst|median|Synthesis|FAIL|fail" "$out/$stage.log" | tail -24
    if grep -qE "FAIL|rc [1-9]" <<<"$summary"; then
      # find the culprit: each new feature off in turn, failing models only
      for e in ALICE_CUDA_FUSE=0 ALICE_CUDA_MMV_SPLIT=0; do
        for m in .devfix/models/*.gguf; do
          n=$(basename "$m" .gguf); read -r t f <<<"$(pt "$n")"
          grep -q "$stage $n: rc 0" <<<"$summary" && continue
          env $e ALICE_TEST_BACKEND=cuda timeout 60 "$b/bin/$t" --filter="$f" >> "$out/${stage}_off.log" 2>&1
          add "$stage ($e) $n: rc $?"
        done
      done
      grep -E "worst|FAIL" "$out/${stage}_off.log" | head -20
    fi
    ;;
  prof:*)
    IFS=: read -r _ shape type <<<"$stage"
    f=$(mk "$shape" "$type")
    ALICE_CUDA_PROFILE=1 timeout 120 "$b/bin/alice-bench" -m "$f" --backend cuda -p 512 -n 32 -r 3 > "$out/prof_$shape-$type.log" 2>&1
    add "prof $shape $type: rc $?"
    grep -A14 "cuda profile" "$out/prof_$shape-$type.log" | head -30
    ;;
  inv)
    ALICE_TEST_BACKEND=cuda timeout 120 "$b/bin/core_test_batch_invariance" --jobs=4 > "$out/inv.log" 2>&1
    add "batch invariance cuda: rc $? $(grep -E 'Synthesis' "$out/inv.log" | tail -1)"
    grep -E "FAIL|differ" "$out/inv.log" | head -5
    ;;
  errors)
    timeout 90 "$b/bin/backends_test_cuda_errors" > "$out/err.log" 2>&1
    add "cuda_errors: rc $? $(grep -E 'Synthesis' "$out/err.log" | tail -1)"
    grep -E "FAIL|fail" "$out/err.log" | head -5
    ;;
  stepsx:*)
    # stepsx:VAR=value:shape:type — tg128 only, with one switch set
    IFS=: read -r _ ev shape type <<<"$stage"
    f=$(mk "$shape" "$type")
    env "$ev" ALICE_CUDA_PROFILE=2 timeout 120 "$b/bin/alice-bench" -m "$f" --backend cuda -p 0 -n 128 -r 3 > "$out/stepsx_$shape-$type.log" 2>&1
    add "steps ($ev) $shape $type: rc $? $(grep -h 'cuda steps' "$out/stepsx_$shape-$type.log" | sed 's/.*per step: //') $(grep '^| ' "$out/stepsx_$shape-$type.log" | tail -1 | awk -F'|' '{print $8}')"
    ;;
  steps:*)
    IFS=: read -r _ shape type <<<"$stage"
    f=$(mk "$shape" "$type")
    ALICE_CUDA_PROFILE=2 timeout 120 "$b/bin/alice-bench" -m "$f" --backend cuda -p 512 -n 128 -r 3 > "$out/steps_$shape-$type.log" 2>&1
    add "steps $shape $type: rc $? $(grep -h 'cuda steps' "$out/steps_$shape-$type.log" | sed 's/.*per step: //') $(grep '^| ' "$out/steps_$shape-$type.log" | tail -2 | awk -F'|' '{printf "%s %s; ", $7, $8}')"
    ;;
  ncu:*)
    IFS=: read -r _ shape type <<<"$stage"
    f=$(mk "$shape" "$type")
    # -p 1: every step is a decode step (warm-up 2 + pp 1 + tg 4)
    timeout 300 ncu --clock-control none --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      "$b/bin/alice-bench" -m "$f" --backend cuda -p 1 -n 4 -r 1 > "$out/ncu_$shape-$type.csv" 2> "$out/ncu_$shape-$type.err"
    rc=$?
    python3 bench/cuda/ncu_sum.py "$out/ncu_$shape-$type.csv" 7 > "$out/ncu_$shape-$type.txt" 2>&1
    add "ncu $shape $type: rc $rc"
    head -45 "$out/ncu_$shape-$type.txt"
    ;;
  ncu1:*)
    # ncu1:shape:type:COUNT — the first COUNT kernels of one decode step, per kernel and grid
    IFS=: read -r _ shape type cnt <<<"$stage"
    f=$(mk "$shape" "$type")
    timeout 300 ncu --clock-control none --csv --print-units base --launch-count "$cnt" \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      "$b/bin/alice-bench" -m "$f" --backend cuda -p 1 -n 1 -r 1 > "$out/ncu_$shape-$type.csv" 2> "$out/ncu_$shape-$type.err"
    rc=$?
    NCU_BY_GRID=1 python3 bench/cuda/ncu_sum.py "$out/ncu_$shape-$type.csv" 1 > "$out/ncu_$shape-$type.txt" 2>&1
    add "ncu1 $shape $type: rc $rc"
    head -45 "$out/ncu_$shape-$type.txt"
    ;;
  model:*|model0:*|modelF:*)
    # model0: PDL off; modelF: flash attention off (ALICE_CUDA_FATTN=0), for comparison
    IFS=: read -r kind shape type <<<"$stage"
    f=$(mk "$shape" "$type")
    case "$kind" in model0) e="ALICE_CUDA_PDL=0";; modelF) e="ALICE_CUDA_FATTN=0";; *) e="ALICE_CUDA_PDL=1";; esac
    env $e timeout 200 "$b/bin/alice-bench" -m "$f" --backend cuda -p 512 -n 128 -r 3 > "$out/ab_$kind-$shape-$type.log" 2>&1
    rc=$?
    add "$kind $shape $type: rc $rc $(grep '^| ' "$out/ab_$kind-$shape-$type.log" | tail -2 | tr '\n' ' ')"
    ;;
  rm:*)
    IFS=: read -r _ shape type <<<"$stage"
    rm -f "/tmp/$shape-$type.gguf"
    ;;
  esac
  echo "-- $stage done at +$(( $(date +%s) - t0 )) s"
done
echo "==== summary"
printf '%s' "$summary"
# at most 8 files come back: fold the logs into a few
if [ -n "${OUT:-}" ]; then
  cd "$out" && {
    cat ab_*.log > all_bench.log 2>/dev/null
    cat prof_*.log steps*.log ncu_*.txt ncu_*.err inv.log err.log > all_prof.log 2>/dev/null
    gzip -c ncu_*.csv > ncu_csv.gz 2>/dev/null
    cat parity*.log > all_parity.log 2>/dev/null
    grep -E "^\[(cuda|cpu)\]|Synthesis|FAIL|CRASH|Assert" ops.log > ops_short.log 2>/dev/null
    rm -f ab_*.log prof_*.log steps*.log inv.log err.log ncu_*.txt ncu_*.err ncu_*.csv parity*.log ops.log mk.log
  }
fi
