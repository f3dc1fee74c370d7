/*
 * quant-basic.c - the types F32, F16, BF16 and Q8_0 as rows: conversions
 * to and from f32, a scalar reference and AVX2 versions with the same
 * bits. The matrix products of the float types are fmm.c's (BLIS's
 * micro-kernel and the portable definition); llm_quant_basic_init
 * registers them with the rest.
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

/* ==== registration ==== */

void llm_quant_basic_init(struct llm_type_ops *t, struct llm_mm_ops *mm, unsigned cpu)
{
    t[LLM_TYPE_F32] = (struct llm_type_ops){f32_to_float, f32_to_float, f32_from_float};
    t[LLM_TYPE_F16] = (struct llm_type_ops){f16_to_float_ref, f16_to_float_ref, f16_from_float_ref};
    t[LLM_TYPE_BF16] = (struct llm_type_ops){bf16_to_float_ref, bf16_to_float_ref, bf16_from_float_ref};
    t[LLM_TYPE_Q8_0] = (struct llm_type_ops){q8_0_to_float_ref, q8_0_to_float_ref, q8_0_from_float_ref};
#if X86
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_F16].to_float = f16_to_float_avx2;
        t[LLM_TYPE_F16].from_float = f16_from_float_avx2;
        t[LLM_TYPE_BF16].to_float = bf16_to_float_avx2;
        t[LLM_TYPE_Q8_0].to_float = q8_0_to_float_avx2;
        t[LLM_TYPE_Q8_0].from_float = q8_0_from_float_avx2;
    }
#endif
    llm_fmm_init(mm, cpu);
}
