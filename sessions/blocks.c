/*
 * blocks.c - the KV cache of an engine context on disk, as content-addressed
 * blocks of SESS_BLOCK_TOKENS positions (format in kvblock.h): restoring the
 * longest stored chain that matches a prompt's tokens (and the first rows of
 * a block that diverges from it), and storing the blocks a context holds
 * that the store does not.
 *
 * The caller always supplies the tokens; blocks are a cache keyed by
 * content, so a block whose address does not match the tokens is simply
 * not found, and one that is found but fails any check is dropped from the
 * index, reported, and computed again. Rows move between the context and
 * the files through core's llm_ctx_kv_rows (reading straight into the
 * cache) and llm_ctx_kv_export, whose layout is the block file's.
 *
 * A hybrid model (llm_ctx_rstate_size > 0: recurrent layers beside the
 * attention ones) cannot resume from K/V alone: its recurrent layers keep
 * one state, not rows. Its snapshots (kvblock.h) are that state at chosen
 * positions, addressed by the id of the block ending there. The caller
 * takes them while it computes (sess_kv_snap_take, kept in memory); each
 * save writes those that lie on the tokens it stores (the state at its end
 * always among them). A restore reads the blocks as for any model, then
 * the latest snapshot at or before where they reach, and leaves the
 * context there (the rest is computed again); going back (sess_kv_rewind)
 * likewise lands on a snapshot. Invariant: the context's recurrent state
 * is valid at its n_past after every call here. Attention-only models take
 * none of these paths.
 */
#include "core/llm.h"
#include "sessions/sess-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define B SESS_BLOCK_TOKENS

struct sess_kv {
    struct sess_store *st;
    const struct llm_model *m;
    struct llm_ctx *ctx;
    uint8_t fp[32];
    uint8_t fp_other[32];    /* the fingerprint of the file's other KV variant (kv_variant) */
    uint8_t fp_v1[32], fp_v1_other[32]; /* the same in version 1 (sessions of schema < 5) */
    bool v1_done;            /* fp_v1 computed (only when a store made before schema 5 asks:
                              * it hashes parts of every tensor, milliseconds at every open) */
    int64_t model_id;        /* the models row of (fingerprint, path); -1: not in a private
                              * store yet (added at the first save) */
    int64_t block_model_id;  /* the row its blocks and snapshots are recorded under
                              * (sess_model_block_id) */
    char *model_path;
    uint32_t kv_type, n_layer, n_embd;
    uint8_t (*ids)[32];      /* ids of the blocks of the tokens last looked at */
    struct sess_block_row *rows;
    int64_t cap_ids;
    struct kv_block_dst *dst; /* 2 n_layer: where each run of a block goes */
    uint8_t *rows_buf;       /* one block's rows, for writing */
    int32_t child_tokens[B];
    /* recurrent state (hybrid models; rsize 0: none of this) */
    uint64_t rsize;          /* llm_ctx_rstate_size */
    struct snap_mem *pend;   /* snapshots taken since the last save, the oldest first */
    int64_t n_pend;
    size_t cap_pend;
    uint8_t *sbuf;           /* rsize (made when first needed): the state before a restore,
                              * to go back to */
    uint8_t *spare;          /* rsize or NULL: a snapshot's buffer kept for the next */
    uint8_t used[32];        /* the snapshot restored last (marked used at the next save) */
    bool has_used;
};

/* a snapshot in memory: the state at pos of the tokens whose chain ends
 * with block id (parent: the block before it) */
struct snap_mem {
    uint8_t id[32], parent[32];
    int64_t pos;
    uint8_t *state;
};

static uint8_t *state_alloc(const struct sess_kv *kv);
static void state_free(const struct sess_kv *kv, uint8_t *buf);

/* snapshots held in memory at most (each llm_ctx_rstate_size bytes); past
 * that they are written at once (with a store) or the oldest dropped */
#define SNAP_PENDING_MAX 8

static const uint8_t zero_id[32];

/* sess_fail when there is a store to hold the message */
static int kfail(struct sess_kv *kv, const char *msg)
{
    return kv->st ? sess_fail(kv->st, "%s", msg) : SESS_ERR;
}

/* ==== the model fingerprint ==== */

/*
 * Version 2 (kvchat-fingerprint-2) hashes every byte the KV depends on:
 * the header, metadata and tensor infos, and every tensor's data, whole.
 * Version 1 hashed three 4 KiB windows of each tensor, so a file changed
 * elsewhere kept its fingerprint and resumed with stale KV; it is still
 * computed (cheaply) to recognise the sessions of stores made before
 * schema 5, whose model rows carry it: never to key a block.
 */
int sess_model_fingerprint(const struct llm_gguf *g, uint8_t out[32])
{
    struct llm_sha256 *h = llm_sha256_init();
    uint64_t size = llm_gguf_file_size(g), data = llm_gguf_data_offset(g);
    llm_sha256_update(h, "kvchat-fingerprint-2", 20);
    llm_sha256_update(h, &size, 8);
    llm_sha256_update(h, llm_gguf_bytes(g), data); /* header, metadata, tensor infos */
    /* in steps, each given back once hashed: the first open of a large
     * model then holds its packed weights, not them and the whole file */
    const uint64_t step = 16u << 20;
    for (int64_t i = 0; i < llm_gguf_n_tensors(g); i++) {
        const struct llm_tensor_info *t = llm_gguf_tensor(g, i);
        for (uint64_t off = 0; off < t->n_bytes; off += step) {
            size_t n = (size_t)(t->n_bytes - off < step ? t->n_bytes - off : step);
            llm_sha256_update(h, (const uint8_t *)t->data + off, n);
            llm_gguf_release(g, (const uint8_t *)t->data + off, n);
        }
    }
    return llm_sha256_final(h, out) == LLM_OK ? SESS_OK : SESS_ERR;
}

/* the version-1 fingerprint (sampled windows), for old sessions alone */
static int fingerprint_v1(const struct llm_gguf *g, uint8_t out[32])
{
    struct llm_sha256 *h = llm_sha256_init();
    uint64_t size = llm_gguf_file_size(g), data = llm_gguf_data_offset(g);
    llm_sha256_update(h, "kvchat-fingerprint-1", 20);
    llm_sha256_update(h, &size, 8);
    llm_sha256_update(h, llm_gguf_bytes(g), data);
    for (int64_t i = 0; i < llm_gguf_n_tensors(g); i++) {
        const struct llm_tensor_info *t = llm_gguf_tensor(g, i);
        const uint8_t *p = t->data;
        uint64_t n = t->n_bytes, k = n < 4096 ? n : 4096;
        llm_sha256_update(h, p, k);
        llm_sha256_update(h, p + (n - k) / 2, k);
        llm_sha256_update(h, p + n - k, k);
    }
    return llm_sha256_final(h, out) == LLM_OK ? SESS_OK : SESS_ERR;
}

/*
 * The fingerprint is hashed once per file and remembered in the store's
 * fingerprints table (kvchat.db), keyed by the path and the identity the
 * file had when it was opened and mapped (fstat of that descriptor):
 * device, inode, size, mtime and ctime. Why that is safe: the kernel sets
 * ctime to the current time on every write, truncation, chmod, link and
 * rename, and no utimes call can set it (touch -d restores mtime, not
 * ctime), so a file with all five unchanged has not been written through
 * the file system since it was hashed. The identity is the one the
 * mapping was made from, so a file changed after it was opened is never
 * remembered under its new identity with the old bytes' hash.
 */
static int fingerprint_cached(struct sess_store *st, const char *path, const struct llm_gguf *g, uint8_t out[32])
{
    uint64_t id[4], ct[2];
    if (!path || !*path || !llm_gguf_identity(g, id) || !llm_gguf_ctime(g, ct))
        return sess_model_fingerprint(g, out);
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    sb.st_dev = (dev_t)id[0];
    sb.st_ino = (ino_t)id[1];
    sb.st_size = (off_t)llm_gguf_file_size(g);
    sb.st_mtim.tv_sec = (time_t)id[2];
    sb.st_mtim.tv_nsec = (long)id[3];
    sb.st_ctim.tv_sec = (time_t)ct[0];
    sb.st_ctim.tv_nsec = (long)ct[1];
    if (sess_fingerprint_lookup(st, path, &sb, out) == 1)
        return SESS_OK;
    if (sess_model_fingerprint(g, out))
        return SESS_ERR;
    sess_fingerprint_remember(st, path, &sb, out); /* best effort */
    return SESS_OK;
}

/* A context whose KV rows differ from another's on the same file (phi3's
 * long RoPE factors, chosen by the context size) keys its blocks by the
 * fingerprint hashed once more with what differs, so the two never share
 * rows. fp: the file's fingerprint, then this context's; other: the other
 * variant's (to tell a session of another context size from one of
 * another model). */
static int kv_variant(const struct llm_ctx *ctx, uint8_t fp[32], uint8_t other[32])
{
    uint8_t salted[32];
    struct llm_sha256 *h = llm_sha256_init();
    llm_sha256_update(h, "kvchat-kv-variant-long-rope", 27);
    llm_sha256_update(h, fp, 32);
    if (llm_sha256_final(h, salted) != LLM_OK)
        return SESS_ERR;
    if (llm_ctx_kv_variant(ctx)) {
        memcpy(other, fp, 32);
        memcpy(fp, salted, 32);
    } else {
        memcpy(other, salted, 32);
    }
    return SESS_OK;
}

/* ==== life cycle ==== */

/* kv->fp_v1 and fp_v1_other, computed once: true, or false (zeros) */
static bool fingerprint_v1_of(struct sess_kv *kv)
{
    if (!kv->v1_done) {
        kv->v1_done = true;
        if (fingerprint_v1(llm_model_gguf(kv->m), kv->fp_v1) || kv_variant(kv->ctx, kv->fp_v1, kv->fp_v1_other)) {
            memset(kv->fp_v1, 0, 32);
            memset(kv->fp_v1_other, 0, 32);
            kv->v1_done = false;
            return false;
        }
    }
    return true;
}

int sess_kv_init(struct sess_store *st, const struct llm_model *m, struct llm_ctx *ctx, const char *model_path,
                 struct sess_kv **out, char *err, size_t err_size)
{
    *out = NULL;
    struct sess_kv *kv = calloc(1, sizeof *kv);
    if (!kv) {
        snprintf(err, err_size, "out of memory");
        return SESS_ERR;
    }
    kv->st = st;
    kv->m = m;
    kv->model_id = -1;
    kv->model_path = strdup(model_path ? model_path : "");
    kv->ctx = ctx;
    kv->kv_type = llm_ctx_kv_type(ctx) == LLM_TYPE_F32 ? 0 : 1;
    kv->n_layer = (uint32_t)llm_model_n_layer_kv(m); /* the attention layers */
    kv->n_embd = (uint32_t)llm_model_n_embd_kv(m);
    uint64_t block_bytes = (uint64_t)B * kv->n_layer * 2 * kv->n_embd * kv_block_elem_size(kv->kv_type);
    kv->dst = malloc(2 * (size_t)kv->n_layer * sizeof *kv->dst);
    kv->rows_buf = malloc(block_bytes ? block_bytes : 1);
    if (!kv->dst || !kv->rows_buf || !kv->model_path) {
        sess_kv_free(kv);
        snprintf(err, err_size, "out of memory");
        return SESS_ERR;
    }
    kv->rsize = llm_ctx_rstate_size(ctx);
    if (llm_ctx_kv_size(ctx, 0, B) != block_bytes) {
        sess_kv_free(kv);
        snprintf(err, err_size, "the KV cache's layout is not the block files'");
        return SESS_ERR;
    }
    if (st) {
        if (fingerprint_cached(st, model_path, llm_model_gguf(m), kv->fp) || kv_variant(ctx, kv->fp, kv->fp_other)) {
            snprintf(err, err_size, "cannot compute the model's fingerprint");
            sess_kv_free(kv);
            return SESS_ERR;
        }
        int v1 = sess_model_v1_exists(st, model_path);
        if (v1 > 0 && !fingerprint_v1_of(kv)) {
            snprintf(err, err_size, "cannot compute the model's fingerprint");
            sess_kv_free(kv);
            return SESS_ERR;
        }
        if (v1 < 0 || sess_model_id(st, kv->fp, model_path, &kv->model_id) ||
            sess_model_block_id(st, kv->fp, &kv->block_model_id) ||
            (v1 > 0 && sess_model_upgrade(st, kv->fp_v1, model_path, kv->model_id))) {
            snprintf(err, err_size, "%s", sess_errmsg(st));
            sess_kv_free(kv);
            return SESS_ERR_STORE;
        }
    }
    *out = kv;
    return SESS_OK;
}

void sess_kv_free(struct sess_kv *kv)
{
    if (!kv)
        return;
    for (int64_t i = 0; i < kv->n_pend; i++)
        state_free(kv, kv->pend[i].state);
    state_free(kv, kv->spare);
    BASE_FREE(kv->ids, kv->model_path, kv->rows, kv->dst, kv->rows_buf, kv->pend, kv->sbuf, kv);
}

const uint8_t *sess_kv_fingerprint(const struct sess_kv *kv) { return kv->fp; }
const uint8_t *sess_kv_fingerprint_other(const struct sess_kv *kv) { return kv->fp_other; }
const uint8_t *sess_kv_fingerprint_v1(struct sess_kv *kv, bool other)
{
    fingerprint_v1_of(kv); /* (failing, zeros: no session's) */
    return other ? kv->fp_v1_other : kv->fp_v1;
}
int64_t sess_kv_model_id(struct sess_kv *kv)
{
    /* a private store did not know the model: it is added once writing is on */
    if (kv->model_id < 0 && kv->st && !sess_store_read_only(kv->st) &&
        (sess_model_id(kv->st, kv->fp, kv->model_path, &kv->model_id) ||
         sess_model_block_id(kv->st, kv->fp, &kv->block_model_id)))
        kv->model_id = -1;
    return kv->model_id;
}

/* ==== block ids ==== */

/* the description of block k of tokens (n_tok of them from position kB) */
static void describe(const struct sess_kv *kv, const int32_t *tokens, int64_t k, int64_t n_tok,
                     const uint8_t *parent, struct kv_block_desc *d)
{
    memset(d, 0, sizeof *d);
    memcpy(d->fingerprint, kv->fp, 32);
    if (parent)
        memcpy(d->parent, parent, 32);
    d->kv_type = kv->kv_type;
    d->n_layer = kv->n_layer;
    d->n_embd_k = d->n_embd_v = kv->n_embd;
    d->pos0 = (uint32_t)(k * B);
    d->n_tokens = (uint32_t)n_tok;
    d->tokens = tokens + k * B;
}

/* room for n ids (and rows) */
static int ids_reserve(struct sess_kv *kv, int64_t n)
{
    if (n <= kv->cap_ids)
        return SESS_OK;
    int64_t cap = kv->cap_ids ? kv->cap_ids : 64;
    while (cap < n)
        cap *= 2;
    uint8_t (*ids)[32] = realloc(kv->ids, (size_t)cap * sizeof *ids);
    if (ids)
        kv->ids = ids;
    struct sess_block_row *rows = realloc(kv->rows, (size_t)cap * sizeof *rows);
    if (rows)
        kv->rows = rows;
    if (!ids || !rows)
        return kfail(kv, "out of memory");
    kv->cap_ids = cap;
    return SESS_OK;
}

/* kv->ids[0..k_end) for the blocks of tokens[0..n): full blocks, and when
 * the last is partial, its id as a tail of n mod B tokens */
static int chain_ids(struct sess_kv *kv, const int32_t *tokens, int64_t n, int64_t *k_end)
{
    int64_t k_full = n / B, k = k_full + (n % B != 0);
    if (ids_reserve(kv, k + 1))
        return SESS_ERR;
    for (int64_t i = 0; i < k; i++) {
        struct kv_block_desc d;
        describe(kv, tokens, i, i < k_full ? B : n % B, i ? kv->ids[i - 1] : NULL, &d);
        if (kv_block_id(&d, kv->ids[i]))
            return kfail(kv, "cannot compute a KV block's id");
    }
    *k_end = k;
    return SESS_OK;
}

/* The id of the block of tokens that ends at p (>= 1) and its parent
 * (zeros for the first), over kv->ids of a chain_ids that covered p. */
static int id_at(struct sess_kv *kv, const int32_t *tokens, int64_t p, uint8_t id[32], uint8_t parent[32])
{
    int64_t k = (p - 1) / B;
    memcpy(parent, k ? kv->ids[k - 1] : zero_id, 32);
    if (p % B == 0) {
        memcpy(id, kv->ids[k], 32);
        return SESS_OK;
    }
    struct kv_block_desc d;
    describe(kv, tokens, k, p - k * B, k ? kv->ids[k - 1] : NULL, &d);
    return kv_block_id(&d, id) ? kfail(kv, "cannot compute a KV block's id") : SESS_OK;
}

/* ==== restoring ==== */

static void problem(struct sess_kv_restore *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct sess_kv_restore *r, const char *fmt, ...)
{
    r->damaged++;
    if (r->first_problem[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first_problem, sizeof r->first_problem, fmt, ap);
    va_end(ap);
}

/*
 * Read block d (id) into the context's positions [pos0, pos0 + n_tokens)
 * and let the context hold [0, keep). A block that is missing or damaged is
 * reported and forgotten, and the context then holds at most [0, pos0).
 * 1 read, 0 not, SESS_ERR.
 */
static int read_block(struct sess_kv *kv, const struct kv_block_desc *d, const uint8_t id[32], int64_t keep,
                      struct sess_kv_restore *r)
{
    int64_t a = d->pos0, b = a + d->n_tokens;
    for (uint32_t l = 0; l < kv->n_layer; l++)
        for (int v = 0; v < 2; v++) {
            struct kv_block_dst *o = &kv->dst[2 * l + v];
            if (llm_ctx_kv_rows(kv->ctx, l, v, a, b, &o->base, &o->stride, &o->n_chunks, &o->chunk_bytes))
                return sess_fail(kv->st, "%s", llm_ctx_errmsg(kv->ctx));
        }
    char path[4200], err[512];
    if (sess_block_path(kv->st, id, false, path, sizeof path))
        return SESS_ERR;
    int rc = kv_block_read(path, d, id, kv->dst, err, sizeof err);
    if (rc != KV_BLOCK_OK) {
        if (rc == KV_BLOCK_MISSING)
            problem(r, "KV block '%s' (tokens %lld-%lld) is missing%s%s", path, (long long)a, (long long)b,
                    strcmp(err, "not a regular file") ? "" : ": ", strcmp(err, "not a regular file") ? "" : err);
        else
            problem(r, "KV block '%s' is unusable (%s)", path, err);
        /* what was read may have overwritten rows the context held */
        if (llm_ctx_n_past(kv->ctx) > a && llm_ctx_truncate(kv->ctx, a) != LLM_OK)
            return sess_fail(kv->st, "%s", llm_ctx_errmsg(kv->ctx));
        if (sess_block_forget(kv->st, id))
            return SESS_ERR;
        return 0;
    }
    if (keep > llm_ctx_n_past(kv->ctx) && llm_ctx_kv_commit(kv->ctx, keep) != LLM_OK)
        return sess_fail(kv->st, "cannot load the KV cache: %s", llm_ctx_errmsg(kv->ctx));
    return 1;
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* the K/V half of sess_kv_restore: blocks alone */
static int restore_kv(struct sess_kv *kv, const int32_t *tokens, int64_t limit, struct sess_kv_restore *r)
{
    int64_t have = llm_ctx_n_past(kv->ctx);
    if (!kv->st || limit <= have)
        return SESS_OK;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (limit > llm_ctx_n_ctx(kv->ctx))
        limit = llm_ctx_n_ctx(kv->ctx);
    int64_t k_full = limit / B, first = have / B, n_ids, found;
    /* the ids of the full blocks up to limit (a tail's id is not wanted) */
    if (chain_ids(kv, tokens, k_full * B, &n_ids) ||
        sess_blocks_find(kv->st, (const uint8_t(*)[32])kv->ids + first, k_full - first, kv->rows + first, &found))
        return SESS_ERR;
    int64_t m = first;
    for (; m < first + found; m++) {
        struct kv_block_desc d;
        describe(kv, tokens, m, B, m ? kv->ids[m - 1] : NULL, &d);
        int rc = read_block(kv, &d, kv->ids[m], (m + 1) * B, r);
        if (rc < 0)
            return SESS_ERR;
        if (rc == 0)
            break;
        r->blocks++;
    }
    /* then the block after the chain that shares the most tokens with what
     * follows: its first rows are ours (the prefix-sharing property) */
    int64_t at = m * B, want = limit - at < B ? limit - at : B;
    if (want > 0 && at + want > llm_ctx_n_past(kv->ctx)) {
        struct sess_block_row row;
        int64_t common;
        const uint8_t *parent = m ? kv->ids[m - 1] : NULL;
        static const uint8_t root[32];
        int rc = sess_block_best_child(kv->st, parent ? parent : root, kv->block_model_id, kv->kv_type, tokens + at,
                                       want, &row, &common, kv->child_tokens);
        if (rc < 0)
            return SESS_ERR;
        if (rc == 1 && at + common > llm_ctx_n_past(kv->ctx) && at + row.n_tokens <= llm_ctx_n_ctx(kv->ctx) &&
            row.n_tokens <= B) {
            /* checked against the child's own tokens (ours where they agree) */
            struct kv_block_desc d;
            describe(kv, tokens, m, row.n_tokens, parent, &d);
            d.tokens = kv->child_tokens;
            rc = read_block(kv, &d, row.id, at + common, r);
            if (rc < 0)
                return SESS_ERR;
            if (rc == 1)
                r->blocks++;
        }
    }
    r->tokens = llm_ctx_n_past(kv->ctx) - have;
    if (r->tokens < 0)
        r->tokens = 0;
    /* (the blocks read are marked used when the turn's blocks are saved,
     * after the answer: not here, where it would delay the first token) */
    r->ms = ms_since(&t0);
    return SESS_OK;
}

/* ==== snapshots of the recurrent state ==== */

bool sess_kv_recurrent(const struct sess_kv *kv) { return kv->rsize > 0; }

/* A state's buffer (rsize bytes), mapped in huge pages where the kernel
 * has them: a snapshot is 19-50 MiB, and fresh memory is not free (on the
 * 2-core VMs we measure on, 4 KiB pages cost 3-4 times as much per MB).
 * NULL when out of memory. */
static uint8_t *state_alloc(const struct sess_kv *kv)
{
    void *p = mmap(NULL, kv->rsize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (kv->rsize >= (2u << 20))
        madvise(p, kv->rsize, MADV_HUGEPAGE);
#endif
    return p;
}

static void state_free(const struct sess_kv *kv, uint8_t *buf)
{
    if (buf)
        munmap(buf, kv->rsize);
}

/* a state buffer no longer needed: kept for the next snapshot (fresh
 * memory costs its page faults), or freed */
static void spare_put(struct sess_kv *kv, uint8_t *buf)
{
    if (!buf)
        return;
    if (kv->spare)
        state_free(kv, buf);
    else
        kv->spare = buf;
}

static void pend_drop(struct sess_kv *kv, int64_t i)
{
    spare_put(kv, kv->pend[i].state);
    memmove(kv->pend + i, kv->pend + i + 1, (size_t)(kv->n_pend - i - 1) * sizeof *kv->pend);
    kv->n_pend--;
}

/* Is snapshot (id, parent, pos) recorded? 1, 0, SESS_ERR */
static int snap_recorded(struct sess_kv *kv, const uint8_t id[32], const uint8_t parent[32], int64_t pos)
{
    struct sess_snap_row rows[8];
    int64_t n;
    if (sess_snaps_in_block(kv->st, parent, kv->block_model_id, kv->kv_type, pos - 1, pos, rows, 8, &n))
        return SESS_ERR;
    for (int64_t i = 0; i < n; i++)
        if (!memcmp(rows[i].id, id, 32))
            return 1;
    return 0;
}

/* Write snapshot sm and record it (used at t). SESS_OK, or SESS_ERR with
 * why in the store's message and *err_no the write's errno (-1: the
 * database). */
static int write_snap(struct sess_kv *kv, const struct snap_mem *sm, int64_t t, int64_t *bytes, int *err_no)
{
    struct kv_snap_desc d;
    memset(&d, 0, sizeof d);
    memcpy(d.id, sm->id, 32);
    memcpy(d.fingerprint, kv->fp, 32);
    d.kv_type = kv->kv_type;
    d.pos = (uint64_t)sm->pos;
    d.state_bytes = kv->rsize;
    char path[4200], err[512];
    *err_no = 0;
    if (sess_snap_path(kv->st, sm->id, true, path, sizeof path))
        return SESS_ERR;
    if (kv_snap_write(path, &d, sm->state, err, sizeof err, err_no))
        return sess_fail(kv->st, "%s", err);
    *bytes = (int64_t)kv_snap_file_bytes(&d);
    if (sess_snap_record(kv->st, &d, sm->parent, kv->block_model_id, *bytes, t)) {
        *err_no = -1;
        unlink(path); /* no row, no file */
        return SESS_ERR;
    }
    return SESS_OK;
}

/* write_snap; on a full disk, evict and try once more */
static int write_snap_or_evict(struct sess_kv *kv, const struct snap_mem *sm, int64_t t, int64_t *bytes, int *err_no)
{
    int rc = write_snap(kv, sm, t, bytes, err_no);
    if (rc == SESS_OK || (*err_no != ENOSPC && *err_no != EDQUOT))
        return rc;
    char why[1024];
    snprintf(why, sizeof why, "%s", sess_errmsg(kv->st));
    int64_t total, need = 2 * (int64_t)(KV_SNAP_HEADER_BYTES + kv->rsize);
    struct sess_gc_stats gs;
    if (sess_store_bytes(kv->st, &total, NULL) == SESS_OK && total > 0 &&
        sess_evict(kv->st, total > need ? total - need : 0, &gs) == SESS_OK && gs.blocks > 0 &&
        write_snap(kv, sm, t, bytes, err_no) == SESS_OK)
        return SESS_OK;
    return sess_fail(kv->st, "%s (the disk is full: free space, or keep less with --cache-max)", why);
}

/* Keep the state at p of tokens: state (rsize bytes, taken over), or
 * when NULL the context's own (p is then its n_past) */
static int snap_keep(struct sess_kv *kv, const int32_t *tokens, int64_t p, uint8_t *state)
{
    int64_t n_ids;
    uint8_t id[32], parent[32];
    if (chain_ids(kv, tokens, p, &n_ids) || id_at(kv, tokens, p, id, parent)) {
        spare_put(kv, state);
        return SESS_ERR;
    }
    bool known = kv->has_used && !memcmp(kv->used, id, 32); /* what was restored is stored */
    for (int64_t i = 0; i < kv->n_pend && !known; i++)
        known = !memcmp(kv->pend[i].id, id, 32);
    if (known) {
        spare_put(kv, state);
        return SESS_OK;
    }
    if (kv->n_pend == SNAP_PENDING_MAX) {
        /* a long prompt: what is held goes to disk now (its blocks come
         * with the turn's), or without a store the oldest is dropped */
        int64_t t = sess_now_ms(), bytes;
        int err_no;
        while (kv->st && kv->n_pend > 0) {
            int rec = snap_recorded(kv, kv->pend[0].id, kv->pend[0].parent, kv->pend[0].pos);
            if (rec < 0 || (!rec && write_snap_or_evict(kv, &kv->pend[0], t, &bytes, &err_no)))
                break; /* (best effort: the cache is only a cache) */
            pend_drop(kv, 0);
        }
        if (kv->n_pend == SNAP_PENDING_MAX)
            pend_drop(kv, 0);
    }
    if (base_grow((void **)&kv->pend, &kv->cap_pend, (size_t)kv->n_pend + 1, sizeof *kv->pend)) {
        spare_put(kv, state);
        return kfail(kv, "out of memory");
    }
    struct snap_mem *sm = &kv->pend[kv->n_pend];
    if (!state) {
        if (!(state = sess_kv_snap_buffer(kv)))
            return kfail(kv, "out of memory");
        if (llm_ctx_rstate_export(kv->ctx, state, kv->rsize) != (int64_t)kv->rsize) {
            spare_put(kv, state);
            char msg[600];
            snprintf(msg, sizeof msg, "cannot export the recurrent state: %.500s", llm_ctx_errmsg(kv->ctx));
            return kfail(kv, msg);
        }
    }
    sm->state = state;
    memcpy(sm->id, id, 32);
    memcpy(sm->parent, parent, 32);
    sm->pos = p;
    kv->n_pend++;
    return SESS_OK;
}

int sess_kv_snap_take(struct sess_kv *kv, const int32_t *tokens)
{
    int64_t p = llm_ctx_n_past(kv->ctx);
    if (!kv->rsize || p == 0 || !llm_ctx_rstate_valid(kv->ctx))
        return SESS_OK;
    return snap_keep(kv, tokens, p, NULL);
}

uint8_t *sess_kv_snap_buffer(struct sess_kv *kv)
{
    uint8_t *b = kv->spare;
    kv->spare = NULL;
    return b ? b : kv->rsize ? state_alloc(kv) : NULL;
}

int sess_kv_snap_give(struct sess_kv *kv, const int32_t *tokens, int64_t p, uint8_t *state)
{
    if (!state || !kv->rsize || p <= 0 || p > llm_ctx_n_past(kv->ctx)) {
        spare_put(kv, state);
        return SESS_OK;
    }
    return snap_keep(kv, tokens, p, state);
}

/* the context cut to p (<= n_past) with state (rsize bytes, of tokens at
 * p): SESS_OK, or SESS_ERR when the engine refuses it */
static int set_state(struct sess_kv *kv, int64_t p, const void *state)
{
    if (llm_ctx_truncate(kv->ctx, p) != LLM_OK || llm_ctx_rstate_import(kv->ctx, state, kv->rsize) != LLM_OK) {
        char msg[600];
        snprintf(msg, sizeof msg, "cannot set the recurrent state: %.500s", llm_ctx_errmsg(kv->ctx));
        return kfail(kv, msg);
    }
    return SESS_OK;
}

/*
 * Go to the latest snapshot of tokens at a position in (lo, hi], the
 * context holding their K/V up to hi: one in memory, or the store's (when
 * use_store; deepest first; one that fails a check is reported in r and
 * forgotten). Returns the position (the context then holds [0, pos) with
 * its state valid), 0 when there is none (the context unchanged), or
 * SESS_ERR.
 */
static int64_t load_snapshot(struct sess_kv *kv, const int32_t *tokens, int64_t lo, int64_t hi, bool use_store,
                             struct sess_kv_restore *r)
{
    int64_t n_ids, best = -1;
    if (hi <= lo || chain_ids(kv, tokens, hi, &n_ids))
        return hi <= lo ? 0 : SESS_ERR;
    for (int64_t i = 0; i < kv->n_pend; i++) {
        uint8_t id[32], parent[32];
        int64_t p = kv->pend[i].pos;
        if (p <= lo || p > hi || (best >= 0 && p <= kv->pend[best].pos))
            continue;
        if (id_at(kv, tokens, p, id, parent))
            return SESS_ERR;
        if (!memcmp(id, kv->pend[i].id, 32))
            best = i;
    }
    int64_t floor_pos = best >= 0 ? kv->pend[best].pos : lo;
    for (int64_t k = (hi - 1) / B; use_store && kv->st && k >= 0 && (k + 1) * B > floor_pos; k--) {
        struct sess_snap_row rows[8];
        int64_t n, a = k * B > floor_pos ? k * B : floor_pos, b = (k + 1) * B < hi ? (k + 1) * B : hi;
        if (sess_snaps_in_block(kv->st, k ? kv->ids[k - 1] : zero_id, kv->block_model_id, kv->kv_type, a, b, rows, 8, &n))
            return SESS_ERR;
        for (int64_t i = 0; i < n; i++) {
            uint8_t id[32], parent[32];
            if (id_at(kv, tokens, rows[i].pos, id, parent))
                return SESS_ERR;
            if (memcmp(id, rows[i].id, 32))
                continue; /* another sequence's, in a block with the same parent */
            char path[4200], err[512];
            struct kv_snap_desc want;
            memset(&want, 0, sizeof want);
            memcpy(want.id, id, 32);
            memcpy(want.fingerprint, kv->fp, 32);
            want.kv_type = kv->kv_type;
            want.pos = (uint64_t)rows[i].pos;
            want.state_bytes = kv->rsize;
            if (sess_snap_path(kv->st, id, false, path, sizeof path))
                return SESS_ERR;
            /* read into the context's own state (no copy, no buffer of 19-50 MiB to
             * fault in): what it held is given up here, and every caller of this
             * sets a state after it, this one or another */
            uint8_t *into = llm_ctx_rstate_memory(kv->ctx);
            int rc = kv_snap_read(path, &want, into, err, sizeof err);
            if (rc == KV_BLOCK_OK && set_state(kv, rows[i].pos, into) == SESS_OK) {
                memcpy(kv->used, id, 32);
                kv->has_used = true;
                return rows[i].pos;
            }
            if (rc == KV_BLOCK_MISSING)
                problem(r, "snapshot '%s' (the state at %lld) is missing%s%s", path, (long long)rows[i].pos,
                        strcmp(err, "not a regular file") ? "" : ": ", strcmp(err, "not a regular file") ? "" : err);
            else if (rc != KV_BLOCK_OK)
                problem(r, "snapshot '%s' is unusable (%s)", path, err);
            else
                problem(r, "snapshot '%s' is unusable (%s)", path, sess_errmsg(kv->st));
            if (sess_snap_forget(kv->st, id))
                return SESS_ERR;
        }
    }
    if (best < 0)
        return 0;
    if (set_state(kv, kv->pend[best].pos, kv->pend[best].state))
        return SESS_ERR;
    return kv->pend[best].pos;
}

int sess_kv_rewind(struct sess_kv *kv, const int32_t *tokens, int64_t n, bool use_store, struct sess_kv_restore *r)
{
    int64_t have = llm_ctx_n_past(kv->ctx);
    if (n > have)
        n = have;
    if (!kv->rsize || n == 0) {
        if (n < have && llm_ctx_truncate(kv->ctx, n) != LLM_OK)
            return kfail(kv, llm_ctx_errmsg(kv->ctx));
        return SESS_OK;
    }
    if (n == have && llm_ctx_rstate_valid(kv->ctx))
        return SESS_OK;
    int64_t s = load_snapshot(kv, tokens, 0, n, use_store, r);
    if (s < 0)
        return SESS_ERR;
    if (s == 0 && llm_ctx_truncate(kv->ctx, 0) != LLM_OK) /* the initial state */
        return kfail(kv, llm_ctx_errmsg(kv->ctx));
    r->snap_pos = s ? s : -1;
    return SESS_OK;
}

/* Is there a snapshot of tokens (in memory or recorded) at a position in
 * (lo, hi]? 1, 0, SESS_ERR */
static int snap_beyond(struct sess_kv *kv, const int32_t *tokens, int64_t lo, int64_t hi)
{
    int64_t n_ids;
    uint8_t id[32], parent[32];
    if (chain_ids(kv, tokens, hi, &n_ids))
        return SESS_ERR;
    for (int64_t i = 0; i < kv->n_pend; i++) {
        int64_t p = kv->pend[i].pos;
        if (p > lo && p <= hi && (id_at(kv, tokens, p, id, parent) || !memcmp(id, kv->pend[i].id, 32)))
            return 1; /* (an error: the full path says so) */
    }
    for (int64_t k = (hi - 1) / B; k >= 0 && (k + 1) * B > lo; k--) {
        struct sess_snap_row rows[8];
        int64_t n, a = k * B > lo ? k * B : lo, b = (k + 1) * B < hi ? (k + 1) * B : hi;
        if (sess_snaps_in_block(kv->st, k ? kv->ids[k - 1] : zero_id, kv->block_model_id, kv->kv_type, a, b, rows, 8, &n))
            return SESS_ERR;
        for (int64_t j = 0; j < n; j++) {
            if (id_at(kv, tokens, rows[j].pos, id, parent))
                return SESS_ERR;
            if (!memcmp(id, rows[j].id, 32))
                return 1;
        }
    }
    return 0;
}

/* How far restore_kv would take the context (holding have of tokens,
 * up to limit) if every block it found were sound: the index alone */
static int index_reach(struct sess_kv *kv, const int32_t *tokens, int64_t have, int64_t limit, int64_t *reach)
{
    *reach = have;
    if (limit > llm_ctx_n_ctx(kv->ctx))
        limit = llm_ctx_n_ctx(kv->ctx);
    int64_t k_full = limit / B, first = have / B, n_ids, found = 0;
    if (k_full > first && (chain_ids(kv, tokens, k_full * B, &n_ids) ||
                           sess_blocks_find(kv->st, (const uint8_t(*)[32])kv->ids + first, k_full - first,
                                            kv->rows + first, &found)))
        return SESS_ERR;
    int64_t m = first + found, at = m * B, want = limit - at < B ? limit - at : B;
    if (at > *reach)
        *reach = at;
    if (want > 0 && at + want > *reach) {
        struct sess_block_row row;
        int64_t common;
        static const uint8_t root[32];
        if (m > 0 && chain_ids(kv, tokens, m * B, &n_ids))
            return SESS_ERR;
        int rc = sess_block_best_child(kv->st, m ? kv->ids[m - 1] : root, kv->block_model_id, kv->kv_type, tokens + at,
                                       want, &row, &common, kv->child_tokens);
        if (rc < 0)
            return SESS_ERR;
        if (rc == 1 && at + common > *reach && at + row.n_tokens <= llm_ctx_n_ctx(kv->ctx) && row.n_tokens <= B)
            *reach = at + common;
    }
    return SESS_OK;
}

int sess_kv_restore(struct sess_kv *kv, const int32_t *tokens, int64_t limit, struct sess_kv_restore *r)
{
    memset(r, 0, sizeof *r);
    r->snap_pos = -1;
    int64_t have = llm_ctx_n_past(kv->ctx);
    if (!kv->rsize)
        return restore_kv(kv, tokens, limit, r);
    if (!kv->st || limit <= have)
        return SESS_OK;
    /* K/V past a state is no use: with no snapshot past have (a turn
     * after its history, the common case) nothing is read, only where the
     * stored K/V would reach is said (the caller keeps a snapshot there) */
    int any = snap_beyond(kv, tokens, have, limit);
    if (any < 0)
        return SESS_ERR;
    if (!any)
        return index_reach(kv, tokens, have, limit, &r->kv_reach);
    /* the state now, to come back to when no snapshot lies past it */
    if (have > 0 && !kv->sbuf && !(kv->sbuf = malloc(kv->rsize)))
        return kfail(kv, "out of memory");
    if (have > 0 && llm_ctx_rstate_export(kv->ctx, kv->sbuf, kv->rsize) != (int64_t)kv->rsize)
        return kfail(kv, "cannot export the recurrent state");
    int rc = restore_kv(kv, tokens, limit, r);
    double ms = r->ms;
    int64_t reach = llm_ctx_n_past(kv->ctx);
    r->kv_reach = reach;
    if (rc == SESS_OK && reach > have) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int64_t s = load_snapshot(kv, tokens, have, reach, true, r);
        if (s < 0)
            rc = SESS_ERR;
        else if (s > 0)
            r->snap_pos = s;
        ms += ms_since(&t0);
    }
    if (reach < have) {
        /* a damaged block overlapping what the context held cut it below
         * there: the latest snapshot before the cut, or the start */
        int64_t s = load_snapshot(kv, tokens, 0, reach, true, r);
        if (s < 0)
            return SESS_ERR;
        if (s == 0 && llm_ctx_truncate(kv->ctx, 0) != LLM_OK)
            return kfail(kv, llm_ctx_errmsg(kv->ctx));
        r->snap_pos = s ? s : -1;
    } else if (llm_ctx_n_past(kv->ctx) != have && r->snap_pos < 0) { /* no snapshot: back to where it was */
        if (have == 0 ? llm_ctx_truncate(kv->ctx, 0) != LLM_OK : set_state(kv, have, kv->sbuf) != SESS_OK)
            return kfail(kv, "cannot go back to the recurrent state");
    }
    r->tokens = llm_ctx_n_past(kv->ctx) > have ? llm_ctx_n_past(kv->ctx) - have : 0;
    r->ms = ms;
    return rc;
}

/* ==== drafts: what followed these tokens last time ==== */

int64_t sess_kv_continuation(struct sess_kv *kv, const int32_t *tokens, int64_t p, int32_t *out, int64_t max)
{
    if (!kv->st || p <= 0 || max <= 0 || kv->block_model_id < 0)
        return 0;
    int64_t k = p / B, n_ids, got = 0;
    if (chain_ids(kv, tokens, k * B, &n_ids))
        return SESS_ERR;
    uint8_t parent[32];
    memcpy(parent, k ? kv->ids[k - 1] : zero_id, 32);
    const int32_t *ours = tokens + k * B;
    int64_t n = p - k * B;
    while (got < max) {
        struct sess_block_row row;
        int rc = sess_block_continue(kv->st, parent, kv->block_model_id, kv->kv_type, ours, n, &row,
                                     kv->child_tokens);
        if (rc <= 0)
            return rc < 0 ? SESS_ERR : got;
        for (int64_t i = n; i < row.n_tokens && got < max; i++)
            out[got++] = kv->child_tokens[i];
        if (row.n_tokens < B)
            break;
        memcpy(parent, row.id, 32); /* a full block: its most recent child goes on */
        n = 0;
    }
    return got;
}

/* ==== storing ==== */

/* Write block k (d, id) from the context's rows; record it. SESS_OK, or
 * SESS_ERR with why in the store's message and *err_no the write's errno
 * (-1: recording it in the database failed). */
static int write_block(struct sess_kv *kv, const struct kv_block_desc *d, const uint8_t id[32], int64_t t,
                       int64_t *bytes, int *err_no)
{
    uint64_t size = kv_block_rows_bytes(d);
    char path[4200], err[512];
    *err_no = 0;
    if (llm_ctx_kv_export(kv->ctx, d->pos0, (int64_t)d->pos0 + d->n_tokens, kv->rows_buf, size) != (int64_t)size)
        return sess_fail(kv->st, "cannot export the KV cache: %s", llm_ctx_errmsg(kv->ctx));
    if (sess_block_path(kv->st, id, true, path, sizeof path))
        return SESS_ERR;
    if (kv_block_write(path, d, id, kv->rows_buf, err, sizeof err, err_no))
        return sess_fail(kv->st, "%s", err);
    *bytes = (int64_t)kv_block_file_bytes(d);
    if (sess_block_record(kv->st, d, id, kv->block_model_id, *bytes, t)) {
        *err_no = -1;
        unlink(path); /* no row, no file */
        return SESS_ERR;
    }
    return SESS_OK;
}

/* write_block, and when the disk is full, make room by evicting the least
 * recently used blocks and try once more */
static int write_block_or_evict(struct sess_kv *kv, const struct kv_block_desc *d, const uint8_t id[32],
                                int64_t t, int64_t *bytes, int *err_no)
{
    int rc = write_block(kv, d, id, t, bytes, err_no);
    if (rc == SESS_OK || (*err_no != ENOSPC && *err_no != EDQUOT))
        return rc;
    char why[1024];
    snprintf(why, sizeof why, "%s", sess_errmsg(kv->st));
    int64_t total, need = 4 * (int64_t)kv_block_file_bytes(d);
    struct sess_gc_stats gs;
    if (sess_store_bytes(kv->st, &total, NULL) == SESS_OK && total > 0 &&
        sess_evict(kv->st, total > need ? total - need : 0, &gs) == SESS_OK && gs.blocks > 0 &&
        write_block(kv, d, id, t, bytes, err_no) == SESS_OK)
        return SESS_OK;
    return sess_fail(kv->st, "%s (the disk is full: free space, or keep less with --cache-max)", why);
}

int sess_kv_save(struct sess_kv *kv, const int32_t *tokens, int64_t n, struct sess_kv_save *s)
{
    memset(s, 0, sizeof *s);
    if (!kv->st || n <= 0 || sess_store_read_only(kv->st))
        return SESS_OK;
    if (sess_kv_model_id(kv) < 0)
        return SESS_ERR;
    int64_t n_ids, found, k_full = n / B, t = sess_now_ms();
    /* a hybrid model's state at the end is always kept (before the ids
     * below: taking one computes ids too) */
    if (kv->rsize && n == llm_ctx_n_past(kv->ctx) && sess_kv_snap_take(kv, tokens))
        return SESS_ERR;
    if (chain_ids(kv, tokens, n, &n_ids))
        return SESS_ERR;
    s->ids = kv->ids;
    s->n_ids = n_ids;
    int64_t n_known = 0; /* kv->rows[0..n_known): ids of blocks that were there */
    for (int64_t k = 0; k < n_ids; k++) {
        struct kv_block_desc d;
        describe(kv, tokens, k, k < k_full ? B : n - k * B, k ? kv->ids[k - 1] : NULL, &d);
        if (sess_blocks_find(kv->st, (const uint8_t(*)[32])kv->ids + k, 1, kv->rows + n_known, &found))
            return SESS_ERR;
        if (found) {
            s->bytes += kv->rows[n_known++].bytes;
        } else if (!s->problem[0]) {
            int64_t bytes;
            int err_no;
            if (write_block_or_evict(kv, &d, kv->ids[k], t, &bytes, &err_no) == SESS_OK) {
                s->written++;
                s->bytes += bytes;
            } else { /* the rest is not written: the turn goes on without it */
                snprintf(s->problem, sizeof s->problem, "cannot store the KV cache: %s", sess_errmsg(kv->st));
                s->db_failed = err_no < 0 && !sess_store_full(kv->st);
            }
        }
    }
    /* every block of the prompt was used now, at one time (for the LRU) */
    uint8_t (*known)[32] = malloc((size_t)(n_known + kv->n_pend + 1) * sizeof *known);
    if (!known)
        return sess_fail(kv->st, "out of memory");
    for (int64_t i = 0; i < n_known; i++)
        memcpy(known[i], kv->rows[i].id, 32);
    int rc = sess_blocks_touch(kv->st, (const uint8_t(*)[32])known, n_known, t);
    /* the snapshots taken on these tokens (others were of a sequence that
     * is not kept: an answer cut back), and the one restored */
    int64_t n_snap = 0;
    for (int64_t i = 0; i < kv->n_pend && rc == SESS_OK; i++) {
        const struct snap_mem *sm = &kv->pend[i];
        uint8_t id[32], parent[32];
        if (sm->pos > n || id_at(kv, tokens, sm->pos, id, parent) || memcmp(id, sm->id, 32))
            continue;
        int rec = snap_recorded(kv, sm->id, sm->parent, sm->pos);
        if (rec < 0) {
            rc = SESS_ERR;
        } else if (rec) {
            memcpy(known[n_snap++], sm->id, 32);
        } else if (!s->problem[0]) {
            int64_t bytes;
            int err_no;
            if (write_snap_or_evict(kv, sm, t, &bytes, &err_no) == SESS_OK) {
                s->snaps_written++;
            } else {
                snprintf(s->problem, sizeof s->problem, "cannot store the recurrent state: %s", sess_errmsg(kv->st));
                s->db_failed = err_no < 0 && !sess_store_full(kv->st);
            }
        }
    }
    while (kv->n_pend > 0)
        pend_drop(kv, kv->n_pend - 1);
    if (kv->has_used && n_snap < n_known + 1)
        memcpy(known[n_snap++], kv->used, 32);
    kv->has_used = false;
    if (rc == SESS_OK)
        rc = sess_snaps_touch(kv->st, (const uint8_t(*)[32])known, n_snap, t);
    free(known);
    return rc;
}
