/*
 * quant.c - scalar reference conversions for the stored tensor types. These
 * define what a kernel must compute; they favour clarity over speed.
 * f16 rounding is IEEE round-to-nearest-even, as the F16C instructions and
 * ggml's converters do, so files we write match what llama.cpp writes.
 */
#include "core/kernels/quant.h"
#include "core/llm.h"

#include <math.h>
#include <string.h>

float llm_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) { /* inf, or nan made quiet as F16C does */
        bits = sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t llm_fp32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal or zero in f16 */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent, up to inf: correct */
    return (uint16_t)(sign | h);
}

float llm_bf16_to_fp32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t llm_fp32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 64); /* quiet nan */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

void llm_quantize_row_q8_0(const float *x, struct block_q8_0 *y, int64_t k)
{
    for (int64_t b = 0; b < k / QK8_0; b++) {
        const float *xb = x + b * QK8_0;
        float amax = 0;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = llm_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++)
            y[b].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

int llm_dequantize_row(uint32_t type, const void *row, float *y, int64_t k)
{
    switch (type) {
    case LLM_TYPE_F32:
        memcpy(y, row, (size_t)k * 4);
        return 0;
    case LLM_TYPE_F16:
    case LLM_TYPE_BF16: {
        const uint8_t *p = row;
        for (int64_t i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            y[i] = type == LLM_TYPE_F16 ? llm_fp16_to_fp32(h) : llm_bf16_to_fp32(h);
        }
        return 0;
    }
    case LLM_TYPE_Q8_0: {
        const uint8_t *p = row;
        for (int64_t b = 0; b < k / QK8_0; b++) {
            struct block_q8_0 blk;
            memcpy(&blk, p + b * sizeof blk, sizeof blk);
            float d = llm_fp16_to_fp32(blk.d);
            for (int j = 0; j < QK8_0; j++)
                y[b * QK8_0 + j] = d * blk.qs[j];
        }
        return 0;
    }
    default:
        return -1;
    }
}

int64_t llm_quantize_row(uint32_t type, const float *x, void *row, int64_t k)
{
    uint8_t *p = row;
    switch (type) {
    case LLM_TYPE_F32:
        memcpy(row, x, (size_t)k * 4);
        return k * 4;
    case LLM_TYPE_F16:
        for (int64_t i = 0; i < k; i++) {
            uint16_t h = llm_fp32_to_fp16(x[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        return k * 2;
    case LLM_TYPE_BF16:
        for (int64_t i = 0; i < k; i++) {
            uint16_t h = llm_fp32_to_bf16(x[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        return k * 2;
    case LLM_TYPE_Q8_0:
        llm_quantize_row_q8_0(x, row, k);
        return k / QK8_0 * (int64_t)sizeof(struct block_q8_0);
    default:
        return -1;
    }
}

/* ==== the kernel tables ==== */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

static struct llm_type_ops ops_table[LLM_TYPE_COUNT];
static struct llm_mm_ops mm_table[LLM_TYPE_COUNT];
static struct llm_unpack_ops unpack_table[LLM_TYPE_COUNT];
static unsigned cpu_features;
static pthread_once_t ops_once = PTHREAD_ONCE_INIT;

/* why KVCHAT_CPU could not be honoured (then the portable kernels run) */
static char cpu_error[160];

/* the features this CPU has */
static unsigned probe_cpu(void)
{
    unsigned f = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        f |= LLM_CPU_AVX2; /* every AVX2 CPU has F16C */
    if ((f & LLM_CPU_AVX2) && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        f |= LLM_CPU_AVX512;
    if ((f & LLM_CPU_AVX512) && __builtin_cpu_supports("avx512vnni"))
        f |= LLM_CPU_AVX512_VNNI;
#if defined(__GNUC__) && __GNUC__ >= 12
    if ((f & LLM_CPU_AVX512) && __builtin_cpu_supports("avx512bf16"))
        f |= LLM_CPU_AVX512_BF16;
#endif
#elif defined(__aarch64__)
    f |= LLM_CPU_NEON; /* Advanced SIMD is part of every AArch64 CPU */
#ifdef HWCAP_ASIMDDP
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP)
        f |= LLM_CPU_DOTPROD;
#endif
#endif
    return f;
}

/* the features the kernels choose by: the CPU's, capped by KVCHAT_CPU */
static unsigned detect_cpu(void)
{
    unsigned f = probe_cpu();
    const char *cap = getenv("KVCHAT_CPU");
    if (!cap || !*cap) /* unset or empty: the CPU's own */
        return f;
    static const struct {
        const char *name;
        unsigned needs, keeps;
    } caps[] = {
        {"generic", 0, 0},
        {"avx2", LLM_CPU_AVX2, LLM_CPU_AVX2},
        {"avx512", LLM_CPU_AVX512_KERNELS, ~0u},
        {"neon", LLM_CPU_NEON, LLM_CPU_NEON | LLM_CPU_DOTPROD},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        if (strcmp(cap, caps[i].name))
            continue;
        if ((f & caps[i].needs) == caps[i].needs)
            return f & caps[i].keeps;
        snprintf(cpu_error, sizeof cpu_error, "KVCHAT_CPU=%s: this CPU cannot run it (it runs %s)", cap,
                 llm_cpu_has_avx512(f) ? "generic, avx2, avx512" : f & LLM_CPU_AVX2 ? "generic, avx2"
                 : f & LLM_CPU_NEON ? "generic, neon" : "generic");
        return 0;
    }
    snprintf(cpu_error, sizeof cpu_error, "KVCHAT_CPU=%.40s: unknown (choose generic, avx2, avx512 or neon)", cap);
    return 0;
}

static void ops_init(void)
{
    cpu_features = detect_cpu();
    llm_act_init(cpu_features);
    llm_mm_init(cpu_features);
    llm_quant_basic_init(ops_table, mm_table, cpu_features);
    llm_quant_legacy_init(ops_table, cpu_features);
    llm_quant_pack_init(mm_table, unpack_table, cpu_features);
    llm_quant_k_init(ops_table, mm_table, unpack_table, cpu_features);
    llm_quant_iq4_init(ops_table, mm_table, unpack_table, cpu_features);
    /* other kernel files add their init calls here */
}

const struct llm_type_ops *llm_get_type_ops(uint32_t type)
{
    pthread_once(&ops_once, ops_init);
    return type < LLM_TYPE_COUNT && ops_table[type].to_float ? &ops_table[type] : NULL;
}

const struct llm_mm_ops *llm_get_mm_ops(uint32_t type)
{
    pthread_once(&ops_once, ops_init);
    return type < LLM_TYPE_COUNT && mm_table[type].gemv ? &mm_table[type] : NULL;
}

const struct llm_unpack_ops *llm_get_unpack_ops(uint32_t type)
{
    pthread_once(&ops_once, ops_init);
    return type < LLM_TYPE_COUNT && unpack_table[type].unpack ? &unpack_table[type] : NULL;
}

unsigned llm_cpu_features(void)
{
    pthread_once(&ops_once, ops_init);
    return cpu_features;
}

const char *llm_cpu_path(void)
{
    unsigned f = llm_cpu_features();
    return llm_cpu_has_avx512(f) ? "avx512" : f & LLM_CPU_AVX2 ? "avx2" : f & LLM_CPU_DOTPROD ? "neon-dotprod" : f & LLM_CPU_NEON ? "neon" : "generic";
}

const char *llm_cpu_error(void)
{
    llm_cpu_features();
    return cpu_error[0] ? cpu_error : NULL;
}
