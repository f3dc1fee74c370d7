/*
 * types.c - the table of ggml tensor types as GGUF stores them: name, block
 * size in elements and block size in bytes, and which ones kvchat computes
 * with. The byte sizes follow the block layouts of ggml-common.h (see
 * core/kernels/quant.h for the layouts of the types kvchat implements); a test
 * checks every row against those layouts.
 */
#include "core/llm.h"

struct type_row {
    const char *name;
    int64_t block_size;  /* elements per block */
    int64_t block_bytes; /* bytes per block */
    bool supported;      /* kvchat computes with it (kvchat-files(5), the model types) */
};

#define QK_K 256
static const struct type_row type_table[LLM_TYPE_COUNT] = {
    [LLM_TYPE_F32] = {"F32", 1, 4, true},
    [LLM_TYPE_F16] = {"F16", 1, 2, true},
    [LLM_TYPE_Q4_0] = {"Q4_0", 32, 2 + 16, true},
    [LLM_TYPE_Q4_1] = {"Q4_1", 32, 2 * 2 + 16, true},
    [LLM_TYPE_Q5_0] = {"Q5_0", 32, 2 + 4 + 16, true},
    [LLM_TYPE_Q5_1] = {"Q5_1", 32, 2 * 2 + 4 + 16, true},
    [LLM_TYPE_Q8_0] = {"Q8_0", 32, 2 + 32, true},
    [LLM_TYPE_Q8_1] = {"Q8_1", 32, 2 * 2 + 32, false},
    [LLM_TYPE_Q2_K] = {"Q2_K", QK_K, 2 * 2 + QK_K / 16 + QK_K / 4, true},
    [LLM_TYPE_Q3_K] = {"Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, true},
    [LLM_TYPE_Q4_K] = {"Q4_K", QK_K, 2 * 2 + 12 + QK_K / 2, true},
    [LLM_TYPE_Q5_K] = {"Q5_K", QK_K, 2 * 2 + 12 + QK_K / 2 + QK_K / 8, true},
    [LLM_TYPE_Q6_K] = {"Q6_K", QK_K, 2 + QK_K / 16 + 3 * QK_K / 4, true},
    [LLM_TYPE_Q8_K] = {"Q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2, false},
    [LLM_TYPE_IQ2_XXS] = {"IQ2_XXS", QK_K, 2 + QK_K / 8 * 2, false},
    [LLM_TYPE_IQ2_XS] = {"IQ2_XS", QK_K, 2 + QK_K / 8 * 2 + QK_K / 32, false},
    [LLM_TYPE_IQ3_XXS] = {"IQ3_XXS", QK_K, 2 + 3 * (QK_K / 8), false},
    [LLM_TYPE_IQ1_S] = {"IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false},
    [LLM_TYPE_IQ4_NL] = {"IQ4_NL", 32, 2 + 16, true},
    [LLM_TYPE_IQ3_S] = {"IQ3_S", QK_K, 2 + 13 * (QK_K / 32) + QK_K / 64, false},
    [LLM_TYPE_IQ2_S] = {"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false},
    [LLM_TYPE_IQ4_XS] = {"IQ4_XS", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2, true},
    [LLM_TYPE_I8] = {"I8", 1, 1, false},
    [LLM_TYPE_I16] = {"I16", 1, 2, false},
    [LLM_TYPE_I32] = {"I32", 1, 4, false},
    [LLM_TYPE_I64] = {"I64", 1, 8, false},
    [LLM_TYPE_F64] = {"F64", 1, 8, false},
    [LLM_TYPE_IQ1_M] = {"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false},
    [LLM_TYPE_BF16] = {"BF16", 1, 2, true},
    [LLM_TYPE_TQ1_0] = {"TQ1_0", QK_K, 2 + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5, false},
    [LLM_TYPE_TQ2_0] = {"TQ2_0", QK_K, 2 + QK_K / 4, false},
    [LLM_TYPE_MXFP4] = {"MXFP4", 32, 1 + 16, true},
    [LLM_TYPE_NVFP4] = {"NVFP4", 64, 4 + 32, false},
    [LLM_TYPE_Q1_0] = {"Q1_0", 128, 2 + 128 / 8, false},
    [LLM_TYPE_Q2_0] = {"Q2_0", 64, 2 + 64 / 4, false},
};

bool llm_type_known(uint32_t type)
{
    return type < LLM_TYPE_COUNT && type_table[type].name != NULL;
}

const char *llm_type_name(uint32_t type)
{
    return llm_type_known(type) ? type_table[type].name : "?";
}

int64_t llm_type_block_size(uint32_t type)
{
    return llm_type_known(type) ? type_table[type].block_size : 0;
}

int64_t llm_type_block_bytes(uint32_t type)
{
    return llm_type_known(type) ? type_table[type].block_bytes : 0;
}

bool llm_type_supported(uint32_t type)
{
    return llm_type_known(type) && type_table[type].supported;
}
