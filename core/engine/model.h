/*
 * model.h - (internal to core/) a bound model: hyperparameters and pointers
 * to each tensor where it lies in the GGUF mapping (or, for weights packed
 * at open, in packed.c's memory or cache file). Shared by model.c (which
 * binds and checks) and engine.c (which computes).
 */
#ifndef KVCHAT_CORE_MODEL_H
#define KVCHAT_CORE_MODEL_H

#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <stdbool.h>

/* a 2-D weight: n_out rows of n_in elements of its type */
struct llm_weight {
    const char *name;
    struct llm_mat m;                /* as the kernels read it: rows, or packed groups */
    const uint8_t *rows;             /* the stored rows, in the mapping (embedding lookups) */
    const struct llm_type_ops *ops;  /* row conversions of its type */
    const struct llm_mm_ops *mm;     /* its products */
};

struct llm_layer {
    const float *attn_norm;  /* (n_embd) */
    /* phi3's fused attn_qkv is bound as three views on its row ranges
     * [0, q_dim), [q_dim, q_dim + kv_dim), [q_dim + kv_dim, q_dim + 2 kv_dim) */
    struct llm_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv; /* optional biases (q_dim), (kv_dim), (kv_dim) */
    const float *q_norm, *k_norm; /* qwen3, gemma3: (head_dim) */
    const float *ffn_norm;   /* (n_embd) */
    /* phi3's fused ffn_up (2 n_ff rows) is bound as w_gate = rows [0, n_ff)
     * and w_up = rows [n_ff, 2 n_ff) (ggml_swiglu: silu(first half) * second) */
    struct llm_weight w_gate, w_up, w_down;
    /* additions for gemma2/gemma3/phi3 (issue 17) */
    const float *attn_post_norm; /* gemma: post_attention_norm (n_embd), or NULL */
    const float *ffn_post_norm;  /* gemma: post_ffw_norm (n_embd), or NULL */
    bool swa;                    /* attends to the last model n_swa positions only */
    float rope_base;             /* this layer's RoPE base ... */
    float rope_freq_scale;       /* ... and linear scale (positions multiplied by it) */
    /* qwen35 (issue 23): a Gated DeltaNet layer instead of attention. Then
     * wq is attn_qkv (conv_dim rows: q of G heads, k of G heads, v of V
     * heads, S each), wo is ssm_out (V S -> n_embd), ffn_norm is
     * post_attention_norm, and wk, wv are unbound */
    bool recurrent;
    int64_t kv_index;            /* attention layers: which of the KV cache's layers; else -1 */
    int64_t rec_index;           /* recurrent layers: which of the recurrent states; else -1 */
    struct llm_weight w_z, w_alpha, w_beta; /* attn_gate (V S rows), ssm_alpha, ssm_beta (V rows) */
    const float *conv1d;         /* (conv_dim rows of ssm_conv taps, oldest first) */
    const float *dt_bias, *ssm_a; /* (V) */
    const float *ssm_norm;       /* (S) */
    /* a mixture of experts instead of the dense FFN (qwen3moe, issue 24):
     * the router (ffn_gate_inp: n_expert rows of n_embd) and each expert's
     * gate, up (n_ff_exp rows of n_embd) and down (n_embd rows of
     * n_ff_exp) as views on its rows of the stacked tensors
     * ffn_{gate,up,down}_exps (or of the merged ffn_gate_up_exps: each
     * expert's 2 n_ff_exp rows, gate then up); w_gate, w_up, w_down are
     * unbound then. NULL for a dense FFN. */
    struct llm_weight w_router;
    struct llm_weight *exp_gate, *exp_up, *exp_down; /* (n_expert) each */
    /* qwen35moe: a shared expert beside the routed ones: w_gate, w_up,
     * w_down are ffn_{gate,up,down}_shexp (n_ff is the shared expert's
     * rows), and shexp_gate (ffn_gate_inp_shexp, n_embd) its gate: the
     * FFN's output is moe + sigmoid(shexp_gate . x) * shexp(x). NULL
     * where there is none. */
    const float *shexp_gate;
    /* gpt-oss (issue 24): attn_output's bias (n_embd), the per-head
     * attention sinks (n_head: a logit each head's softmax counts that
     * adds no value), the router's bias (n_expert) and the experts'
     * biases: gate and up (n_expert rows of n_ff_exp), down (n_expert
     * rows of n_embd). NULL elsewhere. */
    const float *bo, *sinks, *router_b;
    const float *exp_gate_b, *exp_up_b, *exp_down_b;
    /* gemma4 (issue 24): this layer's own sizes
     * (the model's head_dim, n_head_kv, q_dim, kv_dim, rope_dim, n_ff are
     * their maxima), its RoPE factors (the global layers' rope_freqs, or
     * NULL), V = K's product where attn_v is absent (v_from_k: wv unbound),
     * V's unweighted RMSNorm, shared KV (kv_shared: no wk, wv or k_norm;
     * kv_index is the layer whose rows it reads), the per-layer input's
     * gate (n_embd -> n_pl) and projection (n_pl -> n_embd) with its norm,
     * the output scale (1 when absent), and the experts' extras: the
     * router's input scale (n_embd), the experts' output scales (n_expert,
     * or NULL), and the norms around the two FFN branches */
    int64_t head_dim, n_head_kv, q_dim, kv_dim, rope_dim, n_ff;
    const float *rope_freqs;
    bool v_from_k, v_norm, kv_shared;
    struct llm_weight w_pl_gate, w_pl_proj;
    const float *pl_post_norm;
    float out_scale;
    const float *router_scale, *exp_down_scale;
    const float *ffn_pre_norm_2, *ffn_post_norm_1, *ffn_post_norm_2;
};

/* how a token's router logits choose its experts and weigh them (moe.c) */
enum llm_moe_gating {
    LLM_MOE_SOFTMAX,        /* softmax over all experts, the top k, renormalised to sum 1
                               where the architecture says (qwen3moe, qwen35moe, gemma4) */
    LLM_MOE_SOFTMAX_WEIGHT, /* the top k logits, then softmax over those k (gpt-oss) */
    LLM_MOE_GATING_COUNT
};

enum llm_arch {
    LLM_ARCH_LLAMA,
    LLM_ARCH_QWEN2,
    LLM_ARCH_QWEN3,
    LLM_ARCH_GEMMA2,
    LLM_ARCH_GEMMA3,
    LLM_ARCH_PHI3,
    LLM_ARCH_QWEN35,
    LLM_ARCH_QWEN3MOE,
    LLM_ARCH_QWEN35MOE,
    LLM_ARCH_GPTOSS,
    LLM_ARCH_GEMMA4,
    LLM_ARCH_COUNT
};

enum llm_ffn_act {
    LLM_FFN_SILU,      /* silu(gate) * up */
    LLM_FFN_GELU_TANH, /* gelu(gate) * up, GELU's tanh approximation (ggml_gelu) */
    LLM_FFN_SWIGLU_OAI, /* gpt-oss's clamped SwiGLU (ggml_swiglu_oai, alpha 1.702, limit 7):
                           g = min(gate, 7), u = clamp(up, -7, 7),
                           g / (1 + exp(1.702 (-g))) * (u + 1) */
};

struct llm_model {
    struct llm_gguf *gguf;
    struct llm_model_meta meta;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    int64_t q_dim, kv_dim;     /* n_head * head_dim, n_head_kv * head_dim */
    float rms_eps;
    float rope_base, rope_freq_scale;
    int64_t rope_dim;
    bool rope_neox;
    const float *rope_freqs;   /* (rope_dim / 2) or NULL */
    struct llm_weight tok_embd; /* (n_vocab rows of n_embd) */
    struct llm_weight output;   /* tok_embd when tied */
    const float *output_norm;  /* (n_embd) */
    struct llm_layer *layers;  /* (n_layer) */
    struct llm_packed *packed; /* packed.c: the packed weights, or NULL */
    /* additions for gemma2/gemma3/phi3 (issue 17); for llama/qwen2/qwen3
     * they hold the values that change nothing (1, 0, SILU, NULL) */
    enum llm_arch arch;
    enum llm_ffn_act ffn_act;
    float embd_scale;          /* gemma: sqrt(n_embd), applied to the looked-up rows; 1 */
    float attn_scale;          /* q is multiplied by it before q.k: 1/sqrt(head_dim), or
                                  gemma 27B's 1/sqrt(n_embd / n_head) */
    float attn_softcap;        /* gemma2: scores s become c tanh(s / c) before the mask
                                  and softmax; 0: none */
    float final_softcap;       /* gemma2 (gemma3 if set): logits become c tanh(l / c); 0 */
    int64_t n_swa;             /* window of the layers with swa set: a query at p sees
                                  keys at p' with p - p' < n_swa; 0: none */
    const float *rope_factors_long, *rope_factors_short; /* phi3: (rope_dim / 2) each, or NULL;
                                  theta_i is divided by factor[i] */
    int64_t rope_orig_ctx;     /* longrope: long factors when n_ctx > this, else short */
    float rope_attn_factor;    /* longrope: cos and sin multiplied by it (1 otherwise; YaRN:
                                  llama.cpp's attention factor times 1 + 0.1 ln(factor)) */
    bool rope_yarn;            /* gpt-oss: YaRN (ggml's rope_yarn with ext_factor 1, beta
                                  fast 32, slow 1, over rope_orig_ctx) */
    bool fused_qkv;            /* wq, wk, wv are views on one attn_qkv */
    bool fused_gate_up;        /* w_gate, w_up are views on one ffn_up */
    bool computable;           /* engine.c computes this architecture */
    /* qwen35 (issue 23); for the others n_layer_kv = n_layer, n_layer_rec = 0 */
    int64_t n_layer_kv, n_layer_rec; /* attention layers (KV rows), recurrent layers */
    bool attn_gate;            /* attention's wq gives 2 q_dim rows: each head's q, then its
                                  output gate (sigmoid, times attention's output) */
    int64_t q_rows;            /* rows of wq: q_dim, or 2 q_dim with attn_gate */
    int64_t ssm_conv;          /* K: taps of the causal conv (the state keeps K - 1 inputs) */
    int64_t ssm_state;         /* S: the size of a key head and of a value head */
    int64_t ssm_groups;        /* G: key (and query) heads */
    int64_t ssm_heads;         /* V: value heads (a multiple of G; head h uses key head h % G) */
    int64_t conv_dim;          /* 2 G S + V S: the conv's channels */
    int64_t qkv_width;         /* floats of a token's row after the first product of any layer */
    uint8_t *rope_still;       /* (rope_dim / 2) 1 for the pairs imrope leaves unrotated for
                                  text (the fourth section's), or NULL */
    /* mixtures of experts (issue 24); 0 for dense models */
    int64_t n_expert, n_expert_used, n_ff_exp;
    int64_t n_layer_moe;       /* layers with experts (exp_gate set) */
    enum llm_moe_gating moe_gating;
    bool moe_norm;             /* the k weights renormalised to sum 1 */
    bool fused_gate_up_exps;   /* the experts' gate and up are views on one ffn_gate_up_exps */
    struct llm_weight *experts; /* (n_layer_moe * 3 * n_expert) what the layers' exp_* point into */
    /* gemma4's per-layer inputs (n_pl values a layer; 0: none): the token
     * rows (n_vocab rows of n_pl n_layer), the projection of the scaled
     * embedding (n_embd -> n_pl n_layer) and its norm (n_pl) */
    int64_t n_pl;
    struct llm_weight pl_tok_embd, pl_model_proj;
    const float *pl_proj_norm;
    int64_t n_layer_kv_shared; /* gemma4: the last layers, which read earlier layers' KV */
    /* the KV cache's layers: kv_owner (n_layer_kv) is the layer whose K/V
     * rows each holds (its head_dim, n_head_kv give the rows' shape). The
     * export layout (and the block files) cut them into n_kv_runs runs of
     * kv_unit elements a position (the gcd of their kv_dim, a multiple or a
     * divisor of each one's head_dim): one run a layer unless the layers'
     * widths differ (gemma4's global and local layers) */
    int64_t *kv_owner;
    int64_t kv_unit, n_kv_runs;
};

/* GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x +
 * 0.044715 x^3), computed as x / (1 + e^(-2u)) (the same function; one
 * expf costs a third of a tanhf, and e^(-2u) = inf gives -0 as it should).
 * The one definition of engine.c, moe.c and forward-ref.c */
static inline float llm_gelu_tanh(float x)
{
    float u = 0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

/* gpt-oss's clamped SwiGLU of one gate and up value (LLM_FFN_SWIGLU_OAI) */
static inline float llm_swiglu_oai(float gate, float up)
{
    float g = gate < 7.0f ? gate : 7.0f;
    float u = up < -7.0f ? -7.0f : up > 7.0f ? 7.0f : up;
    return g / (1.0f + expf(1.702f * (-g))) * (u + 1.0f);
}

/* YaRN (rope_yarn): ggml's correction dimensions for a RoPE base (beta
 * fast 32, slow 1, over rope_orig_ctx) ... */
void llm_model_yarn_dims(const struct llm_model *m, float base, float dims[2]);
/* ... and pair i's angle from its unscaled one: the interpolated
 * (freq_scale theta) and the unscaled mixed by ggml's ramp */
static inline float llm_yarn_theta(float theta_extrap, float freq_scale, const float dims[2], int64_t i)
{
    float interp = freq_scale * theta_extrap;
    float y = ((float)i - dims[0]) / fmaxf(0.001f, dims[1] - dims[0]);
    float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
    return interp * (1.0f - ramp) + theta_extrap * ramp;
}

/* the bytes of one recurrent layer's state: the conv window, then the
 * delta-rule matrices (f32) */
uint64_t llm_model_rstate_layer_floats(const struct llm_model *m);

/* phi3: the factors for a context of n_ctx positions (llama.cpp's
 * get_rope_factors; llama.cpp compares its n_ctx padded to 256), or NULL */
const float *llm_model_rope_factors(const struct llm_model *m, int64_t n_ctx);

/* packed.c: pack the weights whose type is stored packed (every quantized
 * type), from the cache file in dir if it matches the model at model_path
 * (mapped, or copied into anonymous huge pages in the background: see
 * packed.c; KVCHAT_PACKED_LOAD=map|copy|auto), else in memory (then the
 * cache file is written by a background thread). dir NULL: no cache file.
 * 0, or -1 and a message in err (no memory, a bad KVCHAT_PACKED_LOAD). */
int llm_model_pack(struct llm_model *m, const char *dir, const char *model_path, char *err, size_t err_size);
void llm_model_unpack(struct llm_model *m); /* waits for the writer, frees */
/* the first pass begins: the background touching of the mapped weights
 * (packed.c's prefault) stops, leaving both cores to the pass, and a copy
 * of them still under way is finished (the caller helping). 0, or -1 when
 * the weights could not be read (nothing may then use them) */
int llm_model_first_pass(const struct llm_model *m);

#endif
