/*
 * attn.h - (internal to core/ and its tests) decode attention over the KV
 * cache and a vectorised softmax; the kernels are chosen by cpuid, as the
 * quant kernels are (KVCHAT_CPU caps them the same way).
 */
#ifndef KVCHAT_CORE_ATTN_H
#define KVCHAT_CORE_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define LLM_ATTN_MAX_Q 64 /* most query heads in one job */

/* nq query heads (q: nq rows of hd floats) that share one KV head, against
 * positions [0, n_kv) of it (k, v: n_kv rows of hd elements of kv_type,
 * LLM_TYPE_F16 or LLM_TYPE_F32, one after another):
 *   out[h] = softmax(scale * q[h] . K^T) V          (nq rows of hd floats)
 * scratch: llm_attn_scratch_floats(nq, hd, n_kv) floats, 32-byte aligned. */
struct llm_attn_job {
    const float *q;
    float *out;
    int64_t nq, hd, n_kv;
    const void *k, *v;
    uint32_t kv_type;
    void (*f16_to_float)(const void *x, float *y, int64_t k); /* for F16 rows */
    float scale;
    float *scratch;
};
size_t llm_attn_scratch_floats(int64_t nq, int64_t hd, int64_t n_kv);
void llm_attn_decode(const struct llm_attn_job *a);

/* s[0..n) = exp(s - max) / sum, in place (n >= 1) */
void llm_softmax(float *s, int64_t n);

#endif
