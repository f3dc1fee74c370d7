/*
 * alias.c - the built-in table of well-known instruct models, so that a
 * newcomer can type `kvchat models pull qwen2.5:0.5b`. Each alias names a
 * Hugging Face repo and one GGUF file in it (a 4- to 8-bit quantization that
 * a CPU runs well). Sizes are approximate: they are shown to the user before
 * a download; the download itself is checked against the hub's SHA-256.
 */
#include "models/mdl.h"
#include "core/llm.h"

#include <string.h>

#define MB 1000000ULL

const struct mdl_alias mdl_aliases[] = {
    {"qwen2.5:0.5b", "Qwen/Qwen2.5-0.5B-Instruct-GGUF", "qwen2.5-0.5b-instruct-q4_k_m.gguf", 491 * MB,
     "Qwen2.5 0.5B Instruct, Q4_K_M", "qwen2", "qwen2", "chatml"},
    {"qwen2.5:1.5b", "Qwen/Qwen2.5-1.5B-Instruct-GGUF", "qwen2.5-1.5b-instruct-q4_k_m.gguf", 1117 * MB,
     "Qwen2.5 1.5B Instruct, Q4_K_M", "qwen2", "qwen2", "chatml"},
    {"qwen2.5:3b", "Qwen/Qwen2.5-3B-Instruct-GGUF", "qwen2.5-3b-instruct-q4_k_m.gguf", 2105 * MB,
     "Qwen2.5 3B Instruct, Q4_K_M", "qwen2", "qwen2", "chatml"},
    {"qwen3:0.6b", "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", 639 * MB, "Qwen3 0.6B, Q8_0", "qwen3", "qwen2", "chatml"},
    {"qwen3:1.7b", "Qwen/Qwen3-1.7B-GGUF", "Qwen3-1.7B-Q8_0.gguf", 1834 * MB, "Qwen3 1.7B, Q8_0", "qwen3", "qwen2", "chatml"},
    {"qwen3:4b", "Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf", 2497 * MB, "Qwen3 4B, Q4_K_M", "qwen3", "qwen2", "chatml"},
    {"llama3.2:1b", "bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
     808 * MB, "Llama 3.2 1B Instruct, Q4_K_M", "llama", "llama-bpe", "llama3"},
    {"llama3.2:3b", "bartowski/Llama-3.2-3B-Instruct-GGUF", "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
     2019 * MB, "Llama 3.2 3B Instruct, Q4_K_M", "llama", "llama-bpe", "llama3"},
    {"smollm2:360m", "HuggingFaceTB/SmolLM2-360M-Instruct-GGUF", "smollm2-360m-instruct-q8_0.gguf",
     386 * MB, "SmolLM2 360M Instruct, Q8_0", "llama", "gpt-2", "chatml"},
    {"smollm2:1.7b", "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF", "smollm2-1.7b-instruct-q4_k_m.gguf",
     1056 * MB, "SmolLM2 1.7B Instruct, Q4_K_M", "llama", "gpt-2", "chatml"},
    {"phi3.5:mini", "bartowski/Phi-3.5-mini-instruct-GGUF", "Phi-3.5-mini-instruct-Q4_K_M.gguf",
     2393 * MB, "Phi-3.5 mini Instruct (3.8B), Q4_K_M", "phi3", "phi-3", "phi3"},
    {"mistral:7b", "bartowski/Mistral-7B-Instruct-v0.3-GGUF", "Mistral-7B-Instruct-v0.3-Q4_K_M.gguf",
     4372 * MB, "Mistral 7B Instruct v0.3, Q4_K_M", "llama", "llama-spm", "mistral-v3"},
    {"gemma3:1b", "ggml-org/gemma-3-1b-it-GGUF", "gemma-3-1b-it-Q4_K_M.gguf", 806 * MB,
     "Gemma 3 1B Instruct, Q4_K_M", "gemma3", "gemma-3", "gemma"},
    {"gemma3:4b", "ggml-org/gemma-3-4b-it-GGUF", "gemma-3-4b-it-Q4_K_M.gguf", 2490 * MB,
     "Gemma 3 4B Instruct (text), Q4_K_M", "gemma3", "gemma-3", "gemma"},
    {"phi4-mini", "bartowski/microsoft_Phi-4-mini-instruct-GGUF",
     "microsoft_Phi-4-mini-instruct-Q4_K_M.gguf", 2491 * MB, "Phi-4 mini Instruct (3.8B), Q4_K_M",
     "phi3", "gpt-2", "phi3"},
    /* Qwen3.5 (qwen35: Gated DeltaNet hybrids). Repositories and file names as
     * llama.cpp's docs/backend/OPENVINO.md lists them (bartowski's 0.8B, 2B
     * and 4B, lmstudio-community's 9B); sizes estimated. The vocabulary of the
     * test's synthetic model is Qwen2's (tests/data has no Qwen3.5 one: its
     * qwen35 pre-tokenizer is tested on llama.cpp's ggml-vocab-qwen35) */
    {"qwen3.5:0.8b", "bartowski/Qwen_Qwen3.5-0.8B-GGUF", "Qwen_Qwen3.5-0.8B-Q4_K_M.gguf", 560 * MB,
     "Qwen3.5 0.8B, Q4_K_M", "qwen35", "qwen2", "chatml"},
    {"qwen3.5:2b", "bartowski/Qwen_Qwen3.5-2B-GGUF", "Qwen_Qwen3.5-2B-Q4_K_M.gguf", 1300 * MB,
     "Qwen3.5 2B, Q4_K_M", "qwen35", "qwen2", "chatml"},
    {"qwen3.5:4b", "bartowski/Qwen_Qwen3.5-4B-GGUF", "Qwen_Qwen3.5-4B-Q4_K_M.gguf", 2700 * MB,
     "Qwen3.5 4B, Q4_K_M", "qwen35", "qwen2", "chatml"},
    {"qwen3.5:9b", "lmstudio-community/Qwen3.5-9B-GGUF", "Qwen3.5-9B-Q4_K_M.gguf", 5700 * MB,
     "Qwen3.5 9B, Q4_K_M", "qwen35", "qwen2", "chatml"},
    /* Qwen3-30B-A3B (qwen3moe: 128 experts, 8 a token, 3.3 B active): the
     * Qwen repository's Q4_K_M, the file name and size (18.6 GB) as public
     * download scripts and model catalogues give them (unsloth's copy of the
     * same name is 18,556,686,912 bytes); it fits a 24 GB machine */
    {"qwen3:30b-a3b", "Qwen/Qwen3-30B-A3B-GGUF", "Qwen3-30B-A3B-Q4_K_M.gguf", 18557 * MB,
     "Qwen3 30B-A3B (mixture of experts, 3.3B active), Q4_K_M", "qwen3moe", "qwen2", "chatml"},
    /* gpt-oss-20b (gpt-oss: 32 experts, 4 a token, 3.6 B active; its experts
     * MXFP4 in every quantization): unsloth's Q4_K_M, name and size (11.6 GB)
     * from the repository's file listing. No o200k vocabulary file is at
     * hand (tests/data/tokenizer), so the test's synthetic model has the
     * placeholder vocabulary ("") */
    {"gpt-oss:20b", "unsloth/gpt-oss-20b-GGUF", "gpt-oss-20b-Q4_K_M.gguf", 11600 * MB,
     "gpt-oss 20B (mixture of experts, 3.6B active), Q4_K_M", "gpt-oss", "", "gpt-oss"},
    /* Qwen3.6-35B-A3B (qwen35moe: the Qwen3.5 hybrid trunk, 256 experts, 8
     * used and a shared one, 3 B active): ggml-org's Q4_K_M, its repository
     * and file name as public download manifests and run records give them
     * (one records revision baec3eb, sha256 671e47e0..., and llama.cpp's
     * model size 20,408,576,512 bytes: it fits a 24 GB machine, barely) */
    {"qwen3.6:35b-a3b", "ggml-org/Qwen3.6-35B-A3B-GGUF", "Qwen3.6-35B-A3B-Q4_K_M.gguf", 20409 * MB,
     "Qwen3.6 35B-A3B (mixture of experts, 3B active), Q4_K_M", "qwen35moe", "qwen2", "chatml"},
    /* Gemma 4 (gemma4, text only here: the repositories' mmproj files are
     * not needed). unsloth's repositories and Q4_K_M file names as public
     * model catalogues and download scripts give them: E2B 2,963 MB (a
     * catalogue that also records its sha256, 9378bc47...), E4B
     * 4,977,171,584 bytes (a catalogue's size_bytes). 26B-A4B (128
     * experts, 8 used, beside a dense FFN; 3.8 B active): unsloth's
     * UD-Q4_K_M, the name from huggingface:// references and a hub cache
     * path (revision 8bacec5), its size about 17 GB (a listing's figure;
     * estimated: no exact size was found). Its experts' width (704) is not
     * a multiple of 256, so those tensors fall back to Q5_0/Q8_0/IQ4_NL,
     * which kvchat reads. */
    {"gemma4:e2b", "unsloth/gemma-4-E2B-it-GGUF", "gemma-4-E2B-it-Q4_K_M.gguf", 2963 * MB,
     "Gemma 4 E2B Instruct (text), Q4_K_M", "gemma4", "gemma-4", "gemma4"},
    {"gemma4:e4b", "unsloth/gemma-4-E4B-it-GGUF", "gemma-4-E4B-it-Q4_K_M.gguf", 4977 * MB,
     "Gemma 4 E4B Instruct (text), Q4_K_M", "gemma4", "gemma-4", "gemma4"},
    {"gemma4:26b-a4b", "unsloth/gemma-4-26B-A4B-it-GGUF", "gemma-4-26B-A4B-it-UD-Q4_K_M.gguf", 17000 * MB,
     "Gemma 4 26B-A4B Instruct (mixture of experts, 3.8B active), UD-Q4_K_M", "gemma4", "gemma-4", "gemma4"},
    {NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL},
};

bool mdl_alias_runs(const struct mdl_alias *a)
{
    return llm_arch_runs(a->arch);
}

const struct mdl_alias *mdl_alias_find(const char *name)
{
    for (const struct mdl_alias *a = mdl_aliases; a->name; a++)
        if (!strcmp(a->name, name) && mdl_alias_runs(a))
            return a;
    return NULL;
}
