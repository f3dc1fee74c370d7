#!/bin/sh
# bench-bigmoe.sh - the largest mixture-of-experts file this machine holds
# (issue 24: 24 GiB of RAM), made and run once: a full-size
# Qwen3-30B-A3B-shaped Q4_K_M file (qwen3moe, 48 layers, dim 2048, 32 query
# heads and 4 KV heads of 128, 128 experts of width 768, 8 used a token,
# the Qwen2/3 vocabulary, untied output; random weights; 18.6 GB like the
# real file). Prints the first load (a new process with an empty KVCHAT_HOME:
# opening, packing the weights in memory, writing the packed cache file,
# one token), the second load (the cache file mapped), prefill PROMPT and
# decode GEN tok/s (`kvchat bench`, THREADS threads), and the peak RSS of
# each against the file plus the KV cache plus 10% (issue 24's bound).
# The file is kept in BENCH_DIR; the home (its packed cache, as large as
# the file) is removed at the end. Part of nothing; run by hand on a quiet
# machine: it needs about 19 GB of free RAM while it runs.
#
# Making the file (once, with llama.cpp's quantizer: LLREF, default
# ~/.cache/llref/llref), by ROUTE:
#  - deepen (default): bench-moe.sh's 4-layer Q4_K_M file of this shape
#    (made by llama.cpp from an F16 source) deepened to 48 layers by
#    bench/gguf-deepen.c (each layer a copy of a source layer of the same
#    Q4_K_M type mix): minutes. Disk: 2 GB + 18.6 GB.
#  - requantize: 48 layers made in Q8_0 by tests/mkmodel (--stream: written
#    as they are made; --fast-random), then requantized to Q4_K_M by
#    bench/llama-quantize.c (llama.cpp's llama_model_quantize with
#    allow_requantize, 2 threads), the Q8_0 removed: every layer distinct,
#    but an hour and more on a 2-core machine. Disk: 32 GB + 18.6 GB at
#    the peak.
# And while it runs: the packed cache file, 18 GB more (in a temporary home).
#
# Environment: LLREF, BENCH_DIR (default ${TMPDIR:-/tmp}/kvchat-bench-moe),
# ROUTE (deepen), THREADS (2), PROMPT (64), GEN (32).
set -eu
top=$(pwd)
LLREF=${LLREF:-$HOME/.cache/llref/llref}
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench-moe}
route=${ROUTE:-deepen} threads=${THREADS:-2} np=${PROMPT:-64} ng=${GEN:-32}
m=$dir/qwen3moe-30b-a3b-Q4_K_M.gguf
mkdir -p "$dir"
shape="--arch qwen3moe --vocab $top/tests/data/vocab/ggml-vocab-qwen2.gguf --dim 2048
       --heads 32 --kv-heads 4 --head-dim 128 --ff 6144 --experts 128 --experts-used 8 --ff-exp 768
       --ctx 4096 --rope-theta 1000000 --scale 0.02"
if [ ! -f "$m" ]; then
    if [ ! -x "$LLREF" ]; then
        echo "bench-bigmoe: no llref at $LLREF: skipped (the Q4_K_M file is made by llama.cpp's quantizer)"
        exit 0
    fi
    make tests/mkmodel tests/data/vocab/ggml-vocab-qwen2.gguf >/dev/null
    case $route in
    deepen)
        src=$dir/qwen3moe-30b-a3b-L4-Q4_K_M.gguf # bench-moe.sh's file, if it made one
        if [ ! -f "$src" ]; then
            # shellcheck disable=SC2086
            nice tests/mkmodel "$dir/qwen3moe-30b-a3b-L4-F16.gguf" $shape --layers 4 --type F16 >/dev/null
            nice "$LLREF" quantize "$dir/qwen3moe-30b-a3b-L4-F16.gguf" "$src.tmp" Q4_K_M >/dev/null 2>&1
            mv "$src.tmp" "$src"
            rm -f "$dir/qwen3moe-30b-a3b-L4-F16.gguf"
        fi
        make bench/gguf-deepen >/dev/null
        bench/gguf-deepen "$src" "$m.tmp" 48 2>/dev/null
        ;;
    requantize)
        # shellcheck disable=SC2086
        nice tests/mkmodel "$dir/qwen3moe-30b-a3b-Q8_0.gguf" $shape --layers 48 --type Q8_0 --stream --fast-random >/dev/null
        BENCH_DIR=$dir LLREF=$LLREF sh bench/llama-quantize.sh "$dir/qwen3moe-30b-a3b-Q8_0.gguf" "$m.tmp" Q4_K_M
        rm -f "$dir/qwen3moe-30b-a3b-Q8_0.gguf"
        ;;
    *) echo "bench-bigmoe: ROUTE is deepen or requantize"; exit 1 ;;
    esac
    mv "$m.tmp" "$m"
fi

home=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bigmoe-home.XXXXXX")
trap 'rm -rf "$home"' EXIT
num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
gb() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }
size=$(wc -c <"$m")
# KV cache of n positions in f16: layers x 2 (K, V) x kv heads x head dim x 2 bytes
kv() { echo $((48 * 2 * 4 * 128 * 2 * $1)); }
bound() { awk -v f="$size" -v k="$(kv "$1")" 'BEGIN { printf "%.0f", 1.1 * (f + k) }'; }
echo "bench-bigmoe: $(basename "$m") ($(gb "$size") GB), $threads threads; RAM $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)," \
    "available $(awk '/MemAvailable/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# a timed run of kvchat ARGS...: "SECONDS PEAK_RSS_BYTES" in $home/time
timed() {
    KVCHAT_HOME=$home /usr/bin/time -f "%e %M" -o "$home/time" ./kvchat "$@" >"$home/out" 2>"$home/err" || {
        echo "bench-bigmoe: kvchat $* failed:"; cat "$home/err"; exit 1; }
    awk '{ printf "%s %.0f\n", $1, $2 * 1024 }' "$home/time"
}
report() { # what, seconds, rss, positions
    r=$3 b=$(bound "$4")
    echo "$1: $2 s, peak RSS $(gb "$r") GB; file + KV ($4 positions) + 10% = $(gb "$b") GB:" \
        "$(awk -v r="$r" -v b="$b" 'BEGIN { print (r <= b ? "within" : "OVER") }')"
}
# n_ctx of `eval`: the model's context, at most 4096
set -- $(timed eval -m "$m" -t "$threads" -p 1 -v)
grep -q 'packed now' "$home/err" || { echo "bench-bigmoe: the first load did not pack:"; cat "$home/err"; exit 1; }
report "first load (empty home: open, pack, write the packed cache, 1 token)" "$1" "$2" 4096
set -- $(timed eval -m "$m" -t "$threads" -p 1 -v)
grep -q 'mapped from the cache' "$home/err" || echo "bench-bigmoe: the second load did not map the packed cache"
report "second load (the packed cache mapped, 1 token)" "$1" "$2" 4096
set -- $(timed bench -m "$m" -t "$threads" -p "$np" -n "$ng" -r 1 --json)
out=$(cat "$home/out")
echo "prefill $np: $(echo "$out" | num prefill_tok_s) tok/s; decode $ng: $(echo "$out" | num decode_tok_s) tok/s" \
    "(weights read a token: $(gb "$(echo "$out" | num decode_weight_bytes)") GB)"
report "kvchat bench" "$1" "$2" $((np + ng))
echo "disk: the file $(gb "$size") GB, the packed cache $(gb "$(du -sb "$home" | cut -f1)") GB"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
