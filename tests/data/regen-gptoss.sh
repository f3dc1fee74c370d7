#!/bin/sh
# regen-gptoss.sh - a synthetic gpt-oss model (issue 24: attention sinks, a
# 128-token window on alternate layers, YaRN RoPE, biased attention and
# experts, the clamped SwiGLU, top-k then softmax gating) and llama.cpp's
# outputs on it (via llref), for checking kvchat against llama.cpp and the
# float64 reference (tests/data/f64-gptoss.py). tests/cli/t0640-gptoss.sh
# reads them.
#
# The model, written by tests/mkmodel --arch gpt-oss with the tensor names,
# shapes and keys of the real architecture and random weights:
#   gptoss  3 layers (windowed, global, windowed), 8 experts of 128 rows,
#           4 used a token (gpt-oss-20b: 32 and 4), head size 64, YaRN
#           factor 32 over 4096; --hot 300:340 (ids 300-339 route every
#           token to experts 0-3 in every layer)
# Prompts: those of tests/data/moe (p300: 300 ids in 3..502; p8: its first
# 8; hot300: 300 ids in 300..339).
# Committed under tests/data/gptoss/:
#   gptoss.opts                tests/mkmodel's options
#   gptoss-F32.sha256          of the F32 file mkmodel writes (not committed)
#   gptoss-MXFP4.gguf          `llref quantize ... MXFP4_MOE` of it: the
#                              experts MXFP4, the other matrices Q8_0 (as
#                              the published gpt-oss files are)
#   gptoss-TYPE-pN.logits      llama.cpp's last-position logits (f32 LE)
#   gptoss-F32-pN.greedy       llama.cpp's 32 greedy tokens after the prompt
#   gptoss-TYPE-pN.f64.f32     the float64 reference's (K, V rounded to f16)
#   gptoss-F32-pN.f64kv.f32    the same with exact K and V (--kv f64)
# usage: tests/data/regen-gptoss.sh [LLREF]  (from the top directory, after
#        `make tests/mkmodel`; needs /usr/bin/python3 with numpy, and an llref
#        whose quantize knows MXFP4_MOE: see regen-quant.sh)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
. tests/data/regen-lib.sh
regen_init tests/data/gptoss
m=tests/data/moe
rm -f "$d"/*
regen_model gptoss "--arch gpt-oss --dim 256 --layers 3 --heads 4 --kv-heads 2 --head-dim 64 --ff 512 --experts 8 --experts-used 4 --ff-exp 128 --hot 300:340 --ctx 4096 --rope-theta 150000 --seed 51"
"$LLREF" quantize "$f32" "$d/gptoss-MXFP4.gguf" MXFP4_MOE >/dev/null 2>&1
for p in p8 p300 hot300; do
    case $p in hot300) ids=$(cat "$m/hot300.txt") ;; *) ids=$(cat "$m/prompt${p#p}.txt") ;; esac
    regen_goldens gptoss $p tests/data/f64-gptoss.py F32 MXFP4  # MXFP4: the file made above
    /usr/bin/python3 tests/data/f64-gptoss.py "$f32" -p "$ids" --kv f64 -o "$d/gptoss-F32-$p.f64kv.f32" >/dev/null
    echo "gptoss $p: $(cat "$d/gptoss-F32-$p.greedy")"
done
