#!/bin/sh
# t0900: constrained output is valid (issue 27). Random-weight models, whose
# free answers are gibberish, answer under 200 JSON Schemas
# (tests/grammar/schemas, from gen-schemas.py), 50 GBNF grammars
# (tests/grammar/gbnf, from gen-grammars.py: llama.cpp's json, arithmetic
# and list rewritten, and 47 random ones) and --format json, greedy and
# seeded, on three vocabularies (Qwen2's 151k tokens, Llama 3's 128k, Gemma
# 3's 262k: multi-byte characters split across tokens, tokens crossing
# several grammar symbols). tests/grammar-gen samples exactly as a
# conversation does (mask, then the masked sampler) with one model load for
# many grammars; tests/grammar/check.py judges independently: python3-jsonschema
# (Draft 2020-12 and its format checker) for the schemas, Python's json for
# --format json, and an Earley recogniser of its own (gbnf.py) for the
# grammars, and for answers -n cut short, that they are prefixes of the
# language. python3-jsonschema missing fails the test (scripts/install-deps).
. "$TOP/tests/cli/lib.sh"
G=$TOP/tests/grammar-gen
[ -x "$G" ] || { not_ok "no $G (make tests/grammar-gen)"; finish; exit 1; }
python3 -c 'import jsonschema' 2>"$T/err" && ok "python3-jsonschema is there" ||
    { not_ok "python3-jsonschema is missing (scripts/install-deps installs it)"; finish; exit 1; }
d=$TOP/tests/data/tokenizer
xz -dc "$d/ggml-vocab-llama-bpe.gguf.xz" >"$T/v-llama3.gguf"
xz -dc "$d/ggml-vocab-gemma-3.gguf.xz" >"$T/v-gemma3.gguf"
"$MKMODEL" "$T/qwen2.gguf" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null
"$MKMODEL" "$T/llama3.gguf" --arch llama --vocab "$T/v-llama3.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null
"$MKMODEL" "$T/gemma3.gguf" --arch gemma3 --vocab "$T/v-gemma3.gguf" --dim 64 --layers 2 \
    --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null
S=$TOP/tests/grammar/schemas
B=$TOP/tests/grammar/gbnf
mkdir -p "$T/dump"

# judge NAME MIN_COMPLETE: check.py over $T/NAME.jsonl
judge() {
    if GRAMMAR_DUMP="$T/dump" python3 "$TOP/tests/grammar/check.py" "$T/dump" "$2" <"$T/$1.jsonl" >"$T/$1.check" 2>&1; then
        ok "$1: $(tail -1 "$T/$1.check")"
    else
        not_ok "$1: $(grep -c 'NOT OK' "$T/$1.check") failures"
        sed 's/^/  /' "$T/$1.check" | head -20
    fi
}
# gen NAME MODEL N MODE ARGS...
gen() {
    name=$1 m=$2 n=$3 mode=$4
    shift 4
    GRAMMAR_DUMP="$T/dump" "$G" "$m" "$n" "$mode" "$@" >"$T/$name.jsonl" 2>"$T/err" ||
        { not_ok "$name: grammar-gen failed: $(cat "$T/err")"; return; }
}

cd "$TOP"
schemas=$(ls tests/grammar/schemas/*.json)
first=$(echo "$schemas" | head -100) second=$(echo "$schemas" | tail -100)
grammars=$(ls tests/grammar/gbnf/*.gbnf)
few_s=$(echo "$schemas" | sed -n '1,20p') few_s2=$(echo "$schemas" | sed -n '101,120p')
few_g="tests/grammar/gbnf/ex-json.gbnf tests/grammar/gbnf/ex-arithmetic.gbnf tests/grammar/gbnf/ex-list.gbnf $(echo "$grammars" | sed -n '4,10p')"

# Qwen2: the 200 schemas (100 greedy, 100 seeded), the 50 grammars both ways, json both ways
gen qwen2-schemas-greedy "$T/qwen2.gguf" 160 greedy $first
gen qwen2-schemas-seeded "$T/qwen2.gguf" 160 7 $second
cat "$T/qwen2-schemas-greedy.jsonl" "$T/qwen2-schemas-seeded.jsonl" >"$T/qwen2-schemas.jsonl"
[ "$(wc -l <"$T/qwen2-schemas.jsonl")" = 200 ] && ok "qwen2: 200 schemas answered" || not_ok "qwen2: $(wc -l <"$T/qwen2-schemas.jsonl") schema answers"
judge qwen2-schemas 90
gen qwen2-gbnf-greedy "$T/qwen2.gguf" 48 greedy $grammars
gen qwen2-gbnf-seeded "$T/qwen2.gguf" 48 11 $grammars
judge qwen2-gbnf-greedy 50
judge qwen2-gbnf-seeded 50
gen qwen2-json "$T/qwen2.gguf" 48 greedy json
gen qwen2-json-seeded "$T/qwen2.gguf" 48 3 json json json json
cat "$T/qwen2-json-seeded.jsonl" >>"$T/qwen2-json.jsonl"
judge qwen2-json 0

# Llama 3 and Gemma 3: 40 schemas, 10 grammars, json; greedy and seeded
for v in llama3 gemma3; do
    gen $v-schemas-greedy "$T/$v.gguf" 160 greedy $few_s
    gen $v-schemas-seeded "$T/$v.gguf" 160 5 $few_s2
    cat "$T/$v-schemas-greedy.jsonl" "$T/$v-schemas-seeded.jsonl" >"$T/$v-schemas.jsonl"
    judge $v-schemas 80
    gen $v-gbnf-greedy "$T/$v.gguf" 48 greedy $few_g
    gen $v-gbnf-seeded "$T/$v.gguf" 48 9 $few_g
    cat "$T/$v-gbnf-greedy.jsonl" "$T/$v-gbnf-seeded.jsonl" >"$T/$v-gbnf.jsonl"
    judge $v-gbnf 40
    gen $v-json "$T/$v.gguf" 48 greedy json
    gen $v-json-seeded "$T/$v.gguf" 48 13 json json json
    cat "$T/$v-json-seeded.jsonl" >>"$T/$v-json.jsonl"
    judge $v-json 0
done

# the judge can fail: an answer that breaks the schema, one that is not a
# sentence, one cut short that is no prefix
printf '%s\n' '{"file": "tests/grammar/schemas/s007.json", "text": "{\"from\":{\"x\":30,\"y\":3},\"to\":{\"x\":3,\"y\":3}}", "complete": true, "stop": "stop"}' \
    '{"file": "tests/grammar/gbnf/ex-list.gbnf", "text": "- a\n-b\n", "complete": true, "stop": "stop"}' \
    '{"file": "tests/grammar/gbnf/ex-list.gbnf", "text": "- a\nb", "complete": false, "stop": "length"}' >"$T/bad.jsonl"
python3 tests/grammar/check.py "$T/dump" 0 <"$T/bad.jsonl" >"$T/bad.check" 2>&1
[ "$(grep -c 'NOT OK' "$T/bad.check")" = 3 ] && ok "the judge refuses three wrong answers" ||
    { not_ok "the judge let a wrong answer through"; cat "$T/bad.check"; }
finish
