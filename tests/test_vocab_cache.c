/*
 * test_vocab_cache.c - the vocabulary's cache file (core/text/vocab-cache.c,
 * kvchat-files(5)): a vocabulary mapped from it is the one built from the
 * GGUF (every token's text and attributes, the special and end-of-generation
 * ids, the tokenization of llama.cpp's test texts, with and without special
 * tokens); it is used only for the model file it was made from as it is
 * now; and a damaged file (any byte changed, cut short, grown, or tables
 * out of range under a correct checksum, which this file computes on its
 * own from the format's description) is never used: the vocabulary is
 * built again, the same, and the file rewritten.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/tok-util.h"
#include "tests/gguf-writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* the header's fields this test reads or changes (offsets from the format) */
enum {
    H_AT = 72, H_ARENA = 120, H_IMAGE = 128, H_SUM = 136, H_N_TOKENS = 152, H_N_MERGES = 156,
    H_N_SPECIAL = 160, H_N_EOG = 164, H_TMASK = 168, H_BOS = 180, HEADER = 4096
};

static char dir[64];

static void write_bytes(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    close(fd);
}

/* the checksum, from the format's words: four 64-bit lanes over 32-byte
 * steps, s = rotl((s ^ w) * K, 29), folded into one */
static uint64_t rotl(uint64_t x, int r) { return x << r | x >> (64 - r); }
static uint64_t checksum(const uint8_t *file, size_t n)
{
    uint8_t *z = malloc(n);
    assert_non_null(z);
    memcpy(z, file, n);
    memset(z + H_SUM, 0, 8); /* the checksum's own field counts as zero */
    uint64_t s[4];
    for (int l = 0; l < 4; l++)
        s[l] = 0x6a09e667f3bcc908ull + (uint64_t)l;
    for (size_t i = 0; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, z + i + 8 * l, 8);
            s[l] = rotl((s[l] ^ w) * 0x9e3779b97f4a7c15ull, 29);
        }
    free(z);
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int l = 0; l < 4; l++)
        h = rotl((h ^ s[l]) * 0xbf58476d1ce4e5b9ull, 31);
    return h;
}

static void reseal(uint8_t *file, size_t n)
{
    uint64_t c = checksum(file, n);
    memcpy(file + H_SUM, &c, 8);
}

static uint64_t get64(const uint8_t *p, size_t at)
{
    uint64_t v;
    memcpy(&v, p + at, 8);
    return v;
}
static uint32_t get32(const uint8_t *p, size_t at)
{
    uint32_t v;
    memcpy(&v, p + at, 4);
    return v;
}
static void put32(uint8_t *p, size_t at, uint32_t v) { memcpy(p + at, &v, 4); }

/* the vocabulary of the model file at path, through the cache in dir */
static struct llm_vocab *load(const char *path, bool *cached)
{
    char err[256];
    struct llm_gguf *g;
    struct llm_vocab *v;
    assert_int_equal(llm_gguf_open(path, &g, err, sizeof err), 0);
    int rc = llm_vocab_load_cached(g, dir, path, &v, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s: %s\n", path, err);
    assert_int_equal(rc, 0);
    llm_gguf_close(g);
    *cached = llm_vocab_from_cache(v);
    return v;
}

static const char *const texts[] = {
    "Hello world", " Hello  world\n\n", "<|im_start|>user\nhi<|im_end|>", "<s>[INST] ok [/INST]</s>",
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c", "3333 tokens?! \t\xf0\x9f\xa6\x99",
    "<|endoftext|><|end|><end_of_turn>", "",
};

/* a and b the same vocabulary, as every public question sees it */
static void same_vocab(const struct llm_vocab *a, const struct llm_vocab *b, const char *inp, size_t ni)
{
    int32_t n = llm_vocab_n_tokens(a);
    assert_int_equal(llm_vocab_n_tokens(b), n);
    assert_int_equal(llm_vocab_type(a), llm_vocab_type(b));
    assert_string_equal(llm_vocab_pre(a), llm_vocab_pre(b));
    assert_int_equal(llm_vocab_bos(a), llm_vocab_bos(b));
    assert_int_equal(llm_vocab_eos(a), llm_vocab_eos(b));
    assert_int_equal(llm_vocab_eot(a), llm_vocab_eot(b));
    assert_int_equal(llm_vocab_unk(a), llm_vocab_unk(b));
    assert_int_equal(llm_vocab_pad(a), llm_vocab_pad(b));
    assert_int_equal(llm_vocab_nl(a), llm_vocab_nl(b));
    assert_int_equal(llm_vocab_add_bos(a), llm_vocab_add_bos(b));
    assert_int_equal(llm_vocab_add_eos(a), llm_vocab_add_eos(b));
    const int32_t *ea, *eb;
    int32_t ne = llm_vocab_eog_ids(a, &ea);
    assert_int_equal(llm_vocab_eog_ids(b, &eb), ne);
    assert_memory_equal(ea, eb, (size_t)ne * 4);
    for (int32_t i = 0; i < n; i++) {
        size_t la, lb;
        const char *ta = llm_token_text(a, i, &la), *tb = llm_token_text(b, i, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(ta, tb, la);
        assert_int_equal(tb[lb], 0);
        assert_int_equal(llm_token_attr(a, i), llm_token_attr(b, i));
        assert_int_equal(llm_token_find(b, tb, lb), llm_token_find(a, ta, la));
        char pa[256], pb[256];
        assert_int_equal(llm_token_to_piece(a, i, pa, sizeof pa, 0, true),
                         llm_token_to_piece(b, i, pb, sizeof pb, 0, true));
    }
    static int32_t ta[1 << 16], tb[1 << 16];
    for (int special = 0; special < 2; special++) {
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            int32_t k = llm_tokenize(a, texts[i], strlen(texts[i]), ta, 1 << 16, true, special);
            assert_int_equal(llm_tokenize(b, texts[i], strlen(texts[i]), tb, 1 << 16, true, special), k);
            assert_memory_equal(ta, tb, (size_t)(k > 0 ? k : 0) * 4);
        }
        if (inp) {
            int32_t k = llm_tokenize(a, inp, ni, ta, 1 << 16, false, special);
            assert_true(k > 0);
            assert_int_equal(llm_tokenize(b, inp, ni, tb, 1 << 16, false, special), k);
            assert_memory_equal(ta, tb, (size_t)k * 4);
        }
    }
}

/* the GGUF of vocabulary NAME (tests/data/tokenizer) at dir/NAME.gguf */
static void vocab_file(const char *name, char *path, size_t size)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "xz -dc tests/data/tokenizer/ggml-vocab-%s.gguf.xz", name);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n;
    char *mem = tu_read_stream(p, &n);
    assert_int_equal(pclose(p), 0);
    assert_non_null(mem);
    snprintf(path, size, "%s/%s.gguf", dir, name);
    write_bytes(path, mem, n);
    free(mem);
}

/* built, written, mapped: the same vocabulary, for each kind the cache
 * must carry (SPM with byte tokens, BPE with merges, phi-3's rstrip
 * special tokens, pre-tokenizers that keep or clean spaces, gemma-4's
 * spaces as U+2581: lost by version 1 of the file) */
static void test_same(void **state)
{
    const char *name = *state;
    char path[256], err[256], inp_path[256], file[4200];
    vocab_file(name, path, sizeof path);
    snprintf(inp_path, sizeof inp_path, "tests/data/tokenizer/ggml-vocab-%s.gguf.inp", name);
    size_t ni = 0;
    char *inp = tu_read_file(inp_path, &ni);
    struct llm_gguf *g;
    struct llm_vocab *ref;
    assert_int_equal(llm_gguf_open(path, &g, err, sizeof err), 0);
    assert_int_equal(llm_vocab_load(g, &ref, err, sizeof err), 0);
    llm_gguf_close(g);
    assert_int_equal(llm_vocab_cache_file(dir, path, file, sizeof file), 0);
    unlink(file);
    bool cached;
    struct llm_vocab *built = load(path, &cached);
    assert_false(cached);
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    struct llm_vocab *mapped = load(path, &cached);
    assert_true(cached);
    same_vocab(ref, built, inp, ni);
    same_vocab(ref, mapped, inp, ni);
    llm_vocab_free(mapped);
    llm_vocab_free(built);
    llm_vocab_free(ref);
    free(inp);
    unlink(file);
    unlink(path);
}

/* the cache file's name: the .kvpack file's, with .kvvocab */
static void test_name(void **state)
{
    (void)state;
    char a[4200], b[4200];
    assert_int_equal(llm_pack_cache_file(dir, "tests/data/tokenizer", a, sizeof a), 0);
    assert_int_equal(llm_vocab_cache_file(dir, "tests/data/tokenizer", b, sizeof b), 0);
    size_t n = strlen(a);
    assert_string_equal(a + n - 7, ".kvpack");
    assert_string_equal(b + n - 7, ".kvvocab");
    assert_memory_equal(a, b, n - 7);
    assert_int_equal(llm_vocab_cache_file(dir, "tests/data/tokenizer", b, n), -1); /* too small */
    assert_int_equal(llm_vocab_cache_file(NULL, "tests/data/tokenizer", b, sizeof b), -1);
}

/* a small BPE vocabulary with merges, control and user-defined tokens */
static void small_model(const char *path)
{
    static const char *const toks[] = {"a", "b", "c", "ab", "abc", "\xc4\xa0", "\xc4\xa0" "a", "<|im_start|>",
                                       "<|im_end|>", "<|endoftext|>", "<tool>", "d"};
    static const char *const merges[] = {"a b", "ab c", "\xc4\xa0 a", "nospace"};
    int32_t types[12] = {1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 4, 1};
    struct gw *w = gw_init();
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(w, "tokenizer.ggml.pre", "qwen2");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", toks, 12);
    gw_kv_arr(w, "tokenizer.ggml.token_type", LLM_GGUF_TYPE_INT32, types, 12);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, 4);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 9);
    assert_int_equal(gw_write_file(w, path), 0);
    gw_free(w);
}

static uint8_t *read_all(const char *path, size_t *n)
{
    uint8_t *p = (uint8_t *)tu_read_file(path, n);
    assert_non_null(p);
    return p;
}

/* the cache file at file replaced by n bytes of img; the vocabulary loaded
 * through it must be built again, equal to ref, and the file made good */
static void rejected(const char *path, const char *file, const uint8_t *img, size_t n,
                     const struct llm_vocab *ref, const char *what)
{
    write_bytes(file, img, n);
    bool cached;
    struct llm_vocab *v = load(path, &cached);
    if (cached)
        fprintf(stderr, "used a damaged cache file: %s\n", what);
    assert_false(cached);
    same_vocab(ref, v, NULL, 0);
    llm_vocab_free(v);
    v = load(path, &cached); /* written again */
    assert_true(cached);
    llm_vocab_free(v);
}

static void test_damaged(void **state)
{
    (void)state;
    char path[256], file[4200], err[256];
    snprintf(path, sizeof path, "%s/small.gguf", dir);
    small_model(path);
    assert_int_equal(llm_vocab_cache_file(dir, path, file, sizeof file), 0);
    struct llm_gguf *g;
    struct llm_vocab *ref;
    assert_int_equal(llm_gguf_open(path, &g, err, sizeof err), 0);
    assert_int_equal(llm_vocab_load(g, &ref, err, sizeof err), 0);
    llm_gguf_close(g);
    bool cached;
    llm_vocab_free(load(path, &cached));
    struct llm_vocab *v = load(path, &cached);
    assert_true(cached);
    same_vocab(ref, v, NULL, 0);
    llm_vocab_free(v);
    size_t n;
    uint8_t *good = read_all(file, &n), *bad = malloc(n + 64);
    assert_non_null(bad);
    assert_int_equal(checksum(good, n), get64(good, H_SUM)); /* the format as described */
    char what[128];
    /* any one byte changed: the header's fields, then the tables */
    for (size_t i = 0; i < n; i += i < 300 ? 1 : 5) {
        if (i >= 300 && i < HEADER)
            continue; /* the path's zero padding: the same as byte 299 */
        memcpy(bad, good, n);
        bad[i] ^= 0x5a;
        snprintf(what, sizeof what, "byte %zu changed", i);
        rejected(path, file, bad, n, ref, what);
    }
    /* cut short, grown, empty */
    size_t cuts[] = {0, 8, HEADER - 1, HEADER, n - 32, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(what, sizeof what, "cut to %zu bytes", cuts[i]);
        rejected(path, file, good, cuts[i], ref, what);
    }
    memcpy(bad, good, n);
    memset(bad + n, 0, 64);
    rejected(path, file, bad, n + 32, ref, "grown by 32 bytes");
    /* tables out of range under a correct checksum */
    const uint8_t *img = good + HEADER;
    uint64_t at[6];
    for (int i = 0; i < 6; i++)
        at[i] = get64(good, H_AT + 8 * (size_t)i);
    uint32_t nt = get32(good, H_N_TOKENS), tslots = get32(good, H_TMASK) + 1;
    uint64_t arena = get64(good, H_ARENA);
    assert_int_equal(nt, 12);
    assert_int_equal(get32(good, H_N_MERGES), 3); /* "nospace" is no merge */
    assert_true(get32(good, H_N_SPECIAL) > 0 && get32(good, H_N_EOG) > 1);
    uint32_t off2 = get32(img, at[0] + 16 * 2); /* token 2, "c" */
    uint32_t ns = get32(good, H_N_SPECIAL), eog0 = get32(img, at[5] + 4 * ns);
    struct {
        const char *what;
        size_t at;
        uint32_t value;
        size_t at2; /* a second field changed, when not 0 */
        uint32_t value2;
    } cases[] = {
        {"a token hash entry past the tokens", HEADER + at[2] + 4 * 3, nt + 1, 0, 0},
        {"a merge hash entry past the merges", HEADER + at[3] + 4 * 5, 4, 0, 0},
        {"a token's text past the arena", HEADER + at[0] + 16 * 2, (uint32_t)arena, 0, 0},
        {"a token's text with no NUL", HEADER + at[0] + 16 * 2 + 4, 2, 0, 0},
        {"a token's length past the arena", HEADER + at[0] + 16 * 4 + 4, 0xffffffffu, 0, 0},
        {"a merge's split past its text", HEADER + at[1] + 12 * 1 + 8, 9, 0, 0},
        {"a special id past the tokens", HEADER + at[5], nt, 0, 0},
        {"an end-of-generation id below 0", HEADER + at[5] + 4 * get32(good, H_N_SPECIAL), 0xfffffff0u, 0, 0},
        {"an empty token text", HEADER + at[0] + 16 * 2, off2 + 1, HEADER + at[0] + 16 * 2 + 4, 0},
        {"a merge split at 0", HEADER + at[1] + 12 * 1 + 8, 0, 0, 0},
        {"end-of-generation ids out of order", HEADER + at[5] + 4 * (ns + 1), eog0, 0, 0},
        {"bos past the tokens", H_BOS, nt, 0, 0},
        {"more tokens than the tables hold", H_N_TOKENS, nt + 1, 0, 0},
        {"a token hash with no free slot", 0, 0, 0, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memcpy(bad, good, n);
        if (cases[c].at)
            put32(bad, cases[c].at, cases[c].value);
        if (cases[c].at2)
            put32(bad, cases[c].at2, cases[c].value2);
        else
            for (uint32_t s = 0; s < tslots; s++)
                if (!get32(img, at[2] + 4 * s))
                    put32(bad, HEADER + at[2] + 4 * s, 1);
        reseal(bad, n);
        rejected(path, file, bad, n, ref, cases[c].what);
    }
    assert_int_equal(get64(good, H_IMAGE) + HEADER, n);
    /* the model file changed (its modification time): built again */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
    v = load(path, &cached);
    assert_false(cached);
    llm_vocab_free(v);
    v = load(path, &cached);
    assert_true(cached);
    llm_vocab_free(v);
    /* another model file's cache file under this one's name */
    char other[256], ofile[4200];
    snprintf(other, sizeof other, "%s/other.gguf", dir);
    small_model(other);
    llm_vocab_free(load(other, &cached));
    assert_int_equal(llm_vocab_cache_file(dir, other, ofile, sizeof ofile), 0);
    assert_int_equal(rename(ofile, file), 0);
    v = load(path, &cached);
    assert_false(cached);
    llm_vocab_free(v);
    /* no directory, or a GGUF in memory: built, nothing written */
    assert_int_equal(llm_gguf_open(path, &g, err, sizeof err), 0);
    assert_int_equal(llm_vocab_load_cached(g, NULL, path, &v, err, sizeof err), 0);
    assert_false(llm_vocab_from_cache(v));
    llm_vocab_free(v);
    llm_gguf_close(g);
    size_t gn;
    char *gm = tu_read_file(path, &gn);
    assert_int_equal(llm_gguf_open_memory(gm, gn, &g, err, sizeof err), 0);
    assert_int_equal(llm_vocab_load_cached(g, dir, path, &v, err, sizeof err), 0);
    assert_false(llm_vocab_from_cache(v));
    llm_vocab_free(v);
    llm_gguf_close(g);
    free(gm);
    llm_vocab_free(ref);
    free(good);
    free(bad);
    unlink(file);
    unlink(path);
    unlink(other);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "%s/kvchat-vcache.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    static const char *const names[] = {"llama-spm", "qwen2", "phi-3", "llama-bpe", "command-r", "falcon", "gemma-4"};
    struct CMUnitTest tests[sizeof names / sizeof names[0] + 2];
    size_t n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        tests[n++] = (struct CMUnitTest){names[i], test_same, NULL, NULL, (void *)names[i]};
    tests[n++] = (struct CMUnitTest){"name", test_name, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"damaged", test_damaged, NULL, NULL, NULL};
    return _cmocka_run_group_tests("vocab_cache", tests, n, setup, teardown);
}
