/*
 * alias.c - the built-in table of well-known instruct models, so that a
 * newcomer can type `kvchat models pull qwen2.5:0.5b`. Each alias names a
 * Hugging Face repo and one GGUF file in it (a 4- to 8-bit quantization that
 * a CPU runs well). Sizes are approximate: they are shown to the user before
 * a download; the download itself is checked against the hub's SHA-256.
 */
#include "models/mdl.h"

#include <string.h>

#define MB 1000000ULL

const struct mdl_alias mdl_aliases[] = {
    {"qwen2.5:0.5b", "Qwen/Qwen2.5-0.5B-Instruct-GGUF", "qwen2.5-0.5b-instruct-q4_k_m.gguf", 491 * MB,
     "Qwen2.5 0.5B Instruct, Q4_K_M"},
    {"qwen2.5:1.5b", "Qwen/Qwen2.5-1.5B-Instruct-GGUF", "qwen2.5-1.5b-instruct-q4_k_m.gguf", 1117 * MB,
     "Qwen2.5 1.5B Instruct, Q4_K_M"},
    {"qwen2.5:3b", "Qwen/Qwen2.5-3B-Instruct-GGUF", "qwen2.5-3b-instruct-q4_k_m.gguf", 2105 * MB,
     "Qwen2.5 3B Instruct, Q4_K_M"},
    {"qwen3:0.6b", "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", 639 * MB, "Qwen3 0.6B, Q8_0"},
    {"qwen3:1.7b", "Qwen/Qwen3-1.7B-GGUF", "Qwen3-1.7B-Q8_0.gguf", 1834 * MB, "Qwen3 1.7B, Q8_0"},
    {"qwen3:4b", "Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf", 2497 * MB, "Qwen3 4B, Q4_K_M"},
    {"llama3.2:1b", "bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
     808 * MB, "Llama 3.2 1B Instruct, Q4_K_M"},
    {"llama3.2:3b", "bartowski/Llama-3.2-3B-Instruct-GGUF", "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
     2019 * MB, "Llama 3.2 3B Instruct, Q4_K_M"},
    {"smollm2:360m", "HuggingFaceTB/SmolLM2-360M-Instruct-GGUF", "smollm2-360m-instruct-q8_0.gguf",
     386 * MB, "SmolLM2 360M Instruct, Q8_0"},
    {"smollm2:1.7b", "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF", "smollm2-1.7b-instruct-q4_k_m.gguf",
     1056 * MB, "SmolLM2 1.7B Instruct, Q4_K_M"},
    {"phi3.5:mini", "bartowski/Phi-3.5-mini-instruct-GGUF", "Phi-3.5-mini-instruct-Q4_K_M.gguf",
     2393 * MB, "Phi-3.5 mini Instruct (3.8B), Q4_K_M"},
    {"mistral:7b", "bartowski/Mistral-7B-Instruct-v0.3-GGUF", "Mistral-7B-Instruct-v0.3-Q4_K_M.gguf",
     4372 * MB, "Mistral 7B Instruct v0.3, Q4_K_M"},
    {NULL, NULL, NULL, 0, NULL},
};

const struct mdl_alias *mdl_alias_find(const char *name)
{
    for (const struct mdl_alias *a = mdl_aliases; a->name; a++)
        if (!strcmp(a->name, name))
            return a;
    return NULL;
}
