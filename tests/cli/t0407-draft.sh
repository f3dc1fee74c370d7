#!/bin/sh
# t0407: speculative decoding cannot change an answer (docs/speculative.md).
# For models of several weight types (Q8_0 and F32 with the real Qwen2
# vocabulary; llama.cpp's Q4_K_M and Q6_K files of tests/data/quant), a few
# prompts, greedy and seeded: `kvchat run` answers byte for byte the same
# with --draft off, ngram, store and on, and with drafts made wrong on
# purpose (KVCHAT_DRAFT_TEST=1); --json reports drafted_tokens and
# accepted_tokens; the same question again drafts its answer from the
# store; sessions (-s) turn by turn with drafting answer as without.
. "$TOP/tests/cli/lib.sh"
V=$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf
"$MKMODEL" "$T/q8.gguf" --arch qwen2 --vocab "$V" --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --tied \
    --scale 0.2 --seed 8 --type Q8_0 >/dev/null
"$MKMODEL" "$T/f32.gguf" --arch qwen2 --vocab "$V" --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --tied \
    --scale 0.2 --seed 9 --type F32 >/dev/null

prompt() {
    case $1 in
    1) echo "Say apple river seven apple river seven again and again" ;;
    2) echo "def f(x): return x + 1; def g(x): return x + 2" ;;
    3) echo "Hello, how are you?" ;;
    *) echo "1 2 3 1 2 3 1 2 3 1 2" ;;
    esac
}

for model in "$T/q8.gguf" "$T/f32.gguf" "$TOP/tests/data/quant/m-Q4_K_M.gguf" "$TOP/tests/data/quant/m-Q6_K.gguf"; do
    mname=$(basename "$model" .gguf)
    for how in "greedy:--temp 0" "seeded:--temp 0.8 --seed 5"; do
        hname=${how%%:*} opts=${how#*:}
        bad=0 acc_store=0 acc_test=0 drafted_test=0
        for i in 1 2 3 4; do
            p=$(prompt "$i")
            r() { # shellcheck disable=SC2086
                "$KVCHAT" run -m "$model" -n 32 $opts --json "$@" "$p" </dev/null 2>>"$T/err.log"; }
            r --draft off >"$T/off.json" || { not_ok "$mname $hname $i: run failed: $(tail -3 "$T/err.log")"; continue; }
            want=$(jq -r .answer "$T/off.json")
            for mode in ngram store on test; do
                if [ $mode = test ]; then
                    KVCHAT_DRAFT_TEST=1 r --draft on >"$T/d.json"
                else
                    r --draft $mode >"$T/d.json"
                fi
                got=$(jq -r .answer "$T/d.json")
                if [ "$got" != "$want" ]; then
                    bad=$((bad + 1))
                    echo "  $mname $hname prompt $i --draft $mode: '$got', --draft off: '$want'"
                fi
                [ "$(jq -r .generated_tokens "$T/d.json")" = "$(jq -r .generated_tokens "$T/off.json")" ] ||
                    { bad=$((bad + 1)); echo "  $mname $hname prompt $i --draft $mode: generated_tokens differ"; }
                a=$(jq -r .accepted_tokens "$T/d.json") d=$(jq -r .drafted_tokens "$T/d.json")
                [ $mode = store ] && acc_store=$((acc_store + a))
                [ $mode = test ] && acc_test=$((acc_test + a)) drafted_test=$((drafted_test + d))
            done
        done
        [ "$bad" = 0 ] && ok "$mname $hname: 4 prompts x ngram, store, on, wrong drafts: the answers of --draft off" ||
            not_ok "$mname $hname: $bad answers differ from --draft off"
        # the same question asked again: the store has its answer
        [ "$acc_store" -gt 0 ] && ok "$mname $hname: the store drafted $acc_store accepted tokens" ||
            not_ok "$mname $hname: nothing accepted from the store"
        [ "$drafted_test" -gt "$acc_test" ] && ok "$mname $hname: wrong drafts: $acc_test of $drafted_test accepted" ||
            not_ok "$mname $hname: wrong drafts: $acc_test of $drafted_test accepted"
    done
done

# --json has the keys with --draft off too
"$KVCHAT" run -m "$T/q8.gguf" -n 4 --json --draft off "hi" </dev/null >"$T/j.json" 2>"$T/err"
[ "$(jq -r '.drafted_tokens, .accepted_tokens' "$T/j.json" | tr '\n' ' ')" = "0 0 " ] &&
    ok "--json: drafted_tokens 0, accepted_tokens 0 with --draft off" || not_ok "--json: $(cat "$T/j.json")"

# sessions, turn by turn, resumed from the store each time
bad=0
for i in 1 2 3 4; do
    p=$(prompt "$i")
    a=$("$KVCHAT" run -m "$T/q8.gguf" -s plain -n 24 --temp 0.8 --seed 3 --draft off "$p" </dev/null 2>/dev/null)
    b=$(KVCHAT_DRAFT_TEST=1 "$KVCHAT" run -m "$T/q8.gguf" -s drafted -n 24 --temp 0.8 --seed 3 --draft on "$p" </dev/null 2>/dev/null)
    [ "$a" = "$b" ] || { bad=$((bad + 1)); echo "  turn $i: '$b' drafting, '$a' without"; }
done
[ "$bad" = 0 ] && ok "a session of 4 turns, each a new process: the same answers with (wrong) drafts" ||
    not_ok "sessions: $bad turns differ"

# bad values are refused
run "$KVCHAT" run -m "$T/q8.gguf" --draft sideways "hi"
expect_rc 1
expect_err "draft"
run "$KVCHAT" run -m "$T/q8.gguf" --draft-max 0 "hi"
expect_rc 1
finish
