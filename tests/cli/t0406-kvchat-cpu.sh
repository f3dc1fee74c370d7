#!/bin/sh
# t0406: KVCHAT_CPU is strict. generic, and each path this CPU has, run
# (and `eval -v` says which); an unknown value, or a path this CPU cannot
# run (neon on x86-64, avx2 and avx512 on aarch64, avx512 without
# AVX-512 F, BW, VL, DQ and VNNI), is a usage error naming the choices, before any work; unset
# or empty is the CPU's best path. Every accepted path gives the same bits.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
"$MKMODEL" "$M" --arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --n-vocab 512 --type Q8_0 >/dev/null
ev() { "$KVCHAT" eval -m "$M" -p "1 5 9 33 100 200 7 8" -v --logits-out "$T/$1.f32"; }

run ev best
expect_rc 0
best=$(sed -n 's/.*kernels \([a-z0-9-]*\).*/\1/p' "$T/err" | head -1)
[ -n "$best" ] && ok "unset: kernels $best" || not_ok "unset: no kernel path in: $(cat "$T/err")"
KVCHAT_CPU= run ev empty
expect_rc 0
expect_err "kernels $best"

arch=${KVCHAT_ARCH:-$(uname -m)} # (tests/arm64/check.sh: aarch64 under qemu)
for v in generic avx2 avx512 neon; do
    case $v in
    generic) can=yes ;;
    avx2) [ "$arch" = x86_64 ] && grep -qw avx2 /proc/cpuinfo && can=yes || can=no ;;
    avx512) [ "$arch" = x86_64 ] && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
        grep -qw avx512dq /proc/cpuinfo && grep -qw avx512_vnni /proc/cpuinfo && can=yes || can=no
        [ $can = yes ] || echo "# no AVX-512 with VNNI here: KVCHAT_CPU=avx512 must be refused" ;;
    neon) [ "$arch" = aarch64 ] && can=yes || can=no ;;
    esac
    KVCHAT_CPU=$v run ev "$v"
    if [ "$can" = yes ]; then
        expect_rc 0
        cmp -s "$T/best.f32" "$T/$v.f32" && ok "$v: the bits of $best" || not_ok "$v: other bits than $best"
    else
        expect_rc 1
        expect_err "KVCHAT_CPU=$v: this CPU cannot run it"
    fi
done
KVCHAT_CPU=generic run ev generic
expect_err "kernels generic"
# each accepted path names itself; unset is the best one (avx512 where the CPU has it)
if [ "$arch" = x86_64 ] && grep -qw avx2 /proc/cpuinfo; then
    KVCHAT_CPU=avx2 run ev avx2
    expect_err "kernels avx2"
    if grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
        grep -qw avx512_vnni /proc/cpuinfo; then
        KVCHAT_CPU=avx512 run ev avx512
        expect_err "kernels avx512"
        [ "$best" = avx512 ] && ok "unset: avx512 on this AVX-512 CPU" || not_ok "unset: kernels $best on an AVX-512 CPU"
    else
        echo "# no AVX-512 with VNNI here: the avx512 path's name is not checked"
    fi
fi
for v in bogus AVX2 "generic " neon-dotprod; do
    KVCHAT_CPU=$v run ev bad
    expect_rc 1
    expect_err "KVCHAT_CPU=$v: unknown (choose generic, avx2, avx512 or neon)"
    [ ! -e "$T/bad.f32" ] && ok "'$v': nothing computed" || not_ok "'$v': logits written"
done
# any command, not only the engine's
KVCHAT_CPU=bogus run "$KVCHAT" sessions list
expect_rc 1
expect_err "unknown (choose generic"
finish
