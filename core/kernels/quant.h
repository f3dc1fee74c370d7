/*
 * quant.h - (internal to core/ and its tests) the tensor types' kernels:
 * row conversions between f32 and the stored types, the activation format
 * of quantized weights, and the matrix products of every weight type, each
 * defined by a scalar reference that every fast path matches bit for bit.
 *
 * Block layouts (little-endian, as GGUF stores them):
 *   F16   u16 IEEE half
 *   BF16  u16, the top half of an IEEE f32
 *   Q8_0  32 elements in 34 bytes: f16 d; i8 qs[32];   x[i] = d * qs[i]
 *
 * The legacy 32-element types (element i of a block, i < 32; nibble(i) is
 * the low nibble of qs[i] for i < 16, the high nibble of qs[i-16] above;
 * hbit(i) is bit i of the little-endian u32 qh):
 *   Q4_0  18 bytes: f16 d; u8 qs[16]            x = d * (nibble(i) - 8)
 *   Q4_1  20 bytes: f16 d, m; u8 qs[16]         x = d * nibble(i) + m
 *   Q5_0  22 bytes: f16 d; u8 qh[4]; u8 qs[16]  x = d * (nibble(i) + 16 hbit(i) - 16)
 *   Q5_1  24 bytes: f16 d, m; u8 qh[4]; qs[16]  x = d * (nibble(i) + 16 hbit(i)) + m
 *
 * The K-quants: super-blocks of QK_K = 256 elements, in sub-blocks of 16
 * (Q2_K, Q3_K, Q6_K) or 32 (Q4_K, Q5_K) elements that each have a small
 * integer scale (and min) multiplied by the super-block's f16 d (and dmin).
 * Within a super-block, quant bits are laid out in 128-element halves: for
 * 2-bit fields, byte l of a 32-byte group holds elements l, l+32, l+64, l+96
 * (bits 0-1, 2-3, 4-5, 6-7); for 4-bit fields, byte l of a 32-byte group
 * holds elements l (low nibble) and l+32 (high nibble).
 *   Q2_K  84 bytes: u8 scales[16] (low nibble scale, high nibble min);
 *         u8 qs[64] (2 bits); f16 d, dmin
 *         x = d * sc * q - dmin * m                      (16-element sub-blocks)
 *   Q3_K  110 bytes: u8 hmask[32]; u8 qs[64] (low 2 bits); u8 scales[12]
 *         (16 6-bit scales: low 4 bits in bytes 0-7, high 2 bits in 8-11);
 *         f16 d.  Element e's high bit is bit (e / 32) of hmask[e % 32];
 *         x = d * (sc - 32) * (q - (high bit ? 0 : 4))
 *   Q4_K  144 bytes: f16 d, dmin; u8 scales[12] (8 6-bit scales and 8 6-bit
 *         mins); u8 qs[128] (4 bits)
 *         x = d * sc * q - dmin * m                      (32-element sub-blocks)
 *   Q5_K  176 bytes: as Q4_K, then u8 qh[32] before qs: element e's fifth
 *         bit is bit (e / 32) of qh[e % 32]
 *   Q6_K  210 bytes: u8 ql[128] (low 4 bits); u8 qh[64] (high 2 bits);
 *         i8 scales[16]; f16 d
 *         x = d * sc * (q - 32)                          (16-element sub-blocks)
 * The exact bit positions are in quant-legacy.c and quant-k.c.
 *
 * ==== how a weight multiplies activations (one definition per type) ====
 *
 * Each output element y = W_r . x is computed by one fixed sequence of
 * float operations, whatever the path (portable or AVX2), the number of
 * tokens multiplied at once, the tile an element falls in or the thread
 * that computes it. That is what makes the engine batch-invariant.
 *
 * F32, F16, BF16 weights meet f32 activations. The n inputs fall in
 * k-blocks of LLM_FMM_KC = 256 elements from element 0 (the last one
 * shorter); each block is one chain of fused multiply-adds in increasing k
 * (c = fmaf(w_k, x_k, c), c starting at +0; F16/BF16 weights widen to f32
 * exactly), and the blocks are added in order: y = c_0, then y = y + c_b.
 * That is what BLIS's gemm micro-kernel computes when it is called on one
 * k-block at a time with alpha = 1 and beta = 0 for the first block, 1
 * after (fmm.c, checked at start-up); the portable path computes the same
 * in plain C. The weights are stored packed in panels of the micro-kernel's
 * width (llm_mm_ops.group_rows rows; element k of row j at k * rows + j),
 * in their own type.
 *
 * Quantized weights meet activations quantized to 15-bit integers (the I16
 * activation format below: x_i ~ d_a * q_i, one f32 d_a per 32 elements).
 * A weight type is a sequence of units (its blocks or sub-blocks of 16 or
 * 32 elements), unit u holding integers v_i with an exact f32 scale S_u
 * and, for types with mins, an exact f32 min M_u:  w_i = S_u v_i + M_u.
 * Then, with isum_u = sum v_i q_i and asum_u = sum q_i over the unit
 * (exact integers) and d_a the scale of the activation block holding it:
 *   acc = +0; for each unit in order:
 *       acc = fmaf((float)isum_u, S_u * d_a, acc);
 *       if the type has mins: acc = fmaf((float)asum_u, M_u * d_a, acc);
 *   y = acc.
 * The units, v, S and M of each type:
 *   Q8_0  32, v = qs,                    S = d
 *   Q4_0  32, v = nibble - 8,            S = d
 *   Q5_0  32, v = nibble + 16 hbit - 16, S = d
 *   Q4_1  32, v = nibble,                S = d, M = m
 *   Q5_1  32, v = nibble + 16 hbit,      S = d, M = m
 *   Q2_K  16, v = q,                     S = d sc, M = -(dmin m)
 *   Q3_K  16, v = q - (hbit ? 0 : 4),    S = d (sc - 32)
 *   Q4_K  32, v = q,                     S = d sc, M = -(dmin m)
 *   Q5_K  32, v = q + 16 hbit,           S = d sc, M = -(dmin m)
 *   Q6_K  16, v = q - 32,                S = d sc
 *   IQ4_NL 32, v = K[nibble],            S = d
 *   IQ4_XS 32, v = K[nibble],            S = d (ls - 32)    (K: quant-iq4.c's table)
 *   MXFP4  32, v = F[nibble],            S = 2^(e - 128)    (F: quant-iq4.c's table)
 * (products of an f16 and a 6- or 8-bit integer, or powers of two, so
 * exact in f32).
 *
 * Quantized weights are stored "packed": the rows of a matrix in groups of
 * LLM_PACK_ROWS = 8 (llm_mm_ops.group_rows = 0), block by block, so that one instruction works on 8
 * rows (layouts in quant-pack.c and quant-k.c); the model packs them at
 * load (packed.c), the last group padded with zero rows. The dequantized
 * values of a packed row are bit for bit those of the stored row.
 */
#ifndef KVCHAT_CORE_QUANT_H
#define KVCHAT_CORE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QK8_0 32
#define QK_K 256
struct block_q8_0 {
    uint16_t d;      /* f16 scale */
    int8_t qs[QK8_0];
};

float llm_fp16_to_fp32(uint16_t h);
uint16_t llm_fp32_to_fp16(float f); /* round to nearest even */
float llm_bf16_to_fp32(uint16_t h);
uint16_t llm_fp32_to_bf16(float f); /* round to nearest even, NaN kept quiet */

/* Quantize k floats (k a multiple of QK8_0) into k/QK8_0 blocks. */
void llm_quantize_row_q8_0(const float *x, struct block_q8_0 *y, int64_t k);

/* Dequantize k elements of a row of the given type into f32; k a multiple
 * of the type's block size. Returns -1 for a type not handled here. */
int llm_dequantize_row(uint32_t type, const void *row, float *y, int64_t k);

/* Quantize k floats into a row of the given type (F32, F16, BF16, Q8_0);
 * returns bytes written, or -1 for a type not handled here. */
int64_t llm_quantize_row(uint32_t type, const float *x, void *row, int64_t k);

/* ==== row conversions ====
 * to_float_ref is the scalar definition of a type's values; to_float gives
 * the same bits faster; from_float (F32, F16, BF16, Q8_0 and the legacy
 * types: round to nearest, for tests and the KV cache) may be NULL.
 */
struct llm_type_ops {
    void (*to_float_ref)(const void *x, float *y, int64_t k);
    void (*to_float)(const void *x, float *y, int64_t k);
    void (*from_float)(const float *x, void *y, int64_t k);
};
/* NULL where kvchat has no conversions for the type */
const struct llm_type_ops *llm_get_type_ops(uint32_t type);

/* ==== activations ====
 * LLM_ACT_F32: the f32 row itself.
 * LLM_ACT_I16: a row of n elements (n a multiple of 32), stored from a
 * 64-byte aligned address as
 *   f32 d[nb8]      per block b of 32: d = max|x| / 16383 (nb8: n/32 rounded
 *                   up to 8, the rest zero)
 *   i32 s16[ns8]    per 16 elements j: the sum of their q (ns8: n/16 rounded up to 8)
 *   i16 q[n]        q = nearest-even(x * (d ? 1 / d : 0)), clamped to +-16383
 *   u8  lo[n]       q & 127
 *   i8  hi[n]       q >> 7 (so q = 128 hi + lo)
 * The representation is per token: quantizing a row does not depend on
 * any other row.
 */
enum { LLM_ACT_F32 = 0, LLM_ACT_I16 = 1 };
size_t llm_act_bytes(int kind, int64_t n);
struct llm_act16 {
    const float *d;
    const int32_t *s16;
    const int16_t *q;
    const uint8_t *lo;
    const int8_t *hi;
};
struct llm_act16 llm_act16_view(const void *a, int64_t n);
/* the same, writable, for a quantizer: nb blocks; the padding after the nb
 * scales, after the 2 nb sums and after hi's n bytes is zeroed */
struct llm_act16_out {
    float *d;
    int32_t *s16;
    int16_t *q;
    uint8_t *lo;
    int8_t *hi;
    size_t nb;
};
struct llm_act16_out llm_act16_out(void *dst, int64_t n);
/* x (n floats) to the I16 format at dst; the fast one writes the same bytes */
void llm_act16_quantize_ref(const float *x, void *dst, int64_t n);
void llm_act16_quantize(const float *x, void *dst, int64_t n);

/* ==== matrix products ==== */

#define LLM_PACK_ROWS 8

/* a weight matrix as the kernels see it: n_out rows of n_in elements,
 * stored as rows (row_bytes each) or as packed groups (group_bytes each,
 * ceil(n_out / 8) of them) */
struct llm_mat {
    const uint8_t *data;
    uint32_t type;
    int64_t n_in, n_out;
    size_t row_bytes, group_bytes;
};

struct llm_mm_ops {
    int act;     /* LLM_ACT_F32 or LLM_ACT_I16 */
    bool packed; /* stored as groups of rows */
    int group_rows; /* packed: rows per group; 0 for LLM_PACK_ROWS (llm_mm_group_rows) */
    /* packed: bytes of a group of rows of n elements */
    size_t (*group_bytes)(int64_t n);
    /* packed: n_rows (1..group rows) stored rows (row i at rows + i * stride) of n
     * elements into a group; rows after n_rows are zero */
    void (*pack)(const void *rows, size_t stride, int64_t n_rows, int64_t n, void *group);
    /* packed: row r of a group as f32, bit for bit the stored row's to_float_ref */
    void (*group_row_to_float)(const void *group, int r, int64_t n, float *y);
    /* the definition of one element: W_r . a (a: activations of the kind above) */
    float (*dot_ref)(const struct llm_mat *w, int64_t r, const void *a);
    /* one token: y0[r - r0] = W_r . a for r in [r0, r1), y1[r - s0] for r
     * in [s0, s1) (the second range may be empty; packed: r0, s0 multiples
     * of 8, and of the group rows for speed; the two are read together, two
     * streams of weights) */
    void (*gemv)(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *a,
                 float *y0, float *y1);
    /* nt tokens (token t's activations at a + t * a_stride): y[t * ldy + r
     * - r0] = W_r . a_t for r in [r0, r1) (packed: r0 a multiple of 8),
     * using scratch of gemm_scratch(n_in) bytes (64-byte aligned) */
    void (*gemm)(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride, int64_t nt,
                 float *y, int64_t ldy, void *scratch);
    size_t (*gemm_scratch)(int64_t n_in);
};
/* NULL where kvchat cannot multiply with the type */
const struct llm_mm_ops *llm_get_mm_ops(uint32_t type);

/*
 * The entry points of the tables (llm_mm_ops, llm_unpack_ops), each a
 * static function NAME with the entry's signature that calls a kernel
 * written once for all kinds, f(BOUND..., the entry's arguments):
 *     LLM_OP_GEMV(q4_K_gemv_neon, kgemv, false, K4)
 * defines q4_K_gemv_neon(w, r0, r1, s0, s1, a, y0, y1) as
 * kgemv(false, K4, w, r0, r1, s0, s1, a, y0, y1).
 */
#define LLM_OP_PACK(NAME, f, ...)                                                                   \
    static void NAME(const void *rows, size_t stride, int64_t n_rows, int64_t n, void *g)           \
    {                                                                                               \
        f(__VA_ARGS__, rows, stride, n_rows, n, g);                                                 \
    }
#define LLM_OP_ROW(NAME, f, ...) \
    static void NAME(const void *g, int r, int64_t n, float *y) { f(__VA_ARGS__, g, r, n, y); }
#define LLM_OP_DOT(NAME, f, ...) \
    static float NAME(const struct llm_mat *w, int64_t r, const void *a) { return f(__VA_ARGS__, w, r, a); }
#define LLM_OP_GEMV(NAME, f, ...)                                                                   \
    static void NAME(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *a, \
                     float *y0, float *y1)                                                          \
    {                                                                                               \
        f(__VA_ARGS__, w, r0, r1, s0, s1, a, y0, y1);                                               \
    }
#define LLM_OP_GEMM(NAME, f, ...)                                                                   \
    static void NAME(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride, int64_t nt, \
                     float *y, int64_t ldy, void *scratch)                                          \
    {                                                                                               \
        f(__VA_ARGS__, w, r0, r1, a, a_stride, nt, y, ldy, scratch);                                \
    }
#define LLM_OP_UNPACK(NAME, f, ...) \
    static void NAME(const void *g, int64_t n, int16_t *w16, float *S, float *M) { f(__VA_ARGS__, g, n, w16, S, M); }
/* a gemv_n (llm_unpack_ops) by llm_mm_gemv_n_groups over group, and that
 * group function, f(BOUND..., g, n, T, a, out) */
#define LLM_OP_GEMV_N(NAME, group, f, ...)                                                          \
    static void group(const uint8_t *g, int64_t n, int T, const struct llm_act16 *a, float *out)    \
    {                                                                                               \
        f(__VA_ARGS__, g, n, T, a, out);                                                            \
    }                                                                                               \
    static void NAME(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride, int64_t nt, \
                     float *y, int64_t ldy)                                                         \
    {                                                                                               \
        llm_mm_gemv_n_groups(w, r0, r1, a, a_stride, nt, y, ldy, group);                            \
    }
static inline int llm_mm_group_rows(const struct llm_mm_ops *mm)
{
    return mm->group_rows ? mm->group_rows : LLM_PACK_ROWS;
}

/* ==== the float products (fmm.c) ==== */
#define LLM_FMM_KC 256
/* registers F32, F16, BF16 in mm: BLIS's micro-kernel after its self-test
 * (cpu != 0), else the portable definition */
void llm_fmm_init(struct llm_mm_ops *mm, unsigned cpu);
size_t llm_fmm_scratch(int64_t n_in);
/* the layout and kernel, for cache keys: "blis 0.9.0 zen3 mr6 nr16 kc256 wb16" */
const char *llm_fmm_layout(void);
int llm_fmm_panel_rows(void);
/* whether BLIS's micro-kernel runs the float products; its calls so far */
bool llm_fmm_blis(void);
uint64_t llm_fmm_ukr_calls(void);
/* the panels one-token products read through kvchat's GEMV in the
 * micro-kernel's order (x86 with AVX2 or AVX-512: there decode no longer
 * calls the micro-kernel) */
uint64_t llm_fmm_gemv_panels(void);

/* ==== inside the quant files ====
 * A packed type's groups unpack to int16 for the batched product (mm.c),
 * unit by unit: w16[((u * ul / 2 + p) * 8 + r) * 2 + j] = v of element
 * u * ul + 2p + j of row r; S[u * 8 + r] = S_u of row r; M likewise (types
 * with mins). The batched product is the definition above over these.
 */
struct llm_unpack_ops {
    int ul;        /* elements per unit: 16 or 32 */
    bool has_min;
    void (*unpack_ref)(const void *group, int64_t n, int16_t *w16, float *S, float *M);
    void (*unpack)(const void *group, int64_t n, int16_t *w16, float *S, float *M); /* same bits */
    /* the type's one-token product (llm_mm_ops.gemv), for few tokens */
    void (*gemv)(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1, const void *a,
                 float *y0, float *y1);
    /* few tokens (a verification pass): y[t * ldy + r - r0] = W_r . a_t for
     * r in [r0, r1) (r0 a multiple of 8), t < nt, each block of weights
     * loaded and widened once for up to LLM_GEMV_N_TILE tokens, each token's
     * float steps the GEMV's; NULL where the type has none (then the GEMV
     * runs once per token, or the groups are unpacked) */
    void (*gemv_n)(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride, int64_t nt,
                   float *y, int64_t ldy);
    int gemv_n_max; /* the most tokens for which gemv_n beats unpacking */
};
#define LLM_GEMV_N_TILE 4
/* the unpacking of a packed type (NULL for others) */
const struct llm_unpack_ops *llm_get_unpack_ops(uint32_t type);
/* the batched product of any packed type (mm.c): few tokens through the
 * type's gemv_n (or its gemv), more through its groups unpacked and
 * llm_mm_units */
void llm_mm_packed_gemm(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride,
                        int64_t nt, float *y, int64_t ldy, void *scratch);
size_t llm_mm_packed_scratch(int64_t n_in);
/* gemv_n for kernels that take one group at a time (AVX2, NEON): the
 * groups of [r0, r1) in order, LLM_GEMV_N_TILE tokens at a time; group()
 * gives a group's 8 results for T (1 .. LLM_GEMV_N_TILE) tokens a[0 .. T),
 * out[8 t + r] */
typedef void llm_gemv_n_group_fn(const uint8_t *g, int64_t n, int T, const struct llm_act16 *a, float *out);
void llm_mm_gemv_n_groups(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride,
                          int64_t nt, float *y, int64_t ldy, llm_gemv_n_group_fn *group);
/* the definition over unpacked units, for nt tokens and the 8 rows of one
 * group (y[t * ldy + r], r < 8): the scalar reference and the fast one */
void llm_mm_units_ref(const struct llm_unpack_ops *u, int64_t n, const int16_t *w16, const float *S,
                      const float *M, const void *a, size_t a_stride, int64_t nt, float *y, int64_t ldy);
/* the portable product of any packed type: every element by dot_ref */
void llm_mm_gemv_by_ref(const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                        const void *a, float *y0, float *y1);
void llm_mm_gemm_by_ref(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride,
                        int64_t nt, float *y, int64_t ldy, void *scratch);

/* CPU features the kernels choose by (bits of llm_cpu_features()). Setting
 * KVCHAT_CPU=generic|avx2|avx512|neon in the environment caps them (for
 * testing); an unknown value, or one this CPU cannot run, leaves the
 * portable kernels and sets llm_cpu_error(). AVX2 and NEON have kernels of
 * their own (NEON: the *-neon.c files, with SDOT where the CPU has the
 * dot product extension); AVX-512 ones need F, BW, VL, DQ and VNNI
 * (LLM_CPU_AVX512_KERNELS: the "avx512" path), and replace the AVX2 ones
 * where they exist; an AVX-512 CPU without VNNI runs the AVX2 kernels. */
enum llm_cpu_feature {
    LLM_CPU_AVX2 = 1u << 0,        /* with FMA and F16C */
    LLM_CPU_AVX512 = 1u << 1,      /* F, BW, VL, DQ */
    LLM_CPU_AVX512_VNNI = 1u << 2,
    LLM_CPU_AVX512_BF16 = 1u << 3,
    LLM_CPU_NEON = 1u << 4,        /* AArch64 Advanced SIMD */
    LLM_CPU_DOTPROD = 1u << 5,     /* AArch64 SDOT (HWCAP_ASIMDDP) */
};
#define LLM_CPU_AVX512_KERNELS (LLM_CPU_AVX512 | LLM_CPU_AVX512_VNNI)
static inline bool llm_cpu_has_avx512(unsigned cpu)
{
    return (cpu & LLM_CPU_AVX512_KERNELS) == LLM_CPU_AVX512_KERNELS;
}
unsigned llm_cpu_features(void);
/* "avx512", "avx2", "neon-dotprod", "neon" or "generic": the kernel path in use */
const char *llm_cpu_path(void);
/* NULL, or why KVCHAT_CPU was refused */
const char *llm_cpu_error(void);

/* Each kernel file fills its types' entries for the given features;
 * llm_get_type_ops and llm_get_mm_ops call them all once. */
void llm_quant_basic_init(struct llm_type_ops *t, struct llm_mm_ops *mm, unsigned cpu);
void llm_quant_legacy_init(struct llm_type_ops *t, unsigned cpu);
void llm_quant_pack_init(struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu);
void llm_quant_k_init(struct llm_type_ops *t, struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu);
void llm_quant_iq4_init(struct llm_type_ops *t, struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu);
void llm_mm_init(unsigned cpu);
void llm_act_init(unsigned cpu);

#if defined(__aarch64__)
/* the NEON kernels (quant-neon.c), installed by the init functions above */
void llm_quant_pack_neon(struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu);
void llm_quant_k_neon(struct llm_mm_ops *mm, struct llm_unpack_ops *un, unsigned cpu); /* quant-k-neon.c */
void llm_mm_units_neon(const struct llm_unpack_ops *u, int64_t n, int ng, const int16_t *w16, size_t wstride,
                       const float *S, const float *M, size_t sstride, const void *act, size_t a_stride, int64_t nt,
                       float *y, int64_t ldy);
void llm_act16_quantize_neon(const float *x, void *dst, int64_t n);
#endif

#endif
