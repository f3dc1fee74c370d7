/*
 * act.c - the I16 activation format of quantized weights (quant.h): a
 * token's row quantized to 15-bit integers with one f32 scale per 32
 * elements, and the sums and byte halves the kernels use.
 *
 * Why 15 bits: the error of 8-bit activations (llama.cpp's Q8_0 and Q8_K)
 * is what keeps an engine far from exact math (about 1/254 of a block's
 * largest value per element); 15 bits make it 128 times smaller, at little
 * cost: 16-bit products (vpmaddwd) for 8-bit weights, and for weights of
 * up to 6 bits two byte products (vpmaddubsw) on lo and hi, whose 16-bit
 * sums cannot overflow (2 * 127 * 63 < 2^15).
 * Invariants: the fast quantizer writes the same bytes as the reference;
 * padding entries of d and s16 are zero.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

#define QB 32
#define QMAX 16383.0f

static size_t pad8(size_t k) { return (k + 7) / 8 * 8; }

size_t llm_act_bytes(int kind, int64_t n)
{
    if (kind == LLM_ACT_F32)
        return (size_t)n * sizeof(float);
    size_t nb = (size_t)n / QB;
    return (pad8(nb) * 4 + pad8(2 * nb) * 4 + (size_t)n * 4 + 63) / 64 * 64;
}

struct llm_act16 llm_act16_view(const void *a, int64_t n)
{
    const uint8_t *p = a;
    size_t nb = (size_t)n / QB;
    struct llm_act16 v;
    v.d = (const float *)p;
    p += pad8(nb) * 4;
    v.s16 = (const int32_t *)p;
    p += pad8(2 * nb) * 4;
    v.q = (const int16_t *)p;
    p += (size_t)n * 2;
    v.lo = p;
    v.hi = (const int8_t *)(p + n);
    return v;
}

struct llm_act16_out llm_act16_out(void *dst, int64_t n)
{
    struct llm_act16 v = llm_act16_view(dst, n);
    struct llm_act16_out o = {(float *)v.d, (int32_t *)v.s16, (int16_t *)v.q, (uint8_t *)v.lo, (int8_t *)v.hi,
                              (size_t)n / QB};
    memset(o.d + o.nb, 0, (pad8(o.nb) - o.nb) * 4);
    memset(o.s16 + 2 * o.nb, 0, (pad8(2 * o.nb) - 2 * o.nb) * 4);
    /* the rounding up to 64 bytes after hi[], zeroed so rows compare whole */
    uint8_t *end = (uint8_t *)o.hi + n;
    memset(end, 0, (size_t)((uint8_t *)dst + llm_act_bytes(LLM_ACT_I16, n) - end));
    return o;
}

/* the block's scale and its inverse: d = amax / 16383, 1 / d (0 for 0) */
static float block_scale(float amax, float *id)
{
    float d = amax / QMAX;
    *id = d != 0 ? 1.0f / d : 0.0f;
    return d;
}

void llm_act16_quantize_ref(const float *x, void *dst, int64_t n)
{
    struct llm_act16_out o = llm_act16_out(dst, n);
    memset(o.s16, 0, 2 * o.nb * 4); /* the sums are added up below */
    for (size_t b = 0; b < o.nb; b++) {
        float amax = 0, id;
        for (int i = 0; i < QB; i++)
            amax = fmaxf(amax, fabsf(x[b * QB + i]));
        o.d[b] = block_scale(amax, &id);
        for (int i = 0; i < QB; i++) {
            /* clamped before rounding, as the SIMD code does (a NaN gives -16383) */
            float t = fminf(fmaxf(x[b * QB + i] * id, -QMAX), QMAX);
            int32_t qi = (int32_t)nearbyintf(t);
            o.q[b * QB + i] = (int16_t)qi;
            o.lo[b * QB + i] = (uint8_t)(qi & 127);
            o.hi[b * QB + i] = (int8_t)(qi >> 7);
            o.s16[2 * b + (size_t)i / 16] += qi;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma,f16c"))) static void act16_quantize_avx2(const float *x, void *dst, int64_t n)
{
    struct llm_act16_out o = llm_act16_out(dst, n);
    const __m256 sign = _mm256_set1_ps(-0.0f), top = _mm256_set1_ps(QMAX), bot = _mm256_set1_ps(-QMAX);
    const __m256i one = _mm256_set1_epi16(1), m127 = _mm256_set1_epi16(127);
    for (size_t b = 0; b < o.nb; b++, x += QB) {
        __m256 xv[4], m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            xv[j] = _mm256_loadu_ps(x + 8 * j);
            /* max(abs, m): a NaN element is dropped, as fmaxf drops it */
            m = _mm256_max_ps(_mm256_andnot_ps(sign, xv[j]), m);
        }
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float id;
        o.d[b] = block_scale(_mm_cvtss_f32(m4), &id);
        __m256 mul = _mm256_set1_ps(id);
        __m256i i32[4];
        for (int j = 0; j < 4; j++) {
            __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(xv[j], mul), bot), top);
            i32[j] = _mm256_cvtps_epi32(t); /* nearest even (MXCSR default) */
        }
        __m256i q0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i32[0], i32[1]), 0xd8);
        __m256i q1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i32[2], i32[3]), 0xd8);
        _mm256_storeu_si256((__m256i *)(o.q + QB * b), q0);
        _mm256_storeu_si256((__m256i *)(o.q + QB * b + 16), q1);
        __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(q0, one), _mm256_madd_epi16(q1, one));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        t = _mm_hadd_epi32(t, t);
        o.s16[2 * b] = _mm_cvtsi128_si32(t);
        o.s16[2 * b + 1] = _mm_extract_epi32(t, 1);
        __m256i l = _mm256_packus_epi16(_mm256_and_si256(q0, m127), _mm256_and_si256(q1, m127));
        __m256i hh = _mm256_packs_epi16(_mm256_srai_epi16(q0, 7), _mm256_srai_epi16(q1, 7));
        _mm256_storeu_si256((__m256i *)(o.lo + QB * b), _mm256_permute4x64_epi64(l, 0xd8));
        _mm256_storeu_si256((__m256i *)(o.hi + QB * b), _mm256_permute4x64_epi64(hh, 0xd8));
    }
}

/* AVX-512: a block is two registers; the same operations per element as
 * AVX2 (the maximum of exact absolute values in any order, the same
 * product, clamp and rounding), the integer sums exact: the same bytes */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))) static void
act16_quantize_avx512(const float *x, void *dst, int64_t n)
{
    struct llm_act16_out o = llm_act16_out(dst, n);
    const __m512 sign = _mm512_set1_ps(-0.0f), top = _mm512_set1_ps(QMAX), bot = _mm512_set1_ps(-QMAX);
    const __m512i m127 = _mm512_set1_epi32(127);
    for (size_t b = 0; b < o.nb; b++, x += QB) {
        __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        /* max(abs, m): a NaN element is dropped, as fmaxf drops it */
        __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_setzero_ps());
        m = _mm512_max_ps(_mm512_andnot_ps(sign, x1), m);
        float id;
        o.d[b] = block_scale(_mm512_reduce_max_ps(m), &id);
        __m512 mul = _mm512_set1_ps(id);
        __m512i i0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x0, mul), bot), top));
        __m512i i1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x1, mul), bot), top));
        _mm256_storeu_si256((__m256i *)(o.q + QB * b), _mm512_cvtepi32_epi16(i0));
        _mm256_storeu_si256((__m256i *)(o.q + QB * b + 16), _mm512_cvtepi32_epi16(i1));
        o.s16[2 * b] = _mm512_reduce_add_epi32(i0);
        o.s16[2 * b + 1] = _mm512_reduce_add_epi32(i1);
        _mm_storeu_si128((__m128i *)(o.lo + QB * b), _mm512_cvtepi32_epi8(_mm512_and_si512(i0, m127)));
        _mm_storeu_si128((__m128i *)(o.lo + QB * b + 16), _mm512_cvtepi32_epi8(_mm512_and_si512(i1, m127)));
        _mm_storeu_si128((__m128i *)(o.hi + QB * b), _mm512_cvtepi32_epi8(_mm512_srai_epi32(i0, 7)));
        _mm_storeu_si128((__m128i *)(o.hi + QB * b + 16), _mm512_cvtepi32_epi8(_mm512_srai_epi32(i1, 7)));
    }
}
#endif

static void (*quantize_fn)(const float *, void *, int64_t) = llm_act16_quantize_ref;

void llm_act_init(unsigned cpu)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (cpu & LLM_CPU_AVX2)
        quantize_fn = act16_quantize_avx2;
    if (llm_cpu_has_avx512(cpu))
        quantize_fn = act16_quantize_avx512;
#elif defined(__aarch64__)
    quantize_fn = cpu & LLM_CPU_NEON ? llm_act16_quantize_neon : llm_act16_quantize_ref;
#else
    (void)cpu;
#endif
}

void llm_act16_quantize(const float *x, void *dst, int64_t n)
{
    llm_cpu_features(); /* the tables are set up once */
    quantize_fn(x, dst, n);
}
