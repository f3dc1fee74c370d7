# tls-lib.sh - for the CLI tests of `models pull`: a test CA and server
# certificates made with the openssl CLI, free ports on 127.0.0.1, and nginx
# (or tests/cli/badserver.py) started under $T and stopped on exit.
# Source after lib.sh. Nothing here touches an address other than 127.0.0.1.
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy ALL_PROXY all_proxy
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_ENDPOINT KVCHAT_HF_ENDPOINT KVCHAT_CA_FILE KVCHAT_MODEL
PIDS=
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

command -v nginx >/dev/null 2>&1 || NGINX=/usr/sbin/nginx
NGINX=${NGINX:-nginx}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT: until something listens there (at most 10 s)
wait_port() {
    python3 - "$1" <<'PY'
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PY
}

# mk_ca: $T/pki/ca.crt and ca.key
mk_ca() {
    mkdir -p "$T/pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=kvchat test CA" -keyout "$T/pki/ca.key" -out "$T/pki/ca.crt" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        2>"$T/pki/log" || { echo "openssl failed"; cat "$T/pki/log"; exit 1; }
}

# mk_cert NAME SAN [CA-PREFIX]: $T/pki/NAME.crt/.key for subjectAltName SAN
# (e.g. "DNS:127.0.0.1,IP:127.0.0.1"), signed by the CA (ca, or another)
mk_cert() {
    ca=${3:-ca}
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' \
        "$2" >"$T/pki/$1.ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$1" \
        -keyout "$T/pki/$1.key" -out "$T/pki/$1.csr" 2>>"$T/pki/log" &&
    openssl x509 -req -in "$T/pki/$1.csr" -CA "$T/pki/$ca.crt" -CAkey "$T/pki/$ca.key" \
        -CAcreateserial -days 2 -extfile "$T/pki/$1.ext" -out "$T/pki/$1.crt" 2>>"$T/pki/log" ||
        { echo "openssl failed"; cat "$T/pki/log"; exit 1; }
}

# nginx_start SERVERS-FILE: nginx with those server blocks inside http {};
# access log lines (format kv) go to $T/nginx/access.log
nginx_start() {
    N=$T/nginx
    mkdir -p "$N/tmp" "$N/logs"
    user=
    [ "$(id -u)" = 0 ] && user="user root root;"
    cat >"$N/nginx.conf" <<CONF
$user
worker_processes 1;
daemon off;
pid $N/nginx.pid;
error_log $N/error.log info;
events { worker_connections 64; }
http {
    log_format kv '\$server_port \$request_method "\$request_uri" \$status range="\$http_range" ifrange="\$http_if_range" auth="\$http_authorization" sent=\$body_bytes_sent';
    access_log $N/access.log kv;
    client_body_temp_path $N/tmp/body;
    proxy_temp_path $N/tmp/proxy;
    fastcgi_temp_path $N/tmp/fastcgi;
    uwsgi_temp_path $N/tmp/uwsgi;
    scgi_temp_path $N/tmp/scgi;
    default_type application/octet-stream;
    ssl_protocols TLSv1.2 TLSv1.3;
$(cat "$1")
}
CONF
    "$NGINX" -p "$N" -c "$N/nginx.conf" -e "$N/error.log" &
    PIDS="$PIDS $!"
}

# log_count FILE PATTERN N: wait (2 s at most) until FILE has N lines matching
# PATTERN (a server logs a request when it has finished it, which can be a
# moment after the client has gone); prints the count
log_count() {
    i=0
    while [ "$(grep -c -e "$2" "$1")" -lt "$3" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
    grep -c -e "$2" "$1"
}
# log_has FILE PATTERN: wait (2 s at most) until FILE has a line matching PATTERN
log_has() {
    i=0
    while ! grep -q -e "$2" "$1" && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
    grep -q -e "$2" "$1"
}
