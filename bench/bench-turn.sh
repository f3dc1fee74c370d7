#!/bin/sh
# bench-turn.sh - a chat turn at depth (issue 28's acceptance): on the
# Qwen2.5-0.5B-shaped Q8_0 model (the one bench/bench.sh makes), a session
# with about DEPTH tokens of history, then a new `kvchat run -s` process
# sends a message of about NEW tokens: its `--json` ttft_ms (from the start
# of the process: opening the model and the session, restoring, faulting
# in the packed weights and the prefill included) against the target of
# one decode step + NEW tokens at the prefill-512 rate (from `kvchat bench
# -p 512`), and against llama.cpp's prefill of NEW tokens at that depth
# in one batch (bench/llama-depth.c, built here against llref's library:
# measuring it by difference of two long prefills was lost in their noise).
# Goals: ttft <= 1.5 x target; llama.cpp's / ttft >= 1.5. Part of
# `make bench`; not a test.
#
# Environment: DEPTH (default 4000), NEW (20), THREADS (2), REPS (3: each
# figure the best of REPS), LLREF, BENCH_DIR (as bench/bench.sh).
set -eu
LLREF=${LLREF:-$HOME/.cache/llref/llref}
. bench/bench-lib.sh
threads=${THREADS:-2} depth=${DEPTH:-4000} new=${NEW:-20} reps=${REPS:-3}
bench_need_model bench-turn
bench_home
echo "bench-turn: $threads threads, depth $depth, $new new tokens, best of $reps; CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
ctx=$((depth + 1024))
base="./kvchat run -m $model -t $threads -c $ctx --temp 0 -n 1 --json"
# the history: a system prompt of about DEPTH tokens (one token a word)
$base -s deep --system "$(words $((depth - 30)) 1)" "first question" </dev/null >"$home/first.json"
hist=$(num prompt_tokens <"$home/first.json")
: >"$home/ttft"
for r in $(seq "$reps"); do
    # a new process each time; then the session is made again (its blocks
    # come from the store) so that every repetition restores the same history
    $base -s deep "$(words $((new - 6)) $((r + 1)))" </dev/null >"$home/turn.json"
    num ttft_ms <"$home/turn.json" >>"$home/ttft"
    pf=$(num prefilled_tokens <"$home/turn.json") rs=$(num restored_tokens <"$home/turn.json")
    ./kvchat sessions rm deep >/dev/null 2>&1 || true
    $base -s deep --system "$(words $((depth - 30)) 1)" "first question" </dev/null >/dev/null
done
ttft=$(best <"$home/ttft")
b=$(./kvchat bench -m "$model" -t "$threads" -p 512 -n 32 -r "$reps" --json)
pp=$(echo "$b" | num prefill_tok_s) tg=$(echo "$b" | num decode_tok_s)
target=$(awk -v pp="$pp" -v tg="$tg" -v n="$pf" 'BEGIN { printf "%.1f", 1000 / tg + 1000 * n / pp }')
echo "history $hist tokens (restored $rs), message $pf tokens prefilled"
echo "kvchat: new run -s process ttft $ttft ms; target (1 decode step at $tg tok/s + $pf tokens at $pp tok/s) $target ms;" \
    "ttft / target $(awk -v a="$ttft" -v b="$target" 'BEGIN { printf "%.2f", a / b }') (goal <= 1.5)"
if [ -x "$LLREF" ]; then
    # llama.cpp's prefill of the message at that depth, by bench/llama-depth.c
    # (built here against the library ../shared/peer/setup.sh installed)
    lh=$(dirname "$LLREF")
    lib=$(sed -n 's/^LLREF_LIBDIR="\(.*\)" exec.*/\1/p' "$LLREF")
    ld=$dir/llama-depth
    if [ ! -x "$ld" ] || [ bench/llama-depth.c -nt "$ld" ]; then
        cc -O2 -std=c11 -D_GNU_SOURCE -o "$ld" bench/llama-depth.c -I"$lh/src/include" -I"$lh/src/ggml/include" \
            -L"$lib" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$lib"
    fi
    out=$(LLREF_LIBDIR="$lib" "$ld" "$model" -d "$hist" -p "$pf" -t "$threads" -r "$reps")
    d=$(echo "$out" | awk '$1 == "depth_prefill_ms" { print $2 }')
    echo "llama.cpp: $pf tokens at depth $hist in one batch $d ms (one decode step $(echo "$out" | awk '$1 == "decode_ms" { print $2 }') ms);" \
        "llama.cpp / kvchat ttft $(awk -v a="$d" -v b="$ttft" 'BEGIN { printf "%.2f", a / b }') (goal >= 1.5)"
else
    echo "llama.cpp: no llref at $LLREF"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
