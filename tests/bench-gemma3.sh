#!/bin/sh
# bench-gemma3.sh - decode speed on a Gemma-3-1B-shaped model (issue 17):
# Gemma 3 1B's real dimensions (26 layers, n_embd 1152, 4 heads, 1 KV head,
# head size 256, n_ff 6912, sliding window 512 on 5 of 6 layers, RoPE bases
# 1e6 / 1e4), its 262144-token vocabulary (tests/data/tokenizer), random
# weights, quantized to Q4_K_M by llama.cpp (llref: this is a benchmark,
# not a test). Prints llama.cpp's figures and kvchat's from the same run,
# 2 threads. Until phase 2 of issue 17 kvchat refuses gemma3 and only
# llama.cpp's line is printed.
# usage: /work/tools/quiet sh tests/bench-gemma3.sh [LLREF]  (after make)
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
echo "llama.cpp: $("$LLREF" bench "$m" -p 64 -n 64 -t 2 2>/dev/null | tail -1)"
if ./kvchat bench -m "$m" -p 64 -n 64 -t 2 --json > "$dir/kv.json" 2> "$dir/kv.err"; then
    echo "kvchat:    $(cat "$dir/kv.json")"
else
    echo "kvchat:    $(cat "$dir/kv.err")"
fi
