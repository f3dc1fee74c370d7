/*
 * quant-legacy.c - the 32-element "legacy" quantized types Q4_0, Q4_1,
 * Q5_0 and Q5_1 (layouts in core/quant.h): reference dequantizers, fast
 * dequantizers, and dot products against Q8_0 activations.
 *
 * Invariants:
 * - to_float on every path (portable, AVX2, AVX-512 VNNI) is bit-identical
 *   to the reference: the same f32 operations in the same order, element by
 *   element (an int quant is converted to float exactly, then d * q, then
 *   + m for the _1 types; no fused multiply-add here). gguf-py's numpy
 *   dequantizers compute the same expressions, which tests/test_quant.c
 *   checks against goldens.
 * - vec_dot on every path is bit-identical to vec_dot_ref. The reference
 *   defines the float order the SIMD kernels use naturally: a block's 32
 *   products are summed exactly as integers in 8 "lanes" of 4 consecutive
 *   elements; each lane's integer sum is scaled and added to the lane's
 *   accumulator with one fused multiply-add (fmaf: a single rounding, as
 *   the SIMD FMA). There are two accumulator sets, acc[b % 2][j] for even
 *   and odd blocks, so that two dependency chains run in parallel; at the
 *   end a[j] = acc[0][j] + acc[1][j] and the 8 lanes are added as
 *   ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), the tree of a 256-bit
 *   horizontal sum. Integer sums are exact, so only this float order
 *   matters.
 * - Nothing here allocates or keeps state.
 */
#include "core/llm.h"
#include "core/quant.h"

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

/* ==== reference dot products against Q8_0 ==== */

/* the 8-lane horizontal sum whose order the SIMD kernels share */
static float lanes_sum(const float a[8])
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/*
 * One generic loop for the four types: element i of block b has integer
 * value q(i) (offset already applied for the _0 types); per lane j,
 *   qy_j = sum of q(i) * y_i over i = 4j..4j+3,   sy_j = sum of y_i (same i)
 *   acc = fmaf(dx * dy, qy_j, acc)                         (Q4_0, Q5_0)
 *   acc = fmaf(mx * dy, sy_j, fmaf(dx * dy, qy_j, acc))     (Q4_1, Q5_1)
 * for acc = acc[b % 2][j], with dx, mx, dy the blocks' f16 values as f32.
 */
static float vec_dot_legacy_ref(uint32_t type, int64_t n, const void *vx, const void *vy)
{
    const struct block_q8_0 *y = vy;
    const uint8_t *xb = vx;
    int64_t bytes = llm_type_block_bytes(type);
    float acc[2][8] = {{0}};
    for (int64_t b = 0; b < n / QK; b++, xb += bytes) {
        int q[QK];
        float dx, mx = 0;
        uint16_t h;
        memcpy(&h, xb, 2);
        dx = llm_fp16_to_fp32(h);
        if (type == LLM_TYPE_Q4_1 || type == LLM_TYPE_Q5_1) {
            memcpy(&h, xb + 2, 2);
            mx = llm_fp16_to_fp32(h);
        }
        switch (type) {
        case LLM_TYPE_Q4_0:
            for (int i = 0; i < QK; i++)
                q[i] = nibble(xb + 2, i) - 8;
            break;
        case LLM_TYPE_Q4_1:
            for (int i = 0; i < QK; i++)
                q[i] = nibble(xb + 4, i);
            break;
        case LLM_TYPE_Q5_0:
            for (int i = 0; i < QK; i++)
                q[i] = nibble(xb + 6, i) + 16 * hbit(xb + 2, i) - 16;
            break;
        default: /* Q5_1 */
            for (int i = 0; i < QK; i++)
                q[i] = nibble(xb + 8, i) + 16 * hbit(xb + 4, i);
            break;
        }
        float dy = llm_fp16_to_fp32(y[b].d), dxy = dx * dy, mxy = mx * dy;
        for (int j = 0; j < 8; j++) {
            int qy = 0, sy = 0;
            for (int i = 4 * j; i < 4 * j + 4; i++) {
                qy += q[i] * y[b].qs[i];
                sy += y[b].qs[i];
            }
            float *a = &acc[b % 2][j];
            *a = fmaf(dxy, (float)qy, *a);
            if (type == LLM_TYPE_Q4_1 || type == LLM_TYPE_Q5_1)
                *a = fmaf(mxy, (float)sy, *a);
        }
    }
    float a[8];
    for (int j = 0; j < 8; j++)
        a[j] = acc[0][j] + acc[1][j];
    return lanes_sum(a);
}

static float q4_0_vec_dot_ref(int64_t n, const void *x, const void *y)
{
    return vec_dot_legacy_ref(LLM_TYPE_Q4_0, n, x, y);
}
static float q4_1_vec_dot_ref(int64_t n, const void *x, const void *y)
{
    return vec_dot_legacy_ref(LLM_TYPE_Q4_1, n, x, y);
}
static float q5_0_vec_dot_ref(int64_t n, const void *x, const void *y)
{
    return vec_dot_legacy_ref(LLM_TYPE_Q5_0, n, x, y);
}
static float q5_1_vec_dot_ref(int64_t n, const void *x, const void *y)
{
    return vec_dot_legacy_ref(LLM_TYPE_Q5_1, n, x, y);
}

/* ==== x86 kernels: the same source compiled for AVX2 and AVX-512 VNNI ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define SFX(name) name##_avx2
#define USE_VNNI 0
#include "core/quant-legacy-x86.h"
#undef SFX
#undef USE_VNNI
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#define SFX(name) name##_vnni
#define USE_VNNI 1
#include "core/quant-legacy-x86.h"
#undef SFX
#undef USE_VNNI
#pragma GCC pop_options
#endif

/* ==== registration ==== */

void llm_quant_legacy_init(struct llm_type_ops *t, unsigned cpu)
{
    t[LLM_TYPE_Q4_0] = (struct llm_type_ops){LLM_TYPE_Q8_0, q4_0_to_float_ref, q4_0_to_float_ref,
                                             q4_0_from_float, q4_0_vec_dot_ref, q4_0_vec_dot_ref};
    t[LLM_TYPE_Q4_1] = (struct llm_type_ops){LLM_TYPE_Q8_0, q4_1_to_float_ref, q4_1_to_float_ref,
                                             q4_1_from_float, q4_1_vec_dot_ref, q4_1_vec_dot_ref};
    t[LLM_TYPE_Q5_0] = (struct llm_type_ops){LLM_TYPE_Q8_0, q5_0_to_float_ref, q5_0_to_float_ref,
                                             q5_0_from_float, q5_0_vec_dot_ref, q5_0_vec_dot_ref};
    t[LLM_TYPE_Q5_1] = (struct llm_type_ops){LLM_TYPE_Q8_0, q5_1_to_float_ref, q5_1_to_float_ref,
                                             q5_1_from_float, q5_1_vec_dot_ref, q5_1_vec_dot_ref};
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_Q4_0].to_float = q4_0_to_float_avx2;
        t[LLM_TYPE_Q4_1].to_float = q4_1_to_float_avx2;
        t[LLM_TYPE_Q5_0].to_float = q5_0_to_float_avx2;
        t[LLM_TYPE_Q5_1].to_float = q5_1_to_float_avx2;
        t[LLM_TYPE_Q4_0].vec_dot = q4_0_vec_dot_avx2;
        t[LLM_TYPE_Q4_1].vec_dot = q4_1_vec_dot_avx2;
        t[LLM_TYPE_Q5_0].vec_dot = q5_0_vec_dot_avx2;
        t[LLM_TYPE_Q5_1].vec_dot = q5_1_vec_dot_avx2;
    }
    if (cpu & LLM_CPU_AVX512_VNNI) {
        t[LLM_TYPE_Q4_0].vec_dot = q4_0_vec_dot_vnni;
        t[LLM_TYPE_Q4_1].vec_dot = q4_1_vec_dot_vnni;
        t[LLM_TYPE_Q5_0].vec_dot = q5_0_vec_dot_vnni;
        t[LLM_TYPE_Q5_1].vec_dot = q5_1_vec_dot_vnni;
    }
#else
    (void)cpu;
#endif
}
