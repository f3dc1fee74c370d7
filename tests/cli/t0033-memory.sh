#!/bin/sh
# t0033: a context whose KV cache cannot fit in the memory left is refused
# with the numbers (exit 2), before anything is faulted in - not populated
# until the OOM killer ends the process (issue 29's fault run: 137 in a
# 3 GiB cgroup). The model has a wide KV (8 layers of 256): -c 16000000
# asks for about 122 GiB, more than the machines that run this suite.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
"$MKMODEL" "$M" --arch qwen2 --n-vocab 300 --dim 256 --layers 8 --heads 4 --kv-heads 4 --ff 128 >/dev/null
run timeout -k 5 60 "$KVCHAT" eval -m "$M" -c 16000000 -p "1 2 3"
expect_rc 2
expect_err "the KV cache of 16000000 positions needs 125000.0 MiB, more than the [0-9.]* MiB of memory available ("
run timeout -k 5 60 "$KVCHAT" eval -m "$M" -c 16000000 --kv-type f32 -p "1 2 3"
expect_rc 2
expect_err "needs 250000.0 MiB"
# a context that fits is made as before
"$MKMODEL" "$T/small.gguf" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 \
    --layers 2 --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null
run timeout -k 5 60 "$KVCHAT" eval -m "$T/small.gguf" -c 100000 -p "1 2 3"
expect_rc 0
finish
