/*
 * quant.h - (internal to core/ and its tests) scalar conversions between f32
 * and the stored tensor types: the reference definitions that SIMD kernels
 * are tested against.
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
 *   Q8_K  292 bytes (activations only, never in files): f32 d; i8 qs[256];
 *         i16 bsums[16] (sums of 16 consecutive qs)     x = d * qs[i]
 * The exact bit positions are in quant-legacy.c and quant-k.c.
 */
#ifndef KVCHAT_CORE_QUANT_H
#define KVCHAT_CORE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QK8_0 32
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

/* ==== kernels per type: the only way the engine touches tensor data ====
 *
 * A weight matrix of type T multiplies activations like this:
 *   prefill: rows of W -> to_float -> f32 panels -> BLIS sgemm;
 *   decode:  the activation vector -> ops(vec_dot_type)->from_float once per
 *            matrix, then vec_dot(W row, converted vector) for every row.
 * k and n are multiples of the type's block size. The *_ref functions are the
 * scalar definitions the fast ones are tested against; the fast ones are
 * picked once by cpuid (AVX-512, AVX2 or portable) and are deterministic:
 * the same inputs give the same bits on the same path. Any member may be NULL
 * where a type does not have it (an activation-only type such as Q8_K has no
 * vec_dot); the engine refuses weights whose type lacks to_float, vec_dot or
 * a vec_dot_type with from_float.
 */
struct llm_type_ops {
    uint32_t vec_dot_type; /* the type activations are converted to for vec_dot */
    void (*to_float_ref)(const void *x, float *y, int64_t k);
    void (*to_float)(const void *x, float *y, int64_t k);
    void (*from_float)(const float *x, void *y, int64_t k);
    /* sum over i < n of x[i] * y[i]; x of this type, y of vec_dot_type */
    float (*vec_dot_ref)(int64_t n, const void *x, const void *y);
    float (*vec_dot)(int64_t n, const void *x, const void *y);
};

/* The table entry for a type, or NULL where kvchat has no kernels for it. */
const struct llm_type_ops *llm_get_type_ops(uint32_t type);

/* Optional blocked products for prefill, for types that have them (a table
 * beside llm_type_ops so that struct stays as it is). Activations are
 * first converted to vec_dot_type (from_float), then to the kernel's own
 * form: prepare(row, dst, n) writes prepared_bytes(n) bytes (dst 64-byte
 * aligned). Then
 *   y[t * ldy + r] = sum over i < n of W_r[i] * A_t[i]
 * for nr rows of the type (row r at w + r * w_stride) and nt prepared rows
 * (row t at a + t * a_stride, a multiple of 64), using scratch of
 * scratch_bytes(n, nr) bytes (64-byte aligned) for this call alone. Where
 * present the engine uses it instead of to_float + sgemm. Each result
 * depends only on its row and activation row, not on nr or nt. */
struct llm_mm_ops {
    void (*mul_mat)(int64_t n, int64_t nr, int64_t nt, const void *w, size_t w_stride,
                    const void *a, size_t a_stride, float *y, int64_t ldy, void *scratch);
    size_t (*scratch_bytes)(int64_t n, int64_t nr);
    void (*prepare)(const void *a, void *dst, int64_t n);
    size_t (*prepared_bytes)(int64_t n);
};
/* NULL where the type has none on this CPU */
const struct llm_mm_ops *llm_get_mm_ops(uint32_t type);
/* quant-basic.c: Q8_0 x Q8_0 with AVX-512 VNNI */
void llm_quant_basic_mm_init(struct llm_mm_ops *table, unsigned cpu);

/* ==== 8-row interleaved ("packed") weights (quant-pack.c) ====
 * For some types decode is faster when the rows of a matrix are stored in
 * groups of LLM_PACK_ROWS, block by block (the layout is described in
 * quant-pack.c). The packed group of rows 8g..8g+7 has their size and takes
 * their place, at 8 g row_bytes. The model packs a weight at load when
 * llm_get_pack_ops gives ops for its type and n_out is a multiple of 8;
 * the engine then uses these instead of the type's vec_dot and to_float.
 */
#define LLM_PACK_ROWS 8
struct llm_pack_ops {
    /* 8 rows of n elements (row r at rows + r * stride) into a group at dst */
    void (*pack)(const void *rows, size_t stride, int64_t n, void *dst);
    /* y[r] = sum over i < n of W_r[i] * a[i] for the group's 8 rows; a of
     * the type's vec_dot_type. dot matches dot_ref bit for bit. */
    void (*dot_ref)(int64_t n, const void *group, const void *a, float *y);
    void (*dot)(int64_t n, const void *group, const void *a, float *y);
    /* the same for two groups at once, block by block (decode reads two
     * places of a matrix at a time: more DRAM reads in flight); y0 and y1
     * are bit for bit what dot gives for g0 and g1 */
    void (*dot2)(int64_t n, const void *g0, const void *g1, const void *a, float *y0, float *y1);
    /* the group's rows as f32, row r at y + r * ldy; both bit-identical to
     * the type's to_float_ref of the unpacked rows */
    void (*to_float_ref)(const void *group, float *y, int64_t ldy, int64_t n);
    void (*to_float)(const void *group, float *y, int64_t ldy, int64_t n);
    bool fast; /* dot is a SIMD kernel: packing pays on this CPU */
};
/* NULL where packing does not pay for the type on this CPU */
const struct llm_pack_ops *llm_get_pack_ops(uint32_t type);
/* fills Q4_0, Q5_0 and Q8_0 (reference pointers always, fast ones for cpu) */
void llm_quant_pack_init(struct llm_pack_ops *table, unsigned cpu);

/* CPU features the kernels choose by (bits of llm_cpu_features()). Setting
 * KVCHAT_CPU=generic|avx2 in the environment caps them (for testing). */
enum llm_cpu_feature {
    LLM_CPU_AVX2 = 1u << 0,        /* with FMA and F16C */
    LLM_CPU_AVX512 = 1u << 1,      /* F, BW, VL, DQ */
    LLM_CPU_AVX512_VNNI = 1u << 2,
    LLM_CPU_AVX512_BF16 = 1u << 3,
};
unsigned llm_cpu_features(void);
/* "avx512", "avx2" or "generic": the kernel path in use */
const char *llm_cpu_path(void);

/* Each quant file fills its types' entries (reference and fast pointers for
 * the given features); llm_get_type_ops calls them all once. */
void llm_quant_basic_init(struct llm_type_ops *table, unsigned cpu);
/* quant-legacy.c: Q4_0 Q4_1 Q5_0 Q5_1, vec_dot against Q8_0 */
void llm_quant_legacy_init(struct llm_type_ops *table, unsigned cpu);
/* quant-k.c: Q2_K Q3_K Q4_K Q5_K Q6_K, vec_dot against Q8_K; and Q8_K */
void llm_quant_k_init(struct llm_type_ops *table, unsigned cpu);

/* ==== Q8_K: the activation type of the K-quants' vec_dot ==== */
#define QK_K 256
struct block_q8_K {
    float d;                  /* scale */
    int8_t qs[QK_K];          /* quants, -127..127 */
    int16_t bsums[QK_K / 16]; /* sum of qs[16 j .. 16 j + 15] */
};
/* k a multiple of QK_K; round to nearest, the block's extreme maps to -127 */
void llm_quantize_row_q8_K(const float *x, struct block_q8_K *y, int64_t k);
void llm_dequantize_row_q8_K(const struct block_q8_K *x, float *y, int64_t k);

#endif
