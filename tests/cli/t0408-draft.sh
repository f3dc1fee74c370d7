#!/bin/sh
# t0408: speculative decoding never changes an answer (issue 26,
# docs/speculative.md). For every weight type (mkmodel's F32, F16, BF16 and
# Q8_0, and llama.cpp's Q4_K_M, Q6_K and IQ4_XS files of tests/data/quant),
# 50 prompts, greedy and seeded (with repetition and presence penalties),
# each draft source (--draft ngram, store, on) and wrong drafts on purpose
# (KVCHAT_DRAFT_TEST=1) give byte for byte the answers of --draft off. So do
# resumed sessions (`run -s`, turn by turn), a fork and /retry in a chat,
# and answers under --format json.
# Drafting must also happen: the store drafts (and the sampler accepts) the
# answers --draft off stored before, the prompts that repeat themselves give
# n-gram drafts, and the wrong drafts are drafted and rejected. Small
# models, short answers: the whole test takes well under a minute.
. "$TOP/tests/cli/lib.sh"
D=$TOP/tests/data/quant
models=
for ty in F32 F16 BF16 Q8_0; do # a 400-token byte vocabulary: fast, and varied answers
    "$MKMODEL" "$T/m-$ty.gguf" --arch llama --n-vocab 400 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 \
        --scale 0.2 --seed 8 --type "$ty" >/dev/null || exit 1
    models="$models $ty:$T/m-$ty.gguf"
done
for ty in Q4_K_M Q6_K IQ4_XS; do models="$models $ty:$D/m-$ty.gguf"; done

# 50 prompts, each in a fresh conversation (/clear); a third repeat themselves (n-gram drafts)
i=0
while [ $i -lt 50 ]; do
    case $((i % 3)) in
    0) echo "say it again: red fox $i jumps, red fox $i jumps, red fox $i jumps" ;;
    1) echo "Question $i about word$((i * 7 % 13)) and word$((i * 5 % 11))?" ;;
    2) echo "one two three four one two three four $i" ;;
    esac
    echo /clear
    i=$((i + 1))
done >"$T/prompts"

# drafted/accepted/passes summed over the -v lines of stderr file $1
counts() { sed -n 's/.*drafted \([0-9]*\), accepted \([0-9]*\) in \([0-9]*\) pass.*/\1 \2 \3/p' "$1" |
    awk '{ d += $1; a += $2; p += $3 } END { printf "%d %d %d\n", d, a, p }'; }

# chat MODEL NAME OPTIONS...: the 50 answers into $T/NAME.out, -v's lines into $T/NAME.err
chat() {
    m=$1 name=$2
    shift 2
    "$KVCHAT" chat -m "$m" -t 1 -n 12 --template chatml -v "$@" <"$T/prompts" >"$T/$name.out" 2>"$T/$name.err" ||
        { not_ok "$name: chat failed: $(tail -n 3 "$T/$name.err")"; return 1; }
    n=$(grep -c '^\[prefilled' "$T/$name.err")
    [ "$n" = 50 ] || { not_ok "$name: $n answers, wanted 50"; return 1; }
}

for entry in $models; do
    ty=${entry%%:*} m=${entry#*:}
    ng=0
    for s in greedy seeded; do
        if [ $s = greedy ]; then set -- --temp 0; else set -- --temp 0.8 --seed 5 --repeat-penalty 1.1 --presence-penalty 0.2; fi
        # without drafting first: its answers go to the store, which --draft store then drafts from
        chat "$m" "$ty-$s-off" "$@" --draft off || continue
        [ "$(counts "$T/$ty-$s-off.err")" = "0 0 0" ] || not_ok "$ty $s: --draft off drafted: $(counts "$T/$ty-$s-off.err")"
        [ -s "$T/$ty-$s-off.out" ] || not_ok "$ty $s: no answers"
        for mode in ngram store on wrong; do
            name=$ty-$s-$mode
            if [ $mode = wrong ]; then
                KVCHAT_DRAFT_TEST=1 chat "$m" "$name" "$@" --draft on || continue
            else
                chat "$m" "$name" "$@" --draft $mode || continue
            fi
            if cmp -s "$T/$ty-$s-off.out" "$T/$name.out"; then
                ok "$ty $s --draft $mode: 50 answers byte for byte those of --draft off ($(counts "$T/$name.err") drafted, accepted, passes)"
            else
                not_ok "$ty $s --draft $mode: the answers differ from --draft off"
                diff "$T/$ty-$s-off.out" "$T/$name.out" | head -n 6 | cat -v
            fi
            read -r dr ac pa <<EOF
$(counts "$T/$name.err")
EOF
            case $mode in
            store) # every answer was stored by the --draft off run: nearly all of it is drafted and taken
                [ "$ac" -ge 300 ] && [ "$ac" = "$dr" ] && ok "$ty $s store: $ac of $dr drafted tokens accepted" ||
                    not_ok "$ty $s store: drafted $dr, accepted $ac (wanted >= 300, all)" ;;
            ngram) ng=$((ng + dr))
                [ "$ac" -le "$dr" ] || not_ok "$ty $s ngram: drafted $dr, accepted $ac" ;;
            wrong) [ "$pa" -ge 50 ] && [ "$ac" -lt "$dr" ] && ok "$ty $s wrong drafts: $dr drafted, only $ac accepted" ||
                    not_ok "$ty $s wrong drafts: drafted $dr, accepted $ac in $pa passes" ;;
            esac
        done
    done
    # (random weights seldom repeat the prompt: a few n-gram drafts over the 100 answers)
    [ "$ng" -gt 0 ] && ok "$ty ngram: $ng tokens drafted over greedy and seeded" || not_ok "$ty ngram: nothing drafted"
done

# ---- n-gram drafts taken: a message asked again in the same chat is answered much as before
# by a model of small weights, so the n-grams of the first answer are drafted and accepted
printf 'red fox jumps\nred fox jumps\nred fox jumps\nred fox jumps\n' >"$T/again"
for ty in F32 Q8_0; do
    "$MKMODEL" "$T/s-$ty.gguf" --arch llama --n-vocab 400 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 \
        --scale 0.05 --seed 8 --type "$ty" >/dev/null || exit 1
    for d in off ngram; do
        "$KVCHAT" chat -m "$T/s-$ty.gguf" -t 1 -n 20 --template chatml --temp 0 -v --draft $d <"$T/again" \
            >"$T/again-$d.out" 2>"$T/again-$d.err"
    done
    read -r dr ac pa <<EOF
$(counts "$T/again-ngram.err")
EOF
    cmp -s "$T/again-off.out" "$T/again-ngram.out" && [ "$ac" -gt 10 ] && [ "$(grep -c '^\[prefilled' "$T/again-ngram.err")" = 4 ] &&
        ok "$ty a message asked again: n-grams drafted $dr, accepted $ac; the answers of --draft off" ||
        not_ok "$ty a message asked again: drafted $dr, accepted $ac; answers equal: $(cmp "$T/again-off.out" "$T/again-ngram.out" && echo yes)"
done

# ---- sessions: resumed turn by turn (`run -s`), a fork and /retry in a chat, seeded
turn_msg() { echo "turn $1: the river and the stone, the river and the stone, $(( $1 * 37 % 101 ))"; }
for entry in $models; do
    ty=${entry%%:*} m=${entry#*:}
    for mode in off on store wrong; do
        env=
        [ $mode = wrong ] && env=KVCHAT_DRAFT_TEST=1
        d=$mode
        [ $mode = wrong ] && d=on
        : >"$T/run-$ty-$mode"
        for i in 1 2 3 4 5 6; do
            env $env "$KVCHAT" run -m "$m" -s "r-$ty-$mode" -t 1 -n 10 --template chatml --temp 0.8 --seed 3 --draft $d \
                --json "$(turn_msg $i)" </dev/null >"$T/r.json" 2>"$T/err" || { not_ok "$ty run -s $mode turn $i: $(cat "$T/err")"; break; }
            jq -c '[.answer, .drafted_tokens, .accepted_tokens]' "$T/r.json" >>"$T/run-$ty-$mode"
        done
        printf 'first message of the chat\nsecond message, second message\n/fork f-%s-%s\nthird one\n/retry\nfourth\n/load c-%s-%s\nfifth\n' \
            "$ty" "$mode" "$ty" "$mode" |
            env $env "$KVCHAT" chat -m "$m" -s "c-$ty-$mode" --yes -t 1 -n 10 --template chatml --temp 0.8 --seed 4 \
                --draft $d >"$T/chat-$ty-$mode" 2>"$T/err" || not_ok "$ty chat $mode: $(tail -n 2 "$T/err")"
        for s in c f; do
            "$KVCHAT" sessions export "$s-$ty-$mode" | jq -c '[.messages[] | [.role, .content]]' >"$T/exp-$s-$ty-$mode"
        done
    done
    a() { cut -d, -f1 "$1"; }
    for mode in on store wrong; do
        [ "$(a "$T/run-$ty-off")" = "$(a "$T/run-$ty-$mode")" ] && [ "$(wc -l <"$T/run-$ty-off")" = 6 ] &&
            ok "$ty run -s, 6 resumed turns, --draft $mode: the answers of --draft off" ||
            { not_ok "$ty run -s --draft $mode differs from off"; diff "$T/run-$ty-off" "$T/run-$ty-$mode" | head -n 4; }
        cmp -s "$T/chat-$ty-off" "$T/chat-$ty-$mode" && [ -s "$T/chat-$ty-off" ] &&
            ok "$ty chat with /fork, /retry, /load, --draft $mode: the answers of --draft off" ||
            { not_ok "$ty chat --draft $mode differs from off"; diff "$T/chat-$ty-off" "$T/chat-$ty-$mode" | head -n 4; }
        cmp -s "$T/exp-c-$ty-off" "$T/exp-c-$ty-$mode" && cmp -s "$T/exp-f-$ty-off" "$T/exp-f-$ty-$mode" &&
            [ "$(jq length "$T/exp-c-$ty-off")" = 6 ] && [ "$(jq length "$T/exp-f-$ty-off")" = 8 ] &&
            ok "$ty --draft $mode: the session and its fork saved as with --draft off" ||
            not_ok "$ty --draft $mode: saved sessions differ: $(cat "$T/exp-c-$ty-$mode" "$T/exp-f-$ty-$mode" | head -c 300)"
    done
    # later turns repeat earlier ones' words: the store and n-grams draft something on resumed turns
    drafted=$(awk -F, '{ s += $2 } END { print s + 0 }' "$T/run-$ty-on")
    [ "$drafted" -gt 0 ] && ok "$ty run -s --draft on drafted $drafted tokens" || not_ok "$ty run -s --draft on drafted nothing"
done

# ---- under a format (--format json: the sampler picks among the tokens the grammar allows), with
# the store drafting the answer stored by --draft off, and with wrong drafts
M=$T/m-Q8_0.gguf
for i in 1 2 3; do
    q="a JSON value for case $i, case $i"
    "$KVCHAT" run -m "$M" -t 1 -n 24 --temp 0.8 --seed $i --format json --json --draft off "$q" </dev/null >"$T/f-off.json" 2>/dev/null
    "$KVCHAT" run -m "$M" -t 1 -n 24 --temp 0.8 --seed $i --format json --json --draft store "$q" </dev/null >"$T/f-on.json" 2>/dev/null
    KVCHAT_DRAFT_TEST=1 "$KVCHAT" run -m "$M" -t 1 -n 24 --temp 0.8 --seed $i --format json --json "$q" </dev/null >"$T/f-bad.json" 2>/dev/null
    a=$(jq -c '[.answer, .stop_reason]' "$T/f-off.json") b=$(jq -c '[.answer, .stop_reason]' "$T/f-on.json")
    c=$(jq -c '[.answer, .stop_reason]' "$T/f-bad.json")
    [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && [ "$(jq .accepted_tokens "$T/f-on.json")" -gt 0 ] &&
        ok "--format json case $i: the same answer drafted from the store ($(jq .accepted_tokens "$T/f-on.json") accepted) and with wrong drafts" ||
        not_ok "--format json case $i: off $a, store $b ($(jq .accepted_tokens "$T/f-on.json") accepted), wrong drafts $c"
done

# ---- the switches: bad values are usage errors; /set draft in the chat; the config key
run "$KVCHAT" run -m "$M" --draft maybe hi
expect_rc 1
expect_err "bad value 'maybe' for draft: expected off, ngram, store or on"
run "$KVCHAT" run -m "$M" --draft-max 0 hi
expect_rc 1
expect_err "bad value '0' for draft_max"
run "$KVCHAT" run -m "$M" --draft-max 32 hi
expect_rc 1
run sh -c "printf '/set draft off\n/set draft_max 3\n/set draft store\n/set draft nope\n' | '$KVCHAT' chat -m '$M' -t 1"
expect_err "drafting   off: one token a pass"
expect_err "drafting   store: the block store, at most 3 tokens a pass (never changes an answer)"
expect_err "bad value 'nope' for draft"
mkdir -p "$XDG_CONFIG_HOME/kvchat"
printf 'draft = off\n' >"$XDG_CONFIG_HOME/kvchat/config"
run sh -c "'$KVCHAT' run -m '$M' -t 1 -n 8 --temp 0 --json 'say it again: red fox 0 jumps, red fox 0 jumps, red fox 0 jumps' </dev/null"
expect_rc 0
[ "$(jq .drafted_tokens "$T/out")" = 0 ] && ok "draft = off in the config: nothing drafted" || not_ok "config draft = off: $(cat "$T/out")"
run sh -c "'$KVCHAT' run -m '$M' -t 1 -n 8 --temp 0 --draft store --json 'say it again: red fox 0 jumps, red fox 0 jumps, red fox 0 jumps' </dev/null"
[ "$(jq .drafted_tokens "$T/out")" -gt 0 ] && ok "--draft store over the config's off drafts" || not_ok "--draft store: $(cat "$T/out")"
rm -f "$XDG_CONFIG_HOME/kvchat/config"
finish
