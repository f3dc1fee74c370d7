/*
 * quant-basic.c - the kernels of the types F32, F16, BF16 and Q8_0: row
 * conversion to f32 (prefill panels), conversion of activations to the
 * vec_dot type, and the dot products of decode, each in a portable version
 * and, where the CPU has them, AVX2 and AVX-512 versions compiled with
 * target attributes (so the binary runs anywhere; llm_quant_basic_init picks
 * by cpuid). Invariants: every function is a pure function of its inputs
 * with a fixed summation order per path, so results are bit-identical run
 * after run; rows are read unaligned (GGUF only aligns tensors, Q8_0 blocks
 * are 34 bytes).
 */
#include "core/llm.h"
#include "core/quant.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define X86 1
#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define T_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define T_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#else
#define X86 0
#endif

static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ==== portable reference versions ==== */

static void f32_to_float(const void *x, float *y, int64_t k) { memcpy(y, x, (size_t)k * 4); }
static void f32_from_float(const float *x, void *y, int64_t k) { memcpy(y, x, (size_t)k * 4); }

static float f32_dot_ref(int64_t n, const void *x, const void *y)
{
    const float *a = x, *b = y;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return (float)s;
}

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

static float f16_dot_ref(int64_t n, const void *x, const void *y)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)llm_fp16_to_fp32(ld16((const uint8_t *)x + 2 * i)) *
             llm_fp16_to_fp32(ld16((const uint8_t *)y + 2 * i));
    return (float)s;
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

static float bf16_dot_ref(int64_t n, const void *x, const void *y)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)llm_bf16_to_fp32(ld16((const uint8_t *)x + 2 * i)) *
             llm_bf16_to_fp32(ld16((const uint8_t *)y + 2 * i));
    return (float)s;
}

static void q8_0_to_float_ref(const void *x, float *y, int64_t k)
{
    llm_dequantize_row(LLM_TYPE_Q8_0, x, y, k);
}

static void q8_0_from_float_ref(const float *x, void *y, int64_t k)
{
    llm_quantize_row_q8_0(x, y, k);
}

static float q8_0_dot_ref(int64_t n, const void *x, const void *y)
{
    const uint8_t *a = x, *b = y;
    float s = 0;
    for (int64_t blk = 0; blk < n / QK8_0; blk++, a += 34, b += 34) {
        int32_t sum = 0;
        for (int j = 0; j < QK8_0; j++)
            sum += (int32_t)(int8_t)a[2 + j] * (int8_t)b[2 + j];
        s += llm_fp16_to_fp32(ld16(a)) * llm_fp16_to_fp32(ld16(b)) * (float)sum;
    }
    return s;
}

/* portable fast-path stand-ins: float accumulation in a fixed order */
static float f32_dot_generic(int64_t n, const void *x, const void *y)
{
    const float *a = x, *b = y;
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    for (; i < n; i++)
        s[0] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

#if X86
/* ==== AVX2 ==== */

T_AVX2 static float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

T_AVX2 static float f32_dot_avx2(int64_t n, const void *x, const void *y)
{
    const float *a = x, *b = y;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

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
        _mm_storeu_si128((__m128i *)(p + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < k; i++) {
        uint16_t h = llm_fp32_to_fp16(x[i]);
        memcpy(p + i, &h, 2);
    }
}

T_AVX2 static float f16_dot_avx2(int64_t n, const void *x, const void *y)
{
    const uint16_t *a = x, *b = y;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i))), s0);
        s1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8))),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i + 8))), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += llm_fp16_to_fp32(a[i]) * llm_fp16_to_fp32(b[i]);
    return s;
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

T_AVX2 static float bf16_dot_avx2(int64_t n, const void *x, const void *y)
{
    const uint16_t *a = x, *b = y;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(bf16x8_avx2(a + i), bf16x8_avx2(b + i), s0);
        s1 = _mm256_fmadd_ps(bf16x8_avx2(a + i + 8), bf16x8_avx2(b + i + 8), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += llm_bf16_to_fp32(a[i]) * llm_bf16_to_fp32(b[i]);
    return s;
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

T_AVX2 static float q8_0_dot_avx2(int64_t n, const void *x, const void *y)
{
    const uint8_t *a = x, *b = y;
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t blk = 0; blk < n / QK8_0; blk++, a += 34, b += 34) {
        __m256i qa = _mm256_loadu_si256((const __m256i *)(a + 2));
        __m256i qb = _mm256_loadu_si256((const __m256i *)(b + 2));
        __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qa, qa), _mm256_sign_epi8(qb, qa));
        __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
        __m256 d = _mm256_set1_ps(_cvtsh_ss(ld16(a)) * _cvtsh_ss(ld16(b)));
        acc = _mm256_fmadd_ps(d, p, acc);
    }
    return hsum256(acc);
}

/* ==== AVX-512 ==== */

T_AVX512 static float f32_dot_avx512(int64_t n, const void *x, const void *y)
{
    const float *a = x, *b = y;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

T_AVX512 static void f16_to_float_avx512(const void *x, float *y, int64_t k)
{
    const uint16_t *p = x;
    int64_t i = 0;
    for (; i + 16 <= k; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + i))));
    for (; i < k; i++)
        y[i] = llm_fp16_to_fp32(p[i]);
}

T_AVX512 static float f16_dot_avx512(int64_t n, const void *x, const void *y)
{
    const uint16_t *a = x, *b = y;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))),
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i))), s0);
        s1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))),
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i + 16))), s1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        s += llm_fp16_to_fp32(a[i]) * llm_fp16_to_fp32(b[i]);
    return s;
}

T_AVX512 static void bf16_to_float_avx512(const void *x, float *y, int64_t k)
{
    const uint16_t *p = x;
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + i)));
        _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
    for (; i < k; i++)
        y[i] = llm_bf16_to_fp32(p[i]);
}

T_BF16 static float bf16_dot_avx512bf16(int64_t n, const void *x, const void *y)
{
    const uint16_t *a = x, *b = y;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_dpbf16_ps(s0, (__m512bh)_mm512_loadu_si512(a + i), (__m512bh)_mm512_loadu_si512(b + i));
        s1 = _mm512_dpbf16_ps(s1, (__m512bh)_mm512_loadu_si512(a + i + 32),
                              (__m512bh)_mm512_loadu_si512(b + i + 32));
    }
    for (; i + 32 <= n; i += 32)
        s0 = _mm512_dpbf16_ps(s0, (__m512bh)_mm512_loadu_si512(a + i), (__m512bh)_mm512_loadu_si512(b + i));
    float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        s += llm_bf16_to_fp32(a[i]) * llm_bf16_to_fp32(b[i]);
    return s;
}

T_AVX512 static void q8_0_to_float_avx512(const void *x, float *y, int64_t k)
{
    const uint8_t *p = x;
    for (int64_t b = 0; b < k / QK8_0; b++, p += 34, y += 32) {
        __m512 d = _mm512_set1_ps(_cvtsh_ss(ld16(p)));
        __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 2)));
        __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 18)));
        _mm512_storeu_ps(y, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q0)));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q1)));
    }
}

/* two blocks per 512-bit register: |a| (u8) x sign(b, a) (s8), summed in
 * groups of four bytes, then scaled per block */
T_VNNI static float q8_0_dot_vnni(int64_t n, const void *x, const void *y)
{
    const uint8_t *a = x, *b = y;
    int64_t nb = n / QK8_0, blk = 0;
    __m512 acc = _mm512_setzero_ps();
    for (; blk + 2 <= nb; blk += 2, a += 68, b += 68) {
        __m512i qa = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
            _mm256_loadu_si256((const __m256i *)(a + 36)), 1);
        __m512i qb = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 2))),
            _mm256_loadu_si256((const __m256i *)(b + 36)), 1);
        __mmask64 neg = _mm512_movepi8_mask(qa);
        __m512i ua = _mm512_abs_epi8(qa);
        __m512i sb = _mm512_mask_sub_epi8(qb, neg, _mm512_setzero_si512(), qb);
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ua, sb);
        float d0 = _cvtsh_ss(ld16(a)) * _cvtsh_ss(ld16(b));
        float d1 = _cvtsh_ss(ld16(a + 34)) * _cvtsh_ss(ld16(b + 34));
        __m512 d = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1), 1);
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc);
    }
    float s = _mm512_reduce_add_ps(acc);
    if (blk < nb)
        s += q8_0_dot_avx2(QK8_0, a, b);
    return s;
}
#endif


/* ==== Q8_0 x Q8_0 products for prefill (AVX-512 VNNI) ====
 *
 * The rows of W are repacked into scratch: per block pair (64 values) the
 * values as u8 (w + 128, that is w XOR 0x80) and 16 floats holding the two
 * block scales (8 lanes each, matching the lanes vpdpbusd fills).
 * Activations, four tokens at a time, keep their int8 values, the scales in
 * the same pattern, and 16 int32 of -128 times the sum of the four values
 * each lane multiplies. vpdpbusd started from those gives sum(w * a) for
 * each lane with no sign tricks; the lanes are scaled and accumulated in
 * f32. Tiles of 4 rows x 4 tokens keep 16 accumulators in registers. Each
 * result is computed in the same order whatever tile it falls in.
 */
#define MM_R 4 /* rows per tile */
#define MM_T 4 /* tokens per tile */

#if X86
struct mm_layout {
    int64_t nb, np;  /* blocks, block pairs (the last one padded) */
    size_t row;      /* bytes of a packed weight row: np * (64 + 64) */
    size_t arow;     /* bytes of a packed activation row: np * (64 + 64 + 64) */
};

static struct mm_layout mm_layout(int64_t n)
{
    struct mm_layout L;
    L.nb = n / QK8_0;
    L.np = (L.nb + 1) / 2;
    L.row = (size_t)L.np * 128;
    L.arow = (size_t)L.np * 192;
    return L;
}

static size_t q8_0_mul_mat_scratch(int64_t n, int64_t nr)
{
    struct mm_layout L = mm_layout(n);
    return (size_t)((nr + MM_R - 1) / MM_R * MM_R) * L.row + L.arow + 64;
}

/* one Q8_0 row packed: per pair q[64] then scales[16] then (activations
 * only) -128 * lane sums[16]; weights: values XOR 0x80, no lane sums */
T_VNNI static void mm_pack_row(const uint8_t *src, const struct mm_layout *L, uint8_t *dst, bool act)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t p = 0; p < L->np; p++, dst += act ? 192 : 128) {
        const uint8_t *b0 = src + 2 * p * 34, *b1 = b0 + 34;
        bool two = 2 * p + 1 < L->nb;
        __m256i q0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
        __m256i q1 = two ? _mm256_loadu_si256((const __m256i *)(b1 + 2)) : _mm256_setzero_si256();
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        float d0 = _cvtsh_ss(ld16(b0)), d1 = two ? _cvtsh_ss(ld16(b1)) : 0.0f;
        __m512 d = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1), 1);
        _mm512_store_ps((float *)(dst + 64), d);
        if (!act) {
            _mm512_store_si512(dst, _mm512_xor_si512(q, flip));
        } else {
            _mm512_store_si512(dst, q);
            __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, q);
            _mm512_store_si512(dst + 128, _mm512_sub_epi32(_mm512_setzero_si512(), sums));
        }
    }
}

T_VNNI static size_t q8_0_prepared_bytes(int64_t n)
{
    return mm_layout(n).arow;
}

T_VNNI static void q8_0_prepare_vnni(const void *a, void *dst, int64_t n)
{
    struct mm_layout L = mm_layout(n);
    mm_pack_row(a, &L, dst, true);
}

T_VNNI static void q8_0_mul_mat_vnni(int64_t n, int64_t nr, int64_t nt, const void *w, size_t w_stride,
                                     const void *a, size_t a_stride, float *y, int64_t ldy,
                                     void *scratch)
{
    struct mm_layout L = mm_layout(n);
    int64_t nr_pad = (nr + MM_R - 1) / MM_R * MM_R;
    uint8_t *wp = scratch, *zero = wp + (size_t)nr_pad * L.row;
    for (int64_t r = 0; r < nr_pad; r++) {
        if (r < nr)
            mm_pack_row((const uint8_t *)w + r * w_stride, &L, wp + r * L.row, false);
        else
            memset(wp + r * L.row, 0, L.row); /* scales 0: contributes nothing */
    }
    memset(zero, 0, L.arow); /* stands in for missing tokens of the last group */
    for (int64_t t0 = 0; t0 < nt; t0 += MM_T) {
        int64_t tn = nt - t0 < MM_T ? nt - t0 : MM_T;
        const uint8_t *ap[MM_T];
        for (int64_t t = 0; t < MM_T; t++)
            ap[t] = t < tn ? (const uint8_t *)a + (t0 + t) * a_stride : zero;
        for (int64_t r0 = 0; r0 < nr; r0 += MM_R) {
            __m512 acc[MM_R][MM_T];
            for (int i = 0; i < MM_R; i++)
                for (int j = 0; j < MM_T; j++)
                    acc[i][j] = _mm512_setzero_ps();
            const uint8_t *wr = wp + r0 * L.row;
            for (int64_t p = 0; p < L.np; p++) {
                __m512i W[MM_R];
                __m512 D[MM_R];
#pragma GCC unroll 4
                for (int i = 0; i < MM_R; i++) {
                    W[i] = _mm512_load_si512(wr + i * L.row + p * 128);
                    D[i] = _mm512_load_ps((const float *)(wr + i * L.row + p * 128 + 64));
                }
#pragma GCC unroll 4
                for (int j = 0; j < MM_T; j++) {
                    const uint8_t *aj = ap[j] + p * 192;
                    __m512i A = _mm512_load_si512(aj), C = _mm512_load_si512(aj + 128);
                    __m512 DA = _mm512_load_ps((const float *)(aj + 64));
#pragma GCC unroll 4
                    for (int i = 0; i < MM_R; i++) {
                        __m512i d = _mm512_dpbusd_epi32(C, W[i], A);
                        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(D[i], DA), acc[i][j]);
                    }
                }
            }
            for (int i = 0; i < MM_R && r0 + i < nr; i++)
                for (int j = 0; j < tn; j++)
                    y[(t0 + j) * ldy + r0 + i] = _mm512_reduce_add_ps(acc[i][j]);
        }
    }
}
#endif

void llm_quant_basic_init(struct llm_type_ops *t, unsigned cpu)
{
    t[LLM_TYPE_F32] = (struct llm_type_ops){LLM_TYPE_F32, f32_to_float, f32_to_float,
                                            f32_from_float, f32_dot_ref, f32_dot_generic};
    t[LLM_TYPE_F16] = (struct llm_type_ops){LLM_TYPE_F16, f16_to_float_ref, f16_to_float_ref,
                                            f16_from_float_ref, f16_dot_ref, f16_dot_ref};
    t[LLM_TYPE_BF16] = (struct llm_type_ops){LLM_TYPE_BF16, bf16_to_float_ref, bf16_to_float_ref,
                                             bf16_from_float_ref, bf16_dot_ref, bf16_dot_ref};
    t[LLM_TYPE_Q8_0] = (struct llm_type_ops){LLM_TYPE_Q8_0, q8_0_to_float_ref, q8_0_to_float_ref,
                                             q8_0_from_float_ref, q8_0_dot_ref, q8_0_dot_ref};
#if X86
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_F32].vec_dot = f32_dot_avx2;
        t[LLM_TYPE_F16].to_float = f16_to_float_avx2;
        t[LLM_TYPE_F16].from_float = f16_from_float_avx2;
        t[LLM_TYPE_F16].vec_dot = f16_dot_avx2;
        t[LLM_TYPE_BF16].to_float = bf16_to_float_avx2;
        t[LLM_TYPE_BF16].vec_dot = bf16_dot_avx2;
        t[LLM_TYPE_Q8_0].to_float = q8_0_to_float_avx2;
        t[LLM_TYPE_Q8_0].from_float = q8_0_from_float_avx2;
        t[LLM_TYPE_Q8_0].vec_dot = q8_0_dot_avx2;
    }
    if (cpu & LLM_CPU_AVX512) {
        t[LLM_TYPE_F32].vec_dot = f32_dot_avx512;
        t[LLM_TYPE_F16].to_float = f16_to_float_avx512;
        t[LLM_TYPE_F16].vec_dot = f16_dot_avx512;
        t[LLM_TYPE_BF16].to_float = bf16_to_float_avx512;
        t[LLM_TYPE_Q8_0].to_float = q8_0_to_float_avx512;
    }
    if (cpu & LLM_CPU_AVX512_VNNI)
        t[LLM_TYPE_Q8_0].vec_dot = q8_0_dot_vnni;
    if (cpu & LLM_CPU_AVX512_BF16)
        t[LLM_TYPE_BF16].vec_dot = bf16_dot_avx512bf16;
#else
    (void)cpu;
#endif
}

void llm_quant_basic_mm_init(struct llm_mm_ops *t, unsigned cpu)
{
#if X86
    if (cpu & LLM_CPU_AVX512_VNNI)
        t[LLM_TYPE_Q8_0] = (struct llm_mm_ops){q8_0_mul_mat_vnni, q8_0_mul_mat_scratch,
                                               q8_0_prepare_vnni, q8_0_prepared_bytes};
#else
    (void)t;
    (void)cpu;
#endif
}
