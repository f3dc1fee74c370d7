/*
 * test_blocks.c - the KV cache on disk as blocks (sessions/blocks.c) over
 * the real engine: a context restored from blocks gives bit-identical
 * next-token logits to the one that wrote them; a prompt that shares a
 * prefix with a stored one restores the full blocks of the prefix and the
 * first rows of the block where it diverges, bit for bit; a missing,
 * damaged or foreign block, or a FIFO or a directory in its place, is
 * reported, dropped and computed again; a full disk evicts the least
 * recently used blocks and writes again, or leaves the block unwritten
 * with the reason; fingerprints tell models apart and are remembered by
 * the file's identity; a hybrid model (qwen35) restores to the latest
 * recurrent-state snapshot its blocks reach and rewinds to one, bit for
 * bit, a damaged snapshot reported and the one before used. Models come
 * from tests/mkmodel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "sessions/sess-int.h"
#include "tests/tmpdir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define B SESS_BLOCK_TOKENS
#define N_VOCAB 300
#define N_TOK (3 * B + 20)

/* ==== fault injection: block writes that find the disk full ==== */

ssize_t __real_write(int fd, const void *p, size_t n);
static int enospc_writes; /* this many writes fail with ENOSPC; -1: all */

ssize_t __wrap_write(int fd, const void *p, size_t n)
{
    if (enospc_writes != 0) {
        if (enospc_writes > 0)
            enospc_writes--;
        errno = ENOSPC;
        return -1;
    }
    return __real_write(fd, p, n);
}

struct fx {
    char dir[64], model_path[128], other_path[128];
    struct sess_store *st;
    struct llm_model *m;
    int32_t toks[N_TOK];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/kvchat-blocks-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->model_path, sizeof f->model_path, "%s/m.gguf", f->dir);
    snprintf(f->other_path, sizeof f->other_path, "%s/other.gguf", f->dir);
    char cmd[512];
    static const char *shape = "--arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --n-vocab 300";
    snprintf(cmd, sizeof cmd, "tests/mkmodel %s %s >/dev/null && tests/mkmodel %s %s --seed 2 >/dev/null",
             f->model_path, shape, f->other_path, shape);
    if (system(cmd) != 0)
        return -1;
    char err[512];
    if (llm_model_open(f->model_path, llm_model_default_params(), &f->m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (sess_store_open(f->dir, sess_store_default_params(), &f->st, err, sizeof err))
        return -1;
    for (int i = 0; i < N_TOK; i++)
        f->toks[i] = 1 + (i * 37) % (N_VOCAB - 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sess_store_close(f->st);
    llm_model_close(f->m);
    int rc = test_dir_remove(f->dir);
    free(f);
    enospc_writes = 0;
    return rc ? -1 : 0;
}

static struct llm_ctx *new_ctx(const struct llm_model *m)
{
    struct llm_ctx_params p = llm_ctx_default_params();
    p.n_ctx = 512;
    p.n_threads = 2;
    struct llm_ctx *c;
    char err[512];
    if (llm_ctx_init((struct llm_model *)m, p, &c, err, sizeof err))
        fail_msg("ctx: %s", err);
    return c;
}

static struct sess_kv *new_kv(struct fx *f, const struct llm_model *m, const char *path, struct llm_ctx *c)
{
    struct sess_kv *kv;
    char err[512];
    if (sess_kv_init(f->st, m, c, path, &kv, err, sizeof err))
        fail_msg("kv: %s", err);
    return kv;
}

/* prefill tokens[0..n-1) in passes of `pass`, save the blocks of all n,
 * then the last token alone: its logits */
static void live(struct fx *f, const int32_t *tokens, int64_t n, int64_t pass, float *logits,
                 struct sess_kv_save *saved)
{
    struct llm_ctx *c = new_ctx(f->m);
    struct sess_kv *kv = new_kv(f, f->m, f->model_path, c);
    for (int64_t a = 0; a < n - 1; a += pass)
        assert_int_equal(llm_ctx_decode(c, tokens + a, a + pass < n - 1 ? pass : n - 1 - a), LLM_OK);
    assert_int_equal(llm_ctx_decode(c, tokens + n - 1, 1), LLM_OK);
    memcpy(logits, llm_ctx_logits(c), N_VOCAB * sizeof *logits);
    struct sess_kv_save s;
    if (sess_kv_save(kv, tokens, n, &s))
        fail_msg("save: %s", sess_errmsg(f->st));
    if (saved)
        *saved = s;
    sess_kv_free(kv);
    llm_ctx_free(c);
}

/* a fresh context restored for tokens[0..n) up to n-1 positions, then the
 * rest decoded one batch: the logits; r gets what the restore did */
static void restore(struct fx *f, const int32_t *tokens, int64_t n, float *logits, struct sess_kv_restore *r)
{
    struct llm_ctx *c = new_ctx(f->m);
    struct sess_kv *kv = new_kv(f, f->m, f->model_path, c);
    if (sess_kv_restore(kv, tokens, n - 1, r))
        fail_msg("restore: %s", sess_errmsg(f->st));
    int64_t have = llm_ctx_n_past(c);
    assert_int_equal(have, r->tokens);
    assert_int_equal(llm_ctx_decode(c, tokens + have, n - have), LLM_OK);
    memcpy(logits, llm_ctx_logits(c), N_VOCAB * sizeof *logits);
    sess_kv_free(kv);
    llm_ctx_free(c);
}

static char *block_path(struct fx *f, const int32_t *tokens, int64_t k)
{
    /* the id of block k, from its definition */
    static char path[4200];
    uint8_t parent[32] = {0}, id[32];
    uint8_t fp[32];
    assert_int_equal(sess_model_fingerprint(llm_model_gguf(f->m), fp), 0);
    for (int64_t i = 0; i <= k; i++) {
        struct kv_block_desc d = {0};
        memcpy(d.fingerprint, fp, 32);
        memcpy(d.parent, parent, 32);
        d.kv_type = 1;
        d.n_layer = 2;
        d.n_embd_k = d.n_embd_v = 32;
        d.pos0 = (uint32_t)(i * B);
        d.n_tokens = B;
        d.tokens = tokens + i * B;
        assert_int_equal(kv_block_id(&d, id), 0);
        memcpy(parent, id, 32);
    }
    sess_block_path(f->st, id, false, path, sizeof path);
    return path;
}

static int64_t n_blocks(struct fx *f)
{
    int64_t bytes, n;
    assert_int_equal(sess_store_bytes(f->st, &bytes, &n), 0);
    return n;
}

static void test_exact_restore(void **state)
{
    struct fx *f = *state;
    float l_live[N_VOCAB], l_rest[N_VOCAB];
    struct sess_kv_save s;
    struct sess_kv_restore r;
    live(f, f->toks, N_TOK, 512, l_live, &s);
    /* 3 full blocks and a tail of 20; all written */
    assert_int_equal(s.n_ids, 4);
    assert_int_equal(s.written, 4);
    assert_int_equal(n_blocks(f), 4);
    restore(f, f->toks, N_TOK, l_rest, &r);
    /* everything but the last token came from disk: bit-identical, not merely close */
    assert_int_equal(r.tokens, N_TOK - 1);
    assert_int_equal(r.blocks, 4);
    assert_int_equal(r.damaged, 0);
    assert_memory_equal(l_live, l_rest, sizeof l_live);
    /* bytes on disk per token are the KV size plus a header a block */
    struct llm_ctx *c = new_ctx(f->m);
    int64_t bytes, nb;
    assert_int_equal(sess_store_bytes(f->st, &bytes, &nb), 0);
    int64_t kv = (int64_t)llm_ctx_kv_size(c, 0, N_TOK);
    llm_ctx_free(c);
    assert_true(bytes >= kv && bytes <= kv + 4 * 1024);
    /* saving again writes nothing */
    live(f, f->toks, N_TOK, 512, l_live, &s);
    assert_int_equal(s.written, 0);
    assert_int_equal(s.bytes, bytes);
}

/* another prompt shares the first 150 tokens: two full blocks and 22 rows of
 * the third are ours, exactly those of a context that imports them */
static void test_partial_sharing(void **state)
{
    struct fx *f = *state;
    float l[N_VOCAB], l_ref[N_VOCAB];
    live(f, f->toks, N_TOK, 512, l, NULL);
    int32_t other[N_TOK];
    memcpy(other, f->toks, sizeof other);
    for (int i = 150; i < N_TOK; i++)
        other[i] = 2 + (i * 11) % (N_VOCAB - 2);
    assert_int_not_equal(other[150], f->toks[150]);
    struct sess_kv_restore r;
    restore(f, other, N_TOK, l, &r);
    assert_int_equal(r.tokens, 150);
    assert_int_equal(r.blocks, 3); /* 150 / 64 = 2 full, and the first 22 rows of the third */
    /* the reference: the writer's rows [0, 150) imported, the rest decoded */
    struct llm_ctx *a = new_ctx(f->m), *b = new_ctx(f->m);
    assert_int_equal(llm_ctx_decode(a, f->toks, N_TOK - 1), LLM_OK);
    size_t size = llm_ctx_kv_size(a, 0, 150);
    void *rows = malloc(size);
    assert_int_equal(llm_ctx_kv_export(a, 0, 150, rows, size), (int64_t)size);
    assert_int_equal(llm_ctx_kv_import(b, 0, 150, rows, size), 0);
    assert_int_equal(llm_ctx_decode(b, other + 150, N_TOK - 150), LLM_OK);
    memcpy(l_ref, llm_ctx_logits(b), sizeof l_ref);
    assert_memory_equal(l, l_ref, sizeof l);
    free(rows);
    llm_ctx_free(a);
    llm_ctx_free(b);
    /* a prompt that shares less than a block (BOS and 5 tokens): rows of the
     * first block still */
    memcpy(other, f->toks, sizeof other);
    for (int i = 6; i < N_TOK; i++)
        other[i] = 3 + (i * 13) % (N_VOCAB - 3);
    restore(f, other, N_TOK, l, &r);
    assert_int_equal(r.tokens, 6);
    /* the identical prompt: all but the last token */
    restore(f, f->toks, N_TOK, l, &r);
    assert_int_equal(r.tokens, N_TOK - 1);
    /* a prompt that is a prefix of the stored one, ending inside a block */
    restore(f, f->toks, 100, l, &r);
    assert_int_equal(r.tokens, 99);
}

static void corrupt_tail(const char *p)
{
    FILE *fp = fopen(p, "r+b");
    assert_non_null(fp);
    fseek(fp, -5, SEEK_END);
    int ch = fgetc(fp);
    fseek(fp, -5, SEEK_END);
    fputc(ch ^ 1, fp);
    fclose(fp);
}

static void test_damage(void **state)
{
    struct fx *f = *state;
    float l_live[N_VOCAB], l1[N_VOCAB];
    struct sess_kv_restore r;
    struct sess_kv_save s;
    live(f, f->toks, N_TOK, 512, l_live, NULL);
    /* each kind of damage to block 1: reported once, the chain ends there
     * (block 0 and nothing else restored), the block forgotten; saving
     * rewrites it and the next restore is whole again */
    for (int kind = 0; kind < 5; kind++) {
        char *p = block_path(f, f->toks, 1);
        const char *want;
        switch (kind) {
        case 0: unlink(p); want = "is missing"; break;
        case 1: corrupt_tail(p); want = "checksum mismatch"; break;
        case 2: assert_int_equal(truncate(p, 1000), 0); want = "is unusable"; break;
        case 3: unlink(p); assert_int_equal(mkfifo(p, 0644), 0); want = "not a regular file"; break;
        default: unlink(p); assert_int_equal(mkdir(p, 0755), 0); want = "not a regular file"; break;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        restore(f, f->toks, N_TOK, l1, &r);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_true(t1.tv_sec - t0.tv_sec < 5); /* never blocked */
        print_message("kind %d: %s\n", kind, r.first_problem);
        assert_int_equal(r.damaged, 1);
        assert_non_null(strstr(r.first_problem, want));
        /* block 0, then the first rows of the best other child: none here */
        assert_int_equal(r.tokens, B);
        int64_t nb = n_blocks(f);
        assert_int_equal(nb, 3);
        live(f, f->toks, N_TOK, 512, l1, &s);
        assert_int_equal(s.written, 1);
        assert_int_equal(s.problem[0], 0);
        restore(f, f->toks, N_TOK, l1, &r);
        assert_int_equal(r.damaged, 0);
        assert_int_equal(r.tokens, N_TOK - 1);
        assert_memory_equal(l1, l_live, sizeof l1);
    }
}

static void test_full_disk(void **state)
{
    struct fx *f = *state;
    float l[N_VOCAB];
    struct sess_kv_save s;
    /* another prompt's blocks, then this one's with the disk full once:
     * the least recently used blocks go and the write succeeds */
    int32_t other[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        other[i] = 5 + (i * 17) % (N_VOCAB - 5);
    live(f, other, N_TOK, 512, l, &s);
    assert_int_equal(n_blocks(f), 4);
    enospc_writes = 1;
    live(f, f->toks, N_TOK, 512, l, &s);
    assert_int_equal(s.problem[0], 0);
    assert_int_equal(s.written, 4);
    assert_true(n_blocks(f) < 8);
    /* full for good: the blocks are not written, and it says why and what to do */
    char dir[256];
    snprintf(dir, sizeof dir, "rm -rf '%s/kv'/* && rm -f '%s/kvchat.db'*", f->dir, f->dir);
    sess_store_close(f->st);
    assert_int_equal(system(dir), 0);
    char err[512];
    assert_int_equal(sess_store_open(f->dir, sess_store_default_params(), &f->st, err, sizeof err), 0);
    enospc_writes = -1;
    live(f, f->toks, N_TOK, 512, l, &s);
    enospc_writes = 0;
    assert_int_equal(s.written, 0);
    print_message("%s\n", s.problem);
    assert_non_null(strstr(s.problem, "No space left on device"));
    assert_non_null(strstr(s.problem, "--cache-max"));
    assert_int_equal(n_blocks(f), 0);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "find '%s/kv' -type f | grep -q .", f->dir);
    assert_int_not_equal(system(tmp), 0); /* no file left behind */
}

static void test_other_model(void **state)
{
    struct fx *f = *state;
    float l[N_VOCAB];
    live(f, f->toks, N_TOK, 512, l, NULL);
    struct llm_model *o;
    char err[512];
    assert_int_equal(llm_model_open(f->other_path, llm_model_default_params(), &o, err, sizeof err), 0);
    uint8_t ofp[32], fp[32], again[32];
    assert_int_equal(sess_model_fingerprint(llm_model_gguf(o), ofp), 0);
    assert_int_equal(sess_model_fingerprint(llm_model_gguf(f->m), fp), 0);
    /* same shapes and metadata, other weights: another fingerprint */
    assert_memory_not_equal(ofp, fp, 32);
    assert_int_equal(sess_model_fingerprint(llm_model_gguf(f->m), again), 0);
    assert_memory_equal(again, fp, 32);
    /* the store remembers it by the file's identity, until the file changes */
    struct stat sb;
    assert_int_equal(stat(f->model_path, &sb), 0);
    assert_int_equal(sess_fingerprint_lookup(f->st, f->model_path, &sb, again), 1);
    assert_memory_equal(again, fp, 32);
    usleep(10000);
    assert_int_equal(utimensat(AT_FDCWD, f->model_path, NULL, 0), 0); /* a touch changes ctime */
    assert_int_equal(stat(f->model_path, &sb), 0);
    assert_int_equal(sess_fingerprint_lookup(f->st, f->model_path, &sb, again), 0);
    /* remembered by the identity the file had when it was opened: f->m was
     * opened before the touch, a model opened after it has the new one */
    struct llm_model *m2;
    assert_int_equal(llm_model_open(f->model_path, llm_model_default_params(), &m2, err, sizeof err), 0);
    struct llm_ctx *c = new_ctx(m2);
    struct sess_kv *kv = new_kv(f, m2, f->model_path, c);
    assert_memory_equal(sess_kv_fingerprint(kv), fp, 32);
    assert_int_equal(sess_fingerprint_lookup(f->st, f->model_path, &sb, again), 1);
    sess_kv_free(kv);
    llm_ctx_free(c);
    llm_model_close(m2);
    /* the other model finds none of this model's blocks, not even by prefix */
    c = new_ctx(o);
    kv = new_kv(f, o, f->other_path, c);
    struct sess_kv_restore r;
    assert_int_equal(sess_kv_restore(kv, f->toks, N_TOK, &r), 0);
    assert_int_equal(r.tokens, 0);
    assert_int_equal(r.damaged, 0);
    sess_kv_free(kv);
    llm_ctx_free(c);
    llm_model_close(o);
}

/* ==== a hybrid model's snapshots ==== */

#define NR (5 * B + 17) /* past the ladder's 256, not on a block boundary */

struct rfx {
    struct fx *f;
    struct llm_model *m;
    char path[160];
};

static void open_qwen35(struct fx *f, struct rfx *r)
{
    r->f = f;
    snprintf(r->path, sizeof r->path, "%s/q35.gguf", f->dir);
    char cmd[512], err[512];
    snprintf(cmd, sizeof cmd,
             "tests/mkmodel %s --arch qwen35 --dim 64 --layers 4 --heads 4 --kv-heads 2 --head-dim 16 --ff 128 "
             "--ssm-state 16 --ssm-groups 2 --ssm-heads 4 --ssm-conv 4 --full-attn-interval 4 --n-vocab 300 "
             ">/dev/null",
             r->path);
    assert_int_equal(system(cmd), 0);
    if (llm_model_open(r->path, llm_model_default_params(), &r->m, err, sizeof err))
        fail_msg("%s", err);
}

/* the logits after tokens[0..n) computed in one batch from nothing */
static void fresh_logits(struct rfx *r, const int32_t *tokens, int64_t n, float *logits)
{
    struct llm_ctx *c = new_ctx(r->m);
    assert_int_equal(llm_ctx_decode(c, tokens, n), LLM_OK);
    memcpy(logits, llm_ctx_logits(c), N_VOCAB * sizeof *logits);
    llm_ctx_free(c);
}

/* a context of the model with its block cache */
static struct llm_ctx *rctx(struct rfx *r, struct sess_kv **kv)
{
    struct llm_ctx *c = new_ctx(r->m);
    *kv = new_kv(r->f, r->m, r->path, c);
    assert_true(sess_kv_recurrent(*kv));
    return c;
}

static char *snap_path_at(struct rfx *r, struct sess_kv *kv, const int32_t *tokens, int64_t p)
{
    /* the id of the block ending at p: a save of tokens[0..p) names it last */
    static char path[4200];
    struct llm_ctx *c = new_ctx(r->m);
    struct sess_kv *k2 = new_kv(r->f, r->m, r->path, c);
    (void)kv;
    struct sess_kv_save s;
    assert_int_equal(llm_ctx_decode(c, tokens, p), LLM_OK);
    assert_int_equal(sess_kv_save(k2, tokens, p, &s), 0);
    sess_snap_path(r->f->st, s.ids[s.n_ids - 1], false, path, sizeof path);
    sess_kv_free(k2);
    llm_ctx_free(c);
    return path;
}

/* A session's tokens computed in passes with snapshots taken at 100 and on
 * the ladder (256), saved (the end's kept): a fresh context restores to the
 * end from the snapshot there, bit for bit; to the snapshot at or before
 * where a shorter prompt's blocks reach; a rewind lands on a snapshot; a
 * damaged snapshot is reported and forgotten, and the next one back used. */
static void test_recurrent(void **state)
{
    struct fx *f = *state;
    struct rfx r;
    open_qwen35(f, &r);
    int32_t toks[NR + 1];
    for (int i = 0; i <= NR; i++)
        toks[i] = 1 + (i * 53) % (N_VOCAB - 1);
    struct sess_kv *kv;
    struct llm_ctx *c = rctx(&r, &kv);
    static const int64_t cuts[] = {100, 256, NR};
    int64_t at = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(llm_ctx_decode(c, toks + at, cuts[i] - at), LLM_OK);
        at = cuts[i];
        if (i < 2)
            assert_int_equal(sess_kv_snap_take(kv, toks), 0);
    }
    struct sess_kv_save s;
    assert_int_equal(sess_kv_save(kv, toks, NR, &s), 0);
    assert_int_equal(s.snaps_written, 3); /* 100, 256 and the end */
    assert_int_equal(s.problem[0], 0);
    /* a rewind to 200 lands on the snapshot at 100, from the store */
    struct sess_kv_restore rr;
    memset(&rr, 0, sizeof rr);
    assert_int_equal(sess_kv_rewind(kv, toks, 200, true, &rr), 0);
    assert_int_equal(llm_ctx_n_past(c), 100);
    assert_int_equal(rr.snap_pos, 100);
    assert_true(llm_ctx_rstate_valid(c));
    float want[N_VOCAB], got[N_VOCAB];
    assert_int_equal(llm_ctx_decode(c, toks + 100, 101), LLM_OK);
    fresh_logits(&r, toks, 201, want);
    assert_memory_equal(llm_ctx_logits(c), want, sizeof want);
    /* without the store, to the start */
    memset(&rr, 0, sizeof rr);
    assert_int_equal(sess_kv_rewind(kv, toks, 150, false, &rr), 0);
    assert_int_equal(llm_ctx_n_past(c), 0);
    assert_true(llm_ctx_rstate_valid(c));
    sess_kv_free(kv);
    llm_ctx_free(c);

    /* a fresh context: restored to the end from its snapshot */
    c = rctx(&r, &kv);
    assert_int_equal(sess_kv_restore(kv, toks, NR, &rr), 0);
    assert_int_equal(rr.snap_pos, NR);
    assert_int_equal(llm_ctx_n_past(c), NR);
    assert_int_equal(rr.tokens, NR);
    assert_int_equal(llm_ctx_decode(c, toks + NR, 1), LLM_OK);
    fresh_logits(&r, toks, NR + 1, want);
    assert_memory_equal(llm_ctx_logits(c), want, sizeof want);
    sess_kv_free(kv);
    llm_ctx_free(c);

    /* a prompt sharing 230 tokens: the blocks reach 230, the snapshot at 100 */
    int32_t other[240];
    memcpy(other, toks, sizeof other);
    for (int i = 230; i < 240; i++)
        other[i] = 7;
    c = rctx(&r, &kv);
    assert_int_equal(sess_kv_restore(kv, other, 239, &rr), 0);
    assert_int_equal(rr.kv_reach, 230);
    assert_int_equal(rr.snap_pos, 100);
    assert_int_equal(llm_ctx_n_past(c), 100);
    assert_int_equal(llm_ctx_decode(c, other + 100, 140), LLM_OK);
    fresh_logits(&r, other, 240, want);
    assert_memory_equal(llm_ctx_logits(c), want, sizeof want);
    sess_kv_free(kv);
    llm_ctx_free(c);

    /* the end's snapshot damaged: reported, forgotten, 256 used */
    char *p = snap_path_at(&r, NULL, toks, NR);
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "XY", 2, 300), 2);
    close(fd);
    c = rctx(&r, &kv);
    assert_int_equal(sess_kv_restore(kv, toks, NR, &rr), 0);
    print_message("%s\n", rr.first_problem);
    assert_non_null(strstr(rr.first_problem, "checksum mismatch in the state"));
    assert_int_equal(rr.damaged, 1);
    assert_int_equal(rr.snap_pos, 256);
    assert_int_equal(llm_ctx_n_past(c), 256);
    assert_int_not_equal(access(p, F_OK), 0);
    assert_int_equal(llm_ctx_decode(c, toks + 256, NR + 1 - 256), LLM_OK);
    fresh_logits(&r, toks, NR + 1, got);
    assert_memory_equal(llm_ctx_logits(c), got, sizeof got);
    /* a restore that finds no snapshot past where the context is leaves it there */
    struct sess_kv_restore r2;
    assert_int_equal(sess_kv_restore(kv, toks, NR, &r2), 0);
    assert_int_equal(llm_ctx_n_past(c), NR + 1);
    assert_true(llm_ctx_rstate_valid(c));
    sess_kv_free(kv);
    llm_ctx_free(c);
    llm_model_close(r.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        unit_test_fx(test_exact_restore),
        unit_test_fx(test_partial_sharing),
        unit_test_fx(test_damage),
        unit_test_fx(test_full_disk),
        unit_test_fx(test_other_model),
        unit_test_fx(test_recurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
