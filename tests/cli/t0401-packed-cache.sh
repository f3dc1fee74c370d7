#!/bin/sh
# t0401: packed weights and their cache file ($KVCHAT_HOME/packed, core/engine/packed.c).
# Every quantized weight is packed: the first open packs in memory and
# writes the cache file (header + data, one per model path); the next open
# maps it and computes bit-identical logits; a changed model file, a
# truncated cache file and one with a damaged header are each ignored and
# replaced, never trusted; a home where the cache cannot be written still
# works; temp files of dead writers are removed; 'models rm' removes a
# stored model's cache file; matrices whose groups of 8 rows are odd in
# number or partial give the same bits on the AVX2 and portable kernels.
. "$TOP/tests/cli/lib.sh"
cp "$TOP/tests/data/quant/m-Q5_0.gguf" "$T/m.gguf"
P=$KVCHAT_HOME/packed

evalv() { run "$KVCHAT" eval -m "$T/m.gguf" -p "1 5 9 33" --token-by-token --logits-out "$T/$1" -v; }
n_files() { ls "$P" 2>/dev/null | grep -c '\.kvpack$'; }

# 1 layer: its 7 matrices (Q5_0) and the output (Q6_K)
evalv l0.f32
expect_rc 0
expect_err '8 weights packed (.*, packed now)'
[ "$(n_files)" = 1 ] && ok "one cache file" || not_ok "$(n_files) cache files, wanted 1"
f=$(ls "$P"/*.kvpack)
head -c 8 "$f" | grep -q KVCPACK && ok "cache file starts with KVCPACK" || not_ok "bad magic in $f"
ls "$P" | grep -q tmp && not_ok "a temp file was left" || ok "no temp file left"

evalv l1.f32
expect_rc 0
expect_err '8 weights packed (.*, mapped from the cache)'
cmp -s "$T/l0.f32" "$T/l1.f32" && ok "logits from the cache file are bit-identical" || not_ok "logits differ with the cache file"

# the model file changed (new modification time): packed again, file replaced
sleep 1
touch "$T/m.gguf"
evalv l2.f32
expect_err 'packed now'
[ "$(n_files)" = 1 ] && ok "still one cache file" || not_ok "$(n_files) cache files after the model changed"
evalv l3.f32
expect_err 'mapped from the cache'
cmp -s "$T/l0.f32" "$T/l3.f32" && ok "same logits after repacking" || not_ok "logits changed after repacking"

# a truncated cache file, then one with a damaged header: ignored, replaced
size=$(wc -c <"$f")
head -c $((size - 100)) "$f" >"$T/cut" && cat "$T/cut" >"$f"
evalv l4.f32
expect_rc 0
expect_err 'packed now'
cmp -s "$T/l0.f32" "$T/l4.f32" && ok "truncated cache file not used" || not_ok "logits differ after a truncated cache file"
[ "$(wc -c <"$f")" = "$size" ] && ok "truncated cache file rewritten" || not_ok "cache file not rewritten"
printf 'X' | dd of="$f" bs=1 seek=20 conv=notrunc 2>/dev/null
evalv l5.f32
expect_err 'packed now'
cmp -s "$T/l0.f32" "$T/l5.f32" && ok "damaged header not trusted" || not_ok "logits differ after a damaged header"
evalv l6.f32
expect_err 'mapped from the cache'

# a dead writer's temp file goes; a live one's (this shell's) stays
: >"$P/0123456789abcdef.kvpack.tmp.999999999"
: >"$P/0123456789abcdef.kvpack.tmp.$$"
rm "$f"
evalv l7.f32
[ -e "$P/0123456789abcdef.kvpack.tmp.999999999" ] && not_ok "dead writer's temp file kept" || ok "dead writer's temp file removed"
[ -e "$P/0123456789abcdef.kvpack.tmp.$$" ] && ok "live writer's temp file kept" || not_ok "live writer's temp file removed"

# a model in the store: 'models rm' removes its cache file too
mkdir -p "$KVCHAT_HOME/models"
cp "$T/m.gguf" "$KVCHAT_HOME/models/q5.gguf"
before=$(n_files)
run "$KVCHAT" eval -m q5 -p "1 5 9" -v
expect_err 'packed now'
[ "$(n_files)" = $((before + 1)) ] && ok "the store's model has its cache file" || not_ok "no cache file for the store's model"
run "$KVCHAT" models rm q5
expect_rc 0
[ "$(n_files)" = "$before" ] && ok "models rm removed its cache file" || not_ok "models rm left its cache file"

# decode with packed weights (read two groups at a time from each matrix's
# halves, an odd last group alone, a partial group padded) on the AVX2
# kernels and on the portable ones: a Q8_0 model whose K and V have 1 group
# of 8 rows and whose output has 33 and a half; the same bits
"$MKMODEL" "$T/odd.gguf" --n-vocab 268 --dim 64 --layers 2 --heads 4 --kv-heads 1 --head-dim 8 \
    --ff 96 --type Q8_0 >/dev/null
run "$KVCHAT" eval -m "$T/odd.gguf" -p "1 5 9 33 100 200 7 8" --token-by-token --logits-out "$T/odd-p.f32" -v
expect_err '15 weights packed'
KVCHAT_CPU=generic run "$KVCHAT" eval -m "$T/odd.gguf" -p "1 5 9 33 100 200 7 8" --token-by-token \
    --logits-out "$T/odd-r.f32"
expect_rc 0
[ "$(wc -c <"$T/odd-p.f32")" = 1072 ] && ok "268 logits" || not_ok "not 268 logits"
cmp -s "$T/odd-p.f32" "$T/odd-r.f32" && ok "odd and partial groups: the same bits on every kernel path" \
    || not_ok "odd and partial groups differ between kernel paths"

# a home where nothing can be written (a path under a regular file)
: >"$T/file"
KVCHAT_HOME="$T/file/home" run "$KVCHAT" eval -m "$T/m.gguf" -p "1 5 9 33" --token-by-token --logits-out "$T/l8.f32" -v
expect_rc 0
expect_err 'packed now'
cmp -s "$T/l0.f32" "$T/l8.f32" && ok "same logits without a cache" || not_ok "logits differ without a cache"
finish
