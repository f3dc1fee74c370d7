#!/bin/sh
# t0405: the float weights' products run on BLIS's sgemm micro-kernel
# (core/kernels/fmm.c): kvchat links libblis; `bench -v` counts the
# micro-kernel's calls, and an F32 or F16 model calls it in prefill; in
# decode too (the same kernel on one token's panel), except on the avx512
# and avx2 paths, where decode runs kvchat's GEMV in the kernel's order on
# the same panels (one token on skx's 32 x 12 kernel does 12 times the
# arithmetic and was compute-bound: docs/kernels.md) and `bench -v` counts
# its panels instead; a Q8_0 model calls neither (quantized products stay
# on kvchat's integer kernels); under
# KVCHAT_CPU=generic it is not called and the logits are the same bits.
# On x86 with AVX2, other BLIS sub-configurations (BLIS_ARCH_TYPE): haswell's
# kernel gives the same bits from panels packed again (the cache is kept
# per layout), and sandybridge's (no FMA, so not kvchat's definition) fails
# the start-up self-test: one warning, the portable kernels, the same bits;
# on an AVX-512 CPU, skx's (weights as the A operand) the same bits.
. "$TOP/tests/cli/lib.sh"

if command -v ldd >/dev/null 2>&1; then
    ldd "$KVCHAT" | grep -q libblis && ok "kvchat links libblis" || not_ok "ldd kvchat lists no libblis"
fi

calls() { sed -n "s/.*: \([0-9]*\) micro-kernel calls in prefill, \([0-9]*\) in decode, \([0-9]*\) decode panels on kvchat's GEMV.*/\1 \2 \3/p" "$T/err"; }
# decode's float products: kvchat's GEMV on the x86 paths, else the micro-kernel
gemv_path() { grep -Eq 'kernels (avx512|avx2),' "$T/err"; }

for type in F32 F16 Q8_0; do
    "$MKMODEL" "$T/m-$type.gguf" --ff 768 --type $type >/dev/null
    run "$KVCHAT" bench -m "$T/m-$type.gguf" -p 20 -n 3 -r 1 -v
    expect_rc 0
    set -- $(calls)
    if [ $type = Q8_0 ]; then
        [ "${1:-x}" = 0 ] && [ "${2:-x}" = 0 ] && [ "${3:-x}" = 0 ] && ok "$type: no micro-kernel calls, no float GEMV" \
            || not_ok "$type: calls '$*', wanted 0 0 0"
        continue
    fi
    expect_err "float weights on BLIS's micro-kernel, blis [0-9.]* [a-z0-9]* mr[0-9]* nr[0-9]* kc256"
    [ "${1:-0}" -gt 0 ] && ok "$type prefill called the micro-kernel $1 times" || not_ok "$type prefill: calls '${1:-}'"
    # (a thread the pool left behind may count a prefill call late, so
    # "no calls" is "under a tenth of the panels": on the kernel decode
    # makes at least one call per panel and k-block)
    if gemv_path; then
        [ "${3:-0}" -gt 0 ] && [ "${2:-x}" -lt $(($3 / 10)) ] && ok "$type decode read $3 panels through kvchat's GEMV, not the micro-kernel" \
            || not_ok "$type decode on x86: calls '${2:-}', GEMV panels '${3:-}'"
    else
        [ "${2:-0}" -gt 0 ] && [ "${3:-x}" = 0 ] && ok "$type decode called the micro-kernel $2 times" \
            || not_ok "$type decode: calls '${2:-}', GEMV panels '${3:-}'"
    fi
    KVCHAT_CPU=generic run "$KVCHAT" bench -m "$T/m-$type.gguf" -p 20 -n 3 -r 1 -v
    expect_rc 0
    expect_err "float weights on the portable kernels: 0 micro-kernel calls in prefill, 0 in decode, 0 decode panels"
    # the same bits either way, batch and token by token
    run "$KVCHAT" eval -m "$T/m-$type.gguf" -p "1 5 9 33 7 100 200" --logits-out "$T/a.f32"
    KVCHAT_CPU=generic run "$KVCHAT" eval -m "$T/m-$type.gguf" -p "1 5 9 33 7 100 200" --token-by-token --logits-out "$T/g.f32"
    cmp -s "$T/a.f32" "$T/g.f32" && ok "$type: BLIS batch and portable token by token give the same bits" \
        || not_ok "$type: logits differ between BLIS and the portable kernels"
done

if [ "$(uname -m)" = x86_64 ] && grep -q ' avx2 ' /proc/cpuinfo && grep -q ' fma ' /proc/cpuinfo; then
    m=$T/m-F32.gguf
    run "$KVCHAT" eval -m "$m" -p "1 5 9 33 7 100 200" --logits-out "$T/a.f32" -v
    expect_err 'mapped from the cache'
    # BLIS_ARCH_HASWELL = 3, BLIS_ARCH_SANDYBRIDGE = 4 in BLIS 0.9's arch_t
    BLIS_ARCH_TYPE=3 run "$KVCHAT" bench -m "$m" -p 20 -n 3 -r 1 -v
    expect_err "float weights on BLIS's micro-kernel, blis [0-9.]* haswell mr6 nr16 kc256"
    expect_err 'packed now'
    BLIS_ARCH_TYPE=3 run "$KVCHAT" eval -m "$m" -p "1 5 9 33 7 100 200" --token-by-token --logits-out "$T/h.f32"
    cmp -s "$T/a.f32" "$T/h.f32" && ok "haswell's kernel gives the same bits" || not_ok "logits differ under haswell's kernel"
    # its 16-row panels one token at a time through the 8-lane GEMV
    KVCHAT_CPU=avx2 BLIS_ARCH_TYPE=3 run "$KVCHAT" eval -m "$m" -p "1 5 9 33 7 100 200" --token-by-token --logits-out "$T/h2.f32"
    cmp -s "$T/a.f32" "$T/h2.f32" && ok "haswell's panels on the avx2 path give the same bits" \
        || not_ok "logits differ on haswell's panels on the avx2 path"
    BLIS_ARCH_TYPE=4 run "$KVCHAT" eval -m "$m" -p "1 5 9 33 7 100 200" --logits-out "$T/s.f32" -v
    expect_rc 0
    expect_err "warning: BLIS's sgemm micro-kernel (blis [0-9.]* sandybridge .*) does not compute kvchat's definition bit for bit; float weights run on the portable kernels"
    [ "$(grep -c warning "$T/err")" = 1 ] && ok "one warning" || not_ok "$(grep -c warning "$T/err") warnings"
    cmp -s "$T/a.f32" "$T/s.f32" && ok "the fallback gives the same bits" || not_ok "logits differ after the fallback"
    # skx's kernel (BLIS_ARCH_SKX = 0; weights as its A operand, 32 rows a
    # panel), which kvchat picks on every AVX-512 CPU
    if grep -qw avx512f /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
        grep -qw avx512vl /proc/cpuinfo; then
        BLIS_ARCH_TYPE=0 run "$KVCHAT" bench -m "$m" -p 20 -n 3 -r 1 -v
        expect_err "float weights on BLIS's micro-kernel, blis [0-9.]* skx mr32 nr12 kc256 wa32: [1-9][0-9]* micro-kernel calls in prefill, "
        # skx's 32-row panels through the 8-lane GEMV (KVCHAT_CPU=avx2 caps the path)
        KVCHAT_CPU=avx2 BLIS_ARCH_TYPE=0 run "$KVCHAT" bench -m "$m" -p 20 -n 3 -r 1 -v
        set -- $(calls)
        [ "${3:-0}" -gt 0 ] && [ "${2:-x}" -lt $(($3 / 10)) ] && ok "skx's panels: decode read $3 through the avx2 path's GEMV" \
            || not_ok "skx's panels on the avx2 path: decode calls '${2:-}', GEMV panels '${3:-}'"
        KVCHAT_CPU=avx2 BLIS_ARCH_TYPE=0 run "$KVCHAT" eval -m "$m" -p "1 5 9 33 7 100 200" --token-by-token --logits-out "$T/k2.f32"
        cmp -s "$T/a.f32" "$T/k2.f32" && ok "skx's panels one token at a time on the avx2 path give the same bits" \
            || not_ok "logits differ on skx's panels on the avx2 path"
        BLIS_ARCH_TYPE=0 run "$KVCHAT" eval -m "$m" -p "1 5 9 33 7 100 200" --token-by-token --logits-out "$T/k.f32"
        cmp -s "$T/a.f32" "$T/k.f32" && ok "skx's kernel gives the same bits" || not_ok "logits differ under skx's kernel"
    else
        echo "# this CPU has no AVX-512: skx's kernel is not tried"
    fi
fi
finish
