#!/usr/bin/env python3
"""gen-tokstrings.py - the strings of the tokenizer differential test.

usage: tests/data/gen-tokstrings.py [N] > strings.hex

Writes N (default 3000) deterministic test strings, one per line, hex-encoded
(they contain newlines, NULs and invalid UTF-8): mixed scripts, emoji and
ZWJ sequences, combining marks, digit runs, white-space runs, code,
contractions, special-token texts, random code points and invalid UTF-8.
Code points assigned after Unicode 15.0 are avoided (core/text/unicode-data.c is
built from Debian's 15.0 tables; llama.cpp's are 15.1), and so are 4-byte
sequences that decode above U+10FFFF (lead 0xF4 with 0x90.., or 0xF5..0xF7: they
makes llama.cpp throw).
"""
import random
import sys

R = random.Random(20261129)

WORDS = ["Hello", "world", "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
         "don't", "I'm", "you're", "we've", "they'll", "she'd", "it's", "IT'S", "O'Neil",
         "naïve", "café", "Äpfel", "straße", "Größe", "façade", "coöperate", "résumé",
         "привет", "мир", "Български", "Ελληνικά", "γλώσσα", "שלום", "مرحبا", "العربية",
         "नमस्ते", "हिन्दी", "ภาษาไทย", "こんにちは", "カタカナ", "日本語", "中文", "汉字",
         "한국어", "안녕하세요", "ქართული", "Հայերեն", "தமிழ்", "ខ្មែរ", "ລາວ", "ꯃꯩꯇꯩ",
         "llama.cpp", "GGUF", "KV-cache", "e.g.", "U.S.A.", "3.14159", "1,000,000",
         "½", "²", "Ⅻ", "①", "٣٤٥", "१२३", "１２３", "ＡＢＣ", "ﬁ", "Å", "Ω", "µ"]
EMOJI = ["🦙", "🚀", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "❤️", "✅", "😶‍🌫️", "🤷‍♀️",
         "🧑🏿‍💻", "1️⃣", "🫠", "🪿"]
COMBINING = ["\u0301", "\u0308", "\u0327", "\u0300\u0316", "\u20dd", "\u0e31", "\u093f",
             "\u05b8", "\u064e", "\u1ab0", "\ufe0f", "\u200d", "\u200b", "\u034f"]
SPACES = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n ",
          "\u00a0", "\u3000", "\u2003", "\u2028", "\u0085", "\u202f", "\u000b", "\u000c",
          " \t \n", "        "]
PUNCT = [".", ",", "!", "?", ";", ":", "'", "\"", "(", ")", "[", "]", "{", "}", "<", ">",
         "...", "—", "–", "«", "»", "“", "”", "‘", "’", "¿", "¡", "。", "，", "、", "！",
         "？", "・", "$", "€", "£", "¥", "%", "&", "@", "#", "*", "+", "=", "^", "~", "|",
         "`", "\\", "/", "_", "-", "→", "∑", "≠", "©", "®", "™", "°", "§", "¶"]
CODE = ["int main(void) {\n    return 0;\n}\n", "for (i = 0; i < n; i++) x[i] += 1;",
        "def f(x):\n\treturn x**2  # square\n", "if (a && b || !c) { y = a ? b : c; }",
        "SELECT * FROM t WHERE id = 42;", "<div class=\"x\">&amp;</div>",
        "$ ls -la | grep '\\.c$' > out.txt", "{\"key\": [1, 2.5, null, true]}",
        "x = 0x1F; y = 1e-9; z = 3_000_000", "    // TODO: fix\n        pass",
        "std::vector<int> v{1,2,3};", "a:=b; c<-d; e=>f; g->h; i::j",
        "#include <stdio.h>\n", "fn main() { println!(\"{}\", 1+1); }"]
SPECIAL = ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
           "<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
           "<|user|>", "<|assistant|>", "<|end|>", "<|system|>", "[INST]", "[/INST]",
           "<start_of_turn>", "<end_of_turn>", "<|fim_prefix|>", "<PAD>", "<BOS_TOKEN>",
           "<|END_OF_TURN_TOKEN|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
INVALID = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",
           b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x28\xa1", b"\x00",
           b"\xc3\x28", b"\xf0\x28\x8c\xbc", b"\xa0\xa1", b"\xf4\x8f\xbf"]
# assigned in Unicode 15.0 (safe) blocks to draw random code points from
BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
          (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE5B), (0x1E00, 0x1EFF), (0x2000, 0x206F),
          (0x20A0, 0x20C0), (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF),
          (0x2460, 0x24FF), (0x2500, 0x257F), (0x3000, 0x303F), (0x3040, 0x30FF),
          (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F5FF),
          (0x1F600, 0x1F64F), (0x10400, 0x1044F), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF)]


def digits():
    k = R.choice([1, 2, 3, 4, 5, 6, 7, 9, 12, 20])
    return "".join(R.choice("0123456789") for _ in range(k))


def piece():
    r = R.random()
    if r < 0.30:
        w = R.choice(WORDS)
        return R.choice([w, w.upper(), w.lower(), w.capitalize()])
    if r < 0.38:
        return R.choice(EMOJI)
    if r < 0.44:
        return R.choice(WORDS) + R.choice(COMBINING)
    if r < 0.52:
        return digits()
    if r < 0.62:
        return R.choice(SPACES)
    if r < 0.72:
        return R.choice(PUNCT)
    if r < 0.76:
        return R.choice(CODE)
    if r < 0.82:
        return R.choice(SPECIAL)
    if r < 0.90:
        lo, hi = R.choice(BLOCKS)
        return "".join(chr(R.randint(lo, hi)) for _ in range(R.randint(1, 4)))
    if r < 0.95:
        return R.choice(INVALID)
    return R.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re"])


def string():
    parts = []
    for _ in range(R.randint(1, 12)):
        p = piece()
        parts.append(p if isinstance(p, bytes) else p.encode("utf-8"))
        if R.random() < 0.5:
            parts.append(b" ")
    return b"".join(parts)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    out = sys.stdout
    fixed = [b"", b" ", b"\n", b"a", b"  leading", b"trailing  ", b"\xff\xfe",
             b" " * 50, b"\n" * 7, b"9" * 40, b"a" * 300]
    for s in fixed:
        out.write(s.hex() + "\n")
    for _ in range(n - len(fixed)):
        out.write(string().hex() + "\n")


main()
