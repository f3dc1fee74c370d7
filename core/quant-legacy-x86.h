/*
 * quant-legacy-x86.h - (included only by core/quant-legacy.c) the x86
 * kernels of Q4_0, Q4_1, Q5_0, Q5_1, written once and compiled twice under
 * different target pragmas: SFX(name) gives each copy its suffix, USE_VNNI
 * selects the integer dot primitive (AVX2 vpmaddubsw + vpmaddwd, or
 * AVX-512 VNNI vpdpbusd on 256-bit registers). Both give the same exact
 * integer lane sums, so both match vec_dot_legacy_ref bit for bit.
 * Blocks are read in place; nothing is allocated.
 */

/* 32 bytes: element i of the block's 4-bit fields (0..15) */
static inline __m256i SFX(nibbles32)(const uint8_t *qs)
{
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* 32 bytes: 0x10 where bit i of the little-endian u32 qh is set, else 0 */
static inline __m256i SFX(hbits32)(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* lane j = sum over bytes 4j..4j+3 of u[i] * s[i]; u unsigned, s signed */
static inline __m256i SFX(dot_us)(__m256i u, __m256i s)
{
#if USE_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* the same for two signed operands (|x| <= 127 or x = -128 with y != -128) */
static inline __m256i SFX(dot_ss)(__m256i x, __m256i y)
{
    return SFX(dot_us)(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x));
}

/* ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), as lanes_sum */
static inline float SFX(hsum8)(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float SFX(h2f)(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* ==== dot products against Q8_0 ==== */

static float SFX(q4_0_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    const struct block_q4_0 *x = vx;
    const struct block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++) {
        __m256i q = _mm256_sub_epi8(SFX(nibbles32)(x[b].qs), _mm256_set1_epi8(8));
        __m256i l = SFX(dot_ss)(q, _mm256_loadu_si256((const __m256i *)y[b].qs));
        __m256 dxy = _mm256_set1_ps(SFX(h2f)(x[b].d) * SFX(h2f)(y[b].d));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(dxy, _mm256_cvtepi32_ps(l)));
    }
    return SFX(hsum8)(acc);
}

static float SFX(q5_0_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    const struct block_q5_0 *x = vx;
    const struct block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++) {
        __m256i q = _mm256_or_si256(SFX(nibbles32)(x[b].qs), SFX(hbits32)(x[b].qh));
        q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        __m256i l = SFX(dot_ss)(q, _mm256_loadu_si256((const __m256i *)y[b].qs));
        __m256 dxy = _mm256_set1_ps(SFX(h2f)(x[b].d) * SFX(h2f)(y[b].d));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(dxy, _mm256_cvtepi32_ps(l)));
    }
    return SFX(hsum8)(acc);
}

/* Q4_1 / Q5_1: acc += (dx dy) qy + (mx dy) sy, lane by lane */
static inline __m256 SFX(acc_1)(__m256 acc, __m256i q, const struct block_q8_0 *yb, float dx,
                                float mx)
{
    __m256i yv = _mm256_loadu_si256((const __m256i *)yb->qs);
    __m256i qy = SFX(dot_us)(q, yv);
    __m256i sy = SFX(dot_us)(_mm256_set1_epi8(1), yv);
    float dy = SFX(h2f)(yb->d);
    __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(dx * dy), _mm256_cvtepi32_ps(qy)),
                             _mm256_mul_ps(_mm256_set1_ps(mx * dy), _mm256_cvtepi32_ps(sy)));
    return _mm256_add_ps(acc, t);
}

static float SFX(q4_1_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    const struct block_q4_1 *x = vx;
    const struct block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++)
        acc = SFX(acc_1)(acc, SFX(nibbles32)(x[b].qs), &y[b], SFX(h2f)(x[b].d),
                         SFX(h2f)(x[b].m));
    return SFX(hsum8)(acc);
}

static float SFX(q5_1_vec_dot)(int64_t n, const void *vx, const void *vy)
{
    const struct block_q5_1 *x = vx;
    const struct block_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++) {
        __m256i q = _mm256_or_si256(SFX(nibbles32)(x[b].qs), SFX(hbits32)(x[b].qh));
        acc = SFX(acc_1)(acc, q, &y[b], SFX(h2f)(x[b].d), SFX(h2f)(x[b].m));
    }
    return SFX(hsum8)(acc);
}

/* ==== dequantizers (one copy: VNNI adds nothing here) ==== */
#if !USE_VNNI

/* y[0..31] = (float)(q[i] - off) * d (+ m): q as 32 unsigned bytes */
static inline void SFX(store32)(float *y, __m256i q, int off, float d, float m, int with_m)
{
    __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
    __m256i voff = _mm256_set1_epi32(off);
    __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int p = 0; p < 4; p++) {
        __m128i b8 = p & 1 ? _mm_srli_si128(h[p / 2], 8) : h[p / 2];
        __m256i i32 = _mm256_sub_epi32(_mm256_cvtepu8_epi32(b8), voff);
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(i32), vd);
        if (with_m)
            f = _mm256_add_ps(f, vm);
        _mm256_storeu_ps(y + 8 * p, f);
    }
}

static void SFX(q4_0_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q4_0 *x = vx;
    for (int64_t b = 0; b < k / QK; b++)
        SFX(store32)(y + b * QK, SFX(nibbles32)(x[b].qs), 8, SFX(h2f)(x[b].d), 0, 0);
}

static void SFX(q4_1_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q4_1 *x = vx;
    for (int64_t b = 0; b < k / QK; b++)
        SFX(store32)(y + b * QK, SFX(nibbles32)(x[b].qs), 0, SFX(h2f)(x[b].d),
                     SFX(h2f)(x[b].m), 1);
}

static void SFX(q5_0_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q5_0 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        __m256i q = _mm256_or_si256(SFX(nibbles32)(x[b].qs), SFX(hbits32)(x[b].qh));
        SFX(store32)(y + b * QK, q, 16, SFX(h2f)(x[b].d), 0, 0);
    }
}

static void SFX(q5_1_to_float)(const void *vx, float *y, int64_t k)
{
    const struct block_q5_1 *x = vx;
    for (int64_t b = 0; b < k / QK; b++) {
        __m256i q = _mm256_or_si256(SFX(nibbles32)(x[b].qs), SFX(hbits32)(x[b].qh));
        SFX(store32)(y + b * QK, q, 0, SFX(h2f)(x[b].d), SFX(h2f)(x[b].m), 1);
    }
}
#endif
