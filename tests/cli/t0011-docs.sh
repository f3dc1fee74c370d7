#!/bin/sh
# t0011: the documentation says what the program does - `kvchat --help`
# names every models subcommand, `run --help` every key of `run --json`,
# the chat's /help every /set key (t0503); kvchat.1's examples use names
# that exist, it describes every sessions subcommand, and it has no stale
# "later" about what KVCHAT_HOME holds.
. "$TOP/tests/cli/lib.sh"
MAN=$TOP/man/kvchat.1
M=$T/m.gguf
"$MKMODEL" "$M" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null || exit 1

# ---- kvchat --help: the models line names every subcommand of models --help
run "$KVCHAT" --help
line=$(grep '^  models ' "$T/out")
for sub in $("$KVCHAT" models --help | sed -n 's/^ *\(usage: \)\{0,1\}kvchat models \([a-z]*\).*/\2/p' | sort -u); do
    echo "$line" | grep -q "\b$sub\b" && ok "kvchat --help: models $sub" || not_ok "kvchat --help lacks models $sub: $line"
done

# ---- run --help: every key run --json prints
run sh -c "$KVCHAT run -m $M -t 1 -n 2 --json hi < /dev/null"
keys=$(jq -r 'keys[]' "$T/out")
"$KVCHAT" run --help >"$T/help"
for k in $keys; do
    grep -q "\b$k\b" "$T/help" && ok "run --help: $k" || not_ok "run --help lacks $k"
done

# ---- the /set keys (as /set's error lists them, from the one table) in README and kvchat.1
run sh -c "printf '/set bogus 1\n' | $KVCHAT chat -m $M -t 1"
keys=$(sed -n "s/.*unknown setting 'bogus' (try: \(.*\))/\1/p" "$T/err" | tr -d ',')
[ "$(echo $keys | wc -w)" -ge 8 ] && ok "/set keys: $keys" || not_ok "/set keys: '$keys'"
setline=$(grep '^| `/set KEY VALUE`' "$TOP/README.md")
mansets=$(sed -n '/^\.BI \/set " key value"/,/^for the rest of the chat/p' "$MAN")
for k in $keys; do
    echo "$setline" | grep -q "\`$k\`" && ok "README's /set names $k" || not_ok "README's /set lacks $k"
    echo "$mansets" | grep -q "\b$k\b" && ok "kvchat.1's /set names $k" || not_ok "kvchat.1's /set lacks $k"
done

# ---- kvchat.1
grep -q "and later the session index" "$MAN" && not_ok "kvchat.1: stale 'and later'" || ok "kvchat.1: no stale 'and later'"
for name in $(sed -n 's/^kvchat models info \\-\\-json \([^ ]*\) .*/\1/p' "$MAN"); do
    "$KVCHAT" models aliases | grep -q "^$name " && ok "kvchat.1: models info example '$name' is an alias" ||
        not_ok "kvchat.1: models info example '$name' is no alias"
done
# every sessions subcommand has an entry followed by its description
for sub in $("$KVCHAT" sessions --help | sed -n 's/^ *\(usage: \)\{0,1\}kvchat sessions \([a-z]*\).*/\2/p' | sort -u); do
    n=$(grep -n "^\.B[I]* \"*sessions $sub" "$MAN" | head -n 1 | cut -d: -f1)
    if [ -z "$n" ]; then
        not_ok "kvchat.1 has no entry for sessions $sub"
    elif sed -n "$((n + 1))p" "$MAN" | grep -q '^\.TP'; then
        not_ok "kvchat.1: sessions $sub is not described"
    else
        ok "kvchat.1 describes sessions $sub"
    fi
done
finish
