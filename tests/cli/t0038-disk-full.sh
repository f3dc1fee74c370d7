#!/bin/sh
# t0038: a full disk (issue 29: "disk I/O error" for a full disk without
# the reserve). tests/fault-full.so, preloaded into kvchat, makes every
# write that would grow a file of the store fail with ENOSPC while a flag
# file exists, as a full file system does; SQLite's writes go through it
# too (its WAL index then fails as "disk I/O error", SQLITE_IOERR).
# - The disk fills during a piped chat, between its turns, with no reserve:
#   the answer is printed, then "cannot save the conversation: ... the disk
#   is full (... no space left on device)", exit 3; the session keeps what
#   it had, and answers as --no-cache does once there is room.
# - The same with the reserve: given up, KV blocks evicted, the turn saved,
#   said once; the reserve is made again when there is room.
# - A command started on a full disk without the reserve: "cannot be
#   opened: the disk is full" (exit 3), also when statvfs reports free
#   blocks (the errno of the writes tells); an unnamed run still answers.
# - A new session's first answer on a full disk (run -s, chat NAME): said,
#   no session half made.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" || exit 1
SO=$TOP/tests/fault-full.so
[ -f "$SO" ] || { not_ok "$SO is not built (make check-cli builds it)"; finish; exit 1; }
# the sanitizers' runtime must come first among preloaded libraries
asan=$(ldd "$KVCHAT" 2>/dev/null | awk '/libasan/ { print $3 }')
FULL=$T/full # the disk is full while this file exists
mkdir -p "$KVCHAT_HOME"
K="env LD_PRELOAD=${asan:+$asan:}$SO KVCHAT_FAULT_DIR=$KVCHAT_HOME KVCHAT_FAULT_FULL=$FULL $KVCHAT"
R="-m $M -t 1 --temp 0 -n 6"
TO="timeout -k 5 120"
msgs() { "$KVCHAT" sessions export "$1" | jq -c '[.messages[] | [.role, .content]]'; }
no_bare_io_error() {
    grep -q "disk I/O error" "$T/err" && ! grep -q "the disk is full" "$T/err" &&
        not_ok "$1: SQLite's bare 'disk I/O error'" || ok "$1: not a bare 'disk I/O error'"
}

# the injector works: with the flag, a write into the store's folder fails
run $TO $K run $R -s s "one" </dev/null
expect_rc 0
[ -f "$KVCHAT_HOME/reserve" ] && ok "the store keeps a reserve" || not_ok "no reserve"
touch "$FULL"
run $TO env KVCHAT_FAULT_FREES=1 $K run $R -s probe "x" </dev/null
[ ! -e "$FULL" ] && ok "probe: the reserve was given up (room made)" || not_ok "probe: no room was made"
rm -f "$FULL"
[ "$rc" = 0 ] && ok "with the reserve, a full disk at start still answers and saves" ||
    { not_ok "with the reserve: exit $rc"; sed 's/^/  /' "$T/err"; }
expect_err "the disk of '.*' is full: .* evicted to go on"
[ "$(msgs probe | jq length)" = 2 ] && ok "probe saved" || not_ok "probe: $(msgs probe)"

# chat_full NAME MODE: a piped chat in session NAME answers "one", then the
# disk fills (MODE noreserve: the reserve removed first; reserve: the store
# may give it up) and "two" is sent
chat_full() {
    rm -f "$T/fifo"
    : >"$T/chat.out" # there before the chat's own redirection opens it (after the FIFO's)
    mkfifo "$T/fifo"
    frees=
    [ "$2" = reserve ] && frees=KVCHAT_FAULT_FREES=1
    env $frees $K chat $R "$1" <"$T/fifo" >"$T/chat.out" 2>"$T/err" &
    pid=$!
    exec 7>"$T/fifo"
    echo "one" >&7
    i=0
    while [ "$(wc -l <"$T/chat.out")" -lt 1 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    [ "$(wc -l <"$T/chat.out")" -ge 1 ] && ok "$1: the first answer came" || not_ok "$1: no first answer"
    sleep 0.3 # (saved after the answer is printed)
    [ "$2" = noreserve ] && rm -f "$KVCHAT_HOME/reserve"
    touch "$FULL"
    echo "two" >&7
    exec 7>&-
    wait $pid
    rc=$?
    echo "\$ chat $1 ($2) -> $rc"
    [ "$(wc -l <"$T/chat.out")" = 2 ] && ok "$1: the second answer was printed" ||
        not_ok "$1: $(cat "$T/chat.out")"
}

# ---- the disk fills during a chat, no reserve: said, exit 3, nothing saved lost
chat_full c1 noreserve
[ "$rc" = 3 ] && ok "c1: exit 3 (the exchange could not be saved)" || not_ok "c1: exit $rc"
expect_err "kvchat: cannot save the conversation: database '$KVCHAT_HOME/kvchat.db': the disk is full"
expect_err "no space left on device); free some space"
no_bare_io_error c1
rm -f "$FULL"
got=$(msgs c1)
run $TO "$KVCHAT" run $R --json --no-cache "one" </dev/null
[ "$(echo "$got" | jq -c '[.[] | .[0]]')" = '["user","assistant"]' ] && [ "$(echo "$got" | jq -r '.[0][1]')" = one ] &&
    [ "$(echo "$got" | jq -r '.[1][1]')" = "$(jq -r .answer "$T/out")" ] &&
    ok "c1: the first exchange is saved as it was, the second not at all" || not_ok "c1: $got"
run $TO "$KVCHAT" run $R --json --no-cache -s c1 "three" </dev/null
want=$(jq -r .answer "$T/out")
run $TO "$KVCHAT" run $R --json -s c1 "three" </dev/null
expect_rc 0
[ "$(jq -r .answer "$T/out")" = "$want" ] && ok "c1: with room again it answers as --no-cache does" ||
    not_ok "c1: '$(jq -r .answer "$T/out")' vs '$want'"
[ -f "$KVCHAT_HOME/reserve" ] && ok "the reserve is made again when there is room" || not_ok "no reserve again"
[ "$(msgs s | jq length)" = 2 ] && ok "session s untouched" || not_ok "s: $(msgs s)"

# ---- the same with the reserve: given up, blocks evicted, the turn saved
chat_full c2 reserve
[ "$rc" = 0 ] && ok "c2: exit 0" || not_ok "c2: exit $rc"
expect_err "kvchat: the disk of '$KVCHAT_HOME' is full: .* evicted to go on; free space there"
[ ! -e "$FULL" ] && ok "c2: the reserve was given up (room made)" || not_ok "c2: no room was made"
rm -f "$FULL"
[ "$(msgs c2 | jq -c '[.[] | .[1]] | .[0], .[2]')" = '"one"
"two"' ] && ok "c2: both exchanges saved" || not_ok "c2: $(msgs c2)"

# ---- started on a full disk with no reserve: cannot be opened, said so
"$KVCHAT" sessions >/dev/null # (the reserve is back)
rm -f "$KVCHAT_HOME/reserve"
before=$(msgs c1)
touch "$FULL"
run $TO $K run $R -s c1 "four" </dev/null
expect_rc 3
expect_err "kvchat: database '$KVCHAT_HOME/kvchat.db' cannot be opened: the disk is full (no space left on device); free some space"
no_bare_io_error "run -s at start"
# a file system whose statvfs still reports free blocks: the writes' ENOSPC tells
run $TO env KVCHAT_FAULT_STATVFS=0 $K run $R -s c1 "four" </dev/null
expect_rc 3
expect_err "the disk is full"
no_bare_io_error "run -s at start, statvfs reporting room"
run $TO $K sessions
expect_rc 3
expect_err "the disk is full"
# an unnamed run answers all the same, without the KV cache on disk
run $TO $K run $R "four" </dev/null
expect_rc 0
[ -s "$T/out" ] && ok "an unnamed run still answers" || not_ok "no answer"
expect_err "the KV cache on disk is off for this run"
# a new session's first answer on a full disk: said, no session
run $TO $K run $R -s fresh "five" </dev/null
[ "$rc" = 3 ] && ok "run -s NEW on a full disk: exit 3" || not_ok "run -s NEW: exit $rc"
expect_err "the disk is full"
run sh -c "printf 'five\n' | $TO $K chat $R fresh2"
[ "$rc" = 3 ] && ok "chat NEW on a full disk: exit 3" || not_ok "chat NEW: exit $rc"
expect_err "the disk is full"
rm -f "$FULL"
[ "$(msgs c1)" = "$before" ] && ok "c1 unchanged by the failed commands" || not_ok "c1: $(msgs c1)"
run "$KVCHAT" sessions --json
[ "$(jq -r '[.[].name] | sort | join(" ")' "$T/out")" = "c1 c2 probe s" ] && ok "no session half made" ||
    not_ok "sessions: $(jq -r '[.[].name] | sort | join(" ")' "$T/out")"
finish
