#!/bin/sh
# t0024: /load NAME opens a session with its own model (issue 29) - a chat
# on model A that loads a session saved with model B switches to B (as
# `kvchat NAME` opens it): the next answer is B's, the same as B's own chat
# gives, and the session keeps B; a session whose model is gone is refused
# and the chat goes on with A; --switch-model keeps A (the history computed
# again).
. "$TOP/tests/cli/lib.sh"
mk() { qwen2_tiny "$1" --seed "$2"; }
A=$T/a.gguf B=$T/b.gguf
mk "$A" 1; mk "$B" 2
model_of() { "$KVCHAT" sessions list --json | jq -r --arg n "$1" '.[] | select(.name == $n) | .model'; }
printf 'Hello there.\n' | "$KVCHAT" -m "$B" -t 1 --temp 0 -n 6 chat onb >/dev/null 2>&1
printf 'Hello there.\n' | "$KVCHAT" -m "$B" -t 1 --temp 0 -n 6 chat refb >/dev/null 2>&1
# the reference: B's own chat answers the second message
printf 'And then?\n' | "$KVCHAT" -t 1 --temp 0 -n 6 chat refb >"$T/want" 2>/dev/null

run sh -c "printf 'A first.\n/load onb\nAnd then?\n' | $KVCHAT -m $A --yes -t 1 --temp 0 -n 6"
expect_rc 0
expect_err "session 'onb' was saved with model b.gguf: switched to it"
tail -n 1 "$T/out" >"$T/got"
cmp -s "$T/got" "$T/want" && ok "the answer after /load is model B's (as B's own chat gives)" ||
    { not_ok "the answer differs"; cat "$T/got" "$T/want"; }
[ "$(model_of onb)" = "$B" ] && ok "the session keeps model B" || not_ok "model $(model_of onb)"
[ "$("$KVCHAT" sessions export onb | jq '.messages | length')" = 4 ] && ok "and got the exchange" || not_ok "messages"

# a session whose model is gone: refused, the chat goes on with A
cp "$B" "$T/c.gguf"
printf 'Hi.\n' | "$KVCHAT" -m "$T/c.gguf" -t 1 --temp 0 -n 4 chat onc >/dev/null 2>&1
rm "$T/c.gguf"
run sh -c "printf '/load onc\nStill here?\n' | $KVCHAT -m $A -t 1 --temp 0 -n 4"
expect_rc 0
expect_err "session 'onc' was saved with model '$T/c.gguf', which is gone"
[ -s "$T/out" ] && ok "the chat went on with its own model" || not_ok "no answer after the refusal"
[ "$("$KVCHAT" sessions export onc | jq '.messages | length')" = 2 ] && ok "onc is unchanged" || not_ok "onc changed"

# --switch-model: the chat's model goes on with the session
run sh -c "printf '/load onb\nOnce more.\n' | $KVCHAT -m $A --switch-model -t 1 --temp 0 -n 4"
expect_rc 0
[ "$(model_of onb)" = "$A" ] && ok "--switch-model: the session goes on with A" || not_ok "model $(model_of onb)"
finish
