#!/bin/sh
# t0021: a damaged session index is always reported (issue 15 item 10):
# with each page of kvchat.db overwritten in turn, `run -s` exits 3 with
# "kvchat: ...database '<path>': <SQLite's reason>" (or, where the page held
# nothing, answers exactly as before the damage), and `sessions show`
# and `sessions list` (before it) either say the same or give exactly what they gave
# before the damage - never a wrong answer in silence.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M" --ctx 4096
R="$KVCHAT run -m $M -t 2 --temp 0 -n 4"
for s in s1 s2 s3; do for t in 1 2 3; do $R -s $s "turn $t of $s" < /dev/null > /dev/null 2>&1; done; done
H=$KVCHAT_HOME
[ ! -e "$H/kvchat.db-wal" ] || [ ! -s "$H/kvchat.db-wal" ] && ok "the index is checkpointed" || not_ok "a WAL is left"
"$KVCHAT" sessions show s2 > "$T/show.want"
"$KVCHAT" sessions list --json > "$T/list.want"
cp -r "$H" "$T/base"
pages=$(( $(stat -c %s "$T/base/kvchat.db") / 4096 ))
[ "$pages" -ge 10 ] && ok "$pages pages" || not_ok "only $pages pages"
# what the run answers from the undamaged index (a page of an empty table,
# such as an attention-only model's snapshots, holds nothing to damage)
rm -rf "$H"; cp -r "$T/base" "$H"
$R -s s1 'after the damage' < /dev/null > "$T/run.want" 2>/dev/null
p=2
while [ $p -le $pages ]; do
    rm -rf "$H"; cp -r "$T/base" "$H"
    python3 -c "
import sys
f = open(sys.argv[1], 'r+b'); f.seek((int(sys.argv[2]) - 1) * 4096 + 8); f.write(b'\xa5' * 2000); f.close()" "$H/kvchat.db" $p
    for what in show list; do
        if [ $what = show ]; then run "$KVCHAT" sessions show s2; else run "$KVCHAT" sessions list --json; fi
        if [ "$rc" = 3 ] && grep -q "^kvchat: database '$H/kvchat.db': " "$T/err"; then
            ok "page $p: $what reports it"
        elif [ "$rc" = 0 ] && cmp -s "$T/out" "$T/$what.want"; then
            ok "page $p: $what unaffected"
        else
            not_ok "page $p: sessions $what exit $rc, $(head -c 200 "$T/err")"
        fi
    done
    run sh -c "$R -s s1 'after the damage' < /dev/null"
    if [ "$rc" = 3 ] && grep -q "^kvchat: .*database '$H/kvchat.db': " "$T/err"; then
        ok "page $p: run says $(head -c 120 "$T/err")"
    elif [ "$rc" = 0 ] && cmp -s "$T/out" "$T/run.want" && [ ! -s "$T/err" ]; then
        ok "page $p: run unaffected (answers as before the damage)"
    else
        not_ok "page $p: run exit $rc: $(cat "$T/err")"
    fi
    p=$((p + 1))
done
finish
