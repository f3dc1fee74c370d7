#!/bin/sh
# t0003: `kvchat sessions` over a store made by tests/mksession: list, show,
# export, rename, fork (segments shared, not copied), rm, gc, the write lock.
. "$TOP/tests/cli/lib.sh"
: "${MKSESSION:?}"
H=$KVCHAT_HOME
kvbytes() { find "$H/kv" -name '*.kvseg' -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
nseg() { find "$H/kv" -name '*.kvseg' | wc -l; }

run "$KVCHAT" sessions list
expect_rc 0; expect_out_empty; expect_err 'no sessions yet'
run "$KVCHAT" sessions list --json
expect_rc 0
[ "$(cat "$T/out")" = "[]" ] && ok "no sessions: an empty JSON array" || not_ok "empty list as JSON: $(cat "$T/out")"

"$MKSESSION" "$H" one --system "You are terse." --turns 2
"$MKSESSION" "$H" two --system "You are terse." --turns 1
# the shared system prompt is one file: 1 + 2 + 1 segments
[ "$(nseg)" = 4 ] && ok "shared system segment stored once" || not_ok "segments: $(nseg)"

run "$KVCHAT" sessions list
expect_rc 0
expect_out '^NAME  *MODEL  *TURNS  *TOKENS  *KV  *UPDATED'
expect_out '^one  *test.gguf  *2  *108 '
expect_out '^two  *test.gguf  *1  *61 '
run "$KVCHAT" sessions list --json
expect_rc 0
[ "$(jq length "$T/out")" = 2 ] && ok "two sessions in JSON" || not_ok "json list"
[ "$(jq -r '.[] | select(.name == "one") | .turns' "$T/out")" = 2 ] && ok "turns" || not_ok "turns"
# `kvchat sessions` alone and `sessions ls` list too, with the same options
run "$KVCHAT" sessions
expect_rc 0; expect_out '^one  *test.gguf  *2  *108 '; expect_out '^two  *test.gguf  *1  *61 '
run "$KVCHAT" sessions ls
expect_rc 0; expect_out '^one  *test.gguf  *2  *108 '
cp "$T/out" "$T/ls.out"
run "$KVCHAT" sessions list
cmp -s "$T/out" "$T/ls.out" && ok "sessions ls = sessions list" || not_ok "ls and list differ"
run "$KVCHAT" sessions --json
expect_rc 0
[ "$(jq -r '[.[].name] | sort | join(" ")' "$T/out")" = "one two" ] && ok "sessions --json" || not_ok "sessions --json"
run "$KVCHAT" sessions ls --json
[ "$(jq length "$T/out")" = 2 ] && ok "sessions ls --json" || not_ok "sessions ls --json"
run "$KVCHAT" sessions --bogus
expect_rc 1; expect_err "unknown option '--bogus'"

run "$KVCHAT" sessions show one
expect_rc 0; expect_out '^system: You are terse.'; expect_out '^user: question 2 of one'
run "$KVCHAT" sessions export one
expect_rc 0
[ "$(jq -r '.messages[2].content' "$T/out")" = 'answer 1: "quoted"
second line' ] && ok "export keeps quotes and newlines" || not_ok "export content"
[ "$(jq -r '.messages | length' "$T/out")" = 5 ] && ok "5 messages" || not_ok "messages"
run "$KVCHAT" sessions export two --format markdown
expect_rc 0; expect_out '^# two'; expect_out '^## Assistant'
run "$KVCHAT" sessions export two --format yaml
expect_rc 1; expect_err 'format must be json or markdown'

# fork shares every segment: no new bytes on disk
before=$(kvbytes)
run "$KVCHAT" sessions fork one one-b
expect_rc 0
[ "$(kvbytes)" = "$before" ] && ok "fork adds no KV bytes" || not_ok "fork grew kv/ from $before to $(kvbytes)"
run "$KVCHAT" sessions fork one one-c --at 1
expect_rc 0
run "$KVCHAT" sessions show one-c
expect_out 'question 1 of one'
grep -q 'question 2' "$T/out" && not_ok "--at 1 kept turn 2" || ok "--at 1 keeps one exchange"
run "$KVCHAT" sessions fork one two
expect_rc 3; expect_err "kvchat: a session named 'two' already exists"
run "$KVCHAT" sessions fork nope x
expect_rc 3; expect_err "kvchat: no session 'nope'"

run "$KVCHAT" sessions rename two three
expect_rc 0
run "$KVCHAT" sessions show two
expect_rc 3; expect_out_empty; expect_err "kvchat: no session 'two'"

# gc keeps what any session uses
run "$KVCHAT" sessions gc
expect_rc 0; expect_err 'gc: removed 0 segment files'
# rm one and its forks: their turn segments become garbage; three keeps the system one
run "$KVCHAT" sessions rm one one-b one-c
expect_rc 0
run "$KVCHAT" sessions gc
expect_rc 0; expect_err 'gc: removed 2 segment files'
[ "$(nseg)" = 2 ] && ok "two segments left for 'three'" || not_ok "segments left: $(nseg)"
run "$KVCHAT" sessions rm one
expect_rc 3; expect_err "no session 'one'"

# --cache-max evicts what is not a session's head
run "$KVCHAT" sessions gc --cache-max 0
expect_rc 0; expect_err 'gc: removed 1 segment file,'
run "$KVCHAT" sessions gc --cache-max lots
expect_rc 1; expect_err "cache-max takes a size"

# a session open elsewhere cannot be removed or renamed
"$MKSESSION" "$H" busy --turns 1
busy_id=$(python3 -c "import sqlite3; print(sqlite3.connect('$H/kvchat.db').execute(\"select id from sessions where name='busy'\").fetchone()[0])")
flock "$H/locks/$busy_id.lock" sh -c "echo \$\$ > '$H/locks/$busy_id.lock'; sleep 3" &
holder=$!
sleep 0.5
run "$KVCHAT" sessions rm busy
expect_rc 3; expect_err "kvchat: session 'busy' is in use by pid [0-9]"
wait $holder
run "$KVCHAT" sessions rm busy
expect_rc 0

run "$KVCHAT" sessions frob
expect_rc 1; expect_err "unknown subcommand 'frob'"
run "$KVCHAT" sessions show
expect_rc 1; expect_err 'wrong number of arguments'
run "$KVCHAT" sessions --help
expect_rc 0; expect_out 'usage: kvchat sessions \[list\]'

finish
