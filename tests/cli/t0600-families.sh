#!/bin/sh
# t0600: gemma2, gemma3 and phi3 (issue 17, phase 1). The golden data of
# tests/data/families (regen-families.sh) is whole: tests/mkmodel still
# writes, byte for byte, the F32 files llama.cpp's outputs were computed on.
# kvchat binds these models (fused QKV and gate/up as row views, post-norms,
# soft-caps, sliding-window layers, longrope factors), shows what it bound,
# and refuses to run them with a clear message until the forward pass does.
. "$TOP/tests/cli/lib.sh"
d=$TOP/tests/data/families

for n in gemma2 gemma3 phi3 phi3-long; do
    "$MKMODEL" "$T/$n-F32.gguf" $(cat "$d/$n.opts") >/dev/null
    (cd "$T" && sha256sum -c "$d/$n-F32.sha256" >/dev/null 2>&1) &&
        ok "$n: mkmodel regenerates the F32 file of the goldens" ||
        not_ok "$n: mkmodel's F32 file differs from the one llama.cpp ran"
    for f in F32.logits Q8_0.logits Q4_K_M.logits; do
        [ "$(wc -c < "$d/$n-$f")" = 2048 ] && ok "$n-$f: 512 logits" || not_ok "$n-$f size"
    done
    [ "$(wc -w < "$d/$n-F32.greedy")" = 32 ] && ok "$n: 32 greedy tokens" || not_ok "$n greedy"
done

# what the binding reads, from the quantized files llama.cpp made
run "$KVCHAT" models info "$d/gemma2-Q4_K_M.gguf"
expect_rc 0
expect_out 'sliding window: 16 positions on 2 of 4 layers$'
expect_out 'soft-capping:   attention 5, final logits 2'
expect_out 'block:          post-norms, gelu (tanh) gating, embeddings x16, query scale 0.0883883'
expect_out "runs:           no: architecture 'gemma2' is not supported yet"
run "$KVCHAT" models info "$d/gemma3-Q8_0.gguf"
expect_rc 0
expect_out 'sliding window: 16 positions on 5 of 6 layers (rope freq base 10000 there)'
expect_out 'rope:           neox, freq base 1e+06, 128 dims, scaling linear x8'
expect_out 'block:          q/k norms, post-norms, gelu (tanh) gating'
run "$KVCHAT" models info --json "$d/gemma3-Q8_0.gguf"
[ "$(jq -c '[.runs, .sliding_window, .sliding_window_layers, .final_logit_softcapping, .post_norms]' "$T/out")" = '[false,16,5,0,true]' ] &&
    ok "gemma3 json" || not_ok "gemma3 json: $(cat "$T/out")"
run "$KVCHAT" models info "$d/phi3-long-Q8_0.gguf"
expect_rc 0
expect_out 'sliding window: 16 declared, not used (as llama.cpp)'
expect_out 'longrope:       factors long and short, original context 128, attn factor 1.19024'
expect_out 'block:          fused qkv, fused gate+up, silu gating, query scale 0.125'
run "$KVCHAT" models info --json "$d/phi3-Q4_K_M.gguf"
[ "$(jq -c '[.runs, .fused_qkv, .fused_gate_up, .sliding_window, .rope_scaling_original_context_length]' "$T/out")" = '[false,true,true,0,4096]' ] &&
    ok "phi3 json" || not_ok "phi3 json: $(cat "$T/out")"
# an architecture kvchat runs says so
"$MKMODEL" "$T/llama.gguf" --dim 64 --layers 1 --heads 4 --kv-heads 2 --ff 128 >/dev/null
run "$KVCHAT" models info "$T/llama.gguf"
expect_out 'runs:           yes'
run "$KVCHAT" models info --json "$T/llama.gguf"
[ "$(jq -c '[.runs, .runs_error, .fused_qkv, .ffn_activation, .embedding_scale]' "$T/out")" = '[true,null,false,"silu",1]' ] &&
    ok "llama json" || not_ok "llama json: $(cat "$T/out")"

# running one is refused, before anything is computed, with exit 2
for n in gemma2 gemma3 phi3; do
    run "$KVCHAT" eval -m "$d/$n-Q8_0.gguf" -p "1 2 3"
    expect_rc 2; expect_out_empty
    expect_err "kvchat: cannot open model '.*': architecture '$n' is not supported yet: kvchat reads it but cannot run it"
done
run "$KVCHAT" run --no-cache -m "$d/phi3-Q8_0.gguf" hello
expect_rc 2; expect_err "architecture 'phi3' is not supported yet"

# tokenization only needs the vocabulary: it works
run "$KVCHAT" tokenize -m "$d/gemma3-Q8_0.gguf" "hello"
expect_rc 0

finish
