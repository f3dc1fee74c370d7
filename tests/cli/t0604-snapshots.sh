#!/bin/sh
# t0604: a hybrid model (qwen35: Gated DeltaNet layers, one attention layer
# in four) resumes from its recurrent-state snapshots beside the KV blocks
# (issue 23, docs/snapshots.md):
# - six turns of about 400 tokens, each in a new process, compute only their
#   new tokens (cached_tokens = the whole history, restored_snapshot_pos
#   there) and answer byte for byte as --no-cache and as one live chat,
#   greedy and seeded;
# - a fork at turn 3 and a second session sharing a system prompt longer
#   than a block resume from the shared prefix;
# - a run sharing only part of a turn with the session resumes from the
#   ladder: at most SESS_SNAP_INTERVAL - 1 = 255 tokens more than its own;
# - a damaged, a missing and a foreign snapshot are each reported once,
#   dropped and recomputed, the answer unchanged;
# - /retry and /undo in a live chat land on snapshots and answer as before;
# - kill -9 during turns loses at most the turn under way.
. "$TOP/tests/cli/lib.sh"
M=$T/q.gguf
"$MKMODEL" "$M" --arch qwen35 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 4 \
    --heads 4 --kv-heads 2 --head-dim 16 --ff 128 --ssm-state 16 --ssm-groups 2 --ssm-heads 4 --ssm-conv 4 \
    --full-attn-interval 4 --scale 0.2 --ctx 4096 >/dev/null
H=$KVCHAT_HOME
BOUND=255
R="$KVCHAT run -m $M -t 2 -c 4096 --temp 0 -n 12 --json"
nsnap() { find "$H/kv" -name '*.kvsnap' | wc -l; }
sq() { python3 -c "import sqlite3, sys; c = sqlite3.connect('$H/kvchat.db'); print(c.execute(sys.argv[1]).fetchone()[0])" "$1"; }

msg() { turn_msg "$1" 125 w; } # turn i's message: about 380 tokens, different every turn

# ---- six turns, each resumed in a new process = --no-cache = one live chat
snap_turn() { # each resumed from the snapshot at its history's end, computing only its message
    if [ "$i" -gt 1 ]; then
        [ "$(field restored_snapshot_pos)" = "$total" ] && [ "$(field prefilled_tokens)" = "$(( p - total ))" ] ||
            { bad=$((bad + 1)); echo "  turn $i: snapshot $(field restored_snapshot_pos), prefilled $(field prefilled_tokens); want $total, $((p - total))"; }
    fi
    [ "$i" = 2 ] && [ "$(( p - total ))" -gt 350 ] && [ "$(( p - total ))" -lt 500 ] && ok "a turn of $(( p - total )) new tokens"
    [ "$i" = 3 ] && total3=$(( $(field prompt_tokens) + $(field generated_tokens) ))
}
TURN_HOOK=snap_turn
six_turns "$R" conv 125 w
TURN_HOOK=
[ "$bad" = 0 ] && ok "6 turns resumed from snapshots, each computing only its message, each as --no-cache" ||
    not_ok "$bad differences"
[ "$total" -gt 2300 ] && ok "a history of $total tokens" || not_ok "only $total tokens"
[ "$(nsnap)" -gt 12 ] && ok "$(nsnap) snapshots (turn ends, retry points, the ladder)" || not_ok "$(nsnap) snapshots"
# (the chat ends an answer with one newline whether or not it has its own: blank lines aside)
live_same "" "$KVCHAT chat live -m $M -t 2 -c 4096 --temp 0 -n 12" blank

# ---- seeded: a sampled turn resumed = --no-cache
S="$KVCHAT run -m $M -t 2 -c 4096 --temp 0.9 --seed 7 -n 12 --json"
run sh -c "$S -s conv --no-cache 'a sampled turn' </dev/null"
a=$(field answer)
run sh -c "$S -s conv 'a sampled turn' </dev/null"
[ "$(field answer)" = "$a" ] && [ "$(field cached_tokens)" = "$total" ] && ok "a seeded turn resumed answers as --no-cache" ||
    not_ok "seeded: '$(field answer)' vs '$a' (cached $(field cached_tokens), want $total)"
total=$(( $(field prompt_tokens) + $(field generated_tokens) ))

# ---- a fork at turn 3 resumes from its prefix
run "$KVCHAT" sessions fork conv f3 --at 3
expect_rc 0
run sh -c "$R -s f3 --no-cache 'Branch' </dev/null"
a=$(field answer)
run sh -c "$R -s f3 'Branch' </dev/null"
[ "$(field answer)" = "$a" ] && ok "the fork at turn 3 answers as --no-cache" || not_ok "fork: '$(field answer)' vs '$a'"
# (at least its history: a snapshot of turn 4's prompt may share the template's opening with it)
[ "$(field cached_tokens)" -ge "$total3" ] && [ "$(field restored_snapshot_pos)" = "$(field cached_tokens)" ] &&
    [ "$(field prefilled_tokens)" -le "$(( $(field prompt_tokens) - total3 ))" ] &&
    ok "the fork resumed $(field cached_tokens) tokens (its $total3 from turn 3) from a snapshot" ||
    not_ok "fork cached $(field cached_tokens) (snapshot $(field restored_snapshot_pos)), want $total3"

# ---- a run sharing part of turn 1 resumes from the ladder, within the bound
m1=$(msg 1)
part=$(echo "$m1" | cut -d' ' -f1-120)
run sh -c "$R --no-cache '$part different ending' </dev/null"
a=$(field answer) p=$(field prompt_tokens)
run sh -c "$R '$part different ending' </dev/null"
c=$(field cached_tokens) s=$(field restored_snapshot_pos)
[ "$(field answer)" = "$a" ] && ok "a run sharing part of a turn answers as --no-cache" || not_ok "shared part: answer differs"
[ "$s" != null ] && [ "$c" = "$s" ] && [ $(( c % 256 )) = 0 ] && [ "$c" -ge 256 ] &&
    ok "it resumed from the ladder's snapshot at $c of $p" || not_ok "shared part: cached $c, snapshot $s of $p"
# (where the stored K/V stopped matching, a snapshot is kept: a second such run resumes there)
run sh -c "$R '$part another ending' </dev/null"
[ "$(field cached_tokens)" -gt "$c" ] && ok "a second run with that prefix resumes where the first diverged ($(field cached_tokens))" ||
    not_ok "second shared run cached $(field cached_tokens)"

# ---- a system prompt longer than a block, shared by a second session
sys="You are a careful assistant. $(msg 9 | cut -d' ' -f1-60)"
run sh -c "$R -s sysa --system '$sys' 'first' </dev/null"
nsys=$(( $(field prompt_tokens) - 10 ))
run sh -c "$R -s sysb --system '$sys' --no-cache 'second' </dev/null"
a=$(field answer)
run sh -c "$R -s sysb --system '$sys' 'second' </dev/null"
[ "$(field answer)" = "$a" ] && ok "a second session on the system prompt answers as --no-cache" || not_ok "sysb differs"
[ "$(field cached_tokens)" -gt 64 ] && [ "$(field cached_tokens)" -ge "$nsys" ] &&
    ok "and resumes the system prompt ($(field cached_tokens) tokens)" || not_ok "sysb cached $(field cached_tokens)"

# ---- damaged, missing, foreign: reported once, recomputed, same answer
latest() { # the snapshot at the end of session conv
    hex=$(sq "SELECT hex(block) FROM session_blocks sb JOIN sessions s ON s.id = sb.session_id WHERE s.name = 'conv' ORDER BY idx DESC LIMIT 1" | tr A-F a-f)
    echo "$H/kv/$(echo "$hex" | cut -c1-2)/$hex.kvsnap"
}
for how in damaged missing foreign; do
    f=$(latest)
    [ -f "$f" ] || { not_ok "$how: no snapshot at the session's end ($f)"; continue; }
    case $how in
    damaged) # a byte of the state changed: whatever it held, write another value
        b=$(od -A n -t x1 -j 500 -N 1 "$f" | tr -d ' ')
        if [ "$b" = 58 ]; then c=Y; else c=X; fi
        printf '%s' "$c" | dd of="$f" bs=1 seek=500 conv=notrunc 2>/dev/null; want="unusable (checksum mismatch" ;;
    missing) rm -f "$f"; want="is missing" ;;
    foreign) cp "$(find "$H/kv" -name '*.kvsnap' ! -path "$f" | head -1)" "$f"; want="unusable (snapshot id does not match" ;;
    esac
    m="after the $how snapshot"
    run sh -c "$R -s conv --no-cache '$m' </dev/null"
    a=$(field answer)
    run sh -c "$R -s conv '$m' </dev/null"
    expect_rc 0
    expect_err "$want"
    [ "$(grep -c 'snapshot' "$T/err")" = 1 ] && ok "$how: said once" || not_ok "$how: said $(grep -c snapshot "$T/err") times"
    [ "$(field answer)" = "$a" ] && ok "$how: the turn answers as --no-cache" || not_ok "$how: answer differs"
    [ "$(field prefilled_tokens)" -le "$(( $(field prompt_tokens) - total + BOUND ))" ] &&
        ok "$how: recomputed $(field prefilled_tokens) tokens, within the bound" ||
        not_ok "$how: prefilled $(field prefilled_tokens) of $(field prompt_tokens) (history $total)"
    total=$(( $(field prompt_tokens) + $(field generated_tokens) ))
    run sh -c "$R -s conv 'and the next turn' </dev/null"
    grep -q snapshot "$T/err" && not_ok "$how: said again" || ok "$how: not said again"
    [ "$(field cached_tokens)" = "$total" ] && ok "$how: the next turn resumes all ($total)" || not_ok "$how: next cached $(field cached_tokens)"
    total=$(( $(field prompt_tokens) + $(field generated_tokens) ))
done

# ---- /retry and /undo land on snapshots (greedy: the same answers)
printf '%s\n' "$(msg 1)" /retry "$(msg 2)" /undo "$(msg 2)" >"$T/cmds.txt"
run sh -c "$KVCHAT chat rt -m $M -t 2 -c 4096 --temp 0 -n 12 --yes <'$T/cmds.txt'"
expect_rc 0
python3 -c "import sys; sys.stdout.write(sys.stdin.buffer.read().decode('utf-8', 'replace'))" <"$T/out" >"$T/rt.txt"
a1=$(sed -n 1p "$T/resumed.txt") a2=$(sed -n 2p "$T/resumed.txt")
[ "$(grep -cxF "$a1" "$T/rt.txt")" = 2 ] && ok "/retry answers turn 1 again alike" || not_ok "/retry: $(cat "$T/rt.txt")"
[ "$(grep -cxF "$a2" "$T/rt.txt")" = 2 ] && ok "/undo then the same message answers alike" || not_ok "/undo: $(cat "$T/rt.txt")"

# ---- kill -9 during turns loses at most the turn under way
run sh -c "$R -s k 'start' </dev/null"
i=0 lost=0
while [ $i -lt 12 ]; do
    before=$("$KVCHAT" sessions list --json | jq '.[] | select(.name == "k") | .turns')
    $KVCHAT run -m "$M" -t 2 -c 4096 --temp 0 -n 12 -s k "$(msg $((i + 20)))" </dev/null >/dev/null 2>&1 &
    pid=$!
    sleep "0.$(( (i * 37) % 10 ))"
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    after=$("$KVCHAT" sessions list --json | jq '.[] | select(.name == "k") | .turns')
    [ -n "$after" ] && [ "$after" -ge "$before" ] || lost=$((lost + 1))
    i=$((i + 1))
done
[ "$lost" = 0 ] && ok "12 kill -9s: no completed turn lost" || not_ok "$lost kills lost turns"
run sh -c "$R -s k --no-cache 'after the kills' </dev/null"
a=$(field answer)
run sh -c "$R -s k 'after the kills' </dev/null"
expect_rc 0
[ "$(field answer)" = "$a" ] && ok "after the kills a turn answers as --no-cache" || not_ok "after kills: answer differs"

# ---- eviction under --cache-max keeps a named session's latest snapshot last
run "$KVCHAT" sessions gc --cache-max 1
expect_rc 0
[ "$(nsnap)" = 0 ] && ok "gc --cache-max 1 evicts every snapshot and block" || not_ok "$(nsnap) snapshots left"
run sh -c "$R -s conv --no-cache 'after eviction' </dev/null"
a=$(field answer)
run sh -c "$R -s conv 'after eviction' </dev/null"
[ "$(field answer)" = "$a" ] && [ "$(field cached_tokens)" = 0 ] && ok "an evicted session is computed again, alike" ||
    not_ok "after eviction: cached $(field cached_tokens)"
finish
