#!/usr/bin/env python3
"""badserver.py - a misbehaving HTTPS server (and a CONNECT proxy) for the
`models pull` tests, on 127.0.0.1 only.

usage: badserver.py PORT CERT KEY FILE LOG [PROXY-PORT]

Paths (the body is FILE's bytes):
  /drop/NAME        Content-Length of the whole file, half of it sent, then close
  /drop-once/NAME   the first request as /drop; later ones honour Range properly
  /chunked/NAME     the whole file, chunked
  /chunked-trunc/NAME  chunked, a few chunks, then close without the last chunk
  /stall/NAME       headers, then silence
  /garbage/NAME     a malformed status line
Each request is logged to LOG as: PATH range=RANGE auth=AUTH
The proxy (if PROXY-PORT) tunnels CONNECT 127.0.0.1:PORT only and logs
"CONNECT HOST:PORT auth=PROXY-AUTHORIZATION" to LOG.
"""
import os, socket, ssl, sys, threading, time

port, cert, key, path, logpath = sys.argv[1:6]
proxy_port = int(sys.argv[6]) if len(sys.argv) > 6 else 0
data = open(path, "rb").read()
lock = threading.Lock()
seen = {}


def log(line):
    with lock:
        with open(logpath, "a") as f:
            f.write(line + "\n")


def read_head(conn):
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = conn.recv(4096)
        if not c:
            return None, {}
        buf += c
    lines = buf.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return lines[0], hdrs


def serve(conn):
    try:
        req, h = read_head(conn)
        if not req:
            return
        target = req.split(" ")[1]
        rng = h.get("range", "-")
        log("%s range=%s auth=%s" % (target, rng, h.get("authorization", "-")))
        mode = target.split("/")[1]
        n = len(data)
        if mode == "drop" or (mode == "drop-once" and target not in seen):
            seen[target] = 1
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"v1\"\r\n\r\n" % n)
            conn.sendall(data[: n // 2])
            time.sleep(0.2)
        elif mode == "drop-once":
            start = int(rng.split("=")[1].split("-")[0]) if rng.startswith("bytes=") else 0
            if start:
                conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\n"
                             b"Content-Range: bytes %d-%d/%d\r\nETag: \"v1\"\r\n\r\n"
                             % (n - start, start, n - 1, n))
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            conn.sendall(data[start:])
        elif mode in ("chunked", "chunked-trunc"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            step = 65536 + 123
            end = n if mode == "chunked" else n // 3
            for i in range(0, end, step):
                part = data[i:min(i + step, end)]
                conn.sendall(b"%x;ext=1\r\n" % len(part) + part + b"\r\n")
            if mode == "chunked":
                conn.sendall(b"0\r\nX-Trailer: yes\r\n\r\n")
            else:
                time.sleep(0.2)
        elif mode == "stall":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            time.sleep(30)
        elif mode == "garbage":
            conn.sendall(b"HTTX/1.1 200 OK\r\n\r\n")
        else:
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    except (OSError, ssl.SSLError):
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


def tls_server():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(port)))
    s.listen(16)
    while True:
        c, _ = s.accept()
        try:
            c.settimeout(10)
            t = ctx.wrap_socket(c, server_side=True)
            t.settimeout(None)
        except (OSError, ssl.SSLError):
            c.close()
            continue
        threading.Thread(target=serve, args=(t,), daemon=True).start()


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def proxy_conn(c):
    req, h = read_head(c)
    if not req or not req.startswith("CONNECT "):
        c.close()
        return
    hostport = req.split(" ")[1]
    log("CONNECT " + hostport + " auth=" + h.get("proxy-authorization", "-"))
    host, _, p = hostport.rpartition(":")
    if host != "127.0.0.1":
        c.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
        c.close()
        return
    u = socket.create_connection(("127.0.0.1", int(p)))
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    pipe(u, c)


def proxy_server():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", proxy_port))
    s.listen(16)
    while True:
        c, _ = s.accept()
        threading.Thread(target=proxy_conn, args=(c,), daemon=True).start()


if proxy_port:
    threading.Thread(target=proxy_server, daemon=True).start()
tls_server()
