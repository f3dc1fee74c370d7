/*
 * test_tokenizer.c - llama.cpp's own tokenizer test vectors
 * (tests/data/tokenizer/ggml-vocab-*.gguf.inp/.out, copied from llama.cpp's
 * models/ directory) for every vocabulary kvchat promises, tokenized
 * without BOS and without parsing special tokens, as llama.cpp's
 * test-tokenizer-0 does; plus the edge cases every tokenizer must survive.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/tok-util.h"

static const char *const vocabs[] = {
    "llama-spm", "llama-bpe", "qwen2", "qwen35", "phi-3", "gpt-2", "deepseek-llm",
    "deepseek-coder", "falcon", "starcoder", "refact", "command-r", "mpt",
};

static int run_vectors(const char *name)
{
    char path[256], *mem = NULL;
    size_t ni, no;
    snprintf(path, sizeof path, "tests/data/tokenizer/ggml-vocab-%s.gguf.inp", name);
    char *inp = tu_read_file(path, &ni);
    snprintf(path, sizeof path, "tests/data/tokenizer/ggml-vocab-%s.gguf.out", name);
    char *out = tu_read_file(path, &no);
    struct llm_vocab *v = tu_load_vocab(name, &mem);
    assert_non_null(inp);
    assert_non_null(out);
    assert_non_null(v);
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t seplen = strlen(sep);
    char *p = inp, *line = out;
    int n_tests = 0, n_fail = 0;
    int32_t *toks = malloc(1 << 20);
    while (p < inp + ni) {
        char *next = memmem(p, (size_t)(inp + ni - p), sep, seplen);
        size_t len = next ? (size_t)(next - p) : (size_t)(inp + ni - p);
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = 0;
        int32_t n = llm_tokenize(v, p, len, toks, 1 << 18, false, false);
        char got[65536];
        size_t k = 0;
        got[0] = 0;
        for (int32_t i = 0; i < n && k < sizeof got - 16; i++)
            k += (size_t)snprintf(got + k, sizeof got - k, " %d", toks[i]);
        /* compare without the space before the first id (older .out
         * files have one, newer ones do not) */
        const char *want = line;
        while (*want == ' ')
            want++;
        if (strcmp(got[0] ? got + 1 : got, want) != 0) {
            n_fail++;
            fprintf(stderr, "%s: '%.*s'\n  want:%s\n  got: %s\n", name, (int)len, p, want, got);
        }
        n_tests++;
        line = eol + 1;
        if (!next)
            break;
        p = next + seplen;
    }
    fprintf(stderr, "%s: %d vectors, %d failed\n", name, n_tests, n_fail);
    free(toks);
    llm_vocab_free(v);
    free(mem);
    free(inp);
    free(out);
    return n_fail;
}

static void test_vectors(void **state)
{
    const char *name = *state;
    assert_int_equal(run_vectors(name), 0);
}

/* invalid UTF-8, empty input, 1 MB of text, a too-small buffer */
static void test_edges(void **state)
{
    (void)state;
    const char *names[] = {"llama-spm", "qwen2", "deepseek-llm", "falcon"};
    for (size_t vi = 0; vi < 4; vi++) {
        char *mem;
        struct llm_vocab *v = tu_load_vocab(names[vi], &mem);
        assert_non_null(v);
        int32_t t[64];
        assert_int_equal(llm_tokenize(v, "", 0, t, 64, false, false), 0);
        const char bad[] = "\xff\xfe a\xc3 \xe2\x82 \x80\x80 \xf0\x9f\x98 z";
        int32_t n = llm_tokenize(v, bad, sizeof bad - 1, t, 64, false, false);
        assert_true(n > 0);
        /* too small: the size needed, negated */
        int32_t m = llm_tokenize(v, bad, sizeof bad - 1, t, 1, false, false);
        assert_int_equal(m, -n);
        size_t big = 1 << 20;
        char *s = malloc(big);
        for (size_t i = 0; i < big; i++)
            s[i] = "abc de\xc3\xa9 12345 ,.;\n\xe4\xb8\xad"[i % 23];
        int32_t *bt = malloc(big * sizeof *bt);
        n = llm_tokenize(v, s, big, bt, (int32_t)big, true, false);
        assert_true(n > 1000);
        free(bt);
        free(s);
        llm_vocab_free(v);
        free(mem);
    }
}

int main(void)
{
    struct CMUnitTest tests[sizeof vocabs / sizeof vocabs[0] + 1];
    size_t n = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        tests[n] = (struct CMUnitTest){vocabs[i], test_vectors, NULL, NULL, (void *)vocabs[i]};
        n++;
    }
    tests[n++] = (struct CMUnitTest){"edges", test_edges, NULL, NULL, NULL};
    return _cmocka_run_group_tests("tokenizer", tests, n, NULL, NULL);
}
