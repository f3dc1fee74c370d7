#!/bin/sh
# regen-remote.sh - remakes tests/data/remote/tiny-phi3.gguf.xz, the model
# that the Node test server (tests/node/server.mjs, on node-llama-cpp's
# llama.cpp) serves in tests/cli/t0702: a llama-architecture model with the
# Phi-3 vocabulary and its chat template, 2 layers of width 32, Q8_0,
# random weights at scale 0.5 (so that sampling gives varied text in many
# scripts, byte tokens included), 1 M parameters. tests/mkmodel writes the
# same bytes every time.
#   usage: sh tests/data/regen-remote.sh      (from the top of the tree)
set -eu
make tests/mkmodel >/dev/null
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
xz -dc tests/data/tokenizer/ggml-vocab-phi-3.gguf.xz >"$t/vocab.gguf"
tests/mkmodel "$t/tiny-phi3.gguf" --arch llama --vocab "$t/vocab.gguf" --dim 32 --layers 2 --heads 2 \
    --kv-heads 1 --ff 64 --tied --type Q8_0 --ctx 4096 --seed 7 --scale 0.5
xz -9 -c "$t/tiny-phi3.gguf" >tests/data/remote/tiny-phi3.gguf.xz
echo "wrote tests/data/remote/tiny-phi3.gguf.xz"
