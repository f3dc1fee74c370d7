/*
 * quant-basic.c - the types F32, F16, BF16 and Q8_0 as rows (conversions to
 * and from f32), and the matrix products of the float types F32, F16 and
 * BF16 against f32 activations: the definition of quant.h (eight lanes by
 * k % 8, fused multiply-adds in increasing k, a fixed tree at the end) in
 * a scalar reference, an AVX2 GEMV for one token and an AVX2 tiled product
 * (4 rows x 3 tokens per tile, each pair's eight lanes in one register) for
 * many. Every path computes every element with the same operations, so
 * they agree bit for bit; tests check it.
 *
 * Why not BLIS for these: its sgemm sums each element in an order set by
 * its sub-configuration's kernel, its block size KC and its small-matrix
 * ("sup") path, which it picks by shape, so the same row and token give
 * different bits in batches of different sizes, and one-token products
 * cannot afford its packing. The tile here reaches BLIS's speed on this
 * machine (README, Speed).
 * Rows are read unaligned (GGUF only aligns tensors; Q8_0 blocks are 34
 * bytes). Nothing here allocates.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define X86 1
#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define X86 0
#endif

static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ==== row conversions ==== */

static void f32_to_float(const void *x, float *y, int64_t k) { memcpy(y, x, (size_t)k * 4); }
static void f32_from_float(const float *x, void *y, int64_t k) { memcpy(y, x, (size_t)k * 4); }

static void f16_to_float_ref(const void *x, float *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++)
        y[i] = llm_fp16_to_fp32(ld16((const uint8_t *)x + 2 * i));
}

static void f16_from_float_ref(const float *x, void *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++) {
        uint16_t h = llm_fp32_to_fp16(x[i]);
        memcpy((uint8_t *)y + 2 * i, &h, 2);
    }
}

static void bf16_to_float_ref(const void *x, float *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++)
        y[i] = llm_bf16_to_fp32(ld16((const uint8_t *)x + 2 * i));
}

static void bf16_from_float_ref(const float *x, void *y, int64_t k)
{
    for (int64_t i = 0; i < k; i++) {
        uint16_t h = llm_fp32_to_bf16(x[i]);
        memcpy((uint8_t *)y + 2 * i, &h, 2);
    }
}

static void q8_0_to_float_ref(const void *x, float *y, int64_t k)
{
    llm_dequantize_row(LLM_TYPE_Q8_0, x, y, k);
}

static void q8_0_from_float_ref(const float *x, void *y, int64_t k)
{
    llm_quantize_row_q8_0(x, y, k);
}

#if X86
T_AVX2 static void f16_to_float_avx2(const void *x, float *y, int64_t k)
{
    const uint16_t *p = x;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
    for (; i < k; i++)
        y[i] = _cvtsh_ss(ld16((const uint8_t *)x + 2 * i));
}

T_AVX2 static void f16_from_float_avx2(const float *x, void *y, int64_t k)
{
    uint16_t *p = y;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm_storeu_si128((__m128i *)(p + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < k; i++) {
        uint16_t h = llm_fp32_to_fp16(x[i]);
        memcpy(p + i, &h, 2);
    }
}

T_AVX2 static __m256 bf16x8_avx2(const uint16_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

T_AVX2 static void bf16_to_float_avx2(const void *x, float *y, int64_t k)
{
    const uint16_t *p = x;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm256_storeu_ps(y + i, bf16x8_avx2(p + i));
    for (; i < k; i++)
        y[i] = llm_bf16_to_fp32(p[i]);
}

T_AVX2 static void q8_0_to_float_avx2(const void *x, float *y, int64_t k)
{
    const uint8_t *p = x;
    for (int64_t b = 0; b < k / QK8_0; b++, p += 34, y += 32) {
        __m256 d = _mm256_set1_ps(_cvtsh_ss(ld16(p)));
        for (int j = 0; j < 32; j += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
}

T_AVX2 static void q8_0_from_float_avx2(const float *x, void *vy, int64_t k)
{
    uint8_t *y = vy;
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < k / QK8_0; b++, x += 32, y += 34) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            m = _mm256_max_ps(m, _mm256_andnot_ps(signbit, v[j]));
        }
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4), d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        uint16_t dh = llm_fp32_to_fp16(d);
        memcpy(y, &dh, 2);
        __m256 mul = _mm256_set1_ps(id);
        __m256i i32[4];
        for (int j = 0; j < 4; j++)
            i32[j] = _mm256_cvtps_epi32(
                _mm256_round_ps(_mm256_mul_ps(v[j], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i i16a = _mm256_packs_epi32(i32[0], i32[1]), i16b = _mm256_packs_epi32(i32[2], i32[3]);
        __m256i i8 = _mm256_packs_epi16(i16a, i16b);
        /* undo the lane interleaving of the packs */
        i8 = _mm256_permutevar8x32_epi32(i8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(y + 2), i8);
    }
}
#endif

/* ==== products of the float types: the definition ==== */

/* element k of a row of type t as f32 (exact) */
static float elt(uint32_t t, const uint8_t *row, int64_t k)
{
    if (t == LLM_TYPE_F32) {
        float f;
        memcpy(&f, row + 4 * k, 4);
        return f;
    }
    uint16_t h = ld16(row + 2 * k);
    return t == LLM_TYPE_F16 ? llm_fp16_to_fp32(h) : llm_bf16_to_fp32(h);
}

static float tree8(const float a[8])
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static float dot_ref_of(uint32_t t, const struct llm_mat *w, int64_t r, const void *a)
{
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    const float *x = a;
    float acc[8] = {0};
    for (int64_t k = 0; k < w->n_in; k++)
        acc[k % 8] = fmaf(elt(t, row, k), x[k], acc[k % 8]);
    return tree8(acc);
}

static float f32_dot_ref(const struct llm_mat *w, int64_t r, const void *a) { return dot_ref_of(LLM_TYPE_F32, w, r, a); }
static float f16_dot_ref(const struct llm_mat *w, int64_t r, const void *a) { return dot_ref_of(LLM_TYPE_F16, w, r, a); }
static float bf16_dot_ref(const struct llm_mat *w, int64_t r, const void *a) { return dot_ref_of(LLM_TYPE_BF16, w, r, a); }

/* the portable products: each element by its definition */
static void gemv_ref_of(float (*dot)(const struct llm_mat *, int64_t, const void *), const struct llm_mat *w,
                        int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *a, float *y0, float *y1)
{
    for (int64_t r = r0; r < r1; r++)
        y0[r - r0] = dot(w, r, a);
    for (int64_t r = s0; r < s1; r++)
        y1[r - s0] = dot(w, r, a);
}

static void gemm_ref_of(float (*dot)(const struct llm_mat *, int64_t, const void *), const struct llm_mat *w,
                        int64_t r0, int64_t r1, const void *a, size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    for (int64_t t = 0; t < nt; t++)
        for (int64_t r = r0; r < r1; r++)
            y[t * ldy + r - r0] = dot(w, r, (const uint8_t *)a + (size_t)t * a_stride);
}

#define REF_PRODUCTS(NAME)                                                                         \
    static void NAME##_gemv_ref(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, \
                                const void *a, float *y0, float *y1)                               \
    {                                                                                              \
        gemv_ref_of(NAME##_dot_ref, w, r0, r1, s0, s1, a, y0, y1);                                 \
    }                                                                                              \
    static void NAME##_gemm_ref(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a,    \
                                size_t a_stride, int64_t nt, float *y, int64_t ldy, void *scratch) \
    {                                                                                              \
        (void)scratch;                                                                             \
        gemm_ref_of(NAME##_dot_ref, w, r0, r1, a, a_stride, nt, y, ldy);                           \
    }
REF_PRODUCTS(f32)
REF_PRODUCTS(f16)
REF_PRODUCTS(bf16)

static size_t no_scratch(int64_t n_in)
{
    (void)n_in;
    return 0;
}

/* ==== products of the float types: AVX2 ==== */
#if X86

/* eight elements of a row from element k (k + 8 <= n) as f32 */
T_AVX2 static inline __attribute__((always_inline)) __m256 load8(uint32_t t, const uint8_t *row, int64_t k)
{
    if (t == LLM_TYPE_F32)
        return _mm256_loadu_ps((const float *)row + k);
    if (t == LLM_TYPE_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * k)));
    return bf16x8_avx2((const uint16_t *)row + k);
}

/* the last n % 8 elements from k, zeros after them (+0 * +0 leaves a lane as it is) */
T_AVX2 static inline __attribute__((always_inline)) __m256 load_tail(uint32_t t, const uint8_t *row, int64_t k, int64_t n)
{
    float buf[8] = {0};
    for (int64_t i = k; i < n; i++)
        buf[i - k] = elt(t, row, i);
    return _mm256_loadu_ps(buf);
}

T_AVX2 static inline __attribute__((always_inline)) float tree8_avx2(__m256 v)
{
    /* ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) */
    __m128 s = _mm_hadd_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_hadd_ps(s, s);
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* y[r] for four rows at once (r[i] may repeat) */
T_AVX2 static inline __attribute__((always_inline)) void dot4_avx2(uint32_t t, const struct llm_mat *w, const int64_t r[4], const float *x,
                                    float out[4])
{
    int64_t n = w->n_in, n8 = n / 8 * 8;
    const uint8_t *p0 = w->data + (size_t)r[0] * w->row_bytes, *p1 = w->data + (size_t)r[1] * w->row_bytes,
                  *p2 = w->data + (size_t)r[2] * w->row_bytes, *p3 = w->data + (size_t)r[3] * w->row_bytes;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < n8; k += 8) {
        __m256 xv = _mm256_loadu_ps(x + k);
        a0 = _mm256_fmadd_ps(load8(t, p0, k), xv, a0);
        a1 = _mm256_fmadd_ps(load8(t, p1, k), xv, a1);
        a2 = _mm256_fmadd_ps(load8(t, p2, k), xv, a2);
        a3 = _mm256_fmadd_ps(load8(t, p3, k), xv, a3);
    }
    if (n8 < n) {
        float xb[8] = {0};
        memcpy(xb, x + n8, (size_t)(n - n8) * 4);
        __m256 xv = _mm256_loadu_ps(xb);
        a0 = _mm256_fmadd_ps(load_tail(t, p0, n8, n), xv, a0);
        a1 = _mm256_fmadd_ps(load_tail(t, p1, n8, n), xv, a1);
        a2 = _mm256_fmadd_ps(load_tail(t, p2, n8, n), xv, a2);
        a3 = _mm256_fmadd_ps(load_tail(t, p3, n8, n), xv, a3);
    }
    out[0] = tree8_avx2(a0);
    out[1] = tree8_avx2(a1);
    out[2] = tree8_avx2(a2);
    out[3] = tree8_avx2(a3);
}

T_AVX2 static inline __attribute__((always_inline)) void gemv_rows_avx2(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, const float *x,
                                  float *y)
{
    for (int64_t r = r0; r < r1; r += 4) {
        int64_t rr[4];
        float out[4];
        for (int i = 0; i < 4; i++)
            rr[i] = r + i < r1 ? r + i : r;
        dot4_avx2(t, w, rr, x, out);
        for (int i = 0; i < 4 && r + i < r1; i++)
            y[r - r0 + i] = out[i];
    }
}

T_AVX2 static inline __attribute__((always_inline)) void gemv_avx2(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                             const void *a, float *y0, float *y1)
{
    gemv_rows_avx2(t, w, r0, r1, a, y0);
    gemv_rows_avx2(t, w, s0, s1, a, y1);
}

#define TR 4  /* rows per tile */
#define TT 3  /* tokens per tile */
#define TB 48 /* tokens per block: their rows stay in the L2 cache while the rows pass */

/* one tile: rows r[0..TR), tokens x[0..TT) (entries may repeat at the edges) */
T_AVX2 static inline __attribute__((always_inline)) void tile_avx2(uint32_t t, const struct llm_mat *w, const int64_t r[TR], const float *x[TT],
                                    float out[TR][TT])
{
    int64_t n = w->n_in, n8 = n / 8 * 8;
    const uint8_t *p[TR];
    for (int i = 0; i < TR; i++)
        p[i] = w->data + (size_t)r[i] * w->row_bytes;
    __m256 acc[TR][TT];
#pragma GCC unroll 4
    for (int i = 0; i < TR; i++)
#pragma GCC unroll 3
        for (int j = 0; j < TT; j++)
            acc[i][j] = _mm256_setzero_ps();
#pragma GCC unroll 2
    for (int64_t k = 0; k < n8; k += 8) {
        __m256 xv[TT];
#pragma GCC unroll 3
        for (int j = 0; j < TT; j++)
            xv[j] = _mm256_loadu_ps(x[j] + k);
#pragma GCC unroll 4
        for (int i = 0; i < TR; i++) {
            __m256 wv = load8(t, p[i], k);
#pragma GCC unroll 3
            for (int j = 0; j < TT; j++)
                acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    if (n8 < n) {
        __m256 xv[TT];
        for (int j = 0; j < TT; j++) {
            float xb[8] = {0};
            memcpy(xb, x[j] + n8, (size_t)(n - n8) * 4);
            xv[j] = _mm256_loadu_ps(xb);
        }
        for (int i = 0; i < TR; i++) {
            __m256 wv = load_tail(t, p[i], n8, n);
            for (int j = 0; j < TT; j++)
                acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < TR; i++)
        for (int j = 0; j < TT; j++)
            out[i][j] = tree8_avx2(acc[i][j]);
}

T_AVX2 static inline __attribute__((always_inline)) void gemm_avx2(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, const void *a,
                             size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    for (int64_t b0 = 0; b0 < nt; b0 += TB) {
        int64_t b1 = b0 + TB < nt ? b0 + TB : nt;
        for (int64_t r = r0; r < r1; r += TR) {
            int64_t rr[TR];
            for (int i = 0; i < TR; i++)
                rr[i] = r + i < r1 ? r + i : r;
            for (int64_t t0 = b0; t0 < b1; t0 += TT) {
                const float *x[TT];
                for (int j = 0; j < TT; j++)
                    x[j] = (const float *)((const uint8_t *)a + (size_t)(t0 + j < b1 ? t0 + j : t0) * a_stride);
                float out[TR][TT];
                tile_avx2(t, w, rr, x, out);
                for (int i = 0; i < TR && r + i < r1; i++)
                    for (int j = 0; j < TT && t0 + j < b1; j++)
                        y[(t0 + j) * ldy + r - r0 + i] = out[i][j];
            }
        }
    }
}

#define AVX2_PRODUCTS(NAME, TYPE)                                                                  \
    T_AVX2 static void NAME##_gemv_avx2(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, \
                                        int64_t s1, const void *a, float *y0, float *y1)           \
    {                                                                                              \
        gemv_avx2(TYPE, w, r0, r1, s0, s1, a, y0, y1);                                             \
    }                                                                                              \
    T_AVX2 static void NAME##_gemm_avx2(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, \
                                        size_t a_stride, int64_t nt, float *y, int64_t ldy, void *scratch) \
    {                                                                                              \
        (void)scratch;                                                                             \
        gemm_avx2(TYPE, w, r0, r1, a, a_stride, nt, y, ldy);                                       \
    }
AVX2_PRODUCTS(f32, LLM_TYPE_F32)
AVX2_PRODUCTS(f16, LLM_TYPE_F16)
AVX2_PRODUCTS(bf16, LLM_TYPE_BF16)
#endif

/* ==== registration ==== */

void llm_quant_basic_init(struct llm_type_ops *t, struct llm_mm_ops *mm, unsigned cpu)
{
    t[LLM_TYPE_F32] = (struct llm_type_ops){f32_to_float, f32_to_float, f32_from_float};
    t[LLM_TYPE_F16] = (struct llm_type_ops){f16_to_float_ref, f16_to_float_ref, f16_from_float_ref};
    t[LLM_TYPE_BF16] = (struct llm_type_ops){bf16_to_float_ref, bf16_to_float_ref, bf16_from_float_ref};
    t[LLM_TYPE_Q8_0] = (struct llm_type_ops){q8_0_to_float_ref, q8_0_to_float_ref, q8_0_from_float_ref};
    mm[LLM_TYPE_F32] = (struct llm_mm_ops){.act = LLM_ACT_F32, .dot_ref = f32_dot_ref, .gemv = f32_gemv_ref,
                                           .gemm = f32_gemm_ref, .gemm_scratch = no_scratch};
    mm[LLM_TYPE_F16] = (struct llm_mm_ops){.act = LLM_ACT_F32, .dot_ref = f16_dot_ref, .gemv = f16_gemv_ref,
                                           .gemm = f16_gemm_ref, .gemm_scratch = no_scratch};
    mm[LLM_TYPE_BF16] = (struct llm_mm_ops){.act = LLM_ACT_F32, .dot_ref = bf16_dot_ref, .gemv = bf16_gemv_ref,
                                            .gemm = bf16_gemm_ref, .gemm_scratch = no_scratch};
#if X86
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_F16].to_float = f16_to_float_avx2;
        t[LLM_TYPE_F16].from_float = f16_from_float_avx2;
        t[LLM_TYPE_BF16].to_float = bf16_to_float_avx2;
        t[LLM_TYPE_Q8_0].to_float = q8_0_to_float_avx2;
        t[LLM_TYPE_Q8_0].from_float = q8_0_from_float_avx2;
        mm[LLM_TYPE_F32].gemv = f32_gemv_avx2;
        mm[LLM_TYPE_F32].gemm = f32_gemm_avx2;
        mm[LLM_TYPE_F16].gemv = f16_gemv_avx2;
        mm[LLM_TYPE_F16].gemm = f16_gemm_avx2;
        mm[LLM_TYPE_BF16].gemv = bf16_gemv_avx2;
        mm[LLM_TYPE_BF16].gemm = bf16_gemm_avx2;
    }
#else
    (void)cpu;
#endif
}
