#!/bin/sh
# regen-accuracy.sh - regenerates tests/data/accuracy/: exact math (float64,
# ../shared/peer/f64ref.py) and llama.cpp's answers (llref logits) for the
# models tests/cli/t0403-accuracy.sh checks kvchat against, for two prompts
# (p8.txt: 8 ids, p200.txt: 200 ids, valid in every model's vocabulary).
#
# The models (models.txt: NAME and how it is made):
#   f32, f16, bf16, q8_0  tests/mkmodel models (llama, qwen3, qwen2, qwen2;
#                         2 layers), regenerated bit for bit at test time
#   q4_0 ... q6_k         tests/data/quant/m-TYPE.gguf (llama.cpp's quantizer)
#   mixed                 tests/data/accuracy/mixed-Q4_K_M.gguf: qwen2, 2
#                         layers, dim 128 (not a multiple of 256, so
#                         llama.cpp's Q4_K_M falls back to Q5_0 and Q8_0 for
#                         most tensors: Q5_0, Q8_0, Q4_K, Q6_K), made by
#                         `llref mkmodel` + `llref quantize` below
# Per model NAME and prompt P (little-endian f32 logits of the last position):
#   NAME-P.f64.f32     f64ref --kv f16 (K and V rounded to f16, as an engine
#                      with an f16 KV cache does)
#   NAME-P.f64kv.f32   f64ref --kv f64 (F32 models only: exact K and V)
#   NAME-P.llama.f32   llama.cpp (llref logits; its default f16 KV cache)
#   usage: tests/data/regen-accuracy.sh   (from the top directory, after
#          `make tests/mkmodel`; needs llref and python3-numpy)
set -eu
LLREF=${LLREF:-$HOME/.cache/llref/llref}
F64REF=${F64REF:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/peer/f64ref.py}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/data/regen-lib.sh
regen_init tests/data/accuracy
out=$d

# the prompts: ids below 260 (the smallest vocabulary here)
regen_ids 8 12345 257 3 >"$out/p8.txt"
regen_ids 200 777 257 3 >"$out/p200.txt"

# the mixed file, once (deterministic: the same seed gives the same bytes)
if [ ! -f "$out/mixed-Q4_K_M.gguf" ]; then
    "$LLREF" mkmodel "$tmp/mixed-F32.gguf" --arch qwen2 --dim 128 --layers 2 --heads 4 --kv-heads 1 --ff 512 \
        --n-vocab 512 --tied --seed 11 --rope-theta 1000000 >/dev/null
    "$LLREF" quantize "$tmp/mixed-F32.gguf" "$out/mixed-Q4_K_M.gguf" Q4_K_M >/dev/null 2>&1
fi

# NAME and the model: "mk OPTIONS" (tests/mkmodel) or a file
cat >"$out/models.txt" <<'EOF'
f32 mk --arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --n-vocab 512 --seed 21 --type F32
f16 mk --arch qwen3 --dim 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 32 --ff 128 --n-vocab 512 --seed 22 --type F16
bf16 mk --arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --n-vocab 512 --seed 23 --tied --type BF16
q8_0 mk --arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --n-vocab 512 --seed 24 --type Q8_0
q4_0 file tests/data/quant/m-Q4_0.gguf
q4_1 file tests/data/quant/m-Q4_1.gguf
q5_0 file tests/data/quant/m-Q5_0.gguf
q5_1 file tests/data/quant/m-Q5_1.gguf
q2_k file tests/data/quant/m-Q2_K.gguf
q3_k_m file tests/data/quant/m-Q3_K_M.gguf
q4_k_m file tests/data/quant/m-Q4_K_M.gguf
q5_k_m file tests/data/quant/m-Q5_K_M.gguf
q6_k file tests/data/quant/m-Q6_K.gguf
mixed file tests/data/accuracy/mixed-Q4_K_M.gguf
EOF

while read -r name how rest; do
    if [ "$how" = mk ]; then
        model=$tmp/$name.gguf
        # shellcheck disable=SC2086
        tests/mkmodel "$model" $rest >/dev/null
    else
        model=$rest
    fi
    for p in p8 p200; do
        ids=$(cat "$out/$p.txt")
        "$PYTHON" "$F64REF" "$model" -p "$ids" -o "$out/$name-$p.f64.f32" --kv f16 >/dev/null
        case $name in f32) "$PYTHON" "$F64REF" "$model" -p "$ids" -o "$out/$name-$p.f64kv.f32" --kv f64 >/dev/null ;; esac
        "$LLREF" logits "$model" -p "$ids" -o "$out/$name-$p.llama.f32" >/dev/null 2>&1
    done
    echo "regen-accuracy: $name"
done <"$out/models.txt"
