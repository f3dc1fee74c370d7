/*
 * kvseg.c - KV segment files (format in kvseg.h): writing them atomically and
 * reading them back into a KV cache with every byte verified.
 *
 * Invariants: a segment file at its final path is complete (written to a
 * temporary name, fsync'd, renamed, directory fsync'd); a reader trusts no
 * field before checking it against the file size and what the caller
 * expects, and reports the first mismatch as one line. A failed read may
 * have written into the destination rows: the caller then recomputes them.
 */
#include "sessions/kvseg.h"
#include "models/mdl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ==== CRC-32C ==== */

static uint32_t crc_table[256];

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    static int ready;
    if (!ready) { /* idempotent: racing initialisers write the same values */
        crc_table_init();
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    while (n--)
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

/* GF(2) arithmetic modulo the (reflected) CRC-32C polynomial, to combine
 * the CRCs of pieces computed independently: crc(A || B) is
 * crc(A) * x^(8 |B|) + crc(B). */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

/* x^(8 n) modulo the polynomial */
static uint32_t x8nmodp(size_t n)
{
    static uint32_t x2n[64]; /* x^(2^k) */
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        uint32_t p = 1u << 30; /* x^1 */
        for (int k = 0; k < 64; k++) {
            x2n[k] = p;
            p = multmodp(p, p);
        }
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    uint32_t p = 1u << 31; /* x^0 */
    for (int k = 3; n; n >>= 1, k++)
        if (n & 1)
            p = multmodp(x2n[k & 63], p);
    return p;
}

static uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b)
{
    return multmodp(x8nmodp(len_b), crc_a) ^ crc_b;
}

#if defined(__x86_64__)
/* three independent streams hide the crc32 instruction's latency */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw3(uint32_t crc, const uint8_t *p, size_t lane)
{
    uint64_t c0 = crc, c1 = 0xffffffffu, c2 = 0xffffffffu;
    const uint8_t *a = p, *b = p + lane, *c = p + 2 * lane;
    for (size_t i = 0; i < lane; i += 8) {
        uint64_t x, y, z;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        memcpy(&z, c + i, 8);
        c0 = __builtin_ia32_crc32di(c0, x);
        c1 = __builtin_ia32_crc32di(c1, y);
        c2 = __builtin_ia32_crc32di(c2, z);
    }
    /* final values (~state) combine; the result goes back to a state */
    uint32_t ab = crc32c_combine(~(uint32_t)c0, ~(uint32_t)c1, lane);
    return ~crc32c_combine(ab, ~(uint32_t)c2, lane);
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    if (n >= 3 * 4096) {
        size_t lane = n / 24 * 8;
        crc = crc32c_hw3(crc, p, lane);
        p += 3 * lane;
        n -= 3 * lane;
    }
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        n--;
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    while (n--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

uint32_t kv_crc32c(uint32_t crc, const void *p, size_t n)
{
    crc = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return ~crc32c_hw(crc, p, n);
#endif
    return ~crc32c_sw(crc, p, n);
}

/* ==== ids and sizes ==== */

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

void kv_seg_id(const struct kv_seg_desc *d, uint8_t id[32])
{
    struct mdl_sha256 *h = mdl_sha256_init();
    uint8_t t[4];
    if (!h) {
        memset(id, 0, 32);
        return;
    }
    mdl_sha256_update(h, d->fingerprint, 32);
    put_u32(t, d->kv_type);
    mdl_sha256_update(h, t, 4);
    mdl_sha256_update(h, d->parent, 32);
    /* tokens may point into a file buffer: read them bytewise, as LE i32 */
    mdl_sha256_update(h, d->tokens, 4ull * d->n_tokens);
    mdl_sha256_final(h, id);
}

size_t kv_seg_elem_size(uint32_t kv_type)
{
    return kv_type == 0 ? 4 : kv_type == 1 ? 2 : 0;
}

/* header size for a shape, or 0 if the shape is not allowed */
static uint32_t header_size(uint32_t n_tokens, uint32_t n_layer)
{
    if (n_tokens == 0 || n_tokens > KV_SEG_MAX_TOKENS || n_layer == 0 || n_layer > KV_SEG_MAX_LAYERS)
        return 0;
    uint64_t n = KV_SEG_FIXED_BYTES + 4ull * n_tokens + 8ull * n_layer;
    return (uint32_t)((n + 63) / 64 * 64);
}

/* bytes of one layer's K (or V) block; 0 on overflow */
static uint64_t block_bytes(uint32_t n_tokens, uint32_t n_embd, uint32_t kv_type)
{
    uint64_t b = (uint64_t)n_tokens * n_embd * kv_seg_elem_size(kv_type);
    return b;
}

/* ==== writing ==== */

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *q = p;
    while (n) {
        ssize_t w = write(fd, q, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fsync_dir_of(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int kv_seg_write(const char *path, const struct kv_seg_desc *d, const uint8_t id[32],
                 const void *const *k_rows, const void *const *v_rows, char *err, size_t err_size)
{
    uint32_t hb = header_size(d->n_tokens, d->n_layer);
    size_t es = kv_seg_elem_size(d->kv_type);
    if (!hb || !es || !d->n_embd_k || !d->n_embd_v)
        return fail(err, err_size, "cannot write a segment of %" PRIu32 " tokens, %" PRIu32
                    " layers, kv type %" PRIu32, d->n_tokens, d->n_layer, d->kv_type);
    uint64_t kb = block_bytes(d->n_tokens, d->n_embd_k, d->kv_type);
    uint64_t vb = block_bytes(d->n_tokens, d->n_embd_v, d->kv_type);
    uint8_t *h = calloc(1, hb);
    if (!h)
        return fail(err, err_size, "out of memory");
    memcpy(h, KV_SEG_MAGIC, 8); /* with its NUL */
    put_u32(h + 8, KV_SEG_VERSION);
    put_u32(h + 12, hb);
    memcpy(h + 16, id, 32);
    memcpy(h + 48, d->parent, 32);
    memcpy(h + 80, d->fingerprint, 32);
    put_u32(h + 112, d->kv_type);
    put_u32(h + 116, d->n_layer);
    put_u32(h + 120, d->n_embd_k);
    put_u32(h + 124, d->n_embd_v);
    put_u32(h + 128, d->pos0);
    put_u32(h + 132, d->n_tokens);
    put_u64(h + 136, (kb + vb) * d->n_layer);
    for (uint32_t i = 0; i < d->n_tokens; i++)
        put_u32(h + KV_SEG_FIXED_BYTES + 4 * i, (uint32_t)d->tokens[i]);
    uint8_t *crcs = h + KV_SEG_FIXED_BYTES + 4ull * d->n_tokens;
    for (uint32_t l = 0; l < d->n_layer; l++) {
        put_u32(crcs + 8 * l, kv_crc32c(0, k_rows[l], kb));
        put_u32(crcs + 8 * l + 4, kv_crc32c(0, v_rows[l], vb));
    }
    put_u32(h + 144, kv_crc32c(0, h, hb));

    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(h);
        return fail(err, err_size, "cannot create '%s': %s", tmp, strerror(errno));
    }
    int rc = write_all(fd, h, hb);
    for (uint32_t l = 0; l < d->n_layer && !rc; l++)
        rc = write_all(fd, k_rows[l], kb) || write_all(fd, v_rows[l], vb) ? -1 : 0;
    free(h);
    if (rc == 0 && fsync(fd) != 0)
        rc = -1;
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc) {
        unlink(tmp);
        return fail(err, err_size, "cannot write '%s': %s", path, strerror(e));
    }
    if (fsync_dir_of(path) != 0)
        return fail(err, err_size, "cannot sync the directory of '%s': %s", path, strerror(errno));
    return 0;
}

/* ==== reading ==== */

int kv_seg_parse_header(const uint8_t *buf, size_t size, struct kv_seg_desc *d, uint8_t id[32],
                        uint32_t *header_bytes, char *err, size_t err_size)
{
    if (size < KV_SEG_FIXED_BYTES)
        return fail(err, err_size, "too short for a segment header (%zu bytes)", size);
    if (memcmp(buf, KV_SEG_MAGIC, 8))
        return fail(err, err_size, "not a KV segment (bad magic)");
    uint32_t version = get_u32(buf + 8);
    if (version != KV_SEG_VERSION)
        return fail(err, err_size, "unsupported segment format version %" PRIu32, version);
    memset(d, 0, sizeof *d);
    uint32_t hb = get_u32(buf + 12);
    memcpy(id, buf + 16, 32);
    memcpy(d->parent, buf + 48, 32);
    memcpy(d->fingerprint, buf + 80, 32);
    d->kv_type = get_u32(buf + 112);
    d->n_layer = get_u32(buf + 116);
    d->n_embd_k = get_u32(buf + 120);
    d->n_embd_v = get_u32(buf + 124);
    d->pos0 = get_u32(buf + 128);
    d->n_tokens = get_u32(buf + 132);
    uint64_t rows = get_u64(buf + 136);
    uint32_t want_hb = header_size(d->n_tokens, d->n_layer);
    if (!want_hb)
        return fail(err, err_size, "bad shape (%" PRIu32 " tokens, %" PRIu32 " layers)", d->n_tokens,
                    d->n_layer);
    if (hb != want_hb)
        return fail(err, err_size, "header size %" PRIu32 " should be %" PRIu32, hb, want_hb);
    if (!kv_seg_elem_size(d->kv_type))
        return fail(err, err_size, "unknown kv type %" PRIu32, d->kv_type);
    if (!d->n_embd_k || !d->n_embd_v || d->n_embd_k > (1u << 20) || d->n_embd_v > (1u << 20))
        return fail(err, err_size, "bad row size (%" PRIu32 ", %" PRIu32 ")", d->n_embd_k, d->n_embd_v);
    uint64_t want_rows = (block_bytes(d->n_tokens, d->n_embd_k, d->kv_type) +
                          block_bytes(d->n_tokens, d->n_embd_v, d->kv_type)) * d->n_layer;
    if (rows != want_rows)
        return fail(err, err_size, "rows of %" PRIu64 " bytes should be %" PRIu64, rows, want_rows);
    if (hb > size)
        return fail(err, err_size, "truncated: header of %" PRIu32 " bytes, file of %zu", hb, size);
    uint8_t *copy = malloc(hb);
    if (!copy)
        return fail(err, err_size, "out of memory");
    memcpy(copy, buf, hb);
    put_u32(copy + 144, 0);
    uint32_t crc = kv_crc32c(0, copy, hb);
    free(copy);
    if (crc != get_u32(buf + 144))
        return fail(err, err_size, "header checksum mismatch");
    d->tokens = (const int32_t *)(const void *)(buf + KV_SEG_FIXED_BYTES);
    *header_bytes = hb;
    return 0;
}

/* pread exactly n bytes at off into p; 0, or an errno */
static int pread_full(int fd, uint8_t *p, size_t n, uint64_t off)
{
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EIO;
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

int kv_seg_read(const char *path, const struct kv_seg_desc *want, const uint8_t id[32],
                int32_t *tokens_out, const struct kv_seg_dst *dst, char *err, size_t err_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, err_size, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return fail(err, err_size, "%s", strerror(errno));
    }
    uint32_t hb = header_size(want->n_tokens, want->n_layer);
    size_t es = kv_seg_elem_size(want->kv_type);
    uint64_t kb = block_bytes(want->n_tokens, want->n_embd_k, want->kv_type);
    uint64_t vb = block_bytes(want->n_tokens, want->n_embd_v, want->kv_type);
    if (!hb || !es) {
        close(fd);
        return fail(err, err_size, "bad expected shape");
    }
    uint8_t *h = malloc(hb);
    if (!h) {
        close(fd);
        return fail(err, err_size, "out of memory");
    }
    int rc = 0;
    ssize_t got = pread(fd, h, hb, 0);
    struct kv_seg_desc d;
    uint8_t fid[32];
    uint32_t fhb;
    if (got < 0)
        rc = fail(err, err_size, "%s", strerror(errno));
    else if (kv_seg_parse_header(h, (size_t)got, &d, fid, &fhb, err, err_size))
        rc = -1;
    else if (memcmp(fid, id, 32))
        rc = fail(err, err_size, "segment id does not match its name");
    else if (memcmp(d.fingerprint, want->fingerprint, 32))
        rc = fail(err, err_size, "made for another model (fingerprint differs)");
    else if (d.kv_type != want->kv_type)
        rc = fail(err, err_size, "kv type %" PRIu32 ", expected %" PRIu32, d.kv_type, want->kv_type);
    else if (d.n_layer != want->n_layer || d.n_embd_k != want->n_embd_k ||
             d.n_embd_v != want->n_embd_v || d.n_tokens != want->n_tokens)
        rc = fail(err, err_size, "shape differs from the model's KV cache");
    else if (memcmp(d.parent, want->parent, 32))
        rc = fail(err, err_size, "parent differs from the chain");
    else if (d.pos0 != want->pos0)
        rc = fail(err, err_size, "starts at position %" PRIu32 ", expected %" PRIu32, d.pos0, want->pos0);
    else if ((uint64_t)st.st_size != hb + (kb + vb) * d.n_layer)
        rc = fail(err, err_size, "file is %lld bytes, expected %" PRIu64, (long long)st.st_size,
                  hb + (kb + vb) * d.n_layer);
    if (rc == 0) {
        /* the id is a content address: recompute it from the header's fields */
        uint8_t cid[32];
        kv_seg_id(&d, cid);
        if (memcmp(cid, id, 32))
            rc = fail(err, err_size, "content does not hash to the segment id");
    }
    if (rc) {
        free(h);
        close(fd);
        return rc;
    }
    memcpy(tokens_out, h + KV_SEG_FIXED_BYTES, 4ull * d.n_tokens);
    const uint8_t *crcs = h + KV_SEG_FIXED_BYTES + 4ull * d.n_tokens;
    int bad = -1, io_errno = 0;
    /* block by block, each piece verified while it is in cache: sequential,
     * since reading from the page cache is memory-bound and a thread team
     * costs more than it saves on a busy machine (measured) */
    for (int64_t b = 0; b < 2 * (int64_t)d.n_layer; b++) {
        uint32_t l = (uint32_t)(b / 2);
        bool is_v = b & 1;
        uint64_t n = is_v ? vb : kb;
        uint64_t off = hb + (kb + vb) * l + (is_v ? kb : 0);
        const struct kv_seg_dst *o = &dst[b];
        int e = (uint64_t)o->n_chunks * o->chunk_bytes == n ? 0 : EINVAL;
        uint32_t crc = 0;
        /* each piece is checked right after it is read, while it is in cache */
        for (int64_t g = 0; g < o->n_chunks && !e; g++) {
            uint8_t *p = o->base + (size_t)g * o->stride;
            e = pread_full(fd, p, o->chunk_bytes, off + (uint64_t)g * o->chunk_bytes);
            if (!e)
                crc = kv_crc32c(crc, p, o->chunk_bytes);
        }
        if (e || crc != get_u32(crcs + 4 * b)) {
            io_errno = e;
            bad = (int)b;
            break;
        }
    }
    free(h);
    close(fd);
    if (bad >= 0) {
        if (io_errno)
            return fail(err, err_size, "read error: %s", strerror(io_errno));
        return fail(err, err_size, "checksum mismatch in layer %d's %s rows", bad / 2, bad & 1 ? "V" : "K");
    }
    return 0;
}
