#!/usr/bin/env python3
"""check.py - t0900's independent judge of answers made under grammars.

Reads tests/grammar-gen's JSON lines on stdin. An answer that closed
(complete) must be valid: for a .json schema, parsed by Python's json and
validated by python3-jsonschema (Draft 2020-12, with its FormatChecker:
date, time, date-time, uuid); for "json", parsed by json; for a .gbnf
grammar, a sentence of it by gbnf.py's Earley recogniser. An answer -n cut
short must be a prefix of the language (gbnf.py over the grammar the run
used, dumped to DUMP_DIR). Prints one line per failure, then a summary;
exit 1 on any failure, or when fewer than MIN_COMPLETE percent closed.

usage: check.py DUMP_DIR MIN_COMPLETE < results.jsonl
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gbnf  # noqa: E402
import jsonschema  # noqa: E402  (python3-jsonschema: a missing one fails the test, never skips it)

dump, min_complete = sys.argv[1], float(sys.argv[2])
n = bad = complete = 0
grammars = {}


def grammar_of(path):
    if path not in grammars:
        grammars[path] = gbnf.Grammar(open(path, encoding="utf-8").read())
    return grammars[path]


for line in sys.stdin:
    r = json.loads(line)
    n += 1
    f = r["file"]
    if "error" in r:
        print("NOT OK: %s: %s" % (f, r["error"]))
        bad += 1
        continue
    text = r["text"]
    why = None
    if r["complete"]:
        complete += 1
        if f.endswith(".json") or f == "json":
            try:
                value = json.loads(text)
            except ValueError as e:
                why = "not JSON: %s" % e
            else:
                if f.endswith(".json"):
                    schema = json.load(open(f, encoding="utf-8"))
                    try:
                        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(value)
                    except jsonschema.ValidationError as e:
                        why = "invalid: %s" % e.message
            if text != text.strip() or (f != "json" and " " in text.replace('" "', "") and False):
                why = why or "whitespace around the value"
        else:
            if not grammar_of(f).member(text):
                why = "not a sentence of the grammar"
    else:
        g = grammar_of(os.path.join(dump, os.path.basename(f) + ".gbnf")) if not f.endswith(".gbnf") else grammar_of(f)
        if r["stop"] != "length":
            why = "stopped (%s) before the value closed" % r["stop"]
        elif not g.prefix(text):
            why = "cut short, but not a prefix of the language"
    if why:
        print("NOT OK: %s: %s: %r" % (f, why, text))
        bad += 1
pct = 100.0 * complete / n if n else 0
print("%d answers, %d complete (%.0f%%), %d failed" % (n, complete, pct, bad))
if not n or pct < min_complete:
    print("NOT OK: fewer than %g%% of the answers closed" % min_complete)
    bad += 1
sys.exit(1 if bad else 0)
