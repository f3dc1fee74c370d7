/*
 * gguf.c - the GGUF reader: maps a file and validates all of it up front,
 * so that everything after llm_gguf_open can trust what it reads.
 *
 * The file is hostile until proven otherwise. Invariants after a successful
 * open:
 *   - every key, string, array and tensor info lies inside the file;
 *   - counts were checked against the bytes left before anything was
 *     allocated for them, so allocations are bounded by the file size;
 *   - keys and tensor names are unique, NUL-free and copied NUL-terminated;
 *   - every tensor has a known type, 1..4 non-negative dimensions whose
 *     element and byte counts do not overflow, a row length that is a
 *     multiple of its block size, an aligned offset, and data that lies
 *     inside the file without overlapping another tensor.
 * Work is O(file size) plus O(n log n) for the uniqueness checks, so no
 * input can make it hang.
 */
#include "core/llm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct gguf_kv {
    char *key;         /* NUL-terminated copy */
    uint32_t type;     /* enum llm_gguf_type */
    uint32_t arr_type; /* element type, for arrays */
    uint64_t n;        /* element count, for arrays */
    uint64_t off;      /* file offset of the value (arrays: of element 0) */
    uint64_t *str_off; /* arrays of strings: file offset of each element */
};

struct llm_gguf {
    const uint8_t *base; /* the whole file */
    uint64_t size;
    bool mapped;         /* base is our mmap (else borrowed memory) */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    struct gguf_kv *kv;
    int64_t n_tensors;
    struct llm_tensor_info *tensors;
    char *names; /* n_tensors * LLM_GGUF_MAX_NAME bytes backing tensors[].name */
    uint64_t ident[4]; /* dev, inode, mtime s, mtime ns of the file mapped (0 in memory) */
    uint64_t ctime[2]; /* its status-change time s, ns (0 in memory) */
};

/* ==== the cursor: bounded reads with precise errors ==== */

struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    char *err;
    size_t err_size;
};

static int fail(struct cursor *c, const char *fmt, ...)
{
    if (c->err && c->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint64_t left(const struct cursor *c)
{
    return c->size - c->pos;
}

/* Take n bytes; what names them in the error. */
static int take(struct cursor *c, uint64_t n, const void **out, const char *what)
{
    if (n > left(c))
        return fail(c, "truncated file: %s at offset %" PRIu64 " needs %" PRIu64
                       " bytes, %" PRIu64 " left",
                    what, c->pos, n, left(c));
    *out = c->base + c->pos;
    c->pos += n;
    return 0;
}

/* n bytes (a little-endian integer) into v */
static int read_n(struct cursor *c, void *v, size_t n, const char *what)
{
    const void *p = NULL;
    if (take(c, n, &p, what))
        return -1;
    memcpy(v, p, n);
    return 0;
}

static int read_u32(struct cursor *c, uint32_t *v, const char *what) { return read_n(c, v, 4, what); }
static int read_u64(struct cursor *c, uint64_t *v, const char *what) { return read_n(c, v, 8, what); }

/* A GGUF string: u64 length then bytes. Returns its offset and length. */
static int read_str(struct cursor *c, uint64_t *off, uint64_t *len, const char *what)
{
    const void *p = NULL;
    if (read_u64(c, len, what))
        return -1;
    if (*len > left(c))
        return fail(c, "truncated file: %s of %" PRIu64 " bytes at offset %" PRIu64
                       " runs past the end (%" PRIu64 " left)",
                    what, *len, c->pos, left(c));
    *off = c->pos;
    return take(c, *len, &p, what);
}

static const uint64_t scalar_size[LLM_GGUF_TYPE_COUNT] = {
    [LLM_GGUF_TYPE_UINT8] = 1,   [LLM_GGUF_TYPE_INT8] = 1,    [LLM_GGUF_TYPE_UINT16] = 2,
    [LLM_GGUF_TYPE_INT16] = 2,   [LLM_GGUF_TYPE_UINT32] = 4,  [LLM_GGUF_TYPE_INT32] = 4,
    [LLM_GGUF_TYPE_FLOAT32] = 4, [LLM_GGUF_TYPE_BOOL] = 1,    [LLM_GGUF_TYPE_STRING] = 0,
    [LLM_GGUF_TYPE_ARRAY] = 0,   [LLM_GGUF_TYPE_UINT64] = 8,  [LLM_GGUF_TYPE_INT64] = 8,
    [LLM_GGUF_TYPE_FLOAT64] = 8,
};

static const char *const gguf_type_names[LLM_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *llm_gguf_type_name(enum llm_gguf_type t)
{
    return (unsigned)t < LLM_GGUF_TYPE_COUNT ? gguf_type_names[t] : "?";
}

/* ==== parsing ==== */

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Find a repeated string among n; returns it or NULL. O(n log n). */
static const char *find_duplicate(const char **names, int64_t n)
{
    qsort(names, (size_t)n, sizeof *names, cmp_str_ptr);
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i]))
            return names[i];
    return NULL;
}

/* the name of key or tensor idx (of: "key", "tensor"): a string, not empty */
static int read_name(struct cursor *c, const char *of, int64_t idx, uint64_t *off, uint64_t *len)
{
    char what[96];
    snprintf(what, sizeof what, "the name of %s %" PRId64, of, idx);
    if (read_str(c, off, len, what))
        return -1;
    if (*len == 0)
        return fail(c, "%s %" PRId64 " has an empty name", of, idx);
    return 0;
}

static int read_kv(struct cursor *c, struct gguf_kv *kv, int64_t idx)
{
    uint64_t koff, klen;
    char what[96];
    if (read_name(c, "key", idx, &koff, &klen))
        return -1;
    if (memchr(c->base + koff, 0, klen))
        return fail(c, "key %" PRId64 " has a NUL byte in its name", idx);
    kv->key = malloc(klen + 1);
    if (!kv->key)
        return fail(c, "out of memory");
    memcpy(kv->key, c->base + koff, klen);
    kv->key[klen] = 0;

    snprintf(what, sizeof what, "the type of key '%.48s'", kv->key);
    if (read_u32(c, &kv->type, what))
        return -1;
    if (kv->type >= LLM_GGUF_TYPE_COUNT)
        return fail(c, "key '%s' has unknown value type %" PRIu32, kv->key, kv->type);

    snprintf(what, sizeof what, "the value of key '%.48s'", kv->key);
    if (kv->type == LLM_GGUF_TYPE_STRING) {
        uint64_t len;
        return read_str(c, &kv->off, &len, what);
    }
    if (kv->type != LLM_GGUF_TYPE_ARRAY) {
        const void *p;
        kv->off = c->pos;
        return take(c, scalar_size[kv->type], &p, what);
    }
    /* array: element type, count, elements */
    if (read_u32(c, &kv->arr_type, what) || read_u64(c, &kv->n, what))
        return -1;
    if (kv->arr_type >= LLM_GGUF_TYPE_COUNT)
        return fail(c, "key '%s' is an array of unknown type %" PRIu32, kv->key, kv->arr_type);
    if (kv->arr_type == LLM_GGUF_TYPE_ARRAY)
        return fail(c, "key '%s' is an array of arrays, which GGUF does not allow", kv->key);
    kv->off = c->pos;
    if (kv->arr_type != LLM_GGUF_TYPE_STRING) {
        uint64_t esz = scalar_size[kv->arr_type];
        const void *p;
        if (kv->n > left(c) / esz)
            return fail(c, "key '%s': array of %" PRIu64 " %s elements at offset %" PRIu64
                           " runs past the end of the file",
                        kv->key, kv->n, gguf_type_names[kv->arr_type], c->pos);
        return take(c, kv->n * esz, &p, what);
    }
    /* each string takes at least its 8-byte length */
    if (kv->n > left(c) / 8)
        return fail(c, "key '%s': array of %" PRIu64 " strings at offset %" PRIu64
                       " runs past the end of the file",
                    kv->key, kv->n, c->pos);
    kv->str_off = malloc((kv->n ? kv->n : 1) * sizeof *kv->str_off);
    if (!kv->str_off)
        return fail(c, "out of memory");
    for (uint64_t j = 0; j < kv->n; j++) {
        uint64_t len;
        kv->str_off[j] = c->pos;
        /* the usual case checked first: a vocabulary is 300k strings, and
         * naming each one for an error that does not come cost a tenth of
         * a second at every start */
        if (left(c) >= 8) {
            memcpy(&len, c->base + c->pos, 8);
            if (len <= left(c) - 8) {
                c->pos += 8 + len;
                continue;
            }
        }
        snprintf(what, sizeof what, "string %" PRIu64 " of key '%.40s'", j, kv->key);
        if (read_str(c, &(uint64_t){0}, &len, what))
            return -1;
    }
    return 0;
}

static int read_tensor_info(struct cursor *c, struct llm_gguf *g, int64_t idx)
{
    struct llm_tensor_info *t = &g->tensors[idx];
    char *name = g->names + idx * LLM_GGUF_MAX_NAME;
    uint64_t noff, nlen;
    char what[96];
    if (read_name(c, "tensor", idx, &noff, &nlen))
        return -1;
    if (nlen >= LLM_GGUF_MAX_NAME)
        return fail(c, "tensor %" PRId64 " has a name of %" PRIu64 " bytes (at most %d)", idx,
                    nlen, LLM_GGUF_MAX_NAME - 1);
    if (memchr(c->base + noff, 0, nlen))
        return fail(c, "tensor %" PRId64 " has a NUL byte in its name", idx);
    memcpy(name, c->base + noff, nlen);
    name[nlen] = 0;
    t->name = name;

    snprintf(what, sizeof what, "the shape of tensor '%s'", name);
    if (read_u32(c, &t->n_dims, what))
        return -1;
    if (t->n_dims < 1 || t->n_dims > LLM_GGUF_MAX_DIMS)
        return fail(c, "tensor '%s' has %" PRIu32 " dimensions (1 to %d allowed)", name,
                    t->n_dims, LLM_GGUF_MAX_DIMS);
    for (int d = 0; d < LLM_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (read_u64(c, &ne, what))
            return -1;
        if (ne > INT64_MAX)
            return fail(c, "tensor '%s' has a negative size in dimension %" PRIu32, name, d);
        t->ne[d] = (int64_t)ne;
    }
    snprintf(what, sizeof what, "the type of tensor '%s'", name);
    if (read_u32(c, &t->type, what))
        return -1;
    snprintf(what, sizeof what, "the offset of tensor '%s'", name);
    if (read_u64(c, &t->offset, what))
        return -1;

    if (!llm_type_known(t->type))
        return fail(c, "tensor '%s' has unknown type %" PRIu32, name, t->type);
    /* element count, without overflow */
    int64_t n = 1;
    for (int d = 0; d < LLM_GGUF_MAX_DIMS; d++) {
        if (t->ne[d] != 0 && n > INT64_MAX / t->ne[d])
            return fail(c, "tensor '%s' has too many elements (the count overflows)", name);
        n *= t->ne[d];
    }
    int64_t bs = llm_type_block_size(t->type), bb = llm_type_block_bytes(t->type);
    if (t->ne[0] % bs)
        return fail(c, "tensor '%s' has rows of %" PRId64 " elements, not a multiple of the %s "
                       "block size %" PRId64,
                    name, t->ne[0], llm_type_name(t->type), bs);
    if (n / bs > INT64_MAX / bb)
        return fail(c, "tensor '%s' is too large (the byte count overflows)", name);
    t->n_bytes = (uint64_t)(n / bs * bb);
    return 0;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const struct llm_tensor_info *x = *(const struct llm_tensor_info *const *)a;
    const struct llm_tensor_info *y = *(const struct llm_tensor_info *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int parse(struct llm_gguf *g, char *err, size_t err_size)
{
    struct cursor c = {g->base, g->size, 0, err, err_size};
    const void *magic;
    uint64_t n_tensors, n_kv;

    if (g->size < 24)
        return fail(&c, "file too small for a GGUF header (%" PRIu64 " bytes)", g->size);
    take(&c, 4, &magic, "magic");
    if (memcmp(magic, "GGUF", 4))
        return fail(&c, "not a GGUF file (bad magic)");
    read_u32(&c, &g->version, "version");
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return fail(&c, "big-endian GGUF files are not supported");
    if (g->version != 2 && g->version != 3)
        return fail(&c, "unsupported GGUF version %" PRIu32 " (kvchat reads versions 2 and 3)",
                    g->version);
    read_u64(&c, &n_tensors, "tensor count");
    read_u64(&c, &n_kv, "key count");

    /* a key/value pair takes at least 8+1+4+1 bytes, a tensor info 8+1+4+8+4+8 */
    if (n_kv > left(&c) / 14)
        return fail(&c, "key count %" PRIu64 " is impossible in a file of %" PRIu64 " bytes",
                    n_kv, g->size);
    if (n_tensors > left(&c) / 33)
        return fail(&c, "tensor count %" PRIu64 " is impossible in a file of %" PRIu64 " bytes",
                    n_tensors, g->size);

    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    if (!g->kv)
        return fail(&c, "out of memory");
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t)i + 1; /* so close frees what was read */
        if (read_kv(&c, &g->kv[i], (int64_t)i))
            return -1;
    }
    g->n_kv = (int64_t)n_kv;
    if (n_kv > 1) {
        const char **keys = malloc(n_kv * sizeof *keys);
        if (!keys)
            return fail(&c, "out of memory");
        for (uint64_t i = 0; i < n_kv; i++)
            keys[i] = g->kv[i].key;
        const char *dup = find_duplicate(keys, (int64_t)n_kv);
        int rc = dup ? fail(&c, "duplicate key '%s'", dup) : 0;
        free(keys);
        if (rc)
            return rc;
    }

    g->alignment = LLM_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = llm_gguf_find_key(g, "general.alignment");
    if (ai >= 0) {
        if (g->kv[ai].type != LLM_GGUF_TYPE_UINT32)
            return fail(&c, "general.alignment must be a u32, not %s",
                        gguf_type_names[g->kv[ai].type]);
        memcpy(&g->alignment, g->base + g->kv[ai].off, 4);
        if (g->alignment == 0 || (g->alignment & (g->alignment - 1)))
            return fail(&c, "general.alignment %" PRIu32 " is not a power of two", g->alignment);
    }

    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    g->names = calloc(n_tensors ? n_tensors : 1, LLM_GGUF_MAX_NAME);
    if (!g->tensors || !g->names)
        return fail(&c, "out of memory");
    for (uint64_t i = 0; i < n_tensors; i++)
        if (read_tensor_info(&c, g, (int64_t)i))
            return -1;
    g->n_tensors = (int64_t)n_tensors;

    /* the data section starts at the next multiple of the alignment */
    uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    if (n_tensors > 0 && pad > left(&c))
        return fail(&c, "truncated file: the data section would start at offset %" PRIu64
                       ", past the end (%" PRIu64 " bytes)",
                    c.pos + pad, g->size);
    g->data_offset = pad > left(&c) ? g->size : c.pos + pad;
    uint64_t data_size = g->size - g->data_offset;

    if (n_tensors == 0)
        return 0;
    const struct llm_tensor_info **by_off = malloc(n_tensors * sizeof *by_off);
    const char **names = malloc(n_tensors * sizeof *names);
    if (!by_off || !names) {
        free(by_off);
        free(names);
        return fail(&c, "out of memory");
    }
    int rc = 0;
    for (uint64_t i = 0; i < n_tensors && !rc; i++) {
        struct llm_tensor_info *t = &g->tensors[i];
        by_off[i] = t;
        names[i] = t->name;
        if (t->offset % g->alignment)
            rc = fail(&c, "tensor '%s' is at offset %" PRIu64 ", not a multiple of the alignment %" PRIu32,
                      t->name, t->offset, g->alignment);
        else if (t->offset > data_size || t->n_bytes > data_size - t->offset)
            rc = fail(&c, "tensor '%s' (%" PRIu64 " bytes at data offset %" PRIu64
                          ") lies outside the file's data section of %" PRIu64 " bytes",
                      t->name, t->n_bytes, t->offset, data_size);
        else
            t->data = g->base + g->data_offset + t->offset;
    }
    if (!rc) {
        const char *dup = find_duplicate(names, (int64_t)n_tensors);
        if (dup)
            rc = fail(&c, "duplicate tensor name '%s'", dup);
    }
    if (!rc) {
        qsort(by_off, n_tensors, sizeof *by_off, cmp_by_offset);
        for (uint64_t i = 1; i < n_tensors && !rc; i++)
            if (by_off[i - 1]->offset + by_off[i - 1]->n_bytes > by_off[i]->offset)
                rc = fail(&c, "tensors '%s' and '%s' overlap", by_off[i - 1]->name, by_off[i]->name);
    }
    free(by_off);
    free(names);
    return rc;
}

/* ==== open / close ==== */

static int open_common(struct llm_gguf *g, struct llm_gguf **out, char *err, size_t err_size)
{
    if (parse(g, err, err_size)) {
        llm_gguf_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

int llm_gguf_open_memory(const void *buf, size_t size, struct llm_gguf **out, char *err,
                         size_t err_size)
{
    struct llm_gguf *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    g->base = buf;
    g->size = size;
    return open_common(g, out, err, err_size);
}

int llm_gguf_open(const char *path, struct llm_gguf **out, char *err, size_t err_size)
{
    struct stat st;
    *out = NULL;
    /* non-blocking: a FIFO in the model's place is refused, not waited on */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, err_size, "%s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0) {
        snprintf(err, err_size, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_size, "not a regular file");
        close(fd);
        return -1;
    }
    if (st.st_size < 24) {
        snprintf(err, err_size, "file too small for a GGUF header (%lld bytes)",
                 (long long)st.st_size);
        close(fd);
        return -1;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, err_size, "cannot map: %s", strerror(e));
        return -1;
    }
    struct llm_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(p, (size_t)st.st_size);
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    g->base = p;
    g->size = (uint64_t)st.st_size;
    g->mapped = true;
    g->ident[0] = (uint64_t)st.st_dev;
    g->ident[1] = (uint64_t)st.st_ino;
    g->ident[2] = (uint64_t)st.st_mtim.tv_sec;
    g->ident[3] = (uint64_t)st.st_mtim.tv_nsec;
    g->ctime[0] = (uint64_t)st.st_ctim.tv_sec;
    g->ctime[1] = (uint64_t)st.st_ctim.tv_nsec;
    return open_common(g, out, err, err_size);
}

void llm_gguf_close(struct llm_gguf *g)
{
    if (!g)
        return;
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++)
            BASE_FREE(g->kv[i].key, g->kv[i].str_off);
    if (g->mapped)
        munmap((void *)g->base, g->size);
    BASE_FREE(g->kv, g->tensors, g->names, g);
}

/* ==== accessors ==== */

uint32_t llm_gguf_version(const struct llm_gguf *g) { return g->version; }
uint64_t llm_gguf_file_size(const struct llm_gguf *g) { return g->size; }
bool llm_gguf_identity(const struct llm_gguf *g, uint64_t ident[4])
{
    memcpy(ident, g->ident, sizeof g->ident);
    return g->mapped;
}
bool llm_gguf_ctime(const struct llm_gguf *g, uint64_t ctime[2])
{
    memcpy(ctime, g->ctime, sizeof g->ctime);
    return g->mapped;
}
uint32_t llm_gguf_alignment(const struct llm_gguf *g) { return g->alignment; }
uint64_t llm_gguf_data_offset(const struct llm_gguf *g) { return g->data_offset; }
const uint8_t *llm_gguf_bytes(const struct llm_gguf *g) { return g->base; }

void llm_gguf_release(const struct llm_gguf *g, const void *p, size_t n)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)g->base, hi = lo + g->size;
    uintptr_t a = ((uintptr_t)p + pg - 1) / pg * pg, e = ((uintptr_t)p + n) / pg * pg;
    if (!g->mapped || a < lo || e > hi)
        return;
    /* a private read-only file mapping: the pages are the page cache's,
     * never written, so dropping them loses nothing */
    if (e > a)
        madvise((void *)a, e - a, MADV_DONTNEED);
}
int64_t llm_gguf_n_kv(const struct llm_gguf *g) { return g->n_kv; }
int64_t llm_gguf_n_tensors(const struct llm_gguf *g) { return g->n_tensors; }

static const struct gguf_kv *kv_at(const struct llm_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const char *llm_gguf_key(const struct llm_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->key : NULL;
}

int64_t llm_gguf_find_key(const struct llm_gguf *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key))
            return i;
    return -1;
}

enum llm_gguf_type llm_gguf_kv_type(const struct llm_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? (enum llm_gguf_type)kv->type : LLM_GGUF_TYPE_COUNT;
}

/* Decode one numeric element of type t at p into an int64 / uint64 / double;
 * returns the kind: 1 signed, 2 unsigned, 3 float, 0 not numeric. */
static int decode_num(uint32_t t, const uint8_t *p, int64_t *si, uint64_t *ui, double *f)
{
    switch (t) {
    case LLM_GGUF_TYPE_UINT8: *ui = p[0]; return 2;
    case LLM_GGUF_TYPE_BOOL: *ui = p[0] != 0; return 2;
    case LLM_GGUF_TYPE_INT8: *si = (int8_t)p[0]; return 1;
    case LLM_GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); *ui = v; return 2; }
    case LLM_GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); *si = v; return 1; }
    case LLM_GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *ui = v; return 2; }
    case LLM_GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *si = v; return 1; }
    case LLM_GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); *ui = v; return 2; }
    case LLM_GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); *si = v; return 1; }
    case LLM_GGUF_TYPE_FLOAT32: { float v; memcpy(&v, p, 4); *f = v; return 3; }
    case LLM_GGUF_TYPE_FLOAT64: { double v; memcpy(&v, p, 8); *f = v; return 3; }
    default: return 0;
    }
}

static int num_to_int(uint32_t t, const uint8_t *p, int64_t *out)
{
    int64_t si = 0; uint64_t ui = 0; double f = 0;
    switch (decode_num(t, p, &si, &ui, &f)) {
    case 1: *out = si; return 0;
    case 2: if (ui > INT64_MAX) return -1; *out = (int64_t)ui; return 0;
    default: return -1;
    }
}

static int num_to_uint64(uint32_t t, const uint8_t *p, uint64_t *out)
{
    int64_t si = 0; uint64_t ui = 0; double f = 0;
    switch (decode_num(t, p, &si, &ui, &f)) {
    case 1: if (si < 0) return -1; *out = (uint64_t)si; return 0;
    case 2: *out = ui; return 0;
    default: return -1;
    }
}

static int num_to_float(uint32_t t, const uint8_t *p, double *out)
{
    int64_t si = 0; uint64_t ui = 0; double f = 0;
    switch (decode_num(t, p, &si, &ui, &f)) {
    case 1: *out = (double)si; return 0;
    case 2: *out = (double)ui; return 0;
    case 3: *out = f; return 0;
    default: return -1;
    }
}

static void str_at(const struct llm_gguf *g, uint64_t off, struct llm_str *out)
{
    /* off points at the u64 length; validated at open */
    memcpy(&out->len, g->base + off, 8);
    out->ptr = (const char *)g->base + off + 8;
}

int llm_gguf_get_int(const struct llm_gguf *g, int64_t i, int64_t *out)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? num_to_int(kv->type, g->base + kv->off, out) : -1;
}

int llm_gguf_get_uint64(const struct llm_gguf *g, int64_t i, uint64_t *out)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? num_to_uint64(kv->type, g->base + kv->off, out) : -1;
}

int llm_gguf_get_float(const struct llm_gguf *g, int64_t i, double *out)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? num_to_float(kv->type, g->base + kv->off, out) : -1;
}

int llm_gguf_get_str(const struct llm_gguf *g, int64_t i, struct llm_str *out)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != LLM_GGUF_TYPE_STRING)
        return -1;
    /* for a string value, off points at its bytes; the length precedes them */
    str_at(g, kv->off - 8, out);
    return 0;
}

enum llm_gguf_type llm_gguf_arr_type(const struct llm_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == LLM_GGUF_TYPE_ARRAY ? (enum llm_gguf_type)kv->arr_type
                                                 : LLM_GGUF_TYPE_COUNT;
}

uint64_t llm_gguf_arr_n(const struct llm_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == LLM_GGUF_TYPE_ARRAY ? kv->n : 0;
}

static const uint8_t *arr_elem(const struct llm_gguf *g, int64_t i, uint64_t j, uint32_t *t)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != LLM_GGUF_TYPE_ARRAY || j >= kv->n ||
        kv->arr_type == LLM_GGUF_TYPE_STRING)
        return NULL;
    *t = kv->arr_type;
    return g->base + kv->off + j * scalar_size[kv->arr_type];
}

int llm_gguf_arr_get_int(const struct llm_gguf *g, int64_t i, uint64_t j, int64_t *out)
{
    uint32_t t;
    const uint8_t *p = arr_elem(g, i, j, &t);
    return p ? num_to_int(t, p, out) : -1;
}

int llm_gguf_arr_get_uint64(const struct llm_gguf *g, int64_t i, uint64_t j, uint64_t *out)
{
    uint32_t t;
    const uint8_t *p = arr_elem(g, i, j, &t);
    return p ? num_to_uint64(t, p, out) : -1;
}

int llm_gguf_arr_get_float(const struct llm_gguf *g, int64_t i, uint64_t j, double *out)
{
    uint32_t t;
    const uint8_t *p = arr_elem(g, i, j, &t);
    return p ? num_to_float(t, p, out) : -1;
}

int llm_gguf_arr_get_str(const struct llm_gguf *g, int64_t i, uint64_t j, struct llm_str *out)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != LLM_GGUF_TYPE_ARRAY || kv->arr_type != LLM_GGUF_TYPE_STRING ||
        j >= kv->n)
        return -1;
    str_at(g, kv->str_off[j], out);
    return 0;
}

const void *llm_gguf_arr_data(const struct llm_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != LLM_GGUF_TYPE_ARRAY || kv->arr_type == LLM_GGUF_TYPE_STRING)
        return NULL;
    return g->base + kv->off;
}

int llm_gguf_find_int(const struct llm_gguf *g, const char *key, int64_t *out)
{
    int64_t v;
    if (llm_gguf_get_int(g, llm_gguf_find_key(g, key), &v))
        return -1;
    *out = v;
    return 0;
}

int llm_gguf_find_float(const struct llm_gguf *g, const char *key, double *out)
{
    double v;
    if (llm_gguf_get_float(g, llm_gguf_find_key(g, key), &v))
        return -1;
    *out = v;
    return 0;
}

int llm_gguf_find_str(const struct llm_gguf *g, const char *key, struct llm_str *out)
{
    return llm_gguf_get_str(g, llm_gguf_find_key(g, key), out);
}

const struct llm_tensor_info *llm_gguf_tensor(const struct llm_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

int64_t llm_gguf_find_tensor(const struct llm_gguf *g, const char *name)
{
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name))
            return i;
    return -1;
}

int64_t llm_tensor_n_elements(const struct llm_tensor_info *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}
