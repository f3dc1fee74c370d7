#!/bin/sh
# t0505: the progress line of a long prefill, on a pseudo-terminal: drawn
# on stderr ("prefill N of M tokens · R tok/s") while a 4,000-token /read
# or `run -f` is computed, erased ("\r\033[K") before the answer's first
# text, never there when stderr is not a terminal; and Ctrl-C during that
# prefill: the message is not sent, the session is unchanged, and the chat
# goes on. (How soon Ctrl-C acts is a benchmark: bench/bench-interrupt.sh.)
. "$TOP/tests/cli/lib.sh"
. "$TOP/tests/cli/repl-lib.sh"
# a model big enough that 4,000 tokens take over a second on one thread
B="$T/big.gguf"
"$MKMODEL" "$B" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 256 --layers 4 \
    --heads 4 --kv-heads 2 --ff 1024 --tied --seed 2 --scale 4 --ctx 8192 >/dev/null || exit 1
# three files of 4,000 tokens that share no prefix (the KV blocks of one
# would make the next fast)
for k in 1 2 3; do
    python3 -c "print(' '.join('w%dx%d' % ($k, i % 97) for i in range(1000)))" >"$T/long$k.txt"
done
O="-m $B -t 1 -c 8192 --temp 0"
PROG='prefill [0-9,]+ of [0-9,]+ tokens'

# ---- the chat: /read of a long file shows the line, and it goes
drive chat $KVCHAT $O -n 3 pc <<EOF
expect pc> 
line /read $T/long1.txt
expect (?s)$PROG.*tok/s
expect \npc> 
send \x04
exit 0
exit 0
EOF
# in the raw bytes: the last line drawn is erased before anything else comes
python3 - "$T/chat.raw" <<'PY' && ok "chat: the line is erased before the answer" || not_ok "chat: line not erased"
import re, sys
raw = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
last = [m for m in re.finditer(r"\r\x1b\[Kprefill [0-9,]+ of ([0-9,]+) tokens \u00b7 [0-9]+ tok/s", raw)]
assert last, "no progress line"
after = raw[last[-1].end():]
assert after.startswith("\r\x1b[K"), repr(after[:40])
assert "prefill" not in after
PY
[ "$("$KVCHAT" sessions export pc | jq '.messages | length')" = 2 ] && ok "the turn was saved" || not_ok "pc messages"

# ---- run on a terminal: the line on stderr; in a pipe: none
drive runtty $KVCHAT run $O -n 2 -f "$T/long2.txt" <<EOF
expect $PROG
exit 0
EOF
run sh -c "$KVCHAT run $O -n 2 --no-cache -f '$T/long2.txt' </dev/null"
expect_rc 0
grep -q 'prefill' "$T/err" && not_ok "a progress line in a pipe: $(cat -v "$T/err")" || ok "no progress line when stderr is not a terminal"
grep -q "$(printf '\033')" "$T/err" && not_ok "escape codes in a pipe's stderr" || ok "no escape codes in the pipe"

# ---- Ctrl-C during the prefill: nothing sent, the chat goes on
drive ctrlc $KVCHAT $O -n 3 ci <<EOF
expect ci> 
line /read $T/long3.txt
expect $PROG
send \x03
expect interrupted: the message was not sent
expect \nci> 
say hello h
send \x04
exit 0
EOF
[ "$("$KVCHAT" sessions export ci | jq -c '[.messages[] | .role]')" = '["user","assistant"]' ] &&
    ok "Ctrl-C: only the next exchange is in the session" || not_ok "ci: $("$KVCHAT" sessions export ci)"
finish
