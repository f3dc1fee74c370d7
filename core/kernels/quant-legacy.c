/*
 * quant-legacy.c - the 32-element "legacy" quantized types Q4_0, Q4_1,
 * Q5_0 and Q5_1 as rows (layouts in core/kernels/quant.h): reference dequantizers,
 * AVX2 dequantizers that give the same bits, and round-to-nearest
 * quantizers (for tests and test models). Their matrix products work on
 * packed rows (quant-pack.c).
 *
 * Invariant: to_float on every path is bit-identical to the reference: the
 * same f32 operations in the same order, element by element (an int quant
 * is converted to float exactly, then d * q, then + m for the _1 types; no
 * fused multiply-add here). gguf-py's numpy dequantizers compute the same
 * expressions, which tests/test_quant.c checks against goldens. Nothing
 * here allocates or keeps state.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

#define QK 32

struct block_q4_0 {
    uint16_t d;
    uint8_t qs[QK / 2];
};
struct block_q4_1 {
    uint16_t d, m;
    uint8_t qs[QK / 2];
};
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
};
struct block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
};

_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 block size");
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 block size");
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 block size");
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 block size");
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 block size");

/* element i (0..31) of a block: its 4-bit field and its fifth bit */
static inline int nibble(const uint8_t *qs, int i)
{
    return i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4;
}

static inline int hbit(const uint8_t qh[4], int i)
{
    return (qh[i / 8] >> (i % 8)) & 1;
}

/* ==== reference dequantizers ==== */

static void q4_0_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q4_0 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        float d = llm_fp16_to_fp32(x[b].d);
        for (int i = 0; i < QK; i++)
            y[b * QK + i] = (float)(nibble(x[b].qs, i) - 8) * d;
    }
}

static void q4_1_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q4_1 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        float d = llm_fp16_to_fp32(x[b].d), m = llm_fp16_to_fp32(x[b].m);
        for (int i = 0; i < QK; i++)
            y[b * QK + i] = (float)nibble(x[b].qs, i) * d + m;
    }
}

static void q5_0_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q5_0 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        float d = llm_fp16_to_fp32(x[b].d);
        for (int i = 0; i < QK; i++)
            y[b * QK + i] = (float)(nibble(x[b].qs, i) + 16 * hbit(x[b].qh, i) - 16) * d;
    }
}

static void q5_1_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q5_1 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        float d = llm_fp16_to_fp32(x[b].d), m = llm_fp16_to_fp32(x[b].m);
        for (int i = 0; i < QK; i++)
            y[b * QK + i] = (float)(nibble(x[b].qs, i) + 16 * hbit(x[b].qh, i)) * d + m;
    }
}

/* ==== reference quantizers (round to nearest, as ggml's *_ref) ==== */
/* These exist for tests and benchmarks; they are not llama.cpp's
 * importance-weighted quantizers. */

static void block_amax(const float *x, float *max_signed)
{
    float amax = 0, max = 0;
    for (int i = 0; i < QK; i++)
        if (amax < (x[i] < 0 ? -x[i] : x[i])) {
            amax = x[i] < 0 ? -x[i] : x[i];
            max = x[i];
        }
    *max_signed = max;
}

static void block_minmax(const float *x, float *min, float *max)
{
    *min = x[0];
    *max = x[0];
    for (int i = 1; i < QK; i++) {
        if (x[i] < *min)
            *min = x[i];
        if (x[i] > *max)
            *max = x[i];
    }
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void q4_0_from_float(const float *x, void *vy, int64_t k)
{
    struct block_q4_0 *y = vy;
    for (int64_t b = 0; b < k / QK; b++) {
        const float *xb = x + b * QK;
        float max;
        block_amax(xb, &max);
        float d = max / -8, id = d ? 1.0f / d : 0.0f;
        if (!isfinite(id)) /* d subnormal: stored as f16 zero */
            id = 0;
        y[b].d = llm_fp32_to_fp16(d);
        memset(y[b].qs, 0, sizeof y[b].qs);
        for (int i = 0; i < QK; i++) {
            int q = clampi((int)(xb[i] * id + 8.5f), 0, 15);
            y[b].qs[i % 16] |= (uint8_t)(q << (i < 16 ? 0 : 4));
        }
    }
}

static void q4_1_from_float(const float *x, void *vy, int64_t k)
{
    struct block_q4_1 *y = vy;
    for (int64_t b = 0; b < k / QK; b++) {
        const float *xb = x + b * QK;
        float min, max;
        block_minmax(xb, &min, &max);
        float d = (max - min) / 15, id = d ? 1.0f / d : 0.0f;
        if (!isfinite(id)) /* d subnormal: stored as f16 zero */
            id = 0;
        y[b].d = llm_fp32_to_fp16(d);
        y[b].m = llm_fp32_to_fp16(min);
        memset(y[b].qs, 0, sizeof y[b].qs);
        for (int i = 0; i < QK; i++) {
            int q = clampi((int)((xb[i] - min) * id + 0.5f), 0, 15);
            y[b].qs[i % 16] |= (uint8_t)(q << (i < 16 ? 0 : 4));
        }
    }
}

static void q5_0_from_float(const float *x, void *vy, int64_t k)
{
    struct block_q5_0 *y = vy;
    for (int64_t b = 0; b < k / QK; b++) {
        const float *xb = x + b * QK;
        float max;
        block_amax(xb, &max);
        float d = max / -16, id = d ? 1.0f / d : 0.0f;
        if (!isfinite(id)) /* d subnormal: stored as f16 zero */
            id = 0;
        y[b].d = llm_fp32_to_fp16(d);
        memset(y[b].qs, 0, sizeof y[b].qs);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int i = 0; i < QK; i++) {
            int q = clampi((int)(xb[i] * id + 16.5f), 0, 31);
            y[b].qs[i % 16] |= (uint8_t)((q & 15) << (i < 16 ? 0 : 4));
            y[b].qh[i / 8] |= (uint8_t)((q >> 4) << (i % 8));
        }
    }
}

static void q5_1_from_float(const float *x, void *vy, int64_t k)
{
    struct block_q5_1 *y = vy;
    for (int64_t b = 0; b < k / QK; b++) {
        const float *xb = x + b * QK;
        float min, max;
        block_minmax(xb, &min, &max);
        float d = (max - min) / 31, id = d ? 1.0f / d : 0.0f;
        if (!isfinite(id)) /* d subnormal: stored as f16 zero */
            id = 0;
        y[b].d = llm_fp32_to_fp16(d);
        y[b].m = llm_fp32_to_fp16(min);
        memset(y[b].qs, 0, sizeof y[b].qs);
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int i = 0; i < QK; i++) {
            int q = clampi((int)((xb[i] - min) * id + 0.5f), 0, 31);
            y[b].qs[i % 16] |= (uint8_t)((q & 15) << (i < 16 ? 0 : 4));
            y[b].qh[i / 8] |= (uint8_t)((q >> 4) << (i % 8));
        }
    }
}

/* ==== AVX2 dequantizers ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define SFX(name) name##_avx2
/* 32 bytes: element i of the block's 4-bit fields (0..15): the 16 bytes in
 * both halves, the upper half shifted down by 4 */
static inline __m256i SFX(nibbles32)(const uint8_t *qs)
{
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* 32 bytes: 0xff where bit i of the little-endian u32 qh is set, else 0 */
static inline __m256i SFX(hmask32)(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* 32 bytes: 0x10 where bit i of qh is set, else 0 */
static inline __m256i SFX(hbits32)(const uint8_t *qh)
{
    return _mm256_and_si256(SFX(hmask32)(qh), _mm256_set1_epi8(0x10));
}

static inline float SFX(h2f)(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* y[0..31] = (float)(q[i] - off) * d (+ m): q as 32 unsigned bytes */
static inline void SFX(store32)(float *y, __m256i q, int off, float d, float m, int with_m)
{
    __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
    __m256i voff = _mm256_set1_epi32(off);
    __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int p = 0; p < 4; p++) {
        __m128i b8 = p & 1 ? _mm_srli_si128(h[p / 2], 8) : h[p / 2];
        __m256i i32 = _mm256_sub_epi32(_mm256_cvtepu8_epi32(b8), voff);
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(i32), vd);
        if (with_m)
            f = _mm256_add_ps(f, vm);
        _mm256_storeu_ps(y + 8 * p, f);
    }
}

static void SFX(q4_0_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q4_0 *x = vx;
    for (int64_t b = 0; b < k / QK; b++)
        SFX(store32)(y + b * QK, SFX(nibbles32)(x[b].qs), 8, SFX(h2f)(x[b].d), 0, 0);
}

static void SFX(q4_1_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q4_1 *x = vx;
    for (int64_t b = 0; b < k / QK; b++)
        SFX(store32)(y + b * QK, SFX(nibbles32)(x[b].qs), 0, SFX(h2f)(x[b].d),
                     SFX(h2f)(x[b].m), 1);
}

static void SFX(q5_0_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q5_0 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        __m256i q = _mm256_or_si256(SFX(nibbles32)(x[b].qs), SFX(hbits32)(x[b].qh));
        SFX(store32)(y + b * QK, q, 16, SFX(h2f)(x[b].d), 0, 0);
    }
}

static void SFX(q5_1_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q5_1 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        __m256i q = _mm256_or_si256(SFX(nibbles32)(x[b].qs), SFX(hbits32)(x[b].qh));
        SFX(store32)(y + b * QK, q, 0, SFX(h2f)(x[b].d), SFX(h2f)(x[b].m), 1);
    }
}
#undef SFX
#pragma GCC pop_options
#endif

/* ==== registration ==== */

void llm_quant_legacy_init(struct llm_type_ops *t, unsigned cpu)
{
    t[LLM_TYPE_Q4_0] = (struct llm_type_ops){q4_0_to_float_ref, q4_0_to_float_ref, q4_0_from_float};
    t[LLM_TYPE_Q4_1] = (struct llm_type_ops){q4_1_to_float_ref, q4_1_to_float_ref, q4_1_from_float};
    t[LLM_TYPE_Q5_0] = (struct llm_type_ops){q5_0_to_float_ref, q5_0_to_float_ref, q5_0_from_float};
    t[LLM_TYPE_Q5_1] = (struct llm_type_ops){q5_1_to_float_ref, q5_1_to_float_ref, q5_1_from_float};
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_Q4_0].to_float = q4_0_to_float_avx2;
        t[LLM_TYPE_Q4_1].to_float = q4_1_to_float_avx2;
        t[LLM_TYPE_Q5_0].to_float = q5_0_to_float_avx2;
        t[LLM_TYPE_Q5_1].to_float = q5_1_to_float_avx2;
    }
#else
    (void)cpu;
#endif
}
