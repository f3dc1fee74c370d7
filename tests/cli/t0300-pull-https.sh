#!/bin/sh
# t0300: models pull over HTTPS from nginx on 127.0.0.1 with a test CA:
# a plain pull, the hub's 302 to a CDN on another port (X-Linked-ETag
# checked, HF_TOKEN only to the hub), hf:OWNER/REPO:QUANT via the hub API,
# --sha256, and the failures: checksum mismatch, untrusted certificate,
# hostname mismatch, 404, 500, redirect to http, redirect loop.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"

mk_ca
mk_cert good "DNS:127.0.0.1,IP:127.0.0.1"
mk_cert wrong "DNS:other.example"
mkdir -p "$T/www/files" "$T/www/cdn"
"$MKMODEL" "$T/www/files/model.gguf" --dim 128 --layers 2 --ff 344 >/dev/null || exit 1
cp "$T/www/files/model.gguf" "$T/www/cdn/model.gguf"
SHA=$(sha256sum "$T/www/files/model.gguf" | cut -d' ' -f1)
SIZE=$(wc -c <"$T/www/files/model.gguf")
BAD=0000000000000000000000000000000000000000000000000000000000000000
P1=$(free_port) P2=$(free_port) P3=$(free_port)
CA=$T/pki/ca.crt
cat >"$T/servers" <<CONF
server {
    listen 127.0.0.1:$P1 ssl;
    ssl_certificate $T/pki/good.crt;
    ssl_certificate_key $T/pki/good.key;
    root $T/www;
    location /files/ { }
    location = /err500 { return 500; }
    location = /to-http { return 302 http://127.0.0.1:$P2/cdn/model.gguf; }
    location = /loop { return 302 /loop; }
    location = /api/models/owner/repo {
        default_type application/json;
        return 200 '{"id":"owner/repo","siblings":[{"rfilename":"README.md"},{"rfilename":"repo-F16.gguf"},{"rfilename":"repo-Q8_0.gguf"}]}';
    }
    location = /api/models/owner/down { return 503; }
    location /owner/repo/resolve/main/ {
        add_header X-Linked-ETag '"$SHA"';
        add_header X-Linked-Size $SIZE;
        return 302 https://127.0.0.1:$P2/cdn/model.gguf;
    }
    location = /Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_k_m.gguf {
        add_header X-Linked-ETag '"$SHA"';
        return 302 https://127.0.0.1:$P2/cdn/model.gguf;
    }
    location /owner/badsum/resolve/main/ {
        add_header X-Linked-ETag '"$BAD"';
        return 302 https://127.0.0.1:$P2/cdn/model.gguf;
    }
}
server {
    listen 127.0.0.1:$P2 ssl;
    ssl_certificate $T/pki/good.crt;
    ssl_certificate_key $T/pki/good.key;
    root $T/www;
}
server {
    listen 127.0.0.1:$P3 ssl;
    ssl_certificate $T/pki/wrong.crt;
    ssl_certificate_key $T/pki/wrong.key;
    root $T/www;
}
CONF
nginx_start "$T/servers"
wait_port $P1 && wait_port $P2 && wait_port $P3 || { echo "nginx did not start"; cat "$T/nginx/error.log"; exit 1; }
LOG=$T/nginx/access.log
M=$KVCHAT_HOME/models

# ---- a plain pull ----
run "$KVCHAT" models pull --ca-file "$CA" "https://127.0.0.1:$P1/files/model.gguf"
expect_rc 0; expect_out_empty; expect_err "pulled 'model'"
cmp -s "$M/model.gguf" "$T/www/files/model.gguf" && ok "pulled file is identical" || not_ok "pulled file differs"
grep -q "^sha256 = $SHA\$" "$M/model.meta" && ok "sidecar has the sha256" || not_ok "sidecar lacks the sha256"
[ ! -e "$M/model.part" ] && ok "no .part left" || not_ok ".part left behind"
expect_err "'model' is now the default model"
grep -q '^model = model$' "$XDG_CONFIG_HOME/kvchat/config" && ok "config has the default" || not_ok "config lacks the default"

run "$KVCHAT" models list
expect_rc 0; expect_out '^\* model .*F32 *llama'
run "$KVCHAT" models list --json
expect_rc 0
[ "$(jq -r '.[] | select(.name == "model") | [.arch, .sha256, .default] | join(" ")' "$T/out")" = "llama $SHA true" ] &&
    ok "list --json: arch, sha256, default" || not_ok "list --json: $(cat "$T/out")"

# again: already there, no request
log_has "$LOG" "GET \"/files/model.gguf\" 200" || true; sleep 0.3
n0=$(wc -l <"$LOG")
run "$KVCHAT" models pull --ca-file "$CA" --name model "https://127.0.0.1:$P1/files/model.gguf"
expect_rc 0; expect_err "already in the store"
[ "$(wc -l <"$LOG")" = "$n0" ] && ok "no request for a model already there" || not_ok "a request was made"

# KVCHAT_CA_FILE instead of --ca-file, a name, and a correct --sha256
KVCHAT_CA_FILE=$CA run "$KVCHAT" models pull --name m2 --sha256 "$SHA" "https://127.0.0.1:$P1/files/model.gguf"
expect_rc 0; expect_err "sha256 $SHA verified"

# ---- the hub: 302 to a CDN on another port, X-Linked-ETag, HF_TOKEN ----
export KVCHAT_HF_ENDPOINT="https://127.0.0.1:$P1"
HF_TOKEN=hf_secret_test_token run "$KVCHAT" models pull --ca-file "$CA" hf:owner/repo/model.gguf
expect_rc 0; expect_err "already in the store"
HF_TOKEN=hf_secret_test_token run "$KVCHAT" models pull --ca-file "$CA" --name hubmodel hf:owner/repo/model.gguf
expect_rc 0; expect_err "pulled 'hubmodel'.*verified"
cmp -s "$M/hubmodel.gguf" "$T/www/files/model.gguf" && ok "hub file is identical" || not_ok "hub file differs"
log_has "$LOG" "^$P1 GET \"/owner/repo/resolve/main/model.gguf\" 302 .*auth=\"Bearer hf_secret_test_token\"" &&
    ok "the token went to the hub" || not_ok "the token did not reach the hub"
log_has "$LOG" "^$P2 GET \"/cdn/model.gguf\" 200 .*auth=\"-\"" && ok "the CDN got no Authorization" ||
    not_ok "CDN request missing or had Authorization"
grep "^$P2 " "$LOG" | grep -q "hf_secret" && not_ok "the token reached the CDN" || ok "the token never reached the CDN"

# hf:OWNER/REPO:QUANT picks the file from the hub API
run "$KVCHAT" models pull --ca-file "$CA" hf:owner/repo:q8_0
expect_rc 0; expect_err "pulled 'repo-Q8_0'.*verified"
log_has "$LOG" "^$P1 GET \"/api/models/owner/repo\" 200" && ok "asked the hub API" || not_ok "no hub API request"
run "$KVCHAT" models pull --ca-file "$CA" hf:owner/repo:Q2_K
expect_rc 1; expect_err "no Q2_K .gguf file in 'owner/repo'"

# the hub API down: retried, then a clear error
run "$KVCHAT" models pull --ca-file "$CA" --retries 1 hf:owner/down:Q8_0
expect_rc 4; expect_err "HTTP 503 Service .*retrying in 1 s"; expect_err "cannot pull 'hf:owner/down:Q8_0': HTTP 503"
[ "$(log_count "$LOG" 'GET "/api/models/owner/down" 503' 2)" = 2 ] && ok "the API call was retried once" || not_ok "API not retried once"

# X-Linked-ETag that does not match: deleted, exit 4
run "$KVCHAT" models pull --ca-file "$CA" hf:owner/badsum/model.gguf --name badsum
expect_rc 4; expect_err "sha256 mismatch for 'badsum'.*X-Linked-ETag.*deleted"
ls "$M" | grep -q '^badsum' && not_ok "badsum files left in the store" || ok "nothing of badsum left"

# --sha256 that does not match: deleted, exit 4
run "$KVCHAT" models pull --ca-file "$CA" --sha256 "$BAD" --name wrongsum "https://127.0.0.1:$P1/files/model.gguf"
expect_rc 4; expect_err "sha256 mismatch for 'wrongsum': expected $BAD (--sha256), got $SHA"
ls "$M" | grep -q '^wrongsum' && not_ok "wrongsum files left in the store" || ok "nothing of wrongsum left"
unset KVCHAT_HF_ENDPOINT

# ---- failures ----
run "$KVCHAT" models pull --retries 0 "https://127.0.0.1:$P1/files/model.gguf" --name untrusted
expect_rc 4; expect_err "certificate is not trusted"
[ ! -e "$M/untrusted.gguf" ] && ok "nothing stored" || not_ok "stored from an untrusted server"

echo "not a certificate" >"$T/junk.pem"
run "$KVCHAT" models pull --ca-file "$T/junk.pem" "https://127.0.0.1:$P1/files/model.gguf" --name junkca
expect_rc 2; expect_err "cannot load CA certificates from '$T/junk.pem'"

# a certificate from another CA is as untrusted as none
mk_ca2() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=other CA" \
        -keyout "$T/pki/ca2.key" -out "$T/pki/ca2.crt" 2>>"$T/pki/log"
}
mk_ca2
run "$KVCHAT" models pull --ca-file "$T/pki/ca2.crt" --retries 0 "https://127.0.0.1:$P1/files/model.gguf" --name otherca
expect_rc 4; expect_err "certificate is not trusted"

run "$KVCHAT" models pull --ca-file "$CA" --retries 0 "https://127.0.0.1:$P3/files/model.gguf" --name wronghost
expect_rc 4; expect_err "not valid for '127.0.0.1' (hostname mismatch)"

run "$KVCHAT" models pull --ca-file "$CA" "https://127.0.0.1:$P1/files/nope.gguf"
expect_rc 4; expect_err "HTTP 404 Not Found from 'https://127.0.0.1:$P1/files/nope.gguf' (no such file)"

run "$KVCHAT" models pull --ca-file "$CA" --retries 1 "https://127.0.0.1:$P1/err500" --name e500
expect_rc 4; expect_err "HTTP 500 Internal Server Error"; expect_err "retrying in 1 s"
[ "$(log_count "$LOG" "GET \"/err500\" 500" 2)" = 2 ] && ok "a 500 was retried once" || not_ok "500 not retried exactly once"

run "$KVCHAT" models pull --ca-file "$CA" "https://127.0.0.1:$P1/to-http" --name tohttp
expect_rc 4; expect_err "refusing a redirect away from https"

run "$KVCHAT" models pull --ca-file "$CA" "https://127.0.0.1:$P1/loop" --name loop
expect_rc 4; expect_err "too many redirects"
n=$(log_count "$LOG" 'GET "/loop"' 11)
[ "$n" = 11 ] && ok "stopped after 10 redirects" || not_ok "$n requests for /loop"

run "$KVCHAT" models pull --ca-file "$CA" "http://127.0.0.1:$P1/files/model.gguf"
expect_rc 1; expect_err "refusing plain http://"

run "$KVCHAT" models pull --ca-file "$CA" "nosuchalias:7b"
expect_rc 1; expect_err "unknown model 'nosuchalias:7b'"

# ---- on a terminal (script(1) gives a pty): a progress line, and the first run ----
if command -v script >/dev/null 2>&1 && script -qec true /dev/null </dev/null >/dev/null 2>&1; then
    run timeout 60 script -qec "'$KVCHAT' models pull --ca-file '$CA' --name tty 'https://127.0.0.1:$P1/files/model.gguf'" "$T/typescript"
    expect_rc 0
    tr '\r' '\n' <"$T/typescript" | grep -q '^.*model.gguf \[#*\] 100%  1.90 MiB / 1.90 MiB' &&
        ok "a progress line at 100%" || { not_ok "no progress line"; cat -v "$T/typescript"; }
    # the first run offers the default alias; "n" declines
    rm -rf "$KVCHAT_HOME" "$XDG_CONFIG_HOME"
    printf 'n\n' | timeout 60 script -qec "'$KVCHAT'" "$T/typescript" >/dev/null 2>&1
    rc=$?
    expect_rc 2
    grep -q "Download qwen2.5:0.5b (Qwen2.5 0.5B Instruct, Q4_K_M, about .*) now? \[Y/n\]" "$T/typescript" &&
        grep -q "kvchat models pull qwen2.5:0.5b" "$T/typescript" && ok "offered, declined, guided" ||
        { not_ok "no offer or guidance"; cat -v "$T/typescript"; }
    # "y" pulls the alias (from the hub on loopback), makes it the default, then
    # starts the chat, which "/exit" (or the end of input) leaves
    printf 'y\n/exit\n' | KVCHAT_HF_ENDPOINT="https://127.0.0.1:$P1" KVCHAT_CA_FILE="$CA" \
        timeout 60 script -qec "'$KVCHAT'" "$T/typescript" >/dev/null 2>&1
    rc=$?
    [ "$rc" != 124 ] && ok "the first run ended (exit $rc)" || not_ok "the first run hung"
    grep -q "pulled 'qwen2.5:0.5b'.*verified" "$T/typescript" &&
        ok "first run pulled the default alias" || { not_ok "first run pull"; cat -v "$T/typescript"; }
    cmp -s "$M/qwen2.5:0.5b.gguf" "$T/www/files/model.gguf" && ok "alias stored as qwen2.5:0.5b" || not_ok "alias not stored"
    grep -q '^model = qwen2.5:0.5b$' "$XDG_CONFIG_HOME/kvchat/config" && ok "and made the default" || not_ok "not the default"
else
    echo "(script(1) missing or no pty: terminal checks skipped)"
fi

echo "nginx access log:"; sed 's/^/  /' "$LOG"
finish
