#!/bin/sh
# t0410: peak memory of a model's first chat turn (issue 24: "peak RSS of a
# chat turn at most the file size plus KV plus 10%"). The first `run` of a
# model packs its weights (core/engine/packed.c gives each packed row's
# file pages back) and hashes every tensor byte for the fingerprint
# (sessions/blocks.c gives each hashed step's pages back): neither may
# leave the whole file resident beside the packed copy, which once made a
# first turn peak at twice the file. Measured with /usr/bin/time's maximum
# resident set on a ~120 MB Q8_0 model, the first turn (packing, hashing)
# and the second (the cache file mapped, the fingerprint remembered).
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
"$MKMODEL" "$M" --arch llama --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 512 --layers 8 \
    --heads 8 --kv-heads 4 --ff 2048 --tied --type Q8_0 >/dev/null
size=$(wc -c <"$M")
if [ ! -x /usr/bin/time ]; then
    echo "t0410: no /usr/bin/time: peak RSS not measured"
    finish
    exit 0
fi
# what is not the model's weights (the binary, its libraries, the store,
# the vocabulary's tables, scratch): a turn on a tiny model with the same
# vocabulary, twice (its file is small and resident: counted in, generous)
"$MKMODEL" "$T/tiny.gguf" --arch llama --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 1 \
    --heads 4 --kv-heads 2 --ff 128 --tied --type Q8_0 >/dev/null
for i in 1 2; do
    /usr/bin/time -f %M "$KVCHAT" run -m "$T/tiny.gguf" -t 2 -c 256 -n 4 --temp 0 "hello there" >/dev/null 2>"$T/base" ||
        not_ok "the tiny model's turn failed: $(cat "$T/base")"
done
base=$(($(tail -1 "$T/base") * 1024))
for turn in first second; do
    /usr/bin/time -f %M "$KVCHAT" run -m "$M" -t 2 -c 256 -n 4 --temp 0 "hello there" >/dev/null 2>"$T/err" ||
        not_ok "$turn turn failed: $(cat "$T/err")"
    rss=$(($(tail -1 "$T/err") * 1024))
    # the file, 10%, the KV (256 positions x 8 layers x 2 x 256 x f16 = 2 MB) and the rest
    limit=$((size + size / 10 + 2 * 1048576 + base))
    [ "$rss" -le "$limit" ] && ok "$turn turn: peak RSS $((rss >> 20)) MiB <= $((limit >> 20)) MiB (file $((size >> 20)) MiB)" ||
        not_ok "$turn turn: peak RSS $((rss >> 20)) MiB, over $((limit >> 20)) MiB (file $((size >> 20)) MiB)"
done
finish
