#!/bin/sh
# bench-gemma3.sh - decode speed on a Gemma-3-1B-shaped model (issue 17):
# Gemma 3 1B's real dimensions (26 layers, n_embd 1152, 4 heads, 1 KV head,
# head size 256, n_ff 6912, sliding window 512 on 5 of 6 layers, RoPE bases
# 1e6 / 1e4), its 262144-token vocabulary (tests/data/tokenizer), random
# weights, quantized to Q4_K_M by llama.cpp (llref: this is a benchmark,
# not a test). Prints llama.cpp's decode speed and kvchat's from the same
# run, 2 threads, and their ratio (issue 17 asks for >= 1.2). Most of
# Gemma 3 1B's matrices have rows of 1152 elements, not a multiple of 256:
# llama.cpp's Q4_K_M mixture stores them as Q5_0 and Q8_0 (its fallback),
# so those kernels, not Q4_K's, set the speed.
# usage: /work/tools/quiet sh bench/bench-gemma3.sh [LLREF]  (after make)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
dir=${TMPDIR:-/tmp}/kvchat-bench-gemma3
mkdir -p "$dir"
[ -x tests/mkmodel ] || make tests/mkmodel >/dev/null
if [ ! -f "$dir/gemma3-1b-Q4_K_M.gguf" ]; then
    xz -dc tests/data/tokenizer/ggml-vocab-gemma-3.gguf.xz > "$dir/vocab.gguf"
    nice tests/mkmodel "$dir/f32.gguf" --arch gemma3 --vocab "$dir/vocab.gguf" --dim 1152 \
        --layers 26 --heads 4 --kv-heads 1 --head-dim 256 --ff 6912 --swa 512 --ctx 32768 \
        --rope-theta 1000000 --rope-theta-swa 10000 --scale 0.02 --embd-scale 0.03 --tied >/dev/null
    "$LLREF" quantize "$dir/f32.gguf" "$dir/gemma3-1b-Q4_K_M.gguf" Q4_K_M >/dev/null 2>&1
    rm -f "$dir/f32.gguf" "$dir/vocab.gguf"
fi
m=$dir/gemma3-1b-Q4_K_M.gguf
ref=$("$LLREF" bench "$m" -p 64 -n 64 -t 2 2>/dev/null | tail -1)
echo "llama.cpp: $ref"
if ./kvchat bench -m "$m" -p 64 -n 64 -t 2 --json > "$dir/kv.json" 2> "$dir/kv.err"; then
    echo "kvchat:    $(cat "$dir/kv.json")"
    ours=$(sed -n 's/.*"decode_tok_s": \([0-9.]*\).*/\1/p' "$dir/kv.json")
    theirs=$(echo "$ref" | sed -n 's/.*decode_tok_s \([0-9.]*\).*/\1/p')
    awk -v a="$ours" -v b="$theirs" 'BEGIN { if (b > 0) printf "decode: kvchat %.2f tok/s, llama.cpp %.2f tok/s: %.2fx\n", a, b, a / b }'
else
    echo "kvchat:    $(cat "$dir/kv.err")"
fi
