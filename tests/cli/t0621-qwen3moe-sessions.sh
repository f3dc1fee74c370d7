#!/bin/sh
# t0621: sessions on a qwen3moe model (a mixture of experts, issue 24), the
# real Qwen2 vocabulary, chatml: the experts each token picks are a function
# of the token's own activations and every expert product has one definition
# (docs/moe.md), so
# - every turn resumed from the KV blocks on disk (only the new message
#   computed: cached_tokens) answers byte for byte what --no-cache (the
#   whole conversation again) and a live `kvchat chat` process answer;
# - a fork resumes from the shared blocks and answers as its source;
# - a system prompt longer than a block is shared by a second session.
. "$TOP/tests/cli/lib.sh"
M=$T/moe.gguf
"$MKMODEL" "$M" --arch qwen3moe --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --head-dim 32 --ff 128 --experts 8 --experts-used 2 --ff-exp 64 --type Q8_0 --tied \
    --scale 0.3 --ctx 4096 >/dev/null

# ---- six turns resumed = --no-cache = one live process; a fork; a shared system prompt
sessions_same "" "$M" conv sys
finish
