#!/bin/sh
# t0602: sessions on a gemma3 and a phi3 model (issue 17), their real
# vocabularies and chat templates, a sliding window of 16 (gemma3: local
# and global layers; phi3 declares one and, as llama.cpp, ignores it), a
# history several times longer than the window:
# - every turn resumed from the KV blocks on disk (only the new message
#   computed: cached_tokens) answers byte for byte what --no-cache (the
#   whole conversation again) and a live `kvchat chat` process (the same
#   turns in one process) answer;
# - a fork resumes from the shared blocks and answers as its source;
# - a system prompt longer than a block is shared by a second session;
# - phi3: the context size picks the long or short RoPE factors (above the
#   original context of 128: long), so the same file's KV rows differ with
#   it: a session saved with the long factors is recomputed, not reused,
#   with the short ones, and answers as --no-cache does.
. "$TOP/tests/cli/lib.sh"
V=$TOP/tests/data/tokenizer
xz -dc "$V/ggml-vocab-gemma-3.gguf.xz" >"$T/g3v.gguf"
xz -dc "$V/ggml-vocab-phi-3.gguf.xz" >"$T/p3v.gguf"
"$MKMODEL" "$T/gemma3.gguf" --arch gemma3 --vocab "$T/g3v.gguf" --dim 64 --layers 3 --heads 2 --kv-heads 1 \
    --head-dim 64 --ff 128 --swa 16 --swa-pattern 2 --rope-theta 1000000 --rope-linear 8 --ctx 32768 \
    --type Q8_0 --tied --scale 0.6 --embd-scale 0.02 >/dev/null
"$MKMODEL" "$T/phi3.gguf" --arch phi3 --vocab "$T/p3v.gguf" --dim 64 --layers 2 --heads 4 --kv-heads 2 \
    --ff 128 --rope-dim 8 --swa 16 --ctx 131072 --orig-ctx 128 --type Q8_0 --scale 0.6 >/dev/null
W=16
for arch in gemma3 phi3; do
    M=$T/$arch.gguf
    R="$KVCHAT run -m $M -t 2 --temp 0 -n 12 --json"
    # ---- six turns resumed = --no-cache = one live process; a fork; a shared system prompt
    sessions_same "$arch: " "$M" "$arch-conv" "$arch"
    [ "$total" -gt $((6 * W)) ] && ok "$arch: a history of $total tokens, over 6 windows" || not_ok "$arch: only $total tokens"
    run sh -c "$R -s $arch-conv-fork --no-cache 'Branch two' </dev/null"
    b2=$(field answer)
    run sh -c "$R -s $arch-conv-fork 'Branch two' </dev/null"
    [ "$(field answer)" = "$b2" ] && ok "$arch: the fork's next turn as --no-cache" || not_ok "$arch: fork turn differs"
done

# ---- phi3: the long and the short RoPE factors never share KV rows
M=$T/phi3.gguf
R="$KVCHAT run -m $M -t 2 --temp 0 -n 8 --json"
run sh -c "$R -s rf 'Hello there' </dev/null"
expect_rc 0
run sh -c "$R -s rf -c 120 --no-cache 'And the short ones' </dev/null"
want=$(field answer)
run sh -c "$R -s rf -c 120 'And the short ones' </dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && ok "phi3: blocks of the long factors not reused with the short" ||
    not_ok "phi3: -c 120 reused $(field cached_tokens) tokens of -c 4096"
[ "$(field answer)" = "$want" ] && ok "phi3: -c 120 answers as --no-cache" || not_ok "phi3: -c 120 answer differs"
expect_err "session 'rf' was saved with this model at another context size, which changes its RoPE"
run sh -c "$R -s rf -c 120 'Once more' </dev/null"
[ "$(field cached_tokens)" -gt 0 ] && ok "phi3: the short factors' own blocks are reused ($(field cached_tokens))" ||
    not_ok "phi3: -c 120 again reused nothing"
finish
