/*
 * cpu.c - run-time CPU feature detection for kernel dispatch. GCC's
 * __builtin_cpu_supports reads cpuid and checks that the OS saves the
 * AVX/AVX-512 register state (XCR0), so a feature reported here is usable.
 * The answer is computed once; concurrent first calls compute the same
 * values, and level_max is published last (release/acquire), so the race is
 * benign.
 */
#include "core/cpu.h"

#include <stdlib.h>
#include <string.h>

static struct llm_cpu_features features;
static int level_max = -1, level_env = -1;

static void detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    features.avx2 = __builtin_cpu_supports("avx2");
    features.fma = __builtin_cpu_supports("fma");
    features.f16c = __builtin_cpu_supports("f16c");
    features.avx512f = __builtin_cpu_supports("avx512f");
    features.avx512bw = __builtin_cpu_supports("avx512bw");
    features.avx512vl = __builtin_cpu_supports("avx512vl");
    features.avx512vnni = __builtin_cpu_supports("avx512vnni");
    features.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
    int lv = LLM_CPU_PORTABLE;
    if (features.avx2 && features.fma && features.f16c) {
        lv = LLM_CPU_AVX2;
        if (features.avx512f && features.avx512bw && features.avx512vl && features.avx512vnni)
            lv = LLM_CPU_AVX512;
    }
    int env = lv;
    const char *e = getenv("KVCHAT_CPU");
    if (e) {
        for (int i = 0; i < LLM_CPU_COUNT; i++)
            if (!strcmp(e, llm_cpu_level_name((enum llm_cpu_level)i)) && i < lv)
                env = i;
    }
    level_env = env;
    __atomic_store_n(&level_max, lv, __ATOMIC_RELEASE);
}

const struct llm_cpu_features *llm_cpu_features(void)
{
    if (__atomic_load_n(&level_max, __ATOMIC_ACQUIRE) < 0)
        detect();
    return &features;
}

enum llm_cpu_level llm_cpu_level(void)
{
    if (__atomic_load_n(&level_max, __ATOMIC_ACQUIRE) < 0)
        detect();
    return (enum llm_cpu_level)level_env;
}

enum llm_cpu_level llm_cpu_level_max(void)
{
    if (__atomic_load_n(&level_max, __ATOMIC_ACQUIRE) < 0)
        detect();
    return (enum llm_cpu_level)level_max;
}

const char *llm_cpu_level_name(enum llm_cpu_level level)
{
    switch (level) {
    case LLM_CPU_PORTABLE: return "portable";
    case LLM_CPU_AVX2: return "avx2";
    case LLM_CPU_AVX512: return "avx512";
    default: return "?";
    }
}
