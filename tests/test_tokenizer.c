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
#include "tests/gguf-writer.h"

static const char *const vocabs[] = {
    "llama-spm", "llama-bpe", "qwen2", "qwen35", "phi-3", "gpt-2", "deepseek-llm",
    "deepseek-coder", "falcon", "starcoder", "refact", "command-r", "mpt", "gemma-4",
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

/* valid, complete UTF-8 */
static bool utf8_whole(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
        if (!k || i + k > n)
            return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80)
                return false;
        i += k;
    }
    return true;
}

/* token by token, the streaming detokenizer never yields half a character
 * and adds up to what llm_detokenize gives for the whole sequence */
static void test_stream(void **state)
{
    (void)state;
    const char *names[] = {"llama-spm", "qwen2", "llama-bpe"};
    const char *text = "Hi \xf0\x9f\xa6\x99 caf\xc3\xa9, \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x91\xa8\xe2\x80\x8d"
                       "\xf0\x9f\x91\xa9 \xd0\xbc\xd0\xb8\xd1\x80 <|im_end|> ok";
    for (size_t vi = 0; vi < 3; vi++) {
        char *mem;
        struct llm_vocab *v = tu_load_vocab(names[vi], &mem);
        assert_non_null(v);
        int32_t t[256];
        int32_t n = llm_tokenize(v, text, strlen(text), t, 256, false, true);
        assert_true(n > 10);
        struct llm_detok_params p = llm_detok_default_params();
        p.strip_space = true; /* a text's start, as llm_detokenize */
        p.special = true;
        struct llm_detok *d = llm_detok_init(v, p);
        char all[1024];
        size_t len = 0;
        for (int32_t i = 0; i < n; i++) {
            const char *out;
            size_t k = llm_detok_push(d, t[i], &out);
            assert_true(utf8_whole(out, k));
            memcpy(all + len, out, k);
            len += k;
        }
        const char *out;
        assert_int_equal(llm_detok_flush(d, &out), 0);
        llm_detok_free(d);
        char whole[1024];
        int32_t m = llm_detokenize(v, t, n, whole, sizeof whole, false, true);
        /* gpt-2 style clean-up of spaces is a whole-text pass; these texts
         * have none to clean */
        assert_int_equal((size_t)m, len);
        assert_memory_equal(whole, all, len);
        assert_memory_equal(all, text, strlen(text));
        /* token facts */
        assert_true(llm_vocab_is_eog(v, llm_vocab_eos(v)));
        assert_true(llm_token_attr(v, llm_vocab_bos(v)) & LLM_TOKEN_ATTR_CONTROL);
        assert_int_equal(llm_token_attr(v, -1), 0);
        assert_null(llm_token_text(v, llm_vocab_n_tokens(v), NULL));
        llm_vocab_free(v);
        free(mem);
    }
}

/* a stream cut inside a character hands the bytes over at flush */
static void test_stream_partial(void **state)
{
    (void)state;
    char *mem;
    struct llm_vocab *v = tu_load_vocab("llama-spm", &mem);
    assert_non_null(v);
    int32_t t[16];
    int32_t n = llm_tokenize(v, "\xf0\x9f\xa6\x99", 4, t, 16, false, false);
    assert_int_equal(n, 5); /* "▁" and the llama emoji's four byte tokens */
    struct llm_detok *d = llm_detok_init(v, llm_detok_default_params());
    const char *out;
    assert_int_equal(llm_detok_push(d, t[0], &out), 1);
    for (int32_t i = 1; i < 4; i++)
        assert_int_equal(llm_detok_push(d, t[i], &out), 0);
    size_t k = llm_detok_flush(d, &out);
    assert_int_equal(k, 3);
    assert_memory_equal(out, "\xf0\x9f\xa6", 3);
    llm_detok_free(d);
    llm_vocab_free(v);
    free(mem);
}

/* build a vocabulary in memory and load it; returns the load status */
static int load_built(struct gw *w, struct llm_vocab **v, char *err, size_t es)
{
    struct gw_buf b = {0};
    gw_write_buf(w, &b);
    gw_free(w);
    struct llm_gguf *g;
    int rc = llm_gguf_open_memory(b.p, b.n, &g, err, es);
    assert_int_equal(rc, 0);
    rc = llm_vocab_load(g, v, err, es);
    llm_gguf_close(g);
    gw_buf_free(&b);
    return rc;
}

/* bad vocabularies: a clear error, or a result, never a crash */
static void test_bad_vocab(void **state)
{
    (void)state;
    static const char *const toks[] = {"a", "b", "ab", "\xc4\xa0", "<|end|>"};
    static const char *const merges[] = {"a b", "\xc4\xa0 a", "nospace", "x y"};
    char err[256];
    struct llm_vocab *v;
    /* BPE without merges */
    struct gw *w = gw_init();
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    assert_true(load_built(w, &v, err, sizeof err) < 0);
    assert_string_equal(err, "missing tokenizer.ggml.merges");
    /* merges naming symbols that are no tokens, one without a space: loads,
     * and text the vocabulary cannot spell is dropped byte by byte as
     * llama.cpp drops it */
    w = gw_init();
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, 4);
    assert_int_equal(load_built(w, &v, err, sizeof err), 0);
    int32_t t[16];
    assert_int_equal(llm_tokenize(v, "ab a", 4, t, 16, false, false), 2);
    assert_int_equal(t[0], 2);
    assert_int_equal(llm_tokenize(v, "zz\xff", 3, t, 16, false, false), 0);
    assert_int_equal(llm_tokenize(v, "<|end|>", 7, t, 16, false, true), 1);
    assert_int_equal(t[0], 4);
    assert_true(llm_vocab_is_eog(v, 4));
    llm_vocab_free(v);
    /* an unknown pre-tokenizer, an unknown tokenizer model, no tokens */
    w = gw_init();
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(w, "tokenizer.ggml.pre", "klingon");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, 4);
    assert_true(load_built(w, &v, err, sizeof err) < 0);
    assert_string_equal(err, "unknown pre-tokenizer 'klingon'");
    w = gw_init();
    gw_kv_str(w, "tokenizer.ggml.model", "t5");
    assert_true(load_built(w, &v, err, sizeof err) < 0);
    assert_non_null(strstr(err, "unsupported tokenizer 't5'"));
    w = gw_init();
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    assert_true(load_built(w, &v, err, sizeof err) < 0);
    assert_string_equal(err, "missing or invalid tokenizer.ggml.tokens");
    /* scores shorter than the vocabulary */
    float sc[2] = {0, 0};
    w = gw_init();
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    gw_kv_arr(w, "tokenizer.ggml.scores", LLM_GGUF_TYPE_FLOAT32, sc, 2);
    assert_true(load_built(w, &v, err, sizeof err) < 0);
    assert_string_equal(err, "invalid tokenizer.ggml.scores");
    /* SPM without byte tokens: unknown characters become <unk> or nothing */
    w = gw_init();
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    assert_int_equal(load_built(w, &v, err, sizeof err), 0);
    assert_true(llm_tokenize(v, "abc \xff", 5, t, 16, true, false) >= 2);
    llm_vocab_free(v);
}

int main(void)
{
    struct CMUnitTest tests[sizeof vocabs / sizeof vocabs[0] + 4];
    size_t n = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        tests[n] = (struct CMUnitTest){vocabs[i], test_vectors, NULL, NULL, (void *)vocabs[i]};
        n++;
    }
    tests[n++] = (struct CMUnitTest){"edges", test_edges, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"stream", test_stream, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"stream_partial", test_stream_partial, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"bad_vocab", test_bad_vocab, NULL, NULL, NULL};
    return _cmocka_run_group_tests("tokenizer", tests, n, NULL, NULL);
}
