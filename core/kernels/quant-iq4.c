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
 * Packed form: a group of 8 rows of n elements (nu = n / 32 units) stores
 * first the scales, in the stored rows' own encodings:
 *   MXFP4   u8 e[nu][8]                       (e of unit u, row r at 8 u + r)
 *   IQ4_NL  f16 d[nu][8]
 *   IQ4_XS  f16 d[n / 256][8], then i8 ls - 32 [nu][8]
 * then the nibbles: unit u's 128 bytes at scale_bytes + 128 u, 8 chunks c
 * of 16 bytes; byte 2 r + j of chunk c holds, in its low nibble, the table
 * index of row r's element 2 (2 c) + j, in its high nibble that of element
 * 2 (2 c + 1) + j (pairs 2c and 2c + 1 of the definition's unit).
 * So a packed group holds the stored rows' bytes (IQ4_NL, MXFP4) or 1.5%
 * more (IQ4_XS's scale bytes): packing costs no memory beyond the file's
 * (issue 24: peak RSS at most the file plus KV plus 10%). A 16-byte chunk
 * goes through one table lookup (pshufb, tbl) per nibble half into the 16
 * 8-bit values of a pair of the rows; the integer sums are then Q8_0's,
 * exact, with an f32 scale per unit and row: portable C, AVX2, AVX-512
 * (two pairs a 512-bit step) and NEON give the same integers and the same
 * float steps.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

#define QK 32
#define ROWS LLM_PACK_ROWS
#define NIB_BYTES (ROWS * QK / 2) /* 128: a unit's nibbles in a packed group */

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

static size_t scale_bytes(uint32_t type, int64_t n)
{
    size_t nu = (size_t)(n / QK);
    if (type == LLM_TYPE_MXFP4)
        return nu * ROWS;
    if (type == LLM_TYPE_IQ4_NL)
        return nu * ROWS * 2;
    return (size_t)(n / 256) * ROWS * 2 + nu * ROWS;
}

static size_t group_bytes(uint32_t type, int64_t n) { return scale_bytes(type, n) + (size_t)(n / QK) * NIB_BYTES; }

/* the byte of unit u's nibbles holding row r's element i, and its shift */
static size_t nib_at(int r, int i, int *shift)
{
    int p = i / 2;
    *shift = 4 * (p % 2);
    return (size_t)(16 * (p / 2) + 2 * r + i % 2);
}

static void pack(uint32_t type, const void *rows, size_t stride, int64_t n_rows, int64_t n, void *dst)
{
    uint8_t *g = dst, *nib = g + scale_bytes(type, n);
    memset(dst, 0, group_bytes(type, n));
    for (int64_t u = 0; u < n / QK; u++)
        for (int r = 0; r < n_rows; r++) {
            const uint8_t *row = (const uint8_t *)rows + (size_t)r * stride, *qs;
            if (type == LLM_TYPE_MXFP4) {
                g[u * ROWS + r] = row[u * 17];
                qs = row + u * 17 + 1;
            } else if (type == LLM_TYPE_IQ4_NL) {
                memcpy(g + (u * ROWS + r) * 2, row + u * 18, 2);
                qs = row + u * 18 + 2;
            } else {
                const uint8_t *b = row + (size_t)(u / 8) * 136;
                int s = (int)(u % 8);
                uint16_t sh = ld16(b + 2);
                int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4);
                memcpy(g + ((u / 8) * ROWS + r) * 2, b, 2);
                g[(n / 256) * ROWS * 2 + u * ROWS + r] = (uint8_t)(int8_t)(ls - 32);
                qs = b + 8 + 16 * s;
            }
            for (int i = 0; i < QK; i++) {
                int sh, v = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
                size_t at = nib_at(r, i, &sh);
                nib[u * NIB_BYTES + at] |= (uint8_t)(v << sh);
            }
        }
}

/* ==== the scalar definition ==== */

/* unit u's scale of row r: unit_of's S, bit for bit */
static float scale(uint32_t type, const uint8_t *g, int64_t n, int64_t u, int r)
{
    if (type == LLM_TYPE_MXFP4)
        return e8m0_half(g[u * ROWS + r]);
    if (type == LLM_TYPE_IQ4_NL)
        return llm_fp16_to_fp32(ld16(g + (u * ROWS + r) * 2));
    return llm_fp16_to_fp32(ld16(g + ((u / 8) * ROWS + r) * 2)) *
           (float)(int8_t)g[(n / 256) * ROWS * 2 + u * ROWS + r];
}

static int value(uint32_t type, const uint8_t *g, int64_t n, int64_t u, int r, int i)
{
    int sh;
    size_t at = nib_at(r, i, &sh);
    return table_of(type)[(g[scale_bytes(type, n) + u * NIB_BYTES + at] >> sh) & 15];
}

static void row_to_float(uint32_t type, const void *group, int r, int64_t n, float *y)
{
    for (int64_t u = 0; u < n / QK; u++) {
        float S = scale(type, group, n, u, r);
        for (int i = 0; i < QK; i++)
            y[u * QK + i] = S * (float)value(type, group, n, u, r, i);
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
        int32_t isum = 0;
        for (int i = 0; i < QK; i++)
            isum += value(w->type, g, n, u, rr, i) * a.q[u * QK + i];
        acc = fmaf((float)isum, scale(w->type, g, n, u, rr) * a.d[u], acc);
    }
    return acc;
}

static void unpack_ref(uint32_t type, const void *group, int64_t n, int16_t *w16, float *S)
{
    for (int64_t u = 0; u < n / QK; u++)
        for (int r = 0; r < ROWS; r++) {
            S[u * ROWS + r] = scale(type, group, n, u, r);
            for (int i = 0; i < QK; i++)
                w16[((u * 16 + i / 2) * ROWS + r) * 2 + i % 2] = (int16_t)value(type, group, n, u, r, i);
        }
}

/* ==== AVX2 and AVX-512 ==== */

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

/* unit u's 8 scales (rows 0-7), scale()'s bits: E(e) built from its bits,
 * f16 widened exactly, an f16 times a 6-bit integer (exact) */
static inline __attribute__((always_inline)) __m256 scales_avx2(uint32_t type, const uint8_t *g, int64_t n,
                                                                int64_t u)
{
    if (type == LLM_TYPE_MXFP4) {
        __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(g + u * ROWS)));
        __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
        __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
        __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
        return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
    }
    if (type == LLM_TYPE_IQ4_NL)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + u * ROWS * 2)));
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (u / 8) * ROWS * 2)));
    __m128i ls = _mm_loadl_epi64((const __m128i *)(g + (n / 256) * ROWS * 2 + u * ROWS));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ls)));
}

/* chunk c of a unit's nibbles: pair 2c's 16 values (lo) and pair 2c + 1's (hi) */
static inline __attribute__((always_inline)) void chunk_values(__m128i lut, const uint8_t *c, __m128i *lo,
                                                               __m128i *hi)
{
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i raw = _mm_loadu_si128((const __m128i *)c);
    *lo = _mm_shuffle_epi8(lut, _mm_and_si128(raw, m4));
    *hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(raw, 4), m4));
}

/* the 8 rows of one group: acc over every unit, the definition's steps on 8 lanes */
static inline __attribute__((always_inline)) __m256 dot_group(uint32_t type, const uint8_t *g, int64_t n,
                                                              const struct llm_act16 *a)
{
    const __m128i lut = _mm_loadu_si128((const __m128i *)table_of(type));
    const uint8_t *nib = g + scale_bytes(type, n);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = nib + (size_t)u * NIB_BYTES;
        const int16_t *q = a->q + u * QK;
        __m256i s0 = _mm256_setzero_si256(), s1 = s0;
        for (int c = 0; c < 8; c++) {
            __m128i lo, hi;
            chunk_values(lut, ub + 16 * c, &lo, &hi);
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_cvtepi8_epi16(lo), _mm256_set1_epi32(ld32s(q + 4 * c))));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_cvtepi8_epi16(hi), _mm256_set1_epi32(ld32s(q + 4 * c + 2))));
        }
        __m256 sd = _mm256_mul_ps(scales_avx2(type, g, n, u), _mm256_set1_ps(a->d[u]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), sd, acc);
    }
    return acc;
}

static inline __attribute__((always_inline)) void unpack_avx2(uint32_t type, const void *group, int64_t n,
                                                              int16_t *w16, float *S)
{
    const __m128i lut = _mm_loadu_si128((const __m128i *)table_of(type));
    const uint8_t *nib = (const uint8_t *)group + scale_bytes(type, n);
    for (int64_t u = 0; u < n / QK; u++) {
        _mm256_storeu_ps(S + u * ROWS, scales_avx2(type, group, n, u));
        for (int c = 0; c < 8; c++) {
            __m128i lo, hi;
            chunk_values(lut, nib + (size_t)u * NIB_BYTES + 16 * c, &lo, &hi);
            _mm256_storeu_si256((__m256i *)(w16 + (u * 16 + 2 * c) * 16), _mm256_cvtepi8_epi16(lo));
            _mm256_storeu_si256((__m256i *)(w16 + (u * 16 + 2 * c + 1) * 16), _mm256_cvtepi8_epi16(hi));
        }
    }
}

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")

/* dot_group with both pairs of a chunk in one 512-bit step: lanes 0-7 sum
 * pair 2c's products, lanes 8-15 pair 2c + 1's; the two halves added at
 * the unit's end (32-bit integers, exact: dot_group's integers) */
static inline __attribute__((always_inline)) __m256 dot_group_avx512(uint32_t type, const uint8_t *g, int64_t n,
                                                                     const struct llm_act16 *a)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table_of(type)));
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m512i qsel = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const uint8_t *nib = g + scale_bytes(type, n);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = nib + (size_t)u * NIB_BYTES;
        const int16_t *q = a->q + u * QK;
        __m512i s = _mm512_setzero_si512();
        for (int c = 0; c < 8; c++) {
            __m128i raw = _mm_loadu_si128((const __m128i *)(ub + 16 * c));
            __m256i idx = _mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1);
            __m256i v = _mm256_shuffle_epi8(lut, _mm256_and_si256(idx, m4));
            __m512i qq = _mm512_permutexvar_epi32(qsel, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(q + 4 * c))));
            s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_cvtepi8_epi16(v), qq));
        }
        __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
        __m256 sd = _mm256_mul_ps(scales_avx2(type, g, n, u), _mm256_set1_ps(a->d[u]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), sd, acc);
    }
    return acc;
}

#pragma GCC pop_options

/* the gemv of each type on each path: rows [r0, r1) and [s0, s1) */
#define IQ4_GEMV(NAME, TYPE, DOT, TARGET)                                                                      \
    __attribute__((target(TARGET))) static void NAME(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, \
                                                     int64_t s1, const void *act, float *y0, float *y1)        \
    {                                                                                                          \
        struct llm_act16 a = llm_act16_view(act, w->n_in);                                                     \
        for (int k = 0; k < 2; k++) {                                                                          \
            int64_t b = k ? s0 : r0, e = k ? s1 : r1;                                                          \
            float *y = k ? y1 : y0;                                                                            \
            for (int64_t r = b; r < e; r += ROWS) {                                                            \
                float out[ROWS];                                                                               \
                _mm256_storeu_ps(out, DOT(TYPE, w->data + (size_t)(r / ROWS) * w->group_bytes, w->n_in, &a));  \
                for (int i = 0; i < ROWS && r + i < e; i++)                                                    \
                    y[r - b + i] = out[i];                                                                     \
            }                                                                                                  \
        }                                                                                                      \
    }
#define X86_AVX2 "avx2,fma,f16c"
#define X86_AVX512 "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"
IQ4_GEMV(iq4_nl_gemv_avx2, LLM_TYPE_IQ4_NL, dot_group, X86_AVX2)
IQ4_GEMV(iq4_xs_gemv_avx2, LLM_TYPE_IQ4_XS, dot_group, X86_AVX2)
IQ4_GEMV(mxfp4_gemv_avx2, LLM_TYPE_MXFP4, dot_group, X86_AVX2)
IQ4_GEMV(iq4_nl_gemv_avx512, LLM_TYPE_IQ4_NL, dot_group_avx512, X86_AVX512)
IQ4_GEMV(iq4_xs_gemv_avx512, LLM_TYPE_IQ4_XS, dot_group_avx512, X86_AVX512)
IQ4_GEMV(mxfp4_gemv_avx512, LLM_TYPE_MXFP4, dot_group_avx512, X86_AVX512)

__attribute__((target(X86_AVX2))) static void iq4_nl_unpack_avx2(const void *g, int64_t n, int16_t *w16, float *S, float *M)
{
    (void)M;
    unpack_avx2(LLM_TYPE_IQ4_NL, g, n, w16, S);
}
__attribute__((target(X86_AVX2))) static void iq4_xs_unpack_avx2(const void *g, int64_t n, int16_t *w16, float *S, float *M)
{
    (void)M;
    unpack_avx2(LLM_TYPE_IQ4_XS, g, n, w16, S);
}
__attribute__((target(X86_AVX2))) static void mxfp4_unpack_avx2(const void *g, int64_t n, int16_t *w16, float *S, float *M)
{
    (void)M;
    unpack_avx2(LLM_TYPE_MXFP4, g, n, w16, S);
}
#endif

/* ==== NEON ==== */

#if defined(__aarch64__) && defined(__GNUC__)
#define HAVE_NEON_KERNELS 1
#include <arm_neon.h>

/* unit u's 8 scales, scale()'s, rows 0-3 and 4-7 */
static inline void scales_neon(uint32_t type, const uint8_t *g, int64_t n, int64_t u, float32x4_t *s0, float32x4_t *s1)
{
    float S[ROWS];
    for (int r = 0; r < ROWS; r++)
        S[r] = scale(type, g, n, u, r);
    *s0 = vld1q_f32(S);
    *s1 = vld1q_f32(S + 4);
}

/* chunk c of a unit's nibbles: pair 2c's 16 values (lo) and pair 2c + 1's (hi) */
static inline void chunk_values_neon(int8x16_t lut, const uint8_t *c, int8x16_t *lo, int8x16_t *hi)
{
    uint8x16_t raw = vld1q_u8(c);
    *lo = vqtbl1q_s8(lut, vandq_u8(raw, vdupq_n_u8(15)));
    *hi = vqtbl1q_s8(lut, vshrq_n_u8(raw, 4));
}

/* the 8 rows of one group, as dot_group above: for each pair p, the rows'
 * two values widened to 16 bits times the token's pair, exact 32-bit
 * products added pairwise (row r's two elements), per row; then the
 * unit's float steps, rows 0-3 and 4-7 in two registers */
static void dot_group_neon(uint32_t type, const uint8_t *g, int64_t n, const struct llm_act16 *a, float out[ROWS])
{
    const int8x16_t lut = vld1q_s8(table_of(type));
    const uint8_t *nib = g + scale_bytes(type, n);
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0;
    for (int64_t u = 0; u < n / QK; u++) {
        const uint8_t *ub = nib + (size_t)u * NIB_BYTES;
        const int16_t *q = a->q + u * QK;
        int32x4_t s0 = vdupq_n_s32(0), s1 = s0;
        int8x16_t lo = vdupq_n_s8(0), hi = lo;
        for (int p = 0; p < 16; p++) {
            if (p % 2 == 0)
                chunk_values_neon(lut, ub + 8 * p, &lo, &hi);
            int8x16_t w = p % 2 ? hi : lo;
            int16x8_t wl = vmovl_s8(vget_low_s8(w)), wh = vmovl_high_s8(w);
            int16x4_t qq = vreinterpret_s16_s32(vdup_n_s32((int32_t)((uint16_t)q[2 * p] | (uint32_t)(uint16_t)q[2 * p + 1] << 16)));
            s0 = vaddq_s32(s0, vpaddq_s32(vmull_s16(vget_low_s16(wl), qq), vmull_s16(vget_high_s16(wl), qq)));
            s1 = vaddq_s32(s1, vpaddq_s32(vmull_s16(vget_low_s16(wh), qq), vmull_s16(vget_high_s16(wh), qq)));
        }
        float32x4_t dA = vdupq_n_f32(a->d[u]), S0, S1;
        scales_neon(type, g, n, u, &S0, &S1);
        acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(s0), vmulq_f32(S0, dA));
        acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(s1), vmulq_f32(S1, dA));
    }
    vst1q_f32(out, acc0);
    vst1q_f32(out + 4, acc1);
}

static void gemv_neon(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *act,
                      float *y0, float *y1)
{
    struct llm_act16 a = llm_act16_view(act, w->n_in);
    for (int k = 0; k < 2; k++) {
        int64_t b = k ? s0 : r0, e = k ? s1 : r1;
        float *y = k ? y1 : y0;
        for (int64_t r = b; r < e; r += ROWS) {
            float out[ROWS];
            dot_group_neon(w->type, w->data + (size_t)(r / ROWS) * w->group_bytes, w->n_in, &a, out);
            for (int i = 0; i < ROWS && r + i < e; i++)
                y[r - b + i] = out[i];
        }
    }
}

static void unpack_neon(uint32_t type, const void *group, int64_t n, int16_t *w16, float *S)
{
    const int8x16_t lut = vld1q_s8(table_of(type));
    const uint8_t *nib = (const uint8_t *)group + scale_bytes(type, n);
    for (int64_t u = 0; u < n / QK; u++) {
        float32x4_t S0, S1;
        scales_neon(type, group, n, u, &S0, &S1);
        vst1q_f32(S + u * ROWS, S0);
        vst1q_f32(S + u * ROWS + 4, S1);
        for (int p = 0; p < 16; p += 2) {
            int8x16_t lo, hi;
            chunk_values_neon(lut, nib + (size_t)u * NIB_BYTES + 8 * p, &lo, &hi);
            vst1q_s16(w16 + (u * 16 + p) * 16, vmovl_s8(vget_low_s8(lo)));
            vst1q_s16(w16 + (u * 16 + p) * 16 + 8, vmovl_high_s8(lo));
            vst1q_s16(w16 + (u * 16 + p + 1) * 16, vmovl_s8(vget_low_s8(hi)));
            vst1q_s16(w16 + (u * 16 + p + 1) * 16 + 8, vmovl_high_s8(hi));
        }
    }
}
#endif

/* ==== the table ==== */

/* each type's entry points over the shared definitions above */
#define IQ4_TYPE(NAME, TYPE)                                                                                   \
    static size_t NAME##_group_bytes(int64_t n) { return group_bytes(TYPE, n); }                               \
    LLM_OP_PACK(NAME##_pack, pack, TYPE)                                                                       \
    LLM_OP_ROW(NAME##_row_to_float, row_to_float, TYPE)                                                        \
    static void NAME##_unpack_ref(const void *g, int64_t n, int16_t *w16, float *S, float *M)                  \
    {                                                                                                          \
        (void)M;                                                                                               \
        unpack_ref(TYPE, g, n, w16, S);                                                                        \
    }                                                                                                          \
    IQ4_TYPE_NEON(NAME, TYPE)
#ifdef HAVE_NEON_KERNELS
#define IQ4_TYPE_NEON(NAME, TYPE)                                                                              \
    static void NAME##_unpack_neon(const void *g, int64_t n, int16_t *w16, float *S, float *M)                 \
    {                                                                                                          \
        (void)M;                                                                                               \
        unpack_neon(TYPE, g, n, w16, S);                                                                       \
    }
#else
#define IQ4_TYPE_NEON(NAME, TYPE)
#endif
IQ4_TYPE(iq4_nl, LLM_TYPE_IQ4_NL)
IQ4_TYPE(iq4_xs, LLM_TYPE_IQ4_XS)
IQ4_TYPE(mxfp4, LLM_TYPE_MXFP4)

void llm_quant_iq4_init(struct llm_type_ops *t, struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu)
{
    t[LLM_TYPE_IQ4_NL] = (struct llm_type_ops){iq4_nl_to_float, iq4_nl_to_float, NULL};
    t[LLM_TYPE_IQ4_XS] = (struct llm_type_ops){iq4_xs_to_float, iq4_xs_to_float, NULL};
    t[LLM_TYPE_MXFP4] = (struct llm_type_ops){mxfp4_to_float, mxfp4_to_float, NULL};
#define IQ4_OPS(NAME)                                                                                          \
    ((struct llm_mm_ops){.act = LLM_ACT_I16, .packed = true, .group_bytes = NAME##_group_bytes,                \
                         .pack = NAME##_pack, .group_row_to_float = NAME##_row_to_float, .dot_ref = dot_ref,    \
                         .gemv = llm_mm_gemv_by_ref, .gemm = llm_mm_packed_gemm,                               \
                         .gemm_scratch = llm_mm_packed_scratch})
#define IQ4_UNPACK(NAME)                                                                                       \
    ((struct llm_unpack_ops){.ul = QK, .unpack_ref = NAME##_unpack_ref, .unpack = NAME##_unpack_ref,             \
                             .gemv = llm_mm_gemv_by_ref})
    mm[LLM_TYPE_IQ4_NL] = IQ4_OPS(iq4_nl);
    mm[LLM_TYPE_IQ4_XS] = IQ4_OPS(iq4_xs);
    mm[LLM_TYPE_MXFP4] = IQ4_OPS(mxfp4);
    un[LLM_TYPE_IQ4_NL] = IQ4_UNPACK(iq4_nl);
    un[LLM_TYPE_IQ4_XS] = IQ4_UNPACK(iq4_xs);
    un[LLM_TYPE_MXFP4] = IQ4_UNPACK(mxfp4);
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
        bool wide = llm_cpu_has_avx512(cpu);
        mm[LLM_TYPE_IQ4_NL].gemv = un[LLM_TYPE_IQ4_NL].gemv = wide ? iq4_nl_gemv_avx512 : iq4_nl_gemv_avx2;
        mm[LLM_TYPE_IQ4_XS].gemv = un[LLM_TYPE_IQ4_XS].gemv = wide ? iq4_xs_gemv_avx512 : iq4_xs_gemv_avx2;
        mm[LLM_TYPE_MXFP4].gemv = un[LLM_TYPE_MXFP4].gemv = wide ? mxfp4_gemv_avx512 : mxfp4_gemv_avx2;
        un[LLM_TYPE_IQ4_NL].unpack = iq4_nl_unpack_avx2;
        un[LLM_TYPE_IQ4_XS].unpack = iq4_xs_unpack_avx2;
        un[LLM_TYPE_MXFP4].unpack = mxfp4_unpack_avx2;
        t[LLM_TYPE_IQ4_NL].to_float = iq4_nl_to_float_avx2;
        t[LLM_TYPE_IQ4_XS].to_float = iq4_xs_to_float_avx2;
        t[LLM_TYPE_MXFP4].to_float = mxfp4_to_float_avx2;
    }
#elif defined(HAVE_NEON_KERNELS)
    if (cpu & LLM_CPU_NEON) {
        mm[LLM_TYPE_IQ4_NL].gemv = un[LLM_TYPE_IQ4_NL].gemv = gemv_neon;
        mm[LLM_TYPE_IQ4_XS].gemv = un[LLM_TYPE_IQ4_XS].gemv = gemv_neon;
        mm[LLM_TYPE_MXFP4].gemv = un[LLM_TYPE_MXFP4].gemv = gemv_neon;
        un[LLM_TYPE_IQ4_NL].unpack = iq4_nl_unpack_neon;
        un[LLM_TYPE_IQ4_XS].unpack = iq4_xs_unpack_neon;
        un[LLM_TYPE_MXFP4].unpack = mxfp4_unpack_neon;
    }
#else
    (void)cpu;
#endif
}
