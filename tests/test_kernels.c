/*
 * test_kernels.c - every type in the kernel table (llm_get_type_ops): the
 * fast to_float equals the reference bit for bit, the fast vec_dot agrees
 * with the reference within float rounding, and both agree with the
 * dot product of the dequantized rows. The table is filled by cpuid, so the
 * test runs itself again with KVCHAT_CPU=avx2 and KVCHAT_CPU=generic to
 * cover the other paths on this machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "core/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1024 /* a multiple of every block size (32, 256) */

static uint64_t rng = 88172645463325252ULL;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void test_types(void **state)
{
    (void)state;
    printf("kernel path: %s\n", llm_cpu_path());
    int checked = 0;
    float x[N], y[N], xr[N], yr[N], xf[N];
    static uint8_t qx[N * 4 + 64], qy[N * 4 + 64];
    for (uint32_t t = 0; t < LLM_TYPE_COUNT; t++) {
        const struct llm_type_ops *ops = llm_get_type_ops(t);
        if (!ops || !ops->from_float || !ops->to_float)
            continue;
        for (int rep = 0; rep < 20; rep++) {
            float scale = rep % 2 ? 0.01f : 3.0f;
            for (int i = 0; i < N; i++) {
                x[i] = frand() * scale;
                y[i] = frand();
            }
            if (rep == 3)
                memset(x, 0, sizeof x); /* all-zero blocks */
            ops->from_float(x, qx, N);
            ops->to_float(qx, xf, N);
            assert_non_null(ops->to_float_ref);
            ops->to_float_ref(qx, xr, N);
            assert_memory_equal(xf, xr, sizeof xf);
            /* quantization error is bounded: tightly for the 8-bit and float
             * types; the 2- to 6-bit types' own bounds are in test_quant */
            bool basic = t == LLM_TYPE_F32 || t == LLM_TYPE_F16 || t == LLM_TYPE_BF16 ||
                         t == LLM_TYPE_Q8_0 || t == LLM_TYPE_Q8_K;
            float tol = basic ? 0.07f : 0.75f;
            for (int i = 0; i < N; i++)
                assert_true(fabsf(xr[i] - x[i]) <= tol * scale + 1e-6f);
            if (!ops->vec_dot)
                continue;
            const struct llm_type_ops *vd = llm_get_type_ops(ops->vec_dot_type);
            assert_non_null(vd);
            vd->from_float(y, qy, N);
            vd->to_float(qy, yr, N);
            double exact = 0, mag = 0;
            for (int i = 0; i < N; i++) {
                exact += (double)xr[i] * yr[i];
                mag += fabs((double)xr[i] * yr[i]);
            }
            float fast = ops->vec_dot(N, qx, qy), ref = ops->vec_dot_ref(N, qx, qy);
            if (fabs(fast - exact) > 1e-5 * mag + 1e-30 || fabs(ref - exact) > 1e-5 * mag + 1e-30) {
                print_error("%s: vec_dot %g, reference %g, exact %g\n", llm_type_name(t), fast, ref, exact);
                fail();
            }
            /* deterministic */
            float again = ops->vec_dot(N, qx, qy);
            assert_memory_equal(&fast, &again, sizeof fast);
        }
        checked++;
    }
    assert_true(checked >= 4); /* at least F32, F16, BF16, Q8_0 */
}

/* blocked products (llm_get_mm_ops) agree with vec_dot for every result,
 * with odd block counts and row/token counts that are not whole tiles */
static void test_mul_mat(void **state)
{
    (void)state;
    static const int64_t ns[] = {96, 256, 896};
    int checked = 0;
    for (uint32_t t = 0; t < LLM_TYPE_COUNT; t++) {
        const struct llm_mm_ops *mm = llm_get_mm_ops(t);
        const struct llm_type_ops *ops = llm_get_type_ops(t);
        if (!mm)
            continue;
        const struct llm_type_ops *vd = llm_get_type_ops(ops->vec_dot_type);
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            int64_t n = ns[k], nr = 7, nt = 5;
            if (n % llm_type_block_size(t) || n % llm_type_block_size(ops->vec_dot_type))
                continue;
            size_t wrow = (size_t)(n / llm_type_block_size(t) * llm_type_block_bytes(t));
            size_t arow = (size_t)(n / llm_type_block_size(ops->vec_dot_type) *
                                   llm_type_block_bytes(ops->vec_dot_type));
            uint8_t *w = malloc(wrow * (size_t)nr), *a = malloc(arow * (size_t)nt);
            float *x = malloc((size_t)n * sizeof *x), y[7 * 5];
            for (int64_t r = 0; r < nr; r++) {
                for (int64_t i = 0; i < n; i++)
                    x[i] = frand() * (r + 1);
                ops->from_float(x, w + (size_t)r * wrow, n);
            }
            for (int64_t j = 0; j < nt; j++) {
                for (int64_t i = 0; i < n; i++)
                    x[i] = frand();
                vd->from_float(x, a + (size_t)j * arow, n);
            }
            void *scratch = aligned_alloc(64, (mm->scratch_bytes(n, nr) + 63) / 64 * 64);
            size_t prow = (mm->prepared_bytes(n) + 63) / 64 * 64;
            uint8_t *prep = aligned_alloc(64, prow * (size_t)nt);
            for (int64_t j = 0; j < nt; j++)
                mm->prepare(a + (size_t)j * arow, prep + (size_t)j * prow, n);
            mm->mul_mat(n, nr, nt, w, wrow, prep, prow, y, nr, scratch);
            for (int64_t j = 0; j < nt; j++)
                for (int64_t r = 0; r < nr; r++) {
                    float want = ops->vec_dot(n, w + (size_t)r * wrow, a + (size_t)j * arow);
                    float got = y[j * nr + r];
                    if (fabsf(got - want) > 1e-5f * (fabsf(want) + 1.0f) * (r + 1)) {
                        print_error("%s n=%lld: row %lld token %lld: mul_mat %g, vec_dot %g\n",
                                    llm_type_name(t), (long long)n, (long long)r, (long long)j, got, want);
                        fail();
                    }
                }
            /* one row and one token alone give the same bits */
            float y1;
            mm->mul_mat(n, 1, 1, w + 3 * wrow, wrow, prep + 2 * prow, prow, &y1, 1, scratch);
            assert_memory_equal(&y1, &y[2 * nr + 3], sizeof y1);
            free(prep);
            free(scratch);
            free(w);
            free(a);
            free(x);
            checked++;
        }
    }
    printf("mul_mat: %d cases\n", checked);
}

static void test_other_paths(void **state)
{
    (void)state;
    if (getenv("KVCHAT_CPU"))
        skip();
    assert_int_equal(system("KVCHAT_CPU=avx2 ./tests/test_kernels"), 0);
    assert_int_equal(system("KVCHAT_CPU=generic ./tests/test_kernels"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_mul_mat),
        cmocka_unit_test(test_other_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
