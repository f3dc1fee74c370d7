/*
 * gemm.h - (internal to core/ and its benchmarks) BLIS's set-up (fmm.c and
 * tests) and its sgemm, for bench/bench_quant's comparison only.
 * All matrices are row-major f32 with the given row strides (in elements).
 */
#ifndef KVCHAT_CORE_GEMM_H
#define KVCHAT_CORE_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* Pick BLIS's sub-configuration by cpuid (skx, zen3, haswell) unless
 * BLIS_ARCH_TYPE is set, then initialise BLIS. Idempotent; thread-safe. */
void llm_gemm_setup(void);
/* the sub-configuration in use ("skx", ...); *user_set tells whether the
 * user's BLIS_ARCH_TYPE chose it */
const char *llm_gemm_arch(bool *user_set);
/* C = alpha * A * B^T + beta * C; A m x k, B n x k, C m x n. threads <= 1
 * runs on the calling thread alone (safe inside an OpenMP team); more uses
 * BLIS's threads. The result does not depend on the thread count. */
void llm_sgemm_nt(int threads, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                  const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* C = alpha * A * B + beta * C; A m x k, B k x n, C m x n */
void llm_sgemm_nn(int threads, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                  const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#endif
