#!/bin/sh
# t0303: the model store without a network: models list/rm/default, -m
# resolution of store names, KVCHAT_MODEL over the config file, the config
# file kept intact when written, and the first run (no model: guidance,
# exit 2; a model: the chat placeholder).
. "$TOP/tests/cli/lib.sh"
unset KVCHAT_MODEL
M=$KVCHAT_HOME/models
CONF=$XDG_CONFIG_HOME/kvchat/config

# ---- empty store: first run ----
run "$KVCHAT" models list
expect_rc 0; expect_out_empty; expect_err "no models in .*try 'kvchat models pull qwen2.5:0.5b'"
run "$KVCHAT" </dev/null
expect_rc 2; expect_out_empty; expect_err "no model configured"; expect_err "    kvchat models pull qwen2.5:0.5b"
run "$KVCHAT" models default
expect_rc 2; expect_err "no default model"

# ---- two models copied in by hand ----
mkdir -p "$M"
"$MKMODEL" "$M/tiny.gguf" --dim 64 --heads 4 --kv-heads 2 --layers 1 --ff 128 >/dev/null || exit 1
"$MKMODEL" "$M/other.gguf" --arch qwen2 --dim 64 --heads 4 --kv-heads 2 --layers 1 --ff 128 --type Q8_0 >/dev/null || exit 1
echo "not a gguf" >"$M/broken.gguf"
run "$KVCHAT" models list
expect_rc 0
expect_out '^  other .*Q8_0 *qwen2'
expect_out '^  tiny .*F32 *llama'
expect_out '^  broken .*unreadable'
run "$KVCHAT" models list --json
expect_rc 0
[ "$(jq length "$T/out")" = 3 ] && ok "one JSON array of 3 models" || not_ok "wanted a JSON array of 3"
[ "$(jq -r '[.[].name] | join(" ")' "$T/out")" = "broken other tiny" ] && ok "sorted by name" || not_ok "names: $(cat "$T/out")"
expect_out '"name": "tiny", "remote": false, "size": [0-9]*, "quant": "F32", "arch": "llama", "n_params": [0-9]*, "path": ".*/tiny.gguf", "pulled": null, "source": null, "sha256": null, "url": null, "remote_model": null, "api_key_env": null, "default": false, "error": null}'
# `kvchat models` alone and `models ls` list too
cp "$T/out" "$T/list.json"
run "$KVCHAT" models --json
cmp -s "$T/out" "$T/list.json" && ok "models --json = models list --json" || not_ok "models --json differs"
run "$KVCHAT" models list
cp "$T/out" "$T/list.txt"
run "$KVCHAT" models
expect_rc 0; cmp -s "$T/out" "$T/list.txt" && ok "models = models list" || not_ok "models alone differs"
run "$KVCHAT" models ls
expect_rc 0; cmp -s "$T/out" "$T/list.txt" && ok "models ls = models list" || not_ok "models ls differs"
# aliases as JSON: an array with every alias the table prints
run "$KVCHAT" models aliases --json
expect_rc 0
n_alias=$("$KVCHAT" models aliases | wc -l)
[ "$(jq length "$T/out")" = "$n_alias" ] && ok "aliases --json: $n_alias" || not_ok "aliases --json: $(cat "$T/out")"
[ "$(jq -r '.[] | select(.name == "qwen2.5:0.5b") | .ref' "$T/out")" = "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf" ] &&
    ok "aliases --json: the ref" || not_ok "aliases --json: no ref"

# models on the store with no default: say how to pick one
run "$KVCHAT" </dev/null
expect_rc 2; expect_err "no default model: choose one with 'kvchat models default NAME'"

# a store name stands for its file (models path shows what -m would use)
run "$KVCHAT" models path tiny
expect_rc 0; expect_out "^$M/tiny.gguf\$"
run "$KVCHAT" models path "$M/other.gguf"
expect_rc 0; expect_out "^$M/other.gguf\$"
run "$KVCHAT" models info tiny
expect_rc 0; expect_out "architecture:   llama"
run "$KVCHAT" models path nosuch
expect_rc 2; expect_err "cannot find model 'nosuch'"
run "$KVCHAT" models path
expect_rc 2; expect_err "no default model"

# ---- default ----
mkdir -p "$(dirname "$CONF")"
printf '# my settings\nthreads = 4\n' >"$CONF"
run "$KVCHAT" models default tiny
expect_rc 0; expect_err "default model is now 'tiny'"
grep -q '^model = tiny$' "$CONF" && ok "config has model = tiny" || not_ok "config lacks model = tiny"
grep -q '^# my settings$' "$CONF" && grep -q '^threads = 4$' "$CONF" && ok "other config lines kept" || not_ok "config lines lost"
run "$KVCHAT" models default
expect_rc 0; expect_out '^tiny$'
run "$KVCHAT" models list
expect_out '^\* tiny '
run "$KVCHAT" models path
expect_rc 0; expect_out "^$M/tiny.gguf\$"
KVCHAT_MODEL=other run "$KVCHAT" models path
expect_rc 0; expect_out "^$M/other.gguf\$"
KVCHAT_MODEL=other run "$KVCHAT" models path tiny
expect_rc 0; expect_out "^$M/tiny.gguf\$"
run "$KVCHAT" models default nosuch
expect_rc 2; expect_err "no model 'nosuch' in the store"
run "$KVCHAT" models default qwen2.5:0.5b
expect_rc 2; expect_err "pull it first: kvchat models pull qwen2.5:0.5b"
run "$KVCHAT" models default other
expect_rc 0
[ "$(grep -c '^model = ' "$CONF")" = 1 ] && ok "one model line" || not_ok "model line duplicated"
run "$KVCHAT" models default "$M/tiny.gguf"
expect_rc 0; expect_err "default model is now '/"
run "$KVCHAT" models default --unset
expect_rc 0
grep -q '^model' "$CONF" && not_ok "model still set" || ok "model unset"
printf 'model = ghost\n' >>"$CONF"
run "$KVCHAT" models path
expect_rc 2; expect_err "cannot find the default model 'ghost' (from the config file)"

# ---- rm ----
run "$KVCHAT" models default tiny
echo partial >"$M/tiny.part"
echo "url = x" >"$M/tiny.part.meta"
echo "source = x" >"$M/tiny.meta"
run "$KVCHAT" models rm tiny
expect_rc 0; expect_err "removed 'tiny'"; expect_err "'tiny' was the default model"
ls "$M" | grep -q '^tiny' && not_ok "tiny files left" || ok "tiny and its sidecars gone"
grep -q '^model' "$CONF" && not_ok "default still set" || ok "default unset"
run "$KVCHAT" models rm tiny
expect_rc 2; expect_err "no model 'tiny' in the store"
run "$KVCHAT" models rm ../etc
expect_rc 1; expect_err "not a valid model name"
run "$KVCHAT" models rm
expect_rc 1; expect_err "expected a NAME"
run "$KVCHAT" models rm --force other broken
expect_rc 0
[ -z "$(ls "$M")" ] && ok "store empty" || not_ok "store not empty: $(ls "$M")"

# a model a session uses is kept unless --force
"$MKMODEL" "$M/chatty.gguf" --arch qwen2 --vocab "$TOP/tests/data/vocab/ggml-vocab-qwen2.gguf" --dim 64 \
    --layers 2 --heads 4 --kv-heads 2 --ff 128 --tied >/dev/null || exit 1
run "$KVCHAT" run -s s1 -m chatty -t 1 --temp 0 -n 2 hello </dev/null
expect_rc 0
run "$KVCHAT" models rm chatty
expect_rc 2; expect_err "model 'chatty' is used by session 's1' (use --force"
[ -f "$M/chatty.gguf" ] && ok "kept while in use" || not_ok "removed while in use"
run "$KVCHAT" sessions fork s1 s2
run "$KVCHAT" models rm chatty
expect_rc 2; expect_err "used by 2 sessions"
run "$KVCHAT" models rm --force chatty
expect_rc 0
[ ! -e "$M/chatty.gguf" ] && ok "--force removes it" || not_ok "--force did not remove it"

run "$KVCHAT" models aliases
expect_rc 0; expect_out '^qwen2.5:0.5b .*hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/'
expect_out "^gemma3:1b "; expect_out "^gemma3:4b "; expect_out "^phi3.5:mini "; expect_out "^phi4-mini "
expect_out "^qwen3.5:0.8b .*hf:bartowski/Qwen_Qwen3.5-0.8B-GGUF/Qwen_Qwen3.5-0.8B-Q4_K_M.gguf$"; expect_out "^qwen3.5:9b "
finish
