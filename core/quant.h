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

#endif
