#!/usr/bin/env python3
"""gen-schemas.py - the 200 JSON Schemas of t0900, over the subset kvchat
translates (docs/structured-output.md), written to tests/grammar/schemas/.
Deterministic (seeded). Every language is finite and small (strings and
arrays bounded), so that a random-weight model's answer can close within
the test's -n; oneOf alternatives are disjoint (kvchat generates oneOf as
anyOf). Run from the top of the tree: python3 tests/grammar/gen-schemas.py
"""
import json
import os
import random

rnd = random.Random(27)
WORDS = ["id", "name", "age", "tags", "ok", "when", "score", "kind", "items", "note", "x", "y", "città", "名前"]
PATTERNS = ["^[a-z]{2,4}$", "^[A-Z][a-z]{0,3}-[0-9]{1,3}$", "^(foo|bar|baz)$", "^\\d{3}-\\d{2}$",
            "^[^a-z]{1,3}$", "^x?y{1,2}z$", "^(ab|c[de]){1,2}$", "^[0-9a-f]{4}$", "^é[ñü]{1,2}$",
            "^\\w{2,3}\\.\\w{1,2}$"]


def string_schema():
    r = rnd.random()
    if r < 0.3:
        lo = rnd.randint(0, 3)
        return {"type": "string", "minLength": lo, "maxLength": lo + rnd.randint(0, 5)}
    if r < 0.45:
        return {"type": "string", "pattern": rnd.choice(PATTERNS)}
    if r < 0.65:
        return {"type": "string", "format": rnd.choice(["date", "time", "date-time", "uuid"])}
    if r < 0.8:
        return {"enum": rnd.sample(["red", "green", "blue", "a \"quoted\" one", "back\\slash", "ünï", "", "x y"], rnd.randint(1, 4))}
    return {"type": "string", "maxLength": rnd.randint(1, 6)}


def number_schema():
    t = rnd.choice(["integer", "number"])
    s = {"type": t}
    lo = rnd.randint(-50, 50)
    hi = lo + rnd.randint(0, 200)
    r = rnd.random()
    if r < 0.25:
        s["minimum"], s["maximum"] = lo, hi
    elif r < 0.45:
        s["exclusiveMinimum"], s["maximum"] = lo, hi + 1
    elif r < 0.6:
        s["minimum"], s["exclusiveMaximum"] = lo, hi + 1
    elif r < 0.7:
        s["minimum"] = lo
    elif r < 0.8:
        s["maximum"] = hi
    elif r < 0.9 and t == "integer":
        s["minimum"], s["maximum"] = -1234567, 98765
    return s


def leaf():
    r = rnd.random()
    if r < 0.35:
        return string_schema()
    if r < 0.65:
        return number_schema()
    if r < 0.75:
        return {"type": "boolean"}
    if r < 0.8:
        return {"type": "null"}
    if r < 0.88:
        return {"const": rnd.choice([1, "fixed", True, None, [1, 2], {"a": "b"}])}
    if r < 0.94:
        return {"type": ["string", "null"], "maxLength": 4}
    return {"type": ["integer", "boolean"], "minimum": 0, "maximum": 9}


def schema(depth):
    r = rnd.random()
    if depth >= 2 or r < 0.35:
        return leaf()
    if r < 0.65:
        n = rnd.randint(1, 4)
        names = rnd.sample(WORDS, n)
        props = {k: schema(depth + 1) for k in names}
        req = [k for k in names if rnd.random() < 0.6]
        s = {"type": "object", "properties": props, "additionalProperties": False}
        if req:
            s["required"] = req
        if rnd.random() < 0.1 and all(k.isascii() for k in names):
            s["additionalProperties"] = {"type": "integer", "minimum": 0, "maximum": 9}
        return s
    if r < 0.8:
        lo = rnd.randint(0, 2)
        s = {"type": "array", "items": schema(depth + 1), "minItems": lo, "maxItems": lo + rnd.randint(0, 2)}
        return s
    if r < 0.88:
        s = {"type": "array", "prefixItems": [schema(depth + 1) for _ in range(rnd.randint(1, 3))]}
        if rnd.random() < 0.5:
            s["items"] = False
        else:
            s["items"] = {"type": "boolean"}
            s["maxItems"] = len(s["prefixItems"]) + 1
        return s
    kw = rnd.choice(["anyOf", "oneOf"])
    return {kw: [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 0, "maximum": 99},
                 {"type": "null"}][: rnd.randint(2, 3)]}


def with_defs():
    return {"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                                               "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                             "required": ["x", "y"], "additionalProperties": False}},
            "type": "object", "properties": {"from": {"$ref": "#/$defs/pt"}, "to": {"$ref": "#/$defs/pt"}},
            "required": ["from", "to"], "additionalProperties": False, "title": "a segment"}


def main():
    d = "tests/grammar/schemas"
    os.makedirs(d, exist_ok=True)
    for i in range(200):
        s = with_defs() if i % 20 == 7 else schema(0)
        with open("%s/s%03d.json" % (d, i), "w", encoding="utf-8") as f:
            json.dump(s, f, ensure_ascii=False)
            f.write("\n")


main()
