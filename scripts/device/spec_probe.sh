#!/usr/bin/env bash
# Speculative decoding on the GPU device (issue: speculative decoding): the
# 1B Q4_K_M drafting for itself (every draft accepted: the upper bound), an
# unrelated tiny draft with the same vocabulary (acceptance ~0, with and
# without the p-min cut), and prompt lookup (ngram).
# Here: pack.sh as for batch_run.sh; there: . scripts/device/setup.sh .devbuild && scripts/device/spec_probe.sh
b=${BUILD:-.devbuild}
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
m1=/tmp/llama-1b-Q4_K_M.gguf; mt=/tmp/tiny-Q4_K_M.gguf
[ -f $m1 ] || "$b/bin/alice-mkmodel" --shape llama-1b --type Q4_K_M --vocab $voc -o $m1 --threads 16 > /dev/null
[ -f $mt ] || "$b/bin/alice-mkmodel" --shape tiny --type Q4_K_M --vocab $voc -o $mt --threads 16 --seed 7 > /dev/null
timeout 60 "$b/bin/alice-bench" -m $m1 --backend cuda -p 0 -n 128 -r 3 2>&1 | grep -vE "info|^$" | tail -2
for args in "--draft $m1 --draft-max 8 --draft-p-min 0" "--draft $mt --draft-max 8 --draft-p-min 0" "--draft $mt --draft-max 8" "--spec ngram --draft-max 8"; do
  echo "== $args"
  timeout 150 "$b/bin/alice-bench" -m $m1 --backend cuda -n 128 -r 3 $args 2>&1 | grep -vE "info|^$" | tail -4
done
