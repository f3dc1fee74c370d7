#!/bin/sh
# regen-templates.sh - regenerate the golden chat-template renderings of
# tests/cli/t0201-template.sh with llama.cpp via llref:
#   tests/data/templates/NAME.txt        `llref template NAME` for each template
#                                        name kvchat renders
#   tests/data/templates/jinja/X.jinja   llama.cpp's copies of real models'
#                                        templates that kvchat recognises
#   tests/data/templates/jinja/X.txt     `llref template "$(cat X.jinja)"`
#   gemma4.txt, jinja/google-gemma-4-*.txt  Gemma 4, which llama.cpp renders
#                                        only through its Jinja engine (not
#                                        llama_chat_apply_template, so not
#                                        llref): the real templates rendered
#                                        by python3-jinja2 (tests/data/
#                                        render-jinja.py), without the empty
#                                        thought channel the generation
#                                        prompt ends with (kvchat feeds it as
#                                        the answer's first text, --think off)
# usage: tests/data/regen-templates.sh   (from the top directory, after make)
set -eu
home=${LLREF_HOME:-$HOME/.cache/llref}
llref=$home/llref
d=tests/data/templates
mkdir -p "$d/jinja"
rm -f "$d"/*.txt "$d"/jinja/*
for name in $(./kvchat template --list | awk '{print $1}'); do
    [ "$name" = gemma4 ] && continue
    "$llref" template "$name" > "$d/$name.txt"
done
# Gemma 3's template is not in llama.cpp's collection: take it from the
# Gemma 3 vocabulary (tests/data/mkvocab-gemma3.py copied it from the
# model's tokenizer_config.json)
extra=$(mktemp -d)
trap 'rm -rf "$extra"' EXIT
xz -dc tests/data/tokenizer/ggml-vocab-gemma-3.gguf.xz > "$extra/v.gguf"
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$home/src/gguf-py'); import gguf
r = gguf.GGUFReader('$extra/v.gguf')
open('$extra/google-gemma-3-it.jinja', 'w').write(r.fields['tokenizer.chat_template'].contents())"
rm "$extra/v.gguf"
for f in "$home"/src/models/templates/*.jinja "$extra"/*.jinja; do
    b=$(basename "$f" .jinja)
    # keep the templates kvchat recognises (no fallback warning) and
    # llama.cpp renders with its built-in formats
    ./kvchat template --template-file "$f" 2>&1 >/dev/null | grep -q warning && continue
    "$llref" template "$(cat "$f")" > "$d/jinja/$b.txt" 2>/dev/null || { rm -f "$d/jinja/$b.txt"; continue; }
    cp "$f" "$d/jinja/$b.jinja"
done
for f in "$home"/src/models/templates/google-gemma-4-*.jinja; do
    b=$(basename "$f" .jinja)
    cp "$f" "$d/jinja/$b.jinja"
    /usr/bin/python3 tests/data/render-jinja.py "$f" --strip-suffix '<|channel>thought
<channel|>' > "$d/jinja/$b.txt"
done
cp "$d/jinja/google-gemma-4-31B-it.txt" "$d/gemma4.txt"
ls "$d"/*.txt "$d"/jinja/*.txt | wc -l
