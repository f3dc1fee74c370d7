/*
 * deltanet.h - (internal to core/engine) the steps of a Gated DeltaNet
 * layer (qwen35) that are not matrix products: the causal conv of each
 * token and the delta-rule recurrence of each value head. engine.c runs
 * them as phases of a pass; model.h has the layer's tensors.
 *
 * A token's row after the layer's first product (engine.c's qkv buffer):
 *   [0, conv_dim)                  the conv's input: q (G S), k (G S), v (V S)
 *   [conv_dim, conv_dim + V S)     z, the output gate
 *   then V alpha, then V beta
 * A token's row after the conv (rq_width floats):
 *   [0, G S) q, L2-normalised per head; [G S, 2 G S) k, likewise;
 *   [2 G S, conv_dim) v; then V g = softplus(alpha + dt_bias) A; then V
 *   beta = sigmoid(beta).
 * One recurrent layer's state (llm_model_rstate_layer_floats floats): the
 * conv window, K - 1 rows of conv_dim inputs (oldest first), then V
 * matrices of S x S, row j (a value index) over the key index i.
 */
#ifndef KVCHAT_CORE_DELTANET_H
#define KVCHAT_CORE_DELTANET_H

#include "core/engine/model.h"

#include <stddef.h>
#include <stdint.h>

static inline int64_t llm_dn_rq_width(const struct llm_model *m) { return m->conv_dim + 2 * m->ssm_heads; }

/* token t of a pass: raw (rows of ld floats, tokens [0, t] of the pass),
 * window (the conv window before the pass) -> out (rq_width floats) */
void llm_dn_conv(const struct llm_model *m, const struct llm_layer *L, const float *window, const float *raw,
                 size_t ld, int64_t t, float *out);

/* the conv window after a pass of T tokens (rows raw, ld floats apart) */
void llm_dn_window_update(const struct llm_model *m, float *window, const float *raw, size_t ld, int64_t T);

/* value head h over the pass's T tokens, in order: the state matrix st
 * (S x S, updated in place), rq (rows of rq_width), raw (rows of ld: z) ->
 * out (T rows of S floats: the gated RMSNorm of S^T q / sqrt(S)) */
void llm_dn_head(const struct llm_model *m, const struct llm_layer *L, int64_t h, float *st, const float *rq,
                 const float *raw, size_t ld, int64_t T, float *out);

#endif
