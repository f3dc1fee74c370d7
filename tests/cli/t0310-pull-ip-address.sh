#!/bin/sh
# t0310: models pull from https://ADDRESS:PORT/ - a server certificate is
# valid for an IP address only through an iPAddress subjectAltName entry
# (RFC 6125, as curl checks it): IP:127.0.0.1 verifies; a certificate for
# another address, or one that spells the address as a DNS name, is
# refused as a hostname mismatch; a DNS host name still needs a DNS entry.
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/tls-lib.sh"

mk_ca
mk_cert ip "IP:127.0.0.1"
mk_cert ipmany "DNS:mirror.example,IP:10.0.0.1,IP:::1,IP:127.0.0.1"
mk_cert ipother "IP:127.0.0.2"
mk_cert dnsip "DNS:127.0.0.1"
mk_cert dns "DNS:localhost"
mkdir -p "$T/www/files"
"$MKMODEL" "$T/www/files/model.gguf" --dim 64 --layers 1 --ff 128 >/dev/null || exit 1
CA=$T/pki/ca.crt
: >"$T/servers"
for c in ip ipmany ipother dnsip dns; do
    p=$(free_port)
    eval "P_$c=$p"
    cat >>"$T/servers" <<CONF
server {
    listen 127.0.0.1:$p ssl;
    ssl_certificate $T/pki/$c.crt;
    ssl_certificate_key $T/pki/$c.key;
    root $T/www;
}
CONF
done
# the IPv6 loopback, where the machine has one
P6=
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
    P6=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0)); print(s.getsockname()[1])')
    cat >>"$T/servers" <<CONF
server {
    listen [::1]:$P6 ssl;
    ssl_certificate $T/pki/ipmany.crt;
    ssl_certificate_key $T/pki/ipmany.key;
    root $T/www;
}
server {
    listen [::1]:$((P6 + 1)) ssl;
    ssl_certificate $T/pki/ip.crt;
    ssl_certificate_key $T/pki/ip.key;
    root $T/www;
}
CONF
fi
nginx_start "$T/servers"
for c in ip ipmany ipother dnsip dns; do
    eval "wait_port \$P_$c" || { echo "nginx did not start"; cat "$T/nginx/error.log"; exit 1; }
done
sleep 0.2
M=$KVCHAT_HOME/models
pull() { # NAME URL
    run "$KVCHAT" models pull --ca-file "$CA" --retries 0 --name "$1" "$2"
}

# ---- an address that the certificate names
pull ip "https://127.0.0.1:$P_ip/files/model.gguf"
expect_rc 0; expect_err "pulled 'ip'"
cmp -s "$M/ip.gguf" "$T/www/files/model.gguf" && ok "IP:127.0.0.1 certificate: file pulled" ||
    not_ok "IP:127.0.0.1 certificate: no file"
pull ipmany "https://127.0.0.1:$P_ipmany/files/model.gguf"
expect_rc 0
[ -f "$M/ipmany.gguf" ] && ok "the address among other entries" || not_ok "the address among other entries"

# ---- an address that it does not name: refused, nothing kept
pull ipother "https://127.0.0.1:$P_ipother/files/model.gguf"
expect_rc 4; expect_err "not valid for '127.0.0.1' (hostname mismatch)"
pull dnsip "https://127.0.0.1:$P_dnsip/files/model.gguf"
expect_rc 4; expect_err "not valid for '127.0.0.1' (hostname mismatch)"
pull dnsaddr "https://127.0.0.1:$P_dns/files/model.gguf"
expect_rc 4; expect_err "not valid for '127.0.0.1' (hostname mismatch)"
for n in ipother dnsip dnsaddr; do
    [ ! -e "$M/$n.gguf" ] && ok "$n: not in the store" || not_ok "$n: in the store"
done

# ---- a host name is still checked against DNS names, never addresses
pull dns "https://localhost:$P_dns/files/model.gguf"
expect_rc 0
[ -f "$M/dns.gguf" ] && ok "DNS:localhost certificate for localhost" || not_ok "DNS:localhost certificate for localhost"
pull ipname "https://localhost:$P_ip/files/model.gguf"
expect_rc 4; expect_err "not valid for 'localhost' (hostname mismatch)"

# ---- IPv6
if [ -n "$P6" ]; then
    wait_port6() { python3 -c "
import socket, sys, time
for _ in range(100):
    try: socket.create_connection(('::1', $1), 0.2).close(); sys.exit(0)
    except OSError: time.sleep(0.05)
sys.exit(1)"; }
    wait_port6 "$P6" || { echo "nginx did not listen on ::1"; exit 1; }
    pull ip6 "https://[::1]:$P6/files/model.gguf"
    expect_rc 0
    [ -f "$M/ip6.gguf" ] && ok "IP:::1 certificate for [::1]" || not_ok "IP:::1 certificate for [::1]"
    pull ip6other "https://[::1]:$((P6 + 1))/files/model.gguf"
    expect_rc 4; expect_err "not valid for '::1' (hostname mismatch)"
else
    echo "note: no IPv6 loopback on this machine: the [::1] cases did not run"
fi
finish
