#!/bin/sh
# regen-models-info.sh - makes the reference figures that tests/cli/t0002
# compares `kvchat models info --json` against: llama.cpp's own view of each
# model (tests/data/llinfo.c against llref's library).
#   usage: tests/data/regen-models-info.sh   (from the top of the tree, after make check's build)
# Models: those tests/mkmodel regenerates at test time (byte-identical to
# llref mkmodel), and llref-quantized files committed in models-info/ since
# kvchat has no K-quant quantizer. Needs ../shared/peer/setup.sh (llref).
# The gemma4 row of t0002 is not made here: its figures (per-layer head
# sizes, sliding pattern, shared-KV layers, experts, active parameters) are
# computed by hand in the test itself.
set -eu
top=$(pwd)
llref=$(sh "$top/../shared/peer/setup.sh")
home=$(dirname "$llref")
lib=$(sed -n 's/^LLREF_LIBDIR="\(.*\)" exec.*/\1/p' "$llref")
out=$top/tests/data/models-info
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -std=c11 -o "$tmp/llinfo" "$top/tests/data/llinfo.c" -I"$home/src/include" \
   -I"$home/src/ggml/include" -L"$lib" -lllama -lggml -lggml-base -Wl,-rpath,"$lib"
mk="$top/tests/mkmodel"
vocab=$top/tests/data/vocab/ggml-vocab-qwen2.gguf

# keep these command lines in step with tests/cli/t0002-models-info.sh
"$mk" "$tmp/llama-f32.gguf" --dim 256 --layers 2 --heads 8 --kv-heads 2 --ff 512 --n-vocab 512 >/dev/null
"$mk" "$tmp/qwen2-vocab.gguf" --arch qwen2 --vocab "$vocab" --dim 64 --layers 1 --heads 4 --kv-heads 2 \
      --ff 128 --tied --rope-theta 1000000 --ctx 32768 >/dev/null
"$mk" "$tmp/qwen3-f32.gguf" --arch qwen3 --dim 128 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 \
      --ff 256 --n-vocab 300 >/dev/null
# byte-identity of the generator with llama.cpp's writer, recorded here
"$llref" mkmodel "$tmp/llama-f32-ref.gguf" --dim 256 --layers 2 --heads 8 --kv-heads 2 --ff 512 --n-vocab 512 >/dev/null
cmp "$tmp/llama-f32.gguf" "$tmp/llama-f32-ref.gguf"
for t in F16 Q8_0 Q4_K_M; do
    f=$(echo "$t" | tr 'A-Z' 'a-z')
    "$llref" quantize "$tmp/llama-f32.gguf" "$out/llama-$f.gguf" "$t" >/dev/null 2>&1
done
export LLREF_LIBDIR="$lib"
for m in llama-f32 qwen2-vocab qwen3-f32; do
    "$tmp/llinfo" "$tmp/$m.gguf" > "$out/$m.ref"
done
for t in f16 q8_0 q4_k_m; do
    "$tmp/llinfo" "$out/llama-$t.gguf" > "$out/llama-$t.ref"
done
# the gemma2/gemma3/phi3 files of tests/data/families (regen-families.sh)
for m in gemma2 gemma3 phi3; do
    for t in Q8_0 Q4_K_M; do
        "$tmp/llinfo" "$top/tests/data/families/$m-$t.gguf" > "$out/$m-$(echo $t | tr 'A-Z' 'a-z').ref"
    done
done
echo "regen-models-info: wrote $out"
