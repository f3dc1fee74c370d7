#!/bin/sh
# bench.sh - engine speed on a Qwen2.5-0.5B-shaped model (dim 896, 24 layers,
# 14 heads, 2 KV heads, ff 4864, tied embeddings, the real Qwen2 vocabulary,
# random weights), F32, Q8_0 and Q4_K_M: `kvchat bench` against `llref
# bench` (llama.cpp) in the same run, alternating, with the ratios; for
# each type the fraction of the memory-bandwidth bound decode reaches
# (weight bytes per token x tok/s over `kvchat bench --membw`'s DRAM read
# bandwidth, measured in the same process right after decode); then decode
# at a depth of 4096 tokens (`kvchat bench --depth 4096` against `llref
# bench -p 4096`, which decodes right after its 4096-token prefill) for
# Q8_0 and Q4_K_M. Part of `make bench`; not a test.
#
# Environment: LLREF (default ~/.cache/llref/llref; without it only kvchat is
# measured, Q4_K_M is skipped unless its file is there, and the script says
# so), BENCH_DIR (where the models are kept between runs, default
# ${TMPDIR:-/tmp}/kvchat-bench, about 3 GB), THREADS (default 2), PROMPT
# (512), GEN (128), REPS (3), DEPTH (4096), DEPTH_GEN (64), DEPTH_TYPES
# ("Q8_0 Q4_K_M"; empty skips the depth rows).
set -eu
top=$(pwd)
LLREF=${LLREF:-$HOME/.cache/llref/llref}
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
threads=${THREADS:-2} np=${PROMPT:-512} ng=${GEN:-128} reps=${REPS:-3}
depth=${DEPTH:-4096} dgen=${DEPTH_GEN:-64} depth_types=${DEPTH_TYPES-Q8_0 Q4_K_M}
vocab=$top/tests/data/vocab/ggml-vocab-qwen2.gguf
shape="--arch qwen2 --vocab $vocab --dim 896 --layers 24 --heads 14 --kv-heads 2 --ff 4864 --tied --rope-theta 1000000"
mkdir -p "$dir"
have_llref=0
if [ -x "$LLREF" ]; then have_llref=1; else echo "bench: no llref at $LLREF: measuring kvchat alone"; fi

[ -x tests/mkmodel ] || make tests/mkmodel >/dev/null
if [ ! -f "$dir/q-F32.gguf" ]; then
    # tests/mkmodel writes the same bytes as `llref mkmodel` for this shape
    nice tests/mkmodel "$dir/q-F32.gguf" $shape >/dev/null
fi
if [ ! -f "$dir/q-Q8_0.gguf" ]; then
    if [ $have_llref = 1 ]; then
        nice "$LLREF" quantize "$dir/q-F32.gguf" "$dir/q-Q8_0.gguf" Q8_0 >/dev/null 2>&1
    else
        nice tests/mkmodel "$dir/q-Q8_0.gguf" $shape --type Q8_0 >/dev/null
    fi
fi
# K-quants are made only by llama.cpp's quantizer
if [ ! -f "$dir/q-Q4_K_M.gguf" ] && [ $have_llref = 1 ]; then
    nice "$LLREF" quantize "$dir/q-F32.gguf" "$dir/q-Q4_K_M.gguf" Q4_K_M >/dev/null 2>&1
fi
types="F32 Q8_0"
if [ -f "$dir/q-Q4_K_M.gguf" ]; then types="$types Q4_K_M"; else echo "bench: no $dir/q-Q4_K_M.gguf (needs llref): skipping Q4_K_M"; fi

num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
# percent of the bandwidth bound: bytes per token, tok/s, DRAM bytes/s (as GB/s)
bound() { awk -v b="$1" -v t="$2" -v m="$3" 'BEGIN { if (t > 0 && m > 0) printf "%.0f%%", 100 * b * t / (m * 1e9); else print "-" }'; }

echo "bench: $threads threads, prefill $np tokens, decode $ng tokens, best of $reps; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %14s %14s %7s %14s %14s %7s\n' type "kvchat pp/s" "llama.cpp pp/s" ratio "kvchat tg/s" "llama.cpp tg/s" ratio
for type in $types; do
    m=$dir/q-$type.gguf
    out=$(./kvchat bench -m "$m" -t "$threads" -p "$np" -n "$ng" -r "$reps" --membw --json -v 2>"$dir/verbose")
    kp=$(echo "$out" | num prefill_tok_s) kg=$(echo "$out" | num decode_tok_s)
    rss=$(echo "$out" | num rss_bytes) wb=$(echo "$out" | num decode_weight_bytes)
    bw=$(echo "$out" | num membw_gb_s)
    lp=0 lg=0
    if [ $have_llref = 1 ]; then
        ref=$("$LLREF" bench "$m" -t "$threads" -p "$np" -n "$ng" -r "$reps" 2>/dev/null)
        lp=$(echo "$ref" | sed -n 's/^prefill_tok_s //p') lg=$(echo "$ref" | sed -n 's/^decode_tok_s //p')
    fi
    printf '%-6s %14s %14s %7s %14s %14s %7s\n' "$type" "$kp" "$lp" "$(ratio "$kp" "$lp")" "$kg" "$lg" "$(ratio "$kg" "$lg")"
    size=$(wc -c <"$m")
    echo "       kvchat peak RSS $(awk -v r="$rss" 'BEGIN { printf "%.0f", r / 1048576 }') MiB (file $(awk -v s="$size" 'BEGIN { printf "%.0f", s / 1048576 }') MiB)"
    echo "       decode reads $(awk -v b="$wb" 'BEGIN { printf "%.1f", b / 1e6 }') MB of weights per token; DRAM read $bw GB/s;" \
        "bandwidth bound reached: kvchat $(bound "$wb" "$kg" "$bw"), llama.cpp $(bound "$wb" "$lg" "$bw")"
done
sed 's/^/       /' "$dir/verbose"

if [ -n "$depth_types" ]; then
    echo
    echo "decode of $dgen tokens at depth $depth (kvchat --depth $depth; llama.cpp after a $depth-token prefill)"
    printf '%-6s %14s %14s %7s\n' type "kvchat tg/s" "llama.cpp tg/s" ratio
    for type in $depth_types; do
        m=$dir/q-$type.gguf
        [ -f "$m" ] || continue
        out=$(./kvchat bench -m "$m" -t "$threads" --depth "$depth" -p 1 -n "$dgen" -r "$reps" --json)
        kg=$(echo "$out" | num decode_tok_s)
        lg=0
        if [ $have_llref = 1 ]; then
            ref=$("$LLREF" bench "$m" -t "$threads" -p "$depth" -n "$dgen" -r "$reps" 2>/dev/null)
            lg=$(echo "$ref" | sed -n 's/^decode_tok_s //p')
        fi
        printf '%-6s %14s %14s %7s\n' "$type" "$kg" "$lg" "$(ratio "$kg" "$lg")"
    done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
