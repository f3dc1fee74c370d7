#!/bin/sh
# bench-qwen35.sh - prefill and decode speed on a Qwen3.5-0.8B-shaped
# model (issue 23), kvchat against llama.cpp in the same run, alternating.
# Qwen3.5-0.8B's real dimensions (its config.json's text_config): 24 layers
# (Gated DeltaNet on 3 of every 4, full attention every 4th), n_embd 1024,
# n_ff 3584, 8 query heads, 2 KV heads of 256 with 64 rotary dims (partial
# rotary 0.25, sections 11/11/10), rope theta 1e7, Gated DeltaNet with 16 key
# and 16 value heads of 128 and a 4-tap conv, tied embeddings of 248320
# tokens (the placeholder vocabulary at that size: the tokenizer plays no
# part here); random weights, Q8_0 (tests/mkmodel writes it). 2 threads.
# Prints both engines' prefill (512 tokens) and decode (128) speeds, ROUNDS
# times each, alternating, then the best of each and the ratios (issue 23
# asks for >= 1.3 on both).
# The machine must be quiet: on a loaded one the figures mean nothing.
# usage: /work/tools/quiet sh bench/bench-qwen35.sh [LLREF]  (after make;
#        ROUNDS=3 by default)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
ROUNDS=${ROUNDS:-3}
dir=${TMPDIR:-/tmp}/kvchat-bench-qwen35
mkdir -p "$dir"
[ -x tests/mkmodel ] || make tests/mkmodel >/dev/null
m=$dir/qwen35-0.8b-Q8_0.gguf
if [ ! -f "$m" ]; then
    nice tests/mkmodel "$m.tmp" --arch qwen35 --n-vocab 248320 --dim 1024 --layers 24 --heads 8 \
        --kv-heads 2 --head-dim 256 --rope-dim 64 --rope-sections 11,11,10,0 --ff 3584 \
        --ssm-state 128 --ssm-groups 16 --ssm-heads 16 --ssm-conv 4 --full-attn-interval 4 \
        --rope-theta 10000000 --ctx 262144 --tied --scale 0.02 --type Q8_0 >/dev/null
    mv "$m.tmp" "$m"
fi
best() { sort -g | tail -1; }
: > "$dir/ll-pp"; : > "$dir/ll-tg"; : > "$dir/kv-pp"; : > "$dir/kv-tg"
r=0
while [ $r -lt "$ROUNDS" ]; do
    r=$((r + 1))
    "$LLREF" bench "$m" -p 512 -n 128 -t 2 >"$dir/ll.out" 2>/dev/null || { echo "llama.cpp failed"; exit 1; }
    sed -n 's/^prefill_tok_s \([0-9.]*\)/\1/p' "$dir/ll.out" >> "$dir/ll-pp"
    sed -n 's/^decode_tok_s \([0-9.]*\)/\1/p' "$dir/ll.out" >> "$dir/ll-tg"
    ./kvchat bench -m "$m" -p 512 -n 128 -t 2 -r 1 --json >"$dir/kv.json" 2>"$dir/kv.err" ||
        { echo "kvchat failed: $(cat "$dir/kv.err")"; exit 1; }
    sed -n 's/.*"prefill_tok_s": \([0-9.]*\).*/\1/p' "$dir/kv.json" >> "$dir/kv-pp"
    sed -n 's/.*"decode_tok_s": \([0-9.]*\).*/\1/p' "$dir/kv.json" >> "$dir/kv-tg"
    echo "round $r: llama.cpp pp512 $(tail -1 "$dir/ll-pp") tg128 $(tail -1 "$dir/ll-tg");" \
         "kvchat pp512 $(tail -1 "$dir/kv-pp") tg128 $(tail -1 "$dir/kv-tg") tok/s"
done
lp=$(best <"$dir/ll-pp") lt=$(best <"$dir/ll-tg") kp=$(best <"$dir/kv-pp") kt=$(best <"$dir/kv-tg")
awk -v lp="$lp" -v lt="$lt" -v kp="$kp" -v kt="$kt" 'BEGIN {
    printf "prefill 512: kvchat %.1f tok/s, llama.cpp %.1f tok/s: %.2fx\n", kp, lp, kp / lp
    printf "decode:      kvchat %.1f tok/s, llama.cpp %.1f tok/s: %.2fx\n", kt, lt, kt / lt }'
