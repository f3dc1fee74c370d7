#!/bin/sh
# t0630: qwen35moe (Qwen3.5/3.6 MoE: the qwen35 trunk, routed experts and a
# gated shared expert, issue 24) against llama.cpp and exact math, on the
# golden data of tests/data/qwen35moe (regen-qwen35moe.sh): one synthetic
# model with the real tensor names, shapes and keys, prompts of 8 and 300 ids.
# - tests/mkmodel still writes, byte for byte, the F32 file llama.cpp ran;
# - last-position logits within 1e-4 of the range of llama.cpp's for F32,
#   2e-2 for Q8_0;
# - against the float64 reference (f64-qwen35.py): F32 within 1e-6 of
#   exact; no farther than llama.cpp for F32 on 8 ids and for Q8_0 on both;
# - 32 greedy tokens as llama.cpp's (F32, both prompts);
# - the same bits however the 300 ids go in (one batch, token by token,
#   split anywhere incl. a block of 16 and n - 1, 1 or 2 threads, the
#   portable kernels), F32 and Q8_0, and a prompt crowding two experts;
# - sessions: a turn resumed from disk (KV blocks and the recurrent-state
#   snapshot) answers as --no-cache.
. "$TOP/tests/cli/lib.sh"
d=$TOP/tests/data/qwen35moe
n=q35moe

golden_f32 "$n" "$d"
for p in 8 300; do
    ids=$(cat "$TOP/tests/data/qwen35/prompt$p.txt")
    [ $p = 8 ] && GOLDEN_SHORT=1 || GOLDEN_SHORT=
    golden_prompt "$n" "$d" p$p "$ids" F32 Q8_0
done

# batch invariance: experts, shared expert, recurrence, gated attention;
# the 300 spread ids, and (hot.gguf: mkmodel --hot, whose router's first
# column favours experts 0 and 1 and whose embeddings of ids 300..339 are
# large there) t0620's hot300 prompt, whose tokens crowd the same experts
"$MKMODEL" "$T/hot.gguf" $(cat "$d/$n.opts") --hot 300:340 --type Q8_0 >/dev/null
for m in "$T/$n-F32.gguf" "$d/$n-Q8_0.gguf" "$T/hot.gguf"; do
    p=$(cat "$TOP/tests/data/qwen35/prompt300.txt")
    [ "$m" = "$T/hot.gguf" ] && p=$(cat "$TOP/tests/data/moe/hot300.txt")
    same_bits "$(basename "$m")" "$m" "$p" "-t 1" "--token-by-token -t 2" "--split 1 -t 1" "--split 16 -t 1" \
        "--split 17 -t 2" "--split 299 -t 1" "--split 150 --token-by-token -t 2" "generic -t 2" \
        "generic --token-by-token -t 1"
done

# what the binding reads
info_says "$d/$n-Q8_0.gguf" \
    'rope:           imrope, freq base 1e+06, 8 dims$' \
    'recurrent:      Gated DeltaNet on 3 of 4 layers, RRRA (R recurrent, A attention)$' \
    'experts:        8 a layer on 4 of 4 layers, 2 used a token (softmax, top-k, renormalised), 32 rows each$' \
    'runs:           yes$'
run "$KVCHAT" models info --json "$d/$n-Q8_0.gguf"
# active: all but the 6 unchosen experts' gate, up and down on 4 layers (the shared expert counts)
[ "$(jq '.n_params - .n_params_active' "$T/out")" = $((4 * 6 * 3 * 64 * 32)) ] &&
    ok "active parameters leave out the unchosen experts only" ||
    not_ok "active parameters: $(jq '[.n_params, .n_params_active]' "$T/out")"

# sessions: resumed from the blocks and the recurrent-state snapshot = --no-cache
q="tell me a long story about the sea, the wind and the boats that sail on it at night under the stars, then another"
R="$KVCHAT run -m $d/$n-Q8_0.gguf -t 2 -n 8 --temp 0 --json"
run sh -c "$R -s conv --no-cache '$q' </dev/null"
expect_rc 0
a0=$(jq -r .answer "$T/out")
run sh -c "$R -s conv '$q' </dev/null"
expect_rc 0
[ "$(jq -r .answer "$T/out")" = "$a0" ] && ok "$n: turn 1 answers as --no-cache" || not_ok "$n turn 1: $(cat "$T/out")"
q2="and now one about the mountains"
run sh -c "$R -s conv '$q2' </dev/null"
expect_rc 0
a2=$(jq -r .answer "$T/out") c2=$(jq .cached_tokens "$T/out")
run sh -c "$R -s conv2 --no-cache '$q' </dev/null"
run sh -c "$R -s conv2 --no-cache '$q2' </dev/null"
expect_rc 0
[ "$(jq -r .answer "$T/out")" = "$a2" ] && [ "$c2" -gt 0 ] &&
    ok "$n: turn 2 resumed ($c2 tokens cached) answers as --no-cache" ||
    not_ok "$n turn 2: resumed '$a2' ($c2 cached), --no-cache '$(jq -r .answer "$T/out")'"
snapshot_rerun "$n" "$d/$n-Q8_0.gguf" "$q"

finish
