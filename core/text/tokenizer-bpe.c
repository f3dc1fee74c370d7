/*
 * tokenizer-bpe.c - byte-level BPE: pre-tokenizing text into words, mapping
 * each word's bytes to GPT-2's printable code points, and merging by rank.
 *
 * Pre-tokenizers are the regular expressions of each model family
 * (tokenizer.ggml.pre), applied in sequence, each one refining the pieces
 * the previous ones left: text a pattern matches becomes a piece, and so
 * does text between matches. llama.cpp runs the common ones (GPT-2,
 * Llama 3, Qwen2, Qwen3.5) as hand-written scanners and the rest through
 * std::regex; its std::regex use has two quirks that decide the tokens and
 * are reproduced here, so each pattern below is a hand-written matcher with
 * ECMAScript (leftmost, first-alternative, greedy backtracking) semantics:
 *  - "collapsed" patterns (those using \p{..}) see every code point >= 128
 *    as one byte standing for its category (N 0xD1, L 0xD2, P 0xD3, M 0xD4,
 *    S 0xD5, other 0xD0), and non-ASCII white space as 0x0B;
 *  - the other patterns see code points, non-ASCII white space as 0x0B.
 * In both, \s is ASCII white space (the C locale's isspace) only.
 *
 * Merging: the word's characters are symbols in a linked list; the adjacent
 * pair with the lowest merge rank (ties: leftmost) is merged until no pair
 * has a rank. A final symbol that is not a token is emitted byte by byte,
 * and bytes that are not single-byte tokens are dropped, as llama.cpp does.
 *
 * Gemma 4's tokenizer ("gemma4") is a BPE of another kind: its caller has
 * made spaces U+2581, the words are runs of newlines and runs of other text,
 * the symbols are the raw UTF-8 characters (no byte mapping), and a final
 * symbol that is not a token is emitted as the <0xXX> tokens of its bytes.
 */
#include "core/text/vocab.h"
#include "core/text/unicode.h"

#include <stdlib.h>
#include <string.h>

/* ==== growable arrays ==== */

struct segs {
    size_t *len; /* piece lengths in code points */
    size_t n, cap;
    bool oom;
};

static void seg_push(struct segs *s, size_t len)
{
    if (len == 0 || s->oom)
        return;
    if (base_grow((void **)&s->len, &s->cap, s->n + 1, sizeof *s->len)) {
        s->oom = true;
        return;
    }
    s->len[s->n++] = len;
}

/* ==== the text as the scanners see it ==== */

struct text {
    const uint32_t *cp;   /* code points */
    const uint16_t *fl;   /* their LLM_UCD_* flags */
    uint8_t *collapsed;   /* the "collapsed" view, made on first use */
    size_t n;
};

static uint8_t collapse(uint32_t cp, uint16_t fl)
{
    if (cp < 128)
        return (uint8_t)cp;
    if (fl & LLM_UCD_WHITESPACE)
        return 0x0B;
    switch (fl & LLM_UCD_CATEGORIES) {
    case LLM_UCD_NUMBER: return 0xD1;
    case LLM_UCD_LETTER: return 0xD2;
    case LLM_UCD_PUNCT: return 0xD3;
    case LLM_UCD_MARK: return 0xD4;
    case LLM_UCD_SYMBOL: return 0xD5;
    default: return 0xD0;
    }
}

/* the value a non-collapsed (wide) pattern sees */
static uint32_t wide(const struct text *t, size_t i)
{
    uint32_t c = t->cp[i];
    return c > 0x7F && (t->fl[i] & LLM_UCD_WHITESPACE) ? 0x0B : c;
}

static bool c_space(uint32_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* ==== hand-written scanners (llama.cpp's custom splitters) ==== */

#define OUT_OF_RANGE 0xFFFFFFFFu

/* where the last rules of the split patterns end a piece at pos, before
 * which nws whitespace code points stand (more: text goes on after them):
 * \s+(?!\S) leaves the last one to the next piece, \s+ takes them all,
 * and anything else is one code point */
static size_t space_rules_end(size_t pos, size_t nws, bool more)
{
    if (nws > 1 && more)
        return pos + nws - 1;
    return pos + (nws > 0 ? nws : 1);
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(const struct text *t, size_t ini, size_t end, struct segs *o)
{
#define CPT(p) ((p) >= ini && (p) < end ? t->cp[p] : OUT_OF_RANGE)
#define FL(p) ((p) >= ini && (p) < end ? t->fl[p] : 0)
    size_t prev = ini;
#define ADD(e) (seg_push(o, (e) - prev), prev = (e))
    for (size_t pos = ini; pos < end;) {
        uint32_t c = CPT(pos);
        uint16_t f = FL(pos);
        if (c == '\'' && pos + 1 < end) {
            uint32_t c1 = CPT(pos + 1);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                ADD(pos + 2);
                pos += 2;
                continue;
            }
            if (pos + 2 < end) {
                uint32_t c2 = CPT(pos + 2);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    ADD(pos + 3);
                    pos += 3;
                    continue;
                }
            }
        }
        uint16_t f2 = c == ' ' ? FL(pos + 1) : f;
        if (f2 & LLM_UCD_LETTER) {
            pos += c == ' ';
            while (FL(pos) & LLM_UCD_LETTER)
                pos++;
            ADD(pos);
            continue;
        }
        if (f2 & LLM_UCD_NUMBER) {
            pos += c == ' ';
            while (FL(pos) & LLM_UCD_NUMBER)
                pos++;
            ADD(pos);
            continue;
        }
        if (!(f2 & (LLM_UCD_WHITESPACE | LLM_UCD_LETTER | LLM_UCD_NUMBER)) && f2) {
            pos += c == ' ';
            for (;;) {
                uint16_t g = FL(pos);
                if ((g & (LLM_UCD_WHITESPACE | LLM_UCD_LETTER | LLM_UCD_NUMBER)) || !g)
                    break;
                pos++;
            }
            ADD(pos);
            continue;
        }
        size_t nws = 0;
        while (FL(pos + nws) & LLM_UCD_WHITESPACE)
            nws++;
        pos = space_rules_end(pos, nws, CPT(pos + nws) != OUT_OF_RANGE);
        ADD(pos);
    }
}

static uint32_t ascii_lower(uint32_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Llama 3 / Qwen2 / Qwen3.5:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with marks counted as letters for Qwen3.5 */
static void split_llama3(const struct text *t, size_t ini, size_t end, struct segs *o,
                         size_t max_digits, bool marks)
{
    uint16_t LET = LLM_UCD_LETTER | (marks ? LLM_UCD_MARK : 0);
    size_t prev = ini;
    for (size_t pos = ini; pos < end;) {
        uint32_t c = CPT(pos);
        uint16_t f = FL(pos);
        if (c == '\'' && pos + 1 < end) {
            uint32_t c1 = ascii_lower(CPT(pos + 1));
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                ADD(pos + 2);
                pos += 2;
                continue;
            }
            if (pos + 2 < end) {
                uint32_t c2 = ascii_lower(CPT(pos + 2));
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    ADD(pos + 3);
                    pos += 3;
                    continue;
                }
            }
        }
        if (!(c == '\r' || c == '\n' || (f & LLM_UCD_NUMBER))) {
            if ((f & LET) || (FL(pos + 1) & LET)) {
                pos++;
                while (FL(pos) & LET)
                    pos++;
                ADD(pos);
                continue;
            }
        }
        if (f & LLM_UCD_NUMBER) {
            size_t start = pos;
            while (FL(pos) & LLM_UCD_NUMBER) {
                if (++pos - start >= max_digits) {
                    ADD(pos);
                    start = pos;
                }
            }
            ADD(pos);
            continue;
        }
        uint16_t f2 = c == ' ' ? FL(pos + 1) : f;
        if (!(f2 & (LLM_UCD_WHITESPACE | LET | LLM_UCD_NUMBER)) && f) {
            pos += c == ' ';
            for (;;) {
                uint16_t g = FL(pos);
                if ((g & (LLM_UCD_WHITESPACE | LET | LLM_UCD_NUMBER)) || !g)
                    break;
                pos++;
            }
            for (uint32_t c2 = CPT(pos); c2 == '\r' || c2 == '\n'; c2 = CPT(pos))
                pos++;
            ADD(pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (FL(pos + nws) & LLM_UCD_WHITESPACE) {
            uint32_t c2 = CPT(pos + nws);
            if (c2 == '\r' || c2 == '\n')
                last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            ADD(pos);
            continue;
        }
        pos = space_rules_end(pos, nws, CPT(pos + nws) != OUT_OF_RANGE);
        ADD(pos);
    }
#undef CPT
#undef FL
#undef ADD
}

/* ==== std::regex patterns, by hand ==== */

/* o200k (gpt-4o, gpt-oss), the pattern llama.cpp runs through std::regex on
 * the collapsed text (its rewrite of tokenizer.json's, without \p{M}):
 *   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+C?|
 *   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*C?|
 *   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * C = '[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]. On collapsed
 * bytes, a letter is A-Z, a-z or 0xD2; "not lower" a letter but a-z, "not
 * upper" a letter but A-Z (so a non-ASCII letter is both). ECMAScript's
 * order: the first alternative with its optional prefix taken, then not,
 * each with the greedy star given back one letter at a time until the
 * plus can start; then the second alternative; then the rest. */
static bool g4_letter(uint8_t c) { return c == 0xD2 || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static bool g4_number(uint8_t c) { return c == 0xD1 || (c >= '0' && c <= '9'); }
static bool g4_notlower(uint8_t c) { return g4_letter(c) && !(c >= 'a' && c <= 'z'); }
static bool g4_notupper(uint8_t c) { return g4_letter(c) && !(c >= 'A' && c <= 'Z'); }

/* after a word at e: the contraction C if there is one */
static size_t g4_contraction(const uint8_t *c, size_t e, size_t end)
{
    if (e + 1 >= end || c[e] != '\'')
        return e;
    uint8_t a = c[e + 1] | 0x20, b = e + 2 < end ? c[e + 2] | 0x20 : 0;
    if (c[e + 1] >= 'A' && (a == 's' || a == 't' || a == 'm' || a == 'd'))
        return e + 2;
    if (c[e + 1] >= 'A' && e + 2 < end && c[e + 2] >= 'A' &&
        ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')))
        return e + 3;
    return e;
}

/* the end of the letters alternatives' match at p, or 0 */
static size_t g4_word(const uint8_t *c, size_t p, size_t end)
{
    bool pre_ok = c[p] != '\r' && c[p] != '\n' && !g4_letter(c[p]) && !g4_number(c[p]);
    for (int alt = 1; alt <= 2; alt++)
        for (int pre = 1; pre >= 0; pre--) {
            if (pre && (!pre_ok || p + 1 >= end))
                continue;
            size_t s = p + (size_t)pre, a = 0;
            while (s + a < end && g4_notlower(c[s + a]))
                a++;
            if (alt == 1) {
                for (size_t k = a + 1; k-- > 0;)
                    if (s + k < end && g4_notupper(c[s + k])) {
                        size_t e = s + k;
                        while (e < end && g4_notupper(c[e]))
                            e++;
                        return g4_contraction(c, e, end);
                    }
            } else if (a > 0) {
                size_t e = s + a;
                while (e < end && g4_notupper(c[e]))
                    e++;
                return g4_contraction(c, e, end);
            }
        }
    return 0;
}

static void split_gpt4o(const struct text *t, size_t ini, size_t end, struct segs *o)
{
    const uint8_t *c = t->collapsed;
    for (size_t p = ini; p < end;) {
        size_t e = g4_word(c, p, end);
        if (!e && g4_number(c[p])) {
            e = p + 1;
            while (e < end && e < p + 3 && g4_number(c[e]))
                e++;
        }
        if (!e) { /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
            size_t q = p;
#define G4_OTHER(i) (!c_space(c[i]) && !g4_letter(c[i]) && !g4_number(c[i]))
            if (c[p] == ' ' && p + 1 < end && G4_OTHER(p + 1))
                q = p + 1;
            if (G4_OTHER(q)) {
                e = q + 1;
                while (e < end && G4_OTHER(e))
                    e++;
                while (e < end && (c[e] == '\r' || c[e] == '\n' || c[e] == '/'))
                    e++;
            }
#undef G4_OTHER
        }
        if (!e) { /* white space: \s*[\r\n]+, \s+(?!\S), \s+ */
            size_t q = p, last_rn = 0;
            while (q < end && c_space(c[q])) {
                if (c[q] == '\r' || c[q] == '\n')
                    last_rn = q + 1;
                q++;
            }
            e = last_rn ? last_rn : q == end || q - p < 2 ? q : q - 1;
        }
        if (e <= p) /* (cannot happen: every byte is one of the classes) */
            e = p + 1;
        seg_push(o, e - p);
        p = e;
    }
}

enum cls {
    CLS_PUNCT_DEFAULT, /* collapsed [\p{P}\$\+<=>\^~\|] */
    CLS_PUNCT_FALCON,  /* collapsed [\p{P}\$\+<=>\^~\|`] */
    CLS_N,             /* collapsed \p{N} */
    CLS_L,             /* collapsed \p{L} */
    CLS_P,             /* collapsed \p{P} */
    CLS_CRLF,          /* [\r\n] */
    CLS_CJK,           /* [一-龥ࠀ-一가-퟿] */
    CLS_DS_LETTER,     /* deepseek-llm's letter class */
    CLS_DS_PUNCT,      /* [!-/:-~！-／：-～‘-‟　-。] */
    CLS_DIGIT,         /* [0-9] */
};

static bool cls_collapsed(enum cls c)
{
    return c <= CLS_P;
}

static bool ascii_punct(uint32_t c) /* what \p{P} covers below 128 */
{
    return (c >= 0x21 && c <= 0x23) || (c >= 0x25 && c <= 0x2A) || (c >= 0x2C && c <= 0x2F) ||
           c == 0x3A || c == 0x3B || c == 0x3F || c == 0x40 || (c >= 0x5B && c <= 0x5D) ||
           c == 0x5F || c == 0x7B || c == 0x7D;
}

/* deepseek-llm's letter class from its tokenizer.json, as sorted ranges */
static const uint32_t ds_letter[][2] = {
    {'A', 'Z'}, {'a', 'z'}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
    {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

/* c in one of n sorted, disjoint ranges (binary search) */
static bool in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid][0])
            hi = mid;
        else if (c > r[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* does the pattern's class accept the character at i? */
static bool cls_has(const struct text *t, enum cls k, size_t i)
{
    if (cls_collapsed(k)) {
        uint8_t c = t->collapsed[i];
        switch (k) {
        case CLS_PUNCT_DEFAULT:
        case CLS_PUNCT_FALCON:
            return c == 0xD3 || ascii_punct(c) || c == '$' || c == '+' || c == '<' || c == '=' ||
                   c == '>' || c == '^' || c == '~' || c == '|' || (k == CLS_PUNCT_FALCON && c == '`');
        case CLS_N: return c == 0xD1 || (c >= '0' && c <= '9');
        case CLS_L: return c == 0xD2 || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
        case CLS_P: return c == 0xD3 || ascii_punct(c);
        default: return false;
        }
    }
    uint32_t c = wide(t, i);
    switch (k) {
    case CLS_CRLF: return c == '\r' || c == '\n';
    case CLS_CJK: return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x0800 && c <= 0x4E00) ||
                         (c >= 0xAC00 && c <= 0xD7FF);
    case CLS_DS_LETTER: return in_ranges(c, ds_letter, sizeof ds_letter / sizeof ds_letter[0]);
    case CLS_DS_PUNCT: return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) ||
                              (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF5E) ||
                              (c >= 0x2018 && c <= 0x201F) || (c >= 0x3000 && c <= 0x3002);
    case CLS_DIGIT: return c >= '0' && c <= '9';
    default: return false;
    }
}

static bool is_ws(const struct text *t, enum cls k, size_t i)
{
    return cls_collapsed(k) ? c_space(t->collapsed[i]) : c_space(wide(t, i));
}

enum step_kind {
    STEP_GPT2, STEP_LLAMA3, STEP_QWEN2, STEP_QWEN35, STEP_GPT4O,
    STEP_ONE,      /* [cls] */
    STEP_RUN,      /* [cls]+ */
    STEP_WS_RUN,   /* \s?[cls]+ */
    STEP_TRAIL_WS, /* \s+$ (wide) */
    STEP_DIGITS3,  /* [0-9][0-9][0-9] */
};

struct step {
    enum step_kind kind;
    enum cls cls;
};

/* Find the leftmost match of a regex step in [from, end): returns true and
 * [*ms, *me) or false. */
static bool find_match(const struct text *t, struct step st, size_t from, size_t end, size_t *ms,
                       size_t *me)
{
    for (size_t p = from; p < end; p++) {
        switch (st.kind) {
        case STEP_ONE:
            if (cls_has(t, st.cls, p)) {
                *ms = p, *me = p + 1;
                return true;
            }
            break;
        case STEP_RUN:
            if (cls_has(t, st.cls, p)) {
                size_t e = p + 1;
                while (e < end && cls_has(t, st.cls, e))
                    e++;
                *ms = p, *me = e;
                return true;
            }
            break;
        case STEP_WS_RUN: {
            size_t q = p;
            if (is_ws(t, st.cls, p) && p + 1 < end && cls_has(t, st.cls, p + 1))
                q = p + 1;
            else if (!cls_has(t, st.cls, p))
                break;
            size_t e = q + 1;
            while (e < end && cls_has(t, st.cls, e))
                e++;
            *ms = p, *me = e;
            return true;
        }
        case STEP_TRAIL_WS: {
            if (!is_ws(t, CLS_CRLF, p))
                break;
            size_t e = p;
            while (e < end && is_ws(t, CLS_CRLF, e))
                e++;
            if (e == end) {
                *ms = p, *me = e;
                return true;
            }
            p = e; /* nothing in this run can match; resume after it */
            break;
        }
        case STEP_DIGITS3:
            if (p + 3 <= end && cls_has(t, CLS_DIGIT, p) && cls_has(t, CLS_DIGIT, p + 1) &&
                cls_has(t, CLS_DIGIT, p + 2)) {
                *ms = p, *me = p + 3;
                return true;
            }
            break;
        default:
            return false;
        }
    }
    return false;
}

static void apply_step(struct text *t, struct step st, const struct segs *in, struct segs *out)
{
    out->n = 0;
    size_t start = 0;
    for (size_t i = 0; i < in->n; i++) {
        size_t ini = start, end = start + in->len[i];
        start = end;
        switch (st.kind) {
        case STEP_GPT2: split_gpt2(t, ini, end, out); continue;
        case STEP_LLAMA3: split_llama3(t, ini, end, out, 3, false); continue;
        case STEP_QWEN2: split_llama3(t, ini, end, out, 1, false); continue;
        case STEP_QWEN35: split_llama3(t, ini, end, out, 1, true); continue;
        case STEP_GPT4O: split_gpt4o(t, ini, end, out); continue;
        default: break;
        }
        size_t pos = ini, ms, me;
        while (pos < end && find_match(t, st, pos, end, &ms, &me)) {
            seg_push(out, ms - pos);
            seg_push(out, me - ms);
            pos = me;
        }
        seg_push(out, end - pos);
    }
}

static const struct step *steps_for(enum llm_pre pre, size_t *n)
{
    static const struct step def[] = {{STEP_RUN, CLS_PUNCT_DEFAULT}, {STEP_GPT2, 0},
                                      {STEP_RUN, CLS_N}, {STEP_DIGITS3, CLS_DIGIT}};
    static const struct step gpt2[] = {{STEP_GPT2, 0}};
    static const struct step llama3[] = {{STEP_LLAMA3, 0}};
    static const struct step qwen2[] = {{STEP_QWEN2, 0}};
    static const struct step qwen35[] = {{STEP_QWEN35, 0}};
    static const struct step gpt4o[] = {{STEP_GPT4O, 0}};
    static const struct step starcoder[] = {{STEP_ONE, CLS_N}, {STEP_GPT2, 0}};
    static const struct step falcon[] = {{STEP_RUN, CLS_PUNCT_FALCON}, {STEP_GPT2, 0},
                                         {STEP_DIGITS3, CLS_DIGIT}};
    static const struct step ds_coder[] = {{STEP_ONE, CLS_CRLF}, {STEP_WS_RUN, CLS_L},
                                           {STEP_WS_RUN, CLS_P}, {STEP_RUN, CLS_CJK},
                                           {STEP_ONE, CLS_N}};
    static const struct step ds_llm[] = {{STEP_ONE, CLS_CRLF}, {STEP_WS_RUN, CLS_DS_LETTER},
                                         {STEP_WS_RUN, CLS_DS_PUNCT}, {STEP_TRAIL_WS, CLS_CRLF},
                                         {STEP_RUN, CLS_CJK}, {STEP_RUN, CLS_N}};
#define RET(a) return (*n = sizeof a / sizeof a[0], a)
    switch (pre) {
    case LLM_PRE_GPT2: RET(gpt2);
    case LLM_PRE_LLAMA3: RET(llama3);
    case LLM_PRE_QWEN2: RET(qwen2);
    case LLM_PRE_QWEN35: RET(qwen35);
    case LLM_PRE_GPT4O: RET(gpt4o);
    case LLM_PRE_STARCODER: RET(starcoder);
    case LLM_PRE_FALCON: RET(falcon);
    case LLM_PRE_DEEPSEEK_CODER: RET(ds_coder);
    case LLM_PRE_DEEPSEEK_LLM: RET(ds_llm);
    default: RET(def);
    }
#undef RET
}

/* ==== merging one word ==== */

struct bpe_bigram {
    int32_t rank, left, right;
    uint32_t size;
};

static bool bpe_before(const struct bpe_bigram *a, const struct bpe_bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

struct bpe_work {
    struct llm_tok_sym *sym;
    size_t sym_cap;
    struct bpe_bigram *heap;
    size_t heap_n, heap_cap;
    bool oom;
};

BASE_HEAP_DEFINE(bigram_heap, struct bpe_bigram, bpe_before)

static void heap_push(struct bpe_work *w, struct bpe_bigram x)
{
    if (bigram_heap_push(&w->heap, &w->heap_n, &w->heap_cap, x))
        w->oom = true;
}

static void add_bigram(const struct llm_vocab *v, const char *word, struct bpe_work *w,
                       int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    const struct llm_tok_sym *l = &w->sym[left], *r = &w->sym[right];
    int32_t rank = llm_vocab_merge_rank(v, word + l->off, l->n, word + r->off, r->n);
    if (rank < 0)
        return;
    heap_push(w, (struct bpe_bigram){rank, left, right, l->n + r->n});
}

static void bpe_word(const struct llm_vocab *v, const char *word, size_t len, struct bpe_work *w,
                     struct llm_tokbuf *out)
{
    if (len == 0)
        return;
    if (v->ignore_merges) {
        int32_t id = llm_token_find(v, word, len);
        if (id >= 0) {
            llm_tokbuf_push(out, id);
            return;
        }
    }
    if (len > w->sym_cap) {
        struct llm_tok_sym *p = realloc(w->sym, len * sizeof *p);
        if (!p) {
            w->oom = true;
            return;
        }
        w->sym = p;
        w->sym_cap = len;
    }
    int32_t n = llm_tok_syms(word, len, w->sym);
    w->heap_n = 0;
    for (int32_t i = 1; i < n; i++)
        add_bigram(v, word, w, i - 1, i);
    while (w->heap_n && !w->oom) {
        struct bpe_bigram b = bigram_heap_pop(w->heap, &w->heap_n);
        if (!llm_tok_sym_merge(w->sym, b.left, b.right, b.size))
            continue;
        const struct llm_tok_sym *l = &w->sym[b.left];
        add_bigram(v, word, w, l->prev, b.left);
        add_bigram(v, word, w, b.left, l->next);
    }
    for (int32_t i = 0; i != -1; i = w->sym[i].next) {
        const struct llm_tok_sym *s = &w->sym[i];
        int32_t id = llm_token_find(v, word + s->off, s->n);
        if (id >= 0) {
            llm_tokbuf_push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < s->n; j++) {
            if (v->escape_spaces) { /* raw UTF-8: the byte's <0xXX> token */
                static const char hex[] = "0123456789ABCDEF";
                unsigned char c = (unsigned char)word[s->off + j];
                char b[6] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>'};
                id = llm_token_find(v, b, 6);
            } else {
                id = llm_token_find(v, word + s->off + j, 1);
            }
            if (id >= 0)
                llm_tokbuf_push(out, id);
        }
    }
}

/* ==== the fragment ==== */

/* gemma4 (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4): the text (spaces already
 * U+2581) in runs of newlines and runs of anything else ("[^\n]+|[\n]+"),
 * each merged over its raw UTF-8 characters; a run of newlines that is a
 * token is that token */
static void gemma4_tokenize(const struct llm_vocab *v, const char *text, size_t len, struct llm_tokbuf *out)
{
    struct bpe_work w = {0};
    for (size_t i = 0; i < len && !w.oom;) {
        bool nl = text[i] == '\n';
        size_t j = i;
        while (j < len && (text[j] == '\n') == nl)
            j++;
        int32_t id = nl ? llm_token_find(v, text + i, j - i) : -1;
        if (id >= 0)
            llm_tokbuf_push(out, id);
        else
            bpe_word(v, text + i, j - i, &w, out);
        i = j;
    }
    if (w.oom)
        out->oom = true;
    free(w.sym);
    free(w.heap);
}

void llm_bpe_tokenize(const struct llm_vocab *v, const char *text, size_t len,
                      struct llm_tokbuf *out)
{
    if (len == 0)
        return;
    if (v->pre == LLM_PRE_GEMMA4) {
        /* as llama.cpp's regex split rebuilds the words from code points:
         * each invalid byte becomes U+FFFD (and so does a code point past
         * U+10FFFF, where llama.cpp throws) */
        char *clean = malloc(3 * len);
        if (!clean) {
            out->oom = true;
            return;
        }
        size_t k = 0;
        for (size_t off = 0; off < len;) {
            uint32_t c = llm_utf8_decode(text, len, &off);
            k += llm_utf8_encode(c > 0x10FFFF ? 0xFFFD : c, clean + k);
        }
        gemma4_tokenize(v, clean, k, out);
        free(clean);
        return;
    }
    uint32_t *cp = malloc(len * sizeof *cp);
    uint16_t *fl = malloc(len * sizeof *fl);
    uint8_t *col = malloc(len);
    char *word = malloc(len * 8 + 8); /* a piece's bytes, each as up to 2 UTF-8 bytes */
    struct segs a = {0}, b = {0};
    struct bpe_work w = {0};
    if (!cp || !fl || !col || !word)
        goto oom;
    size_t n = 0;
    for (size_t off = 0; off < len;) {
        uint32_t c = llm_utf8_decode(text, len, &off);
        cp[n] = c;
        fl[n] = llm_ucd_get(c);
        col[n] = collapse(c, fl[n]);
        n++;
    }
    struct text t = {cp, fl, col, n};
    seg_push(&a, n);
    size_t nsteps;
    const struct step *steps = steps_for(v->pre, &nsteps);
    for (size_t i = 0; i < nsteps; i++) {
        apply_step(&t, steps[i], &a, &b);
        if (b.oom)
            goto oom;
        struct segs x = a;
        a = b;
        b = x;
    }
    size_t start = 0;
    for (size_t i = 0; i < a.n; i++) {
        size_t k = 0;
        for (size_t j = start; j < start + a.len[i]; j++) {
            char enc[4];
            /* code points beyond U+10FFFF (from 0xF5..0xF7 lead bytes) make
             * llama.cpp throw; they are taken as U+FFFD here */
            size_t ne = llm_utf8_encode(cp[j] > 0x10FFFF ? 0xFFFD : cp[j], enc);
            for (size_t e = 0; e < ne; e++)
                k += llm_utf8_encode(llm_byte_to_cp((uint8_t)enc[e]), word + k);
        }
        start += a.len[i];
        bpe_word(v, word, k, &w, out);
        if (w.oom)
            goto oom;
    }
    goto done;
oom:
    out->oom = true;
done:
    BASE_FREE(cp, fl, col, word, a.len, b.len, w.sym, w.heap);
}
