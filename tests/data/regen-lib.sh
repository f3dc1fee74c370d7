# regen-lib.sh - what the regen-*.sh scripts that make llama.cpp goldens
# for mkmodel's synthetic models share: one place for the scratch folder, the
# pseudo-random prompts, the F32 model and its hash, quantizing, and the
# llama.cpp/float64 logits pair, so that every family's goldens are made
# the same way.
# Sourced (". tests/data/regen-lib.sh") from the top directory by a script
# that has run `set -eu` and set LLREF; it sets d and tmp (regen_init), f32
# (regen_model) and model (regen_quant, regen_goldens).

# regen_init DIR: DIR made (as $d) and a scratch folder $tmp, removed on exit
regen_init() {
    d=$1
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$d"
}

# regen_ids N SEED MOD BASE: N pseudo-random ids in BASE..BASE+MOD-1 on one line
regen_ids() {
    awk -v n="$1" -v x="$2" -v mod="$3" -v base="$4" 'BEGIN { for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%s%d", i ? " " : "", x % mod + base }; print "" }'
}

# regen_prompts SEED: $d/prompt300.txt (ids in 3..502) and $d/prompt8.txt, its first 8
regen_prompts() {
    regen_ids 300 "$1" 500 3 >"$d/prompt300.txt"
    cut -d' ' -f1-8 "$d/prompt300.txt" >"$d/prompt8.txt"
}

# regen_model NAME OPTS: $d/NAME.opts, the F32 model mkmodel writes from it
# ($f32, in $tmp) and its hash $d/NAME-F32.sha256
regen_model() {
    echo "$2" >"$d/$1.opts"
    f32=$tmp/$1-F32.gguf
    tests/mkmodel "$f32" $2 >/dev/null
    (cd "$tmp" && sha256sum "$1-F32.gguf") >"$d/$1-F32.sha256"
}

# regen_quant NAME TYPE: $model, the file of TYPE: $f32 for F32, else
# $d/NAME-TYPE.gguf, quantized from $f32 by llama.cpp unless already there
regen_quant() {
    model=$f32
    if [ "$2" != F32 ]; then
        model=$d/$1-$2.gguf
        [ -f "$model" ] || "$LLREF" quantize "$f32" "$model" "$2" >/dev/null 2>&1
    fi
}

# regen_logits MODEL IDS OUT F64PY: llama.cpp's last-position logits to
# OUT.logits, the float64 reference's (F64PY) to OUT.f64.f32
regen_logits() {
    "$LLREF" logits "$1" -p "$2" -o "$3.logits" >/dev/null 2>&1
    /usr/bin/python3 "$4" "$1" -p "$2" -o "$3.f64.f32" >/dev/null
}

# regen_goldens NAME TAG F64PY TYPE...: on the prompt $ids, llama.cpp's 32
# greedy tokens after it on $f32 ($d/NAME-F32-TAG.greedy), and for each TYPE
# (regen_quant) llama.cpp's and the float64 logits ($d/NAME-TYPE-TAG.*)
regen_goldens() {
    _name=$1 _tag=$2 _f64=$3
    shift 3
    "$LLREF" greedy "$f32" -p "$ids" -n 32 2>/dev/null >"$d/$_name-F32-$_tag.greedy"
    for _type; do
        regen_quant "$_name" "$_type"
        regen_logits "$model" "$ids" "$d/$_name-$_type-$_tag" "$_f64"
    done
}

# regen_relchange A B LABEL: prints "LABEL: x", x = max |A - B| / range of B
# (f32 LE files)
regen_relchange() {
    /usr/bin/python3 -c "import numpy as n; a=n.fromfile('$1',n.float32); b=n.fromfile('$2',n.float32); print('$3: %.3g' % (abs(a-b).max()/(b.max()-b.min())))"
}
