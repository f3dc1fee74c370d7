/*
 * test_tokenizer_diff.c - the differential test against llama.cpp: 3,000
 * generated strings (tests/data/tokenizer/diff-strings.hex.xz: mixed
 * scripts, emoji, combining marks, digit and white-space runs, code,
 * special-token texts, invalid UTF-8) tokenized by kvchat must give exactly
 * the ids llama.cpp gave (diff-NAME.ids.xz, made by
 * tests/data/regen-tokenizer.sh), for every vocabulary, both with BOS and
 * plain text, and without BOS parsing special tokens.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/tok-util.h"

static const char *const vocabs[] = {
    "llama-spm", "llama-bpe", "qwen2", "qwen35", "phi-3", "gpt-2", "deepseek-llm",
    "deepseek-coder", "falcon", "starcoder", "refact", "command-r", "mpt", "gpt-neox",
    "baichuan", "aquila",
};

static char *read_xz(const char *path, size_t *n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "xz -dc %s", path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    char *b = tu_read_stream(p, n);
    if (pclose(p) != 0) {
        free(b);
        return NULL;
    }
    return b;
}

static size_t print_ids(char *out, size_t size, const int32_t *t, int32_t n)
{
    size_t k = 0;
    out[0] = 0;
    for (int32_t i = 0; i < n && k + 16 < size; i++)
        k += (size_t)snprintf(out + k, size - k, i ? " %d" : "%d", t[i]);
    return k;
}

static void test_diff(void **state)
{
    const char *name = *state;
    char path[256], *mem = NULL;
    size_t ns, ni;
    char *strings = read_xz("tests/data/tokenizer/diff-strings.hex.xz", &ns);
    snprintf(path, sizeof path, "tests/data/tokenizer/diff-%s.ids.xz", name);
    char *ids = read_xz(path, &ni);
    struct llm_vocab *v = tu_load_vocab(name, &mem);
    assert_non_null(strings);
    assert_non_null(ids);
    assert_non_null(v);
    static char buf[1 << 16], got[1 << 18];
    static int32_t toks[1 << 16];
    char *s = strings, *g = ids;
    int n = 0, bad = 0;
    while (*s && *g) {
        char *se = strchr(s, '\n'), *ge = strchr(g, '\n');
        assert_non_null(se);
        assert_non_null(ge);
        *se = *ge = 0;
        size_t len = 0;
        for (char *p = s; p[0] && p[1]; p += 2) {
            unsigned x;
            sscanf(p, "%2x", &x);
            buf[len++] = (char)x;
        }
        int32_t k = llm_tokenize(v, buf, len, toks, 1 << 16, true, false);
        size_t o = print_ids(got, sizeof got, toks, k);
        o += (size_t)snprintf(got + o, sizeof got - o, " | ");
        k = llm_tokenize(v, buf, len, toks, 1 << 16, false, true);
        print_ids(got + o, sizeof got - o, toks, k);
        if (strcmp(got, g) != 0) {
            if (bad < 5)
                fprintf(stderr, "%s: string %d (%s)\n  llama.cpp: %s\n  kvchat:    %s\n", name,
                        n + 1, s, g, got);
            bad++;
        }
        n++;
        s = se + 1;
        g = ge + 1;
    }
    fprintf(stderr, "%s: %d strings, %d differ\n", name, n, bad);
    assert_true(n >= 1000);
    assert_int_equal(bad, 0);
    llm_vocab_free(v);
    free(mem);
    free(strings);
    free(ids);
}

int main(void)
{
    struct CMUnitTest tests[sizeof vocabs / sizeof vocabs[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++)
        tests[n++] = (struct CMUnitTest){vocabs[i], test_diff, NULL, NULL, (void *)vocabs[i]};
    return _cmocka_run_group_tests("tokenizer_diff", tests, n, NULL, NULL);
}
