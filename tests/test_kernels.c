/*
 * test_kernels.c - every type with a quantizer in the kernel table
 * (llm_get_type_ops): the fast to_float equals the reference bit for bit
 * and the round trip is close. Attention (core/engine/attn.h) against a
 * double-precision loop written here, and batched: rows computed together
 * give the bits each gives alone, for any split of the rows; softmax
 * against double. The tables are filled by cpuid, so the test runs itself
 * again with KVCHAT_CPU=avx2 and KVCHAT_CPU=generic to cover the other
 * paths on this machine (the best being avx512 on a CPU with AVX-512 and
 * VNNI), and every path's attention and softmax results must be the same
 * bits (a hash of them all). (The matrix products are in test_quant.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/engine/attn.h"
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 1024 /* a multiple of every block size (32, 256) */

/* the bits of every attention and softmax result computed, in order */
static uint64_t attn_bits = 1469598103934665603ULL;
static void hash_bits(const float *x, int64_t n)
{
    const uint8_t *p = (const uint8_t *)x;
    for (size_t i = 0; i < (size_t)n * sizeof(float); i++)
        attn_bits = (attn_bits ^ p[i]) * 1099511628211ULL;
}

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
    float x[N], xr[N], xf[N];
    static uint8_t qx[N * 4 + 64];
    for (uint32_t t = 0; t < LLM_TYPE_COUNT; t++) {
        const struct llm_type_ops *ops = llm_get_type_ops(t);
        if (!ops || !ops->from_float || !ops->to_float)
            continue;
        for (int rep = 0; rep < 20; rep++) {
            float scale = rep % 2 ? 0.01f : 3.0f;
            for (int i = 0; i < N; i++)
                x[i] = frand() * scale;
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
                         t == LLM_TYPE_Q8_0;
            float tol = basic ? 0.07f : 0.75f;
            for (int i = 0; i < N; i++)
                assert_true(fabsf(xr[i] - x[i]) <= tol * scale + 1e-6f);
        }
        checked++;
    }
    assert_true(checked >= 4); /* at least F32, F16, BF16, Q8_0 */
}

/* softmax(scale q.K^T) V in double, from the f32 values of K and V */
static void attn_ref(const float *q, const float *k, const float *v, int64_t nq, int64_t hd, int64_t n,
                     float scale, double *out)
{
    double *s = malloc((size_t)n * sizeof *s);
    for (int64_t h = 0; h < nq; h++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            double d = 0;
            for (int64_t i = 0; i < hd; i++)
                d += (double)q[h * hd + i] * k[j * hd + i];
            s[j] = d * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int64_t j = 0; j < n; j++)
            sum += s[j] = exp(s[j] - mx);
        for (int64_t i = 0; i < hd; i++) {
            double o = 0;
            for (int64_t j = 0; j < n; j++)
                o += s[j] * v[j * hd + i];
            out[h * hd + i] = o / sum;
        }
    }
    free(s);
}

static void test_attention(void **state)
{
    (void)state;
    static const int64_t hds[] = {64, 128, 40, 36}, ns[] = {1, 7, 8, 9, 63, 64, 65, 200, 1000};
    static const int64_t nqs[] = {1, 7};
    const struct llm_type_ops *f16 = llm_get_type_ops(LLM_TYPE_F16);
    int checked = 0;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (size_t c = 0; c < 2; c++)
                for (uint32_t kt = 0; kt < 2; kt++) {
                    int64_t hd = hds[a], n = ns[b], nq = nqs[c];
                    float *q = malloc((size_t)(nq * hd) * sizeof *q);
                    float *k = malloc((size_t)(n * hd) * sizeof *k), *v = malloc((size_t)(n * hd) * sizeof *v);
                    uint16_t *kh = malloc((size_t)(n * hd) * 2), *vh = malloc((size_t)(n * hd) * 2);
                    float *out = malloc((size_t)(nq * hd) * sizeof *out);
                    double *want = malloc((size_t)(nq * hd) * sizeof *want);
                    float *scratch = aligned_alloc(64, (llm_attn_scratch_floats(nq, hd, n) * 4 + 63) / 64 * 64);
                    for (int64_t i = 0; i < nq * hd; i++)
                        q[i] = 3 * frand();
                    for (int64_t i = 0; i < n * hd; i++) {
                        k[i] = frand(), v[i] = frand();
                        if (kt == LLM_TYPE_F16) { /* the reference sees the f16 values */
                            kh[i] = llm_fp32_to_fp16(k[i]), vh[i] = llm_fp32_to_fp16(v[i]);
                            k[i] = llm_fp16_to_fp32(kh[i]), v[i] = llm_fp16_to_fp32(vh[i]);
                        }
                    }
                    float scale = 1.0f / sqrtf((float)hd);
                    struct llm_attn_job job = {
                        .q = q, .q_stride = nq * hd, .out = out, .out_stride = nq * hd, .n_rows = 1,
                        .nq = nq, .hd = hd, .n_kv = n,
                        .k = kt == LLM_TYPE_F16 ? (const void *)kh : k,
                        .v = kt == LLM_TYPE_F16 ? (const void *)vh : v,
                        .kv_type = kt, .f16_to_float = f16->to_float, .scale = scale, .scratch = scratch,
                    };
                    llm_attn_rows(&job);
                    hash_bits(out, nq * hd);
                    attn_ref(q, k, v, nq, hd, n, scale, want);
                    for (int64_t i = 0; i < nq * hd; i++)
                        if (!(fabs(out[i] - want[i]) <= 2e-6 + 2e-5 * fabs(want[i]))) {
                            print_error("attention hd %lld n %lld nq %lld kv %u [%lld]: %.9g, want %.9g\n",
                                        (long long)hd, (long long)n, (long long)nq, kt, (long long)i, out[i],
                                        want[i]);
                            fail();
                        }
                    checked++;
                    free(q), free(k), free(v), free(kh), free(vh), free(out), free(want), free(scratch);
                }
    printf("attention: %d cases\n", checked);
    /* softmax, including scores far below the maximum (exp underflows to 0) */
    for (int64_t n = 1; n < 300; n += 13) {
        float s[300];
        double e[300], sum = 0, mx = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            s[j] = j % 5 == 4 ? -200 + 10 * frand() : 20 * frand();
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int64_t j = 0; j < n; j++)
            sum += e[j] = exp(s[j] - mx);
        llm_softmax(s, n);
        hash_bits(s, n);
        for (int64_t j = 0; j < n; j++)
            if (!(fabs(s[j] - e[j] / sum) <= 1e-7 + 1e-6 * e[j] / sum)) {
                print_error("softmax n %lld [%lld]: %.9g, want %.9g\n", (long long)n, (long long)j, s[j],
                            e[j] / sum);
                fail();
            }
    }
}

/* a batch-of-rows case: nqe random query elements (q) and room for two
 * results of as many (all, one), nkv random K and V elements with their
 * f16 forms (kh, vh), attention scratch of ns floats */
struct rows_case {
    float *q, *k, *v, *all, *one, *scratch;
    uint16_t *kh, *vh;
};
static struct rows_case rows_case_init(int64_t nqe, int64_t nkv, size_t ns)
{
    struct rows_case c = {
        .q = malloc((size_t)nqe * sizeof(float)), .all = malloc((size_t)nqe * sizeof(float)),
        .one = malloc((size_t)nqe * sizeof(float)), .k = malloc((size_t)nkv * sizeof(float)),
        .v = malloc((size_t)nkv * sizeof(float)), .kh = malloc((size_t)nkv * 2), .vh = malloc((size_t)nkv * 2),
        .scratch = aligned_alloc(64, (ns * 4 + 63) / 64 * 64),
    };
    for (int64_t i = 0; i < nqe; i++)
        c.q[i] = 3 * frand();
    for (int64_t i = 0; i < nkv; i++) {
        c.k[i] = frand(), c.v[i] = frand();
        c.kh[i] = llm_fp32_to_fp16(c.k[i]), c.vh[i] = llm_fp32_to_fp16(c.v[i]);
    }
    return c;
}
static void rows_case_free(struct rows_case *c)
{
    free(c->q), free(c->k), free(c->v), free(c->kh), free(c->vh), free(c->all), free(c->one), free(c->scratch);
}

/* n_rows query rows at consecutive positions in one job give, row by row,
 * the bits each gives alone, and so does any split of them into jobs; with
 * a sliding window (and gemma2's soft-cap) too, and a windowed row gives
 * the bits of an unwindowed job on its keys alone (the rows from p -
 * window + 1): the window only moves where a row's keys start */
static void test_attention_rows(void **state)
{
    (void)state;
    static const int64_t hds[] = {64, 40}, starts[] = {1, 5, 63, 64, 130}, wins[] = {0, 7, 16, 70};
    static const float caps[] = {0, 5, 0, 0.5f};
    const struct llm_type_ops *f16 = llm_get_type_ops(LLM_TYPE_F16);
    const int64_t nq = 3, rows = 37, nmax = 130 + rows;
    int checked = 0;
    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < sizeof starts / sizeof *starts; b++)
            for (size_t w = 0; w < sizeof wins / sizeof *wins; w++)
            for (uint32_t kt = 0; kt < 2; kt++) {
                int64_t hd = hds[a], n0 = starts[b];
                size_t ns = llm_attn_scratch_floats(rows * nq, hd, nmax);
                struct rows_case rc = rows_case_init(rows * nq * hd, nmax * hd, ns);
                float *q = rc.q, *k = rc.k, *v = rc.v, *all = rc.all, *one = rc.one, *scratch = rc.scratch;
                uint16_t *kh = rc.kh, *vh = rc.vh;
                struct llm_attn_job job = {
                    .q_stride = nq * hd, .out_stride = nq * hd, .nq = nq, .hd = hd,
                    .k = kt == LLM_TYPE_F16 ? (const void *)kh : k,
                    .v = kt == LLM_TYPE_F16 ? (const void *)vh : v,
                    .kv_type = kt, .f16_to_float = f16->to_float, .scale = 1.0f / sqrtf((float)hd),
                    .window = wins[w], .softcap = caps[w], .scratch = scratch,
                };
                /* all rows at once; then in runs of 1, 2, 3, ... rows */
                job.q = q, job.out = all, job.n_rows = rows, job.n_kv = n0;
                llm_attn_rows(&job);
                hash_bits(all, rows * nq * hd);
                memset(one, 0, (size_t)(rows * nq * hd) * sizeof *one);
                for (int64_t r = 0, len = 1; r < rows; r += len, len++) {
                    int64_t m = rows - r < len ? rows - r : len;
                    job.q = q + r * nq * hd, job.out = one + r * nq * hd, job.n_rows = m, job.n_kv = n0 + r;
                    llm_attn_rows(&job);
                }
                if (memcmp(all, one, (size_t)(rows * nq * hd) * sizeof *all)) {
                    print_error("attention rows hd %lld start %lld window %lld kv %u: a batch of rows differs "
                                "from runs\n", (long long)hd, (long long)n0, (long long)wins[w], kt);
                    fail();
                }
                for (int64_t r = 0; wins[w] && r < rows; r++) {
                    int64_t n = n0 + r, lo = n > wins[w] ? n - wins[w] : 0;
                    size_t off = (size_t)(lo * hd) * (kt == LLM_TYPE_F16 ? 2 : 4);
                    struct llm_attn_job alone = job;
                    alone.q = q + r * nq * hd, alone.out = one + r * nq * hd, alone.n_rows = 1;
                    alone.n_kv = n - lo, alone.window = 0;
                    alone.k = (const uint8_t *)job.k + off, alone.v = (const uint8_t *)job.v + off;
                    llm_attn_rows(&alone);
                    if (memcmp(all + r * nq * hd, one + r * nq * hd, (size_t)(nq * hd) * sizeof *all)) {
                        print_error("attention hd %lld start %lld window %lld kv %u row %lld: differs from its "
                                    "keys alone\n", (long long)hd, (long long)n0, (long long)wins[w], kt,
                                    (long long)r);
                        fail();
                    }
                }
                checked++;
                rows_case_free(&rc);
            }
    printf("attention rows: %d cases\n", checked);
}

/* the shapes the AVX-512 kernels group differently: head dims 64 to 512,
 * query heads per KV head that fill a group of 6 (scores) or 4 (P V) or
 * leave a rest, rows whose spans start off a key pair (a window) or end
 * off a group of eight (odd depths), sinks; every result goes into the
 * hash that test_other_paths compares with the generic definition's, and
 * each batch must give the bits of its rows one at a time */
static void test_attention_groups(void **state)
{
    (void)state;
    static const int64_t hds[] = {64, 128, 256, 512}, nqs[] = {1, 4, 7, 13}, n0s[] = {1, 6, 63, 130};
    static const int64_t wins[] = {0, 0, 5, 40};
    const struct llm_type_ops *f16 = llm_get_type_ops(LLM_TYPE_F16);
    const int64_t rows = 9, nmax = 130 + rows;
    int checked = 0;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++) {
                int64_t hd = hds[a], nq = nqs[b], n0 = n0s[c], win = wins[(a + b + c) % 4];
                uint32_t kt = (a + c) % 2;
                bool sinks = (b + c) % 2;
                size_t ns = llm_attn_scratch_floats(rows * nq, hd, nmax);
                struct rows_case rc = rows_case_init(rows * nq * hd, nmax * hd, ns);
                float *q = rc.q, *k = rc.k, *v = rc.v, *all = rc.all, *one = rc.one, *scratch = rc.scratch, sink[13];
                uint16_t *kh = rc.kh, *vh = rc.vh;
                for (int64_t h = 0; h < nq; h++)
                    sink[h] = 4 * frand();
                struct llm_attn_job job = {
                    .q = q, .q_stride = nq * hd, .out = all, .out_stride = nq * hd, .n_rows = rows, .nq = nq,
                    .hd = hd, .n_kv = n0, .k = kt == LLM_TYPE_F16 ? (const void *)kh : k,
                    .v = kt == LLM_TYPE_F16 ? (const void *)vh : v, .kv_type = kt,
                    .f16_to_float = f16->to_float, .scale = 1.0f / sqrtf((float)hd), .window = win,
                    .sinks = sinks ? sink : NULL, .scratch = scratch,
                };
                llm_attn_rows(&job);
                hash_bits(all, rows * nq * hd);
                for (int64_t r = 0; r < rows; r++) {
                    job.q = q + r * nq * hd, job.out = one + r * nq * hd, job.n_rows = 1, job.n_kv = n0 + r;
                    llm_attn_rows(&job);
                }
                if (memcmp(all, one, (size_t)(rows * nq * hd) * sizeof *all)) {
                    print_error("attention groups hd %lld nq %lld start %lld window %lld: a batch of rows differs "
                                "from its rows alone\n", (long long)hd, (long long)nq, (long long)n0, (long long)win);
                    fail();
                }
                checked++;
                rows_case_free(&rc);
            }
    printf("attention groups: %d cases\n", checked);
}

#if defined(__x86_64__)
/* (on AArch64, tests/arm64/check.sh runs the test under each KVCHAT_CPU
 * and qemu CPU model itself: qemu-user runs no child of the host shell) */
static void test_other_paths(void **state)
{
    (void)state;
    if (getenv("KVCHAT_CPU"))
        skip();
    if (strcmp(llm_cpu_path(), "avx512"))
        printf("this CPU has no AVX-512 with VNNI: the avx512 path is not compared\n");
    static const char *const paths[] = {"avx2", "generic"};
    for (int i = 0; i < 2; i++) {
        char file[96], cmd[256];
        snprintf(file, sizeof file, "%s/kvchat-attn-bits-%d-%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 (int)getpid(), paths[i]);
        snprintf(cmd, sizeof cmd, "KVCHAT_CPU=%s KVCHAT_ATTN_BITS=%s ./tests/test_kernels", paths[i], file);
        assert_int_equal(system(cmd), 0);
        FILE *f = fopen(file, "r");
        unsigned long long h = 0;
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%llx", &h), 1);
        fclose(f);
        remove(file);
        printf("attention bits: %s %016llx, %s %016llx\n", llm_cpu_path(), (unsigned long long)attn_bits,
               paths[i], h);
        assert_true(h == attn_bits);
    }
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_rows),
        cmocka_unit_test(test_attention_groups),
#if defined(__x86_64__)
        cmocka_unit_test(test_other_paths),
#endif
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    const char *bits = getenv("KVCHAT_ATTN_BITS"); /* for test_other_paths of the parent */
    if (bits) {
        FILE *f = fopen(bits, "w");
        if (!f || fprintf(f, "%016llx\n", (unsigned long long)attn_bits) < 0 || fclose(f))
            return 1;
    }
    return rc;
}
