#!/bin/sh
# t0008: every input kvchat is handed stops at 64 MiB with a clear error and
# a bounded RSS: run's prompt on stdin (`< /dev/zero`), tokenize's text,
# --system-file, --template-file, a line or message piped to the chat.
# Below the limit the input is used whole; a NUL byte in run's prompt is
# refused, not cut off. A file named by an option that is not a regular file
# (/dev/zero) is refused at once (issue 29: no read of a device or FIFO).
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" || exit 1

# bounded CMD...: run CMD (stdin, stdout and stderr as given to it) with its
# RSS watched: killed past 1 GiB (then status 99) or after 120 s (status
# 98); the peak RSS in KiB goes to $T/peak. Exits with CMD's status.
cat >"$T/bounded.py" <<'PY'
import subprocess, sys, time
peak_file, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd)
peak, t0 = 0, time.monotonic()
while p.poll() is None:
    if time.monotonic() - t0 > 120:
        p.kill(); p.wait(); open(peak_file, "w").write(str(peak)); sys.exit(98)
    try:
        with open("/proc/%d/status" % p.pid) as f:
            for l in f:
                if l.startswith("VmRSS:"):
                    peak = max(peak, int(l.split()[1]))
    except OSError:
        pass
    if peak > 1 << 20:
        p.kill(); p.wait(); open(peak_file, "w").write(str(peak)); sys.exit(99)
    time.sleep(0.02)
open(peak_file, "w").write(str(peak))
sys.exit(p.returncode)
PY
# (under ASan, a small quarantine: the RSS measured is kvchat's, not the
# freed blocks ASan holds back)
bounded() {
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16" python3 "$T/bounded.py" "$T/peak" "$@"
}
# at most 600 MiB resident (the 64 MiB buffer and the model; more under ASan)
expect_bounded() {
    peak=$(cat "$T/peak")
    [ "$peak" -lt 614400 ] && ok "$1: peak RSS $((peak / 1024)) MiB" || not_ok "$1: peak RSS $((peak / 1024)) MiB"
}

# ---- run < /dev/zero
run bounded "$KVCHAT" run -m "$M" -t 1 </dev/zero
expect_rc 2; expect_out_empty; expect_err "cannot read the prompt from stdin: it is larger than 64 MiB"
expect_bounded "run < /dev/zero"
run bounded "$KVCHAT" run -m "$M" -t 1 -s z </dev/zero
expect_rc 2; expect_err "larger than 64 MiB"
[ ! -e "$KVCHAT_HOME/kvchat.db" ] || [ "$("$KVCHAT" sessions list --json | jq length)" = 0 ] &&
    ok "no session made" || not_ok "a session was made"
# a prompt of exactly 64 MiB is read (and then does not fit the context)
head -c 67108864 /dev/zero | tr '\0' 'a' >"$T/64m"
run bounded "$KVCHAT" run -m "$M" -t 1 -c 64 <"$T/64m"
expect_rc 2; expect_err "the prompt does not fit"
printf 'a' >>"$T/64m"
run bounded "$KVCHAT" run -m "$M" -t 1 -c 64 <"$T/64m"
expect_rc 2; expect_err "larger than 64 MiB"
printf 'one\000two' >"$T/nul"
run "$KVCHAT" run -m "$M" -t 1 <"$T/nul"
expect_rc 2; expect_err "cannot use stdin as the prompt: it holds a NUL byte"

# ---- tokenize
run bounded "$KVCHAT" tokenize -m "$M" </dev/zero
expect_rc 2; expect_out_empty; expect_err "cannot read the text '-': it is larger than 64 MiB"
expect_bounded "tokenize < /dev/zero"
run bounded "$KVCHAT" tokenize -m "$M" -f /dev/zero
expect_rc 2; expect_err "cannot read the text '/dev/zero': it is not a regular file"
printf 'Hello world' >"$T/hw"
run "$KVCHAT" tokenize -m "$M" --no-bos -f "$T/hw"
expect_rc 0; [ "$(cat "$T/out")" = "$("$KVCHAT" tokenize -m "$M" --no-bos 'Hello world')" ] &&
    ok "tokenize -f reads the file whole" || not_ok "tokenize -f"

# ---- --system-file and --template-file
run bounded "$KVCHAT" run -m "$M" -t 1 --system-file /dev/zero hi
expect_rc 2; expect_err "system prompt file: cannot read '/dev/zero': it is not a regular file"
expect_bounded "--system-file /dev/zero"
run "$KVCHAT" run -m "$M" -t 1 --system-file "$T/missing" hi
expect_rc 2; expect_err "system prompt file: cannot read '$T/missing': No such file or directory"
run bounded "$KVCHAT" template --template-file /dev/zero
expect_rc 2; expect_err "cannot read template file '/dev/zero': it is not a regular file"
expect_bounded "--template-file /dev/zero"

# ---- the chat, piped: one endless line, and one endless """ block
run bounded "$KVCHAT" chat -m "$M" -t 1 </dev/zero
expect_rc 2; expect_err "cannot read the input: a message or line is larger than 64 MiB"
expect_bounded "chat < /dev/zero"
python3 -c "
import sys
w = sys.stdout.buffer
w.write(b'\"\"\"\n')
line = b'y' * 1048575 + b'\n'
for _ in range(70):
    w.write(line)
" >"$T/block"
run bounded "$KVCHAT" chat -m "$M" -t 1 <"$T/block"
expect_rc 2; expect_err "a message or line is larger than 64 MiB"
expect_bounded "chat with a 70 MiB block"
# 35 million short lines in one block: put together in linear time
python3 -c "
import sys
w = sys.stdout.buffer
w.write(b'\"\"\"\n')
w.write(b'y\n' * (35 << 20))
" >"$T/lines"
run bounded "$KVCHAT" chat -m "$M" -t 1 <"$T/lines"
expect_rc 2; expect_err "a message or line is larger than 64 MiB"
expect_bounded "chat with a block of 35 million lines"
rm -f "$T/lines" "$T/block" "$T/64m"
finish
