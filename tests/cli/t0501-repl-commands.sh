#!/bin/sh
# t0501: REPL slash commands and line editing on a pseudo-terminal - /undo
# (the next answer is the one the conversation would give without the undone
# exchange), /retry with a seed (reproducible, and a new answer), /system
# asking before it restarts a conversation, Tab completion, multi-line input
# (trailing \ and """ blocks), history recalled after a restart (file mode
# 0600), NO_COLOR, Ctrl-C at the prompt.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"

# ---- /undo: m1, m2, /undo, m3 answers m3 as m1, m3 would
drive undo $K --temp 0 -n 8 <<'EOF'
expect > 
sleep 0.5
say Hello there! a1
say Tell me about cats. a2
say /undo u
say What is the capital of France? a3
say /clear c
say /undo u2
say /retry r
send \x04
exit 0
EOF
grep -q 'cleared 2 exchanges; the system prompt stays' "$T/undo/c" && ok "/clear" || not_ok "/clear: $(cat "$T/undo/c")"
grep -q 'nothing to undo' "$T/undo/u2" && grep -q 'nothing to retry' "$T/undo/r" && ok "/undo, /retry on nothing" ||
    not_ok "/undo, /retry on nothing"
grep -q 'dropped the last exchange (1 left)' "$T/undo/u" && ok "/undo says what it dropped" || not_ok "/undo: $(cat "$T/undo/u")"
drive plain $K --temp 0 -n 8 <<'EOF'
expect > 
sleep 0.5
say Hello there! a1
say What is the capital of France? a3
discard
EOF
expect_same_file "/undo: the answer equals the one without the undone exchange" "$T/undo/a3" "$T/plain/a3"
if cmp -s "$T/undo/a2" "$T/undo/a3"; then not_ok "the answers differ at all"; else ok "the answers differ at all"; fi

# ---- /retry with a seed: the same in two runs, different from the first answer
for r in r1 r2; do
    drive $r $K --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 -n 8 <<'EOF'
expect > 
say Hello there! a1
say /retry a2
say /retry a3
discard
EOF
done
expect_same_file "--seed 7: the first answer is reproducible" "$T/r1/a1" "$T/r2/a1"
expect_same_file "--seed 7: /retry is reproducible" "$T/r1/a2" "$T/r2/a2"
expect_same_file "--seed 7: a second /retry is reproducible" "$T/r1/a3" "$T/r2/a3"
if cmp -s "$T/r1/a1" "$T/r1/a2"; then not_ok "/retry gives a new answer"; else ok "/retry gives a new answer"; fi

# ---- /system on a conversation with turns asks first; /set; /show; Tab
drive system $K --temp 0 -n 4 --system "You are terse." <<'EOF'
expect > 
sleep 0.5
say Hello there! a1
line /system You are verbose.
expect restarts the conversation: its 1 exchange will be dropped\. Go on\? \[y/N\] 
line n
expect the system prompt is unchanged
expect > 
say /show show1
line /system You are verbose.
expect Go on\? \[y/N\] 
line y
expect the conversation starts again
expect > 
say /show show2
say /set temp 0.5 set1
say /set temp hot set2
say /set top_k 7 set3
say /bogus bogus
send /he\t
expect /help 
send \r
expect drop the last exchange
expect > 
send /se\t\t
expect /set +/sessions|/sessions +/set
send \x03
expect \^C\n> 
send /set to\t
expect /set top_
send \t\t
expect top_k +top_p
send \x03
expect \^C\n> 
send \x04
exit 0
EOF
grep -q 'system  *You are terse\.' "$T/system/show1" && grep -q '1 exchange,' "$T/system/show1" &&
    ok "/system n: unchanged" || { not_ok "/system n"; cat "$T/system/show1"; }
grep -q 'system  *You are verbose\.' "$T/system/show2" && grep -q '0 exchanges' "$T/system/show2" &&
    ok "/system y: new prompt, no exchanges" || { not_ok "/system y"; cat "$T/system/show2"; }
grep -q 'temp 0.5,' "$T/system/set1" && ok "/set temp" || { not_ok "/set temp"; cat "$T/system/set1"; }
grep -q "bad value 'hot' for temp" "$T/system/set2" && ok "/set rejects a bad value" || not_ok "/set temp hot"
grep -q 'top_k 7,' "$T/system/set3" && ok "/set top_k" || not_ok "/set top_k"
grep -q "unknown command '/bogus'" "$T/system/bogus" && ok "an unknown command is named" || not_ok "/bogus"

# ---- multi-line input, Ctrl-C at the prompt, history across restarts
drive hist1 $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
send a line that is thrown away
expect thrown away
send \x03
expect \^C\n> 
send half typed
expect half typed
send \x03
expect \^C\n> 
line first line\\
expect \.\.\. 
line second line
expect > 
line """
expect \.\.\. 
line block one
line block two
line """
expect > 
say remember the milk a
discard
EOF
mode=$(stat -c %a "$XDG_STATE_HOME/kvchat/history" 2>/dev/null)
expect_eq "the history file is private" "$mode" 600
drive hist2 $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
send \x1b[A
expect remember the milk
send \x1b[A
expect block one\nblock two
send \x1b[A
expect first line\nsecond line
send \x1b[B\x1b[B
expect remember the milk
send \r
expect > 
discard
EOF
grep -q 'thrown away' "$XDG_STATE_HOME/kvchat/history" && not_ok "a line dropped by Ctrl-C is not in the history" ||
    ok "a line dropped by Ctrl-C is not in the history"

# the messages as the model got them: a session keeps them
drive multi $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
line first line\\
expect \.\.\. 
say second line a1
line """
expect \.\.\. 
line block one
line 
line block three
say """ a2
say /save multi s
send \x04
exit 0
EOF
run "$KVCHAT" sessions export multi
expect_rc 0
expect_out '"first line\\nsecond line"'
expect_out '"block one\\n\\nblock three"'

# UTF-8 editing, even in the C locale: Left moves over a character, Backspace
# deletes one character (all of its bytes)
drive utf8 env LC_ALL=C $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
send naïve café
send \x1b[D
send \x7f
send \r
expect > 
say /save utf8 s
send \x04
exit 0
EOF
run "$KVCHAT" sessions export utf8
expect_out '"naïve caé"'

# keys typed while an answer streams are not echoed into it: they wait for
# the next prompt
drive ahead $K --temp 0 -n 300 <<'EOF'
expect > 
sleep 0.5
line Tell me a very long story.
expect story\.\n(?s:.{20})
send typed ahead
expect \n> typed ahead
send \x03
expect \^C\n> 
discard
EOF
expect_eq "typed-ahead text shows once, at the prompt" "$(grep -o 'typed ahead' "$T/ahead.log" | wc -l)" 1

# ---- colours: on a terminal unless NO_COLOR
drive color env -u NO_COLOR $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
say hi a
discard
EOF
drive nocolor env NO_COLOR=1 $K --temp 0 -n 2 <<'EOF'
expect > 
sleep 0.5
say hi a
discard
EOF
esc=$(printf '\033')
grep -q "$esc\[1;32m" "$T/color.raw" && ok "colours on a terminal" || not_ok "no colours on a terminal"
grep -q "$esc\[[0-9;]*m" "$T/nocolor.raw" && not_ok "NO_COLOR: colour codes were written" ||
    ok "NO_COLOR: no colour codes"

finish
