#!/bin/sh
# bench-pack.sh - building the packed-weight cache (core/engine/packed.c,
# OpenMP) of the largest model a test can make, 1 thread against 2
# (OMP_NUM_THREADS), issue 28's acceptance (2 threads >= 1.7x faster): a
# 7B-shaped Q4_K_M model (dim 4096, 32 layers, 32 heads, 8 KV heads, ff
# 14336, made as Q8_0 by tests/mkmodel, 7.7 GB, written as it is made
# (--stream, --fast-random), then requantized to Q4_K_M by llama.cpp's
# quantizer (bench/llama-quantize.sh) and the Q8_0 removed; without llref,
# the Q8_0 itself). Each run opens the model in a new process with an empty home whose cache
# directory cannot be written, so the packing is done in memory and
# nothing is written: the figure is the whole `kvchat eval -p 1` (open,
# pack, one token), best of REPS. Disk: about 12 GB while it is made, 4-8
# GB kept in BENCH_DIR. Part of `make bench` only when PACK_BENCH=1 (it is
# long); not a test.
#
# Environment: BENCH_DIR (as bench/bench.sh), LLREF, REPS (3), SHAPE (the
# mkmodel options of the model), MAKE_ONLY=1 (make the model, time nothing).
set -eu
LLREF=${LLREF:-$HOME/.cache/llref/llref}
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
reps=${REPS:-3}
shape=${SHAPE:---arch llama --n-vocab 32000 --dim 4096 --layers 32 --heads 32 --kv-heads 8 --ff 14336}
mkdir -p "$dir"
[ -x tests/mkmodel ] || make tests/mkmodel >/dev/null
if [ -x "$LLREF" ]; then
    m=$dir/big-Q4_K_M.gguf
    if [ ! -f "$m" ]; then
        nice tests/mkmodel "$dir/big-Q8_0.tmp.gguf" $shape --type Q8_0 --stream --fast-random >/dev/null
        BENCH_DIR=$dir LLREF=$LLREF sh bench/llama-quantize.sh "$dir/big-Q8_0.tmp.gguf" "$m.tmp" Q4_K_M
        mv "$m.tmp" "$m"
        rm -f "$dir/big-Q8_0.tmp.gguf"
    fi
else
    echo "bench-pack: no llref at $LLREF: a Q8_0 model instead"
    m=$dir/big-Q8_0.gguf
    [ -f "$m" ] || nice tests/mkmodel "$m" $shape --type Q8_0 --stream --fast-random >/dev/null
fi
[ "${MAKE_ONLY:-0}" = 1 ] && { echo "bench-pack: made $m"; exit 0; }
home=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bench-home.XXXXXX")
trap 'rm -rf "$home"' EXIT
: >"$home/packed" # a file where the cache directory would be: nothing is written
echo "bench-pack: $(basename "$m") ($(du -h "$m" | cut -f1)); CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$m" >/dev/null # in the page cache for every run
for n in 1 2; do
    : >"$home/t$n"
    for r in $(seq "$reps"); do
        t0=$(date +%s.%N)
        KVCHAT_HOME=$home OMP_NUM_THREADS=$n ./kvchat eval -m "$m" -t "$n" -p 1 -v 2>"$home/err" >/dev/null
        t1=$(date +%s.%N)
        grep -q 'packed now' "$home/err" || { echo "bench-pack: the weights were not packed in memory:"; cat "$home/err"; exit 1; }
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }' >>"$home/t$n"
    done
done
t1=$(sort -g "$home/t1" | head -1) t2=$(sort -g "$home/t2" | head -1)
echo "open + pack + 1 token: 1 thread $t1 s, 2 threads $t2 s: $(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", a / b }')x (goal >= 1.7)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
