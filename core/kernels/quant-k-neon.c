/*
 * quant-k-neon.c - the K-quants' (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) one-token
 * GEMV on AArch64 NEON, over the packed super-blocks of quant-k.c, with
 * the bits of the definition in quant.h (kdot_ref there), and the
 * unpacking of their groups for the batched product's tile (mm.c).
 *
 * Why this shape: it is quant-k.c's AVX2 GEMV unit for unit. A packed
 * chunk's byte 4r + e holds four consecutive elements' fields of row r in
 * each 32-bit lane (rows 0-3 in the chunk's first 16 bytes, 4-7 in the
 * next), so a unit's exact integer sum for 8 rows is SDOT of its chunks
 * against the activations' lo and hi bytes (q = 128 hi + lo), or the same
 * 4-byte dot products by widening multiplies where the CPU lacks SDOT
 * (quant-neon.c's dot4). NEON shifts bytes by per-byte counts, so the
 * high-bit planes move into place with one vshlq_u8 each. The float steps
 * are the definition's, unit by unit, on rows 0-3 and 4-7.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#if defined(__aarch64__) && defined(__GNUC__)
#include <arm_neon.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))

enum { K2 = 0, K3 = 1, K4 = 2, K5 = 3, K6 = 4 };

/* quant-k.c's layout of a packed super-block (there: sb_bytes_of,
 * chunk_off, plane_off, unit_chunk) */
static const size_t sb_bytes_of[] = {672, 912, 1184, 1440, 1680};
AI int unit_len(int kind) { return kind == K4 || kind == K5 ? 32 : 16; }
AI bool kind_has_min(int kind) { return kind == K2 || kind == K4 || kind == K5; }

AI size_t chunk_off(int kind, int h, int c)
{
    switch (kind) {
    case K2: return 160 + 256 * (size_t)h + 32 * (size_t)c;
    case K3: return 144 + 384 * (size_t)h + 32 * (size_t)c;
    case K4: return 160 + 256 * (size_t)h + 32 * (size_t)c;
    case K5: return 160 + 320 * (size_t)h + 64 + 32 * (size_t)c;
    default: return 144 + 768 * (size_t)h + 32 * (size_t)c;
    }
}

AI size_t plane_off(int kind, int h, int p)
{
    switch (kind) {
    case K3: return 144 + 384 * (size_t)h + 256 + 32 * (size_t)p;
    case K5: return 160 + 320 * (size_t)h + 32 * (size_t)p;
    default: return 144 + 768 * (size_t)h + 512 + 32 * (size_t)p;
    }
}

AI void unit_chunk(int kind, int u, int i, int *h, int *c, int *sel)
{
    switch (kind) {
    case K2:
    case K3: /* unit 8h + 2k + cc: chunks 4cc .. 4cc + 3, field k */
        *h = u / 8, *sel = (u % 8) / 2, *c = 4 * (u % 2) + i;
        break;
    case K4:
    case K5: /* unit 2g + sel: chunks 0..7 */
        *h = u / 2, *sel = u % 2, *c = i;
        break;
    default: /* unit 8h + 4j + jj: chunks 4jj .. 4jj + 3 of half h, nibble j */
        *h = u / 8, *sel = (u % 8) / 4, *c = 4 * (u % 4) + i;
        break;
    }
}

/* p's bits moved left by n (right for n < 0), byte by byte */
AI uint8x16_t shl8(uint8x16_t p, int n) { return vshlq_u8(p, vdupq_n_s8((int8_t)n)); }

/* the unsigned fields of chunk c of half/pair h, which sel, rows 4i .. 4i + 3 */
AI int8x16_t kfield(int kind, const uint8_t *sb, int h, int c, int sel, int i)
{
    uint8x16_t raw = vld1q_u8(sb + chunk_off(kind, h, c) + 16 * i), q;
    switch (kind) {
    case K2:
    case K3: /* bits 2 sel, and (Q3_K) the high bit to bit 2 */
        q = vandq_u8(shl8(raw, -2 * sel), vdupq_n_u8(3));
        if (kind == K3) {
            uint8x16_t pl = vld1q_u8(sb + plane_off(kind, h, c / 2) + 16 * i);
            q = vorrq_u8(q, vandq_u8(shl8(pl, 2 - (4 * (c % 2) + sel)), vdupq_n_u8(4)));
        }
        break;
    case K4:
    case K5: /* sel 0: low nibbles, 1: high; (Q5_K) the fifth bit to bit 4 */
        q = sel ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(0x0f));
        if (kind == K5) {
            uint8x16_t pl = vld1q_u8(sb + plane_off(kind, h, c / 4) + 16 * i);
            q = vorrq_u8(q, vandq_u8(shl8(pl, 4 - (4 * sel + c % 4)), vdupq_n_u8(0x10)));
        }
        break;
    default: { /* Q6_K: nibble sel, its top bits to bits 4-5 */
        q = sel ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(0x0f));
        uint8x16_t pl = vld1q_u8(sb + plane_off(kind, h, c / 2) + 16 * i);
        q = vorrq_u8(q, vandq_u8(shl8(pl, 4 - (4 * (c % 2) + 2 * sel)), vdupq_n_u8(0x30)));
        break;
    }
    }
    return vreinterpretq_s8_u8(q);
}

AI int8x16_t bc32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/* quant-neon.c's dot4: SDOT, or the same integers by widening multiplies */
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

/* unit u's exact sums of field * q for the 8 rows (s[0]: rows 0-3) */
AI void kunit_fsum(bool DP, int kind, const uint8_t *sb, int u, const uint8_t *lo, const int8_t *hi, int32x4_t s[2])
{
    int32x4_t sl[2] = {vdupq_n_s32(0), vdupq_n_s32(0)}, sh[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int i = 0; i < unit_len(kind) / 4; i++) {
        int h, c, sel;
        unit_chunk(kind, u, i, &h, &c, &sel);
        int8x16_t al = bc32(lo + 4 * i), ah = bc32(hi + 4 * i);
        for (int j = 0; j < 2; j++) {
            int8x16_t F = kfield(kind, sb, h, c, sel, j);
            sl[j] = dot4(DP, sl[j], F, al);
            sh[j] = dot4(DP, sh[j], F, ah);
        }
    }
    for (int j = 0; j < 2; j++)
        s[j] = vaddq_s32(sl[j], vshlq_n_s32(sh[j], 7));
}

/* 4 bytes at p widened to f32, unsigned or signed */
AI float32x4_t u8f(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(v));
    return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(b))));
}
AI float32x4_t s8f(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    int8x8_t b = vreinterpret_s8_u32(vdup_n_u32(v));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(b))));
}
AI float32x4_t ldh4(const uint8_t *p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

/* S and M of unit u for rows 4j .. 4j + 3 (quant-k.c's kscale) */
AI void kscale4(int kind, const uint8_t *sb, int u, int j, float32x4_t *S, float32x4_t *M)
{
    float32x4_t d = ldh4(sb + 8 * j);
    *M = vdupq_n_f32(0);
    switch (kind) {
    case K2: {
        uint32_t v;
        memcpy(&v, sb + 32 + 8 * u + 4 * j, 4);
        uint32x4_t s = vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(v)))));
        float32x4_t dmin = ldh4(sb + 16 + 8 * j);
        *S = vmulq_f32(d, vcvtq_f32_u32(vandq_u32(s, vdupq_n_u32(15))));
        *M = vnegq_f32(vmulq_f32(dmin, vcvtq_f32_u32(vshrq_n_u32(s, 4))));
        break;
    }
    case K4:
    case K5: {
        float32x4_t dmin = ldh4(sb + 16 + 8 * j);
        *S = vmulq_f32(d, u8f(sb + 32 + 8 * u + 4 * j));
        *M = vnegq_f32(vmulq_f32(dmin, u8f(sb + 96 + 8 * u + 4 * j)));
        break;
    }
    default:
        *S = vmulq_f32(d, s8f(sb + 16 + 8 * u + 4 * j));
        break;
    }
}

/* one super-block of one group: acc through its units in order */
AI void ksb_step(bool DP, int kind, const uint8_t *sb, const struct llm_act16 *a, int64_t b, float32x4_t acc[2])
{
    int ul = unit_len(kind), nu = QK_K / ul;
    int off = kind == K3 ? 4 : kind == K6 ? 32 : 0;
    for (int u = 0; u < nu; u++) {
        int64_t e0 = b * QK_K + (int64_t)u * ul;
        int32x4_t is[2];
        kunit_fsum(DP, kind, sb, u, a->lo + e0, a->hi + e0, is);
        /* wrapping: a stale thread may read an activation being rewritten (pool.h) */
        int32_t asum = ul == 16 ? a->s16[e0 / 16] : (int32_t)((uint32_t)a->s16[e0 / 16] + (uint32_t)a->s16[e0 / 16 + 1]);
        float32x4_t da = vdupq_n_f32(a->d[e0 / 32]);
        for (int j = 0; j < 2; j++) {
            if (off)
                is[j] = vsubq_s32(is[j], vdupq_n_s32((int32_t)((uint32_t)off * (uint32_t)asum)));
            float32x4_t S, M;
            kscale4(kind, sb, u, j, &S, &M);
            acc[j] = vfmaq_f32(acc[j], vcvtq_f32_s32(is[j]), vmulq_f32(S, da));
            if (kind_has_min(kind))
                acc[j] = vfmaq_f32(acc[j], vdupq_n_f32((float)asum), vmulq_f32(M, da));
        }
    }
}

/* quant-k.c's kgemv: groups of the two ranges in pairs, two weight streams */
AI void kgemv(bool DP, int kind, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
              const void *act, float *y0, float *y1)
{
    struct llm_act16 a = llm_act16_view(act, w->n_in);
    int64_t nr = (r1 - r0 + 7) / 8, ns = s1 > s0 ? (s1 - s0 + 7) / 8 : 0, nsb = w->n_in / QK_K;
    for (int64_t i = 0; i < (nr > ns ? nr : ns); i++) {
        int64_t ra = r0 + 8 * i, sa = s0 + 8 * i;
        bool two = i < nr && i < ns;
        int64_t base0 = i < nr ? ra : sa, end0 = i < nr ? r1 : s1;
        const uint8_t *g0 = w->data + (size_t)(base0 / 8) * w->group_bytes;
        const uint8_t *g1 = two ? w->data + (size_t)(sa / 8) * w->group_bytes : NULL;
        float32x4_t acc0[2] = {vdupq_n_f32(0), vdupq_n_f32(0)}, acc1[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
        for (int64_t b = 0; b < nsb; b++) {
            ksb_step(DP, kind, g0 + (size_t)b * sb_bytes_of[kind], &a, b, acc0);
            if (two)
                ksb_step(DP, kind, g1 + (size_t)b * sb_bytes_of[kind], &a, b, acc1);
        }
        float out0[8], out1[8];
        vst1q_f32(out0, acc0[0]), vst1q_f32(out0 + 4, acc0[1]);
        vst1q_f32(out1, acc1[0]), vst1q_f32(out1 + 4, acc1[1]);
        float *d0 = i < nr ? y0 + (ra - r0) : y1 + (sa - s0);
        for (int r = 0; r < 8 && base0 + r < end0; r++)
            d0[r] = out0[r];
        for (int r = 0; two && r < 8 && sa + r < s1; r++)
            y1[sa - s0 + r] = out1[r];
    }
}

/* quant-neon.c's store_pairs: 4 elements' values of 8 rows as two pairs */
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

/* a group unpacked for the tile (quant-k.c's kunpack_ref, the same values) */
AI void kunpack(int kind, const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    int ul = unit_len(kind), nu = QK_K / ul, off = kind == K3 ? 4 : kind == K6 ? 32 : 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *sb = (const uint8_t *)group + (size_t)b * sb_bytes_of[kind];
        for (int u = 0; u < nu; u++) {
            int64_t uu = b * nu + u;
            for (int j = 0; j < 2; j++) {
                float32x4_t s, m;
                kscale4(kind, sb, u, j, &s, &m);
                vst1q_f32(S + uu * 8 + 4 * j, s);
                if (kind_has_min(kind))
                    vst1q_f32(M + uu * 8 + 4 * j, m);
            }
            for (int i = 0; i < ul / 4; i++) {
                int h, c, sel;
                unit_chunk(kind, u, i, &h, &c, &sel);
                int8x16_t F[2] = {kfield(kind, sb, h, c, sel, 0), kfield(kind, sb, h, c, sel, 1)};
                /* elements 4i .. 4i + 3 of the unit: pairs 2i, 2i + 1 */
                store_pairs(F, off, w16 + (uu * ul / 2 + 2 * i) * 16);
            }
        }
    }
}

#define KNEON(NAME, KIND)                                                                          \
    LLM_OP_GEMV(NAME##_gemv_neon, kgemv, false, KIND)                                              \
    LLM_OP_GEMV(NAME##_gemv_sdot, kgemv, true, KIND)                                               \
    LLM_OP_UNPACK(NAME##_unpack_neon, kunpack, KIND)
KNEON(q2_K, K2)
KNEON(q3_K, K3)
KNEON(q4_K, K4)
KNEON(q5_K, K5)
KNEON(q6_K, K6)

void llm_quant_k_neon(struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu)
{
    bool dp = cpu & LLM_CPU_DOTPROD;
#define KFAST(NAME, TYPE)                                                                          \
    mm[TYPE].gemv = un[TYPE].gemv = dp ? NAME##_gemv_sdot : NAME##_gemv_neon;                      \
    un[TYPE].unpack = NAME##_unpack_neon;
    KFAST(q2_K, LLM_TYPE_Q2_K)
    KFAST(q3_K, LLM_TYPE_Q3_K)
    KFAST(q4_K, LLM_TYPE_Q4_K)
    KFAST(q5_K, LLM_TYPE_Q5_K)
    KFAST(q6_K, LLM_TYPE_Q6_K)
#undef KFAST
}

#endif
