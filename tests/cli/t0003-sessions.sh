#!/bin/sh
# t0003: `kvchat sessions` over a store made by tests/mksession (one token
# a byte, KV blocks of 64 positions): list, show, export, rename, fork
# (blocks shared, not copied), rm, gc, eviction, the write lock.
. "$TOP/tests/cli/lib.sh"
: "${MKSESSION:?}"
H=$KVCHAT_HOME
kvbytes() { find "$H/kv" -name '*.kvblk' -printf '%s\n' | awk '{s += $1} END {print s + 0}'; }
nblk() { find "$H/kv" -name '*.kvblk' | wc -l; }

run "$KVCHAT" sessions list
expect_rc 0; expect_out_empty; expect_err 'no sessions yet'
run "$KVCHAT" sessions list --json
expect_rc 0
[ "$(cat "$T/out")" = "[]" ] && ok "no sessions: an empty JSON array" || not_ok "empty list as JSON: $(cat "$T/out")"

# a system prompt of 150 tokens fills two blocks; each exchange is 47 tokens
sys=$(printf 'You are terse. %.0s' 1 2 3 4 5 6 7 8 9 10)
"$MKSESSION" "$H" one --system "$sys" --turns 2
"$MKSESSION" "$H" two --system "$sys" --turns 1
# one: 244 tokens, 4 blocks; two: 197 tokens, 4 blocks; the two blocks of
# the system prompt are the same files
[ "$(nblk)" = 6 ] && ok "the shared system prompt's blocks stored once" || not_ok "blocks: $(nblk)"

run "$KVCHAT" sessions list
expect_rc 0
expect_out '^NAME  *MODEL  *TURNS  *TOKENS  *KV  *UPDATED'
expect_out '^one  *test.gguf  *2  *244 '
expect_out '^two  *test.gguf  *1  *197 '
run "$KVCHAT" sessions list --json
expect_rc 0
[ "$(jq length "$T/out")" = 2 ] && ok "two sessions in JSON" || not_ok "json list"
[ "$(jq -r '.[] | select(.name == "one") | .turns' "$T/out")" = 2 ] && ok "turns" || not_ok "turns"
# `kvchat sessions` alone and `sessions ls` list too, with the same options
run "$KVCHAT" sessions
expect_rc 0; expect_out '^one  *test.gguf  *2  *244 '; expect_out '^two  *test.gguf  *1  *197 '
run "$KVCHAT" sessions ls
expect_rc 0; expect_out '^one  *test.gguf  *2  *244 '
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

# fork shares every block: no new bytes on disk
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
expect_rc 0; expect_err 'gc: removed 0 block files'
# rm one and its forks: their own two blocks become garbage; three keeps the system's
run "$KVCHAT" sessions rm one one-b one-c
expect_rc 0
run "$KVCHAT" sessions gc
expect_rc 0; expect_err 'gc: removed 2 block files.*; 4 blocks .* kept'
[ "$(nblk)" = 4 ] && ok "four blocks left for 'three'" || not_ok "blocks left: $(nblk)"
run "$KVCHAT" sessions rm one
expect_rc 3; expect_err "no session 'one'"
run "$KVCHAT" sessions show three
expect_rc 0; expect_out 'question 1 of two'

# --cache-max evicts the least recently used until the store fits
one_block=$(find "$H/kv" -name '*.kvblk' -printf '%s\n' | sort -n | tail -1)
run "$KVCHAT" sessions gc --cache-max $((3 * one_block))
expect_rc 0; expect_err 'gc: removed 1 block file,'
run "$KVCHAT" sessions gc --cache-max 0
expect_rc 0; expect_err 'gc: removed 3 block files,'
[ "$(nblk)" = 0 ] && ok "--cache-max 0 empties the store" || not_ok "blocks left: $(nblk)"
run "$KVCHAT" sessions show three
expect_rc 0; expect_out 'question 1 of two'
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
