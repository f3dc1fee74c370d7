#!/bin/sh
# t0201: `kvchat template` renders byte for byte what `llref template`
# (llama.cpp's llama_chat_apply_template) renders, for every template name
# kvchat knows and for real models' Jinja templates that map to them
# (golden files from tests/data/regen-templates.sh); falls back to ChatML
# with one warning line; reads the template of a vocabulary-only GGUF.
. "$TOP/tests/cli/lib.sh"
D=$TOP/tests/data/templates

same() { # name, file: $T/out must equal file byte for byte
    if cmp -s "$T/out" "$2"; then ok "$1 matches llama.cpp"; else
        not_ok "$1 differs from llama.cpp"; diff "$2" "$T/out" | head -10; fi
}

for f in "$D"/*.txt; do
    name=$(basename "$f" .txt)
    run "$KVCHAT" template --template "$name"
    expect_rc 0
    same "template $name" "$f"
    [ -s "$T/err" ] && not_ok "template $name: unexpected stderr"
done

for f in "$D"/jinja/*.jinja; do
    b=$(basename "$f" .jinja)
    run "$KVCHAT" template --template-file "$f"
    expect_rc 0
    same "$b.jinja" "$D/jinja/$b.txt"
    [ -s "$T/err" ] && not_ok "$b.jinja: unexpected warning: $(cat "$T/err")"
done

# from vocabulary-only GGUF files: qwen2 carries ChatML, phi-3 Phi-3,
# gemma-3 Gemma, gemma-4 Gemma 4, gpt-2 has no template
for v in qwen2:chatml phi-3:phi3 gemma-3:gemma gemma-4:gemma4 gpt-2:chatml; do
    xz -dc "$TOP/tests/data/tokenizer/ggml-vocab-${v%%:*}.gguf.xz" > "$T/v.gguf"
    run "$KVCHAT" template -m "$T/v.gguf"
    expect_rc 0
    same "template -m ${v%%:*}" "$D/${v#*:}.txt"
done
expect_err "warning: the model has no chat template; using chatml"
[ "$(wc -l < "$T/err")" -eq 1 ] && ok "one warning line" || not_ok "warning is not one line"

# --template overrides the model's
xz -dc "$TOP/tests/data/tokenizer/ggml-vocab-qwen2.gguf.xz" > "$T/v.gguf"
run "$KVCHAT" template -m "$T/v.gguf" --template llama3
expect_rc 0
same "--template overrides -m" "$D/llama3.txt"

# an unknown name is refused, as run refuses it (issue 29: it exited 0)
run "$KVCHAT" template --template no-such-template
expect_rc 1; expect_err "unknown chat template 'no-such-template'"
expect_out_empty

printf '{{ bos_token }}{%% for m in messages %%}<<{{ m.content }}>>{%% endfor %%}' > "$T/odd.jinja"
run "$KVCHAT" template --template-file "$T/odd.jinja"
expect_rc 0; expect_err "is not one kvchat knows; using chatml"

run "$KVCHAT" template --list
expect_rc 0; expect_out '^chatml  *<|im_end|>$'; expect_out '^llama3  *<|eot_id|>$'

run "$KVCHAT" template
expect_rc 1; expect_out_empty; expect_err 'give -m MODEL'
run "$KVCHAT" template -m "$T/missing.gguf"
expect_rc 2; expect_err "cannot open model '$T/missing.gguf'"
run "$KVCHAT" template --template-file "$T/missing.jinja"
expect_rc 2; expect_err "cannot read template file '$T/missing.jinja'"

finish
