#!/bin/sh
# bench-snapshots.sh - what recurrent-state snapshots buy a hybrid model
# (issue 23, docs/snapshots.md), on a Qwen3.5-0.8B-shaped Q8_0 model (real
# shape, random weights: 24 layers of 1024, one gated attention layer in
# four with 8 heads of 256 and 2 KV heads, Gated DeltaNet layers of 16 key
# and 16 value heads of 128, conv 4, feed-forward 3584; the Qwen2 vocabulary
# stands in for Qwen3.5's, so that text tokenizes):
# - the first token of a turn resumed at HISTORY tokens (default 4000) by
#   `kvchat run -s` (blocks and the snapshot at the end of the history read)
#   against the same turn with --no-cache (the history computed again);
# - the snapshot bytes per 1,000 tokens of history, after a chat of TURNS
#   (default 10) exchanges of about 400 tokens, beside the blocks' bytes.
# Part of `make bench`; not a test (no pass/fail).
#
# Environment: HISTORY (4000), TURNS (10), THREADS (2), BENCH_DIR (as
# bench/bench.sh), SHAPE (mkmodel options replacing the 0.8B shape, e.g. a
# small one to try the script).
set -eu
top=$(pwd)
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
threads=${THREADS:-2}
hist=${HISTORY:-4000}
turns=${TURNS:-10}
vocab=$top/tests/data/vocab/ggml-vocab-qwen2.gguf
# (the shape of bench/bench-qwen35.sh, from Qwen3.5-0.8B's config.json)
shape=${SHAPE:-"--dim 1024 --layers 24 --heads 8 --kv-heads 2 --head-dim 256 --rope-dim 64 --rope-sections 11,11,10,0 \
--ff 3584 --ssm-state 128 --ssm-groups 16 --ssm-heads 16 --ssm-conv 4 --full-attn-interval 4 --rope-theta 10000000 --tied"}
mkdir -p "$dir"
model=$dir/q35-$(echo "$shape" | cksum | cut -d' ' -f1)-Q8_0.gguf
[ -f "$model" ] || ./tests/mkmodel "$model" --arch qwen35 --vocab "$vocab" $shape --ctx 32768 --type Q8_0 \
    --scale 0.02 >/dev/null
home=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bench-home.XXXXXX")
trap 'rm -rf "$home"' EXIT
export KVCHAT_HOME=$home
num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
words() { python3 -c "import random; r = random.Random($1); print(' '.join(r.choice(['alpha','beta','gamma','delta','kappa','sigma','river','stone']) for _ in range($2)))"; }
echo "bench-snapshots: $(basename "$model"), $threads threads; load: $(cut -d' ' -f1-3 /proc/loadavg)"
./kvchat models info "$model" | grep -E 'layers|parameters|weights' || true

# ---- the first token of a turn resumed at $hist tokens of history
ctx=$((hist + hist / 4 + 512))
base="./kvchat run -m $model -t $threads -c $ctx --temp 0 -n 8 --json"
$base -s h --system "$(words 1 "$hist")" "first question" </dev/null >"$home/first.json"
# (--no-cache first: it reads the session and leaves it as it was)
$base --no-cache -s h "second question" </dev/null >"$home/nocache.json"
$base -s h "second question" </dev/null >"$home/resume.json"
h=$(num cached_tokens <"$home/resume.json")
rms=$(num restore_ms <"$home/resume.json")
# the session's blocks and snapshot are read when it is opened (restore_ms), before the turn's clock
rt=$(awk -v a="$rms" -v b="$(num ttft_ms <"$home/resume.json")" 'BEGIN { printf "%.1f", a + b }')
nt=$(num ttft_ms <"$home/nocache.json")
printf 'turn resumed at %s tokens of history: first token %s ms (restore %s ms included, %s tokens computed, snapshot at %s); --no-cache %s ms (%s tokens computed): %sx\n' \
    "$h" "$rt" "$rms" "$(num prefilled_tokens <"$home/resume.json")" \
    "$(sed -n 's/.*"restored_snapshot_pos": \([0-9a-z]*\).*/\1/p' "$home/resume.json")" "$nt" \
    "$(num prefilled_tokens <"$home/nocache.json")" "$(awk -v a="$nt" -v b="$rt" 'BEGIN { printf "%.0f", a / b }')"
same=$(python3 -c "import json; a = json.load(open('$home/resume.json')); b = json.load(open('$home/nocache.json')); print('same answer' if a['answer'] == b['answer'] else 'ANSWERS DIFFER')")
echo "  ($same)"

# ---- snapshot bytes per 1,000 tokens of history
rm -rf "$home"/*
base="./kvchat run -m $model -t $threads -c $((turns * 450 + 512)) --temp 0 -n 16 --json"
i=1
while [ "$i" -le "$turns" ]; do
    $base -s chat "$(words "$((i + 100))" 380)" </dev/null >"$home/turn.json"
    i=$((i + 1))
done
tok=$(( $(num prompt_tokens <"$home/turn.json") + $(num generated_tokens <"$home/turn.json") ))
sbytes=$(find "$home/kv" -name '*.kvsnap' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
nsnap=$(find "$home/kv" -name '*.kvsnap' | wc -l)
bbytes=$(find "$home/kv" -name '*.kvblk' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
one=$(find "$home/kv" -name '*.kvsnap' -printf '%s\n' | head -1)
awk -v t="$tok" -v s="$sbytes" -v n="$nsnap" -v b="$bbytes" -v one="$one" -v turns="$turns" 'BEGIN {
    printf "%s turns, %d tokens of history: %d snapshots of %.1f MiB, %.1f MiB per 1,000 tokens (%.1f snapshots); blocks %.1f MiB per 1,000 tokens\n",
        turns, t, n, one / 1048576, s / 1048576 / (t / 1000), n / (t / 1000), b / 1048576 / (t / 1000) }'
