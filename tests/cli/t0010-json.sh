#!/bin/sh
# t0010: --json is one shape everywhere (docs/commands.md, "Output for scripts"): every command
# that has it prints exactly one JSON document, an array for a list (also
# when empty) and an object for one thing, and its keys are all there
# (null when unknown) whatever the entry.
. "$TOP/tests/cli/lib.sh"
: "${MKSESSION:?}"

# shape CMD... -> "array N" / "object" / "documents N" / "invalid"
shape() {
    "$@" >"$T/j" 2>"$T/j.err" </dev/null
    if ! jq -e . "$T/j" >/dev/null 2>&1; then
        echo invalid
        return
    fi
    n=$(jq -s length "$T/j")
    [ "$n" = 1 ] || { echo "documents $n"; return; }
    case $(jq -r type "$T/j") in
    array) echo "array $(jq length "$T/j")" ;;
    object) echo object ;;
    *) echo "a $(jq -r type "$T/j")" ;;
    esac
}
expect_shape() { # what wanted cmd...
    what=$1 want=$2
    shift 2
    got=$(shape "$@")
    [ "$got" = "$want" ] && ok "$what: $want" || { not_ok "$what: $got, wanted $want"; head -c 400 "$T/j"; cat "$T/j.err"; }
}

# empty lists are empty arrays
expect_shape "models list, empty store" "array 0" "$KVCHAT" models list --json
expect_shape "sessions list, no index" "array 0" "$KVCHAT" sessions list --json

mkdir -p "$KVCHAT_HOME/models"
M=$KVCHAT_HOME/models/tiny.gguf
"$MKMODEL" "$M" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --heads 4 --kv-heads 2 \
    --layers 1 --ff 128 --tied >/dev/null || exit 1
echo "not a model" >"$KVCHAT_HOME/models/junk.gguf"
"$MKSESSION" "$KVCHAT_HOME" one --turns 2 >/dev/null || exit 1
"$MKSESSION" "$KVCHAT_HOME" two --turns 1 >/dev/null || exit 1

expect_shape "models list" "array 2" "$KVCHAT" models list --json
# every entry has every key, a readable one and an unreadable one alike
keys=$(jq -c '[.[] | keys] | unique' "$T/j")
[ "$(jq -r 'length' <<EOF
$keys
EOF
)" = 1 ] && ok "models list: the same keys for every entry" || not_ok "models list keys differ: $keys"
[ "$(jq -r '.[] | select(.name == "junk") | .arch' "$T/j")" = null ] && [ "$(jq -r '.[] | select(.name == "tiny") | .error' "$T/j")" = null ] &&
    ok "models list: unknown values are null" || not_ok "models list nulls: $(cat "$T/j")"
expect_shape "models (alone)" "array 2" "$KVCHAT" models --json
expect_shape "models aliases" "array $("$KVCHAT" models aliases | wc -l)" "$KVCHAT" models aliases --json
expect_shape "models info" "object" "$KVCHAT" models info --json tiny
expect_shape "models info --all" "object" "$KVCHAT" models info --json --all tiny
expect_shape "sessions list" "array 2" "$KVCHAT" sessions list --json
expect_shape "sessions (alone)" "array 2" "$KVCHAT" sessions --json
expect_shape "sessions show" "object" "$KVCHAT" sessions show one --json
expect_shape "sessions export" "object" "$KVCHAT" sessions export one
expect_shape "run" "object" "$KVCHAT" run -m tiny -t 1 -n 2 --temp 0 --json hello
expect_shape "run, a session" "object" "$KVCHAT" run -m tiny -t 1 -n 2 --temp 0 --json -s three hello
expect_shape "bench" "object" "$KVCHAT" bench -m tiny -t 1 -p 4 -n 2 -r 1 --json
finish
