#!/bin/sh
# t0004: `kvchat run`, pipe mode: the prompt from arguments and stdin, only
# the answer on stdout, --json, exit codes, a closed pipe, Ctrl-C.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
R="$KVCHAT run -m $M -t 2 --temp 0 -n 8"

run sh -c "echo 'Hello there' | $R"
expect_rc 0
[ -s "$T/out" ] && ok "an answer from stdin" || not_ok "no answer"
[ ! -s "$T/err" ] && ok "nothing on stderr" || { not_ok "stderr not empty"; cat "$T/err"; }
cp "$T/out" "$T/a1"

run sh -c "$R 'Hello there' < /dev/null"
expect_rc 0
cmp -s "$T/out" "$T/a1" && ok "PROMPT gives the same answer as stdin" || not_ok "PROMPT differs from stdin"
run sh -c "$R 'Hello there' < /dev/null"
cmp -s "$T/out" "$T/a1" && ok "--temp 0 is byte-identical run after run" || not_ok "not reproducible"

# stdin first, then PROMPT
run sh -c "printf 'some text' | $R --json 'summarise it'"
expect_rc 0
[ "$(jq -r .prompt_tokens "$T/out")" -gt 10 ] && ok "stdin and PROMPT together" || not_ok "prompt tokens"

run sh -c "$R --json 'Hello there' < /dev/null"
expect_rc 0
for k in answer session model prompt_tokens cached_tokens prefilled_tokens generated_tokens ttft_ms \
         prefill_tok_s decode_tok_s stop_reason; do
    jq -e "has(\"$k\")" "$T/out" >/dev/null && ok "json has $k" || not_ok "json lacks $k"
done
[ "$(jq -r .stop_reason "$T/out")" = length ] && ok "stop_reason length" || not_ok "stop_reason"
[ "$(jq '.prompt_tokens == .cached_tokens + .prefilled_tokens' "$T/out")" = true ] && ok "token sum" || not_ok "token sum"
# the JSON answer is the plain answer (which ends with one newline of its
# own), invalid UTF-8 replaced as Python does
python3 -c "import json,sys; a=json.load(open('$T/out'))['answer']; b=open('$T/a1','rb').read().decode('utf-8','replace'); sys.exit(b != (a if a.endswith('\n') else a + '\n'))" \
    && ok "json answer = plain answer" || not_ok "json answer"

# sampling with a seed is reproducible; another seed differs
run sh -c "$KVCHAT run -m $M -t 2 --temp 0.9 --seed 7 -n 12 hi < /dev/null"
cp "$T/out" "$T/s7"
run sh -c "$KVCHAT run -m $M -t 2 --temp 0.9 --seed 7 -n 12 hi < /dev/null"
cmp -s "$T/out" "$T/s7" && ok "--seed 7 reproducible" || not_ok "--seed 7 not reproducible"
run sh -c "$KVCHAT run -m $M -t 2 --temp 0.9 --seed 8 -n 12 hi < /dev/null"
cmp -s "$T/out" "$T/s7" && not_ok "--seed 8 same as 7" || ok "--seed 8 differs"

# errors
run sh -c "$KVCHAT run -m $T/none.gguf hi < /dev/null"
expect_rc 2; expect_out_empty; expect_err "kvchat: cannot find model"
run sh -c "$KVCHAT run -m $M --bogus hi < /dev/null"
expect_rc 1; expect_out_empty; expect_err "unknown option '--bogus'"
run sh -c "$KVCHAT run -m $M --temp abc hi < /dev/null"
expect_rc 1; expect_out_empty
run sh -c "$KVCHAT run -m $M < /dev/null"
expect_rc 1; expect_err "the prompt is empty"
run sh -c "$KVCHAT run -m $M -c 16 -t 2 'a long prompt that does not fit in sixteen tokens at all, not even close' < /dev/null"
expect_rc 2; expect_out_empty; expect_err "does not fit"

# a reader that goes away: no hang, no broken-pipe noise
run sh -c "$KVCHAT run -m $M -t 2 --temp 0.9 --seed 1 -n 2000 -c 2048 'go on' < /dev/null | head -c 10"
expect_rc 0
[ "$(wc -c < "$T/out")" -le 10 ] && ok "head -c 10 got at most 10 bytes" || not_ok "head output"
grep -qi "broken pipe" "$T/err" && not_ok "broken pipe reported" || ok "no broken-pipe message"

# Ctrl-C: exit 130, the partial answer printed
$KVCHAT run -m $M -t 2 --temp 0.9 --seed 1 -n 100000 -c 4096 'go on' < /dev/null > "$T/int.out" 2> "$T/int.err" &
pid=$!
sleep 2
expect_interrupted $pid "SIGINT"
[ -s "$T/int.out" ] && ok "partial answer printed" || not_ok "no partial answer"

run "$KVCHAT" run --help
expect_rc 0; expect_out 'usage: kvchat run'
finish
