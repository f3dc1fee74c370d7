#!/bin/sh
# t0651: sessions on gemma4 models (issue 24), the real Gemma 4 vocabulary
# and chat template, a window of 16 and a history several times longer:
# an E2B-like model whose last 4 layers read the KV of layers 2 (local)
# and 3 (global), whose global layers have heads twice as wide as the
# local ones and no attn_v (V = K), and a 26B-A4B-like one (experts beside
# the dense FFN; local layers of 4 KV heads of 16, global of 1 of 32).
# (No per-layer inputs here: with Gemma 4's 262144 tokens their table
# would make files of 50 MB; t0650 checks them, batch-invariant.)
# - every turn resumed from the KV blocks on disk (only the new message
#   computed: cached_tokens) answers byte for byte what --no-cache (the
#   whole conversation again) and a live `kvchat chat` process answer;
# - a fork resumes from the shared blocks and answers as its source;
# - a system prompt longer than a block is shared by a second session;
# - the block files hold the K and V rows of the layers that own them,
#   each at its width, and nothing of the layers that share them: a full
#   block of 64 positions is its header and 64 x 2 (K, V) x 2 bytes (f16)
#   x the owning layers' widths (E2B-like: 3 x 16 + 32; 26B-A4B-like:
#   2 x 64 + 2 x 32), in runs of their common part (5 runs; 6).
# - `run` on a gemma4 model: its template ends the prompt with the empty
#   thought channel (thinking off), so the answer has no reasoning.
. "$TOP/tests/cli/lib.sh"
xz -dc "$TOP/tests/data/tokenizer/ggml-vocab-gemma-4.gguf.xz" >"$T/g4v.gguf"
"$MKMODEL" "$T/dense.gguf" --arch gemma4 --vocab "$T/g4v.gguf" --dim 64 --layers 8 --heads 2 --kv-heads 1 \
    --head-dim 32 --head-dim-swa 16 --ff 128 --swa 16 --swa-pattern 4 --shared-kv 4 --double-wide --per-layer 0 \
    --ctx 32768 --type Q8_0 --tied --scale 0.3 --embd-scale 0.02 >/dev/null
"$MKMODEL" "$T/moe.gguf" --arch gemma4 --vocab "$T/g4v.gguf" --dim 64 --layers 4 --heads 4 --kv-heads 4 \
    --kv-heads-global 1 --head-dim 32 --head-dim-swa 16 --ff 64 --swa 16 --swa-pattern 2 --per-layer 0 \
    --experts 8 --experts-used 2 --ff-exp 32 --ctx 32768 --type Q8_0 --tied --scale 0.3 --embd-scale 0.02 >/dev/null
W=16
# the size of a full block file: its header (kvblock.h: 152 bytes, 4 a
# token, 8 a run, rounded up to 64) and the rows
block_size() { echo $(((152 + 4 * 64 + 8 * $1 + 63) / 64 * 64 + 64 * 2 * 2 * $2)); }
for arch in dense moe; do
    # ---- six turns resumed = --no-cache = one live process; a fork; a shared system prompt
    sessions_same "$arch: " "$T/$arch.gguf" "$arch-conv" "$arch"
    [ "$total" -gt $((6 * W)) ] && ok "$arch: a history of $total tokens, over 6 windows" || not_ok "$arch: only $total tokens"

    # ---- the block files: the owning layers' rows only
    case $arch in dense) want=$(block_size 5 80) ;; moe) want=$(block_size 6 192) ;; esac
    got=$(find "$KVCHAT_HOME" -name '*.kvblk' -printf '%s\n' | sort -n | tail -1)
    [ "$got" = "$want" ] && ok "$arch: a full block is $got bytes: the owning layers' K and V" ||
        not_ok "$arch: a full block is $got bytes, want $want"
    find "$KVCHAT_HOME" -name '*.kvblk' -delete
done

# ---- run: no reasoning with thinking off (the template's empty thought channel)
run "$KVCHAT" run --no-cache -m "$T/dense.gguf" -n 8 --temp 0 --json hello
expect_rc 0
jq -e '.reasoning == null and (.answer | type) == "string"' "$T/out" >/dev/null &&
    ok "run: an answer, reasoning null" || not_ok "run: $(cat "$T/out")"
finish
