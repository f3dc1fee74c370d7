#!/bin/sh
# t0409: the vocabulary's cache file ($KVCHAT_HOME/packed/HASH.kvvocab,
# core/text/vocab-cache.c). The first `run` builds the vocabulary and writes
# the file beside the model's .kvpack; later runs map it (the file is not
# written again) and answer byte for byte as the first, in sessions too; a
# damaged or truncated file is not used and is replaced, with the same
# answers; a changed model file makes a new one; --private writes none;
# `models rm` removes it.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
P=$KVCHAT_HOME/packed
R="$KVCHAT run -m $M -t 2 -n 12 --temp 0"
msg=$(printf 'Hello <|im_start|> world, 3333 tokens?! \344\275\240\345\245\275')
vfile() { ls "$P"/*.kvvocab 2>/dev/null; }
stamp() { stat -c %Y.%i "$(vfile)"; }

run $R --private "$msg"
expect_rc 0
cp "$T/out" "$T/private"
[ -z "$(vfile)" ] && ok "--private writes no vocabulary file" || not_ok "--private wrote $(vfile)"

run $R "$msg"
expect_rc 0
cp "$T/out" "$T/first"
f=$(vfile)
[ -n "$f" ] && ok "the vocabulary file is written" || not_ok "no vocabulary file in $P"
[ "${f%.kvvocab}.kvpack" = "$(ls "$P"/*.kvpack)" ] && ok "named as the model's .kvpack" \
    || not_ok "$f is not named as $(ls "$P"/*.kvpack)"
head -c 8 "$f" | grep -q KVCVOCB && ok "it starts with KVCVOCB" || not_ok "bad magic in $f"
[ "$(stat -c %a "$f")" = 600 ] && ok "it is 0600" || not_ok "mode $(stat -c %a "$f")"
cmp -s "$T/first" "$T/private" && ok "the same answer as without the file" || not_ok "answers differ"
cp "$f" "$T/good"

s0=$(stamp)
sleep 1
run $R "$msg"
cmp -s "$T/out" "$T/first" && ok "mapped: the same answer" || not_ok "the answer changed with the mapped vocabulary"
[ "$(stamp)" = "$s0" ] && ok "the file was used, not written again" || not_ok "the file was rewritten"

# a session, each turn a new process on the mapped vocabulary, against --no-cache
run $R -s s "$msg"
expect_rc 0
# (--no-cache first: it leaves the session as it was)
run $KVCHAT run -t 2 -n 12 --temp 0 -s s --no-cache "and a second message"
expect_rc 0
cp "$T/out" "$T/nocache"
run $R -s s "and a second message"
expect_rc 0
cmp -s "$T/out" "$T/nocache" && ok "a session's turn as --no-cache answers it" || not_ok "turn differs from --no-cache"

# damaged in its tables, then cut short: not used, replaced, the same answers
size=$(wc -c <"$f")
printf 'X' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
run $R "$msg"
cmp -s "$T/out" "$T/first" && ok "damaged file: the same answer" || not_ok "answer differs after a damaged file"
cmp -s "$f" "$T/good" && ok "damaged file replaced" || not_ok "damaged file not replaced"
head -c $((size - 64)) "$T/good" >"$f"
run $R "$msg"
cmp -s "$T/out" "$T/first" && ok "truncated file: the same answer" || not_ok "answer differs after a truncated file"
cmp -s "$f" "$T/good" && ok "truncated file replaced" || not_ok "truncated file not replaced"

# the model file changed: a new vocabulary file
sleep 1
touch "$M"
run $R "$msg"
cmp -s "$T/out" "$T/first" && ok "model touched: the same answer" || not_ok "answer differs after touching the model"
cmp -s "$f" "$T/good" && not_ok "the file of the old model file was kept" || ok "a new file for the changed model file"

# a model in the store: 'models rm' removes its vocabulary file too
mkdir -p "$KVCHAT_HOME/models"
cp "$M" "$KVCHAT_HOME/models/tiny.gguf"
n0=$(ls "$P" | grep -c '\.kvvocab$')
run $KVCHAT run -m tiny -n 4 --temp 0 "hi"
expect_rc 0
[ "$(ls "$P" | grep -c '\.kvvocab$')" = $((n0 + 1)) ] && ok "the store's model has its vocabulary file" \
    || not_ok "no vocabulary file for the store's model"
run $KVCHAT models rm tiny
expect_rc 0
[ "$(ls "$P" | grep -c '\.kvvocab$')" = "$n0" ] && ok "models rm removed its vocabulary file" \
    || not_ok "models rm left its vocabulary file"
finish
