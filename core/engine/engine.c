/*
 * engine.c - the transformer forward pass (llama, qwen2, qwen3, gemma2,
 * gemma3, phi3, qwen35, qwen3moe, qwen35moe, gpt-oss, gemma4), the KV
 * cache and the context that owns them.
 *
 * One forward pass for any number of tokens: decoding a token is a prefill
 * of one. Every step a token's K, V rows or logits depend on computes each
 * of its values with one fixed sequence of float operations, whatever the
 * number of tokens in the pass, the token's place in it, where a prompt was
 * split into passes (or restored and prefilled parts) and the number of
 * threads: the matrix products by quant.h's definitions (the one-token
 * GEMV and the batched kernels give the same bits), attention by attn.c's
 * kernel run for each token exactly as alone, and the per-token steps
 * (RMSNorm, RoPE, biases, SwiGLU, residual adds, activation quantization)
 * by the same functions on every path. So a cache hit gives the bits a
 * recomputation gives.
 *
 * A pass is a job of phases for the pool (pool.h): per layer the q/k/v
 * product, attention, the output product, gate/up with SwiGLU and the down
 * product, each cut into work units; with one token the per-token steps
 * between them run as each phase's `after` step (five phases a layer),
 * with more they are phases of their own (ten). Every unit computes into
 * the thread's scratch and is committed once, so a preempted thread's unit
 * can be taken over (pool.c). plan() lists a pass's phases; what each kind
 * of phase does (its units, compute, commit and after steps) is one entry
 * of kinds[] ("the phase kinds").
 *
 * Per-architecture differences live in the per-token steps (residual_norm:
 * gemma's embedding scale and post norms; qkv_post: biases, q/k norms, the
 * layer's RoPE variant; the GLU of glu_rows: SiLU or GELU), in the layer's
 * weights (phi3's fused ones are row views) and in the attention job
 * (gemma's sliding window: a row's keys start at p - n_swa + 1; gemma2's
 * soft-cap); the logits units cap gemma2's logits. The phase structure does
 * not depend on them. A sliding-window layer keeps the K and V rows of every
 * position (masking, not a ring buffer), so the cache, its export and the
 * block store are the same for every architecture.
 *
 * qwen35 (issue 23) has Gated DeltaNet layers between its attention
 * layers: their first product gives the conv's input, z, alpha and beta;
 * a per-token phase runs the causal conv (deltanet.c), then a phase of one
 * unit per value head runs the delta rule over the pass's tokens in order,
 * its state kept in the context (the recurrent state: the conv window and
 * the matrices of each recurrent layer) instead of K/V rows. A pass reads
 * the state from one buffer and writes the next into another, and the two
 * swap when it completes: a stopped pass needs no copy to undo it, and a
 * snapshot inside the pass (llm_ctx_decode_capture) is a copy of the
 * matrices and window on the way. Its attention
 * layers gate their output (sigmoid of a second half of wq's rows, applied
 * by the attention units) and rotate a part of each head (imrope, which
 * for text is NeoX RoPE with the fourth section's pairs left as they are).
 * Only attention layers have a KV cache; llm_ctx_kv_* cover those, in order.
 *
 * qwen3moe (issue 24) has a mixture of experts in place of the FFN: a
 * router product, then moe.c's phases (moe.h: the pass's tokens grouped by
 * expert, each expert's rows multiplied by its weights, the k outputs of a
 * token summed in rank order). The router's after step routes the pass and
 * sets the units of the expert products, which depend on the routing.
 * qwen35moe is qwen35's trunk with those experts and then a shared expert:
 * the dense FFN's products on ffn_*_shexp into ctx.sh, and PH_SHEXP_ADD
 * (docs/moe.md: out = moe + sigmoid(gate . xn) * shared).
 *
 * gemma4 (issue 24) sizes each layer by itself: head_dim, n_head_kv,
 * q_dim, kv_dim, rope_dim and n_ff are the layer's (the model's are their
 * maxima, which size the pass's rows), and the local layers have a RoPE
 * variant of their own (dimensions, base, no rope_freqs). Its last
 * shared_kv_layers layers compute q only and attend to an earlier layer's
 * cache (kv_index); only layers that own KV have a cache. Its steps
 * between the products are phases for any number of tokens (a token alone
 * does not take the after_one shortcut): the per-layer inputs before layer
 * 0 (PH_G4_EMBD, PH_G4_PL, PH_G4_PL_POST), the 26B-A4B's experts after
 * the dense FFN (PH_G4_MOE_IN: their inputs and the dense output normed
 * apart; moe.c's phases; PH_G4_MOE_ADD: the sum), and each layer's
 * per-layer input block (PH_G4_PLG_IN .. PH_G4_PLP); the layer's output
 * scale is applied where the next layer takes its residual.
 *
 * The cache of KV layer kl holds K (then, separately, V) as
 * [n_head_kv][n_ctx][head_dim] elements of the cache type (its owner
 * layer's sizes), so the rows of one head are contiguous for attention and
 * for export. It is only written at positions n_past.. of tokens whose ids
 * were checked first. The export layout (and the block files) cut the
 * layers into runs of model.h's kv_unit elements a position (kv_run).
 */
#include "core/engine/attn.h"
#include "core/engine/deltanet.h"
#include "core/engine/model.h"
#include "core/engine/memavail.h"
#include "core/engine/moe.h"
#include "core/engine/pool.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define KV_ALIGN ((size_t)2 << 20) /* the KV cache starts on a huge-page boundary */
#define KV_READY_STEP 256 /* the KV cache is faulted in this many positions at a time */
#define DEC_STEP 4     /* one-token products: units per chunk */
#define PF_ROWS 32     /* batched products: rows per unit */
#define PF_TOKENS 128  /* batched products: tokens per unit */
/* batched products of float weights over more than PF_TOKENS / 4 tokens:
 * rows per unit (4 of skx's panels: each unit packs its tokens into the
 * micro-kernel's panels once, and over 32 rows that packing measured 19%
 * of an F32 prefill, perf) */
#define PF_ROWS_FLOAT 128
/* the most outputs of one chunk of units */
#define CHUNK_FLOATS (PF_ROWS_FLOAT * PF_TOKENS > DEC_STEP * 2 * LLM_DEC_ROWS ? PF_ROWS_FLOAT * PF_TOKENS \
                                                                            : DEC_STEP * 2 * LLM_DEC_ROWS)
#define TOK_STEP 2     /* per-token phases: tokens per chunk */
#define ATT_ROWS 64    /* batched attention: most query rows per unit */
/* batched attention: most scores per unit (so a chat turn's 10-50 new
 * tokens at a depth of thousands are one unit per KV head: each K and V
 * chunk converted once for all of them) */
#define ATT_SCORES (1536 << 10)

/* the phases of a pass; what each kind does is its entry of kinds[] ("the
 * phase kinds" below) */
enum phase_kind_id {
    PH_ATTN_IN,  /* per token: the residual (the embedding, or + the last output), attn norm, quantized */
    PH_QKV,      /* q | k | v = W x */
    PH_QKV_POST, /* per token: biases, q/k norms, RoPE; K and V into the cache */
    PH_ATTN,     /* attention */
    PH_CONV,     /* recurrent layers, per token: the conv, q/k norms, the gates */
    PH_RECUR,    /* recurrent layers, per value head: the delta rule over the pass's tokens */
    PH_WO_IN,    /* per token: attention's output quantized for wo */
    PH_WO,
    PH_FFN_IN,   /* per token: x += attention's, ffn norm, quantized */
    PH_GLU,      /* h = silu(W_gate x) * (W_up x) */
    PH_DOWN_IN,  /* per token: h quantized for w_down */
    PH_DOWN,
    PH_OUT_IN,   /* the last n_out tokens: x += the last output, output norm, quantized */
    PH_LOGITS,
    /* a mixture-of-experts FFN instead of PH_GLU..PH_DOWN (moe.h): the router
     * product, then moe.c's phases in enum llm_moe_phase order */
    PH_MOE_ROUTER,
    PH_MOE_GATHER,
    PH_MOE_GLU,
    PH_MOE_DOWN_IN,
    PH_MOE_DOWN,
    PH_MOE_SUM,
    /* qwen35moe's shared expert after the experts: PH_GLU..PH_DOWN into
     * ctx.sh, then per token xb = moe + sigmoid(shexp_gate . xn) * sh */
    PH_SHEXP_ADD,
    /* gemma4 (issue 24): the per-layer inputs before layer 0 (the embedding
     * quantized, its product by per_layer_model_proj, then per token the
     * norm and the token's rows); the experts beside the dense FFN (per
     * token their inputs, then the router and moe.c's phases, then per
     * token the two branches' sum); after the FFN, the per-layer input's
     * block (x += the FFN's, quantized; the gate product; per token
     * gelu(gate) times the layer's input; the projection) */
    PH_G4_EMBD,
    PH_G4_PL,
    PH_G4_PL_POST,
    PH_G4_MOE_IN,
    PH_G4_MOE_ADD,
    PH_G4_PLG_IN,
    PH_G4_PLG,
    PH_G4_PLG_POST,
    PH_G4_PLP,
    PH_COUNT
};

struct phase {
    int kind, layer;
};

/* one pass: what its phases read (a pool slot: stale threads may read it
 * until the slot is used again) */
struct pass {
    struct llm_ctx *c;
    int64_t T, n_past;
    int64_t n_out;             /* rows of logits: those of the last n_out tokens (0: none) */
    bool one;                  /* one token, its per-token steps the phases' after_one steps (a
                                  gemma4 token goes through the per-token phases instead) */
    int32_t *tok;              /* (n_batch) the ids */
    int64_t cap_t;             /* 0 < cap_t < T: the recurrent state after the pass's first cap_t
                                  tokens goes to c->cap_buf (llm_ctx_decode_capture); else 0 */
    _Atomic int stopped;       /* the interrupt was seen: the rest of the pass is skipped
                                  and the pass discarded */
    int n_ph;
    struct phase *ph;          /* (max_phases) */
    struct llm_pool_phase *pp; /* (max_phases) */
    struct llm_pool_job job;
};

struct mmd;

/* A kind of phase: how many units it has in a pass, what a unit computes
 * into the thread's scratch, how a chunk's results go into the context's
 * rows (once per chunk: a preempted thread's chunk can be taken over), and
 * what one thread does after it. Each kind is one entry of kinds[]. */
struct phase_kind {
    const char *name; /* for a reader and a debugger */
    /* the phase's units in pass ps, and *step units per chunk */
    int64_t (*units)(const struct pass *ps, const struct phase *ph, int64_t *step);
    void (*compute)(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch);
    void (*commit)(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch);
    /* after the phase, on one thread (or NULL): in every pass; and in a
     * one-token pass, the per-token step that follows it, straight into
     * the context's rows (with more tokens those steps are phases) */
    void (*after)(struct pass *ps, int p);
    void (*after_one)(struct pass *ps, int p);
    /* a product: its weights, input and output rows (else NULL) */
    void (*describe)(const struct pass *ps, const struct llm_layer *L, struct mmd *d);
};

static const struct phase_kind kinds[PH_COUNT];

struct llm_ctx {
    struct llm_model *m;
    int64_t n_ctx, n_batch, n_past;
    int n_threads;
    uint32_t kv_type;
    const struct llm_type_ops *kv_ops;
    size_t kv_elt;           /* bytes per cache element */
    uint8_t **k_cache, **v_cache; /* (n_layer_kv) of [n_head_kv][n_ctx][head_dim] */
    void *kv_map;            /* the mapping k_cache and v_cache point into */
    size_t kv_map_bytes;
    int64_t kv_ready;        /* positions [0, kv_ready) of every head's rows are faulted in */
    float *logits;           /* (n_out_cap, n_vocab) */
    int64_t n_out_cap;       /* rows of logits (llm_ctx_reserve_outputs) */
    int64_t n_out;           /* rows the last decode gave */
    bool logits_valid;
    char errmsg[256];

    /* the pass's rows, n_batch of each */
    float *x;                /* (n_batch, n_embd) the residual stream */
    float *xb;               /* (n_batch, n_embd) the last output product (wo, down) */
    float *xn;               /* (n_batch, n_embd) normed rows: the f32 input of q/k/v, gate/up, output */
    uint8_t *act;            /* (n_batch, act_stride) the next product's I16 input */
    size_t act_stride;
    float *qkv;              /* (n_batch, qkv_width) q | k | v of each token (recurrent layers:
                                deltanet.h's row) */
    float *att;              /* (n_batch, att_width) attention's (the recurrence's) output */
    int64_t att_width;       /* q_dim, or the value heads' V S if larger */
    float *rq;               /* (n_batch, rq_width) recurrent layers: the conv's output */
    float *rstate;           /* (n_layer_rec * rstate_layer_floats) the recurrent state */
    float *rstate_next;      /* the same: what a pass writes, from rstate; the two swap when
                                it completes, so a stopped pass leaves rstate as it was */
    void *rstate_map;        /* the mapping rstate and rstate_next point into */
    size_t rstate_map_bytes;
    float *rstate_bak;       /* the same or NULL (made when first needed): the state before a
                                decode of several passes
                                (an interrupted pass is discarded) */
    uint64_t rstate_floats;  /* of all recurrent layers */
    bool rstate_ok;          /* the state matches n_past */
    int64_t cap_pos;         /* llm_ctx_decode_capture: the position whose state is wanted (0: none) */
    float *cap_buf;          /* (rstate_floats) where it goes */
    float *h;                /* (n_batch, n_ff) SwiGLU's output */
    float *sh;               /* (n_batch, n_embd) qwen35moe: the shared expert's output; gemma4:
                              * the dense FFN's output normed, beside the experts; else NULL */
    float *rope_cs;          /* (n_batch, n_rope * rope_stride) cos, sin pairs */
    int n_rope;              /* RoPE variants: 1, or 2 when the sliding-window layers have their own */
    float rope_base[2], rope_scale[2];
    int64_t rope_dims[2];    /* each variant's rotated dimensions (gemma4's differ) */
    const float *rope_ff[2]; /* and frequency factors, or NULL */
    int64_t rope_stride;     /* floats of a variant in rope_cs: the larger rope_dims */
    const float *rope_factors; /* rope_freqs, phi3's factors for n_ctx, or NULL */
    bool *i16_in;            /* (n_layer * IN_COUNT + 2) product inputs wanted as I16: per layer
                              * IN_*, then the output and gemma4's per_layer_model_proj */
    int64_t att_per;         /* attention units: the most query heads of one (att_split) */
    size_t *kv_off;          /* (n_layer_kv) where each layer's K (then V) starts in the mapping */
    /* gemma4 (else NULL) */
    float *pl;               /* (n_batch, n_layer n_pl) the per-layer inputs */
    float *pg;               /* (n_batch, n_pl) a layer's gated per-layer input */
    float *xr;               /* (n_batch, n_embd) the router's input */
    uint8_t *act_r;          /* (n_batch, act_stride) its I16 form */
    float *serial_tmp;       /* (2 kv_dim) one token's k, v between the steps of qkv_post */
    uint8_t *serial_kv;      /* (2 kv_dim elements of the cache type) its K and V rows */
    struct llm_pool *pool;
    struct pass passes[2];   /* the pool's two slots */
    int max_phases;
    struct llm_moe *moe;     /* moe.c's routing and rows, for models with experts; else NULL */
    volatile sig_atomic_t *interrupt; /* llm_ctx_set_interrupt's flag, or NULL */
    _Atomic int64_t progress; /* llm_ctx_progress: read by other threads */
};

static void kv_reserve(struct llm_ctx *c, int64_t p);
static int set_err(struct llm_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_err(struct llm_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

/* ==== small kernels ==== */

/* y = x / rms(x) * w, the sum of squares in double as ggml does; w NULL:
 * no weight (gemma4's V and router input) */
static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    if (!w) {
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * scale;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

/* cos/sin of each rotated pair for position pos, as ggml's rope cache:
 * theta_i = pos * base^(-2i/n_dims), by repeated multiplication, divided
 * by the frequency factor (rope_freqs, or phi3's long or short factors),
 * times the linear scale; cos and sin times the attention factor
 * (longrope's; 1 otherwise). One variant per RoPE of the model's layers
 * (gemma: the sliding-window layers have their own base and scale; gemma4
 * also their own dimensions and no factors), each rope_stride floats */
static void rope_cache(const struct llm_ctx *c, int64_t pos, float *cs)
{
    const struct llm_model *m = c->m;
    for (int v = 0; v < c->n_rope; v++, cs += c->rope_stride) {
        int64_t nd = c->rope_dims[v];
        const float *factors = c->rope_ff[v];
        float theta_scale = powf(c->rope_base[v], -2.0f / (float)nd);
        float theta = (float)pos, dims[2];
        if (m->rope_yarn)
            llm_model_yarn_dims(m, c->rope_base[v], dims);
        for (int64_t i = 0; i < nd / 2; i++) {
            float ff = factors ? factors[i] : 1.0f;
            float th = m->rope_yarn ? llm_yarn_theta(theta / ff, c->rope_scale[v], dims, i)
                                    : c->rope_scale[v] * (theta / ff);
            if (m->rope_still && m->rope_still[i]) /* qwen35: position 0 in this section */
                th = 0.0f;
            cs[2 * i] = cosf(th) * m->rope_attn_factor;
            cs[2 * i + 1] = sinf(th) * m->rope_attn_factor;
            theta *= theta_scale;
        }
    }
}

/* rotate the first nd dimensions of the heads (hd apart) of one token's q or k */
static void rope(const struct llm_model *m, float *v, int64_t n_heads, int64_t hd, int64_t nd, const float *cs)
{
    int64_t half = nd / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *x = v + h * hd;
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

/* h = act(g) * u over n elements: silu (llama, qwen, phi3) or GELU (gemma) */
static void glu_rows(float *h, const float *g, const float *u, int64_t n, enum llm_ffn_act act)
{
    if (act == LLM_FFN_GELU_TANH) {
        for (int64_t i = 0; i < n; i++)
            h[i] = llm_gelu_tanh(g[i]) * u[i];
        return;
    }
    if (act == LLM_FFN_SWIGLU_OAI) {
        for (int64_t i = 0; i < n; i++)
            h[i] = llm_swiglu_oai(g[i], u[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ==== the per-token steps ==== */

/* the product inputs of a layer that may want I16 activations
 * (ctx.i16_in); the last five are gemma4's: the router's input, the
 * experts' gate/up and down inputs, the per-layer input's gate and
 * projection inputs. Model-wide, after the layers: the output (M_OUTPUT)
 * and gemma4's per_layer_model_proj (M_PL) */
enum { IN_QKV, IN_WO, IN_GLU, IN_DOWN, IN_ROUTER, IN_EXP, IN_EXP_DOWN, IN_PL_GATE, IN_PL_PROJ, IN_COUNT };
enum { M_OUTPUT, M_PL, M_COUNT };

/* the weights that read product input `in` of layer L, into w (5 at most):
 * their number */
static int layer_weights(const struct llm_model *m, const struct llm_layer *L, int in, const struct llm_weight **w)
{
    bool g4 = m->arch == LLM_ARCH_GEMMA4, g4_moe = g4 && L->exp_gate;
    switch (in) {
    case IN_QKV:
        w[0] = &L->wq;
        if (L->recurrent) {
            w[1] = &L->w_z, w[2] = &L->w_alpha, w[3] = &L->w_beta;
            return 4;
        }
        if (L->kv_shared) /* gemma4: q only */
            return 1;
        w[1] = &L->wk, w[2] = &L->wv;
        return L->v_from_k ? 2 : 3;
    case IN_WO: w[0] = &L->wo; return 1;
    case IN_ROUTER: w[0] = &L->w_router; return g4_moe;
    case IN_EXP: w[0] = &L->exp_gate[0], w[1] = &L->exp_up[0]; return g4_moe ? 2 : 0;
    case IN_EXP_DOWN: w[0] = &L->exp_down[0]; return g4_moe;
    case IN_PL_GATE: w[0] = &L->w_pl_gate; return g4 && m->n_pl > 0;
    case IN_PL_PROJ: w[0] = &L->w_pl_proj; return g4 && m->n_pl > 0;
    case IN_GLU:
        if (L->exp_gate && !g4) { /* a mixture of experts: every expert has the types of the first */
            w[0] = &L->exp_gate[0], w[1] = &L->exp_up[0], w[2] = &L->w_router;
            if (!L->shexp_gate)
                return 3;
            w[3] = &L->w_gate, w[4] = &L->w_up; /* the shared expert */
            return 5;
        }
        w[0] = &L->w_gate, w[1] = &L->w_up;
        return 2;
    default:
        w[0] = L->exp_down && !g4 ? &L->exp_down[0] : &L->w_down;
        if (!L->shexp_gate)
            return 1;
        w[1] = &L->w_down;
        return 2;
    }
}

/* the recurrent state of layer l: its conv window, then its matrices */
static float *rwindow_in(const struct llm_ctx *c, const float *base, int64_t l)
{
    return (float *)base + (size_t)c->m->layers[l].rec_index * llm_model_rstate_layer_floats(c->m);
}

static float *rmatrix_in(const struct llm_ctx *c, const float *base, int64_t l, int64_t h)
{
    const struct llm_model *m = c->m;
    return rwindow_in(c, base, l) + (m->ssm_conv - 1) * m->conv_dim + h * m->ssm_state * m->ssm_state;
}

/* the state before the pass (read), and the one it makes (written) */
static float *rwindow(const struct llm_ctx *c, int64_t l) { return rwindow_in(c, c->rstate, l); }
static float *rmatrix(const struct llm_ctx *c, int64_t l, int64_t h) { return rmatrix_in(c, c->rstate, l, h); }

/* the conv window of layer l after the pass's T tokens, into the next state */
static void rwindow_next(const struct llm_ctx *c, int64_t l, int64_t T)
{
    const struct llm_model *m = c->m;
    float *w = rwindow_in(c, c->rstate_next, l);
    memcpy(w, rwindow(c, l), (size_t)((m->ssm_conv - 1) * m->conv_dim) * sizeof(float));
    llm_dn_window_update(m, w, c->qkv, (size_t)m->qkv_width, T);
}

/* the same places in llm_ctx_decode_capture's buffer */
static float *cap_window(const struct llm_ctx *c, int64_t l) { return rwindow_in(c, c->cap_buf, l); }
static float *cap_matrix(const struct llm_ctx *c, int64_t l, int64_t h) { return rmatrix_in(c, c->cap_buf, l, h); }
/* does product input `in` of layer l want I16 (l = n_layer: model-wide input M_*) */
static bool wants_i16(const struct llm_ctx *c, int64_t l, int in)
{
    return c->i16_in[l * IN_COUNT + in];
}

/* token t's embedding row (gemma: times sqrt(n_embd)) into x_out */
static void embed(const struct pass *ps, int64_t t, float *x_out)
{
    const struct llm_model *m = ps->c->m;
    const struct llm_weight *te = &m->tok_embd;
    te->ops->to_float(te->rows + (size_t)ps->tok[t] * te->m.row_bytes, x_out, m->n_embd);
    if (m->embd_scale != 1.0f) /* gemma */
        for (int64_t i = 0; i < m->n_embd; i++)
            x_out[i] *= m->embd_scale;
}

/* x_out = x + xb, xb normed first where post is set (gemma: the block's
 * output is normed before it joins the residual; into tmp) */
static void add_block(const struct llm_model *m, const float *x, const float *xb, const float *post, float *x_out,
                      float *tmp)
{
    if (post) {
        rmsnorm(tmp, xb, post, m->n_embd, m->rms_eps);
        xb = tmp;
    }
    for (int64_t i = 0; i < m->n_embd; i++)
        x_out[i] = x[i] + xb[i];
}

/* the residual of token t entering layer l (l == n_layer: the output
 * norm): the embedding (l == 0) or x + xb, into x_out (which may be
 * the token's row of c->x); its norm into xn_out, quantized into act_out
 * where a product wants that */
static void residual_norm(const struct pass *ps, int64_t l, bool ffn, int64_t t, float *x_out, float *xn_out,
                          uint8_t *act_out)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t E = m->n_embd;
    if (l == 0 && !ffn) {
        embed(ps, t, x_out);
    } else if (ffn) {
        const float *x = c->x + t * E, *xb = c->xb + t * E, *bo = m->layers[l].bo; /* gpt-oss: attn_output's bias */
        if (bo) {
            for (int64_t i = 0; i < E; i++)
                x_out[i] = x[i] + (xb[i] + bo[i]);
        } else {
            add_block(m, x, xb, m->layers[l].attn_post_norm, x_out, xn_out);
        }
    } else {
        /* the last block of layer l - 1: the FFN, or gemma4's per-layer
         * input's; then gemma4's layer_output_scale */
        const struct llm_layer *P = &m->layers[l - 1];
        add_block(m, c->x + t * E, c->xb + t * E, m->n_pl > 0 ? P->pl_post_norm : P->ffn_post_norm, x_out, xn_out);
        if (P->out_scale != 1.0f)
            for (int64_t i = 0; i < E; i++)
                x_out[i] = x_out[i] * P->out_scale;
    }
    const float *w = l == m->n_layer ? m->output_norm : ffn ? m->layers[l].ffn_norm : m->layers[l].attn_norm;
    rmsnorm(xn_out, x_out, w, E, m->rms_eps);
    if (wants_i16(c, l, ffn ? IN_GLU : IN_QKV))
        llm_act16_quantize(xn_out, act_out, E);
}

/* what happens to token t's fresh q, k, v (row qkv_in) before attention:
 * biases, per-head norms (qwen3; gemma4's V unweighted), RoPE; q into
 * q_out, k and v converted to the cache type into k_out, v_out (the
 * layer's kv_dim elements each; gemma4: none where the layer shares KV,
 * and v is k's product where it has no wv). The layer's sizes (gemma4's
 * differ by layer) */
static void qkv_post(const struct pass *ps, int64_t l, int64_t t, const float *qkv_in, float *q_out,
                     uint8_t *k_out, uint8_t *v_out, float *tmp)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    const struct llm_layer *L = &m->layers[l];
    int64_t hd = L->head_dim, kv_dim = L->kv_dim, n_head_kv = L->n_head_kv, k_col = L->wq.m.n_out;
    bool own_kv = !L->kv_shared;
    float *k = tmp, *v = tmp + m->kv_dim;
    if (own_kv) {
        memcpy(k, qkv_in + k_col, (size_t)kv_dim * sizeof(float));
        memcpy(v, qkv_in + (L->v_from_k ? k_col : k_col + kv_dim), (size_t)kv_dim * sizeof(float));
    }
    if (m->attn_gate) {
        /* wq's rows are each head's q then its gate: q_out gets the q heads, then the gates */
        float *qg = tmp + 2 * m->kv_dim;
        for (int64_t h = 0; h < m->n_head; h++) {
            memcpy(qg + h * hd, qkv_in + 2 * h * hd, (size_t)hd * sizeof(float));
            memcpy(qg + m->q_dim + h * hd, qkv_in + (2 * h + 1) * hd, (size_t)hd * sizeof(float));
        }
        memcpy(q_out, qg, (size_t)(2 * m->q_dim) * sizeof(float));
    } else if (q_out != qkv_in) {
        memcpy(q_out, qkv_in, (size_t)L->q_dim * sizeof(float));
    }
    add_bias(q_out, L->bq, L->q_dim);
    add_bias(k, L->bk, kv_dim);
    add_bias(v, L->bv, kv_dim);
    if (L->q_norm)
        for (int64_t h = 0; h < m->n_head; h++)
            rmsnorm(q_out + h * hd, q_out + h * hd, L->q_norm, hd, m->rms_eps);
    if (L->k_norm)
        for (int64_t h = 0; h < n_head_kv; h++)
            rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, m->rms_eps);
    if (L->v_norm && own_kv)
        for (int64_t h = 0; h < n_head_kv; h++)
            rmsnorm(v + h * hd, v + h * hd, NULL, hd, m->rms_eps);
    int var = L->swa && c->n_rope > 1;
    const float *cs = c->rope_cs + (t * c->n_rope + var) * c->rope_stride;
    rope(m, q_out, m->n_head, hd, c->rope_dims[var], cs);
    if (!own_kv)
        return;
    rope(m, k, n_head_kv, hd, c->rope_dims[var], cs);
    c->kv_ops->from_float(k, k_out, kv_dim);
    c->kv_ops->from_float(v, v_out, kv_dim);
}

/* K and V rows of token t (the layer's kv_dim elements of the cache type
 * each) into the cache of layer l at position n_past + t (none where the
 * layer shares another's) */
static void kv_store(const struct pass *ps, int64_t l, int64_t t, const uint8_t *k, const uint8_t *v)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_layer *L = &c->m->layers[l];
    size_t row = (size_t)L->head_dim * c->kv_elt;
    int64_t kl = L->kv_index;
    if (L->kv_shared)
        return;
    for (int64_t g = 0; g < L->n_head_kv; g++) {
        size_t off = (size_t)(g * c->n_ctx + ps->n_past + t) * row;
        memcpy(c->k_cache[kl] + off, k + g * row, row);
        memcpy(c->v_cache[kl] + off, v + g * row, row);
    }
}

/* ==== products: the units of a phase ==== */

/* one product phase as the units see it */
struct mmd {
    int nw;
    const struct llm_weight *w[4];
    int64_t col[4];            /* where each weight's rows go in a row of out */
    bool glu;                  /* w[0] gate, w[1] up: out = act(gate) * up */
    enum llm_ffn_act act;
    float softcap;             /* the logits: capped (gemma2), or 0 */
    const float *xf;           /* f32 input rows */
    size_t xf_stride;          /* bytes */
    const uint8_t *xq;         /* I16 input rows */
    size_t xq_stride;
    float *out;
    int64_t ldo;
    int64_t T;                 /* tokens */
    bool one;                  /* one token: the GEMV's units */
};

/* ---- each product kind's weights and rows (kinds[].describe) ---- */

/* q | k | v = W xn (recurrent layers: the conv's input | z | alpha | beta), side by side in a row of qkv */
static void describe_qkv(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    d->nw = layer_weights(ps->c->m, L, IN_QKV, d->w);
    for (int i = 1; i < d->nw; i++)
        d->col[i] = d->col[i - 1] + d->w[i - 1]->m.n_out;
    d->out = ps->c->qkv;
    d->ldo = ps->c->m->qkv_width;
}

/* a product of one weight W into rows of out (ldo floats apart) */
static void describe_one(struct mmd *d, const struct llm_weight *W, float *out, int64_t ldo)
{
    d->nw = 1;
    d->w[0] = W;
    d->out = out;
    d->ldo = ldo;
}

/* xb = wo att */
static void describe_wo(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    describe_one(d, &L->wo, ps->c->xb, ps->c->m->n_embd);
    d->xf = ps->c->att;
    d->xf_stride = (size_t)ps->c->att_width * sizeof(float);
}

/* h = act(w_gate xn) * (w_up xn) */
static void describe_glu(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    d->nw = 2;
    d->w[0] = &L->w_gate, d->w[1] = &L->w_up;
    d->glu = true;
    d->act = ps->c->m->ffn_act;
    d->out = ps->c->h;
    d->ldo = ps->c->m->n_ff;
}

/* xb = w_down h (the shared expert's: into sh) */
static void describe_down(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    describe_one(d, &L->w_down, L->shexp_gate ? ps->c->sh : ps->c->xb, ps->c->m->n_embd);
    d->xf = ps->c->h;
    d->xf_stride = (size_t)ps->c->m->n_ff * sizeof(float);
}

/* the router's logits = w_router xn (gemma4: w_router xr) */
static void describe_router(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    describe_one(d, &L->w_router, llm_moe_logits(ps->c->moe), ps->c->m->n_expert);
    if (ps->c->xr) {
        d->xf = ps->c->xr;
        d->xq = ps->c->act_r;
    }
}

/* gemma4: pl = per_layer_model_proj x (the scaled embeddings) */
static void describe_pl(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    const struct llm_model *m = ps->c->m;
    describe_one(d, &m->pl_model_proj, ps->c->pl, m->n_layer * m->n_pl);
    d->xf = ps->c->x;
}

/* gemma4: pg = inp_gate x */
static void describe_plg(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    describe_one(d, &L->w_pl_gate, ps->c->pg, ps->c->m->n_pl);
    d->xf = ps->c->x;
}

/* gemma4: xb = proj pg */
static void describe_plp(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    describe_one(d, &L->w_pl_proj, ps->c->xb, ps->c->m->n_embd);
    d->xf = ps->c->pg;
    d->xf_stride = (size_t)ps->c->m->n_pl * sizeof(float);
}

/* logits = output xn, the rows of the last n_out tokens (gemma2: capped) */
static void describe_logits(const struct pass *ps, const struct llm_layer *L, struct mmd *d)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    describe_one(d, &m->output, c->logits, m->n_vocab);
    d->xf = c->xn + (ps->T - ps->n_out) * m->n_embd;
    d->xq = c->act + (size_t)(ps->T - ps->n_out) * c->act_stride;
    d->softcap = m->final_softcap;
    d->T = ps->n_out;
}

static void mm_describe(const struct pass *ps, const struct phase *ph, struct mmd *d)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    memset(d, 0, sizeof *d);
    d->T = ps->T;
    d->xq = c->act;
    d->xq_stride = c->act_stride;
    d->xf = c->xn;
    d->xf_stride = (size_t)m->n_embd * sizeof(float);
    kinds[ph->kind].describe(ps, ph->layer < m->n_layer ? &m->layers[ph->layer] : NULL, d);
    d->one = d->T == 1;
}

/* one-token units of W: LLM_DEC_ROWS rows (at least one packed group) of its
 * first half with the same rows of its second half (two far-apart streams
 * per core keep more DRAM reads in flight), plus one unit for the last
 * group when the number of groups (of 8 rows, or of the float panels'
 * rows) is odd; with an even number the second half's last group may be
 * partial */
int64_t llm_dec_rows(const struct llm_weight *W)
{
    int64_t g = llm_mm_group_rows(W->mm);
    return (LLM_DEC_ROWS + g - 1) / g * g;
}

int64_t llm_dec_units(const struct llm_weight *W)
{
    int64_t g = llm_mm_group_rows(W->mm), groups = (W->m.n_out + g - 1) / g, half = groups / 2 * g;
    return (half + llm_dec_rows(W) - 1) / llm_dec_rows(W) + groups % 2;
}

void llm_dec_unit(const struct llm_weight *W, int64_t k, int64_t r[4])
{
    int64_t g = llm_mm_group_rows(W->mm), groups = (W->m.n_out + g - 1) / g, half = groups / 2 * g;
    int64_t dr = llm_dec_rows(W);
    r[0] = k * dr;
    if (r[0] >= half) { /* the odd last group */
        r[0] = 2 * half;
        r[1] = W->m.n_out;
        r[2] = r[3] = 0;
        return;
    }
    r[1] = r[0] + dr < half ? r[0] + dr : half;
    r[2] = r[0] + half;
    /* with an even number of groups the last one may be partial: its
     * rows end at n_out (r[2] is a group's start, always below it) */
    r[3] = r[1] + half < W->m.n_out ? r[1] + half : W->m.n_out;
}

static int64_t tok_blocks(int64_t T) { return (T + PF_TOKENS - 1) / PF_TOKENS; }

static int64_t unit_rows(const struct mmd *d, const struct llm_weight *W)
{
    return W->mm->act == LLM_ACT_F32 && d->T > PF_TOKENS / 4 ? PF_ROWS_FLOAT : PF_ROWS;
}

static int64_t weight_units(const struct mmd *d, int i)
{
    const struct llm_weight *W = d->w[i];
    int64_t rows = unit_rows(d, W);
    return d->one ? llm_dec_units(W) : (W->m.n_out + rows - 1) / rows * tok_blocks(d->T);
}

static int64_t mm_units(const struct mmd *d)
{
    int64_t n = 0;
    for (int i = 0; i < (d->glu ? 1 : d->nw); i++)
        n += weight_units(d, i);
    return n;
}

/* unit u: its weight, rows ([r0, r1) and [r2, r3); batched: r2 = r3) and tokens [t0, t1) */
struct unit {
    int wi;
    int64_t r[4], t0, t1;
};

static struct unit mm_unit(const struct mmd *d, int64_t u)
{
    struct unit x = {0};
    while (u >= weight_units(d, x.wi))
        u -= weight_units(d, x.wi++);
    const struct llm_weight *W = d->w[x.wi];
    if (d->one) {
        llm_dec_unit(W, u, x.r);
        x.t1 = 1;
        return x;
    }
    int64_t rows = unit_rows(d, W), nru = (W->m.n_out + rows - 1) / rows, tb = u / nru, ru = u % nru;
    x.r[0] = ru * rows;
    x.r[1] = x.r[0] + rows < W->m.n_out ? x.r[0] + rows : W->m.n_out;
    x.t0 = tb * PF_TOKENS;
    x.t1 = x.t0 + PF_TOKENS < d->T ? x.t0 + PF_TOKENS : d->T;
    return x;
}

static size_t unit_floats(const struct unit *x) { return (size_t)((x->r[1] - x->r[0] + x->r[3] - x->r[2]) * (x->t1 - x->t0)); }

/* y (unit_floats) = the unit's outputs: for each token, the rows of the
 * first range then of the second */
static void mm_one(const struct mmd *d, const struct llm_weight *W, const struct unit *x, float *y, void *ws)
{
    bool f32 = W->mm->act == LLM_ACT_F32;
    const uint8_t *in = f32 ? (const uint8_t *)d->xf : d->xq;
    size_t stride = f32 ? d->xf_stride : d->xq_stride;
    int64_t n0 = x->r[1] - x->r[0], n1 = x->r[3] - x->r[2];
    if (d->one) {
        W->mm->gemv(&W->m, x->r[0], x->r[1], x->r[2], x->r[3], in, y, y + n0);
        return;
    }
    W->mm->gemm(&W->m, x->r[0], x->r[1], in + (size_t)x->t0 * stride, stride, x->t1 - x->t0, y, n0 + n1, ws);
}

static void mm_compute(const struct mmd *d, int64_t u0, int64_t u1, float *out, float *tmp, void *ws)
{
    for (int64_t u = u0; u < u1; u++) {
        struct unit x = mm_unit(d, u);
        size_t n = unit_floats(&x);
        if (d->glu) {
            mm_one(d, d->w[0], &x, tmp, ws);
            mm_one(d, d->w[1], &x, tmp + n, ws);
            glu_rows(out, tmp, tmp + n, (int64_t)n, d->act);
        } else {
            mm_one(d, d->w[x.wi], &x, out, ws);
            if (d->softcap > 0)
                llm_softcap(out, (int64_t)n, d->softcap);
        }
        out += n;
    }
}

/* (a one-token unit's second range can run past the weight's last row
 * into its last group's padding, when the rows are not a whole number of
 * groups: only the weight's rows are committed) */
static void mm_commit(const struct mmd *d, int64_t u0, int64_t u1, const float *out)
{
    for (int64_t u = u0; u < u1; u++) {
        struct unit x = mm_unit(d, u);
        int64_t n0 = x.r[1] - x.r[0], n1 = x.r[3] - x.r[2], rows = d->w[x.wi]->m.n_out;
        int64_t c0 = x.r[1] < rows ? n0 : rows - x.r[0], c1 = x.r[3] < rows ? n1 : rows - x.r[2];
        for (int64_t t = x.t0; t < x.t1; t++) {
            float *row = d->out + t * d->ldo + d->col[x.wi];
            if (c0 > 0)
                memcpy(row + x.r[0], out, (size_t)c0 * sizeof(float));
            if (c1 > 0)
                memcpy(row + x.r[2], out + n0, (size_t)c1 * sizeof(float));
            out += n0 + n1;
        }
    }
}

/* ==== attention units ==== */

/* unit u: query rows [t0, t1) of KV head g, query heads [h0, h1) */
struct att_unit {
    int64_t t0, t1, g, h0, h1;
};

/* a layer's attention units: each KV head's gqa query heads in split
 * parts of at most per heads, enough units for every thread, each KV
 * head's rows converted as few times as that allows (results do not
 * depend on it) */
struct att_split {
    int64_t n_head_kv, gqa, split, per;
};

static struct att_split att_split(const struct llm_model *m, int64_t n_head_kv, int n_threads)
{
    struct att_split a = {n_head_kv, m->n_head / n_head_kv, 1, 0};
    while (a.split < a.gqa && (n_head_kv * a.split < n_threads || (a.gqa + a.split - 1) / a.split > LLM_ATTN_MAX_Q))
        a.split++;
    a.per = (a.gqa + a.split - 1) / a.split;
    return a;
}

static struct att_split layer_att_split(const struct llm_ctx *c, int64_t l)
{
    return att_split(c->m, c->m->layers[l].n_head_kv, c->n_threads);
}

/* query rows per attention unit in this pass: as many as ATT_SCORES
 * scores over the pass's keys allow (results do not depend on it) */
static int64_t pass_att_rows(const struct pass *ps, const struct att_split *sp)
{
    if (ps->T == 1)
        return 1;
    int64_t r = ATT_SCORES / (sp->per * (ps->n_past + ps->T));
    return r < 1 ? 1 : r > ATT_ROWS ? ATT_ROWS : r;
}

static int64_t att_units(const struct pass *ps, const struct phase *ph, int64_t *step)
{
    struct att_split sp = layer_att_split(ps->c, ph->layer);
    *step = 1;
    int64_t rows = pass_att_rows(ps, &sp);
    return (ps->T + rows - 1) / rows * sp.n_head_kv * sp.split;
}

static struct att_unit att_unit(const struct pass *ps, int64_t l, int64_t u)
{
    struct att_split sp = layer_att_split(ps->c, l);
    int64_t rows = pass_att_rows(ps, &sp), per_rb = sp.n_head_kv * sp.split;
    int64_t rb = u / per_rb, g = u % per_rb / sp.split, part = u % sp.split, gqa = sp.gqa;
    struct att_unit a;
    a.t0 = rb * rows;
    a.t1 = a.t0 + rows < ps->T ? a.t0 + rows : ps->T;
    a.g = g;
    a.h0 = g * gqa + part * sp.per;
    a.h1 = a.h0 + sp.per < (g + 1) * gqa ? a.h0 + sp.per : (g + 1) * gqa;
    if (a.h1 < a.h0)
        a.h1 = a.h0;
    return a;
}

/* out: (t1 - t0) rows of (h1 - h0) heads; scratch after it */
static void att_compute(const struct pass *ps, int64_t l, const struct att_unit *a, float *out, float *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t hd = m->layers[l].head_dim, ld = m->qkv_width, kl = m->layers[l].kv_index;
    if (a->h1 <= a->h0)
        return;
    size_t off = (size_t)(a->g * c->n_ctx * hd) * c->kv_elt;
    struct llm_attn_job job = {
        .q = c->qkv + a->t0 * ld + a->h0 * hd,
        .q_stride = ld,
        .out = out,
        .out_stride = (a->h1 - a->h0) * hd,
        .n_rows = a->t1 - a->t0,
        .nq = a->h1 - a->h0,
        .hd = hd,
        .n_kv = ps->n_past + a->t0 + 1,
        .k = c->k_cache[kl] + off,
        .v = c->v_cache[kl] + off,
        .kv_type = c->kv_type,
        .f16_to_float = c->kv_ops->to_float,
        .scale = m->attn_scale,
        .window = m->layers[l].swa ? m->n_swa : 0,
        .softcap = m->attn_softcap,
        .sinks = m->layers[l].sinks ? m->layers[l].sinks + a->h0 : NULL,
        .scratch = scratch,
    };
    llm_attn_rows(&job);
    if (m->attn_gate) /* qwen35: times sigmoid(gate), the gates after the q heads in the row */
        for (int64_t t = a->t0; t < a->t1; t++) {
            const float *g = c->qkv + t * ld + m->q_dim + a->h0 * hd;
            float *o = out + (t - a->t0) * job.out_stride;
            for (int64_t i = 0; i < job.out_stride; i++)
                o[i] *= 1.0f / (1.0f + expf(-g[i]));
        }
}

static void att_commit(const struct pass *ps, int64_t l, const struct att_unit *a, const float *out)
{
    int64_t hd = ps->c->m->layers[l].head_dim;
    size_t n = (size_t)((a->h1 - a->h0) * hd);
    for (int64_t t = a->t0; t < a->t1; t++, out += n)
        memcpy(ps->c->att + t * ps->c->att_width + a->h0 * hd, out, n * sizeof(float));
}

/* ==== what the phases share: scratch, stopping, the shared expert, the experts' rows ==== */

/* scratch of a per-token chunk: per token x, xn (n_embd floats each), act
 * (act_stride bytes) and the rope cache (n_rope * rope_stride floats, at the end); or
 * for PH_QKV_POST q (q_dim floats), K and V (kv_dim elements of the cache
 * type each) and a k, v temp (2 kv_dim floats); or gemma4's: PH_G4_PL_POST
 * a row of pl, PH_G4_MOE_IN three rows (sh, xr, xn) and two of act */
static size_t tok_scratch_bytes(const struct llm_ctx *c)
{
    const struct llm_model *m = c->m;
    size_t a = (size_t)(2 * m->n_embd + c->n_rope * c->rope_stride) * sizeof(float) + c->act_stride;
    size_t b = (size_t)(m->q_rows + 2 * m->kv_dim + 2 * m->q_dim) * sizeof(float) + (size_t)(2 * m->kv_dim) * c->kv_elt;
    if (m->n_layer_rec) { /* PH_CONV: a row of rq */
        size_t r = (size_t)llm_dn_rq_width(m) * sizeof(float);
        b = r > b ? r : b;
    }
    if (m->arch == LLM_ARCH_GEMMA4) {
        size_t r = (size_t)(2 * m->n_layer * m->n_pl) * sizeof(float);
        size_t g = 3 * (size_t)m->n_embd * sizeof(float) + 2 * c->act_stride;
        size_t pg = (size_t)m->n_pl * sizeof(float) + c->act_stride;
        b = r > b ? r : b;
        b = g > b ? g : b;
        b = pg > b ? pg : b;
    }
    size_t per = ((a > b ? a : b) + 63) / 64 * 64;
    return TOK_STEP * per;
}

/* Is the pass being stopped? Once the interrupt flag is seen, every
 * chunk after is skipped; what was computed is discarded with the pass,
 * so stopping never changes the numbers of a pass that completes. */
static bool stopping(struct pass *ps)
{
    if (atomic_load_explicit(&ps->stopped, memory_order_relaxed))
        return true;
    if (ps->c->interrupt && *ps->c->interrupt && !(ps->T == 1 && ps->c->rstate_floats)) {
        atomic_store(&ps->stopped, 1);
        return true;
    }
    return false;
}

/* qwen35moe, token t of layer l: the experts' sum (xb) plus the shared
 * expert's output (sh) times its gate, sigmoid(shexp_gate . xn) (the dot
 * in double, in element order), into out: one product and one sum per
 * element, as llama.cpp's ggml_mul then ggml_add (moe + gated shared) */
static void shexp_add(const struct llm_ctx *c, int64_t l, int64_t t, float *out)
{
    int64_t E = c->m->n_embd;
    const float *g = c->m->layers[l].shexp_gate, *xn = c->xn + t * E, *xb = c->xb + t * E, *sh = c->sh + t * E;
    double d = 0;
    for (int64_t i = 0; i < E; i++)
        d += (double)g[i] * xn[i];
    float gate = 1.0f / (1.0f + expf(-(float)d));
    for (int64_t i = 0; i < E; i++) {
        float y = gate * sh[i];
        out[i] = xb[i] + y;
    }
}

/* the product input of the experts' down products */
static int moe_down_in(const struct llm_model *m) { return m->arch == LLM_ARCH_GEMMA4 ? IN_EXP_DOWN : IN_DOWN; }

/* where layer l's mixture of experts reads and writes (moe.h) */
static struct llm_moe_io moe_io(const struct llm_ctx *c, int64_t l)
{
    return (struct llm_moe_io){.xn = c->xn, .act = c->act, .act_stride = c->act_stride, .out = c->xb,
                               .down_i16 = wants_i16(c, l, moe_down_in(c->m))};
}

/* ==== the phase kinds ==== */

/* ---- per-token phases: one token a unit, TOK_STEP a chunk, each token
 * tok_scratch_bytes / TOK_STEP bytes of the scratch ---- */

static size_t tok_scratch(const struct llm_ctx *c) { return tok_scratch_bytes(c) / TOK_STEP; }

static int64_t tokens_units(const struct pass *ps, const struct phase *ph, int64_t *step)
{
    *step = TOK_STEP;
    return ph->kind == PH_OUT_IN ? ps->n_out : ps->T;
}

/* PH_ATTN_IN, PH_FFN_IN, PH_OUT_IN: the residual entering attention, the
 * FFN or the output norm (the last n_out tokens), normed and quantized:
 * per token x, xn, act; with layer 0's, the token's RoPE cache */
static int64_t norm_layer(const struct pass *ps, const struct phase *ph)
{
    return ph->kind == PH_OUT_IN ? ps->c->m->n_layer : ph->layer;
}

static int64_t norm_token(const struct pass *ps, const struct phase *ph, int64_t u)
{
    return ph->kind == PH_OUT_IN ? ps->T - ps->n_out + u : u;
}

static void norm_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t E = m->n_embd;
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        float *x = (float *)s, *xn = x + E;
        residual_norm(ps, norm_layer(ps, ph), ph->kind == PH_FFN_IN, norm_token(ps, ph, u), x, xn,
                      (uint8_t *)(xn + E));
        if (ph->kind == PH_ATTN_IN && ph->layer == 0)
            rope_cache(c, ps->n_past + u, (float *)(s + per) - c->n_rope * c->rope_stride);
    }
}

static void norm_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch)
{
    struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t E = m->n_embd, nr = c->n_rope * c->rope_stride;
    size_t per = tok_scratch(c);
    const uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        int64_t t = norm_token(ps, ph, u);
        const float *x = (const float *)s, *xn = x + E;
        memcpy(c->x + t * E, x, (size_t)E * sizeof(float));
        memcpy(c->xn + t * E, xn, (size_t)E * sizeof(float));
        if (wants_i16(c, norm_layer(ps, ph), ph->kind == PH_FFN_IN ? IN_GLU : IN_QKV))
            memcpy(c->act + (size_t)t * c->act_stride, xn + E, llm_act_bytes(LLM_ACT_I16, E));
        if (ph->kind == PH_ATTN_IN && ph->layer == 0)
            memcpy(c->rope_cs + t * nr, (const float *)(s + per) - nr, (size_t)nr * sizeof(float));
    }
}

/* PH_WO_IN, PH_DOWN_IN: each token's input of wo (attention's output) or
 * of w_down (h), quantized */
static int64_t quant_width(const struct pass *ps, const struct phase *ph)
{
    const struct llm_model *m = ps->c->m;
    return ph->kind == PH_WO_IN ? m->layers[ph->layer].wo.m.n_in : m->layers[ph->layer].w_down.m.n_in;
}

static void quant_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    int64_t n = quant_width(ps, ph);
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per)
        llm_act16_quantize(ph->kind == PH_WO_IN ? c->att + u * c->att_width : c->h + u * c->m->n_ff, s, n);
}

static void quant_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch)
{
    struct llm_ctx *c = ps->c;
    size_t per = tok_scratch(c), n = llm_act_bytes(LLM_ACT_I16, quant_width(ps, ph));
    const uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per)
        memcpy(c->act + (size_t)u * c->act_stride, s, n);
}

/* PH_QKV_POST: each token's q (back into its row of qkv), K and V (into
 * the cache) after qkv_post */
static void qkv_post_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    size_t per = tok_scratch(c), kvb = (size_t)m->kv_dim * c->kv_elt;
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        float *q = (float *)s;
        uint8_t *kv = (uint8_t *)(q + m->q_rows);
        qkv_post(ps, ph->layer, u, c->qkv + u * m->qkv_width, q, kv, kv + kvb, (float *)(kv + 2 * kvb));
    }
}

static void qkv_post_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                            const void *scratch)
{
    struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    size_t per = tok_scratch(c), kvb = (size_t)m->kv_dim * c->kv_elt;
    const uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        const float *q = (const float *)s;
        const uint8_t *kv = (const uint8_t *)(q + m->q_rows);
        memcpy(c->qkv + u * m->qkv_width, q, (size_t)m->layers[ph->layer].wq.m.n_out * sizeof(float));
        kv_store(ps, ph->layer, u, kv, kv + kvb);
    }
}

/* PH_CONV (recurrent layers): each token's causal conv, q/k norms and
 * gates, its row of rq */
static void conv_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per)
        llm_dn_conv(m, &m->layers[ph->layer], rwindow(c, ph->layer), c->qkv, (size_t)m->qkv_width, u, (float *)s);
}

static void conv_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch)
{
    struct llm_ctx *c = ps->c;
    int64_t w = llm_dn_rq_width(c->m);
    size_t per = tok_scratch(c);
    const uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per)
        memcpy(c->rq + u * w, s, (size_t)w * sizeof(float));
}

/* after it, once the conv has read the window: the window after the
 * pass's tokens into the next state (and after cap_t of them into the
 * capture, from the one before) */
static void conv_after(struct pass *ps, int p)
{
    struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t l = ps->ph[p].layer;
    if (ps->cap_t) {
        float *w = cap_window(c, l);
        memcpy(w, rwindow(c, l), (size_t)((m->ssm_conv - 1) * m->conv_dim) * sizeof(float));
        llm_dn_window_update(m, w, c->qkv, (size_t)m->qkv_width, ps->cap_t);
    }
    rwindow_next(c, l, ps->T);
}

/* PH_SHEXP_ADD: each token's xb = the experts' sum + the gated shared expert */
static void shexp_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    size_t per = tok_scratch(ps->c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per)
        shexp_add(ps->c, ph->layer, u, (float *)s);
}

static void shexp_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch)
{
    struct llm_ctx *c = ps->c;
    int64_t E = c->m->n_embd;
    size_t per = tok_scratch(c);
    const uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per)
        memcpy(c->xb + u * E, s, (size_t)E * sizeof(float));
}

/* ---- PH_RECUR (recurrent layers): one unit per value head, one a
 * chunk: the head's matrix, then its T rows of att (and the matrix after
 * cap_t of them) ---- */

static int64_t recur_units(const struct pass *ps, const struct phase *ph, int64_t *step)
{
    *step = 1;
    return ps->c->m->ssm_heads;
}

static void recur_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    const struct llm_layer *L = &m->layers[ph->layer];
    size_t SS = (size_t)(m->ssm_state * m->ssm_state), ld = (size_t)m->qkv_width;
    float *st = scratch, *out = st + SS;
    for (int64_t u = u0; u < u1; u++) {
        int64_t k = ps->cap_t;
        memcpy(st, rmatrix(c, ph->layer, u), SS * sizeof(float));
        if (k) { /* the same steps in the same order, the matrix copied on the way */
            llm_dn_head(m, L, u, st, c->rq, c->qkv, ld, k, out);
            memcpy(out + ps->T * m->ssm_state, st, SS * sizeof(float));
            llm_dn_head(m, L, u, st, c->rq + k * llm_dn_rq_width(m), c->qkv + (size_t)k * ld, ld, ps->T - k,
                        out + k * m->ssm_state);
        } else {
            llm_dn_head(m, L, u, st, c->rq, c->qkv, ld, ps->T, out);
        }
    }
}

static void recur_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch)
{
    struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    size_t SS = (size_t)(m->ssm_state * m->ssm_state);
    const float *st = scratch;
    for (int64_t u = u0; u < u1; u++) {
        memcpy(rmatrix_in(c, c->rstate_next, ph->layer, u), st, SS * sizeof(float));
        for (int64_t t = 0; t < ps->T; t++)
            memcpy(c->att + t * c->att_width + u * m->ssm_state, st + SS + t * m->ssm_state,
                   (size_t)m->ssm_state * sizeof(float));
        if (ps->cap_t)
            memcpy(cap_matrix(c, ph->layer, u), st + SS + ps->T * m->ssm_state, SS * sizeof(float));
    }
}

/* ---- PH_ATTN: the attention units (att_unit), one a chunk ---- */

static void attention_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                              void *scratch)
{
    for (int64_t u = u0; u < u1; u++) {
        struct att_unit a = att_unit(ps, ph->layer, u);
        size_t n = (size_t)((a.t1 - a.t0) * (a.h1 - a.h0) * ps->c->m->layers[ph->layer].head_dim);
        att_compute(ps, ph->layer, &a, scratch, (float *)scratch + (n + 15) / 16 * 16);
    }
}

static void attention_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                             const void *scratch)
{
    for (int64_t u = u0; u < u1; u++) {
        struct att_unit a = att_unit(ps, ph->layer, u);
        att_commit(ps, ph->layer, &a, scratch);
    }
}

/* one token, after attention or the recurrence: its output quantized for wo */
static void att_one(struct pass *ps, int p)
{
    const struct llm_ctx *c = ps->c;
    int64_t l = ps->ph[p].layer;
    if (wants_i16(c, l, IN_WO))
        llm_act16_quantize(c->att, c->act, c->m->layers[l].wo.m.n_in);
}

/* ---- products (mm_unit's units) ---- */

static int64_t product_units(const struct pass *ps, const struct phase *ph, int64_t *step)
{
    struct mmd d;
    mm_describe(ps, ph, &d);
    *step = d.one ? DEC_STEP : 1;
    return mm_units(&d);
}

static void product_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    struct mmd d;
    mm_describe(ps, ph, &d);
    float *out = scratch;
    size_t n_out = (size_t)CHUNK_FLOATS;
    mm_compute(&d, u0, u1, out, out + n_out, out + 3 * n_out);
}

static void product_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                           const void *scratch)
{
    struct mmd d;
    mm_describe(ps, ph, &d);
    mm_commit(&d, u0, u1, scratch);
}

/* one token, after q | k | v: qkv_post in place and K, V into the cache
 * (recurrent layers: the conv, and the window moved on) */
static void qkv_one(struct pass *ps, int p)
{
    struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t l = ps->ph[p].layer;
    if (m->layers[l].recurrent) {
        llm_dn_conv(m, &m->layers[l], rwindow(c, l), c->qkv, (size_t)m->qkv_width, 0, c->rq);
        rwindow_next(c, l, 1);
        return;
    }
    uint8_t *kc = c->serial_kv, *vc = kc + (size_t)m->kv_dim * c->kv_elt;
    qkv_post(ps, l, 0, c->qkv, c->qkv, kc, vc, c->serial_tmp);
    kv_store(ps, l, 0, kc, vc);
}

/* one token, after wo: x += attention's, the FFN norm */
static void wo_one(struct pass *ps, int p)
{
    struct llm_ctx *c = ps->c;
    residual_norm(ps, ps->ph[p].layer, true, 0, c->x, c->xn, c->act);
}

/* one token, after gate/up: h quantized for w_down */
static void glu_one(struct pass *ps, int p)
{
    const struct llm_ctx *c = ps->c;
    int64_t l = ps->ph[p].layer;
    if (wants_i16(c, l, IN_DOWN))
        llm_act16_quantize(c->h, c->act, c->m->layers[l].w_down.m.n_in);
}

/* one token, after layer l's FFN: the residual entering the next layer
 * (or the output norm, if there are logits to make) */
static void ffn_done_one(struct pass *ps, int64_t l)
{
    struct llm_ctx *c = ps->c;
    if (l + 1 < c->m->n_layer || ps->n_out)
        residual_norm(ps, l + 1, false, 0, c->x, c->xn, c->act);
}

/* one token, after w_down (qwen35moe's shared expert: xb += it gated) */
static void down_one(struct pass *ps, int p)
{
    int64_t l = ps->ph[p].layer;
    if (ps->c->m->layers[l].shexp_gate)
        shexp_add(ps->c, l, 0, ps->c->xb); /* elementwise: in place is as out of place */
    ffn_done_one(ps, l);
}

/* ---- a mixture of experts (moe.h) ---- */

/* after the router of a layer with experts: every token's experts, the
 * pass's rows grouped by expert, and so the units of the product phases */
static void moe_routed(struct pass *ps, int p)
{
    struct llm_ctx *c = ps->c;
    int l = ps->ph[p].layer;
    const struct llm_layer *L = &c->m->layers[l];
    llm_moe_route(c->moe, c->m, L, ps->T);
    for (int q = p + 1; q < ps->n_ph && ps->ph[q].layer == l; q++)
        if (ps->ph[q].kind == PH_MOE_GLU || ps->ph[q].kind == PH_MOE_DOWN) {
            int64_t n = llm_moe_units(c->moe, c->m, L, (enum llm_moe_phase)(ps->ph[q].kind - PH_MOE_GATHER),
                                      ps->T, false);
            ps->pp[q].n_units = n > 0 ? n : 1;
        }
}

static enum llm_moe_phase moe_phase(const struct phase *ph) { return (enum llm_moe_phase)(ph->kind - PH_MOE_GATHER); }

/* planned with the most units any routing gives (the router's after step
 * sets the real numbers) */
static int64_t moe_units(const struct pass *ps, const struct phase *ph, int64_t *step)
{
    const struct llm_ctx *c = ps->c;
    *step = llm_moe_step(moe_phase(ph), ps->T);
    return llm_moe_units(c->moe, c->m, &c->m->layers[ph->layer], moe_phase(ph), ps->T, true);
}

static void moe_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    struct llm_moe_io io = moe_io(c, ph->layer);
    llm_moe_compute(c->moe, c->m, &c->m->layers[ph->layer], moe_phase(ph), &io, ps->T, u0, u1, scratch);
}

static void moe_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch)
{
    const struct llm_ctx *c = ps->c;
    struct llm_moe_io io = moe_io(c, ph->layer);
    llm_moe_commit(c->moe, c->m, &c->m->layers[ph->layer], moe_phase(ph), &io, ps->T, u0, u1, scratch);
}

/* one token, after the experts' gate/up */
static void moe_glu_one(struct pass *ps, int p)
{
    struct llm_moe_io io = moe_io(ps->c, ps->ph[p].layer);
    llm_moe_after_one(ps->c->moe, ps->c->m, LLM_MOE_GLU, &io);
}

/* one token, after the experts' down: their weighted sum into xb (then
 * qwen35moe's shared expert's phases follow) */
static void moe_down_one(struct pass *ps, int p)
{
    int64_t l = ps->ph[p].layer;
    struct llm_moe_io io = moe_io(ps->c, l);
    llm_moe_after_one(ps->c->moe, ps->c->m, LLM_MOE_DOWN, &io);
    if (!ps->c->m->layers[l].shexp_gate)
        ffn_done_one(ps, l);
}

/* ---- gemma4's per-token phases (one token a unit, as the others) ---- */

/* the commit of a per-token phase: each token's n floats at the start of
 * its scratch into its row of dst (n apart), and where i16 is set their
 * I16 form (act_off bytes into the scratch) into its row of act */
static void commit_rows(const struct llm_ctx *c, int64_t u0, int64_t u1, const void *scratch, float *dst, int64_t n,
                        bool i16, size_t act_off)
{
    size_t per = tok_scratch(c);
    const uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        memcpy(dst + u * n, s, (size_t)n * sizeof(float));
        if (i16)
            memcpy(c->act + (size_t)u * c->act_stride, s + act_off, llm_act_bytes(LLM_ACT_I16, n));
    }
}

/* PH_G4_EMBD: each token's embedding into x, quantized for per_layer_model_proj */
static void g4_embd_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    int64_t E = c->m->n_embd;
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        embed(ps, u, (float *)s);
        if (wants_i16(c, c->m->n_layer, M_PL))
            llm_act16_quantize((float *)s, s + E * sizeof(float), E);
    }
}

static void g4_embd_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, const void *scratch)
{
    const struct llm_ctx *c = ps->c;
    int64_t E = c->m->n_embd;
    commit_rows(c, u0, u1, scratch, c->x, E, wants_i16(c, c->m->n_layer, M_PL), (size_t)E * sizeof(float));
}

/* PH_G4_PL_POST: token t's per-layer inputs from its row of pl (the
 * product of its embedding x), pl (n_layer n_pl) = (RMSNorm_P(pl /
 * sqrt(n_embd)) per_layer_proj_norm + its per_layer_token_embd row
 * sqrt(n_pl)) / sqrt(2), each layer's n_pl normed apart; tmp: n_layer n_pl */
static void g4_pl_post(const struct pass *ps, int64_t t, float *pl, float *tmp)
{
    const struct llm_model *m = ps->c->m;
    int64_t P = m->n_pl, n = m->n_layer * P;
    const float *src = ps->c->pl + t * n;
    float proj_scale = 1.0f / sqrtf((float)m->n_embd), tok_scale = sqrtf((float)P), in_scale = 1.0f / sqrtf(2.0f);
    for (int64_t i = 0; i < n; i++)
        pl[i] = src[i] * proj_scale;
    for (int64_t l = 0; l < m->n_layer; l++)
        rmsnorm(pl + l * P, pl + l * P, m->pl_proj_norm, P, m->rms_eps);
    const struct llm_weight *te = &m->pl_tok_embd;
    te->ops->to_float(te->rows + (size_t)ps->tok[t] * te->m.row_bytes, tmp, n);
    for (int64_t i = 0; i < n; i++)
        pl[i] = (pl[i] + tmp[i] * tok_scale) * in_scale;
}

static void g4_pl_post_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_model *m = ps->c->m;
    size_t per = tok_scratch(ps->c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per)
        g4_pl_post(ps, u, (float *)s, (float *)s + m->n_layer * m->n_pl);
}

static void g4_pl_post_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                              const void *scratch)
{
    commit_rows(ps->c, u0, u1, scratch, ps->c->pl, ps->c->m->n_layer * ps->c->m->n_pl, false, 0);
}

/* PH_G4_MOE_IN: each token's inputs of the experts beside the dense FFN:
 * sh = RMSNorm(the dense FFN's xb) post_ffw_norm_1 (kept for the sum),
 * xr = RMSNorm(x) (no weight) / sqrt(n_embd) ffn_gate_inp.scale (the
 * router's), xn = RMSNorm(x) pre_ffw_norm_2 (the experts'), x the residual
 * after attention; each quantized where its product wants that. Scratch
 * per token: sh, xr, xn, act_r, act */
static void g4_moe_in_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    const struct llm_layer *L = &m->layers[ph->layer];
    int64_t E = m->n_embd;
    float inv = 1.0f / sqrtf((float)E);
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        float *sh = (float *)s, *xr = sh + E, *xn = xr + E;
        uint8_t *act_r = (uint8_t *)(xn + E), *act = act_r + c->act_stride;
        const float *x = c->x + u * E;
        rmsnorm(sh, c->xb + u * E, L->ffn_post_norm_1, E, m->rms_eps);
        rmsnorm(xr, x, NULL, E, m->rms_eps);
        for (int64_t i = 0; i < E; i++)
            xr[i] = (xr[i] * inv) * L->router_scale[i];
        rmsnorm(xn, x, L->ffn_pre_norm_2, E, m->rms_eps);
        if (wants_i16(c, ph->layer, IN_ROUTER))
            llm_act16_quantize(xr, act_r, E);
        if (wants_i16(c, ph->layer, IN_EXP))
            llm_act16_quantize(xn, act, E);
    }
}

static void g4_moe_in_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                             const void *scratch)
{
    struct llm_ctx *c = ps->c;
    int64_t E = c->m->n_embd;
    size_t per = tok_scratch(c), row = (size_t)E * sizeof(float), ab = llm_act_bytes(LLM_ACT_I16, E);
    const uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        memcpy(c->sh + u * E, s, row);
        memcpy(c->xr + u * E, s + row, row);
        memcpy(c->xn + u * E, s + 2 * row, row);
        if (wants_i16(c, ph->layer, IN_ROUTER))
            memcpy(c->act_r + (size_t)u * c->act_stride, s + 3 * row, ab);
        if (wants_i16(c, ph->layer, IN_EXP))
            memcpy(c->act + (size_t)u * c->act_stride, s + 3 * row + c->act_stride, ab);
    }
}

/* PH_G4_MOE_ADD: each token's FFN output, xb = sh + RMSNorm(the experts'
 * sum) post_ffw_norm_2 */
static void g4_moe_add_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t E = m->n_embd;
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        float *y = (float *)s;
        const float *sh = c->sh + u * E;
        rmsnorm(y, c->xb + u * E, m->layers[ph->layer].ffn_post_norm_2, E, m->rms_eps);
        for (int64_t i = 0; i < E; i++)
            y[i] = sh[i] + y[i];
    }
}

/* PH_G4_PLG_IN: each token's x += RMSNorm(the FFN's xb) post_ffw_norm,
 * quantized for inp_gate; scratch per token: x, a temp, act */
static void g4_plg_in_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1, void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t E = m->n_embd;
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        float *x = (float *)s;
        add_block(m, c->x + u * E, c->xb + u * E, m->layers[ph->layer].ffn_post_norm, x, x + E);
        if (wants_i16(c, ph->layer, IN_PL_GATE))
            llm_act16_quantize(x, (uint8_t *)(x + 2 * E), E);
    }
}

static void g4_plg_in_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                             const void *scratch)
{
    const struct llm_ctx *c = ps->c;
    int64_t E = c->m->n_embd;
    commit_rows(c, u0, u1, scratch, c->x, E, wants_i16(c, ph->layer, IN_PL_GATE), 2 * (size_t)E * sizeof(float));
}

/* PH_G4_PLG_POST: each token's pg = gelu(pg) times the layer's per-layer
 * input, quantized for proj; scratch per token: pg, act */
static void g4_plg_post_compute(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                                void *scratch)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t P = m->n_pl;
    size_t per = tok_scratch(c);
    uint8_t *s = scratch;
    for (int64_t u = u0; u < u1; u++, s += per) {
        float *pg = (float *)s;
        const float *g = c->pg + u * P, *pl = c->pl + (u * m->n_layer + ph->layer) * P;
        for (int64_t i = 0; i < P; i++)
            pg[i] = llm_gelu_tanh(g[i]) * pl[i];
        if (wants_i16(c, ph->layer, IN_PL_PROJ))
            llm_act16_quantize(pg, (uint8_t *)(pg + P), P);
    }
}

static void g4_plg_post_commit(const struct pass *ps, const struct phase *ph, int64_t u0, int64_t u1,
                               const void *scratch)
{
    const struct llm_ctx *c = ps->c;
    int64_t P = c->m->n_pl;
    commit_rows(c, u0, u1, scratch, c->pg, P, wants_i16(c, ph->layer, IN_PL_PROJ), (size_t)P * sizeof(float));
}

/* ---- the table ---- */

#define TOKENS(nm, f) {.name = nm, .units = tokens_units, .compute = f##_compute, .commit = f##_commit}
#define PRODUCT(nm, d, one) \
    {.name = nm, .units = product_units, .compute = product_compute, .commit = product_commit, .after_one = one, \
     .describe = d}
#define MOE(nm, one) {.name = nm, .units = moe_units, .compute = moe_compute, .commit = moe_commit, .after_one = one}

static const struct phase_kind kinds[PH_COUNT] = {
    [PH_ATTN_IN] = TOKENS("attn_in", norm),
    [PH_QKV] = PRODUCT("qkv", describe_qkv, qkv_one),
    [PH_QKV_POST] = TOKENS("qkv_post", qkv_post),
    [PH_ATTN] = {.name = "attn", .units = att_units, .compute = attention_compute, .commit = attention_commit,
                 .after_one = att_one},
    [PH_CONV] = {.name = "conv", .units = tokens_units, .compute = conv_compute, .commit = conv_commit,
                 .after = conv_after},
    [PH_RECUR] = {.name = "recur", .units = recur_units, .compute = recur_compute, .commit = recur_commit,
                  .after_one = att_one},
    [PH_WO_IN] = TOKENS("wo_in", quant),
    [PH_WO] = PRODUCT("wo", describe_wo, wo_one),
    [PH_FFN_IN] = TOKENS("ffn_in", norm),
    [PH_GLU] = PRODUCT("glu", describe_glu, glu_one),
    [PH_DOWN_IN] = TOKENS("down_in", quant),
    [PH_DOWN] = PRODUCT("down", describe_down, down_one),
    [PH_OUT_IN] = TOKENS("out_in", norm),
    [PH_LOGITS] = PRODUCT("logits", describe_logits, NULL),
    [PH_MOE_ROUTER] = {.name = "moe_router", .units = product_units, .compute = product_compute,
                       .commit = product_commit, .after = moe_routed, .describe = describe_router},
    [PH_MOE_GATHER] = MOE("moe_gather", NULL),
    [PH_MOE_GLU] = MOE("moe_glu", moe_glu_one),
    [PH_MOE_DOWN_IN] = MOE("moe_down_in", NULL),
    [PH_MOE_DOWN] = MOE("moe_down", moe_down_one),
    [PH_MOE_SUM] = MOE("moe_sum", NULL),
    [PH_SHEXP_ADD] = TOKENS("shexp_add", shexp),
    [PH_G4_EMBD] = TOKENS("g4_embd", g4_embd),
    [PH_G4_PL] = PRODUCT("g4_pl", describe_pl, NULL),
    [PH_G4_PL_POST] = TOKENS("g4_pl_post", g4_pl_post),
    [PH_G4_MOE_IN] = TOKENS("g4_moe_in", g4_moe_in),
    [PH_G4_MOE_ADD] = {.name = "g4_moe_add", .units = tokens_units, .compute = g4_moe_add_compute,
                       .commit = shexp_commit},
    [PH_G4_PLG_IN] = TOKENS("g4_plg_in", g4_plg_in),
    [PH_G4_PLG] = PRODUCT("g4_plg", describe_plg, NULL),
    [PH_G4_PLG_POST] = TOKENS("g4_plg_post", g4_plg_post),
    [PH_G4_PLP] = PRODUCT("g4_plp", describe_plp, NULL),
};

#undef TOKENS
#undef PRODUCT
#undef MOE

/* ==== the pool's callbacks: phase p's kind does it ==== */

static void run_compute(void *arg, int p, int64_t u0, int64_t u1, void *scratch)
{
    struct pass *ps = arg;
    if (!stopping(ps))
        kinds[ps->ph[p].kind].compute(ps, &ps->ph[p], u0, u1, scratch);
}

static void run_commit(void *arg, int p, int64_t u0, int64_t u1, const void *scratch)
{
    struct pass *ps = arg;
    if (!atomic_load_explicit(&ps->stopped, memory_order_relaxed))
        kinds[ps->ph[p].kind].commit(ps, &ps->ph[p], u0, u1, scratch);
}

static void run_after(void *arg, int p)
{
    struct pass *ps = arg;
    if (atomic_load_explicit(&ps->stopped, memory_order_relaxed))
        return;
    const struct phase_kind *k = &kinds[ps->ph[p].kind];
    if (k->after)
        k->after(ps, p);
    if (ps->one && k->after_one)
        k->after_one(ps, p);
    else if (ps->T > 1) /* a prefill pass: how far it is */
        atomic_store_explicit(&ps->c->progress, ps->n_past + ps->T * (p + 1) / ps->n_ph, memory_order_relaxed);
}

/* ==== a pass ==== */

static void add_phase(struct pass *ps, int kind, int64_t layer)
{
    struct phase ph = {kind, (int)layer};
    int64_t step, units = kinds[kind].units(ps, &ph, &step);
    ps->ph[ps->n_ph] = ph;
    ps->pp[ps->n_ph] = (struct llm_pool_phase){units > 0 ? units : 1, step};
    ps->n_ph++;
}

/* the router of layer l's experts, then moe.c's phases */
static void plan_moe(struct pass *ps, int64_t l)
{
    add_phase(ps, PH_MOE_ROUTER, l);
    for (int k = LLM_MOE_GATHER; k < LLM_MOE_PHASE_COUNT; k++) {
        if (ps->one && k != LLM_MOE_GLU && k != LLM_MOE_DOWN)
            continue; /* one token: the per-row steps are after steps */
        if (k == LLM_MOE_DOWN_IN && !wants_i16(ps->c, l, moe_down_in(ps->c->m)))
            continue;
        add_phase(ps, PH_MOE_GATHER + k, l);
    }
}

/* the phases of a pass of ps->T tokens (one token: the per-token phases
 * are the kinds' after_one steps instead, but for gemma4, whose steps
 * between the products are phases for any number of tokens) */
static void plan(struct pass *ps)
{
    const struct llm_ctx *c = ps->c;
    const struct llm_model *m = c->m;
    int64_t T = ps->T, nl = m->n_layer;
    bool g4 = m->arch == LLM_ARCH_GEMMA4;
    bool one = ps->one = T == 1 && !g4;
    ps->n_ph = 0;
    if (g4 && m->n_pl > 0) { /* the per-layer inputs */
        add_phase(ps, PH_G4_EMBD, nl);
        add_phase(ps, PH_G4_PL, nl);
        add_phase(ps, PH_G4_PL_POST, nl);
    }
    if (!one)
        add_phase(ps, PH_ATTN_IN, 0);
    for (int64_t l = 0; l < nl; l++) {
        const struct llm_layer *L = &c->m->layers[l];
        add_phase(ps, PH_QKV, l);
        if (L->recurrent) {
            if (!one)
                add_phase(ps, PH_CONV, l);
            add_phase(ps, PH_RECUR, l);
        } else {
            if (!one)
                add_phase(ps, PH_QKV_POST, l);
            add_phase(ps, PH_ATTN, l);
        }
        if (!one && wants_i16(c, l, IN_WO))
            add_phase(ps, PH_WO_IN, l);
        add_phase(ps, PH_WO, l);
        if (!one)
            add_phase(ps, PH_FFN_IN, l);
        if (L->exp_gate && !g4) /* the experts instead of the FFN (qwen35moe: before the shared one) */
            plan_moe(ps, l);
        if (!L->exp_gate || L->shexp_gate || g4) {
            add_phase(ps, PH_GLU, l);
            if (!one && wants_i16(c, l, IN_DOWN))
                add_phase(ps, PH_DOWN_IN, l);
            add_phase(ps, PH_DOWN, l);
            if (!one && L->shexp_gate)
                add_phase(ps, PH_SHEXP_ADD, l);
        }
        if (L->exp_gate && g4) { /* gemma4's experts beside the dense FFN */
            add_phase(ps, PH_G4_MOE_IN, l);
            plan_moe(ps, l);
            add_phase(ps, PH_G4_MOE_ADD, l);
        }
        if (g4 && m->n_pl > 0) { /* the per-layer input's block */
            add_phase(ps, PH_G4_PLG_IN, l);
            add_phase(ps, PH_G4_PLG, l);
            add_phase(ps, PH_G4_PLG_POST, l);
            add_phase(ps, PH_G4_PLP, l);
        }
        if (!one && l + 1 < nl)
            add_phase(ps, PH_ATTN_IN, l + 1);
    }
    if (ps->n_out) {
        if (!one)
            add_phase(ps, PH_OUT_IN, nl);
        add_phase(ps, PH_LOGITS, nl);
    }
}

static int64_t max_chunks_of(const struct pass *ps)
{
    int64_t mx = 1;
    for (int p = 0; p < ps->n_ph; p++) {
        int64_t n = (ps->pp[p].n_units + ps->pp[p].step - 1) / ps->pp[p].step;
        mx = n > mx ? n : mx;
    }
    return mx;
}

/* tokens [0, T) at positions n_past.. through the model, with the logits
 * of the last n_out; false if the interrupt stopped it (n_past is then as
 * it was) */
static bool forward(struct llm_ctx *c, const int32_t *tok, int64_t T, int64_t n_out)
{
    struct pass *ps = &c->passes[llm_pool_slot(c->pool)];
    ps->T = T;
    ps->n_past = c->n_past;
    ps->n_out = n_out;
    ps->cap_t = c->cap_pos > c->n_past && c->cap_pos < c->n_past + T ? c->cap_pos - c->n_past : 0;
    atomic_store(&ps->stopped, 0);
    if (c->interrupt && *c->interrupt)
        return false;
    memcpy(ps->tok, tok, (size_t)T * sizeof *tok);
    plan(ps);
    if (ps->one) { /* the first per-token step, here; the others after each phase */
        rope_cache(c, c->n_past, c->rope_cs);
        residual_norm(ps, 0, false, 0, c->x, c->xn, c->act);
    }
    ps->job = (struct llm_pool_job){ps->n_ph, ps->pp, ps, run_compute, run_commit, run_after};
    llm_pool_run(c->pool, &ps->job);
    if (atomic_load(&ps->stopped))
        return false;
    if (c->rstate_floats) { /* every recurrent layer's window and matrices were written */
        float *t = c->rstate;
        c->rstate = c->rstate_next;
        c->rstate_next = t;
    }
    c->n_past += T;
    return true;
}

static int decode(struct llm_ctx *c, const int32_t *tokens, int64_t n, int64_t n_out)
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
    if (!c->rstate_ok)
        return set_err(c, LLM_ERR, "the recurrent state does not match the %" PRId64 " positions in the "
                       "context (restore it, or truncate to 0)", c->n_past);
    /* a stopped pass leaves the recurrent state as it was (rstate_next);
     * a decode of several passes keeps the state it started from, to put
     * back if a later pass is stopped */
    bool bak = c->rstate_floats && n > c->n_batch && c->interrupt;
    if (bak && !c->rstate_bak && !(c->rstate_bak = malloc(c->rstate_floats * sizeof(float))))
        return set_err(c, LLM_ERR, "out of memory");
    if (bak)
        memcpy(c->rstate_bak, c->rstate, c->rstate_floats * sizeof(float));
    c->logits_valid = false;
    if (llm_model_first_pass(c->m))
        return set_err(c, LLM_ERR, "cannot read the packed weights' cache file");
    kv_reserve(c, c->n_past + n);
    int64_t start = c->n_past;
    for (int64_t i = 0; i < n;) {
        int64_t T = n - i < c->n_batch ? n - i : c->n_batch;
        if (!forward(c, tokens + i, T, i + T == n ? n_out : 0)) {
            c->n_past = start;
            if (bak)
                memcpy(c->rstate, c->rstate_bak, c->rstate_floats * sizeof(float));
            atomic_store(&c->progress, start);
            return set_err(c, LLM_ERR_INTERRUPTED, "interrupted");
        }
        i += T;
        if (c->cap_pos == c->n_past) /* the capture at a pass's end */
            memcpy(c->cap_buf, c->rstate, c->rstate_floats * sizeof(float));
        atomic_store_explicit(&c->progress, c->n_past, memory_order_relaxed);
    }
    c->n_out = n_out;
    c->logits_valid = true;
    return LLM_OK;
}

int llm_ctx_decode(struct llm_ctx *c, const int32_t *tokens, int64_t n) { return decode(c, tokens, n, 1); }

int llm_ctx_decode_outputs(struct llm_ctx *c, const int32_t *tokens, int64_t n)
{
    if (n > c->n_out_cap || n > c->n_batch)
        return set_err(c, LLM_ERR, "%" PRId64 " rows of logits in one pass, more than the %" PRId64
                       " reserved", n, c->n_out_cap < c->n_batch ? c->n_out_cap : c->n_batch);
    return decode(c, tokens, n, n);
}

int llm_ctx_reserve_outputs(struct llm_ctx *c, int64_t n)
{
    if (n < 1 || n > LLM_CTX_MAX_OUTPUTS)
        return set_err(c, LLM_ERR, "cannot keep %" PRId64 " rows of logits (1 to %d)", n, LLM_CTX_MAX_OUTPUTS);
    if (n <= c->n_out_cap)
        return LLM_OK;
    size_t bytes = (size_t)n * (size_t)c->m->n_vocab * sizeof(float);
    float *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
        return set_err(c, LLM_ERR, "out of memory for %" PRId64 " rows of logits", n);
    if (c->logits_valid)
        memcpy(p, c->logits, (size_t)c->n_out * (size_t)c->m->n_vocab * sizeof(float));
    free(c->logits);
    c->logits = p;
    c->n_out_cap = n;
    return LLM_OK;
}

int llm_ctx_decode_capture(struct llm_ctx *c, const int32_t *tokens, int64_t n, int64_t at, void *buf, size_t size)
{
    if (!c->rstate_floats)
        return llm_ctx_decode(c, tokens, n);
    if (at <= 0 || at > n || size != llm_ctx_rstate_size(c))
        return set_err(c, LLM_ERR, "cannot capture the recurrent state after %" PRId64 " of %" PRId64
                       " tokens in %zu bytes", at, n, size);
    c->cap_pos = c->n_past + at;
    c->cap_buf = buf;
    int rc = llm_ctx_decode(c, tokens, n);
    c->cap_pos = 0;
    c->cap_buf = NULL;
    return rc;
}

void llm_ctx_set_interrupt(struct llm_ctx *c, volatile sig_atomic_t *flag) { c->interrupt = flag; }

int64_t llm_ctx_progress(const struct llm_ctx *c)
{
    return atomic_load_explicit(&((struct llm_ctx *)c)->progress, memory_order_relaxed);
}

/* ==== the context ==== */

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
    return (struct llm_ctx_params){.n_ctx = 0, .n_batch = 512, .n_threads = 0, .kv_type = LLM_TYPE_F16};
}

/* the KV cache: one mapping, in transparent huge pages where the kernel
 * has them (fewer TLB misses in attention, and fresh memory comes much
 * cheaper by the huge page: on the 2-core VMs we measure on, 4 KiB pages
 * cost 3-4 times as much per MB), faulted in as positions come into use
 * (kv_reserve) */
/* the KV layer kl's owner (its rows' shape: head_dim, n_head_kv, kv_dim) */
static const struct llm_layer *kv_layer(const struct llm_model *m, int64_t kl)
{
    return &m->layers[m->kv_owner[kl]];
}

/* bytes of K (or of V) of KV layer kl in the mapping */
static size_t kv_layer_bytes(const struct llm_model *m, int64_t kl, int64_t n_ctx, size_t elt)
{
    return ((size_t)(kv_layer(m, kl)->kv_dim * n_ctx) * elt + 63) / 64 * 64;
}

static bool kv_map(struct llm_ctx *c)
{
    const struct llm_model *m = c->m;
    size_t nkv = (size_t)m->n_layer_kv, total = 0;
    c->k_cache = calloc(nkv ? nkv : 1, sizeof *c->k_cache);
    c->v_cache = calloc(nkv ? nkv : 1, sizeof *c->v_cache);
    if (!c->k_cache || !c->v_cache)
        return false;
    for (int64_t l = 0; l < m->n_layer_kv; l++)
        total += 2 * kv_layer_bytes(m, l, c->n_ctx, c->kv_elt);
    c->kv_map_bytes = total + KV_ALIGN;
    void *map = mmap(NULL, c->kv_map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return false;
    c->kv_map = map;
    uint8_t *base = (uint8_t *)(((uintptr_t)map + KV_ALIGN - 1) / KV_ALIGN * KV_ALIGN);
    size_t n = c->kv_map_bytes - (size_t)(base - (uint8_t *)map);
#ifdef MADV_HUGEPAGE
    madvise(base, n, MADV_HUGEPAGE);
#endif
    for (int64_t l = 0; l < m->n_layer_kv; l++) {
        size_t lb = kv_layer_bytes(m, l, c->n_ctx, c->kv_elt);
        c->k_cache[l] = base;
        c->v_cache[l] = base + lb;
        base += 2 * lb;
    }
    return true;
}

/* Positions [0, p) of every head's K and V rows faulted in (zeroed pages
 * mapped) before they are written, KV_READY_STEP positions at a time, in
 * one call per head: restoring blocks is then a copy rather than page
 * faults, and a turn zeroes only the rows it uses, not the n_ctx of the
 * context. Where the kernel cannot (too old, or not enough memory now) the
 * pages come on first use: never a memset that the OOM killer would
 * answer. */
static void kv_reserve(struct llm_ctx *c, int64_t p)
{
    if (p <= c->kv_ready)
        return;
    p = (p + KV_READY_STEP - 1) / KV_READY_STEP * KV_READY_STEP;
    p = p < c->n_ctx ? p : c->n_ctx;
#ifdef MADV_POPULATE_WRITE
    const struct llm_model *m = c->m;
    size_t pg = 4096;
    for (int64_t l = 0; l < m->n_layer_kv; l++)
        for (int kv = 0; kv < 2; kv++)
            for (int64_t g = 0; g < kv_layer(m, l)->n_head_kv; g++) {
                size_t row = (size_t)kv_layer(m, l)->head_dim * c->kv_elt;
                uint8_t *h = (kv ? c->v_cache[l] : c->k_cache[l]) + (size_t)(g * c->n_ctx) * row;
                uintptr_t a = (uintptr_t)(h + (size_t)c->kv_ready * row) / pg * pg;
                uintptr_t b = (uintptr_t)(h + (size_t)p * row);
                (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
            }
#endif
    c->kv_ready = p;
}

/* which product inputs want I16 activations, and the largest I16 row */
/* the weights that read input `in` of layer l (l = n_layer: model-wide
 * input M_*), into w (5 at most): their number */
static int input_weights(const struct llm_model *m, int64_t l, int in, const struct llm_weight **w)
{
    if (l < m->n_layer)
        return layer_weights(m, &m->layers[l], in, w);
    w[0] = in == M_OUTPUT ? &m->output : &m->pl_model_proj;
    return in == M_OUTPUT || (in == M_PL && m->n_pl > 0);
}

static void plan_inputs(struct llm_ctx *c)
{
    const struct llm_model *m = c->m;
    c->act_stride = 64;
    for (int64_t l = 0; l <= m->n_layer; l++) {
        for (int in = 0; in < (l < m->n_layer ? IN_COUNT : M_COUNT); in++) {
            const struct llm_weight *ws[8];
            int nw = input_weights(m, l, in, ws);
            bool i16 = false;
            for (int i = 0; i < nw; i++)
                i16 = i16 || ws[i]->mm->act == LLM_ACT_I16;
            c->i16_in[l * IN_COUNT + in] = i16;
            for (int i = 0; i < (i16 ? nw : 0); i++) { /* the widest (qwen35moe's down inputs differ) */
                size_t b = (llm_act_bytes(LLM_ACT_I16, ws[i]->m.n_in) + 63) / 64 * 64;
                c->act_stride = b > c->act_stride ? b : c->act_stride;
            }
        }
    }
}

/* bytes of scratch a thread needs for any unit */
static size_t scratch_bytes(const struct llm_ctx *c)
{
    const struct llm_model *m = c->m;
    size_t n_out = CHUNK_FLOATS;
    size_t ws = 0;
    for (int64_t l = 0; l <= m->n_layer; l++) {
        const struct llm_weight *w[5 * IN_COUNT];
        int nw = 0;
        for (int in = 0; in < (l < m->n_layer ? IN_COUNT : M_COUNT); in++)
            nw += input_weights(m, l, in, w + nw);
        for (int i = 0; i < nw; i++) {
            size_t s = w[i]->mm->gemm_scratch(w[i]->m.n_in);
            ws = s > ws ? s : ws;
        }
    }
    size_t mm = 3 * n_out * sizeof(float) + ws + 256;
    /* a unit's rows (pass_att_rows) times its heads and keys: at most
     * ATT_SCORES scores, or one row's over the whole context */
    size_t att_out = ((size_t)(ATT_ROWS * c->att_per * m->head_dim) + 15) / 16 * 16;
    size_t scores = (size_t)(c->att_per * c->n_ctx) > (size_t)ATT_SCORES ? (size_t)(c->att_per * c->n_ctx) : ATT_SCORES;
    size_t att = (att_out + scores + 16 + llm_attn_scratch_floats(ATT_ROWS * c->att_per, m->head_dim, 0)) * sizeof(float);
    size_t tok = tok_scratch_bytes(c), mx = mm > att ? mm : att;
    if (m->n_layer_rec) { /* PH_RECUR: a head's matrix, its n_batch output rows, the matrix captured */
        size_t r = (size_t)(m->ssm_state * (2 * m->ssm_state + c->n_batch)) * sizeof(float);
        mx = r > mx ? r : mx;
    }
    if (m->n_layer_moe) {
        size_t r = llm_moe_scratch_bytes(m);
        mx = r > mx ? r : mx;
    }
    return mx > tok ? mx : tok;
}

int llm_ctx_init(struct llm_model *m, struct llm_ctx_params p, struct llm_ctx **out, char *err, size_t err_size)
{
    *out = NULL;
    if (!m->layers) {
        snprintf(err, err_size, "the model was opened without its tensors");
        return -1;
    }
    if (!m->computable) { /* opened for the reference pass only */
        snprintf(err, err_size, "architecture '%s' is not supported yet", m->meta.arch);
        return -1;
    }
    if (p.kv_type != LLM_TYPE_F16 && p.kv_type != LLM_TYPE_F32) {
        snprintf(err, err_size, "KV cache type %s is not supported (f16, f32 are)", llm_type_name(p.kv_type));
        return -1;
    }
    int64_t n_ctx = p.n_ctx > 0 ? p.n_ctx : (m->n_ctx_train < 4096 ? m->n_ctx_train : 4096);
    if (n_ctx > (1 << 24)) {
        snprintf(err, err_size, "context size %" PRId64 " is too large", n_ctx);
        return -1;
    }
    /* a KV cache larger than the memory left is refused with the numbers,
     * not faulted in until the OOM killer ends the process (memavail.c) */
    uint64_t kv_need = 0, avail;
    for (int64_t l = 0; l < m->n_layer_kv; l++)
        kv_need += 2 * (uint64_t)kv_layer_bytes(m, l, n_ctx, p.kv_type == LLM_TYPE_F32 ? 4 : 2);
    char avail_what[4400];
    if (llm_mem_available(&avail, avail_what, sizeof avail_what) && kv_need > avail) {
        snprintf(err, err_size,
                 "the KV cache of %" PRId64 " positions needs %.1f MiB, more than the %.1f MiB of memory "
                 "available (%s): use a smaller context",
                 n_ctx, (double)kv_need / (1 << 20), (double)avail / (1 << 20), avail_what);
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
    c->rope_factors = llm_model_rope_factors(m, n_ctx);
    c->n_rope = 1;
    c->rope_base[0] = m->rope_base;
    c->rope_scale[0] = m->rope_freq_scale;
    c->rope_dims[0] = c->rope_stride = m->rope_dim;
    c->rope_ff[0] = c->rope_factors;
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        /* gemma4: the local layers' own dimensions, and no factors (rope_freqs are the global layers') */
        const float *ff = m->arch == LLM_ARCH_GEMMA4 ? L->rope_freqs : c->rope_factors;
        if (L->swa && (L->rope_base != m->rope_base || L->rope_freq_scale != m->rope_freq_scale ||
                       L->rope_dim != m->rope_dim || ff != c->rope_factors)) {
            c->n_rope = 2; /* every sliding-window layer has the same (model.c) */
            c->rope_base[1] = L->rope_base;
            c->rope_scale[1] = L->rope_freq_scale;
            c->rope_dims[1] = L->rope_dim;
            c->rope_ff[1] = ff;
            c->rope_stride = L->rope_dim > m->rope_dim ? L->rope_dim : m->rope_dim;
        }
    }

    bool ok = kv_map(c);
    size_t f = sizeof(float);
    int64_t B = c->n_batch;
    c->i16_in = calloc((size_t)(m->n_layer * IN_COUNT + M_COUNT), sizeof *c->i16_in);
    if (!c->i16_in)
        ok = false;
    else
        plan_inputs(c);
    c->logits = alloc((size_t)m->n_vocab * f, &ok);
    c->n_out_cap = 1;
    c->x = alloc((size_t)(B * m->n_embd) * f, &ok);
    c->xb = alloc((size_t)(B * m->n_embd) * f, &ok);
    c->xn = alloc((size_t)(B * m->n_embd) * f, &ok);
    c->act = alloc(c->act_stride * (size_t)B, &ok);
    c->qkv = alloc((size_t)(B * m->qkv_width) * f, &ok);
    c->att_width = m->q_dim > m->ssm_heads * m->ssm_state ? m->q_dim : m->ssm_heads * m->ssm_state;
    c->att = alloc((size_t)(B * c->att_width) * f, &ok);
    c->rstate_floats = llm_model_rstate_layer_floats(m) * (uint64_t)m->n_layer_rec;
    c->rstate_ok = true;
    if (m->n_layer_rec) {
        c->rq = alloc((size_t)(B * llm_dn_rq_width(m)) * f, &ok);
        /* the two states in huge pages where the kernel has them (each is
         * 19-50 MiB: fresh memory comes cheaper so), zeros as mapped */
        size_t one = (c->rstate_floats * f + KV_ALIGN - 1) / KV_ALIGN * KV_ALIGN;
        c->rstate_map_bytes = 2 * one + KV_ALIGN;
        void *map = mmap(NULL, c->rstate_map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) {
            ok = false;
        } else {
            c->rstate_map = map;
            uint8_t *base = (uint8_t *)(((uintptr_t)map + KV_ALIGN - 1) / KV_ALIGN * KV_ALIGN);
#ifdef MADV_HUGEPAGE
            if (c->rstate_floats * f >= KV_ALIGN) /* (a small one would zero a whole huge page) */
                madvise(base, 2 * one, MADV_HUGEPAGE);
#endif
            c->rstate = (float *)base;
            c->rstate_next = (float *)(base + one);
        }
    }
    c->h = alloc((size_t)(B * m->n_ff) * f, &ok);
    if (m->n_layer_moe && m->layers[0].shexp_gate)
        c->sh = alloc((size_t)(B * m->n_embd) * f, &ok);
    c->rope_cs = alloc((size_t)(B * c->n_rope * c->rope_stride) * f, &ok);
    if (m->arch == LLM_ARCH_GEMMA4) {
        c->pl = alloc((size_t)(B * m->n_layer * m->n_pl) * f, &ok);
        c->pg = alloc((size_t)(B * m->n_pl) * f, &ok);
        if (m->n_layer_moe) {
            c->sh = alloc((size_t)(B * m->n_embd) * f, &ok);
            c->xr = alloc((size_t)(B * m->n_embd) * f, &ok);
            c->act_r = alloc(c->act_stride * (size_t)B, &ok);
        }
    }
    c->serial_tmp = alloc((size_t)(2 * m->kv_dim + 2 * m->q_dim) * f, &ok);
    c->serial_kv = alloc((size_t)(2 * m->kv_dim) * c->kv_elt, &ok);
    /* enough attention units for every thread, each KV head's rows converted as few times as that allows */
    c->att_per = 1;
    for (int64_t l = 0; l < m->n_layer; l++) {
        int64_t per = layer_att_split(c, l).per;
        c->att_per = per > c->att_per ? per : c->att_per;
    }
    /* 10 a layer, 13 with experts, 17 with a shared one; gemma4: 22 with experts or per-layer inputs */
    c->max_phases = (int)(m->n_layer * 24 + 6);
    if (m->n_layer_moe && !(c->moe = llm_moe_init(m, B)))
        ok = false;
    for (int s = 0; s < 2; s++) {
        c->passes[s].c = c;
        c->passes[s].tok = alloc((size_t)B * sizeof(int32_t), &ok);
        c->passes[s].ph = alloc((size_t)c->max_phases * sizeof(struct phase), &ok);
        c->passes[s].pp = alloc((size_t)c->max_phases * sizeof(struct llm_pool_phase), &ok);
    }
    int64_t max_chunks = 1;
    if (ok) { /* the largest phases: one token, and a full pass at the start and at the end of
               * the context (attention's units are smallest there: pass_att_rows), and a
               * pass with the most rows of logits (llm_ctx_decode_outputs) */
        struct pass *ps = &c->passes[0];
        for (int k = 0; k < 4; k++) {
            ps->T = k == 3 ? (B < LLM_CTX_MAX_OUTPUTS ? B : LLM_CTX_MAX_OUTPUTS) : k ? B : 1;
            ps->n_out = k == 3 ? ps->T : 1;
            ps->n_past = k == 2 && n_ctx > B ? n_ctx - B : 0;
            plan(ps);
            int64_t mc = max_chunks_of(ps);
            max_chunks = mc > max_chunks ? mc : max_chunks;
        }
    }
    if (ok && llm_pool_init(c->n_threads, scratch_bytes(c), max_chunks, &c->pool))
        ok = false;
    if (!ok) {
        llm_ctx_free(c);
        snprintf(err, err_size, "out of memory for a context of %" PRId64 " positions", n_ctx);
        return -1;
    }
    *out = c;
    return 0;
}

void llm_ctx_free(struct llm_ctx *c)
{
    if (!c)
        return;
    llm_pool_free(c->pool);
    llm_moe_free(c->moe);
    if (c->kv_map)
        munmap(c->kv_map, c->kv_map_bytes);
    if (c->rstate_map)
        munmap(c->rstate_map, c->rstate_map_bytes);
    BASE_FREE(c->k_cache, c->v_cache, c->logits, c->x, c->xb, c->xn, c->act, c->qkv, c->att, c->h, c->sh, c->rope_cs,
              c->serial_tmp, c->serial_kv, c->i16_in, c->rq, c->rstate_bak, c->pl, c->pg, c->xr, c->act_r);
    for (int s = 0; s < 2; s++)
        BASE_FREE(c->passes[s].tok, c->passes[s].ph, c->passes[s].pp);
    free(c);
}

const char *llm_ctx_errmsg(const struct llm_ctx *c) { return c->errmsg; }
const float *llm_ctx_logits(const struct llm_ctx *c)
{
    return c->logits_valid ? c->logits + (size_t)(c->n_out - 1) * (size_t)c->m->n_vocab : NULL;
}

const float *llm_ctx_logits_ith(const struct llm_ctx *c, int64_t i)
{
    return c->logits_valid && i >= 0 && i < c->n_out ? c->logits + (size_t)i * (size_t)c->m->n_vocab : NULL;
}
int64_t llm_ctx_n_past(const struct llm_ctx *c) { return c->n_past; }
int64_t llm_ctx_n_ctx(const struct llm_ctx *c) { return c->n_ctx; }
int llm_ctx_n_threads(const struct llm_ctx *c) { return c->n_threads; }
uint32_t llm_ctx_kv_type(const struct llm_ctx *c) { return c->kv_type; }
int llm_ctx_kv_variant(const struct llm_ctx *c)
{
    return c->rope_factors && c->rope_factors == c->m->rope_factors_long && !c->m->rope_freqs;
}

/* ==== the KV cache as rows ==== */

uint64_t llm_ctx_kv_bytes(const struct llm_ctx *c, int64_t n_pos)
{
    return (uint64_t)n_pos * (uint64_t)c->m->kv_unit * 2 * c->kv_elt * (uint64_t)c->m->n_kv_runs;
}

/* the context now holds n positions by other means than decoding: the
 * recurrent state is the initial one at 0, else it no longer matches */
static void rstate_moved(struct llm_ctx *c, int64_t n)
{
    if (!c->rstate_floats)
        return;
    c->rstate_ok = n == 0;
    if (n == 0)
        memset(c->rstate, 0, c->rstate_floats * sizeof(float));
}

int llm_ctx_truncate(struct llm_ctx *c, int64_t n)
{
    if (n < 0 || n > c->n_past)
        return set_err(c, LLM_ERR, "cannot truncate to %" PRId64 " of %" PRId64 " positions", n,
                       c->n_past);
    if (n < c->n_past)
        rstate_moved(c, n);
    c->n_past = n;
    atomic_store_explicit(&c->progress, n, memory_order_relaxed);
    c->logits_valid = false;
    return LLM_OK;
}

uint64_t llm_ctx_kv_size(const struct llm_ctx *c, int64_t a, int64_t b)
{
    return b > a ? llm_ctx_kv_bytes(c, b - a) : 0;
}

/* where run r's K (kv = 0) or V rows of positions [a, b) are (llm.h:
 * llm_ctx_kv_rows): a layer's rows are its heads' (each [n_ctx][head_dim]),
 * and a run of kv_unit elements a position is some whole heads, or a part
 * of one head's rows (gemma4's global layers, wider than the local ones) */
static void kv_run(const struct llm_ctx *c, int64_t r, int kv, int64_t a, int64_t b, uint8_t **base, size_t *stride,
                   int64_t *n_chunks, size_t *chunk_bytes)
{
    const struct llm_model *m = c->m;
    int64_t kl = 0, u = m->kv_unit;
    while (kl + 1 < m->n_layer_kv && r >= kv_layer(m, kl)->kv_dim / u)
        r -= kv_layer(m, kl++)->kv_dim / u;
    int64_t hd = kv_layer(m, kl)->head_dim;
    size_t row = (size_t)hd * c->kv_elt;
    uint8_t *cache = kv ? c->v_cache[kl] : c->k_cache[kl];
    *stride = (size_t)c->n_ctx * row;
    if (u >= hd) { /* heads [r u / hd, (r + 1) u / hd) */
        *base = cache + (size_t)(r * (u / hd) * c->n_ctx + a) * row;
        *n_chunks = u / hd;
        *chunk_bytes = (size_t)(b - a) * row;
    } else { /* part r % (hd / u) of head r / (hd / u)'s rows */
        int64_t q = hd / u;
        size_t part = (size_t)(b - a) * (size_t)u * c->kv_elt;
        *base = cache + (size_t)(r / q * c->n_ctx + a) * row + (size_t)(r % q) * part;
        *n_chunks = 1;
        *chunk_bytes = part;
    }
}

/* copy rows [a, b) between the cache and buf, in the export layout */
static void kv_copy(const struct llm_ctx *c, int64_t a, int64_t b, uint8_t *buf, bool to_cache)
{
    for (int64_t r = 0; r < c->m->n_kv_runs; r++)
        for (int kv = 0; kv < 2; kv++) {
            uint8_t *base;
            size_t stride, span;
            int64_t n;
            kv_run(c, r, kv, a, b, &base, &stride, &n, &span);
            for (int64_t g = 0; g < n; g++) {
                uint8_t *p = base + (size_t)g * stride;
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
    if (l < 0 || l >= m->n_kv_runs || kv < 0 || kv > 1 || a < 0 || a > c->n_past || b < a || b > c->n_ctx)
        return set_err(c, LLM_ERR, "no KV rows for layer %" PRId64 " positions [%" PRId64 ", %" PRId64 ")",
                       l, a, b);
    kv_reserve(c, b);
    kv_run(c, l, kv, a, b, base, stride, n_chunks, chunk_bytes);
    return LLM_OK;
}

int llm_ctx_kv_commit(struct llm_ctx *c, int64_t b)
{
    if (b < 0 || b > c->n_ctx)
        return set_err(c, LLM_ERR, "cannot commit %" PRId64 " positions of %" PRId64, b, c->n_ctx);
    rstate_moved(c, b);
    c->n_past = b;
    atomic_store_explicit(&c->progress, b, memory_order_relaxed);
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
    kv_reserve(c, b);
    kv_copy(c, a, b, (uint8_t *)buf, true);
    rstate_moved(c, b);
    c->n_past = b;
    atomic_store_explicit(&c->progress, b, memory_order_relaxed);
    c->logits_valid = false;
    return LLM_OK;
}

/* ==== the recurrent state ==== */

uint64_t llm_ctx_rstate_size(const struct llm_ctx *c) { return c->rstate_floats * sizeof(float); }

bool llm_ctx_rstate_valid(const struct llm_ctx *c) { return c->rstate_ok; }

void *llm_ctx_rstate_memory(struct llm_ctx *c)
{
    if (c->rstate_floats)
        c->rstate_ok = false;
    return c->rstate;
}

int64_t llm_ctx_rstate_export(const struct llm_ctx *c, void *buf, size_t size)
{
    uint64_t need = llm_ctx_rstate_size(c);
    if (!c->rstate_ok)
        return LLM_ERR;
    if (size < need)
        return -(int64_t)need;
    if (need)
        memcpy(buf, c->rstate, need); /* f32 in host order: little-endian on kvchat's targets */
    return (int64_t)need;
}

int llm_ctx_rstate_import(struct llm_ctx *c, const void *buf, size_t size)
{
    if (size != llm_ctx_rstate_size(c))
        return set_err(c, LLM_ERR, "a recurrent state of %zu bytes, expected %" PRIu64, size,
                       llm_ctx_rstate_size(c));
    if (size && buf != c->rstate)
        memcpy(c->rstate, buf, size);
    c->rstate_ok = true;
    c->logits_valid = false;
    return LLM_OK;
}
