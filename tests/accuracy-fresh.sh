#!/bin/sh
# accuracy-fresh.sh - kvchat and llama.cpp against exact math on a model
# made now (t0403 checks the committed ones): `llref mkmodel` (qwen2, dim
# 256, 4 layers, vocab 1024, SEED), quantized by llama.cpp to Q8_0, Q4_K_M,
# Q6_K and Q4_0; for prompts of 8 and 200 ids the last-position logits'
# max|x - exact| / range(exact) against the float64 reference
# (../shared/peer/f64ref.py, K and V rounded to f16), for kvchat's batch
# and llama.cpp's logits, and whether kvchat token by token gives the
# batch's bits. Needs llref and python3-numpy, so it is not part of make
# check. Environment: LLREF, F64REF, PYTHON, SEED (4711).
# usage: sh tests/accuracy-fresh.sh   (from the top directory, after make)
set -eu
top=$(pwd)
LLREF=${LLREF:-$HOME/.cache/llref/llref}
F64REF=${F64REF:-$top/../shared/peer/f64ref.py}
PYTHON=${PYTHON:-/usr/bin/python3}
seed=${SEED:-4711}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rel_err() {
    od -An -v -f -w4 "$1" >"$tmp/a.txt"
    od -An -v -f -w4 "$2" >"$tmp/b.txt"
    paste "$tmp/a.txt" "$tmp/b.txt" | awk '
        NR == 1 { lo = $2; hi = $2 }
        { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d
          if ($2 < lo) lo = $2; if ($2 > hi) hi = $2; n++ }
        END { if (n == 0 || hi <= lo) print "nan"; else printf "%.3g\n", m / (hi - lo) }'
}
"$LLREF" mkmodel "$tmp/F32.gguf" --arch qwen2 --dim 256 --layers 4 --heads 4 --kv-heads 2 --ff 512 \
    --n-vocab 1024 --seed "$seed" --rope-theta 1000000 >/dev/null 2>&1
for q in Q8_0 Q4_K_M Q6_K Q4_0; do "$LLREF" quantize "$tmp/F32.gguf" "$tmp/$q.gguf" $q >/dev/null 2>&1; done
ids() { awk -v n="$1" -v x="$2" 'BEGIN { for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? " " : "", x % 1000 + 3 } }'; }
echo "accuracy-fresh: seed $seed; max|x - exact| / range(exact)"
for q in F32 Q8_0 Q4_K_M Q6_K Q4_0; do
    for n in 8 200; do
        p=$(ids $n $((n * 7 + 1)))
        "$PYTHON" "$F64REF" "$tmp/$q.gguf" -p "$p" -o "$tmp/x.f64" --kv f16 >/dev/null 2>&1
        "$LLREF" logits "$tmp/$q.gguf" -p "$p" -o "$tmp/x.llama" >/dev/null 2>&1
        ./kvchat eval -m "$tmp/$q.gguf" -p "$p" --logits-out "$tmp/x.kv" >/dev/null
        ./kvchat eval -m "$tmp/$q.gguf" -p "$p" --token-by-token --logits-out "$tmp/x.tbt" >/dev/null
        same=no
        cmp -s "$tmp/x.kv" "$tmp/x.tbt" && same=yes
        printf '%-7s %3d ids: kvchat %-9s llama.cpp %-9s token by token = batch: %s\n' "$q" "$n" \
            "$(rel_err "$tmp/x.kv" "$tmp/x.f64")" "$(rel_err "$tmp/x.llama" "$tmp/x.f64")" "$same"
    done
done
