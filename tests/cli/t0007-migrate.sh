#!/bin/sh
# t0007: a session index written by the first release (schema 1, KV as one
# segment file per message; tests/data/sessions/v1.db, made by
# tests/data/sessions/regen-v1.sh) opens: its sessions and messages are
# kept, the upgrade is noted once, the old segment files go, and each
# session's next turn (its history computed once more) answers as that
# release answered it, greedy and sampled (the sampler state it saved).
# A store at schema 5 migrates to 6 (snapshots) keeping its blocks.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
H=$KVCHAT_HOME
mkdir -p "$H/kv/3f"
cp "$TOP/tests/data/sessions/v1.db" "$H/kvchat.db"
echo junk > "$H/kv/3f/3f00.kvseg"
R="$KVCHAT run -m $M -t 2 -n 6 --json"

run "$KVCHAT" sessions list --json
expect_rc 0
expect_err "note: the session index '.*kvchat.db' was upgraded"
[ "$(jq length "$T/out")" = 2 ] && ok "both sessions kept" || not_ok "sessions: $(cat "$T/out")"
[ "$(jq '[.[] | .turns] | add' "$T/out")" = 4 ] && ok "all four turns kept" || not_ok "turns"
[ ! -e "$H/kv/3f/3f00.kvseg" ] && ok "the old segment files are gone" || not_ok "segment file left"
run "$KVCHAT" sessions show sampled
expect_rc 0; expect_out '^system: You are terse.'; expect_out '^user: second question'
run "$KVCHAT" sessions list
expect_rc 0
grep -q 'upgraded' "$T/err" && not_ok "the upgrade noted twice" || ok "the upgrade is noted once"

run sh -c "$R --temp 0 -s greedy 'third question' < /dev/null"
expect_rc 0
[ "$(field cached_tokens)" = 0 ] && ok "the history is computed once more" || not_ok "cached from nowhere"
[ "$(field answer)" = "$(cat "$TOP/tests/data/sessions/v1-greedy-turn3.txt")" ] && ok "greedy turn 3 as the first release answered it" ||
    not_ok "greedy turn 3: '$(field answer)'"
run sh -c "$R --temp 0.8 -s sampled 'third question' < /dev/null"
expect_rc 0
[ "$(field answer)" = "$(cat "$TOP/tests/data/sessions/v1-sampled-turn3.txt")" ] && ok "sampled turn 3 as the first release answered it" ||
    not_ok "sampled turn 3: '$(field answer)'"
# and from now on the blocks are there
run sh -c "$R --temp 0 -s greedy 'fourth question' < /dev/null"
expect_rc 0
[ "$(field prefilled_tokens)" -lt 20 ] && ok "turn 4 computes only its message" || not_ok "turn 4 prefilled $(field prefilled_tokens)"
# a store at schema 5 (before recurrent-state snapshots) gets the snapshot
# table; its blocks stay and resume the next turn
python3 -c "import sqlite3; c=sqlite3.connect('$H/kvchat.db'); c.executescript('DROP TABLE snapshots; ALTER TABLE block_totals DROP COLUMN n_snapshots; PRAGMA user_version = 5;'); c.commit()"
run sh -c "$R --temp 0 -s greedy 'fifth question' < /dev/null"
expect_rc 0
[ "$(field prefilled_tokens)" -lt 20 ] && [ "$(field cached_tokens)" -gt 20 ] &&
    ok "schema 5 -> 6: the blocks resume turn 5" || not_ok "turn 5 prefilled $(field prefilled_tokens)"
[ "$(python3 -c "import sqlite3; c=sqlite3.connect('$H/kvchat.db'); print(c.execute('PRAGMA user_version').fetchone()[0], c.execute('SELECT count(*) FROM snapshots').fetchone()[0])")" = "6 0" ] &&
    ok "at schema 6, no snapshot for an attention-only model" || not_ok "schema after the migration"
finish
