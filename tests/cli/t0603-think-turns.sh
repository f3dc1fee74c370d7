#!/bin/sh
# t0603: thinking off and on from turn to turn (issue 17), on a model with
# Qwen3's chat template (its enable_thinking switch) and a real Qwen
# vocabulary. With thinking off the answer opens with the empty think block
# Qwen3's template puts there; the block is the answer's, so
# - the first prompt has the tokens of Qwen3's no-thinking prompt (its text
#   written out here; tests/test_conv.c compares the ids themselves);
# - every later turn, thinking on or off, computes only its own message
#   (cached_tokens = everything before it), in `run -s` and in the REPL;
# - each turn answers as --no-cache does, and one `kvchat chat` switching
#   with /set think answers as the resumed runs;
# - the saved answers keep the block they were generated after;
# - the session keeps the setting it was made with or /set to, and --think
#   on an existing session holds for that turn only;
# - /set think off on a template without the switch says so.
. "$TOP/tests/cli/lib.sh"
xz -dc "$TOP/tests/data/tokenizer/ggml-vocab-qwen2.gguf.xz" >"$T/q2v.gguf"
"$MKMODEL" "$T/m.gguf" --arch qwen3 --vocab "$T/q2v.gguf" --dim 64 --layers 2 --heads 4 --kv-heads 2 \
    --ff 128 --template "$TOP/tests/data/templates/jinja/Qwen-Qwen3-0.6B.jinja" --type Q8_0 --seed 3 >/dev/null
M=$T/m.gguf
R="$KVCHAT run -m $M -t 2 --temp 0 -n 6 --json"
NO_THINK='startswith("<think>\n\n</think>\n\n")' THINK='startswith("<think>")'

qwen3=$(printf '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n')
run "$KVCHAT" tokenize -m "$M" --special "$qwen3"
expect_rc 0
want_ids=$(wc -w <"$T/out")

# ---- run -s, one process per turn: off, on, off
no_reasoning() { # no reasoning; the first prompt Qwen3's with thinking off; then the whole history cached
    [ "$(field reasoning)" = null ] || { bad=$((bad + 1)); echo "  turn $i: reasoning $(field reasoning)"; }
    if [ $i = 1 ]; then
        [ "$(field prompt_tokens)" = "$want_ids" ] && ok "--think off: the prompt is Qwen3's with enable_thinking false ($want_ids tokens)" ||
            not_ok "--think off: $(field prompt_tokens) prompt tokens, Qwen3's has $want_ids"
    else
        [ "$(field cached_tokens)" = "$total" ] || { bad=$((bad + 1)); echo "  turn $i (think $1): cached $(field cached_tokens), want $total"; }
    fi
}
TURN_HOOK=no_reasoning
think_turns "$R" s "off hello" "on second" "off third"
TURN_HOOK=
[ "$bad" = 0 ] && ok "off, on, off: each turn resumed whole (only its message computed) and as --no-cache" ||
    not_ok "off, on, off: $bad differences"

export_is s "[.messages[] | select(.role == \"assistant\") | .content | $NO_THINK] == [true, false, true]" \
    "the answers given with thinking off keep their empty think block"

# the session keeps what it was made with (--think off); --think on for one
# turn held for that turn only
export_is s '.params.think == 0' "the session keeps think off"
run sh -c "$R -s s 'fourth' </dev/null"
expect_rc 0
export_is s ".messages[-1].content | $NO_THINK" "resumed without --think: thinking off, as kept"
run sh -c "$R -s s --think on 'fifth' </dev/null"
expect_rc 0
export_is s "(.messages[-1].content | $THINK | not) and .params.think == 0" \
    "--think on holds for its turn and is not saved"

# ---- one REPL switching with /set think
printf 'hello\n/set think on\nsecond\n/set think off\nthird\n' >"$T/in"
run sh -c "$KVCHAT chat live -m $M -t 2 --temp 0 -n 6 --think off <'$T/in'"
expect_rc 0
expect_err "think: on"
python3 -c "import sys; sys.stdout.write(sys.stdin.buffer.read().decode('utf-8', 'replace'))" <"$T/out" >"$T/live.txt"
cmp -s "$T/live.txt" "$T/resumed.txt" && ok "/set think on, off mid-conversation answers as the resumed runs" ||
    { not_ok "the REPL differs"; diff "$T/live.txt" "$T/resumed.txt" | head -5; }
run "$KVCHAT" sessions export live
cp "$T/out" "$T/live.json"
run "$KVCHAT" sessions export s
jq -s -e '[.[0].messages[:6][] | [.content, .tokens]] == [.[1].messages[:6][] | [.content, .tokens]]' "$T/live.json" "$T/out" \
    >/dev/null && ok "the REPL saved the same messages and token counts" || not_ok "the REPL's session differs"
# /set is saved at once: the REPL's last word was off
jq -e '.params.think == 0' "$T/live.json" >/dev/null && ok "/set think is kept by the session" ||
    not_ok "REPL params: $(jq -c .params "$T/live.json")"
printf '/set think on\n' >"$T/in"
run sh -c "$KVCHAT chat live -m $M -t 2 --temp 0 -n 6 <'$T/in'"
run sh -c "$R -s live 'more' </dev/null"
expect_rc 0
export_is live ".params.think == 1 and (.messages[-1].content | $THINK | not)" \
    "/set think on kept: the next run thinks"

# /retry after switching: thinking on now, so no block
printf 'hello\n/set think on\n/retry\n' >"$T/in"
run sh -c "$KVCHAT chat retry --yes -m $M -t 2 --temp 0 -n 6 --think off <'$T/in'"
expect_rc 0
export_is retry ".messages | length == 2 and (.[1].content | $THINK | not)" "/retry takes the setting as it is now"

# ---- a template without the switch
"$MKMODEL" "$T/plain.gguf" --dim 64 --layers 1 --heads 4 --kv-heads 2 --ff 128 --seed 7 >/dev/null
printf 'hi\n/set think off\n' >"$T/in"
run sh -c "$KVCHAT chat -m $T/plain.gguf -n 2 --temp 0 <'$T/in'"
expect_err "the model's chat template cannot switch thinking off"
finish
