#!/bin/sh
# t0640: gpt-oss (issue 24, docs/moe.md): attention sinks, a 128-token
# window on alternate layers, YaRN RoPE, biased attention and experts, the
# clamped SwiGLU, top-k then softmax gating, MXFP4 experts; against
# llama.cpp and exact math on the golden data of tests/data/gptoss
# (regen-gptoss.sh): a synthetic model with the real tensor layouts and keys
# (3 layers, 8 experts, 4 used), prompts of 8 and 300 ids (300 crosses the
# window) and 300 ids that all route to the same 4 experts.
# - tests/mkmodel still writes, byte for byte, the F32 file llama.cpp ran;
# - F32 last-position logits within 1e-4 of the range of llama.cpp's, and
#   within 5e-5 of the float64 pass (f64-gptoss.py; K, V rounded to f16 as
#   the cache does), within 1e-6 with an f32 KV cache against exact K, V
#   (1e-5 for the hot prompt, whose embedding gain of 8 makes larger sums);
# - MXFP4 (experts MXFP4, the rest Q8_0: llama.cpp's MXFP4_MOE) within 2e-2
#   of llama.cpp and no farther from exact than llama.cpp;
# - 32 greedy tokens as llama.cpp's (F32);
# - batch invariance over t0402's ways (one batch on 2 or 1 threads, token
#   by token, --split K for K = 1, n - 1, 64, 127, 128, 129, 256, half as a
#   batch and the rest token by token, the portable kernels), F32 and MXFP4,
#   spread and hot prompts;
# - models info: experts, gating, window, active parameters.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/logits-lib.sh"
d=$TOP/tests/data/gptoss
mp=$TOP/tests/data/moe

"$MKMODEL" "$T/gptoss-F32.gguf" $(cat "$d/gptoss.opts") >/dev/null
(cd "$T" && sha256sum -c "$d/gptoss-F32.sha256" >/dev/null 2>&1) &&
    ok "mkmodel regenerates the F32 file of the goldens" ||
    not_ok "mkmodel's F32 file differs from the one llama.cpp ran"
for p in p8 p300 hot300; do
    case $p in hot300) ids=$(cat "$mp/hot300.txt") ;; *) ids=$(cat "$mp/prompt${p#p}.txt") ;; esac
    for t in F32 MXFP4; do
        m=$d/gptoss-$t.gguf
        [ $t = F32 ] && m=$T/gptoss-F32.gguf
        g=$d/gptoss-$t-$p
        run "$KVCHAT" eval -m "$m" -p "$ids" -c 512 --logits-out "$T/l.f32"
        expect_rc 0
        e=$(rel_err "$T/l.f32" "$g.logits")
        ours=$(rel_err "$T/l.f32" "$g.f64.f32")
        theirs=$(rel_err "$g.logits" "$g.f64.f32")
        if [ $t = F32 ]; then
            le "$e" 1e-4 && ok "F32 $p: within 1e-4 of llama.cpp ($e)" || not_ok "F32 $p: $e from llama.cpp"
            le "$ours" 5e-5 && ok "F32 $p: within 5e-5 of exact ($ours; llama.cpp $theirs)" ||
                not_ok "F32 $p: $ours from exact"
            run "$KVCHAT" eval -m "$m" -p "$ids" -c 512 --kv-type f32 --logits-out "$T/l32.f32"
            e32=$(rel_err "$T/l32.f32" "$d/gptoss-F32-$p.f64kv.f32")
            tol=1e-6
            [ $p = hot300 ] && tol=1e-5 # (its embedding's gain of 8: larger sums, 4.8e-6 measured)
            le "$e32" $tol && ok "F32 $p, f32 KV: within $tol of exact ($e32)" || not_ok "F32 $p, f32 KV: $e32 from exact"
        else
            le "$e" 2e-2 && ok "MXFP4 $p: within 2e-2 of llama.cpp ($e)" || not_ok "MXFP4 $p: $e from llama.cpp"
            le "$ours" "$theirs" && ok "MXFP4 $p: error $ours <= llama.cpp's $theirs" ||
                not_ok "MXFP4 $p: error $ours, llama.cpp's $theirs"
        fi
    done
    run "$KVCHAT" generate -m "$T/gptoss-F32.gguf" -p "$ids" -n 32 -c 512
    expect_rc 0
    [ "$(cat "$T/out")" = "$(cat "$d/gptoss-F32-$p.greedy")" ] && ok "$p: 32 greedy tokens as llama.cpp's" ||
        not_ok "$p greedy: $(cat "$T/out"), llama.cpp: $(cat "$d/gptoss-F32-$p.greedy")"
done

# batch invariance: tokens spread over the experts, and all on the same ones
for m in "$T/gptoss-F32.gguf" "$d/gptoss-MXFP4.gguf"; do
    for pf in prompt300 hot300; do
        p=$(cat "$mp/$pf.txt")
        ev() { "$KVCHAT" eval -m "$m" -p "$p" "$@" >/dev/null 2>"$T/err"; }
        ev -t 2 --logits-out "$T/ref.f32" || not_ok "$m: eval failed: $(cat "$T/err")"
        bad= runs=1
        for how in "-t 1" "--token-by-token -t 2" "--token-by-token -t 1" "--split 1 -t 2" "--split 299 -t 1" \
            "--split 150 --token-by-token -t 2" "--split 64 -t 1" "--split 127 -t 2" "--split 128 -t 1" \
            "--split 129 -t 2" "--split 256 -t 1"; do
            runs=$((runs + 1))
            # shellcheck disable=SC2086
            ev $how --logits-out "$T/l.f32" && cmp -s "$T/ref.f32" "$T/l.f32" || bad="$bad [$how]"
        done
        for how in "-t 2" "--token-by-token -t 1"; do
            runs=$((runs + 1))
            # shellcheck disable=SC2086
            KVCHAT_CPU=generic ev $how --logits-out "$T/l.f32" && cmp -s "$T/ref.f32" "$T/l.f32" ||
                bad="$bad [generic $how]"
        done
        [ -z "$bad" ] && ok "$(basename "$m") $pf: the same bits every way ($runs runs)" ||
            not_ok "$(basename "$m") $pf differs:$bad"
    done
done

# what the binding reads
info_says "$d/gptoss-MXFP4.gguf" \
    'experts:        8 a layer on 3 of 3 layers, 4 used a token (top-k, softmax over k), 128 rows each$' \
    'sliding window: 128 positions on 2 of 3 layers$' \
    'rope:           neox, freq base 150000, 64 dims, scaling yarn x32$'
# active: all but the 4 unchosen experts' gate, up and down weights and
# their biases (128 + 128 + 256) on each of the 3 layers
run "$KVCHAT" models info --json "$d/gptoss-MXFP4.gguf"
[ "$(jq '.n_params - .n_params_active' "$T/out")" = $((3 * 4 * (3 * 256 * 128 + 128 + 128 + 256))) ] &&
    ok "active parameters leave out the unchosen experts and their biases" ||
    not_ok "active parameters: $(jq '[.n_params, .n_params_active]' "$T/out")"
finish
