/*
 * fmm.c - the matrix products of the float weight types (F32, F16, BF16)
 * against f32 activations, prefill and decode alike, on BLIS's gemm
 * micro-kernel (its public micro-kernel API: the context's native sgemm
 * kernel, MR x NR, called on packed panels), with kvchat's own fixed
 * k-blocking (LLM_FMM_KC) and work split, and the same definition in plain
 * C for the portable path (quant.h: one fused multiply-add chain per
 * output and k-block, the blocks added in order). One token on an x86 CPU
 * (AVX2 or AVX-512) runs kvchat's own GEMV on the same panels in the kernel's order
 * (the kernel would compute a whole MR x NR tile for one token column).
 *
 * Why the micro-kernel and not BLIS's sgemm: sgemm's summation order
 * depends on the batch through its small-matrix ("sup") path and its BLAS
 * layer (m = 1 goes to gemv), and its threads wait at barriers for a
 * descheduled core. The micro-kernel alone, called on one MR x NR tile and
 * one k-block at a time, gives each output one sequential FMA chain per
 * block (beta = 0 for the first block, 1 after: C = C + block), whatever
 * the batch, the tile an output falls in or the thread. It runs on the
 * calling pool thread only: BLIS never starts threads here.
 *
 * Layout: the weights are the micro-kernel's B operand when it prefers
 * rows (haswell, zen3: 6 x 16), its A operand when it prefers columns
 * (skx: 32 x 12), so that one token fills one panel of the other operand
 * (gemm.c picks the sub-configuration: zen3 on AMD CPUs, AVX-512 ones too).
 * A weight panel of WR rows (the packing dimension of its operand) stores
 * element k of row j at k * WR + j in the weight's own type; F16 and BF16
 * k-blocks widen to f32 into scratch before the kernel reads them. The
 * layout is kept in the packed-weight cache, whose key has this file's
 * llm_fmm_layout() string (BLIS version, sub-configuration, MR, NR, KC).
 * A start-up self-test compares the micro-kernel with the scalar
 * definition bit for bit on full and edge tiles; on any difference kvchat
 * warns once and runs the portable path (same bits, slower).
 * Nothing here allocates: the batched product gets scratch from its
 * caller, the one-token product uses the stack.
 */
#include "core/llm.h"
#include "core/kernels/gemm.h"
#include "core/kernels/quant.h"

/* blis.h itself is not -Wextra clean */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <blis.h>
#pragma GCC diagnostic pop

#include <math.h>
#include <stdatomic.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KC LLM_FMM_KC
#define MAX_PANEL 32     /* widest panel handled (MR or NR) */
#define TOKEN_PANELS 16  /* token panels per block of the batched product */
/* k-rows of slack after every panel and buffer the kernel reads: BLIS's
 * kernels load the next iteration's operands before their loop ends
 * (haswell's reads 128 bytes past its B block), as BLIS's own packed
 * buffers allow */
#define SLACK 8

static struct {
    bool blis;        /* the micro-kernel runs in some table (llm_fmm_blis) */
    bool weights_b;   /* weights are the B operand */
    int wr, tr;       /* panel widths: weights, tokens (register block = packing dimension) */
    sgemm_ukr_ft ukr;
    cntx_t *cntx;
    char layout[96];
} F = {.wr = 16, .tr = 6};

static _Atomic uint64_t ukr_calls;

uint64_t llm_fmm_ukr_calls(void) { return atomic_load_explicit(&ukr_calls, memory_order_relaxed); }
const char *llm_fmm_layout(void) { return F.layout; }
int llm_fmm_panel_rows(void) { return F.wr; }
bool llm_fmm_blis(void) { return F.blis; }

static uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static size_t esize(uint32_t t) { return t == LLM_TYPE_F32 ? 4 : 2; }

/* element k of row j of a panel of type t, as f32 (exact) */
static float pelt(uint32_t t, const uint8_t *panel, int64_t k, int j)
{
    size_t i = (size_t)k * (size_t)F.wr + (size_t)j;
    if (t == LLM_TYPE_F32) {
        float f;
        memcpy(&f, panel + 4 * i, 4);
        return f;
    }
    uint16_t h = ld16(panel + 2 * i);
    return t == LLM_TYPE_F16 ? llm_fp16_to_fp32(h) : llm_bf16_to_fp32(h);
}

/* ==== packing (layout above) ==== */

static void pack_of(uint32_t t, const void *rows, size_t stride, int64_t n_rows, int64_t n, void *group)
{
    size_t es = esize(t), wr = (size_t)F.wr;
    uint8_t *g = group;
    memset(g, 0, ((size_t)n + SLACK) * wr * es);
    for (int64_t j = 0; j < n_rows; j++) {
        const uint8_t *r = (const uint8_t *)rows + (size_t)j * stride;
        for (int64_t k = 0; k < n; k++)
            memcpy(g + ((size_t)k * wr + (size_t)j) * es, r + (size_t)k * es, es);
    }
}

static void row_of(uint32_t t, const void *group, int r, int64_t n, float *y)
{
    for (int64_t k = 0; k < n; k++)
        y[k] = pelt(t, group, k, r);
}

/* ==== the definition ==== */

static float dot_of(uint32_t t, const struct llm_mat *w, int64_t r, const void *a)
{
    const uint8_t *panel = w->data + (size_t)(r / F.wr) * w->group_bytes;
    int j = (int)(r % F.wr);
    const float *x = a;
    float y = 0;
    for (int64_t k0 = 0; k0 < w->n_in; k0 += KC) {
        int64_t k1 = k0 + KC < w->n_in ? k0 + KC : w->n_in;
        float c = 0;
        for (int64_t k = k0; k < k1; k++)
            c = fmaf(pelt(t, panel, k, j), x[k], c);
        y = k0 ? y + c : c;
    }
    return y;
}

/* ==== on the micro-kernel ==== */

/* one k-block of weight panel p as f32 for the kernel: the panel itself
 * (F32) or widened into buf */
static const float *wblock(uint32_t t, const struct llm_mat *w, int64_t p, int64_t k0, int64_t kc, float *buf)
{
    const uint8_t *panel = w->data + (size_t)p * w->group_bytes;
    size_t off = (size_t)k0 * (size_t)F.wr, cnt = (size_t)kc * (size_t)F.wr;
    if (t == LLM_TYPE_F32)
        return (const float *)panel + off;
    const struct llm_type_ops *ops = llm_get_type_ops(t);
    ops->to_float(panel + 2 * off, buf, (int64_t)cnt);
    return buf;
}

/* C (rows: tokens, columns: outputs; c at token i, output j is c[i * ldc + j])
 * of m tokens and n outputs, plus or set to (beta 1 or 0) one k-block:
 * tokens' panel tp, weights' block wp */
static inline void ukr_call(int m, int n, int64_t kc, const float *tp, const float *wp, float beta, float *c,
                            int64_t ldc)
{
    float one = 1.0f;
    auxinfo_t aux;
    memset(&aux, 0, sizeof aux);
    if (F.weights_b) {
        bli_auxinfo_set_next_a((void *)tp, &aux);
        bli_auxinfo_set_next_b((void *)wp, &aux);
        F.ukr(m, n, (dim_t)kc, &one, (float *)tp, (float *)wp, &beta, c, (inc_t)ldc, 1, &aux, F.cntx);
    } else {
        bli_auxinfo_set_next_a((void *)wp, &aux);
        bli_auxinfo_set_next_b((void *)tp, &aux);
        F.ukr(n, m, (dim_t)kc, &one, (float *)wp, (float *)tp, &beta, c, 1, (inc_t)ldc, &aux, F.cntx);
    }
}

/* tokens [0, tn) (token i at x + i * stride bytes), elements [k0, k0 + kc),
 * into panels of tr tokens (element k of token i at k * tr + i), zeros
 * after the last token */
static void pack_tokens(const void *x, size_t stride, int64_t tn, int64_t k0, int64_t kc, float *dst)
{
    int tr = F.tr;
    for (int64_t p = 0; p * tr < tn; p++) {
        float *d = dst + (size_t)p * (size_t)kc * (size_t)tr;
        int i = 0;
#if defined(__x86_64__)
        /* four whole tokens at a time: 4 x 4 blocks transposed in
         * registers (the element-wise stores at stride tr cost as much as
         * the micro-kernel's arithmetic on a 32-row unit) */
        for (; i + 4 <= tr && p * tr + i + 4 <= tn; i += 4) {
            const float *xt[4];
            for (int j = 0; j < 4; j++)
                xt[j] = (const float *)((const uint8_t *)x + (size_t)(p * tr + i + j) * stride) + k0;
            int64_t k = 0;
            for (; k + 4 <= kc; k += 4) {
                __m128 r0 = _mm_loadu_ps(xt[0] + k), r1 = _mm_loadu_ps(xt[1] + k), r2 = _mm_loadu_ps(xt[2] + k),
                       r3 = _mm_loadu_ps(xt[3] + k);
                _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                _mm_storeu_ps(d + k * tr + i, r0);
                _mm_storeu_ps(d + (k + 1) * tr + i, r1);
                _mm_storeu_ps(d + (k + 2) * tr + i, r2);
                _mm_storeu_ps(d + (k + 3) * tr + i, r3);
            }
            for (; k < kc; k++)
                for (int j = 0; j < 4; j++)
                    d[k * tr + i + j] = xt[j][k];
        }
#endif
        for (; i < tr; i++) {
            int64_t t = p * tr + i;
            if (t >= tn) {
                for (int64_t k = 0; k < kc; k++)
                    d[k * tr + i] = 0;
                continue;
            }
            const float *xt = (const float *)((const uint8_t *)x + (size_t)t * stride) + k0;
            for (int64_t k = 0; k < kc; k++)
                d[k * tr + i] = xt[k];
        }
    }
}

static size_t tokens_per_block(void) { return (size_t)F.tr * TOKEN_PANELS; }

size_t llm_fmm_scratch(int64_t n_in)
{
    (void)n_in;
    /* packed tokens, a widened weight block, the leading partial panel's tiles */
    return (tokens_per_block() * KC + (size_t)(KC + SLACK) * MAX_PANEL * 2 + tokens_per_block() * MAX_PANEL) *
               sizeof(float) + 192;
}

static float *align64(void *p) { return (float *)(((uintptr_t)p + 63) / 64 * 64); }

/*
 * nt tokens: y[t * ldy + r - r0] = W_r . x_t for r in [r0, r1). Loop order
 * as BLIS's: k-block outermost (its packed tokens stay in the cache while
 * the weight panels pass), then weight panels, then token panels. A first
 * panel that starts before r0 goes through a tile of its own.
 */
static void gemm_blis(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride,
                      int64_t nt, float *y, int64_t ldy, void *scratch)
{
    int wr = F.wr, tr = F.tr;
    size_t tb = tokens_per_block();
    /* the tokens' panels, slack, the widened weights, slack, the lead tiles */
    float *ap = align64(scratch), *wbuf = ap + tb * KC + (size_t)SLACK * MAX_PANEL,
          *lead = wbuf + (size_t)(KC + SLACK) * MAX_PANEL;
    int64_t n = w->n_in, p0 = r0 / wr, p1 = (r1 + wr - 1) / wr, calls = 0;
    int64_t skip = r0 - p0 * wr; /* rows of the first panel before r0 */
    for (int64_t t0 = 0; t0 < nt; t0 += (int64_t)tb) {
        int64_t tn = nt - t0 < (int64_t)tb ? nt - t0 : (int64_t)tb, ntp = (tn + tr - 1) / tr;
        const uint8_t *x = (const uint8_t *)a + (size_t)t0 * a_stride;
        for (int64_t k0 = 0; k0 < n; k0 += KC) {
            int64_t kc = n - k0 < KC ? n - k0 : KC;
            float beta = k0 ? 1.0f : 0.0f;
            pack_tokens(x, a_stride, tn, k0, kc, ap);
            for (int64_t p = p0; p < p1; p++) {
                const float *wp = wblock(t, w, p, k0, kc, wbuf);
                int64_t pr0 = p * wr, pr1 = pr0 + wr < r1 ? pr0 + wr : r1;
                bool own = p == p0 && skip; /* through the lead tiles */
                int cols = own ? (int)((pr0 + wr < w->n_out ? pr0 + wr : w->n_out) - pr0) : (int)(pr1 - pr0);
                for (int64_t ip = 0; ip < ntp; ip++) {
                    int m = (int)(tn - ip * tr < tr ? tn - ip * tr : tr);
                    const float *tp = ap + (size_t)ip * (size_t)kc * (size_t)tr;
                    if (own)
                        ukr_call(m, cols, kc, tp, wp, beta, lead + (size_t)ip * tr * wr, wr);
                    else
                        ukr_call(m, cols, kc, tp, wp, beta, y + (t0 + ip * tr) * ldy + (pr0 - r0), ldy);
                    calls++;
                }
            }
        }
        if (skip)
            for (int64_t i = 0; i < tn; i++)
                memcpy(y + (t0 + i) * ldy, lead + (size_t)i * wr + skip,
                       (size_t)((p0 * wr + wr < r1 ? p0 * wr + wr : r1) - r0) * sizeof(float));
    }
    atomic_fetch_add_explicit(&ukr_calls, (uint64_t)calls, memory_order_relaxed);
}

/* one token, rows [r0, r1) and [s0, s1): the same kernel on one token's
 * panel (the other rows of the panel zero) */
static void gemv_blis(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                      const void *a, float *y0, float *y1)
{
    int wr = F.wr, tr = F.tr;
    _Alignas(64) float ap[MAX_PANEL * (KC + SLACK)];
    _Alignas(64) float wbuf[MAX_PANEL * (KC + SLACK)];
    _Alignas(64) float lead[2][MAX_PANEL];
    const float *x = a;
    int64_t n = w->n_in, calls = 0;
    int64_t rng[2][2] = {{r0, r1}, {s0, s1}};
    float *ys[2] = {y0, y1};
    memset(ap, 0, sizeof(float) * (size_t)tr * KC);
    for (int64_t k0 = 0; k0 < n; k0 += KC) {
        int64_t kc = n - k0 < KC ? n - k0 : KC;
        float beta = k0 ? 1.0f : 0.0f;
        for (int64_t k = 0; k < kc; k++)
            ap[k * tr] = x[k0 + k];
        for (int g = 0; g < 2; g++) {
            int64_t a0 = rng[g][0], a1 = rng[g][1];
            if (a0 >= a1)
                continue;
            int64_t p0 = a0 / wr, p1 = (a1 + wr - 1) / wr;
            for (int64_t p = p0; p < p1; p++) {
                const float *wp = wblock(t, w, p, k0, kc, wbuf);
                int64_t pr0 = p * wr, pr1 = pr0 + wr < a1 ? pr0 + wr : a1;
                if (p == p0 && a0 > pr0) {
                    int cols = (int)((pr0 + wr < w->n_out ? pr0 + wr : w->n_out) - pr0);
                    ukr_call(1, cols, kc, ap, wp, beta, lead[g], wr);
                } else {
                    ukr_call(1, (int)(pr1 - pr0), kc, ap, wp, beta, ys[g] + (pr0 - a0), wr);
                }
                calls++;
            }
        }
    }
    for (int g = 0; g < 2; g++) {
        int64_t a0 = rng[g][0], a1 = rng[g][1], pr0 = a0 / wr * wr;
        if (a0 < a1 && a0 > pr0)
            memcpy(ys[g], lead[g] + (a0 - pr0), (size_t)((pr0 + wr < a1 ? pr0 + wr : a1) - a0) * sizeof(float));
    }
    atomic_fetch_add_explicit(&ukr_calls, (uint64_t)calls, memory_order_relaxed);
}

/* ==== decode: kvchat's GEMV in the micro-kernel's order ====
 *
 * One token on the micro-kernel uses 1/TR of its arithmetic (skx: 1 of 12
 * token columns), and at 2 GB of F32 weights a token that made decode
 * compute-bound (measured: docs/kernels.md). These GEMVs read the same
 * panels and compute the definition above exactly as the micro-kernel
 * does: per output one FMA chain over each k-block from +0, in order, the
 * blocks added in order (the first block's sum taken as it is). A vector
 * lane is one output row (element k of the panel's rows is one contiguous
 * vector), so no lane ever meets another and the bits are the kernel's.
 * The two ranges of a unit are read together (two streams, 2 x WR/VL
 * independent chains), each prefetched PF_FMM bytes ahead.
 */
#ifndef PF_FMM
#define PF_FMM 1024
#endif

static _Atomic uint64_t gemv_panels;
uint64_t llm_fmm_gemv_panels(void) { return atomic_load_explicit(&gemv_panels, memory_order_relaxed); }

#if defined(__x86_64__)
/* the rows [a0, a1) of panel results out (a whole panel from row pr0) into y */
static void put_rows(float *y, int64_t a0, int64_t a1, int64_t pr0, int wr, const float *out)
{
    int64_t lo = a0 > pr0 ? a0 : pr0, hi = a1 < pr0 + wr ? a1 : pr0 + wr;
    if (lo < hi)
        memcpy(y + (lo - a0), out + (lo - pr0), (size_t)(hi - lo) * sizeof(float));
}

/* the panels of rows [r0, r1) and [s0, s1), two at a time (one of each
 * range while both last), through panels(t, pan, np, n, x, out) */
#define GEMV_DRIVER(NAME, PANELS)                                                                              \
    static void NAME(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,     \
                     const void *a, float *y0, float *y1)                                                      \
    {                                                                                                          \
        int wr = F.wr;                                                                                         \
        _Alignas(64) float out[2][MAX_PANEL];                                                                  \
        int64_t pa = r0 / wr, pa1 = r0 < r1 ? (r1 + wr - 1) / wr : pa;                                        \
        int64_t pb = s0 / wr, pb1 = s0 < s1 ? (s1 + wr - 1) / wr : pb, panels = 0;                             \
        while (pa < pa1 || pb < pb1) {                                                                         \
            const uint8_t *pan[2];                                                                             \
            int64_t at[2];                                                                                     \
            int np = 0, which[2];                                                                              \
            if (pa < pa1)                                                                                      \
                which[np] = 0, at[np] = pa++, np++;                                                            \
            if (pb < pb1)                                                                                      \
                which[np] = 1, at[np] = pb++, np++;                                                            \
            for (int q = 0; q < np; q++)                                                                       \
                pan[q] = w->data + (size_t)at[q] * w->group_bytes;                                             \
            PANELS(t, pan, np, w->n_in, (const float *)a, out);                                                \
            for (int q = 0; q < np; q++) {                                                                     \
                if (which[q] == 0)                                                                             \
                    put_rows(y0, r0, r1, at[q] * wr, wr, out[q]);                                              \
                else                                                                                           \
                    put_rows(y1, s0, s1, at[q] * wr, wr, out[q]);                                              \
            }                                                                                                  \
            panels += np;                                                                                      \
        }                                                                                                      \
        atomic_fetch_add_explicit(&gemv_panels, (uint64_t)panels, memory_order_relaxed);                       \
    }

/*
 * The GEMV on VL-lane registers of type V (one 16-bit load of VL elements
 * of type H for F16 and BF16), for panels of 16 or 32 rows: NAME##_nv does
 * np (1 or 2) panels of nv x VL rows, out[q][j] = row j of panel q . x,
 * with the type, nv and np constant in each copy NAME dispatches to.
 */
#define PANELS(NAME, V, VL, H, LOADF, LOADH, CVTPH, WIDEN16, ZERO, SET1, FMADD, ADD, STORE)                   \
    static inline __attribute__((always_inline)) V NAME##_load(uint32_t t, const uint8_t *panel, size_t i)    \
    {                                                                                                          \
        if (t == LLM_TYPE_F32)                                                                                 \
            return LOADF((const float *)panel + i);                                                            \
        H h = LOADH((const H *)(panel + 2 * i));                                                               \
        return t == LLM_TYPE_F16 ? CVTPH(h) : WIDEN16(h);                                                      \
    }                                                                                                          \
    static inline __attribute__((always_inline)) void NAME##_nv(uint32_t t, int nv, const uint8_t *const pan[2], \
                                                                int np, int64_t n, const float *x,             \
                                                                float out[2][MAX_PANEL])                       \
    {                                                                                                          \
        size_t wr = (size_t)nv * VL, es = esize(t), line = 64 / es;                                            \
        V y[2][32 / VL], c[2][32 / VL];                                                                        \
        for (int q = 0; q < 2; q++)                                                                            \
            for (int v = 0; v < 32 / VL; v++)                                                                  \
                y[q][v] = ZERO();                                                                              \
        for (int64_t k0 = 0; k0 < n; k0 += KC) {                                                               \
            int64_t k1 = k0 + KC < n ? k0 + KC : n;                                                            \
            for (int q = 0; q < 2; q++)                                                                        \
                for (int v = 0; v < 32 / VL; v++)                                                              \
                    c[q][v] = ZERO();                                                                          \
            for (int64_t k = k0; k < k1; k++) {                                                                \
                V xb = SET1(x[k]);                                                                             \
                size_t i = (size_t)k * wr;                                                                     \
                /* one prefetch per 64 bytes read */                                                           \
                for (size_t l = 0; l < wr; l += line)                                                          \
                    if ((i + l) % line == 0)                                                                   \
                        for (int q = 0; q < np; q++)                                                           \
                            _mm_prefetch((const char *)pan[q] + (i + l) * es + PF_FMM, _MM_HINT_T0);           \
                for (int q = 0; q < 2; q++)                                                                    \
                    if (q < np)                                                                                \
                        for (int v = 0; v < nv; v++)                                                           \
                            c[q][v] = FMADD(NAME##_load(t, pan[q], i + VL * (size_t)v), xb, c[q][v]);          \
            }                                                                                                  \
            for (int q = 0; q < 2; q++)                                                                        \
                for (int v = 0; v < nv; v++)                                                                   \
                    y[q][v] = k0 ? ADD(y[q][v], c[q][v]) : c[q][v];                                            \
        }                                                                                                      \
        for (int q = 0; q < np; q++)                                                                           \
            for (int v = 0; v < nv; v++)                                                                       \
                STORE(out[q] + VL * v, y[q][v]);                                                               \
    }                                                                                                          \
    static void NAME(uint32_t t, const uint8_t *const pan[2], int np, int64_t n, const float *x,               \
                     float out[2][MAX_PANEL])                                                                  \
    {                                                                                                          \
        int nv = F.wr / VL;                                                                                    \
        PANELS_CASE(NAME, LLM_TYPE_F32, 32 / VL)                                                               \
        PANELS_CASE(NAME, LLM_TYPE_F32, 16 / VL)                                                               \
        PANELS_CASE(NAME, LLM_TYPE_F16, 32 / VL)                                                               \
        PANELS_CASE(NAME, LLM_TYPE_F16, 16 / VL)                                                               \
        PANELS_CASE(NAME, LLM_TYPE_BF16, 32 / VL)                                                              \
        PANELS_CASE(NAME, LLM_TYPE_BF16, 16 / VL)                                                              \
    }
/* one copy with the type T and NV vectors a panel constant */
#define PANELS_CASE(NAME, T, NV)                                                                               \
    if (t == T && nv == NV) {                                                                                  \
        if (np == 2)                                                                                           \
            NAME##_nv(T, NV, pan, 2, n, x, out);                                                               \
        else                                                                                                   \
            NAME##_nv(T, NV, pan, 1, n, x, out);                                                               \
        return;                                                                                                \
    }

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
static inline __attribute__((always_inline)) __m512 widen16_512(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
PANELS(panels512, __m512, 16, __m256i, _mm512_loadu_ps, _mm256_loadu_si256, _mm512_cvtph_ps, widen16_512,
       _mm512_setzero_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_store_ps)
GEMV_DRIVER(gemv_avx512, panels512)
#pragma GCC pop_options

/* the same on 8-lane registers (AVX2 CPUs: zen3's and haswell's 16-row
 * panels, two per unit, four chains) */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
static inline __attribute__((always_inline)) __m256 widen16_256(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
PANELS(panels256, __m256, 8, __m128i, _mm256_loadu_ps, _mm_loadu_si128, _mm256_cvtph_ps, widen16_256,
       _mm256_setzero_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_store_ps)
GEMV_DRIVER(gemv_avx2, panels256)
#pragma GCC pop_options
#endif

/* ==== the portable path: each element by its definition ==== */

static void gemv_ref(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, int64_t s0, int64_t s1,
                     const void *a, float *y0, float *y1)
{
    for (int64_t r = r0; r < r1; r++)
        y0[r - r0] = dot_of(t, w, r, a);
    for (int64_t r = s0; r < s1; r++)
        y1[r - s0] = dot_of(t, w, r, a);
}

static void gemm_ref(uint32_t t, const struct llm_mat *w, int64_t r0, int64_t r1, const void *a, size_t a_stride,
                     int64_t nt, float *y, int64_t ldy)
{
    for (int64_t i = 0; i < nt; i++)
        for (int64_t r = r0; r < r1; r++)
            y[i * ldy + r - r0] = dot_of(t, w, r, (const uint8_t *)a + (size_t)i * a_stride);
}

#if defined(__x86_64__)
#define GEMV_FAST gemv_avx512
#define GEMV_FAST8 gemv_avx2
#else
#define GEMV_FAST gemv_ref
#define GEMV_FAST8 gemv_ref
#endif
#define PRODUCTS(NAME, TYPE)                                                                                   \
    static size_t NAME##_group_bytes(int64_t n) { return ((size_t)n + SLACK) * (size_t)F.wr * esize(TYPE); }             \
    LLM_OP_PACK(NAME##_pack, pack_of, TYPE)                                                                    \
    LLM_OP_ROW(NAME##_row, row_of, TYPE)                                                                       \
    LLM_OP_DOT(NAME##_dot, dot_of, TYPE)                                                                       \
    LLM_OP_GEMV(NAME##_gemv_blis, gemv_blis, TYPE)                                                             \
    LLM_OP_GEMM(NAME##_gemm_blis, gemm_blis, TYPE)                                                             \
    LLM_OP_GEMV(NAME##_gemv_fast, GEMV_FAST, TYPE)                                                             \
    LLM_OP_GEMV(NAME##_gemv_fast8, GEMV_FAST8, TYPE)                                                           \
    LLM_OP_GEMV(NAME##_gemv_ref, gemv_ref, TYPE)                                                               \
    static void NAME##_gemm_ref(const struct llm_mat *w, int64_t r0, int64_t r1, const void *a,                \
                                size_t a_stride, int64_t nt, float *y, int64_t ldy, void *scratch)             \
    {                                                                                                          \
        (void)scratch;                                                                                         \
        gemm_ref(TYPE, w, r0, r1, a, a_stride, nt, y, ldy);                                                    \
    }
PRODUCTS(f32, LLM_TYPE_F32)
PRODUCTS(f16, LLM_TYPE_F16)
PRODUCTS(bf16, LLM_TYPE_BF16)

/* ==== start-up ==== */

static uint32_t rng_state = 0x9e3779b9u;
static float rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    /* values of very different sizes, so that any other order rounds differently */
    float v = (float)(int32_t)(rng_state >> 8) / (float)(1 << 23);
    int e = (int)(rng_state & 15) - 8;
    return ldexpf(v, e);
}

static bool same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* the kernel against the definition on m x n tiles, k elements, beta 0 then 1 */
static bool selftest_case(int m, int n, int64_t k)
{
    int tr = F.tr, wr = F.wr;
    static _Alignas(64) float tp[MAX_PANEL * (KC + SLACK)], wp[MAX_PANEL * (KC + SLACK)];
    float c[MAX_PANEL * MAX_PANEL], want[MAX_PANEL * MAX_PANEL];
    for (int64_t i = 0; i < (int64_t)tr * k; i++)
        tp[i] = (i % tr) < m ? rnd() : 0;
    for (int64_t i = 0; i < (int64_t)wr * k; i++)
        wp[i] = rnd();
    int ldc = MAX_PANEL;
    for (int i = 0; i < MAX_PANEL * MAX_PANEL; i++)
        c[i] = want[i] = rnd();
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float acc = 0;
                for (int64_t q = 0; q < k; q++)
                    acc = fmaf(tp[q * tr + i], wp[q * wr + j], acc);
                want[i * ldc + j] = pass ? want[i * ldc + j] + acc : acc;
            }
        ukr_call(m, n, k, tp, wp, pass ? 1.0f : 0.0f, c, ldc);
    }
    for (int i = 0; i < MAX_PANEL; i++)
        for (int j = 0; j < MAX_PANEL; j++)
            if (!same_bits(c[i * ldc + j], want[i * ldc + j]))
                return false;
    return true;
}

static bool selftest(void)
{
    /* full tiles and the kernel's edge path (fewer tokens or rows) */
    int mn[][2] = {{F.tr, F.wr}, {1, F.wr}, {F.tr > 1 ? F.tr - 1 : 1, F.wr > 3 ? F.wr - 3 : 1}, {1, 1}};
    int64_t ks[] = {KC, 37, 1};
    for (int a = 0; a < 4; a++)
        for (int c = 0; c < 3; c++)
            if (!selftest_case(mn[a][0], mn[a][1], ks[c]))
                return false;
    return true;
}

/* BLIS's context and the layout (once) */
static bool usable;
static void setup(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    llm_gemm_setup();
    F.cntx = bli_gks_query_cntx();
    F.ukr = (sgemm_ukr_ft)bli_cntx_get_l3_nat_ukr_dt(BLIS_FLOAT, BLIS_GEMM_UKR, F.cntx);
    int mr = (int)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MR, F.cntx),
        nr = (int)bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NR, F.cntx),
        pmr = (int)bli_cntx_get_blksz_max_dt(BLIS_FLOAT, BLIS_MR, F.cntx),
        pnr = (int)bli_cntx_get_blksz_max_dt(BLIS_FLOAT, BLIS_NR, F.cntx);
    F.weights_b = !bli_cntx_l3_nat_ukr_prefers_cols_dt(BLIS_FLOAT, BLIS_GEMM_UKR, F.cntx);
    usable = F.ukr && mr == pmr && nr == pnr && mr >= 1 && nr >= 1 && mr <= MAX_PANEL && nr <= MAX_PANEL;
    if (usable) {
        F.wr = F.weights_b ? nr : mr;
        F.tr = F.weights_b ? mr : nr;
    }
    /* else the portable path alone, on 16-row panels */
    snprintf(F.layout, sizeof F.layout, "blis %s %s mr%d nr%d kc%d w%c%d", bli_info_get_version_str(),
             llm_gemm_arch(NULL), mr, nr, KC, F.weights_b ? 'b' : 'a', F.wr);
}

/* whether the micro-kernel may run: usable and its self-test passed (run
 * once, the first time a non-generic path asks; one warning otherwise) */
static bool kernel_ok(void)
{
    static int state; /* 0 untested, 1 ok, -1 not */
    if (state)
        return state > 0;
    state = -1;
    if (!usable)
        fprintf(stderr, "kvchat: warning: BLIS's sgemm micro-kernel (%s) has a shape kvchat cannot use; "
                        "float weights run on the portable kernels\n", F.layout);
    else if (!selftest())
        fprintf(stderr, "kvchat: warning: BLIS's sgemm micro-kernel (%s) does not compute kvchat's "
                        "definition bit for bit; float weights run on the portable kernels\n", F.layout);
    else
        state = 1;
    return state > 0;
}

/* called once per table (llm_get_mm_ops's, and tests' tables per path) */
void llm_fmm_init(struct llm_mm_ops *mm, unsigned cpu)
{
    setup();
    bool blis = cpu && kernel_ok();
    if (blis)
        F.blis = true;
    /* decode: kvchat's GEMV in the kernel's order where this CPU has one
     * (16 or 8 lanes) */
    bool fast = (F.wr == 16 || F.wr == 32) && (cpu & LLM_CPU_AVX512), fast8 = (F.wr == 16 || F.wr == 32) && (cpu & LLM_CPU_AVX2);
#if !defined(__x86_64__)
    fast = fast8 = false;
#endif
#define REG(NAME, TYPE)                                                                                        \
    mm[TYPE] = (struct llm_mm_ops){.act = LLM_ACT_F32, .packed = true, .group_rows = F.wr,                     \
                                   .group_bytes = NAME##_group_bytes, .pack = NAME##_pack,                     \
                                   .group_row_to_float = NAME##_row, .dot_ref = NAME##_dot,                    \
                                   .gemv = fast    ? NAME##_gemv_fast                                          \
                                           : fast8 ? NAME##_gemv_fast8                                         \
                                           : blis  ? NAME##_gemv_blis                                          \
                                                   : NAME##_gemv_ref,                                          \
                                   .gemm = blis ? NAME##_gemm_blis : NAME##_gemm_ref,                          \
                                   .gemm_scratch = llm_fmm_scratch};
    REG(f32, LLM_TYPE_F32)
    REG(f16, LLM_TYPE_F16)
    REG(bf16, LLM_TYPE_BF16)
#undef REG
}
