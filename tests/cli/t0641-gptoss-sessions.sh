#!/bin/sh
# t0641: sessions on a gpt-oss model (issue 24): attention sinks, a
# 128-token window on alternate layers, biased experts chosen by top-k then
# softmax, YaRN RoPE; the real Qwen2 vocabulary and chatml stand in for
# o200k and harmony (no gpt-oss vocabulary file is at hand: tests/README),
# so what is checked is the engine's side: conversations longer than the
# window, so that resuming restores the windowed layers' KV as well as the
# full ones'.
# - every turn resumed from the KV blocks on disk (only the new message
#   computed: cached_tokens) answers byte for byte what --no-cache (the
#   whole conversation again) and a live `kvchat chat` process answer;
# - a fork resumes from the shared blocks and answers as its source;
# - a system prompt longer than a block is shared by a second session.
. "$TOP/tests/cli/lib.sh"
M=$T/gptoss.gguf
"$MKMODEL" "$M" --arch gpt-oss --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --head-dim 32 --ff 128 --experts 8 --experts-used 2 --ff-exp 64 --type Q8_0 --tied \
    --scale 0.3 --ctx 4096 --rope-theta 150000 >/dev/null

# ---- six turns resumed = --no-cache = one live process; a fork; a shared system prompt
sessions_same "" "$M" conv sys
[ "$total" -gt 128 ] && ok "the conversation outgrows the 128-token window ($total tokens)" ||
    not_ok "only $total tokens: the window is never crossed"
finish
