#!/bin/sh
# bench-cache.sh - what the block cache buys, on the Qwen2.5-0.5B-shaped Q8_0
# model that bench/bench.sh makes (part of `make bench`; not a test):
#   1. the script case: CALLS (20) `kvchat run` calls without -s, each a
#      different short question after the same document of about DOC
#      (3,000) tokens: tokens computed and time to first token per call, the
#      store's growth per call, and whether the answers of calls 2 to
#      NOCACHE+1 (NOCACHE = 5) equal --no-cache's (greedy; and of SEEDED (3)
#      more with --temp 0.8 --seed); bench/bench_blocks --split measures how
#      far the logits are apart;
#   2. partial sharing: a prompt sharing its first ~2,000 tokens with an
#      earlier one: the full blocks and rows it reuses;
#   3. forks: a session of about 4,000 tokens and 5 forks at its middle, each
#      going on for one turn: bytes on disk against the session's plus the
#      forks' own new tokens'.
# (Resume against --no-cache at 1k, 4k and 16k is bench/bench-resume.sh.)
# Environment: BENCH_DIR (as bench/bench.sh), THREADS (2), CALLS, DOC, NOCACHE, SEEDED.
set -eu
dir=${BENCH_DIR:-${TMPDIR:-/tmp}/kvchat-bench}
threads=${THREADS:-2} calls=${CALLS:-20} doc_words=${DOC:-3000} nocache=${NOCACHE:-5} seeded=${SEEDED:-3}
model=$dir/q-Q8_0.gguf
[ -f "$model" ] || { echo "bench-cache: $model missing: run bench/bench.sh first (make bench does)"; exit 1; }
home=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-bench-cache.XXXXXX")
trap 'rm -rf "$home"' EXIT
export KVCHAT_HOME=$home
B=64
num() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
str() { python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }
kvbytes() { find "$home/kv" -name '*.kvblk' -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
nblk() { find "$home/kv" -name '*.kvblk' 2>/dev/null | wc -l; }
run() { ./kvchat run -m "$model" -t "$threads" -c 8192 -n 16 --json "$@" < /dev/null; }
echo "bench-cache: $threads threads, B = $B; load: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- 1. the script case
# one token a word (common English words of the Qwen2 vocabulary)
doc=$(python3 -c "
import random
r = random.Random(1)
w = 'the of and to in is was for on that with as by at from his her which or an be this are had not but were they one all their has been'.split()
print(' '.join(r.choice(w) for _ in range($doc_words)))")
printf '%5s %7s %7s %9s %10s %8s %9s %9s\n' call prompt cached prefilled "ttft ms" blocks "+KiB" "=nocache"
same=0 compared=0 t1=0 worst=0 sum=0 max_growth=0 max_pre_over=0
i=1
while [ $i -le "$calls" ]; do
    q="Question $i: what is word number $((i * 7)) of the text above?"
    b0=$(kvbytes)
    out=$(run --temp 0 "$doc

$q")
    b1=$(kvbytes)
    p=$(printf "%s\n" "$out" | num prompt_tokens) c=$(printf "%s\n" "$out" | num cached_tokens)
    f=$(printf "%s\n" "$out" | num prefilled_tokens) t=$(printf "%s\n" "$out" | num ttft_ms) w=$(printf "%s\n" "$out" | num blocks_written)
    eq=-
    if [ $i -gt 1 ] && [ $i -le $((nocache + 1)) ]; then
        nc=$(run --temp 0 --no-cache "$doc

$q")
        compared=$((compared + 1))
        if [ "$(printf "%s\n" "$out" | str answer)" = "$(printf "%s\n" "$nc" | str answer)" ]; then eq=yes; same=$((same + 1)); else eq=no; fi
    fi
    printf '%5s %7s %7s %9s %10s %8s %9.0f %9s\n' "$i" "$p" "$c" "$f" "$t" "$w" "$(echo "$b1 $b0" | awk '{print ($1 - $2) / 1024}')" "$eq"
    if [ $i = 1 ]; then
        t1=$t
    else
        worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
        sum=$(awk -v a="$sum" -v b="$t" 'BEGIN { print a + b }')
        max_growth=$(awk -v a="$max_growth" -v b="$w" 'BEGIN { print (b > a ? b : a) }')
    fi
    i=$((i + 1))
done
n2=$((calls - 1))
echo "script case: call 1 ttft $t1 ms; calls 2-$calls ttft mean $(awk -v s="$sum" -v n="$n2" 'BEGIN { printf "%.1f", s / n }') ms, worst $worst ms: ratio >= $(awk -v a="$t1" -v b="$worst" 'BEGIN { printf "%.0f", a / b }')x (mean $(awk -v a="$t1" -v s="$sum" -v n="$n2" 'BEGIN { printf "%.0f", a * n / s }')x); at most $max_growth block files written a call; greedy answers equal to --no-cache: $same of $compared"
s_same=0
i=2
while [ $i -le $((seeded + 1)) ]; do
    q="Question $i: what is word number $((i * 7)) of the text above?"
    a=$(run --temp 0.8 --seed $i "$doc

$q" | str answer)
    b=$(run --temp 0.8 --seed $i --no-cache "$doc

$q" | str answer)
    [ "$a" = "$b" ] && s_same=$((s_same + 1))
    i=$((i + 1))
done
echo "script case, seeded (--temp 0.8): answers equal to --no-cache: $s_same of $seeded"

# ---- 2. partial sharing
long=$(python3 -c "
import random
r = random.Random(2)
w = 'the of and to in is was for on that with as by at from his her which or an be this are had not but were they one all their has been'.split()
print(' '.join(r.choice(w) for _ in range(2000)))")
run --temp 0 "$long

First continuation: what comes next?" > "$home/a.json"
out=$(run --temp 0 "$long

Another continuation altogether, with other words.")
rt=$(printf "%s\n" "$out" | num restored_tokens) rb=$(printf "%s\n" "$out" | num restored_blocks)
echo "partial sharing: $rt tokens restored from $rb blocks: $((rt / B)) full (floor($rt / $B)) and $((rt % B)) rows of one more; $(printf "%s\n" "$out" | num prefilled_tokens) computed"

# ---- 3. forks at the middle of a 4k-token session
rm -rf "$home/kv" "$home/kvchat.db"*
sys=$(python3 -c "
import random
r = random.Random(3)
w = 'the of and to in is was for on that with as by at from his her which or an be this are had not but were they one all their has been'.split()
print(' '.join(r.choice(w) for _ in range(1000)))")
run --temp 0 -n 8 -s big --system "$sys" "turn 1" > /dev/null
t=2
while [ $t -le 7 ]; do
    msg=$(python3 -c "
import random
r = random.Random($t)
w = 'the of and to in is was for on that with as by at from his her which or an be this are had not but were they one all their has been'.split()
print(' '.join(r.choice(w) for _ in range(500)))")
    run --temp 0 -n 8 -s big "$msg" > /dev/null
    t=$((t + 1))
done
./kvchat sessions gc > /dev/null 2>&1
big_tokens=$(./kvchat sessions list --json | python3 -c "import json,sys; print([s for s in json.load(sys.stdin) if s['name']=='big'][0]['tokens'])")
big_bytes=$(kvbytes)
own=0
k=1
while [ $k -le 5 ]; do
    ./kvchat sessions fork big "fork$k" --at 3
    out=$(run --temp 0 -n 8 -s "fork$k" "A question only fork $k asks, about its own branch of the talk.")
    fork_tokens=$(./kvchat sessions list --json | python3 -c "import json,sys; print([s for s in json.load(sys.stdin) if s['name']=='fork$k'][0]['tokens'])")
    kept=$(printf "%s\n" "$out" | num cached_tokens)
    own=$((own + fork_tokens - kept))
    k=$((k + 1))
done
./kvchat sessions gc > /dev/null 2>&1
total=$(kvbytes)
per_tok=12288
echo "forks: session of $big_tokens tokens in $big_bytes bytes; 5 forks at turn 3 add $own tokens of their own ($((own * per_tok)) bytes of KV); the store holds $total bytes: $(awk -v t="$total" -v b="$big_bytes" -v o="$((own * per_tok))" 'BEGIN { printf "%.3f", t / (b + o) }')x the session plus the forks' own tokens"
