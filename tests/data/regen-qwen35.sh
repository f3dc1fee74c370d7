#!/bin/sh
# regen-qwen35.sh - the synthetic qwen35 (Qwen3.5: Gated DeltaNet layers
# with gated attention, issue 23) models and llama.cpp's outputs on them
# (via llref), for checking kvchat's forward pass against llama.cpp and the
# float64 reference (tests/data/f64-qwen35.py).
#
# Two models, written by tests/mkmodel --arch qwen35 with the tensor names,
# shapes and keys of the real architecture, random weights and the 512-token
# placeholder vocabulary (Qwen3.5's own has 248 k tokens: 127 MB of F32
# embeddings at these dims; the tokenizer is tested on its own):
#   qwen35     layers R R R A (full_attention_interval 4, the default), 4
#              value heads over 2 key heads (head h uses key head h mod 2),
#              state 16, partial rotary (8 of 32 dims)
#   qwen35-rl  layers R A R R A from attention.recurrent_layers, 2 value
#              heads on 1 key head, state 32, rotary sections 1,1,1,1 (the
#              fourth section's pairs do not rotate)
# Prompts: p300, 300 ids; p8, the first 8 of them.
# Committed under tests/data/qwen35/:
#   prompt300.txt, prompt8.txt
#   NAME.opts                 tests/mkmodel's options
#   NAME-F32.sha256           of the F32 file mkmodel writes (not committed)
#   NAME-Q8_0.gguf, NAME-Q4_K_M.gguf   `llref quantize` of it
#   NAME-TYPE-pN.logits       llama.cpp's last-position logits (f32 LE)
#   NAME-F32-pN.greedy        llama.cpp's 32 greedy tokens after the prompt
#   NAME-TYPE-pN.f64.f32      the float64 reference's (K, V rounded to f16)
#   NAME-F32-p300.f64kv.f32   the same with exact K and V (--kv f64)
# usage: tests/data/regen-qwen35.sh [LLREF]  (from the top directory, after
#        `make tests/mkmodel`; needs /usr/bin/python3 with numpy)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
. tests/data/regen-lib.sh
regen_init tests/data/qwen35
rm -f "$d"/*
regen_prompts 17

opts() {
    case $1 in
    qwen35) echo "--arch qwen35 --dim 128 --layers 4 --heads 4 --kv-heads 2 --head-dim 32 --rope-dim 8 --ff 256 --ssm-state 16 --ssm-groups 2 --ssm-heads 4 --ssm-conv 4 --ctx 4096 --rope-theta 1000000 --seed 31" ;;
    qwen35-rl) echo "--arch qwen35 --dim 128 --layers 5 --heads 2 --kv-heads 1 --head-dim 32 --rope-dim 16 --rope-sections 1,1,1,1 --ff 256 --ssm-state 32 --ssm-groups 1 --ssm-heads 2 --ssm-conv 4 --recurrent-layers 1,0,1,1,0 --ctx 4096 --seed 32" ;;
    esac
}
for name in qwen35 qwen35-rl; do
    regen_model $name "$(opts $name)"
    for p in 8 300; do
        ids=$(cat "$d/prompt$p.txt")
        regen_goldens $name p$p tests/data/f64-qwen35.py F32 Q8_0 Q4_K_M
        echo "$name p$p: $(cat "$d/$name-F32-p$p.greedy")"
    done
    /usr/bin/python3 tests/data/f64-qwen35.py "$f32" -p "$(cat "$d/prompt300.txt")" --kv f64 \
        -o "$d/$name-F32-p300.f64kv.f32" >/dev/null
done
