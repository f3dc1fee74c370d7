#!/bin/sh
# t0504: the chat as users of ollama and llama-cli expect it, on a
# pseudo-terminal - answers word-wrapped at 40 columns (words whole, lines
# within the width, breaks only where needed, measured by
# tests/cli/wrapcheck.py independently of kvchat), a resize in the middle of
# an answer, --no-wrap, `wrap = off` and /set nowordwrap, pipes never
# wrapped, `kvchat run` wrapped on a terminal but not with --json; /read
# (the file's text is the message, its token count as `kvchat tokenize`
# counts it; binary, non-UTF-8, missing and too-large files refused with
# the numbers); /bye and /?; """ blocks that open and close on the text's
# own lines; /set system and /set parameter; prefixes that must not leave
# or retry (/e, /r, /ret, /q) and those that still work (/he, /sh); the
# banner naming the session.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"
. "$TOP/tests/cli/tls-lib.sh"
. "$TOP/tests/cli/remote-lib.sh"
WC="python3 $TOP/tests/cli/wrapcheck.py"
answer_of() { # SESSION N: the text of message N of a saved session
    "$KVCHAT" sessions export "$1" | jq -j ".messages[$2].content"
}
wrapcheck() { # what, args...
    what=$1
    shift
    if $WC "$@" >"$T/wc.out" 2>&1; then
        ok "$what ($(tail -n 1 "$T/wc.out" | sed 's/^wrapcheck: //'))"
    else
        not_ok "$what"
        sed 's/^/  /' "$T/wc.out"
    fi
}
LONG="Tell me a long story about the sea."

# ---- wrapped at 40 columns, and the session holds the answer unwrapped
cat >"$T/wrap.script" <<EOF
expect > 
sleep 0.5
say $LONG a1
say /save w40 s
send /bye\r
exit 0
EOF
python3 "$TOP/tests/cli/ptydrive.py" --cols 40 --timeout 120 --dir "$T" --log "$T/w40.log" \
    -- $K --temp 0 -n 150 <"$T/wrap.script" >"$T/w40.drv" 2>&1 &&
    ok "40 columns: the chat went as scripted" || { not_ok "40 columns"; cat "$T/w40.drv"; }
answer_of w40 1 >"$T/w40.answer"
wrapcheck "40 columns: words whole, lines within 40, breaks needed" "$T/a1" "$T/w40.answer" 40

# ---- a resize while an answer streams: the rest follows the new width
drive resize --cols 60 $K --temp 0 -n 300 <<EOF
expect > 
sleep 0.5
line $LONG
expect sea\.\n(?s:.{200})
resize 30
mark r
expect \n> 
mark a1
say /save rs s
send \x04
exit 0
EOF
answer_of rs 1 >"$T/rs.answer"
# the answer as shown (after the echoed line, before the prompt), and where
# the resize came in it: lines that start after it must fit 30 columns,
# lines that end before it 60 (the line in progress fits 60)
python3 - "$T/resize.log" "$(cat "$T/resize/r")" "$(cat "$T/resize/a1")" "$T/rs" <<'PY'
import sys
t = open(sys.argv[1], encoding="utf-8", errors="replace").read()
r, a1, out = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
begin = t.index("sea.\n") + 5  # after the echo of the message
end = t.rindex("\n> ", begin, a1 + 1)
ans, at = t[begin:end], r - begin
open(out + ".shown", "w").write(ans)
open(out + ".from", "w").write(str(ans.find("\n", at) + 1))
open(out + ".until", "w").write(str(ans.rfind("\n", 0, at)))
PY
[ "$(cat "$T/rs.until")" -gt 0 ] && ok "whole lines came before the resize" || not_ok "nothing before the resize"
wrapcheck "before the resize: wrapped at 60 columns" "$T/rs.shown" "$T/rs.answer" 60 --until "$(cat "$T/rs.until")"
wrapcheck "after the resize: wrapped at 30 columns" "$T/rs.shown" "$T/rs.answer" 30 --from "$(cat "$T/rs.from")"

# ---- --no-wrap, `wrap = off`, /set nowordwrap: the answer as it is
drive nowrap --cols 40 $K --temp 0 -n 150 --no-wrap <<EOF
expect > 
sleep 0.5
say $LONG a1
discard
EOF
wrapcheck "--no-wrap: not wrapped" "$T/nowrap/a1" "$T/w40.answer" 40 --unwrapped
mkdir -p "$XDG_CONFIG_HOME/kvchat"
echo "wrap = off" >"$XDG_CONFIG_HOME/kvchat/config"
drive cfgwrap --cols 40 $K --temp 0 -n 150 <<EOF
expect > 
sleep 0.5
say $LONG a1
say /show show
say /set wrap on w
say /retry a2
discard
EOF
rm "$XDG_CONFIG_HOME/kvchat/config"
wrapcheck "wrap = off in the config: not wrapped" "$T/cfgwrap/a1" "$T/w40.answer" 40 --unwrapped
grep -q 'word wrap off' "$T/cfgwrap/show" && ok "/show says wrap is off" || not_ok "/show: $(cat "$T/cfgwrap/show")"
grep -q 'word wrap on' "$T/cfgwrap/w" && ok "/set wrap on" || not_ok "/set wrap on: $(cat "$T/cfgwrap/w")"
drive wordwrap --cols 40 $K --temp 0 -n 150 <<EOF
expect > 
sleep 0.5
say /set nowordwrap n
say $LONG a1
say /set wordwrap w
say /retry a2
discard
EOF
grep -q 'word wrap off' "$T/wordwrap/n" && ok "/set nowordwrap (ollama)" || not_ok "/set nowordwrap: $(cat "$T/wordwrap/n")"
wrapcheck "/set nowordwrap: not wrapped" "$T/wordwrap/a1" "$T/w40.answer" 40 --unwrapped
wrapcheck "/set wordwrap: wrapped again" "$T/wordwrap/a2" "$T/w40.answer" 40

# ---- pipes are never wrapped, whatever COLUMNS says
printf '%s\n' "$LONG" | COLUMNS=20 $K --temp 0 -n 150 >"$T/pipe.out" 2>"$T/pipe.err"
printf '%s\n' "$(cat "$T/w40.answer")" >"$T/w40.answer.nl"
cmp -s "$T/pipe.out" "$T/w40.answer.nl" && ok "a pipe gets the answer byte for byte, unwrapped" ||
    { not_ok "the piped answer differs"; diff "$T/pipe.out" "$T/w40.answer.nl" | head; }

# ---- kvchat run on a terminal wraps; --json does not
# on_tty NAME COMMAND: COMMAND's output on a 40-column terminal into $T/NAME.shown
on_tty() {
    python3 "$TOP/tests/cli/ptydrive.py" --cols 40 --timeout 120 --log "$T/$1.log" -- \
        sh -c "$2 </dev/null; echo; echo '[end]'" <<'EOF' >"$T/$1.drv" 2>&1
expect \[end\]
exit 0
EOF
    sed -e '/^\[end\]$/d' "$T/$1.log" >"$T/$1.shown"
}
on_tty run "$KVCHAT run -m $M -t 1 --temp 0 -n 150 '$LONG'"
$KVCHAT run -m "$M" -t 1 --temp 0 -n 150 --json "$LONG" </dev/null | jq -j .answer >"$T/run.answer"
wrapcheck "run on a terminal: wrapped at 40" "$T/run.shown" "$T/run.answer" 40
on_tty runj "$KVCHAT run -m $M -t 1 --temp 0 -n 150 --json '$LONG'"
sed -n 1p "$T/runj.shown" | jq -j .answer >"$T/runj.answer" 2>/dev/null
cmp -s "$T/runj.answer" "$T/run.answer" && ok "run --json on a terminal: one unwrapped line of JSON" ||
    not_ok "run --json on a terminal: $(head -c 300 "$T/runj.log")"

# a remote model's answer on a terminal is wrapped the same way
start_fixture srv
"$KVCHAT" models add-remote echo "http://127.0.0.1:$PORT/v1" --model echo 2>/dev/null || not_ok "cannot add the remote model"
REMOTE_Q="one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
on_tty remote "$KVCHAT run -m echo '$REMOTE_Q'"
printf 'echo: %s' "$REMOTE_Q" >"$T/remote.answer"
wrapcheck "a remote model's answer on a terminal: wrapped at 40" "$T/remote.shown" "$T/remote.answer" 40

# ---- /read: the file's text is the next message, with its token count
printf 'The harbour was quiet.\nGulls circled the masts.\n' >"$T/notes.txt"
# the message is the text without its last newline; tokenize counts it
ntok=$(printf 'The harbour was quiet.\nGulls circled the masts.' | "$KVCHAT" tokenize -m "$M" --no-bos | wc -w)
head -c 2000 /dev/urandom >"$T/noise.bin"
printf 'caf\351\n' >"$T/latin1.txt"
python3 -c 'print("sea " * 4000)' >"$T/big.txt"
drive read $K --temp 0 -n 8 -c 512 <<EOF
expect > 
sleep 0.5
say /read $T/notes.txt r1
say /read $T/noise.bin r2
say /read $T/latin1.txt r3
say /read $T/absent.txt r4
say /read $T/big.txt r5
say /read r6
say /save rd s
send /bye\r
exit 0
EOF
grep -q "\[read '$T/notes.txt': 48 bytes, $ntok tokens\]" "$T/read/r1" && ok "/read: its size and token count ($ntok, as tokenize counts)" ||
    not_ok "/read note: $(cat "$T/read/r1")"
[ "$(answer_of rd 0)" = "$(printf 'The harbour was quiet.\nGulls circled the masts.')" ] &&
    ok "/read: the file's text is the message" || not_ok "/read message: $(answer_of rd 0)"
[ -n "$(answer_of rd 1)" ] && ok "/read: it is answered" || not_ok "/read: no answer"
grep -q "it is a binary file (a NUL byte at offset\|not UTF-8 text" "$T/read/r2" && ok "/read refuses a binary file" ||
    not_ok "/read binary: $(cat "$T/read/r2")"
grep -q "not UTF-8 text (byte 0xe9 at offset 3)" "$T/read/r3" && ok "/read refuses Latin-1" || not_ok "/read latin1: $(cat "$T/read/r3")"
grep -q "cannot read '$T/absent.txt': No such file or directory" "$T/read/r4" && ok "/read: a missing file" ||
    not_ok "/read missing: $(cat "$T/read/r4")"
grep -q "'$T/big.txt' is too large for the context: [0-9]* tokens, and the context has room for [0-9]* of its 512 (-c N sets a larger context)" "$T/read/r5" &&
    ok "/read: too large, with the numbers" || not_ok "/read big: $(cat "$T/read/r5")"
grep -q "usage: /read FILE" "$T/read/r6" && ok "/read without a file" || not_ok "/read alone: $(cat "$T/read/r6")"
[ "$("$KVCHAT" sessions export rd | jq '.messages | length')" = 2 ] && ok "refused files sent nothing" ||
    not_ok "messages: $("$KVCHAT" sessions export rd | jq -c '.messages')"

# ---- run -f FILE: the same for scripts
"$KVCHAT" run -m "$M" -t 1 --temp 0 -n 8 --json -s rf -f "$T/notes.txt" </dev/null >"$T/rf.json" 2>"$T/rf.err"
[ "$(answer_of rf 0)" = "$(answer_of rd 0)" ] && ok "run -f: the same message as /read" || not_ok "run -f: $(answer_of rf 0)"
[ "$(jq -r .answer "$T/rf.json")" = "$(answer_of rd 1)" ] && ok "run -f: the same answer as /read" || not_ok "run -f answer"
[ ! -s "$T/rf.err" ] && ok "run -f: no note when stderr is not a terminal" || not_ok "run -f stderr: $(cat "$T/rf.err")"
run "$KVCHAT" run -m "$M" -t 1 -n 4 -v -f "$T/notes.txt" "Summarise it."
expect_rc 0; expect_err "read '$T/notes.txt': 48 bytes, $ntok tokens"
run "$KVCHAT" run -m "$M" -t 1 -n 4 -f "$T/noise.bin"
expect_rc 2; expect_err "it is a binary file\|not UTF-8 text"; expect_out_empty
run "$KVCHAT" run -m "$M" -t 1 -n 4 -c 512 -f "$T/big.txt"
expect_rc 2; expect_err "is too large for the context: [0-9]* tokens, and the context has room for 512 of its 512"
run "$KVCHAT" run -m "$M" -t 1 -n 4 -f
expect_rc 1; expect_err "needs a file name"
printf 'from stdin' | "$KVCHAT" run -m "$M" -t 1 --temp 0 -n 4 -s rs2 -f - "and more" >/dev/null 2>&1
[ "$(answer_of rs2 0)" = "from stdin
and more" ] && ok "run -f - reads stdin, PROMPT after it" || not_ok "run -f -: $(answer_of rs2 0)"

# ---- /bye, /?, one-line """ blocks, /set system and /set parameter
drive ollama $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say /? help
say /set system Be brief. sys
say """hello there""" b1
line """first line
expect \.\.\. 
say last line""" b2
line """
expect \.\.\. 
line only line
say """ b3
say /set parameter temperature 0.25 p1
say /set parameter num_predict 7 p2
say /set parameter num_ctx 99 p3
say /save ol s
say /show show
line /set system Be terse.
expect Go on\? \[y/N\] 
say n sys2
send /bye\r
exit 0
EOF
grep -q '/help  *this list (also /?)' "$T/ollama/help" && ok "/? is /help" || not_ok "/?: $(cat "$T/ollama/help")"
"$KVCHAT" sessions export ol | jq -r '[.messages[] | select(.role == "user") | .content] | join("|")' >"$T/ol.users"
[ "$(cat "$T/ol.users")" = "hello there|first line
last line|only line" ] && ok '""" opening and closing on the text'"'"'s lines' || not_ok "the blocks: $(cat "$T/ol.users")"
grep -q 'temp 0.25,' "$T/ollama/p1" && ok "/set parameter temperature" || not_ok "/set parameter: $(cat "$T/ollama/p1")"
grep -q 'n_predict 7' "$T/ollama/p2" && ok "/set parameter num_predict" || not_ok "num_predict: $(cat "$T/ollama/p2")"
grep -q 'the context size is fixed for a chat: start kvchat with -c N' "$T/ollama/p3" && ok "/set parameter num_ctx explains" ||
    not_ok "num_ctx: $(cat "$T/ollama/p3")"
grep -q 'system  *Be brief\.' "$T/ollama/show" && ok "/set system TEXT is /system TEXT" || not_ok "/set system: $(cat "$T/ollama/show")"
grep -q 'the system prompt is unchanged' "$T/ollama/sys2" && ok "/set system asks before dropping exchanges" ||
    not_ok "/set system on exchanges: $(cat "$T/ollama/sys2")"
[ "$("$KVCHAT" sessions export ol | jq -r '.messages[0].content')" = "Be brief." ] && ok "the session has the system prompt" ||
    not_ok "system: $("$KVCHAT" sessions export ol | jq -c '.messages[0]')"

# ---- prefixes: harmless commands by prefix, the others only in full
drive prefix $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say Hello there! a1
say /e e
say /q q
say /r r
say /ret ret
say /cl cl
say /u u
say /he he
say /sh sh
say /st st
say /save px s
send /bye\r
exit 0
EOF
grep -q "'/e' runs nothing: type /exit in full" "$T/prefix/e" && ok "/e does not leave" || not_ok "/e: $(cat "$T/prefix/e")"
grep -q "unknown command '/q'" "$T/prefix/q" && ok "/q does not leave (/quit is an alias: never abbreviated)" || not_ok "/q: $(cat "$T/prefix/q")"
grep -q "ambiguous command '/r': /read, /retry" "$T/prefix/r" && ok "/r is ambiguous" || not_ok "/r: $(cat "$T/prefix/r")"
grep -q "'/ret' runs nothing: type /retry in full" "$T/prefix/ret" && ok "/ret does not retry" || not_ok "/ret: $(cat "$T/prefix/ret")"
grep -q "'/cl' runs nothing: type /clear in full" "$T/prefix/cl" && ok "/cl does not clear" || not_ok "/cl: $(cat "$T/prefix/cl")"
grep -q "'/u' runs nothing: type /undo in full" "$T/prefix/u" && ok "/u does not undo" || not_ok "/u: $(cat "$T/prefix/u")"
grep -q '/sessions  *list saved sessions' "$T/prefix/he" && ok "/he runs /help" || not_ok "/he: $(cat "$T/prefix/he")"
grep -q '^model  ' "$T/prefix/sh" && ok "/sh runs /show" || not_ok "/sh: $(cat "$T/prefix/sh")"
grep -q 'conversation: ' "$T/prefix/st" && ok "/st runs /stats" || not_ok "/st: $(cat "$T/prefix/st")"
[ "$("$KVCHAT" sessions export px | jq '.messages | length')" = 2 ] && [ "$(answer_of px 1 | tr -d '\n')" = "$(tr -d '\n' <"$T/prefix/a1")" ] &&
    ok "the exchange is untouched (no retry, undo or clear ran)" || not_ok "the exchange changed: $("$KVCHAT" sessions export px | jq -c .messages)"

# ---- the banner names the session
drive banner $K chat trip <<'EOF'
expect ^kvchat [0-9.]+ · session trip · m\.gguf \(qwen2\) · /help for commands
expect > 
send \x04
exit 0
EOF
drive banner2 $K <<'EOF'
expect ^kvchat [0-9.]+ · unnamed chat · m\.gguf \(qwen2\) · /help for commands
expect > 
send \x04
exit 0
EOF
finish
