/*
 * model.c - binds a GGUF model for computing: reads its hyperparameters
 * (from llm_model_meta_read), finds every tensor the architecture needs,
 * checks its type, shape and kernels, and keeps pointers into the mapping.
 * Invariants: a model that opens has every tensor present with the right
 * shape and a type with kernels, and every row length divisible by the
 * block sizes involved, so the engine never checks again. Tensor data stays
 * in the mmap, except quantized weights, which packed.c replaces at open
 * with their packed form (quant.h).
 */
#include "core/engine/model.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct llm_model_params llm_model_default_params(void)
{
    return (struct llm_model_params){.vocab_only = false};
}

struct binder {
    struct llm_model *m;
    char *err;
    size_t err_size;
};

static int fail(struct binder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct binder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->err_size, fmt, ap);
    va_end(ap);
    return -1;
}

static const struct llm_tensor_info *find(struct binder *b, const char *name, bool required)
{
    int64_t i = llm_gguf_find_tensor(b->m->gguf, name);
    if (i < 0) {
        if (required)
            fail(b, "tensor '%s' is missing", name);
        return NULL;
    }
    return llm_gguf_tensor(b->m->gguf, i);
}

/* a 1-D F32 vector of n elements; *out NULL when absent and optional */
static int bind_vec(struct binder *b, const char *name, int64_t n, bool required, const float **out)
{
    *out = NULL;
    const struct llm_tensor_info *t = find(b, name, required);
    if (!t)
        return required ? -1 : 0;
    if (t->n_dims != 1 || t->ne[0] != n)
        return fail(b, "tensor '%s' has shape [%" PRId64 " x %" PRId64 "], expected [%" PRId64 "]",
                    name, t->ne[0], t->ne[1], n);
    if (t->type != LLM_TYPE_F32)
        return fail(b, "tensor '%s' has type %s, expected F32", name, llm_type_name(t->type));
    if ((uintptr_t)t->data % 4)
        return fail(b, "tensor '%s' is not aligned", name);
    *out = t->data;
    return 0;
}

/* a 2-D weight (n_mat 0) or a stack of n_mat matrices of n_out rows
 * (3-D, ne = {n_in, n_out, n_mat}: bound as one weight of n_out n_mat rows) */
static int bind_weight_nd(struct binder *b, const char *name, int64_t n_in, int64_t n_out, int64_t n_mat,
                          struct llm_weight *w)
{
    const struct llm_tensor_info *t = find(b, name, true);
    if (!t)
        return -1;
    if (n_mat ? t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_mat
              : t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out) {
        if (n_mat)
            return fail(b, "tensor '%s' has shape [%" PRId64 " x %" PRId64 " x %" PRId64 "], expected [%" PRId64
                           " x %" PRId64 " x %" PRId64 "]",
                        name, t->ne[0], t->ne[1], t->ne[2], n_in, n_out, n_mat);
        return fail(b, "tensor '%s' has shape [%" PRId64 " x %" PRId64 "], expected [%" PRId64
                       " x %" PRId64 "]",
                    name, t->ne[0], t->n_dims > 1 ? t->ne[1] : 1, n_in, n_out);
    }
    const struct llm_type_ops *ops = llm_get_type_ops(t->type);
    const struct llm_mm_ops *mm = llm_get_mm_ops(t->type);
    if (!ops || !mm)
        return fail(b, "tensor '%s' has type %s, which kvchat cannot compute with", name,
                    llm_type_name(t->type));
    int64_t bs = llm_type_block_size(t->type);
    if (n_in % bs || (mm->act == LLM_ACT_I16 && n_in % 32))
        return fail(b, "tensor '%s': rows of %" PRId64 " elements do not divide into %s blocks", name,
                    n_in, llm_type_name(t->type));
    w->name = t->name;
    w->rows = t->data;
    w->ops = ops;
    w->mm = mm;
    w->m = (struct llm_mat){.data = t->data, .type = t->type, .n_in = n_in, .n_out = n_out * (n_mat ? n_mat : 1),
                            .row_bytes = (size_t)(n_in / bs * llm_type_block_bytes(t->type)),
                            .group_bytes = mm->packed ? mm->group_bytes(n_in) : 0};
    return 0;
}

static int bind_weight(struct binder *b, const char *name, int64_t n_in, int64_t n_out, struct llm_weight *w)
{
    return bind_weight_nd(b, name, n_in, n_out, 0, w);
}

/* a view on rows [row0, row0 + n_out) of the fused weight *w */
static void weight_rows(const struct llm_weight *w, int64_t row0, int64_t n_out, struct llm_weight *out)
{
    *out = *w; /* bound as rows: packing (if any) comes after binding */
    out->rows = w->rows + (size_t)row0 * w->m.row_bytes;
    out->m.data = out->rows;
    out->m.n_out = n_out;
}

static const struct {
    const char *name;
    enum llm_arch arch;
    bool computable;
} archs[] = {
    {"llama", LLM_ARCH_LLAMA, true},    {"qwen2", LLM_ARCH_QWEN2, true},
    {"qwen3", LLM_ARCH_QWEN3, true},    {"gemma2", LLM_ARCH_GEMMA2, true},
    {"gemma3", LLM_ARCH_GEMMA3, true},  {"phi3", LLM_ARCH_PHI3, true},
    {"qwen35", LLM_ARCH_QWEN35, true},  {"qwen3moe", LLM_ARCH_QWEN3MOE, true},
    {"qwen35moe", LLM_ARCH_QWEN35MOE, true}, {"gpt-oss", LLM_ARCH_GPTOSS, true},
    {"gemma4", LLM_ARCH_GEMMA4, true},
};

bool llm_arch_runs(const char *arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (!strcmp(arch, archs[i].name))
            return archs[i].computable;
    return false;
}

/* which layers use the sliding window, and each layer's RoPE: llama.cpp's
 * gemma2.cpp/gemma3.cpp load_arch_hparams and llama_hparams::set_swa_pattern
 * (layer l is local when l % period < period - 1; the default period is 2
 * for gemma2 and 6 for gemma3; an array-valued pattern key is ignored, as
 * llama.cpp's get_key_or_arr does for a scalar). phi3 declares a window that
 * llama.cpp ignores ("Phi SWA is currently disabled"): so does kvchat. */
static int layer_pattern(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_model_meta *mt = &m->meta;
    if (m->arch == LLM_ARCH_GEMMA4) /* gemma4_layers set them */
        return 0;
    int64_t period = 0;
    m->n_swa = 0;
    if (m->arch == LLM_ARCH_GEMMA2) {
        m->n_swa = mt->n_swa > 0 ? mt->n_swa : 4096; /* llama.cpp's default for gemma 2 */
        period = mt->swa_period >= 0 ? mt->swa_period : 2;
    } else if (m->arch == LLM_ARCH_GEMMA3 && mt->n_swa > 0) {
        m->n_swa = mt->n_swa;
        period = mt->swa_period >= 0 ? mt->swa_period : 6;
    } else if (m->arch == LLM_ARCH_GPTOSS) { /* openai-moe.cpp: the window is required, period 2 */
        if (mt->n_swa <= 0)
            return fail(b, "metadata key '%s.attention.sliding_window' is missing", mt->arch);
        m->n_swa = mt->n_swa;
        period = mt->swa_period >= 0 ? mt->swa_period : 2;
    }
    if (m->n_swa > (1 << 30))
        return fail(b, "metadata key '%s.attention.sliding_window' is out of range", mt->arch);
    /* gemma2: the local layers use the same base and scale as the global
     * ones unless rope.freq_base_swa says otherwise; gemma3: base_swa
     * (default 10000) and no linear scaling on the local layers */
    bool same = m->arch == LLM_ARCH_GEMMA2 || m->arch == LLM_ARCH_GPTOSS; /* gpt-oss: as gemma2 */
    float base_swa = same ? m->rope_base : 10000.0f;
    float scale_swa = same ? m->rope_freq_scale : 1.0f;
    if (mt->rope_freq_base_swa > 0)
        base_swa = (float)mt->rope_freq_base_swa;
    for (int64_t l = 0; l < m->n_layer; l++) {
        struct llm_layer *L = &m->layers[l];
        L->swa = m->n_swa > 0 && (period == 0 || l % period < period - 1);
        L->rope_base = L->swa ? base_swa : m->rope_base;
        L->rope_freq_scale = L->swa ? scale_swa : m->rope_freq_scale;
    }
    return 0;
}

/* qwen35 (llama.cpp src/models/qwen35.cpp's load_arch_hparams): the Gated
 * DeltaNet sizes, the MTP blocks after the trunk (bound by nothing: they
 * only serve llama.cpp's speculative decoding), the rotary sections. A
 * text token's position is the same in the first three imrope sections and
 * 0 in the fourth: pair i takes section (i mod sum) interleaved as
 * t, h, w, t, h, w, ... while each lasts (3 x its size), the fourth's pairs
 * after; those do not rotate. */
static int hparams_qwen35(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_model_meta *mt = &m->meta;
    struct { const char *key; int64_t v, max; } need[] = {
        {"ssm.conv_kernel", mt->ssm_conv, 64}, {"ssm.state_size", mt->ssm_state, 4096},
        {"ssm.group_count", mt->ssm_groups, 4096}, {"ssm.time_step_rank", mt->ssm_heads, 4096},
        {"ssm.inner_size", mt->ssm_inner, 1 << 20},
    };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (need[i].v <= 0 || need[i].v > need[i].max)
            return fail(b, "metadata key '%s.%s' is missing or out of range", mt->arch, need[i].key);
    if (mt->ssm_conv < 2)
        return fail(b, "metadata key '%s.ssm.conv_kernel' is out of range", mt->arch);
    if (mt->ssm_heads % mt->ssm_groups)
        return fail(b, "ssm.time_step_rank %" PRId64 " is not a multiple of ssm.group_count %" PRId64,
                    mt->ssm_heads, mt->ssm_groups);
    if (mt->ssm_inner != mt->ssm_heads * mt->ssm_state)
        return fail(b, "ssm.inner_size %" PRId64 " is not time_step_rank x state_size (%" PRId64 ")",
                    mt->ssm_inner, mt->ssm_heads * mt->ssm_state);
    if (mt->n_nextn > 0) {
        if (mt->n_nextn >= mt->n_layer)
            return fail(b, "metadata key '%s.nextn_predict_layers' is out of range", mt->arch);
        m->n_layer = mt->n_layer - mt->n_nextn;
    }
    m->ssm_conv = mt->ssm_conv;
    m->ssm_state = mt->ssm_state;
    m->ssm_groups = mt->ssm_groups;
    m->ssm_heads = mt->ssm_heads;
    m->conv_dim = 2 * m->ssm_groups * m->ssm_state + m->ssm_heads * m->ssm_state;
    m->attn_gate = true;
    m->q_rows = 2 * m->q_dim;
    int64_t attn_w = m->q_rows + 2 * m->kv_dim, rec_w = m->conv_dim + m->ssm_heads * m->ssm_state + 2 * m->ssm_heads;
    m->qkv_width = attn_w > rec_w ? attn_w : rec_w;

    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", mt->arch);
    int64_t ki = llm_gguf_find_key(m->gguf, key);
    int64_t sec[4] = {0, 0, 0, 0};
    if (ki < 0 || llm_gguf_kv_type(m->gguf, ki) != LLM_GGUF_TYPE_ARRAY || llm_gguf_arr_n(m->gguf, ki) < 4)
        return fail(b, "metadata key '%s' is missing (qwen35 needs 4 sections)", key);
    for (uint64_t i = 0; i < 4; i++)
        if (llm_gguf_arr_get_int(m->gguf, ki, i, &sec[i]) || sec[i] < 0 || sec[i] > (1 << 16))
            return fail(b, "metadata key '%s' is out of range", key);
    int64_t n_pairs = m->rope_dim / 2, total = sec[0] + sec[1] + sec[2] + sec[3];
    if (total <= 0 || total > n_pairs)
        return fail(b, "metadata key '%s' does not fit %" PRId64 " rotary pairs", key, n_pairs);
    m->rope_still = calloc((size_t)n_pairs, 1);
    if (!m->rope_still)
        return fail(b, "out of memory");
    for (int64_t i = 0; i < n_pairs; i++) {
        int64_t s = i % total;
        bool moves = (s % 3 == 1 && s < 3 * sec[1]) || (s % 3 == 2 && s < 3 * sec[2]) ||
                     (s % 3 == 0 && s < 3 * sec[0]);
        m->rope_still[i] = !moves;
    }
    return 0;
}

/* a mixture of experts (llama.cpp's load_hparams and src/models/qwen3moe.cpp):
 * expert_count (at most LLAMA_MAX_EXPERTS, 1024), expert_used_count (one
 * number; at least 1, at most the experts), expert_feed_forward_length
 * (default feed_forward_length / expert_used_count, as llama.cpp's
 * qwen3moe). qwen3moe gates by softmax, top k, renormalised to sum 1 (its
 * build_moe_ffn call: LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX, norm_w true,
 * no weight scale). */
static int hparams_moe(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_model_meta *mt = &m->meta;
    if (mt->n_expert < 1 || mt->n_expert > 1024)
        return fail(b, "metadata key '%s.expert_count' is missing or out of range", mt->arch);
    if (mt->n_expert_used < 1 || mt->n_expert_used > mt->n_expert)
        return fail(b, "metadata key '%s.expert_used_count' is missing or out of range (1 to %" PRId64 ")",
                    mt->arch, mt->n_expert);
    m->n_expert = mt->n_expert;
    m->n_expert_used = mt->n_expert_used;
    m->n_ff_exp = mt->n_ff_exp > 0 ? mt->n_ff_exp : m->n_ff / m->n_expert_used;
    if (m->n_ff_exp <= 0 || m->n_ff_exp > (1 << 20))
        return fail(b, "metadata key '%s.expert_feed_forward_length' is out of range", mt->arch);
    m->moe_gating = LLM_MOE_SOFTMAX;
    m->moe_norm = true;
    if (m->arch == LLM_ARCH_GPTOSS) { /* openai-moe.cpp: SOFTMAX_WEIGHT, no renormalising */
        m->moe_gating = LLM_MOE_SOFTMAX_WEIGHT;
        m->moe_norm = false;
    }
    /* qwen35moe's shared expert (llama.cpp src/models/qwen35moe.cpp):
     * expert_shared_feed_forward_length rows, default feed_forward_length;
     * its products are the dense FFN's, so n_ff becomes its rows */
    if (m->arch == LLM_ARCH_QWEN35MOE) {
        int64_t sh = mt->n_ff_shexp > 0 ? mt->n_ff_shexp : m->n_ff;
        if (sh > (1 << 20))
            return fail(b, "metadata key '%s.expert_shared_feed_forward_length' is out of range", mt->arch);
        m->n_ff = sh;
    }
    return 0;
}

/* "ARCH.SUFFIX" as one value for every layer or an array of one a layer
 * (llama.cpp's get_key_or_arr): layer l's value, def when absent; each
 * value must be in [lo, hi] */
static int layer_key(struct binder *b, const char *suffix, int64_t l, int64_t def, int64_t lo, int64_t hi,
                     int64_t *out)
{
    const struct llm_model_meta *mt = &b->m->meta;
    char key[128];
    snprintf(key, sizeof key, "%s.%s", mt->arch, suffix);
    int64_t ki = llm_gguf_find_key(b->m->gguf, key);
    *out = def;
    if (ki >= 0 && llm_gguf_kv_type(b->m->gguf, ki) == LLM_GGUF_TYPE_ARRAY) {
        if (llm_gguf_arr_n(b->m->gguf, ki) != (uint64_t)mt->n_layer)
            return fail(b, "metadata key '%s' has %" PRIu64 " values for %" PRId64 " blocks", key,
                        llm_gguf_arr_n(b->m->gguf, ki), mt->n_layer);
        if (llm_gguf_arr_get_int(b->m->gguf, ki, (uint64_t)l, out))
            return fail(b, "metadata key '%s' is not an array of numbers", key);
    } else if (ki >= 0 && llm_gguf_get_int(b->m->gguf, ki, out)) {
        return fail(b, "metadata key '%s' is not a number", key);
    }
    if (*out < lo || *out > hi)
        return fail(b, "metadata key '%s' is missing or out of range", key);
    return 0;
}

/* the largest of a per-layer key's values (gemma4's feed_forward_length
 * and head_count_kv may be arrays) */
static int layer_key_max(struct binder *b, const char *suffix, int64_t *max)
{
    int64_t v, mx = 0;
    for (int64_t l = 0; l < b->m->meta.n_layer; l++) {
        if (layer_key(b, suffix, l, *max, 1, 1 << 20, &v))
            return -1;
        mx = v > mx ? v : mx;
    }
    *max = mx;
    return 0;
}

/* gemma4 (llama.cpp src/models/gemma4.cpp load_arch_hparams; conversion/
 * gemma.py Gemma4Model): key_length/value_length for the global layers,
 * key_length_swa/value_length_swa for the local ones (equal, as llama.cpp
 * requires), rope.dimension_count(_swa), rope.freq_base(_swa); a window
 * (attention.sliding_window, required); shared_kv_layers (default 0);
 * embedding_length_per_layer_input (required, 0: none); no scaling of q.k;
 * the embedding times sqrt(n_embd); GELU; final soft-cap default 30 (as
 * llama_hparams); experts if expert_count is set. The model's head_dim,
 * kv_dim, rope_dim are the global layers' (the larger), n_head_kv and n_ff
 * the largest of the layers'. */
static int hparams_gemma4(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_model_meta *mt = &m->meta;
    int64_t hd_swa, vd_swa, rot_swa, n_shared;
    if (layer_key(b, "attention.key_length_swa", 0, -1, 2, 1 << 16, &hd_swa) ||
        layer_key(b, "attention.value_length_swa", 0, hd_swa, 2, 1 << 16, &vd_swa) ||
        layer_key(b, "rope.dimension_count_swa", 0, hd_swa, 2, hd_swa, &rot_swa) ||
        layer_key(b, "attention.shared_kv_layers", 0, 0, 0, mt->n_layer - 1, &n_shared) ||
        layer_key(b, "embedding_length_per_layer_input", 0, -1, 0, 1 << 16, &m->n_pl) ||
        layer_key(b, "attention.sliding_window", 0, -1, 1, 1 << 30, &m->n_swa))
        return -1;
    if (vd_swa != hd_swa)
        return fail(b, "attention.value_length_swa differs from key_length_swa (gemma4 requires them equal)");
    if (hd_swa % 2 || rot_swa % 2)
        return fail(b, "gemma4: the local head size and its RoPE dimensions must be even");
    if (n_shared > 0 && mt->n_layer - n_shared < 2)
        return fail(b, "gemma4: shared_kv_layers leaves fewer than 2 layers with their own KV");
    m->n_layer_kv_shared = n_shared;
    m->n_layer_kv = m->n_layer - n_shared;
    if (hd_swa > m->head_dim) {
        m->head_dim = hd_swa;
        m->q_dim = m->n_head * m->head_dim;
    }
    m->kv_dim = m->n_head_kv * m->head_dim;
    m->qkv_width = m->q_dim + 2 * m->kv_dim;
    m->q_rows = m->q_dim;
    m->ffn_act = LLM_FFN_GELU_TANH;
    m->embd_scale = sqrtf((float)m->n_embd);
    m->attn_scale = 1.0f;
    m->final_softcap = mt->final_softcap > 0 ? (float)mt->final_softcap : 30.0f;
    if (mt->n_expert > 0)
        return hparams_moe(b);
    return 0;
}

static int hparams(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_model_meta *mt = &m->meta;
    size_t ai = 0;
    while (ai < sizeof archs / sizeof *archs && strcmp(mt->arch, archs[ai].name))
        ai++;
    if (ai == sizeof archs / sizeof *archs)
        return fail(b, "architecture '%s' is not supported (llama, qwen2, qwen3, gemma2, "
                       "gemma3, phi3, qwen35, qwen3moe, qwen35moe, gpt-oss, gemma4 are)",
                   mt->arch);
    m->arch = archs[ai].arch;
    m->computable = archs[ai].computable;
    int64_t n_ff = mt->n_ff, n_head_kv = mt->n_head_kv;
    if (m->arch == LLM_ARCH_GEMMA4) { /* each may be one value a layer */
        if (mt->n_layer <= 0 || mt->n_layer > 4096)
            return fail(b, "metadata key '%s.block_count' is missing or out of range", mt->arch);
        if (layer_key_max(b, "feed_forward_length", &n_ff) ||
            layer_key_max(b, "attention.head_count_kv", &n_head_kv))
            return -1;
    }
    struct { const char *key; int64_t v; } need[] = {
        {"embedding_length", mt->n_embd}, {"block_count", mt->n_layer},
        {"feed_forward_length", n_ff}, {"attention.head_count", mt->n_head},
        {"attention.head_count_kv", n_head_kv}, {"attention.key_length", mt->head_dim_k},
    };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (need[i].v <= 0 || need[i].v > (1 << 20))
            return fail(b, "metadata key '%s.%s' is missing or out of range", mt->arch, need[i].key);
    if (mt->n_layer > 4096)
        return fail(b, "metadata key '%s.block_count' is out of range", mt->arch);
    if (m->arch != LLM_ARCH_GEMMA4 && mt->n_head % n_head_kv) /* gemma4: per layer, at binding */
        return fail(b, "head_count %" PRId64 " is not a multiple of head_count_kv %" PRId64,
                    mt->n_head, n_head_kv);
    if (mt->head_dim_v != mt->head_dim_k)
        return fail(b, "attention.value_length differs from key_length (not supported)");
    if (mt->head_dim_k % 2 || mt->rope_dim <= 0 || mt->rope_dim > mt->head_dim_k || mt->rope_dim % 2)
        return fail(b, "rope.dimension_count %" PRId64 " does not fit head size %" PRId64,
                    mt->rope_dim, mt->head_dim_k);
    if (!(mt->rms_eps > 0 && mt->rms_eps < 1))
        return fail(b, "metadata key '%s.attention.layer_norm_rms_epsilon' is missing", mt->arch);
    m->n_embd = mt->n_embd;
    m->n_layer = mt->n_layer;
    m->n_head = mt->n_head;
    m->n_head_kv = n_head_kv;
    m->head_dim = mt->head_dim_k;
    m->n_ff = n_ff;
    m->q_dim = m->n_head * m->head_dim;
    m->kv_dim = m->n_head_kv * m->head_dim;
    if (m->arch == LLM_ARCH_PHI3 && m->q_dim != m->n_embd)
        return fail(b, "phi3: head_count x key_length is %" PRId64 ", not embedding_length %" PRId64,
                    m->q_dim, m->n_embd);
    m->rms_eps = (float)mt->rms_eps;
    m->rope_base = (float)mt->rope_freq_base;
    m->rope_dim = mt->rope_dim;
    m->rope_neox = m->arch != LLM_ARCH_LLAMA;
    m->rope_freq_scale = 1.0f;
    m->n_ctx_train = mt->n_ctx_train > 0 ? mt->n_ctx_train : 2048;
    if (mt->rope_scaling[0] && strcmp(mt->rope_scaling, "none")) {
        bool longrope = m->arch == LLM_ARCH_PHI3 && !strcmp(mt->rope_scaling, "longrope");
        m->rope_yarn = m->arch == LLM_ARCH_GPTOSS && !strcmp(mt->rope_scaling, "yarn");
        if (strcmp(mt->rope_scaling, "linear") && !longrope && !m->rope_yarn)
            return fail(b, "rope scaling '%s' is not supported (none, linear%s are)", mt->rope_scaling,
                        m->arch == LLM_ARCH_PHI3 ? ", longrope" : m->arch == LLM_ARCH_GPTOSS ? ", yarn" : "");
        if (mt->rope_scaling_factor > 0)
            m->rope_freq_scale = (float)(1.0 / mt->rope_scaling_factor);
    }
    /* the architecture's constants (llama.cpp src/models/gemma2.cpp,
     * gemma3.cpp, phi3.cpp; llama-hparams.h for the soft-cap defaults) */
    bool gemma = m->arch == LLM_ARCH_GEMMA2 || m->arch == LLM_ARCH_GEMMA3;
    m->ffn_act = gemma ? LLM_FFN_GELU_TANH : LLM_FFN_SILU;
    m->embd_scale = gemma ? sqrtf((float)m->n_embd) : 1.0f;
    /* Gemma 2 27B (46 layers) and Gemma 3 27B (62 layers) scale queries by
     * n_embd / n_head instead of the head size (gemma_pytorch's config) */
    bool big = (m->arch == LLM_ARCH_GEMMA2 && m->n_layer == 46) ||
               (m->arch == LLM_ARCH_GEMMA3 && m->n_layer == 62);
    m->attn_scale = 1.0f / sqrtf(big ? (float)(m->n_embd / m->n_head) : (float)m->head_dim);
    m->attn_softcap = 0;
    m->final_softcap = 0;
    if (m->arch == LLM_ARCH_GEMMA2) {
        m->attn_softcap = mt->attn_softcap > 0 ? (float)mt->attn_softcap : 50.0f;
        m->final_softcap = mt->final_softcap > 0 ? (float)mt->final_softcap : 30.0f;
    } else if (m->arch == LLM_ARCH_GEMMA3 && mt->final_softcap > 0) {
        m->final_softcap = (float)mt->final_softcap;
    }
    m->rope_orig_ctx = mt->rope_orig_ctx > 0 ? mt->rope_orig_ctx : m->n_ctx_train;
    m->rope_attn_factor = mt->rope_attn_factor > 0 ? (float)mt->rope_attn_factor : 1.0f;
    if (m->rope_yarn && m->rope_freq_scale < 1.0f) {
        /* llama_context's yarn_attn_factor (get_mscale(factor, 1), then
         * cancelled by 1 / (1 + 0.1 ln factor), times the file's factor),
         * and ggml's rope_yarn's own 1 + 0.1 ln(1 / freq_scale), in f32 */
        float factor = 1.0f / m->rope_freq_scale;
        float af = 0.1f * logf(factor) + 1.0f;
        af *= 1.0f / (1.0f + 0.1f * logf(factor));
        af *= m->rope_attn_factor;
        m->rope_attn_factor = af * (1.0f + 0.1f * logf(1.0f / m->rope_freq_scale));
    } else if (m->rope_yarn) {
        m->rope_yarn = false; /* a factor of 1 or less: llama.cpp's get_mscale is 1, no ramp matters */
    }
    if (m->arch == LLM_ARCH_GPTOSS)
        m->ffn_act = LLM_FFN_SWIGLU_OAI;
    m->q_rows = m->q_dim;
    m->qkv_width = m->q_dim + 2 * m->kv_dim;
    m->n_layer_kv = m->n_layer;
    if ((m->arch == LLM_ARCH_QWEN35 || m->arch == LLM_ARCH_QWEN35MOE) && hparams_qwen35(b))
        return -1;
    if (m->arch == LLM_ARCH_QWEN3MOE || m->arch == LLM_ARCH_QWEN35MOE || m->arch == LLM_ARCH_GPTOSS)
        return hparams_moe(b);
    if (m->arch == LLM_ARCH_GEMMA4)
        return hparams_gemma4(b);
    return 0;
}

/* qwen35: which layers are Gated DeltaNet layers, as llama.cpp's
 * load_arch_hparams reads it: attention.recurrent_layers (one value per
 * block, MTP blocks included, or one for all), else every layer but each
 * full_attention_interval-th (default 4) */
static int recurrent_pattern(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_model_meta *mt = &m->meta;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", mt->arch);
    int64_t ki = llm_gguf_find_key(m->gguf, key);
    int64_t interval = mt->full_attn_interval;
    if (ki < 0) {
        if (interval == -1)
            interval = 4;
        if (interval <= 0 || interval > (1 << 20))
            return fail(b, "metadata key '%s.full_attention_interval' is out of range", mt->arch);
    }
    for (int64_t l = 0; l < m->n_layer; l++) {
        int64_t v = (l + 1) % (interval > 0 ? interval : 1) != 0;
        if (ki >= 0 && llm_gguf_kv_type(m->gguf, ki) == LLM_GGUF_TYPE_ARRAY) {
            if (llm_gguf_arr_n(m->gguf, ki) != (uint64_t)mt->n_layer)
                return fail(b, "metadata key '%s' has %" PRIu64 " values for %" PRId64 " blocks", key,
                            llm_gguf_arr_n(m->gguf, ki), mt->n_layer);
            if (llm_gguf_arr_get_int(m->gguf, ki, (uint64_t)l, &v))
                return fail(b, "metadata key '%s' is not an array of numbers", key);
        } else if (ki >= 0 && llm_gguf_get_int(m->gguf, ki, &v)) {
            return fail(b, "metadata key '%s' is not a number", key);
        }
        m->layers[l].recurrent = v != 0;
    }
    m->n_layer_kv = m->n_layer_rec = 0;
    for (int64_t l = 0; l < m->n_layer; l++) {
        struct llm_layer *L = &m->layers[l];
        L->kv_index = L->recurrent ? -1 : m->n_layer_kv++;
        L->rec_index = L->recurrent ? m->n_layer_rec++ : -1;
    }
    return 0;
}

static int bind_moe(struct binder *b, int64_t l);

/* a qwen35 layer: Gated DeltaNet or gated attention, then the FFN, whose
 * norm is post_attention_norm (llama.cpp src/models/qwen35.cpp); qwen35moe's
 * FFN is the experts and the shared expert (src/models/qwen35moe.cpp) */
static int bind_layer_qwen35(struct binder *b, int64_t l)
{
    struct llm_model *m = b->m;
    struct llm_layer *L = &m->layers[l];
    char n[LLM_GGUF_MAX_NAME + 16];
#define N(s) (snprintf(n, sizeof n, "blk.%" PRId64 ".%s", l, s), n)
    bool moe = m->arch == LLM_ARCH_QWEN35MOE;
    if (bind_vec(b, N("attn_norm.weight"), m->n_embd, true, &L->attn_norm) ||
        bind_vec(b, N("post_attention_norm.weight"), m->n_embd, true, &L->ffn_norm) ||
        bind_weight(b, moe ? N("ffn_gate_shexp.weight") : N("ffn_gate.weight"), m->n_embd, m->n_ff, &L->w_gate) ||
        bind_weight(b, moe ? N("ffn_up_shexp.weight") : N("ffn_up.weight"), m->n_embd, m->n_ff, &L->w_up) ||
        bind_weight(b, moe ? N("ffn_down_shexp.weight") : N("ffn_down.weight"), m->n_ff, m->n_embd, &L->w_down))
        return -1;
    if (moe && (bind_vec(b, N("ffn_gate_inp_shexp.weight"), m->n_embd, true, &L->shexp_gate) || bind_moe(b, l)))
        return -1;
    if (!L->recurrent)
        return bind_weight(b, N("attn_q.weight"), m->n_embd, 2 * m->q_dim, &L->wq) ||
               bind_weight(b, N("attn_k.weight"), m->n_embd, m->kv_dim, &L->wk) ||
               bind_weight(b, N("attn_v.weight"), m->n_embd, m->kv_dim, &L->wv) ||
               bind_weight(b, N("attn_output.weight"), m->q_dim, m->n_embd, &L->wo) ||
               bind_vec(b, N("attn_q_norm.weight"), m->head_dim, true, &L->q_norm) ||
               bind_vec(b, N("attn_k_norm.weight"), m->head_dim, true, &L->k_norm)
                   ? -1 : 0;
    int64_t V = m->ssm_heads, vd = V * m->ssm_state;
    if (bind_weight(b, N("attn_qkv.weight"), m->n_embd, m->conv_dim, &L->wq) ||
        bind_weight(b, N("attn_gate.weight"), m->n_embd, vd, &L->w_z) ||
        bind_weight(b, N("ssm_alpha.weight"), m->n_embd, V, &L->w_alpha) ||
        bind_weight(b, N("ssm_beta.weight"), m->n_embd, V, &L->w_beta) ||
        bind_weight(b, N("ssm_out.weight"), vd, m->n_embd, &L->wo) ||
        bind_vec(b, N("ssm_dt.bias"), V, true, &L->dt_bias) ||
        bind_vec(b, N("ssm_a"), V, true, &L->ssm_a) ||
        bind_vec(b, N("ssm_norm.weight"), m->ssm_state, true, &L->ssm_norm))
        return -1;
    const struct llm_tensor_info *t = find(b, N("ssm_conv1d.weight"), true);
    if (!t)
        return -1;
    if (t->n_dims != 2 || t->ne[0] != m->ssm_conv || t->ne[1] != m->conv_dim)
        return fail(b, "tensor '%s' has shape [%" PRId64 " x %" PRId64 "], expected [%" PRId64 " x %" PRId64 "]",
                    n, t->ne[0], t->n_dims > 1 ? t->ne[1] : 1, m->ssm_conv, m->conv_dim);
    if (t->type != LLM_TYPE_F32)
        return fail(b, "tensor '%s' has type %s, expected F32", n, llm_type_name(t->type));
    if ((uintptr_t)t->data % 4)
        return fail(b, "tensor '%s' is not aligned", n);
    L->conv1d = t->data;
#undef N
    return 0;
}

/* layer l's experts: the router, then the stacked (or merged gate+up)
 * expert tensors as one view per expert, from the model's experts array */
static int bind_moe(struct binder *b, int64_t l)
{
    struct llm_model *m = b->m;
    struct llm_layer *L = &m->layers[l];
    int64_t E = m->n_embd, F = m->n_ff_exp, X = m->n_expert;
    char n[LLM_GGUF_MAX_NAME + 16];
#define N(s) (snprintf(n, sizeof n, "blk.%" PRId64 ".%s", l, s), n)
    struct llm_weight *ex = m->experts + (size_t)(m->n_layer_moe++ * 3 * X);
    L->exp_gate = ex, L->exp_up = ex + X, L->exp_down = ex + 2 * X;
    struct llm_weight gate, up, down;
    if (bind_weight(b, N("ffn_gate_inp.weight"), E, X, &L->w_router) ||
        bind_weight_nd(b, N("ffn_down_exps.weight"), F, E, X, &down))
        return -1;
    /* llama.cpp's create_tensor_gate_up_exps: the merged tensor when present */
    bool merged = find(b, N("ffn_gate_up_exps.weight"), false) != NULL;
    if (merged ? bind_weight_nd(b, n, E, 2 * F, X, &gate)
               : bind_weight_nd(b, N("ffn_gate_exps.weight"), E, F, X, &gate) ||
                     bind_weight_nd(b, N("ffn_up_exps.weight"), E, F, X, &up))
        return -1;
#undef N
    m->fused_gate_up_exps = m->fused_gate_up_exps || merged;
    for (int64_t e = 0; e < X; e++) {
        weight_rows(&gate, merged ? 2 * F * e : F * e, F, &L->exp_gate[e]);
        weight_rows(merged ? &gate : &up, merged ? 2 * F * e + F : F * e, F, &L->exp_up[e]);
        weight_rows(&down, E * e, E, &L->exp_down[e]);
    }
    return 0;
}

/* a 2-D F32 tensor of rows x n (an expert's bias per row) */
static int bind_rows(struct binder *b, const char *name, int64_t n, int64_t rows, const float **out)
{
    *out = NULL;
    const struct llm_tensor_info *t = find(b, name, true);
    if (!t)
        return -1;
    if (t->n_dims != 2 || t->ne[0] != n || t->ne[1] != rows)
        return fail(b, "tensor '%s' has shape [%" PRId64 " x %" PRId64 "], expected [%" PRId64 " x %" PRId64 "]",
                    name, t->ne[0], t->ne[1], n, rows);
    if (t->type != LLM_TYPE_F32)
        return fail(b, "tensor '%s' has type %s, expected F32", name, llm_type_name(t->type));
    if ((uintptr_t)t->data % 4)
        return fail(b, "tensor '%s' is not aligned", name);
    *out = t->data;
    return 0;
}

/* a gpt-oss layer (llama.cpp src/models/openai-moe.cpp): attn_norm, biased
 * q, k, v and output, the sinks; the FFN's norm is post_attention_norm,
 * then the router and the experts, every one biased */
static int bind_layer_gptoss(struct binder *b, int64_t l)
{
    struct llm_model *m = b->m;
    struct llm_layer *L = &m->layers[l];
    int64_t E = m->n_embd, F = m->n_ff_exp, X = m->n_expert;
    char n[LLM_GGUF_MAX_NAME + 16];
#define N(s) (snprintf(n, sizeof n, "blk.%" PRId64 ".%s", l, s), n)
    if (bind_vec(b, N("attn_norm.weight"), E, true, &L->attn_norm) ||
        bind_weight(b, N("attn_q.weight"), E, m->q_dim, &L->wq) ||
        bind_weight(b, N("attn_k.weight"), E, m->kv_dim, &L->wk) ||
        bind_weight(b, N("attn_v.weight"), E, m->kv_dim, &L->wv) ||
        bind_vec(b, N("attn_q.bias"), m->q_dim, false, &L->bq) ||
        bind_vec(b, N("attn_k.bias"), m->kv_dim, false, &L->bk) ||
        bind_vec(b, N("attn_v.bias"), m->kv_dim, false, &L->bv) ||
        bind_weight(b, N("attn_output.weight"), m->q_dim, E, &L->wo) ||
        bind_vec(b, N("attn_output.bias"), E, true, &L->bo) ||
        bind_vec(b, N("attn_sinks.weight"), m->n_head, true, &L->sinks) ||
        bind_vec(b, N("post_attention_norm.weight"), E, true, &L->ffn_norm) ||
        bind_moe(b, l) ||
        bind_vec(b, N("ffn_gate_inp.bias"), X, true, &L->router_b) ||
        bind_rows(b, N("ffn_gate_exps.bias"), F, X, &L->exp_gate_b) ||
        bind_rows(b, N("ffn_up_exps.bias"), F, X, &L->exp_up_b) ||
        bind_rows(b, N("ffn_down_exps.bias"), E, X, &L->exp_down_b))
        return -1;
#undef N
    return 0;
}

/* a 2-D weight or, when the file has the fused form, views on it */
static int bind_layer(struct binder *b, int64_t l)
{
    if (b->m->arch == LLM_ARCH_QWEN35 || b->m->arch == LLM_ARCH_QWEN35MOE)
        return bind_layer_qwen35(b, l);
    if (b->m->arch == LLM_ARCH_GPTOSS)
        return bind_layer_gptoss(b, l);
    struct llm_model *m = b->m;
    struct llm_layer *L = &m->layers[l];
    bool qk_norm = m->arch == LLM_ARCH_QWEN3 || m->arch == LLM_ARCH_GEMMA3 || m->arch == LLM_ARCH_QWEN3MOE;
    bool post = m->arch == LLM_ARCH_GEMMA2 || m->arch == LLM_ARCH_GEMMA3;
    char n[LLM_GGUF_MAX_NAME + 16];
#define N(s) (snprintf(n, sizeof n, "blk.%" PRId64 ".%s", l, s), n)
    if (bind_vec(b, N("attn_norm.weight"), m->n_embd, true, &L->attn_norm))
        return -1;
    /* llama.cpp's create_tensor_qkv: attn_qkv when present, else q, k, v */
    if (find(b, N("attn_qkv.weight"), false)) {
        struct llm_weight qkv;
        if (bind_weight(b, n, m->n_embd, m->q_dim + 2 * m->kv_dim, &qkv))
            return -1;
        weight_rows(&qkv, 0, m->q_dim, &L->wq);
        weight_rows(&qkv, m->q_dim, m->kv_dim, &L->wk);
        weight_rows(&qkv, m->q_dim + m->kv_dim, m->kv_dim, &L->wv);
        m->fused_qkv = true;
        if (find(b, N("attn_qkv.bias"), false))
            return fail(b, "tensor '%s' (a fused QKV bias) is not supported", n);
    } else if (bind_weight(b, N("attn_q.weight"), m->n_embd, m->q_dim, &L->wq) ||
               bind_weight(b, N("attn_k.weight"), m->n_embd, m->kv_dim, &L->wk) ||
               bind_weight(b, N("attn_v.weight"), m->n_embd, m->kv_dim, &L->wv) ||
               bind_vec(b, N("attn_q.bias"), m->q_dim, false, &L->bq) ||
               bind_vec(b, N("attn_k.bias"), m->kv_dim, false, &L->bk) ||
               bind_vec(b, N("attn_v.bias"), m->kv_dim, false, &L->bv)) {
        return -1;
    }
    if (bind_weight(b, N("attn_output.weight"), m->q_dim, m->n_embd, &L->wo) ||
        bind_vec(b, N("attn_q_norm.weight"), m->head_dim, qk_norm, &L->q_norm) ||
        bind_vec(b, N("attn_k_norm.weight"), m->head_dim, qk_norm, &L->k_norm) ||
        bind_vec(b, N("post_attention_norm.weight"), m->n_embd, post, &L->attn_post_norm) ||
        bind_vec(b, N("ffn_norm.weight"), m->n_embd, true, &L->ffn_norm) ||
        bind_vec(b, N("post_ffw_norm.weight"), m->n_embd, post, &L->ffn_post_norm))
        return -1;
    if (m->n_expert)
        return bind_moe(b, l);
    if (bind_weight(b, N("ffn_down.weight"), m->n_ff, m->n_embd, &L->w_down))
        return -1;
    if (m->arch == LLM_ARCH_PHI3) {
        /* phi3.cpp: ffn_up {n_embd, 2 n_ff}, LLM_FFN_SWIGLU on it (no gate) */
        struct llm_weight up;
        if (bind_weight(b, N("ffn_up.weight"), m->n_embd, 2 * m->n_ff, &up))
            return -1;
        weight_rows(&up, 0, m->n_ff, &L->w_gate);
        weight_rows(&up, m->n_ff, m->n_ff, &L->w_up);
        m->fused_gate_up = true;
    } else if (bind_weight(b, N("ffn_gate.weight"), m->n_embd, m->n_ff, &L->w_gate) ||
               bind_weight(b, N("ffn_up.weight"), m->n_embd, m->n_ff, &L->w_up)) {
        return -1;
    }
#undef N
    return 0;
}

/* gemma4's layers: local or global by the sliding_window_pattern array
 * (true: local; llama.cpp requires it), each kind's head size, RoPE
 * dimensions, base and factors, the per-layer KV heads and FFN rows, and
 * which layers share KV: the last shared_kv_layers read layer
 * n_layer_kv - 2's rows (local ones) or n_layer_kv - 1's (global ones), as
 * llama.cpp's layer reuse does; those two must be of the kinds that read
 * them, or the rows would not fit. */
static int gemma4_layers(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_model_meta *mt = &m->meta;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", mt->arch);
    int64_t hd_swa, rot_swa;
    if (llm_gguf_find_key(m->gguf, key) < 0)
        return fail(b, "metadata key '%s' is missing", key);
    if (layer_key(b, "attention.key_length_swa", 0, -1, 2, 1 << 16, &hd_swa) ||
        layer_key(b, "rope.dimension_count_swa", 0, hd_swa, 2, hd_swa, &rot_swa))
        return -1;
    float base_swa = mt->rope_freq_base_swa > 0 ? (float)mt->rope_freq_base_swa : m->rope_base;
    for (int64_t l = 0; l < m->n_layer; l++) {
        struct llm_layer *L = &m->layers[l];
        int64_t swa, kvh, ff;
        if (layer_key(b, "attention.sliding_window_pattern", l, 0, 0, 1, &swa) ||
            layer_key(b, "attention.head_count_kv", l, m->n_head, 1, 1 << 20, &kvh) ||
            layer_key(b, "feed_forward_length", l, -1, 1, 1 << 20, &ff))
            return -1;
        if (m->n_head % kvh)
            return fail(b, "layer %" PRId64 ": head_count %" PRId64 " is not a multiple of head_count_kv %" PRId64,
                        l, m->n_head, kvh);
        L->swa = swa != 0;
        L->head_dim = L->swa ? hd_swa : mt->head_dim_k;
        L->rope_dim = L->swa ? rot_swa : m->rope_dim;
        L->rope_base = L->swa ? base_swa : m->rope_base;
        L->rope_freq_scale = L->swa ? 1.0f : m->rope_freq_scale;
        L->rope_freqs = L->swa ? NULL : m->rope_freqs;
        L->n_head_kv = kvh;
        L->q_dim = m->n_head * L->head_dim;
        L->kv_dim = kvh * L->head_dim;
        L->n_ff = ff;
        L->v_norm = true;
        L->out_scale = 1.0f;
        L->kv_shared = l >= m->n_layer_kv;
        L->kv_index = L->kv_shared ? m->n_layer_kv - (L->swa ? 2 : 1) : l;
    }
    for (int64_t l = m->n_layer_kv; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l], *S = &m->layers[L->kv_index];
        if (S->swa != L->swa || S->kv_dim != L->kv_dim)
            return fail(b, "gemma4: layer %" PRId64 " shares the KV of layer %" PRId64 ", which is not of its kind",
                        l, L->kv_index);
    }
    return 0;
}

/* a gemma4 layer (src/models/gemma4.cpp load_arch_tensors) */
static int bind_layer_gemma4(struct binder *b, int64_t l)
{
    struct llm_model *m = b->m;
    struct llm_layer *L = &m->layers[l];
    int64_t E = m->n_embd;
    char n[LLM_GGUF_MAX_NAME + 16];
#define N(s) (snprintf(n, sizeof n, "blk.%" PRId64 ".%s", l, s), n)
    if (bind_vec(b, N("attn_norm.weight"), E, true, &L->attn_norm) ||
        bind_weight(b, N("attn_q.weight"), E, L->q_dim, &L->wq) ||
        bind_weight(b, N("attn_output.weight"), L->q_dim, E, &L->wo) ||
        bind_vec(b, N("attn_q_norm.weight"), L->head_dim, true, &L->q_norm) ||
        bind_vec(b, N("post_attention_norm.weight"), E, true, &L->attn_post_norm) ||
        bind_vec(b, N("ffn_norm.weight"), E, true, &L->ffn_norm) ||
        bind_weight(b, N("ffn_gate.weight"), E, L->n_ff, &L->w_gate) ||
        bind_weight(b, N("ffn_up.weight"), E, L->n_ff, &L->w_up) ||
        bind_weight(b, N("ffn_down.weight"), L->n_ff, E, &L->w_down) ||
        bind_vec(b, N("post_ffw_norm.weight"), E, true, &L->ffn_post_norm))
        return -1;
    /* K and V of their own only where the layer does not share them; V is
     * K's product where attn_v is absent */
    if (!L->kv_shared) {
        if (bind_weight(b, N("attn_k.weight"), E, L->kv_dim, &L->wk) ||
            bind_vec(b, N("attn_k_norm.weight"), L->head_dim, true, &L->k_norm))
            return -1;
        L->v_from_k = !find(b, N("attn_v.weight"), false);
        if (!L->v_from_k && bind_weight(b, n, E, L->kv_dim, &L->wv))
            return -1;
    }
    const float *scale;
    if (bind_vec(b, N("layer_output_scale.weight"), 1, false, &scale))
        return -1;
    if (scale) {
        if (!isfinite(scale[0]))
            return fail(b, "tensor '%s' is not finite", n);
        L->out_scale = scale[0];
    }
    if (m->n_pl > 0 &&
        (bind_weight(b, N("inp_gate.weight"), E, m->n_pl, &L->w_pl_gate) ||
         bind_weight(b, N("proj.weight"), m->n_pl, E, &L->w_pl_proj) ||
         bind_vec(b, N("post_norm.weight"), E, true, &L->pl_post_norm)))
        return -1;
    /* the 26B-A4B's experts beside the dense FFN, with their norms and scales */
    if (m->n_expert > 0 && find(b, N("ffn_gate_inp.weight"), false)) {
        if (bind_vec(b, N("ffn_gate_inp.scale"), E, true, &L->router_scale) ||
            bind_vec(b, N("ffn_down_exps.scale"), m->n_expert, false, &L->exp_down_scale) ||
            bind_vec(b, N("pre_ffw_norm_2.weight"), E, true, &L->ffn_pre_norm_2) ||
            bind_vec(b, N("post_ffw_norm_1.weight"), E, true, &L->ffn_post_norm_1) ||
            bind_vec(b, N("post_ffw_norm_2.weight"), E, true, &L->ffn_post_norm_2) || bind_moe(b, l))
            return -1;
    }
#undef N
    return 0;
}

/* gemma4's model-wide per-layer input tensors */
static int bind_gemma4(struct binder *b)
{
    struct llm_model *m = b->m;
    if (m->n_pl > 0 &&
        (bind_weight(b, "per_layer_token_embd.weight", m->n_pl * m->n_layer, m->n_vocab, &m->pl_tok_embd) ||
         bind_weight(b, "per_layer_model_proj.weight", m->n_embd, m->n_pl * m->n_layer, &m->pl_model_proj) ||
         bind_vec(b, "per_layer_proj_norm.weight", m->n_pl, true, &m->pl_proj_norm)))
        return -1;
    if (gemma4_layers(b))
        return -1;
    for (int64_t l = 0; l < m->n_layer; l++)
        if (bind_layer_gemma4(b, l))
            return -1;
    return 0;
}

static int bind_layers(struct binder *b)
{
    for (int64_t l = 0; l < b->m->n_layer; l++)
        if (bind_layer(b, l))
            return -1;
    return layer_pattern(b);
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* the KV cache's layers (model.h: kv_owner, kv_unit, n_kv_runs) */
static int kv_layout(struct binder *b)
{
    struct llm_model *m = b->m;
    m->kv_owner = calloc((size_t)(m->n_layer_kv ? m->n_layer_kv : 1), sizeof *m->kv_owner);
    if (!m->kv_owner)
        return fail(b, "out of memory");
    m->kv_unit = 0;
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        if (L->recurrent || L->kv_shared)
            continue;
        if (L->kv_index < 0 || L->kv_index >= m->n_layer_kv)
            return fail(b, "layer %" PRId64 ": no place in the KV cache", l);
        m->kv_owner[L->kv_index] = l;
        m->kv_unit = gcd(m->kv_unit, L->kv_dim);
    }
    m->n_kv_runs = 0;
    for (int64_t kl = 0; kl < m->n_layer_kv; kl++) {
        const struct llm_layer *L = &m->layers[m->kv_owner[kl]];
        if (m->kv_unit % L->head_dim && L->head_dim % m->kv_unit)
            return fail(b, "layer %" PRId64 ": KV heads of %" PRId64 " do not fit the runs of %" PRId64
                           " of the other layers", m->kv_owner[kl], L->head_dim, m->kv_unit);
        m->n_kv_runs += L->kv_dim / m->kv_unit;
    }
    return 0;
}

static int bind_tensors(struct binder *b)
{
    struct llm_model *m = b->m;
    const struct llm_tensor_info *te = find(b, "token_embd.weight", true);
    if (!te)
        return -1;
    m->n_vocab = te->n_dims == 2 ? te->ne[1] : 0;
    if (m->meta.n_vocab > 0 && m->n_vocab != m->meta.n_vocab)
        return fail(b, "tensor 'token_embd.weight' has %" PRId64 " rows for %" PRId64 " tokens",
                    m->n_vocab, m->meta.n_vocab);
    if (bind_weight(b, "token_embd.weight", m->n_embd, m->n_vocab, &m->tok_embd))
        return -1;
    /* gemma2's LM head is always the token embedding (llama.cpp ignores an
     * output.weight there) */
    if (m->arch != LLM_ARCH_GEMMA2 && find(b, "output.weight", false)) {
        if (bind_weight(b, "output.weight", m->n_embd, m->n_vocab, &m->output))
            return -1;
    } else {
        m->output = m->tok_embd; /* tied */
    }
    if (bind_vec(b, "output_norm.weight", m->n_embd, true, &m->output_norm) ||
        (m->arch != LLM_ARCH_PHI3 &&
         bind_vec(b, "rope_freqs.weight", m->rope_dim / 2, false, &m->rope_freqs)))
        return -1;
    if (m->arch == LLM_ARCH_PHI3 &&
        (bind_vec(b, "rope_factors_long.weight", m->rope_dim / 2, false, &m->rope_factors_long) ||
         bind_vec(b, "rope_factors_short.weight", m->rope_dim / 2, false, &m->rope_factors_short)))
        return -1;
    if (!m->rope_factors_long != !m->rope_factors_short)
        return fail(b, "tensor 'rope_factors_%s.weight' is missing (longrope needs both)",
                    m->rope_factors_long ? "short" : "long");
    m->layers = calloc((size_t)m->n_layer, sizeof *m->layers);
    if (!m->layers)
        return fail(b, "out of memory");
    for (int64_t l = 0; l < m->n_layer; l++) {
        struct llm_layer *L = &m->layers[l];
        L->kv_index = l, L->rec_index = -1;
        L->head_dim = m->head_dim, L->n_head_kv = m->n_head_kv, L->q_dim = m->q_dim;
        L->kv_dim = m->kv_dim, L->rope_dim = m->rope_dim, L->n_ff = m->n_ff, L->out_scale = 1.0f;
    }
    if (m->n_expert) {
        m->experts = calloc((size_t)(m->n_layer * 3 * m->n_expert), sizeof *m->experts);
        if (!m->experts)
            return fail(b, "out of memory");
    }
    if ((m->arch == LLM_ARCH_QWEN35 || m->arch == LLM_ARCH_QWEN35MOE) && recurrent_pattern(b))
        return -1;
    if (m->arch == LLM_ARCH_GEMMA4 ? bind_gemma4(b) : bind_layers(b))
        return -1;
    return kv_layout(b);
}

void llm_model_yarn_dims(const struct llm_model *m, float base, float dims[2])
{
    /* corr_dim(beta) = n_dims ln(n_ctx_orig / (2 pi beta)) / (2 ln base) */
    float nd = (float)m->rope_dim, orig = (float)m->rope_orig_ctx;
    float start = floorf(nd * logf(orig / (32.0f * 2 * (float)M_PI)) / (2 * logf(base)));
    float end = ceilf(nd * logf(orig / (1.0f * 2 * (float)M_PI)) / (2 * logf(base)));
    dims[0] = fmaxf(0.0f, start);
    dims[1] = fminf(nd - 1, end);
}

const float *llm_model_rope_factors(const struct llm_model *m, int64_t n_ctx)
{
    if (m->rope_freqs)
        return m->rope_freqs;
    return n_ctx > m->rope_orig_ctx ? m->rope_factors_long : m->rope_factors_short;
}

bool llm_model_layer_swa(const struct llm_model *m, int64_t l)
{
    return m->layers && l >= 0 && l < m->n_layer && m->layers[l].swa;
}

bool llm_model_layer_recurrent(const struct llm_model *m, int64_t l)
{
    return m->layers && l >= 0 && l < m->n_layer && m->layers[l].recurrent;
}

void llm_model_arch_info(const struct llm_model *m, struct llm_model_arch_info *out)
{
    memset(out, 0, sizeof *out);
    out->computable = m->computable;
    out->embd_scale = m->embd_scale;
    out->attn_scale = m->attn_scale;
    out->attn_softcap = m->attn_softcap;
    out->final_softcap = m->final_softcap;
    out->gelu = m->ffn_act == LLM_FFN_GELU_TANH;
    out->n_swa = m->n_swa;
    out->rope_factors = m->rope_factors_long != NULL;
    out->rope_orig_ctx = m->rope_orig_ctx;
    out->rope_attn_factor = m->rope_attn_factor;
    out->rope_base_swa = m->rope_base;
    out->rope_freq_scale_swa = m->rope_freq_scale;
    if (!m->layers)
        return;
    const struct llm_layer *L0 = &m->layers[0];
    for (int64_t l = 0; l < m->n_layer; l++) /* the first attention layer (qwen35's first is not) */
        if (!m->layers[l].recurrent) {
            L0 = &m->layers[l];
            break;
        }
    out->fused_qkv = m->fused_qkv;
    out->fused_gate_up = m->fused_gate_up;
    out->post_norms = L0->attn_post_norm != NULL;
    out->qk_norm = L0->q_norm != NULL;
    out->attn_gate = m->attn_gate;
    out->n_layer_rec = m->n_layer_rec;
    if (m->n_layer_moe) {
        out->n_expert = m->n_expert;
        out->n_expert_used = m->n_expert_used;
        out->n_ff_exp = m->n_ff_exp;
        out->n_layer_moe = m->n_layer_moe;
        out->fused_gate_up_exps = m->fused_gate_up_exps;
        out->moe_gating = m->moe_gating == LLM_MOE_SOFTMAX_WEIGHT ? "top-k, softmax over k"
                          : m->moe_norm ? "softmax, top-k, renormalised" : "softmax, top-k";
        /* the unchosen experts' gate, up and down elements, and their
         * biases where they have them (gpt-oss) */
        int64_t per_expert = 3 * m->n_embd * m->n_ff_exp;
        for (int64_t l = 0; l < m->n_layer; l++)
            if (m->layers[l].exp_gate_b) {
                per_expert += 2 * m->n_ff_exp + m->n_embd;
                break;
            }
        for (int64_t l = 0; l < m->n_layer; l++)
            if (m->layers[l].exp_down_scale) { /* gemma4's one scale an expert */
                per_expert += 1;
                break;
            }
        out->n_params_active = m->meta.n_params - m->n_layer_moe * (m->n_expert - m->n_expert_used) * per_expert;
        out->experts_beside_ffn = m->arch == LLM_ARCH_GEMMA4;
    }
    if (m->n_pl > 0) { /* a token reads one row of per_layer_token_embd */
        if (!out->n_params_active)
            out->n_params_active = m->meta.n_params;
        out->n_params_active -= (m->n_vocab - 1) * m->n_pl * m->n_layer;
        out->n_per_layer = m->n_pl;
    }
    out->n_head_kv_layer0 = m->layers[0].n_head_kv;
    out->n_ff_layer0 = m->layers[0].n_ff;
    for (int64_t l = 0; l < m->n_layer; l++)
        out->n_ff_max = m->layers[l].n_ff > out->n_ff_max ? m->layers[l].n_ff : out->n_ff_max;
    for (int64_t l = m->n_layer - 1; l >= 0; l--) { /* the first layer of each kind */
        const struct llm_layer *L = &m->layers[l];
        if (L->recurrent)
            continue;
        if (L->swa)
            out->head_dim_swa = L->head_dim, out->n_head_kv_swa = L->n_head_kv, out->rope_dim_swa = L->rope_dim;
        else
            out->head_dim_full = L->head_dim, out->n_head_kv_full = L->n_head_kv, out->rope_dim_full = L->rope_dim;
    }
    out->kv_src_swa = out->kv_src_full = -1;
    if (m->n_layer_kv_shared > 0) {
        out->n_layer_kv_shared = m->n_layer_kv_shared;
        for (int64_t l = m->n_layer - m->n_layer_kv_shared; l < m->n_layer; l++)
            *(m->layers[l].swa ? &out->kv_src_swa : &out->kv_src_full) = m->layers[l].kv_index;
    }
    if (m->n_layer_rec) {
        out->ssm_conv = m->ssm_conv;
        out->ssm_state = m->ssm_state;
        out->ssm_groups = m->ssm_groups;
        out->ssm_heads = m->ssm_heads;
        out->rstate_bytes = llm_model_rstate_layer_floats(m) * (uint64_t)m->n_layer_rec * sizeof(float);
    }
    for (int64_t l = 0; l < m->n_layer; l++)
        if (m->layers[l].swa) {
            if (!out->n_swa_layers++) {
                out->rope_base_swa = m->layers[l].rope_base;
                out->rope_freq_scale_swa = m->layers[l].rope_freq_scale;
            }
        }
}

int llm_model_open(const char *path, struct llm_model_params params, struct llm_model **out,
                   char *err, size_t err_size)
{
    *out = NULL;
    struct llm_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    struct binder b = {m, err, err_size};
    if (llm_gguf_open(path, &m->gguf, err, err_size) ||
        llm_model_meta_read(m->gguf, &m->meta, err, err_size) || hparams(&b) ||
        (!params.vocab_only && bind_tensors(&b))) {
        llm_model_close(m);
        return -1;
    }
    /* an architecture bound and checked, not computed (none today) */
    if (!m->computable && !params.vocab_only && !params.bind_only && !params.ref_only) {
        snprintf(err, err_size,
                 "architecture '%s' is not supported yet: kvchat reads it but cannot run it "
                 "(llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen35, qwen3moe, qwen35moe, gpt-oss, gemma4 run)",
                 m->meta.arch);
        llm_model_close(m);
        return -1;
    }
    if (!params.vocab_only && !params.bind_only && llm_model_pack(m, params.pack_dir, path, err, err_size)) {
        llm_model_close(m);
        return -1;
    }
    *out = m;
    return 0;
}

void llm_model_close(struct llm_model *m)
{
    if (!m)
        return;
    llm_model_unpack(m);
    llm_gguf_close(m->gguf);
    BASE_FREE(m->layers, m->kv_owner, m->experts, m->rope_still, m);
}

const struct llm_model_meta *llm_model_get_meta(const struct llm_model *m) { return &m->meta; }
const struct llm_gguf *llm_model_gguf(const struct llm_model *m) { return m->gguf; }
int64_t llm_model_n_vocab(const struct llm_model *m) { return m->n_vocab; }
int64_t llm_model_n_layer(const struct llm_model *m) { return m->n_layer; }
int64_t llm_model_n_embd_kv(const struct llm_model *m) { return m->kv_owner ? m->kv_unit : m->kv_dim; }
int64_t llm_model_n_layer_kv(const struct llm_model *m) { return m->kv_owner ? m->n_kv_runs : m->n_layer_kv; }

uint64_t llm_model_rstate_layer_floats(const struct llm_model *m)
{
    if (!m->n_layer_rec)
        return 0;
    return (uint64_t)(m->ssm_conv - 1) * (uint64_t)m->conv_dim +
           (uint64_t)m->ssm_heads * (uint64_t)m->ssm_state * (uint64_t)m->ssm_state;
}

static uint64_t weight_bytes(const struct llm_weight *w) { return (uint64_t)w->m.row_bytes * (uint64_t)w->m.n_out; }

uint64_t llm_model_decode_bytes(const struct llm_model *m)
{
    if (!m->layers)
        return 0; /* vocab_only */
    uint64_t f = sizeof(float);
    uint64_t n = m->tok_embd.m.row_bytes + weight_bytes(&m->output) + (uint64_t)m->n_embd * f;
    if (m->rope_freqs)
        n += (uint64_t)m->rope_dim / 2 * f;
    for (int64_t l = 0; l < m->n_layer; l++) {
        const struct llm_layer *L = &m->layers[l];
        n += weight_bytes(&L->wq) + weight_bytes(&L->wk) + weight_bytes(&L->wv) + weight_bytes(&L->wo) +
             weight_bytes(&L->w_gate) + weight_bytes(&L->w_up) + weight_bytes(&L->w_down);
        if (L->exp_gate) /* the router and the experts a token uses */
            n += weight_bytes(&L->w_router) + (uint64_t)m->n_expert_used * (weight_bytes(&L->exp_gate[0]) +
                                                                           weight_bytes(&L->exp_up[0]) +
                                                                           weight_bytes(&L->exp_down[0]));
        if (L->recurrent)
            n += weight_bytes(&L->w_z) + weight_bytes(&L->w_alpha) + weight_bytes(&L->w_beta) +
                 (uint64_t)(m->conv_dim * m->ssm_conv + 2 * m->ssm_heads + m->ssm_state) * f;
        n += 2 * (uint64_t)m->n_embd * f; /* attn_norm, ffn_norm */
        if (L->attn_post_norm)
            n += 2 * (uint64_t)m->n_embd * f; /* and ffn_post_norm */
        if (L->bq)
            n += (uint64_t)m->q_dim * f;
        if (L->bk)
            n += (uint64_t)m->kv_dim * f;
        if (L->bv)
            n += (uint64_t)m->kv_dim * f;
        if (L->q_norm)
            n += (uint64_t)m->head_dim * f;
        if (L->k_norm)
            n += (uint64_t)m->head_dim * f;
    }
    return n;
}

int llm_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    /* siblings of cpu0 tell how many hardware threads share a core */
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "r");
    if (f) {
        char buf[64] = {0};
        if (fgets(buf, sizeof buf, f)) {
            int per_core = 1;
            for (char *p = buf; *p; p++)
                if (*p == ',')
                    per_core++;
            int lo, hi;
            if (per_core == 1 && sscanf(buf, "%d-%d", &lo, &hi) == 2 && hi > lo)
                per_core = hi - lo + 1;
            if (per_core > 1 && n / per_core >= 1)
                n /= per_core;
        }
        fclose(f);
    }
    return (int)n;
}

const char *llm_kernel_path(void) { return llm_cpu_path(); }
const char *llm_kernel_error(void) { return llm_cpu_error(); }
const char *llm_kernel_float_ukr(void) { return llm_get_mm_ops(LLM_TYPE_F32) && llm_fmm_blis() ? llm_fmm_layout() : NULL; }
uint64_t llm_kernel_ukr_calls(void) { return llm_fmm_ukr_calls(); }
uint64_t llm_kernel_gemv_panels(void) { return llm_fmm_gemv_panels(); }
