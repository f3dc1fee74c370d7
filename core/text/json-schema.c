/*
 * json-schema.c - JSON Schema to GBNF, for --json-schema, and the grammar
 * of any JSON value, for --format json.
 *
 * The schema is user input: it is parsed here by a small JSON reader of its
 * own (core links no JSON library), nesting and sizes bounded, and every
 * keyword is either translated or refused by name: a schema is never
 * silently loosened. Annotations (title, description, $schema, $id,
 * $comment, default, examples) constrain nothing and are passed over.
 *
 * What the grammar generates is always valid under the schema, and compact
 * (no whitespace): properties in the schema's order, required ones always,
 * optional ones or not. Some choices narrow the language to keep it exact:
 * numbers have at most 15 integer and 15 fraction digits; a bounded
 * number has no exponent; oneOf is generated as anyOf (alternatives should
 * be disjoint: a value matching two of them fails oneOf); a string with a
 * pattern is generated as a whole match of the pattern (which the
 * unanchored search of JSON Schema then finds), its characters never
 * needing escapes; date's February stops at the 28th; extra properties
 * (additionalProperties true or a schema, beside declared ones) have names
 * without escapes that are none of the declared ones.
 * docs/structured-output.md lists the subset.
 */
#include "core/llm.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_OUT (4 << 20) /* bytes of GBNF */
#define NUM_DIGITS 15

/* ==== a JSON reader ==== */

enum jkind { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jval {
    enum jkind kind;
    bool b;
    double num;
    char *s;             /* J_STR: decoded (UTF-8, NUL-free checked); J_NUM: its text */
    size_t slen;
    struct jval **items; /* J_ARR, J_OBJ (values) */
    char **keys;         /* J_OBJ */
    size_t n;
};

struct jreader {
    const char *p, *end;
    char *err;
    size_t err_size;
    bool failed;
};

static void *jfail(struct jreader *r, const char *msg)
{
    if (!r->failed)
        snprintf(r->err, r->err_size, "bad JSON schema: %s", msg);
    r->failed = true;
    return NULL;
}

static void jfree(struct jval *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        jfree(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    BASE_FREE(v->items, v->keys, v->s, v);
}

/* the digits from p on: *q moves past them; false when there are none */
static bool digits(const char **q, const char *end, const char *p)
{
    const char *d = p;
    while (d < end && *d >= '0' && *d <= '9')
        d++;
    *q = d;
    return d > p;
}

static void jspace(struct jreader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static void put_utf8(char *o, size_t *n, uint32_t c)
{
    if (c < 0x80)
        o[(*n)++] = (char)c;
    else if (c < 0x800)
        o[(*n)++] = (char)(0xc0 | c >> 6), o[(*n)++] = (char)(0x80 | (c & 0x3f));
    else if (c < 0x10000)
        o[(*n)++] = (char)(0xe0 | c >> 12), o[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f)),
        o[(*n)++] = (char)(0x80 | (c & 0x3f));
    else
        o[(*n)++] = (char)(0xf0 | c >> 18), o[(*n)++] = (char)(0x80 | (c >> 12 & 0x3f)),
        o[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f)), o[(*n)++] = (char)(0x80 | (c & 0x3f));
}

static int hex4(const char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0)
            return -1;
        *v = *v << 4 | (uint32_t)h;
    }
    return 0;
}

/* is s[0..n) well-formed UTF-8 (no overlong forms, surrogates or NUL)? */
static bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        int k;
        uint32_t cp, min;
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            k = 1, cp = c & 0x1f, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            k = 2, cp = c & 0x0f, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            k = 3, cp = c & 0x07, min = 0x10000;
        else
            return false;
        if (n - i < (size_t)k + 1)
            return false;
        for (int j = 1; j <= k; j++) {
            if ((u[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (u[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += (size_t)k + 1;
    }
    return true;
}

/* a string at r->p (at its opening quote) */
static char *jstring(struct jreader *r, size_t *len)
{
    r->p++;
    const char *q = r->p;
    while (q < r->end && *q != '"')
        q += *q == '\\' && q + 1 < r->end ? 2 : 1;
    if (q >= r->end)
        return jfail(r, "unterminated string");
    char *o = malloc((size_t)(q - r->p) + 1);
    size_t n = 0;
    if (!o)
        return jfail(r, "out of memory");
    while (r->p < q) {
        unsigned char c = (unsigned char)*r->p;
        if (c < 0x20) {
            free(o);
            return jfail(r, "control character in a string");
        }
        if (c != '\\') {
            o[n++] = (char)c;
            r->p++;
            continue;
        }
        char e = r->p[1];
        r->p += 2;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            uint32_t v, w;
            if (q - r->p < 4 || hex4(r->p, &v)) {
                free(o);
                return jfail(r, "bad \\u escape");
            }
            r->p += 4;
            if (v >= 0xd800 && v <= 0xdbff && q - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u' &&
                !hex4(r->p + 2, &w) && w >= 0xdc00 && w <= 0xdfff) {
                v = 0x10000 + ((v - 0xd800) << 10) + (w - 0xdc00);
                r->p += 6;
            } else if (v >= 0xd800 && v <= 0xdfff) {
                free(o);
                return jfail(r, "lone surrogate in a \\u escape");
            }
            if (!v) {
                free(o);
                return jfail(r, "NUL in a string");
            }
            put_utf8(o, &n, v); /* at most 4 bytes for the 6 or 12 read */
            break;
        }
        default:
            free(o);
            return jfail(r, "bad escape in a string");
        }
    }
    r->p = q + 1;
    o[n] = 0;
    *len = n;
    if (!utf8_valid(o, n)) {
        free(o);
        return jfail(r, "a string is not valid UTF-8");
    }
    return o;
}

static struct jval *jparse(struct jreader *r, int depth)
{
    if (depth > MAX_DEPTH)
        return jfail(r, "nested too deeply");
    jspace(r);
    if (r->p >= r->end)
        return jfail(r, "unexpected end");
    struct jval *v = calloc(1, sizeof *v);
    if (!v)
        return jfail(r, "out of memory");
    char c = *r->p;
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        v->kind = obj ? J_OBJ : J_ARR;
        r->p++;
        jspace(r);
        if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
            r->p++;
            return v;
        }
        size_t cap = 0;
        for (;;) {
            jspace(r);
            char *key = NULL;
            if (obj) {
                size_t kl;
                if (r->p >= r->end || *r->p != '"' || !(key = jstring(r, &kl))) {
                    jfree(v);
                    return jfail(r, "expected a property name");
                }
                jspace(r);
                if (r->p >= r->end || *r->p != ':') {
                    free(key);
                    jfree(v);
                    return jfail(r, "expected ':'");
                }
                r->p++;
            }
            struct jval *x = jparse(r, depth + 1);
            if (!x) {
                free(key);
                jfree(v);
                return NULL;
            }
            if (v->n == cap) {
                cap = cap ? 2 * cap : 8;
                struct jval **ni = realloc(v->items, cap * sizeof *ni);
                if (ni)
                    v->items = ni;
                char **nk = obj ? realloc(v->keys, cap * sizeof *nk) : NULL;
                if (nk)
                    v->keys = nk;
                if (!ni || (obj && !nk)) {
                    free(key);
                    jfree(x);
                    jfree(v);
                    return jfail(r, "out of memory");
                }
            }
            v->items[v->n] = x;
            if (obj)
                v->keys[v->n] = key;
            v->n++;
            jspace(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
                r->p++;
                return v;
            }
            jfree(v);
            return jfail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (c == '"') {
        v->kind = J_STR;
        if (!(v->s = jstring(r, &v->slen))) {
            jfree(v);
            return NULL;
        }
        return v;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t wl = strlen(words[i]);
        if ((size_t)(r->end - r->p) >= wl && !memcmp(r->p, words[i], wl)) {
            r->p += wl;
            v->kind = i == 2 ? J_NULL : J_BOOL;
            v->b = i == 0;
            return v;
        }
    }
    /* a number, by JSON's grammar */
    const char *s = r->p, *q = s;
    if (q < r->end && *q == '-')
        q++;
    if (q < r->end && *q == '0')
        q++;
    else if (q < r->end && *q >= '1' && *q <= '9')
        while (q < r->end && *q >= '0' && *q <= '9')
            q++;
    else {
        jfree(v);
        return jfail(r, "unexpected character");
    }
    /* a fraction, an exponent: each needs a digit after its mark */
    bool bad = false;
    if (q < r->end && *q == '.')
        bad |= !digits(&q, r->end, q + 1);
    if (!bad && q < r->end && (*q == 'e' || *q == 'E'))
        bad |= !digits(&q, r->end, q + 1 + (q + 1 < r->end && (q[1] == '+' || q[1] == '-')));
    if (bad) {
        jfree(v);
        return jfail(r, "bad number");
    }
    v->kind = J_NUM;
    v->s = malloc((size_t)(q - s) + 1);
    if (!v->s) {
        jfree(v);
        return jfail(r, "out of memory");
    }
    memcpy(v->s, s, (size_t)(q - s));
    v->s[q - s] = 0;
    v->slen = (size_t)(q - s);
    v->num = strtod(v->s, NULL);
    r->p = q;
    return v;
}

static const struct jval *jget(const struct jval *o, const char *key)
{
    if (!o || o->kind != J_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key))
            return o->items[i];
    return NULL;
}

/* ==== the GBNF being written ==== */

struct out {
    char *s;
    size_t n, cap;
    int32_t n_rules;
    bool failed;
    char *err;
    size_t err_size;
    const struct jval *root;
    /* $defs already given a rule: name -> rule number */
    const char **def_names;
    int32_t *def_rule;
    size_t n_defs;
    int depth;
};

static int ofail(struct out *o, const char *fmt, ...)
{
    if (!o->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(o->err, o->err_size, fmt, ap);
        va_end(ap);
    }
    o->failed = true;
    return -1;
}

static void oput(struct out *o, const char *p, size_t n)
{
    if (o->failed)
        return;
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4096;
        while (cap < o->n + n + 1)
            cap *= 2;
        if (cap > MAX_OUT) {
            ofail(o, "JSON schema too large: its grammar passes %d bytes", MAX_OUT);
            return;
        }
        char *q = realloc(o->s, cap);
        if (!q) {
            ofail(o, "out of memory");
            return;
        }
        o->s = q;
        o->cap = cap;
    }
    memcpy(o->s + o->n, p, n);
    o->n += n;
    o->s[o->n] = 0;
}

#define oputs(o, lit) oput(o, lit, sizeof lit - 1)

static void oprintf(struct out *o, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k > 0)
        oput(o, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
}

/*
 * Rules are written whole, one at a time, into a text of their own and then
 * appended, so that a rule's body can refer to rules written while it is
 * being built. A rule is begun with rule_begin (its number), its body
 * written to the struct out returned, and ended with rule_end.
 */
struct rule {
    struct out body;
    int32_t id;
};

static void rule_begin(struct out *o, struct rule *r)
{
    memset(r, 0, sizeof *r);
    r->id = o->n_rules++;
    r->body.err = o->err;
    r->body.err_size = o->err_size;
}

static void rule_end(struct out *o, struct rule *r)
{
    if (r->body.failed) {
        o->failed = true;
    } else {
        oprintf(o, "r%d ::= ", r->id);
        oput(o, r->body.s ? r->body.s : "", r->body.n);
        oputs(o, "\n");
    }
    free(r->body.s);
}

/* a GBNF string literal of bytes p[0..n) */
static void lit(struct out *o, const char *p, size_t n)
{
    oputs(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            oprintf(o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            oprintf(o, "\\x%02X", c);
        else
            oput(o, (const char *)&c, 1);
    }
    oputs(o, "\"");
}

/* the JSON text of string s, as a GBNF literal */
static void json_string_lit(struct out *o, const char *s, size_t n)
{
    struct out t = {.err = o->err, .err_size = o->err_size};
    oputs(&t, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            oprintf(&t, "\\%c", c);
        else if (c == '\n')
            oputs(&t, "\\n");
        else if (c == '\t')
            oputs(&t, "\\t");
        else if (c == '\r')
            oputs(&t, "\\r");
        else if (c < 0x20)
            oprintf(&t, "\\u%04x", c);
        else
            oput(&t, (const char *)&c, 1);
    }
    oputs(&t, "\"");
    if (t.failed)
        o->failed = true;
    else
        lit(o, t.s, t.n);
    free(t.s);
}

/* a value as compact JSON, for enum and const */
static void json_value_lit(struct out *o, const struct jval *v, int depth)
{
    if (depth > MAX_DEPTH) {
        ofail(o, "bad JSON schema: nested too deeply");
        return;
    }
    switch (v->kind) {
    case J_NULL: oputs(o, "\"null\""); break;
    case J_BOOL: oput(o, v->b ? "\"true\"" : "\"false\"", v->b ? 6 : 7); break;
    case J_NUM: lit(o, v->s, v->slen); break;
    case J_STR: json_string_lit(o, v->s, v->slen); break;
    case J_ARR:
    case J_OBJ:
        oput(o, v->kind == J_ARR ? "\"[\"" : "\"{\"", 3);
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                oputs(o, " \",\"");
            oputs(o, " ");
            if (v->kind == J_OBJ) {
                json_string_lit(o, v->keys[i], strlen(v->keys[i]));
                oputs(o, " \":\" ");
            }
            json_value_lit(o, v->items[i], depth + 1);
        }
        oput(o, v->kind == J_ARR ? " \"]\"" : " \"}\"", 4);
        break;
    }
}

/* the shared rules, written once at the end of the grammar */
static const char shared_rules[] =
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ( string \":\" value ( \",\" string \":\" value )* )? \"}\"\n"
    "array ::= \"[\" ( value ( \",\" value )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hexnosur )\n"
    "hexnosur ::= [0-9a-cA-C] hex hex hex | [dD] [0-7] hex hex | [eEfF] hex hex hex\n"
    "hex ::= [0-9a-fA-F]\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,14} ) ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,14} )\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    "digit ::= [0-9]\n"
    "date ::= [1-9] digit{3} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] digit | \"3\" [01] )"
    " | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] digit | \"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" digit"
    " | \"2\" [0-8] ) )\n"
    "time ::= ( [01] digit | \"2\" [0-3] ) \":\" [0-5] digit \":\" [0-5] digit ( \".\" digit{1,6} )?"
    " ( \"Z\" | [-+] ( [01] digit | \"2\" [0-3] ) \":\" [0-5] digit )\n"
    "datetime ::= date \"T\" time\n"
    "uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n";

static const char json_grammar[] =
    "root ::= value\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ( string \":\" value ( \",\" string \":\" value )* )? \"}\"\n"
    "array ::= \"[\" ( value ( \",\" value )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hexnosur )\n"
    "hexnosur ::= [0-9a-cA-C] hex hex hex | [dD] [0-7] hex hex | [eEfF] hex hex hex\n"
    "hex ::= [0-9a-fA-F]\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,14} ) ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,3} )?\n";

const char *llm_grammar_json(void)
{
    return json_grammar;
}

/* ==== integer ranges ==== */

/* same-length decimal strings a <= b (no sign): the strings between, as GBNF */
static void digits_between(struct out *o, const char *a, const char *b, size_t n)
{
    if (!n) {
        oputs(o, "\"\"");
        return;
    }
    if (a[0] == b[0]) {
        oprintf(o, "\"%c\" ", a[0]);
        digits_between(o, a + 1, b + 1, n - 1);
        return;
    }
    bool a0 = true, b9 = true;
    for (size_t i = 1; i < n; i++)
        a0 = a0 && a[i] == '0', b9 = b9 && b[i] == '9';
    if (a0 && b9) {
        oprintf(o, "[%c-%c] [0-9]{%zu}", a[0], b[0], n - 1);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    oputs(o, "( ");
    oprintf(o, "\"%c\" ( ", a[0]);
    digits_between(o, a + 1, nines, n - 1);
    oputs(o, " )");
    if (b[0] - a[0] > 1)
        oprintf(o, " | [%c-%c] [0-9]{%zu}", a[0] + 1, b[0] - 1, n - 1);
    oprintf(o, " | \"%c\" ( ", b[0]);
    digits_between(o, zeros, b + 1, n - 1);
    oputs(o, " ) )");
}

/* non-negative integers in [lo, hi], no leading zeros */
static void uint_range(struct out *o, long long lo, long long hi)
{
    bool first = true;
    oputs(o, "( ");
    long long p = 1;
    for (int d = 1; d <= 18 && lo <= hi; d++, p *= 10) {
        long long dlo = d == 1 ? 0 : p, dhi = p * 10 - 1;
        long long a = lo > dlo ? lo : dlo, b = hi < dhi ? hi : dhi;
        if (a > b)
            continue;
        char sa[24], sb[24];
        snprintf(sa, sizeof sa, "%lld", a);
        snprintf(sb, sizeof sb, "%lld", b);
        if (!first)
            oputs(o, " | ");
        first = false;
        oputs(o, "( ");
        digits_between(o, sa, sb, strlen(sa));
        oputs(o, " )");
    }
    oputs(o, " )");
}

/* integers in [lo, hi] (lo <= hi) */
static void int_range(struct out *o, long long lo, long long hi)
{
    oputs(o, "( ");
    bool any = false;
    if (lo < 0) { /* "-" and a magnitude in [max(1, -hi), -lo] */
        long long mlo = hi < 0 ? -hi : 1;
        oputs(o, "\"-\" ");
        uint_range(o, mlo, -lo);
        any = true;
    }
    if (hi >= 0) {
        if (any)
            oputs(o, " | ");
        uint_range(o, lo > 0 ? lo : 0, hi);
    }
    oputs(o, " )");
}

/* ==== patterns: a regular-expression subset ==== */

struct rx {
    const char *p, *end;
    struct out *o;
    int depth;
};

static int rx_alts(struct rx *x);

/* a class's members, in a GBNF class body, excluding what needs escaping in
 * JSON (handled by the caller) */
static void rx_class_char(struct out *o, uint32_t c)
{
    if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-' || c == '"')
        oprintf(o, "\\%c", (char)c);
    else if (c < 0x20 || c == 0x7f)
        oprintf(o, "\\x%02X", c);
    else {
        char b[4];
        size_t n = 0;
        put_utf8(b, &n, c);
        oput(o, b, n);
    }
}

/* one (possibly escaped, UTF-8) character of the pattern */
static int64_t rx_char(struct rx *x)
{
    const unsigned char *u = (const unsigned char *)x->p;
    if (x->p >= x->end)
        return -1;
    unsigned c = u[0];
    int n = c < 0x80 ? 0 : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : -1;
    if (n < 0 || x->end - x->p < n + 1)
        return -1;
    uint32_t cp = n == 0 ? c : n == 1 ? c & 0x1f : n == 2 ? c & 0x0f : c & 0x07;
    for (int i = 1; i <= n; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return -1;
        cp = cp << 6 | (u[i] & 0x3f);
    }
    x->p += n + 1;
    return cp;
}

/* a literal character c inside a JSON string */
static void rx_lit(struct out *o, uint32_t c)
{
    if (c == '"')
        oputs(o, "\"\\\\\\\"\"");
    else if (c == '\\')
        oputs(o, "\"\\\\\\\\\"");
    else if (c < 0x20) {
        char e[8];
        snprintf(e, sizeof e, "\\u%04x", c);
        lit(o, e, strlen(e));
    } else {
        char b[4];
        size_t n = 0;
        put_utf8(b, &n, c);
        lit(o, b, n);
    }
}

static const char *rx_escape_class(char e)
{
    switch (e) {
    case 'd': return "[0-9]";
    case 'w': return "[a-zA-Z0-9_]";
    case 's': return "[ ]"; /* a space: tab and newline would need JSON escapes */
    case 'D': return "[^0-9\"\\\\\\x00-\\x1F]";
    case 'W': return "[^a-zA-Z0-9_\"\\\\\\x00-\\x1F]";
    case 'S': return "[^ \\t\\n\\r\\f\\v\"\\\\\\x00-\\x1F]";
    default: return NULL;
    }
}

static int rx_atom(struct rx *x)
{
    struct out *o = x->o;
    char c = *x->p;
    if (c == '(') {
        x->p++;
        if (x->end - x->p >= 2 && x->p[0] == '?' && x->p[1] == ':')
            x->p += 2;
        else if (x->p < x->end && x->p[0] == '?')
            return ofail(o, "pattern: '(?' forms other than '(?:' are not supported");
        if (++x->depth > 32)
            return ofail(o, "pattern: groups nested deeper than 32");
        oputs(o, "( ");
        if (rx_alts(x))
            return -1;
        if (x->p >= x->end || *x->p != ')')
            return ofail(o, "pattern: expected ')'");
        x->p++;
        x->depth--;
        oputs(o, " )");
        return 0;
    }
    if (c == '.') {
        x->p++;
        oputs(o, "[^\"\\\\\\x00-\\x1F]");
        return 0;
    }
    if (c == '[') {
        x->p++;
        bool neg = x->p < x->end && *x->p == '^';
        if (neg)
            x->p++;
        struct out cls = {.err = o->err, .err_size = o->err_size};
        bool quote = false, bslash = false, first = true;
        while (x->p < x->end && (*x->p != ']' || first)) {
            first = false;
            int64_t lo;
            if (*x->p == '\\') {
                x->p++;
                if (x->p >= x->end)
                    break;
                char e = *x->p;
                if (e == 'd' || e == 'w') {
                    x->p++;
                    oput(&cls, e == 'd' ? "0-9" : "a-zA-Z0-9_", e == 'd' ? 3 : 10);
                    continue;
                }
                if (e == 's') {
                    x->p++;
                    oputs(&cls, " ");
                    continue;
                }
                if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
                    free(cls.s);
                    return ofail(o, "pattern: escape '\\%c' in a class is not supported", e);
                }
                lo = rx_char(x);
            } else {
                lo = rx_char(x);
            }
            if (lo < 0) {
                free(cls.s);
                return ofail(o, "pattern: bad UTF-8");
            }
            int64_t hi = lo;
            if (x->end - x->p >= 2 && *x->p == '-' && x->p[1] != ']') {
                x->p++;
                if (*x->p == '\\')
                    x->p++;
                hi = rx_char(x);
                if (hi < lo) {
                    free(cls.s);
                    return ofail(o, "pattern: bad range in a class");
                }
            }
            if (!neg && lo <= '"' && hi >= '"')
                quote = true;
            if (!neg && lo <= '\\' && hi >= '\\')
                bslash = true;
            /* the range without control characters (never generated) */
            if (hi < 0x20)
                continue;
            if (lo < 0x20)
                lo = 0x20;
            rx_class_char(&cls, (uint32_t)lo);
            if (hi > lo) {
                oputs(&cls, "-");
                rx_class_char(&cls, (uint32_t)hi);
            }
        }
        if (x->p >= x->end) {
            free(cls.s);
            return ofail(o, "pattern: unterminated class");
        }
        x->p++;
        if (cls.failed) {
            free(cls.s);
            return ofail(o, "out of memory");
        }
        /* "\"" and "\\" are excluded from the class and written escaped */
        oputs(o, "( [");
        if (neg)
            oputs(o, "^");
        oput(o, cls.s ? cls.s : "", cls.n);
        if (neg)
            oputs(o, "\"\\\\\\x00-\\x1F");
        oputs(o, "]");
        if (quote)
            oputs(o, " | \"\\\\\\\"\"");
        if (bslash)
            oputs(o, " | \"\\\\\\\\\"");
        oputs(o, " )");
        free(cls.s);
        /* a positive class of only '"' or '\\' members has an empty [] part,
         * which matches nothing: harmless next to the escaped alternatives */
        return 0;
    }
    if (c == '\\') {
        x->p++;
        if (x->p >= x->end)
            return ofail(o, "pattern: ends with '\\'");
        const char *k = rx_escape_class(*x->p);
        if (k) {
            x->p++;
            oput(o, k, strlen(k));
            return 0;
        }
        char e = *x->p;
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
            return ofail(o, "pattern: escape '\\%c' is not supported", e);
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return ofail(o, "pattern: '%c' follows nothing", c);
    }
    int64_t cp = rx_char(x);
    if (cp < 0)
        return ofail(o, "pattern: bad UTF-8");
    rx_lit(o, (uint32_t)cp);
    return 0;
}

static int rx_seq(struct rx *x)
{
    struct out *o = x->o;
    bool any = false;
    while (x->p < x->end && *x->p != '|' && *x->p != ')') {
        if (*x->p == '^' || *x->p == '$') { /* anchors: the whole string is the match */
            x->p++;
            continue;
        }
        size_t at = o->n;
        oputs(o, "( ");
        if (rx_atom(x))
            return -1;
        oputs(o, " )");
        (void)at;
        if (x->p < x->end) {
            char q = *x->p;
            if (q == '*' || q == '+' || q == '?') {
                x->p++;
                oput(o, &q, 1);
            } else if (q == '{') {
                const char *s = x->p + 1;
                long m = 0, n = -2;
                char *e;
                m = strtol(s, &e, 10);
                if (e == s || m < 0 || m > 1000)
                    return ofail(o, "pattern: bad {m,n}");
                if (*e == ',') {
                    s = e + 1;
                    n = strtol(s, &e, 10);
                    if (e == s)
                        n = -1;
                    else if (n < m || n > 1000)
                        return ofail(o, "pattern: bad {m,n}");
                }
                if (e >= x->end || *e != '}')
                    return ofail(o, "pattern: bad {m,n}");
                x->p = e + 1;
                if (n == -2)
                    oprintf(o, "{%ld}", m);
                else if (n == -1)
                    oprintf(o, "{%ld,}", m);
                else
                    oprintf(o, "{%ld,%ld}", m, n);
            }
            if (x->p < x->end && (*x->p == '?' || *x->p == '+'))
                return ofail(o, "pattern: lazy and possessive quantifiers are not supported");
        }
        oputs(o, " ");
        any = true;
    }
    if (!any)
        oputs(o, "\"\"");
    return 0;
}

static int rx_alts(struct rx *x)
{
    for (;;) {
        if (rx_seq(x))
            return -1;
        if (x->p < x->end && *x->p == '|') {
            x->p++;
            oputs(x->o, " | ");
            continue;
        }
        return 0;
    }
}

/* ==== schemas ==== */

static int schema(struct out *o, const struct jval *s, struct out *dst);

static bool is_whole(const struct jval *v)
{
    return v && v->kind == J_NUM && v->num == floor(v->num) && fabs(v->num) < 1e15;
}

/* the keywords each part understands; anything else is refused */
static const char *const known[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "$ref", "$defs", "definitions", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    /* annotations */
    "title", "description", "$schema", "$id", "$comment", "default", "examples", NULL};

static int check_keywords(struct out *o, const struct jval *s)
{
    for (size_t i = 0; i < s->n; i++) {
        bool ok = false;
        for (const char *const *k = known; *k && !ok; k++)
            ok = !strcmp(*k, s->keys[i]);
        if (!ok)
            return ofail(o, "JSON schema keyword '%s' is not supported", s->keys[i]);
    }
    return 0;
}

/* a rule for schema s; returns its number */
static int32_t schema_rule(struct out *o, const struct jval *s)
{
    struct rule r;
    rule_begin(o, &r);
    schema(o, s, &r.body);
    rule_end(o, &r);
    return o->failed ? -1 : r.id;
}

/* keys that are JSON strings without escapes and none of names[0..n) */
static int32_t other_key_rule(struct out *o, char **names, size_t n, size_t depth_at, const char *prefix,
                              size_t plen)
{
    /* the names sharing prefix: their next bytes, and whether one ends here */
    struct rule r;
    rule_begin(o, &r);
    bool ends = false;
    unsigned char next[256];
    size_t nn = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(names[i]);
        if (l < plen || memcmp(names[i], prefix, plen))
            continue;
        if (l == plen) {
            ends = true;
            continue;
        }
        unsigned char b = (unsigned char)names[i][plen];
        bool seen = false;
        for (size_t k = 0; k < nn && !seen; k++)
            seen = next[k] == b;
        if (!seen)
            next[nn++] = b;
    }
    struct out *b = &r.body;
    bool alt = false;
    if (!ends) { /* the key may end here */
        oputs(b, "\"\\\"\"");
        alt = true;
    }
    /* a byte none of them continues with, then anything */
    if (alt)
        oputs(b, " | ");
    oputs(b, "[^\"\\\\\\x00-\\x1F");
    for (size_t k = 0; k < nn; k++)
        if (next[k] >= 0x20)
            rx_class_char(b, next[k]);
    oputs(b, "] keychar* \"\\\"\"");
    /* bytes of the names (UTF-8 lead bytes cut the class above into the
     * rest too: a name's first byte excluded excludes every character
     * sharing that byte, which they continue through here) */
    for (size_t k = 0; k < nn && !o->failed; k++) {
        if (plen + 1 > 256 || depth_at > 64)
            break;
        char pre[260];
        memcpy(pre, prefix, plen);
        pre[plen] = (char)next[k];
        int32_t sub = other_key_rule(o, names, n, depth_at + 1, pre, plen + 1);
        if (sub < 0)
            break;
        oprintf(b, " | \"\\x%02X\" r%d", next[k], sub);
    }
    rule_end(o, &r);
    return o->failed ? -1 : r.id;
}

static int object_schema(struct out *o, const struct jval *s, struct out *d)
{
    const struct jval *props = jget(s, "properties"), *req = jget(s, "required"),
                      *add = jget(s, "additionalProperties");
    if (props && props->kind != J_OBJ)
        return ofail(o, "JSON schema: 'properties' must be an object");
    if (req && req->kind != J_ARR)
        return ofail(o, "JSON schema: 'required' must be an array");
    size_t n = props ? props->n : 0;
    if (req)
        for (size_t i = 0; i < req->n; i++) {
            bool found = false;
            if (req->items[i]->kind != J_STR)
                return ofail(o, "JSON schema: 'required' must list strings");
            for (size_t k = 0; k < n && !found; k++)
                found = !strcmp(props->keys[k], req->items[i]->s);
            if (!found)
                return ofail(o, "JSON schema: required property '%s' is not in 'properties'", req->items[i]->s);
        }
    /* the rule of each property's "name":value */
    int32_t *kv = calloc(n + 1, sizeof *kv);
    bool *must = calloc(n + 1, 1);
    if (!kv || !must) {
        free(kv), free(must);
        return ofail(o, "out of memory");
    }
    for (size_t i = 0; i < n && !o->failed; i++) {
        for (size_t k = 0; req && k < req->n; k++)
            must[i] = must[i] || !strcmp(req->items[k]->s, props->keys[i]);
        int32_t v = schema_rule(o, props->items[i]);
        struct rule r;
        rule_begin(o, &r);
        json_string_lit(&r.body, props->keys[i], strlen(props->keys[i]));
        oprintf(&r.body, " \":\" r%d", v);
        rule_end(o, &r);
        kv[i] = r.id;
    }
    /* extra properties: additionalProperties true or a schema */
    int32_t extra = -1;
    if (add && !(add->kind == J_BOOL && !add->b) && !o->failed) {
        if (add->kind != J_BOOL && add->kind != J_OBJ) {
            free(kv), free(must);
            return ofail(o, "JSON schema: 'additionalProperties' must be a boolean or a schema");
        }
        int32_t val = add->kind == J_OBJ ? schema_rule(o, add) : -1;
        int32_t key = -1;
        for (size_t i = 0; i < n; i++)
            for (const char *c = props->keys[i]; *c; c++)
                if ((unsigned char)*c >= 0x80 || (unsigned char)*c < 0x20) {
                    free(kv), free(must);
                    return ofail(o, "JSON schema: additionalProperties beside a property name outside "
                                    "printable ASCII ('%s') is not supported", props->keys[i]);
                }
        if (n) {
            key = other_key_rule(o, props->keys, n, 0, "", 0);
        }
        struct rule r;
        rule_begin(o, &r);
        if (key >= 0)
            oprintf(&r.body, "\"\\\"\" r%d", key);
        else
            oputs(&r.body, "string");
        if (val >= 0)
            oprintf(&r.body, " \":\" r%d", val);
        else
            oputs(&r.body, " \":\" value");
        rule_end(o, &r);
        extra = r.id;
    }
    if (o->failed) {
        free(kv), free(must);
        return -1;
    }
    /* after[i]: properties i.. when one is written already ("," before each) */
    int32_t next_after = -1;
    int32_t *after = calloc(n + 1, sizeof *after);
    if (!after) {
        free(kv), free(must);
        return ofail(o, "out of memory");
    }
    {
        struct rule r;
        rule_begin(o, &r);
        if (extra >= 0)
            oprintf(&r.body, "( \",\" r%d )*", extra);
        else
            oputs(&r.body, "\"\"");
        rule_end(o, &r);
        after[n] = r.id;
    }
    for (size_t i = n; i-- > 0;) {
        struct rule r;
        rule_begin(o, &r);
        if (must[i])
            oprintf(&r.body, "\",\" r%d r%d", kv[i], after[i + 1]);
        else
            oprintf(&r.body, "( \",\" r%d )? r%d", kv[i], after[i + 1]);
        rule_end(o, &r);
        after[i] = r.id;
    }
    (void)next_after;
    /* first[i]: properties i.. when none is written yet */
    int32_t first_next;
    {
        struct rule r;
        rule_begin(o, &r);
        if (extra >= 0)
            oprintf(&r.body, "( r%d ( \",\" r%d )* )?", extra, extra);
        else
            oputs(&r.body, "\"\"");
        rule_end(o, &r);
        first_next = r.id;
    }
    for (size_t i = n; i-- > 0;) {
        struct rule r;
        rule_begin(o, &r);
        if (must[i])
            oprintf(&r.body, "r%d r%d", kv[i], after[i + 1]);
        else
            oprintf(&r.body, "r%d r%d | r%d", kv[i], after[i + 1], first_next);
        rule_end(o, &r);
        first_next = r.id;
    }
    oprintf(d, "\"{\" r%d \"}\"", first_next);
    free(kv), free(must), free(after);
    return o->failed ? -1 : 0;
}

static int count_kw(struct out *o, const struct jval *s, const char *k, long long *v)
{
    const struct jval *x = jget(s, k);
    if (!x)
        return 0;
    if (!is_whole(x) || x->num < 0 || x->num > 1000)
        return ofail(o, "JSON schema: '%s' must be a whole number from 0 to 1000", k);
    *v = (long long)x->num;
    return 0;
}

static int array_schema(struct out *o, const struct jval *s, struct out *d)
{
    const struct jval *items = jget(s, "items"), *prefix = jget(s, "prefixItems");
    long long lo = 0, hi = -1;
    if (count_kw(o, s, "minItems", &lo) || count_kw(o, s, "maxItems", &hi))
        return -1;
    if (prefix && prefix->kind != J_ARR)
        return ofail(o, "JSON schema: 'prefixItems' must be an array");
    if (items && items->kind != J_OBJ && items->kind != J_BOOL)
        return ofail(o, "JSON schema: 'items' must be a schema or a boolean");
    size_t np = prefix ? prefix->n : 0;
    if (np > 256)
        return ofail(o, "JSON schema: more than 256 prefixItems");
    bool no_more = items && items->kind == J_BOOL && !items->b;
    if (no_more && (hi < 0 || hi > (long long)np))
        hi = (long long)np;
    if (hi >= 0 && hi < lo)
        return ofail(o, "JSON schema: maxItems below minItems (or items false)");
    int32_t item = -1;
    if (!no_more) {
        if (items && items->kind == J_OBJ)
            item = schema_rule(o, items);
    }
    /* tail[k]: elements from position k on (a "," before each when k > 0) */
    int32_t next = -1;
    long long top = hi >= 0 && hi < (long long)np ? hi : (long long)np;
    /* the uniform part, positions np.. */
    {
        struct rule r;
        rule_begin(o, &r);
        long long k = (long long)np;
        if (hi >= 0 && k >= hi) {
            oputs(&r.body, "\"\"");
        } else if (no_more) {
            oputs(&r.body, "\"\"");
        } else {
            long long a = lo > k ? lo - k : 0, b = hi >= 0 ? hi - k : -1;
            char it[32];
            if (item >= 0)
                snprintf(it, sizeof it, "r%d", item);
            else
                snprintf(it, sizeof it, "value");
            if (k > 0) {
                if (b >= 0)
                    oprintf(&r.body, "( \",\" %s ){%lld,%lld}", it, a, b);
                else
                    oprintf(&r.body, "( \",\" %s ){%lld,}", it, a);
            } else {
                if (!a)
                    oputs(&r.body, "( ");
                oprintf(&r.body, "%s ", it);
                long long a1 = a ? a - 1 : 0;
                if (b >= 0)
                    oprintf(&r.body, "( \",\" %s ){%lld,%lld}", it, a1, b - 1);
                else
                    oprintf(&r.body, "( \",\" %s ){%lld,}", it, a1);
                if (!a)
                    oputs(&r.body, " )?");
            }
        }
        rule_end(o, &r);
        next = r.id;
    }
    if (top < (long long)np) { /* maxItems cuts the prefix */
        struct rule r;
        rule_begin(o, &r);
        oputs(&r.body, "\"\"");
        rule_end(o, &r);
        next = r.id;
    }
    for (long long k = top; k-- > 0 && !o->failed;) {
        int32_t e = schema_rule(o, prefix->items[k]);
        struct rule r;
        rule_begin(o, &r);
        if (k + 1 > lo)
            oputs(&r.body, "( ");
        oprintf(&r.body, "%sr%d r%d", k ? "\",\" " : "", e, next);
        if (k + 1 > lo)
            oputs(&r.body, " )?");
        rule_end(o, &r);
        next = r.id;
    }
    oprintf(d, "\"[\" r%d \"]\"", next);
    return o->failed ? -1 : 0;
}

static int string_schema(struct out *o, const struct jval *s, struct out *d)
{
    const struct jval *fmt = jget(s, "format"), *pat = jget(s, "pattern");
    long long lo = 0, hi = -1;
    const struct jval *mn = jget(s, "minLength"), *mx = jget(s, "maxLength");
    if ((mn && (!is_whole(mn) || mn->num < 0 || mn->num > 1000)) ||
        (mx && (!is_whole(mx) || mx->num < 0 || mx->num > 1000)))
        return ofail(o, "JSON schema: minLength and maxLength must be whole numbers from 0 to 1000");
    if (mn)
        lo = (long long)mn->num;
    if (mx)
        hi = (long long)mx->num;
    if (hi >= 0 && hi < lo)
        return ofail(o, "JSON schema: maxLength below minLength");
    if (fmt) {
        if (fmt->kind != J_STR)
            return ofail(o, "JSON schema: 'format' must be a string");
        if (pat || mn || mx)
            return ofail(o, "JSON schema: 'format' together with pattern, minLength or maxLength is "
                            "not supported");
        const char *r = !strcmp(fmt->s, "date") ? "date" : !strcmp(fmt->s, "time") ? "time"
                        : !strcmp(fmt->s, "date-time") ? "datetime" : !strcmp(fmt->s, "uuid") ? "uuid"
                        : NULL;
        if (!r)
            return ofail(o, "JSON schema: format '%s' is not supported (date, time, date-time, uuid)", fmt->s);
        oprintf(d, "\"\\\"\" %s \"\\\"\"", r);
        return 0;
    }
    if (pat) {
        if (pat->kind != J_STR)
            return ofail(o, "JSON schema: 'pattern' must be a string");
        if (mn || mx)
            return ofail(o, "JSON schema: 'pattern' together with minLength or maxLength is not supported");
        struct rx x = {.p = pat->s, .end = pat->s + pat->slen, .o = d};
        oputs(d, "\"\\\"\" ( ");
        if (rx_alts(&x))
            return -1;
        if (x.p < x.end)
            return ofail(o, "pattern: unbalanced ')'");
        oputs(d, " ) \"\\\"\"");
        return 0;
    }
    if (hi >= 0)
        oprintf(d, "\"\\\"\" char{%lld,%lld} \"\\\"\"", lo, hi);
    else
        oprintf(d, "\"\\\"\" char{%lld,} \"\\\"\"", lo);
    return 0;
}

/* bounds of a number or integer: inclusive [lo, hi] of the integers, and
 * whether the bound itself is excluded */
static int num_schema(struct out *o, const struct jval *s, struct out *d, bool integer)
{
    const char *names[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    const struct jval *b[4];
    bool any = false;
    for (int i = 0; i < 4; i++) {
        b[i] = jget(s, names[i]);
        if (b[i] && b[i]->kind == J_BOOL)
            return ofail(o, "JSON schema: '%s' as a boolean (draft 4) is not supported", names[i]);
        if (b[i] && b[i]->kind != J_NUM)
            return ofail(o, "JSON schema: '%s' must be a number", names[i]);
        if (b[i] && (fabs(b[i]->num) >= 1e15))
            return ofail(o, "JSON schema: '%s' beyond +-1e15 is not supported", names[i]);
        if (b[i] && !integer && !is_whole(b[i]))
            return ofail(o, "JSON schema: '%s' of a number must be a whole number here (%s)", names[i],
                         b[i]->s);
        any = any || b[i];
    }
    if (!any) {
        oput(d, integer ? "integer" : "number", integer ? 7 : 6);
        return 0;
    }
    const long long big = 999999999999999LL; /* 15 digits */
    /* the integers allowed */
    long long lo = -big, hi = big;
    if (b[0]) {
        long long v = (long long)ceil(b[0]->num);
        lo = v > lo ? v : lo;
    }
    if (b[1]) {
        long long v = (long long)floor(b[1]->num) + 1;
        lo = v > lo ? v : lo;
    }
    if (b[2]) {
        long long v = (long long)floor(b[2]->num);
        hi = v < hi ? v : hi;
    }
    if (b[3]) {
        long long v = (long long)ceil(b[3]->num) - 1;
        hi = v < hi ? v : hi;
    }
    oputs(d, "( ");
    bool alt = false;
    if (lo <= hi) {
        int_range(d, lo, hi);
        alt = true;
    }
    if (!integer) {
        /* a number with a fraction ending in a non-zero digit, strictly
         * between whole numbers: I.F with F > 0 lies in (I, I + 1) for
         * I >= 0 and -(K.F) in (-K - 1, -K); the whole bounds L and H
         * (inclusive or not) hold when I in [L, H - 1], K in [-H, -L - 1] */
        long long L = -big - 1, H = big + 1;
        if (b[0])
            L = (long long)b[0]->num;
        if (b[1] && (long long)b[1]->num > L)
            L = (long long)b[1]->num;
        if (b[2])
            H = (long long)b[2]->num;
        if (b[3] && (long long)b[3]->num < H)
            H = (long long)b[3]->num;
        if (L < -big)
            L = -big;
        if (H > big)
            H = big;
        long long ilo = L > 0 ? L : 0, ihi = H - 1;
        if (ilo <= ihi) {
            if (alt)
                oputs(d, " | ");
            uint_range(d, ilo, ihi);
            oputs(d, " \".\" [0-9]{0,14} [1-9]");
            alt = true;
        }
        long long klo = H < 0 ? -H : 0, khi = -L - 1;
        if (klo <= khi) {
            if (alt)
                oputs(d, " | ");
            oputs(d, "\"-\" ");
            uint_range(d, klo, khi);
            oputs(d, " \".\" [0-9]{0,14} [1-9]");
            alt = true;
        }
    }
    if (!alt)
        return ofail(o, "JSON schema: the bounds leave no %s", integer ? "integer" : "number");
    oputs(d, " )");
    return 0;
}

/* a $ref: its definition's rule (written once, referred to again) */
static int ref_schema(struct out *o, const struct jval *ref, struct out *d)
{
    if (ref->kind != J_STR)
        return ofail(o, "JSON schema: '$ref' must be a string");
    const char *name = NULL;
    const struct jval *defs = NULL;
    if (!strncmp(ref->s, "#/$defs/", 8))
        name = ref->s + 8, defs = jget(o->root, "$defs");
    else if (!strncmp(ref->s, "#/definitions/", 14))
        name = ref->s + 14, defs = jget(o->root, "definitions");
    else if (!strcmp(ref->s, "#")) {
        name = "", defs = NULL;
    } else
        return ofail(o, "JSON schema: $ref '%s' is not supported (only '#', '#/$defs/NAME')", ref->s);
    if (strchr(name, '/') || strchr(name, '~'))
        return ofail(o, "JSON schema: $ref '%s' is not supported (only '#/$defs/NAME')", ref->s);
    const struct jval *target = defs ? jget(defs, name) : ref->s[1] ? NULL : o->root;
    if (!target)
        return ofail(o, "JSON schema: $ref '%s' names no definition", ref->s);
    for (size_t i = 0; i < o->n_defs; i++)
        if (!strcmp(o->def_names[i], ref->s)) {
            oprintf(d, "r%d", o->def_rule[i]);
            return 0;
        }
    const char **nn = realloc(o->def_names, (o->n_defs + 1) * sizeof *nn);
    if (nn)
        o->def_names = nn;
    int32_t *nr = realloc(o->def_rule, (o->n_defs + 1) * sizeof *nr);
    if (nr)
        o->def_rule = nr;
    if (!nn || !nr)
        return ofail(o, "out of memory");
    struct rule r;
    rule_begin(o, &r);
    o->def_names[o->n_defs] = ref->s;
    o->def_rule[o->n_defs] = r.id;
    o->n_defs++;
    schema(o, target, &r.body);
    rule_end(o, &r);
    oprintf(d, "r%d", r.id);
    return o->failed ? -1 : 0;
}

/* the alternatives of one type name */
static int type_schema(struct out *o, const struct jval *s, const char *t, struct out *d)
{
    if (!strcmp(t, "object"))
        return object_schema(o, s, d);
    if (!strcmp(t, "array"))
        return array_schema(o, s, d);
    if (!strcmp(t, "string"))
        return string_schema(o, s, d);
    if (!strcmp(t, "integer"))
        return num_schema(o, s, d, true);
    if (!strcmp(t, "number"))
        return num_schema(o, s, d, false);
    if (!strcmp(t, "boolean")) {
        oputs(d, "boolean");
        return 0;
    }
    if (!strcmp(t, "null")) {
        oputs(d, "null");
        return 0;
    }
    return ofail(o, "JSON schema: unknown type '%s'", t);
}

static bool has_any(const struct jval *s, const char *const *keys)
{
    for (; *keys; keys++)
        if (jget(s, *keys))
            return true;
    return false;
}

static int schema(struct out *o, const struct jval *s, struct out *d)
{
    if (o->failed)
        return -1;
    if (++o->depth > MAX_DEPTH)
        return ofail(o, "JSON schema nested deeper than %d", MAX_DEPTH);
    int rc = 0;
    if (s->kind == J_BOOL) {
        if (!s->b)
            rc = ofail(o, "JSON schema: 'false' admits no value");
        else
            oputs(d, "value");
        o->depth--;
        return rc;
    }
    if (s->kind != J_OBJ) {
        o->depth--;
        return ofail(o, "JSON schema: a schema must be an object or a boolean");
    }
    if (check_keywords(o, s)) {
        o->depth--;
        return -1;
    }
    const struct jval *x;
    if ((x = jget(s, "const"))) {
        oputs(d, "( ");
        json_value_lit(d, x, 0);
        oputs(d, " )");
    } else if ((x = jget(s, "enum"))) {
        if (x->kind != J_ARR || !x->n)
            rc = ofail(o, "JSON schema: 'enum' must be a non-empty array");
        else {
            oputs(d, "( ");
            for (size_t i = 0; i < x->n; i++) {
                if (i)
                    oputs(d, " | ");
                json_value_lit(d, x->items[i], 0);
            }
            oputs(d, " )");
        }
    } else if ((x = jget(s, "anyOf")) || (x = jget(s, "oneOf"))) {
        if (x->kind != J_ARR || !x->n)
            rc = ofail(o, "JSON schema: 'anyOf'/'oneOf' must be a non-empty array");
        else if (jget(s, "type") || jget(s, "$ref"))
            rc = ofail(o, "JSON schema: 'anyOf'/'oneOf' beside 'type' or '$ref' is not supported");
        else {
            oputs(d, "( ");
            for (size_t i = 0; i < x->n && !o->failed; i++) {
                int32_t r = schema_rule(o, x->items[i]);
                oprintf(d, "%sr%d", i ? " | " : "", r);
            }
            oputs(d, " )");
        }
    } else if ((x = jget(s, "$ref"))) {
        static const char *const others[] = {"type", "properties", "items", "prefixItems", "enum", NULL};
        if (has_any(s, others))
            rc = ofail(o, "JSON schema: '$ref' beside other constraints is not supported");
        else
            rc = ref_schema(o, x, d);
    } else if ((x = jget(s, "type"))) {
        if (x->kind == J_STR) {
            rc = type_schema(o, s, x->s, d);
        } else if (x->kind == J_ARR && x->n) {
            oputs(d, "( ");
            for (size_t i = 0; i < x->n && !rc; i++) {
                if (x->items[i]->kind != J_STR) {
                    rc = ofail(o, "JSON schema: 'type' must list strings");
                    break;
                }
                if (i)
                    oputs(d, " | ");
                oputs(d, "( ");
                rc = type_schema(o, s, x->items[i]->s, d);
                oputs(d, " )");
            }
            oputs(d, " )");
        } else {
            rc = ofail(o, "JSON schema: 'type' must be a string or an array of strings");
        }
    } else {
        /* no type: infer it from the keywords given, else any value */
        static const char *const objk[] = {"properties", "required", "additionalProperties", NULL};
        static const char *const arrk[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
        static const char *const strk[] = {"minLength", "maxLength", "pattern", "format", NULL};
        static const char *const numk[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
        int kinds = has_any(s, objk) + has_any(s, arrk) + has_any(s, strk) + has_any(s, numk);
        if (kinds > 1)
            rc = ofail(o, "JSON schema: keywords of several types without 'type' are not supported");
        else if (has_any(s, objk))
            rc = object_schema(o, s, d);
        else if (has_any(s, arrk))
            rc = array_schema(o, s, d);
        else if (has_any(s, strk))
            rc = string_schema(o, s, d);
        else if (has_any(s, numk))
            rc = num_schema(o, s, d, false);
        else
            oputs(d, "value");
    }
    o->depth--;
    return o->failed ? -1 : rc;
}

/* every keyword anywhere in the schema is known (so that one in a part the
 * grammar never reaches, such as an unused $defs entry, is refused too) */
static int check_all(struct out *o, const struct jval *s, int depth)
{
    if (depth > MAX_DEPTH)
        return ofail(o, "JSON schema nested deeper than %d", MAX_DEPTH);
    if (s->kind != J_OBJ)
        return 0;
    if (check_keywords(o, s))
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        const char *k = s->keys[i];
        const struct jval *v = s->items[i];
        if (!strcmp(k, "properties") || !strcmp(k, "$defs") || !strcmp(k, "definitions")) {
            if (v->kind != J_OBJ)
                return ofail(o, "JSON schema: '%s' must be an object", k);
            for (size_t j = 0; j < v->n; j++)
                if (check_all(o, v->items[j], depth + 1))
                    return -1;
        } else if (!strcmp(k, "items") || !strcmp(k, "additionalProperties")) {
            if (check_all(o, v, depth + 1))
                return -1;
        } else if (!strcmp(k, "prefixItems") || !strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
            if (v->kind != J_ARR)
                return ofail(o, "JSON schema: '%s' must be an array", k);
            for (size_t j = 0; j < v->n; j++)
                if (check_all(o, v->items[j], depth + 1))
                    return -1;
        }
    }
    return 0;
}

int llm_json_schema_to_grammar(const char *json, size_t len, char **gbnf, char *err, size_t err_size)
{
    char dummy[1];
    if (!err || !err_size)
        err = dummy, err_size = sizeof dummy;
    *gbnf = NULL;
    struct jreader r = {.p = json, .end = json + len, .err = err, .err_size = err_size};
    struct jval *root = jparse(&r, 0);
    if (!root)
        return LLM_ERR;
    jspace(&r);
    if (r.p != r.end) {
        jfree(root);
        snprintf(err, err_size, "bad JSON schema: text after the value");
        return LLM_ERR;
    }
    struct out o = {.err = err, .err_size = err_size, .root = root};
    if (check_all(&o, root, 0) == 0) {
        struct rule top;
        rule_begin(&o, &top);
        schema(&o, root, &top.body);
        rule_end(&o, &top);
        oprintf(&o, "root ::= r%d\n", top.id);
        oput(&o, shared_rules, strlen(shared_rules));
        oputs(&o, "keychar ::= [^\"\\\\\\x00-\\x1F]\n");
    }
    jfree(root);
    free(o.def_names);
    free(o.def_rule);
    if (o.failed) {
        free(o.s);
        return LLM_ERR;
    }
    *gbnf = o.s;
    return LLM_OK;
}
