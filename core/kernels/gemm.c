/*
 * gemm.c - choosing BLIS's sub-configuration by cpuid before BLIS
 * initialises (fmm.c then takes the context's sgemm micro-kernel for the
 * float weights), and a row-major sgemm that only bench/bench_quant calls,
 * to print BLIS's own sgemm beside kvchat's products on its micro-kernel
 * (sgemm's order depends on the batch; see fmm.c).
 * Invariants: llm_gemm_setup runs before any other BLIS call (its callers
 * call it first; llm_gemm_arch does); a BLIS_ARCH_TYPE the user set is never
 * overridden; the same inputs and thread count give the same bits.
 */
#include "core/kernels/gemm.h"

/* blis.h itself is not -Wextra clean */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <blis.h>
#pragma GCC diagnostic pop
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int user_set_arch;

static int pick_arch(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    /* every AVX-512 CPU, AMD's (Zen 4, Zen 5) too: skx's 32 x 12 kernel.
     * Its one-token product (the weights its A operand) does 12 times the
     * arithmetic it needs, but on a quiet AMD EPYC with AVX-512, 2 threads,
     * 0.5B-shaped F32, it gave prefill 209 tok/s and decode 15.0 against
     * zen3's 145 and 16.3 (llama.cpp: 138 and 19.5): 44% more prefill for
     * 8% less decode. BLIS_ARCH_TYPE overrides it. */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return BLIS_ARCH_SKX;
    if (__builtin_cpu_is("amd") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return BLIS_ARCH_ZEN3;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return BLIS_ARCH_HASWELL;
#endif
    return -1;
}

static void setup(void)
{
    const char *env = getenv("BLIS_ARCH_TYPE");
    user_set_arch = env && *env;
    if (!user_set_arch) {
        int arch = pick_arch();
        if (arch >= 0) {
            char buf[16];
            snprintf(buf, sizeof buf, "%d", arch);
            setenv("BLIS_ARCH_TYPE", buf, 1);
        }
    }
    bli_init();
}

void llm_gemm_setup(void)
{
    pthread_once(&setup_once, setup);
}

const char *llm_gemm_arch(bool *user_set)
{
    llm_gemm_setup();
    if (user_set)
        *user_set = user_set_arch;
    return bli_arch_string(bli_arch_query_id());
}

/* threads <= 1: on the calling thread only (the caller may be one thread of
 * an OpenMP team); otherwise BLIS's own threads */
static rntm_t rntm_for(int threads)
{
    rntm_t r = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(threads > 1 ? threads : 1, &r);
    return r;
}

/* row-major: A (m x k, row stride lda), B (k x n, or n x k used transposed
 * when trans_b, row stride ldb), C (m x n, row stride ldc) */
static void sgemm(int threads, trans_t trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    float al = alpha, be = beta;
    rntm_t r = rntm_for(threads);
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, trans_b, (dim_t)m, (dim_t)n, (dim_t)k, &al, (float *)a, (inc_t)lda, 1,
                 (float *)b, (inc_t)ldb, 1, &be, c, (inc_t)ldc, 1, NULL, &r);
}

void llm_sgemm_nt(int threads, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    sgemm(threads, BLIS_TRANSPOSE, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void llm_sgemm_nn(int threads, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    sgemm(threads, BLIS_NO_TRANSPOSE, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
