#!/bin/sh
# bench-grammar.sh - what constrained output costs per token (issue 27): the
# time tests/grammar-gen spends computing the grammar's mask and in the
# masked sampler, against the decode step, on the Qwen2.5-0.5B-shaped model
# of bench/bench.sh (Q8_0, dim 896, 24 layers, the real 151,936-token Qwen2
# vocabulary, random weights), for --format json and a deep schema
# (tests/grammar/deep-schema.json: five levels, $refs, arrays, formats,
# bounds), greedy and sampled. Targets: masking at most 10% of a decode step
# for --format json, 25% on the deep schema. Also the CPU-independent
# counts: trie nodes visited per token and the share of masks taken from the
# cache. Part of `make bench`; not a test (no pass/fail on times).
#
# Environment: BENCH_DIR (the models, shared with bench.sh; default
# ${TMPDIR:-/tmp}/kvchat-bench), THREADS (decode threads, default 2), GEN
# (tokens per answer, default 256), RUNS (answers per row, default 3).
set -eu
top=$(pwd)
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
threads=${THREADS:-2} gen=${GEN:-256} runs=${RUNS:-3}
vocab=$top/tests/data/vocab/ggml-vocab-qwen2.gguf
shape="--arch qwen2 --vocab $vocab --dim 896 --layers 24 --heads 14 --kv-heads 2 --ff 4864 --tied --rope-theta 1000000"
mkdir -p "$dir"
[ -x tests/mkmodel ] || make tests/mkmodel >/dev/null
[ -x tests/grammar-gen ] || make tests/grammar-gen >/dev/null
m=$dir/q-Q8_0.gguf
[ -f "$m" ] || nice tests/mkmodel "$m" $shape --type Q8_0 >/dev/null
echo "bench-grammar: $m, $threads threads, $gen tokens x $runs answers per row; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %10s %10s %10s %8s %12s %8s %9s\n' row "decode ms" "mask ms" "sample ms" "overhead" "nodes/token" "cached" "complete"
row() { # NAME MODE ARG: RUNS answers, one process
    name=$1 mode=$2 arg=$3
    args=
    i=0
    while [ $i -lt "$runs" ]; do args="$args $arg"; i=$((i + 1)); done
    # shellcheck disable=SC2086
    GEN_THREADS=$threads tests/grammar-gen "$m" "$gen" "$mode" $args >"$dir/grammar-$name.jsonl"
    python3 - "$dir/grammar-$name.jsonl" "$name" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
tok = sum(r["tokens"] for r in rs) or 1
dec = sum(r["decode_ms"] for r in rs) / tok
mask = sum(r["mask_ms"] for r in rs) / tok
smp = sum(r["sample_ms"] for r in rs) / tok
nodes = sum(r["nodes"] for r in rs) / tok
masks = sum(r["masks"] for r in rs) or 1
hits = sum(r["hits"] for r in rs)
done = sum(1 for r in rs if r["complete"])
print("%-22s %10.3f %10.3f %10.3f %7.1f%% %12.0f %7.0f%% %6d/%d" % (sys.argv[2], dec, mask, smp, 100 * mask / dec if dec else 0,
      nodes, 100.0 * hits / masks, done, len(rs)))
PY
}
row "json greedy" greedy json
row "json sampled" 7 json
row "deep schema greedy" greedy tests/grammar/deep-schema.json
row "deep schema sampled" 7 tests/grammar/deep-schema.json
echo "overhead: mask ms over decode ms per token (targets: json 10%, deep schema 25%);" \
    "sample ms is the whole masked sampler (the unmasked one costs about the same)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
