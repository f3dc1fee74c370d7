# logits-lib.sh - comparing logit files (little-endian f32, as `kvchat eval
# --logits-out` and `llref logits -o` write them); sourced by lib.sh and by
# tests/accuracy-fresh.sh. $T is a directory for temporaries.
# rel_err A B: max|a-b| / range(b) of two f32 files of the same length
rel_err() {
    od -An -v -f -w4 "$1" >"$T/a.txt"
    od -An -v -f -w4 "$2" >"$T/b.txt"
    paste "$T/a.txt" "$T/b.txt" | awk '
        NR == 1 { lo = $2; hi = $2 }
        { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d
          if ($2 < lo) lo = $2; if ($2 > hi) hi = $2; n++ }
        END { if (n == 0 || hi <= lo) print "nan"; else printf "%.3g\n", m / (hi - lo) }'
}
# le A B: A <= B as numbers (neither "nan")
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "nan" && b != "nan" && a + 0 <= b + 0) }'; }
