/*
 * bench_quant.c - (a benchmark, not a test; built by `make bench`) measures
 * decode GEMV bandwidth per tensor type on Qwen2.5-0.5B-shaped weights and
 * compares it with the DRAM read bandwidth from llm_measure_membw.
 *
 *   tests/bench_quant [-t THREADS] [-r REPS] [-l LAYERS] [--types Q4_0,Q4_K,...]
 *                     [--path generic|avx2|native]
 *
 * Each type gets random blocks (small normal f16 scales) for LAYERS layers
 * of two matrix sets, allocated once (hundreds of MB, far beyond the
 * caches):
 *   layer  q 896x896, k 896x128, v 896x128, o 896x896, gate 896x4864,
 *          up 896x4864, down 4864x896 (n_in x n_out), as in the model; only
 *          types whose block divides 896 (not the K-quants: llama.cpp itself
 *          falls back to other types for these rows)
 *   ffn    three 4864x896 matrices per layer (every type)
 * A pass converts a random activation vector to the type's vec_dot type
 * once per matrix (inside the timed region, as decode does) and computes
 * every row's vec_dot, rows split over THREADS OpenMP threads (static
 * schedule, one parallel region per pass). The figure is weight bytes read
 * per second, best of REPS passes; and the dequantizer (to_float, the
 * prefill panel path) in elements per second over the same rows.
 * Types that kvchat packs on this CPU (quant.h, llm_get_pack_ops) get a
 * second line, "packed": the same matrices packed 8 rows at a time into
 * huge pages, the rows of each matrix's two halves read two groups at a
 * time (dot2) as decode does, and the packed dequantizer.
 */
#include "core/llm.h"
#include "core/quant.h"

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

static void fill_blocks(uint32_t type, uint8_t *p, int64_t n_blocks)
{
    int64_t bb = llm_type_block_bytes(type);
    for (int64_t i = 0; i + 8 <= n_blocks * bb; i += 8) {
        uint64_t r = rnd64();
        memcpy(p + i, &r, 8);
    }
    for (int64_t b = 0; b < n_blocks; b++)
        for (const int *f = f16_fields(type); *f >= 0; f++) {
            uint16_t h = llm_fp32_to_fp16(0.001f + (float)(rnd64() % 1000) * 1e-5f);
            memcpy(p + b * bb + *f, &h, 2);
        }
}

struct mat {
    int64_t n_in, n_out;
    size_t row_bytes;
    uint8_t *w;
};

struct set {
    const char *name;
    int n;
    struct mat *m;
    double bytes;
};

static int make_set(struct set *s, const char *name, uint32_t type, int layers, int full)
{
    static const int64_t layer_shape[7][2] = {{896, 896}, {896, 128},  {896, 128}, {896, 896},
                                              {896, 4864}, {896, 4864}, {4864, 896}};
    static const int64_t ffn_shape[3][2] = {{4864, 896}, {4864, 896}, {4864, 896}};
    const int64_t(*shape)[2] = full ? layer_shape : ffn_shape;
    int per = full ? 7 : 3;
    s->name = name;
    s->n = layers * per;
    s->m = calloc((size_t)s->n, sizeof *s->m);
    s->bytes = 0;
    int64_t bs = llm_type_block_size(type), bb = llm_type_block_bytes(type);
    for (int i = 0; i < s->n; i++) {
        struct mat *m = &s->m[i];
        m->n_in = shape[i % per][0];
        m->n_out = shape[i % per][1];
        if (m->n_in % bs)
            return -1;
        m->row_bytes = (size_t)(m->n_in / bs * bb);
        m->w = aligned_alloc(64, (m->row_bytes * (size_t)m->n_out + 63) / 64 * 64);
        if (!m->w)
            return -1;
        fill_blocks(type, m->w, m->n_in / bs * m->n_out);
        s->bytes += (double)m->row_bytes * (double)m->n_out;
    }
    return 0;
}

static void free_set(struct set *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->m[i].w);
    free(s->m);
    s->m = NULL;
}

/* one pass over the set; returns seconds. po: the set is packed (group g
 * of each matrix's first half read with group g of its second, an odd last
 * group alone, as decode does) */
static double run_pass(const struct set *s, const struct llm_type_ops *ops,
                       const struct llm_pack_ops *po, const struct llm_type_ops *vd, const float *x,
                       void *xq, float *out, int threads)
{
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    for (int i = 0; i < s->n; i++) {
        const struct mat *m = &s->m[i];
        int64_t groups = m->n_out / LLM_PACK_ROWS, half = groups / 2;
        size_t gb = LLM_PACK_ROWS * m->row_bytes;
#pragma omp single
        vd->from_float(x, xq, m->n_in);
        if (!po) {
#pragma omp for schedule(static)
            for (int64_t r = 0; r < m->n_out; r++)
                out[r] = ops->vec_dot(m->n_in, m->w + (size_t)r * m->row_bytes, xq);
            continue;
        }
#pragma omp for schedule(static)
        for (int64_t g = 0; g < half + groups % 2; g++) {
            if (g == half)
                po->dot(m->n_in, m->w + (size_t)(2 * half) * gb, xq, out + 2 * half * LLM_PACK_ROWS);
            else
                po->dot2(m->n_in, m->w + (size_t)g * gb, m->w + (size_t)(g + half) * gb, xq,
                         out + g * LLM_PACK_ROWS, out + (g + half) * LLM_PACK_ROWS);
        }
    }
    return omp_get_wtime() - t0;
}

/* to_float of every row (each thread into its own buffer of 8 rows, the
 * packed set a group at a time); seconds */
static double run_deq(const struct set *s, const struct llm_type_ops *ops,
                      const struct llm_pack_ops *po, float *rowbuf, int threads)
{
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    for (int i = 0; i < s->n; i++) {
        const struct mat *m = &s->m[i];
        float *rows = rowbuf + (size_t)omp_get_thread_num() * LLM_PACK_ROWS * 4864;
        int64_t step = po ? LLM_PACK_ROWS : 1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < m->n_out; r += step) {
            if (po)
                po->to_float(m->w + (size_t)r * m->row_bytes, rows, m->n_in, m->n_in);
            else
                ops->to_float(m->w + (size_t)r * m->row_bytes, rows, m->n_in);
        }
    }
    return omp_get_wtime() - t0;
}

/* the set's matrices packed (each in its own huge-page mapping); 0 or -1 */
static int pack_set(struct set *s, const struct llm_pack_ops *po)
{
    for (int i = 0; i < s->n; i++) {
        struct mat *m = &s->m[i];
        size_t bytes = m->row_bytes * (size_t)m->n_out;
        uint8_t *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED || m->n_out % LLM_PACK_ROWS)
            return -1;
        madvise(p, bytes, MADV_HUGEPAGE);
        for (int64_t g = 0; g < m->n_out / LLM_PACK_ROWS; g++)
            po->pack(m->w + (size_t)g * LLM_PACK_ROWS * m->row_bytes, m->row_bytes, m->n_in,
                     p + (size_t)g * LLM_PACK_ROWS * m->row_bytes);
        free(m->w);
        m->w = p;
    }
    return 0;
}

static void unpack_set(struct set *s)
{
    for (int i = 0; i < s->n; i++) {
        munmap(s->m[i].w, s->m[i].row_bytes * (size_t)s->m[i].n_out);
        s->m[i].w = NULL;
    }
    free(s->m);
    s->m = NULL;
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
    const char *types_arg = "Q8_0,Q4_0,Q4_1,Q5_0,Q5_1,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc)
            layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types_arg = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-t THREADS] [-r REPS] [-l LAYERS] [--types T,T,...]\n",
                    argv[0]);
            return 1;
        }
    }
    if (threads < 1 || reps < 1 || layers < 1) {
        fprintf(stderr, "bench_quant: -t, -r and -l take positive numbers\n");
        return 1;
    }
    /* measured again at the end: on a shared machine the larger is nearer
     * the truth */
    double membw = llm_measure_membw(threads, 512LL << 20, 5);
    printf("kernel path: %s; %d threads; %d layers of Qwen2.5-0.5B-shaped matrices\n",
           llm_cpu_path(), threads, layers);
    printf("DRAM read bandwidth (llm_measure_membw, 512 MiB, best of 5): %.1f GB/s\n\n",
           membw / 1e9);
    printf("%-6s %-6s %9s %9s %10s %9s %8s %12s\n", "type", "set", "bytes/w", "MB", "ms/pass",
           "GB/s", "of DRAM", "to_float G/s");

    float *x = malloc(4864 * sizeof *x), *out = malloc(4864 * sizeof *out);
    float *rowbuf = malloc((size_t)threads * LLM_PACK_ROWS * 4864 * sizeof *rowbuf);
    void *xq = malloc(4864 * 4 + 1024);
    for (int i = 0; i < 4864; i++)
        x[i] = (float)((double)(rnd64() >> 11) / 9007199254740992.0 - 0.5);

    char list[256];
    snprintf(list, sizeof list, "%s", types_arg);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int type = parse_type(tok);
        const struct llm_type_ops *ops = type >= 0 ? llm_get_type_ops((uint32_t)type) : NULL;
        if (!ops || !ops->vec_dot) {
            fprintf(stderr, "bench_quant: no vec_dot for type '%s'\n", tok);
            return 1;
        }
        const struct llm_type_ops *vd = llm_get_type_ops(ops->vec_dot_type);
        double bpw = (double)llm_type_block_bytes((uint32_t)type) /
                     (double)llm_type_block_size((uint32_t)type);
        for (int full = 1; full >= 0; full--) {
            struct set s;
            if (make_set(&s, full ? "layer" : "ffn", (uint32_t)type, layers, full)) {
                free_set(&s);
                continue; /* rows of 896 are not whole blocks of this type */
            }
            double best = 1e30;
            run_pass(&s, ops, NULL, vd, x, xq, out, threads); /* warm-up */
            for (int r = 0; r < reps; r++) {
                double t = run_pass(&s, ops, NULL, vd, x, xq, out, threads);
                if (t < best)
                    best = t;
            }
            double best_deq = 1e30, elems = s.bytes / bpw;
            for (int r = 0; r < reps; r++) {
                double t = run_deq(&s, ops, NULL, rowbuf, threads);
                if (t < best_deq)
                    best_deq = t;
            }
            printf("%-6s %-6s %9.4f %9.1f %10.3f %9.1f %7.0f%% %12.2f\n", tok, s.name, bpw,
                   s.bytes / 1e6, best * 1e3, s.bytes / best / 1e9, 100 * s.bytes / best / membw,
                   elems / best_deq / 1e9);
            fflush(stdout);
            const struct llm_pack_ops *po = llm_get_pack_ops((uint32_t)type);
            if (!po || pack_set(&s, po)) {
                free_set(&s);
                continue;
            }
            best = best_deq = 1e30;
            run_pass(&s, ops, po, vd, x, xq, out, threads); /* warm-up */
            for (int r = 0; r < reps; r++) {
                double t = run_pass(&s, ops, po, vd, x, xq, out, threads);
                best = t < best ? t : best;
                t = run_deq(&s, ops, po, rowbuf, threads);
                best_deq = t < best_deq ? t : best_deq;
            }
            printf("%-6s %-6s %9.4f %9.1f %10.3f %9.1f %7.0f%% %12.2f  packed\n", tok, s.name, bpw,
                   s.bytes / 1e6, best * 1e3, s.bytes / best / 1e9, 100 * s.bytes / best / membw,
                   elems / best_deq / 1e9);
            fflush(stdout);
            unpack_set(&s);
        }
    }
    double membw2 = llm_measure_membw(threads, 512LL << 20, 5);
    printf("\nDRAM read bandwidth measured again at the end: %.1f GB/s\n", membw2 / 1e9);
    free(x);
    free(out);
    free(rowbuf);
    free(xq);
    return 0;
}
