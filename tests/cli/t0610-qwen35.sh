#!/bin/sh
# t0610: qwen35 (Qwen3.5: Gated DeltaNet layers and gated attention, issue
# 23) against llama.cpp and exact math, on the golden data of
# tests/data/qwen35 (regen-qwen35.sh): two synthetic models with the real
# tensor layouts and keys (one layer pattern from full_attention_interval,
# one from attention.recurrent_layers), prompts of 8 and 300 ids.
# - tests/mkmodel still writes, byte for byte, the F32 files llama.cpp ran;
# - last-position logits within 1e-4 of the range of llama.cpp's for F32,
#   2e-2 for Q8_0 and Q4_K_M;
# - against the float64 reference (f64-qwen35.py): F32 within 1e-6 of
#   exact (K, V rounded to f16 as the cache does), within 5e-7 with an f32
#   KV cache; no farther than llama.cpp for F32 on 8 ids (on 300 both sit
#   at the f16 cache's ~1e-7) and for Q8_0 and Q4_K_M on both prompts
#   (llama.cpp rounds activations to 8 bits, kvchat to 16);
# - 32 greedy tokens as llama.cpp's (F32, both prompts);
# - the same bits however the 300 ids go in: one batch, token by token,
#   split anywhere (a block of 16, K = n - 1), 1 or 2 threads, the portable
#   kernels, for F32, Q8_0 and Q4_K_M: the recurrence runs one fixed
#   per-token order on every path.
. "$TOP/tests/cli/lib.sh"
d=$TOP/tests/data/qwen35

for n in qwen35 qwen35-rl; do
    golden_f32 "$n" "$d"
    for p in 8 300; do
        ids=$(cat "$d/prompt$p.txt")
        [ $p = 8 ] && GOLDEN_SHORT=1 || GOLDEN_SHORT=
        golden_prompt "$n" "$d" p$p "$ids" F32 Q8_0 Q4_K_M
    done
    run "$KVCHAT" eval -m "$T/$n-F32.gguf" -p "$(cat "$d/prompt300.txt")" -c 512 --kv-type f32 --logits-out "$T/l32.f32"
    e=$(rel_err "$T/l32.f32" "$d/$n-F32-p300.f64kv.f32")
    le "$e" 5e-7 && ok "$n F32, f32 KV: within 5e-7 of exact ($e)" || not_ok "$n f32 KV: $e from exact"
done

# batch invariance of the recurrence and the gated attention
p=$(cat "$d/prompt300.txt")
for m in "$T/qwen35-F32.gguf" "$d/qwen35-Q8_0.gguf" "$d/qwen35-Q4_K_M.gguf" "$T/qwen35-rl-F32.gguf" \
    "$d/qwen35-rl-Q4_K_M.gguf"; do
    same_bits "$(basename "$m")" "$m" "$p" "-t 1" "--token-by-token -t 2" "--split 1 -t 1" "--split 3 -t 2" \
        "--split 16 -t 1" "--split 17 -t 2" "--split 299 -t 1" "--split 150 --token-by-token -t 2" "--split 64 -t 2" \
        "--split 256 -t 1" "generic -t 2" "generic --token-by-token -t 1"
done

# a head size that is not a multiple of the 8 lanes the recurrence sums in
"$MKMODEL" "$T/s12.gguf" --arch qwen35 --dim 64 --layers 4 --heads 2 --kv-heads 1 --head-dim 32 --rope-dim 8 \
    --ff 128 --ssm-state 12 --ssm-groups 1 --ssm-heads 3 --seed 7 >/dev/null
p=$(cat "$d/prompt300.txt")
"$KVCHAT" eval -m "$T/s12.gguf" -p "$p" --logits-out "$T/ref.f32" >/dev/null 2>&1 || not_ok "state 12: eval failed"
bad=
for how in "--token-by-token -t 1" "--split 77 -t 2"; do
    # shellcheck disable=SC2086
    "$KVCHAT" eval -m "$T/s12.gguf" -p "$p" $how --logits-out "$T/l.f32" >/dev/null 2>&1 && cmp -s "$T/ref.f32" "$T/l.f32" ||
        bad="$bad [$how]"
    # shellcheck disable=SC2086
    KVCHAT_CPU=generic "$KVCHAT" eval -m "$T/s12.gguf" -p "$p" $how --logits-out "$T/l.f32" >/dev/null 2>&1 &&
        cmp -s "$T/ref.f32" "$T/l.f32" || bad="$bad [generic $how]"
done
[ -z "$bad" ] && ok "state size 12: the same bits every way, AVX2 and portable" || not_ok "state size 12 differs:$bad"

# a prompt longer than a pass (n_batch 512): the conv window and the state
# carried from pass to pass within one decode
across_passes "$d/qwen35-Q8_0.gguf"

# what the binding reads: the layer pattern and the state's size
info_says "$d/qwen35-rl-Q4_K_M.gguf" \
    'rope:           imrope, freq base 10000, 16 dims$' \
    'recurrent:      Gated DeltaNet on 3 of 5 layers, RARRA (R recurrent, A attention)$'
# 3 layers x (3 x 128 conv inputs + 2 x 32 x 32) x 4 bytes
expect_out 'state:          28.50 KiB a sequence (29184 bytes): conv of 4 taps, 2 value heads on 1 key heads, heads of 32$'
expect_out 'block:          gated attention, q/k norms, silu gating, query scale 0.176777$'
expect_out 'runs:           yes$'
run "$KVCHAT" models info --json "$d/qwen35-Q8_0.gguf"
[ "$(jq -c '[.runs, .recurrent_layers, .layer_pattern, .recurrent_state_bytes, .attention_gate, .ssm_group_count]' "$T/out")" = \
    '[true,3,"RRRA",16896,true,2]' ] && ok "qwen35 json" || not_ok "qwen35 json: $(cat "$T/out")"

# a chat turn runs, and a second one in a new process resumes from the
# recurrent-state snapshot one token before the prompt's end (issue 23's
# snapshots, docs/snapshots.md) and answers the same
q="tell me a long story about the sea, the wind and the boats that sail on it at night under the stars, then another"
snapshot_rerun qwen35 "$d/qwen35-Q8_0.gguf" "$q" fresh

finish
