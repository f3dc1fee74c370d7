#!/bin/sh
# t0402: a batch-invariant engine. For each weight type (F32, F16, BF16,
# Q8_0, Q4_0, Q4_K_M, Q6_K, IQ4_XS, MXFP4 (a one-layer qwen3moe with MXFP4
# experts, the rest Q8_0) and a mixed Q4_K_M file: Q5_0, Q8_0, Q4_K, Q6_K),
# KV cache type (f16, f32) and prompt length (7, 64, 300, 1000 ids, the
# longest in two passes of 512), the last position's logits are the same
# bits (cmp) however the prompt goes in: one batch on 2 threads (the
# reference) or on 1; token by token on 2 or 1; --split K (the first K ids
# as one batch, then the rest) for K = 1, n - 1, and the block-like sizes
# 64, 256 and 512 where they fit; the first half as a batch and the rest
# token by token; and on the portable kernels (KVCHAT_CPU=generic) too,
# and on a CPU with AVX-512 (and VNNI) on the AVX2 kernels (KVCHAT_CPU=avx2)
# as well: every kernel path this CPU runs gives the same bits.
. "$TOP/tests/cli/lib.sh"
D=$TOP/tests/data/accuracy

others=$(other_kernels)
if [ "$others" != generic ]; then
    echo "# AVX-512 with VNNI: the reference runs the avx512 kernels; avx2 and generic are compared with it"
else
    echo "# this CPU has no AVX-512 with VNNI: the avx512 kernels are not compared here (the test still runs the rest)"
fi

# n ids below 260, the same for every model
ids() { awk -v n="$1" 'BEGIN { x = 4242; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? " " : "", x % 257 + 3 } }'; }

for name in f32 f16 bf16 q8_0 q4_0 q4_k_m q6_k iq4_xs mxfp4 mixed; do
    line=$(grep "^$name " "$D/models.txt")
    [ $name = iq4_xs ] && line="iq4_xs file tests/data/quant/m-IQ4_XS.gguf" # (no accuracy goldens: t0400)
    [ $name = mxfp4 ] && line="mxfp4 file tests/data/quant/m-MXFP4.gguf"
    set -- $line
    if [ "$2" = mk ]; then
        shift 2
        model=$T/$name.gguf
        "$MKMODEL" "$model" "$@" >/dev/null
    else
        model=$TOP/$3
    fi
    for kv in f16 f32; do
        for n in 7 64 300 1000; do
            p=$(ids "$n")
            ev() { "$KVCHAT" eval -m "$model" -p "$p" --kv-type "$kv" "$@" >/dev/null 2>"$T/err"; }
            if ! ev -t 2 --logits-out "$T/ref.f32"; then
                not_ok "$name kv $kv n $n: eval failed: $(cat "$T/err")"
                continue
            fi
            set -- "-t 1" "--token-by-token -t 2" "--token-by-token -t 1" "--split 1 -t 2" "--split $((n - 1)) -t 1" \
                "--split $((n / 2)) --token-by-token -t 2"
            for k in 64 256 512; do
                [ "$k" -lt "$n" ] && set -- "$@" "--split $k -t $(( k / 64 % 2 + 1 ))"
            done
            bad= runs=$(($# + 1))
            for how in "$@"; do
                # shellcheck disable=SC2086
                ev $how --logits-out "$T/l.f32" && cmp -s "$T/ref.f32" "$T/l.f32" || bad="$bad [$how]"
            done
            if [ "$n" -le 300 ]; then
                for v in $others; do
                    runs=$((runs + 1))
                    KVCHAT_CPU=$v ev -t 2 --logits-out "$T/l.f32" && cmp -s "$T/ref.f32" "$T/l.f32" ||
                        bad="$bad [KVCHAT_CPU=$v]"
                done
                # the avx2 kernels token by token too (the one-token products)
                case $others in avx2*)
                    runs=$((runs + 1))
                    KVCHAT_CPU=avx2 ev --token-by-token -t 2 --logits-out "$T/l.f32" && cmp -s "$T/ref.f32" "$T/l.f32" ||
                        bad="$bad [KVCHAT_CPU=avx2 --token-by-token]" ;;
                esac
            fi
            if [ -z "$bad" ]; then
                ok "$name kv $kv n $n: the same bits every way ($runs runs)"
            else
                not_ok "$name kv $kv n $n: differs from one batch:$bad"
            fi
        done
    done
done
finish
