/*
 * quant-iq4.c - the 4-bit table types IQ4_NL, IQ4_XS and MXFP4: their row
 * conversions and their products against I16 activations (issue 24: the
 * popular "IQ" uploads of mixture-of-experts models use the first two,
 * gpt-oss ships its experts in MXFP4).
 *
 * Stored blocks (ggml's block_iq4_nl, block_iq4_xs; little-endian):
 *   IQ4_NL  32 elements in 18 bytes: f16 d; u8 qs[16]
 *           element i < 16: low nibble of qs[i], i >= 16: high nibble of qs[i - 16]
 *           x = d * K[nibble]
 *   IQ4_XS  256 elements in 136 bytes: f16 d; u16 scales_h; u8 scales_l[4];
 *           u8 qs[128]; sub-block s (32 elements, qs[16 s .. 16 s + 16) as
 *           IQ4_NL's qs) has the 6-bit scale ls = (low nibble s % 2 of
 *           scales_l[s / 2]) | (bits 2s, 2s + 1 of scales_h) << 4
 *           x = (d * (ls - 32)) * K[nibble]
 *   MXFP4   32 elements in 17 bytes: u8 e (E8M0); u8 qs[16] (as IQ4_NL's)
 *           x = E(e) * F[nibble]
 *   K = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
 *   (ggml-common.h's kvalues_iq4nl);
 *   F = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}, twice the
 *   E2M1 values (ggml's kvalues_mxfp4), and E(e) = 2^(e - 128), half the
 *   E8M0 scale 2^(e - 127) to make up for the doubling: the f32 with bits
 *   (e - 1) << 23, or 0x00200000 << e for e < 2 (subnormal; ggml's
 *   GGML_E8M0_TO_FP32_HALF).
 *
 * The definition of a product (quant.h): units of 32 elements, v = K[nibble]
 * and S = d (IQ4_NL) or d * (ls - 32) (IQ4_XS; an f16 times a 6-bit integer,
 * exact in f32), or v = F[nibble] and S = E(e) (MXFP4; a power of two), no
 * mins. The dequantized x = S * v, llama.cpp's dequantize_row_iq4_nl / _xs /
 * _mxfp4 bit for bit.
 *
 * Packed form (all three types): a group of 8 rows stores, for each unit u
 * of 32 elements, at u * 288: f32 S[8]; i8 v[16][8][2] (pair p, row r:
 * elements 2p, 2p + 1), the values already looked up in K or F. Twice the
 * bytes of the stored rows (the table would cost a lookup per element in
 * every product); the products are then Q8_0's, with an f32 scale, so one
 * set of kernels serves the three types: portable C, AVX2 (also used on
 * AVX-512 CPUs: this type has no AVX-512 kernel of its own; the AVX-512
 * machine could not be used to test one) and NEON (widening multiplies;
 * the integer sums are exact, so the same integers as the others).
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

#define QK 32
#define ROWS LLM_PACK_ROWS
#define UNIT_BYTES (ROWS * 4 + ROWS * QK) /* 288 */

static const int8_t K[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t F[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static const int8_t *table_of(uint32_t type) { return type == LLM_TYPE_MXFP4 ? F : K; }

/* E(e) = 2^(e - 128), exactly */
static float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ==== the stored rows ==== */

/* unit u of a stored row: its scale and its 16 qs bytes */
static const uint8_t *unit_of(uint32_t type, const uint8_t *row, int64_t u, float *S)
{
    if (type == LLM_TYPE_IQ4_NL) {
        const uint8_t *b = row + (size_t)u * 18;
        *S = llm_fp16_to_fp32(ld16(b));
        return b + 2;
    }
    if (type == LLM_TYPE_MXFP4) {
        const uint8_t *b = row + (size_t)u * 17;
        *S = e8m0_half(b[0]);
        return b + 1;
    }
    const uint8_t *b = row + (size_t)(u / 8) * 136;
    int s = (int)(u % 8);
    uint16_t sh = ld16(b + 2);
    int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4);
    *S = llm_fp16_to_fp32(ld16(b)) * (float)(ls - 32);
    return b + 8 + 16 * s;
}

static void to_float(uint32_t type, const void *x, float *y, int64_t k)
{
    const int8_t *K = table_of(type);
    for (int64_t u = 0; u < k / QK; u++) {
        float S;
        const uint8_t *qs = unit_of(type, x, u, &S);
        for (int j = 0; j < 16; j++) {
            y[u * QK + j] = S * (float)K[qs[j] & 15];
            y[u * QK + j + 16] = S * (float)K[qs[j] >> 4];
        }
    }
}

static void iq4_nl_to_float(const void *x, float *y, int64_t k) { to_float(LLM_TYPE_IQ4_NL, x, y, k); }
static void iq4_xs_to_float(const void *x, float *y, int64_t k) { to_float(LLM_TYPE_IQ4_XS, x, y, k); }
static void mxfp4_to_float(const void *x, float *y, int64_t k) { to_float(LLM_TYPE_MXFP4, x, y, k); }

/* ==== packing ==== */

static size_t group_bytes(int64_t n) { return (size_t)(n / QK) * UNIT_BYTES; }

static void pack(uint32_t type, const void *rows, size_t stride, int64_t n_rows, int64_t n, void *dst)
{
    const int8_t *K = table_of(type);
    uint8_t *out = dst;
    memset(dst, 0, group_bytes(n));
    for (int64_t u = 0; u < n / QK; u++, out += UNIT_BYTES)
        for (int r = 0; r < n_rows; r++) {
            float S;
            const uint8_t *qs = unit_of(type, (const uint8_t *)rows + (size_t)r * stride, u, &S);
            memcpy(out + 4 * r, &S, 4);
            for (int i = 0; i < QK; i++) {
                int nib = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
                out[32 + 16 * (i / 2) + 2 * r + i % 2] = (uint8_t)K[nib];
            }
        }
}

static void iq4_nl_pack(const void *rows, size_t stride, int64_t nr, int64_t n, void *g)
{
    pack(LLM_TYPE_IQ4_NL, rows, stride, nr, n, g);
}
static void iq4_xs_pack(const void *rows, size_t stride, int64_t nr, int64_t n, void *g)
{
    pack(LLM_TYPE_IQ4_XS, rows, stride, nr, n, g);
}
static void mxfp4_pack(const void *rows, size_t stride, int64_t nr, int64_t n, void *g)
{
    pack(LLM_TYPE_MXFP4, rows, stride, nr, n, g);
}

/* ==== the scalar definition ==== */

static float scale(const uint8_t *ub, int r)
{
    float S;
    memcpy(&S, ub + 4 * r, 4);
    return S;
}

static int value(const uint8_t *ub, int r, int i) { return (int8_t)ub[32 + 16 * (i / 2) + 2 * r + i % 2]; }

static void row_to_float(const void *group, int r, int64_t n, float *y)
{
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = (const uint8_t *)group + (size_t)u * UNIT_BYTES;
        float S = scale(ub, r);
        for (int i = 0; i < QK; i++)
            y[u * QK + i] = S * (float)value(ub, r, i);
    }
}

static float dot_ref(const struct llm_mat *w, int64_t r, const void *act)
{
    int64_t n = w->n_in;
    const uint8_t *g = w->data + (size_t)(r / ROWS) * w->group_bytes;
    int rr = (int)(r % ROWS);
    struct llm_act16 a = llm_act16_view(act, n);
    float acc = 0;
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = g + (size_t)u * UNIT_BYTES;
        int32_t isum = 0;
        for (int i = 0; i < QK; i++)
            isum += value(ub, rr, i) * a.q[u * QK + i];
        acc = fmaf((float)isum, scale(ub, rr) * a.d[u], acc);
    }
    return acc;
}

static void unpack_ref(const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    (void)M;
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = (const uint8_t *)group + (size_t)u * UNIT_BYTES;
        for (int r = 0; r < ROWS; r++) {
            S[u * ROWS + r] = scale(ub, r);
            for (int i = 0; i < QK; i++)
                w16[((u * 16 + i / 2) * ROWS + r) * 2 + i % 2] = (int16_t)value(ub, r, i);
        }
    }
}

/* the rows [r0, r1) into y0 and [s0, s1) into y1, ROWS at a time (a range's
 * last group may be partial): every ISA's gemv is this loop around its own
 * dot_group, which it inlines */
static inline __attribute__((always_inline)) void
gemv_groups(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *act,
            float *y0, float *y1,
            void (*dot_group)(const uint8_t *g, int64_t n, const struct llm_act16 *a, float out[ROWS]))
{
    struct llm_act16 a = llm_act16_view(act, w->n_in);
    for (int k = 0; k < 2; k++) {
        int64_t b = k ? s0 : r0, e = k ? s1 : r1;
        float *y = k ? y1 : y0;
        for (int64_t r = b; r < e; r += ROWS) {
            float out[ROWS];
            dot_group(w->data + (size_t)(r / ROWS) * w->group_bytes, w->n_in, &a, out);
            for (int i = 0; i < ROWS && r + i < e; i++)
                y[r - b + i] = out[i];
        }
    }
}

/* ==== AVX2 ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

static void to_float_avx2(uint32_t type, const void *x, float *y, int64_t k)
{
    const __m128i lut = _mm_loadu_si128((const __m128i *)table_of(type)), m4 = _mm_set1_epi8(15);
    for (int64_t u = 0; u < k / QK; u++) {
        float S;
        const uint8_t *qs = unit_of(type, x, u, &S);
        __m128i raw = _mm_loadu_si128((const __m128i *)qs);
        __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(raw, m4));
        __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        __m256 s = _mm256_set1_ps(S);
        float *o = y + u * QK;
        _mm256_storeu_ps(o, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
    }
}

static void iq4_nl_to_float_avx2(const void *x, float *y, int64_t k) { to_float_avx2(LLM_TYPE_IQ4_NL, x, y, k); }
static void iq4_xs_to_float_avx2(const void *x, float *y, int64_t k) { to_float_avx2(LLM_TYPE_IQ4_XS, x, y, k); }
static void mxfp4_to_float_avx2(const void *x, float *y, int64_t k) { to_float_avx2(LLM_TYPE_MXFP4, x, y, k); }

static inline int32_t ld32s(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* the 8 rows of one group: acc over every unit, the definition's steps on 8 lanes */
static void dot_group_avx2(const uint8_t *g, int64_t n, const struct llm_act16 *a, float out[ROWS])
{
    __m256 acc = _mm256_setzero_ps();
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = g + (size_t)u * UNIT_BYTES;
        const int16_t *q = a->q + u * QK;
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        for (int p = 0; p < 16; p += 2) {
            __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(ub + 32 + 16 * p)));
            __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(ub + 48 + 16 * p)));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(w0, _mm256_set1_epi32(ld32s(q + 2 * p))));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(w1, _mm256_set1_epi32(ld32s(q + 2 * p + 2))));
        }
        __m256 sd = _mm256_mul_ps(_mm256_loadu_ps((const float *)ub), _mm256_set1_ps(a->d[u]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), sd, acc);
    }
    _mm256_storeu_ps(out, acc);
}

static void gemv_avx2(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *act,
                      float *y0, float *y1)
{
    gemv_groups(w, r0, r1, s0, s1, act, y0, y1, dot_group_avx2);
}

static void unpack_avx2(const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    (void)M;
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = (const uint8_t *)group + (size_t)u * UNIT_BYTES;
        _mm256_storeu_ps(S + u * ROWS, _mm256_loadu_ps((const float *)ub));
        for (int p = 0; p < 16; p++)
            _mm256_storeu_si256((__m256i *)(w16 + (u * 16 + p) * 16),
                                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(ub + 32 + 16 * p))));
    }
}

#pragma GCC pop_options
#endif

/* ==== NEON ==== */

#if defined(__aarch64__) && defined(__GNUC__)
#define HAVE_NEON_KERNELS 1
#include <arm_neon.h>

/* the 8 rows of one group, as dot_group_avx2 above: for each pair p, the rows'
 * two values widened to 16 bits times the token's pair, exact 32-bit
 * products added pairwise (row r's two elements), per row; then the
 * unit's float steps, rows 0-3 and 4-7 in two registers */
static void dot_group_neon(const uint8_t *g, int64_t n, const struct llm_act16 *a, float out[ROWS])
{
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0;
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = g + (size_t)u * UNIT_BYTES;
        const int16_t *q = a->q + u * QK;
        int32x4_t s0 = vdupq_n_s32(0), s1 = s0;
        for (int p = 0; p < 16; p++) {
            int8x16_t w = vld1q_s8((const int8_t *)(ub + 32 + 16 * p));
            int16x8_t wl = vmovl_s8(vget_low_s8(w)), wh = vmovl_high_s8(w);
            int16x4_t qq = vreinterpret_s16_s32(vdup_n_s32((int32_t)((uint16_t)q[2 * p] | (uint32_t)(uint16_t)q[2 * p + 1] << 16)));
            s0 = vaddq_s32(s0, vpaddq_s32(vmull_s16(vget_low_s16(wl), qq), vmull_s16(vget_high_s16(wl), qq)));
            s1 = vaddq_s32(s1, vpaddq_s32(vmull_s16(vget_low_s16(wh), qq), vmull_s16(vget_high_s16(wh), qq)));
        }
        float32x4_t dA = vdupq_n_f32(a->d[u]);
        float32x4_t sd0 = vmulq_f32(vld1q_f32((const float *)ub), dA);
        float32x4_t sd1 = vmulq_f32(vld1q_f32((const float *)ub + 4), dA);
        acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(s0), sd0);
        acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(s1), sd1);
    }
    vst1q_f32(out, acc0);
    vst1q_f32(out + 4, acc1);
}

static void gemv_neon(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *act,
                      float *y0, float *y1)
{
    gemv_groups(w, r0, r1, s0, s1, act, y0, y1, dot_group_neon);
}

static void unpack_neon(const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    (void)M;
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = (const uint8_t *)group + (size_t)u * UNIT_BYTES;
        vst1q_f32(S + u * ROWS, vld1q_f32((const float *)ub));
        vst1q_f32(S + u * ROWS + 4, vld1q_f32((const float *)ub + 4));
        for (int p = 0; p < 16; p++) {
            int8x16_t w = vld1q_s8((const int8_t *)(ub + 32 + 16 * p));
            vst1q_s16(w16 + (u * 16 + p) * 16, vmovl_s8(vget_low_s8(w)));
            vst1q_s16(w16 + (u * 16 + p) * 16 + 8, vmovl_high_s8(w));
        }
    }
}
#endif

/* ==== the table ==== */

void llm_quant_iq4_init(struct llm_type_ops *t, struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu)
{
    t[LLM_TYPE_IQ4_NL] = (struct llm_type_ops){iq4_nl_to_float, iq4_nl_to_float, NULL};
    t[LLM_TYPE_IQ4_XS] = (struct llm_type_ops){iq4_xs_to_float, iq4_xs_to_float, NULL};
    t[LLM_TYPE_MXFP4] = (struct llm_type_ops){mxfp4_to_float, mxfp4_to_float, NULL};
    struct llm_mm_ops ops = {.act = LLM_ACT_I16, .packed = true, .group_bytes = group_bytes,
                             .group_row_to_float = row_to_float, .dot_ref = dot_ref,
                             .gemv = llm_mm_gemv_by_ref, .gemm = llm_mm_packed_gemm,
                             .gemm_scratch = llm_mm_packed_scratch};
    struct llm_unpack_ops u = {QK, false, unpack_ref, unpack_ref, llm_mm_gemv_by_ref, NULL, 0};
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
        ops.gemv = u.gemv = gemv_avx2;
        u.unpack = unpack_avx2;
        t[LLM_TYPE_IQ4_NL].to_float = iq4_nl_to_float_avx2;
        t[LLM_TYPE_IQ4_XS].to_float = iq4_xs_to_float_avx2;
        t[LLM_TYPE_MXFP4].to_float = mxfp4_to_float_avx2;
    }
#elif defined(HAVE_NEON_KERNELS)
    if (cpu & LLM_CPU_NEON) {
        ops.gemv = u.gemv = gemv_neon;
        u.unpack = unpack_neon;
    }
#else
    (void)cpu;
#endif
    mm[LLM_TYPE_IQ4_NL] = mm[LLM_TYPE_IQ4_XS] = mm[LLM_TYPE_MXFP4] = ops;
    mm[LLM_TYPE_IQ4_NL].pack = iq4_nl_pack;
    mm[LLM_TYPE_IQ4_XS].pack = iq4_xs_pack;
    mm[LLM_TYPE_MXFP4].pack = mxfp4_pack;
    un[LLM_TYPE_IQ4_NL] = un[LLM_TYPE_IQ4_XS] = un[LLM_TYPE_MXFP4] = u;
}
