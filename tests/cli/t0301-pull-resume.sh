#!/bin/sh
# t0301: an interrupted pull resumes. nginx serves a first request slowly
# (limit_rate when there is no Range header); the client is interrupted
# part-way (SIGINT: exit 130, the .part kept), then pulled again: the second
# request carries Range (and If-Range with nginx's ETag), and the finished
# file hashes right. A server that ignores Range (max_ranges 0) makes the
# client start over cleanly. kill -9 mid-download loses nothing written;
# a second pull of the same name meanwhile is refused (lock).
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"

mk_ca
mk_cert good "DNS:127.0.0.1,IP:127.0.0.1"
mkdir -p "$T/www/files"
"$MKMODEL" "$T/www/files/model.gguf" --dim 256 --layers 2 --ff 688 >/dev/null || exit 1
SHA=$(sha256sum "$T/www/files/model.gguf" | cut -d' ' -f1)
SIZE=$(wc -c <"$T/www/files/model.gguf")
P=$(free_port)
cat >"$T/servers" <<CONF
map \$http_range \$rate { "" 300k; default 0; }
server {
    listen 127.0.0.1:$P ssl;
    ssl_certificate $T/pki/good.crt;
    ssl_certificate_key $T/pki/good.key;
    root $T/www;
    location /files/ { limit_rate \$rate; }
    location /fast/ { alias $T/www/files/; }
    location /norange/ { alias $T/www/files/; max_ranges 0; limit_rate \$rate; }
}
CONF
nginx_start "$T/servers"
wait_port "$P" || { echo "nginx did not start"; cat "$T/nginx/error.log"; exit 1; }
export KVCHAT_CA_FILE=$T/pki/ca.crt
LOG=$T/nginx/access.log
M=$KVCHAT_HOME/models
U=https://127.0.0.1:$P

# wait_part NAME BYTES: until models/NAME.part holds at least BYTES (15 s at most)
wait_part() {
    i=0
    while [ "$(stat -c %s "$M/$1.part" 2>/dev/null || echo 0)" -lt "$2" ] && [ $i -lt 150 ]; do
        sleep 0.1; i=$((i + 1))
    done
}

# ---- interrupt with SIGINT, then resume with Range ----
"$KVCHAT" models pull "$U/files/model.gguf" --name m >"$T/out" 2>"$T/err" &
pid=$!
wait_part m 200000
# meanwhile, a second pull of the same name is refused
run "$KVCHAT" models pull "$U/files/model.gguf" --name m
expect_rc 2; expect_err "another 'models pull' is downloading 'm'"
kill -INT $pid
wait $pid
rc=$?
echo "\$ (interrupted pull) -> $rc"
expect_rc 130; expect_err "interrupted; [0-9]* bytes kept in .*m.part"
kept=$(wc -c <"$M/m.part")
[ "$kept" -gt 0 ] && [ "$kept" -lt "$SIZE" ] && ok "a partial .part kept ($kept of $SIZE bytes)" ||
    not_ok ".part has $kept of $SIZE bytes"
[ ! -e "$M/m.gguf" ] && ok "no model yet" || not_ok "a model appeared"

run "$KVCHAT" models pull --sha256 "$SHA" "$U/files/model.gguf" --name m
expect_rc 0; expect_err "resuming at byte $kept"; expect_err "verified"
cmp -s "$M/m.gguf" "$T/www/files/model.gguf" && ok "resumed file identical" || not_ok "resumed file differs"
log_has "$LOG" "^$P GET \"/files/model.gguf\" 206 range=\"bytes=$kept-\" ifrange=\"\\\\x22[0-9a-f-]*\\\\x22\"" &&
    ok "the second request carried Range and If-Range, got 206" || not_ok "no Range/If-Range request with 206 in the log"
[ ! -e "$M/m.part" ] && [ ! -e "$M/m.part.meta" ] && ok ".part and its meta gone" || not_ok ".part left"

# ---- a server that ignores Range: start over ----
"$KVCHAT" models pull "$U/norange/model.gguf" --name n >"$T/out" 2>"$T/err" &
pid=$!
wait_part n 200000
kill -TERM $pid
wait $pid
rc=$?
echo "\$ (interrupted pull) -> $rc"
expect_rc 130
run "$KVCHAT" models pull --sha256 "$SHA" "$U/norange/model.gguf" --name n
expect_rc 0; expect_err "sent the whole file instead of the rest; starting over"
cmp -s "$M/n.gguf" "$T/www/files/model.gguf" && ok "restarted file identical" || not_ok "restarted file differs"
log_has "$LOG" "^$P GET \"/norange/model.gguf\" 200 range=\"bytes=" && ok "Range was sent and ignored" ||
    not_ok "no ignored Range in the log"

# ---- kill -9: what was written stays, and the lock goes with the process ----
"$KVCHAT" models pull "$U/files/model.gguf" --name k >"$T/out" 2>"$T/err" &
pid=$!
wait_part k 100000
kill -9 $pid
wait $pid
kept=$(wc -c <"$M/k.part")
run "$KVCHAT" models pull --sha256 "$SHA" "$U/files/model.gguf" --name k
expect_rc 0; expect_err "resuming at byte $kept"
cmp -s "$M/k.gguf" "$T/www/files/model.gguf" && ok "file identical after kill -9 and resume" || not_ok "file differs after kill -9"

# ---- a .part that is already whole (a crash before the rename): 416, then verified and renamed ----
cp "$T/www/files/model.gguf" "$M/w.part"
printf 'url = %s\n' "$U/files/model.gguf" >"$M/w.part.meta"
run "$KVCHAT" models pull --sha256 "$SHA" "$U/files/model.gguf" --name w
expect_rc 0; expect_err "verified"
cmp -s "$M/w.gguf" "$T/www/files/model.gguf" && ok "whole .part moved into place" || not_ok "whole .part not handled"
log_has "$LOG" "^$P GET \"/files/model.gguf\" 416 range=\"bytes=$SIZE-\"" && ok "asked for the rest, got 416" || not_ok "no 416 in the log"

# ---- a .part from another URL is discarded ----
head -c 1000 "$T/www/files/model.gguf" >"$M/o.part"
printf 'url = https://elsewhere.invalid/x.gguf\n' >"$M/o.part.meta"
run "$KVCHAT" models pull --sha256 "$SHA" "$U/fast/model.gguf" --name o
expect_rc 0; expect_err "discarding a partial download of another URL"
cmp -s "$M/o.gguf" "$T/www/files/model.gguf" && ok "downloaded afresh" || not_ok "o differs"

echo "nginx access log:"; sed 's/^/  /' "$LOG"
finish
