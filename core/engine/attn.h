/*
 * attn.h - (internal to core/ and its tests) attention of one or more
 * query tokens over the KV cache and a vectorised softmax; the kernels are chosen by cpuid, as the
 * quant kernels are (KVCHAT_CPU caps them the same way).
 */
#ifndef KVCHAT_CORE_ATTN_H
#define KVCHAT_CORE_ATTN_H

#include <stddef.h>
#include <stdint.h>

#define LLM_ATTN_MAX_Q 64 /* most query heads in one job */

/* n_rows query tokens at consecutive positions, each with nq query heads
 * (row r: q + r * q_stride, nq heads of hd floats) that share one KV head,
 * against that head's cache rows (k, v: rows of hd elements of kv_type,
 * LLM_TYPE_F16 or LLM_TYPE_F32, one after another); row r sees positions
 * [lo_r, n_kv + r), lo_r = 0 or, with a sliding window, max(0, n_kv + r -
 * window) (the query at position p sees the keys p' with p - p' < window):
 *   out[r][h] = softmax(cap(scale * q[r][h] . K^T)) V     (out + r * out_stride)
 * cap(s) = softcap * tanh(s / softcap) when softcap > 0 (gemma2), else s.
 * With sinks (gpt-oss), head h's softmax also counts the logit sinks[h]
 * (unscaled), placed after the row's last key: its maximum, its sum, no
 * value (llama.cpp's soft_max with sinks).
 * Every result is computed exactly as for that row alone (n_rows = 1):
 * each score one dot product of eight lanes and a fixed tree, then scaled
 * (and capped); softmax over the row's keys from lo_r; P V key by key in
 * order from lo_r. So rows give the same bits in any batch.
 * scratch: llm_attn_scratch_floats(n_rows * nq, hd, n_kv + n_rows) floats,
 * 32-byte aligned. */
struct llm_attn_job {
    const float *q;
    int64_t q_stride;
    float *out;
    int64_t out_stride;
    int64_t n_rows, nq, hd, n_kv;
    const void *k, *v;
    uint32_t kv_type;
    void (*f16_to_float)(const void *x, float *y, int64_t k); /* for F16 rows */
    float scale;
    int64_t window;  /* 0: none */
    float softcap;   /* 0: none */
    const float *sinks; /* (nq) each head's sink logit, or NULL */
    float *scratch;
};
size_t llm_attn_scratch_floats(int64_t nq, int64_t hd, int64_t n_kv);
void llm_attn_rows(const struct llm_attn_job *a);

/* s[0..n) = c tanh(s / c) in place (soft-capping: llama.cpp's scale by
 * 1/c, tanh, scale by c), one scalar definition for every path */
void llm_softcap(float *s, int64_t n, float c);

/* s[0..n) = exp(s - max) / sum, in place (n >= 1) */
void llm_softmax(float *s, int64_t n);

#if defined(__aarch64__)
/* attention's inner steps on NEON (attn-neon.c), the bits of attn.c's
 * portable definitions; head_dim a multiple of 8 */
void llm_attn_scores_neon(const float *q, const float *k, int64_t hd, int64_t nr, float scale, float *s);
void llm_attn_softmax_neon(float *s, int64_t n, float *sum_out);
void llm_attn_softmax_norm_neon(float *s, int64_t n);
void llm_attn_accumulate_neon(float *out, const float *p, const float *v, int64_t nr, int64_t hd);
#endif

#endif
