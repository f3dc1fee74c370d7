#!/bin/sh
# regen-qwen35moe.sh - the synthetic qwen35moe (Qwen3.5/3.6 MoE: the qwen35
# hybrid trunk with routed experts and a gated shared expert, issue 24)
# model and llama.cpp's outputs on it (via llref), for checking kvchat's
# forward pass against llama.cpp and the float64 reference
# (tests/data/f64-qwen35.py, which knows qwen35moe).
#
# One model, written by tests/mkmodel --arch qwen35moe with the tensor names,
# shapes and keys of the real architecture (src/models/qwen35moe.cpp), random
# weights and the 512-token placeholder vocabulary: layers R R R A, 2 value
# heads on 1 key head, state 16, 8 experts of 32 rows, 2 used, a shared
# expert of 64 rows (expert_shared_feed_forward_length).
# Prompts: tests/data/qwen35/prompt300.txt and prompt8.txt (300 and 8 ids).
# Committed under tests/data/qwen35moe/:
#   q35moe.opts               tests/mkmodel's options
#   q35moe-F32.sha256         of the F32 file mkmodel writes (not committed)
#   q35moe-Q8_0.gguf          `llref quantize` of it
#   q35moe-TYPE-pN.logits     llama.cpp's last-position logits (f32 LE)
#   q35moe-F32-pN.greedy      llama.cpp's 32 greedy tokens after the prompt
#   q35moe-TYPE-pN.f64.f32    the float64 reference's (K, V rounded to f16)
# usage: tests/data/regen-qwen35moe.sh [LLREF]  (from the top directory, after
#        `make tests/mkmodel`; needs /usr/bin/python3 with numpy)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
. tests/data/regen-lib.sh
regen_init tests/data/qwen35moe
rm -f "$d"/*
name=q35moe
regen_model $name "--arch qwen35moe --dim 64 --layers 4 --heads 2 --kv-heads 1 --head-dim 32 --rope-dim 8 --ff 128 --ff-exp 32 --ff-shexp 64 --experts 8 --experts-used 2 --ssm-state 16 --ssm-groups 1 --ssm-heads 2 --ssm-conv 4 --ctx 4096 --rope-theta 1000000 --seed 41"
for p in 8 300; do
    ids=$(cat tests/data/qwen35/prompt$p.txt)
    regen_goldens $name p$p tests/data/f64-qwen35.py F32 Q8_0
    echo "$name p$p: $(cat "$d/$name-F32-p$p.greedy")"
done
