/*
 * attn.c - the attention kernels, and softmax: query tokens against the KV
 * cache, read in place, each token computed exactly as alone (attn.h), so
 * prefill and decode give the same bits.
 *
 * Why a kernel of its own: at depth the KV cache, not the weights, is what
 * decode reads most per layer, and the obvious loop (one function-call dot
 * product per position and head, the whole head converted to f32 first,
 * libm's expf per score) costs more than the matrix products it sits
 * between. Here the query heads that share a KV head (GQA) are done
 * together: each K and V row is converted from f16 once into a small
 * L1-resident chunk and used by every one of those heads; eight scores are
 * computed at a time and reduced together; exp is a polynomial on eight
 * lanes. With AVX-512's 32 registers, the (row, head) outputs that share a
 * chunk's keys go through the kernels in groups, so each load of K or V
 * feeds several of them. Results depend only on the inputs (fixed order,
 * no threads here), not on how the engine spreads heads over threads, nor
 * on the grouping: each output gets the single-row kernel's operations.
 */
#include "core/engine/attn.h"
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define X86 1
#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define X86 0
#endif

#define CHUNK 64 /* K or V rows converted to f32 at a time */

/* scores (nq x n_kv), the softmax sums (nq), the chunk buffer ((CHUNK +
 * 8) x hd: a window's rows may start a chunk off the groups of 8 the
 * score kernel reads) */
size_t llm_attn_scratch_floats(int64_t nq, int64_t hd, int64_t n_kv)
{
    /* a sink's column after each row's keys */
    size_t scores = ((size_t)(nq * (n_kv + 1)) + 15) / 16 * 16, sums = ((size_t)nq + 15) / 16 * 16;
    return scores + sums + (size_t)((CHUNK + 8) * hd);
}

/* rows [j0, j0 + n) of K or V as f32 */
static void rows_f32(const struct llm_attn_job *a, const void *src, int64_t j0, int64_t n, float *dst)
{
    if (a->kv_type == LLM_TYPE_F32) {
        memcpy(dst, (const float *)src + j0 * a->hd, (size_t)(n * a->hd) * sizeof(float));
    } else {
        const uint16_t *p = (const uint16_t *)src + j0 * a->hd;
        a->f16_to_float(p, dst, n * a->hd);
    }
}

/* ==== portable: the definitions, operation for operation ==== */

/* e^x as exp_avx2 computes it on each lane */
static float exp_poly(float x)
{
    x = fminf(x, 88.0f);
    x = fmaxf(x, -87.3f);
    float k = nearbyintf(x * 1.44269504088896341f);
    float r = fmaf(-k, 0.693359375f, x);
    r = fmaf(-k, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r + 1.0f);
    uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
    float e;
    memcpy(&e, &bits, 4);
    return p * e;
}

/* exponentiate s[0..n) against its maximum in place; their sum in
 * *sum_out: lanes j % 8 over whole groups of 8, ((l0 + l4) + (l2 + l6)) +
 * ((l1 + l5) + (l3 + l7)), then the rest one by one */
static void softmax_generic(float *s, int64_t n, float *sum_out)
{
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    float l[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int i = 0; i < 8; i++) {
            s[j + i] = exp_poly(s[j + i] - mx);
            l[i] += s[j + i];
        }
    float sum = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; j < n; j++) {
        s[j] = exp_poly(s[j] - mx);
        sum += s[j];
    }
    *sum_out = sum;
}

/* s[r] = scale * (q . k_r) for the nr rows k + r * hd: eight lanes by
 * d % 8, fused multiply-adds, ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) */
static void scores_generic(const float *q, const float *k, int64_t hd, int64_t nr, float scale, float *s)
{
    for (int64_t r = 0; r < nr; r++) {
        float a[8] = {0};
        for (int64_t i = 0; i < hd; i++)
            a[i % 8] = fmaf(q[i], k[r * hd + i], a[i % 8]);
        s[r] = (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) * scale;
    }
}

/* out[0..hd) += sum over r < nr of p[r] * v[r * hd ..], one fused
 * multiply-add chain per element, r in order */
static void accumulate_generic(float *out, const float *p, const float *v, int64_t nr, int64_t hd)
{
    for (int64_t r = 0; r < nr; r++)
        for (int64_t i = 0; i < hd; i++)
            out[i] = fmaf(p[r], v[r * hd + i], out[i]);
}

static void softmax_norm_generic(float *s, int64_t n)
{
    float sum;
    softmax_generic(s, n, &sum);
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++)
        s[j] *= inv;
}

/* ==== AVX2 ==== */
#if X86

/* e^x on eight lanes: Cody-Waite reduction by ln 2 and a degree-6
 * polynomial (relative error about 2e-7); x below -87.3 gives ~1e-38, above
 * 88 is clamped (softmax arguments are <= 0) */
T_AVX2 static __m256 exp_avx2(__m256 x)
{
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

T_AVX2 static float hsum_avx2(__m256 v)
{
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

T_AVX2 static float hmax_avx2(__m256 v)
{
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

/* exponentiate s[0..n) against its maximum in place; the sum of the
 * results in *sum_out. Lanes are summed in a fixed order. */
T_AVX2 static void softmax_avx2(float *s, int64_t n, float *sum_out)
{
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(s + j));
    float mx = hmax_avx2(vmx);
    for (; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    __m256 m = _mm256_set1_ps(mx), vs = _mm256_setzero_ps();
    for (j = 0; j + 8 <= n; j += 8) {
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
        _mm256_storeu_ps(s + j, e);
        vs = _mm256_add_ps(vs, e);
    }
    float sum = hsum_avx2(vs);
    if (j < n) { /* the tail through the same polynomial */
        float t[8] = {0};
        int64_t k = n - j;
        for (int64_t i = 0; i < k; i++)
            t[i] = s[j + i] - mx;
        for (int64_t i = k; i < 8; i++)
            t[i] = -INFINITY;
        __m256 e = exp_avx2(_mm256_loadu_ps(t));
        _mm256_storeu_ps(t, e);
        for (int64_t i = 0; i < k; i++) {
            s[j + i] = t[i];
            sum += t[i];
        }
    }
    *sum_out = sum;
}

T_AVX2 static void softmax_norm_avx2(float *s, int64_t n)
{
    float sum;
    softmax_avx2(s, n, &sum);
    __m256 inv = _mm256_set1_ps(1.0f / sum);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
    for (; j < n; j++)
        s[j] *= 1.0f / sum;
}

/* lane i: the sum of a_i's eight lanes, ((l0 + l1) + (l2 + l3)) + ((l4 +
 * l5) + (l6 + l7)) */
T_AVX2 static inline __m256 tree8_avx2(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                                       __m256 a6, __m256 a7)
{
    __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20),
                         _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

/* q . k_i for the eight rows k + i * hd, as one vector */
T_AVX2 static __m256 dot8_avx2(const float *q, const float *k, int64_t hd)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int64_t d = 0; d < hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + d), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + hd + d), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 2 * hd + d), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 3 * hd + d), a3);
        a4 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 4 * hd + d), a4);
        a5 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 5 * hd + d), a5);
        a6 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 6 * hd + d), a6);
        a7 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 7 * hd + d), a7);
    }
    return tree8_avx2(a0, a1, a2, a3, a4, a5, a6, a7);
}

/* out[0..64) += sum over r < nr of p[r] * v[r * hd .. + 64) */
T_AVX2 static void axpy64_avx2(float *out, const float *p, const float *v, int64_t nr, int64_t hd)
{
    __m256 o0 = _mm256_loadu_ps(out), o1 = _mm256_loadu_ps(out + 8), o2 = _mm256_loadu_ps(out + 16),
           o3 = _mm256_loadu_ps(out + 24), o4 = _mm256_loadu_ps(out + 32), o5 = _mm256_loadu_ps(out + 40),
           o6 = _mm256_loadu_ps(out + 48), o7 = _mm256_loadu_ps(out + 56);
    for (int64_t r = 0; r < nr; r++, v += hd) {
        __m256 pr = _mm256_broadcast_ss(p + r);
        o0 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v), o0);
        o1 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v + 8), o1);
        o2 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v + 16), o2);
        o3 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v + 24), o3);
        o4 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v + 32), o4);
        o5 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v + 40), o5);
        o6 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v + 48), o6);
        o7 = _mm256_fmadd_ps(pr, _mm256_loadu_ps(v + 56), o7);
    }
    _mm256_storeu_ps(out, o0);
    _mm256_storeu_ps(out + 8, o1);
    _mm256_storeu_ps(out + 16, o2);
    _mm256_storeu_ps(out + 24, o3);
    _mm256_storeu_ps(out + 32, o4);
    _mm256_storeu_ps(out + 40, o5);
    _mm256_storeu_ps(out + 48, o6);
    _mm256_storeu_ps(out + 56, o7);
}

/* out[0..8) += sum over r < nr of p[r] * v[r * hd .. + 8) */
T_AVX2 static void axpy8_avx2(float *out, const float *p, const float *v, int64_t nr, int64_t hd)
{
    __m256 o = _mm256_loadu_ps(out);
    for (int64_t r = 0; r < nr; r++, v += hd)
        o = _mm256_fmadd_ps(_mm256_broadcast_ss(p + r), _mm256_loadu_ps(v), o);
    _mm256_storeu_ps(out, o);
}

/* as scores_generic, eight rows at a time; head_dim a multiple of 8, and k
 * readable up to a multiple of 8 rows (the driver pads the chunk) */
T_AVX2 static void scores_avx2(const float *q, const float *k, int64_t hd, int64_t nr, float scale, float *s)
{
    __m256 sv = _mm256_set1_ps(scale);
    int64_t r = 0;
    for (; r + 8 <= nr; r += 8)
        _mm256_storeu_ps(s + r, _mm256_mul_ps(dot8_avx2(q, k + r * hd, hd), sv));
    if (r < nr) {
        float t[8];
        _mm256_storeu_ps(t, _mm256_mul_ps(dot8_avx2(q, k + r * hd, hd), sv));
        memcpy(s + r, t, (size_t)(nr - r) * sizeof(float));
    }
}

/* as accumulate_generic; head_dim a multiple of 8 */
T_AVX2 static void accumulate_avx2(float *out, const float *p, const float *v, int64_t nr, int64_t hd)
{
    int64_t d = 0;
    for (; d + 64 <= hd; d += 64)
        axpy64_avx2(out + d, p, v + d, nr, hd);
    for (; d < hd; d += 8)
        axpy8_avx2(out + d, p, v + d, nr, hd);
}

/* ==== AVX-512: the same operations on sixteen lanes where each lane is
 * an element's own chain (P V, the exp polynomial); the scores hold two
 * keys' eight lanes d % 8 per register (below) */
#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* exp_avx2 on sixteen lanes, operation for operation */
T_AVX512 static __m512 exp_avx512(__m512 x)
{
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* softmax_avx2's results: the maximum, then sixteen exponentials at a time,
 * their eight-lane sum taken in the same order (the low half, then the
 * high), the rest as AVX2 does it */
T_AVX512 static void softmax_avx512(float *s, int64_t n, float *sum_out)
{
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(s + j));
    float mx = hmax_avx2(vmx);
    for (; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    __m512 m = _mm512_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    for (j = 0; j + 16 <= n; j += 16) {
        __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
        _mm512_storeu_ps(s + j, e);
        vs = _mm256_add_ps(vs, _mm512_castps512_ps256(e));
        vs = _mm256_add_ps(vs, _mm512_extractf32x8_ps(e, 1));
    }
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm512_castps512_ps256(m)));
        _mm256_storeu_ps(s + j, e);
        vs = _mm256_add_ps(vs, e);
    }
    float sum = hsum_avx2(vs);
    if (j < n) { /* the tail through the same polynomial */
        float t[8] = {0};
        int64_t k = n - j;
        for (int64_t i = 0; i < k; i++)
            t[i] = s[j + i] - mx;
        for (int64_t i = k; i < 8; i++)
            t[i] = -INFINITY;
        __m256 e = exp_avx2(_mm256_loadu_ps(t));
        _mm256_storeu_ps(t, e);
        for (int64_t i = 0; i < k; i++) {
            s[j + i] = t[i];
            sum += t[i];
        }
    }
    *sum_out = sum;
}

/* as accumulate_generic on the elements [d, hd) */
T_AVX512 static void accumulate_from_avx512(float *out, const float *p, const float *v, int64_t nr, int64_t hd,
                                            int64_t d)
{
    for (; d + 16 <= hd; d += 16) {
        __m512 o = _mm512_loadu_ps(out + d);
        const float *vr = v + d;
        for (int64_t r = 0; r < nr; r++, vr += hd)
            o = _mm512_fmadd_ps(_mm512_set1_ps(p[r]), _mm512_loadu_ps(vr), o);
        _mm512_storeu_ps(out + d, o);
    }
    for (; d < hd; d += 8)
        axpy8_avx2(out + d, p, v + d, nr, hd);
}

/* ==== AVX-512: several query rows at once over the same keys ====
 * AVX-512VL gives 32 vector registers, enough to keep the accumulators of
 * several (row, head) outputs that read the same span of the chunk, so each
 * K or V load feeds several fused multiply-adds instead of one (the single
 * row kernels issue a load per FMA and are bound by loads). Each output's
 * operations are those of the single-row kernel: a score's lanes d % 8,
 * each one FMA chain over d in order, the same tree and scale; a P V
 * element's one FMA chain over the keys in order. So the bits do not
 * depend on the grouping. */
#define SCORES_NB 6 /* 6 x 4 zmm accumulators + 6 queries + 1 key pair: 31 registers */
#define ACC_NB 4    /* 4 x 4 zmm accumulators + 4 value vectors */

/* the chunk's K in pairs of rows: rows 2m and 2m + 1 from buf + 2m hd,
 * their d-blocks of eight interleaved (row 2m's block b at 16 b, row 2m +
 * 1's at 16 b + 8), so one 512-bit load holds a block of both; rows n ..
 * npad zero (their scores are dropped). The values are those of rows_f32 */
T_AVX512 static void k_pairs_avx512(const struct llm_attn_job *a, int64_t j0, int64_t n, int64_t npad, float *buf)
{
    int64_t hd = a->hd;
    for (int64_t j = 0; j < npad; j++) {
        float *dst = buf + (j & ~(int64_t)1) * hd + (j & 1) * 8;
        if (j >= n)
            for (int64_t d = 0; d < hd; d += 8)
                _mm256_storeu_ps(dst + 2 * d, _mm256_setzero_ps());
        else if (a->kv_type == LLM_TYPE_F32)
            for (int64_t d = 0; d < hd; d += 8)
                _mm256_storeu_ps(dst + 2 * d, _mm256_loadu_ps((const float *)a->k + (j0 + j) * hd + d));
        else
            for (int64_t d = 0; d < hd; d += 8)
                _mm256_storeu_ps(dst + 2 * d, _mm256_cvtph_ps(_mm_loadu_si128(
                                                  (const __m128i *)((const uint16_t *)a->k + (j0 + j) * hd + d))));
    }
}

/* key i's d-block of eight at pair_row(buf, i, hd) + 2 d */
static inline const float *pair_row(const float *buf, int64_t i, int64_t hd)
{
    return buf + (i & ~(int64_t)1) * hd + (i & 1) * 8;
}

/* dot8_avx2 on the keys i0 .. i0 + 7 of a paired chunk (any i0) */
T_AVX512 static __m256 dot8_pairs_avx512(const float *q, const float *buf, int64_t i0, int64_t hd)
{
    const float *k[8];
    __m256 a[8];
    for (int i = 0; i < 8; i++)
        k[i] = pair_row(buf, i0 + i, hd), a[i] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            a[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[i] + 2 * d), a[i]);
    }
    return tree8_avx2(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
}

/* _mm256_hadd_ps on each 256-bit half: per 128-bit lane [x0 + x1, x2 +
 * x3, y0 + y1, y2 + y3] */
T_AVX512 static inline __m512 hadd_avx512(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xdd));
}

/* tree8_avx2 of the eight keys' accumulators held in pairs (keys 2p, 2p +
 * 1 in a_p's low, high half), the same additions: per key, lanes 0-3 and
 * 4-7 each ((l0 + l1) + (l2 + l3)), then the first plus the second */
T_AVX512 static inline __m256 tree8_pairs_avx512(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    /* 128-bit lanes: [k0 k2 k4 k6] of l0-3, of l4-7, [k1 k3 k5 k7] of l0-3, of l4-7 */
    __m512 g = hadd_avx512(hadd_avx512(a0, a1), hadd_avx512(a2, a3));
    __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(g, g, 0x08), _mm512_shuffle_f32x4(g, g, 0x0d));
    return _mm256_permutexvar_ps(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), _mm512_castps512_ps256(t));
}

/* the scores of nb query rows q[b] against the eight keys from i0 (even)
 * of a paired chunk, as dot8_avx2 computes each, scaled, in out[b]: the
 * accumulator of keys 2p and 2p + 1 holds lanes d % 8 of the first in its
 * low half, of the second in its high half */
T_AVX512 static inline __attribute__((always_inline)) void dot8xn_avx512(const float *const *q, const float *k,
                                                                         int64_t hd, int nb, __m256 scale,
                                                                         __m256 *out)
{
    __m512 a[SCORES_NB][4];
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            a[b][i] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
        __m512 qv[SCORES_NB];
#pragma GCC unroll 8
        for (int b = 0; b < nb; b++)
            qv[b] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q[b] + d));
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512 kv = _mm512_loadu_ps(k + 2 * i * hd + 2 * d);
#pragma GCC unroll 8
            for (int b = 0; b < nb; b++)
                a[b][i] = _mm512_fmadd_ps(qv[b], kv, a[b][i]);
        }
    }
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++) {
        out[b] = _mm256_mul_ps(tree8_pairs_avx512(a[b][0], a[b][1], a[b][2], a[b][3]), scale);
    }
}

/* eight scores (the keys past nr dropped) into s + r */
T_AVX512 static inline void store_scores(float *s, int64_t r, int64_t nr, __m256 o)
{
    if (r + 8 <= nr) {
        _mm256_storeu_ps(s + r, o);
    } else {
        float t[8];
        _mm256_storeu_ps(t, o);
        memcpy(s + r, t, (size_t)(nr - r) * sizeof(float));
    }
}

/* scores_avx2 for nb (1..SCORES_NB) query rows q[b] into s[b], the keys
 * [i0, i0 + nr) of a paired chunk */
T_AVX512 static inline __attribute__((always_inline)) void scores_nb_avx512(const float *const *q, const float *buf,
                                                                            int64_t i0, int64_t hd, int64_t nr,
                                                                            float scale, float *const *s, int nb)
{
    __m256 sv = _mm256_set1_ps(scale), o[SCORES_NB];
    for (int64_t r = 0; r < nr; r += 8) {
        dot8xn_avx512(q, buf + (i0 + r) * hd, hd, nb, sv, o);
        for (int b = 0; b < nb; b++)
            store_scores(s[b], r, nr, o[b]);
    }
}

T_AVX512 static void scores_n_avx512(const float *const *q, const float *buf, int64_t i0, int64_t hd, int64_t nr,
                                     float scale, float *const *s, int nb)
{
    if (i0 & 1) { /* a window's row starting off a pair: key by key from the pairs */
        __m256 sv = _mm256_set1_ps(scale);
        for (int b = 0; b < nb; b++)
            for (int64_t r = 0; r < nr; r += 8)
                store_scores(s[b], r, nr, _mm256_mul_ps(dot8_pairs_avx512(q[b], buf, i0 + r, hd), sv));
        return;
    }
    switch (nb) {
    case 6: scores_nb_avx512(q, buf, i0, hd, nr, scale, s, 6); break;
    case 5: scores_nb_avx512(q, buf, i0, hd, nr, scale, s, 5); break;
    case 4: scores_nb_avx512(q, buf, i0, hd, nr, scale, s, 4); break;
    case 3: scores_nb_avx512(q, buf, i0, hd, nr, scale, s, 3); break;
    case 2: scores_nb_avx512(q, buf, i0, hd, nr, scale, s, 2); break;
    default: scores_nb_avx512(q, buf, i0, hd, nr, scale, s, 1); break;
    }
}

/* accumulate_generic for nb (1..ACC_NB) outputs out[b] with weights p[b],
 * the same value rows */
T_AVX512 static inline __attribute__((always_inline)) void accumulate_nb_avx512(float *const *out,
                                                                                const float *const *p,
                                                                                const float *v, int64_t nr,
                                                                                int64_t hd, int nb)
{
    int64_t d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m512 o[ACC_NB][4];
#pragma GCC unroll 8
        for (int b = 0; b < nb; b++)
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                o[b][i] = _mm512_loadu_ps(out[b] + d + 16 * i);
        const float *vr = v + d;
        for (int64_t r = 0; r < nr; r++, vr += hd) {
            __m512 vv[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                vv[i] = _mm512_loadu_ps(vr + 16 * i);
#pragma GCC unroll 8
            for (int b = 0; b < nb; b++) {
                __m512 pr = _mm512_set1_ps(p[b][r]);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++)
                    o[b][i] = _mm512_fmadd_ps(pr, vv[i], o[b][i]);
            }
        }
#pragma GCC unroll 8
        for (int b = 0; b < nb; b++)
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                _mm512_storeu_ps(out[b] + d + 16 * i, o[b][i]);
    }
    for (int b = 0; d < hd && b < nb; b++)
        accumulate_from_avx512(out[b], p[b], v, nr, hd, d);
}

T_AVX512 static void accumulate_n_avx512(float *const *out, const float *const *p, const float *v, int64_t nr,
                                         int64_t hd, int nb)
{
    switch (nb) {
    case 4: accumulate_nb_avx512(out, p, v, nr, hd, 4); break;
    case 3: accumulate_nb_avx512(out, p, v, nr, hd, 3); break;
    case 2: accumulate_nb_avx512(out, p, v, nr, hd, 2); break;
    default: accumulate_nb_avx512(out, p, v, nr, hd, 1); break;
    }
}
#endif

/* one path's pieces of attention; a path with scores_n / accumulate_n
 * runs groups of up to nb_scores / nb_acc (row, head) outputs that share a
 * span of keys through them, and its single-row scores / accumulate are
 * not used */
struct attn_kernels {
    void (*scores)(const float *q, const float *k, int64_t hd, int64_t nr, float scale, float *s);
    void (*softmax)(float *s, int64_t n, float *sum_out);
    void (*accumulate)(float *out, const float *p, const float *v, int64_t nr, int64_t hd);
    /* K rows [j0, j0 + n) into buf in the layout scores_n reads, zero rows
     * up to npad (even) */
    void (*k_rows)(const struct llm_attn_job *a, int64_t j0, int64_t n, int64_t npad, float *buf);
    /* scores of nb query rows against buf's keys [i0, i0 + nr) */
    void (*scores_n)(const float *const *q, const float *buf, int64_t i0, int64_t hd, int64_t nr, float scale,
                     float *const *s, int nb);
    void (*accumulate_n)(float *const *out, const float *const *p, const float *v, int64_t nr, int64_t hd,
                         int nb);
    int nb_scores, nb_acc;
};

#define GROUP_MAX 8 /* the most outputs a group kernel takes */

/* (row, head) outputs of one chunk gathered while they share a key span */
struct attn_group {
    int n;
    int64_t s, e;        /* their keys [s, e) */
    const float *q[GROUP_MAX];
    float *row[GROUP_MAX]; /* where their scores (weights) start, key s */
    float *out[GROUP_MAX];
};

/* the first key row r sees */
static int64_t row_lo(const struct llm_attn_job *a, int64_t r)
{
    int64_t lo = a->window > 0 ? a->n_kv + r - a->window : 0;
    return lo > 0 ? lo : 0;
}

/* s = c tanh(s / c), as llama.cpp's scale, tanh, scale; one scalar
 * definition for every path */
void llm_softcap(float *s, int64_t n, float c)
{
    float inv = 1.0f / c;
    for (int64_t j = 0; j < n; j++)
        s[j] = tanhf(s[j] * inv) * c;
}

/* the keys [s, e) of row r within the chunk [j0, j0 + nr); none: s >= e */
static void row_span(const struct llm_attn_job *a, int64_t r, int64_t j0, int64_t nr, int64_t *s, int64_t *e)
{
    int64_t lo = row_lo(a, r), n = a->n_kv + r;
    *s = lo > j0 ? lo : j0;
    *e = n < j0 + nr ? n : j0 + nr;
}

/* the scores of group g's outputs against the chunk buf (from key j0) */
static void group_scores(const struct llm_attn_job *a, const struct attn_kernels *kn, struct attn_group *g,
                         const float *buf, int64_t j0)
{
    if (kn->scores_n)
        kn->scores_n(g->q, buf, g->s - j0, a->hd, g->e - g->s, a->scale, g->row, g->n);
    else
        for (int b = 0; b < g->n; b++)
            kn->scores(g->q[b], buf + (g->s - j0) * a->hd, a->hd, g->e - g->s, a->scale, g->row[b]);
    for (int b = 0; a->softcap > 0 && b < g->n; b++)
        llm_softcap(g->row[b], g->e - g->s, a->softcap);
    g->n = 0;
}

/* P V of group g's outputs over the chunk buf (from key j0) */
static void group_accumulate(const struct llm_attn_job *a, const struct attn_kernels *kn, struct attn_group *g,
                             const float *buf, int64_t j0)
{
    const float *v = buf + (g->s - j0) * a->hd;
    if (kn->accumulate_n)
        kn->accumulate_n(g->out, (const float *const *)g->row, v, g->e - g->s, a->hd, g->n);
    else
        for (int b = 0; b < g->n; b++)
            kn->accumulate(g->out[b], g->row[b], v, g->e - g->s, a->hd);
    g->n = 0;
}

/* the scores (pv false) or P V (pv true) of every (row, head) output over
 * the chunk buf of keys [j0, j0 + nr), in groups of consecutive outputs
 * with the same span; sc: the scores, ns floats a row */
static void chunk_groups(const struct llm_attn_job *a, const struct attn_kernels *kn, int64_t j0, int64_t nr,
                         const float *buf, float *sc, int64_t ns, bool pv)
{
    int nb = pv ? (kn->accumulate_n ? kn->nb_acc : 1) : (kn->scores_n ? kn->nb_scores : 1);
    struct attn_group g = {0};
    for (int64_t r = 0; r < a->n_rows; r++) {
        int64_t s, e;
        row_span(a, r, j0, nr, &s, &e);
        for (int64_t h = 0; s < e && h < a->nq; h++) {
            if (g.n && (g.s != s || g.e != e || g.n == nb))
                (pv ? group_accumulate : group_scores)(a, kn, &g, buf, j0);
            g.s = s, g.e = e;
            g.q[g.n] = a->q + r * a->q_stride + h * a->hd;
            g.out[g.n] = a->out + r * a->out_stride + h * a->hd;
            g.row[g.n++] = sc + (r * a->nq + h) * ns + s;
        }
    }
    if (g.n)
        (pv ? group_accumulate : group_scores)(a, kn, &g, buf, j0);
}

/* scores chunk by chunk, softmax per row and head, then P V chunk by
 * chunk: every K and V row converted once into the chunk buffer for all
 * rows and heads; row r takes its own keys [lo_r, n_kv + r), exactly as
 * it would alone. Within a chunk, consecutive (row, head) outputs with the
 * same span go to the kernels together (all of them but the causal edge's
 * and a window's first rows, which have spans of their own) */
static void rows_with(const struct llm_attn_job *a, const struct attn_kernels *kn)
{
    int64_t hd = a->hd, nmax = a->n_kv + a->n_rows - 1, nqr = a->n_rows * a->nq;
    int64_t ns = nmax + (a->sinks != NULL); /* a row's scores: its keys, then the sink */
    size_t sc_floats = ((size_t)(nqr * ns) + 15) / 16 * 16;
    float *sc = a->scratch, *sum = sc + sc_floats, *buf = sum + ((size_t)nqr + 15) / 16 * 16;
    int64_t j_first = row_lo(a, 0); /* lo_r grows with r */
    for (int64_t j0 = j_first; j0 < nmax; j0 += CHUNK) {
        int64_t nr = nmax - j0 < CHUNK ? nmax - j0 : CHUNK, pad = nr;
        for (int64_t r = 0; r < a->n_rows; r++) { /* rows a kernel may read past the last */
            int64_t s, e;
            row_span(a, r, j0, nr, &s, &e);
            if (s < e && s - j0 + (e - s + 7) / 8 * 8 > pad)
                pad = s - j0 + (e - s + 7) / 8 * 8;
        }
        if (kn->k_rows) {
            kn->k_rows(a, j0, nr, (pad + 1) / 2 * 2, buf); /* at most CHUNK + 8 rows */
        } else {
            rows_f32(a, a->k, j0, nr, buf);
            if (pad > nr) /* their scores are dropped */
                memset(buf + nr * hd, 0, (size_t)((pad - nr) * hd) * sizeof(float));
        }
        chunk_groups(a, kn, j0, nr, buf, sc, ns, false);
    }
    for (int64_t r = 0; r < a->n_rows; r++)
        for (int64_t h = 0; h < a->nq; h++) {
            int64_t lo = row_lo(a, r), n = a->n_kv + r - lo;
            float *row = sc + (r * a->nq + h) * ns + lo;
            if (a->sinks) /* the sink after the keys: in the maximum and the sum, in no P V */
                row[n++] = a->sinks[h];
            kn->softmax(row, n, &sum[r * a->nq + h]);
            memset(a->out + r * a->out_stride + h * hd, 0, (size_t)hd * sizeof(float));
        }
    for (int64_t j0 = j_first; j0 < nmax; j0 += CHUNK) {
        int64_t nr = nmax - j0 < CHUNK ? nmax - j0 : CHUNK;
        rows_f32(a, a->v, j0, nr, buf);
        chunk_groups(a, kn, j0, nr, buf, sc, ns, true);
    }
    for (int64_t r = 0; r < a->n_rows; r++)
        for (int64_t h = 0; h < a->nq; h++) {
            float inv = 1.0f / sum[r * a->nq + h], *o = a->out + r * a->out_stride + h * hd;
            for (int64_t d = 0; d < hd; d++)
                o[d] *= inv;
        }
}

void llm_attn_rows(const struct llm_attn_job *a)
{
    static const struct attn_kernels generic = {.scores = scores_generic, .softmax = softmax_generic,
                                                .accumulate = accumulate_generic};
#if X86
    static const struct attn_kernels avx2 = {.scores = scores_avx2, .softmax = softmax_avx2,
                                             .accumulate = accumulate_avx2};
    static const struct attn_kernels avx512 = {.softmax = softmax_avx512, .k_rows = k_pairs_avx512,
                                               .scores_n = scores_n_avx512,
                                               .accumulate_n = accumulate_n_avx512, .nb_scores = SCORES_NB,
                                               .nb_acc = ACC_NB};
    _Static_assert(SCORES_NB <= GROUP_MAX && ACC_NB <= GROUP_MAX, "a group holds a kernel's outputs");
    if (llm_cpu_has_avx512(llm_cpu_features()) && a->hd % 8 == 0) {
        rows_with(a, &avx512);
        return;
    }
    if ((llm_cpu_features() & LLM_CPU_AVX2) && a->hd % 8 == 0) {
        rows_with(a, &avx2);
        return;
    }
#elif defined(__aarch64__)
    static const struct attn_kernels neon = {.scores = llm_attn_scores_neon, .softmax = llm_attn_softmax_neon,
                                             .accumulate = llm_attn_accumulate_neon};
    if ((llm_cpu_features() & LLM_CPU_NEON) && a->hd % 8 == 0) {
        rows_with(a, &neon);
        return;
    }
#endif
    rows_with(a, &generic);
}

static void softmax_dispatch(float *s, int64_t n)
{
#if X86
    if (llm_cpu_features() & LLM_CPU_AVX2) {
        softmax_norm_avx2(s, n);
        return;
    }
#elif defined(__aarch64__)
    if (llm_cpu_features() & LLM_CPU_NEON) {
        llm_attn_softmax_norm_neon(s, n);
        return;
    }
#endif
    softmax_norm_generic(s, n);
}

void llm_softmax(float *s, int64_t n) { softmax_dispatch(s, n); }
