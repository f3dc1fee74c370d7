#!/bin/sh
# regen-engine.sh - regenerates the engine's golden outputs from llama.cpp
# (llref, ../shared/peer/setup.sh) for tests/test_engine.c.
#
# The models are not committed: tests/mkmodel regenerates them bit-
# identically at test time with the options below (for llama and qwen2 F32
# its files are byte-identical to `llref mkmodel`; with --type it stores the
# same tensor data as `llref quantize` gives, which was checked by llama.cpp
# giving bit-identical logits on both). What is committed, per model:
#   ARCH-TYPE.logits  llama.cpp's last-position logits for the prompt in
#                     prompt.txt, little-endian f32, the first 8192 of them
#                     (all of them for the small placeholder vocabulary)
#   ARCH-F32.greedy   llama.cpp's first 16 greedy tokens after the prompt
# usage: tests/data/regen-engine.sh [LLREF]   (run from the top directory,
#        after `make tests/mkmodel`)
set -eu
LLREF=${1:-$HOME/.cache/llref/llref}
VOCAB=${LLREF_HOME:-$HOME/.cache/llref}/src/models/ggml-vocab-qwen2.gguf
out=tests/data/engine
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
# 64 ids valid in every vocabulary used here
i=0 ids=
while [ $i -lt 64 ]; do ids="$ids $(( (i * 37 + 11) % 500 + 3 ))"; i=$((i + 1)); done
echo $ids >"$out/prompt.txt"
cp "$VOCAB" "$tmp/vocab.gguf"

opts() { # arch -> mkmodel options (tests/test_engine.c uses the same)
    case $1 in
    llama) echo "--arch llama --dim 128 --layers 2 --heads 4 --kv-heads 2 --ff 256 --seed 3" ;;
    qwen2) echo "--arch qwen2 --vocab $tmp/vocab.gguf --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --tied --rope-theta 1000000 --seed 4" ;;
    qwen3) echo "--arch qwen3 --dim 128 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ff 256 --rope-theta 1000000 --seed 5" ;;
    esac
}
for arch in llama qwen2 qwen3; do
    for type in F32 F16 BF16 Q8_0; do
        m=$tmp/$arch-$type.gguf
        tests/mkmodel "$m" $(opts $arch) --type $type >/dev/null
        "$LLREF" logits "$m" -p "$ids" -o "$tmp/l.f32" >/dev/null 2>&1
        head -c 32768 "$tmp/l.f32" >"$out/$arch-$type.logits"
        if [ $type = F32 ]; then
            "$LLREF" greedy "$m" -p "$ids" -n 16 2>/dev/null >"$out/$arch-$type.greedy"
        fi
        rm -f "$m"
    done
done
# a 600-token prompt: two prefill passes of n_batch 512 (as llama.cpp's ubatch)
i=0 long=
while [ $i -lt 600 ]; do long="$long $(( (i * 37 + 11) % 500 + 3 ))"; i=$((i + 1)); done
for am in "llama F32" "qwen3 Q8_0"; do
    set -- $am
    m=$tmp/$1-$2.gguf
    tests/mkmodel "$m" $(opts $1) --type $2 >/dev/null
    "$LLREF" logits "$m" -p "$long" -o "$out/$1-$2-600.logits" >/dev/null 2>&1
    rm -f "$m"
done
echo "wrote $out"
