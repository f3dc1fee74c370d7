#!/bin/sh
# t0034: the model store under concurrency and kills (issue 29's fault
# run). Two `models add --force --copy` of one name at once, in a loop:
# the .gguf and the .meta are always one file's (adds hold models/.add.lock).
# The sidecar is one atomic write (no NAME.meta.tmp.PID is left, every key
# is there). Leftovers of killed adds (.NAME.add-PID.tmp, NAME.meta.tmp.PID
# of processes that are gone) are removed by the next add; a live one's stay.
. "$TOP/tests/cli/lib.sh"
S=$KVCHAT_HOME/models
V="--vocab $TOP/tests/data/vocab/ggml-vocab-qwen2.gguf"
"$MKMODEL" "$T/a.gguf" --arch qwen2 $V --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null
"$MKMODEL" "$T/b.gguf" --arch qwen2 $V --dim 64 --layers 3 --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 \
    --seed 7 >/dev/null
sa=$(stat -c %s "$T/a.gguf"); sb=$(stat -c %s "$T/b.gguf")
[ "$sa" != "$sb" ] && ok "two files of other sizes" || not_ok "same sizes"

bad=0; i=1
while [ $i -le 16 ]; do
    timeout -k 5 60 "$KVCHAT" models add --force --copy --name x "$T/a.gguf" > /dev/null 2>"$T/ea" &
    pa=$!
    timeout -k 5 60 "$KVCHAT" models add --force --copy --name x "$T/b.gguf" > /dev/null 2>"$T/eb" &
    pb=$!
    wait $pa; ra=$?; wait $pb; rb=$?
    size=$(stat -c %s "$S/x.gguf")
    src=$(sed -n 's/^source = //p' "$S/x.meta")
    msize=$(sed -n 's/^size = //p' "$S/x.meta")
    if [ $ra != 0 ] || [ $rb != 0 ]; then
        bad=$((bad + 1)); echo "round $i: exit $ra, $rb: $(cat "$T/ea" "$T/eb")"
    elif { [ "$src" = "$T/a.gguf" ] && cmp -s "$S/x.gguf" "$T/a.gguf" && [ "$msize" = "$sa" ]; } ||
         { [ "$src" = "$T/b.gguf" ] && cmp -s "$S/x.gguf" "$T/b.gguf" && [ "$msize" = "$sb" ]; }; then
        :
    else
        bad=$((bad + 1)); echo "round $i: x.gguf of $size bytes, x.meta says $src ($msize)"
    fi
    i=$((i + 1))
done
[ $bad = 0 ] && ok "16 rounds of two concurrent add --force: .gguf and .meta always of one file" ||
    not_ok "$bad of 16 rounds mixed two files"
ls -A "$S" | grep -q 'tmp' && not_ok "temporary files left: $(ls -A "$S")" || ok "no temporary file left"
for k in source added size pulled; do
    grep -q "^$k = " "$S/x.meta" || not_ok "x.meta lacks $k"
done
ok "x.meta has source, added, size and pulled"

# leftovers of killed adds go; a live writer's stay
: > "$S/.y.add-999999999.tmp"
: > "$S/y.meta.tmp.999999998"
: > "$S/.z.add-$$.tmp"
run timeout -k 5 60 "$KVCHAT" models add --name w "$T/a.gguf"
expect_rc 0
[ ! -e "$S/.y.add-999999999.tmp" ] && [ ! -e "$S/y.meta.tmp.999999998" ] && ok "a dead add's leftovers are removed" ||
    not_ok "left: $(ls -A "$S")"
[ -e "$S/.z.add-$$.tmp" ] && ok "a live add's temporary file stays" || not_ok "a live writer's file was removed"
rm -f "$S/.z.add-$$.tmp"
finish
