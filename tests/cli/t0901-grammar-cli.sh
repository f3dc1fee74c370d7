#!/bin/sh
# t0901: --format json, --json-schema, --grammar through `kvchat run` and
# the chat (issue 27): "parsed" in --json and a field taken out with jq;
# every unsupported schema keyword refused by name with exit 1 before the
# model loads (the model path given does not exist: exit 2 would mean it was
# opened); bad grammars refused with line:column; -n too small for the value
# to close: stop_reason length, parsed null, exit 5; a remote-free chat's
# /set schema, /set format off; a constrained 6-turn session resumed from
# disk answers byte for byte what --no-cache answers, greedy and seeded.
. "$TOP/tests/cli/lib.sh"
M=$T/m.gguf
qwen2_tiny "$M"
S=$TOP/tests/grammar/schemas/s007.json  # {"from": {"x", "y"}, "to": {"x", "y"}} with $defs
R="$KVCHAT run -m $M -t 1"

# ---- a schema, "parsed", jq
run sh -c "$R --temp 0 -n 80 --json --json-schema $S 'a segment' </dev/null"
expect_rc 0
[ "$(jq -r .stop_reason "$T/out")" = stop ] && ok "the value closed" || not_ok "stop_reason $(jq -r .stop_reason "$T/out")"
[ "$(jq -c .parsed "$T/out")" = "$(jq -r .answer "$T/out" | jq -c .)" ] && ok "parsed is the answer as JSON" ||
    not_ok "parsed $(jq -c .parsed "$T/out") vs answer $(jq -r .answer "$T/out")"
x=$(jq -r '.parsed.from.x' "$T/out")
[ "$x" -ge -9 ] && [ "$x" -le 9 ] && ok "jq takes .parsed.from.x: $x (in [-9, 9])" || not_ok "from.x '$x'"
run sh -c "$R --temp 0 -n 80 --json-schema $S 'a segment' </dev/null"
expect_rc 0
jq -e '.to.y' "$T/out" >/dev/null && ok "without --json the answer is the JSON value" || not_ok "answer: $(cat "$T/out")"
# the schema given inline
run sh -c "$R --temp 0 -n 20 --json --json-schema '{\"enum\": [\"yes\", \"no\"]}' 'ok?' </dev/null"
expect_rc 0
p=$(jq -r .parsed "$T/out")
[ "$p" = yes ] || [ "$p" = no ] && ok "an inline schema: enum answer '$p'" || not_ok "enum answer '$p'"
# without a format there is no parsed
run sh -c "$R --temp 0 -n 4 --json hi </dev/null"
jq -e 'has("parsed") | not' "$T/out" >/dev/null && ok "no parsed without a format" || not_ok "parsed without a format"

# ---- -n too small: incomplete, never silently invalid
run sh -c "$R --temp 0 -n 3 --json --json-schema $S 'a segment' </dev/null"
expect_rc 5
[ "$(jq -r .stop_reason "$T/out")" = length ] && ok "stop_reason length" || not_ok "stop_reason $(jq -r .stop_reason "$T/out")"
[ "$(jq -r .parsed "$T/out")" = null ] && ok "parsed null" || not_ok "parsed $(jq -c .parsed "$T/out")"
expect_err "incomplete"
run sh -c "$R --temp 0 -n 2 --format json hi </dev/null"
expect_rc 5

# ---- --format json and --grammar
run sh -c "$R --temp 0 -n 200 --json --format json hi </dev/null"
case $rc in
0) jq -r .answer "$T/out" | jq . >/dev/null && ok "--format json: a JSON answer" || not_ok "--format json: not JSON" ;;
5) [ "$(jq -r .stop_reason "$T/out")" = length ] && ok "--format json: incomplete at -n, said so" || not_ok "exit 5 without length" ;;
*) not_ok "--format json: exit $rc" ;;
esac
printf 'root ::= "- " [a-z]{1,5} ("\\n- " [a-z]{1,5}){0,2}\n' >"$T/l.gbnf"
run sh -c "$R --temp 0.9 --seed 3 -n 40 --grammar $T/l.gbnf hi </dev/null"
expect_rc 0
grep -Eqx -- '- [a-z]{1,5}' "$T/out" && [ "$(grep -Evc -- '^- [a-z]{1,5}$' "$T/out")" = 0 ] &&
    ok "--grammar: lines '- word'" || { not_ok "--grammar answer"; cat "$T/out"; }

# ---- refusals: before the model loads (no such model: exit 2 would mean it was opened)
for kw in allOf not if then else minProperties maxProperties patternProperties propertyNames uniqueItems \
          contains minContains multipleOf dependentRequired dependentSchemas unevaluatedProperties \
          unevaluatedItems contentEncoding '$anchor' '$dynamicRef'; do
    run sh -c "$KVCHAT run -m $T/none.gguf --json-schema '{\"type\": \"object\", \"properties\": {\"a\": {\"$kw\": 1}}}' hi </dev/null"
    [ "$rc" = 1 ] && grep -q "keyword '$kw' is not supported" "$T/err" && ok "'$kw' refused by name, exit 1" ||
        { not_ok "'$kw': exit $rc"; cat "$T/err"; }
done
run sh -c "$KVCHAT run -m $T/none.gguf --json-schema '{\"\$defs\": {\"u\": {\"allOf\": []}}, \"type\": \"null\"}' hi </dev/null"
expect_rc 1
expect_err "'allOf' is not supported"
run sh -c "$KVCHAT run -m $T/none.gguf --json-schema '{\"type\": \"string\", \"format\": \"email\"}' hi </dev/null"
expect_rc 1
expect_err "format 'email' is not supported"
printf '{"type": "string", "pattern": "a\\\\bc"}' >"$T/p.json"  # the regex a\bc
run sh -c "$KVCHAT run -m $T/none.gguf --json-schema $T/p.json hi </dev/null"
expect_rc 1
expect_err "pattern: escape"
run sh -c "$KVCHAT run -m $T/none.gguf --json-schema '{\"type\": ' hi </dev/null"
expect_rc 1
expect_err "bad JSON schema"
printf 'root ::= "a" | b\n' >"$T/b1.gbnf"
printf 'root ::= x\nx ::= x "a" | "b"\n' >"$T/b2.gbnf"
printf 'root ::= "abc\n' >"$T/b3.gbnf"
printf 'root ::= ("a"?)*\n' >"$T/b4.gbnf"
printf 'top ::= "a"\n' >"$T/b5.gbnf"
for b in "b1:rule 'b' is not defined" "b2:left-recursive" "b3:at 1:" "b4:left recursion" "b5:no rule 'root'"; do
    f=${b%%:*} why=${b#*:}
    run sh -c "$KVCHAT run -m $T/none.gguf --grammar $T/$f.gbnf hi </dev/null"
    [ "$rc" = 1 ] && grep -q "$why" "$T/err" && ok "grammar $f refused: $why" || { not_ok "grammar $f: exit $rc"; cat "$T/err"; }
done
run sh -c "$KVCHAT run -m $T/none.gguf --grammar $T/missing.gbnf hi </dev/null"
expect_rc 2
run sh -c "$KVCHAT run -m $M --format yaml hi </dev/null"
expect_rc 1

# ---- the chat: /set schema, then /set format off
printf '/set schema %s\na segment\n/set format off\nhello\n' "$S" >"$T/in"
run sh -c "$KVCHAT chat -m $M -t 1 --temp 0 -n 80 < $T/in"
expect_rc 0
grep -q '^{"from":{"x":-\{0,1\}[0-9],"y":-\{0,1\}[0-9]},"to":{"x":-\{0,1\}[0-9],"y":-\{0,1\}[0-9]}}$' "$T/out" &&
    ok "chat: /set schema constrains the next answer" || { not_ok "chat answer"; cat "$T/out"; }
expect_out "format: off"

# ---- exactness: 6 constrained turns resumed from disk = --no-cache, every turn
conversation() {
    name=$1
    shift
    bad=0
    for i in 1 2 3 4 5 6; do
        m="Segment number $i, please"
        "$KVCHAT" run -m "$M" -s "$name" "$@" --no-cache --json "$m" </dev/null >"$T/nc.json" 2>"$T/err"
        r1=$?
        "$KVCHAT" run -m "$M" -s "$name" "$@" --json "$m" </dev/null >"$T/c.json" 2>"$T/err"
        r2=$?
        a=$(jq -r .answer "$T/nc.json") b=$(jq -r .answer "$T/c.json")
        [ "$a" = "$b" ] && [ "$r1" = "$r2" ] || { bad=$((bad + 1)); echo "  turn $i: '$a' ($r1) vs '$b' ($r2)"; }
        echo "$b" | jq -e .from >/dev/null || { bad=$((bad + 1)); echo "  turn $i: not the schema's: $b"; }
    done
    [ "$(jq -r .cached_tokens "$T/c.json")" -gt 0 ] && ok "$name: the last turn resumed $(jq -r .cached_tokens "$T/c.json") tokens" ||
        not_ok "$name: nothing resumed"
    [ "$bad" = 0 ] && ok "$name: 6 constrained turns, byte-identical to --no-cache" || not_ok "$name: $bad differences"
}
conversation greedy -t 1 --temp 0 -n 80 --json-schema "$S"
conversation sampled -t 1 --temp 0.8 --seed 5 -n 80 --json-schema "$S"

# ---- a session keeps its format (issue 27: "a session saves its format
# like its other parameters"), however long the schema: one of 3 KB here,
# its title with quotes, backslashes, a newline and UTF-8
python3 - "$S" "$T/big.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["title"] = ('a "long" \\ title\n with é ' * 120)[:3000]
open(sys.argv[2], "w").write(json.dumps(s, ensure_ascii=False))
PY
[ "$(wc -c < "$T/big.json")" -gt 2048 ] && ok "a schema of $(wc -c < "$T/big.json") bytes" || not_ok "big schema"
seg='^{"from":{"x":-\{0,1\}[0-9],"y":-\{0,1\}[0-9]},"to":{"x":-\{0,1\}[0-9],"y":-\{0,1\}[0-9]}}$'
run sh -c "$R --temp 0 -n 80 -s kept --json-schema $T/big.json 'first' </dev/null"
expect_rc 0
grep -q "$seg" "$T/out" && ok "kept: the first answer is the schema's" || not_ok "kept: first answer $(cat "$T/out")"
run sh -c "$R --temp 0 -n 80 -s kept --json 'second, no option' </dev/null"
expect_rc 0
[ "$(jq -r .answer "$T/out" | grep -c "$seg")" = 1 ] && ok "kept: run -s NAME alone keeps the schema" ||
    not_ok "kept: second answer $(jq -r .answer "$T/out")"
jq -e '.parsed.from' "$T/out" >/dev/null && ok "kept: parsed, as under --json-schema" || not_ok "kept: no parsed"
run "$KVCHAT" sessions export kept
expect_rc 0
jq -j .params.schema "$T/out" >"$T/saved.json"
cmp -s "$T/saved.json" "$T/big.json" && ok "sessions export shows the schema's text, byte for byte" ||
    { not_ok "export params"; jq -c .params "$T/out" | head -c 300; echo; }
# --format off: free this turn, not saved
run sh -c "$R --temp 0 -n 12 -s kept --format off --json 'free' </dev/null"
expect_rc 0
jq -e 'has("parsed") | not' "$T/out" >/dev/null && ok "--format off over the session's: free" || not_ok "--format off: parsed"
run sh -c "$R --temp 0 -n 80 -s kept --json 'again' </dev/null"
[ "$(jq -r .answer "$T/out" | grep -c "$seg")" = 1 ] && ok "--format off held for its turn only" ||
    not_ok "after --format off: $(jq -r .answer "$T/out")"

# the chat's /set format, schema, grammar are saved with the session
printf '/set format json\nhi\n' | $KVCHAT chat -m "$M" -t 1 --temp 0 -n 60 cj >"$T/out" 2>"$T/err"
run sh -c "$R --temp 0 -n 200 -s cj --json 'more' </dev/null"
[ "$(jq -r .params.format "$($KVCHAT sessions export cj >"$T/e.json"; echo "$T/e.json")")" = json ] &&
    ok "/set format json saved as \"format\": \"json\"" || not_ok "/set format: params $(jq -c .params "$T/e.json")"
jq -e 'has("parsed")' "$T/out" >/dev/null && ok "/set format json: run -s answers JSON values" || not_ok "cj: no parsed"
printf '/set grammar %s\nhi\n' "$T/l.gbnf" | $KVCHAT chat -m "$M" -t 1 --temp 0.9 --seed 3 -n 40 cg >"$T/out" 2>"$T/err"
run sh -c "$R --temp 0.9 --seed 4 -n 40 -s cg 'more' </dev/null"
expect_rc 0
grep -Eqx -- '- [a-z]{1,5}' "$T/out" && [ "$(grep -Evc -- '^- [a-z]{1,5}$' "$T/out")" = 0 ] &&
    ok "/set grammar: saved, the next run's answer is the grammar's" || not_ok "cg answer: $(cat "$T/out")"
[ "$($KVCHAT sessions export cg | jq -r .params.grammar)" = "$(cat "$T/l.gbnf")" ] && ok "/set grammar: the GBNF text saved" ||
    not_ok "cg params"
printf '/set format off\nhi\n' | $KVCHAT chat -t 1 --temp 0 -n 8 cg >"$T/out" 2>"$T/err"
[ "$($KVCHAT sessions export cg | jq -r .params.format)" = off ] && ok "/set format off saved as \"off\"" ||
    not_ok "cg after off: $($KVCHAT sessions export cg | jq -c .params)"
printf '/show\n' | $KVCHAT chat -t 1 cj >"$T/out" 2>"$T/err"
grep -q "format json" "$T/err" && ok "/show says the session's format" || { not_ok "/show format"; cat "$T/err"; }

# 6 turns, the schema given at the first only: resumed = --no-cache
bad=0
for i in 1 2 3 4 5 6; do
    first=
    [ $i = 1 ] && first="--json-schema $S"
    m="Segment number $i, please"
    "$KVCHAT" run -m "$M" -t 1 --temp 0.8 --seed 9 -n 80 -s keptnc $first --no-cache --json "$m" </dev/null >"$T/nc.json" 2>"$T/err"
    r1=$?
    "$KVCHAT" run -m "$M" -t 1 --temp 0.8 --seed 9 -n 80 -s keptnc $first --json "$m" </dev/null >"$T/c.json" 2>"$T/err"
    r2=$?
    a=$(jq -r .answer "$T/nc.json") b=$(jq -r .answer "$T/c.json")
    [ "$a" = "$b" ] && [ "$r1" = "$r2" ] || { bad=$((bad + 1)); echo "  turn $i: '$a' ($r1) vs '$b' ($r2)"; }
    echo "$b" | grep -q "$seg" || { bad=$((bad + 1)); echo "  turn $i: not the schema's: $b"; }
done
[ "$bad" = 0 ] && ok "6 turns under the kept schema, byte-identical to --no-cache" || not_ok "keptnc: $bad differences"
finish
