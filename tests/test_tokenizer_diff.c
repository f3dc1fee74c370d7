/*
 * test_tokenizer_diff.c - the differential test against llama.cpp: 3,000
 * generated strings (tests/data/tokenizer/diff-strings.hex.xz: mixed
 * scripts, emoji, combining marks, digit and white-space runs, code,
 * special-token texts, invalid UTF-8) tokenized by kvchat must give exactly
 * the ids llama.cpp gave (diff-NAME.ids.xz, made by
 * tests/data/regen-tokenizer.sh), for every vocabulary, both with BOS and
 * plain text, and without BOS parsing special tokens; and detokenizing
 * those ids must give llama.cpp's text. The special ids, the
 * end-of-generation set and every token's attributes and piece must agree
 * with llama.cpp's too (vocab-info.txt).
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
    "baichuan", "aquila", "gemma-3", "gpt-4o", "gemma-4",
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

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
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
    static int32_t toks[1 << 16], toks2[1 << 16];
    static char text[1 << 20];
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
        int32_t k2 = llm_tokenize(v, buf, len, toks2, 1 << 16, false, true);
        o += (size_t)snprintf(got + o, sizeof got - o, " | ");
        o += print_ids(got + o, sizeof got - o, toks2, k2);
        o += (size_t)snprintf(got + o, sizeof got - o, " | ");
        int32_t d = llm_detokenize(v, toks, k, text, sizeof text, true, false);
        for (int32_t i = 0; i < d && o + 8 < sizeof got; i++)
            o += (size_t)snprintf(got + o, sizeof got - o, "%02x", (unsigned char)text[i]);
        o += (size_t)snprintf(got + o, sizeof got - o, " | ");
        d = llm_detokenize(v, toks2, k2, text, sizeof text, false, true);
        for (int32_t i = 0; i < d && o + 8 < sizeof got; i++)
            o += (size_t)snprintf(got + o, sizeof got - o, "%02x", (unsigned char)text[i]);
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

static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 16777619u;
    return h;
}

/* the line llref-tokbatch --info prints, from kvchat's vocabulary */
static void test_info(void **state)
{
    const char *name = *state;
    char *mem, *info;
    size_t ni;
    struct llm_vocab *v = tu_load_vocab(name, &mem);
    assert_non_null(v);
    info = tu_read_file("tests/data/tokenizer/vocab-info.txt", &ni);
    assert_non_null(info);
    char want[4096] = "", got[4096];
    for (char *line = strtok(info, "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, name, strlen(name)) && line[strlen(name)] == ' ')
            snprintf(want, sizeof want, "%s", line + strlen(name) + 1);
    int32_t n = llm_vocab_n_tokens(v);
    size_t o = (size_t)snprintf(got, sizeof got,
                                "n_vocab %d bos %d eos %d eot %d nl %d add_bos %d add_eos %d eog", n,
                                llm_vocab_bos(v), llm_vocab_eos(v), llm_vocab_eot(v), llm_vocab_nl(v),
                                llm_vocab_add_bos(v), llm_vocab_add_eos(v));
    const int32_t *eog;
    int32_t ne = llm_vocab_eog_ids(v, &eog);
    for (int32_t i = 0; i < ne; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, " %d", eog[i]);
    uint32_t ha = 2166136261u, hp = 2166136261u, hq = 2166136261u;
    for (int32_t i = 0; i < n; i++) {
        uint32_t a = llm_token_attr(v, i);
        ha = fnv(ha, &a, 4);
        char buf[1024];
        int32_t k = llm_token_to_piece(v, i, buf, sizeof buf, 0, true);
        hp = fnv(hp, buf, k > 0 ? (size_t)k : 0);
        hp = fnv(hp, "", 1);
        k = llm_token_to_piece(v, i, buf, sizeof buf, 1, false);
        hq = fnv(hq, buf, k > 0 ? (size_t)k : 0);
        hq = fnv(hq, "", 1);
    }
    snprintf(got + o, sizeof got - o, " attr %08x pieces %08x %08x", ha, hp, hq);
    if (strcmp(want, got))
        fprintf(stderr, "%s:\n  llama.cpp: %s\n  kvchat:    %s\n", name, want, got);
    assert_string_equal(want, got);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(llm_vocab_is_eog(v, i), bsearch(&i, eog, (size_t)ne, 4, cmp_i32) != NULL);
    llm_vocab_free(v);
    free(mem);
    free(info);
}

int main(void)
{
    struct CMUnitTest tests[2 * sizeof vocabs / sizeof vocabs[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        tests[n++] = (struct CMUnitTest){vocabs[i], test_diff, NULL, NULL, (void *)vocabs[i]};
        tests[n++] = (struct CMUnitTest){"info", test_info, NULL, NULL, (void *)vocabs[i]};
    }
    return _cmocka_run_group_tests("tokenizer_diff", tests, n, NULL, NULL);
}
