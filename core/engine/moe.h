/*
 * moe.h - (internal to core/engine) the mixture-of-experts FFN (issue 24):
 * gating a token's router logits, grouping a pass's tokens by expert, and
 * the work units of the phases engine.c runs for a layer with experts.
 *
 * A pass through such a layer, after the FFN norm (engine.c's PH_FFN_IN):
 *   router   logits = W_router x, engine.c's product units (one definition
 *            per element, as every product);
 *   route    (serial, the router phase's `after` step) every token's top k
 *            experts and weights (llm_moe_gate), then the pass's (token,
 *            rank) pairs grouped by expert: "rows", in expert order, tokens
 *            ascending within an expert;
 *   gather   (more than one token) each row's input (the token's normed
 *            activations) copied to the rows' buffer, so that each expert's
 *            tokens are contiguous for its product;
 *   glu      per expert, h = silu(W_gate x) * (W_up x) over its rows: units
 *            of rows of its weights times blocks of its tokens, so an
 *            expert's weights are read once a pass (more than 128 tokens:
 *            once per block of 128); one token reads only its k experts;
 *   down_in  (I16 weights) each row's h quantized;
 *   down     per expert, y = W_down h over its rows;
 *   sum      per token, out = w_0 y_0 + w_1 y_1 + ... in rank order (the
 *            order of the weights, largest first; llama.cpp's order).
 * Batch invariance: each expert product of a token computes, element by
 * element, what the one-token product computes (quant.h's definitions do
 * not depend on the tokens multiplied together), gating is a per-token
 * function, and the sum has one order; so a token's output does not
 * depend on the tokens sharing its experts, on the pass or the threads.
 *
 * The pool may run a stale thread's compute while a later phase rewrites
 * the routing tables (pool.h): every index read from them is clamped
 * before it addresses memory.
 */
#ifndef KVCHAT_CORE_ENGINE_MOE_H
#define KVCHAT_CORE_ENGINE_MOE_H

#include "core/engine/model.h"

/* the phases after the router, in their order */
enum llm_moe_phase {
    LLM_MOE_GATHER,
    LLM_MOE_GLU,
    LLM_MOE_DOWN_IN,
    LLM_MOE_DOWN,
    LLM_MOE_SUM,
    LLM_MOE_PHASE_COUNT
};

/* One token's gating: logits (n_expert) to its k experts sel[0..k) in rank
 * order (the weights' order, ties to the lower index) and their weights
 * w[0..k). SOFTMAX: p = softmax(logits) (max subtracted, sum in double in
 * expert order, times the f32 reciprocal), the k largest p, and with norm
 * each divided by their sum (double, rank order; at least 2^-14 as
 * llama.cpp clamps it). SOFTMAX_WEIGHT: the k largest logits, softmax over
 * them. n_expert <= 1024, 1 <= k <= n_expert. */
void llm_moe_gate(enum llm_moe_gating gating, bool norm, const float *logits, int64_t n_expert, int64_t k,
                  int32_t *sel, float *w);

/* a context's MoE buffers for passes of up to n_batch tokens (caller frees
 * with llm_moe_free); NULL when out of memory */
struct llm_moe *llm_moe_init(const struct llm_model *m, int64_t n_batch);
void llm_moe_free(struct llm_moe *x);
/* (n_batch, n_expert) where the router product writes its logits */
float *llm_moe_logits(struct llm_moe *x);

/* where a layer's FFN input and output are: the normed rows (f32), their
 * I16 form (act + t * act_stride, where the layer's products want it) and
 * the output rows (n_embd floats each) */
struct llm_moe_io {
    const float *xn;
    const uint8_t *act;
    size_t act_stride;
    float *out;
    bool down_i16;     /* the down product wants its input quantized */
};

/* One-token products (engine.c), shared with the experts' phases: the
 * units of weight W (DEC_ROWS rows, whole row groups, of its first half
 * with the same rows of its second half, and a unit for an odd last
 * group), and unit k's row ranges [r0, r1) and [r2, r3) (r3 at most n_out:
 * with an even number of groups the last may be partial). */
#define LLM_DEC_ROWS 16 /* one-token products: rows of each half of a matrix per unit */
int64_t llm_dec_rows(const struct llm_weight *W); /* LLM_DEC_ROWS rounded up to whole groups */
int64_t llm_dec_units(const struct llm_weight *W);
void llm_dec_unit(const struct llm_weight *W, int64_t k, int64_t r[4]);

/* the route step of layer L: gate tokens [0, T) of the logits and group them */
void llm_moe_route(struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L, int64_t T);
/* the units of phase ph for T tokens: as routed (after llm_moe_route), or
 * the most any routing can give (max) */
int64_t llm_moe_units(const struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L,
                      enum llm_moe_phase ph, int64_t T, bool max);
/* units per chunk */
int64_t llm_moe_step(enum llm_moe_phase ph, int64_t T);
/* scratch bytes a unit chunk of any phase needs */
size_t llm_moe_scratch_bytes(const struct llm_model *m);

void llm_moe_compute(const struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L,
                     enum llm_moe_phase ph, const struct llm_moe_io *io, int64_t T, int64_t u0, int64_t u1,
                     void *scratch);
void llm_moe_commit(struct llm_moe *x, const struct llm_model *m, const struct llm_layer *L,
                    enum llm_moe_phase ph, const struct llm_moe_io *io, int64_t T, int64_t u0, int64_t u1,
                    const void *scratch);
/* one token: the per-row steps between the phases, done serially after
 * phase ph (glu: h quantized for down; down: the sum into io->out) */
void llm_moe_after_one(struct llm_moe *x, const struct llm_model *m, enum llm_moe_phase ph,
                       const struct llm_moe_io *io);

#endif
