/*
 * quant-k.c - the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (layouts in
 * core/quant.h): reference dequantizers, fast dequantizers, and dot
 * products against Q8_K activations; and Q8_K itself.
 *
 * Invariants:
 * - to_float on every path (portable, AVX2, AVX-512 VNNI) is bit-identical
 *   to the reference: per sub-block a scale dl = d * sc (and ml = dmin * m)
 *   in f32, then each element dl * q (- ml); no fused multiply-add.
 *   gguf-py's numpy dequantizers compute the same expressions (tests check
 *   goldens).
 * - vec_dot on every path is bit-identical to vec_dot_ref: per super-block
 *   the integer sums isum = sum_s sc_s * sum_{i in s} q_i y_i and
 *   msum = sum_s m_s * sum_{i in s} y_i are exact (they fit in int32 for
 *   every input), and the float result is accumulated super-block by
 *   super-block in the one order the reference spells out.
 * - Q8_K's SIMD quantizer writes the same bytes as llm_quantize_row_q8_K.
 * - Nothing here allocates or keeps state.
 */
#include "core/llm.h"
#include "core/quant.h"

#include <math.h>
#include <string.h>

struct block_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
};
struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};
struct block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
};
struct block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};

_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K block size");
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K block size");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K block size");
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K block size");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K block size");
_Static_assert(sizeof(struct block_q8_K) == 292, "q8_K block size");

/* ==== field access: the bit layouts, element by element ==== */

/* the 2-bit field of element e (0..255) in Q2_K/Q3_K qs: each 128-element
 * half has 32 bytes; byte l holds elements l, l+32, l+64, l+96 */
static inline int q2_field(const uint8_t *qs, int e)
{
    int half = e / 128, r = e % 128;
    return (qs[32 * half + r % 32] >> (2 * (r / 32))) & 3;
}

/* the 4-bit field of element e in Q4_K/Q5_K qs: 32-byte group g holds
 * elements 64g + l (low nibble) and 64g + 32 + l (high nibble) */
static inline int q4_field(const uint8_t *qs, int e)
{
    int g = e / 64, r = e % 64;
    return r < 32 ? qs[32 * g + r] & 0x0f : qs[32 * g + r - 32] >> 4;
}

/* bit e / 32 of byte e % 32: Q3_K hmask and Q5_K qh */
static inline int high_bit(const uint8_t *h, int e)
{
    return (h[e % 32] >> (e / 32)) & 1;
}

/* Q6_K element e: low 4 bits from ql, high 2 from qh; 128-element halves,
 * within a half element r: ql byte r % 64 (nibble r / 64), qh byte r % 32
 * (bits 2 (r / 32)) */
static inline int q6_field(const uint8_t *ql, const uint8_t *qh, int e)
{
    int half = e / 128, r = e % 128;
    int lo = (ql[64 * half + r % 64] >> (4 * (r / 64))) & 0x0f;
    int hi = (qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
    return lo | hi << 4;
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7) from 12 bytes:
 * j < 4: low 6 bits of bytes j (scale) and j + 4 (min); j >= 4: low and
 * high nibble of byte j + 4, with the top 2 bits of bytes j - 4 (scale) and
 * j (min) above them */
static inline void k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q3_K: the 16 signed scales (6-bit field - 32): low 4 bits are nibble
 * j / 8 of byte j % 8, high 2 bits are bits 2 (j / 4) of byte 8 + j % 4 */
static inline void q3_scales(const uint8_t *s, int sc[16])
{
    for (int j = 0; j < 16; j++) {
        int lo = (s[j % 8] >> (4 * (j / 8))) & 0x0f;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (lo | hi << 4) - 32;
    }
}

/* ==== reference dequantizers ==== */

static void q2_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q2_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d), dmin = llm_fp16_to_fp32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            uint8_t s = x[b].scales[e / 16];
            float dl = d * (float)(s & 0x0f), ml = dmin * (float)(s >> 4);
            y[e] = dl * (float)q2_field(x[b].qs, e) - ml;
        }
    }
}

static void q3_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q3_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d);
        int sc[16];
        q3_scales(x[b].scales, sc);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)sc[e / 16];
            int q = q2_field(x[b].qs, e) - (high_bit(x[b].hmask, e) ? 0 : 4);
            y[e] = dl * (float)q;
        }
    }
}

static void q4_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q4_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d), dmin = llm_fp16_to_fp32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            int sc, m;
            k_scale_min(x[b].scales, e / 32, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            y[e] = dl * (float)q4_field(x[b].qs, e) - ml;
        }
    }
}

static void q5_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q5_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d), dmin = llm_fp16_to_fp32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            int sc, m;
            k_scale_min(x[b].scales, e / 32, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            int q = q4_field(x[b].qs, e) + 16 * high_bit(x[b].qh, e);
            y[e] = dl * (float)q - ml;
        }
    }
}

static void q6_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q6_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)x[b].scales[e / 16];
            y[e] = dl * (float)(q6_field(x[b].ql, x[b].qh, e) - 32);
        }
    }
}

/* ==== Q8_K ==== */

/* round to nearest, ties to even, for |v| < 2^22 (as ggml's nearest_int) */
static inline int nearest_int(float v)
{
    return (int)((v + 12582912.0f) - 12582912.0f);
}

void llm_quantize_row_q8_K(const float *x, struct block_q8_K *y, int64_t k)
{
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K) {
        float amax = 0, max = 0;
        for (int i = 0; i < QK_K; i++)
            if (fabsf(x[i]) > amax) {
                amax = fabsf(x[i]);
                max = x[i];
            }
        if (!(amax > 0) || !isfinite(amax)) { /* zero (or non-finite) block */
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* scaled by -127 / max so that the extreme value is exactly -127 */
        float iscale = -127.0f / max;
        if (!isfinite(iscale)) { /* max subnormal: the block is zero for our purposes */
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        for (int i = 0; i < QK_K; i++) {
            int v = nearest_int(iscale * x[i]);
            y[b].qs[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += y[b].qs[16 * j + i];
            y[b].bsums[j] = (int16_t)s;
        }
        y[b].d = 1 / iscale;
    }
}

void llm_dequantize_row_q8_K(const struct block_q8_K *x, float *y, int64_t k)
{
    for (int64_t b = 0; b < k / QK_K; b++)
        for (int i = 0; i < QK_K; i++)
            y[b * QK_K + i] = x[b].d * (float)x[b].qs[i];
}

static void q8_K_from_float(const float *x, void *y, int64_t k)
{
    llm_quantize_row_q8_K(x, y, k);
}

static void q8_K_to_float(const void *x, float *y, int64_t k)
{
    llm_dequantize_row_q8_K(x, y, k);
}

/* ==== reference dot products against Q8_K ==== */
/*
 * Per super-block b, with integer sums over its sub-blocks s
 *   isum = sum_s sc_s * sum_{i in s} q_i * y_i     (q with its offset applied)
 *   msum = sum_s m_s * sum_{i in s} y_i            (types with mins)
 * the result is accumulated in this order:
 *   sumf = sumf + (d * (float)isum - dmin * (float)msum)
 * where d = f16(x.d) * y.d and dmin = f16(x.dmin) * y.d; for the types
 * without mins (Q3_K, Q6_K) the term is just d * (float)isum.
 */

static float q2_K_vec_dot_ref(int64_t n, const void *vx, const void *vy)
{
    const struct block_q2_K *x = vx;
    const struct block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0, msum = 0;
        for (int s = 0; s < 16; s++) {
            int qy = 0, sy = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) {
                qy += q2_field(x[b].qs, e) * y[b].qs[e];
                sy += y[b].qs[e];
            }
            isum += (x[b].scales[s] & 0x0f) * qy;
            msum += (x[b].scales[s] >> 4) * sy;
        }
        float d = llm_fp16_to_fp32(x[b].d) * y[b].d, dmin = llm_fp16_to_fp32(x[b].dmin) * y[b].d;
        sumf = sumf + (d * (float)isum - dmin * (float)msum);
    }
    return sumf;
}

static float q3_K_vec_dot_ref(int64_t n, const void *vx, const void *vy)
{
    const struct block_q3_K *x = vx;
    const struct block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int sc[16], isum = 0;
        q3_scales(x[b].scales, sc);
        for (int s = 0; s < 16; s++) {
            int qy = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) {
                int q = q2_field(x[b].qs, e) - (high_bit(x[b].hmask, e) ? 0 : 4);
                qy += q * y[b].qs[e];
            }
            isum += sc[s] * qy;
        }
        float d = llm_fp16_to_fp32(x[b].d) * y[b].d;
        sumf = sumf + d * (float)isum;
    }
    return sumf;
}

static float q4_K_vec_dot_ref(int64_t n, const void *vx, const void *vy)
{
    const struct block_q4_K *x = vx;
    const struct block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0, msum = 0;
        for (int s = 0; s < 8; s++) {
            int sc, m, qy = 0, sy = 0;
            k_scale_min(x[b].scales, s, &sc, &m);
            for (int e = 32 * s; e < 32 * s + 32; e++) {
                qy += q4_field(x[b].qs, e) * y[b].qs[e];
                sy += y[b].qs[e];
            }
            isum += sc * qy;
            msum += m * sy;
        }
        float d = llm_fp16_to_fp32(x[b].d) * y[b].d, dmin = llm_fp16_to_fp32(x[b].dmin) * y[b].d;
        sumf = sumf + (d * (float)isum - dmin * (float)msum);
    }
    return sumf;
}

static float q5_K_vec_dot_ref(int64_t n, const void *vx, const void *vy)
{
    const struct block_q5_K *x = vx;
    const struct block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0, msum = 0;
        for (int s = 0; s < 8; s++) {
            int sc, m, qy = 0, sy = 0;
            k_scale_min(x[b].scales, s, &sc, &m);
            for (int e = 32 * s; e < 32 * s + 32; e++) {
                int q = q4_field(x[b].qs, e) + 16 * high_bit(x[b].qh, e);
                qy += q * y[b].qs[e];
                sy += y[b].qs[e];
            }
            isum += sc * qy;
            msum += m * sy;
        }
        float d = llm_fp16_to_fp32(x[b].d) * y[b].d, dmin = llm_fp16_to_fp32(x[b].dmin) * y[b].d;
        sumf = sumf + (d * (float)isum - dmin * (float)msum);
    }
    return sumf;
}

static float q6_K_vec_dot_ref(int64_t n, const void *vx, const void *vy)
{
    const struct block_q6_K *x = vx;
    const struct block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0;
        for (int s = 0; s < 16; s++) {
            int qy = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++)
                qy += (q6_field(x[b].ql, x[b].qh, e) - 32) * y[b].qs[e];
            isum += x[b].scales[s] * qy;
        }
        float d = llm_fp16_to_fp32(x[b].d) * y[b].d;
        sumf = sumf + d * (float)isum;
    }
    return sumf;
}

/* ==== x86 kernels: the same source compiled for AVX2 and AVX-512 VNNI ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define SFX(name) name##_avx2
#define USE_VNNI 0
#include "core/quant-k-x86.h"
#undef SFX
#undef USE_VNNI
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#define SFX(name) name##_vnni
#define USE_VNNI 1
#include "core/quant-k-x86.h"
#undef SFX
#undef USE_VNNI
#pragma GCC pop_options
#endif

/* ==== registration ==== */

void llm_quant_k_init(struct llm_type_ops *t, unsigned cpu)
{
    /* no weight quantizers for the K-quants: from_float is NULL */
    t[LLM_TYPE_Q2_K] = (struct llm_type_ops){LLM_TYPE_Q8_K, q2_K_to_float_ref, q2_K_to_float_ref,
                                             NULL, q2_K_vec_dot_ref, q2_K_vec_dot_ref};
    t[LLM_TYPE_Q3_K] = (struct llm_type_ops){LLM_TYPE_Q8_K, q3_K_to_float_ref, q3_K_to_float_ref,
                                             NULL, q3_K_vec_dot_ref, q3_K_vec_dot_ref};
    t[LLM_TYPE_Q4_K] = (struct llm_type_ops){LLM_TYPE_Q8_K, q4_K_to_float_ref, q4_K_to_float_ref,
                                             NULL, q4_K_vec_dot_ref, q4_K_vec_dot_ref};
    t[LLM_TYPE_Q5_K] = (struct llm_type_ops){LLM_TYPE_Q8_K, q5_K_to_float_ref, q5_K_to_float_ref,
                                             NULL, q5_K_vec_dot_ref, q5_K_vec_dot_ref};
    t[LLM_TYPE_Q6_K] = (struct llm_type_ops){LLM_TYPE_Q8_K, q6_K_to_float_ref, q6_K_to_float_ref,
                                             NULL, q6_K_vec_dot_ref, q6_K_vec_dot_ref};
    /* activations only: no vec_dot of its own */
    t[LLM_TYPE_Q8_K] = (struct llm_type_ops){LLM_TYPE_Q8_K, q8_K_to_float, q8_K_to_float,
                                             q8_K_from_float, NULL, NULL};
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_Q2_K].to_float = q2_K_to_float_avx2;
        t[LLM_TYPE_Q3_K].to_float = q3_K_to_float_avx2;
        t[LLM_TYPE_Q4_K].to_float = q4_K_to_float_avx2;
        t[LLM_TYPE_Q5_K].to_float = q5_K_to_float_avx2;
        t[LLM_TYPE_Q6_K].to_float = q6_K_to_float_avx2;
        t[LLM_TYPE_Q2_K].vec_dot = q2_K_vec_dot_avx2;
        t[LLM_TYPE_Q3_K].vec_dot = q3_K_vec_dot_avx2;
        t[LLM_TYPE_Q4_K].vec_dot = q4_K_vec_dot_avx2;
        t[LLM_TYPE_Q5_K].vec_dot = q5_K_vec_dot_avx2;
        t[LLM_TYPE_Q6_K].vec_dot = q6_K_vec_dot_avx2;
        t[LLM_TYPE_Q8_K].from_float = q8_K_from_float_avx2;
    }
    if (cpu & LLM_CPU_AVX512_VNNI) {
        t[LLM_TYPE_Q2_K].vec_dot = q2_K_vec_dot_vnni;
        t[LLM_TYPE_Q3_K].vec_dot = q3_K_vec_dot_vnni;
        t[LLM_TYPE_Q4_K].vec_dot = q4_K_vec_dot_vnni;
        t[LLM_TYPE_Q5_K].vec_dot = q5_K_vec_dot_vnni;
        t[LLM_TYPE_Q6_K].vec_dot = q6_K_vec_dot_vnni;
    }
#else
    (void)cpu;
#endif
}
