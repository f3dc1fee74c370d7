#!/bin/sh
# t0013: what `kvchat run` promises a script - SIGTERM (as `timeout` sends)
# and SIGHUP end the answer as SIGINT does: the partial answer printed
# (the JSON object with --json, stop_reason "interrupted"), kept in the
# session, exit 130; the plain answer ends with a newline; --system on an
# existing session with another system prompt is refused, the session
# unchanged; -c beyond the model's trained positions warns.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" --ctx 65536 || exit 1
M8=$T/m8k.gguf
qwen2_tiny "$M8" --ctx 8192 || exit 1
# a long answer: sampled, no stop before the signal
LONG="-m $M -t 1 --temp 0.9 --seed 1 -n 100000 -c 32768"

# last_answer SESSION: the session's last message (must be the assistant's)
last_answer() {
    "$KVCHAT" sessions export "$1" | jq -j 'if .messages[-1].role == "assistant" then .messages[-1].content else error("no answer") end'
}

# ---- SIGTERM, SIGHUP, SIGINT with --json and a session
for sig in TERM HUP INT; do
    s=sig$sig
    wait_s=1
    for attempt in 1 2 3; do
        "$KVCHAT" run $LONG --json -s "$s$attempt" 'go on' </dev/null >"$T/$s.json" 2>"$T/$s.err" &
        pid=$!
        sleep $wait_s
        kill -$sig $pid
        wait $pid
        rc=$?
        gen=$(jq -r .generated_tokens "$T/$s.json" 2>/dev/null)
        [ "${gen:-0}" -gt 0 ] 2>/dev/null && break
        wait_s=$((wait_s * 2)) # the signal came before the answer began: give it longer
    done
    s=$s$attempt
    [ "$rc" = 130 ] && ok "SIG$sig: exit 130" || not_ok "SIG$sig: exit $rc"
    [ "$(jq -r .stop_reason "$T/sig$sig.json" 2>/dev/null)" = interrupted ] && ok "SIG$sig: JSON with stop_reason interrupted" ||
        { not_ok "SIG$sig: no JSON with stop_reason interrupted"; cat "$T/sig$sig.json" "$T/sig$sig.err"; }
    [ "${gen:-0}" -gt 0 ] 2>/dev/null && ok "SIG$sig: $gen tokens generated" || not_ok "SIG$sig: nothing generated"
    last_answer "$s" >"$T/$s.saved" 2>/dev/null
    jq -j .answer "$T/sig$sig.json" >"$T/$s.printed" 2>/dev/null
    [ -s "$T/$s.saved" ] && cmp -s "$T/$s.saved" "$T/$s.printed" &&
        ok "SIG$sig: the partial answer is the session's last message" ||
        not_ok "SIG$sig: the session does not end with the printed answer"
    # the session goes on from the partial answer
    run sh -c "$KVCHAT run -m $M -t 1 --temp 0 -n 4 -c 32768 --json -s $s 'and then?' < /dev/null"
    expect_rc 0
    [ "$("$KVCHAT" sessions list --json | jq ".[] | select(.name == \"$s\") | .turns")" = 2 ] &&
        ok "SIG$sig: the session has both turns" || not_ok "SIG$sig: turns"
done

# ---- timeout(1) sends SIGTERM: plain output, ended by a newline
timeout --preserve-status 2 "$KVCHAT" run $LONG -s tmo 'go on' </dev/null >"$T/tmo.out" 2>"$T/tmo.err"
rc=$?
[ "$rc" = 130 ] && ok "timeout: exit 130 (the status timeout preserves)" || not_ok "timeout: exit $rc"
[ -s "$T/tmo.out" ] && [ "$(tail -c 1 "$T/tmo.out" | od -An -c | tr -d ' ')" = '\n' ] &&
    ok "timeout: the partial answer ends with a newline" || not_ok "timeout: no partial answer ending in a newline"
# same_text PLAIN JSON_TEXT: PLAIN (raw bytes, invalid UTF-8 replaced as JSON
# text must have it) is JSON_TEXT and one newline
same_text() {
    python3 -c "import sys; a=open(sys.argv[1],'rb').read().decode('utf-8','replace'); b=open(sys.argv[2],encoding='utf-8',newline='').read(); sys.exit(a != (b if b.endswith('\n') else b + '\n'))" "$1" "$2"
}
last_answer tmo >"$T/tmo.saved"
same_text "$T/tmo.out" "$T/tmo.saved" && ok "timeout: printed = saved, plus the newline" || not_ok "timeout: printed and saved differ"

# ---- a signal while the prompt is read from stdin: exit 130, nothing kept
(sleep 5; echo late) | "$KVCHAT" run -m "$M" -t 1 -s early >"$T/early.out" 2>"$T/early.err" &
sleep 1
pid=$(pgrep -n -f "$KVCHAT run -m $M -t 1 -s early")
[ -n "$pid" ] && kill -TERM "$pid"
wait $!
rc=$?
[ "$rc" = 130 ] && ok "SIGTERM while reading stdin: exit 130" || not_ok "SIGTERM while reading stdin: exit $rc"
"$KVCHAT" sessions list --json | jq -e '.[] | select(.name == "early")' >/dev/null &&
    not_ok "no session made" || ok "no session made"

# ---- plain answers end with a newline: two runs appended to a log stay apart
R="$KVCHAT run -m $M -t 1 --temp 0 -n 6"
run sh -c "$R 'Hello there' < /dev/null >> $T/log; $R 'Hello there' < /dev/null >> $T/log"
expect_rc 0
[ "$(wc -l < "$T/log")" -ge 2 ] && [ "$(tail -c 1 "$T/log" | od -An -c | tr -d ' ')" = '\n' ] &&
    ok "each piped answer ends its line" || { not_ok "piped answers run together"; od -c "$T/log" | tail -3; }
run sh -c "$R --json 'Hello there' < /dev/null"
jq -j .answer "$T/out" >"$T/a.json"
run sh -c "$R 'Hello there' < /dev/null"
same_text "$T/out" "$T/a.json" && ok "the plain answer is the JSON answer and one newline" || not_ok "plain and JSON answers differ"

# ---- --system belongs to a new session
S="$KVCHAT run -m $M -t 1 --temp 0 -n 4"
run sh -c "$S -s sys --system 'You are terse.' hi < /dev/null"
expect_rc 0
run sh -c "$S -s sys --system 'You are terse.' again < /dev/null"
expect_rc 0; [ ! -s "$T/err" ] && ok "the same system prompt: no complaint" || not_ok "the same system prompt: $(cat "$T/err")"
run sh -c "$S -s sys more < /dev/null"
expect_rc 0
turns() { "$KVCHAT" sessions list --json | jq ".[] | select(.name == \"$1\") | .turns"; }
before=$(turns sys)
run sh -c "$S -s sys --system 'You are verbose.' once more < /dev/null"
expect_rc 1; expect_out_empty; expect_err "session 'sys' has another system prompt; --system is only for a new session"
printf 'You are verbose.\n' >"$T/sys.txt"
run sh -c "$S -s sys --system-file $T/sys.txt once more < /dev/null"
expect_rc 1; expect_err "--system-file is only for a new session"
[ "$(turns sys)" = "$before" ] && ok "refused: the session is unchanged ($before turns)" || not_ok "the session changed"
"$KVCHAT" sessions export sys | jq -e '.messages[0].content == "You are terse."' >/dev/null &&
    ok "the session keeps its system prompt" || not_ok "the system prompt changed"
run sh -c "$S -s nosys hi < /dev/null"
run sh -c "$S -s nosys --system 'You are terse.' again < /dev/null"
expect_rc 1; expect_err "session 'nosys' has no system prompt"

# ---- -c beyond the trained positions warns (chat and run); within, nothing
run sh -c "$KVCHAT run -m $M8 -t 1 --temp 0 -n 2 -c 30000 hi < /dev/null"
expect_rc 0; expect_err "warning: a context of 30000 tokens is more than the 8192 positions"
run sh -c "$KVCHAT run -m $M8 -t 1 --temp 0 -n 2 -c 8192 hi < /dev/null"
expect_rc 0; grep -q warning "$T/err" && not_ok "-c 8192: a warning" || ok "-c 8192: no warning"
run sh -c "echo hi | $KVCHAT chat -m $M8 -t 1 --temp 0 -n 2 -c 16384"
expect_rc 0; expect_err "more than the 8192 positions"
finish
