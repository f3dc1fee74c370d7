#!/bin/sh
# t0507: text from the store, a model or a server never drives the terminal
# (issue 29) - on a pseudo-terminal `sessions show`, `sessions export
# --format markdown`, `sessions list`, `sessions search` and the REPL's
# /sessions, /load and prompt show a stored prompt's and an old session
# name's ESC ] 0;title BEL, ESC [2J, C1 CSI (U+009B) and bidi override as
# U+FFFD, the same one sanitizer `run` uses; piped, the bytes come as they
# are. New names follow a Unicode-aware rule (C0/C1, NEL, NBSP and other
# spaces, zero-width and bidi characters refused, exit 1 for run -s); an
# old session with such a name still opens, and can be renamed and removed.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"
EVIL=$(printf 'title\033]0;pwned\007 clear\033[2J csi\302\2332J rtl\342\200\256x end')
printf '%s\n' "$EVIL" | $K --temp 0 -n 2 chat esc >/dev/null 2>&1
# an earlier release's name with escapes in it
python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"UPDATE sessions SET name = 'old\x1b[2Jname' WHERE name = 'esc'\"); db.commit()" "$KVCHAT_HOME/kvchat.db"
OLD=$(printf 'old\033[2Jname')
"$KVCHAT" sessions list --json | jq -e --arg n "$OLD" 'map(.name) | index($n) != null' >/dev/null &&
    ok "the session is named with an ESC now" || not_ok "no such name: $("$KVCHAT" sessions list --json)"

# raw NAME: no byte of the escapes in $T/NAME.raw, and U+FFFD in their place
clean() {
    if python3 - "$T/$1.raw" "$2" <<'PYEOF'
import sys
raw = open(sys.argv[1], "rb").read()
bad = [b"\x1b]0;", b"\x1b[2J", b"\xc2\x9b", b"\xe2\x80\xae", b"\x07"]
found = [b for b in bad if b in raw]
want = int(sys.argv[2])
if found:
    print("found", found, file=sys.stderr)
sys.exit(1 if found or raw.count("\ufffd".encode()) < want else 0)
PYEOF
    then ok "$1: shown with U+FFFD, no escape reached the terminal"; else not_ok "$1: raw escapes on the terminal"; fi
}
drive show "$KVCHAT" sessions show "$OLD" <<'EOF'
expect user: title.\]0;pwned. clear.\[2J csi.2J rtl.x end
exit 0
EOF
clean show 4
drive md "$KVCHAT" sessions export --format markdown "$OLD" <<'EOF'
expect # old.\[2Jname
expect title.*end
exit 0
EOF
clean md 5
drive list "$KVCHAT" sessions list <<'EOF'
expect old.\[2Jname
exit 0
EOF
clean list 1
drive search "$KVCHAT" sessions search clear <<'EOF'
expect old.\[2Jname  turn 1
exit 0
EOF
clean search 1
# the REPL: /sessions lists it, /load opens it, the prompt shows it
drive repl $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
say /sessions ls
send /load old\t
expect /load old
line 
expect old.\[2Jname> 
line /show
expect session +'old.\[2Jname' \(saved after every exchange\)
expect old.\[2Jname> 
send \x04
exit 0
EOF
clean repl 3
# piped: the bytes as they are (a file gets what was stored)
"$KVCHAT" sessions export --format markdown "$OLD" >"$T/md.txt"
grep -q "$(printf '\033\[2J')" "$T/md.txt" && ok "piped: the text as stored" || not_ok "piped export was changed"

# ---- the name rule
for bad in "$(printf 'a\302\205b')" "$(printf 'a\302\240b')" "$(printf 'a\342\200\213b')" "$(printf '\342\200\256evil')" \
    "$(printf 'a\342\201\246b')" "$(printf 'a\033b')" "$(printf 'a\343\200\200b')"; do
    run "$KVCHAT" run -m "$M" -t 1 -n 2 -s "$bad" hi
    expect_rc 1
    expect_err "bad session name '[^']*': it holds"
    grep -q "$(printf '\033\|\302\205\|\342\200\256')" "$T/err" && not_ok "the refusal printed the bad character" ||
        ok "the refusal shows it as U+FFFD"
done
run "$KVCHAT" run -m "$M" -t 1 -n 2 -s "$(printf '\342\200\256evil')" hi
expect_err "bad session name '.evil': it holds a bidirectional control (U+202E at byte 0)"
run "$KVCHAT" sessions rename p "$(printf 'x\302\240y')"
expect_rc 3
run "$KVCHAT" run -m "$M" -t 1 -n 2 -s "naïve-日本" hi
expect_rc 0
# the old name still opens, renames and goes
run sh -c "$KVCHAT run -m $M -t 1 -n 2 -s '$OLD' again </dev/null"
expect_rc 0
run "$KVCHAT" sessions rename "$OLD" fixed
expect_rc 0
run "$KVCHAT" sessions rm fixed
expect_rc 0
finish
