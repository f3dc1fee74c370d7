#!/bin/sh
# t0700: remote models in the store, against tests/cli/chatserver.py on
# 127.0.0.1: models add-remote (the server's only model, or several and
# --model), the URL rules (http:// only for loopback and private addresses,
# saying so), the key's variable (never stored), list/--json, info
# (reachable or not), default, path, rm, names shared with local models,
# pull refusing a remote name, and rm refusing an entry a session uses.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"
. "$TOP/tests/cli/remote-lib.sh"
M=$KVCHAT_HOME/models
CONF=$XDG_CONFIG_HOME/kvchat/config


start_fixture one --models only-model
ONE=$PORT
start_fixture many
MANY=$PORT

# ---- add-remote ----
run "$KVCHAT" models add-remote solo "http://127.0.0.1:$ONE/v1/"
expect_rc 0; expect_out_empty
expect_err "added remote model 'solo': only-model at http://127.0.0.1:$ONE/v1\$"
[ -f "$M/solo.remote" ] && ok "entry written" || not_ok "no $M/solo.remote"
grep -q "^url = http://127.0.0.1:$ONE/v1\$" "$M/solo.remote" && ok "trailing / dropped" || not_ok "url line"
grep -q '"path": "/v1/models"' "$T/one.log" && ok "asked the server for its models" || not_ok "no /v1/models request"

run "$KVCHAT" models add-remote several "http://127.0.0.1:$MANY/v1"
expect_rc 1; expect_err "serves [0-9]* models ('echo', 'whole'.*); choose one with --model ID"
[ ! -e "$M/several.remote" ] && ok "nothing written" || not_ok "entry written anyway"

export KEY_FOR_TEST=sk-secret-value-123
run "$KVCHAT" models add-remote echo "http://127.0.0.1:$MANY/v1" --model echo --api-key-env KEY_FOR_TEST --timeout 30 --retries 1
expect_rc 0; expect_err "key from \$KEY_FOR_TEST"
grep -q sk-secret "$M/echo.remote" && not_ok "the key was stored" || ok "the key is not in the entry"
grep -q "^api_key_env = KEY_FOR_TEST\$" "$M/echo.remote" && ok "the variable's name is" || not_ok "api_key_env line"
grep -rq sk-secret "$KVCHAT_HOME" "$XDG_CONFIG_HOME" 2>/dev/null && not_ok "the key is somewhere under the home" || ok "the key is nowhere on disk"

run "$KVCHAT" models add-remote echo "http://127.0.0.1:$MANY/v1" --model echo
expect_rc 1; expect_err "there is already a remote model 'echo' (--force replaces it)"
run "$KVCHAT" models add-remote bad "http://127.0.0.1:$MANY/v1" --model echo --api-key-env 'NOT-A-VAR'
expect_rc 1; expect_err "'NOT-A-VAR' is not an environment variable name"
for bad in "--timeout 0" "--timeout 86401" "--timeout 5s" "--timeout=" "--retries 101" "--retries -1" "--retries="; do
    run "$KVCHAT" models add-remote badnum "http://127.0.0.1:$MANY/v1" --model echo $bad
    expect_rc 1; expect_err "models add-remote: bad ${bad%%[ =]*}"
done
run "$KVCHAT" models pull --retries x hf:a/b/c.gguf
expect_rc 1; expect_err "models pull: bad --retries 'x'"
run "$KVCHAT" models add-remote pub "http://8.8.8.8:8000/v1" --model x
expect_rc 1; expect_err "refusing plain http://: 8.8.8.8 is not a loopback or private address; use https://"
run "$KVCHAT" models add-remote pub6 "http://[2001:4860:4860::8888]/v1" --model x
expect_rc 1; expect_err "is not a loopback or private address"
run "$KVCHAT" models add-remote ftp "ftp://127.0.0.1/v1" --model x
expect_rc 1; expect_err "not an http:// or https:// URL"
run "$KVCHAT" models add-remote lan "http://192.168.99.1:8000/v1" --model m --api-key-env KEY_FOR_TEST
expect_rc 0
expect_err "note: plain http:// (allowed only for loopback and private addresses): the conversation and the API key cross the local network unencrypted"
run "$KVCHAT" models add-remote tls "https://127.0.0.1:1/v1" --model m --ca-file "$T/nonexistent.pem"
expect_rc 1; expect_err "cannot read CA file"
run "$KVCHAT" models add-remote down "http://127.0.0.1:1/v1"
expect_rc 4; expect_err "cannot ask http://127.0.0.1:1/v1 for its models (cannot connect.*); give the model with --model ID"
run "$KVCHAT" models add-remote
expect_rc 1; expect_err "expected NAME and URL"

# ---- names: a local and a remote model never share one ----
mkdir -p "$M"
"$MKMODEL" "$M/tiny.gguf" --dim 64 --heads 4 --kv-heads 2 --layers 1 --ff 128 >/dev/null || exit 1
run "$KVCHAT" models add-remote tiny "http://127.0.0.1:$MANY/v1" --model echo
expect_rc 1; expect_err "'tiny' is a local model in the store; choose another name"
run "$KVCHAT" models pull --name echo https://127.0.0.1:1/x.gguf
expect_rc 1; expect_err "'echo' is a remote model in the store; choose another name with --name"

# ---- list ----
run "$KVCHAT" models list
expect_rc 0
expect_out "^  echo  *remote  -  *-  *-  *[0-9-]* [0-9:]*  http://127.0.0.1:$MANY/v1 (model echo, key \$KEY_FOR_TEST)\$"
expect_out "^  solo  *remote .*(model only-model)\$"
expect_out "^  tiny .*F32 *llama"
run "$KVCHAT" models list --json
expect_rc 0
[ "$(jq length "$T/out")" = 4 ] && ok "one JSON array of 4 models" || not_ok "wanted an array of 4"
expect_out "{\"name\": \"echo\", \"remote\": true, \"size\": null, \"quant\": null, \"arch\": null, \"n_params\": null, \"path\": \"$M/echo.remote\", \"pulled\": [0-9]*, \"source\": null, \"sha256\": null, \"url\": \"http://127.0.0.1:$MANY/v1\", \"remote_model\": \"echo\", \"api_key_env\": \"KEY_FOR_TEST\", \"default\": false, \"error\": null}"
expect_out '"name": "tiny", "remote": false, '
[ "$(jq -c '[.[] | keys] | unique | length' "$T/out")" = 1 ] && ok "remote and local entries have the same keys" ||
    not_ok "keys differ: $(jq -c '[.[] | keys] | unique' "$T/out")"

# ---- default, path, -m ----
run "$KVCHAT" models default echo
expect_rc 0; expect_err "default model is now 'echo'"
grep -q '^model = echo$' "$CONF" && ok "config has the name" || not_ok "config lacks 'model = echo'"
run "$KVCHAT" models list
expect_out "^\* echo  *remote"
run "$KVCHAT" models path echo
expect_rc 0; expect_out "^$M/echo.remote\$"
run "$KVCHAT" run "through the default"
expect_rc 0; expect_out "^echo: through the default\$"

# ---- info ----
run "$KVCHAT" models info echo
expect_rc 0
expect_out "^name:  *echo (remote)\$"
expect_out "^url:  *http://127.0.0.1:$MANY/v1\$"
expect_out "^model:  *echo\$"
expect_out "^api key:  *from \$KEY_FOR_TEST (set)\$"
expect_out "^transport:  *plain http (a loopback or private address; not encrypted)\$"
expect_out "^timeout:  *30 s without data; 1 retries"
expect_out "^server:  *serves [0-9]* models: echo, whole"
run env -u KEY_FOR_TEST "$KVCHAT" models info --json echo
expect_rc 0
expect_out '"api_key_env": "KEY_FOR_TEST", "api_key_set": false, "tls": false'
expect_out '"server": {"reachable": true, "models": \["echo", "whole"'
expect_out '"serves_model": true}'
jq -e . "$T/out" >/dev/null && ok "valid JSON" || not_ok "jq cannot parse it"
"$KVCHAT" models add-remote gone "http://127.0.0.1:1/v1" --model m 2>/dev/null
run "$KVCHAT" models info gone
expect_rc 0; expect_out "^server:  *cannot list its models: cannot connect to 127.0.0.1 port 1"
run "$KVCHAT" models info --offline gone
expect_rc 0
grep -q '^server:' "$T/out" && not_ok "--offline asked the server" || ok "--offline: no server line"

# ---- a session's model is the entry: rm refuses it while a session uses it ----
run "$KVCHAT" run -s trip -m echo "hi"
expect_rc 0; expect_out "^echo: hi\$"
run "$KVCHAT" chat -m echo </dev/null
expect_rc 0
run "$KVCHAT" models rm echo
expect_rc 2; expect_err "cannot remove 'echo': model 'echo' is used by session 'trip' (use --force to remove it anyway)"
[ -e "$M/echo.remote" ] && ok "entry kept" || not_ok "entry removed"
run "$KVCHAT" sessions rm trip
expect_rc 0

# ---- rm ----
run "$KVCHAT" models rm echo
expect_rc 0; expect_err "removed 'echo'"; expect_err "'echo' was the default model; there is none now"
[ ! -e "$M/echo.remote" ] && ok "entry gone" || not_ok "entry still there"
run "$KVCHAT" models rm echo
expect_rc 2; expect_err "no model 'echo' in the store"
run "$KVCHAT" run -m echo "hi"
expect_rc 2; expect_err "cannot find model 'echo'"

finish
