#!/bin/sh
# bench-resume.sh - what keeping the KV cache buys: on the Qwen2.5-0.5B-shaped
# Q8_0 model (the one bench/bench.sh makes), a session with H tokens of
# history is resumed by `kvchat run -s` (KV read from its block files) and,
# for comparison, the same history is computed again with --no-cache. Also
# restore time against llama.cpp's llama_state_seq_load_file (`llref resume`)
# and bytes on disk per token. Part of `make bench`; not a test.
#
# Environment: HISTORY (default "1000 4000 16000"), THREADS (2), LLREF,
# BENCH_DIR (as bench/bench.sh).
set -eu
top=$(pwd)
LLREF=${LLREF:-$HOME/.cache/llref/llref}
. bench/bench-lib.sh
threads=${THREADS:-2}
bench_need_model bench-resume
bench_home
echo "bench-resume: $threads threads; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%8s %12s %12s %9s %12s %12s %7s %10s\n' history "resume ttft" "no-cache ttft" speedup \
    "restore ms" "llama.cpp ms" ratio "bytes/tok"
for h in ${HISTORY:-1000 4000 16000}; do
    ctx=$((h + h / 4 + 512))
    # a system prompt of about h tokens (one token a word in the Qwen2 vocabulary)
    sys=$(words "$h" "$h")
    base="./kvchat run -m $model -t $threads -c $ctx --temp 0 -n 8 --json"
    $base -s "h$h" --system "$sys" "first question" < /dev/null > "$home/first.json"
    hist=$(num prompt_tokens < "$home/first.json")
    $base -s "h$h" "second question" < /dev/null > "$home/resume.json"
    $base --no-cache -s "h$h" "second question" < /dev/null > "$home/nocache.json"
    rms=$(num restore_ms < "$home/resume.json")
    rt=$(num ttft_ms < "$home/resume.json") # from the start of the run: restore included
    nt=$(num ttft_ms < "$home/nocache.json")
    # the bytes of the blocks that cover the session, per token it holds
    per_tok=$(./kvchat sessions list --json | python3 -c "
import json, sys
s = [x for x in json.load(sys.stdin) if x['name'] == 'h$h'][0]
print(round(s['kv_bytes'] / s['tokens']))")
    ref=-
    if [ -x "$LLREF" ]; then
        # llref prints restore_s in seconds
        ref=$("$LLREF" resume "$model" -p "$hist" -t "$threads" 2>/dev/null |
              awk '$1 == "restore_s" { printf "%.2f", $2 * 1000 }')
        [ -n "$ref" ] || ref=-
    fi
    printf '%8s %10s ms %10s ms %8sx %12s %12s %7s %10s\n' "$hist" "$rt" "$nt" \
        "$(awk -v a="$nt" -v b="$rt" 'BEGIN { printf "%.0f", a / b }')" "$rms" "$ref" \
        "$(awk -v a="$rms" -v b="$ref" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }')" \
        "$per_tok"
done
echo "KV f16 of this model: 24 layers x 2 (K, V) x 128 x 2 bytes = 12288 bytes per token"

# a long chat: 20 exchanges of about 150 tokens, then turn 21 resumed vs
# recomputed (the REPL carries the cache in memory: its turn-21 time to
# first token is the resumed one without restore_ms)
turns=${TURNS:-20}
base="./kvchat run -m $model -t $threads -c 4096 --temp 0 -n 16 --json"
i=1
while [ $i -le "$turns" ]; do
    msg=$(python3 -c "import random; r = random.Random($i); print(' '.join(r.choice(['how','why','when','trip','city','rain','food']) for _ in range(120)))")
    $base -s chat "$msg" < /dev/null > /dev/null
    i=$((i + 1))
done
$base -s chat "and one more thing" < /dev/null > "$home/resume.json"
$base --no-cache -s chat "and one more thing" < /dev/null > "$home/nocache.json"
hist=$(num cached_tokens < "$home/resume.json")
carried=$(num ttft_ms < "$home/resume.json")
rms=$(num restore_ms < "$home/resume.json")
nt=$(num ttft_ms < "$home/nocache.json")
printf 'turn %s of a chat with %s tokens of history: time to first token %s ms carried in memory, %s ms resumed (restore %s ms), %s ms recomputed (--no-cache): %sx\n' \
    "$((turns + 1))" "$hist" "$carried" "$(awk -v a="$carried" -v b="$rms" 'BEGIN { printf "%.1f", a + b }')" "$rms" "$nt" \
    "$(awk -v a="$nt" -v b="$carried" 'BEGIN { printf "%.0f", a / b }')"
