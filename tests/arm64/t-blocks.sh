#!/bin/sh
# t-blocks (tests/arm64/check.sh): a KV block computed on one machine is
# valid on another (kvchat-files(5)). Under each kernel path (x86-64:
# generic, avx2, and avx512 where the CPU has AVX-512 with VNNI; aarch64
# under qemu: neon with SDOT, neon without, generic) a session's first turn is written in a store of its own: the answers are
# the same and so are the block files, name and bytes. Then every store is
# resumed under every other path: the second turn restores the first's
# blocks (cached_tokens > 0) and answers byte for byte what --no-cache (the
# whole conversation computed again) answers, on every path.
. "$TOP/tests/cli/lib.sh"
A64=$TOP/tests/arm64/kvchat
M=$T/m.gguf
"$MKMODEL" "$M" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 --type Q8_0 >/dev/null
PATHS="x86-generic x86-avx2 arm-neon-dotprod arm-neon arm-generic"
# BLOCK_X86_ONLY=1 (tests/cli/t0407-blocks-cpu.sh): this machine's paths alone
[ -n "${BLOCK_X86_ONLY:-}" ] && PATHS="x86-generic x86-avx2"
if grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
    grep -qw avx512_vnni /proc/cpuinfo; then
    PATHS="x86-avx512 $PATHS"
else
    echo "# this CPU has no AVX-512 with VNNI: the avx512 path is left out"
fi
M1="Tell me about the blocks a machine writes, and the ones another machine reads back later on: \
what is in them, how many positions each holds, who decides their names, what happens to a block that \
a second machine with other instructions computes again, and whether the answer it gives can differ?"
M2="And a second question, with a few more words than the first had?"

kv() { # path, kvchat arguments...: the kernel path's kvchat, with -v
    p=$1
    shift
    case $p in
    x86-generic) KVCHAT_CPU=generic "$KVCHAT" "$@" ;;
    x86-avx2) KVCHAT_CPU=avx2 "$KVCHAT" "$@" ;;
    x86-avx512) KVCHAT_CPU=avx512 "$KVCHAT" "$@" ;;
    arm-neon-dotprod) QEMU_CPU=max KVCHAT_CPU=neon "$A64" "$@" ;;
    arm-neon) QEMU_CPU=cortex-a57 KVCHAT_CPU=neon "$A64" "$@" ;;
    arm-generic) QEMU_CPU=max KVCHAT_CPU=generic "$A64" "$@" ;;
    esac </dev/null
}
kernels_of() { case $1 in *-generic) echo generic ;; x86-avx2) echo avx2 ;; x86-avx512) echo avx512 ;; *-dotprod) echo neon-dotprod ;; *) echo neon ;; esac; }
turn() { # path, home, message, extra options: the answer's JSON in $T/j
    KVCHAT_HOME=$2 kv "$1" run -m "$M" -s s -t 2 --temp 0 -n 12 -v --json $4 "$3" >"$T/j" 2>"$T/err" ||
        { not_ok "$1: run failed: $(cat "$T/err")"; return 1; }
    grep -q "kernels $(kernels_of "$1")" "$T/err" || { not_ok "$1: not on kernels $(kernels_of "$1"): $(cat "$T/err")"; return 1; }
}

# the first turn under each path, each in a store of its own
first=
for p in $PATHS; do
    turn "$p" "$T/h-$p" "$M1" "" || continue
    a=$(jq -r .answer "$T/j")
    (cd "$T/h-$p/kv" && find . -name '*.kvblk' | sort | xargs sha256sum) >"$T/blocks-$p"
    if [ -z "$first" ]; then
        first=$p a1=$a
        [ "$(wc -l <"$T/blocks-$p")" -ge 2 ] && ok "$p: turn 1 wrote $(wc -l <"$T/blocks-$p") blocks" ||
            not_ok "$p: $(wc -l <"$T/blocks-$p") blocks, wanted a full one and more"
        continue
    fi
    [ "$a" = "$a1" ] && ok "$p: turn 1 answers as $first" || not_ok "$p: turn 1 '$a', $first '$a1'"
    cmp -s "$T/blocks-$first" "$T/blocks-$p" && ok "$p: the same block files as $first (names and bytes)" ||
        not_ok "$p: block files differ from $first's: $(diff "$T/blocks-$first" "$T/blocks-$p" | head -4)"
done

# the second turn computed whole under each path: one answer
for p in $PATHS; do
    rm -rf "$T/nc" && cp -r "$T/h-$first" "$T/nc"
    turn "$p" "$T/nc" "$M2" --no-cache || continue
    a=$(jq -r .answer "$T/j")
    [ "$p" = "$first" ] && want=$a
    [ "$a" = "$want" ] && ok "$p: turn 2 with --no-cache answers as $first" || not_ok "$p: --no-cache '$a', $first '$want'"
done

# every store resumed under every other path
for w in $PATHS; do
    for r in $PATHS; do
        [ "$w" = "$r" ] && continue
        rm -rf "$T/x" && cp -r "$T/h-$w" "$T/x"
        turn "$r" "$T/x" "$M2" "" || continue
        a=$(jq -r .answer "$T/j") c=$(jq -r .cached_tokens "$T/j")
        if [ "$c" -gt 0 ] && [ "$a" = "$want" ]; then
            ok "written under $w, resumed under $r: $c tokens restored, the answer of --no-cache"
        else
            not_ok "written under $w, resumed under $r: $c tokens restored, '$a' (--no-cache: '$want')"
        fi
    done
done
finish
