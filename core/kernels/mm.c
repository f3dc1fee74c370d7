/*
 * mm.c - the batched product of packed (quantized) weights with many
 * tokens, shared by every packed type: a group of 8 rows is unpacked once
 * to 16-bit integers per unit (the type's llm_unpack_ops), then multiplied
 * with the I16 activations of all the tokens: vpmaddwd of a pair of
 * elements for the 8 rows against the token's pair, broadcast; each unit's
 * exact integer sum then takes the float steps of quant.h's definition. So
 * every element is computed exactly as the one-token GEMV computes it, in
 * whatever tile it falls.
 *
 * Tiles are 2 groups x 4 tokens (8 integer and 8 float accumulators). A
 * few tokens (a verification pass of speculative decoding, up to the
 * type's gemv_n_max) go through the type's gemv_n where it has one: each block of
 * weights widened once in registers for up to 4 tokens, no unpacking to
 * memory (which costs more than the products for so few tokens). Without
 * one, fewer tokens than MIN_TILED run the type's own GEMV once per token
 * (its rows stay in the cache).
 * Nothing here allocates: the caller gives scratch of
 * llm_mm_packed_scratch(n_in) bytes.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

#define ROWS LLM_PACK_ROWS
#define NG 2        /* groups per tile */
#define NT 4        /* tokens per tile */
#define MIN_TILED 4 /* fewer tokens go through the GEMV */

/* ==== the definition over unpacked units ==== */

void llm_mm_units_ref(const struct llm_unpack_ops *u, int64_t n, const int16_t *w16, const float *S,
                      const float *M, const void *act, size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    int64_t nu = n / u->ul;
    for (int64_t t = 0; t < nt; t++) {
        struct llm_act16 a = llm_act16_view((const uint8_t *)act + (size_t)t * a_stride, n);
        for (int r = 0; r < ROWS; r++) {
            float acc = 0;
            for (int64_t k = 0; k < nu; k++) {
                int32_t isum = 0, asum = 0;
                for (int i = 0; i < u->ul; i++) {
                    int64_t e = k * u->ul + i;
                    isum += w16[((k * u->ul / 2 + i / 2) * ROWS + r) * 2 + i % 2] * a.q[e];
                    asum += a.q[e];
                }
                float da = a.d[k * u->ul / 32];
                acc = fmaf((float)isum, S[k * ROWS + r] * da, acc);
                if (u->has_min)
                    acc = fmaf((float)asum, M[k * ROWS + r] * da, acc);
            }
            y[t * ldy + r] = acc;
        }
    }
}

/* ==== the portable products: every element by its definition ==== */

void llm_mm_gemv_by_ref(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                        const void *a, float *y0, float *y1)
{
    const struct llm_mm_ops *mm = llm_get_mm_ops(w->type);
    for (int64_t r = r0; r < r1; r++)
        y0[r - r0] = mm->dot_ref(w, r, a);
    for (int64_t r = s0; r < s1; r++)
        y1[r - s0] = mm->dot_ref(w, r, a);
}

void llm_mm_gemm_by_ref(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride,
                        int64_t nt, float *y, int64_t ldy, void *scratch)
{
    (void)scratch;
    const struct llm_mm_ops *mm = llm_get_mm_ops(w->type);
    for (int64_t t = 0; t < nt; t++)
        for (int64_t r = r0; r < r1; r++)
            y[t * ldy + r - r0] = mm->dot_ref(w, r, (const uint8_t *)a + (size_t)t * a_stride);
}

void llm_mm_gemv_n_groups(const struct llm_mat *w, int64_t r0, int64_t r1, const void *act, size_t a_stride,
                          int64_t nt, float *y, int64_t ldy, llm_gemv_n_group_fn *group)
{
    for (int64_t base = r0; base < r1; base += ROWS) {
        const uint8_t *g = w->data + (size_t)(base / ROWS) * w->group_bytes;
        int cnt = (int)(r1 - base < ROWS ? r1 - base : ROWS);
        for (int64_t t0 = 0; t0 < nt; t0 += LLM_GEMV_N_TILE) {
            int T = nt - t0 < LLM_GEMV_N_TILE ? (int)(nt - t0) : LLM_GEMV_N_TILE;
            struct llm_act16 a[LLM_GEMV_N_TILE];
            for (int t = 0; t < T; t++)
                a[t] = llm_act16_view((const uint8_t *)act + (size_t)(t0 + t) * a_stride, w->n_in);
            float out[ROWS * LLM_GEMV_N_TILE];
            group(g, w->n_in, T, a, out);
            for (int t = 0; t < T; t++)
                memcpy(y + (t0 + t) * ldy + (base - r0), out + ROWS * t, (size_t)cnt * sizeof(float));
        }
    }
}

/* ==== AVX2 ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

static inline int32_t ld32s(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/*
 * ng (<= NG) unpacked groups (w16 + j * wstride, S + j * sstride, ...)
 * against nt tokens: y[t * ldy + 8 j + r]. UL and MIN are constants in each
 * caller, so the loops below unroll for them.
 */
static inline __attribute__((always_inline)) void units_avx2(int UL, bool MIN, int64_t n, int ng,
                                                             const int16_t *w16, size_t wstride, const float *S,
                                                             const float *M, size_t sstride, const void *act,
                                                             size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    int64_t nu = n / UL;
    for (int64_t t0 = 0; t0 < nt; t0 += NT) {
        int tn = nt - t0 < NT ? (int)(nt - t0) : NT;
        struct llm_act16 a[NT];
        for (int t = 0; t < NT; t++)
            a[t] = llm_act16_view((const uint8_t *)act + (size_t)(t0 + (t < tn ? t : 0)) * a_stride, n);
        __m256 acc[NG][NT];
        for (int j = 0; j < NG; j++)
            for (int t = 0; t < NT; t++)
                acc[j][t] = _mm256_setzero_ps();
        for (int64_t k = 0; k < nu; k++) {
            __m256i is[NG][NT];
            for (int j = 0; j < NG; j++)
                for (int t = 0; t < NT; t++)
                    is[j][t] = _mm256_setzero_si256();
            const int16_t *wk = w16 + k * UL * ROWS;
#pragma GCC unroll 2
            for (int p = 0; p < UL / 2; p++) {
                __m256i wv[NG];
                for (int j = 0; j < NG; j++)
                    wv[j] = _mm256_loadu_si256((const __m256i *)(wk + (size_t)j * wstride + 16 * p));
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    __m256i av = _mm256_set1_epi32(ld32s(a[t].q + k * UL + 2 * p));
#pragma GCC unroll 2
                    for (int j = 0; j < NG; j++)
                        is[j][t] = _mm256_add_epi32(is[j][t], _mm256_madd_epi16(wv[j], av));
                }
            }
            for (int j = 0; j < ng; j++) {
                __m256 s = _mm256_loadu_ps(S + (size_t)j * sstride + k * ROWS);
                __m256 m = MIN ? _mm256_loadu_ps(M + (size_t)j * sstride + k * ROWS) : s;
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    __m256 da = _mm256_set1_ps(a[t].d[k * UL / 32]);
                    acc[j][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[j][t]), _mm256_mul_ps(s, da), acc[j][t]);
                    if (MIN) {
                        int32_t as = UL == 16 ? a[t].s16[k] : a[t].s16[2 * k] + a[t].s16[2 * k + 1];
                        acc[j][t] = _mm256_fmadd_ps(_mm256_set1_ps((float)as), _mm256_mul_ps(m, da), acc[j][t]);
                    }
                }
            }
        }
        for (int j = 0; j < ng; j++)
            for (int t = 0; t < tn; t++)
                _mm256_storeu_ps(y + (t0 + t) * ldy + 8 * j, acc[j][t]);
    }
}

static void units_avx2_dispatch(const struct llm_unpack_ops *u, int64_t n, int ng, const int16_t *w16,
                                size_t wstride, const float *S, const float *M, size_t sstride, const void *act,
                                size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    if (u->ul == 32 && !u->has_min)
        units_avx2(32, false, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else if (u->ul == 32)
        units_avx2(32, true, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else if (!u->has_min)
        units_avx2(16, false, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else
        units_avx2(16, true, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
}

#pragma GCC pop_options

/* ==== AVX-512 (F, BW, VL, DQ and VNNI) ====
 * The same tile as AVX2 with both groups in one register: the low 256 bits
 * group 0's pair p (8 rows), the high group 1's, against the token's pair
 * broadcast, vpdpwssd; the float steps on 16 lanes are AVX2's lane for
 * lane. 8 tokens per tile. */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

#define NT5 8 /* tokens per AVX-512 tile */

static inline __attribute__((always_inline)) __m512 f8x2(const float *a, const float *b)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
}

/* one tile: tokens [t0, t0 + tn) of nt, in a tile of NTT (tn <= NTT; the
 * tile's other lanes compute token t0 again, unstored) */
static inline __attribute__((always_inline)) void units_avx512_tile(int UL, bool MIN, int NTT, int64_t n, int ng,
                                                                    const int16_t *w16, size_t wstride,
                                                                    const float *S, const float *M, size_t sstride,
                                                                    const void *act, size_t a_stride, int64_t t0,
                                                                    int tn, float *y, int64_t ldy)
{
    int64_t nu = n / UL;
    size_t w1 = ng > 1 ? wstride : 0, s1 = ng > 1 ? sstride : 0; /* one group: its own twice */
    struct llm_act16 a[NT5];
    for (int t = 0; t < NTT; t++)
        a[t] = llm_act16_view((const uint8_t *)act + (size_t)(t0 + (t < tn ? t : 0)) * a_stride, n);
    __m512 acc[NT5];
    for (int t = 0; t < NTT; t++)
        acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nu; k++) {
        __m512i is[NT5];
        for (int t = 0; t < NTT; t++)
            is[t] = _mm512_setzero_si512();
        const int16_t *wk = w16 + k * UL * ROWS;
#pragma GCC unroll 2
        for (int p = 0; p < UL / 2; p++) {
            __m512i wv = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(wk + 16 * p))),
                _mm256_loadu_si256((const __m256i *)(wk + w1 + 16 * p)), 1);
#pragma GCC unroll 8
            for (int t = 0; t < NTT; t++)
                is[t] = _mm512_dpwssd_epi32(is[t], wv, _mm512_set1_epi32(ld32s(a[t].q + k * UL + 2 * p)));
        }
        __m512 s = f8x2(S + k * ROWS, S + s1 + k * ROWS);
        __m512 m = MIN ? f8x2(M + k * ROWS, M + s1 + k * ROWS) : s;
#pragma GCC unroll 8
        for (int t = 0; t < NTT; t++) {
            __m512 da = _mm512_set1_ps(a[t].d[k * UL / 32]);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), _mm512_mul_ps(s, da), acc[t]);
            if (MIN) {
                int32_t as = UL == 16 ? a[t].s16[k] : a[t].s16[2 * k] + a[t].s16[2 * k + 1];
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps((float)as), _mm512_mul_ps(m, da), acc[t]);
            }
        }
    }
    for (int t = 0; t < tn; t++) {
        if (ng > 1)
            _mm512_storeu_ps(y + (t0 + t) * ldy, acc[t]);
        else
            _mm256_storeu_ps(y + (t0 + t) * ldy, _mm512_castps512_ps256(acc[t]));
    }
}

/* tiles of 8 tokens; the last few in a tile of 4 or 2, not 8 (a chat
 * turn's 12 or 25 tokens computed 16 or 32 times before). Each token's
 * lanes are its own, so its bits do not depend on the tile it falls in. */
static inline __attribute__((always_inline)) void units_avx512(int UL, bool MIN, int64_t n, int ng,
                                                               const int16_t *w16, size_t wstride, const float *S,
                                                               const float *M, size_t sstride, const void *act,
                                                               size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    for (int64_t t0 = 0; t0 < nt;) {
        int64_t left = nt - t0;
        if (left > 4) {
            int tn = left < NT5 ? (int)left : NT5;
            units_avx512_tile(UL, MIN, NT5, n, ng, w16, wstride, S, M, sstride, act, a_stride, t0, tn, y, ldy);
            t0 += tn;
        } else if (left > 2) {
            units_avx512_tile(UL, MIN, 4, n, ng, w16, wstride, S, M, sstride, act, a_stride, t0, (int)left, y, ldy);
            t0 += left;
        } else {
            units_avx512_tile(UL, MIN, 2, n, ng, w16, wstride, S, M, sstride, act, a_stride, t0, (int)left, y, ldy);
            t0 += left;
        }
    }
}

static void units_avx512_dispatch(const struct llm_unpack_ops *u, int64_t n, int ng, const int16_t *w16,
                                  size_t wstride, const float *S, const float *M, size_t sstride, const void *act,
                                  size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    if (u->ul == 32 && !u->has_min)
        units_avx512(32, false, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else if (u->ul == 32)
        units_avx512(32, true, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else if (!u->has_min)
        units_avx512(16, false, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else
        units_avx512(16, true, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
}

#pragma GCC pop_options
#endif

/* the portable tile: the reference, group by group */
static void units_ref_dispatch(const struct llm_unpack_ops *u, int64_t n, int ng, const int16_t *w16,
                               size_t wstride, const float *S, const float *M, size_t sstride, const void *act,
                               size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    for (int j = 0; j < ng; j++)
        llm_mm_units_ref(u, n, w16 + (size_t)j * wstride, S + (size_t)j * sstride,
                         M ? M + (size_t)j * sstride : NULL, act, a_stride, nt, y + 8 * j, ldy);
}

static void (*units_fn)(const struct llm_unpack_ops *, int64_t, int, const int16_t *, size_t, const float *,
                        const float *, size_t, const void *, size_t, int64_t, float *, int64_t) = units_ref_dispatch;

void llm_mm_init(unsigned cpu)
{
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2)
        units_fn = units_avx2_dispatch;
    if (llm_cpu_has_avx512(cpu))
        units_fn = units_avx512_dispatch;
#elif defined(__aarch64__)
    units_fn = cpu & LLM_CPU_NEON ? llm_mm_units_neon : units_ref_dispatch;
#else
    (void)cpu;
#endif
}

/* ==== the driver ==== */

/* scratch: NG groups' w16 (8 n int16 each), S and M (n / 16 * 8 floats
 * each), and an output tile of NT tokens x NG groups for partial groups */
size_t llm_mm_packed_scratch(int64_t n)
{
    return (size_t)NG * ((size_t)n * 16 + (size_t)n * 4) + 64 * sizeof(float) + 256;
}

void llm_mm_packed_gemm(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride,
                        int64_t nt, float *y, int64_t ldy, void *scratch)
{
    const struct llm_unpack_ops *u = llm_get_unpack_ops(w->type);
    if (u->gemv_n && nt <= u->gemv_n_max) {
        u->gemv_n(w, r0, r1, a, a_stride, nt, y, ldy);
        return;
    }
    if (nt < MIN_TILED) {
        for (int64_t t = 0; t < nt; t++)
            u->gemv(w, r0, r1, 0, 0, (const uint8_t *)a + (size_t)t * a_stride, y + t * ldy, NULL);
        return;
    }
    int64_t n = w->n_in;
    size_t wstride = (size_t)n * ROWS, sstride = (size_t)(n / 16) * ROWS;
    int16_t *w16 = scratch;
    float *S = (float *)(w16 + NG * wstride), *M = S + NG * sstride;
    for (int64_t g0 = r0; g0 < r1; g0 += NG * ROWS) {
        int ng = (int)((r1 - g0 + ROWS - 1) / ROWS < NG ? (r1 - g0 + ROWS - 1) / ROWS : NG);
        for (int j = 0; j < ng; j++)
            u->unpack(w->data + (size_t)((g0 + j * ROWS) / ROWS) * w->group_bytes, n, w16 + j * wstride,
                      S + j * sstride, M + j * sstride);
        if (g0 + ng * ROWS <= r1) {
            units_fn(u, n, ng, w16, wstride, S, u->has_min ? M : NULL, sstride, a, a_stride, nt, y + (g0 - r0), ldy);
            continue;
        }
        /* the last groups reach past r1: through a small tile, rows < r1 kept */
        float tmp[NT * NG * ROWS];
        for (int64_t t0 = 0; t0 < nt; t0 += NT) {
            int64_t tn = nt - t0 < NT ? nt - t0 : NT;
            units_fn(u, n, ng, w16, wstride, S, u->has_min ? M : NULL, sstride,
                     (const uint8_t *)a + (size_t)t0 * a_stride, a_stride, tn, tmp, NG * ROWS);
            for (int64_t t = 0; t < tn; t++)
                memcpy(y + (t0 + t) * ldy + (g0 - r0), tmp + t * NG * ROWS, (size_t)(r1 - g0) * sizeof(float));
        }
    }
}
