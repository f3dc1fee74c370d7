#!/bin/sh
# bench-search.sh - (a benchmark; `make bench` runs it) `kvchat sessions
# search` on a store of 1,000 sessions x 20 messages (bench/bench_search
# makes it and times the query in the process), then the whole command as a
# user runs it: process start, opening the store, the query, the output
# (median of 11 runs each). The figure in docs/sessions.md comes from here.
#   sh bench/bench-search.sh [SESSIONS [MESSAGES]]
set -eu
cd "$(dirname "$0")/.."
n=${1:-1000}
m=${2:-20}
dir=${TMPDIR:-/tmp}/kvchat-bench-search.$$
trap 'rm -rf "$dir"' EXIT INT TERM
./bench/bench_search --sessions "$n" --messages "$m" --keep "$dir"
echo "the command: KVCHAT_HOME=DIR ./kvchat sessions search QUERY > /dev/null"
for q in the coffee zzznothing; do
    i=0
    : > "$dir/times"
    while [ $i -lt 11 ]; do
        a=$(date +%s%N)
        KVCHAT_HOME="$dir" ./kvchat sessions search "$q" > /dev/null 2>&1
        b=$(date +%s%N)
        echo $(( (b - a) / 1000 )) >> "$dir/times"
        i=$((i + 1))
    done
    med=$(sort -n "$dir/times" | sed -n 6p)
    printf '%-12s median %d.%02d ms\n' "$q" $((med / 1000)) $((med % 1000 / 10))
done
