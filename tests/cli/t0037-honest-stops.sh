#!/bin/sh
# t0037: issue 29's honest stops and smaller items. `run` reading a prompt
# from a terminal ends at one Ctrl-D; an answer cut by a full context is
# said on stderr with exit 6; an offline `models pull` does not retry a
# name that does not resolve; an unknown config key is warned about; a
# read-only `kvchat sessions` on a fresh home creates nothing; KVCHAT_CPU
# is strict; the no-model message names `models add FILE`; `bench -r 1`
# warms up; --no-no-cache is no option; the help texts; a first turn that
# never answers leaves no session (run -s, and chat NAME left, refused or
# killed before its first answer; made with it, with what was set before);
# `models list` rows as a terminal shows
# them, with columns that line up; a SIGTERM that comes before a chat's
# turn stops it.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" || exit 1
TO="timeout -k 5 120"
export LC_ALL=C.UTF-8 TERM=xterm

# ---- run on a terminal: one Ctrl-D ends the prompt (it waited for a second)
printf 'expect reading the prompt from stdin\nsend hi\\r\nsend \\x04\nexit 0\n' >"$T/ctrl-d"
if python3 "$TOP/tests/cli/ptydrive.py" --timeout 30 --log "$T/ctrl-d.log" -- \
    $KVCHAT run -m "$M" -t 1 --temp 0 -n 4 <"$T/ctrl-d" >"$T/ctrl-d.drv" 2>&1; then
    ok "run: one Ctrl-D after the prompt ends it"
else
    not_ok "run: one Ctrl-D is not enough"
    sed 's/^/  /' "$T/ctrl-d.drv"
fi

# ---- an answer that fills the context says so, with its own exit status
run sh -c "$TO $KVCHAT run -m $M -t 1 --temp 0.9 --seed 1 -c 64 -n 100 --json hi < /dev/null"
expect_rc 6
[ "$(jq -r .stop_reason "$T/out")" = context_full ] && ok "stop_reason context_full" ||
    not_ok "stop_reason $(jq -r .stop_reason "$T/out")"
expect_err "the answer filled the context window (64 tokens)"
run sh -c "$TO $KVCHAT run -m $M -t 1 --temp 0.9 --seed 1 -c 64 -n 100 hi < /dev/null"
expect_rc 6
[ -s "$T/out" ] && ok "the cut answer is printed all the same" || not_ok "no answer printed"
grep -q '^\.B 6$' "$TOP/man/kvchat.1" && ok "kvchat.1 documents exit 6" ||
    not_ok "kvchat.1 lacks exit 6"
$KVCHAT run --help | grep -q "6 the answer" && ok "run --help documents exit 6" || not_ok "run --help lacks exit 6"

# ---- offline: a name that does not resolve is not retried for seconds
run sh -c "$TO $KVCHAT models pull https://kvchat-test.invalid/m.gguf"
expect_rc 4
expect_err "cannot resolve 'kvchat-test.invalid'"
grep -q "retrying" "$T/err" && not_ok "a DNS failure is retried" || ok "a DNS failure is not retried"

# ---- an unknown config key is said, not ignored
mkdir -p "$XDG_CONFIG_HOME/kvchat"
printf '# mine\ntemp = 0\ntmep = 0\n' >"$XDG_CONFIG_HOME/kvchat/config"
run sh -c "$TO $KVCHAT run -m $M -t 1 -n 2 hi < /dev/null"
expect_rc 0
expect_err "warning: unknown key 'tmep' (line 3) in the config file"
grep -q "'temp'" "$T/err" && not_ok "a known key warned about" || ok "known keys are not warned about"
rm "$XDG_CONFIG_HOME/kvchat/config"

# ---- a read-only `kvchat sessions` on a fresh home creates nothing
for cmd in "sessions" "sessions --json" "sessions show x" "sessions export x" "sessions search hello" "sessions gc"; do
    run env KVCHAT_HOME="$T/fresh" $KVCHAT $cmd
    [ ! -e "$T/fresh" ] && ok "'$cmd' on a fresh home: nothing made (exit $rc)" ||
        { not_ok "'$cmd' made $(find "$T/fresh" | tr '\n' ' ')"; rm -rf "$T/fresh"; }
done
run env KVCHAT_HOME="$T/fresh" $KVCHAT sessions --json
expect_rc 0
[ "$(cat "$T/out")" = "[]" ] && ok "sessions --json: []" || not_ok "sessions --json: $(cat "$T/out")"
run env KVCHAT_HOME="$T/fresh" $KVCHAT sessions show x
expect_rc 3
expect_err "no session 'x'"

# ---- KVCHAT_CPU is strict
run env KVCHAT_CPU=bogus $KVCHAT run -m "$M" -n 1 hi
expect_rc 1
expect_err "KVCHAT_CPU"

# ---- no model at all: the message names models add FILE
run env KVCHAT_HOME="$T/nomodel" $KVCHAT run hi
expect_rc 2
expect_err "kvchat models add FILE"

# ---- bench -r 1 measures a warm run
run $KVCHAT bench -m "$M" -t 1 -p 8 -n 4 -r 1 -v
expect_rc 0
expect_err "warm-up: 8 prompt tokens and 1 generated, untimed"

# ---- the option and help texts
run $KVCHAT run -m "$M" --no-no-cache hi
expect_rc 1
run $KVCHAT chat --help
grep -q "KV snapshots" "$T/out" && not_ok "chat --help says KV snapshots" || ok "chat --help says blocks"
run $KVCHAT --help
expect_out "search"

# ---- a first turn that never answers leaves no session
printf 'word %.0s' $(seq 1 200) >"$T/long"
run sh -c "$TO $KVCHAT run -m $M -t 1 -c 64 -s refused -f $T/long < /dev/null"
[ "$rc" != 0 ] && ok "a prompt too long for -c 64 is refused (exit $rc)" || not_ok "not refused"
run $KVCHAT sessions --json
[ "$(jq '[.[] | select(.name == "refused")] | length' "$T/out")" = 0 ] && ok "no empty session 'refused' left" ||
    not_ok "an empty session is left: $(cat "$T/out")"
run sh -c "$TO $KVCHAT run -m $M -t 1 -n 3 -s made hi < /dev/null"
expect_rc 0
run $KVCHAT sessions --json
[ "$(jq '.[] | select(.name == "made") | .turns' "$T/out")" = 1 ] && ok "a first turn that answers makes its session" ||
    not_ok "no session 'made': $(cat "$T/out")"

# ---- the same for `kvchat chat NAME` and `chat -s NAME`: made with its first answer
has_session() { "$KVCHAT" sessions --json | jq -e --arg n "$1" '[.[] | select(.name == $n)] | length == 1' >/dev/null; }
no_session() { # what NAME
    has_session "$2" && not_ok "$1: an empty session '$2' is left: $("$KVCHAT" sessions export "$2")" ||
        ok "$1: no session '$2'"
}
run sh -c "printf '/show\n/set temp 0.5\n/system Be brief.\n/stats\n' | $TO $KVCHAT chat -m $M -t 1 -n 3 pend"
expect_rc 0
expect_err "session    'pend' (new: made with its first answer, then saved after every exchange)"
no_session "left before any answer" pend
run sh -c "printf '/clear\n/undo\n/retry\n' | $TO $KVCHAT chat -m $M -t 1 -n 3 -s pend"
expect_rc 0
no_session "/clear, /undo, /retry before any answer (chat -s)" pend
run sh -c "$TO $KVCHAT chat -m $M -t 1 -c 64 pend < $T/long"
[ "$rc" != 0 ] && ok "chat: a message too long for -c 64 is refused (exit $rc)" || not_ok "chat: not refused"
no_session "a refused first message" pend
# killed (-9) while its first answer streams: nothing was saved, so no session
mkfifo "$T/fifo"
for sig in KILL TERM; do
    rm -f "$T/chat.out"
    $KVCHAT chat -m "$M" -t 1 --temp 0.9 --seed 1 -n 100000 -c 4096 "pend$sig" <"$T/fifo" >"$T/chat.out" 2>"$T/chat.err" &
    pid=$!
    exec 7>"$T/fifo"
    echo "go on" >&7
    i=0
    while [ ! -s "$T/chat.out" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$T/chat.out" ] && ok "SIG$sig: the first answer is streaming" || not_ok "SIG$sig: no answer began"
    kill -$sig $pid
    wait $pid
    rc=$?
    exec 7>&-
    if [ $sig = KILL ]; then
        [ "$rc" = 137 ] && ok "SIGKILL: killed (137)" || not_ok "SIGKILL: exit $rc"
        no_session "killed during its first answer" pendKILL
    else # a signal ends the answer where it is, and it is kept (as run's)
        [ "$rc" = 130 ] && ok "SIGTERM: exit 130" || not_ok "SIGTERM: exit $rc"
        has_session pendTERM && ok "SIGTERM during the first answer: the partial answer makes the session" ||
            not_ok "SIGTERM: no session pendTERM"
        [ "$("$KVCHAT" sessions export pendTERM | jq -r '.messages[-1].stop_reason')" = interrupted ] &&
            ok "SIGTERM: its answer is kept as interrupted" || not_ok "SIGTERM: $("$KVCHAT" sessions export pendTERM)"
    fi
done
# the first answer makes it, with what was set before it
run sh -c "printf '/system Be brief.\n/set temp 0.5\nhi\n' | $TO $KVCHAT chat -m $M -t 1 -n 3 pend"
expect_rc 0
run "$KVCHAT" sessions export pend
[ "$(jq -c '[.messages[].role]' "$T/out")" = '["system","user","assistant"]' ] &&
    [ "$(jq -r '.messages[0].content' "$T/out")" = "Be brief." ] && [ "$(jq -r .params.temp "$T/out")" = 0.5 ] &&
    ok "the first answer makes the session, with the system prompt and /set's temp" ||
    not_ok "session pend: $(cat "$T/out")"
# the session then answers as --no-cache does, from its blocks
run sh -c "$TO $KVCHAT run -m $M -t 1 -n 4 --json --no-cache -s pend again < /dev/null"
want=$(jq -r .answer "$T/out")
run sh -c "$TO $KVCHAT run -m $M -t 1 -n 4 --json -s pend again < /dev/null"
[ "$(jq -r .answer "$T/out")" = "$want" ] && [ "$(jq -r .cached_tokens "$T/out")" -gt 0 ] &&
    ok "resumed from its blocks, --no-cache's answer" || not_ok "resumed: $(cat "$T/out") vs '$want'"

# ---- models list on a terminal: names as a terminal shows them, columns that line up
# (names follow the store's rule; a file's metadata and a .remote file's
# fields are anyone's bytes: an architecture of ESC [2J BEL, one of "ééq",
# five bytes like "qwen2" in three characters, and a remote model named
# with ESC [2J)
mkdir -p "$KVCHAT_HOME/models"
for f in esc wide plain; do cp "$M" "$KVCHAT_HOME/models/$f.gguf"; done
python3 - "$KVCHAT_HOME/models" <<'PY'
import sys
d = sys.argv[1]
for name, arch in (("esc", b"\x1b[2J\x07"), ("wide", "ééq".encode())):
    p = "%s/%s.gguf" % (d, name)
    b = open(p, "rb").read()
    old = b"\x05\x00\x00\x00\x00\x00\x00\x00qwen2"
    assert old in b and len(arch) == 5
    open(p, "wb").write(b.replace(old, old[:8] + arch))
PY
printf 'url = http://127.0.0.1:9/v1\nmodel = a\033[2Jb\nadded = 1\n' >"$KVCHAT_HOME/models/rem.remote"
printf 'expect PATH\nexit 0\n' >"$T/ml"
python3 "$TOP/tests/cli/ptydrive.py" --timeout 30 --cols 250 --raw "$T/ml.raw" -- $KVCHAT models list <"$T/ml" >"$T/ml.drv" 2>&1 ||
    { not_ok "models list on a terminal"; cat "$T/ml.drv"; }
python3 - "$T/ml.raw" <<'PY' && ok "models list: no escape from a name reaches the terminal" || not_ok "models list: raw escapes"
import sys
raw = open(sys.argv[1], "rb").read()
sys.exit(1 if b"\x1b[2J" in raw else 0)
PY
python3 - "$T/ml.raw" <<'PY' && ok "models list: the columns line up (in characters)" || not_ok "models list: columns shift"
import sys
rows = open(sys.argv[1], "rb").read().decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
rows = [r for r in rows if "/models/" in r or "http://" in r]
print("  rows:", len(rows), "last columns at", sorted({r.index(" /") if " /" in r else r.index(" http") for r in rows}))
sys.exit(0 if len(rows) == 4 and len({r.index(" /") if " /" in r else r.index(" http") for r in rows}) == 1 else 1)
PY

# ---- a SIGTERM that comes before a piped chat's turn: the message is not sent
rm -f "$T/fifo"
mkfifo "$T/fifo"
$KVCHAT chat -m "$M" -t 1 --temp 0.9 --seed 1 -n 2000 <"$T/fifo" >"$T/out" 2>"$T/err" &
pid=$!
exec 7>"$T/fifo"
printf 'hello' >&7 # a line not ended yet: kvchat waits for the rest
sleep 3
kill -TERM $pid
wait $pid
rc=$?
exec 7>&-
[ "$rc" = 130 ] && ok "SIGTERM before the turn: exit 130" || not_ok "SIGTERM before the turn: exit $rc"
[ ! -s "$T/out" ] && ok "no answer was generated" || not_ok "an answer came after SIGTERM: $(head -c 200 "$T/out")"
finish
