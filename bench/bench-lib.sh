# bench-lib.sh - what the bench/bench-*.sh scripts share, sourced from the
# top of the tree: the Qwen2.5-0.5B-shaped Q8_0 model bench/bench.sh makes
# ($dir, $model), a scratch KVCHAT_HOME, and the small helpers their figures
# are read with. Sourcing it sets dir and model (BENCH_DIR as bench/bench.sh).
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
model=$dir/q-Q8_0.gguf

# bench_need_model NAME [STATUS]: $model is there, or NAME says to run
# bench/bench.sh first and the script exits STATUS (default 1)
bench_need_model() {
    [ -f "$model" ] || { echo "$1: $model missing: run bench/bench.sh first (make bench does)"; exit "${2:-1}"; }
}

# bench_home: a scratch folder $home as KVCHAT_HOME, removed on exit
bench_home() {
    home=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bench-home.XXXXXX")
    trap 'rm -rf "$home"' EXIT
    export KVCHAT_HOME=$home
}

# num KEY: the number after "KEY": in the JSON on stdin
num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }

# best: the least of the numbers on stdin
best() { sort -g | head -1; }

# words N SEED: N pseudo-random words (SEED), one token each in the Qwen2 vocabulary
words() {
    python3 -c "import random; r = random.Random($2); print(' '.join(r.choice(['alpha','beta','gamma','delta','kappa','sigma','river','stone']) for _ in range($1)))"
}
