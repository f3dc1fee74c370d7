#!/bin/sh
# bench-packed-load.sh - how a new process reaches the packed weights
# (core/engine/packed.c, docs/performance.md): the first token of a chat
# turn at depth (as bench/bench-turn.sh: a new `run -s` process, NEW tokens
# after about DEPTH restored) with the cache file mapped
# (KVCHAT_PACKED_LOAD=map) and copied into anonymous huge pages (copy),
# and with an older kvchat binary (OLD=path, e.g. main's) if given,
# alternating round by round. Each way has its own KVCHAT_HOME whose
# packed cache file its own binary wrote (how the file was written decides
# how the page cache holds it), and each round sends the same message to
# all, so that no way restores blocks another computed. Prints each run's
# ttft_ms and the process's CPU ms to the first token (KVCHAT_TRACE), and
# the same first token for all (their bits agree). Not a test.
#
# Environment: DEPTH (default 4000), NEW (20), THREADS (2), REPS (3),
# OLD (none), BENCH_DIR (as bench/bench.sh).
set -eu
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
threads=${THREADS:-2} depth=${DEPTH:-4000} new=${NEW:-20} reps=${REPS:-3} old=${OLD:-}
model=$dir/q-Q8_0.gguf
[ -f "$model" ] || { echo "bench-packed-load: $model missing: run bench/bench.sh first (make bench does)"; exit 1; }
top=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bench-load.XXXXXX")
trap 'rm -rf "$top"' EXIT
words() { python3 -c "import random; r = random.Random($2); print(' '.join(r.choice(['alpha','beta','gamma','delta','kappa','sigma','river','stone']) for _ in range($1)))"; }
echo "bench-packed-load: $threads threads, depth $depth, $new new tokens, $reps rounds; CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
ctx=$((depth + 1024))
ways="map copy"
[ -n "$old" ] && ways="old $ways"
bin_of() { if [ "$1" = old ]; then echo "$old"; else echo ./kvchat; fi; }
# the history, once; then a home for each way, its cache file written by its own binary
KVCHAT_HOME=$top/base ./kvchat run -m "$model" -t "$threads" -c "$ctx" --temp 0 -n 1 -s deep \
    --system "$(words $((depth - 30)) 1)" "first question" </dev/null >/dev/null 2>&1
for w in $ways; do
    cp -a "$top/base" "$top/$w"
    rm -f "$top/$w"/packed/*.kvpack
    KVCHAT_HOME=$top/$w "$(bin_of $w)" run -m "$model" -t "$threads" -c 256 --temp 0 -n 1 hi </dev/null >/dev/null 2>&1
done
num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
for r in $(seq "$reps"); do
    msg=$(words $((new - 6)) $((r + 1)))
    for w in $ways; do
        b=$(bin_of $w)
        KVCHAT_HOME=$top/$w "$b" sessions fork deep r$r >/dev/null
        out=$(KVCHAT_HOME=$top/$w KVCHAT_TRACE=1 KVCHAT_PACKED_LOAD=$([ "$w" = old ] && echo auto || echo "$w") \
              "$b" run -m "$model" -t "$threads" -c "$ctx" --temp 0 -n 1 --json -s r$r "$msg" </dev/null 2>&1)
        cpu=$(echo "$out" | sed -n 's/.*cpu *\([0-9.]*\) .*first token sampled.*/\1/p')
        echo "round $r $w: prefilled $(echo "$out" | num prefilled_tokens) after $(echo "$out" | num restored_tokens)," \
            "ttft $(echo "$out" | num ttft_ms) ms, CPU to the first token $cpu ms," \
            "first token $(echo "$out" | sed -n 's/.*"answer": \("[^"]*"\).*/\1/p'), load $(cut -d' ' -f1 /proc/loadavg)"
    done
done
