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
    const uint8_t *data;   /* in the mapping */
    uint32_t type;
    int64_t n_in, n_out;
    size_t row_bytes;
    const struct llm_type_ops *ops;    /* of type */
    const struct llm_type_ops *vd_ops; /* of ops->vec_dot_type */
    size_t vd_bytes;                   /* n_in elements as vec_dot_type */
    const struct llm_pack_ops *pack;   /* non-NULL: data holds groups of 8 packed rows */
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
    int64_t max_vd_bytes;      /* largest vd_bytes of any weight */
    struct llm_packed *packed; /* packed.c: the packed weights, or NULL */
};

/* packed.c: pack the weights that have a packed form on this CPU, from the
 * cache file in dir if it matches the model at model_path, else in memory
 * (then the cache file is written by a background thread); best effort:
 * weights stay as rows where it fails. dir NULL: no cache file. */
void llm_model_pack(struct llm_model *m, const char *dir, const char *model_path);
void llm_model_unpack(struct llm_model *m); /* waits for the writer, frees */

#endif
