#!/bin/sh
# t0601: reasoning models' options (issue 17): --think takes show, hide, on,
# off (the command line, the config file and /set share the check); run
# --json has a "reasoning" field apart from "answer" (null when the model
# wrote no <think> span); --think off on a template without Qwen3's
# enable_thinking switch warns and changes nothing. The split itself, and
# the no-thinking rendering, are tests/test_template.c's.
. "$TOP/tests/cli/lib.sh"
"$MKMODEL" "$T/m.gguf" --dim 64 --layers 1 --heads 4 --kv-heads 2 --ff 128 --seed 7 >/dev/null

run "$KVCHAT" run --no-cache -m "$T/m.gguf" -n 4 --temp 0 --json hello
expect_rc 0
jq -e '.reasoning == null and (.answer | type) == "string"' "$T/out" >/dev/null &&
    ok "json: reasoning null, answer a string" || not_ok "json: $(cat "$T/out")"
run "$KVCHAT" run --no-cache -m "$T/m.gguf" -n 4 --temp 0 hello
expect_rc 0
a1=$(cat "$T/out")
run "$KVCHAT" run --no-cache -m "$T/m.gguf" -n 4 --temp 0 --think hide hello
expect_rc 0
[ "$(cat "$T/out")" = "$a1" ] && ok "--think hide leaves an answer without reasoning alone" || not_ok "hide changed it"
run "$KVCHAT" run --no-cache -m "$T/m.gguf" -n 4 --temp 0 --think off hello
expect_rc 0
expect_err "the model's chat template cannot switch thinking off"
[ "$(cat "$T/out")" = "$a1" ] && ok "--think off without the switch changes nothing" || not_ok "off changed it"
run "$KVCHAT" run --no-cache -m "$T/m.gguf" --think maybe hello
expect_rc 1
expect_err "bad value 'maybe' for think: expected show, hide, on or off"
mkdir -p "$XDG_CONFIG_HOME/kvchat"
echo "think = hide" > "$XDG_CONFIG_HOME/kvchat/config"
run "$KVCHAT" run --no-cache -m "$T/m.gguf" -n 2 --temp 0 hello
expect_rc 0
echo "think = sometimes" > "$XDG_CONFIG_HOME/kvchat/config"
run "$KVCHAT" run --no-cache -m "$T/m.gguf" -n 2 hello
expect_err "think"
finish
