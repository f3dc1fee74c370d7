#!/bin/sh
# t0500: the REPL on a pseudo-terminal - the KV cache carried across turns
# (turns 2 and 3 prefill only their new tokens), the same answers as a
# --no-cache run that prefills the whole history each turn, Ctrl-C in the
# middle of an answer then another turn, pipe input (answers alone on
# stdout), and a full context window.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"

# ---- three turns, greedy, -n 8 so that every answer is 8 tokens in the cache
for mode in cached nocache; do
    extra=
    [ $mode = nocache ] && extra=--no-cache
    drive $mode $K -v --temp 0 -n 8 $extra <<'EOF'
expect > 
say Hello there! a1
say What is the capital of France? a2
say And of Italy? a3
discard
EOF
done

p1=$(stat_of "$T/cached/a1" prefilled) r1=$(stat_of "$T/cached/a1" reused) g1=$(stat_of "$T/cached/a1" generated)
p2=$(stat_of "$T/cached/a2" prefilled) r2=$(stat_of "$T/cached/a2" reused) g2=$(stat_of "$T/cached/a2" generated)
p3=$(stat_of "$T/cached/a3" prefilled) r3=$(stat_of "$T/cached/a3" reused)
expect_eq "turn 1 reuses nothing" "$r1" 0
expect_eq "turn 1 generated" "$g1" 8
expect_eq "turn 2 reuses all of turn 1" "$r2" $((p1 + g1))
expect_eq "turn 3 reuses all of turns 1-2" "$r3" $((p1 + g1 + p2 + g2))
[ "$p2" -gt 0 ] && [ "$p2" -lt 30 ] && ok "turn 2 prefills only its new tokens ($p2)" || not_ok "turn 2 prefilled $p2"
[ "$p3" -gt 0 ] && [ "$p3" -lt 30 ] && ok "turn 3 prefills only its new tokens ($p3)" || not_ok "turn 3 prefilled $p3"

# --no-cache prefills the whole history every turn, and answers the same
n3=$(stat_of "$T/nocache/a3" prefilled) c3=$(stat_of "$T/nocache/a3" reused)
expect_eq "--no-cache turn 3 prefills everything" "$n3" $((r3 + p3))
expect_eq "--no-cache turn 3 reuses nothing" "$c3" 0
for a in a1 a2 a3; do
    grep -v '^\[' "$T/cached/$a" >"$T/cached.$a.txt"
    grep -v '^\[' "$T/nocache/$a" >"$T/nocache.$a.txt"
    expect_same_file "$a: carried KV cache and full re-prefill give the same answer" \
        "$T/cached.$a.txt" "$T/nocache.$a.txt"
done

# ---- Ctrl-C in the middle of an answer, then another turn
drive ctrlc $K -v --temp 0 -n -1 -c 2048 chat cc <<'EOF'
expect cc> 
sleep 0.5
line Tell me a very long story.
# wait for some of the answer, then Ctrl-C
expect story\.\n(?s:.{40})
send \x03
expect \[stopped; the partial answer is kept
expect cc> 
say /stats st
say /set n_predict 8 s
say Go on. a2
send \x04
exit 0
EOF
total=$(sed -n 's/^conversation: \([0-9]*\) of.*/\1/p' "$T/ctrlc/st")
g=$(stat_of "$T/ctrlc/st" generated)
[ -n "$g" ] && [ "$g" -gt 1 ] && [ "$g" -lt 1500 ] && ok "the answer stopped after $g tokens" ||
    not_ok "the interrupted answer has $g tokens"
expect_eq "the next turn reuses the whole cache, partial answer included" \
    "$(stat_of "$T/ctrlc/a2" reused)" "$total"
# the cache after Ctrl-C held exactly the partial answer: recomputing the
# conversation up to it from its tokens (--no-cache) answers the same
run "$KVCHAT" sessions fork cc cc1 --at 1
expect_rc 0
printf 'Go on.\n' | $K --temp 0 -n 8 --no-cache chat cc1 >"$T/cc1.out" 2>"$T/cc1.err"
grep -v '^\[' "$T/ctrlc/a2" >"$T/cc.a2"
python3 -c 'import sys; sys.stdout.write(open(sys.argv[1], "rb").read().decode("utf-8", "replace"))' \
    "$T/cc1.out" >"$T/cc1.txt"
expect_same_file "after Ctrl-C the next answer is the one a full recomputation gives" "$T/cc.a2" "$T/cc1.txt"

# ---- pipe: the answers alone on stdout, everything else on stderr
printf 'Hello there!\n/stats\nWhat is the capital of France?\n' >"$T/in"
run $K --temp 0 -n 8 -v <"$T/in"
expect_rc 0
expect_err 'prefilled'
expect_err '^conversation: '
cat "$T/cached.a1.txt" "$T/cached.a2.txt" >"$T/want"
# (the pty transcript has invalid UTF-8 as U+FFFD: compare likewise)
python3 -c 'import sys; sys.stdout.write(open(sys.argv[1], "rb").read().decode("utf-8", "replace"))' \
    "$T/out" >"$T/out.txt"
expect_same_file "stdout holds the two answers and nothing else" "$T/out.txt" "$T/want"

# ---- a terminal for input, a file for output: the file gets the answers only
drive redirect sh -c "$K --temp 0 -n 8 -v >'$T/redir.out'" <<'EOF'
expect > 
sleep 0.5
say Hello there! a1
discard
EOF
python3 -c 'import sys; sys.stdout.write(open(sys.argv[1], "rb").read().decode("utf-8", "replace"))' \
    "$T/redir.out" >"$T/redir.txt"
expect_same_file "stdout redirected: the answer and nothing else" "$T/redir.txt" "$T/cached.a1.txt"
grep -q '^\[prefilled' "$T/redirect/a1" && ok "...while statistics stay on the terminal" ||
    not_ok "no statistics on the terminal"

# ---- a full context window: say so, offer to drop the oldest exchanges
drive full $K --temp 0 -n -1 -c 64 <<'EOF'
expect > 
sleep 0.5
line Hello there!
expect the context window is full
expect > 
line And now?
expect does not fit in the context window
expect Drop the oldest exchanges until it fits\? .* \[y/N\] 
line n
expect nothing dropped
expect > 
line And now?
expect Drop the oldest
line y
expect dropped the 1 oldest exchange
expect > 
say /show show
discard
EOF
grep -q 'context  *[0-9]* of 64 tokens, 1 exchange,' "$T/full/show" && ok "one exchange left after dropping" ||
    { not_ok "/show after dropping"; cat "$T/full/show"; }

finish
