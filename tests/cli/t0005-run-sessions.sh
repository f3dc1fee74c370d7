#!/bin/sh
# t0005: sessions through `kvchat run -s`: only new tokens computed on
# resume, a shared system prompt stored once, forks, damaged segments
# detected and repaired, another model, kill -9 at random moments, and one
# writer per session.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
"$MKMODEL" "$M" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 --ctx 4096 >/dev/null
R="$KVCHAT run -m $M -t 2 --temp 0 -n 8 --json"
H=$KVCHAT_HOME
nseg() { find "$H/kv" -name '*.kvseg' | wc -l; }
segs() { find "$H/kv" -name '*.kvseg' | sort; }
field() { jq -r ".$1" "$T/out"; }

# ---- resume computes only the new message
run sh -c "$R -s a 'Hello there' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && ok "turn 1 computed" || not_ok "turn 1 cached $(field cached_tokens)"
t1_prompt=$(field prompt_tokens)
t1_total=$(( t1_prompt + $(field generated_tokens) ))
# the same message again: ChatML renders it as turn 1's text after
# "<|im_end|>" "\n", so exactly 2 more tokens than turn 1's prompt
run sh -c "$R -s a 'Hello there' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = "$t1_total" ] && ok "turn 2 reuses all $t1_total tokens" || not_ok "turn 2 cached $(field cached_tokens), want $t1_total"
[ "$(field prefilled_tokens)" = "$((t1_prompt + 2))" ] && ok "turn 2 prefills only its message ($(field prefilled_tokens))" || not_ok "prefilled $(field prefilled_tokens), want $((t1_prompt + 2))"
answer2=$(field answer)
# the same two turns in another session agree
run sh -c "$R -s nc 'Hello there' < /dev/null"
run sh -c "$R -s nc 'Hello there' < /dev/null"
[ "$(field answer)" = "$answer2" ] && ok "same turn-2 answer in another session" || not_ok "turn 2 differs"

# ---- --no-cache reads the session, computes it all, changes nothing
turns=$("$KVCHAT" sessions list --json | jq '.[] | select(.name == "a") | .turns')
run sh -c "$R -s a --no-cache 'Once more' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && ok "--no-cache reuses nothing" || not_ok "--no-cache cached $(field cached_tokens)"
nc_answer=$(field answer); nc_prompt=$(field prompt_tokens)
[ "$("$KVCHAT" sessions list --json | jq '.[] | select(.name == "a") | .turns')" = "$turns" ] && ok "--no-cache saved nothing" || not_ok "--no-cache changed the session"
run sh -c "$R -s a 'Once more' < /dev/null"
[ "$(field answer)" = "$nc_answer" ] && ok "cached and recomputed answers agree" || not_ok "cached answer differs from --no-cache"
[ "$(field prompt_tokens)" = "$nc_prompt" ] && ok "same prompt tokens" || not_ok "prompt tokens differ"

# ---- a 1,000-token system prompt is stored once
sys=$(python3 -c "print(' '.join('word%d' % i for i in range(300)))")
before=$(nseg)
run sh -c "$KVCHAT run -m $M -t 2 --temp 0 -n 4 --json -c 2048 -s p1 --system '$sys' 'first' < /dev/null"
expect_rc 0
sys_tokens=$(field prompt_tokens)
[ "$sys_tokens" -gt 1000 ] && ok "system prompt of $sys_tokens tokens" || not_ok "system prompt only $sys_tokens tokens"
run sh -c "$KVCHAT run -m $M -t 2 --temp 0 -n 4 --json -c 2048 -s p2 --system '$sys' 'second' < /dev/null"
expect_rc 0
cached=$(field cached_tokens)
[ "$cached" -gt 1000 ] && ok "second session reused $cached system tokens" || not_ok "second session cached $cached"
[ "$(( $(nseg) - before ))" = 3 ] && ok "system segment stored once (3 new files)" || not_ok "$(( $(nseg) - before )) new files"
big=$(find "$H/kv" -name '*.kvseg' -size +100k | wc -l)
[ "$big" = 1 ] && ok "one large (system) segment file" || not_ok "$big large segment files"

# ---- fork: both branches work, the shared part is not copied
run "$KVCHAT" sessions fork a a2
expect_rc 0
n=$(nseg)
run sh -c "$R -s a 'Branch one' < /dev/null"; expect_rc 0; b1=$(field answer); c1=$(field cached_tokens)
run sh -c "$R -s a2 'Branch one' < /dev/null"; expect_rc 0
[ "$(field answer)" = "$b1" ] && ok "fork answers like its source" || not_ok "fork answer differs"
[ "$(field cached_tokens)" = "$c1" ] && ok "fork resumed from shared segments" || not_ok "fork cached $(field cached_tokens)"
[ "$(nseg)" = "$((n + 1))" ] && ok "identical turns share one segment" || not_ok "segments $(nseg), want $((n + 1))"

# ---- damage: each detected once, answered the same, repaired
damage() { # what, command
    what=$1; shift
    run "$KVCHAT" sessions fork a d-$what; expect_rc 0
    # the answer an undamaged twin gives
    run sh -c "$R -s d-$what 'After damage' < /dev/null"; want=$(field answer)
    run "$KVCHAT" sessions fork a d2-$what
    "$@"
    run sh -c "$R -s d2-$what 'After damage' < /dev/null"
    expect_rc 0
    [ "$(grep -c 'kvchat:.*KV segment' "$T/err")" = 1 ] && ok "$what: reported once" || { not_ok "$what: not reported once"; cat "$T/err"; }
    [ "$(field answer)" = "$want" ] && ok "$what: answered as undamaged" || not_ok "$what: answer differs"
    run sh -c "$R -s d2-$what 'And again' < /dev/null"
    [ ! -s "$T/err" ] && ok "$what: repaired" || { not_ok "$what: still reported"; cat "$T/err"; }
}
victim() { # the largest segment of session a's chain that is not the system prompt's
    python3 - "$H" <<'PY'
import sqlite3, sys, os
h = sys.argv[1]
db = sqlite3.connect(h + "/kvchat.db")
sid = db.execute("select id from sessions where name='a'").fetchone()[0]
seg = db.execute("select segment from chain where session_id=? order by idx limit 1 offset 1", (sid,)).fetchone()[0].hex()
print(os.path.join(h, "kv", seg[:2], seg + ".kvseg"))
PY
}
v=$(victim)
damage truncated sh -c "truncate -s 1000 '$v'"
v=$(victim)
damage flipped python3 -c "
f = open('$v', 'r+b'); f.seek(-7, 2); b = f.read(1); f.seek(-7, 2); f.write(bytes([b[0] ^ 1])); f.close()"
v=$(victim)
damage deleted rm -f "$v"

# another model under the same file name: nothing is reused, nothing is wrong
cp "$M" "$T/m.orig"
"$MKMODEL" "$M" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 --seed 9 >/dev/null
run sh -c "$R -s a 'Other model' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && ok "another model reuses no KV" || not_ok "another model cached $(field cached_tokens)"
grep -q 'KV segment' "$T/err" && ok "the mismatch is reported" || not_ok "mismatch not reported"
run sh -c "$R -s fresh 'Other model' < /dev/null"
cp "$M" "$T/m.other"; cp "$T/m.orig" "$M"

# ---- one writer per session
$KVCHAT run -m "$M" -t 2 --temp 0.9 --seed 3 -n 100000 -c 4096 -s busy 'go on' < /dev/null > /dev/null 2>&1 &
pid=$!
for i in 1 2 3 4 5 6 7 8 9 10; do [ -s "$H/locks/"* ] 2>/dev/null && break; sleep 0.3; done
sleep 1
run sh -c "$R -s busy 'me too' < /dev/null"
expect_rc 3; expect_out_empty; expect_err "kvchat: session 'busy' is in use by pid $pid"
kill -9 $pid; wait $pid 2>/dev/null

# ---- kill -9 at random moments: the session always opens with its completed turns
run sh -c "$R -s k 'start' < /dev/null"
i=0
while [ $i -lt 50 ]; do
    turns=$("$KVCHAT" sessions list --json | jq '.[] | select(.name == "k") | .turns')
    $KVCHAT run -m "$M" -t 2 -c 4096 --temp 0.9 --seed $i -n 16 -s k "turn $i" < /dev/null > /dev/null 2>&1 &
    p=$!
    sleep "0.$(( (i * 37) % 10 ))$(( (i * 53) % 10 ))"
    kill -9 $p 2>/dev/null; wait $p 2>/dev/null
    after=$("$KVCHAT" sessions list --json | jq '.[] | select(.name == "k") | .turns')
    if [ -z "$after" ] || [ "$after" -lt "$turns" ]; then not_ok "kill -9 #$i lost turns ($turns -> $after)"; fi
    i=$((i + 1))
done
ok "50 kill -9s: no completed turn lost"
run sh -c "$R -c 4096 -s k 'after the kills' < /dev/null"
expect_rc 0
run "$KVCHAT" sessions gc
expect_rc 0
run sh -c "$R -c 4096 -s k 'after gc' < /dev/null"
expect_rc 0
[ ! -s "$T/err" ] && ok "session k intact after gc" || { not_ok "session k after gc"; cat "$T/err"; }
# ---- --cache-max: the store is trimmed to the sessions' latest segments
heads=$(python3 -c "import sqlite3; print(sqlite3.connect('$H/kvchat.db').execute('select count(distinct segment) from chain c where idx = (select max(idx) from chain where session_id = c.session_id)').fetchone()[0])")
run sh -c "$R -s a --cache-max 1 'Trim it' < /dev/null"
expect_rc 0
[ "$(nseg)" -le "$((heads + 1))" ] && ok "--cache-max 1 keeps only heads ($(nseg) files)" || not_ok "$(nseg) files after --cache-max 1 (heads $heads)"
run sh -c "$R -s a 'After trim' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" -gt 0 ] && ok "evicted history recomputed, the head restored" || not_ok "after trim cached $(field cached_tokens)"
run sh -c "$R -s a --cache-max lots 'x' < /dev/null"
expect_rc 1; expect_err "expected a size like 4G"
finish
