/*
 * test_quant.c - the tensor types' kernels against their definitions:
 * - the reference dequantizers against llama.cpp's gguf-py (numpy) on
 *   files quantized by llama.cpp (tests/data/quant, goldens.txt made by
 *   tests/data/regen-quant.sh): bit-identical f32 for every tensor; every
 *   path's (portable, AVX2) fast dequantizer the same bits, also on random
 *   blocks with extreme f16 scales (zero, -0, subnormal, largest) and
 *   all-ones / all-zero quant bytes;
 * - the I16 activation quantizer: the fast one writes the reference's
 *   bytes (also for zero, huge, tiny and NaN rows), and rounds right;
 * - every weight type's matrix products (quant.h's definition): packing
 *   keeps every row's dequantized bits; dot_ref is within f32 rounding of
 *   the exact product of the dequantized operands; the one-token GEMV (with
 *   two row ranges) and the batched product for 1 to 13 tokens and any row
 *   range give dot_ref's bits for every element; the fast unpacking gives
 *   the reference's;
 * - the legacy quantizers' rounding; the GGUF reader refusing K-quant
 *   tensors with ragged rows or truncated data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "core/kernels/quant.h"
#include "tests/gguf-writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const uint32_t quant_types[] = {
    LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q2_K,
    LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K, LLM_TYPE_IQ4_NL, LLM_TYPE_IQ4_XS,
    LLM_TYPE_MXFP4,
};
#define N_QUANT_TYPES (sizeof quant_types / sizeof quant_types[0])

/* Every dequantizer path this CPU can run, each as its own table filled by
 * the kernel files' init functions with that path's feature bits. */
#define MAX_PATHS 5
static struct llm_type_ops path_table[MAX_PATHS][LLM_TYPE_COUNT];
static struct llm_mm_ops path_mm[MAX_PATHS][LLM_TYPE_COUNT];
static struct llm_unpack_ops path_un[MAX_PATHS][LLM_TYPE_COUNT];
static const char *path_name[MAX_PATHS];
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
        {"avx512", LLM_CPU_AVX2 | LLM_CPU_AVX512 | LLM_CPU_AVX512_VNNI},
        {"neon", LLM_CPU_NEON},
        {"neon-dotprod", LLM_CPU_NEON | LLM_CPU_DOTPROD},
    };
    unsigned have = llm_cpu_features();
    n_paths = 0;
    for (int i = 0; i < MAX_PATHS; i++) {
        if ((all[i].cpu & have) != all[i].cpu) {
#if defined(__x86_64__)
            if (all[i].cpu & LLM_CPU_AVX512) /* said so, as CI may run on an AVX2-only machine */
                printf("path avx512: not tested (this CPU has no AVX-512 with VNNI)\n");
#endif
            continue;
        }
        llm_quant_basic_init(path_table[n_paths], path_mm[n_paths], all[i].cpu);
        llm_quant_legacy_init(path_table[n_paths], all[i].cpu);
        llm_quant_k_init(path_table[n_paths], path_mm[n_paths], path_un[n_paths], all[i].cpu);
        llm_quant_pack_init(path_mm[n_paths], path_un[n_paths], all[i].cpu);
        llm_quant_iq4_init(path_table[n_paths], path_mm[n_paths], path_un[n_paths], all[i].cpu);
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
                     q3k[] = {108, -1}, q6k[] = {208, -1}, none[] = {-1};
    switch (type) {
    case LLM_TYPE_MXFP4: return none; /* its E8M0 byte: e8m0_field */
    case LLM_TYPE_Q4_0: case LLM_TYPE_Q5_0: case LLM_TYPE_Q8_0: case LLM_TYPE_IQ4_NL: case LLM_TYPE_IQ4_XS: return q_d;
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

/* MXFP4's E8M0 exponent byte (offset 0): 2^(e - 128) times at most 12;
 * the special ones: subnormal scales (0, 1), around 1, the largest (254:
 * values up to 1.5 * 2^128, past FLT_MAX, so infinities; 255 too) */
static const uint8_t special_e8m0[] = {0, 1, 2, 126, 127, 128, 129, 254, 255};
#define N_SPECIAL_E8M0 (sizeof special_e8m0 / sizeof special_e8m0[0])

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
        if (type == LLM_TYPE_MXFP4) { /* near 1 as real files have, special, or any */
            int which = extreme ? (int)(rnd() % 3) : 0;
            blk[0] = which == 0 ? (uint8_t)(118 + rnd() % 16)
                     : which == 1 ? special_e8m0[rnd() % N_SPECIAL_E8M0] : (uint8_t)rnd();
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

/* ==== the I16 activation quantizer ==== */

static void test_act16(void **state)
{
    (void)state;
    const int64_t n = 32 * 12;
    float x[32 * 12];
    size_t bytes = llm_act_bytes(LLM_ACT_I16, n);
    uint8_t *want = aligned_alloc(64, bytes), *got = aligned_alloc(64, bytes);
    for (int rep = 0; rep < 200; rep++) {
        for (int64_t i = 0; i < n; i++) {
            int blk = (int)(i / 32);
            float v = rnd_normal();
            if (blk == 1)
                v = 0;
            if (blk == 2)
                v *= 1e30f;
            if (blk == 3)
                v *= 1e-30f;
            if (blk == 4) /* halves after scaling: max 16383 maps to itself */
                v = (float)((int)(rnd() % 32767) - 16383) + ((rnd() & 1) ? 0.5f : 0.0f);
            if (blk == 5 && i % 32 == 7 && rep % 3 == 0)
                v = NAN;
            if (blk == 6)
                v *= 1e-40f; /* subnormal */
            x[i] = v;
        }
        x[4 * 32] = 16383.0f;
        memset(want, 0x5a, bytes);
        memset(got, 0xa5, bytes);
        llm_act16_quantize_ref(x, want, n);
        llm_act16_quantize(x, got, n);
        if (memcmp(want, got, bytes)) {
            size_t at = 0;
            while (want[at] == got[at])
                at++;
            print_error("rep %d: the fast I16 quantizer differs from the reference at byte %zu of %zu\n", rep, at,
                        bytes);
            fail();
        }
        struct llm_act16 a = llm_act16_view(want, n);
        for (int64_t b = 0; b < n / 32; b++) {
            int32_t s[2] = {0, 0};
            for (int i = 0; i < 32; i++) {
                int64_t e = 32 * b + i;
                assert_int_equal(a.q[e], 128 * a.hi[e] + a.lo[e]);
                assert_true(a.q[e] >= -16383 && a.q[e] <= 16383);
                s[i / 16] += a.q[e];
                if (b != 5 && b != 6) /* not the blocks with a NaN or of subnormals */
                    assert_true(fabsf(a.d[b] * (float)a.q[e] - x[e]) <=
                                a.d[b] * 0.5f * (1 + 1e-5f) + fabsf(x[e]) * 1.2e-7f);
            }
            assert_int_equal(a.s16[2 * b], s[0]);
            assert_int_equal(a.s16[2 * b + 1], s[1]);
        }
    }
    free(want);
    free(got);
}

/* ==== matrix products ==== */

#define NT_MAX 13
#define N_OUT 45 /* five groups of 8 and a partial one */

struct mat_case {
    uint32_t type;
    int64_t n;
    uint8_t *stored; /* N_OUT rows */
    size_t row_bytes;
    struct llm_mat w;
    uint8_t *data;
    uint8_t *map; /* data's mapping: it ends at an inaccessible page */
    size_t map_bytes;
    uint8_t *act;    /* NT_MAX rows */
    size_t a_stride;
    float *wf, *af;  /* the operands' values */
};

static void make_case(struct mat_case *c, uint32_t type, int64_t n, int extreme)
{
    const struct llm_type_ops *ops = llm_get_type_ops(type);
    const struct llm_mm_ops *mm = llm_get_mm_ops(type);
    assert_non_null(ops);
    assert_non_null(mm);
    memset(c, 0, sizeof *c);
    c->type = type;
    c->n = n;
    int64_t bs = llm_type_block_size(type);
    c->row_bytes = (size_t)(n / bs * llm_type_block_bytes(type));
    c->wf = malloc((size_t)(N_OUT * n) * sizeof(float));
    c->af = malloc((size_t)(NT_MAX * n) * sizeof(float));
    if (bs == 1) { /* float types: values through from_float */
        c->stored = malloc(c->row_bytes * N_OUT);
        for (int64_t i = 0; i < N_OUT * n; i++)
            c->wf[i] = rnd_normal();
        for (int r = 0; r < N_OUT; r++)
            ops->from_float(c->wf + r * n, c->stored + r * c->row_bytes, n);
    } else {
        c->stored = random_blocks(type, N_OUT * n / bs, extreme);
        if (extreme == 2) { /* every field at its largest */
            int64_t bb = llm_type_block_bytes(type);
            for (int64_t b = 0; b < N_OUT * n / bs; b++) {
                uint8_t keep[4], e = c->stored[b * bb];
                const int *f = f16_fields(type);
                for (int j = 0; f[j] >= 0; j++)
                    memcpy(keep + 2 * j, c->stored + b * bb + f[j], 2);
                memset(c->stored + b * bb, 0xff, (size_t)bb);
                for (int j = 0; f[j] >= 0; j++)
                    memcpy(c->stored + b * bb + f[j], keep + 2 * j, 2);
                if (type == LLM_TYPE_MXFP4) /* its scale kept as the f16 ones are */
                    c->stored[b * bb] = e;
            }
        }
    }
    for (int r = 0; r < N_OUT; r++)
        ops->to_float_ref(c->stored + r * c->row_bytes, c->wf + r * n, n);
    c->w = (struct llm_mat){.type = type, .n_in = n, .n_out = N_OUT, .row_bytes = c->row_bytes};
    if (mm->packed) {
        int64_t G = llm_mm_group_rows(mm), groups = (N_OUT + G - 1) / G;
        c->w.group_bytes = mm->group_bytes(n);
        /* the packed groups end where an inaccessible page starts, so that a
         * kernel reading past them fails here (64-byte aligned when the
         * groups are a multiple of 64 bytes) */
        size_t bytes = c->w.group_bytes * (size_t)groups, pg = (size_t)sysconf(_SC_PAGESIZE);
        c->map_bytes = (bytes + 64 + pg - 1) / pg * pg + pg;
        c->map = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        assert_true(c->map != MAP_FAILED);
        assert_int_equal(mprotect(c->map + c->map_bytes - pg, pg, PROT_NONE), 0);
        c->data = c->map + c->map_bytes - pg - bytes;
        for (int64_t g = 0; g < groups; g++) {
            int64_t nr = N_OUT - G * g < G ? N_OUT - G * g : G;
            mm->pack(c->stored + (size_t)(G * g) * c->row_bytes, c->row_bytes, nr, n,
                     c->data + (size_t)g * c->w.group_bytes);
        }
        c->w.data = c->data;
    } else {
        c->w.data = c->stored;
    }
    c->a_stride = (llm_act_bytes(mm->act, n) + 63) / 64 * 64;
    c->act = aligned_alloc(64, c->a_stride * NT_MAX);
    for (int t = 0; t < NT_MAX; t++) {
        float *x = c->af + t * n;
        for (int64_t i = 0; i < n; i++) {
            int kind = extreme == 2 ? 4 : extreme ? (int)((i / 32 + t) % 5) : 0;
            /* kind 4: every element at the extreme (+-16383), the largest 16-bit sums */
            x[i] = kind == 1 ? 0 : kind == 2 ? 1e20f * rnd_normal() : kind == 3 ? 1e-20f * rnd_normal()
                 : kind == 4 ? (t % 2 ? -3.0f : 3.0f) : rnd_normal();
        }
        uint8_t *dst = c->act + (size_t)t * c->a_stride;
        if (mm->act == LLM_ACT_F32) {
            memcpy(dst, x, (size_t)n * sizeof(float));
        } else {
            llm_act16_quantize(x, dst, n);
            struct llm_act16 a = llm_act16_view(dst, n);
            for (int64_t i = 0; i < n; i++)
                x[i] = a.d[i / 32] * (float)a.q[i];
        }
    }
}

static void free_case(struct mat_case *c)
{
    free(c->stored);
    if (c->map)
        munmap(c->map, c->map_bytes);
    free(c->act);
    free(c->wf);
    free(c->af);
}

static const uint8_t *act_of(const struct mat_case *c, int t) { return c->act + (size_t)t * c->a_stride; }

static void check_products(struct mat_case *c, int extreme)
{
    const struct llm_mm_ops *mm = llm_get_mm_ops(c->type);
    const char *name = llm_type_name(c->type);
    int64_t n = c->n;
    /* the packed rows dequantize to the stored rows' bits */
    if (mm->packed) {
        float *y = malloc((size_t)n * sizeof *y);
        for (int r = 0; r < N_OUT; r++) {
            int G = llm_mm_group_rows(mm);
            mm->group_row_to_float(c->data + (size_t)(r / G) * c->w.group_bytes, r % G, n, y);
            for (int64_t i = 0; i < n; i++)
                if (!same_float(y[i], c->wf[r * n + i])) {
                    print_error("%s n=%lld row %d element %lld: packed %a, stored %a\n", name, (long long)n, r,
                                (long long)i, y[i], c->wf[r * n + i]);
                    fail();
                }
        }
        free(y);
    }
    /* the fast unpacking gives the reference's bits (quantized types), on every path */
    const struct llm_unpack_ops *u = llm_get_unpack_ops(c->type);
    if (mm->packed && mm->act == LLM_ACT_I16) {
        assert_non_null(u);
        size_t nw = (size_t)n * 8, ns = (size_t)(n / 16) * 8;
        int16_t *w1 = calloc(nw, 2), *w2 = calloc(nw, 2);
        float *s1 = calloc(2 * ns, 4), *s2 = calloc(2 * ns, 4);
        for (int lv = 0; lv <= n_paths; lv++) {
            const struct llm_unpack_ops *pu = lv < n_paths ? &path_un[lv][c->type] : u;
            for (int64_t g = 0; g < (N_OUT + 7) / 8; g++) {
                const uint8_t *grp = c->data + (size_t)g * c->w.group_bytes;
                u->unpack_ref(grp, n, w1, s1, s1 + ns);
                memset(w2, 0x5a, nw * 2);
                pu->unpack(grp, n, w2, s2, s2 + ns);
                assert_memory_equal(w1, w2, nw * 2);
                assert_memory_equal(s1, s2, (u->has_min ? 2 : 1) * (size_t)(n / u->ul) * 8 * 4);
            }
        }
        free(w1);
        free(w2);
        free(s1);
        free(s2);
    }
    float want[NT_MAX][N_OUT];
    for (int t = 0; t < NT_MAX; t++)
        for (int r = 0; r < N_OUT; r++) {
            want[t][r] = mm->dot_ref(&c->w, r, act_of(c, t));
            if (extreme)
                continue;
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                double p = (double)c->wf[r * n + i] * c->af[t * n + i];
                exact += p;
                mag += fabs(p);
            }
            double units = mm->act == LLM_ACT_F32 ? (double)(n < LLM_FMM_KC ? n : LLM_FMM_KC) + (double)n / LLM_FMM_KC + 3 : 3.0 * (double)(n / 16) + 2;
            if (fabs(want[t][r] - exact) > units * 6e-8 * mag + 1e-30) {
                print_error("%s n=%lld row %d token %d: dot_ref %.9g, exact %.9g (magnitude %.3g)\n", name,
                            (long long)n, r, t, want[t][r], exact, mag);
                fail();
            }
        }
    /* one token: GEMV, one range and two (1 to 6 groups, the two ranges'
     * groups in any number), on every path's table and the one in use */
    static const int64_t ranges[][4] = {{0, N_OUT, 0, 0}, {0, 8, 16, 21}, {8, 16, 0, 8}, {16, 21, 0, 0},
                                        {0, 16, 24, N_OUT}, {8, 40, 0, 0}, {0, 8, 16, 32}, {40, N_OUT, 0, 24}};
    for (int lv = 0; lv <= n_paths; lv++)
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
        const struct llm_mm_ops *o = lv < n_paths ? &path_mm[lv][c->type] : mm;
        const char *pname = lv < n_paths ? path_name[lv] : "in use";
        float y0[N_OUT + 1], y1[N_OUT + 1];
        for (int r = 0; r <= N_OUT; r++)
            y0[r] = y1[r] = -1234.5f;
        const int64_t *g = ranges[k];
        o->gemv(&c->w, g[0], g[1], g[2], g[3], act_of(c, 3), y0, y1);
        for (int j = 0; j < 2; j++) {
            const float *y = j ? y1 : y0;
            int64_t a = g[2 * j], b = g[2 * j + 1];
            for (int64_t i = 0; i <= N_OUT; i++) {
                bool in = i < b - a;
                if (in ? !same_float(y[i], want[3][a + i]) : y[i] != -1234.5f) {
                    print_error("%s n=%lld path %s gemv [%lld,%lld)+[%lld,%lld) range %d element %lld: %a, dot_ref %a\n",
                                name, (long long)n, pname, (long long)g[0], (long long)g[1], (long long)g[2],
                                (long long)g[3], j, (long long)i, y[i], in ? want[3][a + i] : -1234.5f);
                    fail();
                }
            }
        }
    }
    /* many tokens: the batched product, any number of them, any row range */
    static const int nts[] = {1, 2, 3, 4, 5, 7, 8, 9, 13};
    static const int64_t rr[][2] = {{0, N_OUT}, {8, N_OUT}, {0, 16}, {8, 16}};
    void *scratch = aligned_alloc(64, mm->gemm_scratch(n) + 64);
    const int64_t ldy = N_OUT + 3;
    float *y = malloc(sizeof(float) * (size_t)(NT_MAX * ldy));
    for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++)
        for (size_t k = 0; k < sizeof rr / sizeof rr[0]; k++) {
            int nt = nts[i];
            for (int64_t j = 0; j < NT_MAX * ldy; j++)
                y[j] = -1234.5f;
            mm->gemm(&c->w, rr[k][0], rr[k][1], c->act, c->a_stride, nt, y, ldy, scratch);
            for (int t = 0; t < NT_MAX; t++)
                for (int64_t r = rr[k][0]; r < rr[k][0] + ldy; r++) {
                    bool in = t < nt && r < rr[k][1];
                    float got = y[t * ldy + r - rr[k][0]];
                    if (in ? !same_float(got, want[t][r]) : got != -1234.5f) {
                        print_error("%s n=%lld gemm of %d tokens rows [%lld,%lld): token %d row %lld: %a, "
                                    "dot_ref %a\n", name, (long long)n, nt, (long long)rr[k][0],
                                    (long long)rr[k][1], t, (long long)r, got, in ? want[t][r] : -1234.5f);
                        fail();
                    }
                }
        }
    /* a few tokens: each path's gemv_n (where it has one), any number of
     * tokens (tiles of LLM_GEMV_N_TILE and their rest), any row range */
    for (int lv = 0; u && lv < n_paths; lv++) {
        const struct llm_unpack_ops *pu = &path_un[lv][c->type];
        if (!pu->gemv_n)
            continue;
        for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++)
            for (size_t k = 0; k < sizeof rr / sizeof rr[0]; k++) {
                int nt = nts[i];
                for (int64_t j = 0; j < NT_MAX * ldy; j++)
                    y[j] = -1234.5f;
                pu->gemv_n(&c->w, rr[k][0], rr[k][1], c->act, c->a_stride, nt, y, ldy);
                for (int t = 0; t < NT_MAX; t++)
                    for (int64_t r = rr[k][0]; r < rr[k][0] + ldy; r++) {
                        bool in = t < nt && r < rr[k][1];
                        float got = y[t * ldy + r - rr[k][0]];
                        if (in ? !same_float(got, want[t][r]) : got != -1234.5f) {
                            print_error("%s n=%lld path %s gemv_n of %d tokens rows [%lld,%lld): token %d row %lld: "
                                        "%a, dot_ref %a\n", name, (long long)n, path_name[lv], nt,
                                        (long long)rr[k][0], (long long)rr[k][1], t, (long long)r, got,
                                        in ? want[t][r] : -1234.5f);
                            fail();
                        }
                    }
            }
    }
    free(y);
    free(scratch);
}

static void test_products(void **state)
{
    (void)state;
    static const uint32_t types[] = {LLM_TYPE_F32,  LLM_TYPE_F16,  LLM_TYPE_BF16, LLM_TYPE_Q8_0, LLM_TYPE_Q4_0,
                                     LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K,
                                     LLM_TYPE_Q4_K, LLM_TYPE_Q5_K, LLM_TYPE_Q6_K, LLM_TYPE_IQ4_NL, LLM_TYPE_IQ4_XS,
                                     LLM_TYPE_MXFP4};
    static const int64_t float_n[] = {13, 100, 600, 896}, legacy_n[] = {32, 96, 896}, k_n[] = {256, 512, 1280};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t type = types[ti];
        int64_t bs = llm_type_block_size(type);
        const int64_t *ns = bs == 1 ? float_n : bs == 32 ? legacy_n : k_n;
        int nn = bs == 1 ? 4 : 3;
        for (int i = 0; i < nn; i++)
            for (int extreme = 0; extreme < 3; extreme++) { /* 2: largest fields and activations */
                struct mat_case c;
                make_case(&c, type, ns[i], extreme);
                check_products(&c, extreme);
                free_case(&c);
            }
    }
}

/* The float types on a batch of many tokens (several of fmm.c's blocks of
 * tokens, several k-blocks, a row range that starts inside a panel and one
 * that ends inside one): every element the one-token definition's bits,
 * and BLIS's micro-kernel called when it runs. */
static void test_float_big_batch(void **state)
{
    (void)state;
    static const uint32_t types[] = {LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16};
    const int64_t n = 600, n_out = 45, nt = 230;
    for (int ti = 0; ti < 3; ti++) {
        const struct llm_mm_ops *mm = llm_get_mm_ops(types[ti]);
        const struct llm_type_ops *ops = llm_get_type_ops(types[ti]);
        int64_t G = llm_mm_group_rows(mm), groups = (n_out + G - 1) / G;
        size_t rb = (size_t)n * (types[ti] == LLM_TYPE_F32 ? 4 : 2);
        float *wf = malloc(sizeof(float) * (size_t)(n * n_out));
        uint8_t *rows = malloc(rb * (size_t)n_out);
        for (int64_t i = 0; i < n * n_out; i++)
            wf[i] = rnd_normal();
        for (int64_t r = 0; r < n_out; r++)
            ops->from_float(wf + r * n, rows + (size_t)r * rb, n);
        struct llm_mat w = {.type = types[ti], .n_in = n, .n_out = n_out, .row_bytes = rb,
                            .group_bytes = mm->group_bytes(n)};
        uint8_t *data = aligned_alloc(64, w.group_bytes * (size_t)groups);
        for (int64_t g = 0; g < groups; g++)
            mm->pack(rows + (size_t)(g * G) * rb, rb, n_out - g * G < G ? n_out - g * G : G, n,
                     data + (size_t)g * w.group_bytes);
        w.data = data;
        float *x = malloc(sizeof(float) * (size_t)(n * nt));
        for (int64_t i = 0; i < n * nt; i++)
            x[i] = rnd_normal();
        void *scratch = aligned_alloc(64, mm->gemm_scratch(n) + 64);
        static const int64_t rr[][2] = {{0, 45}, {8, 45}, {16, 40}, {3, 7}};
        for (int k = 0; k < 4; k++) {
            int64_t r0 = rr[k][0], r1 = rr[k][1], ldy = r1 - r0;
            float *y = malloc(sizeof(float) * (size_t)(ldy * nt));
            uint64_t calls = llm_fmm_ukr_calls();
            mm->gemm(&w, r0, r1, x, (size_t)n * sizeof(float), nt, y, ldy, scratch);
            if (llm_fmm_blis())
                assert_true(llm_fmm_ukr_calls() > calls);
            for (int64_t t = 0; t < nt; t++)
                for (int64_t r = r0; r < r1; r++) {
                    float want = mm->dot_ref(&w, r, x + t * n), got = y[t * ldy + r - r0];
                    if (!same_float(got, want)) {
                        print_error("%s gemm of %lld tokens rows [%lld,%lld): token %lld row %lld: %a, dot_ref %a\n",
                                    llm_type_name(types[ti]), (long long)nt, (long long)r0, (long long)r1,
                                    (long long)t, (long long)r, got, want);
                        fail();
                    }
                }
            free(y);
        }
        free(scratch);
        free(x);
        free(data);
        free(rows);
        free(wf);
    }
}

/* ==== quantizers ==== */

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

/* the table types pack into no more than their stored bytes (IQ4_XS: its
 * f16 scale per 256 elements and 6-bit scales per 32 kept a byte each,
 * 1.5% more), so packing a model of them costs no memory beyond the file
 * pages it gives back (issue 24: peak RSS at most file + KV + 10%) */
static void test_packed_sizes(void **state)
{
    (void)state;
    static const struct { uint32_t type; size_t bytes, per; } st[] = {
        {LLM_TYPE_IQ4_NL, 18, 32}, {LLM_TYPE_MXFP4, 17, 32}, {LLM_TYPE_IQ4_XS, 136, 256}};
    for (size_t i = 0; i < sizeof st / sizeof *st; i++)
        for (int64_t n = 256; n <= 8192; n += 256) {
            const struct llm_mm_ops *mm = llm_get_mm_ops(st[i].type);
            size_t stored = (size_t)LLM_PACK_ROWS * (size_t)(n / (int64_t)st[i].per) * st[i].bytes;
            size_t packed = mm->group_bytes(n);
            if (st[i].type == LLM_TYPE_IQ4_XS ? packed * 1000 > stored * 1016 : packed != stored) {
                print_error("%s n=%lld: a group of %d rows packs into %zu bytes, stored %zu\n",
                            llm_type_name(st[i].type), (long long)n, LLM_PACK_ROWS, packed, stored);
                fail();
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_to_float_paths),
        cmocka_unit_test(test_act16),
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_float_big_batch),
        cmocka_unit_test(test_legacy_quantizers),
        cmocka_unit_test(test_gguf_refuses_bad_k_tensors),
        cmocka_unit_test(test_packed_sizes),
    };
    return cmocka_run_group_tests(tests, setup_paths, NULL);
}
