#!/bin/sh
# t0502: named sessions in the REPL - `kvchat chat NAME` saves every
# exchange and resumes from its KV blocks (no re-prefill; the same answer as
# one process doing all turns), `kvchat NAME`, `chat -s NAME`, a session
# in use by another process (exit 3), /save, /load, /fork, /sessions, completion of session
# names, an unnamed chat discarded at exit, SIGTERM and SIGHUP.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"

# ---- one process, three turns (the reference)
drive one $K --temp 0 -n 8 <<'EOF'
expect > 
sleep 0.5
say Hello there! a1
say What is the capital of France? a2
say And of Italy? a3
discard
EOF

# ---- the same in two processes on session 'work'
drive work1 $K --temp 0 -n 8 chat work <<'EOF'
expect work> 
sleep 0.5
say Hello there! a1
say What is the capital of France? a2
send \x04
exit 0
EOF
drive work2 $K --temp 0 -n 8 -v chat work <<'EOF'
capture restored session 'work': ([0-9]+) tokens restored from [0-9]+ KV blocks? in [0-9.]+ ms, 0 to compute
expect session 'work': 2 exchanges so far
expect work> 
say And of Italy? a3
send \x04
exit 0
EOF
restored=$(cat "$T/work2/restored")
# (at least: the reference above stored the blocks of its own turn 3 too)
[ "$(stat_of "$T/work2/a3" reused)" -ge "$restored" ] && ok "turn 3 after a resume reuses every restored token" ||
    not_ok "turn 3 after a resume reused $(stat_of "$T/work2/a3" reused) of $restored restored"
[ "$(stat_of "$T/work2/a3" prefilled)" -lt 30 ] && ok "turn 3 after a resume prefills only its message" ||
    not_ok "turn 3 after a resume prefilled $(stat_of "$T/work2/a3" prefilled)"
grep -v '^\[' "$T/work2/a3" >"$T/work2.a3"
expect_same_file "resumed turn 3 answers as one process does" "$T/work2.a3" "$T/one/a3"
expect_same_file "turn 1 in a session answers as without" "$T/work1/a1" "$T/one/a1"

# `kvchat NAME` opens an existing session; an unknown word is an unknown command
run "$KVCHAT" work -m "$M" -t 1 -v </dev/null
expect_rc 0; expect_err "session 'work': [0-9]* tokens restored"
run "$KVCHAT" nosuchsession -m "$M" </dev/null
expect_rc 1; expect_err "unknown command 'nosuchsession'"

# `chat -s NAME` (--session NAME, --session=NAME) names the session as run -s does
run "$KVCHAT" chat -s work -m "$M" -t 1 -v </dev/null
expect_rc 0; expect_err "session 'work': [0-9]* tokens restored"
run "$KVCHAT" chat --session=work -m "$M" -t 1 -v </dev/null
expect_rc 0; expect_err "session 'work': [0-9]* tokens restored"
run sh -c "printf 'Hello\n' | $KVCHAT chat --session viaflag -m $M -t 1 --temp 0 -n 2"
expect_rc 0
run "$KVCHAT" sessions
expect_out "viaflag"
"$KVCHAT" sessions rm viaflag >/dev/null 2>&1 # the sessions counted below are the script's
run "$KVCHAT" chat -s work other -m "$M" </dev/null
expect_rc 1; expect_err "expected one SESSION name, got 'work' and 'other'"
run "$KVCHAT" chat -m "$M" -s </dev/null
expect_rc 1; expect_err "-s needs a session name"

# ---- another process has the session open: exit 3
mkfifo "$T/fifo"
$K --temp 0 -n 2 chat work <"$T/fifo" >"$T/holder.out" 2>"$T/holder.err" &
holder=$!
exec 7>"$T/fifo"
echo "hold on" >&7
i=0
while [ ! -s "$T/holder.out" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
run $K chat work </dev/null
expect_rc 3; expect_err "kvchat: session 'work' is in use by pid $holder"
exec 7>&-
wait $holder
expect_eq "the holder ends when its input does" "$?" 0

# ---- an unnamed chat: /save names it; otherwise it is gone at exit
drive unnamed $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say Hello there! a1
say /save kept s
say Tell me more. a2
send \x04
exit 0
EOF
grep -q "saved as session 'kept'" "$T/unnamed/s" && ok "/save says so" || not_ok "/save: $(cat "$T/unnamed/s")"
drive gone $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say Not kept. a1
discard
EOF
run "$KVCHAT" sessions list --json
expect_rc 0
expect_out '"name": "kept", [^}]*"turns": 2'
expect_eq "sessions: work and kept, nothing unnamed" "$(grep -o '"name"' "$T/out" | wc -l)" 2

# ---- /load (asking before an unsaved chat is dropped), /fork, /sessions, Tab
drive switch $K --temp 0 -n 4 <<'EOF'
expect > 
sleep 0.5
say Hi. a0
line /load work
expect This chat is not saved .* Discard it\? \[y/N\] 
line y
expect session 'work': 4 exchanges
expect work> 
say /fork work2 f
say One more. a1
say /sessions ls
send /load wo\t
expect /load work
send \t\t
expect work +work2
send \x03
expect \^C\nwork2> 
line /load kept
expect session 'kept': 2 exchanges
expect kept> 
send \x04
exit 0
EOF
grep -q "forked 'work' as 'work2'" "$T/switch/f" && ok "/fork says so" || not_ok "/fork: $(cat "$T/switch/f")"
grep -q '^\* work2 ' "$T/switch/ls" && grep -q '^  work ' "$T/switch/ls" && grep -q '^  kept ' "$T/switch/ls" &&
    ok "/sessions marks the current one" || { not_ok "/sessions"; cat "$T/switch/ls"; }
run "$KVCHAT" sessions list --json
expect_out '"name": "work", [^}]*"turns": 4'
expect_out '"name": "work2", [^}]*"turns": 5'

# ---- SIGTERM while answering, SIGHUP at the prompt: clean exits, turns kept
drive term $K --temp 0 -n 4 chat termed <<'EOF'
expect termed> 
sleep 0.5
say Hello there! a1
say /set n_predict -1 s
line Tell me a very long story.
expect story\.\n(?s:.{20})
signal TERM
exit 130
EOF
run "$KVCHAT" sessions export termed
expect_rc 0
expect_out '"Hello there!"'
expect_out '"Tell me a very long story."'
drive hup $K --temp 0 -n 4 chat termed <<'EOF'
expect termed> 
sleep 0.5
signal HUP
exit 130
EOF
drive again $K --temp 0 -n 4 chat termed <<'EOF'
expect session 'termed': 2 exchanges so far
sleep 0.5
expect termed> 
send \x04
exit 0
EOF

finish
