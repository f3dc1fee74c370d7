#!/bin/sh
# bench-fingerprint.sh - what the version-2 model fingerprint (a SHA-256 of
# every tensor byte, sessions/blocks.c) costs: on the Qwen2.5-0.5B-shaped
# Q8_0 model bench/bench.sh makes, `kvchat run -n 1` in a fresh home (the
# file hashed: the first open after it changed) against the same again (the
# fingerprint remembered by dev, inode, size, mtime and ctime), best of
# REPS, with `sha256sum` of the file for scale. The page cache is warm in
# both (a first run reads the file once). Part of `make bench`; not a test.
#
# Environment: BENCH_DIR (as bench/bench.sh), REPS (default 3).
set -eu
. bench/bench-lib.sh
reps=${REPS:-3}
m=$model
bench_need_model bench-fingerprint 0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-fp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# the clock in ms (sh's 64-bit arithmetic: mawk's printf %d stops at 2^31 - 1,
# which made every figure here 0)
ms() { echo $(( $(date +%s%N) / 1000000 )); }
cat "$m" > /dev/null # warm the page cache
once() { # home: the ms of one run
    t0=$(ms)
    KVCHAT_HOME=$1 ./kvchat run -m "$m" -t 2 -n 1 --temp 0 hi < /dev/null > /dev/null 2>&1
    echo $(( $(ms) - t0 ))
}
KVCHAT_HOME=$tmp/packed-only ./kvchat run -m "$m" -t 2 -n 1 hi < /dev/null > /dev/null 2>&1 || true
i=0; : > "$tmp/first"; : > "$tmp/again"; : > "$tmp/sum"
while [ $i -lt "$reps" ]; do
    h=$tmp/home$i
    mkdir -p "$h"; cp -r "$tmp/packed-only/packed" "$h/" 2>/dev/null || true
    once "$h" >> "$tmp/first"
    once "$h" >> "$tmp/again"
    t0=$(ms); sha256sum "$m" > /dev/null; echo $(( $(ms) - t0 )) >> "$tmp/sum"
    i=$((i + 1))
done
size=$(stat -c %s "$m")
f=$(best < "$tmp/first"); a=$(best < "$tmp/again"); s=$(best < "$tmp/sum")
echo "bench-fingerprint: $(basename "$m") ($(awk -v b="$size" 'BEGIN { printf "%.0f MiB", b / 1048576 }')), best of $reps; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  run -n 1, file hashed:        %6d ms\n' "$f"
printf '  run -n 1, fingerprint cached: %6d ms\n' "$a"
printf '  the hashing (difference):     %6d ms (%s MB/s)\n' $((f - a)) "$(awk -v b="$size" -v t=$((f - a)) 'BEGIN { if (t > 0) printf "%.0f", b / 1e3 / t; else print "-" }')"
printf '  sha256sum of the file:        %6d ms\n' "$s"
