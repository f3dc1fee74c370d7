/*
 * engine.c - the transformer forward pass (llama, qwen2, qwen3), the KV
 * cache and the context that owns them.
 *
 * Two paths compute the same function:
 *   decode (one token): every matrix-vector product runs on the type's
 *     vec_dot kernel with the activations converted once per matrix to the
 *     kernel's vec_dot_type, split over output rows by one OpenMP team that
 *     lives for the whole token (worksharing loops, no thread start-up);
 *   prefill (several tokens): weights are converted to f32 panel by panel
 *     into one reused buffer and multiplied with BLIS sgemm; attention uses
 *     sgemm for Q.K^T and P.V.
 * Invariants: weights are only read, where they lie in the mapping;
 * scratch is allocated once per context and each step's results depend
 * only on its inputs (no reduction whose order depends on scheduling), so
 * a given thread count gives bit-identical results; the KV cache is only
 * written at positions n_past.. of tokens whose ids were checked first.
 * The cache of layer l holds K (then, separately, V) as
 * [n_head_kv][n_ctx][head_dim] elements of the cache type, so the rows of
 * one head are contiguous for attention and for export.
 */
#include "core/attn.h"
#include "core/gemm.h"
#include "core/model.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ROW_CHUNK 16      /* rows per work item of a GEMV: 64 bytes of f32 output */
#define PREFETCH_BYTES 2048 /* how far ahead a GEMV prefetches its weights */
#define KV_ALIGN ((size_t)2 << 20) /* the KV cache starts on a huge-page boundary */
#define PANEL_BYTES (16u << 20) /* most f32 weight panel per thread (prefill) */
#define CHUNKS_PER_THREAD 4   /* work items per thread of a prefill product */
#define ATT_ROWS 128          /* query rows per block of causal attention (prefill) */
#define MIN_PREFILL 4     /* fewer tokens than this go through the decode path */
/* Up to this many tokens, quantized weights are multiplied with the decode
 * kernels (each row read once for all tokens) rather than converted to f32
 * for sgemm, which only pays off for larger batches: 32 with AVX-512 VNNI
 * integer dot products; with AVX2 alone sgemm already wins from 6 tokens
 * (Q8_0 and Q4_K_M, prefill of 4-32 tokens, measured on a Zen 3 VM). */
#define SMALL_BATCH_VNNI 32
#define SMALL_BATCH 5
/* Packed weights (quant.h) go through their decode kernels for more: up to
 * 128 tokens for Q8_0 (pp12 141 against 82 tok/s through sgemm, pp128 191
 * against 167, pp256 158 against 168) and 32 for Q4_0 and Q5_0, whose
 * kernels unpack fields again for every token (Q4_K_M file: pp12 108 against
 * 94, pp32 121 against 108, pp64 127 against 140). Same Zen 3 VM. */
#define PACKED_SMALL_BATCH_Q8 128
#define PACKED_SMALL_BATCH 32

struct llm_ctx {
    struct llm_model *m;
    int64_t n_ctx, n_batch, n_past;
    int n_threads;
    uint32_t kv_type;
    const struct llm_type_ops *kv_ops;
    size_t kv_elt;           /* bytes per cache element */
    uint8_t **k_cache, **v_cache; /* (n_layer) of [n_head_kv][n_ctx][head_dim] */
    float *logits;           /* (n_vocab) */
    bool logits_valid;
    char errmsg[256];

    /* decode scratch */
    float *x, *xb;           /* (n_embd) residual stream, normed/projected */
    float *q, *k, *v;        /* (q_dim), (kv_dim), (kv_dim) */
    float *att;              /* (q_dim) attention output */
    float *hb, *hb2;         /* (n_ff) */
    uint8_t *xq[3];          /* (n_batch, max_vd_bytes) activations as vec_dot types */
    void *kv_map;            /* the mapping k_cache and v_cache point into */
    size_t kv_map_bytes;
    float *att_tmp;          /* per thread: the scratch of llm_attn_decode */
    size_t att_tmp_stride;   /* floats per thread, padded to 64 bytes */
    int64_t att_split, att_per; /* decode attention: each KV head's query heads in att_split
                                 * work items of at most att_per heads */
    float *rope_cs;          /* (n_batch, rope_dim) cos, sin pairs */

    /* prefill scratch */
    float *bx, *bxb;         /* (n_batch, n_embd) */
    float *bqkv;             /* (n_batch, q_dim + 2 kv_dim): q | k | v of each token */
    float *batt;             /* (n_batch, q_dim) */
    float *bgu;              /* (n_batch, 2 n_ff): gate | up of each token */
    float *bh;               /* (n_batch, n_ff) */
    float *scores;           /* per thread (ATT_ROWS, n_ctx) */
    float *kf, *vf;          /* (n_head_kv, n_ctx, head_dim) K and V in f32 */
    float *panel;            /* per thread (panel_elems): weight rows in f32 */
    uint8_t *act;            /* (n_batch, act_bytes) activations prepared for llm_mm_ops */
    int64_t panel_elems;
};

static int64_t gemm_chunk_rows(int64_t total, int64_t n_in, int nt);
static int64_t mm_chunk_rows(int64_t total, int64_t n_in, int nt);

static void *alloc(size_t n_bytes, bool *ok)
{
    if (n_bytes == 0)
        n_bytes = 64;
    void *p = aligned_alloc(64, (n_bytes + 63) / 64 * 64);
    if (!p)
        *ok = false;
    return p;
}

struct llm_ctx_params llm_ctx_default_params(void)
{
    return (struct llm_ctx_params){.n_ctx = 0, .n_batch = 512, .n_threads = 0,
                                   .kv_type = LLM_TYPE_F16};
}

static int set_err(struct llm_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_err(struct llm_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

int llm_ctx_init(struct llm_model *m, struct llm_ctx_params p, struct llm_ctx **out, char *err,
                 size_t err_size)
{
    *out = NULL;
    if (!m->layers) {
        snprintf(err, err_size, "the model was opened without its tensors");
        return -1;
    }
    if (p.kv_type != LLM_TYPE_F16 && p.kv_type != LLM_TYPE_F32) {
        snprintf(err, err_size, "KV cache type %s is not supported (f16, f32 are)",
                 llm_type_name(p.kv_type));
        return -1;
    }
    int64_t n_ctx = p.n_ctx > 0 ? p.n_ctx : (m->n_ctx_train < 4096 ? m->n_ctx_train : 4096);
    if (n_ctx > (1 << 24)) {
        snprintf(err, err_size, "context size %" PRId64 " is too large", n_ctx);
        return -1;
    }
    struct llm_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = p.n_batch > 0 ? p.n_batch : 512;
    if (c->n_batch > n_ctx)
        c->n_batch = n_ctx;
    c->n_threads = p.n_threads > 0 ? p.n_threads : llm_default_threads();
    c->kv_type = p.kv_type;
    c->kv_ops = llm_get_type_ops(p.kv_type);
    c->kv_elt = p.kv_type == LLM_TYPE_F16 ? 2 : 4;

    bool ok = true;
    size_t f = sizeof(float);
    int64_t B = c->n_batch, hd = m->head_dim;
    size_t layer_kv = (size_t)(m->kv_dim * n_ctx) * c->kv_elt;
    c->k_cache = calloc((size_t)m->n_layer, sizeof *c->k_cache);
    c->v_cache = calloc((size_t)m->n_layer, sizeof *c->v_cache);
    if (!c->k_cache || !c->v_cache)
        ok = false;
    /* one mapping for the whole cache, in transparent huge pages where the
     * kernel has them (fewer faults and TLB misses in attention) */
    layer_kv = (layer_kv + 63) / 64 * 64;
    c->kv_map_bytes = 2 * (size_t)m->n_layer * layer_kv + KV_ALIGN;
    void *map = ok ? mmap(NULL, c->kv_map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                   : MAP_FAILED;
    if (map == MAP_FAILED) {
        ok = false;
    } else {
        c->kv_map = map;
        uint8_t *base = (uint8_t *)(((uintptr_t)map + KV_ALIGN - 1) / KV_ALIGN * KV_ALIGN);
        size_t n = c->kv_map_bytes - (size_t)(base - (uint8_t *)map);
#ifdef MADV_HUGEPAGE
        madvise(base, n, MADV_HUGEPAGE);
#endif
        /* fault it in now, as llama.cpp clears its cache at creation, so that
         * restoring a session is a copy rather than page faults. Where the
         * kernel cannot (too old, or not enough memory for all of it now) the
         * pages come on first use as before: never a memset that the OOM
         * killer would answer. */
#ifdef MADV_POPULATE_WRITE
        (void)madvise(base, n, MADV_POPULATE_WRITE);
#endif
        for (int64_t l = 0; l < m->n_layer; l++) {
            c->k_cache[l] = base + (size_t)(2 * l) * layer_kv;
            c->v_cache[l] = base + (size_t)(2 * l + 1) * layer_kv;
        }
    }
    c->logits = alloc((size_t)m->n_vocab * f, &ok);
    c->x = alloc((size_t)m->n_embd * f, &ok);
    c->xb = alloc((size_t)m->n_embd * f, &ok);
    c->q = alloc((size_t)m->q_dim * f, &ok);
    c->k = alloc((size_t)m->kv_dim * f, &ok);
    c->v = alloc((size_t)m->kv_dim * f, &ok);
    c->att = alloc((size_t)m->q_dim * f, &ok);
    c->hb = alloc((size_t)m->n_ff * f, &ok);
    c->hb2 = alloc((size_t)m->n_ff * f, &ok);
    for (int i = 0; i < 3; i++)
        c->xq[i] = alloc((size_t)m->max_vd_bytes * (size_t)(B > c->n_threads ? B : c->n_threads), &ok);
    /* enough work items for every thread, each KV head's rows converted as few times as that allows */
    int64_t gqa = m->n_head / m->n_head_kv;
    c->att_split = 1;
    while (c->att_split < gqa && (m->n_head_kv * c->att_split < c->n_threads ||
                                  (gqa + c->att_split - 1) / c->att_split > LLM_ATTN_MAX_Q))
        c->att_split++;
    c->att_per = (gqa + c->att_split - 1) / c->att_split;
    c->att_tmp_stride = (llm_attn_scratch_floats(c->att_per, hd, n_ctx) + 15) / 16 * 16;
    c->att_tmp = alloc(c->att_tmp_stride * (size_t)c->n_threads * f, &ok);
    c->rope_cs = alloc((size_t)(B * m->rope_dim) * f, &ok);
    int64_t qkv_dim = m->q_dim + 2 * m->kv_dim;
    c->bx = alloc((size_t)(B * m->n_embd) * f, &ok);
    c->bxb = alloc((size_t)(B * m->n_embd) * f, &ok);
    c->bqkv = alloc((size_t)(B * qkv_dim) * f, &ok);
    c->batt = alloc((size_t)(B * m->q_dim) * f, &ok);
    c->bgu = alloc((size_t)(B * 2 * m->n_ff) * f, &ok);
    c->bh = alloc((size_t)(B * m->n_ff) * f, &ok);
    c->scores = alloc((size_t)(ATT_ROWS * n_ctx) * f * (size_t)c->n_threads, &ok);
    c->kf = alloc((size_t)(m->kv_dim * n_ctx) * f, &ok);
    c->vf = alloc((size_t)(m->kv_dim * n_ctx) * f, &ok);
    /* the largest chunk any product converts or repacks at once, and the
     * largest prepared activation row (types may differ by layer) */
    c->panel_elems = 16;
    size_t act_bytes = 64;
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *Ly = &m->layers[l];
        const struct llm_weight *ws[] = {&Ly->wq, &Ly->wk, &Ly->wv, &Ly->wo, &Ly->w_gate, &Ly->w_up,
                                         &Ly->w_down};
        int64_t total_rows[] = {qkv_dim, qkv_dim, qkv_dim, m->n_embd, 2 * m->n_ff, 2 * m->n_ff, m->n_embd};
        for (int i = 0; i < 7; i++) {
            int64_t rows = gemm_chunk_rows(total_rows[i], ws[i]->n_in, c->n_threads);
            if (rows * ws[i]->n_in > c->panel_elems)
                c->panel_elems = rows * ws[i]->n_in;
            const struct llm_mm_ops *mm = llm_get_mm_ops(ws[i]->type);
            if (mm) {
                rows = mm_chunk_rows(total_rows[i], ws[i]->n_in, c->n_threads);
                int64_t need = (int64_t)(mm->scratch_bytes(ws[i]->n_in, rows) / f) + 16;
                if (need > c->panel_elems)
                    c->panel_elems = need;
                size_t ab = (mm->prepared_bytes(ws[i]->n_in) + 63) / 64 * 64;
                act_bytes = ab > act_bytes ? ab : act_bytes;
            }
        }
    }
    c->panel_elems = (c->panel_elems + 15) / 16 * 16; /* each thread's part 64-byte aligned */
    c->panel = alloc((size_t)c->panel_elems * f * (size_t)c->n_threads, &ok);
    c->act = alloc(act_bytes * (size_t)B, &ok);
    if (!ok) {
        llm_ctx_free(c);
        snprintf(err, err_size, "out of memory for a context of %" PRId64 " positions", n_ctx);
        return -1;
    }
    llm_gemm_setup();
    *out = c;
    return 0;
}

void llm_ctx_free(struct llm_ctx *c)
{
    if (!c)
        return;
    if (c->kv_map)
        munmap(c->kv_map, c->kv_map_bytes);
    free(c->k_cache);
    free(c->v_cache);
    float *bufs[] = {c->logits, c->x, c->xb, c->q, c->k, c->v, c->att, c->hb, c->hb2,
                     c->att_tmp, c->rope_cs, c->bx, c->bxb, c->bqkv, c->batt,
                     c->bgu, c->bh, c->scores, c->kf, c->vf, c->panel};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
    for (int i = 0; i < 3; i++)
        free(c->xq[i]);
    free(c->act);
    free(c);
}

const char *llm_ctx_errmsg(const struct llm_ctx *c) { return c->errmsg; }
const float *llm_ctx_logits(const struct llm_ctx *c) { return c->logits_valid ? c->logits : NULL; }
int64_t llm_ctx_n_past(const struct llm_ctx *c) { return c->n_past; }
int64_t llm_ctx_n_ctx(const struct llm_ctx *c) { return c->n_ctx; }
int llm_ctx_n_threads(const struct llm_ctx *c) { return c->n_threads; }
uint32_t llm_ctx_kv_type(const struct llm_ctx *c) { return c->kv_type; }

/* ==== small kernels ==== */

/* y = x / rms(x) * w, the sum of squares in double as ggml does */
static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* cos/sin of each rotated pair for position pos, as ggml's rope cache:
 * theta_i = pos * base^(-2i/n_dims), by repeated multiplication */
static void rope_cache(const struct llm_model *m, int64_t pos, float *cs)
{
    float theta_scale = powf(m->rope_base, -2.0f / (float)m->rope_dim);
    float theta = (float)pos;
    for (int64_t i = 0; i < m->rope_dim / 2; i++) {
        float ff = m->rope_freqs ? m->rope_freqs[i] : 1.0f;
        float th = m->rope_freq_scale * (theta / ff);
        cs[2 * i] = cosf(th);
        cs[2 * i + 1] = sinf(th);
        theta *= theta_scale;
    }
}

/* rotate the heads of one token's q or k */
static void rope(const struct llm_model *m, float *v, int64_t n_heads, const float *cs)
{
    int64_t nd = m->rope_dim, half = nd / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *x = v + h * m->head_dim;
        if (m->rope_neox) {
            for (int64_t i = 0; i < half; i++) {
                float c = cs[2 * i], s = cs[2 * i + 1], x0 = x[i], x1 = x[i + half];
                x[i] = x0 * c - x1 * s;
                x[i + half] = x0 * s + x1 * c;
            }
        } else {
            for (int64_t i = 0; i < half; i++) {
                float c = cs[2 * i], s = cs[2 * i + 1], x0 = x[2 * i], x1 = x[2 * i + 1];
                x[2 * i] = x0 * c - x1 * s;
                x[2 * i + 1] = x0 * s + x1 * c;
            }
        }
    }
}

static void add_bias(float *x, const float *b, int64_t n)
{
    if (b)
        for (int64_t i = 0; i < n; i++)
            x[i] += b[i];
}

/* what happens to one token's fresh q, k, v before attention: biases,
 * per-head norms (qwen3), RoPE; then k and v go into the cache at pos */
static void qkv_finish(struct llm_ctx *c, const struct llm_layer *L, int64_t l, float *q, float *k,
                       float *v, int64_t pos, const float *cs)
{
    const struct llm_model *m = c->m;
    int64_t hd = m->head_dim;
    add_bias(q, L->bq, m->q_dim);
    add_bias(k, L->bk, m->kv_dim);
    add_bias(v, L->bv, m->kv_dim);
    if (L->q_norm)
        for (int64_t h = 0; h < m->n_head; h++)
            rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, m->rms_eps);
    if (L->k_norm)
        for (int64_t h = 0; h < m->n_head_kv; h++)
            rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, m->rms_eps);
    rope(m, q, m->n_head, cs);
    rope(m, k, m->n_head_kv, cs);
    for (int64_t g = 0; g < m->n_head_kv; g++) {
        size_t off = (size_t)((g * c->n_ctx + pos) * hd) * c->kv_elt;
        c->kv_ops->from_float(k + g * hd, c->k_cache[l] + off, hd);
        c->kv_ops->from_float(v + g * hd, c->v_cache[l] + off, hd);
    }
}

/* softmax of the first n scores in place, zero after them up to n_total */
static void softmax(float *s, int64_t n, int64_t n_total)
{
    llm_softmax(s, n);
    for (int64_t j = n; j < n_total; j++)
        s[j] = 0;
}

/* ==== decode: one token, one OpenMP team ==== */

/*
 * The output rows of up to three weights, stacked as one matrix and cut into
 * work items of `rows` rows that never straddle two weights: how many items
 * there are, and which weight, rows and output offset an item covers.
 */
struct row_items {
    int64_t rows, n[3], total;
};

static struct row_items row_items(int nw, const struct llm_weight *const *w, int64_t rows)
{
    struct row_items it = {.rows = rows};
    for (int i = 0; i < nw; i++) {
        it.n[i] = (w[i]->n_out + rows - 1) / rows;
        it.total += it.n[i];
    }
    return it;
}

/* item k: weight *wi, its rows [*r0, *r1), the stacked offset of its row 0 in *base */
static void row_item(const struct row_items *it, const struct llm_weight *const *w, int64_t k, int *wi,
                     int64_t *r0, int64_t *r1, int64_t *base)
{
    int i = 0;
    int64_t b = 0;
    while (k >= it->n[i]) {
        k -= it->n[i];
        b += w[i++]->n_out;
    }
    *wi = i;
    *base = b;
    *r0 = k * it->rows;
    *r1 = *r0 + it->rows < w[i]->n_out ? *r0 + it->rows : w[i]->n_out;
}

/* y[r] = W_r x for rows [r0, r1) of W (multiples of 8 if W is packed) */
static void gemv_rows(const struct llm_weight *W, int64_t r0, int64_t r1, const uint8_t *xq, float *y)
{
    if (W->pack) {
        /* groups of 8 rows in huge pages: here software prefetch cost 10%
         * (the hardware prefetchers suffice) */
        for (int64_t r = r0; r < r1; r += LLM_PACK_ROWS)
            W->pack->dot(W->n_in, W->data + (size_t)r * W->row_bytes, xq, y + r);
        return;
    }
    float (*dot)(int64_t, const void *, const void *) = W->ops->vec_dot;
    /* software prefetch of the row PREFETCH_BYTES ahead: the hardware
     * prefetchers alone leave a core short of DRAM bandwidth while it
     * unpacks quantized blocks (+5-10% decode measured on Q8_0 and
     * Q4_K_M); the light f32 dot product streams faster without it */
    size_t pf_bytes = W->type == LLM_TYPE_F32 ? 0 : W->row_bytes;
    const uint8_t *end = W->data + (size_t)W->n_out * W->row_bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = W->data + (size_t)r * W->row_bytes, *pf = row + PREFETCH_BYTES;
        for (size_t o = 0; o < pf_bytes && pf + o < end; o += 64)
            __builtin_prefetch(pf + o, 0, 3);
        y[r] = dot(W->n_in, row, xq);
    }
}

/*
 * Work items of a decode product, for each weight: ROW_CHUNK rows; or, for
 * a packed weight, ROW_CHUNK rows of its first half together with the same
 * rows of its second half (two far-apart streams per core keep more DRAM
 * reads in flight: +10-25% GB/s measured on a 145 MB matrix), plus one item
 * for the last group when the number of groups is odd.
 */
static int64_t gemv_items(const struct llm_weight *W)
{
    if (!W->pack)
        return (W->n_out + ROW_CHUNK - 1) / ROW_CHUNK;
    int64_t groups = W->n_out / LLM_PACK_ROWS, half = groups / 2 * LLM_PACK_ROWS;
    return (half + ROW_CHUNK - 1) / ROW_CHUNK + groups % 2;
}

/* item k of W: y = W x for its rows, which are [r[0], r[1]) and [r[2], r[3]) */
static void gemv_item(const struct llm_weight *W, int64_t k, const uint8_t *xq, float *y, int64_t r[4])
{
    r[0] = k * ROW_CHUNK;
    if (!W->pack) {
        r[1] = r[0] + ROW_CHUNK < W->n_out ? r[0] + ROW_CHUNK : W->n_out;
        r[2] = r[3] = r[1];
        gemv_rows(W, r[0], r[1], xq, y);
        return;
    }
    int64_t half = W->n_out / LLM_PACK_ROWS / 2 * LLM_PACK_ROWS;
    if (r[0] >= half) { /* the odd last group */
        r[0] = 2 * half;
        r[1] = r[2] = r[3] = W->n_out;
        gemv_rows(W, r[0], r[1], xq, y);
        return;
    }
    r[1] = r[0] + ROW_CHUNK < half ? r[0] + ROW_CHUNK : half;
    r[2] = r[0] + half;
    r[3] = r[1] + half;
    for (int64_t i = r[0]; i < r[1]; i += LLM_PACK_ROWS)
        W->pack->dot2(W->n_in, W->data + (size_t)i * W->row_bytes, W->data + (size_t)(i + half) * W->row_bytes,
                      xq, y + i, y + i + half);
}

/* y_i = W_i x_i for up to three weights sharing a loop; called by every
 * thread of the team, without the loop's barrier (see last_to_arrive) */
static void gemv_team(int nw, const struct llm_weight *const *w, uint8_t *const *xq, float *const *y)
{
    int64_t n[3] = {0}, total = 0;
    for (int i = 0; i < nw; i++)
        total += n[i] = gemv_items(w[i]);
#pragma omp for schedule(dynamic, 4) nowait
    for (int64_t k = 0; k < total; k++) {
        int i = 0;
        int64_t j = k, r[4];
        while (j >= n[i])
            j -= n[i++];
        gemv_item(w[i], j, xq[i], y[i], r);
    }
}

static void swiglu(float *h, const float *h_up, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++)
        h[r] = h[r] / (1.0f + expf(-h[r])) * h_up[r];
}

/* the feed-forward's gate and up products and SwiGLU, h = silu(W_gate x) *
 * (W_up x), each work item the same rows of both (gate and up have the
 * same shape; if only one is packed, their items cover different rows and
 * SwiGLU waits for the serial step); as gemv_team */
static bool gemv_glu_team(const struct llm_weight *gate, const struct llm_weight *up, uint8_t *const *xq,
                          float *h, float *h_up)
{
    bool same = !gate->pack == !up->pack;
    int64_t n = gemv_items(gate), total = same ? n : n + gemv_items(up);
#pragma omp for schedule(dynamic, 2) nowait
    for (int64_t k = 0; k < total; k++) {
        int64_t r[4];
        if (!same) {
            if (k < n)
                gemv_item(gate, k, xq[0], h, r);
            else
                gemv_item(up, k - n, xq[1], h_up, r);
            continue;
        }
        gemv_item(gate, k, xq[0], h, r);
        gemv_item(up, k, xq[1], h_up, r);
        swiglu(h, h_up, r[0], r[1]);
        swiglu(h, h_up, r[2], r[3]);
    }
    return same;
}

/* In a team, after a work-shared loop without its barrier: true in the one
 * thread that arrives last, which then does the step that needs the
 * loop's results before everyone meets at the barrier after it. One
 * barrier where `omp for` + `omp single` had two: on a shared machine each
 * is a chance to wait for a preempted thread. */
static bool last_to_arrive(atomic_int *arrived)
{
    if (atomic_fetch_add_explicit(arrived, 1, memory_order_acq_rel) != omp_get_num_threads() - 1)
        return false;
    atomic_store_explicit(arrived, 0, memory_order_relaxed);
    return true;
}

/* convert x for each weight (the first of equal vec_dot types is reused) */
static void quantize_for(int nw, const struct llm_weight *const *w, const float *x, uint8_t *const *xq)
{
    for (int i = 0; i < nw; i++) {
        int same = -1;
        for (int j = 0; j < i; j++)
            if (w[j]->ops->vec_dot_type == w[i]->ops->vec_dot_type)
                same = j;
        if (same >= 0)
            memcpy(xq[i], xq[same], w[i]->vd_bytes);
        else
            w[i]->vd_ops->from_float(x, xq[i], w[i]->n_in);
    }
}

/* attention of query heads [h0, h1), which share KV head g, over positions
 * [0, n_kv) of the cache; scratch is this thread's */
static void attend_decode(struct llm_ctx *c, int64_t l, int64_t g, int64_t h0, int64_t h1, int64_t n_kv)
{
    const struct llm_model *m = c->m;
    int64_t hd = m->head_dim;
    size_t off = (size_t)(g * c->n_ctx * hd) * c->kv_elt;
    struct llm_attn_job job = {
        .q = c->q + h0 * hd,
        .out = c->att + h0 * hd,
        .nq = h1 - h0,
        .hd = hd,
        .n_kv = n_kv,
        .k = c->k_cache[l] + off,
        .v = c->v_cache[l] + off,
        .kv_type = c->kv_type,
        .f16_to_float = c->kv_ops->to_float,
        .scale = 1.0f / sqrtf((float)hd),
        .scratch = c->att_tmp + c->att_tmp_stride * (size_t)omp_get_thread_num(),
    };
    llm_attn_decode(&job);
}

/* the attention block's input for layer L: x normed, converted for q, k, v */
static void attn_input(struct llm_ctx *c, const struct llm_layer *L)
{
    const struct llm_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
    rmsnorm(c->xb, c->x, L->attn_norm, c->m->n_embd, c->m->rms_eps);
    quantize_for(3, qkv, c->xb, c->xq);
}

static void add_to(float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/*
 * One token through the model in one OpenMP team: five barriers per layer,
 * each after a work-shared step whose last thread to finish does the short
 * serial step that follows (norms, RoPE, quantizing the next input).
 */
static void forward_one(struct llm_ctx *c, int32_t tok, bool want_logits)
{
    const struct llm_model *m = c->m;
    int64_t pos = c->n_past, n_kv = pos + 1, gqa = m->n_head / m->n_head_kv;
    m->tok_embd.ops->to_float(m->tok_embd.data + (size_t)tok * m->tok_embd.row_bytes, c->x, m->n_embd);
    rope_cache(m, pos, c->rope_cs);
    attn_input(c, &m->layers[0]);
    atomic_int arrived = 0;
    const struct llm_weight *wout[1] = {&m->output};
    float *const lo[1] = {c->logits};
#pragma omp parallel num_threads(c->n_threads)
    {
        for (int64_t l = 0; l < m->n_layer; l++) {
            const struct llm_layer *L = &m->layers[l];
            const struct llm_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
            float *const qkv_out[3] = {c->q, c->k, c->v};
            const struct llm_weight *wo[1] = {&L->wo}, *gu[2] = {&L->w_gate, &L->w_up},
                                    *wd[1] = {&L->w_down};
            float *const xb_out[1] = {c->xb};
            gemv_team(3, qkv, c->xq, qkv_out);
            if (last_to_arrive(&arrived))
                qkv_finish(c, L, l, c->q, c->k, c->v, pos, c->rope_cs);
#pragma omp barrier
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t it = 0; it < m->n_head_kv * c->att_split; it++) {
                int64_t g = it / c->att_split, per = c->att_per;
                int64_t h0 = g * gqa + it % c->att_split * per, h1 = h0 + per < (g + 1) * gqa ? h0 + per : (g + 1) * gqa;
                if (h0 < h1)
                    attend_decode(c, l, g, h0, h1, n_kv);
            }
            if (last_to_arrive(&arrived))
                quantize_for(1, wo, c->att, c->xq);
#pragma omp barrier
            gemv_team(1, wo, c->xq, xb_out);
            if (last_to_arrive(&arrived)) {
                add_to(c->x, c->xb, m->n_embd);
                rmsnorm(c->xb, c->x, L->ffn_norm, m->n_embd, m->rms_eps);
                quantize_for(2, gu, c->xb, c->xq);
            }
#pragma omp barrier
            bool glu_done = gemv_glu_team(&L->w_gate, &L->w_up, c->xq, c->hb, c->hb2);
            if (last_to_arrive(&arrived)) {
                if (!glu_done)
                    swiglu(c->hb, c->hb2, 0, m->n_ff);
                quantize_for(1, wd, c->hb, c->xq);
            }
#pragma omp barrier
            gemv_team(1, wd, c->xq, xb_out);
            if (last_to_arrive(&arrived)) {
                add_to(c->x, c->xb, m->n_embd);
                if (l + 1 < m->n_layer) {
                    attn_input(c, &m->layers[l + 1]);
                } else if (want_logits) {
                    rmsnorm(c->xb, c->x, m->output_norm, m->n_embd, m->rms_eps);
                    quantize_for(1, wout, c->xb, c->xq);
                }
            }
#pragma omp barrier
        }
        if (want_logits)
            gemv_team(1, wout, c->xq, lo); /* the region's end is the barrier */
    }
    c->n_past++;
}

/* ==== prefill: a batch of tokens on BLIS ==== */

/*
 * Y (T x sum of n_out, row stride ldy) = X (T x n_in) [W_0; W_1; ...]^T for
 * up to three weights of the same n_in, as if their rows were stacked. The
 * rows are cut into chunks that the threads of the team take one at a time
 * (so one preempted thread on a shared machine does not stall the others);
 * a thread converts its chunk to f32 in its own panel (F32 rows are used in
 * place) and multiplies it with single-threaded BLIS. No barrier until the
 * end, and each output element's sum is BLIS's for that K, whichever thread
 * computes it.
 */
/* rows per work item of a prefill product: about CHUNKS_PER_THREAD items per
 * thread, at least 64 rows (each item packs the activations again), a
 * multiple of ROW_CHUNK, at most PANEL_BYTES of f32 */
static int64_t gemm_chunk_rows(int64_t total, int64_t n_in, int nt)
{
    int64_t r = (total + (int64_t)nt * CHUNKS_PER_THREAD - 1) / ((int64_t)nt * CHUNKS_PER_THREAD);
    r = (r + ROW_CHUNK - 1) / ROW_CHUNK * ROW_CHUNK;
    if (r < 64)
        r = 64;
    int64_t cap = PANEL_BYTES / (int64_t)sizeof(float) / n_in / ROW_CHUNK * ROW_CHUNK;
    if (cap < ROW_CHUNK)
        cap = ROW_CHUNK;
    return r < cap ? r : cap;
}

/* the same product for small batches of quantized weights: the T rows of x
 * are converted to each weight's vec_dot type once, then every weight row
 * meets all T of them while it is in cache */
static void gemm_weights_small(struct llm_ctx *c, int nw, const struct llm_weight *const *w,
                               const float *x, float *y, int64_t ldy, int64_t T)
{
    int64_t n_in = w[0]->n_in;
    struct row_items items = row_items(nw, w, ROW_CHUNK);
    size_t stride = (size_t)c->m->max_vd_bytes;
#pragma omp parallel num_threads(c->n_threads)
    {
#pragma omp for schedule(dynamic, 4)
        for (int64_t it = 0; it < nw * T; it++) {
            int i = (int)(it / T);
            int64_t t = it % T;
            w[i]->vd_ops->from_float(x + t * n_in, c->xq[i] + (size_t)t * stride, n_in);
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t k = 0; k < items.total; k++) {
            int i;
            int64_t r0, r1, base;
            row_item(&items, w, k, &i, &r0, &r1, &base);
            const struct llm_weight *W = w[i];
            if (W->pack) {
                for (int64_t r = r0; r < r1; r += LLM_PACK_ROWS) {
                    const uint8_t *grp = W->data + (size_t)r * W->row_bytes;
                    for (int64_t t = 0; t < T; t++) {
                        float out[LLM_PACK_ROWS];
                        W->pack->dot(n_in, grp, c->xq[i] + (size_t)t * stride, out);
                        memcpy(y + t * ldy + base + r, out, sizeof out);
                    }
                }
                continue;
            }
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *row = W->data + (size_t)r * W->row_bytes;
                for (int64_t t = 0; t < T; t++)
                    y[t * ldy + base + r] = W->ops->vec_dot(n_in, row, c->xq[i] + (size_t)t * stride);
            }
        }
    }
}

/* rows per work item of a type's blocked product: as gemm_chunk_rows, and
 * few enough that the rows, repacked, stay in a core's L2 cache */
static int64_t mm_chunk_rows(int64_t total, int64_t n_in, int nt)
{
    int64_t r = gemm_chunk_rows(total, n_in, nt), l2 = (384 << 10) / (2 * n_in) / ROW_CHUNK * ROW_CHUNK;
    if (l2 < 64)
        l2 = 64;
    return r < l2 ? r : l2;
}

/* the product on the types' own blocked kernels (llm_get_mm_ops): the T rows
 * of x are converted to the vec_dot types once, then work items of rows go
 * to the threads as in gemm_weights */
static void gemm_weights_blocked(struct llm_ctx *c, int nw, const struct llm_weight *const *w,
                                 const float *x, float *y, int64_t ldy, int64_t T)
{
    int64_t total = 0, n_in = w[0]->n_in;
    for (int i = 0; i < nw; i++)
        total += w[i]->n_out;
    struct row_items items = row_items(nw, w, mm_chunk_rows(total, n_in, c->n_threads));
    const struct llm_mm_ops *mm = llm_get_mm_ops(w[0]->type);
    size_t stride = (mm->prepared_bytes(n_in) + 63) / 64 * 64;
#pragma omp parallel num_threads(c->n_threads)
    {
        uint8_t *tmp = c->xq[0] + (size_t)omp_get_thread_num() * (size_t)c->m->max_vd_bytes;
#pragma omp for schedule(dynamic, 4)
        for (int64_t t = 0; t < T; t++) {
            w[0]->vd_ops->from_float(x + t * n_in, tmp, n_in);
            mm->prepare(tmp, c->act + (size_t)t * stride, n_in);
        }
        void *scratch = c->panel + (size_t)omp_get_thread_num() * (size_t)c->panel_elems;
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < items.total; k++) {
            int i;
            int64_t a, e, base;
            row_item(&items, w, k, &i, &a, &e, &base);
            const struct llm_weight *W = w[i];
            mm->mul_mat(n_in, e - a, T, W->data + (size_t)a * W->row_bytes, W->row_bytes, c->act,
                        stride, y + base + a, ldy, scratch);
        }
    }
}

static void gemm_weights(struct llm_ctx *c, int nw, const struct llm_weight *const *w, const float *x,
                         float *y, int64_t ldy, int64_t T)
{
    int64_t total = 0, n_in = w[0]->n_in;
    bool packed = true, quantized = true;
    int64_t packed_max = T;
    for (int i = 0; i < nw; i++) {
        total += w[i]->n_out;
        packed = packed && w[i]->pack;
        quantized = quantized && w[i]->type != LLM_TYPE_F32;
        int64_t mx = w[i]->type == LLM_TYPE_Q8_0 ? PACKED_SMALL_BATCH_Q8 : PACKED_SMALL_BATCH;
        packed_max = mx < packed_max ? mx : packed_max;
    }
    bool small = packed ? T <= packed_max
                        : quantized && T <= (llm_cpu_features() & LLM_CPU_AVX512_VNNI ? SMALL_BATCH_VNNI : SMALL_BATCH);
    if (small) {
        gemm_weights_small(c, nw, w, x, y, ldy, T);
        return;
    }
    if (llm_get_mm_ops(w[0]->type) && !w[0]->pack) {
        /* weights of one type share the prepared activations */
        int same = 1;
        while (same < nw && w[same]->type == w[0]->type && !w[same]->pack)
            same++;
        gemm_weights_blocked(c, same, w, x, y, ldy, T);
        int64_t off = 0;
        for (int i = 0; i < same; i++)
            off += w[i]->n_out;
        if (same < nw)
            gemm_weights(c, nw - same, w + same, x, y + off, ldy, T);
        return;
    }
    struct row_items items = row_items(nw, w, gemm_chunk_rows(total, n_in, c->n_threads));
#pragma omp parallel num_threads(c->n_threads)
    {
        float *panel = c->panel + (size_t)omp_get_thread_num() * (size_t)c->panel_elems;
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < items.total; k++) {
            int i;
            int64_t a, e, base;
            row_item(&items, w, k, &i, &a, &e, &base);
            const struct llm_weight *W = w[i];
            const float *rows;
            if (W->type == LLM_TYPE_F32 && (uintptr_t)W->data % sizeof(float) == 0) {
                rows = (const float *)(W->data + (size_t)a * W->row_bytes); /* in place */
            } else if (W->pack) {
                for (int64_t r = a; r < e; r += LLM_PACK_ROWS)
                    W->pack->to_float(W->data + (size_t)r * W->row_bytes, panel + (r - a) * n_in, n_in, n_in);
                rows = panel;
            } else {
                for (int64_t r = a; r < e; r++)
                    W->ops->to_float(W->data + (size_t)r * W->row_bytes, panel + (r - a) * n_in, n_in);
                rows = panel;
            }
            llm_sgemm_nt(1, T, e - a, n_in, 1.0f, x, n_in, rows, n_in, 0.0f, y + base + a, ldy);
        }
    }
}

static void rmsnorm_rows(struct llm_ctx *c, float *y, const float *x, const float *w, int64_t T)
{
    int64_t n = c->m->n_embd;
#pragma omp parallel for num_threads(c->n_threads) schedule(dynamic, 4)
    for (int64_t t = 0; t < T; t++)
        rmsnorm(y + t * n, x + t * n, w, n, c->m->rms_eps);
}

/* causal attention of T new tokens (positions n_past..) over [0, n_past+T):
 * K and V of every head to f32, then per query head and block of rows
 * S = Q K^T (only the columns the block can see), softmax, O = S V */
static void attend_prefill(struct llm_ctx *c, int64_t l, int64_t T)
{
    const struct llm_model *m = c->m;
    int64_t hd = m->head_dim, group = m->n_head / m->n_head_kv, n_kv = c->n_past + T;
    int64_t ld = m->q_dim + 2 * m->kv_dim;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel num_threads(c->n_threads)
    {
        int64_t nparts = m->n_head_kv * 2 * (int64_t)omp_get_num_threads();
#pragma omp for schedule(dynamic, 1)
        for (int64_t part = 0; part < nparts; part++) {
            int64_t g = part % m->n_head_kv, kv = (part / m->n_head_kv) % 2, slice = part / (2 * m->n_head_kv);
            int64_t ns = nparts / (2 * m->n_head_kv), per = (n_kv + ns - 1) / ns;
            int64_t j0 = slice * per, j1 = j0 + per < n_kv ? j0 + per : n_kv;
            if (j0 < j1) {
                size_t off = (size_t)((g * c->n_ctx + j0) * hd);
                const uint8_t *src = (kv ? c->v_cache[l] : c->k_cache[l]) + off * c->kv_elt;
                c->kv_ops->to_float(src, (kv ? c->vf : c->kf) + off, (j1 - j0) * hd);
            }
        }
        float *sc = c->scores + (size_t)omp_get_thread_num() * (size_t)(ATT_ROWS * c->n_ctx);
#pragma omp for schedule(dynamic, 1)
        for (int64_t h = 0; h < m->n_head; h++) {
            int64_t g = h / group;
            const float *kf = c->kf + g * c->n_ctx * hd, *vf = c->vf + g * c->n_ctx * hd;
            for (int64_t t0 = 0; t0 < T; t0 += ATT_ROWS) {
                int64_t t1 = t0 + ATT_ROWS < T ? t0 + ATT_ROWS : T, cols = c->n_past + t1;
                llm_sgemm_nt(1, t1 - t0, cols, hd, scale, c->bqkv + t0 * ld + h * hd, ld, kf, hd, 0.0f, sc,
                             cols);
                for (int64_t t = t0; t < t1; t++)
                    softmax(sc + (t - t0) * cols, c->n_past + t + 1, cols);
                llm_sgemm_nn(1, t1 - t0, hd, cols, 1.0f, sc, cols, vf, hd, 0.0f,
                             c->batt + t0 * m->q_dim + h * hd, m->q_dim);
            }
        }
    }
}

static void forward_batch(struct llm_ctx *c, const int32_t *tok, int64_t T, bool want_logits)
{
    const struct llm_model *m = c->m;
    int64_t E = m->n_embd, F = m->n_ff, ld = m->q_dim + 2 * m->kv_dim;
    for (int64_t t = 0; t < T; t++) {
        m->tok_embd.ops->to_float(m->tok_embd.data + (size_t)tok[t] * m->tok_embd.row_bytes,
                                  c->bx + t * E, E);
        rope_cache(m, c->n_past + t, c->rope_cs + t * m->rope_dim);
    }
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        /* attention block */
        rmsnorm_rows(c, c->bxb, c->bx, L->attn_norm, T);
        const struct llm_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
        gemm_weights(c, 3, qkv, c->bxb, c->bqkv, ld, T);
#pragma omp parallel for num_threads(c->n_threads) schedule(dynamic, 4)
        for (int64_t t = 0; t < T; t++) {
            float *q = c->bqkv + t * ld;
            qkv_finish(c, L, l, q, q + m->q_dim, q + m->q_dim + m->kv_dim, c->n_past + t,
                       c->rope_cs + t * m->rope_dim);
        }
        attend_prefill(c, l, T);
        const struct llm_weight *wo[1] = {&L->wo};
        gemm_weights(c, 1, wo, c->batt, c->bxb, E, T);
#pragma omp parallel for num_threads(c->n_threads) schedule(dynamic, 4096)
        for (int64_t i = 0; i < T * E; i++)
            c->bx[i] += c->bxb[i];
        /* feed-forward block */
        rmsnorm_rows(c, c->bxb, c->bx, L->ffn_norm, T);
        const struct llm_weight *gu[2] = {&L->w_gate, &L->w_up};
        gemm_weights(c, 2, gu, c->bxb, c->bgu, 2 * F, T);
#pragma omp parallel for num_threads(c->n_threads) schedule(dynamic, 4)
        for (int64_t t = 0; t < T; t++) {
            const float *g = c->bgu + t * 2 * F, *u = g + F;
            float *h = c->bh + t * F;
            for (int64_t i = 0; i < F; i++)
                h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        }
        const struct llm_weight *wd[1] = {&L->w_down};
        gemm_weights(c, 1, wd, c->bh, c->bxb, E, T);
#pragma omp parallel for num_threads(c->n_threads) schedule(dynamic, 4096)
        for (int64_t i = 0; i < T * E; i++)
            c->bx[i] += c->bxb[i];
    }
    c->n_past += T;
    if (want_logits) {
        /* only the last position's logits: the decode path's LM head */
        const struct llm_weight *wout[1] = {&m->output};
        float *const lo[1] = {c->logits};
        rmsnorm(c->xb, c->bx + (T - 1) * E, m->output_norm, E, m->rms_eps);
        quantize_for(1, wout, c->xb, c->xq);
#pragma omp parallel num_threads(c->n_threads)
        gemv_team(1, wout, c->xq, lo);
    }
}

int llm_ctx_decode(struct llm_ctx *c, const int32_t *tokens, int64_t n)
{
    if (n <= 0)
        return set_err(c, LLM_ERR, "no tokens to decode");
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->m->n_vocab)
            return set_err(c, LLM_ERR, "token id %" PRId32 " is out of range (the vocabulary has %" PRId64
                           " tokens)", tokens[i], c->m->n_vocab);
    if (n > c->n_ctx - c->n_past)
        return set_err(c, LLM_ERR_CTX_FULL,
                       "context full: %" PRId64 " tokens do not fit after %" PRId64 " of %" PRId64,
                       n, c->n_past, c->n_ctx);
    c->logits_valid = false;
    for (int64_t i = 0; i < n;) {
        int64_t T = n - i < c->n_batch ? n - i : c->n_batch;
        bool last = i + T == n;
        if (T < MIN_PREFILL) {
            for (int64_t j = 0; j < T; j++)
                forward_one(c, tokens[i + j], last && j == T - 1);
        } else {
            forward_batch(c, tokens + i, T, last);
        }
        i += T;
    }
    c->logits_valid = true;
    return LLM_OK;
}

/* ==== the KV cache as rows ==== */

uint64_t llm_ctx_kv_bytes(const struct llm_ctx *c, int64_t n_pos)
{
    return (uint64_t)n_pos * (uint64_t)c->m->kv_dim * 2 * c->kv_elt * (uint64_t)c->m->n_layer;
}

int llm_ctx_truncate(struct llm_ctx *c, int64_t n)
{
    if (n < 0 || n > c->n_past)
        return set_err(c, LLM_ERR, "cannot truncate to %" PRId64 " of %" PRId64 " positions", n,
                       c->n_past);
    c->n_past = n;
    c->logits_valid = false;
    return LLM_OK;
}

uint64_t llm_ctx_kv_size(const struct llm_ctx *c, int64_t a, int64_t b)
{
    return b > a ? llm_ctx_kv_bytes(c, b - a) : 0;
}

/* copy rows [a, b) between the cache and buf, in the export layout */
static void kv_copy(const struct llm_ctx *c, int64_t a, int64_t b, uint8_t *buf, bool to_cache)
{
    const struct llm_model *m = c->m;
    size_t row = (size_t)m->head_dim * c->kv_elt, span = (size_t)(b - a) * row;
    for (int64_t l = 0; l < m->n_layer; l++)
        for (int kv = 0; kv < 2; kv++) {
            uint8_t *cache = kv ? c->v_cache[l] : c->k_cache[l];
            for (int64_t g = 0; g < m->n_head_kv; g++) {
                uint8_t *p = cache + (size_t)(g * c->n_ctx + a) * row;
                if (to_cache)
                    memcpy(p, buf, span);
                else
                    memcpy(buf, p, span);
                buf += span;
            }
        }
}

int64_t llm_ctx_kv_export(const struct llm_ctx *c, int64_t a, int64_t b, void *buf, size_t size)
{
    if (a < 0 || b < a || b > c->n_past)
        return LLM_ERR;
    uint64_t need = llm_ctx_kv_size(c, a, b);
    if (size < need)
        return -(int64_t)need;
    kv_copy(c, a, b, buf, false);
    return (int64_t)need;
}

int llm_ctx_kv_rows(struct llm_ctx *c, int64_t l, int kv, int64_t a, int64_t b, uint8_t **base,
                    size_t *stride, int64_t *n_chunks, size_t *chunk_bytes)
{
    const struct llm_model *m = c->m;
    if (l < 0 || l >= m->n_layer || kv < 0 || kv > 1 || a < 0 || a > c->n_past || b < a || b > c->n_ctx)
        return set_err(c, LLM_ERR, "no KV rows for layer %" PRId64 " positions [%" PRId64 ", %" PRId64 ")",
                       l, a, b);
    size_t row = (size_t)m->head_dim * c->kv_elt;
    *base = (kv ? c->v_cache[l] : c->k_cache[l]) + (size_t)a * row;
    *stride = (size_t)c->n_ctx * row;
    *n_chunks = m->n_head_kv;
    *chunk_bytes = (size_t)(b - a) * row;
    return LLM_OK;
}

int llm_ctx_kv_commit(struct llm_ctx *c, int64_t b)
{
    if (b < 0 || b > c->n_ctx)
        return set_err(c, LLM_ERR, "cannot commit %" PRId64 " positions of %" PRId64, b, c->n_ctx);
    c->n_past = b;
    c->logits_valid = false;
    return LLM_OK;
}

int llm_ctx_kv_import(struct llm_ctx *c, int64_t a, int64_t b, const void *buf, size_t size)
{
    if (a < 0 || a > c->n_past || b < a || b > c->n_ctx)
        return set_err(c, LLM_ERR, "cannot import positions [%" PRId64 ", %" PRId64 ") after %" PRId64
                       " of %" PRId64, a, b, c->n_past, c->n_ctx);
    if (size != llm_ctx_kv_size(c, a, b))
        return set_err(c, LLM_ERR, "KV rows of %zu bytes, expected %" PRIu64, size,
                       llm_ctx_kv_size(c, a, b));
    kv_copy(c, a, b, (uint8_t *)buf, true);
    c->n_past = b;
    c->logits_valid = false;
    return LLM_OK;
}
