#!/bin/sh
# t0200: `kvchat tokenize` on vocabulary-only GGUF files: ids as llama.cpp
# gives them (llama.cpp's test vectors, tests/data/tokenizer), BOS and
# special-token handling, --pieces, files and stdin, bad input, errors.
. "$TOP/tests/cli/lib.sh"
V=$TOP/tests/data/tokenizer
xz -dc "$V/ggml-vocab-llama-spm.gguf.xz" > "$T/spm.gguf"
xz -dc "$V/ggml-vocab-qwen2.gguf.xz" > "$T/qwen2.gguf"
xz -dc "$V/ggml-vocab-llama-bpe.gguf.xz" > "$T/llama3.gguf"

run "$KVCHAT" tokenize -m "$T/spm.gguf" "Hello world"
expect_rc 0; expect_out '^1 15043 3186$'
run "$KVCHAT" tokenize -m "$T/spm.gguf" --no-bos " Hello world"
expect_rc 0; expect_out '^29871 15043 3186$'
run "$KVCHAT" tokenize -m "$T/llama3.gguf" "Hello world"
expect_rc 0; expect_out '^128000 9906 1917$'
# qwen2 adds no BOS; special tokens are text unless --special
run "$KVCHAT" tokenize -m "$T/qwen2.gguf" "<|im_start|>user"
expect_rc 0; expect_out '^27 91 318 4906 91 29 872$'
run "$KVCHAT" tokenize -m "$T/qwen2.gguf" --special "<|im_start|>user"
expect_rc 0; expect_out '^151644 872$'

run "$KVCHAT" tokenize -m "$T/qwen2.gguf" --pieces --special "<|im_start|>Hi 🦙"
expect_rc 0
expect_out "^151644 '<|im_start|>'$"; expect_out "^13048 'Hi'$"; expect_out "^11162 ' \\\\xf0\\\\x9f'$"

# a file and standard input give the same ids as the argument
printf 'Hello world' > "$T/in.txt"
run "$KVCHAT" tokenize -m "$T/spm.gguf" -f "$T/in.txt"
expect_rc 0; expect_out '^1 15043 3186$'
"$KVCHAT" tokenize -m "$T/spm.gguf" < "$T/in.txt" > "$T/out" 2>"$T/err"; rc=$?
expect_rc 0; expect_out '^1 15043 3186$'

# invalid UTF-8 and empty input: a result, never a crash
printf 'a\377\376 \303 z' > "$T/bad.txt"
run "$KVCHAT" tokenize -m "$T/qwen2.gguf" -f "$T/bad.txt"
expect_rc 0; expect_out '^[0-9][0-9 ]*$'
run "$KVCHAT" tokenize -m "$T/qwen2.gguf" ""
expect_rc 0
[ "$(cat "$T/out")" = "" ] && ok "empty text, empty line" || not_ok "empty text gave ids"
# 1 MB of text
awk 'BEGIN { for (i = 0; i < 20000; i++) printf "The quick brown fox, 1234567 times; "; }' > "$T/big.txt"
run "$KVCHAT" tokenize -m "$T/llama3.gguf" -v -f "$T/big.txt"
expect_rc 0; expect_err 'bytes -> [0-9]* tokens in'

run env -u KVCHAT_MODEL "$KVCHAT" tokenize "x"
expect_rc 2; expect_out_empty; expect_err 'no model configured'
run "$KVCHAT" tokenize -m "$T/spm.gguf" a b
expect_rc 1; expect_err 'expected one TEXT'
run "$KVCHAT" tokenize -m "$T/missing.gguf" "x"
expect_rc 2; expect_err "cannot open model '$T/missing.gguf'"
# a GGUF without a vocabulary
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$T/empty.gguf"
run "$KVCHAT" tokenize -m "$T/empty.gguf" "x"
expect_rc 2; expect_err "cannot read the vocabulary of"

finish
