#!/bin/sh
# t0006: every prompt's KV is kept. `kvchat run` without -s after the same
# document: the first call computes it, later calls read it (all of it: the
# full blocks and the first rows of the block where the prompt diverges)
# and compute only their question; the store grows by at most a block and
# a tail a call; the answers equal --no-cache's, greedy and seeded; a prompt
# that shares its first ~2,000 tokens with an earlier one reuses
# floor(shared / 64) full blocks and the rest of the shared rows; --no-cache
# neither reads nor writes; 10-turn sessions answer as --no-cache does.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
B=64
H=$KVCHAT_HOME
R="$KVCHAT run -m $M -t 2 -c 4096 -n 8 --json"
nblk() { find "$H/kv" -name '*.kvblk' 2>/dev/null | wc -l; }
# tokens of the rendered prompt up to and including TEXT (the user turn's opening first)
ntok() { "$KVCHAT" tokenize -m "$M" --special "<|im_start|>user
$1" | wc -w; }

# ---- the script case: 8 calls, each a different question after one document
doc=$(python3 -c "import random; r = random.Random(3); print(' '.join(r.choice(['alpha','beta','gamma','delta','river','stone','cloud','field']) + str(r.randrange(100)) for _ in range(250)))")
doc_tok=$(ntok "$doc")
[ "$doc_tok" -gt 500 ] && ok "a document of $doc_tok tokens" || not_ok "document of $doc_tok tokens"
i=1
while [ $i -le 8 ]; do
    q="Question number $i: which word comes first?"
    before=$(nblk)
    run sh -c "$R --temp 0 '$doc
$q' < /dev/null"
    expect_rc 0
    prompt=$(field prompt_tokens) pre=$(field prefilled_tokens) cached=$(field cached_tokens)
    answer=$(field answer) written=$(field blocks_written)
    own=$((prompt - doc_tok))
    if [ $i = 1 ]; then
        [ "$cached" = 0 ] && [ "$pre" = "$prompt" ] && ok "call 1 computes all $prompt tokens" || not_ok "call 1: cached $cached, prefilled $pre of $prompt"
        first_answer=$answer
    else
        [ "$pre" -le $((B + own)) ] && ok "call $i prefills $pre <= B + its own $own tokens" || not_ok "call $i prefilled $pre (own $own)"
        # in fact no more than its own tokens: the diverging block's rows are read too
        [ "$pre" -le $((own + 1)) ] && ok "call $i computes only its question ($pre)" || not_ok "call $i prefilled $pre, own $own"
        [ "$((cached + pre))" = "$prompt" ] && ok "call $i: cached + prefilled = prompt" || not_ok "call $i: $cached + $pre != $prompt"
        [ "$(( $(nblk) - before ))" -le 2 ] && [ "$written" -le 2 ] && ok "call $i stores at most a block and a tail ($written)" || not_ok "call $i stored $written blocks ($(( $(nblk) - before )) files)"
    fi
    # the same call recomputed: the same answer
    run sh -c "$R --temp 0 --no-cache '$doc
$q' < /dev/null"
    [ "$(field answer)" = "$answer" ] && ok "call $i answers as --no-cache" || not_ok "call $i: '$answer' but --no-cache '$(field answer)'"
    i=$((i + 1))
done
# seeded calls too
run sh -c "$R --temp 0.9 --seed 11 '$doc
Question number 1: which word comes first?' < /dev/null"
seeded=$(field answer)
[ "$(field prefilled_tokens)" -le 1 ] && ok "a repeated prompt computes only its last token" || not_ok "prefilled $(field prefilled_tokens)"
run sh -c "$R --temp 0.9 --seed 11 --no-cache '$doc
Question number 1: which word comes first?' < /dev/null"
[ "$(field answer)" = "$seeded" ] && ok "seeded: the cached answer is --no-cache's" || not_ok "seeded answers differ"
# the first question again, greedy: its answer
run sh -c "$R --temp 0 '$doc
Question number 1: which word comes first?' < /dev/null"
[ "$(field answer)" = "$first_answer" ] && ok "the first call's answer again" || not_ok "first answer differs"
# --no-cache neither reads nor writes
n=$(nblk)
run sh -c "$R --temp 0 --no-cache '$doc
Another question' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && [ "$(nblk)" = "$n" ] && ok "--no-cache read and wrote nothing" || not_ok "--no-cache: cached $(field cached_tokens), blocks $n -> $(nblk)"

# ---- partial sharing: about 2,000 tokens in common, then different
long=$(python3 -c "import random; r = random.Random(5); print(' '.join(r.choice(['north','south','east','west','hill','lake']) + str(r.randrange(1000)) for _ in range(800)))")
shared=$(ntok "$long")
[ "$shared" -gt 2000 ] && ok "a shared part of $shared tokens" || not_ok "shared part of $shared tokens"
run sh -c "$R --temp 0 '$long
First ending.' < /dev/null"
expect_rc 0
run sh -c "$R --temp 0 '$long
Second ending, quite another one.' < /dev/null"
expect_rc 0
# the two prompts share the tokens up to the newline (its merge may differ)
restored=$(field restored_tokens) blocks=$(field restored_blocks)
[ "$restored" -ge "$shared" ] && [ "$restored" -le $((shared + 2)) ] && ok "restored $restored of $shared shared tokens" || not_ok "restored $restored, shared $shared"
[ "$blocks" = $((restored / B + (restored % B != 0))) ] && ok "$((restored / B)) full blocks (floor($restored/$B)) and the rows of one more" || not_ok "restored from $blocks blocks"
[ "$(field prefilled_tokens)" = $(( $(field prompt_tokens) - restored )) ] && ok "the rest computed" || not_ok "prefilled $(field prefilled_tokens)"

# ---- 10-turn sessions: each turn resumed from disk answers as --no-cache
for mode in greedy seeded; do
    if [ $mode = greedy ]; then S="--temp 0"; else S="--temp 0.8 --seed 7"; fi
    t=1 same=0
    while [ $t -le 10 ]; do
        run sh -c "$R $S -s ten-$mode --no-cache 'Turn $t: tell me about number $t.' < /dev/null"
        nc=$(field answer)
        run sh -c "$R $S -s ten-$mode 'Turn $t: tell me about number $t.' < /dev/null"
        expect_rc 0
        [ "$(field answer)" = "$nc" ] && same=$((same + 1)) || echo "turn $t ($mode): '$(field answer)' but --no-cache '$nc'"
        t=$((t + 1))
    done
    [ $same = 10 ] && ok "$mode: 10 resumed turns answer as --no-cache" || not_ok "$mode: $same of 10 turns as --no-cache"
    turns=$("$KVCHAT" sessions list --json | jq ".[] | select(.name == \"ten-$mode\") | .turns")
    [ "$turns" = 10 ] && ok "$mode: 10 turns saved (--no-cache saved none)" || not_ok "$mode: $turns turns"
done
finish
