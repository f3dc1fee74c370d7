/*
 * test_quant.c - the quantized tensor types' kernels (core/quant-legacy.c,
 * core/quant-k.c) against their definitions:
 * - the reference dequantizers against llama.cpp's gguf-py (numpy) on
 *   files quantized by llama.cpp (tests/data/quant, goldens.txt made by
 *   tests/data/regen-quant.sh): bit-identical f32 for every tensor;
 * - every kernel path's (portable, AVX2, AVX-512 VNNI) to_float and vec_dot against the references, bit for
 *   bit, on random blocks that include extreme f16 scales (zero, -0,
 *   subnormal, largest) and all-ones / all-zero quant bytes;
 * - the 8-row packed forms of Q4_0, Q5_0 and Q8_0 (core/quant-pack.c): every
 *   path's packed to_float against the rows' reference dequantization and
 *   packed dot against the packed reference, bit for bit, and the packed
 *   reference against the exact product;
 * - the reference vec_dot against a double-precision dot product of the
 *   dequantized operands (so the reference itself is right), and the Q8_K
 *   and legacy quantizers' rounding;
 * - the GGUF reader refusing K-quant tensors with ragged rows or truncated
 *   data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "core/quant.h"
#include "tests/gguf-writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t quant_types[] = {
    LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q2_K,
    LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K,
};
#define N_QUANT_TYPES (sizeof quant_types / sizeof quant_types[0])

/* Every kernel path this CPU can run, each as its own table filled by the
 * quant files' init functions with that path's feature bits. */
static struct llm_type_ops path_table[3][LLM_TYPE_COUNT];
static struct llm_pack_ops pack_table[3][LLM_TYPE_COUNT];
static const char *path_name[3];
static int n_paths;

static int setup_paths(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned cpu;
    } all[] = {
        {"portable", 0},
        {"avx2", LLM_CPU_AVX2},
        {"avx512-vnni", LLM_CPU_AVX2 | LLM_CPU_AVX512 | LLM_CPU_AVX512_VNNI},
    };
    unsigned have = llm_cpu_features();
    n_paths = 0;
    for (int i = 0; i < 3; i++) {
        if ((all[i].cpu & have) != all[i].cpu)
            continue;
        llm_quant_basic_init(path_table[n_paths], all[i].cpu);
        llm_quant_legacy_init(path_table[n_paths], all[i].cpu);
        llm_quant_k_init(path_table[n_paths], all[i].cpu);
        llm_quant_pack_init(pack_table[n_paths], all[i].cpu);
        path_name[n_paths++] = all[i].name;
    }
    return 0;
}

/* ==== helpers ==== */

static uint64_t rng = 0x1234567887654321ULL;

static uint32_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545F4914F6CDD1DULL) >> 32);
}

static float rnd_normal(void)
{
    float u1 = (rnd() + 1.0f) / 4294967297.0f, u2 = rnd() / 4294967296.0f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* the same hash as regen-quant.sh */
static uint64_t golden_hash(const float *x, int64_t n)
{
    uint64_t h = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        h += (uint64_t)bits * (((uint64_t)i * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL) | 1);
    }
    return h;
}

/* byte offsets of a block's f16 scale fields, -1 terminated */
static const int *f16_fields(uint32_t type)
{
    static const int q_d[] = {0, -1}, q_dm[] = {0, 2, -1}, q2k[] = {80, 82, -1},
                     q3k[] = {108, -1}, q6k[] = {208, -1};
    switch (type) {
    case LLM_TYPE_Q4_0: case LLM_TYPE_Q5_0: case LLM_TYPE_Q8_0: return q_d;
    case LLM_TYPE_Q4_1: case LLM_TYPE_Q5_1: case LLM_TYPE_Q4_K: case LLM_TYPE_Q5_K: return q_dm;
    case LLM_TYPE_Q2_K: return q2k;
    case LLM_TYPE_Q3_K: return q3k;
    case LLM_TYPE_Q6_K: return q6k;
    default: fail(); return NULL;
    }
}

static const uint16_t special_f16[] = {
    0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff, 0x1400,
};
#define N_SPECIAL (sizeof special_f16 / sizeof special_f16[0])

/* a random finite f16 */
static uint16_t rnd_f16(void)
{
    for (;;) {
        uint16_t h = (uint16_t)rnd();
        if ((h & 0x7c00) != 0x7c00)
            return h;
    }
}

/*
 * nb random blocks of a type: block b's quant bytes are random, or all
 * 0xff (every field at its maximum), or all zero; its f16 fields are small
 * normal values (as real files have), a special value, or any finite f16.
 */
static uint8_t *random_blocks(uint32_t type, int64_t nb, int extreme)
{
    int64_t bb = llm_type_block_bytes(type);
    uint8_t *p = malloc((size_t)(nb * bb));
    assert_non_null(p);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = p + b * bb;
        int kind = extreme ? (int)(rnd() % 4) : 0;
        for (int64_t i = 0; i < bb; i++)
            blk[i] = kind == 1 ? 0xff : kind == 2 ? 0 : (uint8_t)rnd();
        for (const int *f = f16_fields(type); *f >= 0; f++) {
            uint16_t h;
            int which = extreme ? (int)(rnd() % 3) : 0;
            if (which == 0)
                h = llm_fp32_to_fp16(0.01f * rnd_normal());
            else if (which == 1)
                h = special_f16[rnd() % N_SPECIAL];
            else
                h = rnd_f16();
            memcpy(blk + *f, &h, 2);
        }
    }
    return p;
}

static int same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

/* ==== reference dequantizers against gguf-py goldens ==== */

#define DATA_DIR "tests/data/quant/"

static void test_goldens(void **state)
{
    (void)state;
    FILE *f = fopen(DATA_DIR "goldens.txt", "r");
    assert_non_null(f);
    char line[512], open_name[128] = "";
    struct llm_gguf *g = NULL;
    int n_checked = 0, seen[LLM_TYPE_COUNT] = {0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        char file[128], tensor[128], type_name[16], hash_hex[32];
        long long n;
        double sum;
        assert_int_equal(sscanf(line, "%127s %127s %15s %lld %31s %lf", file, tensor, type_name, &n,
                                hash_hex, &sum),
                         6);
        if (strcmp(file, open_name)) {
            llm_gguf_close(g);
            char path[256], err[256];
            snprintf(path, sizeof path, DATA_DIR "%s", file);
            if (llm_gguf_open(path, &g, err, sizeof err)) {
                print_error("%s: %s\n", path, err);
                fail();
            }
            snprintf(open_name, sizeof open_name, "%s", file);
        }
        int64_t ti = llm_gguf_find_tensor(g, tensor);
        assert_true(ti >= 0);
        const struct llm_tensor_info *t = llm_gguf_tensor(g, ti);
        assert_string_equal(llm_type_name(t->type), type_name);
        assert_int_equal(llm_tensor_n_elements(t), n);
        seen[t->type]++;

        const struct llm_type_ops *ops = llm_get_type_ops(t->type);
        assert_non_null(ops);
        int64_t ne0 = t->ne[0], rows = n / ne0;
        int64_t row_bytes = ne0 / llm_type_block_size(t->type) * llm_type_block_bytes(t->type);
        float *x = malloc((size_t)n * sizeof *x), *x2 = malloc((size_t)n * sizeof *x2);
        assert_non_null(x);
        assert_non_null(x2);
        for (int64_t r = 0; r < rows; r++)
            ops->to_float_ref((const uint8_t *)t->data + r * row_bytes, x + r * ne0, ne0);
        uint64_t want = strtoull(hash_hex, NULL, 16), got = golden_hash(x, n);
        double s = 0;
        for (int64_t i = 0; i < n; i++)
            s += x[i];
        if (got != want || fabs(s - sum) > 1e-9 * (1 + fabs(sum))) {
            print_error("%s %s (%s): hash %016llx sum %.17g, gguf-py says %016llx %.17g\n", file,
                        tensor, type_name, (unsigned long long)got, s, (unsigned long long)want, sum);
            fail();
        }
        /* every path's fast dequantizer gives the same bits */
        for (int lv = 0; lv < n_paths; lv++) {
            const struct llm_type_ops *o = &path_table[lv][t->type];
            assert_non_null(o->to_float);
            for (int64_t r = 0; r < rows; r++)
                o->to_float((const uint8_t *)t->data + r * row_bytes, x2 + r * ne0, ne0);
            if (memcmp(x, x2, (size_t)n * sizeof *x)) {
                print_error("%s %s: to_float on path %s differs from the reference\n", file,
                            tensor, path_name[lv]);
                fail();
            }
        }
        free(x);
        free(x2);
        n_checked++;
    }
    fclose(f);
    llm_gguf_close(g);
    assert_true(n_checked >= 100);
    for (size_t i = 0; i < N_QUANT_TYPES; i++) {
        if (!seen[quant_types[i]])
            print_error("no golden tensor of type %s\n", llm_type_name(quant_types[i]));
        assert_true(seen[quant_types[i]] > 0);
    }
}

/* ==== SIMD dequantizers against the reference on random blocks ==== */

static void test_to_float_paths(void **state)
{
    (void)state;
    const int64_t nb = 200;
    for (size_t ti = 0; ti < N_QUANT_TYPES; ti++) {
        uint32_t type = quant_types[ti];
        const struct llm_type_ops *ref = &path_table[0][type];
        int64_t k = nb * llm_type_block_size(type);
        uint8_t *x = random_blocks(type, nb, 1);
        float *want = malloc((size_t)k * sizeof(float)), *got = malloc((size_t)k * sizeof(float));
        ref->to_float_ref(x, want, k);
        for (int lv = 0; lv < n_paths; lv++) {
            const struct llm_type_ops *o = &path_table[lv][type];
            memset(got, 0xa5, (size_t)k * sizeof(float));
            o->to_float(x, got, k);
            for (int64_t i = 0; i < k; i++)
                if (!same_float(want[i], got[i])) {
                    print_error("%s path %s element %lld: %a, reference %a\n",
                                llm_type_name(type), path_name[lv],
                                (long long)i, got[i], want[i]);
                    fail();
                }
        }
        free(x);
        free(want);
        free(got);
    }
}

/* ==== vec_dot ==== */

/* n activations quantized to the vec_dot type; extreme: also huge/tiny/zero */
static void *random_activations(const struct llm_type_ops *ops, int64_t n, int extreme,
                                float *deq /* n floats: the quantized values, or NULL */)
{
    const struct llm_type_ops *yo = llm_get_type_ops(ops->vec_dot_type);
    assert_non_null(yo);
    float *a = malloc((size_t)n * sizeof *a);
    int64_t blk = llm_type_block_size(ops->vec_dot_type);
    for (int64_t b = 0; b < n / blk; b++) {
        int kind = extreme ? (int)(rnd() % 5) : 0;
        float scale = kind == 1 ? 1e30f : kind == 2 ? 1e-30f : 1.0f;
        for (int64_t i = 0; i < blk; i++) {
            float v = scale * rnd_normal();
            if (kind == 3)
                v = 0;
            if (kind == 4) /* every element at the extreme */
                v = i & 1 ? -3.0f : 3.0f;
            a[b * blk + i] = v;
        }
    }
    void *y = malloc((size_t)(n / blk * llm_type_block_bytes(ops->vec_dot_type)));
    yo->from_float(a, y, n);
    if (deq)
        yo->to_float_ref(y, deq, n);
    free(a);
    return y;
}

static const int64_t dot_sizes[] = {256, 512, 896, 1024, 4864};

static void test_vec_dot_paths(void **state)
{
    (void)state;
    for (size_t ti = 0; ti < N_QUANT_TYPES; ti++) {
        uint32_t type = quant_types[ti];
        const struct llm_type_ops *ref = &path_table[0][type];
        int64_t block = type == LLM_TYPE_Q4_0 || type == LLM_TYPE_Q4_1 ||
                                type == LLM_TYPE_Q5_0 || type == LLM_TYPE_Q5_1
                            ? 32
                            : QK_K;
        for (size_t si = 0; si < sizeof dot_sizes / sizeof dot_sizes[0]; si++) {
            int64_t n = dot_sizes[si];
            if (n % block)
                continue;
            for (int rep = 0; rep < 20; rep++) {
                int extreme = rep % 2;
                uint8_t *x = random_blocks(type, n / block, extreme);
                void *y = random_activations(ref, n, extreme, NULL);
                float want = ref->vec_dot_ref(n, x, y);
                for (int lv = 0; lv < n_paths; lv++) {
                    const struct llm_type_ops *o = &path_table[lv][type];
                    float got = o->vec_dot(n, x, y);
                    if (!same_float(want, got)) {
                        print_error("%s n=%lld rep %d path %s: %a, reference %a\n",
                                    llm_type_name(type), (long long)n, rep, path_name[lv], got,
                                    want);
                        fail();
                    }
                }
                free(x);
                free(y);
            }
        }
    }
}

/* ==== packed (8-row interleaved) weights ==== */

/*
 * 8 random rows (extreme blocks too) packed by quant-pack.c: every path's
 * packed to_float gives the unpacked rows' reference dequantization bit for
 * bit; every path's packed dot equals the packed dot_ref bit for bit; and
 * dot_ref is within f32 rounding of the exact product of the dequantized
 * operands: (nb + 2) 2^-24 sum |x_i y_i| (nb block products, each scale
 * product rounded once, each fma rounded once).
 */
static void test_pack_paths(void **state)
{
    (void)state;
    static const uint32_t types[] = {LLM_TYPE_Q4_0, LLM_TYPE_Q5_0, LLM_TYPE_Q8_0};
    static const int64_t sizes[] = {32, 64, 896, 4864};
    for (size_t ti = 0; ti < 3; ti++) {
        uint32_t type = types[ti];
        const struct llm_type_ops *ref = &path_table[0][type];
        const struct llm_pack_ops *pref = &pack_table[0][type];
        size_t bb = (size_t)llm_type_block_bytes(type);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si], nb = n / 32;
            size_t row_bytes = (size_t)nb * bb;
            for (int rep = 0; rep < 16; rep++) {
                int extreme = rep % 2;
                uint8_t *rows = random_blocks(type, nb * LLM_PACK_ROWS, extreme);
                uint8_t *group = malloc(row_bytes * LLM_PACK_ROWS);
                float *want = malloc((size_t)(n * LLM_PACK_ROWS) * sizeof(float));
                float *got = malloc((size_t)(n * LLM_PACK_ROWS) * sizeof(float));
                float *yf = malloc((size_t)n * sizeof(float));
                assert_non_null(group);
                pref->pack(rows, row_bytes, n, group);
                uint8_t *rows2 = random_blocks(type, nb * LLM_PACK_ROWS, extreme);
                uint8_t *group2 = malloc(row_bytes * LLM_PACK_ROWS);
                assert_non_null(group2);
                pref->pack(rows2, row_bytes, n, group2);
                for (int r = 0; r < LLM_PACK_ROWS; r++)
                    ref->to_float_ref(rows + r * row_bytes, want + r * n, n);
                void *y = random_activations(ref, n, extreme, yf);
                float dref[LLM_PACK_ROWS], dgot[LLM_PACK_ROWS];
                pref->dot_ref(n, group, y, dref);
                for (int lv = 0; lv < n_paths; lv++) {
                    const struct llm_pack_ops *o = &pack_table[lv][type];
                    for (int k = 0; k < 2; k++) {
                        memset(got, 0xa5, (size_t)(n * LLM_PACK_ROWS) * sizeof(float));
                        (k ? o->to_float : o->to_float_ref)(group, got, n, n);
                        for (int64_t i = 0; i < n * LLM_PACK_ROWS; i++)
                            if (!same_float(want[i], got[i])) {
                                print_error("%s packed %s path %s n=%lld row %lld element %lld: %a, "
                                            "reference %a\n",
                                            llm_type_name(type), k ? "to_float" : "to_float_ref",
                                            path_name[lv], (long long)n, (long long)(i / n),
                                            (long long)(i % n), got[i], want[i]);
                                fail();
                            }
                    }
                    /* dot, and dot2 with the group first and second (with
                     * another group of random rows) */
                    float d2[LLM_PACK_ROWS], dref2[LLM_PACK_ROWS];
                    pref->dot_ref(n, group2, y, dref2);
                    for (int k = 0; k < 3; k++) {
                        if (k == 0)
                            o->dot(n, group, y, dgot);
                        else if (k == 1)
                            o->dot2(n, group, group2, y, dgot, d2);
                        else
                            o->dot2(n, group2, group, y, d2, dgot);
                        for (int r = 0; r < LLM_PACK_ROWS; r++)
                            if (!same_float(dref[r], dgot[r]) || (k && !same_float(dref2[r], d2[r]))) {
                                print_error("%s packed %s path %s n=%lld rep %d row %d: %a %a, dot_ref %a %a\n",
                                            llm_type_name(type), k ? "dot2" : "dot", path_name[lv],
                                            (long long)n, rep, r, dgot[r], d2[r], dref[r], dref2[r]);
                                fail();
                            }
                    }
                }
                for (int r = 0; r < LLM_PACK_ROWS; r++) {
                    double exact = 0, mag = 0;
                    for (int64_t i = 0; i < n; i++) {
                        exact += (double)want[r * n + i] * yf[i];
                        mag += fabs((double)want[r * n + i] * yf[i]);
                    }
                    if (!(mag < 1e30))
                        continue; /* overflowing operands: bit equality above is the check */
                    double bound = (double)(nb + 2) * ldexp(1.0, -24) * mag + 1e-37;
                    if (!(fabs(dref[r] - exact) <= bound)) {
                        print_error("%s packed dot_ref n=%lld rep %d row %d: %.9g, exact %.9g "
                                    "(bound %.3g)\n",
                                    llm_type_name(type), (long long)n, rep, r, dref[r], exact, bound);
                        fail();
                    }
                }
                free(rows);
                free(group);
                free(group2);
                free(rows2);
                free(want);
                free(got);
                free(yf);
                free(y);
            }
        }
    }
}

/* The reference vec_dot equals the exact dot product of the dequantized
 * operands up to f32 rounding: |ref - exact| <= 2e-5 * sum |x_i y_i|. */
static void test_vec_dot_ref_accuracy(void **state)
{
    (void)state;
    for (size_t ti = 0; ti < N_QUANT_TYPES; ti++) {
        uint32_t type = quant_types[ti];
        const struct llm_type_ops *ops = llm_get_type_ops(type);
        const int64_t n = 4864; /* 19 super-blocks, 152 blocks of 32 */
        for (int rep = 0; rep < 10; rep++) {
            uint8_t *x = random_blocks(type, n / llm_type_block_size(type), 0);
            float *xf = malloc((size_t)n * sizeof *xf), *yf = malloc((size_t)n * sizeof *yf);
            void *y = random_activations(ops, n, 0, yf);
            ops->to_float_ref(x, xf, n);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                exact += (double)xf[i] * yf[i];
                mag += fabs((double)xf[i] * yf[i]);
            }
            float got = ops->vec_dot_ref(n, x, y);
            if (fabs(got - exact) > 2e-5 * mag + 1e-30) {
                print_error("%s rep %d: vec_dot_ref %.9g, exact %.9g (magnitude %.3g)\n",
                            llm_type_name(type), rep, got, exact, mag);
                fail();
            }
            free(x);
            free(xf);
            free(yf);
            free(y);
        }
    }
}

/* ==== quantizers ==== */

static void test_q8_K_quantize(void **state)
{
    (void)state;
    const int64_t n = 4 * QK_K;
    float x[4 * QK_K], back[4 * QK_K];
    struct block_q8_K y[4];
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_normal() * (i < QK_K ? 1.0f : i < 2 * QK_K ? 1e-20f : 1e20f);
    for (int64_t i = 3 * QK_K; i < n; i++)
        x[i] = 0; /* an all-zero block */
    llm_quantize_row_q8_K(x, y, n);
    llm_dequantize_row_q8_K(y, back, n);
    for (int b = 0; b < 4; b++) {
        float amax = 0;
        int imax = 0;
        for (int i = 0; i < QK_K; i++)
            if (fabsf(x[b * QK_K + i]) > amax) {
                amax = fabsf(x[b * QK_K + i]);
                imax = i;
            }
        if (amax == 0) {
            assert_true(y[b].d == 0);
        } else {
            assert_int_equal(y[b].qs[imax], -127); /* the extreme maps to -127 */
            assert_true(fabsf(fabsf(y[b].d) * 127 - amax) <= amax * 1e-6f);
        }
        for (int i = 0; i < QK_K; i++)
            assert_true(fabsf(back[b * QK_K + i] - x[b * QK_K + i]) <=
                        fabsf(y[b].d) * 0.5f * (1 + 1e-5f));
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++)
                s += y[b].qs[16 * j + i];
            assert_int_equal(y[b].bsums[j], s);
        }
    }
}

/* Every path's Q8_K quantizer writes the reference's bytes, including for
 * ties between +max and -max, zero blocks, huge and tiny values, and values
 * exactly half-way between integers after scaling. */
static void test_q8_K_paths(void **state)
{
    (void)state;
    enum { NB = 8 };
    static float x[NB * QK_K];
    static struct block_q8_K want[NB], got[NB];
    for (int rep = 0; rep < 50; rep++) {
        for (int i = 0; i < NB * QK_K; i++) {
            int blk = i / QK_K;
            float v = rnd_normal();
            if (blk == 1)
                v = 0;
            if (blk == 2)
                v *= 1e30f;
            if (blk == 3)
                v *= 1e-30f;
            if (blk == 5) /* subnormal: -127 / max overflows */
                v *= 1e-40f;
            if (blk == 4) /* ties of magnitude, and halves after scaling by 127/127 */
                v = (float)((int)(rnd() % 255) - 127) + ((rnd() & 1) ? 0.5f : 0.0f);
            x[i] = v;
        }
        x[4 * QK_K + 7] = 127.5f;
        x[4 * QK_K + 9] = -127.5f;
        llm_quantize_row_q8_K(x, want, NB * QK_K);
        for (int lv = 0; lv < n_paths; lv++) {
            memset(got, 0x5a, sizeof got);
            path_table[lv][LLM_TYPE_Q8_K].from_float(x, got, NB * QK_K);
            if (memcmp(want, got, sizeof want)) {
                for (int b = 0; b < NB; b++)
                    if (memcmp(&want[b], &got[b], sizeof want[b]))
                        print_error("rep %d path %s: Q8_K block %d differs (d %a vs %a)\n", rep,
                                    path_name[lv], b, got[b].d, want[b].d);
                fail();
            }
        }
    }
}

/* The legacy types' round-to-nearest quantizers: every element comes back
 * within one quantization step (the scale d), and a constant row exactly. */
static void test_legacy_quantizers(void **state)
{
    (void)state;
    const uint32_t types[] = {LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1};
    const int64_t n = 1024;
    float x[1024], back[1024];
    uint8_t q[1024];
    for (size_t ti = 0; ti < 4; ti++) {
        const struct llm_type_ops *ops = llm_get_type_ops(types[ti]);
        assert_non_null(ops->from_float);
        for (int64_t i = 0; i < n; i++)
            x[i] = rnd_normal();
        ops->from_float(x, q, n);
        ops->to_float_ref(q, back, n);
        for (int64_t b = 0; b < n / 32; b++) {
            float lo = x[32 * b], hi = x[32 * b];
            for (int i = 0; i < 32; i++) {
                lo = fminf(lo, x[32 * b + i]);
                hi = fmaxf(hi, x[32 * b + i]);
            }
            int levels = types[ti] == LLM_TYPE_Q4_0 || types[ti] == LLM_TYPE_Q4_1 ? 15 : 31;
            float step = 2 * fmaxf(fabsf(lo), fabsf(hi)) / levels;
            for (int i = 0; i < 32; i++)
                assert_true(fabsf(back[32 * b + i] - x[32 * b + i]) <= step * 1.01f);
        }
    }
}

/* ==== the GGUF reader refuses bad K-quant tensors ==== */

/* open the file w describes, less its last `cut` bytes; err gets the reason */
static int open_cut(struct gw *w, size_t cut, char *err, size_t err_size)
{
    struct gw_buf buf = {0};
    gw_write_buf(w, &buf);
    struct llm_gguf *g = NULL;
    err[0] = 0;
    int rc = llm_gguf_open_memory(buf.p, buf.n - cut, &g, err, err_size);
    llm_gguf_close(g);
    gw_buf_free(&buf);
    return rc;
}

static void test_gguf_refuses_bad_k_tensors(void **state)
{
    (void)state;
    const uint32_t ktypes[] = {LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K,
                               LLM_TYPE_Q6_K};
    char err[256];
    for (size_t i = 0; i < 5; i++) {
        uint32_t type = ktypes[i];
        int64_t bb = llm_type_block_bytes(type);
        uint8_t *data = calloc(8, (size_t)bb);
        assert_non_null(data);

        /* rows of 128 elements: not a multiple of the 256-element block */
        struct gw *w = gw_init();
        gw_kv_str(w, "general.architecture", "llama");
        int64_t ne_bad[2] = {128, 4};
        gw_tensor(w, "blk.0.attn_q.weight", type, 2, ne_bad, data, (uint64_t)(2 * bb));
        assert_true(open_cut(w, 0, err, sizeof err) < 0);
        if (!strstr(err, "rows of 128 elements, not a multiple of the") ||
            !strstr(err, llm_type_name(type)))
            print_error("unexpected error: %s\n", err);
        assert_non_null(strstr(err, "not a multiple of the"));
        gw_free(w);

        /* 2 rows of 512: opens whole; cut by a block (more than the final
         * alignment padding), the data is short */
        w = gw_init();
        gw_kv_str(w, "general.architecture", "llama");
        int64_t ne[2] = {512, 2};
        gw_tensor(w, "blk.0.attn_q.weight", type, 2, ne, data, (uint64_t)(4 * bb));
        assert_int_equal(open_cut(w, 0, err, sizeof err), 0);
        assert_true(open_cut(w, (size_t)bb, err, sizeof err) < 0);
        if (!strstr(err, "outside the file's data section"))
            print_error("unexpected error: %s\n", err);
        assert_non_null(strstr(err, "lies outside the file's data section"));
        assert_true(open_cut(w, (size_t)(3 * bb), err, sizeof err) < 0);
        assert_non_null(strstr(err, "blk.0.attn_q.weight"));
        gw_free(w);
        free(data);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_to_float_paths),
        cmocka_unit_test(test_vec_dot_paths),
        cmocka_unit_test(test_vec_dot_ref_accuracy),
        cmocka_unit_test(test_pack_paths),
        cmocka_unit_test(test_q8_K_quantize),
        cmocka_unit_test(test_q8_K_paths),
        cmocka_unit_test(test_legacy_quantizers),
        cmocka_unit_test(test_gguf_refuses_bad_k_tensors),
    };
    return cmocka_run_group_tests(tests, setup_paths, NULL);
}
