/*
 * quant-neon.c - the AArch64 NEON kernels of the packed 32-element types
 * (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1: their one-token and few-token GEMVs and
 * the unpacking of their groups for the batched product), of the batched
 * product's tile over unpacked units (mm.c) and of the I16 activation
 * quantizer (act.c). Each computes the bits of the portable definition in
 * quant.h; the tables pick them at run time (llm_cpu_features: NEON on
 * every AArch64 CPU, SDOT where HWCAP_ASIMDDP says the CPU has it).
 *
 * Why these shapes: they are the AVX2 kernels' (quant-pack.c, mm.c,
 * act.c), whose packing and tiles were measured on x86; speed on ARM
 * could not be measured where they were written (docs/kernels-arm.md).
 * The packed group layout puts, for the nibble types, four consecutive
 * elements of one row in each 32-bit lane of a chunk (byte 4r + e), which
 * is exactly what SDOT multiplies; for Q8_0 two pairs zipped by 16 bits
 * give the same. Activations are q = 128 hi + lo (act.c), so each block's
 * exact integer sum is SDOT(w, lo) + 128 SDOT(w, hi). Without the dot
 * product extension the same 4-byte dot products are formed by widening
 * multiplies and pairwise adds: integer sums are exact, so both give the
 * same integers. The float steps are the definition's, lane by lane: rows
 * 0-3 in one register, rows 4-7 in another.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#if defined(__aarch64__) && defined(__GNUC__)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define QK 32
#define ROWS LLM_PACK_ROWS
#define AI static inline __attribute__((always_inline))

enum { Q8 = 0, Q4 = 1, Q5 = 2, Q41 = 3, Q51 = 4 };

/* the group layout of quant-pack.c (there: block_bytes, qs_off, ...) */
static const size_t gbb_of[] = {8 * 34, 8 * 18, 8 * 22, 8 * 20, 8 * 24};
static const size_t qs_off_of[] = {16, 16, 48, 32, 64};
AI bool has_min(int kind) { return kind == Q41 || kind == Q51; }
AI bool has_fifth(int kind) { return kind == Q5 || kind == Q51; }
AI size_t fifth_off(int kind) { return kind == Q51 ? 32 : 16; }
#define M_OFF 16

AI int8x16_t bc32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/* acc + the 4-byte dot products of a and b in each 32-bit lane: SDOT, or
 * (DP false) widening multiplies and pairwise adds, the same integers */
AI int32x4_t dot4(bool DP, int32x4_t acc, int8x16_t a, int8x16_t b)
{
    if (DP) {
        __asm__(".arch armv8.2-a+dotprod\n\tsdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
        return acc;
    }
    int32x4_t l = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    int32x4_t h = vpaddlq_s16(vmull_high_s8(a, b));
    return vaddq_s32(acc, vpaddq_s32(l, h));
}

/* 4 f16 at p (any alignment) as f32, exactly */
AI float32x4_t ldh4(const uint8_t *p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

/* the fields (0..31) of chunk c's 32 bytes: L[0..1] elements 4c + e, H[0..1]
 * elements 16 + 4c + e (index 0: rows 0-3, 1: rows 4-7) */
AI void fields(int kind, const uint8_t *gb, int c, const uint8x16_t fifth[2], int8x16_t L[2], int8x16_t H[2])
{
    const uint8x16_t m4 = vdupq_n_u8(0x0f), b4 = vdupq_n_u8(0x10);
    for (int i = 0; i < 2; i++) {
        uint8x16_t raw = vld1q_u8(gb + qs_off_of[kind] + 32 * c + 16 * i);
        uint8x16_t l = vandq_u8(raw, m4), h = vshrq_n_u8(raw, 4);
        if (has_fifth(kind)) { /* bit c to bit 4, and bit 4 + c */
            l = vorrq_u8(l, vandq_u8(vshlq_u8(fifth[i], vdupq_n_s8((int8_t)(4 - c))), b4));
            h = vorrq_u8(h, vandq_u8(vshlq_u8(fifth[i], vdupq_n_s8((int8_t)-c)), b4));
        }
        L[i] = vreinterpretq_s8_u8(l);
        H[i] = vreinterpretq_s8_u8(h);
    }
}

#define TN LLM_GEMV_N_TILE /* gemv_n: tokens per tile */
/* the loops over a tile's tokens, unrolled (T is a constant in each caller) */
#define FOR_T(t, T) _Pragma("GCC unroll 4") for (int t = 0; t < (T); t++)

/* the 8 rows' exact sums of v * q over one block (the _0 types' offsets
 * not yet taken) for T tokens (lo[t], hi[t]: token t's block): rows 0-3 in
 * s[t][0], 4-7 in s[t][1]; the weights zipped (or their fields formed)
 * once for all the tokens */
AI void block_isum(bool DP, int kind, int T, const uint8_t *gb, const uint8_t *const *lo, const int8_t *const *hi,
                   int32x4_t (*s)[2])
{
    int32x4_t sl[TN][2], sh[TN][2];
    FOR_T(t, T)
        for (int i = 0; i < 2; i++)
            sl[t][i] = sh[t][i] = vdupq_n_s32(0);
    if (kind == Q8) {
        for (int p = 0; p < 16; p += 2) {
            uint16x8_t A = vreinterpretq_u16_u8(vld1q_u8(gb + 16 + 16 * p));
            uint16x8_t B = vreinterpretq_u16_u8(vld1q_u8(gb + 32 + 16 * p));
            /* lane r: row r's elements 2p .. 2p + 3 */
            int8x16_t w[2] = {vreinterpretq_s8_u16(vzip1q_u16(A, B)), vreinterpretq_s8_u16(vzip2q_u16(A, B))};
            FOR_T(t, T) {
                int8x16_t al = bc32(lo[t] + 2 * p), ah = bc32(hi[t] + 2 * p);
                for (int i = 0; i < 2; i++) {
                    sl[t][i] = dot4(DP, sl[t][i], w[i], al);
                    sh[t][i] = dot4(DP, sh[t][i], w[i], ah);
                }
            }
        }
    } else {
        uint8x16_t fifth[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if (has_fifth(kind))
            for (int i = 0; i < 2; i++)
                fifth[i] = vld1q_u8(gb + fifth_off(kind) + 16 * i);
        for (int c = 0; c < 4; c++) {
            int8x16_t L[2], H[2];
            fields(kind, gb, c, fifth, L, H);
            FOR_T(t, T) {
                int8x16_t aL = bc32(lo[t] + 4 * c), aH = bc32(lo[t] + 16 + 4 * c);
                int8x16_t hL = bc32(hi[t] + 4 * c), hH = bc32(hi[t] + 16 + 4 * c);
                for (int i = 0; i < 2; i++) {
                    sl[t][i] = dot4(DP, dot4(DP, sl[t][i], L[i], aL), H[i], aH);
                    sh[t][i] = dot4(DP, dot4(DP, sh[t][i], L[i], hL), H[i], hH);
                }
            }
        }
    }
    FOR_T(t, T)
        for (int i = 0; i < 2; i++)
            s[t][i] = vaddq_s32(sl[t][i], vshlq_n_s32(sh[t][i], 7));
}

/* one block of a group for T tokens: acc[t] with the block's steps of the
 * definition for token t (a[t]) */
AI void block_step_n(bool DP, int kind, int T, const uint8_t *gb, const struct llm_act16 *a, int64_t b,
                     float32x4_t (*acc)[2])
{
    const uint8_t *lo[TN];
    const int8_t *hi[TN];
    FOR_T(t, T)
        lo[t] = a[t].lo + b * QK, hi[t] = a[t].hi + b * QK;
    int32x4_t is[TN][2];
    block_isum(DP, kind, T, gb, lo, hi, is);
    FOR_T(t, T) {
        float32x4_t da = vdupq_n_f32(a[t].d[b]);
        /* wrapping: a stale thread may read an activation being rewritten (pool.h) */
        int32_t asum = (int32_t)((uint32_t)a[t].s16[2 * b] + (uint32_t)a[t].s16[2 * b + 1]);
        if (kind == Q4 || kind == Q5) {
            int32x4_t off = vdupq_n_s32((int32_t)((kind == Q4 ? 8u : 16u) * (uint32_t)asum));
            for (int i = 0; i < 2; i++)
                is[t][i] = vsubq_s32(is[t][i], off);
        }
        for (int i = 0; i < 2; i++) {
            float32x4_t sc = vmulq_f32(ldh4(gb + 8 * i), da);
            acc[t][i] = vfmaq_f32(acc[t][i], vcvtq_f32_s32(is[t][i]), sc);
            if (has_min(kind)) {
                float32x4_t m = vmulq_f32(ldh4(gb + M_OFF + 8 * i), da);
                acc[t][i] = vfmaq_f32(acc[t][i], vdupq_n_f32((float)asum), m);
            }
        }
    }
}

/* one block of a group: acc with the block's steps of the definition */
AI void block_step(bool DP, int kind, const uint8_t *gb, const struct llm_act16 *a, int64_t b, float32x4_t acc[2])
{
    block_step_n(DP, kind, 1, gb, a, b, (float32x4_t (*)[2])acc);
}

/* the 8 results of group g0 (and of g1 if not NULL), block by block */
AI void dot_groups(bool DP, int kind, int64_t n, const uint8_t *g0, const uint8_t *g1, const struct llm_act16 *a,
                   float *y0, float *y1)
{
    float32x4_t acc0[2] = {vdupq_n_f32(0), vdupq_n_f32(0)}, acc1[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t b = 0; b < n / QK; b++) {
        block_step(DP, kind, g0 + (size_t)b * gbb_of[kind], a, b, acc0);
        if (g1)
            block_step(DP, kind, g1 + (size_t)b * gbb_of[kind], a, b, acc1);
    }
    vst1q_f32(y0, acc0[0]), vst1q_f32(y0 + 4, acc0[1]);
    if (g1)
        vst1q_f32(y1, acc1[0]), vst1q_f32(y1 + 4, acc1[1]);
}

/* y[r] for the rows of [r0, r1) and [s0, s1), groups of the two ranges in
 * pairs (quant-pack.c's gemv_kind) */
AI void gemv_kind(bool DP, int kind, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
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
        dot_groups(DP, kind, w->n_in, g0, g1, &a, out0, out1);
        int64_t base0 = i < nr ? ra : sa, end0 = i < nr ? r1 : s1;
        float *d0 = i < nr ? y0 + (ra - r0) : y1 + (sa - s0);
        for (int r = 0; r < ROWS && base0 + r < end0; r++)
            d0[r] = out0[r];
        for (int r = 0; two && r < ROWS && sa + r < s1; r++)
            y1[sa - s0 + r] = out1[r];
    }
}

/* gemv_n: a group's 8 results for T tokens (out[8 t + r]), block by block */
AI void dot_group_n(bool DP, int kind, int T, int64_t n, const uint8_t *g, const struct llm_act16 *a, float *out)
{
    float32x4_t acc[TN][2];
    FOR_T(t, T)
        acc[t][0] = acc[t][1] = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / QK; b++)
        block_step_n(DP, kind, T, g + (size_t)b * gbb_of[kind], a, b, acc);
    FOR_T(t, T)
        vst1q_f32(out + ROWS * t, acc[t][0]), vst1q_f32(out + ROWS * t + 4, acc[t][1]);
}

/* gemv_n's group step (llm_mm_gemv_n_groups): T a constant in each call */
AI void group_n(bool DP, int kind, const uint8_t *g, int64_t n, int T, const struct llm_act16 *a, float *out)
{
    if (T == 4)
        dot_group_n(DP, kind, 4, n, g, a, out);
    else if (T == 3)
        dot_group_n(DP, kind, 3, n, g, a, out);
    else if (T == 2)
        dot_group_n(DP, kind, 2, n, g, a, out);
    else
        dot_group_n(DP, kind, 1, n, g, a, out);
}

/* the 8 rows' values of 4 consecutive elements (fields minus off; v[0]:
 * rows 0-3, v[1]: 4-7, 4 bytes a row) as the tile's two pairs at w
 * (mm.c's layout: pair p, row r, element j at (p * 8 + r) * 2 + j) */
AI void store_pairs(const int8x16_t F[2], int off, int16_t *w)
{
    int8x16_t v0 = vsubq_s8(F[0], vdupq_n_s8((int8_t)off)), v1 = vsubq_s8(F[1], vdupq_n_s8((int8_t)off));
    int8x16_t ev = vreinterpretq_s8_u16(vuzp1q_u16(vreinterpretq_u16_s8(v0), vreinterpretq_u16_s8(v1)));
    int8x16_t od = vreinterpretq_s8_u16(vuzp2q_u16(vreinterpretq_u16_s8(v0), vreinterpretq_u16_s8(v1)));
    vst1q_s16(w, vmovl_s8(vget_low_s8(ev)));
    vst1q_s16(w + 8, vmovl_high_s8(ev));
    vst1q_s16(w + 16, vmovl_s8(vget_low_s8(od)));
    vst1q_s16(w + 24, vmovl_high_s8(od));
}

/* a group unpacked for the tile (quant-pack.c's unpack_ref, the same values) */
AI void unpack_kind(int kind, const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    int off = kind == Q4 ? 8 : kind == Q5 ? 16 : 0;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = (const uint8_t *)group + (size_t)b * gbb_of[kind];
        int16_t *w = w16 + b * 16 * ROWS * 2;
        for (int i = 0; i < 2; i++) {
            vst1q_f32(S + b * ROWS + 4 * i, ldh4(gb + 8 * i));
            if (has_min(kind))
                vst1q_f32(M + b * ROWS + 4 * i, ldh4(gb + M_OFF + 8 * i));
        }
        if (kind == Q8) {
            for (int p = 0; p < 16; p++) {
                int8x16_t v = vld1q_s8((const int8_t *)(gb + 16 + 16 * p));
                vst1q_s16(w + 16 * p, vmovl_s8(vget_low_s8(v)));
                vst1q_s16(w + 16 * p + 8, vmovl_high_s8(v));
            }
            continue;
        }
        uint8x16_t fifth[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if (has_fifth(kind))
            for (int i = 0; i < 2; i++)
                fifth[i] = vld1q_u8(gb + fifth_off(kind) + 16 * i);
        for (int c = 0; c < 4; c++) {
            int8x16_t L[2], H[2];
            fields(kind, gb, c, fifth, L, H);
            store_pairs(L, off, w + 16 * (2 * c));     /* elements 4c .. 4c + 3 */
            store_pairs(H, off, w + 16 * (8 + 2 * c)); /* 16 + 4c .. */
        }
    }
}

#define NEON_KIND(NAME, KIND)                                                                      \
    LLM_OP_GEMV(NAME##_gemv_neon, gemv_kind, false, KIND)                                          \
    LLM_OP_GEMV(NAME##_gemv_sdot, gemv_kind, true, KIND)                                           \
    LLM_OP_UNPACK(NAME##_unpack_neon, unpack_kind, KIND)                                           \
    LLM_OP_GEMV_N(NAME##_gemv_n_neon, NAME##_group_n_neon, group_n, false, KIND)                   \
    LLM_OP_GEMV_N(NAME##_gemv_n_sdot, NAME##_group_n_sdot, group_n, true, KIND)
NEON_KIND(q8_0, Q8)
NEON_KIND(q4_0, Q4)
NEON_KIND(q5_0, Q5)
NEON_KIND(q4_1, Q41)
NEON_KIND(q5_1, Q51)

void llm_quant_pack_neon(struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu)
{
    bool dp = cpu & LLM_CPU_DOTPROD;
#define FAST(NAME, TYPE)                                                                           \
    mm[TYPE].gemv = un[TYPE].gemv = dp ? NAME##_gemv_sdot : NAME##_gemv_neon;                      \
    un[TYPE].unpack = NAME##_unpack_neon;                                                          \
    un[TYPE].gemv_n = dp ? NAME##_gemv_n_sdot : NAME##_gemv_n_neon;                                \
    un[TYPE].gemv_n_max = 8; /* AVX2's (the same shape); not measured on ARM */
    FAST(q8_0, LLM_TYPE_Q8_0)
    FAST(q4_0, LLM_TYPE_Q4_0)
    FAST(q5_0, LLM_TYPE_Q5_0)
    FAST(q4_1, LLM_TYPE_Q4_1)
    FAST(q5_1, LLM_TYPE_Q5_1)
#undef FAST
}

/* ==== the batched product's tile (mm.c: NG groups x NT tokens) ==== */

#define NG 2
#define NT 4

static inline int32_t ld32s(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/*
 * ng (<= NG) unpacked groups against nt tokens: y[t * ldy + 8 j + r], as
 * mm.c's units_avx2: each pair of a unit's elements for 8 rows (16 int16)
 * against the token's pair, exact 32-bit products summed per row; then the
 * unit's float steps. UL and MIN are constants in each caller.
 */
AI void units_neon(int UL, bool MIN, int64_t n, int ng, const int16_t *w16, size_t wstride, const float *S,
                   const float *M, size_t sstride, const void *act, size_t a_stride, int64_t nt, float *y,
                   int64_t ldy)
{
    int64_t nu = n / UL;
    for (int64_t t0 = 0; t0 < nt; t0 += NT) {
        int tn = nt - t0 < NT ? (int)(nt - t0) : NT;
        struct llm_act16 a[NT];
        for (int t = 0; t < NT; t++)
            a[t] = llm_act16_view((const uint8_t *)act + (size_t)(t0 + (t < tn ? t : 0)) * a_stride, n);
        float32x4_t acc[NG][NT][2];
        for (int j = 0; j < NG; j++)
            for (int t = 0; t < NT; t++)
                acc[j][t][0] = acc[j][t][1] = vdupq_n_f32(0);
        for (int64_t k = 0; k < nu; k++) {
            int32x4_t is[NG][NT][2];
            for (int j = 0; j < NG; j++)
                for (int t = 0; t < NT; t++)
                    is[j][t][0] = is[j][t][1] = vdupq_n_s32(0);
            const int16_t *wk = w16 + k * UL * ROWS;
            for (int p = 0; p < UL / 2; p++) {
                int16x8_t wv[NG][2];
                for (int j = 0; j < NG; j++)
                    for (int i = 0; i < 2; i++)
                        wv[j][i] = vld1q_s16(wk + (size_t)j * wstride + 16 * p + 8 * i);
                for (int t = 0; t < NT; t++) {
                    int16x8_t av = vreinterpretq_s16_s32(vdupq_n_s32(ld32s(a[t].q + k * UL + 2 * p)));
                    for (int j = 0; j < NG; j++)
                        for (int i = 0; i < 2; i++) {
                            int32x4_t lo = vmull_s16(vget_low_s16(wv[j][i]), vget_low_s16(av));
                            int32x4_t hi = vmull_high_s16(wv[j][i], av);
                            is[j][t][i] = vaddq_s32(is[j][t][i], vpaddq_s32(lo, hi));
                        }
                }
            }
            for (int j = 0; j < ng; j++)
                for (int i = 0; i < 2; i++) {
                    float32x4_t s = vld1q_f32(S + (size_t)j * sstride + k * ROWS + 4 * i);
                    float32x4_t m = MIN ? vld1q_f32(M + (size_t)j * sstride + k * ROWS + 4 * i) : s;
                    for (int t = 0; t < NT; t++) {
                        float32x4_t da = vdupq_n_f32(a[t].d[k * UL / 32]);
                        acc[j][t][i] = vfmaq_f32(acc[j][t][i], vcvtq_f32_s32(is[j][t][i]), vmulq_f32(s, da));
                        if (MIN) {
                            int32_t as = UL == 16 ? a[t].s16[k] : a[t].s16[2 * k] + a[t].s16[2 * k + 1];
                            acc[j][t][i] = vfmaq_f32(acc[j][t][i], vdupq_n_f32((float)as), vmulq_f32(m, da));
                        }
                    }
                }
        }
        for (int j = 0; j < ng; j++)
            for (int t = 0; t < tn; t++) {
                vst1q_f32(y + (t0 + t) * ldy + 8 * j, acc[j][t][0]);
                vst1q_f32(y + (t0 + t) * ldy + 8 * j + 4, acc[j][t][1]);
            }
    }
}

void llm_mm_units_neon(const struct llm_unpack_ops *u, int64_t n, int ng, const int16_t *w16, size_t wstride,
                       const float *S, const float *M, size_t sstride, const void *act, size_t a_stride, int64_t nt,
                       float *y, int64_t ldy)
{
    if (u->ul == 32 && !u->has_min)
        units_neon(32, false, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else if (u->ul == 32)
        units_neon(32, true, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else if (!u->has_min)
        units_neon(16, false, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
    else
        units_neon(16, true, n, ng, w16, wstride, S, M, sstride, act, a_stride, nt, y, ldy);
}

/* ==== the I16 activation quantizer (act.c) ==== */

#define QMAX 16383.0f

void llm_act16_quantize_neon(const float *x, void *dst, int64_t n)
{
    struct llm_act16_out o = llm_act16_out(dst, n);
    const float32x4_t top = vdupq_n_f32(QMAX), bot = vdupq_n_f32(-QMAX);
    const int16x8_t m127 = vdupq_n_s16(127);
    for (size_t b = 0; b < o.nb; b++, x += QK) {
        float32x4_t xv[8], m = vdupq_n_f32(0);
        for (int j = 0; j < 8; j++) {
            xv[j] = vld1q_f32(x + 4 * j);
            /* maxNum: a NaN element is dropped, as fmaxf drops it */
            m = vmaxnmq_f32(m, vabsq_f32(xv[j]));
        }
        float amax = vmaxnmvq_f32(m);
        float dd = amax / QMAX, id = dd != 0 ? 1.0f / dd : 0.0f;
        o.d[b] = dd;
        float32x4_t mul = vdupq_n_f32(id);
        int16x8_t q16[4];
        for (int j = 0; j < 4; j++) {
            int32x4_t i0, i1;
            /* clamped before rounding (a NaN gives -16383, maxNum(NaN, -Q) = -Q), nearest even */
            i0 = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(vmulq_f32(xv[2 * j], mul), bot), top));
            i1 = vcvtnq_s32_f32(vminnmq_f32(vmaxnmq_f32(vmulq_f32(xv[2 * j + 1], mul), bot), top));
            q16[j] = vcombine_s16(vmovn_s32(i0), vmovn_s32(i1));
            vst1q_s16(o.q + QK * b + 8 * j, q16[j]);
        }
        o.s16[2 * b] = vaddlvq_s16(q16[0]) + vaddlvq_s16(q16[1]);
        o.s16[2 * b + 1] = vaddlvq_s16(q16[2]) + vaddlvq_s16(q16[3]);
        for (int j = 0; j < 2; j++) {
            uint8x16_t l = vcombine_u8(vmovn_u16(vreinterpretq_u16_s16(vandq_s16(q16[2 * j], m127))),
                                       vmovn_u16(vreinterpretq_u16_s16(vandq_s16(q16[2 * j + 1], m127))));
            int8x16_t h = vcombine_s8(vmovn_s16(vshrq_n_s16(q16[2 * j], 7)), vmovn_s16(vshrq_n_s16(q16[2 * j + 1], 7)));
            vst1q_u8(o.lo + QK * b + 16 * j, l);
            vst1q_s8(o.hi + QK * b + 16 * j, h);
        }
    }
}

#endif
