/*
 * quant-pack.c - 8-row interleaved ("packed") forms of Q4_0, Q5_0 and Q8_0
 * weights, for decode on AVX2.
 *
 * Why: a GEMV on rows stored one after another spends most of its
 * instructions per 32-element block on things other than multiplying: the
 * activation block is loaded again for every row, the f16 scale of each
 * block is converted alone, the fifth bits are spread with a shuffle, the
 * lanes are widened and scaled block by block. Decode of a Q4_K_M file
 * (whose 896-wide tensors are Q5_0) spent 44% of its time in the Q5_0 dot
 * product at half the DRAM bandwidth. Packing the rows of a matrix in
 * groups of 8, block by block, lets one instruction work on 8 rows: the
 * activation bytes are broadcast once for all of them, 8 scales convert in
 * one instruction, the fifth bits are stored in the order a byte compare
 * needs, products of 4 steps are summed in 16 bits before widening, the
 * "-16" (or "-8") offset is one subtraction per block for all 8 rows, and
 * the 8 results land in the 8 lanes of one accumulator (no horizontal sums).
 *
 * The packed form of 8 rows has exactly their size and replaces them: group
 * g (rows 8g..8g+7) of a matrix starts at 8 g row_bytes. Per block b of 32
 * elements (elements 32b..32b+31 of every row), at (b * 8 * block bytes):
 *   u16 d[8]      the 8 rows' f16 scales
 *   u32 hb[8]     (Q5_0 only) dword k: bit 8e + r is the fifth bit of
 *                 element 4k + e of row r (e < 4)
 *   u8  qs[4][32] chunk c, byte 4r + e: the row's original qs[4c + e], i.e.
 *                 low nibble element 4c + e, high nibble element 16 + 4c + e
 * So chunk c read as bytes gives, in its low nibbles, elements 4c..4c+3 of
 * the 8 rows and, in its high nibbles, elements 16+4c..16+4c+3.
 * Q8_0 (34-byte blocks) is packed the same way without nibbles:
 *   u16 d[8]; i8 qs[8][32]  chunk k, byte 4r + e: element 4k + e of row r
 *
 * A packed dot product is defined by its scalar reference below, in this
 * order: per block, the exact integer sum s_r of q * a over the block (q
 * the 4- or 5-bit field minus 8 or 16, or the Q8_0 byte; the AVX2 kernel
 * forms the same integer as sum(field * a) minus 8 or 16 times sum(a)),
 * then acc_r = fmaf((float)s_r, d_r * d_a, acc_r), blocks in order. The
 * AVX2 kernel computes the same operations and matches it bit for bit.
 * (It is not the row-wise reference's order, whose 8 lanes sum separately;
 * both are within f32 rounding of the exact product, which tests check.)
 */
#include "core/llm.h"
#include "core/quant.h"

#include <math.h>
#include <string.h>

#define QK 32
#define ROWS LLM_PACK_ROWS

/* the kinds of packed group: Q4_0, Q5_0, Q8_0 */
enum { Q4 = 0, Q5 = 1, Q8 = 2 };

/* bytes of one block of one row, and of the 8 rows' block in a group */
static size_t block_bytes(int kind) { return kind == Q8 ? 34 : kind == Q5 ? 22 : 18; }
static size_t group_block_bytes(int kind) { return ROWS * block_bytes(kind); }
static size_t qs_offset(int kind) { return kind == Q5 ? 48 : 16; }

static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static uint32_t ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ==== packing (at model load) ==== */

/* the 4 bits of a nibble spread to bit 0 of 4 bytes */
static const uint32_t spread4[16] = {
    0x00000000, 0x00000001, 0x00000100, 0x00000101, 0x00010000, 0x00010001, 0x00010100, 0x00010101,
    0x01000000, 0x01000001, 0x01000100, 0x01000101, 0x01010000, 0x01010001, 0x01010100, 0x01010101,
};

/* scales, (Q5_0) fifth bits, then the quants 4 bytes per row at a time:
 * chunk c of the group block gets bytes 4c..4c+3 of each row's quants */
static void pack_rows(int kind, const void *rows, size_t stride, int64_t n, void *dst)
{
    const uint8_t *src = rows;
    uint8_t *out = dst;
    size_t bb = block_bytes(kind), qo = kind == Q5 ? 6 : 2;
    int chunks = kind == Q8 ? 8 : 4;
    for (int64_t b = 0; b < n / QK; b++, out += group_block_bytes(kind)) {
        uint32_t hb[8] = {0};
        for (int r = 0; r < ROWS; r++) {
            const uint8_t *blk = src + (size_t)r * stride + (size_t)b * bb;
            memcpy(out + 2 * r, blk, 2);
            for (int c = 0; c < chunks; c++)
                memcpy(out + qs_offset(kind) + 32 * c + 4 * r, blk + qo + 4 * c, 4);
            if (kind == Q5) {
                uint32_t qh = ld32(blk + 2);
                for (int k = 0; k < 8; k++)
                    hb[k] |= spread4[(qh >> (4 * k)) & 15] << r;
            }
        }
        if (kind == Q5)
            memcpy(out + 16, hb, sizeof hb);
    }
}

static void q4_0_pack(const void *rows, size_t stride, int64_t n, void *dst) { pack_rows(Q4, rows, stride, n, dst); }
static void q5_0_pack(const void *rows, size_t stride, int64_t n, void *dst) { pack_rows(Q5, rows, stride, n, dst); }
static void q8_0_pack(const void *rows, size_t stride, int64_t n, void *dst) { pack_rows(Q8, rows, stride, n, dst); }

/* ==== scalar references ==== */

/* element i of row r in a group block, as the signed integer its scale
 * multiplies: the 4- or 5-bit field minus 8 or 16, or the Q8_0 byte */
static int value(int kind, const uint8_t *gb, int r, int i)
{
    if (kind == Q8)
        return (int8_t)gb[16 + 32 * (i / 4) + 4 * r + i % 4];
    int c = (i % 16) / 4, e = i % 4;
    uint8_t byte = gb[qs_offset(kind) + 32 * c + 4 * r + e];
    int q = i < 16 ? byte & 15 : byte >> 4;
    if (kind == Q5)
        q |= (int)((ld32(gb + 16 + 4 * (i / 4)) >> (8 * e + r)) & 1) << 4;
    return q - (kind == Q5 ? 16 : 8);
}

static void to_float_ref(int kind, const void *group, float *y, int64_t ldy, int64_t n)
{
    const uint8_t *g = group;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = g + (size_t)b * group_block_bytes(kind);
        for (int r = 0; r < ROWS; r++) {
            float d = llm_fp16_to_fp32(ld16(gb + 2 * r));
            for (int i = 0; i < QK; i++)
                y[r * ldy + b * QK + i] = (float)value(kind, gb, r, i) * d;
        }
    }
}

static void dot_ref(int kind, int64_t n, const void *group, const void *act, float out[ROWS])
{
    const uint8_t *g = group;
    const struct block_q8_0 *a = act;
    float acc[ROWS] = {0};
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = g + (size_t)b * group_block_bytes(kind);
        float da = llm_fp16_to_fp32(a[b].d);
        for (int r = 0; r < ROWS; r++) {
            int32_t s = 0;
            for (int i = 0; i < QK; i++)
                s += value(kind, gb, r, i) * a[b].qs[i];
            acc[r] = fmaf((float)s, llm_fp16_to_fp32(ld16(gb + 2 * r)) * da, acc[r]);
        }
    }
    memcpy(out, acc, sizeof acc);
}

/* two groups: by definition the two products */
static void dot2_ref(int kind, int64_t n, const void *g0, const void *g1, const void *a, float *y0, float *y1)
{
    dot_ref(kind, n, g0, a, y0);
    dot_ref(kind, n, g1, a, y1);
}

#define REFS(NAME, KIND)                                                                           \
    static void NAME##_to_float_ref(const void *g, float *y, int64_t ldy, int64_t n)               \
    {                                                                                              \
        to_float_ref(KIND, g, y, ldy, n);                                                          \
    }                                                                                              \
    static void NAME##_dot_ref(int64_t n, const void *g, const void *a, float *y)                  \
    {                                                                                              \
        dot_ref(KIND, n, g, a, y);                                                                 \
    }                                                                                              \
    static void NAME##_dot2_ref(int64_t n, const void *g0, const void *g1, const void *a, float *y0, \
                                float *y1)                                                         \
    {                                                                                              \
        dot2_ref(KIND, n, g0, g1, a, y0, y1);                                                      \
    }
REFS(q4_0, Q4)
REFS(q5_0, Q5)
REFS(q8_0, Q8)

/* ==== AVX2 ==== */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

/* 0x10 in byte 4r + e where bit 8e + r of the dword at p is set */
static inline __m256i fifth_bits(const uint8_t *p, __m256i sel)
{
    __m256i v = _mm256_and_si256(_mm256_set1_epi32((int)ld32(p)), sel);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, sel), _mm256_set1_epi8(0x10));
}

/* the 8 rows' fields of elements 4k..4k+3, for k = c and k = c + 4 */
static inline void fields(int kind, const uint8_t *gb, int c, __m256i sel, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i raw = _mm256_loadu_si256((const __m256i *)(gb + qs_offset(kind) + 32 * c));
    *lo = _mm256_and_si256(raw, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if (kind == Q5) {
        *lo = _mm256_or_si256(*lo, fifth_bits(gb + 16 + 4 * c, sel));
        *hi = _mm256_or_si256(*hi, fifth_bits(gb + 16 + 4 * (c + 4), sel));
    }
}

/* byte 4r + e: 1 << r, the bit each byte of a fifth-bit dword is tested for */
static inline __m256i row_bits(void)
{
    return _mm256_setr_epi8(1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32,
                            32, 32, 64, 64, 64, 64, (char)128, (char)128, (char)128, (char)128);
}

/* off (16 or 8) times the sum of an activation block's 32 bytes, in all lanes */
static inline __m256i offset_sum(int kind, const uint8_t *aq)
{
    __m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)aq)),
                                   _mm256_set1_epi16(1));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sa), _mm256_extracti128_si256(sa, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_broadcastd_epi32(_mm_slli_epi32(s4, kind == Q5 ? 4 : 3));
}

/* one block of a Q4_0/Q5_0 group against activation block aq (scale dy,
 * offset sum corr): acc + (sum - corr) * d_r * dy, lane r */
static inline __m256 step_q45(int kind, const uint8_t *gb, const uint8_t *aq, __m256i corr, __m256 dy,
                              __m256 acc)
{
    const __m256i sel = row_bits(), ones16 = _mm256_set1_epi16(1);
    /* 16-bit sums of 4 steps each: |sum| <= 4 * 2 * 31 * 128 < 2^15 */
    __m256i s16lo = _mm256_setzero_si256(), s16hi = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        fields(kind, gb, c, sel, &lo, &hi);
        s16lo = _mm256_add_epi16(s16lo, _mm256_maddubs_epi16(lo, _mm256_set1_epi32((int)ld32(aq + 4 * c))));
        s16hi = _mm256_add_epi16(s16hi, _mm256_maddubs_epi16(hi, _mm256_set1_epi32((int)ld32(aq + 16 + 4 * c))));
    }
    __m256i s = _mm256_add_epi32(_mm256_madd_epi16(s16lo, ones16), _mm256_madd_epi16(s16hi, ones16));
    s = _mm256_sub_epi32(s, corr);
    __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb)), dy);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
}

/* one block of a Q8_0 group: |w| * sign(a, w) in vpmaddubsw, exact while
 * a != -128 (activations are quantized to -127..127) */
static inline __m256 step_q8(const uint8_t *gb, const uint8_t *aq, __m256 dy, __m256 acc)
{
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(gb + 16 + 32 * k));
        __m256i av = _mm256_set1_epi32((int)ld32(aq + 4 * k));
        __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(av, w));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones16));
    }
    __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb)), dy);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
}

/* One group (g1 NULL) or two, block by block
 * (two streams of weights keep more DRAM reads in flight); each group's
 * result is the same either way. */
static inline void dot_groups_avx2(int kind, int64_t n, const uint8_t *g0, const uint8_t *g1,
                                   const struct block_q8_0 *a, float *y0, float *y1)
{
    size_t gbb = group_block_bytes(kind);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *aq = (const uint8_t *)a[b].qs;
        __m256 dy = _mm256_set1_ps(_cvtsh_ss(a[b].d));
        if (kind == Q8) {
            acc0 = step_q8(g0 + (size_t)b * gbb, aq, dy, acc0);
            if (g1)
                acc1 = step_q8(g1 + (size_t)b * gbb, aq, dy, acc1);
        } else {
            __m256i corr = offset_sum(kind, aq);
            acc0 = step_q45(kind, g0 + (size_t)b * gbb, aq, corr, dy, acc0);
            if (g1)
                acc1 = step_q45(kind, g1 + (size_t)b * gbb, aq, corr, dy, acc1);
        }
    }
    _mm256_storeu_ps(y0, acc0);
    if (g1)
        _mm256_storeu_ps(y1, acc1);
}

/* 8 rows x 4 elements (byte 4r + e of q, signed) times the rows' scales d8,
 * stored at y + r * ldy */
static inline void store_rows4(__m256i q, __m256 d8, float *y, int64_t ldy)
{
    for (int p = 0; p < 4; p++) { /* rows 2p, 2p+1 */
        __m128i b8 = p < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
        if (p & 1)
            b8 = _mm_unpackhi_epi64(b8, b8);
        __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b8));
        __m256 dd = _mm256_permutevar8x32_ps(
            d8, _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1));
        f = _mm256_mul_ps(f, dd);
        _mm_storeu_ps(y + (2 * p) * ldy, _mm256_castps256_ps128(f));
        _mm_storeu_ps(y + (2 * p + 1) * ldy, _mm256_extractf128_ps(f, 1));
    }
}

static inline void to_float_avx2(int kind, const void *group, float *y, int64_t ldy, int64_t n)
{
    const uint8_t *g = group;
    const __m256i sel = row_bits(), offv = _mm256_set1_epi8((char)(kind == Q5 ? 16 : 8));
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = g + (size_t)b * group_block_bytes(kind);
        __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb));
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            fields(kind, gb, c, sel, &lo, &hi);
            store_rows4(_mm256_sub_epi8(lo, offv), d8, y + b * QK + 4 * c, ldy);
            store_rows4(_mm256_sub_epi8(hi, offv), d8, y + b * QK + 16 + 4 * c, ldy);
        }
    }
}

static void q8_0_to_float_avx2(const void *group, float *y, int64_t ldy, int64_t n)
{
    const uint8_t *g = group;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *gb = g + (size_t)b * group_block_bytes(Q8);
        __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb));
        for (int k = 0; k < 8; k++)
            store_rows4(_mm256_loadu_si256((const __m256i *)(gb + 16 + 32 * k)), d8, y + b * QK + 4 * k, ldy);
    }
}

#define DOTS_AVX2(NAME, KIND)                                                                      \
    static void NAME##_dot_avx2(int64_t n, const void *g, const void *a, float *y)                 \
    {                                                                                              \
        dot_groups_avx2(KIND, n, g, NULL, a, y, NULL);                                             \
    }                                                                                              \
    static void NAME##_dot2_avx2(int64_t n, const void *g0, const void *g1, const void *a, float *y0, \
                                 float *y1)                                                        \
    {                                                                                              \
        dot_groups_avx2(KIND, n, g0, g1, a, y0, y1);                                               \
    }
DOTS_AVX2(q4_0, Q4)
DOTS_AVX2(q5_0, Q5)
DOTS_AVX2(q8_0, Q8)
static void q4_0_to_float_avx2(const void *g, float *y, int64_t ldy, int64_t n) { to_float_avx2(Q4, g, y, ldy, n); }
static void q5_0_to_float_avx2(const void *g, float *y, int64_t ldy, int64_t n) { to_float_avx2(Q5, g, y, ldy, n); }

#pragma GCC pop_options
#endif

/* ==== registration ==== */

void llm_quant_pack_init(struct llm_pack_ops *t, unsigned cpu)
{
    t[LLM_TYPE_Q4_0] = (struct llm_pack_ops){q4_0_pack, q4_0_dot_ref, q4_0_dot_ref, q4_0_dot2_ref,
                                             q4_0_to_float_ref, q4_0_to_float_ref, false};
    t[LLM_TYPE_Q5_0] = (struct llm_pack_ops){q5_0_pack, q5_0_dot_ref, q5_0_dot_ref, q5_0_dot2_ref,
                                             q5_0_to_float_ref, q5_0_to_float_ref, false};
    t[LLM_TYPE_Q8_0] = (struct llm_pack_ops){q8_0_pack, q8_0_dot_ref, q8_0_dot_ref, q8_0_dot2_ref,
                                             q8_0_to_float_ref, q8_0_to_float_ref, false};
#ifdef HAVE_X86_KERNELS
    if (cpu & LLM_CPU_AVX2) {
        t[LLM_TYPE_Q4_0].dot = q4_0_dot_avx2;
        t[LLM_TYPE_Q4_0].dot2 = q4_0_dot2_avx2;
        t[LLM_TYPE_Q4_0].to_float = q4_0_to_float_avx2;
        t[LLM_TYPE_Q5_0].dot = q5_0_dot_avx2;
        t[LLM_TYPE_Q5_0].dot2 = q5_0_dot2_avx2;
        t[LLM_TYPE_Q5_0].to_float = q5_0_to_float_avx2;
        t[LLM_TYPE_Q8_0].dot = q8_0_dot_avx2;
        t[LLM_TYPE_Q8_0].dot2 = q8_0_dot2_avx2;
        t[LLM_TYPE_Q8_0].to_float = q8_0_to_float_avx2;
        t[LLM_TYPE_Q4_0].fast = t[LLM_TYPE_Q5_0].fast = true;
        /* with AVX-512 VNNI, Q8_0 rows stay as they are: prefill multiplies
         * them with its own blocked kernel (llm_get_mm_ops) */
        t[LLM_TYPE_Q8_0].fast = !(cpu & LLM_CPU_AVX512_VNNI);
    }
#else
    (void)cpu;
#endif
}
