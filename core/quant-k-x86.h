/*
 * quant-k-x86.h - (included only by core/quant-k.c) the x86 kernels of the
 * K-quants, written once and compiled twice under different target
 * pragmas: SFX(name) gives each copy its suffix; USE_VNNI replaces
 * vpmaddwd + vpaddd by AVX-512 VNNI's vpdpwssd and sets the Q3_K/Q5_K high
 * bits with AVX-512BW mask tests and masked adds. Both compute the exact
 * integer sums of the reference, then the same scalar float expression per
 * super-block, so both match the *_vec_dot_ref functions bit for bit.
 * Blocks are read in place; nothing is allocated.
 */

/* acc += pairwise products of int16 a and b, summed into int32 lanes */
static inline __m256i SFX(dot16)(__m256i acc, __m256i a, __m256i b)
{
#if USE_VNNI
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/* the lane sums of a and b at once */
static inline void SFX(hsum2_i32)(__m256i a, __m256i b, int *sa, int *sb)
{
    __m256i t = _mm256_hadd_epi32(a, b);
    __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    u = _mm_hadd_epi32(u, u);
    *sa = _mm_cvtsi128_si32(u);
    *sb = _mm_extract_epi32(u, 1);
}

static inline int SFX(hsum_i32)(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

#ifndef QUANT_K_X86_TABLES
#define QUANT_K_X86_TABLES
/* byte shuffles of a vector holding 8 int16 scales in both 128-bit lanes:
 * k_pair_shuf[j] puts scale 2j in the low lane's 8 words and scale 2j+1 in
 * the high lane's (for two 16-element sub-blocks in one 32-byte vector);
 * k_single_shuf[k] puts scale k in all 16 words */
static const uint8_t k_pair_shuf[4][32] __attribute__((aligned(32))) = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
    {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
    {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
    {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15}};
static const uint8_t k_single_shuf[8][32] __attribute__((aligned(32))) = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
    {2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
    {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5},
    {6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
    {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9},
    {10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
    {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13},
    {14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15}};
#endif

static inline __m256i SFX(shuf)(__m256i v, const uint8_t *mask)
{
    return _mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *)mask));
}

static inline __m256i SFX(load)(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Q4_K/Q5_K: the 8 scales and 8 mins as bytes [sc0..sc7, m0..m7] */
static inline __m128i SFX(k_scales_mins)(const uint8_t *q)
{
    uint32_t u0, u1, u2;
    memcpy(&u0, q, 4);
    memcpy(&u1, q + 4, 4);
    memcpy(&u2, q + 8, 4);
    uint32_t sc_lo = u0 & 0x3f3f3f3f, m_lo = u1 & 0x3f3f3f3f;
    uint32_t sc_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4;
    uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4;
    return _mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo);
}

/* Q3_K: the 16 scales (6-bit fields) as bytes, before the -32 */
static inline __m128i SFX(q3_scales_u)(const uint8_t *q)
{
    uint64_t lo;
    uint32_t h;
    memcpy(&lo, q, 8);
    memcpy(&h, q + 8, 4);
    uint64_t a = lo & 0x0f0f0f0f0f0f0f0fULL, b = (lo >> 4) & 0x0f0f0f0f0f0f0f0fULL;
    uint64_t ha = (uint64_t)(h & 0x03030303) | (uint64_t)((h >> 2) & 0x03030303) << 32;
    uint64_t hb = (uint64_t)((h >> 4) & 0x03030303) | (uint64_t)((h >> 6) & 0x03030303) << 32;
    return _mm_set_epi64x((long long)(b | hb << 4), (long long)(a | ha << 4));
}

/* ==== dot products against Q8_K ==== */

static float SFX(q2_K_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    const struct block_q2_K *x = vx;
    const struct block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m128i sv = _mm_loadu_si128((const __m128i *)x[b].scales);
        __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sv, m4));
        __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sv, 4), m4));
        __m256i mv = _mm256_madd_epi16(m16, SFX(load)(y[b].bsums));
        __m256i acc = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i sch = (h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                               : _mm256_permute2x128_si256(sc16, sc16, 0x00));
            __m256i qv = SFX(load)(x[b].qs + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256i q = _mm256_and_si256(qv, m3);
                qv = _mm256_srli_epi16(qv, 2);
                __m256i p = _mm256_maddubs_epi16(q, SFX(load)(y[b].qs + 128 * h + 32 * j));
                if (j % 2)
                    acc1 = SFX(dot16)(acc1, p, SFX(shuf)(sch, k_pair_shuf[j]));
                else
                    acc = SFX(dot16)(acc, p, SFX(shuf)(sch, k_pair_shuf[j]));
            }
        }
        int isum, msum;
        SFX(hsum2_i32)(_mm256_add_epi32(acc, acc1), mv, &isum, &msum);
        float d = _cvtsh_ss(x[b].d) * y[b].d, dmin = _cvtsh_ss(x[b].dmin) * y[b].d;
        sumf = sumf + (d * (float)isum - dmin * (float)msum);
    }
    return sumf;
}

static float SFX(q3_K_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    const struct block_q3_K *x = vx;
    const struct block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    (void)m1; /* unused by the VNNI copy */
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m128i su = _mm_sub_epi8(SFX(q3_scales_u)(x[b].scales), _mm_set1_epi8(32));
        __m256i sc16 = _mm256_cvtepi8_epi16(su);
        /* q = q2 + 4 h - 4: the -4 is taken out through the block sums */
        __m256i acc = _mm256_slli_epi32(_mm256_madd_epi16(sc16, SFX(load)(y[b].bsums)), 2);
        acc = _mm256_sub_epi32(_mm256_setzero_si256(), acc);
        __m256i hv = SFX(load)(x[b].hmask);
        __m256i acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i sch = (h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                               : _mm256_permute2x128_si256(sc16, sc16, 0x00));
            __m256i qv = SFX(load)(x[b].qs + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256i q = _mm256_and_si256(qv, m3);
                qv = _mm256_srli_epi16(qv, 2);
#if USE_VNNI /* add 4 where bit 4h+j of the hmask byte is set */
                __mmask32 hk = _mm256_test_epi8_mask(hv, _mm256_set1_epi8((char)(1 << (4 * h + j))));
                q = _mm256_mask_add_epi8(q, hk, q, _mm256_set1_epi8(4));
#else
                q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(hv, m1), 2));
                hv = _mm256_srli_epi16(hv, 1);
#endif
                __m256i p = _mm256_maddubs_epi16(q, SFX(load)(y[b].qs + 128 * h + 32 * j));
                if (j % 2)
                    acc1 = SFX(dot16)(acc1, p, SFX(shuf)(sch, k_pair_shuf[j]));
                else
                    acc = SFX(dot16)(acc, p, SFX(shuf)(sch, k_pair_shuf[j]));
            }
        }
        int isum = SFX(hsum_i32)(_mm256_add_epi32(acc, acc1));
        float d = _cvtsh_ss(x[b].d) * y[b].d;
        sumf = sumf + d * (float)isum;
    }
    return sumf;
}

/* Q4_K and Q5_K share everything but the fifth bit */
static inline float SFX(q45_K_vec_dot)(int64_t n, const void *vx, const void *vy, int five)
{
    const struct block_q8_K *y = vy;
    const uint8_t *xb = vx;
    const size_t bytes = five ? sizeof(struct block_q5_K) : sizeof(struct block_q4_K);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m1 = _mm256_set1_epi8(1), m2 = _mm256_set1_epi8(2);
    (void)m1; /* unused by the VNNI copy */
    (void)m2;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++, xb += bytes) {
        const struct block_q4_K *x4 = (const struct block_q4_K *)xb;
        const struct block_q5_K *x5 = (const struct block_q5_K *)xb;
        const uint8_t *qs = five ? x5->qs : x4->qs;
        __m128i scm = SFX(k_scales_mins)(x4->scales);
        __m256i sc = _mm256_cvtepu8_epi16(scm); /* [sc0..7 | m0..7] */
        sc = _mm256_permute2x128_si256(sc, sc, 0x00);
        /* sum of m_s * (bsums[2s] + bsums[2s+1]) */
        __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));
        __m256i mv = _mm256_madd_epi16(mdup, SFX(load)(y[b].bsums));
        __m256i hv = five ? SFX(load)(x5->qh) : _mm256_setzero_si256();
        __m256i acc = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i qv = SFX(load)(qs + 32 * g);
            __m256i lo = _mm256_and_si256(qv, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
            if (five) {
#if USE_VNNI /* add 16 where bits 2g, 2g+1 of the qh byte are set */
                const __m256i b16 = _mm256_set1_epi8(16);
                __mmask32 k0 = _mm256_test_epi8_mask(hv, _mm256_set1_epi8((char)(1 << (2 * g))));
                __mmask32 k1 = _mm256_test_epi8_mask(hv, _mm256_set1_epi8((char)(2 << (2 * g))));
                lo = _mm256_mask_add_epi8(lo, k0, lo, b16);
                hi = _mm256_mask_add_epi8(hi, k1, hi, b16);
#else
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hv, m1), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(hv, m2), 3));
                hv = _mm256_srli_epi16(hv, 2);
#endif
            }
            __m256i p0 = _mm256_maddubs_epi16(lo, SFX(load)(y[b].qs + 64 * g));
            __m256i p1 = _mm256_maddubs_epi16(hi, SFX(load)(y[b].qs + 64 * g + 32));
            acc = SFX(dot16)(acc, p0, SFX(shuf)(sc, k_single_shuf[2 * g]));
            acc1 = SFX(dot16)(acc1, p1, SFX(shuf)(sc, k_single_shuf[2 * g + 1]));
        }
        int isum, msum;
        SFX(hsum2_i32)(_mm256_add_epi32(acc, acc1), mv, &isum, &msum);
        float d = _cvtsh_ss(x4->d) * y[b].d, dmin = _cvtsh_ss(x4->dmin) * y[b].d;
        sumf = sumf + (d * (float)isum - dmin * (float)msum);
    }
    return sumf;
}

static float SFX(q4_K_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    return SFX(q45_K_vec_dot)(n, vx, vy, 0);
}

static float SFX(q5_K_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    return SFX(q45_K_vec_dot)(n, vx, vy, 1);
}

/* the four 32-element groups of a Q6_K half, as unsigned 6-bit values */
static inline void SFX(q6_half)(const uint8_t *ql, const uint8_t *qh, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i l0 = SFX(load)(ql), l1 = SFX(load)(ql + 32), hv = SFX(load)(qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                           _mm256_slli_epi16(_mm256_and_si256(hv, _mm256_set1_epi8(0x03)), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                           _mm256_slli_epi16(_mm256_and_si256(hv, _mm256_set1_epi8(0x0c)), 2));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_and_si256(hv, _mm256_set1_epi8(0x30)));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(hv, 2), _mm256_set1_epi8(0x30)));
}

static float SFX(q6_K_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    const struct block_q6_K *x = vx;
    const struct block_q8_K *y = vy;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        /* q - 32: the -32 is taken out through the block sums */
        __m256i acc = _mm256_slli_epi32(_mm256_madd_epi16(sc16, SFX(load)(y[b].bsums)), 5);
        acc = _mm256_sub_epi32(_mm256_setzero_si256(), acc);
        __m256i acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i sch = (h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                               : _mm256_permute2x128_si256(sc16, sc16, 0x00));
            __m256i q[4];
            SFX(q6_half)(x[b].ql + 64 * h, x[b].qh + 32 * h, q);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                __m256i p = _mm256_maddubs_epi16(q[g], SFX(load)(y[b].qs + 128 * h + 32 * g));
                if (g % 2)
                    acc1 = SFX(dot16)(acc1, p, SFX(shuf)(sch, k_pair_shuf[g]));
                else
                    acc = SFX(dot16)(acc, p, SFX(shuf)(sch, k_pair_shuf[g]));
            }
        }
        int isum = SFX(hsum_i32)(_mm256_add_epi32(acc, acc1));
        float d = _cvtsh_ss(x[b].d) * y[b].d;
        sumf = sumf + d * (float)isum;
    }
    return sumf;
}

/* ==== dequantizers (one copy: VNNI adds nothing here) ==== */
#if !USE_VNNI

/* y[0..15] = (float)(q[i] - off) * dl (- ml): q as 16 unsigned bytes */
static inline void SFX(store16)(float *y, __m128i q, int off, float dl, float ml, int with_m)
{
    __m256 vd = _mm256_set1_ps(dl), vm = _mm256_set1_ps(ml);
    __m256i voff = _mm256_set1_epi32(off);
    for (int p = 0; p < 2; p++) {
        __m128i b8 = p ? _mm_srli_si128(q, 8) : q;
        __m256i i32 = _mm256_sub_epi32(_mm256_cvtepu8_epi32(b8), voff);
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(i32), vd);
        if (with_m)
            f = _mm256_sub_ps(f, vm);
        _mm256_storeu_ps(y + 8 * p, f);
    }
}

/* 32 elements from a 32-byte vector with scales for its two halves */
static inline void SFX(store32)(float *y, __m256i q, int off, float dl0, float ml0, float dl1,
                                float ml1, int with_m)
{
    SFX(store16)(y, _mm256_castsi256_si128(q), off, dl0, ml0, with_m);
    SFX(store16)(y + 16, _mm256_extracti128_si256(q, 1), off, dl1, ml1, with_m);
}

static void SFX(q2_K_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q2_K *x = vx;
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = _cvtsh_ss(x[b].d), dmin = _cvtsh_ss(x[b].dmin);
        for (int h = 0; h < 2; h++) {
            __m256i qv = SFX(load)(x[b].qs + 32 * h);
            for (int j = 0; j < 4; j++) {
                int s = 8 * h + 2 * j;
                uint8_t s0 = x[b].scales[s], s1 = x[b].scales[s + 1];
                SFX(store32)(y + 128 * h + 32 * j, _mm256_and_si256(qv, m3), 0,
                             d * (float)(s0 & 0x0f), dmin * (float)(s0 >> 4),
                             d * (float)(s1 & 0x0f), dmin * (float)(s1 >> 4), 1);
                qv = _mm256_srli_epi16(qv, 2);
            }
        }
    }
}

static void SFX(q3_K_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q3_K *x = vx;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = _cvtsh_ss(x[b].d);
        int sc[16];
        q3_scales(x[b].scales, sc);
        __m256i hv = SFX(load)(x[b].hmask);
        for (int h = 0; h < 2; h++) {
            __m256i qv = SFX(load)(x[b].qs + 32 * h);
            for (int j = 0; j < 4; j++) {
                int s = 8 * h + 2 * j;
                __m256i q = _mm256_and_si256(qv, m3);
                q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(hv, m1), 2));
                SFX(store32)(y + 128 * h + 32 * j, q, 4, d * (float)sc[s], 0,
                             d * (float)sc[s + 1], 0, 0);
                qv = _mm256_srli_epi16(qv, 2);
                hv = _mm256_srli_epi16(hv, 1);
            }
        }
    }
}

static void SFX(q45_K_to_float)(const void *vx, float *y, int64_t k, int five)
{
    const uint8_t *xb = vx;
    const size_t bytes = five ? sizeof(struct block_q5_K) : sizeof(struct block_q4_K);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m1 = _mm256_set1_epi8(1), m2 = _mm256_set1_epi8(2);
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K, xb += bytes) {
        const struct block_q4_K *x4 = (const struct block_q4_K *)xb;
        const struct block_q5_K *x5 = (const struct block_q5_K *)xb;
        const uint8_t *qs = five ? x5->qs : x4->qs;
        float d = _cvtsh_ss(x4->d), dmin = _cvtsh_ss(x4->dmin);
        __m256i hv = five ? SFX(load)(x5->qh) : _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            __m256i qv = SFX(load)(qs + 32 * g);
            __m256i lo = _mm256_and_si256(qv, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hv, m1), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(hv, m2), 3));
                hv = _mm256_srli_epi16(hv, 2);
            }
            int sc, m;
            k_scale_min(x4->scales, 2 * g, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            SFX(store32)(y + 64 * g, lo, 0, dl, ml, dl, ml, 1);
            k_scale_min(x4->scales, 2 * g + 1, &sc, &m);
            dl = d * (float)sc;
            ml = dmin * (float)m;
            SFX(store32)(y + 64 * g + 32, hi, 0, dl, ml, dl, ml, 1);
        }
    }
}

static void SFX(q4_K_to_float)(const void *vx, float *y, int64_t k)
{
    SFX(q45_K_to_float)(vx, y, k, 0);
}

static void SFX(q5_K_to_float)(const void *vx, float *y, int64_t k)
{
    SFX(q45_K_to_float)(vx, y, k, 1);
}

static void SFX(q6_K_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q6_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = _cvtsh_ss(x[b].d);
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            SFX(q6_half)(x[b].ql + 64 * h, x[b].qh + 32 * h, q);
            for (int g = 0; g < 4; g++) {
                int s = 8 * h + 2 * g;
                SFX(store32)(y + 128 * h + 32 * g, q[g], 32, d * (float)x[b].scales[s], 0,
                             d * (float)x[b].scales[s + 1], 0, 0);
            }
        }
    }
}

/* Q8_K activations, bit-identical to llm_quantize_row_q8_K: the same first
 * element of largest magnitude, the same iscale, round half to even (the
 * MXCSR default, as nearest_int), the same clamp and block sums */
static void SFX(q8_K_from_float)(const float *x, void *vy, int64_t k)
{
    struct block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < QK_K; i += 8)
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        if (!(amax > 0) || !(amax <= 3.4028235e38f)) { /* zero or non-finite: as the reference */
            llm_quantize_row_q8_K(x, &y[b], QK_K);
            continue;
        }
        __m256 va = _mm256_set1_ps(amax);
        int first = 0;
        for (int i = 0; i < QK_K; i += 8) {
            __m256 eq = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), va, _CMP_EQ_OQ);
            int m = _mm256_movemask_ps(eq);
            if (m) {
                first = i + __builtin_ctz((unsigned)m);
                break;
            }
        }
        float iscale = -127.0f / x[first];
        if (!(iscale >= -3.4028235e38f && iscale <= 3.4028235e38f)) { /* as the reference */
            llm_quantize_row_q8_K(x, &y[b], QK_K);
            continue;
        }
        __m256 vs = _mm256_set1_ps(iscale);
        const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (int i = 0; i < QK_K; i += 32) {
            __m256i v[4];
            for (int j = 0; j < 4; j++) {
                __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + i + 8 * j)));
                v[j] = _mm256_min_epi32(_mm256_max_epi32(q, lo), hi);
            }
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]),
                                           _mm256_packs_epi32(v[2], v[3]));
            p = _mm256_permutevar8x32_epi32(p, order);
            _mm256_storeu_si256((__m256i *)(y[b].qs + i), p);
            /* sums of 8 bytes, biased by 128 each, then pairs of them */
            __m256i t = _mm256_sad_epu8(_mm256_xor_si256(p, _mm256_set1_epi8((char)0x80)),
                                        _mm256_setzero_si256());
            int64_t s[4];
            _mm256_storeu_si256((__m256i *)s, t);
            y[b].bsums[i / 16] = (int16_t)(s[0] + s[1] - 2048);
            y[b].bsums[i / 16 + 1] = (int16_t)(s[2] + s[3] - 2048);
        }
        y[b].d = 1 / iscale;
    }
}
#endif
