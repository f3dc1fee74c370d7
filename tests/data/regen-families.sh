#!/bin/sh
# regen-families.sh - the synthetic gemma2, gemma3 and phi3 models and
# llama.cpp's outputs on them (via llref), for checking kvchat's forward
# pass of these architectures against llama.cpp (issue 17).
#
# Each model is written by tests/mkmodel with the tensor names, shapes and
# metadata keys of the real architecture (see tests/mkmodel.c), random
# weights and the 512-token placeholder SentencePiece vocabulary (the real
# Gemma and Phi vocabularies would make the embedding 32-256 k rows: tens of
# MB a file; the tokenizers are tested on their own, tests/test_tokenizer*).
# Options are chosen so that every feature changes the logits: a sliding
# window of 16 against a 100-token prompt, soft-caps where tanh bends, a
# key_length that is not n_embd/n_head, a partial rotary dimension for phi3.
# Committed under tests/data/families/:
#   prompt.txt             the 100 prompt ids
#   NAME.opts              tests/mkmodel's options for NAME
#   NAME-F32.sha256        the SHA-256 of the F32 file tests/mkmodel writes
#                          (the file is not committed: mkmodel regenerates
#                          it; tests/cli/t0600-families.sh checks the hash)
#   NAME-Q8_0.gguf         `llref quantize` of that file, Q8_0
#   NAME-Q4_K_M.gguf       likewise, Q4_K_M (Q4_K, with Q6_K where
#                          llama.cpp's mixture puts it)
#   NAME-TYPE.logits       llama.cpp's last-position logits after the
#                          prompt, all n_vocab of them, f32 little-endian
#   NAME-F32.greedy        llama.cpp's 32 greedy tokens after the prompt
#   NAME-TYPE.f64.f32      gemma2, gemma3: the float64 reference's logits
#                          (tests/data/f64-families.py: the peer's f64ref.py
#                          with the Gemma block; K and V rounded to f16)
#   NAME-F32.f64kv.f32     the same with exact K and V (--kv f64)
# llama.cpp's CPU GELU is an f16 table lookup: on the gemma models its F32
# logits are ~3e-4 of the range from exact, kvchat's (exact GELU) ~8e-5
# (the f16 KV cache's roundings) and ~1e-6 with an f32 cache; phi3 has no
# GELU and kvchat's F32 logits are within ~1e-6 of llama.cpp's.
# llama.cpp ran these with a context of 256 positions (llref asks for
# max(64, n) and llama.cpp pads n_ctx to a multiple of 256): phi3's choice
# between rope_factors_short and rope_factors_long depends on it (long when
# n_ctx > rope.scaling.original_context_length), so compare with -c 256.
# phi3 uses the short factors (original context 4096), phi3-long the long
# ones (original context 128).
# usage: tests/data/regen-families.sh [LLREF]  (from the top directory,
#        after `make tests/mkmodel`)
set -eu
LLREF=${1:-${LLREF_HOME:-$HOME/.cache/llref}/llref}
. tests/data/regen-lib.sh
regen_init tests/data/families
rm -f "$d"/*.gguf "$d"/*.logits "$d"/*.greedy "$d"/*.sha256 "$d"/*.opts "$d"/*.f32
i=0 ids=
while [ $i -lt 100 ]; do ids="$ids $(( (i * 37 + 11) % 500 + 3 ))"; i=$((i + 1)); done
echo $ids >"$d/prompt.txt"

opts() {
    case $1 in
    gemma2) echo "--arch gemma2 --dim 256 --layers 4 --heads 4 --kv-heads 2 --head-dim 128 --ff 256 --swa 16 --attn-softcap 5 --final-softcap 2 --ctx 8192 --scale 0.12 --embd-scale 0.02 --seed 21" ;;
    gemma3) echo "--arch gemma3 --dim 256 --layers 6 --heads 2 --kv-heads 1 --head-dim 128 --ff 256 --swa 16 --rope-theta 1000000 --rope-theta-swa 10000 --rope-linear 8 --ctx 32768 --scale 0.08 --embd-scale 0.0625 --seed 22" ;;
    phi3) echo "--arch phi3 --dim 256 --layers 2 --heads 4 --kv-heads 2 --ff 256 --rope-dim 48 --swa 16 --ctx 131072 --orig-ctx 4096 --seed 23" ;;
    phi3-long) echo "--arch phi3 --dim 256 --layers 2 --heads 4 --kv-heads 2 --ff 256 --rope-dim 48 --swa 16 --ctx 131072 --orig-ctx 128 --seed 24" ;;
    esac
}
for name in gemma2 gemma3 phi3 phi3-long; do
    regen_model $name "$(opts $name)"
    "$LLREF" greedy "$f32" -p "$ids" -n 32 2>/dev/null >"$d/$name-F32.greedy"
    for type in F32 Q8_0 Q4_K_M; do
        regen_quant $name $type
        "$LLREF" logits "$model" -p "$ids" -o "$d/$name-$type.logits" >/dev/null 2>&1
    done
    echo "$name: $(cat "$d/$name-F32.greedy")"
    case $name in gemma*)
        for type in F32 Q8_0 Q4_K_M; do
            m=$f32
            [ $type = F32 ] || m=$d/$name-$type.gguf
            /usr/bin/python3 tests/data/f64-families.py "$m" -p "$ids" -o "$d/$name-$type.f64.f32" >/dev/null
        done
        /usr/bin/python3 tests/data/f64-families.py "$f32" -p "$ids" --kv f64 -o "$d/$name-F32.f64kv.f32" >/dev/null
    esac
done
# Each feature must move llama.cpp's logits, or the goldens could not catch
# an engine that leaves it out: print the relative change (max |d| / range)
# when one option is switched off (phi3's sliding window must give 0: llama.cpp
# ignores it).
if [ -x /usr/bin/python3 ]; then
    for v in "gemma2 --swa 100000" "gemma2 --attn-softcap 100000" "gemma2 --final-softcap 100000" \
             "gemma3 --swa 100000" "gemma3 --rope-linear 1" "gemma3 --rope-theta-swa 1000000" \
             "phi3 --orig-ctx 128" "phi3 --rope-attn-factor 1" "phi3 --swa 100000"; do
        set -- $v
        tests/mkmodel "$tmp/v.gguf" $(cat "$d/$1.opts") "$2" "$3" >/dev/null
        "$LLREF" logits "$tmp/v.gguf" -p "$ids" -o "$tmp/v.f32" >/dev/null 2>&1
        regen_relchange "$tmp/v.f32" "$d/$1-F32.logits" "$v"
    done
fi
