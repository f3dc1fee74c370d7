#!/bin/sh
# t0023: what kvchat keeps is private, and a user can keep nothing (issue
# 29) - the store's files are 0600 and its folders 0700 whatever the umask
# (and an older store's are tightened when it is opened); --private (run and
# chat), `private = true` in the config file and /set private on read the
# KV blocks but write nothing: the store's files, modes, sizes, bytes and the
# database's rows are the same after; a private chat opens no session;
# `sessions forget` removes every block and token id no named session
# holds, and the named ones still resume.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" --seed 3 || exit 1
O="-m $M -t 1 --temp 0 -n 4"
H=$KVCHAT_HOME

expect_eq() { [ "$2" = "$3" ] && ok "$1: $2" || not_ok "$1: got '$2', wanted '$3'"; }
# every file and folder under a directory whose mode is not 0600 / 0700 (a
# model added as a hard link is the user's file: its mode is theirs)
loose() { find "$1" \( -type f -links 1 ! -perm 600 \) -o \( -type d ! -perm 700 \) | sed "s|^$1|.|"; }
# the store as it is: every path with its type, mode, size and bytes, and the
# database's rows (dumped from a copy, so that reading it changes nothing)
snap() {
    (cd "$H" && find . -printf '%y %m %s %p\n' | grep -v '^d .* \.$' | sort)
    (cd "$H" && find . -type f ! -name 'kvchat.db*' -exec md5sum {} + | sort -k 2)
    rm -rf "$T/copy"; mkdir "$T/copy"; cp "$H"/kvchat.db* "$T/copy/"
    python3 -c "import sqlite3, sys; print('\n'.join(sqlite3.connect(sys.argv[1]).iterdump()))" "$T/copy/kvchat.db"
}

# ---- modes, whatever the umask
chmod 644 "$M"
(umask 000
 printf 'Hello there.\n' | $KVCHAT $O chat trip >/dev/null 2>&1
 $KVCHAT run $O "a run without a session" >/dev/null 2>&1
 $KVCHAT models add --name tiny "$M" >/dev/null 2>&1)
[ -s "$H/kvchat.db" ] && [ -n "$(find "$H/kv" -name '*.kvblk')" ] && ok "a store with blocks was made" || not_ok "no store"
[ -z "$(loose "$H")" ] && ok "umask 000: the store's files are 0600, its folders 0700" ||
    not_ok "umask 000: loose modes: $(loose "$H" | tr '\n' ' ')"
ls "$H/models/"*.meta >/dev/null 2>&1 && ok "models add made a meta file (0600 too)" || not_ok "no meta file"
expect_eq "the added model's own file keeps its mode" "$(stat -c %a "$M")" 644
# an older store (made with 0644 files in 0755 folders) is tightened when opened
chmod -R go+rX "$H"
[ -n "$(loose "$H")" ] && ok "loosened by hand" || not_ok "chmod did nothing"
run "$KVCHAT" sessions
expect_rc 0
[ -z "$(loose "$H")" ] && ok "opening it tightened every file and folder" || not_ok "still loose: $(loose "$H" | tr '\n' ' ')"

# ---- private: nothing is written
printf 'Hello there.\n' | $KVCHAT $O >/dev/null 2>&1 # the blocks a private run shares
snap >"$T/before"
run $KVCHAT run $O --private "Hello there. my PIN is 4921"
expect_rc 0
run sh -c "$KVCHAT run $O --private --json 'Hello there.' </dev/null"
expect_rc 0
[ "$(jq .cached_tokens "$T/out")" -gt 0 ] && ok "a private run reads the blocks there are" || not_ok "cached $(jq .cached_tokens "$T/out")"
run sh -c "printf 'my PIN is 4921\nand more\n' | $KVCHAT $O --private"
expect_rc 0
mkdir -p "$XDG_CONFIG_HOME/kvchat"
echo "private = true" >"$XDG_CONFIG_HOME/kvchat/config"
run sh -c "printf 'my PIN is 4921\n' | $KVCHAT $O"
expect_rc 0
run sh -c "$KVCHAT run $O 'my PIN is 4921' </dev/null"
expect_rc 0
run sh -c "printf 'hi\n' | $KVCHAT $O chat trip"
expect_rc 1
expect_err "a private chat (--private, or 'private = true' in the config file) saves nothing, so it opens no session: --no-private opens one"
run sh -c "$KVCHAT run $O -s trip 'x' </dev/null"
expect_rc 1
rm "$XDG_CONFIG_HOME/kvchat/config"
# /set private on: what follows writes nothing; /save is refused meanwhile
run sh -c "printf '/set private on\nmy PIN is 4921\n/save pin\n' | $KVCHAT $O"
expect_rc 0
expect_err "private on: from now on nothing is written"
expect_err "/save would save a session, and this chat is private"
snap >"$T/after"
if cmp -s "$T/before" "$T/after"; then
    ok "private runs and chats: the store is as it was (files, modes, sizes, bytes, rows)"
else
    not_ok "a private run or chat changed the store"
    diff "$T/before" "$T/after" | head -20 | sed 's/^/  /'
fi
# and a chat that turns private off again stores its blocks
n0=$(find "$H/kv" -name '*.kvblk' | wc -l)
run sh -c "printf '/set private on\nsomething new entirely\n/set private off\nand again\n' | $KVCHAT $O"
expect_rc 0
expect_err "private off: this chat's KV blocks are stored from the next answer on"
[ "$(find "$H/kv" -name '*.kvblk' | wc -l)" -gt "$n0" ] && ok "/set private off: blocks are stored again" ||
    not_ok "no blocks after private off"
# no store yet: a private run makes none
run sh -c "KVCHAT_HOME=$T/fresh $KVCHAT run $O --private hi </dev/null"
expect_rc 0
[ ! -e "$T/fresh" ] && ok "a private run on a fresh home creates nothing" || not_ok "it made $(ls -A "$T/fresh")"

# ---- sessions forget
want=$("$KVCHAT" sessions export trip | jq -c .messages)
named=$(python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select count(distinct block) from session_blocks').fetchone()[0])" "$H/kvchat.db")
all=$(find "$H/kv" -name '*.kvblk' | wc -l)
[ "$all" -gt "$named" ] && ok "blocks of unnamed chats and runs are kept ($all files, $named of trip)" || not_ok "$all blocks, $named named"
run "$KVCHAT" sessions forget
expect_rc 0
expect_err "^forget: removed $((all - named)) block files ([0-9.]* [KM]*i*B) holding [1-9][0-9]* token ids; the database is .* smaller; kept $named block"
expect_eq "block files left: trip's" "$(find "$H/kv" -name '*.kvblk' | wc -l)" "$named"
rows=$(python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(c.execute('select count(*) from blocks').fetchone()[0], c.execute('select count(*) from blocks where id not in (select block from session_blocks)').fetchone()[0])" "$H/kvchat.db")
expect_eq "index rows (all, not a named session's)" "$rows" "$named 0"
[ "$("$KVCHAT" sessions export trip | jq -c .messages)" = "$want" ] && ok "trip is whole" || not_ok "trip changed"
run "$KVCHAT" sessions forget
expect_rc 0
expect_err "^forget: removed 0 block files (0 B) holding 0 token ids"
run sh -c "$KVCHAT run $O --json -s trip 'And then?' </dev/null"
expect_rc 0
[ "$(jq .cached_tokens "$T/out")" -gt 0 ] && ok "trip still resumes from its blocks" || not_ok "cached $(jq .cached_tokens "$T/out")"
finish
