/*
 * quant-k.c - the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (layouts in
 * core/kernels/quant.h): reference dequantizers of stored rows and AVX2 ones that
 * give the same bits; their packed forms (8 rows at a time) and the matrix
 * products on them against I16 activations, by the definition of quant.h
 * (units of 16 or 32 elements, each with its exact scale d * sc and, for
 * Q2_K, Q4_K and Q5_K, its min -(dmin * m)).
 *
 * Invariants:
 * - to_float on every path is bit-identical to the reference: per sub-block
 *   a scale dl = d * sc (and ml = dmin * m) in f32, then each element
 *   dl * q (- ml); no fused multiply-add. gguf-py's numpy dequantizers
 *   compute the same expressions (tests check goldens).
 * - A packed row dequantizes to the stored row's bits; the AVX2 GEMV and
 *   the unpacked batched product give dot_ref's bits for every element.
 * - Nothing here allocates or keeps state.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <string.h>

struct block_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
};
struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};
struct block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
};
struct block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};

_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K block size");
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K block size");
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K block size");
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K block size");
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K block size");

/* ==== field access: the bit layouts, element by element ==== */

/* the 2-bit field of element e (0..255) in Q2_K/Q3_K qs: each 128-element
 * half has 32 bytes; byte l holds elements l, l+32, l+64, l+96 */
static inline int q2_field(const uint8_t *qs, int e)
{
    int half = e / 128, r = e % 128;
    return (qs[32 * half + r % 32] >> (2 * (r / 32))) & 3;
}

/* the 4-bit field of element e in Q4_K/Q5_K qs: 32-byte group g holds
 * elements 64g + l (low nibble) and 64g + 32 + l (high nibble) */
static inline int q4_field(const uint8_t *qs, int e)
{
    int g = e / 64, r = e % 64;
    return r < 32 ? qs[32 * g + r] & 0x0f : qs[32 * g + r - 32] >> 4;
}

/* bit e / 32 of byte e % 32: Q3_K hmask and Q5_K qh */
static inline int high_bit(const uint8_t *h, int e)
{
    return (h[e % 32] >> (e / 32)) & 1;
}

/* Q6_K element e: low 4 bits from ql, high 2 from qh; 128-element halves,
 * within a half element r: ql byte r % 64 (nibble r / 64), qh byte r % 32
 * (bits 2 (r / 32)) */
static inline int q6_field(const uint8_t *ql, const uint8_t *qh, int e)
{
    int half = e / 128, r = e % 128;
    int lo = (ql[64 * half + r % 64] >> (4 * (r / 64))) & 0x0f;
    int hi = (qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
    return lo | hi << 4;
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7) from 12 bytes:
 * j < 4: low 6 bits of bytes j (scale) and j + 4 (min); j >= 4: low and
 * high nibble of byte j + 4, with the top 2 bits of bytes j - 4 (scale) and
 * j (min) above them */
static inline void k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q3_K: the 16 signed scales (6-bit field - 32): low 4 bits are nibble
 * j / 8 of byte j % 8, high 2 bits are bits 2 (j / 4) of byte 8 + j % 4 */
static inline void q3_scales(const uint8_t *s, int sc[16])
{
    for (int j = 0; j < 16; j++) {
        int lo = (s[j % 8] >> (4 * (j / 8))) & 0x0f;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (lo | hi << 4) - 32;
    }
}

/* ==== reference dequantizers ==== */

static void q2_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q2_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d), dmin = llm_fp16_to_fp32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            uint8_t s = x[b].scales[e / 16];
            float dl = d * (float)(s & 0x0f), ml = dmin * (float)(s >> 4);
            y[e] = dl * (float)q2_field(x[b].qs, e) - ml;
        }
    }
}

static void q3_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q3_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d);
        int sc[16];
        q3_scales(x[b].scales, sc);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)sc[e / 16];
            int q = q2_field(x[b].qs, e) - (high_bit(x[b].hmask, e) ? 0 : 4);
            y[e] = dl * (float)q;
        }
    }
}

static void q4_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q4_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d), dmin = llm_fp16_to_fp32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            int sc, m;
            k_scale_min(x[b].scales, e / 32, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            y[e] = dl * (float)q4_field(x[b].qs, e) - ml;
        }
    }
}

static void q5_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q5_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d), dmin = llm_fp16_to_fp32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            int sc, m;
            k_scale_min(x[b].scales, e / 32, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            int q = q4_field(x[b].qs, e) + 16 * high_bit(x[b].qh, e);
            y[e] = dl * (float)q - ml;
        }
    }
}

static void q6_K_to_float_ref(const void *vx, float *y, int64_t k)
{
    const struct block_q6_K *x = vx;
    for (int64_t b = 0; b < k / QK_K; b++, y += QK_K) {
        float d = llm_fp16_to_fp32(x[b].d);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)x[b].scales[e / 16];
            y[e] = dl * (float)(q6_field(x[b].ql, x[b].qh, e) - 32);
        }
    }
}


/* ==== packed super-blocks ====
 *
 * A group of 8 rows stores its super-blocks one after another; super-block
 * b of the group at b * sb_bytes, each laid out as (offsets in bytes):
 *   Q2_K (672)   0 u16 d[8]; 16 u16 dmin[8]; 32 u8 sc[16][8] (the stored
 *                scale bytes, unit-major); 160 qs: half h, chunk c (c < 8)
 *                at 160 + 256 h + 32 c
 *   Q3_K (912)   0 u16 d[8]; 16 i8 sc[16][8] (sc - 32); half h at 144 + 384 h:
 *                chunks c at + 32 c, high-bit planes p (p < 4) at + 256 + 32 p
 *   Q4_K (1184)  0 u16 d[8]; 16 u16 dmin[8]; 32 u8 sc[8][8]; 96 u8 m[8][8];
 *                160 qs: unit pair g, chunk c (c < 8) at 160 + 256 g + 32 c
 *   Q5_K (1440)  as Q4_K to 160; unit pair g at 160 + 320 g: fifth-bit
 *                planes P (P < 2) at + 32 P, chunks c at + 64 + 32 c
 *   Q6_K (1680)  0 u16 d[8]; 16 i8 sc[16][8]; half h at 144 + 768 h: chunks c
 *                (c < 16) at + 32 c, high-bit planes k (k < 8) at + 512 + 32 k
 * A chunk's byte 4r + e (row r, e < 4) is the row's stored byte at
 * 4c + e of the half's (Q2_K, Q3_K: qs + 32 h; Q6_K: ql + 64 h) or pair's
 * (qs + 32 g) bytes, so its fields are elements of 4 consecutive ones:
 *   Q2_K, Q3_K  bits 2k (k < 4): element 128 h + 32 k + 4c + e
 *   Q4_K, Q5_K  low nibble: 64 g + 4c + e (unit 2g); high: 64 g + 32 + 4c + e
 *   Q6_K        low nibble: 128 h + 4c + e; high: 128 h + 64 + 4c + e
 * A plane's byte 4r + e holds the high bits those fields lack, placed so
 * that one shift and a mask move each where its field needs it:
 *   Q3_K  plane p, bit 4 i + k: high bit of field k of chunk 2p + i
 *   Q5_K  plane P, bit i (bit 4 + i): fifth bit of the low (high) nibble of chunk 4P + i
 *   Q6_K  plane k, bits 4 i + 2 j (2 bits): top bits of the low (j = 0) or
 *         high (j = 1) nibble of chunk 2k + i
 */

enum { K2 = 0, K3 = 1, K4 = 2, K5 = 3, K6 = 4 };

static const size_t sb_bytes_of[] = {672, 912, 1184, 1440, 1680};
static const size_t stored_bytes_of[] = {84, 110, 144, 176, 210};
static int unit_len(int kind) { return kind == K4 || kind == K5 ? 32 : 16; }
static bool kind_has_min(int kind) { return kind == K2 || kind == K4 || kind == K5; }

static uint16_t ldu16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* where chunk c of half (or pair) h starts in a packed super-block */
static size_t chunk_off(int kind, int h, int c)
{
    switch (kind) {
    case K2: return 160 + 256 * (size_t)h + 32 * (size_t)c;
    case K3: return 144 + 384 * (size_t)h + 32 * (size_t)c;
    case K4: return 160 + 256 * (size_t)h + 32 * (size_t)c;
    case K5: return 160 + 320 * (size_t)h + 64 + 32 * (size_t)c;
    default: return 144 + 768 * (size_t)h + 32 * (size_t)c;
    }
}

static size_t plane_off(int kind, int h, int p)
{
    switch (kind) {
    case K3: return 144 + 384 * (size_t)h + 256 + 32 * (size_t)p;
    case K5: return 160 + 320 * (size_t)h + 32 * (size_t)p;
    default: return 144 + 768 * (size_t)h + 512 + 32 * (size_t)p;
    }
}

static void pack_sb(int kind, const uint8_t *const rows[8], int n_rows, uint8_t *out)
{
    memset(out, 0, sb_bytes_of[kind]);
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *x = rows[r];
        switch (kind) {
        case K2: {
            const struct block_q2_K *b = (const void *)x;
            memcpy(out + 2 * r, &b->d, 2);
            memcpy(out + 16 + 2 * r, &b->dmin, 2);
            for (int u = 0; u < 16; u++)
                out[32 + 8 * u + r] = b->scales[u];
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c++)
                    memcpy(out + chunk_off(kind, h, c) + 4 * r, b->qs + 32 * h + 4 * c, 4);
            break;
        }
        case K3: {
            const struct block_q3_K *b = (const void *)x;
            int sc[16];
            q3_scales(b->scales, sc);
            memcpy(out + 2 * r, &b->d, 2);
            for (int u = 0; u < 16; u++)
                out[16 + 8 * u + r] = (uint8_t)(int8_t)sc[u];
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 8; c++) {
                    memcpy(out + chunk_off(kind, h, c) + 4 * r, b->qs + 32 * h + 4 * c, 4);
                    for (int e = 0; e < 4; e++)
                        for (int k = 0; k < 4; k++) /* element 128 h + 32 k + 4c + e */
                            out[plane_off(kind, h, c / 2) + 4 * r + e] |=
                                (uint8_t)(((b->hmask[4 * c + e] >> (4 * h + k)) & 1) << (4 * (c % 2) + k));
                }
            break;
        }
        case K4:
        case K5: {
            const struct block_q4_K *b4 = (const void *)x;
            const uint8_t *qs = kind == K5 ? ((const struct block_q5_K *)(const void *)x)->qs : b4->qs;
            const uint8_t *qh = kind == K5 ? ((const struct block_q5_K *)(const void *)x)->qh : NULL;
            memcpy(out + 2 * r, &b4->d, 2);
            memcpy(out + 16 + 2 * r, &b4->dmin, 2);
            for (int u = 0; u < 8; u++) {
                int sc, m;
                k_scale_min(b4->scales, u, &sc, &m);
                out[32 + 8 * u + r] = (uint8_t)sc;
                out[96 + 8 * u + r] = (uint8_t)m;
            }
            for (int g = 0; g < 4; g++)
                for (int c = 0; c < 8; c++) {
                    memcpy(out + chunk_off(kind, g, c) + 4 * r, qs + 32 * g + 4 * c, 4);
                    for (int e = 0; qh && e < 4; e++) { /* elements 64g + 4c + e and + 32 */
                        int lo = (qh[4 * c + e] >> (2 * g)) & 1, hi = (qh[4 * c + e] >> (2 * g + 1)) & 1;
                        out[plane_off(kind, g, c / 4) + 4 * r + e] |= (uint8_t)(lo << (c % 4) | hi << (4 + c % 4));
                    }
                }
            break;
        }
        default: {
            const struct block_q6_K *b = (const void *)x;
            memcpy(out + 2 * r, &b->d, 2);
            for (int u = 0; u < 16; u++)
                out[16 + 8 * u + r] = (uint8_t)b->scales[u];
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 16; c++) {
                    memcpy(out + chunk_off(kind, h, c) + 4 * r, b->ql + 64 * h + 4 * c, 4);
                    for (int e = 0; e < 4; e++)
                        for (int j = 0; j < 2; j++) { /* element 128 h + 64 j + 4c + e */
                            int re = 64 * j + 4 * c + e;
                            int hi2 = (b->qh[32 * h + re % 32] >> (2 * (re / 32))) & 3;
                            out[plane_off(kind, h, c / 2) + 4 * r + e] |= (uint8_t)(hi2 << (4 * (c % 2) + 2 * j));
                        }
                }
            break;
        }
        }
    }
}

/* v of element e (< 256) of row r in a packed super-block */
static int kvalue(int kind, const uint8_t *sb, int r, int e)
{
    switch (kind) {
    case K2:
    case K3: {
        int h = e / 128, k = (e % 128) / 32, c = (e % 32) / 4, i = e % 4;
        int q = (sb[chunk_off(kind, h, c) + 4 * r + i] >> (2 * k)) & 3;
        if (kind == K2)
            return q;
        int hb = (sb[plane_off(kind, h, c / 2) + 4 * r + i] >> (4 * (c % 2) + k)) & 1;
        return q + 4 * hb - 4;
    }
    case K4:
    case K5: {
        int g = e / 64, w = e % 64, hi = w >= 32, c = (w % 32) / 4, i = w % 4;
        uint8_t byte = sb[chunk_off(kind, g, c) + 4 * r + i];
        int q = hi ? byte >> 4 : byte & 15;
        if (kind == K5)
            q += 16 * ((sb[plane_off(kind, g, c / 4) + 4 * r + i] >> (4 * hi + c % 4)) & 1);
        return q;
    }
    default: {
        int h = e / 128, w = e % 128, j = w >= 64, c = (w % 64) / 4, i = w % 4;
        uint8_t byte = sb[chunk_off(kind, h, c) + 4 * r + i];
        int lo = j ? byte >> 4 : byte & 15;
        int hi2 = (sb[plane_off(kind, h, c / 2) + 4 * r + i] >> (4 * (c % 2) + 2 * j)) & 3;
        return (lo | hi2 << 4) - 32;
    }
    }
}

/* S and M of unit u of row r (M 0 for types without mins) */
static void kscale(int kind, const uint8_t *sb, int r, int u, float *S, float *M)
{
    float d = llm_fp16_to_fp32(ldu16(sb + 2 * r));
    *M = 0;
    switch (kind) {
    case K2: {
        float dmin = llm_fp16_to_fp32(ldu16(sb + 16 + 2 * r));
        uint8_t s = sb[32 + 8 * u + r];
        *S = d * (float)(s & 15);
        *M = -(dmin * (float)(s >> 4));
        break;
    }
    case K4:
    case K5: {
        float dmin = llm_fp16_to_fp32(ldu16(sb + 16 + 2 * r));
        *S = d * (float)sb[32 + 8 * u + r];
        *M = -(dmin * (float)sb[96 + 8 * u + r]);
        break;
    }
    default: /* K3, K6: signed scales */
        *S = d * (float)(int8_t)sb[16 + 8 * u + r];
        break;
    }
}

static void kpack(int kind, const void *rows, size_t stride, int64_t n_rows, int64_t n, void *dst)
{
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *rp[8];
        for (int r = 0; r < 8; r++)
            rp[r] = (const uint8_t *)rows + (size_t)r * stride + (size_t)b * stored_bytes_of[kind];
        pack_sb(kind, rp, (int)n_rows, (uint8_t *)dst + (size_t)b * sb_bytes_of[kind]);
    }
}

static void krow_to_float(int kind, const void *group, int r, int64_t n, float *y)
{
    int ul = unit_len(kind);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *sb = (const uint8_t *)group + (size_t)b * sb_bytes_of[kind];
        for (int e = 0; e < QK_K; e++) {
            float S, M;
            kscale(kind, sb, r, e / ul, &S, &M);
            float x = S * (float)kvalue(kind, sb, r, e);
            /* the stored rows' dequantizers: dl * q - ml with ml = dmin * m;
             * for Q3_K/Q6_K dl * (q - off), the offset folded into v */
            y[b * QK_K + e] = kind_has_min(kind) ? x - (-M) : x;
        }
    }
}

static float kdot_ref(int kind, const struct llm_mat *w, int64_t r, const void *act)
{
    int64_t n = w->n_in;
    int ul = unit_len(kind), rr = (int)(r % 8);
    const uint8_t *g = w->data + (size_t)(r / 8) * w->group_bytes;
    struct llm_act16 a = llm_act16_view(act, n);
    float acc = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *sb = g + (size_t)b * sb_bytes_of[kind];
        for (int u = 0; u < QK_K / ul; u++) {
            int64_t e0 = b * QK_K + (int64_t)u * ul;
            int32_t isum = 0, asum = 0;
            for (int i = 0; i < ul; i++) {
                isum += kvalue(kind, sb, rr, u * ul + i) * a.q[e0 + i];
                asum += a.q[e0 + i];
            }
            float S, M, da = a.d[e0 / 32];
            kscale(kind, sb, rr, u, &S, &M);
            acc = fmaf((float)isum, S * da, acc);
            if (kind_has_min(kind))
                acc = fmaf((float)asum, M * da, acc);
        }
    }
    return acc;
}

static void kunpack_ref(int kind, const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    int ul = unit_len(kind), nu = QK_K / ul;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *sb = (const uint8_t *)group + (size_t)b * sb_bytes_of[kind];
        for (int u = 0; u < nu; u++) {
            int64_t uu = b * nu + u;
            for (int r = 0; r < 8; r++) {
                float s, m;
                kscale(kind, sb, r, u, &s, &m);
                S[uu * 8 + r] = s;
                if (kind_has_min(kind))
                    M[uu * 8 + r] = m;
                for (int i = 0; i < ul; i++)
                    w16[((uu * ul / 2 + i / 2) * 8 + r) * 2 + i % 2] = (int16_t)kvalue(kind, sb, r, u * ul + i);
            }
        }
    }
}

/* ==== AVX2 ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define SFX(name) name##_avx2
#include "core/kernels/quant-k-x86.h"
#undef SFX

static inline __attribute__((always_inline)) __m256i ld256(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline __attribute__((always_inline)) __m256i bc32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* 16-bit products of fields F (8 rows x 4 elements, unsigned bytes) with
 * the activation's four elements at lo/hi: *pl += F * lo, *ph += F * hi */
static inline __attribute__((always_inline)) void fprod(__m256i F, const uint8_t *lo, const int8_t *hi, __m256i *pl, __m256i *ph)
{
    *pl = _mm256_add_epi16(*pl, _mm256_maddubs_epi16(bc32(lo), F));
    *ph = _mm256_add_epi16(*ph, _mm256_maddubs_epi16(F, bc32(hi)));
}

/* 32-bit sums from the 16-bit ones */
static inline __attribute__((always_inline)) __m256i fwiden(__m256i pl, __m256i ph)
{
    return _mm256_add_epi32(_mm256_madd_epi16(pl, _mm256_set1_epi16(1)), _mm256_madd_epi16(ph, _mm256_set1_epi16(128)));
}

/* field vector of chunk c in half/pair h: which of its fields (sel), as bytes */
static inline __attribute__((always_inline)) __m256i kfield(int kind, const uint8_t *sb, int h, int c, int sel)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
    __m256i raw = ld256(sb + chunk_off(kind, h, c));
    switch (kind) {
    case K2:
    case K3: { /* sel = k: bits 2k, and (Q3_K) the high bit at 4 */
        __m256i q = sel == 0 ? _mm256_and_si256(raw, m3)
                  : sel == 1 ? _mm256_and_si256(_mm256_srli_epi16(raw, 2), m3)
                  : sel == 2 ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m3)
                             : _mm256_and_si256(_mm256_srli_epi16(raw, 6), m3);
        if (kind == K3) {
            __m256i pl = ld256(sb + plane_off(kind, h, c / 2));
            int bit = 4 * (c % 2) + sel; /* to bit 2 */
            __m256i t = bit == 0 ? _mm256_slli_epi16(pl, 2) : bit == 1 ? _mm256_slli_epi16(pl, 1)
                      : bit == 2 ? pl : bit == 3 ? _mm256_srli_epi16(pl, 1)
                      : bit == 4 ? _mm256_srli_epi16(pl, 2) : bit == 5 ? _mm256_srli_epi16(pl, 3)
                      : bit == 6 ? _mm256_srli_epi16(pl, 4) : _mm256_srli_epi16(pl, 5);
            q = _mm256_or_si256(q, _mm256_and_si256(t, _mm256_set1_epi8(4)));
        }
        return q;
    }
    case K4:
    case K5: { /* sel 0: low nibbles, 1: high */
        __m256i q = sel ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4) : _mm256_and_si256(raw, m4);
        if (kind == K5) {
            __m256i pl = ld256(sb + plane_off(kind, h, c / 4));
            int bit = 4 * sel + c % 4; /* to bit 4 */
            __m256i t = bit == 0 ? _mm256_slli_epi16(pl, 4) : bit == 1 ? _mm256_slli_epi16(pl, 3)
                      : bit == 2 ? _mm256_slli_epi16(pl, 2) : bit == 3 ? _mm256_slli_epi16(pl, 1)
                      : bit == 4 ? pl : bit == 5 ? _mm256_srli_epi16(pl, 1)
                      : bit == 6 ? _mm256_srli_epi16(pl, 2) : _mm256_srli_epi16(pl, 3);
            q = _mm256_or_si256(q, _mm256_and_si256(t, _mm256_set1_epi8(0x10)));
        }
        return q;
    }
    default: { /* Q6_K, sel j: low (0) or high (1) nibbles, top bits to 4-5 */
        __m256i q = sel ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4) : _mm256_and_si256(raw, m4);
        __m256i pl = ld256(sb + plane_off(kind, h, c / 2));
        int bit = 4 * (c % 2) + 2 * sel;
        __m256i t = bit == 0 ? _mm256_slli_epi16(pl, 4) : bit == 2 ? _mm256_slli_epi16(pl, 2)
                  : bit == 4 ? pl : _mm256_srli_epi16(pl, 2);
        return _mm256_or_si256(q, _mm256_and_si256(t, _mm256_set1_epi8(0x30)));
    }
    }
}

/* the chunks of unit u (0..nu) of a super-block: how many, and for the
 * i-th its half/pair h, chunk c, field sel and the unit's element at its start */
static inline __attribute__((always_inline)) void unit_chunk(int kind, int u, int i, int *h, int *c, int *sel, int *elt)
{
    switch (kind) {
    case K2:
    case K3: /* unit 8h + 2k + cc: chunks 4cc .. 4cc + 3, field k */
        *h = u / 8;
        *sel = (u % 8) / 2;
        *c = 4 * (u % 2) + i;
        *elt = 4 * i;
        break;
    case K4:
    case K5: /* unit 2g + sel: chunks 0..7 */
        *h = u / 2;
        *sel = u % 2;
        *c = i;
        *elt = 4 * i;
        break;
    default: /* unit 8h + 4j + jj: chunks 4jj .. 4jj + 3 of half h, nibble j */
        *h = u / 8;
        *sel = (u % 8) / 4;
        *c = 4 * (u % 4) + i;
        *elt = 4 * i;
        break;
    }
}

/* steps (chunks) whose 16-bit sums fit: 2 * 127 * max field per step */
static inline __attribute__((always_inline)) int steps_per_flush(int kind)
{
    switch (kind) {
    case K2: return 16;
    case K3: return 16;
    case K4: return 8;
    case K5: return 4;
    default: return 2;
    }
}

/* unit u's exact integer sums of field * q for the 8 rows */
static inline __attribute__((always_inline)) __m256i kunit_fsum(int kind, const uint8_t *sb, int u, const uint8_t *lo, const int8_t *hi)
{
    int ul = unit_len(kind), nchunks = ul / 4, spf = steps_per_flush(kind);
    __m256i s = _mm256_setzero_si256(), pl = s, ph = s;
#pragma GCC unroll 8
    for (int i = 0; i < nchunks; i++) {
        int h, c, sel, elt;
        unit_chunk(kind, u, i, &h, &c, &sel, &elt);
        fprod(kfield(kind, sb, h, c, sel), lo + elt, hi + elt, &pl, &ph);
        if ((i + 1) % spf == 0 || i + 1 == nchunks) {
            s = _mm256_add_epi32(s, fwiden(pl, ph));
            pl = ph = _mm256_setzero_si256();
        }
    }
    return s;
}

/* the float steps of unit u of a super-block: S (and M) for 8 rows */
static inline __attribute__((always_inline)) void kscale8(int kind, const uint8_t *sb, int u, __m256 *S, __m256 *M)
{
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb));
    switch (kind) {
    case K2: {
        __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sb + 32 + 8 * u)));
        __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 16)));
        *S = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(s, _mm256_set1_epi32(15))));
        *M = _mm256_xor_ps(_mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_srli_epi32(s, 4))), _mm256_set1_ps(-0.0f));
        break;
    }
    case K4:
    case K5: {
        __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 16)));
        __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sb + 32 + 8 * u)));
        __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sb + 96 + 8 * u)));
        *S = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
        *M = _mm256_xor_ps(_mm256_mul_ps(dmin, _mm256_cvtepi32_ps(m)), _mm256_set1_ps(-0.0f));
        break;
    }
    default: {
        __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sb + 16 + 8 * u)));
        *S = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
        *M = _mm256_setzero_ps();
        break;
    }
    }
}

/* one super-block of one group: acc through its units in order */
static inline __attribute__((always_inline)) __m256 ksb_step(int kind, const uint8_t *sb, const struct llm_act16 *a, int64_t b, __m256 acc)
{
    int ul = unit_len(kind), nu = QK_K / ul;
    int off = kind == K3 ? 4 : kind == K6 ? 32 : 0;
#pragma GCC unroll 16
    for (int u = 0; u < nu; u++) {
        int64_t e0 = b * QK_K + (int64_t)u * ul;
        __m256i isum = kunit_fsum(kind, sb, u, a->lo + e0, a->hi + e0);
        /* wrapping: a stale thread may read an activation being rewritten (pool.h) */
        int32_t asum = ul == 16 ? a->s16[e0 / 16] : (int32_t)((uint32_t)a->s16[e0 / 16] + (uint32_t)a->s16[e0 / 16 + 1]);
        if (off)
            isum = _mm256_sub_epi32(isum, _mm256_set1_epi32((int32_t)((uint32_t)off * (uint32_t)asum)));
        __m256 S, M, da = _mm256_set1_ps(a->d[e0 / 32]);
        kscale8(kind, sb, u, &S, &M);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(S, da), acc);
        if (kind_has_min(kind))
            acc = _mm256_fmadd_ps(_mm256_set1_ps((float)asum), _mm256_mul_ps(M, da), acc);
    }
    return acc;
}

static inline __attribute__((always_inline)) void kgemv(int kind, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
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
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
        for (int64_t b = 0; b < nsb; b++) {
            acc0 = ksb_step(kind, g0 + (size_t)b * sb_bytes_of[kind], &a, b, acc0);
            if (two)
                acc1 = ksb_step(kind, g1 + (size_t)b * sb_bytes_of[kind], &a, b, acc1);
        }
        float out0[8], out1[8];
        _mm256_storeu_ps(out0, acc0);
        _mm256_storeu_ps(out1, acc1);
        float *d0 = i < nr ? y0 + (ra - r0) : y1 + (sa - s0);
        for (int r = 0; r < 8 && base0 + r < end0; r++)
            d0[r] = out0[r];
        for (int r = 0; two && r < 8 && sa + r < s1; r++)
            y1[sa - s0 + r] = out1[r];
    }
}

/* a field vector's signed values (field - off) as pairs p, p + 1 of w16 */
static inline __attribute__((always_inline)) void store_pairs(__m256i F, int off, int16_t *w16p)
{
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m256i v = _mm256_sub_epi8(F, _mm256_set1_epi8((char)off));
    v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), 0xd8);
    _mm256_storeu_si256((__m256i *)w16p, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
    _mm256_storeu_si256((__m256i *)(w16p + 16), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
}

static inline __attribute__((always_inline)) void kunpack(int kind, const void *group, int64_t n, int16_t *w16, float *S, float *M)
{
    int ul = unit_len(kind), nu = QK_K / ul, off = kind == K3 ? 4 : kind == K6 ? 32 : 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *sb = (const uint8_t *)group + (size_t)b * sb_bytes_of[kind];
        for (int u = 0; u < nu; u++) {
            int64_t uu = b * nu + u;
            __m256 s, m;
            kscale8(kind, sb, u, &s, &m);
            _mm256_storeu_ps(S + uu * 8, s);
            if (kind_has_min(kind))
                _mm256_storeu_ps(M + uu * 8, m);
            for (int i = 0; i < ul / 4; i++) {
                int h, c, sel, elt;
                unit_chunk(kind, u, i, &h, &c, &sel, &elt);
                /* elements elt..elt+3 of the unit: pairs elt/2, elt/2 + 1 */
                store_pairs(kfield(kind, sb, h, c, sel), off, w16 + (uu * ul / 2 + elt / 2) * 16);
            }
        }
    }
}

#define KAVX2(NAME, KIND)                                                                          \
    LLM_OP_GEMV(NAME##_gemv_avx2, kgemv, KIND)                                                     \
    LLM_OP_UNPACK(NAME##_unpack_avx2, kunpack, KIND)
KAVX2(q2_K, K2)
KAVX2(q3_K, K3)
KAVX2(q4_K, K4)
KAVX2(q5_K, K5)
KAVX2(q6_K, K6)

#pragma GCC pop_options

/* ==== AVX-512 (F, BW, VL, DQ and VNNI) ====
 *
 * The same unit sums as AVX2, 512 bits at a time: a register holds chunks
 * c and c + 1 of one group (64 contiguous bytes: the low 256 bits chunk c,
 * the high chunk c + 1), their fields built as above (the high-bit planes,
 * shared by both chunks, shifted per half by vpsrlvw), and vpdpbusd adds
 * field times activation byte (lo, and hi apart) four at a time into 32
 * bits, exactly, against the unit's activation dwords broadcast into each
 * half (vpermd). Each group's two halves are added at the end of a unit and
 * two groups share one 16-lane register for the float steps, lane for lane
 * those of AVX2: the same bits. Four groups stream together, each
 * prefetched PF_AHEAD bytes ahead.
 */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

#ifndef PF_AHEAD
#define PF_AHEAD 1536
#endif
#define AI inline __attribute__((always_inline))

static AI __m512i bc2_512(__m512i v, int m)
{
    const __m512i half = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_epi32(_mm512_add_epi32(half, _mm512_set1_epi32(m)), v);
}

static AI __m512i fold2_512(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xee));
}

static AI __m512 ph16_512(const uint8_t *a, const uint8_t *b)
{
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                        _mm_loadu_si128((const __m128i *)b), 1);
    return _mm512_cvtph_ps(v);
}

/* 8 bytes at a, then 8 at b, as 16 32-bit integers (signed or not) */
static AI __m512i b16_512(const uint8_t *a, const uint8_t *b, bool sgn)
{
    __m128i v = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)a), _mm_loadl_epi64((const __m128i *)b));
    return sgn ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
}

/* bits s.. of each byte of the low 256 bits, t.. of the high, to bit 0: (x >> s or t) */
static AI __m512i shr2_512(__m512i x, int s, int t)
{
    __m512i c = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)s)), _mm256_set1_epi16((short)t), 1);
    return _mm512_srlv_epi16(x, c);
}

/* the fields of chunks c and c + 1 (c even) of half/pair h, field sel */
static AI __m512i kfield512(int kind, const uint8_t *sb, int h, int c, int sel)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3), m1 = _mm512_set1_epi8(1);
    __m512i raw = _mm512_loadu_si512((const void *)(sb + chunk_off(kind, h, c)));
    switch (kind) {
    case K2:
    case K3: {
        __m512i q = _mm512_and_si512(sel ? _mm512_srli_epi16(raw, 2 * sel) : raw, m3);
        if (kind == K3) { /* the high bit: bit sel (chunk c) or 4 + sel (c + 1) of plane c / 2, to bit 2 */
            __m512i pl = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(sb + plane_off(kind, h, c / 2))));
            q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(shr2_512(pl, sel, 4 + sel), m1), 2));
        }
        return q;
    }
    case K4:
    case K5: {
        __m512i q = _mm512_and_si512(sel ? _mm512_srli_epi16(raw, 4) : raw, m4);
        if (kind == K5) { /* bit 4 sel + c % 4 (+ 1 for c + 1) of plane c / 4, to bit 4 */
            __m512i pl = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(sb + plane_off(kind, h, c / 4))));
            int bit = 4 * sel + c % 4;
            q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(shr2_512(pl, bit, bit + 1), m1), 4));
        }
        return q;
    }
    default: { /* Q6_K: bits 2 sel (chunk c) or 4 + 2 sel (c + 1) of plane c / 2, to bits 4-5 */
        __m512i q = _mm512_and_si512(sel ? _mm512_srli_epi16(raw, 4) : raw, m4);
        __m512i pl = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(sb + plane_off(kind, h, c / 2))));
        return _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(shr2_512(pl, 2 * sel, 4 + 2 * sel), m3), 4));
    }
    }
}

/* S (and M) of unit u for two groups' super-blocks: 16 lanes */
static AI void kscale16(int kind, const uint8_t *sa, const uint8_t *sb, int u, __m512 *S, __m512 *M)
{
    __m512 d = ph16_512(sa, sb);
    switch (kind) {
    case K2: {
        __m512i s = b16_512(sa + 32 + 8 * u, sb + 32 + 8 * u, false);
        __m512 dmin = ph16_512(sa + 16, sb + 16);
        *S = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(s, _mm512_set1_epi32(15))));
        *M = _mm512_xor_ps(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_srli_epi32(s, 4))), _mm512_set1_ps(-0.0f));
        break;
    }
    case K4:
    case K5: {
        __m512 dmin = ph16_512(sa + 16, sb + 16);
        *S = _mm512_mul_ps(d, _mm512_cvtepi32_ps(b16_512(sa + 32 + 8 * u, sb + 32 + 8 * u, false)));
        *M = _mm512_xor_ps(_mm512_mul_ps(dmin, _mm512_cvtepi32_ps(b16_512(sa + 96 + 8 * u, sb + 96 + 8 * u, false))),
                           _mm512_set1_ps(-0.0f));
        break;
    }
    default:
        *S = _mm512_mul_ps(d, _mm512_cvtepi32_ps(b16_512(sa + 16 + 8 * u, sb + 16 + 8 * u, true)));
        *M = _mm512_setzero_ps();
        break;
    }
}

/* unit u of one group's super-block: its exact sums, 8 rows twice */
static AI __m512i kunit512(int kind, const uint8_t *sb, int u, const __m512i *A, const __m512i *H)
{
    int nchunks = unit_len(kind) / 4;
    __m512i sl = _mm512_setzero_si512(), sh = sl;
    for (int i = 0; i < nchunks; i += 2) {
        int h, c, sel, elt;
        unit_chunk(kind, u, i, &h, &c, &sel, &elt);
        __m512i F = kfield512(kind, sb, h, c, sel);
        sl = _mm512_dpbusd_epi32(sl, F, A[i / 2]);
        sh = _mm512_dpbusd_epi32(sh, F, H[i / 2]);
    }
    return _mm512_add_epi32(sl, _mm512_slli_epi32(sh, 7));
}

/* one super-block of ng (2 or 4) groups (a missing one repeats sb[0]) */
static AI void ksb_step512(int kind, int ng, const uint8_t *const sb[4], const struct llm_act16 *a, int64_t b,
                           __m512 *acc0, __m512 *acc1)
{
    int ul = unit_len(kind), nu = QK_K / ul;
    int off = kind == K3 ? 4 : kind == K6 ? 32 : 0;
#pragma GCC unroll 16
    for (int u = 0; u < nu; u++) {
        int64_t e0 = b * QK_K + (int64_t)u * ul;
        __m512i lv, hv, A[4], H[4];
        if (ul == 32) {
            lv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a->lo + e0)));
            hv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a->hi + e0)));
        } else {
            lv = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(a->lo + e0)));
            hv = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(a->hi + e0)));
        }
        for (int i = 0; i < ul / 8; i++) {
            A[i] = bc2_512(lv, 2 * i);
            H[i] = bc2_512(hv, 2 * i);
        }
        __m512i i01 = fold2_512(kunit512(kind, sb[0], u, A, H), kunit512(kind, sb[1], u, A, H)), i23 = i01;
        if (ng > 2)
            i23 = fold2_512(kunit512(kind, sb[2], u, A, H), kunit512(kind, sb[3], u, A, H));
        /* wrapping: a stale thread may read an activation being rewritten (pool.h) */
        int32_t asum = ul == 16 ? a->s16[e0 / 16] : (int32_t)((uint32_t)a->s16[e0 / 16] + (uint32_t)a->s16[e0 / 16 + 1]);
        if (off) {
            __m512i o = _mm512_set1_epi32((int32_t)((uint32_t)off * (uint32_t)asum));
            i01 = _mm512_sub_epi32(i01, o);
            i23 = _mm512_sub_epi32(i23, o);
        }
        __m512 S01, M01, S23, M23, da = _mm512_set1_ps(a->d[e0 / 32]);
        kscale16(kind, sb[0], sb[1], u, &S01, &M01);
        *acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i01), _mm512_mul_ps(S01, da), *acc0);
        if (ng > 2) {
            kscale16(kind, sb[2], sb[3], u, &S23, &M23);
            *acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i23), _mm512_mul_ps(S23, da), *acc1);
        }
        if (kind_has_min(kind)) {
            __m512 fa = _mm512_set1_ps((float)asum);
            *acc0 = _mm512_fmadd_ps(fa, _mm512_mul_ps(M01, da), *acc0);
            if (ng > 2)
                *acc1 = _mm512_fmadd_ps(fa, _mm512_mul_ps(M23, da), *acc1);
        }
    }
}

static AI void kgemv512(int kind, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                        const void *act, float *y0, float *y1)
{
    struct llm_act16 a = llm_act16_view(act, w->n_in);
    int64_t nr = (r1 - r0 + 7) / 8, ns = s1 > s0 ? (s1 - s0 + 7) / 8 : 0, nsb = w->n_in / QK_K;
    const size_t sbb = sb_bytes_of[kind];
    for (int64_t i = 0, ng; i < nr + ns; i += ng) {
        ng = nr + ns - i > 2 ? 4 : 2; /* four groups at a time, the last one or two two at a time */
        const uint8_t *g[4];
        float *dst[4];
        int cnt[4];
        for (int j = 0; j < ng; j++) {
            int64_t k = i + j < nr + ns ? i + j : i; /* a missing group repeats the first */
            int64_t base = k < nr ? r0 + k * 8 : s0 + (k - nr) * 8, end = k < nr ? r1 : s1;
            g[j] = w->data + (size_t)(base / 8) * w->group_bytes;
            dst[j] = k < nr ? y0 + (base - r0) : y1 + (base - s0);
            cnt[j] = i + j < nr + ns ? (int)(end - base < 8 ? end - base : 8) : 0;
        }
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
        for (int64_t b = 0; b < nsb; b++) {
            const uint8_t *sb[4] = {0};
            for (int j = 0; j < ng; j++) {
                sb[j] = g[j] + (size_t)b * sbb;
                for (size_t o = 0; o < sbb; o += 64)
                    _mm_prefetch((const char *)(sb[j] + PF_AHEAD + o), _MM_HINT_T0);
            }
            if (ng == 4)
                ksb_step512(kind, 4, sb, &a, b, &acc0, &acc1);
            else
                ksb_step512(kind, 2, sb, &a, b, &acc0, &acc1);
        }
        float out[32];
        _mm512_storeu_ps(out, acc0);
        _mm512_storeu_ps(out + 16, acc1);
        for (int j = 0; j < ng; j++)
            memcpy(dst[j], out + 8 * j, (size_t)cnt[j] * sizeof(float));
    }
}

#define KAVX512(NAME, KIND) LLM_OP_GEMV(NAME##_gemv_avx512, kgemv512, KIND)
KAVX512(q2_K, K2)
KAVX512(q3_K, K3)
KAVX512(q4_K, K4)
KAVX512(q5_K, K5)
KAVX512(q6_K, K6)

#undef AI
#pragma GCC pop_options
#endif

/* ==== registration ==== */

#define KFUNCS(NAME, KIND)                                                                         \
    static size_t NAME##_group_bytes(int64_t n) { return (size_t)(n / QK_K) * sb_bytes_of[KIND]; } \
    LLM_OP_PACK(NAME##_pack, kpack, KIND)                                                          \
    LLM_OP_ROW(NAME##_row_to_float, krow_to_float, KIND)                                           \
    LLM_OP_DOT(NAME##_dot_ref, kdot_ref, KIND)                                                     \
    LLM_OP_UNPACK(NAME##_unpack_ref, kunpack_ref, KIND)
KFUNCS(q2_K, K2)
KFUNCS(q3_K, K3)
KFUNCS(q4_K, K4)
KFUNCS(q5_K, K5)
KFUNCS(q6_K, K6)

#define KENTRY(NAME)                                                                               \
    ((struct llm_mm_ops){.act = LLM_ACT_I16, .packed = true, .group_bytes = NAME##_group_bytes,    \
                         .pack = NAME##_pack, .group_row_to_float = NAME##_row_to_float,           \
                         .dot_ref = NAME##_dot_ref, .gemv = llm_mm_gemv_by_ref, .gemm = llm_mm_packed_gemm, \
                         .gemm_scratch = llm_mm_packed_scratch})
#define KUNPACK(NAME, UL, MIN)                                                                     \
    ((struct llm_unpack_ops){UL, MIN, NAME##_unpack_ref, NAME##_unpack_ref, llm_mm_gemv_by_ref, NULL, 0})

void llm_quant_k_init(struct llm_type_ops *t, struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu)
{
    /* no weight quantizers for the K-quants: from_float is NULL */
    t[LLM_TYPE_Q2_K] = (struct llm_type_ops){q2_K_to_float_ref, q2_K_to_float_ref, NULL};
    t[LLM_TYPE_Q3_K] = (struct llm_type_ops){q3_K_to_float_ref, q3_K_to_float_ref, NULL};
    t[LLM_TYPE_Q4_K] = (struct llm_type_ops){q4_K_to_float_ref, q4_K_to_float_ref, NULL};
    t[LLM_TYPE_Q5_K] = (struct llm_type_ops){q5_K_to_float_ref, q5_K_to_float_ref, NULL};
    t[LLM_TYPE_Q6_K] = (struct llm_type_ops){q6_K_to_float_ref, q6_K_to_float_ref, NULL};
    mm[LLM_TYPE_Q2_K] = KENTRY(q2_K);
    mm[LLM_TYPE_Q3_K] = KENTRY(q3_K);
    mm[LLM_TYPE_Q4_K] = KENTRY(q4_K);
    mm[LLM_TYPE_Q5_K] = KENTRY(q5_K);
    mm[LLM_TYPE_Q6_K] = KENTRY(q6_K);
    un[LLM_TYPE_Q2_K] = KUNPACK(q2_K, 16, true);
    un[LLM_TYPE_Q3_K] = KUNPACK(q3_K, 16, false);
    un[LLM_TYPE_Q4_K] = KUNPACK(q4_K, 32, true);
    un[LLM_TYPE_Q5_K] = KUNPACK(q5_K, 32, true);
    un[LLM_TYPE_Q6_K] = KUNPACK(q6_K, 16, false);
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_Q2_K].to_float = q2_K_to_float_avx2;
        t[LLM_TYPE_Q3_K].to_float = q3_K_to_float_avx2;
        t[LLM_TYPE_Q4_K].to_float = q4_K_to_float_avx2;
        t[LLM_TYPE_Q5_K].to_float = q5_K_to_float_avx2;
        t[LLM_TYPE_Q6_K].to_float = q6_K_to_float_avx2;
#define KFAST(NAME, TYPE)                                                                          \
    mm[TYPE].gemv = un[TYPE].gemv = NAME##_gemv_avx2;                                              \
    un[TYPE].unpack = NAME##_unpack_avx2;
        KFAST(q2_K, LLM_TYPE_Q2_K)
        KFAST(q3_K, LLM_TYPE_Q3_K)
        KFAST(q4_K, LLM_TYPE_Q4_K)
        KFAST(q5_K, LLM_TYPE_Q5_K)
        KFAST(q6_K, LLM_TYPE_Q6_K)
#undef KFAST
    }
    if (llm_cpu_has_avx512(cpu)) {
        mm[LLM_TYPE_Q2_K].gemv = un[LLM_TYPE_Q2_K].gemv = q2_K_gemv_avx512;
        mm[LLM_TYPE_Q3_K].gemv = un[LLM_TYPE_Q3_K].gemv = q3_K_gemv_avx512;
        mm[LLM_TYPE_Q4_K].gemv = un[LLM_TYPE_Q4_K].gemv = q4_K_gemv_avx512;
        mm[LLM_TYPE_Q5_K].gemv = un[LLM_TYPE_Q5_K].gemv = q5_K_gemv_avx512;
        mm[LLM_TYPE_Q6_K].gemv = un[LLM_TYPE_Q6_K].gemv = q6_K_gemv_avx512;
    }
#elif defined(__aarch64__)
    if (cpu & LLM_CPU_NEON)
        llm_quant_k_neon(mm, un, cpu);
#else
    (void)cpu;
#endif
}
