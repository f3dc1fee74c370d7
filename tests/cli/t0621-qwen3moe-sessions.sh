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
field() { jq -r ".$1" "$T/out"; }
msg() { # turn i's message: a different length every turn
    i=$1 w="Question $1 about"
    j=0
    while [ $j -lt $((i * 7 % 23 + 3)) ]; do w="$w word$((j * i % 97))"; j=$((j + 1)); done
    echo "$w?"
}
R="$KVCHAT run -m $M -t 2 --temp 0 -n 12 --json"

# ---- six turns: resumed = --no-cache, and = one live process
bad=0 total=0
: >"$T/resumed.txt"
: >"$T/msgs.txt"
for i in 1 2 3 4 5 6; do
    m=$(msg "$i")
    echo "$m" >>"$T/msgs.txt"
    run sh -c "$R -s conv --no-cache '$m' </dev/null"
    a=$(field answer) p=$(field prompt_tokens)
    run sh -c "$R -s conv '$m' </dev/null"
    [ "$rc" = 0 ] || { not_ok "turn $i failed: $(cat "$T/err")"; break; }
    [ "$(field answer)" = "$a" ] && [ "$(field prompt_tokens)" = "$p" ] ||
        { bad=$((bad + 1)); echo "  turn $i: --no-cache '$a', resumed '$(field answer)'"; }
    if [ "$i" -gt 1 ]; then
        [ "$(field cached_tokens)" = "$total" ] || { bad=$((bad + 1)); echo "  turn $i: cached $(field cached_tokens), want $total"; }
    fi
    printf '%s\n' "$(field answer)" >>"$T/resumed.txt"
    total=$(( $(field prompt_tokens) + $(field generated_tokens) ))
done
[ "$bad" = 0 ] && ok "6 turns resumed from the blocks, each as --no-cache ($total tokens)" || not_ok "$bad differences"
run sh -c "$KVCHAT chat live -m $M -t 2 --temp 0 -n 12 <'$T/msgs.txt'"
expect_rc 0
python3 -c "import sys; sys.stdout.write(sys.stdin.buffer.read().decode('utf-8', 'replace'))" <"$T/out" >"$T/live.txt"
cmp -s "$T/live.txt" "$T/resumed.txt" && ok "one live process answers the same 6 turns alike" ||
    { not_ok "the live chat differs"; diff "$T/live.txt" "$T/resumed.txt" | head -5; }

# ---- fork
run "$KVCHAT" sessions fork conv conv2
expect_rc 0
run sh -c "$R -s conv 'Branch one' </dev/null"
b1=$(field answer)
run sh -c "$R -s conv2 'Branch one' </dev/null"
expect_rc 0
[ "$(field answer)" = "$b1" ] && ok "the fork answers as its source" || not_ok "fork answer differs"
[ "$(field cached_tokens)" -ge "$total" ] && ok "the fork resumed $(field cached_tokens) tokens" ||
    not_ok "the fork cached $(field cached_tokens), want $total"

# ---- a shared system prompt of several blocks
sys=$(awk 'BEGIN { for (i = 0; i < 60; i++) printf "%srule%d", i ? " " : "", i }')
run sh -c "$R -s s1 --system '$sys' 'first' </dev/null"
expect_rc 0
p1=$(field prompt_tokens)
run sh -c "$R -s s2 --system '$sys' 'second' </dev/null"
expect_rc 0
c=$(field cached_tokens) a=$(field answer)
[ "$p1" -gt 128 ] && [ "$c" -ge 128 ] && ok "a second session reuses $c of the system prompt's tokens" ||
    not_ok "system prompt $p1 tokens, $c cached"
run sh -c "$R -s s3 --system '$sys' --no-cache 'second' </dev/null"
[ "$(field answer)" = "$a" ] && ok "the shared prefix answers as --no-cache" || not_ok "shared prefix differs"
finish
