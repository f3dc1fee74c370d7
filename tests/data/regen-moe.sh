#!/bin/sh
# regen-moe.sh - synthetic qwen3moe models (qwen3's attention with a
# mixture-of-experts FFN, issue 24) and llama.cpp's outputs on them (via
# llref), for checking kvchat against llama.cpp and the float64 reference
# (tests/data/f64-moe.py). tests/cli/t0620-qwen3moe.sh reads them.
#
# Two models, written by tests/mkmodel --arch qwen3moe with the tensor names,
# shapes and keys of the real architecture, random weights and the 512-token
# placeholder vocabulary:
#   qwen3moe       3 layers, 8 experts of 128 rows, 2 used a token; --hot
#                  300:340 (ids 300-339 route every token to experts 0 and 1
#                  in every layer; other ids spread over all 8)
#   qwen3moe-wide  2 layers, 32 experts of 64 rows, 8 used a token (the
#                  expert count and top-k ratio of Qwen3-30B-A3B's 128 / 8)
# Prompts: p300, 300 ids in 3..502 (spread over the experts); p8, its first
# 8; hot300, 300 ids in 300..339 (all to the same experts).
# Committed under tests/data/moe/:
#   prompt300.txt, prompt8.txt, hot300.txt
#   NAME.opts                 tests/mkmodel's options
#   NAME-F32.sha256           of the F32 file mkmodel writes (not committed)
#   NAME-Q8_0.gguf, NAME-Q4_K_M.gguf, NAME-IQ4_XS.gguf   `llref quantize` of it
#   NAME-TYPE-pN.logits       llama.cpp's last-position logits (f32 LE)
#   NAME-F32-pN.greedy        llama.cpp's 32 greedy tokens after the prompt
#   NAME-TYPE-pN.f64.f32      the float64 reference's (K, V rounded to f16)
#   NAME-F32-pN.f64kv.f32     the same with exact K and V (--kv f64)
#   qwen3moe-F32-hot300.*     the same for the hot prompt (F32)
#   NAME.routes               the float64 pass's tokens per expert per layer
#                             (p300 and hot300), to see the prompts route as
#                             intended
# usage: tests/data/regen-moe.sh [LLREF]  (from the top directory, after
#        `make tests/mkmodel`; needs /usr/bin/python3 with numpy)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
. tests/data/regen-lib.sh
regen_init tests/data/moe
rm -f "$d"/*
regen_prompts 19
regen_ids 300 23 40 300 >"$d/hot300.txt"

opts() {
    case $1 in
    qwen3moe) echo "--arch qwen3moe --dim 256 --layers 3 --heads 4 --kv-heads 2 --head-dim 64 --ff 512 --experts 8 --experts-used 2 --ff-exp 128 --hot 300:340 --ctx 4096 --rope-theta 1000000 --seed 41" ;;
    qwen3moe-wide) echo "--arch qwen3moe --dim 128 --layers 2 --heads 2 --kv-heads 1 --head-dim 64 --ff 256 --experts 32 --experts-used 8 --ff-exp 64 --ctx 4096 --seed 42" ;;
    esac
}
for name in qwen3moe qwen3moe-wide; do
    regen_model $name "$(opts $name)"
    for p in 8 300; do
        ids=$(cat "$d/prompt$p.txt")
        regen_goldens $name p$p tests/data/f64-moe.py F32 Q8_0 Q4_K_M IQ4_XS
        /usr/bin/python3 tests/data/f64-moe.py "$f32" -p "$ids" --kv f64 -o "$d/$name-F32-p$p.f64kv.f32" >/dev/null
        echo "$name p$p: $(cat "$d/$name-F32-p$p.greedy")"
    done
    F64_ROUTES=1 /usr/bin/python3 tests/data/f64-moe.py "$f32" -p "$(cat "$d/prompt300.txt")" -o "$tmp/r.f32" \
        2>"$d/$name.routes" >/dev/null
done
ids=$(cat "$d/hot300.txt")
f32=$tmp/qwen3moe-F32.gguf
"$LLREF" greedy "$f32" -p "$ids" -n 32 2>/dev/null >"$d/qwen3moe-F32-hot300.greedy"
regen_logits "$f32" "$ids" "$d/qwen3moe-F32-hot300" tests/data/f64-moe.py
echo "hot300:" >>"$d/qwen3moe.routes"
F64_ROUTES=1 /usr/bin/python3 tests/data/f64-moe.py "$f32" -p "$ids" -o "$tmp/r.f32" 2>>"$d/qwen3moe.routes" >/dev/null
cat "$d"/*.routes
