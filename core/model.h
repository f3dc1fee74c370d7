/*
 * model.h - (internal to core/) a bound model: hyperparameters and pointers
 * to each tensor where it lies in the GGUF mapping (or, for weights packed
 * at open, in packed.c's memory or cache file). Shared by model.c (which
 * binds and checks) and engine.c (which computes).
 */
#ifndef KVCHAT_CORE_MODEL_H
#define KVCHAT_CORE_MODEL_H

#include "core/llm.h"
#include "core/quant.h"

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
    struct llm_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv; /* optional biases (q_dim), (kv_dim), (kv_dim) */
    const float *q_norm, *k_norm; /* qwen3: (head_dim) */
    const float *ffn_norm;   /* (n_embd) */
    struct llm_weight w_gate, w_up, w_down;
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
};

/* packed.c: pack the weights whose type is stored packed (every quantized
 * type), from the cache file in dir if it matches the model at model_path,
 * else in memory (then the cache file is written by a background thread).
 * dir NULL: no cache file. 0, or -1 when there is no memory for them. */
int llm_model_pack(struct llm_model *m, const char *dir, const char *model_path);
void llm_model_unpack(struct llm_model *m); /* waits for the writer, frees */

#endif
