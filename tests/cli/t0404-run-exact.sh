#!/bin/sh
# t0404: a cache hit gives the bits of a recomputation. Ten-turn
# conversations through `kvchat run -s` (each turn resumed from the KV
# segments on disk, so only its new message is computed) answer byte for
# byte what `--no-cache` (the whole conversation prefilled again, in one
# batch) answers at every turn, greedy and sampled (--temp 0.8 --seed N),
# on 2 threads and on 1. E2E_MODEL runs it on another model (as docs/engine.md's
# figures on the Qwen2.5-0.5B-shaped models: E2E_MODEL=/tmp/kvchat-bench/q-Q8_0.gguf).
. "$TOP/tests/cli/lib.sh"
M=${E2E_MODEL:-$T/m.gguf}
if [ -z "${E2E_MODEL:-}" ]; then
    qwen2_tiny "$M" --type Q8_0
fi
TURNS=${E2E_TURNS:-10}

msg() { # turn i's message: a different length every turn
    i=$1 w="Question $1 about"
    j=0
    while [ $j -lt $((i * 7 % 23 + 3)) ]; do w="$w word$((j * i % 97))"; j=$((j + 1)); done
    echo "$w?"
}

# conversation NAME OPTIONS: TURNS turns, each first recomputed with
# --no-cache (the session is read, not changed), then resumed
conversation() {
    name=$1
    shift
    bad=0
    for i in $(seq 1 "$TURNS"); do
        m=$(msg "$i")
        "$KVCHAT" run -m "$M" -s "$name" "$@" --no-cache --json "$m" </dev/null >"$T/nc.json" 2>"$T/err" ||
            { not_ok "$name turn $i: --no-cache failed: $(cat "$T/err")"; return; }
        "$KVCHAT" run -m "$M" -s "$name" "$@" --json "$m" </dev/null >"$T/c.json" 2>"$T/err" ||
            { not_ok "$name turn $i: resumed run failed: $(cat "$T/err")"; return; }
        a=$(jq -r .answer "$T/nc.json") b=$(jq -r .answer "$T/c.json")
        cached=$(jq -r .cached_tokens "$T/c.json")
        if [ "$a" != "$b" ]; then
            bad=$((bad + 1))
            echo "  turn $i: --no-cache '$a'"
            echo "  turn $i: resumed    '$b' ($cached cached)"
        fi
        [ "$(jq -r .prompt_tokens "$T/nc.json")" = "$(jq -r .prompt_tokens "$T/c.json")" ] ||
            { bad=$((bad + 1)); echo "  turn $i: prompt tokens differ"; }
    done
    [ "$(jq -r .cached_tokens "$T/c.json")" -gt 0 ] && ok "$name: the last turn resumed $(jq -r .cached_tokens "$T/c.json") tokens" ||
        not_ok "$name: nothing resumed"
    [ "$bad" = 0 ] && ok "$name: $TURNS turns, every answer byte-identical to --no-cache" ||
        not_ok "$name: $bad of $TURNS turns differ from --no-cache"
}

conversation greedy -t 2 --temp 0 -n 24
conversation sampled -t 2 --temp 0.8 --seed 7 -n 24
conversation greedy1 -t 1 --temp 0 -n 24
conversation sampled1 -t 1 --temp 0.8 --seed 11 -n 24
finish
