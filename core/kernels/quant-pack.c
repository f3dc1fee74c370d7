/*
 * quant-pack.c - the packed forms of the 32-element types Q8_0, Q4_0,
 * Q5_0, Q4_1 and Q5_1 and their matrix products against I16 activations
 * (the definition is in quant.h: one unit per block, S = d, M = m).
 *
 * Why packed: a GEMV on rows stored one after another spends most of its
 * instructions per block on things other than multiplying (the activation
 * loaded again for every row, each f16 scale converted alone, lanes
 * widened and summed horizontally). With the rows of a matrix in groups of
 * 8, block by block, one instruction works on 8 rows, 8 scales convert at
 * once, and each row's result lands in its own lane of one register.
 *
 * A group of 8 rows stores, for each block b of 32 elements, at
 * b * (8 * block bytes), so a group has the size of its rows:
 *   Q8_0  u16 d[8]; i8 w[16][8][2]    pair p, row r: elements 2p, 2p + 1
 *   Q4_0  u16 d[8]; u8 qs[4][32]      chunk c, byte 4r + e: the row's qs[4c + e]
 *                                     (low nibble element 4c + e, high 16 + 4c + e)
 *   Q5_0  u16 d[8]; u8 fifth[32]; u8 qs[4][32]
 *   Q4_1  u16 d[8]; u16 m[8]; u8 qs[4][32]
 *   Q5_1  u16 d[8]; u16 m[8]; u8 fifth[32]; u8 qs[4][32]
 * where fifth byte 4r + e holds the fifth bits of row r: bit c of element
 * 4c + e and bit 4 + c of element 16 + 4c + e (c < 4), so that one shift
 * by 4 - c (or c) and a mask put the bit where a byte of chunk c needs it.
 *
 * The AVX2 GEMV forms each block's exact integer sums for the 8 rows
 * (Q8_0: the bytes widened to 16 bits, vpmaddwd against pairs of
 * activations; 4- and 5-bit fields: vpmaddubsw against the activations'
 * low 7 bits and high 8 bits separately, their 16-bit sums bounded by
 * 2 * 127 * 31 per step, summed two chunks at a time), then the float steps
 * of the definition on 8 lanes. Two groups (from the two halves of a
 * matrix) are read block by block together: two streams of weights keep
 * more DRAM reads in flight. The batched product unpacks groups to 16-bit
 * integers and multiplies them for many tokens at once (mm.c).
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

#define QK 32
#define ROWS LLM_PACK_ROWS

enum { Q8 = 0, Q4 = 1, Q5 = 2, Q41 = 3, Q51 = 4 };

static size_t block_bytes(int kind)
{
    static const size_t b[] = {34, 18, 22, 20, 24};
    return b[kind];
}
static size_t gbb(int kind) { return ROWS * block_bytes(kind); }
static bool has_min(int kind) { return kind == Q41 || kind == Q51; }
static bool has_fifth(int kind) { return kind == Q5 || kind == Q51; }
/* offsets in a group block: of the mins, of the fifth bits, of the quants */
static size_t m_off(void) { return 16; }
static size_t fifth_off(int kind) { return kind == Q51 ? 32 : 16; }
static size_t qs_off(int kind)
{
    static const size_t o[] = {16, 16, 48, 32, 64};
    return o[kind];
}
/* in a stored block: where its qs and qh start */
static size_t src_qs(int kind)
{
    static const size_t o[] = {2, 2, 6, 4, 8};
    return o[kind];
}
static size_t src_qh(int kind) { return kind == Q51 ? 4 : 2; }

static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

__attribute__((unused)) static int32_t ld32s(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ==== packing ==== */

static void pack_kind(int kind, const void *rows, size_t stride, int64_t n_rows, int64_t n, void *dst)
{
    const uint8_t *src = rows;
    uint8_t *out = dst;
    size_t bb = block_bytes(kind);
    memset(dst, 0, (size_t)(n / QK) * gbb(kind));
    for (int64_t b = 0; b < n / QK; b++, out += gbb(kind))
        for (int r = 0; r < n_rows; r++) {
            const uint8_t *blk = src + (size_t)r * stride + (size_t)b * bb;
            memcpy(out + 2 * r, blk, 2);
            if (has_min(kind))
                memcpy(out + m_off() + 2 * r, blk + 2, 2);
            if (kind == Q8) {
                for (int p = 0; p < 16; p++)
                    memcpy(out + 16 + 16 * p + 2 * r, blk + 2 + 2 * p, 2);
                continue;
            }
            for (int c = 0; c < 4; c++)
                memcpy(out + qs_off(kind) + 32 * c + 4 * r, blk + src_qs(kind) + 4 * c, 4);
            if (has_fifth(kind)) {
                uint32_t qh;
                memcpy(&qh, blk + src_qh(kind), 4);
                for (int c = 0; c < 4; c++)
                    for (int e = 0; e < 4; e++)
                        out[fifth_off(kind) + 4 * r + e] |=
                            (uint8_t)((((qh >> (4 * c + e)) & 1) << c) | (((qh >> (16 + 4 * c + e)) & 1) << (4 + c)));
            }
        }
}

/* ==== the scalar definition ==== */

/* v of element i of row r in a group block (quant.h: the field minus 8 or
 * 16 for the _0 types) */
static int value(int kind, const uint8_t *gb, int r, int i)
{
    if (kind == Q8)
        return (int8_t)gb[16 + 16 * (i / 2) + 2 * r + i % 2];
    int c = (i % 16) / 4, e = i % 4, hi = i >= 16;
    uint8_t byte = gb[qs_off(kind) + 32 * c + 4 * r + e];
    int f = hi ? byte >> 4 : byte & 15;
    if (has_fifth(kind))
        f |= ((gb[fifth_off(kind) + 4 * r + e] >> (c + 4 * hi)) & 1) << 4;
    return kind == Q4 ? f - 8 : kind == Q5 ? f - 16 : f;
}

static void row_to_float(int kind, const void *group, int r, int64_t n, float *y)
{
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = (const uint8_t *)group + (size_t)b * gbb(kind);
        float d = llm_fp16_to_fp32(ld16(gb + 2 * r));
        float m = has_min(kind) ? llm_fp16_to_fp32(ld16(gb + m_off() + 2 * r)) : 0;
        for (int i = 0; i < QK; i++) {
            float x = (float)value(kind, gb, r, i) * d;
            y[b * QK + i] = has_min(kind) ? x + m : x;
        }
    }
}

static float dot_ref(int kind, const struct llm_mat *w, int64_t r, const void *act)
{
    int64_t n = w->n_in;
    const uint8_t *g = w->data + (size_t)(r / ROWS) * w->group_bytes;
    int rr = (int)(r % ROWS);
    struct llm_act16 a = llm_act16_view(act, n);
    float acc = 0;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = g + (size_t)b * gbb(kind);
        int32_t isum = 0;
        for (int i = 0; i < QK; i++)
            isum += value(kind, gb, rr, i) * a.q[b * QK + i];
        acc = fmaf((float)isum, llm_fp16_to_fp32(ld16(gb + 2 * rr)) * a.d[b], acc);
        if (has_min(kind)) {
            int32_t asum = (int32_t)((uint32_t)a.s16[2 * b] + (uint32_t)a.s16[2 * b + 1]);
            acc = fmaf((float)asum, llm_fp16_to_fp32(ld16(gb + m_off() + 2 * rr)) * a.d[b], acc);
        }
    }
    return acc;
}

static void unpack_ref(int kind, const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = (const uint8_t *)group + (size_t)b * gbb(kind);
        for (int r = 0; r < ROWS; r++) {
            S[b * ROWS + r] = llm_fp16_to_fp32(ld16(gb + 2 * r));
            if (has_min(kind))
                M[b * ROWS + r] = llm_fp16_to_fp32(ld16(gb + m_off() + 2 * r));
            for (int i = 0; i < QK; i++)
                w16[((b * 16 + i / 2) * ROWS + r) * 2 + i % 2] = (int16_t)value(kind, gb, r, i);
        }
    }
}

/* ==== AVX2 ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#define TN LLM_GEMV_N_TILE /* gemv_n: tokens per tile */
/* the loops over a tile's tokens, unrolled (T is a constant in each
 * caller) so that their vectors stay in registers */
#define FOR_T(t, T) _Pragma("GCC unroll 4") for (int t = 0; t < (T); t++)

/* the 8 rows' exact sums of v * q over one Q8_0 block, for T tokens (q[t]:
 * token t's block): each pair of weights widened once for all of them */
static inline __attribute__((always_inline)) void isum_q8(int T, const uint8_t *gb, const int16_t *const *q, __m256i *out)
{
    __m256i s0[TN], s1[TN];
    FOR_T(t, T)
        s0[t] = s1[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int p = 0; p < 16; p += 2) {
        __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(gb + 16 + 16 * p)));
        __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(gb + 32 + 16 * p)));
        FOR_T(t, T) {
            s0[t] = _mm256_add_epi32(s0[t], _mm256_madd_epi16(w0, _mm256_set1_epi32(ld32s(q[t] + 2 * p))));
            s1[t] = _mm256_add_epi32(s1[t], _mm256_madd_epi16(w1, _mm256_set1_epi32(ld32s(q[t] + 2 * p + 2))));
        }
    }
    FOR_T(t, T)
        out[t] = _mm256_add_epi32(s0[t], s1[t]);
}

/* the fields (0..31) of chunk c: *L elements 4c + e, *H elements 16 + 4c + e, byte 4r + e */
static inline __attribute__((always_inline)) void fields(int kind, const uint8_t *gb, int c, __m256i fifth, __m256i *L, __m256i *H)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i raw = _mm256_loadu_si256((const __m256i *)(gb + qs_off(kind) + 32 * c));
    *L = _mm256_and_si256(raw, m4);
    *H = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if (has_fifth(kind)) {
        /* bit c of each byte to bit 4 (shifts within 16-bit lanes move no
         * other byte's bit to bit 4 for these distances), and bit 4 + c */
        const __m256i b4 = _mm256_set1_epi8(0x10);
        __m256i fl = c == 0 ? _mm256_slli_epi16(fifth, 4) : c == 1 ? _mm256_slli_epi16(fifth, 3)
                   : c == 2 ? _mm256_slli_epi16(fifth, 2) : _mm256_slli_epi16(fifth, 1);
        __m256i fh = c == 0 ? fifth : c == 1 ? _mm256_srli_epi16(fifth, 1)
                   : c == 2 ? _mm256_srli_epi16(fifth, 2) : _mm256_srli_epi16(fifth, 3);
        *L = _mm256_or_si256(*L, _mm256_and_si256(fl, b4));
        *H = _mm256_or_si256(*H, _mm256_and_si256(fh, b4));
    }
}

/* the 8 rows' exact sums of field * q over one block of a nibble type,
 * for T tokens (lo[t], hi[t]: token t's block): q = 128 hi + lo, each half
 * through vpmaddubsw (|16-bit sum| <= 2 * 2 * 127 * 31 per chunk, so two
 * chunks fit), then to 32 bits; the fields formed once for all tokens */
static inline __attribute__((always_inline)) void fsum_nib(int kind, int T, const uint8_t *gb, const uint8_t *const *lo,
                                                           const int8_t *const *hi, __m256i *out)
{
    const __m256i ones = _mm256_set1_epi16(1), s128 = _mm256_set1_epi16(128);
    __m256i fifth = has_fifth(kind) ? _mm256_loadu_si256((const __m256i *)(gb + fifth_off(kind)))
                                    : _mm256_setzero_si256();
    __m256i slo[TN], shi[TN];
    FOR_T(t, T)
        slo[t] = shi[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int c = 0; c < 4; c += 2) {
        __m256i plo[TN], phi[TN];
        FOR_T(t, T)
            plo[t] = phi[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int k = c; k < c + 2; k++) {
            __m256i L, H;
            fields(kind, gb, k, fifth, &L, &H);
            FOR_T(t, T) {
                __m256i aL = _mm256_set1_epi32(ld32s(lo[t] + 4 * k)), aH = _mm256_set1_epi32(ld32s(lo[t] + 16 + 4 * k));
                __m256i hL = _mm256_set1_epi32(ld32s(hi[t] + 4 * k)), hH = _mm256_set1_epi32(ld32s(hi[t] + 16 + 4 * k));
                plo[t] = _mm256_add_epi16(plo[t], _mm256_add_epi16(_mm256_maddubs_epi16(aL, L), _mm256_maddubs_epi16(aH, H)));
                phi[t] = _mm256_add_epi16(phi[t], _mm256_add_epi16(_mm256_maddubs_epi16(L, hL), _mm256_maddubs_epi16(H, hH)));
            }
        }
        FOR_T(t, T) {
            slo[t] = _mm256_add_epi32(slo[t], _mm256_madd_epi16(plo[t], ones));
            shi[t] = _mm256_add_epi32(shi[t], _mm256_madd_epi16(phi[t], s128));
        }
    }
    FOR_T(t, T)
        out[t] = _mm256_add_epi32(slo[t], shi[t]);
}

/* one block of a group for T tokens: acc[t] with the block's steps of the
 * definition for token t (a[t]) */
static inline __attribute__((always_inline)) void block_step_n(int kind, int T, const uint8_t *gb, const struct llm_act16 *a,
                                                               int64_t b, __m256 *acc)
{
    __m256i isum[TN];
    if (kind == Q8) {
        const int16_t *q[TN];
        FOR_T(t, T)
            q[t] = a[t].q + b * QK;
        isum_q8(T, gb, q, isum);
    } else {
        const uint8_t *lo[TN];
        const int8_t *hi[TN];
        FOR_T(t, T)
            lo[t] = a[t].lo + b * QK, hi[t] = a[t].hi + b * QK;
        fsum_nib(kind, T, gb, lo, hi, isum);
    }
    __m256 sc = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb));
    __m256 mc = has_min(kind) ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + m_off()))) : sc;
    FOR_T(t, T) {
        __m256 da = _mm256_set1_ps(a[t].d[b]);
        /* wrapping: a stale thread may read an activation being rewritten (pool.h) */
        int32_t asum = (int32_t)((uint32_t)a[t].s16[2 * b] + (uint32_t)a[t].s16[2 * b + 1]);
        if (kind == Q4 || kind == Q5)
            isum[t] = _mm256_sub_epi32(isum[t], _mm256_set1_epi32((int32_t)((kind == Q4 ? 8u : 16u) * (uint32_t)asum)));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(sc, da), acc[t]);
        if (has_min(kind))
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps((float)asum), _mm256_mul_ps(mc, da), acc[t]);
    }
}

/* one block of a group: acc with the block's steps of the definition */
static inline __attribute__((always_inline)) __m256 block_step(int kind, const uint8_t *gb, const struct llm_act16 *a, int64_t b, __m256 acc)
{
    block_step_n(kind, 1, gb, a, b, &acc);
    return acc;
}

/* the 8 results of group g0 (and of g1 if not NULL), block by block */
static inline __attribute__((always_inline)) void dot_groups(int kind, int64_t n, const uint8_t *g0, const uint8_t *g1, const struct llm_act16 *a,
                              float *y0, float *y1)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    for (int64_t b = 0; b < n / QK; b++) {
        acc0 = block_step(kind, g0 + (size_t)b * gbb(kind), a, b, acc0);
        if (g1)
            acc1 = block_step(kind, g1 + (size_t)b * gbb(kind), a, b, acc1);
    }
    _mm256_storeu_ps(y0, acc0);
    if (g1)
        _mm256_storeu_ps(y1, acc1);
}

/* y[r] for the rows of [r0, r1) and [s0, s1), groups of the two ranges in pairs */
static inline __attribute__((always_inline)) void gemv_kind(int kind, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                             const void *act, float *y0, float *y1)
{
    struct llm_act16 a = llm_act16_view(act, w->n_in);
    int64_t nr = (r1 - r0 + ROWS - 1) / ROWS, ns = s1 > s0 ? (s1 - s0 + ROWS - 1) / ROWS : 0;
    for (int64_t i = 0; i < (nr > ns ? nr : ns); i++) {
        int64_t ra = r0 + i * ROWS, sa = s0 + i * ROWS;
        bool two = i < nr && i < ns;
        const uint8_t *g0 = w->data + (size_t)((i < nr ? ra : sa) / ROWS) * w->group_bytes;
        const uint8_t *g1 = two ? w->data + (size_t)(sa / ROWS) * w->group_bytes : NULL;
        float out0[ROWS], out1[ROWS];
        dot_groups(kind, w->n_in, g0, g1, &a, out0, out1);
        int64_t base0 = i < nr ? ra : sa, end0 = i < nr ? r1 : s1;
        float *d0 = i < nr ? y0 + (ra - r0) : y1 + (sa - s0);
        for (int r = 0; r < ROWS && base0 + r < end0; r++)
            d0[r] = out0[r];
        for (int r = 0; two && r < ROWS && sa + r < s1; r++)
            y1[sa - s0 + r] = out1[r];
    }
}

/* gemv_n: a group's 8 results for T tokens, block by block */
static inline __attribute__((always_inline)) void dot_group_n(int kind, int T, int64_t n, const uint8_t *g,
                                                              const struct llm_act16 *a, float *out)
{
    __m256 acc[TN];
    FOR_T(t, T)
        acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++)
        block_step_n(kind, T, g + (size_t)b * gbb(kind), a, b, acc);
    FOR_T(t, T)
        _mm256_storeu_ps(out + ROWS * t, acc[t]);
}

/* gemv_n's group step (llm_mm_gemv_n_groups): T a constant in each call */
static inline __attribute__((always_inline)) void group_n(int kind, const uint8_t *g, int64_t n, int T,
                                                          const struct llm_act16 *a, float *out)
{
    if (T == 4)
        dot_group_n(kind, 4, n, g, a, out);
    else if (T == 3)
        dot_group_n(kind, 3, n, g, a, out);
    else if (T == 2)
        dot_group_n(kind, 2, n, g, a, out);
    else
        dot_group_n(kind, 1, n, g, a, out);
}

/* a block's 16-bit values v for pairs p, 8 rows: w16[(p * 8 + r) * 2 + j] */
static inline __attribute__((always_inline)) void unpack_block(int kind, const uint8_t *gb, int16_t *w16)
{
    if (kind == Q8) {
        for (int p = 0; p < 16; p++)
            _mm256_storeu_si256((__m256i *)(w16 + 16 * p),
                                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(gb + 16 + 16 * p))));
        return;
    }
    /* chunk c, 16-bit word 2r + k (k < 2) holds elements 4c + 2k, +1 of row r:
     * even words are pair 2c, odd words pair 2c + 1 */
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m256i off = _mm256_set1_epi8((char)(kind == Q4 ? 8 : kind == Q5 ? 16 : 0));
    __m256i fifth = has_fifth(kind) ? _mm256_loadu_si256((const __m256i *)(gb + fifth_off(kind)))
                                    : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i F[2];
        fields(kind, gb, c, fifth, &F[0], &F[1]);
        for (int h = 0; h < 2; h++) { /* low fields: pairs 2c, 2c+1; high: 8 + 2c, 9 + 2c */
            __m256i v = _mm256_sub_epi8(F[h], off);
            v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), 0xd8);
            int p = 8 * h + 2 * c;
            _mm256_storeu_si256((__m256i *)(w16 + 16 * p), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
            _mm256_storeu_si256((__m256i *)(w16 + 16 * (p + 1)), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
        }
    }
}

/* how far ahead of the block it unpacks the stream of groups is
 * prefetched: a short prefill (the turn of a chat, 10-50 tokens) reads
 * every weight once through here, and the hardware prefetcher stops at
 * each 4 KiB page of the mapped cache file */
#define UNPACK_PF 2048

static inline __attribute__((always_inline)) void unpack_kind(int kind, const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = (const uint8_t *)group + (size_t)b * gbb(kind);
        for (size_t o = 0; o < gbb(kind); o += 64)
            _mm_prefetch((const char *)(gb + UNPACK_PF + o), _MM_HINT_T0);
        _mm256_storeu_ps(S + b * ROWS, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb)));
        if (has_min(kind))
            _mm256_storeu_ps(M + b * ROWS, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + m_off()))));
        unpack_block(kind, gb, w16 + b * 16 * ROWS * 2);
    }
}

#define AVX2_KIND(NAME, KIND)                                                                      \
    LLM_OP_GEMV(NAME##_gemv_avx2, gemv_kind, KIND)                                                 \
    LLM_OP_UNPACK(NAME##_unpack_avx2, unpack_kind, KIND)                                           \
    LLM_OP_GEMV_N(NAME##_gemv_n_avx2, NAME##_group_n_avx2, group_n, KIND)
AVX2_KIND(q8_0, Q8)
AVX2_KIND(q4_0, Q4)
AVX2_KIND(q5_0, Q5)
AVX2_KIND(q4_1, Q41)
AVX2_KIND(q5_1, Q51)

#pragma GCC pop_options

/* ==== AVX-512 (F, BW, VL, DQ and VNNI) ====
 *
 * The same integer sums, formed 512 bits at a time: one register holds two
 * chunks (or two pairs) of one group, the low 256 bits the first, the high
 * the second, against the matching activations broadcast into each half
 * (vpermd of the block's activation vector); vpdpwssd (Q8_0, 16-bit pairs)
 * and vpdpbusd (4- and 5-bit fields: unsigned field bytes times the signed
 * activation bytes lo and hi, four at a time into 32 bits) add them
 * without the 16-bit intermediate sums of AVX2, exactly. At the end of a
 * block each group's two halves are added (exact integers) and two groups
 * share one 16-lane register for the float steps, which are the AVX2
 * kernel's, lane for lane: so the bits are the same. Four groups (the two
 * row ranges' groups, two at a time) are read together, each stream
 * prefetched PF_AHEAD bytes ahead.
 */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

#ifndef PF_AHEAD
#define PF_AHEAD 1536
#endif
#define AI inline __attribute__((always_inline))

/* dwords m and m + 1 of v, each broadcast over 8 lanes: [m x 8 | m+1 x 8] */
static AI __m512i bc2(__m512i v, int m)
{
    const __m512i half = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_epi32(_mm512_add_epi32(half, _mm512_set1_epi32(m)), v);
}

/* [a.lo + a.hi | b.lo + b.hi] (256-bit halves): two groups' 8 sums each */
static AI __m512i fold2(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xee));
}

/* 8 f16 at a, then 8 at b, as 16 floats */
static AI __m512 ph16(const uint8_t *a, const uint8_t *b)
{
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                        _mm_loadu_si128((const __m128i *)b), 1);
    return _mm512_cvtph_ps(v);
}

/* 16-bit shift counts: s in the low 256 bits, t in the high */
static AI __m512i cnt2(int s, int t)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)s)), _mm256_set1_epi16((short)t), 1);
}

/* one group's block sums, 8 rows twice (pairs or chunks split over the
 * halves), for T tokens (A[t], H[t]: token t's vectors): the weights
 * widened (or their fields formed) once for all of them */
static AI void isum512(int kind, int T, const uint8_t *gb, const __m512i (*A)[8], const __m512i (*H)[4], __m512i *out)
{
    if (kind == Q8) { /* A[t][k]: pairs 2k, 2k + 1 */
        __m512i s0[TN], s1[TN];
        FOR_T(t, T)
            s0[t] = s1[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int k = 0; k < 8; k += 2) {
            __m512i w0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(gb + 16 + 32 * k)));
            __m512i w1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(gb + 48 + 32 * k)));
            FOR_T(t, T) {
                s0[t] = _mm512_dpwssd_epi32(s0[t], w0, A[t][k]);
                s1[t] = _mm512_dpwssd_epi32(s1[t], w1, A[t][k + 1]);
            }
        }
        FOR_T(t, T)
            out[t] = _mm512_add_epi32(s0[t], s1[t]);
        return;
    }
    /* A[t][j], H[t][j] (lo, hi): j = cc: the low fields of chunks 2cc,
     * 2cc + 1; j = 2 + cc: their high fields */
    const __m512i m4 = _mm512_set1_epi8(0x0f), one = _mm512_set1_epi8(1);
    __m512i fifth = _mm512_setzero_si512();
    if (has_fifth(kind))
        fifth = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(gb + fifth_off(kind))));
    __m512i sl[TN], sh[TN];
    FOR_T(t, T)
        sl[t] = sh[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int cc = 0; cc < 2; cc++) {
        __m512i raw = _mm512_loadu_si512((const void *)(gb + qs_off(kind) + 64 * cc));
        __m512i L = _mm512_and_si512(raw, m4), Hf = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if (has_fifth(kind)) { /* bit c (4 + c) of each byte to bit 4, c = 2cc or 2cc + 1 by half */
            L = _mm512_or_si512(L, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(fifth, cnt2(2 * cc, 2 * cc + 1)), one), 4));
            Hf = _mm512_or_si512(Hf, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(fifth, cnt2(4 + 2 * cc, 5 + 2 * cc)), one), 4));
        }
        FOR_T(t, T) {
            sl[t] = _mm512_dpbusd_epi32(sl[t], L, A[t][cc]);
            sl[t] = _mm512_dpbusd_epi32(sl[t], Hf, A[t][2 + cc]);
            sh[t] = _mm512_dpbusd_epi32(sh[t], L, H[t][cc]);
            sh[t] = _mm512_dpbusd_epi32(sh[t], Hf, H[t][2 + cc]);
        }
    }
    FOR_T(t, T)
        out[t] = _mm512_add_epi32(sl[t], _mm512_slli_epi32(sh[t], 7));
}

/* the 8 results of each of ng (2 or 4) groups (a missing one repeats
 * g[0]), block by block, for T tokens (a[t]): out0[t] groups 0 and 1,
 * out1[t] groups 2 and 3; each token's steps those of one token alone */
static AI void dot_groups512(int kind, int T, int ng, int64_t n, const uint8_t *const g[4], const struct llm_act16 *a,
                             __m512 *out0, __m512 *out1)
{
    __m512 acc0[TN], acc1[TN];
    FOR_T(t, T)
        acc0[t] = acc1[t] = _mm512_setzero_ps();
    const size_t bb = gbb(kind);
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb[4] = {0};
        for (int j = 0; j < ng; j++) {
            gb[j] = g[j] + (size_t)b * bb;
            for (size_t o = 0; o < bb; o += 64)
                _mm_prefetch((const char *)(gb[j] + PF_AHEAD + o), _MM_HINT_T0);
        }
        __m512i A[TN][8], H[TN][4];
        FOR_T(t, T) {
            if (kind == Q8) {
                __m512i qv = _mm512_loadu_si512((const void *)(a[t].q + b * QK));
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    A[t][k] = bc2(qv, 2 * k);
            } else {
                __m512i lv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a[t].lo + b * QK)));
                __m512i hv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a[t].hi + b * QK)));
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    A[t][j] = bc2(lv, 2 * j);
                    H[t][j] = bc2(hv, 2 * j);
                }
            }
        }
        __m512i x[TN], z[TN], i01[TN], i23[TN];
        isum512(kind, T, gb[0], A, H, x);
        isum512(kind, T, gb[1], A, H, z);
        FOR_T(t, T)
            i01[t] = i23[t] = fold2(x[t], z[t]);
        if (ng > 2) {
            isum512(kind, T, gb[2], A, H, x);
            isum512(kind, T, gb[3], A, H, z);
            FOR_T(t, T)
                i23[t] = fold2(x[t], z[t]);
        }
        __m512 s01 = ph16(gb[0], gb[1]), s23 = ng > 2 ? ph16(gb[2], gb[3]) : s01;
        __m512 m01 = s01, m23 = s23;
        if (has_min(kind)) {
            m01 = ph16(gb[0] + m_off(), gb[1] + m_off());
            m23 = ng > 2 ? ph16(gb[2] + m_off(), gb[3] + m_off()) : m01;
        }
        FOR_T(t, T) {
            /* wrapping: a stale thread may read an activation being rewritten (pool.h) */
            int32_t asum = (int32_t)((uint32_t)a[t].s16[2 * b] + (uint32_t)a[t].s16[2 * b + 1]);
            if (kind == Q4 || kind == Q5) {
                __m512i o = _mm512_set1_epi32((int32_t)((kind == Q4 ? 8u : 16u) * (uint32_t)asum));
                i01[t] = _mm512_sub_epi32(i01[t], o);
                i23[t] = _mm512_sub_epi32(i23[t], o);
            }
            __m512 da = _mm512_set1_ps(a[t].d[b]);
            acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i01[t]), _mm512_mul_ps(s01, da), acc0[t]);
            if (ng > 2)
                acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i23[t]), _mm512_mul_ps(s23, da), acc1[t]);
            if (has_min(kind)) {
                __m512 fa = _mm512_set1_ps((float)asum);
                acc0[t] = _mm512_fmadd_ps(fa, _mm512_mul_ps(m01, da), acc0[t]);
                if (ng > 2)
                    acc1[t] = _mm512_fmadd_ps(fa, _mm512_mul_ps(m23, da), acc1[t]);
            }
        }
    }
    FOR_T(t, T) {
        out0[t] = acc0[t];
        out1[t] = acc1[t];
    }
}

/* y[r] for the rows of [r0, r1) and [s0, s1): their groups four at a time
 * (the engine's one-token units have two in each range), the last one or
 * two two at a time */
static AI void gemv_kind512(int kind, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                            const void *act, float *y0, float *y1)
{
    struct llm_act16 a = llm_act16_view(act, w->n_in);
    int64_t nr = (r1 - r0 + ROWS - 1) / ROWS, ns = s1 > s0 ? (s1 - s0 + ROWS - 1) / ROWS : 0;
    for (int64_t i = 0, ng; i < nr + ns; i += ng) {
        ng = nr + ns - i > 2 ? 4 : 2;
        const uint8_t *g[4];
        float *dst[4];
        int cnt[4];
        for (int j = 0; j < ng; j++) {
            int64_t k = i + j < nr + ns ? i + j : i; /* a missing group repeats the first */
            int64_t base = k < nr ? r0 + k * ROWS : s0 + (k - nr) * ROWS, end = k < nr ? r1 : s1;
            g[j] = w->data + (size_t)(base / ROWS) * w->group_bytes;
            dst[j] = k < nr ? y0 + (base - r0) : y1 + (base - s0);
            cnt[j] = i + j < nr + ns ? (int)(end - base < ROWS ? end - base : ROWS) : 0;
        }
        float out[32];
        __m512 o0, o1;
        if (ng == 4)
            dot_groups512(kind, 1, 4, w->n_in, g, &a, &o0, &o1);
        else
            dot_groups512(kind, 1, 2, w->n_in, g, &a, &o0, &o1);
        _mm512_storeu_ps(out, o0);
        _mm512_storeu_ps(out + 16, o1);
        for (int j = 0; j < ng; j++)
            memcpy(dst[j], out + 8 * j, (size_t)cnt[j] * sizeof(float));
    }
}

/* gemv_n: y[t * ldy + r - r0] for the rows of [r0, r1), their groups four
 * at a time (the last one or two two at a time), tokens TN at a time */
static AI void gemv_n_kind512(int kind, const struct llm_mat *w, int64_t r0, int64_t r1, const void *act,
                              size_t a_stride, int64_t nt, float *y, int64_t ldy)
{
    int64_t nr = (r1 - r0 + ROWS - 1) / ROWS;
    for (int64_t i = 0, ng; i < nr; i += ng) {
        ng = nr - i > 2 ? 4 : 2;
        const uint8_t *g[4];
        int64_t at[4];
        int cnt[4];
        for (int j = 0; j < ng; j++) {
            int64_t k = i + j < nr ? i + j : i; /* a missing group repeats the first */
            at[j] = k * ROWS;
            g[j] = w->data + (size_t)((r0 + at[j]) / ROWS) * w->group_bytes;
            cnt[j] = i + j < nr ? (int)(r1 - r0 - at[j] < ROWS ? r1 - r0 - at[j] : ROWS) : 0;
        }
        for (int64_t t0 = 0; t0 < nt; t0 += TN) {
            int T = nt - t0 < TN ? (int)(nt - t0) : TN;
            struct llm_act16 a[TN];
            for (int t = 0; t < TN; t++) /* (all TN set: the tiles of fewer read only theirs) */
                a[t] = llm_act16_view((const uint8_t *)act + (size_t)(t0 + (t < T ? t : 0)) * a_stride, w->n_in);
            __m512 o0[TN], o1[TN];
#define DG(TT, NG) dot_groups512(kind, TT, NG, w->n_in, g, a, o0, o1)
            if (ng == 4) {
                if (T == 4) DG(4, 4); else if (T == 3) DG(3, 4); else if (T == 2) DG(2, 4); else DG(1, 4);
            } else {
                if (T == 4) DG(4, 2); else if (T == 3) DG(3, 2); else if (T == 2) DG(2, 2); else DG(1, 2);
            }
#undef DG
            for (int t = 0; t < T; t++) {
                float out[32];
                _mm512_storeu_ps(out, o0[t]);
                _mm512_storeu_ps(out + 16, o1[t]);
                for (int j = 0; j < ng; j++)
                    memcpy(y + (t0 + t) * ldy + at[j], out + 8 * j, (size_t)cnt[j] * sizeof(float));
            }
        }
    }
}

#define AVX512_KIND(NAME, KIND)                                                                    \
    static void NAME##_gemv_avx512(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, \
                                   const void *a, float *y0, float *y1)                            \
    {                                                                                              \
        gemv_kind512(KIND, w, r0, r1, s0, s1, a, y0, y1);                                          \
    }                                                                                              \
    static void NAME##_gemv_n_avx512(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, \
                                     size_t a_stride, int64_t nt, float *y, int64_t ldy)           \
    {                                                                                              \
        gemv_n_kind512(KIND, w, r0, r1, a, a_stride, nt, y, ldy);                                  \
    }
AVX512_KIND(q8_0, Q8)
AVX512_KIND(q4_0, Q4)
AVX512_KIND(q5_0, Q5)
AVX512_KIND(q4_1, Q41)
AVX512_KIND(q5_1, Q51)

#undef AI
#pragma GCC pop_options
#endif

/* ==== the table ==== */

#define KIND_FUNCS(NAME, KIND)                                                                     \
    static size_t NAME##_group_bytes(int64_t n) { return (size_t)(n / QK) * gbb(KIND); }          \
    LLM_OP_PACK(NAME##_pack, pack_kind, KIND)                                                      \
    LLM_OP_ROW(NAME##_row_to_float, row_to_float, KIND)                                            \
    LLM_OP_DOT(NAME##_dot_ref, dot_ref, KIND)                                                      \
    LLM_OP_UNPACK(NAME##_unpack_ref, unpack_ref, KIND)
KIND_FUNCS(q8_0, Q8)
KIND_FUNCS(q4_0, Q4)
KIND_FUNCS(q5_0, Q5)
KIND_FUNCS(q4_1, Q41)
KIND_FUNCS(q5_1, Q51)

#define ENTRY(NAME)                                                                                \
    ((struct llm_mm_ops){.act = LLM_ACT_I16, .packed = true, .group_bytes = NAME##_group_bytes,    \
                         .pack = NAME##_pack, .group_row_to_float = NAME##_row_to_float,           \
                         .dot_ref = NAME##_dot_ref, .gemv = llm_mm_gemv_by_ref, .gemm = llm_mm_packed_gemm, \
                         .gemm_scratch = llm_mm_packed_scratch})
#define UNPACK(NAME, MIN) ((struct llm_unpack_ops){32, MIN, NAME##_unpack_ref, NAME##_unpack_ref, llm_mm_gemv_by_ref, NULL, 0})

void llm_quant_pack_init(struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu)
{
    mm[LLM_TYPE_Q8_0] = ENTRY(q8_0);
    mm[LLM_TYPE_Q4_0] = ENTRY(q4_0);
    mm[LLM_TYPE_Q5_0] = ENTRY(q5_0);
    mm[LLM_TYPE_Q4_1] = ENTRY(q4_1);
    mm[LLM_TYPE_Q5_1] = ENTRY(q5_1);
    un[LLM_TYPE_Q8_0] = UNPACK(q8_0, false);
    un[LLM_TYPE_Q4_0] = UNPACK(q4_0, false);
    un[LLM_TYPE_Q5_0] = UNPACK(q5_0, false);
    un[LLM_TYPE_Q4_1] = UNPACK(q4_1, true);
    un[LLM_TYPE_Q5_1] = UNPACK(q5_1, true);
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
#define FAST(NAME, TYPE)                                                                           \
    mm[TYPE].gemv = un[TYPE].gemv = NAME##_gemv_avx2;                                              \
    un[TYPE].unpack = NAME##_unpack_avx2;                                                          \
    un[TYPE].gemv_n = NAME##_gemv_n_avx2;                                                          \
    un[TYPE].gemv_n_max = 8; /* measured: as fast as unpacking at 9 tokens, slower at 13 */
        FAST(q8_0, LLM_TYPE_Q8_0)
        FAST(q4_0, LLM_TYPE_Q4_0)
        FAST(q5_0, LLM_TYPE_Q5_0)
        FAST(q4_1, LLM_TYPE_Q4_1)
        FAST(q5_1, LLM_TYPE_Q5_1)
#undef FAST
    }
    if (llm_cpu_has_avx512(cpu)) {
        mm[LLM_TYPE_Q8_0].gemv = un[LLM_TYPE_Q8_0].gemv = q8_0_gemv_avx512;
        un[LLM_TYPE_Q8_0].gemv_n = q8_0_gemv_n_avx512, un[LLM_TYPE_Q8_0].gemv_n_max = 16;
        mm[LLM_TYPE_Q4_0].gemv = un[LLM_TYPE_Q4_0].gemv = q4_0_gemv_avx512;
        un[LLM_TYPE_Q4_0].gemv_n = q4_0_gemv_n_avx512, un[LLM_TYPE_Q4_0].gemv_n_max = 16;
        mm[LLM_TYPE_Q5_0].gemv = un[LLM_TYPE_Q5_0].gemv = q5_0_gemv_avx512;
        un[LLM_TYPE_Q5_0].gemv_n = q5_0_gemv_n_avx512, un[LLM_TYPE_Q5_0].gemv_n_max = 16;
        mm[LLM_TYPE_Q4_1].gemv = un[LLM_TYPE_Q4_1].gemv = q4_1_gemv_avx512;
        un[LLM_TYPE_Q4_1].gemv_n = q4_1_gemv_n_avx512, un[LLM_TYPE_Q4_1].gemv_n_max = 16;
        mm[LLM_TYPE_Q5_1].gemv = un[LLM_TYPE_Q5_1].gemv = q5_1_gemv_avx512;
        un[LLM_TYPE_Q5_1].gemv_n = q5_1_gemv_n_avx512, un[LLM_TYPE_Q5_1].gemv_n_max = 16;
    }
#elif defined(__aarch64__)
    if (cpu & LLM_CPU_NEON)
        llm_quant_pack_neon(mm, un, cpu);
#else
    (void)cpu;
#endif
}
