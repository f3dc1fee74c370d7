#!/bin/sh
# bench-repl.sh - what carrying the KV cache across turns buys in the chat,
# on the Qwen2.5-0.5B-shaped Q8_0 model (the one bench/bench.sh makes):
# TURNS - 1 messages of about 150 tokens each (answers of 8 tokens), then a
# short question, are piped into one `kvchat chat -v` process, so the last
# turn starts with about 3,000 tokens of history and adds a dozen; its time
# to first token (from the chat's own
# statistics line) is compared with the same last turn under --no-cache,
# which computes the whole history again: the session is forked before the
# last turn and that turn is run with --no-cache (the chat's --no-cache
# recomputes everything at every turn; one turn is enough to time it).
# Not a test; run from the top of the tree after bench/bench.sh.
#
# Environment: TURNS (default 20), WORDS per message (default 50),
# THREADS (default 2), BENCH_DIR (as bench/bench.sh).
set -eu
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
model=$dir/q-Q8_0.gguf
turns=${TURNS:-20}
words=${WORDS:-50}
threads=${THREADS:-2}
[ -f "$model" ] || { echo "bench-repl: $model missing: run bench/bench.sh first"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bench-repl.XXXXXX")
trap 'rm -rf "$work"' EXIT
export KVCHAT_HOME=$work/home XDG_STATE_HOME=$work/state
python3 -c "
import random
r = random.Random(1)
for t in range($turns - 1):
    print(' '.join(r.choice(['alpha','beta','gamma','delta','kappa','sigma']) + str(r.randrange(100)) for _ in range($words)))
print('And what comes next?')
" >"$work/in"
echo "bench-repl: $((turns - 1)) turns of $words words and a short one, $threads threads; load: $(cut -d' ' -f1-3 /proc/loadavg)"
k="./kvchat -m $model -t $threads -c 4096 --temp 0 -n 8 -v"
$k chat long <"$work/in" >/dev/null 2>"$work/cached.err"
grep '^\[prefilled' "$work/cached.err" >"$work/cached.stats"
./kvchat sessions fork long nc --at $((turns - 1)) >/dev/null
tail -n 1 "$work/in" | $k --no-cache chat nc >/dev/null 2>"$work/nocache.err"
grep '^\[prefilled' "$work/nocache.err" >"$work/nocache.stats"
field() { sed "s/.*$1 \([0-9]*\).*/\1/"; }
printf '%5s %9s %9s %12s\n' turn reused prefilled "first token"
n=0
while read -r line; do
    n=$((n + 1))
    printf '%5s %9s %9s %9s ms\n' "$n" "$(echo "$line" | field reused)" "$(echo "$line" | field prefilled)" \
        "$(echo "$line" | field 'first token')"
done <"$work/cached.stats"
line=$(cat "$work/nocache.stats")
a=$(tail -n 1 "$work/cached.stats" | field 'first token')
b=$(echo "$line" | field 'first token')
printf '%5s %9s %9s %9s ms   (--no-cache)\n' "$turns" "$(echo "$line" | field reused)" \
    "$(echo "$line" | field prefilled)" "$b"
echo "turn $turns: time to first token $a ms with the carried KV cache, $b ms recomputing the history:" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.0f", b / a; else print "-" }')x"
