#!/bin/sh
# t0703: sessions with a remote model, against tests/cli/chatserver.py on
# 127.0.0.1: `run -s` resumes the session by name in each process and sends
# the whole history in order (the server's prefix cache grows with it); the
# sampling options of a session's turn reach the request (temperature,
# top_p, seed, max_tokens, stop); every failure (401, 404, 400, 500 after
# the retries, a refused connection, a timeout, a malformed answer) keeps
# its message and exit code and leaves the session as it was; a cut answer
# is kept, marked "cut" and sent as it is next time; Ctrl-C keeps the
# partial answer (exit 130), before any text it keeps nothing; the chat's
# /undo, /retry (a failed retry keeps the answer), /stats, /set and /show
# (what is sent); models rm
# refuses a remote model a session uses; a session reopens with its own
# remote entry without -m, and another entry is refused (exit 3) unless
# --switch-model.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"
. "$TOP/tests/cli/remote-lib.sh"

# interrupt_run MODEL PROMPT SECONDS [options]: `run -s trip` in the background,
# SIGINT SECONDS after the fixture got the request; its status in $rc,
# stdout and stderr in $T/int.out and $T/int.err
interrupt_run() {
    m=$1 q=$2 after=$3
    shift 3
    "$KVCHAT" run -s trip -m "$m" --switch-model "$@" "$q" >"$T/int.out" 2>"$T/int.err" &
    pid=$!
    i=0
    while ! grep -q "\"$q\"" "$T/srv.log" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    sleep "$after"
    kill -INT $pid
    wait $pid
    rc=$?
}
# n_msgs SESSION: how many messages it holds
n_msgs() { "$KVCHAT" sessions show "$1" --json | jq '.messages | length'; }
# unchanged SESSION N WHAT: the session still holds N messages
unchanged() { [ "$(n_msgs "$1")" = "$2" ] && ok "$3: session '$1' unchanged" || not_ok "$3: session '$1' has $(n_msgs "$1") messages, not $2"; }

start_fixture srv
P=$PORT
add echo echo --retries 1

# ---- run -s: two processes, one session ----
run "$KVCHAT" run -s trip -m echo --system "Be brief." "Lisbon?"
expect_rc 0; expect_out "^echo: Lisbon?\$"
run "$KVCHAT" run -s trip -m echo --json "Porto?"
expect_rc 0
[ "$(jq -c '{answer, session, model, remote, stop_reason}' "$T/out")" = '{"answer":"echo: Porto?","session":"trip","model":"echo","remote":true,"stop_reason":"stop"}' ] &&
    ok "--json: the answer in session trip" || not_ok "json: $(cat "$T/out")"
[ "$(last_body | jq -c .messages)" = '[{"role":"system","content":"Be brief."},{"role":"user","content":"Lisbon?"},{"role":"assistant","content":"echo: Lisbon?"},{"role":"user","content":"Porto?"}]' ] &&
    ok "the second process sent the session's history in order" || not_ok "request was $(last_body)"
# the fixture's cache: the characters shared with the request before
c2=$(jq .cached_tokens "$T/out")
run "$KVCHAT" run -s trip -m echo --json "Faro?"
c3=$(jq .cached_tokens "$T/out") p2=$(jq .prompt_tokens "$T/out")
[ "$c3" -gt "$c2" ] && [ "$c3" -lt "$p2" ] && ok "cached_tokens grows with the history ($c2, then $c3)" || not_ok "cached $c2 then $c3"
[ "$(jq -r .prefilled_tokens "$T/out")" = $((p2 - c3)) ] && ok "prefilled_tokens = prompt - cached" || not_ok "json: $(cat "$T/out")"
run "$KVCHAT" run -s trip -m echo --system "Be verbose." "hi"
expect_rc 1; expect_err "session 'trip' has another system prompt; --system is only for a new session"
unchanged trip 7 "another --system"
run "$KVCHAT" sessions
expect_out "^trip  *echo  *3 "

# ---- the sampling options of a session's turn ----
add stopper stop
run "$KVCHAT" run -s opts -m stopper --temp 0.5 --top-p 0.9 --seed 7 -n 30 --stop STOP --stop "never" "go"
expect_rc 0; expect_out "^one \$"
[ "$(last_body | jq -c '{temperature, top_p, seed, max_tokens, stop, top_k}')" = '{"temperature":0.5,"top_p":0.9,"seed":7,"max_tokens":30,"stop":["STOP","never"],"top_k":null}' ] &&
    ok "temperature, top_p, seed, max_tokens and stop sent" || not_ok "request was $(last_body)"
run "$KVCHAT" run -s opts -m stopper --stop ""
expect_rc 1; expect_err "an empty string would end every answer at once"

# ---- a session reopens with its own remote model; another one only when asked ----
run "$KVCHAT" run -s trip --json "Evora?"
expect_rc 0
[ "$(jq -c '{model, remote}' "$T/out")" = '{"model":"echo","remote":true}' ] && ok "without -m: the session's own remote model" ||
    not_ok "json: $(cat "$T/out")"
run "$KVCHAT" run -s trip -m stopper "q"
expect_rc 3; expect_err "session 'trip' was saved with model 'echo', not 'stopper'"
expect_err "add --switch-model"
unchanged trip 9 "another remote model without --switch-model"
run "$KVCHAT" run -s opts -m echo "q"
expect_rc 3; expect_err "session 'opts' was saved with model 'stopper', not 'echo'"
"$KVCHAT" sessions rm trip >/dev/null 2>&1 || true
run "$KVCHAT" run -s trip -m echo --system "Be brief." "Lisbon?"
run "$KVCHAT" run -s trip -m echo "Porto?"
run "$KVCHAT" run -s trip -m echo "Faro?"
unchanged trip 7 "trip made again"

# ---- failures leave the session as it was, each with its code ----
start_fixture keyed --key right-key
KP=$PORT
"$KVCHAT" models add-remote keyed "http://127.0.0.1:$KP/v1" --model echo --api-key-env TEST_KEY 2>/dev/null
run env -u TEST_KEY "$KVCHAT" run -s trip -m keyed --switch-model "q"
expect_rc 2; expect_err "remote model 'keyed': http://127.0.0.1:$KP/v1 wants an API key (HTTP 401: invalid or missing API key): set TEST_KEY\$"
unchanged trip 7 "401"
run env TEST_KEY=right-key "$KVCHAT" run -s trip -m keyed --switch-model "with the key"
expect_rc 0; expect_out "^echo: with the key\$"
add nosuch no-such-model
run "$KVCHAT" run -s trip -m nosuch --switch-model "q"
expect_rc 2; expect_err "has no model 'no-such-model' (HTTP 404: model 'no-such-model' not found); it serves 'echo'"
unchanged trip 9 "404"
add toolong toolong
run "$KVCHAT" run -s trip -m toolong --switch-model "q"
expect_rc 2; expect_err "prompt is too long"
unchanged trip 9 "400"
add fail fail --retries 1
run "$KVCHAT" run -s trip -m fail --switch-model "q"
expect_rc 4; expect_err "remote model 'fail': the server failed (HTTP 500: the GPU caught fire) at http://127.0.0.1:$P/v1; gave up after 2 attempts\$"
unchanged trip 9 "500"
"$KVCHAT" models add-remote refused "http://127.0.0.1:1/v1" --model m 2>/dev/null
run "$KVCHAT" run -s trip -m refused --switch-model "q"
expect_rc 4; expect_err "remote model 'refused': cannot connect to 127.0.0.1 port 1: Connection refused"
unchanged trip 9 "connection refused"
add stallfirst stallfirst --timeout 1 --retries 0
run "$KVCHAT" run -s trip -m stallfirst --switch-model "q"
expect_rc 4; expect_err "remote model 'stallfirst': "
unchanged trip 9 "a timeout"
add malformed malformed
run "$KVCHAT" run -s trip -m malformed --switch-model --json "q"
expect_rc 4; expect_out_empty; expect_err "remote model 'malformed': malformed JSON from the server"
unchanged trip 9 "malformed"

# ---- a cut answer is kept, marked, and sent as it is next time ----
add cut cut
run "$KVCHAT" run -s trip -m cut --switch-model "cut me"
expect_rc 4; expect_out "^partial\$"
expect_err "remote model 'cut': the answer was cut off after 7 bytes: the connection closed before the end of the answer (kept in session 'trip', marked as cut off)\$"
run "$KVCHAT" sessions show trip --json
[ "$(jq -c '.messages[-2:] | map({role, content, stop_reason})' "$T/out")" = '[{"role":"user","content":"cut me","stop_reason":null},{"role":"assistant","content":"partial","stop_reason":"cut"}]' ] &&
    ok "the partial answer saved with stop_reason cut" || not_ok "$(cat "$T/out")"
run "$KVCHAT" sessions show trip
expect_out "^assistant (cut off): partial\$"
run "$KVCHAT" run -s trip -m echo --switch-model "after the cut"
expect_rc 0
[ "$(last_body | jq -c '.messages[-3:]')" = '[{"role":"user","content":"cut me"},{"role":"assistant","content":"partial"},{"role":"user","content":"after the cut"}]' ] &&
    ok "the cut answer is sent as it was kept" || not_ok "request was $(last_body)"
[ "$("$KVCHAT" sessions show trip --json | jq -r '.messages[-1].stop_reason')" = stop ] && ok "a whole answer: stop_reason stop" ||
    not_ok "stop_reason of the last answer"

# ---- Ctrl-C: the partial answer kept (exit 130); before any text, nothing ----
add long long
interrupt_run long "a long one" 0.5 --json
[ "$rc" = 130 ] && ok "Ctrl-C: exit 130" || not_ok "exit $rc: $(cat "$T/int.err")"
[ "$(jq -r .stop_reason "$T/int.out")" = interrupted ] && ok "--json printed, stop_reason interrupted" || not_ok "json: $(cat "$T/int.out")"
got=$(jq -r .answer "$T/int.out")
case "$got" in tick*) ok "a partial answer: '$got'" ;; *) not_ok "answer '$got'" ;; esac
run "$KVCHAT" sessions show trip --json
[ "$(jq -c '.messages[-1] | {content, stop_reason}' "$T/out")" = "$(jq -nc --arg a "$got" '{content: $a, stop_reason: "interrupted"}')" ] &&
    ok "the partial answer is in the session, marked interrupted" || not_ok "$(jq -c '.messages[-1]' "$T/out")"
n_before=$(n_msgs trip)
add stall2 stallfirst
interrupt_run stall2 "never answered" 0.2
[ "$rc" = 130 ] && ok "Ctrl-C before any text: exit 130" || not_ok "exit $rc"
grep -q "interrupted before the answer began: the message was not sent" "$T/int.err" && ok "said so" || not_ok "$(cat "$T/int.err")"
unchanged trip "$n_before" "Ctrl-C before any text"

# ---- the chat: /undo, /retry, /stats, and a failed /retry ----
printf '/undo\n/stats\n' | "$KVCHAT" chat trip --yes -m echo --switch-model >"$T/chat.out" 2>"$T/chat.err"
rc=$?
[ "$rc" = 0 ] && ok "chat: /undo" || { not_ok "chat exit $rc"; cat "$T/chat.err"; }
unchanged trip $((n_before - 2)) "/undo dropped one exchange:"
printf 'Braga?\n/stats\n' | "$KVCHAT" chat trip -m echo >"$T/chat.out" 2>"$T/chat.err"
expect_chat() { grep -q -e "$1" "$T/chat.err" && ok "chat says '$1'" || not_ok "chat lacks '$1': $(cat "$T/chat.err")"; }
grep -q "^echo: Braga?\$" "$T/chat.out" && ok "chat: an answer" || not_ok "$(cat "$T/chat.out")"
expect_chat "^\[server: prompt [0-9]* · cached [0-9]* · generated [0-9]* · first text [0-9]* ms"
expect_chat "this process: 1 answer, [0-9]* prompt tokens from the server's cache"
printf '/retry\n' | "$KVCHAT" chat trip --yes -m echo >"$T/chat.out" 2>"$T/chat.err"
[ "$(last_body | jq -c '.messages[-1]')" = '{"role":"user","content":"Braga?"}' ] && ok "/retry sends the history up to the question" ||
    not_ok "request was $(last_body)"
n_now=$(n_msgs trip)
last=$("$KVCHAT" sessions show trip --json | jq -c '.messages[-1]')
printf '/retry\n' | "$KVCHAT" chat trip --yes -m fail --switch-model >"$T/chat.out" 2>"$T/chat.err"
rc=$?
[ "$rc" = 4 ] && ok "piped chat: a failed turn exits 4" || not_ok "exit $rc"
expect_chat "the server failed (HTTP 500: the GPU caught fire)"
[ "$("$KVCHAT" sessions show trip --json | jq -c '.messages[-1]')" = "$last" ] && [ "$(n_msgs trip)" = "$n_now" ] &&
    ok "a failed /retry keeps the answer it was to replace" || not_ok "the answer changed"

# ---- /set reaches the request; /show says what is sent ----
printf '/show\n/set temp 0.3\n/set parameter num_predict 9\n/show\nValença?\n' | "$KVCHAT" chat trip -m echo --stop END >"$T/chat.out" 2>"$T/chat.err"
expect_chat "^sent  *stop 'END'\$"
expect_chat "^sent  *temperature 0.3, max_tokens 9, stop 'END'\$"
[ "$(last_body | jq -c '{temperature, max_tokens, stop, top_p}')" = '{"temperature":0.3,"max_tokens":9,"stop":["END"],"top_p":null}' ] &&
    ok "/set temp and num_predict sent, with --stop; top_p not set, not sent" || not_ok "request was $(last_body)"

# ---- the session's model is the remote entry ----
run "$KVCHAT" models rm echo
expect_rc 2; expect_err "trip"
[ -f "$KVCHAT_HOME/models/echo.remote" ] && ok "the entry stays" || not_ok "echo.remote removed"
ls "$KVCHAT_HOME/kv" 2>/dev/null | grep -q . && not_ok "KV blocks were written for a remote model" || ok "no KV blocks written"

# ---- a NUL in an answer (\u0000): U+FFFD, printed and saved alike (issue 29) ----
add nul nul
run "$KVCHAT" run -s nulls -m nul "x"
expect_rc 0
printf 'before\357\277\275after\n' > "$T/nul.want"
cmp -s "$T/out" "$T/nul.want" && ok "printed: before U+FFFD after" || not_ok "printed: $(od -c "$T/out" | head -3)"
[ "$("$KVCHAT" sessions show nulls --json | jq -r '.messages[-1].content')" = "$(cat "$T/nul.want")" ] &&
    ok "saved as printed" || not_ok "saved: $("$KVCHAT" sessions show nulls --json | jq -c '.messages[-1]')"

# ---- from remote to local with --switch-model: the answers keep their stop_reason (issue 29) ----
"$MKMODEL" "$T/local.gguf" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null
"$KVCHAT" sessions show trip --json | jq -c '[.messages[] | select(.role == "assistant") | .stop_reason]' > "$T/stops.want"
grep -q '"cut"' "$T/stops.want" && ok "the session has a cut answer: $(cat "$T/stops.want")" || not_ok "stops: $(cat "$T/stops.want")"
run sh -c "timeout -k 5 60 $KVCHAT run -s trip -m $T/local.gguf --switch-model -t 2 --temp 0 -n 3 'locally now' < /dev/null"
expect_rc 0
"$KVCHAT" sessions show trip --json | jq -c '[.messages[] | select(.role == "assistant") | .stop_reason][:-1]' > "$T/stops.got"
cmp -s "$T/stops.want" "$T/stops.got" && ok "the earlier answers keep their stop_reason" ||
    not_ok "stop_reason before $(cat "$T/stops.want"), after $(cat "$T/stops.got")"

finish
