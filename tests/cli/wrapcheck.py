#!/usr/bin/env python3
"""wrapcheck.py - check an answer as a terminal showed it against the text
the model gave, for the word-wrap tests (tests/cli/t0504-repl-ux.sh).

usage: wrapcheck.py SHOWN ANSWER COLS [--from N] [--until N] [--unwrapped]

SHOWN is the answer as it appeared (ptydrive's transcript, escape codes
removed); ANSWER the text itself (from `sessions export`), compared as a
terminal shows it (control characters as U+FFFD, as cli/term.c does). Widths are
measured here with Python's unicodedata (East Asian Width W/F: 2 columns;
combining marks and format characters: 0), not with the C library that
kvchat uses. Checks, each failure printed:
  - nothing but blanks and line breaks differs between SHOWN and ANSWER;
  - every line of SHOWN (those starting at character N or later with
    --from, before character N with --until) is at most COLS columns, and
    at least one break was added there (the test wraps something);
  - every added break was needed: the next line's first word (or wide
    character) would not have fitted after the blanks it replaced;
  - with --unwrapped instead: no break was added, and some line is wider
    than COLS (so wrapping would have had something to do).
"""
import sys
import unicodedata


def width(s, col=0):
    """the columns s takes from column col (a tab goes to the next multiple of 8)"""
    w = col
    for ch in s:
        cp = ord(ch)
        if ch == "\t":
            w = (w // 8 + 1) * 8
        elif cp < 0x20 or cp == 0x7f or 0x80 <= cp < 0xa0:
            continue
        if cp == 0xad:
            w += 1
        elif unicodedata.category(ch) in ("Mn", "Me", "Cf") or 0x1160 <= cp <= 0x11ff:
            continue
        elif unicodedata.east_asian_width(ch) in ("W", "F"):
            w += 2
        else:
            w += 1
    return w - col


def main():
    args = sys.argv[1:]
    start, until, unwrapped = 0, None, False
    if "--unwrapped" in args:
        args.remove("--unwrapped")
        unwrapped = True
    if "--from" in args:
        i = args.index("--from")
        start = int(args[i + 1])
        del args[i:i + 2]
    if "--until" in args:
        i = args.index("--until")
        until = int(args[i + 1])
        del args[i:i + 2]
    shown = open(args[0], encoding="utf-8", errors="replace").read()
    answer = open(args[1], encoding="utf-8", errors="replace", newline="").read()
    # as a terminal is shown it: kvchat's one sanitizer (cli/term.c) makes
    # controls but newline and tab, DEL, C1 and bidi overrides U+FFFD
    answer = "".join("\ufffd" if (ord(c) < 0x20 and c not in "\n\t") or ord(c) == 0x7f or 0x80 <= ord(c) < 0xa0
                     or 0x202a <= ord(c) <= 0x202e or 0x2066 <= ord(c) <= 0x2069 else c for c in answer)
    cols = int(args[2])
    shown = shown.rstrip("\n")
    bad = []

    def squeeze(t):
        return "".join(c for c in t if c not in " \t\n")

    if squeeze(shown) != squeeze(answer):
        a, b = squeeze(shown), squeeze(answer)
        k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        bad.append("the text differs from the answer at %r / %r" % (a[k:k + 30], b[k:k + 30]))

    # walk both: at each line break of SHOWN, what did ANSWER have there?
    added = []  # (index in shown of the break, blanks the answer had there)
    j = 0
    i = 0
    while i < len(shown):
        c = shown[i]
        if c == "\n":
            blanks = ""
            while j < len(answer) and answer[j] in " \t":
                blanks += answer[j]
                j += 1
            if j < len(answer) and answer[j] == "\n":
                j += 1
            else:
                added.append((i, blanks))
            i += 1
            # a hanging indent: blanks the wrapper added
            while i < len(shown) and shown[i] == " " and (j >= len(answer) or answer[j] not in " \t"):
                i += 1
            continue
        if c in " \t":
            if j < len(answer) and answer[j] == c:
                j += 1
            i += 1
            continue
        while j < len(answer) and answer[j] in " \t\n" and answer[j] != c:
            j += 1
        if j < len(answer) and answer[j] == c:
            j += 1
        i += 1

    lines = shown.split("\n")
    offsets = []
    o = 0
    for ln in lines:
        offsets.append(o)
        o += len(ln) + 1
    if until is None:
        until = len(shown) + 1

    def checked(o):
        return start <= o < until

    too_wide = [ln for ln, o in zip(lines, offsets) if checked(o) and width(ln) > cols]
    if unwrapped:
        if added:
            bad.append("%d line breaks were added, none wanted" % len(added))
        if not any(width(ln) > cols for ln in lines):
            bad.append("no line is wider than %d: the test shows nothing" % cols)
    else:
        for ln in too_wide:
            bad.append("a line of %d columns (of %d): %r" % (width(ln), cols, ln))
        if not [a for a in added if checked(a[0])]:
            bad.append("no break was added: the test shows nothing")
        for at, blanks in added:
            k = shown.count("\n", 0, at)
            if not checked(offsets[k]) or not checked(at):
                continue
            prev, nxt = lines[k], lines[k + 1].lstrip(" \t")
            unit = ""
            for ch in nxt:
                if ch in " \t":
                    break
                wide = unicodedata.east_asian_width(ch) in ("W", "F")
                if wide and unit:
                    break
                unit += ch
                if wide:
                    break
            if width(prev + blanks) + width(unit, width(prev + blanks)) <= cols:
                bad.append("a needless break after %r (%d columns) before %r" % (prev, width(prev), unit))
    for b in bad:
        print("wrapcheck: " + b)
    print("wrapcheck: %d lines, %d breaks added, widest %d columns" %
          (len(lines), len(added), max(width(ln) for ln in lines) if lines else 0))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
