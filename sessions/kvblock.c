/*
 * kvblock.c - KV block files and recurrent-state snapshot files (formats in
 * kvblock.h): writing them atomically and reading them back into a KV cache
 * (or a state buffer) with every byte verified.
 *
 * Invariants: a block file at its final path is complete (written to a
 * temporary name created exclusively, data synced, renamed, directory
 * synced); a reader opens nothing that could block, trusts no field before
 * checking it against the file size and what the caller expects, and
 * reports the first mismatch as one line. A failed read may have written
 * into the destination rows: the caller then recomputes them.
 */
#include "sessions/kvblock.h"
#include "core/llm.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
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

/* x8nmodp(n) for the lane lengths a thread uses again and again (a block's
 * runs are all one size): one multiplication per combine instead of a
 * product per bit of n */
__attribute__((unused)) static uint32_t x8nmodp_cached(size_t n)
{
    static _Thread_local size_t last_n[2];
    static _Thread_local uint32_t last_p[2];
    for (int i = 0; i < 2; i++)
        if (last_n[i] == n && n)
            return last_p[i];
    uint32_t p = x8nmodp(n);
    last_n[1] = last_n[0];
    last_p[1] = last_p[0];
    last_n[0] = n;
    last_p[0] = p;
    return p;
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
    /* final values (~state) combine: crc(A || B) = crc(A) x^(8 |B|) + crc(B);
     * the result goes back to a state */
    uint32_t k = x8nmodp_cached(lane);
    uint32_t ab = multmodp(k, ~(uint32_t)c0) ^ ~(uint32_t)c1;
    return ~(multmodp(k, ab) ^ ~(uint32_t)c2);
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    if (n >= 3 * 256) {
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

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return KV_BLOCK_DAMAGED;
}

int kv_block_id(const struct kv_block_desc *d, uint8_t id[32])
{
    uint8_t t[4];
    put_u32(t, d->kv_type);
    /* tokens may point into a file buffer: hashed bytewise, as LE i32 */
    struct llm_bytes parts[4] = {
        {d->fingerprint, 32}, {t, 4}, {d->parent, 32}, {d->tokens, 4ull * d->n_tokens}};
    return llm_sha256_parts(parts, 4, id) == LLM_OK ? 0 : -1;
}

size_t kv_block_elem_size(uint32_t kv_type)
{
    return kv_type == 0 ? 4 : kv_type == 1 ? 2 : 0;
}

/* header size for a shape, or 0 if the shape is not allowed */
static uint32_t header_size(uint32_t n_tokens, uint32_t n_layer)
{
    if (n_tokens == 0 || n_tokens > KV_BLOCK_MAX_TOKENS || n_layer == 0 || n_layer > KV_BLOCK_MAX_LAYERS)
        return 0;
    uint64_t n = KV_BLOCK_FIXED_BYTES + 4ull * n_tokens + 8ull * n_layer;
    return (uint32_t)((n + 63) / 64 * 64);
}

static bool shape_ok(const struct kv_block_desc *d)
{
    return header_size(d->n_tokens, d->n_layer) && kv_block_elem_size(d->kv_type) && d->n_embd_k &&
           d->n_embd_v && d->n_embd_k <= (1u << 20) && d->n_embd_v <= (1u << 20);
}

/* bytes of one layer's K (kv = 0) or V rows */
static uint64_t run_bytes(const struct kv_block_desc *d, int kv)
{
    return (uint64_t)d->n_tokens * (kv ? d->n_embd_v : d->n_embd_k) * kv_block_elem_size(d->kv_type);
}

uint64_t kv_block_rows_bytes(const struct kv_block_desc *d)
{
    return shape_ok(d) ? (run_bytes(d, 0) + run_bytes(d, 1)) * d->n_layer : 0;
}

uint64_t kv_block_file_bytes(const struct kv_block_desc *d)
{
    return shape_ok(d) ? header_size(d->n_tokens, d->n_layer) + kv_block_rows_bytes(d) : 0;
}

/* ==== writing ==== */

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)ftw;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) == 0 || errno == ENOENT ? 0 : -1;
}

/* something that is not a regular file where a block goes: remove it so
 * the rename can put the block there. The path is the store's own (a
 * block's name under kv/xx/), so a directory there goes with what it holds
 * (symbolic links inside are removed, never followed; other file systems
 * mounted inside are not entered) */
static void clear_non_file(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode))
        return;
    if (S_ISDIR(sb.st_mode) && rmdir(path) != 0)
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    else if (!S_ISDIR(sb.st_mode))
        unlink(path);
}

/* path written whole, head then body, replacing it atomically (core/base:
 * a temporary file created exclusively, never through a symlink or a
 * FIFO, synced, renamed in, the directory synced); 0, or KV_BLOCK_DAMAGED
 * with err and *err_no, no file left */
static int write_file(const char *path, const void *head, size_t hb, const void *body, uint64_t bb, char *err,
                      size_t err_size, int *err_no)
{
    struct base_atomic a;
    if (base_atomic_open(&a, path, 0600)) {
        *err_no = errno;
        fail(err, err_size, "cannot create '%s': %s", a.tmp ? a.tmp : path, strerror(errno));
        base_atomic_abort(&a);
        return KV_BLOCK_DAMAGED;
    }
    base_atomic_write(&a, head, hb);
    base_atomic_write(&a, body, (size_t)bb);
    if (!a.err)
        clear_non_file(path); /* what is not a file where the block goes */
    int rc = base_atomic_commit(&a);
    *err_no = rc ? errno : 0;
    if (rc == BASE_ATOMIC_DIR_SYNC)
        return fail(err, err_size, "cannot sync the directory of '%s': %s", path, strerror(*err_no));
    if (rc)
        return fail(err, err_size, "cannot write '%s': %s", path, strerror(*err_no));
    return 0;
}

int kv_block_write(const char *path, const struct kv_block_desc *d, const uint8_t id[32],
                   const void *rows, char *err, size_t err_size, int *err_no)
{
    *err_no = EINVAL;
    if (!shape_ok(d))
        return fail(err, err_size, "cannot write a block of %" PRIu32 " tokens, %" PRIu32 " layers, kv type %" PRIu32,
                    d->n_tokens, d->n_layer, d->kv_type);
    uint32_t hb = header_size(d->n_tokens, d->n_layer);
    uint64_t kb = run_bytes(d, 0), vb = run_bytes(d, 1), rb = kv_block_rows_bytes(d);
    uint8_t *h = calloc(1, hb);
    if (!h) {
        *err_no = ENOMEM;
        return fail(err, err_size, "out of memory");
    }
    memcpy(h, KV_BLOCK_MAGIC, 8); /* with its NUL */
    put_u32(h + 8, KV_BLOCK_VERSION);
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
    put_u64(h + 136, rb);
    for (uint32_t i = 0; i < d->n_tokens; i++)
        put_u32(h + KV_BLOCK_FIXED_BYTES + 4 * i, (uint32_t)d->tokens[i]);
    uint8_t *crcs = h + KV_BLOCK_FIXED_BYTES + 4ull * d->n_tokens;
    const uint8_t *r = rows;
    for (uint32_t l = 0; l < d->n_layer; l++) {
        put_u32(crcs + 8 * l, kv_crc32c(0, r + (kb + vb) * l, kb));
        put_u32(crcs + 8 * l + 4, kv_crc32c(0, r + (kb + vb) * l + kb, vb));
    }
    put_u32(h + 144, kv_crc32c(0, h, hb));
    int rc = write_file(path, h, hb, rows, rb, err, err_size, err_no);
    free(h);
    return rc;
}

/* ==== reading ==== */

int kv_block_parse_header(const uint8_t *buf, size_t size, struct kv_block_desc *d, uint8_t id[32],
                          uint32_t *header_bytes, char *err, size_t err_size)
{
    if (size < KV_BLOCK_FIXED_BYTES)
        return fail(err, err_size, "too short for a block header (%zu bytes)", size);
    if (memcmp(buf, KV_BLOCK_MAGIC, 8))
        return fail(err, err_size, "not a KV block (bad magic)");
    uint32_t version = get_u32(buf + 8);
    if (version != KV_BLOCK_VERSION)
        return fail(err, err_size, "unsupported block format version %" PRIu32, version);
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
    if (!kv_block_elem_size(d->kv_type))
        return fail(err, err_size, "unknown kv type %" PRIu32, d->kv_type);
    if (!shape_ok(d))
        return fail(err, err_size, "bad row size (%" PRIu32 ", %" PRIu32 ")", d->n_embd_k, d->n_embd_v);
    if (rows != kv_block_rows_bytes(d))
        return fail(err, err_size, "rows of %" PRIu64 " bytes should be %" PRIu64, rows,
                    kv_block_rows_bytes(d));
    if (hb > size)
        return fail(err, err_size, "truncated: header of %" PRIu32 " bytes, file of %zu", hb, size);
    /* the CRC of the header with its own field taken as zero */
    uint8_t zero[4] = {0};
    uint32_t crc = kv_crc32c(0, buf, 144);
    crc = kv_crc32c(crc, zero, 4);
    crc = kv_crc32c(crc, buf + 148, hb - 148);
    if (crc != get_u32(buf + 144))
        return fail(err, err_size, "header checksum mismatch");
    d->tokens = (const int32_t *)(const void *)(buf + KV_BLOCK_FIXED_BYTES);
    *header_bytes = hb;
    return 0;
}

/* bytes read (and verified) at a time: half of a core's L2 */
#define READ_GROUP_BYTES (256u << 10)

/* Read the file's bytes from off into the n iovecs (updated as they fill):
 * 0, or an errno (EIO: the file ended first). */
static int preadv_full(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n > 0) {
        ssize_t r = preadv(fd, iov, n > IOV_MAX ? IOV_MAX : n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EIO;
        off += (uint64_t)r;
        while (n > 0 && (size_t)r >= iov->iov_len) {
            r -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0 && r > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + r;
            iov->iov_len -= (size_t)r;
        }
    }
    return 0;
}

/* the file at path, for reading, if it is a regular file (*st its stat):
 * its descriptor, or KV_BLOCK_MISSING (none, or not a regular file) or
 * KV_BLOCK_DAMAGED (it cannot be opened), err saying why. O_NONBLOCK: a
 * FIFO (or a device) in the file's place must not hang us. */
static int open_regular(const char *path, struct stat *st, char *err, size_t err_size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        fail(err, err_size, "%s", strerror(e));
        return e == ENOENT || e == ENOTDIR || e == ELOOP || e == ENXIO ? KV_BLOCK_MISSING : KV_BLOCK_DAMAGED;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        fail(err, err_size, "not a regular file");
        return KV_BLOCK_MISSING;
    }
    return fd;
}

int kv_block_read(const char *path, const struct kv_block_desc *want, const uint8_t id[32],
                  const struct kv_block_dst *dst, char *err, size_t err_size)
{
    struct stat st;
    int fd = open_regular(path, &st, err, err_size);
    if (fd < 0)
        return fd;
    if (!shape_ok(want)) {
        close(fd);
        return fail(err, err_size, "bad expected shape");
    }
    uint32_t hb = header_size(want->n_tokens, want->n_layer);
    uint64_t kb = run_bytes(want, 0), vb = run_bytes(want, 1);
    uint8_t *h = malloc(hb);
    int64_t n_iov = 0;
    for (uint32_t r = 0; r < 2 * want->n_layer; r++)
        n_iov += dst[r].n_chunks;
    struct iovec *iov = malloc((size_t)(n_iov ? n_iov : 1) * sizeof *iov);
    if (!h || !iov) {
        free(h);
        free(iov);
        close(fd);
        return fail(err, err_size, "out of memory");
    }
    int rc = 0;
    ssize_t got = pread(fd, h, hb, 0);
    struct kv_block_desc d;
    uint8_t fid[32], cid[32];
    uint32_t fhb;
    if (got < 0)
        rc = fail(err, err_size, "%s", strerror(errno));
    else if (kv_block_parse_header(h, (size_t)got, &d, fid, &fhb, err, err_size))
        rc = KV_BLOCK_DAMAGED;
    else if (memcmp(fid, id, 32))
        rc = fail(err, err_size, "block id does not match its name");
    else if (memcmp(d.fingerprint, want->fingerprint, 32))
        rc = fail(err, err_size, "made for another model (fingerprint differs)");
    else if (d.kv_type != want->kv_type)
        rc = fail(err, err_size, "kv type %" PRIu32 ", expected %" PRIu32, d.kv_type, want->kv_type);
    else if (d.n_layer != want->n_layer || d.n_embd_k != want->n_embd_k || d.n_embd_v != want->n_embd_v ||
             d.n_tokens != want->n_tokens)
        rc = fail(err, err_size, "shape differs from the model's KV cache");
    else if (memcmp(d.parent, want->parent, 32))
        rc = fail(err, err_size, "parent differs from the chain");
    else if (d.pos0 != want->pos0)
        rc = fail(err, err_size, "starts at position %" PRIu32 ", expected %" PRIu32, d.pos0, want->pos0);
    else if (memcmp(h + KV_BLOCK_FIXED_BYTES, want->tokens, 4ull * d.n_tokens))
        rc = fail(err, err_size, "holds other tokens");
    else if ((uint64_t)st.st_size != hb + (kb + vb) * d.n_layer)
        rc = fail(err, err_size, "file is %lld bytes, expected %" PRIu64, (long long)st.st_size,
                  hb + (kb + vb) * d.n_layer);
    /* the id is a content address: recomputed from the header's fields */
    else if (kv_block_id(&d, cid) != 0)
        rc = fail(err, err_size, "cannot compute the block id");
    else if (memcmp(cid, id, 32))
        rc = fail(err, err_size, "content does not hash to the block id");
    if (rc == 0) {
        /* the runs' pieces in scattered reads of about 256 KiB, each group
         * verified right after it is read, while it is in the L2 cache */
        for (uint32_t r = 0; r < 2 * want->n_layer && rc == 0; r++)
            if ((uint64_t)dst[r].n_chunks * dst[r].chunk_bytes != (r & 1 ? vb : kb))
                rc = fail(err, err_size, "destination of run %" PRIu32 " has the wrong size", r);
        const uint8_t *crcs = h + KV_BLOCK_FIXED_BYTES + 4ull * d.n_tokens;
        uint64_t off = hb;
        for (uint32_t r0 = 0; r0 < 2 * want->n_layer && rc == 0;) {
            uint32_t r1 = r0;
            uint64_t bytes = 0;
            struct iovec *v = iov;
            do {
                const struct kv_block_dst *o = &dst[r1];
                for (int64_t g = 0; g < o->n_chunks; g++, v++) {
                    v->iov_base = o->base + (size_t)g * o->stride;
                    v->iov_len = o->chunk_bytes;
                }
                bytes += r1 & 1 ? vb : kb;
                r1++;
            } while (r1 < 2 * want->n_layer && bytes + (r1 & 1 ? vb : kb) <= READ_GROUP_BYTES);
            int e = preadv_full(fd, iov, (int)(v - iov), off);
            if (e)
                rc = fail(err, err_size, "read error: %s", strerror(e));
            off += bytes;
            for (uint32_t r = r0; r < r1 && rc == 0; r++) {
                const struct kv_block_dst *o = &dst[r];
                uint32_t crc = 0;
                for (int64_t g = 0; g < o->n_chunks; g++)
                    crc = kv_crc32c(crc, o->base + (size_t)g * o->stride, o->chunk_bytes);
                if (crc != get_u32(crcs + 4 * r))
                    rc = fail(err, err_size, "checksum mismatch in layer %" PRIu32 "'s %s rows", r / 2,
                              r & 1 ? "V" : "K");
            }
            r0 = r1;
        }
    }
    free(h);
    free(iov);
    close(fd);
    return rc;
}

/* ==== snapshots ==== */

static bool snap_ok(const struct kv_snap_desc *d)
{
    return kv_block_elem_size(d->kv_type) && d->pos >= 1 && d->pos <= ((uint64_t)1 << 31) && d->state_bytes >= 1 &&
           d->state_bytes <= KV_SNAP_MAX_BYTES;
}

uint64_t kv_snap_file_bytes(const struct kv_snap_desc *d)
{
    return snap_ok(d) ? KV_SNAP_HEADER_BYTES + d->state_bytes : 0;
}

int kv_snap_write(const char *path, const struct kv_snap_desc *d, const void *state, char *err, size_t err_size,
                  int *err_no)
{
    *err_no = EINVAL;
    if (!snap_ok(d))
        return fail(err, err_size, "cannot write a snapshot of %" PRIu64 " bytes at position %" PRIu64,
                    d->state_bytes, d->pos);
    uint8_t h[KV_SNAP_HEADER_BYTES] = {0};
    memcpy(h, KV_SNAP_MAGIC, 8); /* with its NUL */
    put_u32(h + 8, KV_SNAP_VERSION);
    put_u32(h + 12, KV_SNAP_HEADER_BYTES);
    memcpy(h + 16, d->id, 32);
    memcpy(h + 48, d->fingerprint, 32);
    put_u32(h + 80, d->kv_type);
    put_u64(h + 88, d->pos);
    put_u64(h + 96, d->state_bytes);
    put_u32(h + 104, kv_crc32c(0, state, (size_t)d->state_bytes));
    put_u32(h + 108, kv_crc32c(0, h, sizeof h));
    return write_file(path, h, sizeof h, state, d->state_bytes, err, err_size, err_no);
}

int kv_snap_parse_header(const uint8_t *buf, size_t size, struct kv_snap_desc *d, uint32_t *state_crc, char *err,
                         size_t err_size)
{
    if (size < KV_SNAP_HEADER_BYTES)
        return fail(err, err_size, "too short for a snapshot header (%zu bytes)", size);
    if (memcmp(buf, KV_SNAP_MAGIC, 8))
        return fail(err, err_size, "not a snapshot (bad magic)");
    uint32_t version = get_u32(buf + 8);
    if (version != KV_SNAP_VERSION)
        return fail(err, err_size, "unsupported snapshot format version %" PRIu32, version);
    if (get_u32(buf + 12) != KV_SNAP_HEADER_BYTES)
        return fail(err, err_size, "header size %" PRIu32 " should be %d", get_u32(buf + 12), KV_SNAP_HEADER_BYTES);
    uint8_t zero[4] = {0};
    uint32_t crc = kv_crc32c(0, buf, 108);
    crc = kv_crc32c(crc, zero, 4);
    crc = kv_crc32c(crc, buf + 112, KV_SNAP_HEADER_BYTES - 112);
    if (crc != get_u32(buf + 108))
        return fail(err, err_size, "header checksum mismatch");
    memset(d, 0, sizeof *d);
    memcpy(d->id, buf + 16, 32);
    memcpy(d->fingerprint, buf + 48, 32);
    d->kv_type = get_u32(buf + 80);
    d->pos = get_u64(buf + 88);
    d->state_bytes = get_u64(buf + 96);
    *state_crc = get_u32(buf + 104);
    if (get_u32(buf + 84))
        return fail(err, err_size, "reserved field is not zero");
    for (int i = 112; i < KV_SNAP_HEADER_BYTES; i++)
        if (buf[i])
            return fail(err, err_size, "reserved field is not zero");
    if (!kv_block_elem_size(d->kv_type))
        return fail(err, err_size, "unknown kv type %" PRIu32, d->kv_type);
    if (!snap_ok(d))
        return fail(err, err_size, "bad shape (position %" PRIu64 ", %" PRIu64 " bytes of state)", d->pos,
                    d->state_bytes);
    return 0;
}

int kv_snap_read(const char *path, const struct kv_snap_desc *want, void *state, char *err, size_t err_size)
{
    struct stat st;
    int fd = open_regular(path, &st, err, err_size);
    if (fd < 0)
        return fd;
    uint8_t h[KV_SNAP_HEADER_BYTES];
    struct kv_snap_desc d;
    uint32_t crc;
    int rc = 0;
    ssize_t got = pread(fd, h, sizeof h, 0);
    if (!snap_ok(want))
        rc = fail(err, err_size, "bad expected shape");
    else if (got < 0)
        rc = fail(err, err_size, "%s", strerror(errno));
    else if (kv_snap_parse_header(h, (size_t)got, &d, &crc, err, err_size))
        rc = KV_BLOCK_DAMAGED;
    else if (memcmp(d.id, want->id, 32))
        rc = fail(err, err_size, "snapshot id does not match its name");
    else if (memcmp(d.fingerprint, want->fingerprint, 32))
        rc = fail(err, err_size, "made for another model (fingerprint differs)");
    else if (d.kv_type != want->kv_type)
        rc = fail(err, err_size, "kv type %" PRIu32 ", expected %" PRIu32, d.kv_type, want->kv_type);
    else if (d.pos != want->pos)
        rc = fail(err, err_size, "state after position %" PRIu64 ", expected %" PRIu64, d.pos, want->pos);
    else if (d.state_bytes != want->state_bytes)
        rc = fail(err, err_size, "state of %" PRIu64 " bytes, the model's is %" PRIu64, d.state_bytes,
                  want->state_bytes);
    else if ((uint64_t)st.st_size != KV_SNAP_HEADER_BYTES + d.state_bytes)
        rc = fail(err, err_size, "file is %lld bytes, expected %" PRIu64, (long long)st.st_size,
                  KV_SNAP_HEADER_BYTES + d.state_bytes);
    if (rc == 0) {
        struct iovec v = {state, (size_t)d.state_bytes};
        int e = preadv_full(fd, &v, 1, KV_SNAP_HEADER_BYTES);
        if (e)
            rc = fail(err, err_size, "read error: %s", strerror(e));
        else if (kv_crc32c(0, state, (size_t)d.state_bytes) != crc)
            rc = fail(err, err_size, "checksum mismatch in the state");
    }
    close(fd);
    return rc;
}
