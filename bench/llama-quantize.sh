#!/bin/sh
# llama-quantize.sh - IN.gguf to OUT.gguf in TYPE (Q4_K_M) by llama.cpp's
# quantizer with requantizing allowed (bench/llama-quantize.c, built here
# into BENCH_DIR against the library ../shared/peer/setup.sh installed, as
# bench-turn.sh builds llama-depth.c), 2 threads. For bench-bigmoe.sh and
# bench-pack.sh, whose sources are Q8_0 (a quarter of F32's disk).
#   usage: sh bench/llama-quantize.sh IN.gguf OUT.gguf [TYPE]
# Environment: LLREF (default ~/.cache/llref/llref), BENCH_DIR.
set -eu
LLREF=${LLREF:-$HOME/.cache/llref/llref}
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
lh=$(dirname "$LLREF")
lib=$(sed -n 's/^LLREF_LIBDIR="\(.*\)" exec.*/\1/p' "$LLREF")
q=$dir/llama-quantize
mkdir -p "$dir"
if [ ! -x "$q" ] || [ bench/llama-quantize.c -nt "$q" ]; then
    cc -O2 -std=c11 -o "$q" bench/llama-quantize.c -I"$lh/src/include" -I"$lh/src/ggml/include" \
        -L"$lib" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$lib"
fi
nice "$q" "$1" "$2" "${3:-Q4_K_M}" -t 2 >/dev/null 2>&1
