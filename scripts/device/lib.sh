# Sourced by the device scripts: build dir b, output dir out (OUT, else
# /tmp/$1_out), stage test has, a log's Criterion summary syn, and mk to make
# a synthetic model /tmp/SHAPE-TYPE.gguf once.
b=${BUILD:-.devbuild}
out=${OUT:-/tmp/${1:-dev}_out}
mkdir -p "$out"
voc=.devfix/vocab/ggml-vocab-llama-bpe.gguf
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
syn() { grep -E 'Synthesis' "$1" | tail -1 | sed 's/.*Synthesis: //'; }
mk() { [ -f "/tmp/$1-$2.gguf" ] || timeout 200 "$b/bin/alice-mkmodel" --shape "$1" --type "$2" --vocab "$voc" -o "/tmp/$1-$2.gguf" --threads 16 >> "$out/mk.log" 2>&1; }
