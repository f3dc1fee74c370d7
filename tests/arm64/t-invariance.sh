#!/bin/sh
# t-invariance (tests/arm64/check.sh): one definition on every CPU. For
# every weight type of tests/data/accuracy/models.txt (F32, F16, BF16, Q8_0,
# Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, the mixed
# Q4_K_M file), the MXFP4 files (tests/data/quant's one-layer qwen3moe,
# tests/data/gptoss's gpt-oss: sinks, windows, YaRN, biased experts) and
# prompts of 8, 64 and 200 ids, the last position's logits
# of the aarch64 kvchat under qemu are the bits (cmp) of the host's, one
# batch on 2 threads, in t0402's ways: one batch, token by token, --split
# K, the first part as a batch and the rest token by token, 1 or 2
# threads; on the NEON kernels with SDOT (qemu -cpu max), without
# (-cpu cortex-a57), and on the portable ones (KVCHAT_CPU=generic); with
# --kv-type f32 too.
. "$TOP/tests/cli/lib.sh"
D=$TOP/tests/data/accuracy
A64=$TOP/tests/arm64/kvchat

{
    cat "$D/models.txt"
    echo "mxfp4 file tests/data/quant/m-MXFP4.gguf"
    echo "gptoss-mxfp4 file tests/data/gptoss/gptoss-MXFP4.gguf"
} >"$T/models.txt"

ids() { awk -v n="$1" 'BEGIN { x = 4242; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? " " : "", x % 257 + 3 } }'; }

while read -r name how rest; do
    accuracy_model "$name" "$how" "$rest"
    for n in 8 64 200; do
        p=$(ids "$n")
        if ! "$KVCHAT" eval -m "$model" -p "$p" -t 2 --logits-out "$T/ref.f32" >/dev/null 2>"$T/err"; then
            not_ok "$name n $n: the host's eval failed: $(cat "$T/err")"
            continue
        fi
        case $n in
        8) set -- "max|-t 2" "max|--token-by-token -t 1" "cortex-a57|-t 2" "max|-t 2|generic" ;;
        64) set -- "max|-t 2" "max|--split 32 --token-by-token -t 2" "cortex-a57|--token-by-token -t 1" \
            "cortex-a57|--split 1 -t 2" ;;
        *) set -- "max|-t 2" "max|--split 64 -t 1" "cortex-a57|-t 2" "cortex-a57|--split 199 -t 2|generic" ;;
        esac
        bad=
        for way in "$@"; do
            cpu=${way%%|*} args=${way#*|} path=neon
            case $args in *"|"*) path=${args#*|} args=${args%%|*} ;; esac
            # shellcheck disable=SC2086
            QEMU_CPU=$cpu KVCHAT_CPU=$path "$A64" eval -m "$model" -p "$p" $args --logits-out "$T/l.f32" \
                >/dev/null 2>"$T/err" && cmp -s "$T/ref.f32" "$T/l.f32" || bad="$bad [$path on $cpu: $args]"
        done
        runs=$#
        if [ "$n" = 64 ]; then
            runs=$((runs + 1))
            "$KVCHAT" eval -m "$model" -p "$p" -t 2 --kv-type f32 --logits-out "$T/ref32.f32" >/dev/null 2>&1 &&
                QEMU_CPU=max "$A64" eval -m "$model" -p "$p" -t 2 --kv-type f32 --logits-out "$T/l.f32" \
                    >/dev/null 2>&1 && cmp -s "$T/ref32.f32" "$T/l.f32" || bad="$bad [kv f32]"
        fi
        if [ -z "$bad" ]; then
            ok "$name n $n: aarch64 gives the host's bits ($runs ways)"
        else
            not_ok "$name n $n: aarch64 differs from the host:$bad"
        fi
    done
done <"$T/models.txt"
finish
