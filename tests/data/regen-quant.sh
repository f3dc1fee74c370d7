#!/bin/sh
# regen-quant.sh - regenerates tests/data/quant/: a small llama model written
# by `llref mkmodel` (dim 256, 1 layer, ff 256, 260-token placeholder vocab:
# every row a multiple of 256), quantized by llama.cpp (`llref quantize`)
# into each type kvchat reads, and goldens.txt: every tensor of every file
# dequantized by gguf-py's numpy code (llama.cpp's independent Python
# implementation), summarised per tensor as
#   FILE TENSOR TYPE N_ELEMENTS HASH SUM
# where HASH = sum over i of bits(x_i) * ((i * 0x9E3779B97F4A7C15 +
# 0x632BE59BD9B4E019) | 1) mod 2^64 over the f32 bit patterns in file order
# (any single changed bit changes it) and SUM is the float64 sum of x_i.
# tests/test_quant.c recomputes both with kvchat's reference dequantizers.
# Also llama.cpp's last-position logits of each file (`llref logits`), for
# tests/cli/t0400-quant-logits.sh: logits-TYPE-prefill.f32 for a 16-token
# prompt (kvchat's batch path: dequantize + sgemm) and logits-TYPE-decode.f32
# for 3 tokens (kvchat's one-token path: vec_dot against Q8_0/Q8_K).
# m-MXFP4.gguf (gpt-oss's expert type, issue 24): llama.cpp writes MXFP4
# only for stacked experts (its MXFP4_MOE file type: 3-D tensors MXFP4, the
# others Q8_0), so it is a one-layer qwen3moe written by tests/mkmodel
# (4 experts of 64 rows, dim 128) and quantized by llref quantize MXFP4_MOE
# (an llref whose quantize table has {"MXFP4_MOE",
# LLAMA_FTYPE_MOSTLY_MXFP4_MOE}; shared/peer/llref.c's lacks it as of this
# writing: LLREF=path to one built with it).
#   usage: tests/data/regen-quant.sh   (needs llref, python3-numpy and
#          tests/mkmodel built)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/tests/data/quant
LLREF=${LLREF:-$HOME/.cache/llref/llref}
GGUF_PY=${GGUF_PY:-$HOME/.cache/llref/src/gguf-py}
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$LLREF" mkmodel "$tmp/m.gguf" --arch llama --dim 256 --layers 1 --heads 4 --kv-heads 2 \
    --ff 256 --n-vocab 260 --seed 1 >/dev/null
mkdir -p "$out"
rm -f "$out"/m-*.gguf
for t in Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS; do
    "$LLREF" quantize "$tmp/m.gguf" "$out/m-$t.gguf" "$t" >/dev/null 2>&1
done

"$top/tests/mkmodel" "$tmp/moe.gguf" --arch qwen3moe --dim 128 --layers 1 --heads 2 --kv-heads 1 \
    --head-dim 64 --ff 128 --experts 4 --experts-used 2 --ff-exp 64 --n-vocab 260 --seed 7 >/dev/null
"$LLREF" quantize "$tmp/moe.gguf" "$out/m-MXFP4.gguf" MXFP4_MOE >/dev/null 2>&1

PROMPT_PREFILL="1 5 9 33 100 200 7 8 9 10 11 12 13 14 15 16"
PROMPT_DECODE="42 7 99"
for t in Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4; do
    "$LLREF" logits "$out/m-$t.gguf" -p "$PROMPT_PREFILL" -o "$out/logits-$t-prefill.f32" >/dev/null 2>&1
    "$LLREF" logits "$out/m-$t.gguf" -p "$PROMPT_DECODE" -o "$out/logits-$t-decode.f32" >/dev/null 2>&1
done

cd "$out"
PYTHONPATH=$GGUF_PY "$PYTHON" - m-*.gguf >goldens.txt <<'PY'
import sys
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

K1, K2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0x632BE59BD9B4E019)
print("# file tensor type n_elements hash sum  (made by regen-quant.sh with gguf-py)")
for path in sys.argv[1:]:
    r = GGUFReader(path)
    for t in r.tensors:
        x = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
        assert x.size == int(t.n_elements)
        bits = x.view(np.uint32).astype(np.uint64)
        with np.errstate(over="ignore"):
            mult = (np.arange(x.size, dtype=np.uint64) * K1 + K2) | np.uint64(1)
            h = int(np.sum(bits * mult, dtype=np.uint64))
        s = float(np.sum(x.astype(np.float64)))
        print(f"{path} {t.name} {t.tensor_type.name} {x.size} {h:016x} {s:.17g}")
PY
echo "wrote $out/goldens.txt ($(grep -vc '^#' goldens.txt) tensors)"
