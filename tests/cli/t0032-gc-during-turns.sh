#!/bin/sh
# t0032: `sessions gc` run in a loop while a session takes turns removes
# nothing a turn is writing (issue 29's fault run: a turn's new blocks are
# indexed before the session's list names them, and gc took them). Writers
# hold locks/gc.lock shared from their first block file to the session's
# list, gc holds it exclusive: every turn restores exactly what the same
# turns restore with no gc running, and gc still removes the blocks of
# commands without a session.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" --ctx 4096
R="timeout -k 5 120 $KVCHAT run -m $M -t 2 --temp 0 -n 40 --json"
N=12

turns() { # home, then the cached tokens of each turn, one a line, to stdout
    i=1
    while [ $i -le $N ]; do
        KVCHAT_HOME=$1 $R -s s "turn $i: tell me more" < /dev/null > "$T/turn.json" 2>> "$T/turns.err" ||
            echo "turn $i failed"
        jq -r .cached_tokens "$T/turn.json"
        i=$((i + 1))
    done
}

turns "$T/quiet" > "$T/want"
[ "$(sort -n "$T/want" | tail -1)" -gt 200 ] && ok "the quiet run restores its history ($(tail -1 "$T/want") tokens at the end)" ||
    not_ok "the quiet run: $(tr '\n' ' ' < "$T/want")"

H=$T/busy
mkdir -p "$H"
KVCHAT_HOME=$H $R 'an unnamed question' < /dev/null > /dev/null 2>&1
( while [ ! -e "$T/stop" ]; do KVCHAT_HOME=$H timeout -k 5 60 "$KVCHAT" sessions gc > /dev/null 2>> "$T/gc.err"; done ) &
gc=$!
turns "$H" > "$T/got"
touch "$T/stop"; wait $gc
if cmp -s "$T/want" "$T/got"; then
    ok "with gc in a loop every turn restored what it restores without ($N turns)"
else
    not_ok "cached tokens with gc: $(tr '\n' ' ' < "$T/got"), without: $(tr '\n' ' ' < "$T/want")"
fi
grep -q '^kvchat:' "$T/gc.err" && not_ok "gc: $(grep '^kvchat:' "$T/gc.err" | sort -u | head -3)" || ok "gc never failed"
grep -v '^$' "$T/turns.err" | grep -q . && not_ok "turns said: $(sort -u "$T/turns.err" | head -3)" || ok "no turn reported a problem"
# and gc still did its work: the unnamed command's block went
grep -q '^gc: removed [1-9]' "$T/gc.err" && ok "gc removed the unnamed command's blocks" ||
    not_ok "gc removed nothing: $(sort -u "$T/gc.err" | head -3)"
finish
