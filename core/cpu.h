/*
 * cpu.h - (internal to core/ and its tests) what the CPU can run, asked once
 * by cpuid, so kernels can be chosen at run time.
 *
 * LLM_CPU_LEVEL is a ladder: each level implies the ones below it.
 *   PORTABLE  plain C (the scalar reference kernels)
 *   AVX2      AVX2 + FMA + F16C (Haswell, Zen 1 and later)
 *   AVX512    AVX2 level + AVX-512 F/BW/VL + VNNI (Ice Lake, Zen 4 and later);
 *             the kernels use VNNI's vpdpbusd on 256-bit registers
 * The environment variable KVCHAT_CPU=portable|avx2|avx512 caps the level
 * (for tests and benchmarks); it can never raise it above what cpuid says.
 */
#ifndef KVCHAT_CORE_CPU_H
#define KVCHAT_CORE_CPU_H

#include <stdbool.h>

enum llm_cpu_level {
    LLM_CPU_PORTABLE = 0,
    LLM_CPU_AVX2 = 1,
    LLM_CPU_AVX512 = 2,
    LLM_CPU_COUNT
};

struct llm_cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16;
};

/* the features cpuid reports (and the OS has enabled); thread-safe */
const struct llm_cpu_features *llm_cpu_features(void);
/* the highest level this CPU supports, capped by KVCHAT_CPU */
enum llm_cpu_level llm_cpu_level(void);
/* the highest level cpuid allows, ignoring KVCHAT_CPU */
enum llm_cpu_level llm_cpu_level_max(void);
/* "portable", "avx2", "avx512" */
const char *llm_cpu_level_name(enum llm_cpu_level level);

#endif
