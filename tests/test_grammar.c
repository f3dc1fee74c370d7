/*
 * test_grammar.c - constrained output's core parts (issue 27): the GBNF
 * parser's refusals and where it says they are; the matcher over bytes
 * (sequences, repetitions' bounds, alternatives, classes and negation, a
 * UTF-8 character split across feeds, the end only where the language may
 * end); the JSON Schema translator's refusals by name; and the masked
 * sampler changing which token is chosen, never a logit: with the same seed
 * it draws exactly what the plain sampler draws from the logits with the
 * masked tokens removed (-inf), greedy and sampled; and the masks over a
 * real vocabulary (Qwen2's 151,936 tokens) along random answers, the same
 * with the memo of transitions on, off, and too small to hold one walk,
 * and each checked token by token against the matcher fed the bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "tok-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void refused(const char *g, const char *why)
{
    struct llm_grammar *gr;
    char err[512] = "";
    int rc = llm_grammar_parse(g, strlen(g), &gr, err, sizeof err);
    if (rc == 0 || !strstr(err, why))
        fprintf(stderr, "grammar %s: '%s', wanted '%s'\n", g, err, why);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err, why));
}

static void test_parse_errors(void **state)
{
    (void)state;
    refused("root ::= \"a\" | b\n", "rule 'b' is not defined");
    refused("root ::= x\nx ::= x \"a\" | \"b\"\n", "left-recursive");
    refused("root ::= (\"a\"?)*\n", "left recursion");
    refused("root ::= \"abc\n", "at 1:");
    refused("root ::= [a-\n", "at 1:");
    refused("root ::= \"a\"{3,2}\n", "n below m");
    refused("root ::= \"a\"{1001}\n", "above 1000");
    refused("root ::= \"\\q\"\n", "unknown escape");
    refused("root ::= ( \"a\"\n", "expected ')'");
    refused("root ::= \"a\" )\n", "unbalanced");
    refused("x ::= \"a\"\n", "no rule 'root'");
    refused("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
    refused("root ::= [z-a]\n", "backwards");
    refused("root ::= \"\xff\"\n", "bad UTF-8");
    char deep[200] = "root ::= ";
    for (int i = 0; i < 70; i++)
        strcat(deep, "(");
    refused(deep, "deeper than 64");
}

/* does grammar g accept text s whole (1), as a prefix only (0), or not (-1)? */
static int judge(const char *g, const char *s)
{
    struct llm_grammar *gr;
    char err[512];
    assert_int_equal(llm_grammar_parse(g, strlen(g), &gr, err, sizeof err), 0);
    struct llm_matcher *m = llm_matcher_init(gr, NULL);
    assert_non_null(m);
    int r = llm_matcher_feed(m, s, strlen(s)) ? -1 : llm_matcher_can_end(m) ? 1 : 0;
    llm_matcher_free(m);
    llm_grammar_free(gr);
    return r;
}

static void test_matcher(void **state)
{
    (void)state;
    const char *g = "root ::= \"a\" [b-c]+ ( \"x\" | \"yz\" )? # comment\n";
    assert_int_equal(judge(g, "ab"), 1);
    assert_int_equal(judge(g, "abcbyz"), 1);
    assert_int_equal(judge(g, "abcby"), 0);
    assert_int_equal(judge(g, "a"), 0);
    assert_int_equal(judge(g, "ad"), -1);
    assert_int_equal(judge(g, "abxx"), -1);
    const char *rep = "root ::= [0-9]{2,3} \"-\"{0,1} w\nw ::=\n  \"ok\" |\n  [^a-z\\n]\n";
    assert_int_equal(judge(rep, "12ok"), 1);
    assert_int_equal(judge(rep, "123-Q"), 1);
    assert_int_equal(judge(rep, "1234"), 1);  /* 123, then [^a-z\n] */
    assert_int_equal(judge(rep, "12345"), -1);
    assert_int_equal(judge(rep, "1ok"), -1);
    assert_int_equal(judge(rep, "12q"), -1);
    /* UTF-8: a character split across feeds; the end only after it is whole */
    struct llm_grammar *gr;
    char err[512];
    const char *u = "root ::= \"caf\" [\\u00e0-\\u00ff] \"\\U0001F600\"?\n";
    assert_int_equal(llm_grammar_parse(u, strlen(u), &gr, err, sizeof err), 0);
    struct llm_matcher *m = llm_matcher_init(gr, NULL);
    assert_int_equal(llm_matcher_feed(m, "caf\xc3", 4), 0);
    assert_false(llm_matcher_can_end(m));
    assert_int_not_equal(llm_matcher_feed(m, "\x80", 1), 0); /* U+00C0: outside the class */
    assert_int_equal(llm_matcher_feed(m, "\xa9", 1), 0);     /* U+00E9 */
    assert_true(llm_matcher_can_end(m));
    assert_false(llm_matcher_done(m));
    assert_int_equal(llm_matcher_feed(m, "\xf0\x9f", 2), 0);
    assert_false(llm_matcher_can_end(m));
    assert_int_equal(llm_matcher_feed(m, "\x98\x80", 2), 0);
    assert_true(llm_matcher_done(m));
    llm_matcher_reset(m);
    assert_int_not_equal(llm_matcher_feed(m, "cafe", 4), 0);
    assert_int_not_equal(llm_matcher_feed(m, "caf\xc3\x28", 5), 0); /* not UTF-8 */
    llm_matcher_free(m);
    llm_grammar_free(gr);
    /* the JSON grammar: compact, control characters escaped */
    const char *j = llm_grammar_json();
    assert_int_equal(judge(j, "{\"a\":[1,-2.5e3,true,null,\"\\u00e9\\n\"]}"), 1);
    assert_int_equal(judge(j, "{\"a\": 1}"), -1);
    assert_int_equal(judge(j, "\"a\nb\""), -1);
    assert_int_equal(judge(j, "\"\\ud800\""), -1);
    assert_int_equal(judge(j, "01"), -1);
}

static void schema_refused(const char *s, const char *why)
{
    char *g = NULL, err[512] = "";
    int rc = llm_json_schema_to_grammar(s, strlen(s), &g, err, sizeof err);
    if (rc == 0 || !strstr(err, why))
        fprintf(stderr, "schema %s: '%s', wanted '%s'\n", s, err, why);
    assert_int_not_equal(rc, 0);
    assert_null(g);
    assert_non_null(strstr(err, why));
}

static int schema_judge(const char *s, const char *text)
{
    char *g = NULL, err[512] = "";
    assert_int_equal(llm_json_schema_to_grammar(s, strlen(s), &g, err, sizeof err), 0);
    int r = judge(g, text);
    free(g);
    return r;
}

static void test_schema(void **state)
{
    (void)state;
    schema_refused("{\"minProperties\": 1}", "keyword 'minProperties' is not supported");
    schema_refused("{\"type\": \"array\", \"items\": {\"uniqueItems\": true}}", "'uniqueItems'");
    schema_refused("{\"$defs\": {\"a\": {\"not\": {}}}}", "'not'");
    schema_refused("{\"type\": \"string\", \"format\": \"email\"}", "format 'email'");
    schema_refused("{\"type\": \"number\", \"minimum\": 0.5}", "whole number");
    schema_refused("{\"$ref\": \"#/$defs/none\"}", "names no definition");
    schema_refused("{\"type\": ", "bad JSON schema");
    const char *o = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\", \"minimum\": -5, "
                    "\"exclusiveMaximum\": 12}, \"b\": {\"enum\": [\"x\", null]}}, \"required\": [\"b\"]}";
    assert_int_equal(schema_judge(o, "{\"a\":-5,\"b\":\"x\"}"), 1);
    assert_int_equal(schema_judge(o, "{\"b\":null}"), 1);
    assert_int_equal(schema_judge(o, "{\"a\":11,\"b\":null}"), 1);
    assert_int_equal(schema_judge(o, "{\"a\":12,\"b\":null}"), -1);
    assert_int_equal(schema_judge(o, "{\"a\":-6,\"b\":null}"), -1);
    assert_int_equal(schema_judge(o, "{\"a\":1}"), -1);
    assert_int_equal(schema_judge(o, "{\"b\":\"x\",\"a\":1}"), -1); /* the schema's order */
    const char *n = "{\"type\": \"number\", \"exclusiveMinimum\": -2, \"maximum\": 3}";
    assert_int_equal(schema_judge(n, "-1.5"), 1);
    assert_int_equal(schema_judge(n, "-2"), -1);
    assert_int_equal(schema_judge(n, "-2.5"), -1);
    assert_int_equal(schema_judge(n, "3"), 1);
    assert_int_equal(schema_judge(n, "3.01"), -1);
    assert_int_equal(schema_judge(n, "0.25"), 1);
    const char *p = "{\"type\": \"string\", \"pattern\": \"^[a-c]{2}(x|yy)?\\\\d$\"}";
    assert_int_equal(schema_judge(p, "\"ab7\""), 1);
    assert_int_equal(schema_judge(p, "\"abyy7\""), 1);
    assert_int_equal(schema_judge(p, "\"abz7\""), -1);
    const char *a = "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"boolean\"}], "
                    "\"items\": {\"type\": \"null\"}, \"minItems\": 2, \"maxItems\": 3}";
    assert_int_equal(schema_judge(a, "[true,null]"), 1);
    assert_int_equal(schema_judge(a, "[true"), 0);
    assert_int_equal(schema_judge(a, "[true]"), -1); /* minItems 2 */
    assert_int_equal(schema_judge(a, "[true,null,null,null]"), -1);
}

/* the masked sampler draws what the plain one draws without the masked tokens */
static void test_masked_sampler(void **state)
{
    (void)state;
    enum { NV = 3000 };
    float *logits = malloc(NV * sizeof *logits), *cut = malloc(NV * sizeof *cut);
    uint32_t mask[(NV + 31) / 32];
    uint64_t x = 12345;
    for (int mode = 0; mode < 3; mode++) {
        struct llm_sampler_params p = llm_sampler_default_params();
        p.seed = 99;
        if (mode == 0)
            p.temp = 0;
        if (mode == 2)
            p.top_k = 0, p.top_p = 1, p.min_p = 0, p.repeat_penalty = 1.3f;
        struct llm_sampler *a = llm_sampler_init(p, NV), *b = llm_sampler_init(p, NV);
        for (int step = 0; step < 300; step++) {
            memset(mask, 0, sizeof mask);
            for (int i = 0; i < NV; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                logits[i] = (float)((x >> 11) % 10000) / 1000.0f;
                bool allow = (x >> 40) % 3 == 0;
                if (allow)
                    mask[i / 32] |= 1u << (i % 32);
                cut[i] = allow ? logits[i] : -INFINITY;
            }
            int32_t ta = llm_sampler_sample_masked(a, logits, mask);
            int32_t tb = llm_sampler_sample(b, cut);
            assert_int_equal(ta, tb);
            assert_true(mask[ta / 32] >> (ta % 32) & 1u);
        }
        memset(mask, 0, sizeof mask);
        assert_int_equal(llm_sampler_sample_masked(a, logits, mask), -1); /* nothing allowed */
        llm_sampler_free(a);
        llm_sampler_free(b);
    }
    free(logits);
    free(cut);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n;
    char *s = tu_read_stream(f, &n);
    fclose(f);
    assert_non_null(s);
    return s;
}

/* Masks along a random answer under grammar gbnf: matchers with the memo
 * (default), without it, and with one so small that walks outgrow it (the
 * states then walked as without it) agree at every step; and for tokens
 * drawn at random the mask says what a byte matcher fed the text so far
 * and the token's piece says. The next token is drawn uniformly from the
 * allowed ones (as a random model's seeded sampling does), so the answer
 * goes through the inside of strings, where masks are largest. */
static void masks_agree(const struct llm_vocab *v, const char *gbnf, int steps, uint64_t seed, int64_t wide)
{
    struct llm_grammar *g;
    char err[512];
    assert_int_equal(llm_grammar_parse(gbnf, strlen(gbnf), &g, err, sizeof err), 0);
    struct llm_matcher *m[3];
    for (int i = 0; i < 3; i++)
        assert_non_null(m[i] = llm_matcher_init(g, v));
    llm_matcher_set_memo_bytes(m[1], 0);
    llm_matcher_set_memo_bytes(m[2], 200 << 10);
    int32_t nv = llm_vocab_n_tokens(v), words = (nv + 31) / 32;
    uint32_t *mask[3];
    for (int i = 0; i < 3; i++)
        assert_non_null(mask[i] = malloc((size_t)words * sizeof *mask[i]));
    char text[8192], piece[512];
    size_t tn = 0;
    uint64_t x = seed;
    int64_t big = 0; /* masks allowing over `wide` tokens: the inside of strings */
    for (int step = 0; step < steps; step++) {
        int64_t n[3];
        for (int i = 0; i < 3; i++)
            n[i] = llm_matcher_mask(m[i], mask[i]);
        assert_true(n[0] > 0);
        assert_int_equal(n[0], n[1]);
        assert_int_equal(n[0], n[2]);
        assert_memory_equal(mask[0], mask[1], (size_t)words * sizeof *mask[0]);
        assert_memory_equal(mask[0], mask[2], (size_t)words * sizeof *mask[0]);
        big += n[0] > wide;
        for (int k = 0; k < 48; k++) { /* token by token, against the bytes */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int32_t t = (int32_t)(x % (uint64_t)nv);
            int32_t pl = llm_token_to_piece(v, t, piece, sizeof piece, 0, false);
            if (llm_vocab_is_eog(v, t) || pl <= 0)
                continue;
            struct llm_matcher *b = llm_matcher_init(g, NULL);
            assert_non_null(b);
            bool ok = llm_matcher_feed(b, text, tn) == 0 && llm_matcher_feed(b, piece, (size_t)pl) == 0;
            llm_matcher_free(b);
            assert_int_equal(ok, mask[0][t >> 5] >> (t & 31) & 1u);
        }
        /* the next token: the r-th allowed one, an end-of-generation token
         * only when nothing else is allowed */
        int32_t pick = -1;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t r = (int64_t)(x % (uint64_t)n[0]);
        for (int32_t t = 0; t < nv && pick < 0; t++)
            if (mask[0][t >> 5] >> (t & 31) & 1u && !llm_vocab_is_eog(v, t) && r-- <= 0)
                pick = t;
        for (int32_t t = 0; t < nv && pick < 0; t++)
            if (mask[0][t >> 5] >> (t & 31) & 1u && !llm_vocab_is_eog(v, t))
                pick = t;
        if (pick < 0)
            break; /* only the end is allowed */
        for (int i = 0; i < 3; i++)
            assert_int_equal(llm_matcher_accept(m[i], pick), 0);
        int32_t pl = llm_token_to_piece(v, pick, piece, sizeof piece, 0, false);
        assert_true(pl > 0 && tn + (size_t)pl < sizeof text);
        memcpy(text + tn, piece, (size_t)pl);
        tn += (size_t)pl;
        if (llm_matcher_done(m[0]))
            break;
    }
    assert_true(big > 0);
    struct llm_matcher_stats st = llm_matcher_get_stats(m[0]), st1 = llm_matcher_get_stats(m[1]);
    assert_true(st.states > 0);
    assert_int_equal(st1.states, 0);      /* the memo off */
    assert_int_equal(st.nodes, st1.nodes); /* the same walk */
    assert_true(st.steps < st1.steps);
    for (int i = 0; i < 3; i++) {
        llm_matcher_free(m[i]);
        free(mask[i]);
    }
    llm_grammar_free(g);
}

static void test_masks_memo(void **state)
{
    (void)state;
    char *mem = NULL;
    struct llm_vocab *v = tu_load_vocab("qwen2", &mem);
    assert_non_null(v);
    char *schema = read_file("tests/grammar/deep-schema.json"), *gbnf, err[512];
    assert_int_equal(llm_json_schema_to_grammar(schema, strlen(schema), &gbnf, err, sizeof err), 0);
    masks_agree(v, gbnf, 120, 7, 10000);
    masks_agree(v, gbnf, 120, 11, 10000);
    masks_agree(v, llm_grammar_json(), 60, 3, 10000);
    /* multi-byte classes: characters split across tokens */
    masks_agree(v, "root ::= \"<\" [\\u4e00-\\u9fff\\u00e0-\\u00ff a-z]{4,16} \">\" [0-9]{1,3}\n", 40, 5, 1000);
    free(gbnf);
    free(schema);
    llm_vocab_free(v);
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_matcher),
        cmocka_unit_test(test_schema),
        cmocka_unit_test(test_masked_sampler),
        cmocka_unit_test(test_masks_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
