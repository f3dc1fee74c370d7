#!/bin/sh
# t0302: models pull against a misbehaving HTTPS server (tests/cli/badserver.py):
# a connection dropped mid-body (kept .part, exit 4; with a retry it resumes
# with Range and completes), a truncated chunked body, a proper chunked body
# with extensions and a trailer, a stalled server (read timeout), a
# malformed status line, and HTTPS_PROXY through a CONNECT proxy; a pull that
# received nothing (no network, a stall, garbage) leaves no empty .part.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"

mk_ca
mk_cert good "DNS:127.0.0.1,IP:127.0.0.1"
"$MKMODEL" "$T/model.gguf" --dim 128 --layers 2 --ff 344 >/dev/null || exit 1
SHA=$(sha256sum "$T/model.gguf" | cut -d' ' -f1)
P=$(free_port) PP=$(free_port)
LOG=$T/server.log
: >"$LOG"
python3 "$TOP/tests/cli/badserver.py" "$P" "$T/pki/good.crt" "$T/pki/good.key" "$T/model.gguf" "$LOG" "$PP" &
PIDS="$PIDS $!"
wait_port "$P" && wait_port "$PP" || { echo "badserver did not start"; exit 1; }
export KVCHAT_CA_FILE=$T/pki/ca.crt
M=$KVCHAT_HOME/models
U=https://127.0.0.1:$P

run "$KVCHAT" models pull --retries 0 "$U/drop/model.gguf" --name dropped
expect_rc 4; expect_err "connection closed with [0-9]* bytes of the body still to come"; expect_err "bytes kept: pull again to resume"
[ -s "$M/dropped.part" ] && [ ! -e "$M/dropped.gguf" ] && ok "half a file kept as .part only" || not_ok "no .part, or a .gguf"

run "$KVCHAT" models pull --retries 0 "$U/chunked-trunc/model.gguf" --name trunc
expect_rc 4; expect_err "connection closed inside a chunked body"
[ ! -e "$M/trunc.gguf" ] && ok "no model from a truncated body" || not_ok "a truncated body became a model"

run "$KVCHAT" models pull --sha256 "$SHA" "$U/chunked/model.gguf" --name chunked
expect_rc 0; expect_err "verified"
cmp -s "$M/chunked.gguf" "$T/model.gguf" && ok "chunked body decoded exactly" || not_ok "chunked body differs"

run "$KVCHAT" models pull --sha256 "$SHA" --retries 2 "$U/drop-once/model.gguf" --name flaky
expect_rc 0; expect_err "retrying in 1 s"; expect_err "resuming at byte"
cmp -s "$M/flaky.gguf" "$T/model.gguf" && ok "resumed after a drop, identical" || not_ok "resumed file differs"
grep -q "^/drop-once/model.gguf range=bytes=[1-9][0-9]*- " "$LOG" && ok "the retry sent Range" || not_ok "no Range on the retry"

run "$KVCHAT" models pull --retries 0 --timeout 1 "$U/stall/model.gguf" --name stalled
expect_rc 4; expect_err "timed out"
[ ! -e "$M/stalled.part" ] && [ ! -e "$M/stalled.part.meta" ] && ok "a stall that sent no bytes leaves no .part" ||
    not_ok "an empty .part after a stall: $(ls -la "$M")"

run "$KVCHAT" models pull --retries 0 "$U/garbage/model.gguf" --name garbage
expect_rc 4; expect_err "malformed HTTP status line"
[ ! -e "$M/garbage.part" ] && ok "garbage leaves no .part" || not_ok "a .part after garbage"

# no network: an alias from a hub nobody answers (a closed port), with and
# without retries; nothing is left behind, and a .part with bytes survives
CLOSED=$(free_port)
KVCHAT_HF_ENDPOINT="https://127.0.0.1:$CLOSED" run "$KVCHAT" models pull --retries 0 qwen2.5:0.5b
expect_rc 4
[ ! -e "$M/qwen2.5:0.5b.part" ] && [ ! -e "$M/qwen2.5:0.5b.part.meta" ] && ok "no network: no empty .part" ||
    not_ok "no network left: $(ls "$M")"
KVCHAT_HF_ENDPOINT="https://127.0.0.1:$CLOSED" run "$KVCHAT" models pull --retries 1 qwen2.5:0.5b
expect_rc 4; expect_err "retrying in 1 s"
[ ! -e "$M/qwen2.5:0.5b.part" ] && ok "no network, after a retry: no empty .part" || not_ok "an empty .part after retries"
size0=$(stat -c %s "$M/dropped.part")
HTTPS_PROXY="http://127.0.0.1:$CLOSED" run "$KVCHAT" models pull --retries 0 "$U/drop/model.gguf" --name dropped
expect_rc 4
[ "$(stat -c %s "$M/dropped.part")" = "$size0" ] && ok "a failed pull keeps the bytes an earlier one received" || not_ok "the earlier bytes are gone"

# through a CONNECT proxy
HTTPS_PROXY=http://127.0.0.1:$PP run "$KVCHAT" models pull --sha256 "$SHA" "$U/chunked/model.gguf" --name proxied
expect_rc 0
grep -q "^CONNECT 127.0.0.1:$P auth=-\$" "$LOG" && ok "went through the proxy" || not_ok "did not use the proxy"
cmp -s "$M/proxied.gguf" "$T/model.gguf" && ok "proxied file identical" || not_ok "proxied file differs"
# credentials in HTTPS_PROXY (percent-encoded) become Proxy-Authorization: Basic
HTTPS_PROXY="http://user:p%40ss:w@127.0.0.1:$PP/" run "$KVCHAT" models pull --sha256 "$SHA" "$U/chunked/model.gguf" --name proxied2
expect_rc 0
grep -q "^CONNECT 127.0.0.1:$P auth=Basic $(printf 'user:p@ss:w' | base64)\$" "$LOG" && ok "proxy credentials sent" ||
    not_ok "no Proxy-Authorization"
HTTPS_PROXY="http://user:secret@127.0.0.1:1" run "$KVCHAT" models pull --retries 0 "$U/chunked/model.gguf" --name noproxy
expect_rc 4
grep -q secret "$T/err" && not_ok "the proxy password was printed" || ok "the proxy password is not printed"
n=$(grep -c '^CONNECT' "$LOG")
HTTPS_PROXY=http://127.0.0.1:$PP NO_PROXY=localhost,127.0.0.1 run "$KVCHAT" models pull "$U/chunked/model.gguf" --name direct
expect_rc 0
[ "$(grep -c '^CONNECT' "$LOG")" = "$n" ] && ok "NO_PROXY bypassed the proxy" || not_ok "NO_PROXY ignored"

echo "server log:"; sed 's/^/  /' "$LOG"
finish
