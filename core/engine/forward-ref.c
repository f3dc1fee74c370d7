/*
 * forward-ref.c - the reference forward pass: the transformer of every
 * architecture the engine runs (llama, qwen2, qwen3, gemma2, gemma3, phi3,
 * qwen35, qwen3moe, qwen35moe, gpt-oss, gemma4; gemma4's also tested
 * against llama.cpp and the float64 pass), one token at a time on one
 * thread, written to be read beside llama2.c's forward(): one short
 * comment per step, shapes in comments.
 *
 * It is the engine's math without the engine's scheduling. engine.c cuts
 * the same steps into phases of work units for the pool and batches tokens;
 * here each token goes through every layer in turn. Each value is computed
 * by the definitions the engine uses, so the logits are the engine's bit
 * for bit (tests/test_forward_ref.c checks it on every architecture):
 *   - each element of a matrix product by its weight type's definition
 *     (llm_mm_ops.dot_ref, core/kernels/quant.h), on the I16 form of the
 *     input for quantized weights;
 *   - attention by attn.c's kernel, for one query row and one head;
 *   - the Gated DeltaNet layer (qwen35) by deltanet.c's conv and delta rule;
 *   - a mixture of experts' choice (qwen3moe) by moe.c's gating;
 *   - RMSNorm, RoPE, the GLU and the residual adds as written below, with
 *     the float operations of engine.c's per-token steps.
 * It allocates its own KV cache and recurrent state; it is slow, on
 * purpose: for tests and for reading.
 */
#include "core/engine/attn.h"
#include "core/engine/deltanet.h"
#include "core/engine/model.h"
#include "core/engine/moe.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== the state of a pass (as llama2.c's RunState) ==== */

struct ref_state {
    const struct llm_model *m;
    int64_t n;              /* positions the cache holds */
    const float *rope_factors; /* phi3's long or short factors for n_ctx, rope_freqs, or NULL */
    uint32_t kv_type;       /* LLM_TYPE_F16 or LLM_TYPE_F32 */
    const struct llm_type_ops *kv_ops;
    size_t kv_elt;          /* bytes of a cache element */
    float *x;               /* (n_embd) the residual stream */
    float *xn;              /* (n_embd) x normed: the input of q/k/v, gate/up and the output */
    float *xb;              /* (n_embd) a block's output (wo, w_down) before it joins x */
    float *q;               /* (q_rows) q (qwen35 attention: each head's q then its gate) */
    float *gate;            /* (q_dim) qwen35 attention: the output gates */
    float *k, *v;           /* (kv_dim) */
    float *raw;             /* (qkv_width) a recurrent layer's first product: conv input | z | alpha | beta */
    float *rq;              /* (rq_width) the conv's output: q | k | v | g | beta */
    float *att;             /* (att_width) attention's (or the recurrence's) output, heads side by side */
    float *hb, *hb2;        /* (n_ff, or n_ff_exp if larger) the FFN's (an expert's) gate and up */
    float *router;          /* (n_expert) a mixture of experts' router logits */
    int32_t *sel;           /* (n_expert_used) the chosen experts, in rank order */
    float *sel_w;           /* (n_expert_used) their weights */
    float *y;               /* (n_embd) one expert's output */
    float *mo;              /* (n_embd) gemma4: the experts' sum beside the dense FFN */
    float *pl, *pl_tok;     /* (n_layer n_pl) gemma4: the token's per-layer inputs; its rows */
    float *pg;              /* (n_pl) gemma4: a layer's gated per-layer input */
    float *cs;              /* (rope_dim) cos, sin of each rotated pair */
    void *act;              /* the I16 form of the widest product input (64-byte aligned) */
    float *att_scratch;     /* attn.c's scratch for one row and one head over n keys */
    uint8_t **k_cache, **v_cache; /* (n_layer_kv) of [n_head_kv][n][head_dim] cache elements */
    float *rstate;          /* (n_layer_rec) of: the conv window, then V matrices S x S */
    float *logits;          /* (n_vocab) */
};

/* ==== the steps that are not matrix products (engine.c's definitions) ==== */

/* y = x / rms(x) * w, the sum of squares in double as ggml does (y may be
 * x); w NULL: no weight (gemma4's V) */
static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

/* cs (rope_dim) = cos, sin of each pair's angle at position pos: theta_i =
 * pos base^(-2i/rope_dim) by repeated multiplication, divided by the pair's
 * frequency factor, times the linear scale; qwen35 leaves some pairs at
 * angle 0; longrope multiplies cos and sin by its attention factor */
static void rope_angles(const struct ref_state *s, const struct llm_layer *L, int64_t pos, float *cs)
{
    const struct llm_model *m = s->m;
    float base = L->rope_base, freq_scale = L->rope_freq_scale;
    /* gemma4: the layer's own rotated dimensions and factors (the global
     * layers' rope_freqs); the others: the model's */
    int64_t rope_dim = m->arch == LLM_ARCH_GEMMA4 ? L->rope_dim : m->rope_dim;
    const float *factors = m->arch == LLM_ARCH_GEMMA4 ? L->rope_freqs : s->rope_factors;
    float theta_scale = powf(base, -2.0f / (float)rope_dim);
    float theta = (float)pos, dims[2];
    if (m->rope_yarn) /* gpt-oss: YaRN's angles (model.h) */
        llm_model_yarn_dims(m, base, dims);
    for (int64_t i = 0; i < rope_dim / 2; i++) {
        float ff = factors ? factors[i] : 1.0f;
        float th = m->rope_yarn ? llm_yarn_theta(theta / ff, freq_scale, dims, i) : freq_scale * (theta / ff);
        if (m->rope_still && m->rope_still[i])
            th = 0.0f;
        cs[2 * i] = cosf(th) * m->rope_attn_factor;
        cs[2 * i + 1] = sinf(th) * m->rope_attn_factor;
        theta *= theta_scale;
    }
}

/* rotate the first rope_dim dimensions of each of n_heads heads (hd
 * apart): pairs (i, i + rope_dim/2) in NeoX order, else (2i, 2i + 1) */
static void rope(const struct llm_model *m, float *v, int64_t n_heads, int64_t hd, int64_t rope_dim,
                 const float *cs)
{
    int64_t half = rope_dim / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *x = v + h * hd;
        for (int64_t i = 0; i < half; i++) {
            int64_t a = m->rope_neox ? i : 2 * i, b = m->rope_neox ? i + half : 2 * i + 1;
            float c = cs[2 * i], sn = cs[2 * i + 1], x0 = x[a], x1 = x[b];
            x[a] = x0 * c - x1 * sn;
            x[b] = x0 * sn + x1 * c;
        }
    }
}

static void add_bias(float *x, const float *b, int64_t n)
{
    if (b)
        for (int64_t i = 0; i < n; i++)
            x[i] += b[i];
}

/* x (n_embd) += the block's output xb, normed first where the model has a
 * post norm (gemma); xb is overwritten */
static void residual(const struct llm_model *m, float *x, float *xb, const float *post_norm)
{
    if (post_norm)
        rmsnorm(xb, xb, post_norm, m->n_embd, m->rms_eps);
    for (int64_t i = 0; i < m->n_embd; i++)
        x[i] = x[i] + xb[i];
}

/* y (W rows) = W x, every element by the weight type's definition: float
 * weights on x itself, quantized ones on its I16 form (quant.h) */
static void matmul(struct ref_state *s, float *y, const struct llm_weight *W, const float *x)
{
    const void *in = x;
    if (W->mm->act == LLM_ACT_I16) {
        llm_act16_quantize_ref(x, s->act, W->m.n_in);
        in = s->act;
    }
    for (int64_t r = 0; r < W->m.n_out; r++)
        y[r] = W->mm->dot_ref(&W->m, r, in);
}

/* ==== the blocks ==== */

/* an attention block on xn at position pos: att (q_dim) */
static void attention(struct ref_state *s, int64_t l, int64_t pos)
{
    const struct llm_model *m = s->m;
    const struct llm_layer *L = &m->layers[l];
    /* the layer's sizes (gemma4's differ by layer; the others' are the model's) */
    int64_t hd = L->head_dim, n_head_kv = L->n_head_kv, kv_mul = m->n_head / n_head_kv;
    int64_t q_dim = L->q_dim, kv_dim = L->kv_dim;
    int64_t rope_dim = m->arch == LLM_ARCH_GEMMA4 ? L->rope_dim : m->rope_dim;

    /* q (q_rows), k, v (kv_dim) = wq xn, wk xn, wv xn; gemma4: a layer that
     * shares its KV computes q only, and v is k's product where it has no wv */
    matmul(s, s->q, &L->wq, s->xn);
    if (!L->kv_shared) {
        matmul(s, s->k, &L->wk, s->xn);
        if (L->v_from_k)
            memcpy(s->v, s->k, (size_t)kv_dim * sizeof(float));
        else
            matmul(s, s->v, &L->wv, s->xn);
    }
    /* qwen35: wq gave each head's q then its output gate; q (q_dim), gate (q_dim) */
    if (m->attn_gate) {
        for (int64_t h = 0; h < m->n_head; h++)
            memcpy(s->gate + h * hd, s->q + (2 * h + 1) * hd, (size_t)hd * sizeof(float));
        for (int64_t h = 0; h < m->n_head; h++) /* ascending: head h's q moves down from 2h */
            memmove(s->q + h * hd, s->q + 2 * h * hd, (size_t)hd * sizeof(float));
    }
    /* biases (qwen2) */
    add_bias(s->q, L->bq, q_dim);
    add_bias(s->k, L->bk, kv_dim);
    add_bias(s->v, L->bv, kv_dim);
    /* q and k normed per head (qwen3, gemma3, qwen35, gemma4); gemma4's V
     * normed per head with no weight */
    if (L->q_norm)
        for (int64_t h = 0; h < m->n_head; h++)
            rmsnorm(s->q + h * hd, s->q + h * hd, L->q_norm, hd, m->rms_eps);
    if (L->k_norm)
        for (int64_t h = 0; h < n_head_kv; h++)
            rmsnorm(s->k + h * hd, s->k + h * hd, L->k_norm, hd, m->rms_eps);
    if (L->v_norm && !L->kv_shared)
        for (int64_t h = 0; h < n_head_kv; h++)
            rmsnorm(s->v + h * hd, s->v + h * hd, NULL, hd, m->rms_eps);
    /* RoPE at pos, with this layer's base and scale (gemma's local layers have their own) */
    rope_angles(s, L, pos, s->cs);
    rope(m, s->q, m->n_head, hd, rope_dim, s->cs);
    if (!L->kv_shared)
        rope(m, s->k, n_head_kv, hd, rope_dim, s->cs);
    /* K and V of pos into the cache, in its type: row pos of each KV head
     * (a gemma4 layer that shares KV reads kv_index's rows, written before) */
    size_t row = (size_t)hd * s->kv_elt;
    uint8_t *kc = s->k_cache[L->kv_index], *vc = s->v_cache[L->kv_index];
    if (!L->kv_shared)
        for (int64_t g = 0; g < n_head_kv; g++) {
            s->kv_ops->from_float(s->k + g * hd, kc + (size_t)(g * s->n + pos) * row, hd);
            s->kv_ops->from_float(s->v + g * hd, vc + (size_t)(g * s->n + pos) * row, hd);
        }
    /* each query head h, on KV head h / kv_mul:
     *   att_h (head_dim) = softmax(cap(scale q_h . K^T)) V over the keys
     *   [lo, pos], lo = pos - n_swa + 1 on sliding-window layers, else 0
     *   (attn.c: scores of eight lanes and a fixed tree, its exp, P V in order) */
    for (int64_t h = 0; h < m->n_head; h++) {
        int64_t g = h / kv_mul;
        struct llm_attn_job job = {
            .q = s->q + h * hd,
            .q_stride = q_dim,
            .out = s->att + h * hd,
            .out_stride = hd,
            .n_rows = 1,
            .nq = 1,
            .hd = hd,
            .n_kv = pos + 1,
            .k = kc + (size_t)(g * s->n) * row,
            .v = vc + (size_t)(g * s->n) * row,
            .kv_type = s->kv_type,
            .f16_to_float = s->kv_ops->to_float_ref,
            .scale = m->attn_scale,
            .window = L->swa ? m->n_swa : 0,
            .softcap = m->attn_softcap,
            .sinks = L->sinks ? L->sinks + h : NULL, /* gpt-oss: the head's sink logit */
            .scratch = s->att_scratch,
        };
        llm_attn_rows(&job);
    }
    /* qwen35: att times sigmoid(gate) */
    if (m->attn_gate)
        for (int64_t i = 0; i < m->q_dim; i++)
            s->att[i] *= 1.0f / (1.0f + expf(-s->gate[i]));
}

/* a Gated DeltaNet block (qwen35) on xn: att (V S), the layer's state advanced by one token */
static void deltanet(struct ref_state *s, int64_t l)
{
    const struct llm_model *m = s->m;
    const struct llm_layer *L = &m->layers[l];
    int64_t C = m->conv_dim, S = m->ssm_state, V = m->ssm_heads;
    float *window = s->rstate + (size_t)L->rec_index * llm_model_rstate_layer_floats(m);
    float *mats = window + (m->ssm_conv - 1) * C;
    size_t ld = (size_t)m->qkv_width;

    /* raw: the conv's input (C) = wq xn, z (V S) = w_z xn, alpha (V), beta (V) */
    matmul(s, s->raw, &L->wq, s->xn);
    matmul(s, s->raw + C, &L->w_z, s->xn);
    matmul(s, s->raw + C + V * S, &L->w_alpha, s->xn);
    matmul(s, s->raw + C + V * S + V, &L->w_beta, s->xn);
    /* rq = SiLU(the causal conv over the window's K - 1 inputs and this one);
     * q, k L2-normed per head; g = softplus(alpha + dt_bias) A; beta = sigmoid(beta) */
    llm_dn_conv(m, L, window, s->raw, ld, 0, s->rq);
    /* the window slides by one input */
    llm_dn_window_update(m, window, s->raw, ld, 1);
    /* each value head h (key head h % G), its state S_h (S x S):
     *   S_h = exp(g) S_h;  delta = beta (v - S_h^T k);  S_h += k delta;
     *   att_h (S) = RMSNorm(S_h^T q / sqrt(S)) ssm_norm silu(z_h) */
    for (int64_t h = 0; h < V; h++)
        llm_dn_head(m, L, h, mats + h * S * S, s->rq, s->raw, ld, 1, s->att + h * S);
}

/* a mixture of experts (qwen3moe) on xn: xb (n_embd) */
static void moe(struct ref_state *s, int64_t l)
{
    const struct llm_model *m = s->m;
    const struct llm_layer *L = &m->layers[l];
    int64_t F = m->n_ff_exp;
    /* router (n_expert) = w_router xn (+ its bias: gpt-oss) */
    matmul(s, s->router, &L->w_router, s->xn);
    if (L->router_b)
        for (int64_t e = 0; e < m->n_expert; e++)
            s->router[e] += L->router_b[e];
    /* the k = n_expert_used experts with the largest weights, and the weights (moe.c) */
    llm_moe_gate(m->moe_gating, m->moe_norm, s->router, m->n_expert, m->n_expert_used, s->sel, s->sel_w);
    /* xb = w_0 y_0 + w_1 y_1 + ... in rank order (each product rounded, then added),
     * y_j (n_embd) = down_e (silu(gate_e xn) * (up_e xn)) of expert e = sel[j] */
    for (int64_t j = 0; j < m->n_expert_used; j++) {
        int32_t e = s->sel[j];
        matmul(s, s->hb, &L->exp_gate[e], s->xn);
        matmul(s, s->hb2, &L->exp_up[e], s->xn);
        if (L->exp_gate_b) /* gpt-oss: biased gate and up, the clamped SwiGLU */
            for (int64_t i = 0; i < F; i++)
                s->hb[i] = llm_swiglu_oai(s->hb[i] + L->exp_gate_b[e * F + i], s->hb2[i] + L->exp_up_b[e * F + i]);
        else
            for (int64_t i = 0; i < F; i++)
                s->hb[i] = s->hb[i] / (1.0f + expf(-s->hb[i])) * s->hb2[i];
        matmul(s, s->y, &L->exp_down[e], s->hb);
        if (L->exp_down_b)
            for (int64_t i = 0; i < m->n_embd; i++)
                s->y[i] += L->exp_down_b[e * m->n_embd + i];
        for (int64_t i = 0; i < m->n_embd; i++)
            s->xb[i] = j == 0 ? s->sel_w[j] * s->y[i] : s->xb[i] + s->sel_w[j] * s->y[i];
    }
}

/* the FFN block on xn: xb (n_embd) */
static void ffn(struct ref_state *s, int64_t l)
{
    const struct llm_model *m = s->m;
    const struct llm_layer *L = &m->layers[l];
    if (L->exp_gate && m->arch != LLM_ARCH_GEMMA4) { /* qwen3moe: experts instead */
        moe(s, l);
        return;
    }
    /* hb (n_ff) = w_gate xn, hb2 (n_ff) = w_up xn */
    matmul(s, s->hb, &L->w_gate, s->xn);
    matmul(s, s->hb2, &L->w_up, s->xn);
    /* hb = act(hb) * hb2: SiLU, or GELU (tanh) for gemma (the layer's rows: gemma4's vary) */
    for (int64_t i = 0; i < L->n_ff; i++) {
        float g = s->hb[i];
        s->hb[i] = m->ffn_act == LLM_FFN_GELU_TANH ? llm_gelu_tanh(g) * s->hb2[i] : g / (1.0f + expf(-g)) * s->hb2[i];
    }
    /* xb (n_embd) = w_down hb */
    matmul(s, s->xb, &L->w_down, s->hb);
}

/* ==== gemma4 ==== */

/* the token's per-layer inputs, pl (n_layer n_pl) = (RMSNorm_P(pl_model_proj
 * x / sqrt(n_embd)) pl_proj_norm + its pl_tok_embd row sqrt(P)) / sqrt(2),
 * x the scaled embedding (src/models/gemma4.cpp project_per_layer_inputs) */
static void g4_per_layer_inputs(struct ref_state *s, int32_t token)
{
    const struct llm_model *m = s->m;
    int64_t P = m->n_pl, n = m->n_layer * P;
    matmul(s, s->pl, &m->pl_model_proj, s->x);
    float proj_scale = 1.0f / sqrtf((float)m->n_embd), tok_scale = sqrtf((float)P), in_scale = 1.0f / sqrtf(2.0f);
    for (int64_t i = 0; i < n; i++)
        s->pl[i] = s->pl[i] * proj_scale;
    for (int64_t l = 0; l < m->n_layer; l++)
        rmsnorm(s->pl + l * P, s->pl + l * P, m->pl_proj_norm, P, m->rms_eps);
    const struct llm_weight *te = &m->pl_tok_embd;
    te->ops->to_float_ref(te->rows + (size_t)token * te->m.row_bytes, s->pl_tok, n);
    for (int64_t i = 0; i < n; i++)
        s->pl[i] = (s->pl[i] + s->pl_tok[i] * tok_scale) * in_scale;
}

/* the 26B-A4B's experts on a = x after attention: mo (n_embd) = the k
 * experts' down(gelu(gate h) * up h) times their output scale and weight,
 * summed in rank order, h = RMSNorm(a) pre_ffw_norm_2; the router reads
 * RMSNorm(a) (no weight) / sqrt(n_embd) times ffn_gate_inp.scale */
static void g4_experts(struct ref_state *s, int64_t l)
{
    const struct llm_model *m = s->m;
    const struct llm_layer *L = &m->layers[l];
    int64_t E = m->n_embd, F = m->n_ff_exp;
    float inv = 1.0f / sqrtf((float)E);
    rmsnorm(s->y, s->x, NULL, E, m->rms_eps);
    for (int64_t i = 0; i < E; i++)
        s->y[i] = (s->y[i] * inv) * L->router_scale[i];
    matmul(s, s->router, &L->w_router, s->y);
    llm_moe_gate(m->moe_gating, m->moe_norm, s->router, m->n_expert, m->n_expert_used, s->sel, s->sel_w);
    rmsnorm(s->xn, s->x, L->ffn_pre_norm_2, E, m->rms_eps);
    for (int64_t j = 0; j < m->n_expert_used; j++) {
        int32_t e = s->sel[j];
        matmul(s, s->hb, &L->exp_gate[e], s->xn);
        matmul(s, s->hb2, &L->exp_up[e], s->xn);
        for (int64_t i = 0; i < F; i++)
            s->hb[i] = llm_gelu_tanh(s->hb[i]) * s->hb2[i];
        matmul(s, s->y, &L->exp_down[e], s->hb);
        float sc = L->exp_down_scale ? L->exp_down_scale[e] : 1.0f;
        for (int64_t i = 0; i < E; i++) {
            float v = (L->exp_down_scale ? s->y[i] * sc : s->y[i]) * s->sel_w[j];
            s->mo[i] = j == 0 ? v : s->mo[i] + v;
        }
    }
}

/* a gemma4 layer after attention: x += RMSNorm(the FFN's output)
 * post_ffw_norm, where the FFN is the dense one on RMSNorm(x) ffn_norm, or
 * (26B-A4B) RMSNorm(that) post_ffw_norm_1 + RMSNorm(the experts)
 * post_ffw_norm_2; then x += RMSNorm(proj (gelu(inp_gate x) * the layer's
 * per-layer input)) post_norm; then x *= layer_output_scale */
static void g4_ffn_and_more(struct ref_state *s, int64_t l)
{
    const struct llm_model *m = s->m;
    const struct llm_layer *L = &m->layers[l];
    int64_t E = m->n_embd, P = m->n_pl;
    rmsnorm(s->xn, s->x, L->ffn_norm, E, m->rms_eps);
    ffn(s, l);
    if (L->exp_gate) {
        rmsnorm(s->xb, s->xb, L->ffn_post_norm_1, E, m->rms_eps);
        g4_experts(s, l);
        rmsnorm(s->mo, s->mo, L->ffn_post_norm_2, E, m->rms_eps);
        for (int64_t i = 0; i < E; i++)
            s->xb[i] = s->xb[i] + s->mo[i];
    }
    residual(m, s->x, s->xb, L->ffn_post_norm);
    if (P > 0) {
        matmul(s, s->pg, &L->w_pl_gate, s->x);
        for (int64_t i = 0; i < P; i++)
            s->pg[i] = llm_gelu_tanh(s->pg[i]) * s->pl[l * P + i];
        matmul(s, s->xb, &L->w_pl_proj, s->pg);
        residual(m, s->x, s->xb, L->pl_post_norm);
    }
    if (L->out_scale != 1.0f)
        for (int64_t i = 0; i < E; i++)
            s->x[i] = s->x[i] * L->out_scale;
}

/* one token at position pos through the model; the logits when asked */
static void forward(struct ref_state *s, int32_t token, int64_t pos, bool logits)
{
    const struct llm_model *m = s->m;
    int64_t E = m->n_embd;

    /* x (n_embd) = the token's embedding row (gemma: times sqrt(n_embd)) */
    const struct llm_weight *te = &m->tok_embd;
    te->ops->to_float_ref(te->rows + (size_t)token * te->m.row_bytes, s->x, E);
    if (m->embd_scale != 1.0f)
        for (int64_t i = 0; i < E; i++)
            s->x[i] *= m->embd_scale;
    /* gemma4: the per-layer inputs, from this x */
    if (m->n_pl > 0)
        g4_per_layer_inputs(s, token);

    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        /* xn = rmsnorm(x) attn_norm */
        rmsnorm(s->xn, s->x, L->attn_norm, E, m->rms_eps);
        /* att = attention, or the Gated DeltaNet recurrence */
        if (L->recurrent)
            deltanet(s, l);
        else
            attention(s, l, pos);
        /* xb (n_embd) = wo att; x += xb (gemma: normed first) */
        matmul(s, s->xb, &L->wo, s->att);
        if (L->bo) /* gpt-oss */
            for (int64_t i = 0; i < E; i++)
                s->xb[i] += L->bo[i];
        residual(m, s->x, s->xb, L->attn_post_norm);
        if (m->arch == LLM_ARCH_GEMMA4) {
            g4_ffn_and_more(s, l);
            continue;
        }
        /* xn = rmsnorm(x) ffn_norm; xb = the FFN (or the experts); x += xb (gemma: normed first) */
        rmsnorm(s->xn, s->x, L->ffn_norm, E, m->rms_eps);
        ffn(s, l);
        residual(m, s->x, s->xb, L->ffn_post_norm);
    }
    if (!logits)
        return;
    /* xn = rmsnorm(x) output_norm; logits (n_vocab) = output xn */
    rmsnorm(s->xn, s->x, m->output_norm, E, m->rms_eps);
    matmul(s, s->logits, &m->output, s->xn);
    /* gemma2: logits = c tanh(logits / c) */
    if (m->final_softcap > 0)
        llm_softcap(s->logits, m->n_vocab, m->final_softcap);
}

/* ==== set-up ==== */

static void *zalloc(size_t n_bytes, bool *ok)
{
    size_t n = (n_bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (p)
        memset(p, 0, n ? n : 64);
    else
        *ok = false;
    return p;
}

static void state_free(struct ref_state *s)
{
    if (s->k_cache)
        for (int64_t l = 0; l < s->m->n_layer_kv; l++) {
            free(s->k_cache[l]);
            free(s->v_cache[l]);
        }
    free(s->k_cache);
    free(s->v_cache);
    void *bufs[] = {s->x, s->xn, s->xb, s->q, s->gate, s->k, s->v, s->raw, s->rq, s->att,
                    s->hb, s->hb2, s->router, s->sel, s->sel_w, s->y, s->cs, s->act, s->att_scratch, s->rstate,
                    s->mo, s->pl, s->pl_tok, s->pg};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]);
}

/* the widest input a product of the model reads (for its I16 form) */
static int64_t widest_input(const struct llm_model *m)
{
    int64_t w = m->output.m.n_in;
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        int64_t in[5] = {L->wq.m.n_in, L->wo.m.n_in, L->w_down.m.n_in, L->exp_down ? L->exp_down[0].m.n_in : 0,
                         L->w_pl_proj.m.n_in};
        for (int i = 0; i < 5; i++)
            w = in[i] > w ? in[i] : w;
    }
    return w;
}

static bool state_init(struct ref_state *s, const struct llm_model *m, int64_t n, int64_t n_ctx, uint32_t kv_type)
{
    bool ok = true;
    size_t f = sizeof(float);
    memset(s, 0, sizeof *s);
    s->m = m;
    s->n = n;
    s->rope_factors = llm_model_rope_factors(m, n_ctx);
    s->kv_type = kv_type;
    s->kv_ops = llm_get_type_ops(kv_type);
    s->kv_elt = kv_type == LLM_TYPE_F16 ? 2 : 4;
    int64_t att_width = m->q_dim > m->ssm_heads * m->ssm_state ? m->q_dim : m->ssm_heads * m->ssm_state;
    s->x = zalloc((size_t)m->n_embd * f, &ok);
    s->xn = zalloc((size_t)m->n_embd * f, &ok);
    s->xb = zalloc((size_t)m->n_embd * f, &ok);
    s->q = zalloc((size_t)m->q_rows * f, &ok);
    s->gate = zalloc((size_t)m->q_dim * f, &ok);
    s->k = zalloc((size_t)m->kv_dim * f, &ok);
    s->v = zalloc((size_t)m->kv_dim * f, &ok);
    s->raw = zalloc((size_t)m->qkv_width * f, &ok);
    s->rq = zalloc((size_t)(m->n_layer_rec ? llm_dn_rq_width(m) : 1) * f, &ok);
    s->att = zalloc((size_t)att_width * f, &ok);
    int64_t n_ff = m->n_ff > m->n_ff_exp ? m->n_ff : m->n_ff_exp;
    s->hb = zalloc((size_t)n_ff * f, &ok);
    s->hb2 = zalloc((size_t)n_ff * f, &ok);
    s->router = zalloc((size_t)m->n_expert * f, &ok);
    s->sel = zalloc((size_t)m->n_expert_used * sizeof(int32_t), &ok);
    s->sel_w = zalloc((size_t)m->n_expert_used * f, &ok);
    s->y = zalloc((size_t)m->n_embd * f, &ok);
    s->mo = zalloc((size_t)m->n_embd * f, &ok);
    s->pl = zalloc((size_t)(m->n_layer * m->n_pl) * f, &ok);
    s->pl_tok = zalloc((size_t)(m->n_layer * m->n_pl) * f, &ok);
    s->pg = zalloc((size_t)m->n_pl * f, &ok);
    s->cs = zalloc((size_t)m->rope_dim * f, &ok);
    s->act = zalloc(llm_act_bytes(LLM_ACT_I16, widest_input(m)), &ok);
    s->att_scratch = zalloc(llm_attn_scratch_floats(1, m->head_dim, n) * f, &ok);
    s->rstate = zalloc((size_t)(llm_model_rstate_layer_floats(m) * (uint64_t)m->n_layer_rec) * f, &ok);
    s->k_cache = calloc((size_t)(m->n_layer_kv ? m->n_layer_kv : 1), sizeof *s->k_cache);
    s->v_cache = calloc((size_t)(m->n_layer_kv ? m->n_layer_kv : 1), sizeof *s->v_cache);
    if (!s->k_cache || !s->v_cache)
        return false;
    for (int64_t l = 0; l < m->n_layer_kv; l++) {
        s->k_cache[l] = zalloc((size_t)(m->kv_dim * n) * s->kv_elt, &ok);
        s->v_cache[l] = zalloc((size_t)(m->kv_dim * n) * s->kv_elt, &ok);
    }
    return ok;
}

int llm_forward_ref(const struct llm_model *m, struct llm_ctx_params p, const int32_t *tokens, int64_t n,
                    float *logits, char *err, size_t err_size)
{
    if (!m->layers) {
        snprintf(err, err_size, "the reference forward pass cannot compute this model");
        return LLM_ERR;
    }
    if (p.kv_type != LLM_TYPE_F16 && p.kv_type != LLM_TYPE_F32) {
        snprintf(err, err_size, "KV cache type %s is not supported (f16, f32 are)", llm_type_name(p.kv_type));
        return LLM_ERR;
    }
    int64_t n_ctx = p.n_ctx > 0 ? p.n_ctx : (m->n_ctx_train < 4096 ? m->n_ctx_train : 4096);
    if (n <= 0 || n > n_ctx) {
        snprintf(err, err_size, "%" PRId64 " tokens for a context of %" PRId64, n, n_ctx);
        return LLM_ERR;
    }
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab) {
            snprintf(err, err_size, "token id %" PRId32 " is out of range (the vocabulary has %" PRId64 " tokens)",
                     tokens[i], m->n_vocab);
            return LLM_ERR;
        }
    struct ref_state s;
    bool ok = state_init(&s, m, n, n_ctx, p.kv_type);
    s.logits = logits;
    if (ok)
        for (int64_t pos = 0; pos < n; pos++)
            forward(&s, tokens[pos], pos, pos == n - 1);
    state_free(&s);
    if (!ok) {
        snprintf(err, err_size, "out of memory for the reference pass");
        return LLM_ERR;
    }
    return LLM_OK;
}
