#!/bin/sh
# bench-draft.sh - speculative decoding (issue 26, docs/speculative.md):
#  1. verify cost: one pass over the token sampled and k = 0..16 drafted
#     ones keeping every row of logits, against one decode step, at depths
#     0 and 2000, on the Qwen2.5-0.5B-shaped Q8_0 and Q4_K_M models that
#     bench/bench.sh makes (`kvchat bench --draft 16`);
#  2. the repeat workload: the same question asked again in a new process
#     (`kvchat run`, greedy), and an answer regenerated with the same seed
#     (--temp 0.8 --seed 7), drafted from the store (--draft store) against
#     --draft off: decode tok/s of each (best of REPS, alternating), tokens
#     drafted and accepted. (Random weights repeat one token, so n-gram
#     drafting would be trivially right on their output: it is left out
#     here.)
#  3. text with nothing to copy: distinct ids, the decode loop with the
#     n-gram lookup at every step against without (bench/bench_draft nohit);
#  4. n-gram drafting on real text: the llama2.c stories260K weights
#     (converted with `llref llama2c`), a prompt made of the model's own
#     greedy output, greedy and seeded: acceptance, tokens per pass, and
#     the speedup the Q8_0 depth-0 verify costs of (1) predict for the 0.5B
#     shape (bench/bench_draft accept).
# Rows 2 and 3 need bench/bench.sh's q-Q8_0.gguf (BENCH_DIR), row 4 llref
# and the stories260K weights; what is missing is said and skipped.
# Part of `make bench`; not a test. Figures only from a quiet machine.
#
# Environment: BENCH_DIR (as bench/bench.sh), THREADS (2), REPS (3), GEN
# (256: tokens of each answer in 2), DRAFT_DEPTHS ("0 2000"), LLREF,
# STORIES (default /work/shared/data/stories260K.bin).
set -eu
LLREF=${LLREF:-$HOME/.cache/llref/llref}
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
threads=${THREADS:-2} reps=${REPS:-3} gen=${GEN:-256}
stories=${STORIES:-/work/shared/data/stories260K.bin}
[ -x bench/bench_draft ] || make bench/bench_draft >/dev/null
[ -x kvchat ] || make kvchat >/dev/null
home=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bench-draft.XXXXXX")
trap 'rm -rf "$home"' EXIT
export KVCHAT_HOME=$home
num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
best() { sort -g | tail -1; }
echo "bench-draft: $threads threads, best of $reps; CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. verify cost
costs=
for type in Q8_0 Q4_K_M; do
    m=$dir/q-$type.gguf
    if [ ! -f "$m" ]; then echo "verify cost: no $m (run bench/bench.sh first): skipped"; continue; fi
    for depth in ${DRAFT_DEPTHS:-0 2000}; do
        echo "verify cost, $type:"
        # (-d: decode and the passes at that depth; the table's rows: drafted, pass ms, decode steps, t/s)
        out=$(./kvchat bench -m "$m" -d "$depth" -p 16 -n 32 -t "$threads" -r $((reps + 2)) --draft 16)
        echo "$out" | sed -n '/^verification/,/^peak/p' | sed 's/^/  /'
        if [ "$type" = Q8_0 ] && [ "$depth" = 0 ]; then # a pass of n = drafted + 1 tokens in decode steps
            costs=$(echo "$out" | sed -n '/^verification/,$p' |
                awk -F'|' '$2 ~ /^ *[0-9]+ *$/ { printf "%s%s", sep, $4 + 0; sep = " " }')
        fi
    done
done

# 2. the repeat workload
m=$dir/q-Q8_0.gguf
if [ -f "$m" ]; then
    q="Write a long story about a river, a stone and seven blue birds."
    for how in "greedy:--temp 0" "same seed:--temp 0.8 --seed 7"; do
        name=${how%%:*} opts=${how#*:}
        run() { # shellcheck disable=SC2086
            ./kvchat run -m "$m" -t "$threads" -n "$gen" --json $opts "$@" "$q" </dev/null; }
        run --draft off >"$home/first.json" # the answer goes to the store
        : >"$home/off" && : >"$home/on"
        for r in $(seq "$reps"); do
            run --draft off | num decode_tok_s >>"$home/off"
            run --draft store >"$home/on.json"
            num decode_tok_s <"$home/on.json" >>"$home/on"
        done
        off=$(best <"$home/off") on=$(best <"$home/on")
        echo "repeat workload ($name, $gen tokens, a new process each): decode $off tok/s plain," \
            "$on tok/s drafted from the store: $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.2f", a / b }')x" \
            "(drafted $(num drafted_tokens <"$home/on.json"), accepted $(num accepted_tokens <"$home/on.json"); goal >= 2.5x)"
    done
    # 3. nothing to copy
    ./bench/bench_draft nohit "$m" -n 128 -t "$threads" -r "$reps" | sed 's/$/ (goal >= 0.97x)/'
else
    echo "repeat workload, nohit: no $m (run bench/bench.sh first): skipped"
fi

# 4. n-gram acceptance on real text
if [ -x "$LLREF" ] && [ -f "$stories" ]; then
    s=$dir/stories260K.gguf
    [ -f "$s" ] || "$LLREF" llama2c "$stories" "$s" >/dev/null 2>&1
    for t in 0 0.8; do
        ./bench/bench_draft accept "$s" --prompt 200 --gen 400 --temp "$t" --max 8 ${costs:+--costs "$costs"}
    done
    [ -n "$costs" ] || echo "  (no Q8_0 verify costs: no predicted speedup)"
else
    echo "n-gram acceptance: needs $LLREF and $stories: skipped"
fi
