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

#define QK_K 256

struct block_q8_K {
    float d;               /* scale */
    int8_t qs[QK_K];       /* quants, -127..127 */
    int16_t bsums[QK_K / 16]; /* sum of qs[16 j .. 16 j + 15] */
};

/*
 * The kernels of one tensor type, looked up with llm_get_type_ops. All
 * lengths (k, n) are element counts, multiples of block_size; x and y point
 * to whole blocks (in the memory map, or in caller buffers). A NULL member
 * means the type has no such kernel.
 *
 *   to_float_ref  the scalar reference dequantizer: the definition of truth.
 *   to_float      the fastest dequantizer for this CPU; bit-identical to
 *                 to_float_ref (feeds the f32 panels of prefill sgemm).
 *   from_float    quantize k floats into k / block_size blocks (round to
 *                 nearest; for activations, or for tests).
 *   vec_dot_type  what the other operand of vec_dot is: activations are
 *                 quantized once per GEMV with that type's from_float.
 *   vec_dot_ref   the reference dot product of n elements: x a row of this
 *                 type, y n elements of vec_dot_type. Its order of float
 *                 operations is part of its definition (see quant-legacy.c
 *                 and quant-k.c), so that
 *   vec_dot       the fastest kernel for this CPU returns bit-identical
 *                 results (same integer partial sums, same float order).
 * The kernels keep no state and allocate nothing: any thread may call them.
 */
typedef void (*llm_to_float_fn)(const void *x, float *y, int64_t k);
typedef void (*llm_from_float_fn)(const float *x, void *y, int64_t k);
typedef float (*llm_vec_dot_fn)(int64_t n, const void *x, const void *y);

struct llm_type_ops {
    uint32_t type;
    int64_t block_size;   /* elements per block */
    int64_t block_bytes;  /* bytes per block */
    llm_to_float_fn to_float_ref;
    llm_to_float_fn to_float;
    llm_from_float_fn from_float;
    uint32_t vec_dot_type;
    llm_vec_dot_fn vec_dot_ref;
    llm_vec_dot_fn vec_dot;
};

/* The kernels of a type for this CPU (llm_cpu_level()); NULL for a type
 * kvchat does not compute with. Borrowed: static storage. */
const struct llm_type_ops *llm_get_type_ops(uint32_t type);
/* The same with the kernels of a given level (enum llm_cpu_level), for
 * tests and benchmarks; NULL if this CPU cannot run that level. */
const struct llm_type_ops *llm_get_type_ops_level(uint32_t type, int level);

/* Q8_K, the activation type of the K-quants' vec_dot (k a multiple of QK_K) */
void llm_quantize_row_q8_K(const float *x, struct block_q8_K *y, int64_t k);
void llm_dequantize_row_q8_K(const struct block_q8_K *x, float *y, int64_t k);

/* ==== kernels, per file (registered in quant.c) ==== */
/* quant-legacy.c: Q4_0 Q4_1 Q5_0 Q5_1 (vec_dot against Q8_0) */
/* quant-k.c: Q2_K Q3_K Q4_K Q5_K Q6_K (vec_dot against Q8_K) */
/* Each file fills the entries of its types for one level. */
void llm_quant_legacy_ops(int level, struct llm_type_ops *ops /* indexed by type */);
void llm_quant_k_ops(int level, struct llm_type_ops *ops /* indexed by type */);

#endif
