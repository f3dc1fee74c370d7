#!/usr/bin/env python3
"""ptydrive.py - run a program on a pseudo-terminal and drive it by a script,
for the REPL tests (tests/cli/t05*-repl-*.sh).

usage: ptydrive.py [--cols N] [--timeout S] [--log FILE] [--raw FILE] [--dir D] -- PROG ARGS... < SCRIPT

The program's output is collected as it comes; a cursor marks how far the
script has read. Output is compared with escape sequences removed and
"\\r\\n" turned into "\\n" (the raw bytes go to --raw). Script lines:

  expect RE            wait (up to --timeout s) until the Python regex RE
                       matches after the cursor; the cursor moves past it
  send TEXT            write TEXT (Python escapes: \\r \\x03 \\x04 \\t ...)
  line TEXT            write TEXT then "\\r" (Enter)
  say TEXT NAME        line TEXT, then wait for the next prompt ("> " or
                       "NAME> " at the start of a line) and save what came
                       between the echoed line and the prompt (the answer and
                       any notes) in D/NAME
  capture NAME RE      expect RE and save its group 1 in D/NAME
  signal SIG           send a signal (INT, TERM, HUP) to the program
  resize COLS          make the terminal COLS columns wide (the program gets
                       SIGWINCH from the kernel, as from a terminal window)
  mark NAME            save in D/NAME how many characters of output (as
                       compared) have come so far
  sleep S              wait S seconds
  exit CODE            wait for the program to end; its exit status must be CODE
  discard              leave an unsaved chat: Ctrl-D, expect its question
                       ("This chat is not saved: s NAME saves it, d discards
                       it"), Ctrl-D again, and exit 0

Any failure prints what was expected and the output after the cursor, and
the driver exits 1 (the program is killed). Lines starting with # are
comments.
"""
import codecs
import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>]|\x1b\][^\x07]*\x07|[\x01\x02\x07]")
PROMPT = re.compile(r"(?m)^[A-Za-z0-9._:+-]*> ")


def main():
    args = sys.argv[1:]
    cols, timeout, log, raw_path, outdir = 200, 60.0, None, None, "."
    while args and args[0] != "--":
        opt = args.pop(0)
        val = args.pop(0)
        if opt == "--cols":
            cols = int(val)
        elif opt == "--timeout":
            timeout = float(val)
        elif opt == "--log":
            log = val
        elif opt == "--raw":
            raw_path = val
        elif opt == "--dir":
            outdir = val
        else:
            sys.exit("ptydrive: unknown option " + opt)
    prog = args[1:]
    script = sys.stdin.read().splitlines()

    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvp(prog[0], prog)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))

    raw = bytearray()
    state = {"cursor": 0, "status": None}

    def text():
        t = raw.decode("utf-8", "replace")
        t = ANSI.sub("", t)
        return t.replace("\r\n", "\n").replace("\r", "")

    def pump(wait):
        if state["status"] is not None:
            return False
        r, _, _ = select.select([fd], [], [], wait)
        if not r:
            return True
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            _, st = os.waitpid(pid, 0)
            state["status"] = os.waitstatus_to_exitcode(st)
            return False
        raw.extend(data)
        return True

    def fail(msg):
        t = text()
        sys.stdout.write("ptydrive: %s\n--- output after the cursor ---\n%s\n--- end ---\n"
                         % (msg, t[state["cursor"]:]))
        finish()
        if state["status"] is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        sys.exit(1)

    def finish():
        if log:
            with open(log, "w") as f:
                f.write(text())
        if raw_path:
            with open(raw_path, "wb") as f:
                f.write(raw)

    def expect(rx):
        deadline = time.time() + timeout
        while True:
            m = rx.search(text(), state["cursor"])
            if m:
                state["cursor"] = m.end()
                return m
            if time.time() > deadline:
                fail("timed out waiting for /%s/" % rx.pattern)
            if not pump(0.2) and not rx.search(text(), state["cursor"]):
                fail("the program ended (status %s) before /%s/" % (state["status"], rx.pattern))

    def wait_exit(code):
        deadline = time.time() + timeout
        while state["status"] is None:
            if time.time() > deadline:
                fail("timed out waiting for the program to end")
            pump(0.2)
        if state["status"] != code:
            fail("exit status %s, wanted %s" % (state["status"], code))

    def unescape(s):
        # Python escapes; other characters stay as their UTF-8 bytes
        return codecs.escape_decode(s.encode("utf-8"))[0]

    for n, line in enumerate(script, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cmd, _, rest = line.partition(" ")
        if cmd == "expect":
            expect(re.compile(rest))
        elif cmd == "send":
            os.write(fd, unescape(rest))
        elif cmd == "line":
            os.write(fd, unescape(rest) + b"\r")
        elif cmd == "say":
            msg, _, name = rest.rpartition(" ")
            os.write(fd, unescape(msg) + b"\r")
            # the echo of the message's last line, then everything up to a prompt
            last = unescape(msg).decode("utf-8").split("\r")[-1]
            expect(re.compile(re.escape(last) + r"\n"))
            start = state["cursor"]
            m = expect(PROMPT)
            with open(os.path.join(outdir, name), "w") as f:
                f.write(text()[start:m.start()])
        elif cmd == "capture":
            name, _, rx = rest.partition(" ")
            m = expect(re.compile(rx))
            with open(os.path.join(outdir, name), "w") as f:
                f.write(m.group(1))
        elif cmd == "resize":
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, int(rest), 0, 0))
        elif cmd == "mark":
            while select.select([fd], [], [], 0)[0] and pump(0):
                pass
            with open(os.path.join(outdir, rest.strip()), "w") as f:
                f.write("%d\n" % len(text()))
        elif cmd == "signal":
            os.kill(pid, getattr(signal, "SIG" + rest.strip()))
        elif cmd == "sleep":
            end = time.time() + float(rest)
            while time.time() < end:
                pump(max(0.0, min(0.2, end - time.time())))
        elif cmd == "exit":
            wait_exit(int(rest))
        elif cmd == "discard":
            os.write(fd, b"\x04")
            expect(re.compile(re.escape("This chat is not saved: s NAME saves it, d discards it")))
            os.write(fd, b"\x04")
            wait_exit(0)
        else:
            fail("script line %d: unknown command %r" % (n, cmd))
    finish()
    if state["status"] is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
