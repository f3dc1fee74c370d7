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
field() { jq -r ".$1" "$T/out"; }

msg() { # turn i's message: a different length every turn
    i=$1 w="Question $1 about"
    j=0
    while [ $j -lt $((i * 7 % 23 + 3)) ]; do w="$w word$((j * i % 97))"; j=$((j + 1)); done
    echo "$w?"
}

for arch in gemma3 phi3; do
    M=$T/$arch.gguf
    R="$KVCHAT run -m $M -t 2 --temp 0 -n 12 --json"
    # ---- six turns: resumed = --no-cache, and = one live process
    bad=0 total=0
    : >"$T/resumed.txt"
    : >"$T/msgs.txt"
    for i in 1 2 3 4 5 6; do
        m=$(msg "$i")
        echo "$m" >>"$T/msgs.txt"
        run sh -c "$R -s $arch-conv --no-cache '$m' </dev/null"
        a=$(field answer) p=$(field prompt_tokens)
        run sh -c "$R -s $arch-conv '$m' </dev/null"
        [ "$rc" = 0 ] || { not_ok "$arch turn $i failed: $(cat "$T/err")"; break; }
        [ "$(field answer)" = "$a" ] && [ "$(field prompt_tokens)" = "$p" ] ||
            { bad=$((bad + 1)); echo "  turn $i: --no-cache '$a', resumed '$(field answer)'"; }
        if [ "$i" -gt 1 ]; then
            [ "$(field cached_tokens)" = "$total" ] || { bad=$((bad + 1)); echo "  turn $i: cached $(field cached_tokens), want $total"; }
        fi
        printf '%s\n' "$(field answer)" >>"$T/resumed.txt"
        total=$(( $(field prompt_tokens) + $(field generated_tokens) ))
    done
    [ "$bad" = 0 ] && ok "$arch: 6 turns resumed from the blocks, each as --no-cache" || not_ok "$arch: $bad differences"
    [ "$total" -gt $((6 * W)) ] && ok "$arch: a history of $total tokens, over 6 windows" || not_ok "$arch: only $total tokens"
    run sh -c "$KVCHAT chat $arch-live -m $M -t 2 --temp 0 -n 12 <'$T/msgs.txt'"
    expect_rc 0
    # the chat writes the model's bytes as they come; --json has U+FFFD for a
    # byte that is not UTF-8: compare them that way
    python3 -c "import sys; sys.stdout.write(sys.stdin.buffer.read().decode('utf-8', 'replace'))" <"$T/out" >"$T/live.txt"
    cmp -s "$T/live.txt" "$T/resumed.txt" && ok "$arch: one live process answers the same 6 turns alike" ||
        { not_ok "$arch: the live chat differs"; diff "$T/live.txt" "$T/resumed.txt" | head -5; }

    # ---- fork
    run "$KVCHAT" sessions fork $arch-conv $arch-conv2
    expect_rc 0
    run sh -c "$R -s $arch-conv 'Branch one' </dev/null"
    b1=$(field answer)
    run sh -c "$R -s $arch-conv2 'Branch one' </dev/null"
    expect_rc 0
    [ "$(field answer)" = "$b1" ] && ok "$arch: the fork answers as its source" || not_ok "$arch: fork answer differs"
    [ "$(field cached_tokens)" -ge "$total" ] && ok "$arch: the fork resumed $(field cached_tokens) tokens (its source's $total and more)" ||
        not_ok "$arch: the fork cached $(field cached_tokens), want $total"
    run sh -c "$R -s $arch-conv2 --no-cache 'Branch two' </dev/null"
    b2=$(field answer)
    run sh -c "$R -s $arch-conv2 'Branch two' </dev/null"
    [ "$(field answer)" = "$b2" ] && ok "$arch: the fork's next turn as --no-cache" || not_ok "$arch: fork turn differs"

    # ---- a shared system prompt of several blocks
    sys=$(awk 'BEGIN { for (i = 0; i < 60; i++) printf "%srule%d", i ? " " : "", i }')
    run sh -c "$R -s $arch-s1 --system '$sys' 'first' </dev/null"
    expect_rc 0
    p1=$(field prompt_tokens)
    run sh -c "$R -s $arch-s2 --system '$sys' 'second' </dev/null"
    expect_rc 0
    c=$(field cached_tokens)
    [ "$p1" -gt 128 ] && [ "$c" -ge 128 ] && ok "$arch: a second session reuses $c of the system prompt's tokens" ||
        not_ok "$arch: system prompt $p1 tokens, $c cached"
    a=$(field answer)
    run sh -c "$R -s $arch-s3 --system '$sys' --no-cache 'second' </dev/null"
    [ "$(field answer)" = "$a" ] && ok "$arch: the shared prefix answers as --no-cache" || not_ok "$arch: shared prefix differs"
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
