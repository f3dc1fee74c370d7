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
# other_kernels: the kernel sets (KVCHAT_CPU) to compare with this CPU's
# own: generic, and avx2 too on a CPU with AVX-512 and VNNI (whose own are avx512)
other_kernels() {
    if grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
        grep -qw avx512_vnni /proc/cpuinfo; then
        echo "avx2 generic"
    else
        echo generic
    fi
}
# le A B: A <= B as numbers (neither "nan")
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "nan" && b != "nan" && a + 0 <= b + 0) }'; }

# ==== goldens against llama.cpp (t0600, t0610, t0620, t0630; these need lib.sh) ====

# golden_f32 NAME DIR: $T/NAME-F32.gguf made by mkmodel from DIR/NAME.opts,
# the very file llama.cpp ran (DIR/NAME-F32.sha256)
golden_f32() {
    "$MKMODEL" "$T/$1-F32.gguf" $(cat "$2/$1.opts") >/dev/null
    (cd "$T" && sha256sum -c "$2/$1-F32.sha256" >/dev/null 2>&1) &&
        ok "$1: mkmodel regenerates the F32 file of the goldens" ||
        not_ok "$1: mkmodel's F32 file differs from the one llama.cpp ran"
}

# golden_eval LABEL TYPE MODEL IDS GOLDEN: eval's logits of IDS within 1e-4
# (F32) or 2e-2 of llama.cpp's (GOLDEN.logits); F32 within 1e-6 of exact
# (GOLDEN.f64.f32); and, but for F32 on long prompts ($GOLDEN_SHORT unset),
# no farther from exact than llama.cpp's
golden_eval() {
    run "$KVCHAT" eval -m "$3" -p "$4" -c 512 --logits-out "$T/l.f32"
    expect_rc 0
    e=$(rel_err "$T/l.f32" "$5.logits")
    tol=2e-2
    [ "$2" = F32 ] && tol=1e-4
    le "$e" $tol && ok "$1: within $tol of llama.cpp ($e)" || not_ok "$1: $e from llama.cpp, wanted <= $tol"
    ours=$(rel_err "$T/l.f32" "$5.f64.f32")
    theirs=$(rel_err "$5.logits" "$5.f64.f32")
    if [ "$2" = F32 ]; then
        le "$ours" 1e-6 && ok "$1: within 1e-6 of exact ($ours)" || not_ok "$1: $ours from exact"
    fi
    if [ "$2" != F32 ] || [ -n "${GOLDEN_SHORT:-}" ]; then
        le "$ours" "$theirs" && ok "$1: error $ours <= llama.cpp's $theirs" || not_ok "$1: error $ours, llama.cpp's $theirs"
    fi
}

# golden_greedy LABEL MODEL IDS CTX GREEDY: 32 greedy tokens after IDS as
# llama.cpp's (the file GREEDY)
golden_greedy() {
    run "$KVCHAT" generate -m "$2" -p "$3" -n 32 -c "$4"
    expect_rc 0
    [ "$(cat "$T/out")" = "$(cat "$5")" ] && ok "$1: 32 greedy tokens as llama.cpp's" ||
        not_ok "$1 greedy: $(cat "$T/out"), llama.cpp: $(cat "$5")"
}

# accuracy_model NAME HOW REST: $model, the file of a line of
# tests/data/accuracy/models.txt: HOW "mk", made by mkmodel with the options
# REST as $T/NAME.gguf; else the committed file REST (from the top)
accuracy_model() {
    if [ "$2" = mk ]; then
        model=$T/$1.gguf
        # shellcheck disable=SC2086
        "$MKMODEL" "$model" $3 >/dev/null
    else
        model=$TOP/$3
    fi
}

# golden_prompt NAME DIR TAG IDS TYPE...: golden_eval of each TYPE's file
# (F32: mkmodel's $T/NAME-F32.gguf, else DIR/NAME-TYPE.gguf) on IDS against
# DIR/NAME-TYPE-TAG.*, then golden_greedy of the F32 file (context 512)
golden_prompt() {
    _n=$1 _d=$2 _tag=$3 _ids=$4
    shift 4
    for _t; do
        _m=$_d/$_n-$_t.gguf
        [ "$_t" = F32 ] && _m=$T/$_n-F32.gguf
        golden_eval "$_n $_t $_tag" "$_t" "$_m" "$_ids" "$_d/$_n-$_t-$_tag"
    done
    golden_greedy "$_n $_tag" "$T/$_n-F32.gguf" "$_ids" 512 "$_d/$_n-F32-$_tag.greedy"
}

# across_passes MODEL: 700 ids (more than a pass, n_batch 512) give the same
# bits token by token and split across passes
across_passes() {
    p=$(awk 'BEGIN { x = 5; for (i = 0; i < 700; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? " " : "", x % 500 + 3 } }')
    "$KVCHAT" eval -m "$1" -p "$p" -c 1024 --logits-out "$T/ref.f32" >/dev/null 2>&1 || not_ok "700 ids: eval failed"
    bad=
    for how in "--token-by-token -t 1" "--split 511 -t 2" "--split 513 -t 1" "--split 100 -t 2"; do
        # shellcheck disable=SC2086
        "$KVCHAT" eval -m "$1" -p "$p" -c 1024 $how --logits-out "$T/l.f32" >/dev/null 2>&1 &&
            cmp -s "$T/ref.f32" "$T/l.f32" || bad="$bad [$how]"
    done
    [ -z "$bad" ] && ok "700 ids across passes: the same bits" || not_ok "700 ids differ:$bad"
}

# same_bits LABEL MODEL PROMPT WAY...: eval's logits of PROMPT the same bits
# every WAY (eval's options, as words; "generic OPTIONS" with
# KVCHAT_CPU=generic) as one batch on 2 threads
same_bits() {
    label=$1 sb_m=$2 sb_p=$3
    shift 3
    ev() { "$KVCHAT" eval -m "$sb_m" -p "$sb_p" "$@" >/dev/null 2>"$T/err"; }
    ev -t 2 --logits-out "$T/ref.f32" || not_ok "$label: eval failed: $(cat "$T/err")"
    bad= runs=1
    for how in "$@"; do
        runs=$((runs + 1))
        case $how in
        # shellcheck disable=SC2086
        generic*) KVCHAT_CPU=generic ev ${how#generic} --logits-out "$T/l.f32" ;;
        # shellcheck disable=SC2086
        *) ev $how --logits-out "$T/l.f32" ;;
        esac && cmp -s "$T/ref.f32" "$T/l.f32" || bad="$bad [$how]"
    done
    [ -z "$bad" ] && ok "$label: the same bits every way ($runs runs)" || not_ok "$label differs:$bad"
}
