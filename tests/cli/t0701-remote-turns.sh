#!/bin/sh
# t0701: `kvchat run -m REMOTE` against tests/cli/chatserver.py on
# 127.0.0.1: the request's shape (messages in order, only the sampling
# options given, stream with usage), the answer streamed and in --json
# (cached_tokens from usage or llama-server's timings), and every error
# with its message and exit code: 401 naming the variable, 403, 404 listing
# the server's models, 400, 429 then success, 503 then success, 500 until
# the retries run out, a stream cut (the partial answer printed and said to
# be cut), a server that hangs up before answering, an error event, malformed
# events, invalid UTF-8, slow and silent servers, connection refused,
# Ctrl-C; the key never following a redirect to another port; https with a
# test CA (--ca-file and KVCHAT_CA_FILE) and an untrusted certificate.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"
. "$TOP/tests/cli/remote-lib.sh"


start_fixture srv
P=$PORT

# ---- an answer, and what was asked ----
add echo echo
run "$KVCHAT" run -m echo "Grüß dich 🎉"
expect_rc 0; expect_out "^echo: Grüß dich 🎉\$"
[ "$(last_body)" = '{"model":"echo","messages":[{"role":"user","content":"Grüß dich 🎉"}],"stream":true,"stream_options":{"include_usage":true}}' ] &&
    ok "request: the message, streaming with usage, no sampling fields" || not_ok "request was $(last_body)"
[ "$(tail -n 1 "$T/srv.log" | jq -r .accept)" = "text/event-stream" ] && ok "Accept: text/event-stream" || not_ok "Accept header"
run "$KVCHAT" run -m echo --system "Be brief." --temp 0.5 --top-p 0.9 --seed 42 -n 20 --presence-penalty 0.25 "hi"
expect_rc 0
[ "$(last_body)" = '{"model":"echo","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"top_p":0.9,"presence_penalty":0.25,"seed":42,"max_tokens":20}' ] &&
    ok "request: system first, the options given" || not_ok "request was $(last_body)"
mkdir -p "$XDG_CONFIG_HOME/kvchat"
printf 'temp = 0.25\ntop_k = 5\n' >"$XDG_CONFIG_HOME/kvchat/config"
run "$KVCHAT" run -m echo --top-k 3 --min-p 0.1 "hi"
expect_rc 0; expect_err "note: --top-k, --min-p: not for remote model 'echo' (the server decides); ignored"
[ "$(last_body | jq -c '{temperature, top_k, min_p}')" = '{"temperature":0.25,"top_k":null,"min_p":null}' ] &&
    ok "the config file's temp is sent, top_k and min_p are not" || not_ok "request was $(last_body)"
rm "$XDG_CONFIG_HOME/kvchat/config"
printf 'from stdin\n' | "$KVCHAT" run -m echo >"$T/out" 2>"$T/err"
expect_out "^echo: from stdin\$"

# --json: the server's usage; the same system prompt again is found in its cache
run "$KVCHAT" run -m echo --json --system "You plan trips." "Lisbon?"
expect_rc 0
jq -e . "$T/out" >/dev/null && ok "valid JSON" || not_ok "jq cannot parse it"
[ "$(jq -c '{answer, session, model, remote, stop_reason, attempts, server_model}' "$T/out")" = '{"answer":"echo: Lisbon?","session":null,"model":"echo","remote":true,"stop_reason":"stop","attempts":1,"server_model":"fixture"}' ] &&
    ok "json fields" || not_ok "json: $(cat "$T/out")"
run "$KVCHAT" run -m echo --json --system "You plan trips." "Porto?"
prompt=$(jq .prompt_tokens "$T/out") cached=$(jq .cached_tokens "$T/out") pre=$(jq .prefilled_tokens "$T/out")
[ "$cached" -gt 20 ] && [ $((cached + pre)) = "$prompt" ] && ok "cached_tokens $cached of $prompt (the shared system prompt)" ||
    not_ok "cached $cached prefilled $pre prompt $prompt"
add lcpp llamacpp
run "$KVCHAT" run -m lcpp --json --system "You plan trips." "Faro?"
[ "$(jq -c '{prefill_tok_s, decode_tok_s}' "$T/out")" = '{"prefill_tok_s":1234.5,"decode_tok_s":56.5}' ] &&
    [ "$(jq .cached_tokens "$T/out")" -gt 20 ] && ok "llama-server's timings: cache_n and rates" || not_ok "json: $(cat "$T/out")"
add nousage nousage
run "$KVCHAT" run -m nousage --json "hi"
[ "$(jq -c '{answer, prompt_tokens, cached_tokens, prefilled_tokens, generated_tokens}' "$T/out")" = '{"answer":"echo: hi","prompt_tokens":null,"cached_tokens":null,"prefilled_tokens":null,"generated_tokens":null}' ] &&
    ok "no usage: nulls, not zeros" || not_ok "json: $(cat "$T/out")"
add length length
run "$KVCHAT" run -m length --json "hi"
[ "$(jq -r .stop_reason "$T/out")" = length ] && ok "stop_reason length" || not_ok "json: $(cat "$T/out")"
add whole whole
run "$KVCHAT" run -m whole "not streamed"
expect_rc 0; expect_out "^echo: not streamed\$"
add nostream echo --no-stream
run "$KVCHAT" run -m nostream "hi"
[ "$(last_body | jq -c '{stream, stream_options}')" = '{"stream":false,"stream_options":null}' ] &&
    ok "--no-stream asks for a whole answer" || not_ok "request was $(last_body)"
add slow slow
run "$KVCHAT" run -m slow "übermäßig"
expect_rc 0; expect_out "^echo: übermäßig\$"
run "$KVCHAT" run -m echo -v "hi"
expect_err "remote 'echo' (fixture): [0-9]* prompt tokens ([0-9]* from the server's cache), [0-9]* generated; first text after"

# ---- the key ----
start_fixture keyed --key right-key
P=$PORT
add keyed echo --api-key-env TEST_KEY
run env -u TEST_KEY "$KVCHAT" run -m keyed "hi"
expect_rc 2; expect_out_empty
expect_err "remote model 'keyed': http://127.0.0.1:$P/v1 wants an API key (HTTP 401: invalid or missing API key): set TEST_KEY\$"
run env TEST_KEY=wrong-key "$KVCHAT" run -m keyed "hi"
expect_rc 2; expect_err "refused the API key in TEST_KEY (HTTP 401: invalid or missing API key)"
run env TEST_KEY=right-key "$KVCHAT" run -m keyed "hi"
expect_rc 0; expect_out "^echo: hi\$"
[ "$(tail -n 1 "$T/keyed.log" | jq -r .auth)" = "Bearer right-key" ] && ok "the key went as a bearer token" || not_ok "auth header"
add nokey echo
run "$KVCHAT" run -m nokey "hi"
expect_rc 2; expect_err "wants an API key (HTTP 401: invalid or missing API key): add the model again with --api-key-env VAR"
run env TEST_KEY="$(printf 'a\r\nX-Evil: 1')" "$KVCHAT" run -m keyed "hi"
expect_rc 1; expect_err "the API key in TEST_KEY holds spaces or control characters; refusing to send it"
# a 307 to another port: the request follows, the key does not
start_fixture target
TARGET=$PORT
start_fixture hop --redirect "http://127.0.0.1:$TARGET/v1"
P=$PORT
add hop echo --api-key-env TEST_KEY
run env TEST_KEY=right-key "$KVCHAT" run -m hop "hi"
expect_rc 0; expect_out "^echo: hi\$"
[ "$(jq -r .auth "$T/hop.log")" = "Bearer right-key" ] && ok "the key went to its origin" || not_ok "hop auth"
[ "$(jq -r .auth "$T/target.log")" = null ] && ok "the key did not follow the redirect" || not_ok "target saw $(jq -r .auth "$T/target.log")"
[ "$(jq -r .body.messages[0].content "$T/target.log")" = hi ] && ok "the body did" || not_ok "target body"

# ---- the server says no ----
P=$(cat "$T/srv.port")
add forbidden forbidden --api-key-env TEST_KEY
run env TEST_KEY=k "$KVCHAT" run -m forbidden "hi"
expect_rc 2; expect_err "does not allow this with the API key in TEST_KEY (HTTP 403: this key may not use this model)"
add nosuch no-such-model
run "$KVCHAT" run -m nosuch "hi"
expect_rc 2; expect_out_empty
expect_err "remote model 'nosuch': http://127.0.0.1:$P/v1 has no model 'no-such-model' (HTTP 404: model 'no-such-model' not found); it serves 'echo', 'whole', "
add toolong toolong
run "$KVCHAT" run -m toolong "hi"
expect_rc 2; expect_err "rejected the request (HTTP 400: prompt is too long (4097 > 4096 tokens))"
"$KVCHAT" models add-remote --force notv1 "http://127.0.0.1:$P/api" --model echo 2>/dev/null
run "$KVCHAT" run -m notv1 "hi"
expect_rc 2; expect_err "answered 404 to /chat/completions and /models (HTTP 404: no route /api/chat/completions): is it the server's /v1 base?"

# ---- busy and failing servers: retries, then a clear error ----
add busy busy --retries 3
run "$KVCHAT" run -m busy --json "hi"
expect_rc 0
expect_err "the server is busy (HTTP 429: too many requests); retrying in 0 s (1 of 3)"
expect_err "retrying in 0 s (2 of 3)"
[ "$(jq -c '{answer, attempts}' "$T/out")" = '{"answer":"echo: hi","attempts":3}' ] && ok "the third attempt answered" || not_ok "json: $(cat "$T/out")"
add flaky flaky --retries 1
run "$KVCHAT" run -m flaky "hi"
expect_rc 0; expect_out "^echo: hi\$"; expect_err "the server failed (HTTP 503: warming up); retrying in 1 s (1 of 1)"
add fail fail --retries 1
run "$KVCHAT" run -m fail "hi"
expect_rc 4; expect_out_empty
expect_err "remote model 'fail': the server failed (HTTP 500: the GPU caught fire) at http://127.0.0.1:$P/v1; gave up after 2 attempts\$"
add fail0 fail --retries 0
run "$KVCHAT" run -m fail0 "hi"
expect_rc 4; expect_err "gave up after 1 attempt\$"

# ---- answers that break ----
add cut cut
run "$KVCHAT" run -m cut "hi"
expect_rc 4; expect_out "^partial\$"
expect_err "remote model 'cut': the answer was cut off after 7 bytes: the connection closed before the end of the answer"
run "$KVCHAT" run -m cut --json "hi"
expect_rc 4
[ "$(jq -c '{answer, stop_reason}' "$T/out")" = '{"answer":"partial","stop_reason":"cut"}' ] && ok "--json: the partial answer, stop_reason cut" ||
    not_ok "json: $(cat "$T/out")"
expect_out "\"error\": \"remote model 'cut': the answer was cut off after 7 bytes: the connection closed before the end of the answer\""
add cutchunked cutchunked
run "$KVCHAT" run -m cutchunked "hi"
expect_rc 4; expect_out "^par\$"; expect_err "cut off after 3 bytes: connection closed inside a chunked body"
add cutearly cutearly --retries 1
run "$KVCHAT" run -m cutearly "hi"
expect_rc 4; expect_out_empty
expect_err "the server closed the connection before any answer; retrying in 1 s (1 of 1)"
expect_err "remote model 'cutearly': the server closed the connection before any answer\$"
add errorevent errorevent
run "$KVCHAT" run -m errorevent "hi"
expect_rc 4; expect_out "^partial\$"; expect_err "cut off after 7 bytes: the server reported an error: out of memory"
add malformed malformed
run "$KVCHAT" run -m malformed "hi"
expect_rc 4; expect_out_empty
expect_err "remote model 'malformed': malformed JSON from the server (line 1, column 4, byte 4): string or '}' expected near 'not'"
add badutf8 badutf8
run "$KVCHAT" run -m badutf8 "hi"
expect_rc 4; expect_out_empty; expect_err "malformed JSON from the server (line 1, column [0-9]*, byte [0-9]*): unable to decode byte 0xff"
add wrongtype wrongtype
run "$KVCHAT" run -m wrongtype "hi"
expect_rc 4; expect_err "malformed response from the server: choices\[0\].delta.content is not a string"
add latebad latebad
run "$KVCHAT" run -m latebad --json "hi"
expect_rc 4
[ "$(jq -r .answer "$T/out")" = partial ] && ok "text before the garbage is kept" || not_ok "json: $(cat "$T/out")"
expect_err "the answer was cut off after 7 bytes: malformed JSON from the server"

# ---- silence, refusal, Ctrl-C ----
add stall stall --timeout 1
run "$KVCHAT" run -m stall "hi"
expect_rc 4; expect_out "^part\$"; expect_err "cut off after 4 bytes: read failed: timed out after 1 s without data"
add stallfirst stallfirst --timeout 1 --retries 3
start=$(date +%s)
run "$KVCHAT" run -m stallfirst "hi"
took=$(($(date +%s) - start))
expect_rc 4; expect_err "read failed: timed out after 1 s without data (before any answer)"
[ "$took" -lt 4 ] && ok "a silent server is not retried (${took} s)" || not_ok "took $took s"
"$KVCHAT" models add-remote --force refused "http://127.0.0.1:1/v1" --model m 2>/dev/null
run "$KVCHAT" run -m refused "hi"
expect_rc 4; expect_err "remote model 'refused': cannot connect to 127.0.0.1 port 1: Connection refused"
add long long
"$KVCHAT" run -m long "hi" >"$T/long.out" 2>"$T/long.err" &
pid=$!
i=0
while ! grep -q "tick 3" "$T/long.out" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
expect_interrupted $pid "Ctrl-C"
grep -q "^tick 0 tick 1 tick 2 tick 3" "$T/long.out" && ok "the partial answer was printed" || not_ok "long.out: $(cat "$T/long.out")"
grep -q "tick 199" "$T/long.out" && not_ok "it went on to the end" || ok "it stopped"
"$KVCHAT" run -m stallfirst "hi" >"$T/sf.out" 2>"$T/sf.err" &
pid=$!
sleep 0.3
expect_interrupted $pid "Ctrl-C while waiting for the first byte"

# ---- https: the test CA, by --ca-file and by KVCHAT_CA_FILE; an untrusted certificate ----
mk_ca
mk_cert good "DNS:127.0.0.1,IP:127.0.0.1"
mk_ca_other() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=other CA" \
        -keyout "$T/pki/other.key" -out "$T/pki/other.crt" 2>>"$T/pki/log"
}
mk_ca_other
start_fixture tls --tls "$T/pki/good.crt" "$T/pki/good.key" --key tls-key
TP=$PORT
run "$KVCHAT" models add-remote secure "https://127.0.0.1:$TP/v1" --model echo --api-key-env TEST_KEY --ca-file "$T/pki/ca.crt"
expect_rc 0
grep -q "^ca_file = $T/pki/ca.crt\$" "$KVCHAT_HOME/models/secure.remote" && ok "ca_file recorded" || not_ok "no ca_file line"
grep -q "unencrypted" "$T/err" && not_ok "https said unencrypted" || ok "no http note for https"
run env TEST_KEY=tls-key "$KVCHAT" run -m secure "over tls"
expect_rc 0; expect_out "^echo: over tls\$"
[ "$(tail -n 1 "$T/tls.log" | jq -r .auth)" = "Bearer tls-key" ] && ok "the key went over TLS" || not_ok "tls auth"
run "$KVCHAT" models add-remote envca "https://127.0.0.1:$TP/v1" --model echo --api-key-env TEST_KEY
expect_rc 0
run env TEST_KEY=tls-key KVCHAT_CA_FILE="$T/pki/ca.crt" "$KVCHAT" run -m envca "by env"
expect_rc 0; expect_out "^echo: by env\$"
run env TEST_KEY=tls-key KVCHAT_CA_FILE="$T/pki/other.crt" "$KVCHAT" run -m envca "untrusted"
expect_rc 4; expect_out_empty
expect_err "remote model 'envca': TLS handshake with '127.0.0.1' failed: the certificate is not trusted"
[ "$(grep -c '"content": "untrusted"' "$T/tls.log")" = 0 ] && ok "nothing was sent to an untrusted server" || not_ok "the message reached it"

finish
