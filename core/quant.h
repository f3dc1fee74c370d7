/*
 * quant.h - (internal to core/ and its tests) scalar conversions between f32
 * and the stored tensor types: the reference definitions that SIMD kernels
 * are tested against.
 *
 * Block layouts (little-endian, as GGUF stores them):
 *   F16   u16 IEEE half
 *   BF16  u16, the top half of an IEEE f32
 *   Q8_0  32 elements in 34 bytes: f16 d; i8 qs[32];   x[i] = d * qs[i]
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

/*
 * Per-type operations, the one place kernels are looked up (ggml's
 * type_traits idea). A row is ne[0] elements of a tensor, stored in place in
 * the mapped file. Decode (GEMV) first converts the f32 activation vector to
 * the weight type's vec_dot_type with that type's from_float, once per
 * matrix, then calls vec_dot per row. Prefill (GEMM) converts weight panels
 * with to_float and hands them to BLIS sgemm.
 * Every function here is deterministic, and a fast (SIMD) version must give
 * the same result as its _ref version bit for bit (or to a bound its test
 * states).
 */
struct llm_type_ops {
    uint32_t type;
    /* k elements (a multiple of the block size) of a row into f32 */
    void (*to_float_ref)(const void *row, float *y, int64_t k);
    void (*to_float)(const void *row, float *y, int64_t k);
    /* k floats into a row of this type (quantizers: round to nearest) */
    void (*from_float)(const float *x, void *row, int64_t k);
    /* the type activations are converted to for vec_dot: F32, Q8_0, Q8_K... */
    uint32_t vec_dot_type;
    /* sum over n elements of row[i] * xq[i] (xq in vec_dot_type) */
    float (*vec_dot_ref)(int64_t n, const void *row, const void *xq);
    float (*vec_dot)(int64_t n, const void *row, const void *xq);
};

/* NULL for a type kvchat cannot compute with */
const struct llm_type_ops *llm_get_type_ops(uint32_t type);

/* Dequantize k elements of a row of the given type into f32; k a multiple
 * of the type's block size. Returns -1 for a type not handled here. */
int llm_dequantize_row(uint32_t type, const void *row, float *y, int64_t k);

/* Quantize k floats into a row of the given type (F32, F16, BF16, Q8_0);
 * returns bytes written, or -1 for a type not handled here. */
int64_t llm_quantize_row(uint32_t type, const float *x, void *row, int64_t k);

#endif
