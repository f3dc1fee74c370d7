#!/bin/sh
# t0600: gemma2, gemma3 and phi3 (issue 17) against llama.cpp and exact math,
# on the golden data of tests/data/families (regen-families.sh): synthetic
# models with the real tensor layouts and keys, a 100-token prompt against a
# sliding window of 16. tests/mkmodel still writes, byte for byte, the F32
# files llama.cpp ran. Then, for each:
# - last-position logits (-c 256: llama.cpp's context there, which picks
#   phi3's short or long RoPE factors) within 2e-2 of the range of
#   llama.cpp's for Q8_0 and Q4_K_M, and within 1e-4 for F32 for phi3;
#   gemma's F32 logits are within 1e-4 of the float64 reference
#   (f64-families.py) and closer to it than llama.cpp's, whose GELU goes
#   through an f16 table (~3e-4 off exact here: the two differ by ~3e-4,
#   asserted below 5e-4); with an f32 KV cache within 5e-6 of exact; the
#   quantized files closer to exact (dequantized) than llama.cpp's too;
# - 32 greedy tokens equal to llama.cpp's (F32);
# - the same bits however a 300-token prompt (longer than the window) goes
#   in: one batch or token by token, split anywhere, 1 or 2 threads, the
#   portable kernels.
. "$TOP/tests/cli/lib.sh"
d=$TOP/tests/data/families
ids=$(cat "$d/prompt.txt")

for n in gemma2 gemma3 phi3 phi3-long; do
    golden_f32 "$n" "$d"
    for t in F32 Q8_0 Q4_K_M; do
        m=$d/$n-$t.gguf
        [ $t = F32 ] && m=$T/$n-F32.gguf
        run "$KVCHAT" eval -m "$m" -p "$ids" -c 256 --logits-out "$T/l.f32"
        expect_rc 0
        e=$(rel_err "$T/l.f32" "$d/$n-$t.logits")
        tol=2e-2
        case $n-$t in phi3*-F32) tol=1e-4 ;; gemma*-F32) tol=5e-4 ;; esac
        le "$e" $tol && ok "$n $t: within $tol of llama.cpp ($e)" || not_ok "$n $t: $e from llama.cpp, wanted <= $tol"
        case $n in gemma*)
            ours=$(rel_err "$T/l.f32" "$d/$n-$t.f64.f32")
            theirs=$(rel_err "$d/$n-$t.logits" "$d/$n-$t.f64.f32")
            le "$ours" "$theirs" && ok "$n $t: error $ours <= llama.cpp's $theirs" ||
                not_ok "$n $t: error $ours, llama.cpp's $theirs"
            if [ $t = F32 ]; then
                le "$ours" 1e-4 && ok "$n F32: within 1e-4 of exact ($ours)" || not_ok "$n F32: $ours from exact"
                run "$KVCHAT" eval -m "$m" -p "$ids" -c 256 --kv-type f32 --logits-out "$T/l32.f32"
                e=$(rel_err "$T/l32.f32" "$d/$n-F32.f64kv.f32")
                le "$e" 5e-6 && ok "$n F32, f32 KV: within 5e-6 of exact ($e)" || not_ok "$n f32 KV: $e from exact"
            fi
        esac
    done
    golden_greedy "$n" "$T/$n-F32.gguf" "$ids" 256 "$d/$n-F32.greedy"
done

# batch invariance with the window, the soft-caps and the RoPE variants
p=$(awk 'BEGIN { x = 17; for (i = 0; i < 300; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? " " : "", x % 500 + 3 } }')
for m in "$T/gemma2-F32.gguf" "$d/gemma2-Q4_K_M.gguf" "$T/gemma3-F32.gguf" "$d/gemma3-Q8_0.gguf" "$d/phi3-long-Q4_K_M.gguf"; do
    same_bits "$(basename "$m")" "$m" "$p" "-t 1" "--token-by-token -t 2" "--split 1 -t 1" "--split 15 -t 2" \
        "--split 16 -t 1" "--split 17 -t 2" "--split 299 -t 1" "--split 150 --token-by-token -t 2" "--split 64 -t 2" \
        "--split 256 -t 1" "generic -t 2"
done

# what the binding reads, from the quantized files llama.cpp made
info_says "$d/gemma2-Q4_K_M.gguf" \
    'sliding window: 16 positions on 2 of 4 layers$' \
    'soft-capping:   attention 5, final logits 2' \
    'block:          post-norms, gelu (tanh) gating, embeddings x16, query scale 0.0883883' \
    "runs:           yes"
info_says "$d/gemma3-Q8_0.gguf" \
    'sliding window: 16 positions on 5 of 6 layers (rope freq base 10000 there)' \
    'rope:           neox, freq base 1e+06, 128 dims, scaling linear x8' \
    'block:          q/k norms, post-norms, gelu (tanh) gating'
run "$KVCHAT" models info --json "$d/gemma3-Q8_0.gguf"
[ "$(jq -c '[.runs, .sliding_window, .sliding_window_layers, .final_logit_softcapping, .post_norms]' "$T/out")" = '[true,16,5,0,true]' ] &&
    ok "gemma3 json" || not_ok "gemma3 json: $(cat "$T/out")"
info_says "$d/phi3-long-Q8_0.gguf" \
    'sliding window: 16 declared, not used (as llama.cpp)' \
    'longrope:       factors long and short, original context 128, attn factor 1.19024' \
    'block:          fused qkv, fused gate+up, silu gating, query scale 0.125'
run "$KVCHAT" models info --json "$d/phi3-Q4_K_M.gguf"
[ "$(jq -c '[.runs, .fused_qkv, .fused_gate_up, .sliding_window, .rope_scaling_original_context_length]' "$T/out")" = '[true,true,true,0,4096]' ] &&
    ok "phi3 json" || not_ok "phi3 json: $(cat "$T/out")"
# an architecture kvchat runs says so
"$MKMODEL" "$T/llama.gguf" --dim 64 --layers 1 --heads 4 --kv-heads 2 --ff 128 >/dev/null
run "$KVCHAT" models info "$T/llama.gguf"
expect_out 'runs:           yes'
run "$KVCHAT" models info --json "$T/llama.gguf"
[ "$(jq -c '[.runs, .runs_error, .fused_qkv, .ffn_activation, .embedding_scale]' "$T/out")" = '[true,null,false,"silu",1]' ] &&
    ok "llama json" || not_ok "llama json: $(cat "$T/out")"

# a chat turn runs on each
for n in gemma2 gemma3 phi3; do
    run "$KVCHAT" run --no-cache -m "$d/$n-Q8_0.gguf" -n 8 --temp 0 hello
    expect_rc 0
done

# tokenization only needs the vocabulary: it works
run "$KVCHAT" tokenize -m "$d/gemma3-Q8_0.gguf" "hello"
expect_rc 0

finish
