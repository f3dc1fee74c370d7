#!/usr/bin/env python3
"""chatserver.py - a chat-completions protocol fixture for the remote-model
tests: an OpenAI-compatible server on 127.0.0.1 (only) whose behaviour is
chosen by the model id a request asks for, so one server plays every case.

usage: chatserver.py --port-file F --log F [--key K] [--tls CERT KEY]
                     [--models a,b] [--redirect URL]

The port it listens on (chosen by the kernel) is written to --port-file.
Every request is appended to --log as one JSON line: method, path, the
Authorization header, and the body (parsed).

GET  /v1/models            {"data": [{"id": ...}]}: --models, else every mode
POST /v1/chat/completions  by model id:
  echo        streams "echo: " + the last user message, 3 characters per event,
              then usage (prompt_tokens: characters of all messages; cached_tokens:
              characters shared with the previous request's messages, as a prefix
              cache would) and [DONE]
  whole       the same answer as one chat.completion object (not streamed)
  llamacpp    streams; usage without details, llama-server's timings (cache_n)
  nousage     streams; no usage at all
  length      streams; finish_reason "length"
  stop        streams "one STOP two" cut at the first stop string it was sent
  busy        429 (Retry-After: 0) the first two times, then as echo
  flaky       503 (no Retry-After) once, then as echo
  fail        always 500 {"error": {"message": "the GPU caught fire"}}
  forbidden   403
  toolong     400 {"error": {"message": "prompt is too long"}}
  cut         two events, then the connection closes (no [DONE])
  cutchunked  chunked: two events, then a close inside a chunk
  cutearly    headers, then the connection closes before any event
  errorevent  two events, then data: {"error": {"message": "out of memory"}}
  malformed   data: {not json
  badutf8     a content string with invalid UTF-8
  wrongtype   content is a number
  latebad     two events, then data that is not JSON
  slow        the echo stream written a byte at a time, 5 ms apart
  stall       one event, then silence for 60 s
  stallfirst  headers, then silence for 60 s
  long        200 events, 50 ms apart
  nul         streams "before\u0000after" (a NUL inside the content)
  (other)     404 {"error": {"message": "model 'X' not found"}}
With --key K, a request without "Authorization: Bearer K" gets 401.
With --redirect URL, POST answers 307 to URL (and logs the request).
"""
import argparse, json, socket, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ["echo", "whole", "llamacpp", "nousage", "length", "stop", "busy", "flaky", "fail",
         "forbidden", "toolong", "cut", "cutchunked", "cutearly", "errorevent", "malformed",
         "badutf8", "wrongtype", "latebad", "slow", "stall", "stallfirst", "long", "nul"]

ap = argparse.ArgumentParser()
ap.add_argument("--port-file", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--key")
ap.add_argument("--tls", nargs=2)
ap.add_argument("--models")
ap.add_argument("--redirect")
args = ap.parse_args()

lock = threading.Lock()
counts = {}
previous = [""]


def log(entry):
    with lock:
        with open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def chunk(text=None, finish=None, model="fixture"):
    delta = {} if text is None else {"content": text}
    return {"id": "c1", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


# the models that answer with an error: mode -> (how many first requests
# (None: all), HTTP status, message, extra headers)
ERRORS = {
    "busy": (2, 429, "too many requests", [("Retry-After", "0")]),
    "flaky": (1, 503, "warming up", ()),
    "fail": (None, 500, "the GPU caught fire", ()),
    "forbidden": (None, 403, "this key may not use this model", ()),
    "toolong": (None, 400, "prompt is too long (4097 > 4096 tokens)", ()),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, status, obj, extra=()):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def authorized(self):
        if not args.key:
            return True
        if self.headers.get("Authorization") == "Bearer " + args.key:
            return True
        self.send_json(401, {"error": {"message": "invalid or missing API key", "type": "auth"}})
        return False

    def do_GET(self):
        log({"method": "GET", "path": self.path, "auth": self.headers.get("Authorization")})
        if not self.authorized():
            return
        if self.path.rstrip("/") != "/v1/models":
            self.send_json(404, {"error": {"message": "no route " + self.path}})
            return
        ids = args.models.split(",") if args.models else MODES
        self.send_json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})

    def start_stream(self, chunked=False, length=None):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, obj, raw=None):
        data = raw if raw is not None else ("data: " + json.dumps(obj, ensure_ascii=False) + "\n\n").encode()
        self.wfile.write(data)
        self.wfile.flush()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        log({"method": "POST", "path": self.path, "auth": self.headers.get("Authorization"),
             "accept": self.headers.get("Accept"), "body": body})
        if args.redirect:
            self.send_response(307)
            self.send_header("Location", args.redirect + "/chat/completions")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not self.authorized():
            return
        if self.path != "/v1/chat/completions":
            self.send_json(404, {"error": {"message": "no route " + self.path}})
            return
        mode = body.get("model", "")
        with lock:
            counts[mode] = counts.get(mode, 0) + 1
            count = counts[mode]
        msgs = body.get("messages", [])
        text = "".join(m.get("role", "") + ":" + m.get("content", "") + "\n" for m in msgs)
        with lock:
            prev = previous[0]
            previous[0] = text
        cached = 0
        while cached < min(len(prev), len(text)) and prev[cached] == text[cached]:
            cached += 1
        last = msgs[-1].get("content", "") if msgs else ""
        answer = "echo: " + last
        usage = {"prompt_tokens": len(text), "completion_tokens": len(answer),
                 "total_tokens": len(text) + len(answer),
                 "prompt_tokens_details": {"cached_tokens": cached}}

        if mode in ERRORS:
            first, status, message, extra = ERRORS[mode]
            if first is None or count <= first:
                self.send_json(status, {"error": {"message": message}}, extra)
                return
        if mode == "whole":
            self.send_json(200, {"object": "chat.completion", "model": "fixture-whole",
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                                              "finish_reason": "stop"}], "usage": usage})
            return
        if mode not in MODES:
            self.send_json(404, {"error": {"message": "model '%s' not found" % mode}})
            return

        pieces = [answer[i:i + 3] for i in range(0, len(answer), 3)]
        if mode == "stop":
            stops = body.get("stop") or []
            full = "one STOP two"
            cut = min([full.find(s) for s in stops if s in full] or [len(full)])
            pieces = [full[:cut]]
        if mode == "nul":
            pieces = ["before\u0000", "after"]
        chunked = mode == "cutchunked"
        self.start_stream(chunked=chunked)
        if chunked:
            first = ("data: " + json.dumps(chunk("par")) + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(first), first))
            self.wfile.write(b"100\r\ndata: {\"cho")
            self.wfile.flush()
            return
        if mode == "cutearly":
            return
        if mode == "stallfirst":
            time.sleep(60)
            return
        if mode == "malformed":
            self.event(None, b"data: {not json\n\n")
            return
        if mode == "badutf8":
            self.event(None, b'data: {"choices":[{"index":0,"delta":{"content":"bad \xff\xfe here"}}]}\n\n')
            return
        if mode == "wrongtype":
            self.event(None, b'data: {"choices":[{"index":0,"delta":{"content":42}}]}\n\n')
            return
        if mode in ("cut", "errorevent", "latebad", "stall"):
            self.event(chunk("part"))
            if mode != "stall":
                self.event(chunk("ial"))
            if mode == "errorevent":
                self.event({"error": {"message": "out of memory", "code": 500}})
            elif mode == "latebad":
                self.event(None, b"data: ]]]\n\n")
            elif mode == "stall":
                time.sleep(60)
            return
        if mode == "long":
            for i in range(200):
                self.event(chunk("tick %d " % i))
                time.sleep(0.05)
            pieces = []
        if mode == "slow":
            data = b"".join(("data: " + json.dumps(chunk(p), ensure_ascii=False) + "\n\n").encode() for p in pieces)
            data += ("data: " + json.dumps(chunk(None, "stop")) + "\n\n").encode()
            data += ("data: " + json.dumps({"choices": [], "usage": usage}) + "\n\ndata: [DONE]\n\n").encode()
            for b in data:
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(0.005)
            return
        self.event({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
        for p in pieces:
            self.event(chunk(p))
        self.event(chunk(None, "length" if mode == "length" else "stop"))
        if mode == "llamacpp":
            self.event({"choices": [], "usage": {"prompt_tokens": len(text), "completion_tokens": len(answer)},
                        "timings": {"cache_n": cached, "prompt_n": len(text) - cached, "predicted_n": len(answer),
                                    "prompt_per_second": 1234.5, "predicted_per_second": 56.5}})
        elif mode != "nousage":
            self.event({"choices": [], "usage": usage})
        self.event(None, b": a comment line\n\ndata: [DONE]\n\n")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    address_family = socket.AF_INET


srv = Server(("127.0.0.1", 0), Handler)
if args.tls:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.tls[0], args.tls[1])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(args.port_file + ".tmp", args.port_file)
srv.serve_forever()
