#!/bin/sh
# t0407: KV blocks written under one x86-64 kernel path (generic, avx2, and
# avx512 where the CPU has AVX-512 with VNNI) are restored under every
# other with identical answers, and the block files are the same bytes:
# tests/arm64/t-blocks.sh on this machine's paths alone (make check-arm64
# runs it with the aarch64 ones under qemu too).
BLOCK_X86_ONLY=1
. "$TOP/tests/arm64/t-blocks.sh"
