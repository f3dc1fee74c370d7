/*
 * kv.c - a conversation's KV cache on disk: snapshotting spans of a live
 * context as segment files and restoring a context from them, with
 * re-prefill wherever a segment is missing or damaged.
 *
 * The caller always supplies the conversation's tokens (rendered from the
 * messages, the source of truth); segments are a cache keyed by content, so
 * restoring never trusts a file over the tokens: a segment whose content
 * address does not match the tokens is simply not found. Rows move through
 * core's llm_ctx_kv_export/import, whose layout (for each layer, the span's
 * K block then its V block) is the segment file's.
 */
#include "core/llm.h"
#include "models/mdl.h"
#include "sessions/kvseg.h"
#include "sessions/sess.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int sess_kv_fail(struct sess_store *st, const char *fmt, ...); /* store.c */

/* ==== the model fingerprint ==== */

void sess_model_fingerprint(const struct llm_gguf *g, uint8_t out[32])
{
    struct mdl_sha256 *h = mdl_sha256_init();
    if (!h) {
        memset(out, 0, 32);
        return;
    }
    uint64_t size = llm_gguf_file_size(g), data = llm_gguf_data_offset(g);
    mdl_sha256_update(h, "kvchat-fingerprint-1", 20);
    mdl_sha256_update(h, &size, 8);
    mdl_sha256_update(h, llm_gguf_bytes(g), data); /* header, metadata, tensor infos */
    for (int64_t i = 0; i < llm_gguf_n_tensors(g); i++) {
        const struct llm_tensor_info *t = llm_gguf_tensor(g, i);
        const uint8_t *p = t->data;
        uint64_t n = t->n_bytes, k = n < 4096 ? n : 4096;
        mdl_sha256_update(h, p, k);
        mdl_sha256_update(h, p + (n - k) / 2, k);
        mdl_sha256_update(h, p + n - k, k);
    }
    mdl_sha256_final(h, out);
}

int sess_fingerprint_lookup(struct sess_store *st, const char *path, const struct stat *sb, uint8_t fp[32]);
int sess_fingerprint_remember(struct sess_store *st, const char *path, const struct stat *sb,
                              const uint8_t fp[32]);

int sess_model_fingerprint_cached(struct sess_store *st, const char *path, const struct llm_gguf *g,
                                  uint8_t out[32])
{
    struct stat sb;
    /* the mapping is of the file as it was opened: trust the record only if
     * the file still has that size (and identity, and time) */
    if (!path || !*path || stat(path, &sb) != 0 || (uint64_t)sb.st_size != llm_gguf_file_size(g)) {
        sess_model_fingerprint(g, out);
        return 0;
    }
    if (sess_fingerprint_lookup(st, path, &sb, out) == 1)
        return 1;
    sess_model_fingerprint(g, out);
    sess_fingerprint_remember(st, path, &sb, out); /* best effort */
    return 0;
}

/* ==== a span as a segment ==== */

/* the segment description of tokens [a, b) of ctx; -1 if the layout is not
 * the one segments hold */
static int describe(struct sess_store *st, const struct llm_model *m, struct llm_ctx *ctx,
                    const uint8_t fp[32], const uint8_t parent[32], const int32_t *tokens, int64_t a,
                    int64_t b, struct kv_seg_desc *d, uint64_t *block)
{
    memset(d, 0, sizeof *d);
    memcpy(d->fingerprint, fp, 32);
    memcpy(d->parent, parent, 32);
    d->kv_type = llm_ctx_kv_type(ctx) == LLM_TYPE_F32 ? 0 : 1;
    d->n_layer = (uint32_t)llm_model_n_layer(m);
    d->n_embd_k = d->n_embd_v = (uint32_t)llm_model_n_embd_kv(m);
    d->pos0 = (uint32_t)a;
    d->n_tokens = (uint32_t)(b - a);
    d->tokens = tokens + a;
    *block = (uint64_t)(b - a) * d->n_embd_k * kv_seg_elem_size(d->kv_type);
    if (b <= a || b - a > KV_SEG_MAX_TOKENS)
        return sess_kv_fail(st, "bad span [%lld, %lld)", (long long)a, (long long)b);
    if (llm_ctx_kv_size(ctx, a, b) != 2 * *block * d->n_layer)
        return sess_kv_fail(st, "the KV cache's layout is not the segment layout");
    return 0;
}

static int write_span(struct sess_store *st, int64_t id, const struct kv_seg_desc *d,
                      const uint8_t seg[32], const uint8_t *rows, uint64_t block, int64_t last_seq)
{
    const void **k = malloc(d->n_layer * sizeof *k), **v = malloc(d->n_layer * sizeof *v);
    char path[4200], err[512];
    int rc = -1;
    if (!k || !v) {
        sess_kv_fail(st, "out of memory");
        goto out;
    }
    for (uint32_t l = 0; l < d->n_layer; l++) {
        k[l] = rows + 2 * block * l;
        v[l] = rows + 2 * block * l + block;
    }
    if (sess_segment_path(st, seg, path, sizeof path))
        goto out;
    if (kv_seg_write(path, d, seg, (const void *const *)k, (const void *const *)v, err, sizeof err)) {
        sess_kv_fail(st, "cannot save the KV cache: %s", err);
        goto out;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        sess_kv_fail(st, "cannot save the KV cache: '%s' vanished", path);
        goto out;
    }
    rc = sess_chain_append(st, id, seg, d->parent, d->fingerprint, d->kv_type, d->pos0, d->n_tokens,
                           sb.st_size, last_seq);
out:
    free(k);
    free(v);
    return rc;
}

int sess_kv_snapshot(struct sess_store *st, int64_t id, const struct llm_model *m, struct llm_ctx *ctx,
                     const uint8_t fp[32], const uint8_t parent[32], const int32_t *tokens, int64_t a,
                     int64_t b, int64_t last_seq, uint8_t seg_id[32])
{
    struct kv_seg_desc d;
    uint64_t block;
    uint8_t seg[32];
    if (describe(st, m, ctx, fp, parent, tokens, a, b, &d, &block))
        return -1;
    kv_seg_id(&d, seg);
    if (seg_id)
        memcpy(seg_id, seg, 32);
    uint64_t size = 2 * block * d.n_layer;
    uint8_t *rows = malloc(size ? size : 1);
    if (!rows)
        return sess_kv_fail(st, "out of memory");
    int rc = llm_ctx_kv_export(ctx, a, b, rows, size) == (int64_t)size
                 ? write_span(st, id, &d, seg, rows, block, last_seq)
                 : sess_kv_fail(st, "cannot export the KV cache: %s", llm_ctx_errmsg(ctx));
    free(rows);
    return rc;
}

int sess_kv_have(struct sess_store *st, const struct llm_model *m, struct llm_ctx *ctx,
                 const uint8_t fp[32], const uint8_t *parent, const int32_t *tokens, int64_t a,
                 int64_t b, uint8_t id[32])
{
    static const uint8_t root[32];
    struct kv_seg_desc d;
    uint64_t block;
    uint8_t seg[32];
    char path[4200];
    if (describe(st, m, ctx, fp, parent ? parent : root, tokens, a, b, &d, &block))
        return -1;
    kv_seg_id(&d, seg);
    if (id)
        memcpy(id, seg, 32);
    int known = sess_segment_known(st, seg);
    if (known <= 0)
        return known;
    return sess_segment_path(st, seg, path, sizeof path) == 0 && access(path, F_OK) == 0;
}

/* ==== restoring ==== */

static void problem(struct sess_restore_stats *s, const char *fmt, ...)
{
    s->damaged++;
    if (s->first_problem[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->first_problem, sizeof s->first_problem, fmt, ap);
    va_end(ap);
}

int sess_kv_restore(struct sess_store *st, int64_t id, const struct llm_model *m, struct llm_ctx *ctx,
                    const uint8_t fp[32], const int32_t *tokens, const int64_t *bounds,
                    const int64_t *last_seq, int64_t n_spans, struct sess_restore_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (llm_ctx_n_past(ctx) != 0)
        return sess_kv_fail(st, "restoring into a context that is not empty");
    uint8_t parent[32] = {0};
    uint8_t *rows = NULL;
    uint64_t cap = 0;
    int32_t *tok_buf = NULL;
    struct kv_seg_dst *dst = malloc(2 * (size_t)llm_model_n_layer(m) * sizeof *dst);
    struct sess_chain_link *used = malloc((size_t)(n_spans ? n_spans : 1) * sizeof *used);
    int64_t n_used = 0;
    int rc = dst && used ? 0 : sess_kv_fail(st, "out of memory");
    int64_t a = 0;
    for (int64_t i = 0; i < n_spans && rc == 0; a = bounds[i], i++) {
        int64_t b = bounds[i];
        struct kv_seg_desc d;
        uint64_t block;
        uint8_t seg[32];
        if (describe(st, m, ctx, fp, parent, tokens, a, b, &d, &block)) {
            rc = -1;
            break;
        }
        kv_seg_id(&d, seg);
        uint64_t size = 2 * block * d.n_layer;
        if (size > cap) { /* rows: only for rewriting a span computed again */
            free(rows);
            free(tok_buf);
            rows = malloc(size);
            tok_buf = malloc((size_t)(b - a) * sizeof *tok_buf + 4);
            cap = size;
            if (!rows || !tok_buf) {
                rc = sess_kv_fail(st, "out of memory");
                break;
            }
        }
        /* the blocks go straight to where the cache keeps them */
        for (uint32_t l = 0; l < d.n_layer && rc == 0; l++)
            for (int kv = 0; kv < 2; kv++) {
                struct kv_seg_dst *o = &dst[2 * l + kv];
                if (llm_ctx_kv_rows(ctx, l, kv, a, b, &o->base, &o->stride, &o->n_chunks, &o->chunk_bytes))
                    rc = sess_kv_fail(st, "%s", llm_ctx_errmsg(ctx));
            }
        if (rc)
            break;
        char path[4200], err[512];
        int known = sess_segment_known(st, seg);
        int ok = 0;
        if (known < 0) {
            rc = -1;
            break;
        }
        if (sess_segment_path(st, seg, path, sizeof path)) {
            rc = -1;
            break;
        }
        if (access(path, F_OK) != 0) {
            problem(stats, "KV segment '%s' (tokens %lld-%lld) is missing", path, (long long)a,
                    (long long)b);
            if (known)
                sess_forget_segment(st, seg);
        } else if (kv_seg_read(path, &d, seg, tok_buf, dst, err, sizeof err)) {
            problem(stats, "KV segment '%s' is unusable (%s)", path, err);
            sess_forget_segment(st, seg);
        } else if (memcmp(tok_buf, tokens + a, (size_t)(b - a) * 4)) {
            problem(stats, "KV segment '%s' holds other tokens", path);
            sess_forget_segment(st, seg);
        } else if (llm_ctx_kv_commit(ctx, b) != 0) {
            rc = sess_kv_fail(st, "cannot load the KV cache: %s", llm_ctx_errmsg(ctx));
            break;
        } else {
            ok = 1;
            stats->restored_tokens += b - a;
            memcpy(used[n_used].segment, seg, 32);
            used[n_used].pos0 = a;
            used[n_used].n_tokens = b - a;
            used[n_used].last_seq = last_seq[i];
            n_used++;
        }
        if (!ok) { /* compute the span again and rewrite its segment */
            if (llm_ctx_truncate(ctx, a) != LLM_OK || llm_ctx_decode(ctx, tokens + a, b - a) != LLM_OK) {
                rc = sess_kv_fail(st, "cannot compute the KV cache again: %s", llm_ctx_errmsg(ctx));
                break;
            }
            stats->prefilled_tokens += b - a;
            if (llm_ctx_kv_export(ctx, a, b, rows, size) != (int64_t)size ||
                write_span(st, id, &d, seg, rows, block, last_seq[i])) {
                rc = -1;
                break;
            }
            stats->rewritten++;
        }
        memcpy(parent, seg, 32);
    }
    /* the segments read are this session's and were used now (one transaction) */
    if (rc == 0 && n_used && sess_touch_segments(st, used, n_used))
        rc = -1;
    free(rows);
    free(tok_buf);
    free(dst);
    free(used);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    stats->ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    return rc;
}
