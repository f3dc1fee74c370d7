#!/usr/bin/python3
"""render-jinja.py - a chat template rendered by Jinja2 (python3-jinja2) for
the sample conversation of `kvchat template` and `llref template` (a system
prompt, user "Hello", assistant "Hi there", user "Who are you", then the
generation prompt), bos_token empty (the tokenizer adds BOS), for templates
llama.cpp renders only through its own Jinja engine (Gemma 4).
usage: render-jinja.py TEMPLATE.jinja [--strip-suffix TEXT]
--strip-suffix: the rendering must end with TEXT, which is left off.
"""
import sys

import jinja2

if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != '--strip-suffix'):
    sys.exit('usage: render-jinja.py TEMPLATE.jinja [--strip-suffix TEXT]')
src = open(sys.argv[1]).read()
msgs = [{'role': 'system', 'content': 'You are a helpful assistant'}, {'role': 'user', 'content': 'Hello'},
        {'role': 'assistant', 'content': 'Hi there'}, {'role': 'user', 'content': 'Who are you'}]
env = jinja2.Environment(extensions=['jinja2.ext.loopcontrols'])
out = env.from_string(src).render(messages=msgs, bos_token='', add_generation_prompt=True)
if len(sys.argv) == 4:
    if not out.endswith(sys.argv[3]):
        sys.exit('render-jinja.py: the rendering does not end with the suffix')
    out = out[:-len(sys.argv[3])]
sys.stdout.write(out)
