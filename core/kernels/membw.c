/*
 * membw.c - measures DRAM read bandwidth, the bound that decode (GEMV over
 * every weight once per token) approaches: kvchat bench reports its weight
 * bandwidth against this figure. Each thread reads a contiguous share of a
 * buffer much larger than the caches, with 256-bit loads where the CPU has
 * AVX2 and 64-bit loads otherwise, and folds what it reads into a sum so
 * the loads cannot be dropped. With AVX2 each pass is made twice, reading
 * the share as one stream and as two (its halves at once, as decode reads
 * packed weights: on the 2-core VM two streams per core read up to 20%
 * more); the best pass counts. The buffer is written once first so its pages
 * are really mapped (reading untouched pages reads the shared zero page).
 */
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, a0);
    return out[0] ^ out[1] ^ out[2] ^ out[3];
}

/* the same over two halves of [p, p + n) at once: two streams */
__attribute__((target("avx2"))) static uint64_t read2_avx2(const uint8_t *p, size_t n)
{
    size_t h = n / 2 / 64 * 64;
    const uint8_t *q = p + h;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= h; i += 64) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(q + i)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(q + i + 32)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, a0);
    return out[0] ^ out[1] ^ out[2] ^ out[3];
}
#endif

static uint64_t read_portable(const uint8_t *p, size_t n)
{
    const uint64_t *q = (const uint64_t *)p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) {
        a0 ^= q[i];
        a1 ^= q[i + 1];
        a2 ^= q[i + 2];
        a3 ^= q[i + 3];
    }
    return a0 ^ a1 ^ a2 ^ a3;
}

static uint64_t read_share(const uint8_t *p, size_t n, int streams)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (llm_cpu_features() & LLM_CPU_AVX2)
        return streams == 2 ? read2_avx2(p, n) : read_avx2(p, n);
#endif
    (void)streams;
    return read_portable(p, n);
}

double llm_measure_membw(int n_threads, int64_t bytes, int reps)
{
    if (bytes <= 0)
        bytes = 256LL << 20;
    if (reps <= 0)
        reps = 1;
    if (n_threads <= 0)
        n_threads = omp_get_max_threads();
    size_t n = ((size_t)bytes + 4095) & ~(size_t)4095;
    uint8_t *buf = aligned_alloc(4096, n);
    if (!buf)
        return -1;
    memset(buf, 1, n);
    /* each thread's share, a multiple of 128 bytes */
    size_t share = n / (size_t)n_threads / 128 * 128;
    double best = 0;
    volatile uint64_t sink = 0;
    for (int r = -1; r < reps; r++) /* r = -1: warm-up */
        for (int streams = 1; streams <= 2; streams++) {
            uint64_t acc = 0;
            double t0 = omp_get_wtime();
#pragma omp parallel num_threads(n_threads) reduction(^ : acc)
            {
                int t = omp_get_thread_num();
                acc ^= read_share(buf + (size_t)t * share, share, streams);
            }
            double dt = omp_get_wtime() - t0;
            sink ^= acc;
            double bw = (double)share * (double)n_threads / dt;
            if (r >= 0 && bw > best)
                best = bw;
        }
    (void)sink;
    free(buf);
    return best;
}
