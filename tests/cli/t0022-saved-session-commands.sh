#!/bin/sh
# t0022: a named session survives every REPL command (issue 29) - each
# slash command, piped to a chat in a saved session (so nothing can be
# asked), leaves the session's messages as they were: /clear starts a
# fresh context and says the session is kept (`/load trip2` then `/clear`
# from another chat too); /undo, /retry, /system and the rest that would
# change it are refused with exit 3 and a reason, and do their work only
# with --yes; /save renames (the messages go with the name), /read adds.
# Every command /help lists must be walked here (checked at the end).
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" --seed 3 || exit 1
C="$KVCHAT -m $M -t 1 --temp 0 -n 4"
msgs() { "$KVCHAT" sessions export "$1" | jq -c '[.messages[] | [.role, .content]]'; }

printf 'Hello there.\nWhat is a cat?\n' | $C --system "Be brief." chat trip >/dev/null 2>&1
printf 'Another one.\n' | $C chat other >/dev/null 2>&1
want=$(msgs trip)
[ "$(echo "$want" | jq length)" = 5 ] && ok "trip: a system prompt and two exchanges" || not_ok "trip: $want"
echo "a file's text" >"$T/note.txt"

# the same session after CMD (piped into `kvchat chat trip`): exit status and messages
walked="" # the commands walked, to be checked against /help's list at the end
survives() { # expected-rc command
    walked="$walked $(printf '%s\n' "$2" | sed -n 's|^\(/[a-z?]*\).*|\1|p' | tr '\n' ' ')"
    printf '%s\n' "$2" >"$T/in"
    run sh -c "$C chat trip <'$T/in'"
    [ "$rc" = "$1" ] && ok "'$2': exit $rc" || { not_ok "'$2': exit $rc, wanted $1"; sed 's/^/  /' "$T/err"; }
    got=$(msgs trip)
    [ "$got" = "$want" ] && ok "'$2': trip is whole" || { not_ok "'$2' changed trip"; echo "  $got"; }
}
for cmd in /help /? /sessions /show /stats /set "/set temp 0.5" "/set top_k 7" /new "/load other" \
    "/fork trip-copy" /clear "/clear
/undo" /system /exit /quit /bye "/bogus"; do
    survives 0 "$cmd"
done
survives 0 "/clear
and a message after it"
grep -q "session 'trip' is kept as saved (2 exchanges; /load trip goes back); a fresh unnamed chat begins with its system prompt" \
    "$T/err" && ok "/clear says what it did" || { not_ok "/clear: $(cat "$T/err")"; }
# those that would change it are refused, said, and make the exit status 3
for cmd in /undo /retry "/system Be verbose."; do
    survives 3 "$cmd"
done
survives 3 "/undo
/retry"
grep -q "kvchat: /undo would change session 'trip': not asked with stdin not a terminal, so nothing changed (--yes answers yes)" \
    "$T/err" && ok "the refusal says why and how" || not_ok "refusal: $(cat "$T/err")"

# ---- /load trip2 then /clear in another chat (the issue's repro)
printf '/load trip\n/clear\n' | $C chat x >/dev/null 2>&1
[ "$(msgs trip)" = "$want" ] && ok "/load trip, /clear from chat x: trip is whole" || not_ok "/load, /clear: $(msgs trip)"
printf '/load trip\n/clear\nA new question.\n' | $C >/dev/null 2>&1
[ "$(msgs trip)" = "$want" ] && ok "and a message after /clear goes to a new unnamed chat" || not_ok "after /clear: $(msgs trip)"

# ---- /read adds an exchange (and nothing else changes)
printf '/read %s\n' "$T/note.txt" | $C chat other >/dev/null 2>&1
[ "$("$KVCHAT" sessions export other | jq '.messages | length')" = 4 ] && ok "/read adds one exchange" || not_ok "/read"
walked="$walked /read"

# ---- /save renames: the messages go with the new name
printf '/save trip-renamed\n' | $C chat trip >/dev/null 2>&1
[ "$(msgs trip-renamed)" = "$want" ] && ok "/save NAME in a session: renamed whole" || not_ok "/save: $(msgs trip-renamed)"
printf '/save trip\n' | $C chat trip-renamed >/dev/null 2>&1
[ "$(msgs trip)" = "$want" ] && ok "/save back: trip whole again" || not_ok "/save back: $(msgs trip)"
walked="$walked /save"

# ---- --yes: the changes are made
run sh -c "printf '/undo\n' | $C --yes chat trip"
expect_rc 0
[ "$(msgs trip)" = "$(echo "$want" | jq -c '.[0:3]')" ] && ok "--yes: /undo drops the last exchange" || not_ok "--yes /undo: $(msgs trip)"
run sh -c "printf '/system Be verbose.\n' | $C --yes chat trip"
expect_rc 0
[ "$(msgs trip)" = '[["system","Be verbose."]]' ] && ok "--yes: /system restarts the session" || not_ok "--yes /system: $(msgs trip)"
# --no-cache: nothing is written, so nothing is asked
printf 'Hello there.\n' | $C chat nc >/dev/null 2>&1
nc=$(msgs nc)
run sh -c "printf '/undo\n' | $C --no-cache chat nc"
expect_rc 0
[ "$(msgs nc)" = "$nc" ] && ok "--no-cache: /undo is not asked and changes nothing saved" || not_ok "--no-cache: $(msgs nc)"

# ---- every command /help lists was walked above on a saved session (a new
# command without a line here fails this test)
cmds=$(printf '/help\n' | $C chat trip 2>&1 >/dev/null | sed -n 's|^  \(/[a-z?]*\) .*|\1|p')
[ "$(echo $cmds | wc -w)" -ge 14 ] && ok "/help lists $(echo $cmds | wc -w) commands" || not_ok "/help: '$cmds'"
for c in $cmds; do
    echo " $walked " | grep -qF " $c " && ok "$c walked on a saved session" || not_ok "$c is not walked by this test"
done
finish
