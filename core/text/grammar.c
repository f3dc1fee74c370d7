/*
 * grammar.c - constrained output: a parser of llama.cpp's GBNF syntax (as
 * grammars/README.md defines it) into a flat program of rules, and a matcher
 * that follows the text generated so far and says, for every token of a
 * vocabulary, whether its piece can continue a string of the language.
 *
 * The program: every rule is a run of elements in code[], alternatives
 * separated by G_ALT and ended by G_END. An element is two int32s: its kind
 * and an argument (a character class's index, or a rule's id). Repetitions
 * and groups are rewritten into generated rules at parse time: X* is
 * R ::= X R | (empty), X? is R ::= X | (empty), X{m,n} is m copies of X and
 * a chain of n-m optionals, so the matcher knows only sequences,
 * alternatives, rule references and character classes.
 *
 * The matcher is a set of stacks, as a pushdown recogniser keeps them: a
 * stack is the list of code positions still to match, its top the next
 * element, always a character class once expanded (a rule reference on top
 * is replaced by the first element of each of its alternatives; a finished
 * alternative pops). An empty stack means the text so far is a complete
 * string of the language. A continuation that would only pop at once is
 * never pushed, so right recursion (X*) keeps stacks short; left recursion
 * would expand forever and is refused by the parser; the stacks are
 * deduplicated and their number, their depth and the expansions per
 * character are bounded (a grammar exceeding the bounds gets fewer
 * continuations, never a wrong one). Bytes are fed one
 * by one: a code point split across bytes (and tokens) is held as a partial
 * one, kept only while some class can still accept a code point beginning
 * with those bytes.
 *
 * Masks: the vocabulary's token pieces (llm_token_to_piece, no special
 * tokens) go into a byte trie, so a mask walks a shared prefix once, with the
 * matcher's state after each trie node kept per depth. The end-of-generation
 * tokens pass only where some stack is empty. Masks are cached by the
 * matcher's state (its stacks and partial code point, compared in full, not
 * just by hash), with round-robin replacement, so a string's or a number's
 * inside, where the state repeats, costs one look-up. Where it does not
 * repeat (a string with maxLength: every character left is another state)
 * the walk still meets few distinct states at its many nodes, so what each
 * byte makes of each state is kept in a memo across walks (below), and most
 * nodes cost a look-up instead of a step.
 *
 * Invariants: parsing never trusts the text: nesting, names, counts and the
 * program's size are bounded, every error says where (line:column) and what;
 * the matcher allocates only when a state outgrows its buffers, or the memo
 * grows (within its bound).
 */
#include "core/llm.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    G_END = 0,  /* end of a rule */
    G_ALT,      /* end of an alternative, another follows */
    G_RULE,     /* arg: rule id */
    G_CLASS,    /* arg: class index */
};

#define MAX_TEXT (1 << 20)       /* grammar text bytes */
#define MAX_CODE (1 << 22)       /* int32s of program */
#define MAX_RULES (1 << 16)
#define MAX_NEST 64              /* parentheses */
#define MAX_REPEAT 1000          /* m and n of {m,n} */
#define MAX_NAME 128
#define MAX_STACKS 1024          /* stacks per state */
#define MAX_DEPTH 512            /* entries per stack */
#define CACHE_SLOTS 256          /* masks kept */
#define MEMO_BYTES ((size_t)64 << 20) /* the transitions memo's default bound */
#define EXPAND_BUDGET 20000      /* rule expansions per character step (an ambiguous grammar's
                                    paths to the same stacks can be exponential in number) */

struct gclass {
    bool neg;
    int32_t n;     /* ranges */
    int32_t off;   /* into ranges[]: lo, hi pairs (inclusive) */
};

struct llm_grammar {
    int32_t *code;
    int64_t n_code;
    int32_t *rule_start; /* (n_rules) offset in code */
    int32_t n_rules;
    int32_t root;
    struct gclass *cls;
    int32_t n_cls;
    uint32_t *ranges;
    int64_t n_ranges;
};

/* ==== parsing ==== */

struct ivec {
    int32_t *p;
    int64_t n, cap;
};

static int ivec_push(struct ivec *v, int32_t x)
{
    if (v->n == v->cap) {
        int64_t cap = v->cap ? 2 * v->cap : 16;
        if (cap > MAX_CODE)
            return -1;
        int32_t *q = realloc(v->p, (size_t)cap * sizeof *q);
        if (!q)
            return -1;
        v->p = q;
        v->cap = cap;
    }
    v->p[v->n++] = x;
    return 0;
}

struct prule {
    char *name;       /* NULL for a generated rule */
    struct ivec body; /* elements (kind, arg), G_ALT between alternatives, no G_END */
    bool defined;
    int32_t line, col; /* where it was first referred to (for "undefined") */
};

struct parser {
    const char *s, *end, *p;
    int line;
    const char *line_start;
    struct prule *rules;
    int32_t n_rules, cap_rules;
    struct ivec ranges;
    struct gclass *cls;
    int32_t n_cls, cap_cls;
    int depth;
    char *err;
    size_t err_size;
    bool failed;
};

static int perr(struct parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return -1;
    ps->failed = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->err && ps->err_size)
        snprintf(ps->err, ps->err_size, "bad grammar at %d:%d: %s", ps->line,
                 (int)(ps->p - ps->line_start) + 1, msg);
    return -1;
}

static int new_rule(struct parser *ps, const char *name, size_t len)
{
    if (ps->n_rules >= MAX_RULES)
        return perr(ps, "too many rules (at most %d)", MAX_RULES);
    if (ps->n_rules == ps->cap_rules) {
        int32_t cap = ps->cap_rules ? 2 * ps->cap_rules : 32;
        struct prule *q = realloc(ps->rules, (size_t)cap * sizeof *q);
        if (!q)
            return perr(ps, "out of memory");
        ps->rules = q;
        ps->cap_rules = cap;
    }
    struct prule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    if (name) {
        r->name = malloc(len + 1);
        if (!r->name)
            return perr(ps, "out of memory");
        memcpy(r->name, name, len);
        r->name[len] = 0;
    }
    r->line = ps->line;
    r->col = (int32_t)(ps->p - ps->line_start) + 1;
    return ps->n_rules++;
}

static int find_rule(struct parser *ps, const char *name, size_t len)
{
    for (int32_t i = 0; i < ps->n_rules; i++)
        if (ps->rules[i].name && strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len))
            return i;
    return new_rule(ps, name, len);
}

static bool is_word(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* spaces and comments; newlines too when nl_ok */
static void skip_space(struct parser *ps, bool nl_ok)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r') {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else if (c == '\n' && nl_ok) {
            ps->p++;
            ps->line++;
            ps->line_start = ps->p;
        } else {
            break;
        }
    }
}

/* one UTF-8 code point of the text; -1 on bad UTF-8 */
static int64_t utf8_take(struct parser *ps)
{
    const unsigned char *u = (const unsigned char *)ps->p;
    size_t left = (size_t)(ps->end - ps->p);
    if (!left)
        return -1;
    unsigned c = u[0];
    int n;
    uint32_t cp, min;
    if (c < 0x80) {
        ps->p++;
        return c;
    } else if (c >= 0xc2 && c <= 0xdf) {
        n = 1, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 2, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 3, cp = c & 0x07, min = 0x10000;
    } else {
        return -1;
    }
    if (left < (size_t)n + 1)
        return -1;
    for (int i = 1; i <= n; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return -1;
        cp = cp << 6 | (u[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return -1;
    ps->p += n + 1;
    return cp;
}

/* a character of a literal or class, escapes decoded; -1 after an error */
static int64_t take_char(struct parser *ps)
{
    if (ps->p >= ps->end)
        return perr(ps, "unexpected end of grammar");
    if (*ps->p == '\n')
        return perr(ps, "newline inside a literal or class (write \\n)");
    if (*ps->p != '\\') {
        int64_t cp = utf8_take(ps);
        if (cp < 0)
            return perr(ps, "bad UTF-8");
        return cp;
    }
    ps->p++;
    if (ps->p >= ps->end)
        return perr(ps, "unexpected end of grammar after '\\'");
    char e = *ps->p++;
    int digits = 0;
    switch (e) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '.': case '/':
        return (unsigned char)e;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
        ps->p--;
        return perr(ps, "unknown escape '\\%c'", e);
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = ps->p < ps->end ? base_hexval((unsigned char)*ps->p) : -1;
        if (h < 0)
            return perr(ps, "'\\%c' wants %d hex digits", e, digits);
        v = v << 4 | (uint32_t)h;
        ps->p++;
    }
    if (v > 0x10ffff)
        return perr(ps, "code point U+%X out of range", (unsigned)v);
    return v;
}

static int add_class(struct parser *ps, bool neg, const uint32_t *pairs, int32_t n)
{
    if (ps->n_cls == ps->cap_cls) {
        int32_t cap = ps->cap_cls ? 2 * ps->cap_cls : 32;
        if (cap > MAX_CODE / 4)
            return perr(ps, "grammar too large");
        struct gclass *q = realloc(ps->cls, (size_t)cap * sizeof *q);
        if (!q)
            return perr(ps, "out of memory");
        ps->cls = q;
        ps->cap_cls = cap;
    }
    struct gclass *c = &ps->cls[ps->n_cls];
    c->neg = neg;
    c->n = n;
    c->off = (int32_t)ps->ranges.n;
    for (int32_t i = 0; i < 2 * n; i++)
        if (ivec_push(&ps->ranges, (int32_t)pairs[i]))
            return perr(ps, "grammar too large");
    return ps->n_cls++;
}

static int emit(struct parser *ps, struct ivec *out, int32_t kind, int32_t arg)
{
    if (ivec_push(out, kind) || ivec_push(out, arg))
        return perr(ps, "grammar too large");
    return 0;
}

static int parse_alts(struct parser *ps, struct ivec *out);

/* a generated rule with the given body; returns its id */
static int gen_rule(struct parser *ps, struct ivec *body)
{
    int id = new_rule(ps, NULL, 0);
    if (id < 0) {
        free(body->p);
        return -1;
    }
    ps->rules[id].body = *body;
    ps->rules[id].defined = true;
    return id;
}

static int copy_span(struct parser *ps, struct ivec *dst, const int32_t *span, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (ivec_push(dst, span[i]))
            return perr(ps, "grammar too large");
    return 0;
}

/* the item span[0..n) (elements) repeated m to n times (n < 0: no bound), into out */
static int repeat(struct parser *ps, struct ivec *out, int32_t *span, int64_t len, long m, long n)
{
    for (long i = 0; i < m; i++)
        if (copy_span(ps, out, span, len))
            return -1;
    if (n < 0) { /* R ::= X R | empty */
        struct ivec b = {0};
        int id = new_rule(ps, NULL, 0);
        if (id < 0)
            return -1;
        if (copy_span(ps, &b, span, len) || emit(ps, &b, G_RULE, id) || emit(ps, &b, G_ALT, 0)) {
            free(b.p);
            return -1;
        }
        ps->rules[id].body = b;
        ps->rules[id].defined = true;
        return emit(ps, out, G_RULE, id);
    }
    /* n - m optionals, nested: O1 ::= X O2 | empty, ..., Ok ::= X | empty */
    int next = -1;
    for (long k = n - m; k > 0; k--) {
        struct ivec b = {0};
        if (copy_span(ps, &b, span, len) || (next >= 0 && emit(ps, &b, G_RULE, next)) ||
            emit(ps, &b, G_ALT, 0)) {
            free(b.p);
            return -1;
        }
        next = gen_rule(ps, &b);
        if (next < 0)
            return -1;
    }
    if (next >= 0)
        return emit(ps, out, G_RULE, next);
    return 0;
}

static int parse_count(struct parser *ps, long *v)
{
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return perr(ps, "expected a number in {m,n}");
    long x = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        x = x * 10 + (*ps->p - '0');
        if (x > MAX_REPEAT)
            return perr(ps, "repetition count above %d", MAX_REPEAT);
        ps->p++;
    }
    *v = x;
    return 0;
}

/* one sequence (until '|', ')', or a newline outside parentheses) */
static int parse_seq(struct parser *ps, struct ivec *out, bool nested)
{
    for (;;) {
        skip_space(ps, nested);
        if (ps->p >= ps->end)
            return 0;
        char c = *ps->p;
        int64_t item_at = out->n;
        if (c == '"') {
            ps->p++;
            while (ps->p < ps->end && *ps->p != '"') {
                int64_t cp = take_char(ps);
                if (cp < 0)
                    return -1;
                uint32_t pair[2] = {(uint32_t)cp, (uint32_t)cp};
                int ci = add_class(ps, false, pair, 1);
                if (ci < 0 || emit(ps, out, G_CLASS, ci))
                    return -1;
            }
            if (ps->p >= ps->end)
                return perr(ps, "unterminated string literal");
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            bool neg = false;
            if (ps->p < ps->end && *ps->p == '^')
                neg = true, ps->p++;
            uint32_t *pairs = NULL;
            int32_t np = 0, cap = 0;
            while (ps->p < ps->end && *ps->p != ']') {
                int64_t lo = take_char(ps), hi = lo;
                if (lo < 0) {
                    free(pairs);
                    return -1;
                }
                if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
                    ps->p++;
                    hi = take_char(ps);
                    if (hi < 0) {
                        free(pairs);
                        return -1;
                    }
                    if (hi < lo) {
                        free(pairs);
                        return perr(ps, "character range backwards");
                    }
                }
                if (np == cap) {
                    cap = cap ? 2 * cap : 8;
                    if (cap > 65536) {
                        free(pairs);
                        return perr(ps, "character class too large");
                    }
                    uint32_t *q = realloc(pairs, (size_t)cap * 2 * sizeof *q);
                    if (!q) {
                        free(pairs);
                        return perr(ps, "out of memory");
                    }
                    pairs = q;
                }
                pairs[2 * np] = (uint32_t)lo;
                pairs[2 * np + 1] = (uint32_t)hi;
                np++;
            }
            if (ps->p >= ps->end) {
                free(pairs);
                return perr(ps, "unterminated character class");
            }
            ps->p++;
            int ci = add_class(ps, neg, pairs, np);
            free(pairs);
            if (ci < 0 || emit(ps, out, G_CLASS, ci))
                return -1;
        } else if (c == '.') {
            ps->p++;
            int ci = add_class(ps, true, NULL, 0);
            if (ci < 0 || emit(ps, out, G_CLASS, ci))
                return -1;
        } else if (c == '(') {
            ps->p++;
            if (++ps->depth > MAX_NEST)
                return perr(ps, "parentheses nested deeper than %d", MAX_NEST);
            struct ivec b = {0};
            if (parse_alts(ps, &b)) {
                free(b.p);
                return -1;
            }
            skip_space(ps, true);
            if (ps->p >= ps->end || *ps->p != ')') {
                free(b.p);
                return perr(ps, "expected ')'");
            }
            ps->p++;
            ps->depth--;
            int id = gen_rule(ps, &b);
            if (id < 0 || emit(ps, out, G_RULE, id))
                return -1;
        } else if (is_word((unsigned char)c)) {
            const char *n0 = ps->p;
            while (ps->p < ps->end && is_word((unsigned char)*ps->p))
                ps->p++;
            size_t nl = (size_t)(ps->p - n0);
            if (nl > MAX_NAME)
                return perr(ps, "rule name longer than %d bytes", MAX_NAME);
            const char *save = ps->p;
            skip_space(ps, false);
            if (ps->end - ps->p >= 3 && !memcmp(ps->p, "::=", 3)) { /* the next rule begins */
                ps->p = n0;
                return 0;
            }
            ps->p = save;
            int id = find_rule(ps, n0, nl);
            if (id < 0 || emit(ps, out, G_RULE, id))
                return -1;
        } else {
            return 0; /* '|', ')', newline, or something parse_alts reports */
        }
        /* postfix operators on the item just parsed */
        for (;;) {
            skip_space(ps, nested);
            if (ps->p >= ps->end)
                break;
            char op = *ps->p;
            long m, n;
            if (op == '*')
                m = 0, n = -1;
            else if (op == '+')
                m = 1, n = -1;
            else if (op == '?')
                m = 0, n = 1;
            else if (op == '{') {
                ps->p++;
                skip_space(ps, nested);
                if (parse_count(ps, &m))
                    return -1;
                skip_space(ps, nested);
                n = m;
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps, nested);
                    n = -1;
                    if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9' && parse_count(ps, &n))
                        return -1;
                    skip_space(ps, nested);
                    if (n >= 0 && n < m)
                        return perr(ps, "{m,n} with n below m");
                }
                if (ps->p >= ps->end || *ps->p != '}')
                    return perr(ps, "expected '}'");
            } else {
                break;
            }
            ps->p++;
            if (item_at == out->n)
                return perr(ps, "'%c' follows nothing", op == '{' ? '{' : op);
            int64_t len = out->n - item_at;
            int32_t *span = malloc((size_t)len * sizeof *span);
            if (!span)
                return perr(ps, "out of memory");
            memcpy(span, out->p + item_at, (size_t)len * sizeof *span);
            out->n = item_at;
            int r = repeat(ps, out, span, len, m, n);
            free(span);
            if (r)
                return -1;
        }
    }
}

static int parse_alts(struct parser *ps, struct ivec *out)
{
    bool nested = ps->depth > 0;
    for (;;) {
        if (parse_seq(ps, out, nested))
            return -1;
        skip_space(ps, nested);
        if (ps->p < ps->end && *ps->p == '|') {
            ps->p++;
            skip_space(ps, true);
            if (emit(ps, out, G_ALT, 0))
                return -1;
            continue;
        }
        return 0;
    }
}

static int parse_rule(struct parser *ps)
{
    const char *n0 = ps->p;
    while (ps->p < ps->end && is_word((unsigned char)*ps->p))
        ps->p++;
    size_t nl = (size_t)(ps->p - n0);
    if (!nl)
        return perr(ps, "expected a rule name");
    if (nl > MAX_NAME)
        return perr(ps, "rule name longer than %d bytes", MAX_NAME);
    skip_space(ps, false);
    if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3))
        return perr(ps, "expected '::=' after '%.*s'", (int)nl, n0);
    ps->p += 3;
    int id = find_rule(ps, n0, nl);
    if (id < 0)
        return -1;
    if (ps->rules[id].defined)
        return perr(ps, "rule '%.*s' defined twice", (int)nl, n0);
    skip_space(ps, true);
    struct ivec b = {0};
    ps->depth = 0;
    if (parse_alts(ps, &b)) {
        free(b.p);
        return -1;
    }
    ps->rules[id].body = b;
    ps->rules[id].defined = true;
    skip_space(ps, false);
    if (ps->p < ps->end && *ps->p != '\n') {
        if (*ps->p == ')')
            return perr(ps, "unbalanced ')'");
        return perr(ps, "unexpected '%c'", *ps->p);
    }
    return 0;
}

/* ==== checks: nullable rules and left recursion ==== */

/* is the alternative starting at code[a] nullable, given the rules' flags? */
static bool alt_nullable(const struct llm_grammar *g, int64_t a, const bool *nul)
{
    for (int64_t i = a; g->code[i] != G_END && g->code[i] != G_ALT; i += 2)
        if (g->code[i] == G_CLASS || !nul[g->code[i + 1]])
            return false;
    return true;
}

/* refuse left recursion (a rule reaching itself with no character matched),
 * which would expand forever */
static int check_left_rec(const struct llm_grammar *g, char *names[], char *err, size_t err_size)
{
    int32_t nr = g->n_rules;
    bool *nul = calloc((size_t)nr, 1);
    uint8_t *mark = calloc((size_t)nr, 1);
    int32_t *eoff = calloc((size_t)nr + 1, sizeof *eoff);
    int32_t *edge = malloc((size_t)(g->n_code / 2 + 1) * sizeof *edge);
    int32_t *stack = malloc((size_t)nr * 2 * sizeof *stack);
    int rc = 0;
    if (!nul || !mark || !eoff || !edge || !stack) {
        snprintf(err, err_size, "out of memory");
        rc = -1;
        goto out;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < nr; r++) {
            if (nul[r])
                continue;
            int64_t a = g->rule_start[r];
            for (;;) {
                if (alt_nullable(g, a, nul)) {
                    nul[r] = changed = true;
                    break;
                }
                while (g->code[a] != G_END && g->code[a] != G_ALT)
                    a += 2;
                if (g->code[a] == G_END)
                    break;
                a += 2;
            }
        }
    }
    /* edges r -> t: t referred to where only nullable elements precede it */
    int32_t ne = 0;
    for (int32_t r = 0; r < nr; r++) {
        eoff[r] = ne;
        bool open = true; /* still at a left position of this alternative */
        for (int64_t i = g->rule_start[r]; g->code[i] != G_END; i += 2) {
            if (g->code[i] == G_ALT) {
                open = true;
            } else if (open && g->code[i] == G_CLASS) {
                open = false;
            } else if (open) {
                edge[ne++] = g->code[i + 1];
                open = nul[g->code[i + 1]];
            }
        }
    }
    eoff[nr] = ne;
    /* depth first; mark 1 on the path, 2 done; stack: (rule, next edge) */
    for (int32_t s = 0; s < nr && !rc; s++) {
        if (mark[s])
            continue;
        int32_t sp = 0;
        stack[sp++] = s;
        stack[sp++] = eoff[s];
        mark[s] = 1;
        while (sp && !rc) {
            int32_t r = stack[sp - 2], e = stack[sp - 1];
            if (e == eoff[r + 1]) {
                mark[r] = 2;
                sp -= 2;
                continue;
            }
            stack[sp - 1] = e + 1;
            int32_t t = edge[e];
            if (mark[t] == 1) {
                int32_t named = -1; /* name the cycle by a named rule on it */
                for (int32_t k = sp - 2; k >= 0 && named < 0; k -= 2) {
                    if (names[stack[k]])
                        named = stack[k];
                    if (stack[k] == t)
                        break;
                }
                if (named >= 0)
                    snprintf(err, err_size, "bad grammar: rule '%s' is left-recursive (it can reach itself "
                             "before matching a character)", names[named]);
                else
                    snprintf(err, err_size, "bad grammar: left recursion (a repetition of something that "
                             "can be empty)");
                rc = -1;
            } else if (!mark[t]) {
                mark[t] = 1;
                stack[sp++] = t;
                stack[sp++] = eoff[t];
            }
        }
    }
out:
    BASE_FREE(nul, mark, eoff, edge, stack);
    return rc;
}

void llm_grammar_free(struct llm_grammar *g)
{
    if (!g)
        return;
    BASE_FREE(g->code, g->rule_start, g->cls, g->ranges, g);
}

int llm_grammar_parse(const char *text, size_t len, struct llm_grammar **out, char *err, size_t err_size)
{
    char dummy[1];
    if (!err || !err_size)
        err = dummy, err_size = sizeof dummy;
    *out = NULL;
    if (len > MAX_TEXT) {
        snprintf(err, err_size, "bad grammar: longer than %d bytes", MAX_TEXT);
        return -1;
    }
    struct parser ps = {.s = text, .end = text + len, .p = text, .line = 1, .line_start = text,
                        .err = err, .err_size = err_size};
    int rc = 0;
    skip_space(&ps, true);
    while (!rc && ps.p < ps.end) {
        rc = parse_rule(&ps);
        skip_space(&ps, true);
    }
    struct llm_grammar *g = NULL;
    int32_t root = -1;
    if (!rc) {
        for (int32_t i = 0; i < ps.n_rules; i++) {
            if (!ps.rules[i].defined) {
                snprintf(err, err_size, "bad grammar at %d:%d: rule '%s' is not defined", ps.rules[i].line,
                         ps.rules[i].col, ps.rules[i].name);
                rc = -1;
                break;
            }
            if (ps.rules[i].name && !strcmp(ps.rules[i].name, "root"))
                root = i;
        }
        if (!rc && root < 0) {
            snprintf(err, err_size, "bad grammar: no rule 'root'");
            rc = -1;
        }
    }
    if (!rc) {
        g = calloc(1, sizeof *g);
        int64_t total = 0;
        for (int32_t i = 0; i < ps.n_rules; i++)
            total += ps.rules[i].body.n + 2;
        if (total > MAX_CODE) {
            snprintf(err, err_size, "bad grammar: too large (its repetitions expand past %d elements)",
                     MAX_CODE / 2);
            rc = -1;
        } else if (g) {
            g->code = malloc((size_t)total * sizeof *g->code);
            g->rule_start = malloc((size_t)ps.n_rules * sizeof *g->rule_start);
        }
        if (!rc && (!g || !g->code || !g->rule_start)) {
            snprintf(err, err_size, "out of memory");
            rc = -1;
        }
    }
    if (!rc) {
        int64_t at = 0;
        for (int32_t i = 0; i < ps.n_rules; i++) {
            g->rule_start[i] = (int32_t)at;
            if (ps.rules[i].body.n)
                memcpy(g->code + at, ps.rules[i].body.p, (size_t)ps.rules[i].body.n * sizeof *g->code);
            at += ps.rules[i].body.n;
            g->code[at++] = G_END;
            g->code[at++] = 0;
        }
        g->n_code = at;
        g->n_rules = ps.n_rules;
        g->root = root;
        g->cls = ps.cls, ps.cls = NULL;
        g->n_cls = ps.n_cls;
        g->ranges = (uint32_t *)ps.ranges.p, ps.ranges.p = NULL;
        g->n_ranges = ps.ranges.n;
        char **names = malloc((size_t)ps.n_rules * sizeof *names);
        if (!names) {
            snprintf(err, err_size, "out of memory");
            rc = -1;
        } else {
            for (int32_t i = 0; i < ps.n_rules; i++)
                names[i] = ps.rules[i].name;
            rc = check_left_rec(g, names, err, err_size);
            free(names);
        }
    }
    for (int32_t i = 0; i < ps.n_rules; i++) {
        free(ps.rules[i].name);
        free(ps.rules[i].body.p);
    }
    BASE_FREE(ps.rules, ps.cls, ps.ranges.p);
    if (rc) {
        llm_grammar_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

/* ==== the matcher's states ====
 *
 * A state: n stacks, each stored as its length then its entries (code
 * positions, bottom first) in one int32 buffer, plus a partial code point.
 */

struct gstate {
    int32_t *d;     /* [len, entries...] per stack */
    int64_t n, cap; /* int32s used */
    int32_t n_stacks;
    bool any_empty; /* some stack is empty: the text may end here */
    /* a code point begun: its bits so far, bytes still to come, and the
     * range of code points it may still become */
    uint32_t cp, lo, hi;
    int8_t need;
};

static bool st_reserve(struct gstate *s, int64_t more)
{
    if (s->n + more <= s->cap)
        return true;
    int64_t cap = s->cap ? s->cap : 256;
    while (cap < s->n + more)
        cap *= 2;
    int32_t *q = realloc(s->d, (size_t)cap * sizeof *q);
    if (!q)
        return false;
    s->d = q;
    s->cap = cap;
    return true;
}

static bool class_match(const struct llm_grammar *g, int32_t ci, uint32_t c)
{
    const struct gclass *k = &g->cls[ci];
    if (!k->n)
        return k->neg;
    const uint32_t *r = g->ranges + k->off;
    bool in = false;
    for (int32_t i = 0; i < k->n && !in; i++)
        in = c >= r[2 * i] && c <= r[2 * i + 1];
    return in != k->neg;
}

/* can class ci match some code point in [lo, hi]? */
static bool class_meets(const struct llm_grammar *g, int32_t ci, uint32_t lo, uint32_t hi)
{
    const struct gclass *k = &g->cls[ci];
    if (!k->n)
        return k->neg;
    const uint32_t *r = g->ranges + k->off;
    if (!k->neg) {
        for (int32_t i = 0; i < k->n; i++)
            if (r[2 * i] <= hi && r[2 * i + 1] >= lo)
                return true;
        return false;
    }
    /* negated: is [lo, hi] not wholly covered by the ranges? walk up from lo */
    uint32_t at = lo;
    for (bool moved = true; moved;) {
        moved = false;
        for (int32_t i = 0; i < k->n; i++)
            if (r[2 * i] <= at && r[2 * i + 1] >= at) {
                if (r[2 * i + 1] >= hi)
                    return false;
                at = r[2 * i + 1] + 1;
                moved = true;
            }
    }
    return true;
}

struct llm_matcher {
    const struct llm_grammar *g;
    const struct llm_vocab *v;
    int32_t n_vocab;
    /* the trie of token pieces: node i's children are edges
     * [child_off[i], child_off[i] + n_child[i]) of (edge_byte, edge_node);
     * its tokens tok[tok_off[i] .. tok_off[i+1]) */
    int32_t n_nodes;
    int32_t *child_off, *n_child, *edge_node;
    uint8_t *edge_byte;
    int32_t *tok_off, *tok;
    int32_t max_depth;
    const int32_t *eog;
    int32_t n_eog;
    /* the current state, and scratch */
    struct gstate cur;
    struct gstate *level; /* (max_depth + 1) states of the trie walk */
    int32_t *arena;       /* (MAX_DEPTH, MAX_DEPTH + 1): a stack per expansion depth */
    int64_t budget;       /* expansions left for this step (EXPAND_BUDGET each) */
    /* dedup of stacks in a state being built */
    uint64_t *hash_slots; /* hash << 32 | (stack start + 1); 0 empty */
    int64_t hash_cap, hash_n; /* allocated, in use */
    /* the mask cache */
    struct {
        int32_t *key;
        int64_t key_len;
        uint64_t hash;
        uint32_t *mask;
    } cache[CACHE_SLOTS];
    int32_t cache_next, cache_used;
    int32_t mask_words;
    /* the transitions memo (see "Masks" above): states met in trie walks,
     * interned by their key (state_key), with what each byte makes of them */
    int32_t *mw;          /* the states' keys, one after another */
    size_t mw_cap;
    int64_t mw_n;
    struct mstate {
        int64_t off;      /* key in mw */
        int64_t tr;       /* transitions in mt: 256 (no code point begun) or 64 (continuation bytes) */
        int32_t len;      /* key words */
        int32_t n_stacks;
        int32_t base;     /* the state of the same stacks with no code point begun (itself if none is) */
        int8_t need;      /* bytes of a code point still to come */
        bool any_empty;
    } *ms;
    size_t ms_cap;
    int32_t ms_n;
    int32_t *mt;          /* 0 not known yet, -1 the byte is refused, else the next state + 1 */
    size_t mt_cap;
    int64_t mt_n;
    uint64_t *mh;         /* intern table: (hash >> 32 | 1) << 32 | (state + 1); 0 empty */
    int64_t mh_n;         /* slots (a power of two, or 0) */
    size_t memo_max;      /* bytes the memo may take (llm_matcher_set_memo_bytes) */
    /* what a whole code point makes of a state, by the stacks whose top
     * class accepts it (advance_cp depends on nothing else): (base state,
     * those stacks as bits) -> the next state + 1, or -1 (none) */
    struct pent {
        uint64_t bits;
        int32_t base;
        int32_t next; /* 0: an empty slot */
    } *mp;
    int64_t mp_n, mp_used; /* slots (a power of two, or 0), in use */
    struct llm_matcher_stats stats;
    char *piece;
    int32_t piece_cap;
};

static void memo_clear(struct llm_matcher *m);
static void memo_free(struct llm_matcher *m);

static uint64_t hash_words(const int32_t *w, int64_t n, uint64_t h)
{
    for (int64_t i = 0; i < n; i++) {
        h ^= (uint32_t)w[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static bool dedup_reset(struct llm_matcher *m, int64_t want)
{
    int64_t cap = 64;
    while (cap < 2 * want)
        cap *= 2;
    if (cap > m->hash_cap) {
        uint64_t *q = realloc(m->hash_slots, (size_t)cap * sizeof *q);
        if (!q)
            return false;
        m->hash_slots = q;
        m->hash_cap = cap;
    }
    m->hash_n = cap;
    memset(m->hash_slots, 0, (size_t)cap * sizeof *m->hash_slots);
    return true;
}

static uint64_t stack_hash(const int32_t *st, int32_t len)
{
    return hash_words(st, len, 0xcbf29ce484222325ULL ^ (uint64_t)len);
}

/* the table twice as large, with out's stacks in it again */
static bool dedup_grow(struct llm_matcher *m, const struct gstate *out)
{
    if (!dedup_reset(m, m->hash_n))
        return false;
    int64_t mask = m->hash_n - 1;
    for (int64_t at = 0; at < out->n; at += 1 + out->d[at]) {
        int32_t len = out->d[at];
        if (!len)
            continue;
        uint64_t h = stack_hash(out->d + at + 1, len);
        int64_t i = (int64_t)(h & (uint64_t)mask);
        while (m->hash_slots[i])
            i = (i + 1) & mask;
        m->hash_slots[i] = (uint64_t)((uint32_t)(h >> 32) | 1) << 32 | (uint64_t)(at + 1);
    }
    return true;
}

/*
 * Append stack st (len entries) to state out unless an equal one is there.
 * The top must be a class, or the stack empty.
 */
static void state_add(struct llm_matcher *m, struct gstate *out, const int32_t *st, int32_t len)
{
    if (out->n_stacks >= MAX_STACKS)
        return;
    if (!len) {
        if (!out->any_empty) {
            out->any_empty = true;
            if (st_reserve(out, 1)) {
                out->d[out->n++] = 0;
                out->n_stacks++;
            }
        }
        return;
    }
    if (2 * (int64_t)(out->n_stacks + 1) > m->hash_n && !dedup_grow(m, out))
        return;
    uint64_t h = stack_hash(st, len);
    uint32_t h32 = (uint32_t)(h >> 32) | 1;
    int64_t mask = m->hash_n - 1;
    for (int64_t i = (int64_t)(h & (uint64_t)mask);; i = (i + 1) & mask) {
        uint64_t s = m->hash_slots[i];
        if (!s) {
            if (!st_reserve(out, len + 1))
                return;
            m->hash_slots[i] = (uint64_t)h32 << 32 | (uint64_t)(out->n + 1);
            out->d[out->n++] = len;
            memcpy(out->d + out->n, st, (size_t)len * sizeof *st);
            out->n += len;
            out->n_stacks++;
            return;
        }
        if ((uint32_t)(s >> 32) == h32) {
            int64_t at = (int64_t)(s & 0xffffffffu) - 1;
            if (out->d[at] == len && !memcmp(out->d + at + 1, st, (size_t)len * sizeof *st))
                return;
        }
    }
}

/*
 * Expand stack src (whose top may be a rule reference or a finished
 * alternative) into stacks whose tops are classes, adding them to out. Each
 * recursion depth works on its own slot of the arena (an alternative's
 * expansion may pop into, and rewrite, entries the next alternative needs).
 * Bounded by MAX_DEPTH, and terminating since left recursion is refused.
 */
static void expand(struct llm_matcher *m, struct gstate *out, const int32_t *src, int32_t len, int32_t depth)
{
    const int32_t *code = m->g->code;
    if (depth >= MAX_DEPTH || len > MAX_DEPTH || m->budget <= 0)
        return;
    m->budget--;
    int32_t *st = m->arena + (int64_t)depth * (MAX_DEPTH + 1);
    if (st != src)
        memcpy(st, src, (size_t)len * sizeof *st);
    while (len) {
        int32_t pos = st[len - 1];
        int32_t kind = code[pos];
        if (kind == G_END || kind == G_ALT) {
            len--; /* the alternative is finished: back to the caller's continuation */
            continue;
        }
        if (kind == G_CLASS) {
            state_add(m, out, st, len);
            return;
        }
        /* a rule reference: its continuation stays (unless it would pop at
         * once), then each alternative's start on top */
        int32_t r = code[pos + 1];
        int32_t cont = pos + 2;
        int32_t base = len - 1;
        if (code[cont] != G_END && code[cont] != G_ALT)
            st[base++] = cont;
        if (base + 1 > MAX_DEPTH)
            return;
        int32_t a = m->g->rule_start[r];
        for (;;) {
            st[base] = a;
            expand(m, out, st, base + 1, depth + 1);
            while (code[a] != G_END && code[a] != G_ALT)
                a += 2;
            if (code[a] == G_END)
                break;
            a += 2;
        }
        return;
    }
    state_add(m, out, st, 0);
}

/* the stacks of `from` that accept code point c (or, partial, some code
 * point in [lo, hi]) */
static void advance_cp(struct llm_matcher *m, const struct gstate *from, struct gstate *out, uint32_t c)
{
    const int32_t *code = m->g->code;
    out->n = 0;
    out->n_stacks = 0;
    out->any_empty = false;
    out->need = 0;
    if (!dedup_reset(m, from->n_stacks * 4 + 16))
        return;
    m->budget = EXPAND_BUDGET;
    int32_t *work = m->arena;
    for (int64_t i = 0; i < from->n;) {
        int32_t len = from->d[i];
        const int32_t *st = from->d + i + 1;
        i += 1 + len;
        if (!len)
            continue;
        int32_t pos = st[len - 1];
        if (!class_match(m->g, code[pos + 1], c))
            continue;
        if (len > MAX_DEPTH)
            continue;
        memcpy(work, st, (size_t)len * sizeof *st);
        work[len - 1] = pos + 2;
        expand(m, out, work, len, 0);
    }
}

static bool state_copy(struct gstate *dst, const struct gstate *src)
{
    dst->n = 0;
    if (!st_reserve(dst, src->n))
        return false;
    if (src->n)
        memcpy(dst->d, src->d, (size_t)src->n * sizeof *src->d);
    dst->n = src->n;
    dst->n_stacks = src->n_stacks;
    dst->any_empty = src->any_empty;
    dst->cp = src->cp, dst->lo = src->lo, dst->hi = src->hi, dst->need = src->need;
    return true;
}

/* does some stack of s accept a code point in [lo, hi]? */
static bool state_meets(const struct llm_matcher *m, const struct gstate *s, uint32_t lo, uint32_t hi)
{
    for (int64_t i = 0; i < s->n;) {
        int32_t len = s->d[i];
        if (len && class_meets(m->g, m->g->code[s->d[i + len] + 1], lo, hi))
            return true;
        i += 1 + len;
    }
    return false;
}

/*
 * State `from` after byte b, into out (which may be from itself only when no
 * code point completes: the caller passes distinct buffers). Returns false
 * when the byte cannot continue the text.
 */
static bool advance_byte(struct llm_matcher *m, const struct gstate *from, struct gstate *out, uint8_t b)
{
    m->stats.steps++;
    if (!from->need) {
        if (b < 0x80) {
            advance_cp(m, from, out, b);
            return out->n_stacks > 0;
        }
        int need;
        uint32_t cp, lo, hi;
        if (b >= 0xc2 && b <= 0xdf)
            need = 1, cp = b & 0x1f, lo = 0x80, hi = 0x7ff;
        else if (b >= 0xe0 && b <= 0xef)
            need = 2, cp = b & 0x0f, lo = 0x800, hi = 0xffff;
        else if (b >= 0xf0 && b <= 0xf4)
            need = 3, cp = b & 0x07, lo = 0x10000, hi = 0x10ffff;
        else
            return false;
        uint32_t plo = cp << (6 * need), phi = plo | ((1u << (6 * need)) - 1);
        lo = plo > lo ? plo : lo;
        hi = phi < hi ? phi : hi;
        if (lo > hi || !state_meets(m, from, lo, hi))
            return false;
        if (!state_copy(out, from))
            return false;
        out->cp = cp, out->lo = lo, out->hi = hi, out->need = (int8_t)need;
        return true;
    }
    if ((b & 0xc0) != 0x80)
        return false;
    uint32_t cp = from->cp << 6 | (b & 0x3f);
    int need = from->need - 1;
    if (!need) {
        if (cp < from->lo || cp > from->hi || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        advance_cp(m, from, out, cp);
        return out->n_stacks > 0;
    }
    uint32_t plo = cp << (6 * need), phi = plo | ((1u << (6 * need)) - 1);
    uint32_t lo = plo > from->lo ? plo : from->lo, hi = phi < from->hi ? phi : from->hi;
    if (lo > hi || (lo >= 0xd800 && hi <= 0xdfff) || !state_meets(m, from, lo, hi))
        return false;
    if (!state_copy(out, from))
        return false;
    out->cp = cp, out->lo = lo, out->hi = hi, out->need = (int8_t)need;
    return true;
}

/* ==== the matcher ==== */

static void initial_state(struct llm_matcher *m)
{
    struct gstate *s = &m->cur;
    s->n = 0;
    s->n_stacks = 0;
    s->any_empty = false;
    s->need = 0;
    if (!dedup_reset(m, 16))
        return;
    m->budget = EXPAND_BUDGET;
    int32_t *work = m->arena;
    int32_t a = m->g->rule_start[m->g->root];
    const int32_t *code = m->g->code;
    for (;;) {
        work[0] = a;
        expand(m, s, work, 1, 0);
        while (code[a] != G_END && code[a] != G_ALT)
            a += 2;
        if (code[a] == G_END)
            break;
        a += 2;
    }
}

struct piece_ent {
    const char *s;
    int32_t len;
    int32_t id;
};

static int piece_cmp(const void *a, const void *b)
{
    const struct piece_ent *x = a, *y = b;
    int32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, (size_t)n);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* the trie over the vocabulary's pieces: built breadth-first from the sorted
 * pieces, so each node's children are contiguous */
static int build_trie(struct llm_matcher *m)
{
    int32_t nv = m->n_vocab;
    struct piece_ent *pe = malloc((size_t)nv * sizeof *pe);
    char *store = NULL;
    size_t store_n = 0, store_cap = 0;
    int32_t np = 0;
    if (!pe)
        return -1;
    int32_t *offs = malloc((size_t)nv * sizeof *offs);
    if (!offs) {
        free(pe);
        return -1;
    }
    char buf[512];
    for (int32_t id = 0; id < nv; id++) {
        if (llm_vocab_is_eog(m->v, id))
            continue;
        int32_t k = llm_token_to_piece(m->v, id, buf, sizeof buf, 0, false);
        if (k <= 0)
            continue; /* control, unused, or over 512 bytes: never chosen under a grammar */
        if (base_grow((void **)&store, &store_cap, store_n + (size_t)k, 1)) {
            free(store), free(pe), free(offs);
            return -1;
        }
        memcpy(store + store_n, buf, (size_t)k);
        offs[np] = (int32_t)store_n;
        pe[np] = (struct piece_ent){NULL, k, id};
        store_n += (size_t)k;
        np++;
    }
    for (int32_t i = 0; i < np; i++)
        pe[i].s = store + offs[i];
    free(offs);
    qsort(pe, (size_t)np, sizeof *pe, piece_cmp);
    /* nodes: at most 1 + total bytes */
    int64_t maxn = 1 + (int64_t)store_n;
    if (maxn > INT32_MAX / 2) {
        free(store), free(pe);
        return -1;
    }
    m->child_off = calloc((size_t)maxn, sizeof *m->child_off);
    m->n_child = calloc((size_t)maxn, sizeof *m->n_child);
    m->edge_node = malloc((size_t)maxn * sizeof *m->edge_node);
    m->edge_byte = malloc((size_t)maxn);
    m->tok_off = calloc((size_t)maxn + 1, sizeof *m->tok_off);
    m->tok = malloc((size_t)(np ? np : 1) * sizeof *m->tok);
    /* the pieces' range [lo, hi) under each node, per node, breadth-first */
    int32_t *rlo = malloc((size_t)maxn * sizeof *rlo), *rhi = malloc((size_t)maxn * sizeof *rhi),
            *dep = malloc((size_t)maxn * sizeof *dep);
    if (!m->child_off || !m->n_child || !m->edge_node || !m->edge_byte || !m->tok_off || !m->tok || !rlo ||
        !rhi || !dep) {
        free(rlo), free(rhi), free(dep), free(store), free(pe);
        return -1;
    }
    int32_t nn = 1, nt = 0;
    rlo[0] = 0, rhi[0] = np, dep[0] = 0;
    m->max_depth = 0;
    for (int32_t i = 0; i < nn; i++) {
        int32_t lo = rlo[i], hi = rhi[i], d = dep[i];
        /* the tokens ending here come first in sorted order */
        m->tok_off[i] = nt;
        while (lo < hi && pe[lo].len == d)
            m->tok[nt++] = pe[lo++].id;
        m->child_off[i] = nn;
        while (lo < hi) {
            uint8_t b = (uint8_t)pe[lo].s[d];
            int32_t e = lo;
            while (e < hi && (uint8_t)pe[e].s[d] == b)
                e++;
            m->edge_byte[nn] = b;
            m->edge_node[nn] = nn;
            rlo[nn] = lo, rhi[nn] = e, dep[nn] = d + 1;
            if (d + 1 > m->max_depth)
                m->max_depth = d + 1;
            nn++;
            m->n_child[i]++;
            lo = e;
        }
    }
    m->tok_off[nn] = nt;
    m->n_nodes = nn;
    free(rlo), free(rhi), free(dep), free(store), free(pe);
    return 0;
}

struct llm_matcher *llm_matcher_init(const struct llm_grammar *g, const struct llm_vocab *v)
{
    struct llm_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->g = g;
    m->v = v;
    m->memo_max = MEMO_BYTES;
    m->arena = malloc((size_t)MAX_DEPTH * (MAX_DEPTH + 1) * sizeof *m->arena);
    if (v) {
        m->n_vocab = llm_vocab_n_tokens(v);
        m->mask_words = (m->n_vocab + 31) / 32;
        m->n_eog = llm_vocab_eog_ids(v, &m->eog);
    }
    if (!m->arena || (v && (m->n_vocab <= 0 || build_trie(m)))) {
        llm_matcher_free(m);
        return NULL;
    }
    m->level = calloc((size_t)m->max_depth + 2, sizeof *m->level);
    if (!m->level) {
        llm_matcher_free(m);
        return NULL;
    }
    llm_matcher_reset(m);
    return m;
}

void llm_matcher_free(struct llm_matcher *m)
{
    if (!m)
        return;
    free(m->child_off), free(m->n_child), free(m->edge_node), free(m->edge_byte);
    free(m->tok_off), free(m->tok);
    free(m->cur.d), free(m->arena), free(m->hash_slots), free(m->piece);
    if (m->level)
        for (int32_t i = 0; i <= m->max_depth + 1; i++)
            free(m->level[i].d);
    free(m->level);
    for (int i = 0; i < CACHE_SLOTS; i++) {
        free(m->cache[i].key);
        free(m->cache[i].mask);
    }
    memo_free(m);
    free(m);
}

void llm_matcher_set_grammar(struct llm_matcher *m, const struct llm_grammar *g)
{
    m->g = g;
    for (int i = 0; i < CACHE_SLOTS; i++) { /* the masks were the old grammar's */
        free(m->cache[i].key);
        m->cache[i].key = NULL;
        m->cache[i].key_len = -1;
    }
    m->cache_used = 0;
    m->cache_next = 0;
    memo_clear(m); /* so are the memo's states */
    llm_matcher_reset(m);
}

void llm_matcher_set_memo_bytes(struct llm_matcher *m, size_t bytes)
{
    memo_free(m);
    m->memo_max = bytes;
}

void llm_matcher_reset(struct llm_matcher *m)
{
    initial_state(m);
}

bool llm_matcher_can_end(const struct llm_matcher *m)
{
    return m->cur.any_empty && !m->cur.need;
}

bool llm_matcher_done(const struct llm_matcher *m)
{
    return llm_matcher_can_end(m) && m->cur.n_stacks == 1;
}

int llm_matcher_feed(struct llm_matcher *m, const char *bytes, size_t n)
{
    struct gstate *a = &m->level[0], *b = &m->level[1];
    if (!state_copy(a, &m->cur))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!advance_byte(m, a, b, (uint8_t)bytes[i]))
            return -1;
        struct gstate t = *a;
        *a = *b;
        *b = t;
    }
    return state_copy(&m->cur, a) ? 0 : -1;
}

int llm_matcher_accept(struct llm_matcher *m, int32_t token)
{
    if (!m->v || token < 0 || token >= m->n_vocab)
        return -1;
    if (llm_vocab_is_eog(m->v, token))
        return llm_matcher_can_end(m) ? 0 : -1;
    int32_t k = llm_token_to_piece(m->v, token, m->piece, m->piece_cap, 0, false);
    if (k < 0) {
        char *q = realloc(m->piece, (size_t)-k);
        if (!q)
            return -1;
        m->piece = q;
        m->piece_cap = -k;
        k = llm_token_to_piece(m->v, token, m->piece, m->piece_cap, 0, false);
    }
    if (k <= 0)
        return -1;
    return llm_matcher_feed(m, m->piece, (size_t)k);
}

/* the state as words, for the cache's key: stacks then the partial code point */
static int64_t state_key_len(const struct gstate *s)
{
    return s->n + 4;
}

static void state_key(const struct gstate *s, int32_t *key)
{
    if (s->n)
        memcpy(key, s->d, (size_t)s->n * sizeof *key);
    key[s->n] = s->need ? (int32_t)s->cp : 0; /* (stale when no code point is begun) */
    key[s->n + 1] = s->need ? (int32_t)s->lo : 0;
    key[s->n + 2] = s->need ? (int32_t)s->hi : 0;
    key[s->n + 3] = s->need;
}

/* ==== the transitions memo ====
 *
 * advance_byte is a function of the state's content and the byte alone (its
 * scratch, bounds and budget are reset at every call), so what it made of a
 * (state, byte) can be kept and used again. Inside a string or a number a
 * walk meets few distinct states at many trie nodes (every node whose path
 * so far is ordinary characters carries the same state, one per characters
 * left), and the next mask meets them again, so most nodes cost a look-up
 * instead of a step. A byte that completes a code point is looked up by
 * the state's stacks (its base) and which of them accept the code point,
 * so all the characters of a class cost one step. States are interned by
 * their key; the memo holds at
 * most memo_max bytes (MEMO_BYTES unless set) and is emptied before a mask
 * when it holds over half of that. When it is full during a walk, the rest
 * of that subtree is walked with the states themselves, as without it: the
 * same mask either way. */

static size_t memo_bytes(const struct llm_matcher *m)
{
    return m->mw_cap * sizeof *m->mw + m->ms_cap * sizeof *m->ms + m->mt_cap * sizeof *m->mt +
           (size_t)m->mh_n * sizeof *m->mh + (size_t)m->mp_n * sizeof *m->mp;
}

/* what the memo's states and transitions take (memo_bytes is what is allocated) */
static size_t memo_used(const struct llm_matcher *m)
{
    return (size_t)m->mw_n * sizeof *m->mw + (size_t)m->ms_n * sizeof *m->ms + (size_t)m->mt_n * sizeof *m->mt +
           (size_t)m->mh_n * sizeof *m->mh + (size_t)m->mp_n * sizeof *m->mp;
}

static void memo_clear(struct llm_matcher *m)
{
    m->mw_n = 0;
    m->ms_n = 0;
    m->mt_n = 0;
    if (m->mh_n)
        memset(m->mh, 0, (size_t)m->mh_n * sizeof *m->mh);
    if (m->mp_n)
        memset(m->mp, 0, (size_t)m->mp_n * sizeof *m->mp);
    m->mp_used = 0;
}

static void memo_free(struct llm_matcher *m)
{
    free(m->mw), free(m->ms), free(m->mt), free(m->mh), free(m->mp);
    m->mw = NULL, m->ms = NULL, m->mt = NULL, m->mh = NULL, m->mp = NULL;
    m->mw_cap = m->ms_cap = m->mt_cap = 0;
    m->mw_n = m->mt_n = m->mh_n = m->mp_n = m->mp_used = 0;
    m->ms_n = 0;
}

/* room for need elements of elem bytes in *p (room *cap), within memo_max */
static bool memo_grow(struct llm_matcher *m, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap : 1024;
    while (ncap < need)
        ncap *= 2;
    if (memo_bytes(m) + (ncap - *cap) * elem > m->memo_max)
        return false;
    void *q = realloc(*p, ncap * elem);
    if (!q)
        return false;
    *p = q;
    *cap = ncap;
    return true;
}

/* the intern table twice as large (or its first 4096 slots), the states in it again */
static bool memo_rehash(struct llm_matcher *m)
{
    int64_t n = m->mh_n ? 2 * m->mh_n : 4096;
    if (memo_bytes(m) + (size_t)n * sizeof *m->mh > m->memo_max)
        return false;
    uint64_t *q = calloc((size_t)n, sizeof *q);
    if (!q)
        return false;
    for (int32_t i = 0; i < m->ms_n; i++) {
        uint64_t h = hash_words(m->mw + m->ms[i].off, m->ms[i].len, 0xcbf29ce484222325ULL);
        int64_t j = (int64_t)(h & (uint64_t)(n - 1));
        while (q[j])
            j = (j + 1) & (n - 1);
        q[j] = (uint64_t)((uint32_t)(h >> 32) | 1) << 32 | (uint64_t)(i + 1);
    }
    free(m->mh);
    m->mh = q;
    m->mh_n = n;
    return true;
}

/* the memo's number for state s (interned now if new), or -1 when the memo
 * is full; base: the number of the state of s's stacks with no code point
 * begun (-1: s itself, or interned here when s has one begun). s must not
 * be a memo_view (its words would move). */
static int32_t memo_intern(struct llm_matcher *m, const struct gstate *s, int32_t base)
{
    if (s->need && base < 0) {
        struct gstate t = *s;
        t.need = 0, t.cp = t.lo = t.hi = 0;
        if ((base = memo_intern(m, &t, -1)) < 0)
            return -1;
    }
    int64_t kl = state_key_len(s);
    if (kl > INT32_MAX / 2 || m->ms_n >= INT32_MAX / 2 ||
        !memo_grow(m, (void **)&m->mw, &m->mw_cap, (size_t)(m->mw_n + kl), sizeof *m->mw))
        return -1;
    int32_t *key = m->mw + m->mw_n; /* written in place, kept only if new */
    state_key(s, key);
    uint64_t h = hash_words(key, kl, 0xcbf29ce484222325ULL);
    uint32_t h32 = (uint32_t)(h >> 32) | 1;
    if (m->mh_n) {
        int64_t mask = m->mh_n - 1;
        for (int64_t i = (int64_t)(h & (uint64_t)mask); m->mh[i]; i = (i + 1) & mask) {
            if ((uint32_t)(m->mh[i] >> 32) != h32)
                continue;
            int32_t id = (int32_t)(m->mh[i] & 0xffffffffu) - 1;
            if (m->ms[id].len == kl && !memcmp(m->mw + m->ms[id].off, key, (size_t)kl * sizeof *key))
                return id;
        }
    }
    int64_t ntr = s->need ? 64 : 256;
    if (2 * (int64_t)(m->ms_n + 1) > m->mh_n && !memo_rehash(m))
        return -1;
    if (!memo_grow(m, (void **)&m->ms, &m->ms_cap, (size_t)m->ms_n + 1, sizeof *m->ms) ||
        !memo_grow(m, (void **)&m->mt, &m->mt_cap, (size_t)(m->mt_n + ntr), sizeof *m->mt))
        return -1;
    int32_t id = m->ms_n++;
    m->stats.states++;
    m->ms[id] = (struct mstate){m->mw_n, m->mt_n, (int32_t)kl, s->n_stacks, s->need ? base : id, s->need,
                                s->any_empty};
    m->mw_n += kl;
    memset(m->mt + m->mt_n, 0, (size_t)ntr * sizeof *m->mt);
    m->mt_n += ntr;
    int64_t mask = m->mh_n - 1, i = (int64_t)(h & (uint64_t)mask);
    while (m->mh[i])
        i = (i + 1) & mask;
    m->mh[i] = (uint64_t)h32 << 32 | (uint64_t)(id + 1);
    return id;
}

static uint64_t mix_pent(int32_t base, uint64_t bits)
{
    uint64_t x = bits * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uint32_t)base * 0xBF58476D1CE4E5B9ULL;
    return x ^ x >> 29;
}

/* state id of the memo as a gstate to read (its words stay in the memo) */
static void memo_view(const struct llm_matcher *m, int32_t id, struct gstate *v)
{
    const struct mstate *e = &m->ms[id];
    const int32_t *k = m->mw + e->off;
    int64_t n = e->len - 4;
    v->d = (int32_t *)k;
    v->n = v->cap = n;
    v->n_stacks = e->n_stacks;
    v->any_empty = e->any_empty;
    v->cp = (uint32_t)k[n], v->lo = (uint32_t)k[n + 1], v->hi = (uint32_t)k[n + 2];
    v->need = (int8_t)k[n + 3];
}

/* what byte b makes of memo state id: the next state's id, -1 when b is
 * refused, or -2 when the memo is full (the next state is then in
 * level[d + 1], as a walk without the memo has it) */
static int32_t memo_next(struct llm_matcher *m, int32_t id, uint8_t b, int32_t d)
{
    const struct mstate *e = &m->ms[id];
    int64_t at;
    if (e->need) { /* a code point begun: only continuation bytes */
        if ((b & 0xc0) != 0x80)
            return -1;
        at = e->tr + (b - 0x80);
    } else {
        at = e->tr + b;
    }
    int32_t t = m->mt[at];
    if (t)
        return t > 0 ? t - 1 : -1;
    /* a byte that ends a code point: by the stacks that accept it (as
     * advance_byte does: the code point checked, then advance_cp) */
    struct pent *pe = NULL;
    uint64_t bits = 0;
    int32_t base = e->base;
    if ((!e->need && b < 0x80) || e->need == 1) {
        const int32_t *k = m->mw + e->off;
        int64_t n = e->len - 4;
        uint32_t cp = b;
        if (e->need) {
            cp = (uint32_t)k[n] << 6 | (b & 0x3f);
            if (cp < (uint32_t)k[n + 1] || cp > (uint32_t)k[n + 2] || (cp >= 0xd800 && cp <= 0xdfff)) {
                m->mt[at] = -1;
                return -1;
            }
        }
        if (e->n_stacks <= 64) {
            const struct mstate *eb = &m->ms[base];
            const int32_t *w = m->mw + eb->off, *end = w + eb->len - 4;
            for (int i = 0; w < end; i++, w += 1 + *w)
                if (*w && *w <= MAX_DEPTH && class_match(m->g, m->g->code[w[*w] + 1], cp))
                    bits |= 1ull << i;
            if (!bits) {
                m->mt[at] = -1;
                return -1;
            }
            if (2 * (m->mp_used + 1) > m->mp_n) { /* the table twice as large */
                int64_t nn = m->mp_n ? 2 * m->mp_n : 4096;
                struct pent *q = memo_bytes(m) + (size_t)nn * sizeof *q <= m->memo_max ? calloc((size_t)nn, sizeof *q) : NULL;
                if (q) {
                    for (int64_t i = 0; i < m->mp_n; i++)
                        if (m->mp[i].next) {
                            uint64_t h = mix_pent(m->mp[i].base, m->mp[i].bits);
                            int64_t j = (int64_t)(h & (uint64_t)(nn - 1));
                            while (q[j].next)
                                j = (j + 1) & (nn - 1);
                            q[j] = m->mp[i];
                        }
                    free(m->mp);
                    m->mp = q;
                    m->mp_n = nn;
                }
            }
            if (2 * (m->mp_used + 1) <= m->mp_n) {
                uint64_t h = mix_pent(base, bits);
                int64_t j = (int64_t)(h & (uint64_t)(m->mp_n - 1));
                while (m->mp[j].next && (m->mp[j].base != base || m->mp[j].bits != bits))
                    j = (j + 1) & (m->mp_n - 1);
                pe = &m->mp[j];
                if (pe->next) {
                    m->mt[at] = pe->next;
                    return pe->next > 0 ? pe->next - 1 : -1;
                }
            }
        }
    }
    struct gstate v;
    memo_view(m, id, &v);
    if (!advance_byte(m, &v, &m->level[d + 1], b)) {
        m->mt[at] = -1;
        if (pe) {
            *pe = (struct pent){bits, base, -1};
            m->mp_used++;
        }
        return -1;
    }
    int32_t nx = memo_intern(m, &m->level[d + 1], m->level[d + 1].need ? base : -1);
    if (nx < 0)
        return -2;
    m->mt[at] = nx + 1;
    if (pe) {
        *pe = (struct pent){bits, base, nx + 1};
        m->mp_used++;
    }
    return nx;
}

/* walk the trie under node, in state level[d], marking tokens */
static void walk(struct llm_matcher *m, int32_t node, int32_t d, uint32_t *mask)
{
    int32_t c0 = m->child_off[node], nc = m->n_child[node];
    for (int32_t c = c0; c < c0 + nc; c++) {
        m->stats.nodes++;
        if (!advance_byte(m, &m->level[d], &m->level[d + 1], m->edge_byte[c]))
            continue;
        for (int32_t t = m->tok_off[c]; t < m->tok_off[c + 1]; t++)
            mask[m->tok[t] >> 5] |= 1u << (m->tok[t] & 31);
        walk(m, c, d + 1, mask);
    }
}

/* walk the trie under node, in memo state id (at depth d), marking tokens */
static void walk_memo(struct llm_matcher *m, int32_t node, int32_t id, int32_t d, uint32_t *mask)
{
    int32_t c0 = m->child_off[node], nc = m->n_child[node];
    int64_t tr = m->ms[id].tr; /* (its transitions stay where they are; ms may move) */
    bool begun = m->ms[id].need;
    m->stats.nodes += (uint64_t)nc;
    for (int32_t c = c0; c < c0 + nc; c++) {
        uint8_t b = m->edge_byte[c];
        if (begun && (b & 0xc0) != 0x80)
            continue;
        int32_t t = m->mt[tr + (begun ? b - 0x80 : b)]; /* the look-up of memo_next, inline */
        if (t < 0)
            continue;
        int32_t nx = t ? t - 1 : memo_next(m, id, b, d);
        if (nx == -1)
            continue;
        for (int32_t t = m->tok_off[c]; t < m->tok_off[c + 1]; t++)
            mask[m->tok[t] >> 5] |= 1u << (m->tok[t] & 31);
        if (!m->n_child[c]) /* a leaf (most nodes are): nothing below */
            continue;
        if (nx >= 0)
            walk_memo(m, c, nx, d + 1, mask);
        else
            walk(m, c, d + 1, mask);
    }
}

int64_t llm_matcher_mask(struct llm_matcher *m, uint32_t *mask)
{
    if (!m->v)
        return -1;
    m->stats.masks++;
    int64_t kl = state_key_len(&m->cur);
    int32_t *key = malloc((size_t)kl * sizeof *key);
    if (!key)
        return -1;
    state_key(&m->cur, key);
    uint64_t h = hash_words(key, kl, 0xcbf29ce484222325ULL);
    int slot = -1;
    for (int i = 0; i < m->cache_used; i++)
        if (m->cache[i].hash == h && m->cache[i].key_len == kl &&
            !memcmp(m->cache[i].key, key, (size_t)kl * sizeof *key)) {
            slot = i;
            break;
        }
    if (slot >= 0) {
        m->stats.cache_hits++;
        memcpy(mask, m->cache[slot].mask, (size_t)m->mask_words * sizeof *mask);
        free(key);
    } else {
        memset(mask, 0, (size_t)m->mask_words * sizeof *mask);
        if (memo_used(m) > m->memo_max / 2)
            memo_clear(m);
        int32_t root = memo_intern(m, &m->cur, -1);
        if (root >= 0)
            walk_memo(m, 0, root, 0, mask);
        else if (state_copy(&m->level[0], &m->cur))
            walk(m, 0, 0, mask);
        int i = m->cache_next;
        uint32_t *cm = m->cache[i].mask ? m->cache[i].mask : malloc((size_t)m->mask_words * sizeof *cm);
        if (cm) {
            memcpy(cm, mask, (size_t)m->mask_words * sizeof *cm);
            free(m->cache[i].key);
            m->cache[i].key = key;
            m->cache[i].key_len = kl;
            m->cache[i].hash = h;
            m->cache[i].mask = cm;
            m->cache_next = (m->cache_next + 1) % CACHE_SLOTS;
            if (m->cache_used < CACHE_SLOTS)
                m->cache_used++;
        } else {
            free(key);
        }
    }
    if (llm_matcher_can_end(m))
        for (int32_t i = 0; i < m->n_eog; i++)
            if (m->eog[i] >= 0 && m->eog[i] < m->n_vocab)
                mask[m->eog[i] >> 5] |= 1u << (m->eog[i] & 31);
    int64_t n = 0;
    for (int32_t i = 0; i < m->mask_words; i++)
        n += __builtin_popcount(mask[i]);
    return n;
}

struct llm_matcher_stats llm_matcher_get_stats(const struct llm_matcher *m)
{
    return m->stats;
}

int32_t llm_matcher_trie_nodes(const struct llm_matcher *m)
{
    return m->n_nodes;
}
