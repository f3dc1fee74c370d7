/*
 * moe.c - the mixture-of-experts FFN of a layer (moe.h): gating, grouping
 * a pass's (token, rank) pairs by expert into "rows", and the units of the
 * phases that multiply each expert's rows by its weights.
 *
 * Invariants: a token's k experts and weights are a function of its own
 * logits (llm_moe_gate); each element of an expert product is computed by
 * the weight type's one definition (quant.h), whether the expert's rows are
 * many (gemm) or one (gemv); a token's output is the sum of its k weighted
 * expert outputs in rank order, by one function (sum_token) on every path.
 * Nothing here depends on which tokens share an expert, so the engine stays
 * batch-invariant. Indices read from the routing tables are clamped before
 * they address memory (a stale thread may read them mid-rewrite, pool.h).
 */
#include "core/engine/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MOE_ROWS 32     /* batched products: rows per unit (rounded up to the weight's groups) */
#define MOE_TOKENS 128  /* batched products: an expert's rows per unit */
#define DEC_STEP 4      /* one token: units per chunk */
#define ROW_STEP 4      /* per-row phases: rows per chunk */
#define MAX_EXPERTS 1024

struct llm_moe {
    int64_t n_batch, n_expert, k, n_embd, n_ff, n_rows; /* n_rows = n_batch k */
    float *logits;     /* (n_batch, n_expert) the router's output */
    int32_t *sel;      /* (n_batch, k) token t's experts in rank order */
    float *w;          /* (n_batch, k) and their weights */
    int32_t *pos;      /* (n_batch, k) the row of token t's rank j */
    int32_t *row_tok;  /* (n_rows) each row's token */
    int32_t *row_exp;  /* (n_rows) and expert */
    int32_t *cnt;      /* (n_expert) rows of each expert */
    int32_t *first;    /* (n_expert) its first row */
    int32_t *next;     /* (n_expert) filling */
    int64_t n_active;
    int32_t *active;   /* (n_expert) the experts with rows, ascending */
    int64_t *glu_u0, *down_u0; /* (n_expert + 1) the first unit of each active expert */
    uint8_t *in_q;     /* (n_rows, q_stride) the rows' I16 inputs (of gate/up, then of down) */
    size_t q_stride;
    float *in_f;       /* (n_rows, n_embd) the rows' f32 inputs of gate/up (f32 experts) */
    float *h;          /* (n_rows, n_ff) silu(gate) * up */
    float *y;          /* (n_rows, n_embd) the experts' outputs */
    size_t unit_out;   /* floats of the largest product chunk's output (unit_sizes) */
    const float *down_scale; /* (n_expert) the routed layer's experts' output scales (gemma4), or NULL */
};

static void unit_sizes(const struct llm_model *m, size_t *n_out, size_t *ws);

/* ==== gating ==== */

/* dst = exp(src - mx) / their sum (the sum in double); dst may be src */
static void softmax_from(float *dst, const float *src, int64_t n, float mx)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        dst[i] = expf(src[i] - mx);
        sum += (double)dst[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        dst[i] *= inv;
}

void llm_moe_gate(enum llm_moe_gating gating, bool norm, const float *logits, int64_t n, int64_t k,
                  int32_t *sel, float *w)
{
    float p[MAX_EXPERTS];
    uint8_t taken[MAX_EXPERTS];
    const float *score = logits;
    if (gating == LLM_MOE_SOFTMAX) {
        float mx = logits[0];
        for (int64_t e = 1; e < n; e++)
            if (logits[e] > mx)
                mx = logits[e];
        softmax_from(p, logits, n, mx);
        score = p;
    }
    /* the k largest, ties to the lower index */
    memset(taken, 0, sizeof taken);
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < n; e++)
            if (!taken[e] && (best < 0 || score[e] > score[best]))
                best = e;
        taken[best] = 1;
        sel[j] = (int32_t)best;
        w[j] = score[best];
    }
    if (gating == LLM_MOE_SOFTMAX_WEIGHT)
        softmax_from(w, w, k, w[0]); /* w[0] is the largest */
    if (norm) {
        double sum = 0;
        for (int64_t j = 0; j < k; j++)
            sum += (double)w[j];
        float s = (float)sum;
        if (!(s >= 6.103515625e-5f))
            s = 6.103515625e-5f;
        for (int64_t j = 0; j < k; j++)
            w[j] = w[j] / s;
    }
}

/* ==== buffers ==== */

static void *alloc(size_t n, bool *ok)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    if (!p)
        *ok = false;
    return p;
}

struct llm_moe *llm_moe_init(const struct llm_model *m, int64_t n_batch)
{
    struct llm_moe *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    int64_t X = m->n_expert, k = m->n_expert_used, E = m->n_embd, F = m->n_ff_exp;
    x->n_batch = n_batch, x->n_expert = X, x->k = k, x->n_embd = E, x->n_ff = F, x->n_rows = n_batch * k;
    size_t ws;
    unit_sizes(m, &x->unit_out, &ws);
    bool want_f = false, want_q = false;
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        if (!L->exp_gate)
            continue;
        want_f = want_f || L->exp_gate[0].mm->act == LLM_ACT_F32 || L->exp_up[0].mm->act == LLM_ACT_F32;
        want_q = want_q || L->exp_gate[0].mm->act == LLM_ACT_I16 || L->exp_up[0].mm->act == LLM_ACT_I16 ||
                 L->exp_down[0].mm->act == LLM_ACT_I16;
    }
    size_t qe = llm_act_bytes(LLM_ACT_I16, E), qf = llm_act_bytes(LLM_ACT_I16, F);
    x->q_stride = ((qe > qf ? qe : qf) + 63) / 64 * 64;
    size_t R = (size_t)x->n_rows, f = sizeof(float), i = sizeof(int32_t);
    bool ok = true;
    x->logits = alloc((size_t)(n_batch * X) * f, &ok);
    x->sel = alloc(R * i, &ok);
    x->w = alloc(R * f, &ok);
    x->pos = alloc(R * i, &ok);
    x->row_tok = alloc(R * i, &ok);
    x->row_exp = alloc(R * i, &ok);
    x->cnt = alloc((size_t)X * i, &ok);
    x->first = alloc((size_t)X * i, &ok);
    x->next = alloc((size_t)X * i, &ok);
    x->active = alloc((size_t)X * i, &ok);
    x->glu_u0 = alloc((size_t)(X + 1) * sizeof(int64_t), &ok);
    x->down_u0 = alloc((size_t)(X + 1) * sizeof(int64_t), &ok);
    if (want_q)
        x->in_q = alloc(R * x->q_stride, &ok);
    if (want_f)
        x->in_f = alloc(R * (size_t)E * f, &ok);
    x->h = alloc(R * (size_t)F * f, &ok);
    x->y = alloc(R * (size_t)E * f, &ok);
    if (!ok) {
        llm_moe_free(x);
        return NULL;
    }
    /* a valid routing before the first (stale readers only ever see indices in range) */
    for (size_t r = 0; r < R; r++)
        x->sel[r] = x->pos[r] = x->row_tok[r] = x->row_exp[r] = 0;
    memset(x->cnt, 0, (size_t)X * i);
    memset(x->first, 0, (size_t)X * i);
    memset(x->active, 0, (size_t)X * i);
    x->n_active = 0;
    x->glu_u0[0] = x->down_u0[0] = 0;
    return x;
}

void llm_moe_free(struct llm_moe *x)
{
    if (!x)
        return;
    void *bufs[] = {x->logits, x->sel, x->w, x->pos, x->row_tok, x->row_exp, x->cnt, x->first, x->next,
                    x->active, x->glu_u0, x->down_u0, x->in_q, x->in_f, x->h, x->y};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
    free(x);
}

float *llm_moe_logits(struct llm_moe *x) { return x->logits; }

/* ==== units ==== */

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* batched: rows of W per unit (whole groups) */
static int64_t pf_rows(const struct llm_weight *W)
{
    int64_t g = llm_mm_group_rows(W->mm);
    return cdiv(MOE_ROWS, g) * g;
}

void llm_moe_route(struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L, int64_t T)
{
    int64_t X = x->n_expert, k = x->k;
    x->down_scale = L->exp_down_scale;
    if (L->router_b) /* gpt-oss: the router's bias, added to each token's logits */
        for (int64_t t = 0; t < T; t++)
            for (int64_t e = 0; e < X; e++)
                x->logits[t * X + e] += L->router_b[e];
    for (int64_t t = 0; t < T; t++)
        llm_moe_gate(m->moe_gating, m->moe_norm, x->logits + t * X, X, k, x->sel + t * k, x->w + t * k);
    memset(x->cnt, 0, (size_t)X * sizeof *x->cnt);
    for (int64_t i = 0; i < T * k; i++)
        x->cnt[x->sel[i]]++;
    int64_t na = 0, row = 0, rf = cdiv(x->n_ff, pf_rows(&L->exp_gate[0])), re = cdiv(x->n_embd, pf_rows(&L->exp_down[0]));
    for (int64_t e = 0; e < X; e++) {
        x->first[e] = x->next[e] = (int32_t)row;
        row += x->cnt[e];
        if (x->cnt[e]) {
            int64_t tb = cdiv(x->cnt[e], MOE_TOKENS);
            x->glu_u0[na + 1] = x->glu_u0[na] + rf * tb;
            x->down_u0[na + 1] = x->down_u0[na] + re * tb;
            x->active[na++] = (int32_t)e;
        }
    }
    x->n_active = na;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            int32_t e = x->sel[t * k + j], g = x->next[e]++;
            x->pos[t * k + j] = g;
            x->row_tok[g] = (int32_t)t;
            x->row_exp[g] = e;
        }
}

static const struct llm_weight *phase_weight(const struct llm_layer *L, enum llm_moe_phase ph, int64_t e)
{
    return ph == LLM_MOE_GLU ? &L->exp_gate[e] : &L->exp_down[e];
}

int64_t llm_moe_units(const struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L,
                      enum llm_moe_phase ph, int64_t T, bool max)
{
    int64_t k = m->n_expert_used;
    switch (ph) {
    case LLM_MOE_GATHER:
    case LLM_MOE_DOWN_IN:
        return T * k;
    case LLM_MOE_SUM:
        return T;
    default:
        break;
    }
    const struct llm_weight *W = phase_weight(L, ph, 0);
    if (T == 1)
        return k * llm_dec_units(W);
    if (max) {
        int64_t rows = T * k, a = rows < m->n_expert ? rows : m->n_expert;
        return cdiv(W->m.n_out, pf_rows(W)) * (a + rows / MOE_TOKENS);
    }
    const int64_t *u0 = ph == LLM_MOE_GLU ? x->glu_u0 : x->down_u0;
    return u0[x->n_active];
}

int64_t llm_moe_step(enum llm_moe_phase ph, int64_t T)
{
    if (ph == LLM_MOE_GLU || ph == LLM_MOE_DOWN)
        return T == 1 ? DEC_STEP : 1;
    return ROW_STEP;
}

/* one product unit: its expert, rows [r0, r1) and [r2, r3) of the expert's
 * weight, and the rows [g0, g1) it multiplies */
struct munit {
    int64_t e, r[4], g0, g1;
};

static struct munit moe_unit(const struct llm_moe *x, const struct llm_layer *L, enum llm_moe_phase ph,
                             int64_t T, int64_t u)
{
    struct munit mu = {0};
    int64_t X = x->n_expert;
    if (T == 1) {
        int64_t ou = llm_dec_units(phase_weight(L, ph, 0)), g = clampi(u / ou, 0, x->k - 1);
        mu.e = clampi(x->row_exp[g], 0, X - 1);
        llm_dec_unit(phase_weight(L, ph, mu.e), u % ou, mu.r);
        mu.g0 = g, mu.g1 = g + 1;
        return mu;
    }
    const int64_t *u0 = ph == LLM_MOE_GLU ? x->glu_u0 : x->down_u0;
    int64_t na = clampi(x->n_active, 1, X), i = 0;
    while (i + 1 < na && u >= u0[i + 1])
        i++;
    mu.e = clampi(x->active[i], 0, X - 1);
    const struct llm_weight *W = phase_weight(L, ph, mu.e);
    int64_t n = clampi(x->cnt[mu.e], 1, x->n_rows), ntb = cdiv(n, MOE_TOKENS), v = clampi(u - u0[i], 0, INT64_MAX);
    int64_t R = pf_rows(W), rb = v / ntb, tb = v % ntb;
    mu.r[0] = clampi(rb * R, 0, W->m.n_out);
    mu.r[1] = mu.r[0] + R < W->m.n_out ? mu.r[0] + R : W->m.n_out;
    int64_t first = clampi(x->first[mu.e], 0, x->n_rows - 1), last = clampi(first + n, first, x->n_rows);
    mu.g0 = clampi(first + tb * MOE_TOKENS, first, last);
    mu.g1 = mu.g0 + MOE_TOKENS < last ? mu.g0 + MOE_TOKENS : last;
    return mu;
}

static size_t unit_floats(const struct munit *mu)
{
    return (size_t)((mu->r[1] - mu->r[0] + mu->r[3] - mu->r[2]) * (mu->g1 - mu->g0));
}

/* gpt-oss: a unit's products plus the expert's bias b of their rows (each
 * row of the unit's output: rows r0.., then r2..) */
static void add_unit_bias(float *y, const struct munit *mu, const float *b)
{
    int64_t n0 = mu->r[1] - mu->r[0], n1 = mu->r[3] - mu->r[2];
    for (int64_t g = mu->g0; g < mu->g1; g++, y += n0 + n1) {
        for (int64_t i = 0; i < n0; i++)
            y[i] += b[mu->r[0] + i];
        for (int64_t i = 0; i < n1; i++)
            y[n0 + i] += b[mu->r[2] + i];
    }
}

/* the largest unit output (floats) and product scratch (bytes) of any layer */
static void unit_sizes(const struct llm_model *m, size_t *n_out, size_t *ws)
{
    *n_out = DEC_STEP * 2 * LLM_DEC_ROWS;
    *ws = 0;
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        if (!L->exp_gate)
            continue;
        const struct llm_weight *w[3] = {&L->exp_gate[0], &L->exp_up[0], &L->exp_down[0]};
        for (int i = 0; i < 3; i++) {
            size_t a = (size_t)(pf_rows(w[i]) * MOE_TOKENS), b = (size_t)(DEC_STEP * 2 * llm_dec_rows(w[i]));
            size_t s = w[i]->mm->gemm_scratch(w[i]->m.n_in);
            *n_out = a > *n_out ? a : *n_out;
            *n_out = b > *n_out ? b : *n_out;
            *ws = s > *ws ? s : *ws;
        }
    }
    *n_out = (*n_out + 15) / 16 * 16;
}

size_t llm_moe_scratch_bytes(const struct llm_model *m)
{
    size_t n_out, ws;
    unit_sizes(m, &n_out, &ws);
    size_t mm = 3 * n_out * sizeof(float) + ws + 256;
    size_t down_in = ROW_STEP * ((llm_act_bytes(LLM_ACT_I16, m->n_ff_exp) + 63) / 64 * 64);
    size_t sum = ROW_STEP * (size_t)m->n_embd * sizeof(float);
    size_t mx = mm > down_in ? mm : down_in;
    return mx > sum ? mx : sum;
}

/* the input rows of W's product over rows [g0, ...): their start and stride */
static const uint8_t *unit_input(const struct llm_moe *x, const struct llm_weight *W, enum llm_moe_phase ph,
                                 const struct llm_moe_io *io, int64_t T, int64_t g0, size_t *stride)
{
    bool f32 = W->mm->act == LLM_ACT_F32;
    if (ph == LLM_MOE_GLU && T == 1) /* the token's own row */
        return f32 ? (const uint8_t *)io->xn : io->act;
    if (ph == LLM_MOE_GLU && f32) {
        *stride = (size_t)x->n_embd * sizeof(float);
        return (const uint8_t *)(x->in_f + g0 * x->n_embd);
    }
    if (f32) { /* down over h */
        *stride = (size_t)x->n_ff * sizeof(float);
        return (const uint8_t *)(x->h + g0 * x->n_ff);
    }
    *stride = x->q_stride;
    return x->in_q + (size_t)g0 * x->q_stride;
}

static void product(const struct llm_moe *x, const struct llm_weight *W, enum llm_moe_phase ph,
                    const struct llm_moe_io *io, int64_t T, const struct munit *mu, float *y, void *ws)
{
    size_t stride = 0;
    const uint8_t *in = unit_input(x, W, ph, io, T, mu->g0, &stride);
    int64_t n0 = mu->r[1] - mu->r[0], n1 = mu->r[3] - mu->r[2];
    if (T == 1) {
        W->mm->gemv(&W->m, mu->r[0], mu->r[1], mu->r[2], mu->r[3], in, y, y + n0);
        return;
    }
    if (n0 > 0 && mu->g1 > mu->g0)
        W->mm->gemm(&W->m, mu->r[0], mu->r[1], in, stride, mu->g1 - mu->g0, y, n0 + n1, ws);
}

/* out = w_0 y_0 + w_1 y_1 + ... over token t's ranks in order (each
 * product rounded, then added: llama.cpp's ggml_mul then ggml_add chain);
 * gemma4: each y_j times its expert's scale first, (y_j s_e) w_j */
static void sum_token(const struct llm_moe *x, int64_t t, float *out)
{
    int64_t E = x->n_embd, k = x->k;
    for (int64_t j = 0; j < k; j++) {
        int64_t g = clampi(x->pos[t * k + j], 0, x->n_rows - 1);
        const float *y = x->y + g * E;
        float w = x->w[t * k + j];
        if (x->down_scale) {
            float sc = x->down_scale[clampi(x->sel[t * k + j], 0, x->n_expert - 1)];
            for (int64_t i = 0; i < E; i++) {
                float p = (y[i] * sc) * w;
                out[i] = j == 0 ? p : out[i] + p;
            }
        } else if (j == 0) {
            for (int64_t i = 0; i < E; i++)
                out[i] = w * y[i];
        } else {
            for (int64_t i = 0; i < E; i++) {
                float p = w * y[i];
                out[i] = out[i] + p;
            }
        }
    }
}

void llm_moe_compute(const struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L,
                     enum llm_moe_phase ph, const struct llm_moe_io *io, int64_t T, int64_t u0, int64_t u1,
                     void *scratch)
{
    switch (ph) {
    case LLM_MOE_GATHER: /* a copy: done by the commit */
        return;
    case LLM_MOE_DOWN_IN: {
        size_t per = (llm_act_bytes(LLM_ACT_I16, x->n_ff) + 63) / 64 * 64;
        uint8_t *s = scratch;
        for (int64_t g = u0; g < u1; g++, s += per)
            llm_act16_quantize(x->h + g * x->n_ff, s, x->n_ff);
        return;
    }
    case LLM_MOE_SUM: {
        float *s = scratch;
        for (int64_t t = u0; t < u1; t++, s += x->n_embd)
            sum_token(x, t, s);
        return;
    }
    default:
        break;
    }
    size_t n_out = x->unit_out;
    float *out = scratch, *tmp = out + n_out;
    void *ws = out + 3 * n_out;
    for (int64_t u = u0; u < u1; u++) {
        struct munit mu = moe_unit(x, L, ph, T, u);
        size_t n = unit_floats(&mu);
        if (ph == LLM_MOE_GLU) {
            product(x, &L->exp_gate[mu.e], ph, io, T, &mu, tmp, ws);
            product(x, &L->exp_up[mu.e], ph, io, T, &mu, tmp + n, ws);
            if (L->exp_gate_b) { /* gpt-oss: biased gate and up, the clamped SwiGLU */
                add_unit_bias(tmp, &mu, L->exp_gate_b + mu.e * x->n_ff);
                add_unit_bias(tmp + n, &mu, L->exp_up_b + mu.e * x->n_ff);
            }
            if (m->ffn_act == LLM_FFN_SWIGLU_OAI)
                for (size_t i = 0; i < n; i++)
                    out[i] = llm_swiglu_oai(tmp[i], tmp[n + i]);
            else if (m->ffn_act == LLM_FFN_GELU_TANH) /* gemma4 */
                for (size_t i = 0; i < n; i++)
                    out[i] = llm_gelu_tanh(tmp[i]) * tmp[n + i];
            else
                for (size_t i = 0; i < n; i++) /* silu(gate) * up */
                    out[i] = tmp[i] / (1.0f + expf(-tmp[i])) * tmp[n + i];
        } else {
            product(x, &L->exp_down[mu.e], ph, io, T, &mu, out, ws);
            if (L->exp_down_b) /* gpt-oss: the down product's bias */
                add_unit_bias(out, &mu, L->exp_down_b + mu.e * x->n_embd);
        }
        out += n;
    }
}

void llm_moe_commit(struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L,
                    enum llm_moe_phase ph, const struct llm_moe_io *io, int64_t T, int64_t u0, int64_t u1,
                    const void *scratch)
{
    int64_t E = x->n_embd, F = x->n_ff;
    switch (ph) {
    case LLM_MOE_GATHER: {
        bool f = L->exp_gate[0].mm->act == LLM_ACT_F32 || L->exp_up[0].mm->act == LLM_ACT_F32;
        bool q = L->exp_gate[0].mm->act == LLM_ACT_I16 || L->exp_up[0].mm->act == LLM_ACT_I16;
        for (int64_t g = u0; g < u1; g++) {
            int64_t t = clampi(x->row_tok[g], 0, x->n_batch - 1);
            if (f)
                memcpy(x->in_f + g * E, io->xn + t * E, (size_t)E * sizeof(float));
            if (q)
                memcpy(x->in_q + (size_t)g * x->q_stride, io->act + (size_t)t * io->act_stride,
                       llm_act_bytes(LLM_ACT_I16, E));
        }
        return;
    }
    case LLM_MOE_DOWN_IN: {
        size_t per = (llm_act_bytes(LLM_ACT_I16, F) + 63) / 64 * 64;
        const uint8_t *s = scratch;
        for (int64_t g = u0; g < u1; g++, s += per)
            memcpy(x->in_q + (size_t)g * x->q_stride, s, llm_act_bytes(LLM_ACT_I16, F));
        return;
    }
    case LLM_MOE_SUM: {
        const float *s = scratch;
        for (int64_t t = u0; t < u1; t++, s += E)
            memcpy(io->out + t * E, s, (size_t)E * sizeof(float));
        return;
    }
    default:
        break;
    }
    const float *out = scratch;
    float *dst = ph == LLM_MOE_GLU ? x->h : x->y;
    int64_t ld = ph == LLM_MOE_GLU ? F : E;
    for (int64_t u = u0; u < u1; u++) {
        struct munit mu = moe_unit(x, L, ph, T, u);
        int64_t n0 = mu.r[1] - mu.r[0], n1 = mu.r[3] - mu.r[2];
        for (int64_t g = mu.g0; g < mu.g1; g++) {
            float *row = dst + g * ld;
            memcpy(row + mu.r[0], out, (size_t)n0 * sizeof(float));
            memcpy(row + mu.r[2], out + n0, (size_t)n1 * sizeof(float));
            out += n0 + n1;
        }
    }
}

void llm_moe_after_one(struct llm_moe *x, const struct llm_model *m, enum llm_moe_phase ph,
                       const struct llm_moe_io *io)
{
    if (ph == LLM_MOE_GLU) {
        if (io->down_i16)
            for (int64_t g = 0; g < x->k; g++)
                llm_act16_quantize(x->h + g * x->n_ff, x->in_q + (size_t)g * x->q_stride, x->n_ff);
    } else if (ph == LLM_MOE_DOWN) {
        sum_token(x, 0, io->out);
    }
}
