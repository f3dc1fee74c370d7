#!/bin/sh
# bench-load.sh - decode speed while another process takes a core: on the
# Qwen2.5-0.5B-shaped Q8_0 model (the one bench/bench.sh makes), a bounded
# busy loop runs on the side (`sh -c 'while :; do :; done'`, killed after
# each measurement, and in any case by `timeout`) while `kvchat bench` with
# THREADS threads and with 1 thread and `llref bench` with THREADS threads
# decode; the same three without the busy loop for comparison. Prints
# kvchat's ratio to llama.cpp under the same load and to its own one-thread
# figure under that load. Part of `make bench`; not a test.
#
# Environment: LLREF, BENCH_DIR (as bench/bench.sh), THREADS (default 2),
# GEN (tokens decoded, default 128), REPS (best of, default 3), TYPES
# (default "Q8_0").
set -eu
LLREF=${LLREF:-$HOME/.cache/llref/llref}
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
threads=${THREADS:-2} ng=${GEN:-128} reps=${REPS:-3}
num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
have_llref=0
if [ -x "$LLREF" ]; then have_llref=1; else echo "bench-load: no llref at $LLREF: measuring kvchat alone"; fi

busy=
stop_busy() { if [ -n "$busy" ]; then kill "$busy" 2>/dev/null || true; wait "$busy" 2>/dev/null || true; busy=; fi; }
trap stop_busy EXIT INT TERM
start_busy() { timeout 300 sh -c 'while :; do :; done' & busy=$!; sleep 0.5; }

kv_tg() { ./kvchat bench -m "$1" -t "$2" -p 16 -n "$ng" -r "$reps" --json | num decode_tok_s; }
ll_tg() {
    if [ $have_llref = 1 ]; then "$LLREF" bench "$1" -t "$2" -p 16 -n "$ng" -r "$reps" 2>/dev/null | sed -n 's/^decode_tok_s //p'
    else echo 0; fi
}

echo "bench-load: decode of $ng tokens, best of $reps, with and without a busy loop on the side; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-6s %12s %12s %12s %9s %11s\n' type load "kvchat -t$threads" "kvchat -t1" "llama.cpp -t$threads" "vs llama" "vs own -t1"
for type in ${TYPES:-Q8_0}; do
    m=$dir/q-$type.gguf
    [ -f "$m" ] || { echo "bench-load: $m missing: run bench/bench.sh first (make bench does)"; continue; }
    ./kvchat bench -m "$m" -p 4 -n 2 -r 1 >/dev/null # the packed weights' cache file, once
    for load in none busy; do
        [ $load = busy ] && start_busy
        k2=$(kv_tg "$m" "$threads") k1=$(kv_tg "$m" 1) l2=$(ll_tg "$m" "$threads")
        stop_busy
        printf '%-6s %-6s %12s %12s %12s %9s %11s\n' "$type" "$load" "$k2" "$k1" "$l2" "$(ratio "$k2" "$l2")" "$(ratio "$k2" "$k1")"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
