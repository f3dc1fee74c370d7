#!/usr/bin/env python3
"""gbnf.py - an independent recogniser of GBNF grammars, for the tests.

Written from llama.cpp's grammars/README.md, sharing no code with
core/text/grammar.c: the grammar is read into a context-free grammar over
code points (repetitions expanded into fresh rules by a different scheme:
X{m,n} as m copies then nested optionals, X* as a right-recursive rule),
and a text is checked with an Earley recogniser (nullable rules handled as
Aycock and Horspool do). `member` says whether a text is a sentence of the
language, `prefix` whether it can be continued into one.

usage: gbnf.py GRAMMAR.gbnf < texts.jsonl   (lines {"text": ..., "complete": bool})
prints "ok" or the first text that fails, exit 1.
"""
import json
import sys


class Grammar:
    def __init__(self, text):
        self.s = text
        self.i = 0
        self.rules = {}  # name -> list of alternatives (tuples of symbols)
        self.n_gen = 0
        self.parse()

    # ---- reading ----
    def err(self, msg):
        raise ValueError("%s at offset %d" % (msg, self.i))

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def ws(self, newlines):
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                break

    def name(self):
        j = self.i
        while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] in "-_") and self.s[self.i].isascii():
            self.i += 1
        return self.s[j:self.i]

    def char(self):
        c = self.s[self.i]
        self.i += 1
        if c != "\\":
            return ord(c)
        e = self.s[self.i]
        self.i += 1
        simple = {"n": 10, "r": 13, "t": 9}
        if e in simple:
            return simple[e]
        if e in "xuU":
            k = {"x": 2, "u": 4, "U": 8}[e]
            v = int(self.s[self.i:self.i + k], 16)
            self.i += k
            return v
        return ord(e)

    def fresh(self, alts):
        self.n_gen += 1
        n = "#%d" % self.n_gen
        self.rules[n] = alts
        return ("N", n)

    def parse(self):
        self.ws(True)
        while self.i < len(self.s):
            n = self.name()
            if not n:
                self.err("rule name")
            self.ws(False)
            if not self.s.startswith("::=", self.i):
                self.err("::=")
            self.i += 3
            self.ws(True)
            self.rules[n] = self.alts(False)
            self.ws(True)
        if "root" not in self.rules:
            raise ValueError("no root")

    def alts(self, nested):
        out = [self.seq(nested)]
        while True:
            self.ws(nested)
            if self.peek() == "|":
                self.i += 1
                self.ws(True)
                out.append(self.seq(nested))
            else:
                return out

    def seq(self, nested):
        items = []
        while True:
            self.ws(nested)
            c = self.peek()
            if c == '"':
                self.i += 1
                sym = []
                while self.peek() != '"':
                    v = self.char()
                    sym.append(("T", ((v, v),), False))
                self.i += 1
                atom = sym
            elif c == "[":
                self.i += 1
                neg = self.peek() == "^"
                if neg:
                    self.i += 1
                rs = []
                while self.peek() != "]":
                    lo = self.char()
                    hi = lo
                    if self.peek() == "-" and self.s[self.i + 1] != "]":
                        self.i += 1
                        hi = self.char()
                    rs.append((lo, hi))
                self.i += 1
                atom = [("T", tuple(rs), neg)]
            elif c == ".":
                self.i += 1
                atom = [("T", (), True)]
            elif c == "(":
                self.i += 1
                a = self.alts(True)
                self.ws(True)
                if self.peek() != ")":
                    self.err(")")
                self.i += 1
                atom = [self.fresh(a)]
            elif c and (c.isalnum() or c in "-_") and c.isascii():
                j = self.i
                n = self.name()
                k = self.i
                self.ws(False)
                if self.s.startswith("::=", self.i):
                    self.i = j
                    return tuple(items)
                self.i = k
                atom = [("N", n)]
            else:
                return tuple(items)
            while True:
                self.ws(nested)
                q = self.peek()
                if q in ("*", "+", "?"):
                    self.i += 1
                    lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[q]
                elif q == "{":
                    j = self.s.index("}", self.i)
                    body = self.s[self.i + 1:j].replace(" ", "")
                    self.i = j + 1
                    if "," in body:
                        a, b = body.split(",")
                        lo, hi = int(a), (int(b) if b else None)
                    else:
                        lo = hi = int(body)
                else:
                    break
                atom = self.repeat(atom, lo, hi)
            items.extend(atom)

    def repeat(self, atom, lo, hi):
        x = self.fresh([tuple(atom)])  # the item as one symbol
        out = [x] * lo
        if hi is None:
            star = "#%d" % (self.n_gen + 1)
            self.n_gen += 1
            self.rules[star] = [(x, ("N", star)), ()]
            out.append(("N", star))
        else:
            tail = None
            for _ in range(hi - lo):
                body = (x,) + ((tail,) if tail else ())
                tail = self.fresh([body, ()])
            if tail:
                out.append(tail)
        return out

    # ---- recognising ----
    def nullable(self):
        nul = set()
        changed = True
        while changed:
            changed = False
            for n, alts in self.rules.items():
                if n in nul:
                    continue
                for a in alts:
                    if all(s[0] == "N" and s[1] in nul for s in a):
                        nul.add(n)
                        changed = True
                        break
        return nul

    def chart(self, text):
        nul = self.nullable()
        start = [("$", (("N", "root"),), 0, 0)]
        sets = []

        def close(items, pos):
            agenda = list(items)
            seen = set(items)
            while agenda:
                it = agenda.pop()
                lhs, rhs, dot, origin = it
                if dot < len(rhs):
                    s = rhs[dot]
                    if s[0] == "N":
                        for a in self.rules[s[1]]:
                            new = (s[1], a, 0, pos)
                            if new not in seen:
                                seen.add(new)
                                agenda.append(new)
                        if s[1] in nul:
                            new = (lhs, rhs, dot + 1, origin)
                            if new not in seen:
                                seen.add(new)
                                agenda.append(new)
                else:
                    src = sets[origin] if origin < pos else None
                    pool = src if src is not None else list(seen)
                    for p in list(pool):
                        pl, pr, pd, po = p
                        if pd < len(pr) and pr[pd] == ("N", lhs):
                            new = (pl, pr, pd + 1, po)
                            if new not in seen:
                                seen.add(new)
                                agenda.append(new)
            return seen

        sets.append(close(start, 0))
        for pos, ch in enumerate(text, 1):
            c = ord(ch)
            nxt = []
            for lhs, rhs, dot, origin in sets[-1]:
                if dot < len(rhs) and rhs[dot][0] == "T":
                    _, rs, neg = rhs[dot]
                    if any(lo <= c <= hi for lo, hi in rs) != neg:
                        nxt.append((lhs, rhs, dot + 1, origin))
            if not nxt:
                return sets, False
            sets.append(close(nxt, pos))
        return sets, True

    def prefix(self, text):
        return self.chart(text)[1]

    def member(self, text):
        sets, alive = self.chart(text)
        return alive and any(l == "$" and d == 1 for l, r, d, o in sets[-1])


def main():
    g = Grammar(open(sys.argv[1], encoding="utf-8").read())
    bad = 0
    for line in sys.stdin:
        r = json.loads(line)
        t = r["text"]
        if r["complete"]:
            good = g.member(t)
        else:
            good = g.prefix(t)
        if not good:
            print("NOT OK: %s: %r (%s)" % (sys.argv[1], t, "not a sentence" if r["complete"] else "not a prefix"))
            bad += 1
    print("ok" if not bad else "failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
