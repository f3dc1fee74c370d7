/*
 * test_kvblock.c - KV block files: round trips in f16 and f32, content
 * addresses (and a hash that fails is an error, not a zero id), every kind
 * of damage detected (truncation, a flipped byte in the header or the rows,
 * another model, parent, position or token, a renamed file), FIFOs,
 * directories and symlinks in a block's place treated as missing without
 * blocking, and failed writes (write, fsync, rename faults injected
 * with -Wl,--wrap) leaving no file behind; the same for recurrent-state
 * snapshot files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "sessions/kvblock.h"
#include "tests/fault-fs.h"
#include "tests/tmpdir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/version.h>

/* ==== fault injection ==== */

/* fsync and rename: fail_fsync, fail_rename (fault-fs.h) */
ssize_t __real_write(int fd, const void *p, size_t n);
static int fail_write_after = -1; /* fail the Nth write from now (0 = next); -1 never */
static int short_writes, fail_hash;

ssize_t __wrap_write(int fd, const void *p, size_t n)
{
    if (fail_write_after == 0) {
        fail_write_after = -1;
        errno = ENOSPC;
        return -1;
    }
    if (fail_write_after > 0)
        fail_write_after--;
    if (short_writes && n > 1)
        n = n / 2; /* the writer must loop */
    return __real_write(fd, p, n);
}

/* mbedTLS's hash step, failing on demand (its name differs by version) */
struct mbedtls_sha256_context;
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
int __real_mbedtls_sha256_update(struct mbedtls_sha256_context *c, const unsigned char *p, size_t n);
int __wrap_mbedtls_sha256_update(struct mbedtls_sha256_context *c, const unsigned char *p, size_t n)
{
    return fail_hash ? -0x7f : __real_mbedtls_sha256_update(c, p, n);
}
#else
int __real_mbedtls_sha256_update_ret(struct mbedtls_sha256_context *c, const unsigned char *p, size_t n);
int __wrap_mbedtls_sha256_update_ret(struct mbedtls_sha256_context *c, const unsigned char *p, size_t n)
{
    return fail_hash ? -0x7f : __real_mbedtls_sha256_update_ret(c, p, n);
}
#endif

/* ==== a test block ==== */

#define N_LAYER 3
#define N_TOK 5
#define EMBD_K 16
#define EMBD_V 8

struct fixture {
    char dir[64], path[128];
    struct kv_block_desc d;
    int32_t tokens[N_TOK];
    uint8_t id[32];
    uint8_t *rows; /* file order: layer 0 K, layer 0 V, ... */
    size_t kb, vb;
};

static int setup(void **state, uint32_t kv_type)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/kvchat-kvblock-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/b" KV_BLOCK_SUFFIX, f->dir);
    for (int i = 0; i < N_TOK; i++)
        f->tokens[i] = 1000 + 7 * i;
    memset(f->d.fingerprint, 0xab, 32);
    f->d.kv_type = kv_type;
    f->d.n_layer = N_LAYER;
    f->d.n_embd_k = EMBD_K;
    f->d.n_embd_v = EMBD_V;
    f->d.pos0 = 42;
    f->d.n_tokens = N_TOK;
    f->d.tokens = f->tokens;
    if (kv_block_id(&f->d, f->id))
        return -1;
    size_t es = kv_block_elem_size(kv_type);
    f->kb = N_TOK * EMBD_K * es;
    f->vb = N_TOK * EMBD_V * es;
    if (kv_block_rows_bytes(&f->d) != N_LAYER * (f->kb + f->vb))
        return -1;
    f->rows = malloc(N_LAYER * (f->kb + f->vb));
    for (size_t i = 0; i < N_LAYER * (f->kb + f->vb); i++)
        f->rows[i] = (uint8_t)(i * 31 + i / 97);
    *state = f;
    return 0;
}

static int setup_f16(void **s) { return setup(s, 1); }
static int setup_f32(void **s) { return setup(s, 0); }

static int teardown(void **state)
{
    struct fixture *f = *state;
    free(f->rows);
    if (test_dir_remove(f->dir))
        return -1;
    free(f);
    fail_write_after = -1;
    fail_fsync = fail_rename = short_writes = fail_hash = 0;
    return 0;
}

static int write_block(struct fixture *f, const uint8_t *id, char *err, size_t n, int *err_no)
{
    return kv_block_write(f->path, &f->d, id, f->rows, err, n, err_no);
}

static void write_ok(struct fixture *f)
{
    char err[256];
    int e;
    if (write_block(f, f->id, err, sizeof err, &e))
        fail_msg("write: %s", err);
    assert_int_equal(e, 0);
}

/* read into fresh buffers (the V rows scattered in pieces, as in a KV
 * cache); returns the status, err filled */
static int read_back(struct fixture *f, const struct kv_block_desc *want, const uint8_t *id, char *err,
                     size_t n, int check_equal)
{
    uint8_t *k[N_LAYER], *v[N_LAYER];
    struct kv_block_dst dst[2 * N_LAYER];
    for (int l = 0; l < N_LAYER; l++) {
        k[l] = calloc(1, f->kb);
        v[l] = calloc(1, 2 * f->vb); /* pieces of vb/4 at a stride of vb/2 */
        dst[2 * l] = (struct kv_block_dst){k[l], 0, 1, f->kb};
        dst[2 * l + 1] = (struct kv_block_dst){v[l], f->vb / 2, 4, f->vb / 4};
    }
    int rc = kv_block_read(f->path, want, id, dst, err, n);
    if (rc == 0 && check_equal) {
        for (int l = 0; l < N_LAYER; l++) {
            const uint8_t *r = f->rows + l * (f->kb + f->vb);
            assert_memory_equal(k[l], r, f->kb);
            for (int g = 0; g < 4; g++)
                assert_memory_equal(v[l] + g * f->vb / 2, r + f->kb + g * f->vb / 4, f->vb / 4);
        }
    }
    for (int l = 0; l < N_LAYER; l++) {
        free(k[l]);
        free(v[l]);
    }
    return rc;
}

static void test_round_trip(void **state)
{
    struct fixture *f = *state;
    char err[256];
    write_ok(f);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    /* the size is the header plus the rows exactly: no bloat */
    size_t rows = N_LAYER * (f->kb + f->vb);
    assert_int_equal((uint64_t)st.st_size, kv_block_file_bytes(&f->d));
    assert_int_equal(st.st_size % 64, rows % 64);
    assert_true((size_t)st.st_size - rows <= 256);
    if (read_back(f, &f->d, f->id, err, sizeof err, 1))
        fail_msg("read: %s", err);
    /* for the fuzz target's corpus: KVCHAT_WRITE_CORPUS=DIR */
    const char *corpus = getenv("KVCHAT_WRITE_CORPUS");
    if (corpus) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s/%s.kvblk'", f->path, corpus, f->d.kv_type ? "f16" : "f32");
        assert_int_equal(system(cmd), 0);
    }
}

static void test_ids(void **state)
{
    struct fixture *f = *state;
    uint8_t id2[32];
    struct kv_block_desc d = f->d;
    assert_int_equal(kv_block_id(&d, id2), 0);
    assert_memory_equal(id2, f->id, 32); /* deterministic */
    /* the id is SHA-256(fingerprint || kv type || parent || tokens), computed
     * here from its definition */
    uint8_t bytes[32 + 4 + 32 + 4 * N_TOK], want[32];
    memcpy(bytes, d.fingerprint, 32);
    memcpy(bytes + 32, &d.kv_type, 4);
    memcpy(bytes + 36, d.parent, 32);
    memcpy(bytes + 68, d.tokens, 4 * N_TOK);
    struct llm_sha256 *h = llm_sha256_init();
    llm_sha256_update(h, bytes, sizeof bytes);
    assert_int_equal(llm_sha256_final(h, want), LLM_OK);
    assert_memory_equal(want, f->id, 32);
    int32_t t2[N_TOK];
    memcpy(t2, f->tokens, sizeof t2);
    t2[N_TOK - 1]++;
    d.tokens = t2;
    kv_block_id(&d, id2);
    assert_memory_not_equal(id2, f->id, 32);
    d = f->d;
    d.parent[0] = 1;
    kv_block_id(&d, id2);
    assert_memory_not_equal(id2, f->id, 32);
    d = f->d;
    d.kv_type ^= 1;
    kv_block_id(&d, id2);
    assert_memory_not_equal(id2, f->id, 32);
    d = f->d;
    d.fingerprint[31] ^= 1;
    kv_block_id(&d, id2);
    assert_memory_not_equal(id2, f->id, 32);
    /* a hash that cannot be computed is an error, never a digest */
    fail_hash = 1;
    assert_int_equal(kv_block_id(&f->d, id2), -1);
    h = llm_sha256_init();
    llm_sha256_update(h, "x", 1);
    assert_int_equal(llm_sha256_final(h, id2), LLM_ERR);
    struct llm_bytes part = {"x", 1};
    assert_int_equal(llm_sha256_parts(&part, 1, id2), LLM_ERR);
    fail_hash = 0;
    assert_int_equal(llm_sha256_final(NULL, id2), LLM_ERR); /* out of memory at init */
    /* the SHA-256 of "abc" (FIPS 180-2) */
    part.p = "abc";
    part.n = 3;
    char hex[65];
    assert_int_equal(llm_sha256_parts(&part, 1, id2), LLM_OK);
    llm_hex(id2, 32, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void flip_byte(const char *path, long off)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

static void expect_read_error(struct fixture *f, const struct kv_block_desc *want, const uint8_t *id,
                              int status, const char *reason)
{
    char err[256] = "";
    assert_int_equal(read_back(f, want, id, err, sizeof err, 0), status);
    if (!strstr(err, reason))
        fail_msg("error '%s' lacks '%s'", err, reason);
    print_message("refused: %s\n", err);
}

static void test_damage(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    write_ok(f);
    assert_int_equal(stat(f->path, &st), 0);
    long size = (long)st.st_size;

    /* a flipped byte in each layer's K and V rows */
    for (int l = 0; l < N_LAYER; l++) {
        long hb = size - (long)(N_LAYER * (f->kb + f->vb));
        long koff = hb + l * (long)(f->kb + f->vb) + 3, voff = koff - 3 + (long)f->kb + 1;
        flip_byte(f->path, koff);
        char want[64];
        snprintf(want, sizeof want, "checksum mismatch in layer %d's K rows", l);
        expect_read_error(f, &f->d, f->id, KV_BLOCK_DAMAGED, want);
        flip_byte(f->path, koff);
        flip_byte(f->path, voff);
        snprintf(want, sizeof want, "checksum mismatch in layer %d's V rows", l);
        expect_read_error(f, &f->d, f->id, KV_BLOCK_DAMAGED, want);
        flip_byte(f->path, voff);
    }
    /* a flipped token id: the header checksum */
    flip_byte(f->path, KV_BLOCK_FIXED_BYTES + 2);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_DAMAGED, "header checksum mismatch");
    flip_byte(f->path, KV_BLOCK_FIXED_BYTES + 2);
    /* magic */
    flip_byte(f->path, 0);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_DAMAGED, "not a KV block (bad magic)");
    flip_byte(f->path, 0);
    /* another model */
    struct kv_block_desc other = f->d;
    other.fingerprint[0] ^= 1;
    expect_read_error(f, &other, f->id, KV_BLOCK_DAMAGED, "made for another model");
    /* another parent */
    other = f->d;
    other.parent[5] = 9;
    expect_read_error(f, &other, f->id, KV_BLOCK_DAMAGED, "parent differs");
    /* another position */
    other = f->d;
    other.pos0 = 7;
    expect_read_error(f, &other, f->id, KV_BLOCK_DAMAGED, "starts at position 42, expected 7");
    /* another kv type */
    other = f->d;
    other.kv_type ^= 1;
    expect_read_error(f, &other, f->id, KV_BLOCK_DAMAGED, "kv type");
    /* other tokens than the caller's */
    int32_t t2[N_TOK];
    memcpy(t2, f->tokens, sizeof t2);
    t2[2] = 5;
    other = f->d;
    other.tokens = t2;
    expect_read_error(f, &other, f->id, KV_BLOCK_DAMAGED, "holds other tokens");
    /* a file under the wrong name */
    uint8_t wrong[32];
    memset(wrong, 7, 32);
    expect_read_error(f, &f->d, wrong, KV_BLOCK_DAMAGED, "block id does not match its name");
    /* truncated rows, truncated header, empty, missing */
    assert_int_equal(truncate(f->path, size - 1), 0);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_DAMAGED, "expected");
    assert_int_equal(truncate(f->path, 100), 0);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_DAMAGED, "too short for a block header (100 bytes)");
    assert_int_equal(truncate(f->path, 0), 0);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_DAMAGED, "too short");
    unlink(f->path);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_MISSING, "No such file or directory");
}

/* a FIFO, a directory or a symlink where the block should be: missing, at
 * once (never a blocked open), and writing the block replaces it */
static void test_not_a_file(void **state)
{
    struct fixture *f = *state;
    char err[256];
    int e;
    struct timespec t0, t1;
    assert_int_equal(mkfifo(f->path, 0644), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_MISSING, "not a regular file");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec < 2);
    write_ok(f);
    if (read_back(f, &f->d, f->id, err, sizeof err, 1))
        fail_msg("read after replacing a FIFO: %s", err);
    unlink(f->path);
    assert_int_equal(mkdir(f->path, 0755), 0);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_MISSING, "not a regular file");
    write_ok(f); /* an empty directory is replaced */
    if (read_back(f, &f->d, f->id, err, sizeof err, 1))
        fail_msg("read after replacing a directory: %s", err);
    unlink(f->path);
    char sub[200];
    assert_int_equal(mkdir(f->path, 0755), 0);
    snprintf(sub, sizeof sub, "%s/x", f->path);
    assert_int_equal(mkdir(sub, 0755), 0);
    /* a full one too (the path is the store's own; issue 29: it was never repaired) */
    assert_int_equal(write_block(f, f->id, err, sizeof err, &e), 0);
    if (read_back(f, &f->d, f->id, err, sizeof err, 1))
        fail_msg("read after replacing a full directory: %s", err);
    unlink(f->path);
    char target[200];
    snprintf(target, sizeof target, "%s/elsewhere", f->dir);
    write_ok(f);
    assert_int_equal(rename(f->path, target), 0);
    assert_int_equal(symlink(target, f->path), 0);
    expect_read_error(f, &f->d, f->id, KV_BLOCK_MISSING, "");
    unlink(f->path);
    unlink(target);
    /* a FIFO at the temporary name (a dead writer with our pid) does not
     * block the write either */
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", f->path, (long)getpid());
    assert_int_equal(mkfifo(tmp, 0644), 0);
    write_ok(f);
    if (read_back(f, &f->d, f->id, err, sizeof err, 1))
        fail_msg("read: %s", err);
}

static void test_header_forgery(void **state)
{
    /* a header whose fields are self-consistent (checksum fixed up) but whose
     * id is not the hash of its content is refused */
    struct fixture *f = *state;
    uint8_t fake[32];
    memset(fake, 0x5a, 32);
    char err[256];
    int e;
    assert_int_equal(write_block(f, fake, err, sizeof err, &e), 0);
    expect_read_error(f, &f->d, fake, KV_BLOCK_DAMAGED, "content does not hash to the block id");
}

static int dir_entries(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

static void test_write_faults(void **state)
{
    struct fixture *f = *state;
    char err[256];
    int e;
    /* every write position fails once: no file, no temp file left, ENOSPC said */
    for (int at = 0; at < 2; at++) {
        fail_write_after = at;
        assert_int_equal(write_block(f, f->id, err, sizeof err, &e), -1);
        assert_non_null(strstr(err, "No space left on device"));
        assert_int_equal(e, ENOSPC);
        assert_int_equal(dir_entries(f->dir), 0);
    }
    fail_write_after = -1;
    fail_fsync = 1;
    assert_int_equal(write_block(f, f->id, err, sizeof err, &e), -1);
    assert_non_null(strstr(err, "Input/output error"));
    assert_int_equal(e, EIO);
    assert_int_equal(dir_entries(f->dir), 0);
    fail_fsync = 0;
    fail_rename = 1;
    assert_int_equal(write_block(f, f->id, err, sizeof err, &e), -1);
    assert_int_equal(dir_entries(f->dir), 0);
    fail_rename = 0;
    /* short writes are resumed, not mistaken for failure */
    short_writes = 1;
    write_ok(f);
    short_writes = 0;
    if (read_back(f, &f->d, f->id, err, sizeof err, 1))
        fail_msg("read after short writes: %s", err);
    /* an existing good file survives a failed rewrite */
    fail_write_after = 1;
    assert_int_equal(write_block(f, f->id, err, sizeof err, &e), -1);
    if (read_back(f, &f->d, f->id, err, sizeof err, 1))
        fail_msg("old file damaged: %s", err);
}

static void test_crc32c(void **state)
{
    (void)state;
    /* RFC 3720 B.4 test vectors */
    uint8_t z[32] = {0}, ones[32], inc[32];
    memset(ones, 0xff, 32);
    for (int i = 0; i < 32; i++)
        inc[i] = (uint8_t)i;
    assert_int_equal(kv_crc32c(0, z, 32), 0x8a9136aa);
    assert_int_equal(kv_crc32c(0, ones, 32), 0x62a8ab43);
    assert_int_equal(kv_crc32c(0, inc, 32), 0x46dd794e);
    assert_int_equal(kv_crc32c(0, "123456789", 9), 0xe3069283);
    /* chaining equals one pass, at every split and alignment */
    uint8_t buf[200];
    for (int i = 0; i < 200; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = kv_crc32c(0, buf + 1, 199);
    for (int s = 0; s <= 199; s++)
        assert_int_equal(kv_crc32c(kv_crc32c(0, buf + 1, (size_t)s), buf + 1 + s, (size_t)(199 - s)), whole);
    /* large buffers take three interleaved streams, combined: the same CRC
     * as feeding it in small pieces (one stream) */
    size_t big = 300007;
    uint8_t *p = malloc(big);
    for (size_t i = 0; i < big; i++)
        p[i] = (uint8_t)(i * 2654435761u >> 13);
    for (size_t n = 3 * 256 - 1; n < big; n = n * 3 / 2 + 17) {
        uint32_t pieces = 0;
        for (size_t off = 0; off < n; off += 1000)
            pieces = kv_crc32c(pieces, p + off, n - off < 1000 ? n - off : 1000);
        assert_int_equal(kv_crc32c(0, p, n), pieces);
        assert_int_equal(kv_crc32c(kv_crc32c(0, p, 5), p + 5, n - 5), pieces);
    }
    free(p);
}

/* ==== snapshot files ==== */

#define SNAP_BYTES 4099 /* not a multiple of anything */

static void snap_fixture(struct fixture *f, struct kv_snap_desc *d, uint8_t **state)
{
    snprintf(f->path, sizeof f->path, "%s/s" KV_SNAP_SUFFIX, f->dir);
    memset(d, 0, sizeof *d);
    memcpy(d->id, f->id, 32);
    memset(d->fingerprint, 0xab, 32);
    d->kv_type = 1;
    d->pos = 42 + N_TOK;
    d->state_bytes = SNAP_BYTES;
    *state = malloc(SNAP_BYTES);
    for (int i = 0; i < SNAP_BYTES; i++)
        (*state)[i] = (uint8_t)(i * 13 + i / 251);
}

static int snap_read_back(struct fixture *f, const struct kv_snap_desc *want, const uint8_t *expect, char *err,
                          size_t n)
{
    uint8_t *got = calloc(1, want->state_bytes ? want->state_bytes : 1);
    int rc = kv_snap_read(f->path, want, got, err, n);
    if (rc == 0 && expect)
        assert_memory_equal(got, expect, want->state_bytes);
    free(got);
    return rc;
}

static void expect_snap_error(struct fixture *f, const struct kv_snap_desc *want, int status, const char *reason)
{
    char err[256] = "";
    assert_int_equal(snap_read_back(f, want, NULL, err, sizeof err), status);
    if (!strstr(err, reason))
        fail_msg("error '%s' lacks '%s'", err, reason);
    print_message("refused: %s\n", err);
}

static void test_snap_round_trip(void **state)
{
    struct fixture *f = *state;
    struct kv_snap_desc d;
    uint8_t *st;
    char err[256];
    int e;
    snap_fixture(f, &d, &st);
    assert_int_equal(kv_snap_file_bytes(&d), KV_SNAP_HEADER_BYTES + SNAP_BYTES);
    assert_int_equal(kv_snap_write(f->path, &d, st, err, sizeof err, &e), 0);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_size, KV_SNAP_HEADER_BYTES + SNAP_BYTES);
    if (snap_read_back(f, &d, st, err, sizeof err))
        fail_msg("read: %s", err);
    /* for the fuzz target's corpus: KVCHAT_WRITE_CORPUS=DIR */
    const char *corpus = getenv("KVCHAT_WRITE_CORPUS");
    if (corpus) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s/state.kvsnap'", f->path, corpus);
        assert_int_equal(system(cmd), 0);
    }
    /* the header as documented: magic, version, id, position, size */
    uint8_t h[KV_SNAP_HEADER_BYTES];
    int fd = open(f->path, O_RDONLY);
    assert_int_equal(pread(fd, h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
    assert_memory_equal(h, "KVCHSNP\0", 8);
    assert_int_equal(h[8], 1);
    assert_memory_equal(h + 16, f->id, 32);
    uint64_t pos, bytes;
    memcpy(&pos, h + 88, 8);
    memcpy(&bytes, h + 96, 8);
    assert_int_equal(pos, 42 + N_TOK);
    assert_int_equal(bytes, SNAP_BYTES);
    uint32_t crc;
    memcpy(&crc, h + 104, 4);
    assert_int_equal(crc, kv_crc32c(0, st, SNAP_BYTES));
    /* shapes that are not allowed are not written */
    struct kv_snap_desc bad = d;
    bad.state_bytes = 0;
    assert_int_equal(kv_snap_file_bytes(&bad), 0);
    assert_int_equal(kv_snap_write(f->path, &bad, st, err, sizeof err, &e), -1);
    bad = d;
    bad.pos = 0;
    assert_int_equal(kv_snap_write(f->path, &bad, st, err, sizeof err, &e), -1);
    free(st);
}

static void test_snap_damage(void **state)
{
    struct fixture *f = *state;
    struct kv_snap_desc d;
    uint8_t *st;
    char err[256];
    int e;
    snap_fixture(f, &d, &st);
    assert_int_equal(kv_snap_write(f->path, &d, st, err, sizeof err, &e), 0);
    /* a flipped byte in the state (start, middle, end) and in the header */
    static const long at[] = {KV_SNAP_HEADER_BYTES, KV_SNAP_HEADER_BYTES + SNAP_BYTES / 2,
                              KV_SNAP_HEADER_BYTES + SNAP_BYTES - 1};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        flip_byte(f->path, at[i]);
        expect_snap_error(f, &d, KV_BLOCK_DAMAGED, "checksum mismatch in the state");
        flip_byte(f->path, at[i]);
    }
    for (long off = 0; off < KV_SNAP_HEADER_BYTES; off += 7) {
        flip_byte(f->path, off);
        char e2[256] = "";
        assert_int_equal(snap_read_back(f, &d, NULL, e2, sizeof e2), KV_BLOCK_DAMAGED);
        flip_byte(f->path, off);
    }
    if (snap_read_back(f, &d, st, err, sizeof err))
        fail_msg("restored file: %s", err);
    /* what the reader expects: another id, model, kv type, position, size */
    struct kv_snap_desc w = d;
    w.id[5] ^= 1;
    expect_snap_error(f, &w, KV_BLOCK_DAMAGED, "does not match its name");
    w = d;
    w.fingerprint[0] ^= 1;
    expect_snap_error(f, &w, KV_BLOCK_DAMAGED, "another model");
    w = d;
    w.kv_type = 0;
    expect_snap_error(f, &w, KV_BLOCK_DAMAGED, "kv type");
    w = d;
    w.pos++;
    expect_snap_error(f, &w, KV_BLOCK_DAMAGED, "position");
    w = d;
    w.state_bytes--;
    expect_snap_error(f, &w, KV_BLOCK_DAMAGED, "bytes");
    /* truncated, and grown */
    assert_int_equal(truncate(f->path, KV_SNAP_HEADER_BYTES + SNAP_BYTES - 1), 0);
    expect_snap_error(f, &d, KV_BLOCK_DAMAGED, "file is");
    assert_int_equal(truncate(f->path, 60), 0);
    expect_snap_error(f, &d, KV_BLOCK_DAMAGED, "too short");
    /* a block file in its place */
    assert_int_equal(kv_block_write(f->path, &f->d, f->id, f->rows, err, sizeof err, &e), 0);
    expect_snap_error(f, &d, KV_BLOCK_DAMAGED, "bad magic");
    /* missing, a FIFO, a directory, a symlink: missing, without blocking */
    unlink(f->path);
    expect_snap_error(f, &d, KV_BLOCK_MISSING, "No such file");
    assert_int_equal(mkfifo(f->path, 0644), 0);
    expect_snap_error(f, &d, KV_BLOCK_MISSING, "not a regular file");
    unlink(f->path);
    assert_int_equal(mkdir(f->path, 0755), 0);
    expect_snap_error(f, &d, KV_BLOCK_MISSING, "not a regular file");
    rmdir(f->path);
    assert_int_equal(symlink("/etc/passwd", f->path), 0);
    assert_int_equal(snap_read_back(f, &d, NULL, err, sizeof err), KV_BLOCK_MISSING);
    unlink(f->path);
    free(st);
}

static void test_snap_header_forgery(void **state)
{
    struct fixture *f = *state;
    struct kv_snap_desc d, got;
    uint8_t *st;
    char err[256];
    uint32_t crc;
    snap_fixture(f, &d, &st);
    uint8_t h[KV_SNAP_HEADER_BYTES] = {0};
    memcpy(h, KV_SNAP_MAGIC, 8);
    h[8] = 1;
    h[12] = KV_SNAP_HEADER_BYTES;
    uint64_t pos = 5, huge = (uint64_t)1 << 40;
    memcpy(h + 88, &pos, 8);
    memcpy(h + 96, &huge, 8); /* an absurd size, with a valid header CRC */
    uint32_t hc = kv_crc32c(0, h, sizeof h);
    memcpy(h + 108, &hc, 4);
    assert_int_equal(kv_snap_parse_header(h, sizeof h, &got, &crc, err, sizeof err), KV_BLOCK_DAMAGED);
    assert_non_null(strstr(err, "bad shape"));
    uint64_t ok = 100;
    memcpy(h + 96, &ok, 8);
    memset(h + 108, 0, 4);
    hc = kv_crc32c(0, h, sizeof h);
    memcpy(h + 108, &hc, 4);
    assert_int_equal(kv_snap_parse_header(h, sizeof h, &got, &crc, err, sizeof err), 0);
    assert_int_equal(got.state_bytes, 100);
    assert_int_equal(kv_snap_parse_header(h, sizeof h - 1, &got, &crc, err, sizeof err), KV_BLOCK_DAMAGED);
    free(st);
}

static void test_snap_write_faults(void **state)
{
    struct fixture *f = *state;
    struct kv_snap_desc d;
    uint8_t *st;
    char err[256];
    int e;
    snap_fixture(f, &d, &st);
    for (int at = 0; at < 2; at++) {
        fail_write_after = at;
        assert_int_equal(kv_snap_write(f->path, &d, st, err, sizeof err, &e), -1);
        assert_int_equal(e, ENOSPC);
        assert_int_equal(dir_entries(f->dir), 0);
    }
    fail_write_after = -1;
    fail_fsync = 1;
    assert_int_equal(kv_snap_write(f->path, &d, st, err, sizeof err, &e), -1);
    assert_int_equal(e, EIO);
    assert_int_equal(dir_entries(f->dir), 0);
    fail_fsync = 0;
    fail_rename = 1;
    assert_int_equal(kv_snap_write(f->path, &d, st, err, sizeof err, &e), -1);
    assert_int_equal(dir_entries(f->dir), 0);
    fail_rename = 0;
    short_writes = 1;
    assert_int_equal(kv_snap_write(f->path, &d, st, err, sizeof err, &e), 0);
    short_writes = 0;
    if (snap_read_back(f, &d, st, err, sizeof err))
        fail_msg("read after short writes: %s", err);
    /* a good file survives a failed rewrite */
    fail_write_after = 1;
    assert_int_equal(kv_snap_write(f->path, &d, st, err, sizeof err, &e), -1);
    if (snap_read_back(f, &d, st, err, sizeof err))
        fail_msg("old file damaged: %s", err);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup_f32, teardown),
        cmocka_unit_test_setup_teardown(test_ids, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_damage, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_file, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_header_forgery, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_write_faults, setup_f32, teardown),
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test_setup_teardown(test_snap_round_trip, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_snap_damage, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_snap_header_forgery, setup_f16, teardown),
        cmocka_unit_test_setup_teardown(test_snap_write_faults, setup_f16, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
