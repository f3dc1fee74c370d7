#!/bin/sh
# t0035: the smaller items of issue 29's fault run. -n 0 is an empty answer
# (as llama.cpp's), not "unlimited"; `sessions search` refuses a query of
# too many words (each a scan of the index) and a malformed --raw query
# ('"x', '*') with exit 1 as a usage error, not 3 as a database failure; a
# session whose lock file holds no pid yet is "in use by another kvchat
# process", not "by pid 0"; a deleted index is said, not a silent empty
# list; a model store that cannot be read is not "no model configured".
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
R="timeout -k 5 60 $KVCHAT run -m $M -t 2 --temp 0"

run sh -c "$R -n 0 --json -s s 'hello' < /dev/null"
expect_rc 0
[ "$(jq -r .generated_tokens "$T/out")" = 0 ] && [ "$(jq -r .answer "$T/out")" = "" ] && ok "-n 0: an empty answer" ||
    not_ok "-n 0: $(cat "$T/out")"
run sh -c "$R -n 3 --json -s s 'and now' < /dev/null"
expect_rc 0

for q in '"x' '*'; do
    run "$KVCHAT" sessions search --raw "$q"
    expect_rc 1
    expect_err "bad search query '"
done
run "$KVCHAT" sessions search $(seq 1 65)
expect_rc 1
expect_err "bad search query: it has 65 words"
run "$KVCHAT" sessions search hello
expect_rc 0

# a lock held by a process that has not written its pid
id=$(python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT id FROM sessions WHERE name = 's'\").fetchone()[0])" "$KVCHAT_HOME/kvchat.db")
: > "$KVCHAT_HOME/locks/$id.lock"
flock "$KVCHAT_HOME/locks/$id.lock" sleep 20 &
holder=$!
sleep 1
run sh -c "$R -n 2 -s s 'me too' < /dev/null"
expect_rc 3
expect_err "session 's' is in use by another kvchat process"
kill $holder; wait $holder 2>/dev/null

# the index deleted: said once, with what is left
rm -f "$KVCHAT_HOME"/kvchat.db*
run "$KVCHAT" sessions
expect_rc 0
expect_err "the session index '$KVCHAT_HOME/kvchat.db' was missing, so a new, empty one was made"
run "$KVCHAT" sessions
grep -q missing "$T/err" && not_ok "said twice" || ok "said once"

# a model store that cannot be read (models/ is a file)
H2=$T/home2; mkdir -p "$H2"; echo x > "$H2/models"
run sh -c "KVCHAT_HOME=$H2 timeout -k 5 20 $KVCHAT run hi < /dev/null"
expect_rc 2
expect_err "no default model, and the model store cannot be read: cannot read '$H2/models'"
finish
