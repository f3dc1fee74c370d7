#!/bin/sh
# t0503: small promises of the chat - the history gives back a multi-line
# input with its blank lines after a restart; a piped chat whose message
# was refused exits non-zero; counts of one are singular ("1 exchange",
# "1 turn", "1 thread", "1 answer", "1 token"); /help names every /set key.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"

# ---- history: blank lines inside an entry survive a restart
drive hist1 $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
line """
expect \.\.\. 
line para one
line 
line 
line para two
line """
expect > 
line first\\
expect \.\.\. 
line \\
expect \.\.\. 
line last
expect > 
discard
EOF
drive hist2 $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
send \x1b[A
expect first\n *\n *last
send \x1b[A
expect para one\n *\n *\npara two
send \r
expect > 
discard
EOF
# and the entry is sent as recalled: the session got it whole
drive hist3 $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
send \x1b[A\r
expect > 
say /save h s
send \x04
exit 0
EOF
run "$KVCHAT" sessions export h
expect_out '"para one\\n\\n\\npara two"'
# a file of plain lines (no timestamps, as another readline program writes)
printf 'alpha\nomega\n' >"$XDG_STATE_HOME/kvchat/history"
drive hist4 $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
send \x1b[A
expect omega
send \x1b[A
expect alpha
send \x03
expect \^C\n> 
send \x04
exit 0
EOF

# ---- piped: a refused message makes the exit status 2
C="$KVCHAT chat -m $M -t 1 --temp 0"
run sh -c "printf 'a\nb\n' | $C -c 64"
expect_rc 2; expect_err "the message does not fit in the context window"
run sh -c "printf 'a\n' | $C -c 64"
expect_rc 0
run sh -c "printf 'a\nb\n' | $C -c 64 -n 4"
expect_rc 0

# ---- counts of one
run sh -c "printf 'hi\n/stats\n/show\n/sessions\n/load one\n' | $C -n 3 -v one"
expect_rc 0
run sh -c "printf 'a\nb\n' | $C -c 64 g2"
cat "$T/err" >>"$T/all"
run sh -c "printf 'hi\n/stats\n/show\n/sessions\n' | $C -n 3 -v one"
cat "$T/err" >>"$T/all"
run sh -c "printf '/load one\n' | $C -n 3"
cat "$T/err" >>"$T/all"
run sh -c "printf 'hi\n' | $C -n 1 -v"
cat "$T/err" >>"$T/all"
for w in "1 exchange[,;)]" "1 answer," "1 thread," "1 turn " "1 token[ (]" "of 64 tokens used, 1 exchange)"; do
    grep -q -e "$w" "$T/all" && ok "says '$w'" || { not_ok "does not say '$w'"; }
done
grep -nE '(^|[^0-9.])1 (exchanges|turns|threads|answers|tokens|sessions)' "$T/all" &&
    not_ok "a plural after 1" || ok "no plural after 1"

# ---- /help names every key /set takes
run sh -c "printf '/set\n/help\n' | $C"
keys=$(sed -n 's/^sampling *//p' "$T/err" | tr ',' '\n' | sed 's/^ *\([a-z_]*\) .*/\1/')
[ "$(echo "$keys" | wc -w)" -ge 8 ] && ok "/set shows $(echo $keys)" || not_ok "/set shows: $keys"
for k in $keys; do
    grep -q "^  /set KEY VALUE .* $k\b" "$T/err" && ok "/help names $k" || not_ok "/help lacks $k"
done
run sh -c "printf '/set bogus 1\n' | $C"
for k in $keys; do
    grep -q "unknown setting 'bogus' (try: .*$k" "$T/err" && ok "/set bogus suggests $k" || not_ok "/set bogus lacks $k"
done
finish
