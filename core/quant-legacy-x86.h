/*
 * quant-legacy-x86.h - (included only by core/quant-legacy.c) the x86
 * kernels of Q4_0, Q4_1, Q5_0, Q5_1, written once and compiled twice under
 * different target pragmas: SFX(name) gives each copy its suffix, USE_VNNI
 * selects the integer dot primitive (AVX2 vpmaddubsw + vpmaddwd, or
 * AVX-512 VNNI vpdpbusd on 256-bit registers, with the fifth bits of Q5_0
 * and Q5_1 set by an AVX-512BW masked add). Both give the same exact
 * integer lane sums, so both match vec_dot_legacy_ref bit for bit.
 * (512-bit registers, two blocks per instruction, measured slower on Zen 4.)
 * Blocks are read in place; nothing is allocated.
 */

/* 32 bytes: element i of the block's 4-bit fields (0..15): the 16 bytes in
 * both halves, the upper half shifted down by 4 */
static inline __m256i SFX(nibbles32)(const uint8_t *qs)
{
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* 32 bytes: 0xff where bit i of the little-endian u32 qh is set, else 0 */
static inline __m256i SFX(hmask32)(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* 32 bytes: 0x10 where bit i of qh is set, else 0 */
static inline __m256i SFX(hbits32)(const uint8_t *qh)
{
    return _mm256_and_si256(SFX(hmask32)(qh), _mm256_set1_epi8(0x10));
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

static inline __m256i SFX(load)(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/*
 * A block's integer lanes against y's 32 bytes: lane j = sum over elements
 * 4j..4j+3 of q_i * y_i, q with its offset applied (the _0 types), or q and
 * the plain sums of y (the _1 types).
 */
static inline __m256i SFX(q5_quants_u)(const uint8_t *qs, const uint8_t *qh)
{
#if USE_VNNI
    uint32_t h;
    memcpy(&h, qh, 4);
    __m256i nib = SFX(nibbles32)(qs);
    return _mm256_mask_add_epi8(nib, (__mmask32)h, nib, _mm256_set1_epi8(16));
#else
    return _mm256_or_si256(SFX(nibbles32)(qs), SFX(hbits32)(qh));
#endif
}

/* sum over 4-element lanes of (q - off) * y, q unsigned */
static inline __m256i SFX(lanes_off)(__m256i q, int off, __m256i yv)
{
#if USE_VNNI
    __m256i qy = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, yv);
    return _mm256_sub_epi32(qy, _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                    _mm256_set1_epi8((char)off), yv));
#else
    return SFX(dot_ss)(_mm256_sub_epi8(q, _mm256_set1_epi8((char)off)), yv);
#endif
}

static inline __m256i SFX(q4_0_lanes)(const struct block_q4_0 *x, __m256i yv)
{
#if USE_VNNI
    return SFX(lanes_off)(SFX(nibbles32)(x->qs), 8, yv);
#else
    /* (n - 8) y = n y - 8 y: unsigned nibbles, no sign trick (as Q5_0) */
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(SFX(nibbles32)(x->qs), yv),
                                 _mm256_maddubs_epi16(_mm256_set1_epi8(8), yv));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
}

static inline __m256i SFX(q5_0_lanes)(const struct block_q5_0 *x, __m256i yv)
{
#if USE_VNNI
    return SFX(lanes_off)(SFX(q5_quants_u)(x->qs, x->qh), 16, yv);
#else
    /* (n + 16 h - 16) y = n y - 16 (1 - h) y: the nibbles need no sign trick
     * and the fifth bits select which y take the -16 (two instructions
     * fewer than forming q - 16 and multiplying signed by signed) */
    __m256i p = _mm256_sub_epi16(
        _mm256_maddubs_epi16(SFX(nibbles32)(x->qs), yv),
        _mm256_maddubs_epi16(_mm256_set1_epi8(16), _mm256_andnot_si256(SFX(hmask32)(x->qh), yv)));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
}

static inline __m256i SFX(q4_1_quants)(const struct block_q4_1 *x)
{
    return SFX(nibbles32)(x->qs);
}

static inline __m256i SFX(q5_1_quants)(const struct block_q5_1 *x)
{
    return SFX(q5_quants_u)(x->qs, x->qh);
}

/* ==== dot products against Q8_0 ==== */
/* Two blocks per step: even blocks into acc0, odd into acc1 (the
 * reference's two accumulator sets); acc = fma(dxy, lanes, acc). */

/* [dx0 * dy0, dx1 * dy1, ...]: two blocks' scale products, one conversion */
static inline __m128 SFX(dxy2)(uint16_t dx0, uint16_t dx1, uint16_t dy0, uint16_t dy1)
{
    __m128i h = _mm_cvtsi32_si128((int)((uint32_t)dx0 | (uint32_t)dx1 << 16));
    h = _mm_insert_epi32(h, (int)((uint32_t)dy0 | (uint32_t)dy1 << 16), 1);
    __m128 f = _mm_cvtph_ps(h);
    return _mm_mul_ps(f, _mm_shuffle_ps(f, f, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* [dx0 dy0, dx1 dy1, mx0 dy0, mx1 dy1] for the _1 types */
static inline __m128 SFX(dmxy2)(uint16_t dx0, uint16_t dx1, uint16_t mx0, uint16_t mx1,
                                uint16_t dy0, uint16_t dy1)
{
    __m128i h = _mm_set_epi16(0, 0, (short)dy1, (short)dy0, (short)mx1, (short)mx0, (short)dx1,
                              (short)dx0);
    __m256 f = _mm256_cvtph_ps(h);
    __m128 hi = _mm256_extractf128_ps(f, 1);
    return _mm_mul_ps(_mm256_castps256_ps128(f), _mm_movelh_ps(hi, hi));
}

/* lane i of v in all 8 lanes */
static inline __m256 SFX(bcast)(__m128 v, int i)
{
    switch (i) {
    case 0: return _mm256_broadcastss_ps(v);
    case 1: return _mm256_broadcastss_ps(_mm_movehdup_ps(v));
    case 2: return _mm256_broadcastss_ps(_mm_movehl_ps(v, v));
    default: return _mm256_broadcastss_ps(_mm_shuffle_ps(v, v, 3));
    }
}

#define LEGACY_DOT_0(NAME, BLOCK)                                                                  \
    static float SFX(NAME##_vec_dot)(int64_t n, const void *vx, const void *vy)                   \
    {                                                                                              \
        const struct BLOCK *x = vx;                                                                \
        const struct block_q8_0 *y = vy;                                                           \
        const int64_t nb = n / QK;                                                                 \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                             \
        int64_t b = 0;                                                                             \
        for (; b + 1 < nb; b += 2) {                                                               \
            __m128 d = SFX(dxy2)(x[b].d, x[b + 1].d, y[b].d, y[b + 1].d);                          \
            __m256i l0 = SFX(NAME##_lanes)(&x[b], SFX(load)(y[b].qs));                             \
            __m256i l1 = SFX(NAME##_lanes)(&x[b + 1], SFX(load)(y[b + 1].qs));                     \
            acc0 = _mm256_fmadd_ps(SFX(bcast)(d, 0), _mm256_cvtepi32_ps(l0), acc0);                \
            acc1 = _mm256_fmadd_ps(SFX(bcast)(d, 1), _mm256_cvtepi32_ps(l1), acc1);                \
        }                                                                                          \
        if (b < nb) {                                                                              \
            __m256i l0 = SFX(NAME##_lanes)(&x[b], SFX(load)(y[b].qs));                             \
            __m256 d = _mm256_set1_ps(SFX(h2f)(x[b].d) * SFX(h2f)(y[b].d));                        \
            acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l0), acc0);                               \
        }                                                                                          \
        return SFX(hsum8)(_mm256_add_ps(acc0, acc1));                                              \
    }

LEGACY_DOT_0(q4_0, block_q4_0)
LEGACY_DOT_0(q5_0, block_q5_0)

/* acc = fma(mxy, sy, fma(dxy, qy, acc)), lane by lane */
static inline __m256 SFX(acc_1)(__m256 acc, __m256i q, const int8_t *yq, __m256 dxy, __m256 mxy)
{
    __m256i yv = SFX(load)(yq);
    __m256i qy = SFX(dot_us)(q, yv);
    __m256i sy = SFX(dot_us)(_mm256_set1_epi8(1), yv);
    acc = _mm256_fmadd_ps(dxy, _mm256_cvtepi32_ps(qy), acc);
    return _mm256_fmadd_ps(mxy, _mm256_cvtepi32_ps(sy), acc);
}

#define LEGACY_DOT_1(NAME, BLOCK)                                                                  \
    static float SFX(NAME##_vec_dot)(int64_t n, const void *vx, const void *vy)                   \
    {                                                                                              \
        const struct BLOCK *x = vx;                                                                \
        const struct block_q8_0 *y = vy;                                                           \
        const int64_t nb = n / QK;                                                                 \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                             \
        int64_t b = 0;                                                                             \
        for (; b + 1 < nb; b += 2) {                                                               \
            __m128 d = SFX(dmxy2)(x[b].d, x[b + 1].d, x[b].m, x[b + 1].m, y[b].d, y[b + 1].d);     \
            acc0 = SFX(acc_1)(acc0, SFX(NAME##_quants)(&x[b]), y[b].qs, SFX(bcast)(d, 0),          \
                              SFX(bcast)(d, 2));                                                   \
            acc1 = SFX(acc_1)(acc1, SFX(NAME##_quants)(&x[b + 1]), y[b + 1].qs, SFX(bcast)(d, 1),  \
                              SFX(bcast)(d, 3));                                                   \
        }                                                                                          \
        if (b < nb) {                                                                              \
            float dy = SFX(h2f)(y[b].d);                                                           \
            acc0 = SFX(acc_1)(acc0, SFX(NAME##_quants)(&x[b]), y[b].qs,                            \
                              _mm256_set1_ps(SFX(h2f)(x[b].d) * dy),                               \
                              _mm256_set1_ps(SFX(h2f)(x[b].m) * dy));                              \
        }                                                                                          \
        return SFX(hsum8)(_mm256_add_ps(acc0, acc1));                                              \
    }

LEGACY_DOT_1(q4_1, block_q4_1)
LEGACY_DOT_1(q5_1, block_q5_1)

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
