#!/bin/sh
# t0411: how the packed weights come from their cache file (core/engine/
# packed.c): mapped, or read into anonymous huge pages by threads in the
# background while the process opens its session, the first pass waiting
# for the copy. KVCHAT_PACKED_LOAD=map|copy forces each; both must give the
# logits of packing in memory bit for bit (a weight of ~20 MB, so the copy
# is split into several 2 MiB pieces and a partial last one); the path
# taken shows in KVCHAT_TRACE's marks; a forced copy with no cache file yet
# packs in memory as before; a bad value is a clear error.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
"$MKMODEL" "$M" --arch llama --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 128 --layers 2 \
    --heads 4 --kv-heads 2 --ff 384 --tied --type Q8_0 >/dev/null
evalv() { run env KVCHAT_PACKED_LOAD="$1" KVCHAT_TRACE=1 "$KVCHAT" eval -m "$M" -p "1 5 9 33 700 151000" \
    --token-by-token --logits-out "$T/$2" -v; }

# no cache file yet: a forced copy packs in memory (and writes the file)
evalv copy packed.f32
expect_rc 0
expect_err 'packed now'
grep -q 'copy into huge pages' "$T/err" && not_ok "a copy with no cache file" || ok "no copy without a cache file"

evalv map map.f32
expect_rc 0
expect_err 'mapped from the cache'
grep -q 'copy into huge pages' "$T/err" && not_ok "KVCHAT_PACKED_LOAD=map copied" || ok "map: the file mapped"
cmp -s "$T/packed.f32" "$T/map.f32" && ok "mapped: the logits of packing in memory" || not_ok "mapped logits differ"

evalv copy copy.f32
expect_rc 0
expect_err 'copy into huge pages started'
expect_err 'copied into huge pages'
cmp -s "$T/packed.f32" "$T/copy.f32" && ok "copied: the logits of packing in memory" || not_ok "copied logits differ"

# auto: either way by the machine (THP, memory, a balloon reporting free pages); the same bits
evalv auto auto.f32
expect_rc 0
cmp -s "$T/packed.f32" "$T/auto.f32" && ok "auto: the same logits" || not_ok "auto logits differ"

# a session turn through each (run -s: the copy's wait before the first pass of a restore)
for mode in map copy; do
    run env KVCHAT_PACKED_LOAD=$mode "$KVCHAT" run -m "$M" -s s$mode -c 256 -n 6 --temp 0 --json "alpha beta gamma"
    expect_rc 0
    field answer >"$T/a1.$mode"
    run env KVCHAT_PACKED_LOAD=$mode "$KVCHAT" run -m "$M" -s s$mode -c 256 -n 6 --temp 0 --json "delta"
    expect_rc 0
    field answer >"$T/a2.$mode"
done
cmp -s "$T/a1.map" "$T/a1.copy" && cmp -s "$T/a2.map" "$T/a2.copy" && ok "run -s: the same answers mapped and copied" ||
    not_ok "run -s answers differ: $(cat "$T/a1.map" "$T/a2.map") / $(cat "$T/a1.copy" "$T/a2.copy")"

run env KVCHAT_PACKED_LOAD=mmap "$KVCHAT" eval -m "$M" -p "1 5" --logits-out "$T/x.f32"
expect_rc 2
expect_err "KVCHAT_PACKED_LOAD=mmap: unknown (choose map, copy or auto)"
finish
