#!/bin/sh
# check.sh - what `make check-arm64` (and so `make check`) runs: the aarch64
# build (build-arm64/, `make arm64`) under qemu-user, on the NEON kernels
# with the dot product instructions (qemu -cpu max), without them
# (-cpu cortex-a57) and on the portable ones (KVCHAT_CPU=generic):
# test_kernels and test_quant on each; t-invariance.sh (the host's logits,
# bit for bit, every weight type, t0402's ways); t0403's accuracy on both
# NEON paths; t0406 (KVCHAT_CPU strict) on both; t-blocks.sh (KV blocks written under any kernel path,
# x86-64 or aarch64, restored under any other). Logs in tests/out/arm64/.
# Ends with "N passed, N failed". About 2 minutes of CPU on a quiet machine.
set -u
top=$(pwd)
out=$top/tests/out/arm64
mkdir -p "$out"
if ! command -v qemu-aarch64 >/dev/null 2>&1 || [ ! -x build-arm64/kvchat ]; then
    echo "check-arm64: needs qemu-aarch64 and build-arm64/ (make arm64; packages: scripts/install-deps)" >&2
    exit 1
fi

. "$top/tests/check-lib.sh"

for cpu in max cortex-a57; do
    for path in neon generic; do
        for t in test_kernels test_quant; do
            check_run "arm64 $t ($path, qemu -cpu $cpu)" "$out/$t-$cpu-$path.log" \
                env KVCHAT_CPU=$path qemu-aarch64 -cpu $cpu build-arm64/tests/$t
        done
    done
done

cli() { # name, script, extra environment...
    name=$1 script=$2
    shift 2
    check_run "arm64 $name" "$out/$name.log" env KVCHAT="$top/kvchat" MKMODEL="$top/tests/mkmodel" \
        MKSESSION="$top/tests/mksession" TOP="$top" TMPDIR="${TMPDIR:-/tmp}" "$@" sh "$script"
}
cli t-invariance tests/arm64/t-invariance.sh
for cpu in max cortex-a57; do
    # t0403 as it is, on the aarch64 kvchat
    check_run "arm64 t0403-accuracy (qemu -cpu $cpu)" "$out/t0403-$cpu.log" env KVCHAT="$top/tests/arm64/kvchat" \
        QEMU_CPU=$cpu KVCHAT_CPU=neon MKMODEL="$top/tests/mkmodel" TOP="$top" TMPDIR="${TMPDIR:-/tmp}" \
        sh tests/cli/t0403-accuracy.sh
done
for cpu in max cortex-a57; do
    check_run "arm64 t0406-kvchat-cpu (qemu -cpu $cpu)" "$out/t0406-$cpu.log" env KVCHAT="$top/tests/arm64/kvchat" \
        QEMU_CPU=$cpu KVCHAT_ARCH=aarch64 MKMODEL="$top/tests/mkmodel" TOP="$top" TMPDIR="${TMPDIR:-/tmp}" \
        sh tests/cli/t0406-kvchat-cpu.sh
done
cli t-blocks tests/arm64/t-blocks.sh

check_summary "arm64: "
