/*
 * bench_quant.c - (a benchmark, not a test; built by `make bench`) the
 * matrix products of each weight type on Qwen2.5-0.5B-shaped weights:
 *
 *   bench/bench_quant [-t THREADS] [-r REPS] [-l LAYERS] [--types Q8_0,Q4_K,...]
 *                     [--prefill-tokens T]
 *
 * Decode: each type gets random blocks (small normal f16 scales) for
 * LAYERS layers of two matrix sets, allocated once (hundreds of MB, far
 * beyond the caches), in the form the engine reads (quantized types packed
 * 8 rows at a time):
 *   layer  q 896x896, k 896x128, v 896x128, o 896x896, gate 896x4864,
 *          up 896x4864, down 4864x896 (n_in x n_out), as in the model; only
 *          types whose block divides 896 (not the K-quants: llama.cpp itself
 *          falls back to other types for these rows)
 *   ffn    three 4864x896 matrices per layer (every type)
 * A pass converts a random activation vector to the type's activations once
 * per matrix (inside the timed region, as decode does) and runs the
 * one-token product over every row (group g of the first half read with
 * group g of the second, as decode does), rows split over THREADS OpenMP
 * threads. The figure is weight bytes read per second, best of REPS
 * passes, against the DRAM read bandwidth from llm_measure_membw.
 *
 * Prefill: the batched product of one layer's matrices with T (default
 * 512) tokens on THREADS threads, in G multiply-adds per second (the
 * activations quantized outside the timed region); for F32 also BLIS's
 * sgemm on the same data (each thread a block of 64 rows, as kvchat used to
 * run it), beside kvchat's F32 product on BLIS's micro-kernel (fmm.c).
 */
#include "core/kernels/gemm.h"
#include "core/llm.h"
#include "core/kernels/quant.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint64_t rnd64(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static float rnd_unit(void) { return (float)((double)(rnd64() >> 11) / 9007199254740992.0 - 0.5); }

/* byte offsets of a block's f16 fields (-1 terminated) */
static const int *f16_fields(uint32_t type)
{
    static const int d0[] = {0, -1}, dm[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1},
                     q6k[] = {208, -1}, none[] = {-1};
    switch (type) {
    case LLM_TYPE_Q4_0: case LLM_TYPE_Q5_0: case LLM_TYPE_Q8_0: return d0;
    case LLM_TYPE_Q4_1: case LLM_TYPE_Q5_1: case LLM_TYPE_Q4_K: case LLM_TYPE_Q5_K: return dm;
    case LLM_TYPE_Q2_K: return q2k;
    case LLM_TYPE_Q3_K: return q3k;
    case LLM_TYPE_Q6_K: return q6k;
    default: return none;
    }
}

/* n_out rows of a type: random blocks, or (float types) random values */
static uint8_t *random_rows(uint32_t type, int64_t n_in, int64_t n_out, size_t *row_bytes)
{
    int64_t bs = llm_type_block_size(type), bb = llm_type_block_bytes(type);
    *row_bytes = (size_t)(n_in / bs * bb);
    uint8_t *p = malloc(*row_bytes * (size_t)n_out);
    if (!p)
        return NULL;
    if (bs == 1) {
        const struct llm_type_ops *ops = llm_get_type_ops(type);
        float *x = malloc((size_t)n_in * sizeof *x);
        for (int64_t r = 0; r < n_out; r++) {
            for (int64_t i = 0; i < n_in; i++)
                x[i] = rnd_unit();
            ops->from_float(x, p + (size_t)r * *row_bytes, n_in);
        }
        free(x);
        return p;
    }
    int64_t nb = n_in / bs * n_out;
    for (int64_t i = 0; i + 8 <= nb * bb; i += 8) {
        uint64_t r = rnd64();
        memcpy(p + i, &r, 8);
    }
    for (int64_t b = 0; b < nb; b++)
        for (const int *f = f16_fields(type); *f >= 0; f++) {
            uint16_t h = llm_fp32_to_fp16(0.001f + (float)(rnd64() % 1000) * 1e-5f);
            memcpy(p + b * bb + *f, &h, 2);
        }
    return p;
}

/* a matrix in the engine's form (packed groups in huge pages, or rows) */
struct mat {
    struct llm_mat m;
    uint8_t *map;
    size_t map_bytes;
    float *rows_f32; /* (F32 only, for BLIS) */
};

static int make_mat(struct mat *mt, uint32_t type, int64_t n_in, int64_t n_out)
{
    const struct llm_mm_ops *mm = llm_get_mm_ops(type);
    size_t rb;
    uint8_t *rows = random_rows(type, n_in, n_out, &rb);
    if (!rows)
        return -1;
    memset(mt, 0, sizeof *mt);
    mt->m = (struct llm_mat){.type = type, .n_in = n_in, .n_out = n_out, .row_bytes = rb,
                             .group_bytes = mm->packed ? mm->group_bytes(n_in) : 0};
    int64_t G = llm_mm_group_rows(mm), ng = (n_out + G - 1) / G;
    mt->map_bytes = mm->packed ? (size_t)ng * mt->m.group_bytes : rb * (size_t)n_out;
    mt->map = mmap(NULL, mt->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mt->map == MAP_FAILED) {
        free(rows);
        return -1;
    }
    madvise(mt->map, mt->map_bytes, MADV_HUGEPAGE);
    if (mm->packed) {
        for (int64_t g = 0; g < ng; g++) {
            int64_t nr = n_out - G * g < G ? n_out - G * g : G;
            mm->pack(rows + (size_t)(G * g) * rb, rb, nr, n_in, mt->map + (size_t)g * mt->m.group_bytes);
        }
    } else {
        memcpy(mt->map, rows, mt->map_bytes);
    }
    if (type == LLM_TYPE_F32) {
        mt->rows_f32 = malloc(rb * (size_t)n_out);
        memcpy(mt->rows_f32, rows, rb * (size_t)n_out);
    }
    mt->m.data = mt->map;
    free(rows);
    return 0;
}

static void free_mat(struct mat *mt)
{
    munmap(mt->map, mt->map_bytes);
    free(mt->rows_f32);
}

struct set {
    const char *name;
    int n;
    struct mat *m;
    double bytes;
};

static const int64_t layer_shape[7][2] = {{896, 896}, {896, 128}, {896, 128}, {896, 896},
                                          {896, 4864}, {896, 4864}, {4864, 896}};
static const int64_t ffn_shape[3][2] = {{4864, 896}, {4864, 896}, {4864, 896}};

static int make_set(struct set *s, const char *name, uint32_t type, int layers, int full)
{
    const int64_t(*shape)[2] = full ? layer_shape : ffn_shape;
    int per = full ? 7 : 3;
    s->name = name;
    s->n = 0;
    s->m = calloc((size_t)(layers * per), sizeof *s->m);
    s->bytes = 0;
    int64_t bs = llm_type_block_size(type);
    int64_t need = llm_get_mm_ops(type)->act == LLM_ACT_I16 ? (bs > 32 ? bs : 32) : bs;
    for (int i = 0; i < layers * per; i++) {
        if (shape[i % per][0] % need)
            return -1;
        if (make_mat(&s->m[i], type, shape[i % per][0], shape[i % per][1]))
            return -1;
        s->n++;
        s->bytes += (double)s->m[i].m.row_bytes * (double)s->m[i].m.n_out;
    }
    return 0;
}

static void free_set(struct set *s)
{
    for (int i = 0; i < s->n; i++)
        free_mat(&s->m[i]);
    free(s->m);
    s->m = NULL;
}

/* activations of x for a product (n elements) into buf */
static const void *prepare(const struct llm_mm_ops *mm, const float *x, int64_t n, void *buf)
{
    if (mm->act == LLM_ACT_F32)
        return x;
    llm_act16_quantize(x, buf, n);
    return buf;
}

/* one decode pass over the set; seconds */
static double decode_pass(const struct set *s, const float *x, void *xq, float *out, int threads)
{
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    for (int i = 0; i < s->n; i++) {
        const struct llm_mat *m = &s->m[i].m;
        const struct llm_mm_ops *mm = llm_get_mm_ops(m->type);
        int64_t G = llm_mm_group_rows(mm), groups = (m->n_out + G - 1) / G, half = groups / 2;
        const void *a;
#pragma omp single copyprivate(a)
        a = prepare(mm, x, m->n_in, xq);
#pragma omp for schedule(static)
        for (int64_t g = 0; g < half + groups % 2; g++) {
            if (g == half) {
                mm->gemv(m, 2 * G * half, m->n_out, 0, 0, a, out + 2 * G * half, NULL);
            } else {
                int64_t r0 = G * g, s0 = G * (g + half);
                mm->gemv(m, r0, r0 + G, s0, s0 + G, a, out + r0, out + s0);
            }
        }
    }
    return omp_get_wtime() - t0;
}

/* the batched product of one layer's set with T tokens; seconds (the
 * activations' quantization not counted). blis: F32 through BLIS sgemm */
static double prefill_pass(const struct set *s, uint8_t *act, size_t a_stride, const float *xf, float *y,
                           int64_t T, int threads, int blis)
{
    double total = 0;
    for (int i = 0; i < 7 && i < s->n; i++) {
        const struct llm_mat *m = &s->m[i].m;
        const struct llm_mm_ops *mm = llm_get_mm_ops(m->type);
        if (mm->act == LLM_ACT_I16)
            for (int64_t t = 0; t < T; t++)
                llm_act16_quantize(xf + t * m->n_in, act + (size_t)t * a_stride, m->n_in);
        double t0 = omp_get_wtime();
        const uint8_t *a = mm->act == LLM_ACT_F32 ? (const uint8_t *)xf : act;
        size_t stride = mm->act == LLM_ACT_F32 ? (size_t)m->n_in * sizeof(float) : a_stride;
        int64_t rows = 32, items = (m->n_out + rows - 1) / rows;
        int64_t tb = 128, nt = (T + tb - 1) / tb;
#pragma omp parallel num_threads(threads)
        {
            void *scratch = aligned_alloc(64, mm->gemm_scratch(m->n_in) + 64);
#pragma omp for schedule(dynamic, 1)
            for (int64_t k = 0; k < items * nt; k++) {
                int64_t r0 = k % items * rows, r1 = r0 + rows < m->n_out ? r0 + rows : m->n_out, t0 = k / items * tb;
                int64_t t1 = t0 + tb < T ? t0 + tb : T;
                if (blis)
                    llm_sgemm_nt(1, t1 - t0, r1 - r0, m->n_in, 1.0f, xf + t0 * m->n_in, m->n_in,
                                 s->m[i].rows_f32 + r0 * m->n_in, m->n_in, 0.0f, y + t0 * m->n_out + r0, m->n_out);
                else
                    mm->gemm(m, r0, r1, a + (size_t)t0 * stride, stride, t1 - t0, y + t0 * m->n_out + r0, m->n_out,
                             scratch);
            }
            free(scratch);
        }
        total += omp_get_wtime() - t0;
    }
    return total;
}

static int parse_type(const char *name)
{
    for (uint32_t t = 0; t < LLM_TYPE_COUNT; t++)
        if (llm_type_known(t) && !strcmp(llm_type_name(t), name))
            return (int)t;
    return -1;
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 5, layers = 24;
    int64_t T = 512;
    const char *types_arg = "F32,F16,BF16,Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc)
            layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types_arg = argv[++i];
        else if (!strcmp(argv[i], "--prefill-tokens") && i + 1 < argc)
            T = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [-t THREADS] [-r REPS] [-l LAYERS] [--types T,T,...] [--prefill-tokens T]\n",
                    argv[0]);
            return 1;
        }
    }
    if (threads < 1 || reps < 1 || layers < 1 || T < 1) {
        fprintf(stderr, "bench_quant: -t, -r, -l and --prefill-tokens take positive numbers\n");
        return 1;
    }
    llm_gemm_setup();
    /* measured again at the end: on a shared machine the larger is nearer
     * the truth */
    double membw = llm_measure_membw(threads, 512LL << 20, 5);
    printf("kernel path: %s; %d threads; %d layers of Qwen2.5-0.5B-shaped matrices; prefill of %lld tokens\n",
           llm_cpu_path(), threads, layers, (long long)T);
    printf("DRAM read bandwidth (llm_measure_membw, 512 MiB, best of 5): %.1f GB/s\n\n", membw / 1e9);
    printf("%-6s %-6s %9s %9s %10s %9s %8s %14s\n", "type", "set", "bytes/w", "MB", "ms/pass", "GB/s", "of DRAM",
           "prefill GMAC/s");

    float *x = malloc(4864 * sizeof *x), *out = malloc(151936 * sizeof *out);
    void *xq = aligned_alloc(64, llm_act_bytes(LLM_ACT_I16, 4864) + 64);
    for (int i = 0; i < 4864; i++)
        x[i] = rnd_unit();
    /* prefill inputs: T rows of 4864 floats and their I16 form */
    size_t a_stride = (llm_act_bytes(LLM_ACT_I16, 4864) + 63) / 64 * 64;
    float *xf = malloc((size_t)T * 4864 * sizeof *xf), *y = malloc((size_t)T * 4864 * sizeof *y);
    uint8_t *act = aligned_alloc(64, a_stride * (size_t)T);
    for (int64_t i = 0; i < T * 4864; i++)
        xf[i] = rnd_unit();

    char list[256];
    snprintf(list, sizeof list, "%s", types_arg);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int type = parse_type(tok);
        if (type < 0 || !llm_get_mm_ops((uint32_t)type)) {
            fprintf(stderr, "bench_quant: no products for type '%s'\n", tok);
            return 1;
        }
        double bpw = (double)llm_type_block_bytes((uint32_t)type) / (double)llm_type_block_size((uint32_t)type);
        for (int full = 1; full >= 0; full--) {
            struct set s;
            if (make_set(&s, full ? "layer" : "ffn", (uint32_t)type, full ? layers : layers, full)) {
                free_set(&s);
                continue; /* rows of 896 are not whole blocks of this type */
            }
            double best = 1e30;
            decode_pass(&s, x, xq, out, threads); /* warm-up */
            for (int r = 0; r < reps; r++) {
                double t = decode_pass(&s, x, xq, out, threads);
                best = t < best ? t : best;
            }
            /* prefill on the set's first layer (7 or 3 matrices) */
            int n_pre = full ? 7 : 3;
            double macs = 0, bp = 1e30, bb = 1e30;
            for (int i = 0; i < n_pre; i++)
                macs += (double)s.m[i].m.n_in * (double)s.m[i].m.n_out * (double)T;
            struct set one = s;
            one.n = n_pre;
            for (int r = 0; r < (reps < 3 ? reps : 3); r++) {
                double t = prefill_pass(&one, act, a_stride, xf, y, T, threads, 0);
                bp = t < bp ? t : bp;
                if (type == LLM_TYPE_F32) {
                    t = prefill_pass(&one, act, a_stride, xf, y, T, threads, 1);
                    bb = t < bb ? t : bb;
                }
            }
            printf("%-6s %-6s %9.4f %9.1f %10.3f %9.1f %7.0f%% %14.1f", tok, s.name, bpw, s.bytes / 1e6, best * 1e3,
                   s.bytes / best / 1e9, 100 * s.bytes / best / membw, macs / bp / 1e9);
            if (type == LLM_TYPE_F32)
                printf("   (BLIS sgemm %.1f)", macs / bb / 1e9);
            printf("\n");
            fflush(stdout);
            free_set(&s);
        }
    }
    double membw2 = llm_measure_membw(threads, 512LL << 20, 5);
    printf("\nDRAM read bandwidth measured again at the end: %.1f GB/s\n", membw2 / 1e9);
    free(x);
    free(out);
    free(xq);
    free(xf);
    free(y);
    free(act);
    return 0;
}
