#!/bin/sh
# regen-gemma4.sh - synthetic gemma4 models (Gemma 4's text model, issue 24)
# and llama.cpp's outputs on them (via llref), for checking kvchat against
# llama.cpp and the float64 reference (tests/data/f64-gemma4.py).
#
# gemma4 (E2B-like), written by tests/mkmodel --arch gemma4 with the tensor names,
# shapes and keys of the real architecture, random weights and the 512-token
# placeholder vocabulary: 8 layers, local except 3 and 7 (the array
# sliding_window_pattern), a window of 16; global heads of 64 (RoPE over the
# first quarter of the pairs through rope_freqs, base 1e6), local heads of 32
# (all rotated, base 1e4); 4 query heads, 1 KV head; the last 4 layers share
# the KV of layers 2 (local) and 3 (global) and have a double-wide FFN; the
# global layers have no attn_v (V = K); per-layer inputs of 32; a
# layer_output_scale; final soft-cap 30.
# gemma4-moe (26B-A4B-like): 6 layers (5 local, 1 global), local heads of 32
# with 4 KV heads, global heads of 64 with 1 (head_count_kv an array), no
# per-layer inputs or shared KV; every layer has 16 experts of 64 rows, 4
# used a token, beside a dense FFN of 128 (the shared expert).
# Prompts: p300, 300 ids in 3..502; p8, its first 8.
# Committed under tests/data/gemma4/:
#   prompt300.txt, prompt8.txt
#   NAME.opts                   tests/mkmodel's options
#   NAME-F32.sha256             of the F32 file mkmodel writes (not committed)
#   NAME-Q8_0.gguf, NAME-Q4_K_M.gguf   `llref quantize` of it
#   NAME-TYPE-pN.logits         llama.cpp's last-position logits (f32 LE)
#   NAME-F32-pN.greedy          llama.cpp's 32 greedy tokens after the prompt
#   NAME-TYPE-pN.f64.f32        the float64 reference's (K, V rounded to f16)
#   NAME-F32-pN.f64kv.f32       the same with exact K and V (--kv f64)
# llama.cpp's CPU arithmetic is itself off exact math here: its flash
# attention accumulates V in f16 and Q is rounded to f16 (Gemma 4 does not
# scale q.k, so the scores are large), and its GELU is an f16 table: its F32
# logits are ~2e-4 (300 ids) to ~5e-4 (8 ids) of the range from the float64
# pass. Judge kvchat against the float64 pass. On gemma4-moe's 300 ids the
# router has near-ties (the k-th and (k+1)-th logits of a token as close as
# 6e-6 in the float64 pass), so llama.cpp's F32 logits are 1.2e-3 of the
# range off it there (3.9e-4 on 8 ids): an engine may route a near-tied
# token the other way by rounding alone.
# Each feature must move llama.cpp's logits, or the goldens could not catch
# an engine that leaves it out: the script prints the relative change (max
# |d| / range, p300) when one option is changed.
# usage: tests/data/regen-gemma4.sh [LLREF]  (from the top directory, after
#        `make tests/mkmodel`; needs /usr/bin/python3 with numpy)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
. tests/data/regen-lib.sh
regen_init tests/data/gemma4
rm -f "$d"/*
regen_prompts 29
opts() {
    case $1 in
    gemma4) echo "--arch gemma4 --dim 256 --layers 8 --heads 4 --kv-heads 1 --head-dim 64 --head-dim-swa 32 --ff 512 --swa 16 --swa-pattern 4 --shared-kv 4 --double-wide --per-layer 32 --rope-theta 1000000 --rope-theta-swa 10000 --rope-partial 0.25 --final-softcap 30 --ctx 32768 --scale 0.06 --embd-scale 0.05 --seed 51" ;;
    gemma4-moe) echo "--arch gemma4 --dim 256 --layers 6 --heads 4 --kv-heads 4 --kv-heads-global 1 --head-dim 64 --head-dim-swa 32 --ff 128 --swa 16 --swa-pattern 6 --per-layer 0 --experts 16 --experts-used 4 --ff-exp 64 --rope-theta 1000000 --rope-theta-swa 10000 --final-softcap 30 --ctx 32768 --scale 0.06 --embd-scale 0.05 --seed 52" ;;
    esac
}
for name in gemma4 gemma4-moe; do
    regen_model $name "$(opts $name)"
    for p in 8 300; do
        ids=$(cat "$d/prompt$p.txt")
        regen_goldens $name p$p tests/data/f64-gemma4.py F32 Q8_0 Q4_K_M
        /usr/bin/python3 tests/data/f64-gemma4.py "$f32" -p "$ids" --kv f64 -o "$d/$name-F32-p$p.f64kv.f32" >/dev/null
        echo "$name p$p: $(cat "$d/$name-F32-p$p.greedy")"
    done
done
# llama.cpp against the float64 pass, per type and prompt (max |d| / range)
for name in gemma4 gemma4-moe; do
    for p in 8 300; do
        for type in F32 Q8_0 Q4_K_M; do
            regen_relchange "$d/$name-$type-p$p.logits" "$d/$name-$type-p$p.f64.f32" "llama.cpp $name $type p$p vs f64"
        done
    done
done
ids=$(cat "$d/prompt300.txt")
name=gemma4
for v in "--swa 100000" "--swa-pattern 2" "--shared-kv 0" "--per-layer 0" "--rope-partial 1" \
         "--rope-theta-swa 1000000" "--head-dim-swa 64" "--v-from-k none" "--no-layer-scale" "--final-softcap 1000"; do
    tests/mkmodel "$tmp/v.gguf" $(cat "$d/$name.opts") $v >/dev/null
    "$LLREF" logits "$tmp/v.gguf" -p "$ids" -o "$tmp/v.f32" >/dev/null 2>&1
    regen_relchange "$tmp/v.f32" "$d/$name-F32-p300.logits" "$v"
done
name=gemma4-moe
for v in "--experts-used 2" "--kv-heads-global 4"; do
    tests/mkmodel "$tmp/v.gguf" $(cat "$d/$name.opts") $v >/dev/null
    "$LLREF" logits "$tmp/v.gguf" -p "$ids" -o "$tmp/v.f32" >/dev/null 2>&1
    regen_relchange "$tmp/v.f32" "$d/$name-F32-p300.logits" "$name $v"
done
# llama.cpp applies ffn_down_exps.scale: the float64 pass without it is far
# from llama.cpp's logits (with it: the figures above)
m=$tmp/gemma4-moe-F32.gguf
tests/mkmodel "$m" $(cat "$d/$name.opts") >/dev/null
F64_G4_NO_DOWN_SCALE=1 /usr/bin/python3 tests/data/f64-gemma4.py "$m" -p "$ids" -o "$tmp/a.f32" >/dev/null
regen_relchange "$tmp/a.f32" "$d/$name-F32-p300.logits" "$name: f64 without ffn_down_exps.scale vs llama.cpp"
