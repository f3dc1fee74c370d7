/*
 * quant-k-x86.h - (included only by core/kernels/quant-k.c, inside its AVX2
 * target region) the AVX2 dequantizers of the K-quants' stored rows:
 * exactly the reference's operations per element, so the same bits.
 */

static inline __m256i SFX(load)(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
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

