#!/bin/sh
# t0506: the REPL asks before it loses anything (issue 29), on a
# pseudo-terminal - in a saved session /undo and /retry ask (no keeps the
# session whole, yes changes it) and /clear starts an unnamed chat leaving
# the session as saved; leaving an unnamed chat with exchanges (/exit,
# /bye, Ctrl-D) asks: Enter stays, "s NAME" saves it, "d" or Ctrl-D
# discards it; Ctrl-D inside an unfinished """ block discards the block
# with a note instead of sending it. A private chat (--private, /set
# private on) leaves without a question and writes no history line.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"
msgs() { "$KVCHAT" sessions export "$1" | jq -c '[.messages[] | [.role, .content]]'; }
n_sessions() { "$KVCHAT" sessions list --json | jq length; }
printf 'Hello there.\nWhat is a cat?\n' | $K --temp 0 -n 4 chat trip >/dev/null 2>&1
want=$(msgs trip)
[ "$(echo "$want" | jq length)" = 4 ] && ok "trip: two exchanges" || not_ok "trip: $want"

# ---- /undo, /retry and /clear in a saved session: no keeps it whole
drive keep $K --temp 0 -n 4 chat trip <<'EOF'
expect trip> 
sleep 0.5
line /undo
expect Drop the last exchange from session 'trip'\? It cannot be brought back\. \[y/N\] 
line n
expect session 'trip' is unchanged
expect trip> 
line /retry
expect Replace the last answer saved in session 'trip'\? \[y/N\] 
line
expect session 'trip' is unchanged
expect trip> 
line /clear
expect session 'trip' is kept as saved \(2 exchanges; /load trip goes back\); a fresh unnamed chat begins
expect \n> 
say Something else. a1
line /exit
expect This chat is not saved: s NAME saves it, d discards it, Enter stays
line d
exit 0
EOF
[ "$(msgs trip)" = "$want" ] && ok "no to /undo and /retry, /clear, a new message: trip is whole" ||
    not_ok "trip changed: $(msgs trip)"
# yes: the change is made
drive change $K --temp 0 -n 4 chat trip <<'EOF'
expect trip> 
sleep 0.5
line /undo
expect \[y/N\] 
line y
expect dropped the last exchange \(1 left\)
expect trip> 
send \x04
exit 0
EOF
[ "$(msgs trip)" = "$(echo "$want" | jq -c '.[0:2]')" ] && ok "yes to /undo drops the exchange" || not_ok "after yes: $(msgs trip)"

# ---- leaving an unnamed chat with exchanges asks
before=$(n_sessions)
drive stay $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say Hi. a1
line /exit
expect This chat is not saved: s NAME saves it, d discards it, Enter stays \(Ctrl-D: discard\) 
line
expect still here
expect \n> 
line /bye
expect This chat is not saved
line s kept1
expect saved as session 'kept1'
exit 0
EOF
[ "$(msgs kept1 | jq length)" = 2 ] && ok "'s NAME' at the question saves the chat, then it ends" || not_ok "kept1: $(msgs kept1)"
drive discard $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say Hi. a1
send \x04
expect This chat is not saved
line d
exit 0
EOF
drive twice $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say Hi. a1
send \x04
expect This chat is not saved
send \x04
exit 0
EOF
expect_eq "d, or Ctrl-D twice, discards: sessions" "$(n_sessions)" $((before + 1))
# nothing to lose: nothing asked
drive empty $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
line /exit
exit 0
EOF
grep -q "This chat is not saved" "$T/empty.log" && not_ok "an empty chat asked" || ok "an empty chat leaves without a question"

# ---- Ctrl-D inside a """ block: the block is dropped, the chat goes on
drive block $K --temp 0 -n 4 chat blk <<'EOF'
expect blk> 
sleep 0.5
line """
expect \.\.\. 
line half written
expect \.\.\. 
send \x04
expect \[Ctrl-D: the unfinished """ block is discarded, nothing was sent\]
expect blk> 
say A whole message. a1
send \x04
exit 0
EOF
[ "$(msgs blk)" = "$(printf '[["user","A whole message."],["assistant",%s]]' "$(msgs blk | jq '.[1][1]')")" ] &&
    ok "the half-written block was not sent" || not_ok "blk: $(msgs blk)"

# ---- private: no question, no history line, the banner says it
hist="$XDG_STATE_HOME/kvchat/history"
drive private $K --temp 0 -n 4 --private <<'EOF'
expect ^kvchat [0-9.]+ · private chat · m\.gguf \(qwen2\)
expect private: the KV blocks on disk are read, nothing is written
expect > 
sleep 0.5
say a secret typed in private a1
line /exit
exit 0
EOF
drive setpriv $K --temp 0 -n 4 <<'EOF'
expect not saved as a session, but its KV blocks and token ids stay on disk as a cache
expect > 
sleep 0.5
say /set private on p
say another secret a1
send \x04
exit 0
EOF
grep -q "private on: from now on nothing is written" "$T/setpriv/p" && ok "/set private on says so" || not_ok "/set private: $(cat "$T/setpriv/p")"
grep -q "secret" "$hist" && not_ok "a private input reached the history" || ok "no private input in the history"
grep -q "/set private on" "$hist" && ok "(the input before it is kept)" || not_ok "the history lacks /set private on"
finish
