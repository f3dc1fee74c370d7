#!/bin/sh
# t0031: nothing kvchat reads can hang it (issue 29's fault run). A FIFO in
# place of the config file, the packed-weight cache file, kvchat.db-journal,
# a model file or a --system-file; /dev/zero and /dev/urandom as the config
# file: each is refused at once with a message (or, for the cache file,
# ignored), never waited on or read forever. Config lines longer than 8 KiB
# are one line, and a rewrite keeps them whole. Every command runs under
# `timeout`, so a regression fails (124) instead of hanging the suite.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
C=$XDG_CONFIG_HOME/kvchat/config
mkdir -p "$XDG_CONFIG_HOME/kvchat"
R="timeout -k 5 20 $KVCHAT run -m $M -t 2 --temp 0 -n 2"

# the config file
mkfifo "$C"
run sh -c "$R hello < /dev/null"
expect_rc 1
expect_err "cannot read the config file '$C': it is not a regular file"
for dev in /dev/zero /dev/urandom; do
    rm -f "$C"; ln -s $dev "$C"
    run sh -c "$R hello < /dev/null"
    expect_rc 1
    expect_err "cannot read the config file '$C': it is not a regular file"
done
rm -f "$C"
run sh -c "timeout -k 5 20 $KVCHAT sessions list < /dev/null"
expect_rc 0

# a line over 8 KiB: one line (its tail is not a key), kept whole by a rewrite
long=$(python3 -c "print('x' * 9000)")
printf '# %s temp = 5\nctx = 256\n' "$long" > "$C"
run sh -c "timeout -k 5 20 $KVCHAT run -m $M -t 2 -n 2 --json hello < /dev/null"
expect_rc 0
run timeout -k 5 20 "$KVCHAT" models default "$M"
expect_rc 0
[ "$(head -n 1 "$C" | wc -c)" -gt 9000 ] && ! grep -q '^ *temp' "$C" && ok "the long comment is kept whole" ||
    not_ok "the long line was split: $(cut -c 1-40 "$C" | head -3)"
grep -q "^model = $M\$" "$C" && ok "the rewrite set the model" || not_ok "config: $(tail -2 "$C")"
rm -f "$C"

# kvchat.db-journal
run sh -c "$R -s s hello < /dev/null"
expect_rc 0
mkfifo "$KVCHAT_HOME/kvchat.db-journal"
run timeout -k 5 20 "$KVCHAT" sessions list
expect_rc 3
expect_err "kvchat.db-journal' is not a regular file"
run sh -c "$R -s s again < /dev/null"
[ "$rc" != 124 ] && [ "$rc" != 0 ] && ok "run refuses it too (exit $rc)" || not_ok "run with a FIFO journal: exit $rc"
rm "$KVCHAT_HOME/kvchat.db-journal"

# the packed-weight cache file
cp "$TOP/tests/data/quant/m-Q5_0.gguf" "$T/q.gguf"
ev() { run timeout -k 5 30 "$KVCHAT" eval -m "$T/q.gguf" -p "1 5 9 33" -v; }
ev
expect_rc 0
f=$(ls -t "$KVCHAT_HOME"/packed/*.kvpack | head -1) # q.gguf's, the newest (F32 models are packed too)
rm "$f" && mkfifo "$f"
ev
expect_rc 0
expect_err 'packed now'

# a model file and a system prompt file
mkfifo "$T/fifo"
run timeout -k 5 20 "$KVCHAT" models info "$T/fifo"
[ "$rc" != 124 ] && [ "$rc" != 0 ] && ok "models info of a FIFO: exit $rc" || not_ok "models info of a FIFO: exit $rc"
run sh -c "timeout -k 5 20 $KVCHAT run -m $T/fifo hello < /dev/null"
[ "$rc" != 124 ] && [ "$rc" != 0 ] && ok "run -m FIFO: exit $rc" || not_ok "run -m FIFO: exit $rc"
run sh -c "$R --system-file $T/fifo hello < /dev/null"
expect_rc 2
expect_err "not a regular file"
printf 'You are\000 terse.' > "$T/bin.txt"
run sh -c "$R --system-file $T/bin.txt hello < /dev/null"
expect_rc 2
expect_err "binary file"
finish
