#!/bin/sh
# t0611: Qwen3.5's chat template with thinking (issue 23), on a qwen35 model
# with Qwen3.5's template (llama.cpp's models/templates/Qwen3.5-4B.jinja)
# and a real Qwen vocabulary. The template opens the reasoning itself when
# thinking is on ("<think>\n" after the assistant's opening) and puts the
# empty think block there when it is off; both are the answer's first text:
# - the first prompt has the tokens of Qwen3.5's prompt, on and off (the
#   text written out here, as the template renders it);
# - every turn, resumed in a new process with thinking on or off, answers as
#   --no-cache does, and one `kvchat chat` switching with /set think
#   answers as the resumed runs;
# - the saved answers keep the opening they were generated after: "<think>\n"
#   with the reasoning after it (on), the empty block (off); `run --json`
#   gives the reasoning apart from the answer.
. "$TOP/tests/cli/lib.sh"
xz -dc "$TOP/tests/data/tokenizer/ggml-vocab-qwen2.gguf.xz" >"$T/q2v.gguf"
"$MKMODEL" "$T/m.gguf" --arch qwen35 --vocab "$T/q2v.gguf" --dim 64 --layers 4 --heads 2 --kv-heads 1 \
    --head-dim 32 --rope-dim 8 --ff 128 --template "$TOP/tests/data/templates/jinja/Qwen3.5-4B.jinja" \
    --type Q8_0 --seed 3 >/dev/null
M=$T/m.gguf
R="$KVCHAT run -m $M -t 2 --temp 0 -n 6 --json"
for how in on off; do
    case $how in
    on) p=$(printf '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n') ;;
    off) p=$(printf '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n') ;;
    esac
    printf '%s\n' "$p" >"$T/p.txt" # $(...) drops the last newline: put it back
    run "$KVCHAT" tokenize -m "$M" --special --no-bos -f "$T/p.txt"
    want=$(wc -w <"$T/out")
    run sh -c "$R --no-cache --think $how hello </dev/null"
    expect_rc 0
    [ "$(field prompt_tokens)" = "$want" ] && ok "--think $how: the prompt is Qwen3.5's ($want tokens)" ||
        not_ok "--think $how: $(field prompt_tokens) prompt tokens, Qwen3.5's has $want"
done
run sh -c "$R --no-cache --think on hello </dev/null"
[ "$(field reasoning)" != null ] && ok "thinking on: the answer opens in the reasoning" ||
    not_ok "thinking on: no reasoning: $(cat "$T/out")"

# ---- run -s, one process per turn: on, off, on
think_turns "$R" s "on hello" "off second" "on third"
[ "$bad" = 0 ] && ok "on, off, on: each turn resumed answers as --no-cache" || not_ok "on, off, on: $bad differences"
export_is s '[.messages[] | select(.role == "assistant") | .content | startswith("<think>\n\n</think>\n\n")] == [false, true, false]' \
    "the answers given with thinking off keep their empty think block"
export_is s '[.messages[] | select(.role == "assistant") | .content |
    startswith("<think>\n") and (startswith("<think>\n\n</think>") | not)] == [true, false, true]' \
    "the answers given with thinking on keep the opening of their reasoning"

# ---- one REPL switching with /set think
printf 'hello\n/set think off\nsecond\n/set think on\nthird\n' >"$T/in"
run sh -c "$KVCHAT chat live -m $M -t 2 --temp 0 -n 6 --think on <'$T/in'"
expect_rc 0
run "$KVCHAT" sessions export live
jq -r '.messages[] | select(.role == "assistant") | .content' "$T/out" >"$T/live-content.txt"
run "$KVCHAT" sessions export s
jq -r '.messages[] | select(.role == "assistant") | .content' "$T/out" >"$T/s-content.txt"
cmp -s "$T/live-content.txt" "$T/s-content.txt" && ok "/set think off, on mid-conversation answers as the resumed runs" ||
    not_ok "the live chat's answers differ from the resumed runs': $(diff "$T/live-content.txt" "$T/s-content.txt" | head -5)"
finish
