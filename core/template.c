/*
 * template.c - chat templates: recognising a model's Jinja template by the
 * markers its family always contains (the approach llama.cpp takes; no Jinja
 * interpreter), so kvchat can render conversations in that family's format.
 * Order matters: more specific markers are tested before general ones.
 */
#include "core/llm.h"

#include <string.h>

static bool has(const char *t, size_t n, const char *needle)
{
    return memmem(t, n, needle, strlen(needle)) != NULL;
}

enum llm_template llm_template_detect(const char *t, size_t n)
{
    if (has(t, n, "<|im_start|>"))
        return LLM_TEMPLATE_CHATML;
    if ((n >= 7 && !memcmp(t, "mistral", 7)) || has(t, n, "[INST]")) {
        if (has(t, n, "[SYSTEM_PROMPT]"))
            return LLM_TEMPLATE_MISTRAL_V7;
        if (has(t, n, "' [INST] ' + system_message") || has(t, n, "[AVAILABLE_TOOLS]")) {
            if (has(t, n, " [INST]"))
                return LLM_TEMPLATE_MISTRAL_V1;
            if (has(t, n, "\"[INST]\""))
                return LLM_TEMPLATE_MISTRAL_V3_TEKKEN;
            return LLM_TEMPLATE_MISTRAL_V3;
        }
        return LLM_TEMPLATE_LLAMA2;
    }
    if (has(t, n, "<|assistant|>") && has(t, n, "<|end|>"))
        return LLM_TEMPLATE_PHI3;
    if (has(t, n, "<|user|>") && has(t, n, "<|endoftext|>"))
        return LLM_TEMPLATE_ZEPHYR;
    if (has(t, n, "<start_of_turn>"))
        return LLM_TEMPLATE_GEMMA;
    if (has(t, n, "### Instruction:") && has(t, n, "<|EOT|>"))
        return LLM_TEMPLATE_DEEPSEEK;
    if (has(t, n, "<|start_header_id|>") && has(t, n, "<|end_header_id|>"))
        return LLM_TEMPLATE_LLAMA3;
    if (has(t, n, "'Assistant: ' + message['content'] + eos_token"))
        return LLM_TEMPLATE_DEEPSEEK2;
    if (has(t, n, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && has(t, n, "<\xef\xbd\x9c" "User\xef\xbd\x9c>"))
        return LLM_TEMPLATE_DEEPSEEK3;
    return LLM_TEMPLATE_UNKNOWN;
}

const char *llm_template_name(enum llm_template t)
{
    static const char *const names[LLM_TEMPLATE_COUNT] = {
        [LLM_TEMPLATE_NONE] = "none",
        [LLM_TEMPLATE_UNKNOWN] = "unknown",
        [LLM_TEMPLATE_CHATML] = "chatml",
        [LLM_TEMPLATE_LLAMA2] = "llama2",
        [LLM_TEMPLATE_LLAMA3] = "llama3",
        [LLM_TEMPLATE_MISTRAL_V1] = "mistral-v1",
        [LLM_TEMPLATE_MISTRAL_V3] = "mistral-v3",
        [LLM_TEMPLATE_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
        [LLM_TEMPLATE_MISTRAL_V7] = "mistral-v7",
        [LLM_TEMPLATE_PHI3] = "phi3",
        [LLM_TEMPLATE_GEMMA] = "gemma",
        [LLM_TEMPLATE_ZEPHYR] = "zephyr",
        [LLM_TEMPLATE_DEEPSEEK] = "deepseek",
        [LLM_TEMPLATE_DEEPSEEK2] = "deepseek2",
        [LLM_TEMPLATE_DEEPSEEK3] = "deepseek3",
    };
    return (unsigned)t < LLM_TEMPLATE_COUNT ? names[t] : "unknown";
}
