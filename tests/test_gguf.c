/*
 * test_gguf.c - the GGUF reader: every metadata value type, versions 2 and 3,
 * alignment, in-place tensors, and malformed files, each of which must be
 * refused with its own reason. Files are built in memory with the test
 * writer or byte by byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "core/kernels/quant.h"
#include "tests/gguf-writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct llm_gguf *open_buf(struct gw_buf *b, char *err, size_t n)
{
    struct llm_gguf *g = NULL;
    int rc = llm_gguf_open_memory(b->p, b->n, &g, err, n);
    if (rc)
        assert_null(g);
    return g;
}

/* ==== every value type, both versions ==== */

static void build_all_types(struct gw *w)
{
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -2000000000;
    uint64_t u64 = 18000000000000000000ull;
    int64_t i64 = -9000000000000000000ll;
    double f64 = 3.141592653589793;
    gw_kv_scalar(w, "t.u8", LLM_GGUF_TYPE_UINT8, &u8);
    gw_kv_scalar(w, "t.i8", LLM_GGUF_TYPE_INT8, &i8);
    gw_kv_scalar(w, "t.u16", LLM_GGUF_TYPE_UINT16, &u16);
    gw_kv_scalar(w, "t.i16", LLM_GGUF_TYPE_INT16, &i16);
    gw_kv_u32(w, "t.u32", 4000000000u);
    gw_kv_scalar(w, "t.i32", LLM_GGUF_TYPE_INT32, &i32);
    gw_kv_f32(w, "t.f32", 0.25f);
    gw_kv_bool(w, "t.bool", 1);
    gw_kv_str(w, "t.str", "h\xc3\xa9llo");
    gw_kv_scalar(w, "t.u64", LLM_GGUF_TYPE_UINT64, &u64);
    gw_kv_scalar(w, "t.i64", LLM_GGUF_TYPE_INT64, &i64);
    gw_kv_scalar(w, "t.f64", LLM_GGUF_TYPE_FLOAT64, &f64);
    int16_t ai16[3] = {-1, 2, -3};
    float af32[2] = {1.5f, -2.5f};
    uint8_t abool[3] = {1, 0, 1};
    double af64[2] = {1e300, -1e-300};
    uint64_t au64[2] = {1, UINT64_MAX};
    const char *astr[3] = {"a", "", "long string"};
    gw_kv_arr(w, "a.i16", LLM_GGUF_TYPE_INT16, ai16, 3);
    gw_kv_arr(w, "a.f32", LLM_GGUF_TYPE_FLOAT32, af32, 2);
    gw_kv_arr(w, "a.bool", LLM_GGUF_TYPE_BOOL, abool, 3);
    gw_kv_arr(w, "a.f64", LLM_GGUF_TYPE_FLOAT64, af64, 2);
    gw_kv_arr(w, "a.u64", LLM_GGUF_TYPE_UINT64, au64, 2);
    gw_kv_arr_str(w, "a.str", astr, 3);
    gw_kv_arr(w, "a.empty", LLM_GGUF_TYPE_UINT8, NULL, 0);
}

static void check_all_types(const struct llm_gguf *g)
{
    int64_t v;
    uint64_t u;
    double d;
    struct llm_str s;
    assert_int_equal(llm_gguf_n_kv(g), 19);
    assert_int_equal(llm_gguf_find_int(g, "t.u8", &v), 0);
    assert_int_equal(v, 200);
    assert_int_equal(llm_gguf_find_int(g, "t.i8", &v), 0);
    assert_int_equal(v, -100);
    assert_int_equal(llm_gguf_find_int(g, "t.u16", &v), 0);
    assert_int_equal(v, 60000);
    assert_int_equal(llm_gguf_find_int(g, "t.i16", &v), 0);
    assert_int_equal(v, -30000);
    assert_int_equal(llm_gguf_find_int(g, "t.u32", &v), 0);
    assert_int_equal(v, 4000000000ll);
    assert_int_equal(llm_gguf_find_int(g, "t.i32", &v), 0);
    assert_int_equal(v, -2000000000ll);
    assert_int_equal(llm_gguf_find_float(g, "t.f32", &d), 0);
    assert_true(d == 0.25);
    assert_int_equal(llm_gguf_find_int(g, "t.bool", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(llm_gguf_kv_type(g, llm_gguf_find_key(g, "t.bool")), LLM_GGUF_TYPE_BOOL);
    assert_int_equal(llm_gguf_find_str(g, "t.str", &s), 0);
    assert_int_equal(s.len, 6);
    assert_memory_equal(s.ptr, "h\xc3\xa9llo", 6);
    /* u64 above INT64_MAX: not an int, but a uint64 */
    assert_int_equal(llm_gguf_find_int(g, "t.u64", &v), -1);
    assert_int_equal(llm_gguf_get_uint64(g, llm_gguf_find_key(g, "t.u64"), &u), 0);
    assert_true(u == 18000000000000000000ull);
    assert_int_equal(llm_gguf_find_int(g, "t.i64", &v), 0);
    assert_true(v == -9000000000000000000ll);
    assert_int_equal(llm_gguf_get_uint64(g, llm_gguf_find_key(g, "t.i64"), &u), -1);
    assert_int_equal(llm_gguf_find_float(g, "t.f64", &d), 0);
    assert_true(d == 3.141592653589793);
    /* type mismatches are refused, not coerced */
    assert_int_equal(llm_gguf_find_str(g, "t.u32", &s), -1);
    assert_int_equal(llm_gguf_find_int(g, "t.str", &v), -1);
    assert_int_equal(llm_gguf_find_int(g, "t.f32", &v), -1);
    assert_int_equal(llm_gguf_find_int(g, "no.such.key", &v), -1);

    int64_t i = llm_gguf_find_key(g, "a.i16");
    assert_int_equal(llm_gguf_kv_type(g, i), LLM_GGUF_TYPE_ARRAY);
    assert_int_equal(llm_gguf_arr_type(g, i), LLM_GGUF_TYPE_INT16);
    assert_int_equal(llm_gguf_arr_n(g, i), 3);
    assert_int_equal(llm_gguf_arr_get_int(g, i, 2, &v), 0);
    assert_int_equal(v, -3);
    assert_int_equal(llm_gguf_arr_get_int(g, i, 3, &v), -1); /* out of range */
    i = llm_gguf_find_key(g, "a.f32");
    assert_int_equal(llm_gguf_arr_get_float(g, i, 1, &d), 0);
    assert_true(d == -2.5);
    i = llm_gguf_find_key(g, "a.bool");
    assert_int_equal(llm_gguf_arr_get_int(g, i, 1, &v), 0);
    assert_int_equal(v, 0);
    i = llm_gguf_find_key(g, "a.f64");
    assert_int_equal(llm_gguf_arr_get_float(g, i, 0, &d), 0);
    assert_true(d == 1e300);
    i = llm_gguf_find_key(g, "a.u64");
    assert_int_equal(llm_gguf_arr_get_uint64(g, i, 1, &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(llm_gguf_arr_get_int(g, i, 1, &v), -1);
    i = llm_gguf_find_key(g, "a.str");
    assert_int_equal(llm_gguf_arr_type(g, i), LLM_GGUF_TYPE_STRING);
    assert_null(llm_gguf_arr_data(g, i));
    assert_int_equal(llm_gguf_arr_get_str(g, i, 0, &s), 0);
    assert_int_equal(s.len, 1);
    assert_int_equal(llm_gguf_arr_get_str(g, i, 1, &s), 0);
    assert_int_equal(s.len, 0);
    assert_int_equal(llm_gguf_arr_get_str(g, i, 2, &s), 0);
    assert_memory_equal(s.ptr, "long string", 11);
    assert_int_equal(llm_gguf_arr_get_str(g, i, 3, &s), -1);
    assert_int_equal(llm_gguf_arr_get_int(g, i, 0, &v), -1);
    i = llm_gguf_find_key(g, "a.empty");
    assert_int_equal(llm_gguf_arr_n(g, i), 0);
}

static void test_value_types(void **state, uint32_t version)
{
    (void)state;
    struct gw *w = gw_init();
    gw_set_version(w, version);
    build_all_types(w);
    struct gw_buf b;
    gw_write_buf(w, &b);
    char err[256] = "";
    struct llm_gguf *g = open_buf(&b, err, sizeof err);
    assert_non_null(g);
    assert_int_equal(llm_gguf_version(g), version);
    assert_int_equal(llm_gguf_n_tensors(g), 0);
    check_all_types(g);
    llm_gguf_close(g);
    gw_buf_free(&b);
    gw_free(w);
}

static void test_value_types_v2(void **s) { test_value_types(s, 2); }
static void test_value_types_v3(void **s) { test_value_types(s, 3); }

/* ==== tensors in place, alignment ==== */

static void test_tensors_and_alignment(void **state)
{
    (void)state;
    static const uint32_t aligns[] = {1, 8, 32, 64, 4096};
    for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++) {
        struct gw *w = gw_init();
        if (aligns[a] != LLM_GGUF_DEFAULT_ALIGNMENT)
            gw_set_alignment(w, aligns[a]);
        gw_kv_str(w, "general.architecture", "llama");
        float x[3 * 64];
        for (int i = 0; i < 3 * 64; i++)
            x[i] = (float)i * 0.5f - 7;
        int64_t ne2[2] = {64, 3}, ne1[1] = {5};
        gw_tensor(w, "w.f32", LLM_TYPE_F32, 2, ne2, x, sizeof x);
        gw_tensor(w, "odd", LLM_TYPE_F32, 1, ne1, x, 5 * 4); /* 20 bytes: next needs padding */
        uint8_t q[2 * 3 * 34];
        for (int r = 0; r < 3; r++)
            llm_quantize_row(LLM_TYPE_Q8_0, x + r * 64, q + r * 68, 64);
        gw_tensor(w, "w.q8", LLM_TYPE_Q8_0, 2, ne2, q, sizeof q);
        struct gw_buf b;
        gw_write_buf(w, &b);
        char err[256] = "";
        struct llm_gguf *g = open_buf(&b, err, sizeof err);
        if (!g)
            fail_msg("alignment %u: %s", aligns[a], err);
        assert_int_equal(llm_gguf_alignment(g), aligns[a]);
        assert_int_equal(llm_gguf_data_offset(g) % aligns[a], 0);
        assert_int_equal(llm_gguf_n_tensors(g), 3);
        const struct llm_tensor_info *t = llm_gguf_tensor(g, llm_gguf_find_tensor(g, "w.q8"));
        assert_non_null(t);
        assert_int_equal(t->type, LLM_TYPE_Q8_0);
        assert_int_equal(t->n_dims, 2);
        assert_int_equal(t->ne[0], 64);
        assert_int_equal(t->ne[1], 3);
        assert_int_equal(t->ne[2], 1);
        assert_int_equal(t->n_bytes, sizeof q);
        assert_int_equal(t->offset % aligns[a], 0);
        /* in place: the pointer is into the buffer, not a copy */
        assert_true((const uint8_t *)t->data >= b.p && (const uint8_t *)t->data + t->n_bytes <= b.p + b.n);
        assert_memory_equal(t->data, q, sizeof q);
        t = llm_gguf_tensor(g, llm_gguf_find_tensor(g, "w.f32"));
        assert_memory_equal(t->data, x, sizeof x);
        assert_int_equal(llm_tensor_n_elements(t), 192);
        assert_int_equal(llm_gguf_find_tensor(g, "nope"), -1);
        assert_null(llm_gguf_tensor(g, 3));
        llm_gguf_close(g);
        gw_buf_free(&b);
        gw_free(w);
    }
}

static void test_open_file(void **state)
{
    (void)state;
    char path[] = "/tmp/kvchat-test-gguf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct gw *w = gw_init();
    gw_kv_str(w, "general.architecture", "qwen2");
    float x[32] = {1};
    int64_t ne[1] = {32};
    gw_tensor(w, "t", LLM_TYPE_F32, 1, ne, x, sizeof x);
    assert_int_equal(gw_write_file(w, path), 0);
    gw_free(w);
    struct llm_gguf *g;
    char err[256];
    assert_int_equal(llm_gguf_open(path, &g, err, sizeof err), 0);
    assert_int_equal(llm_gguf_n_tensors(g), 1);
    assert_true(((const float *)llm_gguf_tensor(g, 0)->data)[0] == 1.0f);
    llm_gguf_close(g);
    /* not there, a directory */
    unlink(path);
    assert_int_equal(llm_gguf_open(path, &g, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
    assert_int_equal(llm_gguf_open("/tmp", &g, err, sizeof err), -1);
    assert_string_equal(err, "not a regular file");
}

/* gw_stream (files larger than memory): the tensors written as they come
 * behind room for the header, which a padding key fills; the file reads
 * back with every key, tensor and byte of the in-memory writer's */
static void test_stream_file(void **state)
{
    (void)state;
    char path[] = "/tmp/kvchat-test-gguf-XXXXXX", ref[] = "/tmp/kvchat-test-gguf-XXXXXX";
    int fd = mkstemp(path), fd2 = mkstemp(ref);
    assert_true(fd >= 0 && fd2 >= 0);
    close(fd), close(fd2);
    float x[3][40];
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 40; i++)
            x[t][i] = (float)(t * 100 + i);
    int64_t ne[3] = {40, 36, 33}; /* byte counts not multiples of the alignment */
    for (int streamed = 0; streamed < 2; streamed++) {
        struct gw *w = gw_init();
        gw_kv_str(w, "general.architecture", "qwen2");
        gw_kv_u32(w, "qwen2.block_count", 7);
        if (streamed)
            assert_int_equal(gw_stream(w, path, 3), 0);
        for (int t = 0; t < 3; t++) {
            char name[8];
            snprintf(name, sizeof name, "t%d", t);
            gw_tensor(w, name, LLM_TYPE_F32, 1, &ne[t], x[t], (uint64_t)ne[t] * sizeof(float));
        }
        assert_int_equal(gw_write_file(w, streamed ? NULL : ref), 0);
        gw_free(w);
    }
    struct llm_gguf *g, *r;
    char err[256];
    assert_int_equal(llm_gguf_open(path, &g, err, sizeof err), 0);
    assert_int_equal(llm_gguf_open(ref, &r, err, sizeof err), 0);
    assert_int_equal(llm_gguf_n_kv(g), llm_gguf_n_kv(r) + 1);
    int64_t v;
    assert_int_equal(llm_gguf_find_int(g, "qwen2.block_count", &v), 0);
    assert_int_equal(v, 7);
    struct llm_str pad_key;
    assert_int_equal(llm_gguf_find_str(g, "mkmodel.padding", &pad_key), 0);
    assert_true(pad_key.len > 0 && pad_key.ptr[0] == ' ');
    assert_int_equal(llm_gguf_n_tensors(g), 3);
    for (int t = 0; t < 3; t++) {
        const struct llm_tensor_info *a = llm_gguf_tensor(g, t), *b = llm_gguf_tensor(r, t);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->offset, b->offset);
        assert_int_equal(a->n_bytes, b->n_bytes);
        assert_memory_equal(a->data, x[t], a->n_bytes);
    }
    llm_gguf_close(g);
    llm_gguf_close(r);
    unlink(path);
    unlink(ref);
}

/* ==== malformed files: each refused with its own reason ==== */

/* header helper: magic, version, n_tensors, n_kv */
static void head(struct gw_buf *b, uint32_t version, uint64_t nt, uint64_t nkv)
{
    memset(b, 0, sizeof *b);
    gw_put(b, "GGUF", 4);
    gw_put_u32(b, version);
    gw_put_u64(b, nt);
    gw_put_u64(b, nkv);
}

/* a tensor info */
static void tinfo(struct gw_buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                  uint64_t off)
{
    gw_put_str(b, name);
    gw_put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        gw_put_u64(b, ne[d]);
    gw_put_u32(b, type);
    gw_put_u64(b, off);
}

static void pad(struct gw_buf *b, size_t align, size_t extra)
{
    while (b->n % align)
        gw_put(b, "", 1);
    for (size_t i = 0; i < extra; i++)
        gw_put(b, "", 1);
}

struct bad_case {
    const char *what;
    const char *reason; /* expected substring of the error */
};

static void expect_bad(struct gw_buf *b, const struct bad_case *c)
{
    char err[512] = "";
    struct llm_gguf *g = open_buf(b, err, sizeof err);
    if (g) {
        llm_gguf_close(g);
        fail_msg("%s: accepted", c->what);
    }
    if (!strstr(err, c->reason))
        fail_msg("%s: error '%s' lacks '%s'", c->what, err, c->reason);
    print_message("refused %-34s %s\n", c->what, err);
    gw_buf_free(b);
}

static void test_malformed(void **state)
{
    (void)state;
    struct gw_buf b;
    uint64_t ne1[1] = {32}, ne2[2] = {32, 2};
    int n_cases = 0;

#define BAD(what, reason) do { struct bad_case c = {what, reason}; expect_bad(&b, &c); n_cases++; } while (0)

    memset(&b, 0, sizeof b);
    gw_put(&b, "GGUF", 4);
    BAD("short header", "file too small for a GGUF header (4 bytes)");

    head(&b, 3, 0, 0);
    memcpy(b.p, "GGML", 4);
    BAD("bad magic", "not a GGUF file (bad magic)");

    head(&b, 1, 0, 0);
    BAD("version 1", "unsupported GGUF version 1");

    head(&b, 4, 0, 0);
    BAD("version 4", "unsupported GGUF version 4");

    head(&b, 0x03000000u, 0, 0);
    BAD("big-endian", "big-endian GGUF files are not supported");

    head(&b, 3, 0, UINT64_MAX / 2);
    BAD("huge key count", "key count 9223372036854775807 is impossible");

    head(&b, 3, 1000000, 0);
    BAD("huge tensor count", "tensor count 1000000 is impossible");

    head(&b, 3, 0, 1);
    gw_put_u64(&b, 1000);
    gw_put(&b, "abc", 3);
    pad(&b, 1, 16);
    BAD("key name past the end", "the name of key 0 of 1000 bytes");

    head(&b, 3, 0, 2);
    gw_put_u64(&b, 0);
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT8);
    gw_put(&b, "x", 1);
    pad(&b, 1, 16);
    BAD("empty key", "key 0 has an empty name");

    head(&b, 3, 0, 1);
    gw_put_u64(&b, 3);
    gw_put(&b, "a\0b", 3);
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT8);
    gw_put(&b, "x", 1);
    pad(&b, 1, 16);
    BAD("NUL in key", "key 0 has a NUL byte in its name");

    head(&b, 3, 0, 2);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT32);
    gw_put_u32(&b, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT32);
    gw_put_u32(&b, 2);
    BAD("duplicate key", "duplicate key 'k'");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, 13);
    gw_put_u64(&b, 0);
    gw_put_u64(&b, 0);
    BAD("unknown value type", "key 'k' has unknown value type 13");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_ARRAY);
    gw_put_u32(&b, 77);
    gw_put_u64(&b, 1);
    pad(&b, 1, 8);
    BAD("array of unknown type", "key 'k' is an array of unknown type 77");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_ARRAY);
    gw_put_u32(&b, LLM_GGUF_TYPE_ARRAY);
    gw_put_u64(&b, 1);
    pad(&b, 1, 16);
    BAD("nested array", "key 'k' is an array of arrays");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_ARRAY);
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT64);
    gw_put_u64(&b, 1ull << 61); /* n * 8 would overflow without the check */
    pad(&b, 1, 16);
    BAD("array count overflow", "key 'k': array of 2305843009213693952 u64 elements");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_ARRAY);
    gw_put_u32(&b, LLM_GGUF_TYPE_STRING);
    gw_put_u64(&b, 1000000);
    pad(&b, 1, 16);
    BAD("string array count too large", "key 'k': array of 1000000 strings");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_ARRAY);
    gw_put_u32(&b, LLM_GGUF_TYPE_STRING);
    gw_put_u64(&b, 2);
    gw_put_str(&b, "ok");
    gw_put_u64(&b, 99);
    gw_put(&b, "short", 5);
    BAD("string element past the end", "string 1 of key 'k' of 99 bytes");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "k");
    gw_put_u32(&b, LLM_GGUF_TYPE_STRING);
    gw_put_u64(&b, UINT64_MAX);
    gw_put(&b, "xyz", 3);
    BAD("string value length huge", "the value of key 'k' of 18446744073709551615 bytes");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "general.alignment");
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT64);
    gw_put_u64(&b, 32);
    BAD("alignment of wrong type", "general.alignment must be a u32, not u64");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "general.alignment");
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT32);
    gw_put_u32(&b, 48);
    pad(&b, 1, 8);
    BAD("alignment not a power of two", "general.alignment 48 is not a power of two");

    head(&b, 3, 0, 1);
    gw_put_str(&b, "general.alignment");
    gw_put_u32(&b, LLM_GGUF_TYPE_UINT32);
    gw_put_u32(&b, 0);
    pad(&b, 1, 8);
    BAD("alignment zero", "general.alignment 0 is not a power of two");

    head(&b, 3, 1, 0);
    tinfo(&b, "a_name_that_is_far_too_long_for_ggml_to_hold_in_its_64_byte_field", 1, ne1,
          LLM_TYPE_F32, 0);
    pad(&b, 32, 128);
    BAD("tensor name too long", "tensor 0 has a name of 65 bytes (at most 63)");

    head(&b, 3, 2, 0);
    tinfo(&b, "t", 1, ne1, LLM_TYPE_F32, 0);
    tinfo(&b, "t", 1, ne1, LLM_TYPE_F32, 128);
    pad(&b, 32, 256);
    BAD("duplicate tensor", "duplicate tensor name 't'");

    head(&b, 3, 1, 0);
    {
        uint64_t ne5[5] = {1, 1, 1, 1, 1};
        tinfo(&b, "t", 5, ne5, LLM_TYPE_F32, 0);
    }
    pad(&b, 32, 64);
    BAD("too many dimensions", "tensor 't' has 5 dimensions (1 to 4 allowed)");

    head(&b, 3, 1, 0);
    tinfo(&b, "t", 0, ne1, LLM_TYPE_F32, 0);
    pad(&b, 32, 64);
    BAD("zero dimensions", "tensor 't' has 0 dimensions");

    head(&b, 3, 1, 0);
    {
        uint64_t neg[2] = {32, (uint64_t)-5};
        tinfo(&b, "t", 2, neg, LLM_TYPE_F32, 0);
    }
    pad(&b, 32, 64);
    BAD("negative dimension", "tensor 't' has a negative size in dimension 1");

    head(&b, 3, 1, 0);
    {
        uint64_t big[3] = {1ull << 32, 1ull << 32, 4};
        tinfo(&b, "t", 3, big, LLM_TYPE_F32, 0);
    }
    pad(&b, 32, 64);
    BAD("element count overflow", "tensor 't' has too many elements");

    head(&b, 3, 1, 0);
    {
        uint64_t big[2] = {1ull << 32, 1ull << 30};
        tinfo(&b, "t", 2, big, LLM_TYPE_F32, 0);
    }
    pad(&b, 32, 64);
    BAD("byte count overflow", "tensor 't' is too large (the byte count overflows)");

    head(&b, 3, 1, 0);
    tinfo(&b, "t", 1, ne1, 4, 0); /* Q4_2, removed from ggml */
    pad(&b, 32, 64);
    BAD("removed tensor type", "tensor 't' has unknown type 4");

    head(&b, 3, 1, 0);
    tinfo(&b, "t", 1, ne1, 1000, 0);
    pad(&b, 32, 64);
    BAD("unknown tensor type", "tensor 't' has unknown type 1000");

    head(&b, 3, 1, 0);
    {
        uint64_t ne[2] = {48, 2};
        tinfo(&b, "t", 2, ne, LLM_TYPE_Q8_0, 0);
    }
    pad(&b, 32, 256);
    BAD("row not a multiple of the block", "tensor 't' has rows of 48 elements, not a multiple of the Q8_0 block size 32");

    head(&b, 3, 1, 0);
    {
        uint64_t ne[1] = {512};
        tinfo(&b, "t", 1, ne, LLM_TYPE_Q4_K, 0);
    }
    pad(&b, 32, 100); /* Q4_K: 2 blocks of 144 bytes = 288 */
    BAD("truncated K-quant data", "tensor 't' (288 bytes at data offset 0) lies outside the file's data section of 100 bytes");

    head(&b, 3, 1, 0);
    tinfo(&b, "t", 1, ne1, LLM_TYPE_F32, 16);
    pad(&b, 32, 256);
    BAD("misaligned tensor", "tensor 't' is at offset 16, not a multiple of the alignment 32");

    head(&b, 3, 1, 0);
    tinfo(&b, "t", 2, ne2, LLM_TYPE_F32, 0);
    pad(&b, 32, 100); /* needs 256 */
    BAD("tensor data past the end", "tensor 't' (256 bytes at data offset 0) lies outside");

    head(&b, 3, 1, 0);
    tinfo(&b, "t", 1, ne1, LLM_TYPE_F32, UINT64_MAX - 31);
    pad(&b, 32, 256);
    BAD("tensor offset overflow", "lies outside the file's data section");

    head(&b, 3, 2, 0);
    tinfo(&b, "a", 2, ne2, LLM_TYPE_F32, 0);   /* 256 bytes */
    tinfo(&b, "b", 1, ne1, LLM_TYPE_F32, 128); /* inside a */
    pad(&b, 32, 512);
    BAD("overlapping tensors", "tensors 'a' and 'b' overlap");

    head(&b, 3, 1, 0);
    gw_put_str(&b, "t");
    gw_put_u32(&b, 4);
    gw_put_u64(&b, 32);
    gw_put_u64(&b, 1);
    gw_put_u64(&b, 1); /* the fourth dimension is missing */
    BAD("truncated tensor info", "the shape of tensor 't' at offset");

    head(&b, 3, 1, 0);
    tinfo(&b, "t", 1, ne1, LLM_TYPE_F32, 0);
    BAD("no data section", "the data section would start at offset");

    assert_true(n_cases >= 15);
#undef BAD
}

/* ==== the type table ==== */

static void test_type_table(void **state)
{
    (void)state;
    /* sizes from the block layouts (ggml-common.h), written out independently */
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q8_0), 34);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q4_0), 18);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q4_1), 20);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q5_0), 22);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q5_1), 24);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q2_K), 84);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q3_K), 110);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q4_K), 144);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q5_K), 176);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_Q6_K), 210);
    assert_int_equal(llm_type_block_bytes(LLM_TYPE_BF16), 2);
    assert_int_equal(llm_type_block_size(LLM_TYPE_Q6_K), 256);
    assert_int_equal(llm_type_block_size(LLM_TYPE_Q5_1), 32);
    assert_false(llm_type_known(4));
    assert_false(llm_type_known(31));
    assert_false(llm_type_known(LLM_TYPE_COUNT));
    assert_string_equal(llm_type_name(LLM_TYPE_Q4_K), "Q4_K");
    assert_string_equal(llm_type_name(999), "?");
    assert_true(llm_type_supported(LLM_TYPE_Q3_K));
    assert_false(llm_type_supported(LLM_TYPE_IQ2_XXS));
}

/* ==== f16 / bf16 conversions against the hardware (F16C) where present ==== */

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t hw_fp32_to_fp16(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float hw_fp16_to_fp32(uint16_t h)
{
    return _cvtsh_ss(h);
}
#endif

static void test_half_conversions(void **state)
{
    (void)state;
    /* every f16 value round-trips through f32 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = llm_fp16_to_fp32((uint16_t)h);
        if (isnan(f))
            continue;
        assert_int_equal(llm_fp32_to_fp16(f), h);
    }
    assert_true(llm_fp16_to_fp32(0x3c00) == 1.0f);
    assert_true(llm_fp16_to_fp32(0xc000) == -2.0f);
    assert_true(llm_fp16_to_fp32(0x0001) == 5.9604644775390625e-08f);
    assert_int_equal(llm_fp32_to_fp16(65520.0f), 0x7c00); /* rounds to inf */
    assert_int_equal(llm_fp32_to_fp16(65504.0f), 0x7bff);
    assert_int_equal(llm_fp32_to_fp16(1.0f + 1.0f / 2048), 0x3c00); /* tie to even */
    assert_int_equal(llm_fp32_to_fp16(1.0f + 3.0f / 2048), 0x3c02);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("f16c")) {
        for (uint32_t h = 0; h < 0x10000; h++) {
            float ours = llm_fp16_to_fp32((uint16_t)h), hw = hw_fp16_to_fp32((uint16_t)h);
            assert_memory_equal(&ours, &hw, 4);
        }
        /* f32 -> f16 rounding on a sweep of bit patterns */
        uint32_t seed = 12345;
        for (int i = 0; i < 2000000; i++) {
            seed = seed * 1664525u + 1013904223u;
            float f;
            memcpy(&f, &seed, 4);
            if (isnan(f))
                continue;
            if (llm_fp32_to_fp16(f) != hw_fp32_to_fp16(f))
                fail_msg("f32 %08x: ours %04x, F16C %04x", seed, llm_fp32_to_fp16(f), hw_fp32_to_fp16(f));
        }
    } else {
        print_message("no F16C here: hardware comparison skipped\n");
    }
#endif
    assert_int_equal(llm_fp32_to_bf16(1.0f), 0x3f80);
    assert_true(llm_bf16_to_fp32(0x3f80) == 1.0f);
    assert_int_equal(llm_fp32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
    assert_int_equal(llm_fp32_to_bf16(1.01171875f), 0x3f82);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_types_v2),
        cmocka_unit_test(test_value_types_v3),
        cmocka_unit_test(test_tensors_and_alignment),
        cmocka_unit_test(test_open_file),
        cmocka_unit_test(test_stream_file),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_half_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
