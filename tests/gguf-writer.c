/*
 * gguf-writer.c - builds GGUF files for tests and the test-model generator.
 * Keeps key/value bytes and tensors in memory, then lays out the file:
 * header, key/values, tensor infos, padding, aligned tensor data. For
 * files larger than memory (bench-bigmoe.sh's 32 GB source), gw_stream
 * writes each tensor's data to the file as it comes, behind room kept for
 * the header, which gw_write_file fills exactly with a padding key.
 */
#include "tests/gguf-writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gw_put(struct gw_buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            fprintf(stderr, "gguf-writer: out of memory\n");
            abort();
        }
        b->p = q;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

void gw_put_u32(struct gw_buf *b, uint32_t v) { gw_put(b, &v, 4); }
void gw_put_u64(struct gw_buf *b, uint64_t v) { gw_put(b, &v, 8); }

void gw_put_str(struct gw_buf *b, const char *s)
{
    gw_put_u64(b, strlen(s));
    gw_put(b, s, strlen(s));
}

void gw_buf_free(struct gw_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

struct gw_tensor {
    char name[LLM_GGUF_MAX_NAME];
    uint32_t type, n_dims;
    int64_t ne[LLM_GGUF_MAX_DIMS];
    uint8_t *data;
    uint64_t n_bytes;
};

struct gw {
    uint32_t version, alignment;
    uint64_t n_kv;
    struct gw_buf kv;
    struct gw_tensor *t;
    uint64_t n_t, cap_t;
    FILE *stream; /* gw_stream: the output file; data at room + offset */
    uint64_t max_t, room, data_n;
};

/* the streamed file's padding key: "mkmodel.padding", a string of spaces;
 * its bytes besides the string: key length, key, type, string length */
#define PAD_KEY "mkmodel.padding"
#define PAD_KEY_BYTES (8 + sizeof PAD_KEY - 1 + 4 + 8)

static const size_t elem_size[LLM_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

struct gw *gw_init(void)
{
    struct gw *w = calloc(1, sizeof *w);
    w->version = 3;
    w->alignment = LLM_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gw_free(struct gw *w)
{
    if (!w)
        return;
    for (uint64_t i = 0; i < w->n_t; i++)
        free(w->t[i].data);
    free(w->t);
    if (w->stream)
        fclose(w->stream);
    gw_buf_free(&w->kv);
    free(w);
}

void gw_set_version(struct gw *w, uint32_t version) { w->version = version; }

void gw_set_alignment(struct gw *w, uint32_t alignment)
{
    w->alignment = alignment;
    gw_kv_u32(w, "general.alignment", alignment);
}

static void kv_head(struct gw *w, const char *key, enum llm_gguf_type t)
{
    if (w->room) {
        fprintf(stderr, "gguf-writer: key %s after the first streamed tensor\n", key);
        abort();
    }
    gw_put_str(&w->kv, key);
    gw_put_u32(&w->kv, t);
    w->n_kv++;
}

void gw_kv_scalar(struct gw *w, const char *key, enum llm_gguf_type t, const void *v)
{
    kv_head(w, key, t);
    gw_put(&w->kv, v, elem_size[t]);
}

void gw_kv_u32(struct gw *w, const char *key, uint32_t v) { gw_kv_scalar(w, key, LLM_GGUF_TYPE_UINT32, &v); }
void gw_kv_i32(struct gw *w, const char *key, int32_t v) { gw_kv_scalar(w, key, LLM_GGUF_TYPE_INT32, &v); }
void gw_kv_u64(struct gw *w, const char *key, uint64_t v) { gw_kv_scalar(w, key, LLM_GGUF_TYPE_UINT64, &v); }
void gw_kv_f32(struct gw *w, const char *key, float v) { gw_kv_scalar(w, key, LLM_GGUF_TYPE_FLOAT32, &v); }

void gw_kv_bool(struct gw *w, const char *key, int v)
{
    uint8_t b = v != 0;
    gw_kv_scalar(w, key, LLM_GGUF_TYPE_BOOL, &b);
}

void gw_kv_str(struct gw *w, const char *key, const char *v)
{
    kv_head(w, key, LLM_GGUF_TYPE_STRING);
    gw_put_str(&w->kv, v);
}

void gw_kv_arr(struct gw *w, const char *key, enum llm_gguf_type t, const void *data, uint64_t n)
{
    kv_head(w, key, LLM_GGUF_TYPE_ARRAY);
    gw_put_u32(&w->kv, t);
    gw_put_u64(&w->kv, n);
    gw_put(&w->kv, data, elem_size[t] * n);
}

void gw_kv_arr_str(struct gw *w, const char *key, const char *const *v, uint64_t n)
{
    kv_head(w, key, LLM_GGUF_TYPE_ARRAY);
    gw_put_u32(&w->kv, LLM_GGUF_TYPE_STRING);
    gw_put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++)
        gw_put_str(&w->kv, v[i]);
}

static void put_llm_str(struct gw_buf *b, struct llm_str s)
{
    gw_put_u64(b, s.len);
    gw_put(b, s.ptr, s.len);
}

void gw_kv_copy(struct gw *w, const struct llm_gguf *g, int64_t i)
{
    enum llm_gguf_type t = llm_gguf_kv_type(g, i);
    const char *key = llm_gguf_key(g, i);
    struct llm_str s;
    if (t == LLM_GGUF_TYPE_STRING) {
        kv_head(w, key, t);
        llm_gguf_get_str(g, i, &s);
        put_llm_str(&w->kv, s);
    } else if (t == LLM_GGUF_TYPE_ARRAY) {
        enum llm_gguf_type et = llm_gguf_arr_type(g, i);
        uint64_t n = llm_gguf_arr_n(g, i);
        if (et != LLM_GGUF_TYPE_STRING) {
            gw_kv_arr(w, key, et, llm_gguf_arr_data(g, i), n);
            return;
        }
        kv_head(w, key, t);
        gw_put_u32(&w->kv, et);
        gw_put_u64(&w->kv, n);
        for (uint64_t j = 0; j < n; j++) {
            llm_gguf_arr_get_str(g, i, j, &s);
            put_llm_str(&w->kv, s);
        }
    } else {
        /* scalars: re-read as raw bytes through a one-element view */
        uint8_t raw[8] = {0};
        int64_t si;
        uint64_t ui;
        double f;
        if (t == LLM_GGUF_TYPE_FLOAT32) {
            float v;
            llm_gguf_get_float(g, i, &f);
            v = (float)f;
            memcpy(raw, &v, 4);
        } else if (t == LLM_GGUF_TYPE_FLOAT64) {
            llm_gguf_get_float(g, i, &f);
            memcpy(raw, &f, 8);
        } else if (llm_gguf_get_int(g, i, &si) == 0) {
            memcpy(raw, &si, 8); /* little-endian: the low bytes are the value */
        } else {
            llm_gguf_get_uint64(g, i, &ui);
            memcpy(raw, &ui, 8);
        }
        gw_kv_scalar(w, key, t, raw);
    }
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void die_io(const char *what)
{
    perror(what);
    abort();
}

int gw_stream(struct gw *w, const char *path, uint64_t max_tensors)
{
    w->stream = fopen(path, "wb");
    w->max_t = max_tensors;
    return w->stream ? 0 : -1;
}

/* the first tensor fixes the room for the header: the key/values so far,
 * the padding key's own bytes and max_t tensor infos of the longest name */
static void stream_data(struct gw *w, const void *data, uint64_t n_bytes)
{
    static const uint8_t zeros[4096];
    if (!w->room) {
        uint64_t info = 8 + LLM_GGUF_MAX_NAME + 4 + 8 * LLM_GGUF_MAX_DIMS + 4 + 8;
        w->room = pad_to(24 + w->kv.n + PAD_KEY_BYTES + w->max_t * info, 4096);
        if (4096 % w->alignment || fseeko(w->stream, (off_t)w->room, SEEK_SET))
            die_io("gguf-writer: stream");
    }
    if (w->n_t > w->max_t)
        die_io("gguf-writer: more tensors than gw_stream was told");
    if (n_bytes && fwrite(data, 1, n_bytes, w->stream) != n_bytes)
        die_io("gguf-writer: stream");
    for (uint64_t pad = pad_to(n_bytes, w->alignment) - n_bytes; pad;) {
        uint64_t k = pad < sizeof zeros ? pad : sizeof zeros;
        if (fwrite(zeros, 1, k, w->stream) != k)
            die_io("gguf-writer: stream");
        pad -= k;
    }
}

void gw_tensor(struct gw *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
               const void *data, uint64_t n_bytes)
{
    if (w->n_t == w->cap_t) {
        w->cap_t = w->cap_t ? 2 * w->cap_t : 64;
        w->t = realloc(w->t, w->cap_t * sizeof *w->t);
    }
    struct gw_tensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < n_dims; d++)
        t->ne[d] = ne[d];
    t->n_bytes = n_bytes;
    if (w->stream) {
        stream_data(w, data, n_bytes);
        return;
    }
    t->data = malloc(n_bytes ? n_bytes : 1);
    if (n_bytes)
        memcpy(t->data, data, n_bytes);
}

/* header, key/values, tensor infos and padding up to the data section */
static void write_header(struct gw *w, struct gw_buf *b)
{
    memset(b, 0, sizeof *b);
    gw_put(b, "GGUF", 4);
    gw_put_u32(b, w->version);
    gw_put_u64(b, w->n_t);
    gw_put_u64(b, w->n_kv);
    gw_put(b, w->kv.p, w->kv.n);
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_t; i++) {
        struct gw_tensor *t = &w->t[i];
        gw_put_str(b, t->name);
        gw_put_u32(b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            gw_put_u64(b, (uint64_t)t->ne[d]);
        gw_put_u32(b, t->type);
        gw_put_u64(b, off);
        off = pad_to(off + t->n_bytes, w->alignment);
    }
    while (b->n % w->alignment)
        gw_put(b, "", 1);
}

/* emit(ctx, bytes, n) for each tensor's data and padding */
static int write_data(struct gw *w, int (*emit)(void *, const void *, size_t), void *ctx)
{
    static const uint8_t zeros[4096];
    for (uint64_t i = 0; i < w->n_t; i++) {
        struct gw_tensor *t = &w->t[i];
        if (emit(ctx, t->data, t->n_bytes))
            return -1;
        uint64_t pad = pad_to(t->n_bytes, w->alignment) - t->n_bytes;
        while (pad) {
            uint64_t k = pad < sizeof zeros ? pad : sizeof zeros;
            if (emit(ctx, zeros, k))
                return -1;
            pad -= k;
        }
    }
    return 0;
}

static int emit_buf(void *ctx, const void *p, size_t n)
{
    gw_put(ctx, p, n);
    return 0;
}

static int emit_file(void *ctx, const void *p, size_t n)
{
    return fwrite(p, 1, n, ctx) == n ? 0 : -1;
}

void gw_write_buf(struct gw *w, struct gw_buf *b)
{
    write_header(w, b);
    write_data(w, emit_buf, b);
}

/* the streamed file's header, padded by the padding key to end at room */
static int finish_stream(struct gw *w)
{
    struct gw_buf b;
    write_header(w, &b);
    uint64_t n0 = b.n;
    gw_buf_free(&b);
    if (!w->room || n0 + PAD_KEY_BYTES > w->room)
        return -1;
    uint64_t room = w->room, n = room - n0 - PAD_KEY_BYTES;
    char *sp = malloc(n + 1);
    memset(sp, ' ', n);
    sp[n] = 0;
    w->room = 0;
    gw_kv_str(w, PAD_KEY, sp);
    free(sp);
    write_header(w, &b);
    int rc = b.n == room ? 0 : -1;
    if (!rc && (fseeko(w->stream, 0, SEEK_SET) || fwrite(b.p, 1, b.n, w->stream) != b.n))
        rc = -1;
    gw_buf_free(&b);
    if (fclose(w->stream))
        rc = -1;
    w->stream = NULL;
    return rc;
}

int gw_write_file(struct gw *w, const char *path)
{
    if (w->stream)
        return finish_stream(w);
    struct gw_buf b;
    write_header(w, &b);
    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (f) {
        rc = emit_file(f, b.p, b.n);
        if (!rc)
            rc = write_data(w, emit_file, f);
        if (fclose(f))
            rc = -1;
    }
    gw_buf_free(&b);
    return rc;
}
