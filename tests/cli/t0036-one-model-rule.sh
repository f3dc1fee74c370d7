#!/bin/sh
# t0036: one rule for models (issue 29). eval, generate, bench, tokenize and
# template find the model as every command does (-m, KVCHAT_MODEL, the
# config file's model); `run MODEL PROMPT` with a store model's name first
# runs that model (ollama's habit) and `chat MODEL` refuses with "did you
# mean -m MODEL?"; where the user named a store model, kvchat names it so
# (run --json, sessions, sessions --json, the mismatch error); models list
# says Q4_K_M, and its columns and those of models aliases line up.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
unset KVCHAT_MODEL
run "$KVCHAT" models add --name tiny "$M"
expect_rc 0
run "$KVCHAT" models default tiny
expect_rc 0
TO="timeout -k 5 120"

# the config file's model, for every command
run $TO "$KVCHAT" eval -p "1 2 3"
expect_rc 0
run $TO "$KVCHAT" generate -p "1 2 3" -n 2
expect_rc 0
run $TO "$KVCHAT" bench -p 8 -n 2 -r 1 -t 1
expect_rc 0
run $TO "$KVCHAT" tokenize "hello world"
expect_rc 0
want=$("$KVCHAT" tokenize -m "$M" "hello world")
[ "$(cat "$T/out")" = "$want" ] && ok "tokenize: the config's model" || not_ok "tokenize: $(cat "$T/out") vs $want"
run $TO "$KVCHAT" template
expect_rc 0
want=$("$KVCHAT" template -m "$M")
[ "$(cat "$T/out")" = "$want" ] && ok "template: the config's model" || not_ok "template differs"
# KVCHAT_MODEL over the config file
"$MKMODEL" "$T/llama.gguf" --arch llama --n-vocab 300 --dim 64 --layers 1 --heads 4 --kv-heads 2 --ff 128 >/dev/null
run env KVCHAT_MODEL="$T/llama.gguf" $TO "$KVCHAT" tokenize "hello world"
expect_rc 0
want=$("$KVCHAT" tokenize -m "$T/llama.gguf" "hello world")
[ "$(cat "$T/out")" = "$want" ] && [ "$want" != "$("$KVCHAT" tokenize -m "$M" "hello world")" ] &&
    ok "tokenize: KVCHAT_MODEL over the config" || not_ok "KVCHAT_MODEL ignored: $(cat "$T/out") vs $want"
# and with none, the message every command gives (the store has a model: choose one)
mv "$XDG_CONFIG_HOME/kvchat/config" "$T/config.saved"
for c in "eval -p 1" "tokenize hi" "bench -p 8 -n 2"; do
    run $TO "$KVCHAT" $c
    expect_rc 2
    expect_err "no default model: choose one with 'kvchat models default NAME' or -m NAME"
done
mv "$T/config.saved" "$XDG_CONFIG_HOME/kvchat/config"

# ollama's run MODEL PROMPT
run sh -c "$TO $KVCHAT run -m tiny -t 2 --temp 0 -n 4 --json 'hello there' < /dev/null"
want=$(jq -c '{answer, prompt_tokens}' "$T/out")
mv "$XDG_CONFIG_HOME/kvchat/config" "$T/config.saved" # no default: the word alone decides
run sh -c "$TO $KVCHAT run tiny -t 2 --temp 0 -n 4 --json 'hello there' < /dev/null"
expect_rc 0
[ "$(jq -c '{answer, prompt_tokens}' "$T/out")" = "$want" ] && [ "$(jq -r .model "$T/out")" = tiny ] &&
    ok "run tiny PROMPT runs tiny with PROMPT" || not_ok "run tiny: $(cat "$T/out"), wanted $want"
mv "$T/config.saved" "$XDG_CONFIG_HOME/kvchat/config"
# chat MODEL
run sh -c "printf 'hi\n' | $TO $KVCHAT chat tiny"
expect_rc 1
expect_err "'tiny' is a model in the store, not a session: did you mean -m tiny?"
run "$KVCHAT" sessions list --json
[ "$(jq '[.[] | select(.name == "tiny")] | length' "$T/out")" = 0 ] && ok "no session named like the model" ||
    not_ok "a session 'tiny' was made"

# store names where the user named a store model
run sh -c "$TO $KVCHAT run -m tiny -t 2 --temp 0 -n 2 -s mine 'a question' < /dev/null"
expect_rc 0
run "$KVCHAT" sessions
expect_out "^mine  *tiny  "
run "$KVCHAT" sessions --json
[ "$(jq -r '.[] | select(.name == "mine") | .model' "$T/out")" = tiny ] && ok "sessions --json: model tiny" ||
    not_ok "sessions --json: $(cat "$T/out")"
run sh -c "$TO $KVCHAT run -m $T/llama.gguf -t 2 -n 2 -s mine 'q' < /dev/null"
expect_rc 3
expect_err "session 'mine' was saved with model 'tiny', not '$T/llama.gguf'"

# models list: Q4_K_M; the columns line up
run "$KVCHAT" models add --name a-rather-long-model-name-for-columns "$TOP/tests/data/models-info/llama-q4_k_m.gguf"
expect_rc 0
run "$KVCHAT" models list
expect_out " Q4_K_M "
grep -q "Q4_K - Medium" "$T/out" && not_ok "models list says 'Q4_K - Medium'" || ok "no 'Q4_K - Medium'"
[ "$(awk '{ print index($0, " /") }' "$T/out" | sed 1d | sort -u | wc -l)" = 1 ] && ok "models list: the paths line up" ||
    not_ok "models list columns shift: $(cat "$T/out")"
run "$KVCHAT" models aliases
[ "$(awk '{ print index($0, "hf:") }' "$T/out" | sort -u | wc -l)" = 1 ] && ok "models aliases: the refs line up" ||
    not_ok "models aliases columns shift: $(cat "$T/out")"
awk '{ i = index($0, "~"); if (i > 1 && substr($0, i - 1, 1) != " ") exit 1 }' "$T/out" && ok "the sizes are apart" || not_ok "sizes touch"
finish
