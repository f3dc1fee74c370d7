#!/bin/sh
# t0100: kvchat eval, generate and bench on a small test model: output forms,
# agreement with llama.cpp's goldens (tests/data/engine), exit codes.
. "$TOP/tests/cli/lib.sh"

M=$T/llama.gguf
"$MKMODEL" "$M" --arch llama --dim 128 --layers 2 --heads 4 --kv-heads 2 --ff 256 --seed 3 >/dev/null
P=$(cat "$TOP/tests/data/engine/prompt.txt")

run "$KVCHAT" eval -m "$M" -p "$P" --logits-out "$T/l.f32" -t 2
expect_rc 0
[ "$(wc -l <"$T/out")" -eq 5 ] && ok "five lines" || not_ok "not five lines"
expect_out '^[0-9][0-9]* -\{0,1\}[0-9][0-9]*\.[0-9]\{6\}$'
[ "$(wc -c <"$T/l.f32")" -eq 2048 ] && ok "logits file of n_vocab f32" || not_ok "logits file size"
# the top id is llama.cpp's
top=$(od -An -tf4 -v -w4 "$TOP/tests/data/engine/llama-F32.logits" | awk '{ if (NR == 1 || $1 > m) { m = $1; b = NR - 1 } } END { print b }')
head -n 1 "$T/out" | grep -q "^$top " && ok "top id $top as llama.cpp" || not_ok "top id is not $top"

run "$KVCHAT" generate -m "$M" -p "$P" -n 16
expect_rc 0
[ "$(cat "$T/out")" = "$(cat "$TOP/tests/data/engine/llama-F32.greedy")" ] && ok "greedy ids as llama.cpp" \
    || not_ok "greedy ids differ: $(cat "$T/out")"

run "$KVCHAT" generate -m "$M" -p "1 2 3" -n 10 -c 8
expect_rc 0; expect_err 'context full'
[ "$(wc -w <"$T/out")" -eq 6 ] && ok "stopped at the context size" || not_ok "did not stop: $(cat "$T/out")"

run "$KVCHAT" bench -m "$M" -p 16 -n 4 -r 1 --json -t 1
expect_rc 0
for k in model threads prefill_tokens prefill_tok_s decode_tokens decode_tok_s rss_bytes; do
    expect_out "\"$k\": "
done
run "$KVCHAT" bench -m "$M" -p 8 -n 2 -r 1 -v
expect_rc 0; expect_out 'pp8'; expect_out 'tg2'; expect_err 'kvchat: kernels [a-z0-9]*, [0-9]* threads'
KVCHAT_CPU=generic run "$KVCHAT" bench -m "$M" -p 8 -n 2 -r 1 -v
expect_rc 0; expect_err 'kernels generic'

# errors
run "$KVCHAT" eval -m "$M" -p "1 2 512"
expect_rc 2; expect_out_empty; expect_err 'token id 512 is out of range'
run "$KVCHAT" generate -m "$M" -p "-1" -n 2
expect_rc 2; expect_out_empty
run "$KVCHAT" eval -m "$T/none.gguf" -p "1"
expect_rc 2; expect_err "cannot open model"
echo "not a model" >"$T/junk.gguf"
run "$KVCHAT" eval -m "$T/junk.gguf" -p "1"
expect_rc 2; expect_err "cannot open model"
run "$KVCHAT" eval -m "$M"
expect_rc 1; expect_err 'no token ids'
run "$KVCHAT" eval -m "$M" -p "1 x 2"
expect_rc 1; expect_err 'bad token id list'
run "$KVCHAT" bench -m "$M" --kv-type q4
expect_rc 1; expect_err 'kv-type must be f16 or f32'
run "$KVCHAT" generate --help
expect_rc 0; expect_out 'usage: kvchat generate'

finish
