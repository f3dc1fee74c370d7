#!/usr/bin/env python3
"""gen-grammars.py - the 50 GBNF grammars of t0900, written to
tests/grammar/gbnf/: llama.cpp's example grammars json, arithmetic and list
rewritten here from what they define (not copied), then 47 random ones
(seeded) over the whole syntax: literals with escapes and multi-byte UTF-8,
classes with ranges and negation, `.`, groups, alternatives, `*` `+` `?`
`{m}` `{m,}` `{m,n}`, comments, rules over several lines. Most languages
are finite so that a random-weight model's answer can close within -n.
Run from the top of the tree: python3 tests/grammar/gen-grammars.py
"""
import os
import random

EXAMPLES = {
    # a JSON value with whitespace, as llama.cpp's json.gbnf describes (an object at the top)
    "ex-json": r'''# any JSON object, spaces allowed between tokens
root   ::= object
value  ::= object | array | string | number | ( "true" | "false" | "null" ) ws
object ::= "{" ws (
             string ":" ws value
             ( "," ws string ":" ws value )*
           )? "}" ws
array  ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\"" ws
number ::= ( "-"? ( [0-9] | [1-9] [0-9]{0,15} ) ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9] [1-9]{0,15} )? ws
ws     ::= | " " | "\n" [ \t]{0,20}
''',
    # lines "expression = term" over identifiers, numbers, + - * / and parentheses
    "ex-arithmetic": r'''root  ::= ( expr "=" ws term "\n" )+
expr  ::= term ( [-+*/] term )*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
''',
    # a bulleted list: one to ten lines "- item"
    "ex-list": r'''root ::= item+
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
''',
}

rnd = random.Random(2027)
LITS = ["a", "b", "ok", "yes", "no", "é", "日本", "\\n", "\\t", "\\\"", "\\\\", "\\x41", "\\u00e9", "\\U0001F600",
        "=", " ", "-", "{", "}", "[", "]", "ß", "€"]
CLASSES = ["[a-z]", "[0-9]", "[A-Fa-f0-9]", "[^a-z]", "[^\\n\"\\\\]", "[α-ω]", "[ -~]", "[xyz]", "[\\u4e00-\\u9fff]",
           "[^\\x00-\\x7f]", "[-+]", "[\\]\\[]"]


def atom(depth, rules):
    r = rnd.random()
    if r < 0.3:
        return '"%s"' % rnd.choice(LITS)
    if r < 0.55:
        return rnd.choice(CLASSES)
    if r < 0.6:
        return "."
    if r < 0.8 and depth < 3:
        return "( %s )" % alts(depth + 1, rules)
    if rules:
        return rnd.choice(rules)
    return '"z"'


def item(depth, rules, finite):
    a = atom(depth, rules)
    r = rnd.random()
    if r < 0.55:
        return a
    if r < 0.7:
        return a + "?"
    if r < 0.85:
        m = rnd.randint(0, 2)
        return a + rnd.choice(["{%d}" % m, "{%d,%d}" % (m, m + rnd.randint(0, 3)), "{ %d , %d }" % (m, m + 1)])
    if finite:
        return a + "{1,3}"
    return a + rnd.choice(["*", "+", "{1,}"])


def seq(depth, rules, finite=True):
    return " ".join(item(depth, rules, finite) for _ in range(rnd.randint(1, 3)))


def alts(depth, rules, finite=True):
    return " | ".join(seq(depth, rules, finite) for _ in range(rnd.randint(1, 3)))


def grammar(i):
    finite = i % 5 != 0
    names = ["r%d" % k for k in range(rnd.randint(1, 4))]
    lines = ["# random grammar %d" % i]
    # later rules only refer to rules defined after them: no left recursion
    bodies = {}
    for k in reversed(range(len(names))):
        bodies[names[k]] = alts(0, names[k + 1:], finite)
    lines.append("root ::= " + " ".join(names[: rnd.randint(1, len(names))]))
    for n in names:
        b = bodies[n]
        if rnd.random() < 0.3 and " | " in b:  # over several lines
            b = b.replace(" | ", " |\n    ", 1)
        lines.append("%s ::= %s" % (n, b))
    return "\n".join(lines) + "\n"


def main():
    d = "tests/grammar/gbnf"
    os.makedirs(d, exist_ok=True)
    for n, t in EXAMPLES.items():
        with open("%s/%s.gbnf" % (d, n), "w", encoding="utf-8") as f:
            f.write(t)
    for i in range(47):
        with open("%s/g%02d.gbnf" % (d, i), "w", encoding="utf-8") as f:
            f.write(grammar(i))


main()
