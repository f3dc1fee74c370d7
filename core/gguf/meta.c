/*
 * meta.c - reads what a GGUF's metadata says about its model: the
 * architecture's hyperparameters ({arch}.* keys), the vocabulary's facts
 * (tokenizer.* keys), the chat template's family, and totals over the tensor
 * infos. `kvchat models info` prints this; the model binding starts from it.
 * Only reads; absent keys are reported as -1 and left to the caller to judge.
 */
#include "core/llm.h"

#include <stdio.h>
#include <string.h>

static void copy_str(const struct llm_gguf *g, const char *key, char *dst, size_t n)
{
    struct llm_str s;
    dst[0] = 0;
    if (llm_gguf_find_str(g, key, &s) == 0) {
        size_t k = s.len < n - 1 ? (size_t)s.len : n - 1;
        memcpy(dst, s.ptr, k);
        dst[k] = 0;
        /* a NUL inside the value ends it; keep printable */
        for (size_t i = 0; i < k; i++)
            if ((unsigned char)dst[i] < 0x20)
                dst[i] = '?';
    }
}

/* arch_int, arch_float: the value of "ARCH.SUFFIX", def when absent */
#define ARCH_GETTER(name, T, find)                                                          \
    static T name(const struct llm_gguf *g, const char *arch, const char *suffix, T def)    \
    {                                                                                       \
        char key[128];                                                                      \
        T v = def;                                                                          \
        snprintf(key, sizeof key, "%s.%s", arch, suffix);                                   \
        find(g, key, &v);                                                                   \
        return v;                                                                           \
    }
ARCH_GETTER(arch_int, int64_t, llm_gguf_find_int)
ARCH_GETTER(arch_float, double, llm_gguf_find_float)

static int64_t key_int(const struct llm_gguf *g, const char *key, int64_t def)
{
    int64_t v = def;
    llm_gguf_find_int(g, key, &v);
    return v;
}

int llm_model_meta_read(const struct llm_gguf *g, struct llm_model_meta *m, char *err,
                        size_t err_size)
{
    memset(m, 0, sizeof *m);
    copy_str(g, "general.architecture", m->arch, sizeof m->arch);
    copy_str(g, "general.name", m->name, sizeof m->name);
    m->file_type = key_int(g, "general.file_type", -1);
    const char *a = m->arch;
    m->n_ctx_train = arch_int(g, a, "context_length", -1);
    m->n_embd = arch_int(g, a, "embedding_length", -1);
    m->n_layer = arch_int(g, a, "block_count", -1);
    m->n_ff = arch_int(g, a, "feed_forward_length", -1);
    m->n_head = arch_int(g, a, "attention.head_count", -1);
    m->n_head_kv = arch_int(g, a, "attention.head_count_kv", m->n_head);
    m->head_dim_k = arch_int(g, a, "attention.key_length",
                             m->n_head > 0 && m->n_embd > 0 ? m->n_embd / m->n_head : -1);
    m->head_dim_v = arch_int(g, a, "attention.value_length", m->head_dim_k);
    m->rms_eps = arch_float(g, a, "attention.layer_norm_rms_epsilon", 0);
    m->rope_freq_base = arch_float(g, a, "rope.freq_base", 10000.0);
    m->rope_dim = arch_int(g, a, "rope.dimension_count", m->head_dim_k);
    /* llama.cpp's llama_model_rope_type: these all rotate NeoX-style */
    m->rope_type = !strcmp(a, "llama") ? "norm"
                   : !strcmp(a, "qwen2") || !strcmp(a, "qwen3") || !strcmp(a, "gemma2") ||
                           !strcmp(a, "gemma3") || !strcmp(a, "phi3") || !strcmp(a, "qwen3moe") ||
                           !strcmp(a, "gpt-oss") ||
                           !strcmp(a, "gemma4")
                       ? "neox"
                   : !strcmp(a, "qwen35") || !strcmp(a, "qwen35moe") ? "imrope"
                       : "?";
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    copy_str(g, key, m->rope_scaling, sizeof m->rope_scaling);
    m->rope_scaling_factor = arch_float(g, a, "rope.scaling.factor", 0);

    m->n_swa = arch_int(g, a, "attention.sliding_window", -1);
    m->swa_period = -1;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
    int64_t pi = llm_gguf_find_key(g, key);
    if (pi >= 0 && llm_gguf_kv_type(g, pi) != LLM_GGUF_TYPE_ARRAY)
        llm_gguf_get_int(g, pi, &m->swa_period);
    m->rope_freq_base_swa = arch_float(g, a, "rope.freq_base_swa", 0);
    m->rope_orig_ctx = arch_int(g, a, "rope.scaling.original_context_length", -1);
    m->rope_attn_factor = arch_float(g, a, "rope.scaling.attn_factor", 0);
    m->attn_softcap = arch_float(g, a, "attn_logit_softcapping", 0);
    m->final_softcap = arch_float(g, a, "final_logit_softcapping", 0);
    m->ssm_conv = arch_int(g, a, "ssm.conv_kernel", -1);
    m->ssm_state = arch_int(g, a, "ssm.state_size", -1);
    m->ssm_groups = arch_int(g, a, "ssm.group_count", -1);
    m->ssm_heads = arch_int(g, a, "ssm.time_step_rank", -1);
    m->ssm_inner = arch_int(g, a, "ssm.inner_size", -1);
    m->full_attn_interval = arch_int(g, a, "full_attention_interval", -1);
    m->n_nextn = arch_int(g, a, "nextn_predict_layers", -1);
    m->n_expert = arch_int(g, a, "expert_count", -1);
    m->n_expert_used = arch_int(g, a, "expert_used_count", -1);
    m->n_ff_exp = arch_int(g, a, "expert_feed_forward_length", -1);
    m->n_ff_shexp = arch_int(g, a, "expert_shared_feed_forward_length", -1);

    int64_t ti = llm_gguf_find_key(g, "tokenizer.ggml.tokens");
    m->n_vocab = ti >= 0 && llm_gguf_arr_type(g, ti) == LLM_GGUF_TYPE_STRING
                     ? (int64_t)llm_gguf_arr_n(g, ti)
                     : -1;
    copy_str(g, "tokenizer.ggml.model", m->tokenizer, sizeof m->tokenizer);
    copy_str(g, "tokenizer.ggml.pre", m->tokenizer_pre, sizeof m->tokenizer_pre);
    m->bos_id = key_int(g, "tokenizer.ggml.bos_token_id", -1);
    m->eos_id = key_int(g, "tokenizer.ggml.eos_token_id", -1);
    m->eot_id = key_int(g, "tokenizer.ggml.eot_token_id", -1);
    m->unk_id = key_int(g, "tokenizer.ggml.unknown_token_id", -1);
    m->pad_id = key_int(g, "tokenizer.ggml.padding_token_id", -1);
    m->add_bos = (int)key_int(g, "tokenizer.ggml.add_bos_token", -1);

    struct llm_str t;
    m->chat_template = llm_gguf_find_str(g, "tokenizer.chat_template", &t) == 0
                           ? llm_template_detect(t.ptr, (size_t)t.len)
                           : LLM_TEMPLATE_NONE;

    for (int64_t i = 0; i < llm_gguf_n_tensors(g); i++) {
        const struct llm_tensor_info *ti2 = llm_gguf_tensor(g, i);
        m->n_params += llm_tensor_n_elements(ti2);
        m->tensor_bytes += ti2->n_bytes;
        m->type_count[ti2->type]++;
    }
    if (!m->arch[0]) {
        snprintf(err, err_size, "no general.architecture in the metadata");
        return -1;
    }
    return 0;
}

const char *llm_file_type_name(int64_t ft)
{
    static const char *const names[] = {
        [0] = "all F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0",
        [9] = "Q5_1", [10] = "Q2_K - Medium", [11] = "Q3_K - Small", [12] = "Q3_K - Medium",
        [13] = "Q3_K - Large", [14] = "Q4_K - Small", [15] = "Q4_K - Medium",
        [16] = "Q5_K - Small", [17] = "Q5_K - Medium", [18] = "Q6_K", [19] = "IQ2_XXS",
        [20] = "IQ2_XS", [21] = "Q2_K - Small", [22] = "IQ3_XS", [23] = "IQ3_XXS",
        [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S", [27] = "IQ3_M", [28] = "IQ2_S",
        [29] = "IQ2_M", [30] = "IQ4_XS", [31] = "IQ1_M", [32] = "BF16", [36] = "TQ1_0",
        [37] = "TQ2_0", [38] = "MXFP4 MoE", [39] = "NVFP4",
    };
    ft &= ~(int64_t)1024; /* LLAMA_FTYPE_GUESSED */
    if (ft < 0 || ft >= (int64_t)(sizeof names / sizeof *names) || !names[ft])
        return "?";
    return names[ft];
}
