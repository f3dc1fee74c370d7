/*
 * mkmodel.c - the test-model generator: writes small deterministic GGUF
 * models with random weights for kvchat's tests.
 *
 *   tests/mkmodel OUT.gguf [--arch llama|qwen2|qwen3|gemma2|gemma3|phi3|qwen35|qwen3moe|qwen35moe|gemma4]
 *                 [--vocab VOCAB.gguf | --n-vocab N]
 *                 [--dim D] [--layers L] [--heads H] [--kv-heads K] [--head-dim HD]
 *                 [--ff F] [--ctx C] [--seed S] [--rope-theta T] [--tied]
 *                 [--scale X] [--embd-scale X] [--type F32|F16|BF16|Q8_0]
 *                 [--template FILE] [--stream] [--fast-random]
 *     gemma2/gemma3: [--swa N] [--swa-pattern P] [--attn-softcap X]
 *                    [--final-softcap X] [--rope-theta-swa T] [--rope-linear F]
 *     phi3:          [--swa N] [--rope-dim R] [--orig-ctx C] [--rope-attn-factor X]
 *     qwen35:        [--rope-dim R] [--rope-sections A,B,C,D] [--ssm-state S]
 *                    [--ssm-groups G] [--ssm-heads V] [--ssm-conv K]
 *                    [--full-attn-interval N | --recurrent-layers 1,1,1,0,...]
 *     qwen3moe:      [--experts X] [--experts-used K] [--ff-exp F] [--hot A:B]
 *                    [--hot-gain G] [--merged-gate-up]
 *     qwen35moe:     qwen35's and qwen3moe's options, and [--ff-shexp F] (the
 *                    shared expert's rows, default --ff)
 *     gemma4:        [--swa N] [--swa-pattern P | --swa-layers 1,1,0,...]
 *                    [--head-dim-swa HD] [--rope-theta-swa T] [--rope-dim-swa R]
 *                    [--rope-partial F] [--kv-heads-global K] [--shared-kv N]
 *                    [--double-wide] [--per-layer P] [--v-from-k global|all|none]
 *                    [--no-layer-scale] [--final-softcap X]
 *                    [--experts X --experts-used K --ff-exp F [--merged-gate-up]]
 *
 * With the same options it draws the same numbers in the same order as
 * `llref mkmodel` (../shared/peer/llref.c: xorshift64* and Box-Muller), so an
 * F32 llama/qwen2 model from here has the same weights as llama.cpp's
 * writer would give; qwen3 (per-head q/k norms, optional --head-dim) is ours
 * alone. --type stores every 2-D weight in that type; 1-D norms and biases
 * stay F32, as llama.cpp's quantizer leaves them. --stream (not gemma4)
 * writes each tensor to the file as it is made, for files larger than
 * memory; the header then carries a "mkmodel.padding" key of spaces.
 * --fast-random takes the weights from a table of normals (see gen): much
 * faster, not llref's numbers.
 *
 * gemma2, gemma3 and phi3 are written with the tensor names, shapes and
 * metadata keys that llama.cpp's converter writes for the real models
 * (conversion/gemma.py, conversion/phi.py; llama.cpp src/models/gemma2.cpp,
 * gemma3.cpp, phi3.cpp read them), so that llama.cpp loads them as it loads
 * the real files:
 *  - gemma2: post_attention_norm and post_ffw_norm per layer, no
 *    output.weight (the LM head is always token_embd), key_length and
 *    value_length always written, attn_logit_softcapping,
 *    final_logit_softcapping, attention.sliding_window (and
 *    sliding_window_pattern only when --swa-pattern is given: default 2);
 *  - gemma3: as gemma2 plus attn_q_norm/attn_k_norm (head_dim), no attention
 *    soft-capping (final only when --final-softcap is given), rope.freq_base
 *    for the global layers, rope.freq_base_swa for the local ones, linear
 *    rope scaling (--rope-linear F, as Gemma 3 4B's factor 8) and the
 *    5-local:1-global pattern (llama.cpp's default 6 unless --swa-pattern);
 *  - phi3: a fused attn_qkv (rows: q, then k, then v) and a fused ffn_up of
 *    2*n_ff rows (gate rows, then up rows), no gate tensor, the longrope
 *    keys (rope.scaling.original_context_length, rope.scaling.attn_factor)
 *    and rope_factors_long/rope_factors_short (rope_dim/2 each), and the
 *    attention.sliding_window that llama.cpp ignores for phi3;
 *  - qwen35 (Qwen3.5: Gated DeltaNet layers, with a gated full-attention
 *    layer every full_attention_interval layers, or where
 *    attention.recurrent_layers says 0): per layer attn_norm and
 *    post_attention_norm (the FFN's norm); the attention layers' attn_q of
 *    2 q_dim rows (each head's q then its output gate), attn_k, attn_v,
 *    attn_output and q/k norms; the recurrent layers' attn_qkv (rows q of
 *    G heads, k of G heads, v of V heads, S each), attn_gate (z, V x S
 *    rows), ssm_conv1d (K x conv channels, always F32), ssm_dt.bias,
 *    ssm_a (-exp(A_log): negative), ssm_alpha and ssm_beta (V rows each),
 *    ssm_norm (S) and ssm_out; the ssm.* keys (conv_kernel, state_size,
 *    group_count, time_step_rank = V, inner_size = V x S) and
 *    rope.dimension_sections (llama.cpp requires it; the default splits
 *    the rotary pairs 3/3/3 as Qwen3.5's [11, 11, 10, 0]), as
 *    conversion/qwen.py writes them and src/models/qwen35.cpp reads them.
 *  - qwen3moe (Qwen3-30B-A3B's architecture: qwen3's attention with
 *    per-head q/k norms, and a mixture of experts instead of the FFN):
 *    per layer ffn_norm, the router ffn_gate_inp (X rows of dim, always
 *    F32 as llama.cpp's quantizer leaves it) and the stacked experts
 *    ffn_gate_exps, ffn_up_exps {dim, F, X} and ffn_down_exps {F, dim, X};
 *    the keys expert_count, expert_used_count and
 *    expert_feed_forward_length (conversion/qwen.py, src/models/qwen3moe.cpp).
 *    --hot A:B makes a prompt of ids in [A, B) route every token to the
 *    same experts: those rows of token_embd get element 0 = G (--hot-gain,
 *    default 8) and every other row 0 there, and the router's rows give
 *    experts 0..K-1 a weight on element 0 of 1 + (K-1-e)/4 (so expert 0
 *    first, then 1, ...) and the others -1; other ids spread over all.
 *    --merged-gate-up writes one ffn_gate_up_exps {dim, 2F, X} (each
 *    expert's gate rows, then its up rows: llama.cpp's merged form, which
 *    its qwen35moe loader reads) with the same values.
 *  - gemma4 (Gemma 4's text model, conversion/gemma.py Gemma4Model,
 *    src/models/gemma4.cpp): gemma3's blocks (q/k norms, post-attention
 *    and post-FFN norms, GELU) with
 *    - attention.sliding_window_pattern as an array of bools, one a layer
 *      (true: local); --swa-pattern P makes every P-th layer global, the
 *      default 4; --swa-layers gives the array;
 *    - two head sizes: key_length/value_length for the global layers
 *      (--head-dim, default 64) and key_length_swa/value_length_swa for
 *      the local ones (--head-dim-swa, default half), each with its RoPE
 *      dimension count (rope.dimension_count = the global head size;
 *      rope.dimension_count_swa, --rope-dim-swa) and base (rope.freq_base,
 *      rope.freq_base_swa); the global layers' "proportional" RoPE is the
 *      one rope_freqs tensor (global head size / 2 factors): 1 for the
 *      first --rope-partial (default 0.25) of the pairs and 1e30 (no
 *      rotation) for the rest, as the converter writes it;
 *    - head_count_kv as an array when --kv-heads-global differs from
 *      --kv-heads (the local layers' count);
 *    - attention.shared_kv_layers N (--shared-kv, default 0): the last N
 *      layers have no attn_k, attn_v or attn_k_norm; llama.cpp's local
 *      shared layers read the KV of layer L-N-2, its global ones that of
 *      L-N-1, so those two must be local then global (checked here);
 *    - attn_v absent (V = K before K's norm) on the global layers
 *      (--v-from-k global, the default), on all, or on none;
 *    - feed_forward_length as an array doubling n_ff on the shared layers
 *      with --double-wide (use_double_wide_mlp);
 *    - per-layer embeddings of --per-layer P values a layer (default 16;
 *      0: none): per_layer_token_embd {P L, n_vocab}, per_layer_model_proj
 *      {dim, P L}, per_layer_proj_norm {P}, and per block inp_gate
 *      {dim, P}, proj {P, dim} and post_norm {dim};
 *      embedding_length_per_layer_input is always written (llama.cpp
 *      requires it);
 *    - layer_output_scale {1} per block (a scalar near 1; not with
 *      --no-layer-scale);
 *    - with --experts X (the 26B-A4B): every layer has, beside its dense
 *      FFN (the shared expert), the router ffn_gate_inp {dim, X} (F32) and
 *      its input scale ffn_gate_inp.scale {dim}, the stacked experts as
 *      qwen3moe's (or merged), ffn_down_exps.scale {X} (a per-expert output
 *      scale near 1), pre_ffw_norm_2, post_ffw_norm_1 and post_ffw_norm_2,
 *      and the keys expert_count, expert_used_count and
 *      expert_feed_forward_length.
 *    Gemma 4's attention does not scale q.k (the norms do), so the q norm's
 *    weights are drawn near 1/sqrt(head size)^(1/2) to keep the scores
 *    moderate.
 * Gemma's norm weights are stored as the converter stores them, with the
 * +1 of Gemma's (1 + w) RMSNorm already added: mean 1 here as for llama.
 */
#include "core/llm.h"
#include "core/kernels/quant.h"
#include "tests/gguf-writer.h"

#include <math.h>
#include <stdio.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static uint32_t rng_u32(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static float rng_normal(void)
{
    float u1 = (rng_u32() + 1.0f) / 4294967297.0f, u2 = rng_u32() / 4294967296.0f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

static void die(const char *msg) __attribute__((noreturn));
static void die(const char *msg)
{
    fprintf(stderr, "mkmodel: %s\n", msg);
    exit(2);
}

/* the value of the last NAME VALUE pair (a later option overrides) */
static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = argc - 2; i >= 0; i--)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

static int flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], name))
            return 1;
    return 0;
}

static uint32_t weight_type = LLM_TYPE_F32;

/* --fast-random: values are runs of FAST_RUN taken from a table of
 * FAST_POOL normals at random offsets, instead of a Box-Muller draw each
 * (tens of billions of weights in minutes on a loaded 2-core machine:
 * bench-bigmoe.sh); the weights then differ from `llref mkmodel`'s */
#define FAST_POOL (1 << 24)
#define FAST_RUN 256
static float *fast_pool;

/* n values mean + scale * N(0,1) (caller frees) */
static float *gen(int64_t n, float scale, float mean)
{
    float *x = malloc((size_t)n * sizeof *x);
    if (!x)
        die("out of memory");
    if (fast_pool) {
        for (int64_t i = 0; i < n; i += FAST_RUN) {
            const float *src = fast_pool + rng_u32() % (FAST_POOL - FAST_RUN);
            for (int64_t j = 0; j < FAST_RUN && i + j < n; j++)
                x[i + j] = mean + scale * src[j];
        }
        return x;
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = mean + scale * rng_normal();
    return x;
}

/* values x of a tensor of n_dims (1 to 3) of ne, stored in type */
static void put_tensor(struct gw *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                       const float *x)
{
    int64_t ne0 = ne[0], rows = 1;
    for (uint32_t d = 1; d < n_dims; d++)
        rows *= ne[d];
    if (ne0 % llm_type_block_size(type))
        die("a row length is not a multiple of the type's block size");
    int64_t row_bytes = ne0 / llm_type_block_size(type) * llm_type_block_bytes(type);
    uint8_t *data = malloc((size_t)(row_bytes * rows));
    if (!data)
        die("out of memory");
    for (int64_t r = 0; r < rows; r++)
        llm_quantize_row(type, x + r * ne0, data + r * row_bytes, ne0);
    gw_tensor(w, name, type, n_dims, ne, data, (uint64_t)(row_bytes * rows));
    free(data);
}

/* a tensor of ne0 x ne1 (ne1 == 0: 1-D) with mean + scale * N(0,1) values */
static void add_tensor(struct gw *w, const char *name, int64_t ne0, int64_t ne1, float scale,
                       float mean)
{
    int64_t rows = ne1 > 0 ? ne1 : 1;
    float *x = gen(ne0 * rows, scale, mean);
    int64_t ne[2] = {ne0, rows};
    put_tensor(w, name, ne1 > 0 ? weight_type : LLM_TYPE_F32, ne1 > 0 ? 2 : 1, ne, x);
    free(x);
}

/* layer l's router and stacked experts (qwen3moe, qwen35moe): the router
 * F32; with hot_a >= 0 its first column favours experts 0..k-1 */
static void put_experts(struct gw *w, int l, int dim, int n_exp, int n_used, int ff_exp, int hot_a, float scale,
                        int merged)
{
    char n[64];
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
    float *r = gen((int64_t)dim * n_exp, scale, 0);
    if (hot_a >= 0)
        for (int e = 0; e < n_exp; e++)
            r[(size_t)e * dim] = e < n_used ? 1.0f + 0.25f * (float)(n_used - 1 - e) : -1.0f;
    int64_t ner[2] = {dim, n_exp};
    put_tensor(w, T("ffn_gate_inp.weight"), LLM_TYPE_F32, 2, ner, r);
    free(r);
    int64_t n1 = (int64_t)dim * ff_exp * n_exp;
    float *g = gen(n1, scale, 0), *u = gen(n1, scale, 0), *d = gen(n1, scale, 0);
    int64_t ne_gu[3] = {dim, ff_exp, n_exp}, ne_d[3] = {ff_exp, dim, n_exp};
    if (merged) {
        float *gu = malloc((size_t)(2 * n1) * sizeof *gu);
        size_t blk = (size_t)dim * ff_exp;
        for (int e = 0; e < n_exp; e++) {
            memcpy(gu + 2 * e * blk, g + e * blk, blk * sizeof *gu);
            memcpy(gu + (2 * e + 1) * blk, u + e * blk, blk * sizeof *gu);
        }
        int64_t ne_m[3] = {dim, 2 * ff_exp, n_exp};
        put_tensor(w, T("ffn_gate_up_exps.weight"), weight_type, 3, ne_m, gu);
        free(gu);
    } else {
        put_tensor(w, T("ffn_gate_exps.weight"), weight_type, 3, ne_gu, g);
        put_tensor(w, T("ffn_up_exps.weight"), weight_type, 3, ne_gu, u);
    }
    put_tensor(w, T("ffn_down_exps.weight"), weight_type, 3, ne_d, d);
    free(g), free(u), free(d);
#undef T
}

/* gpt-oss's biases of layer l's router and experts: the router's (n_exp),
 * the gate's and up's (ff_exp of each expert, scale bs: wide enough that
 * the clamped SwiGLU's limit of 7 is reached) and the down's (dim) */
static void put_expert_biases(struct gw *w, int l, int dim, int n_exp, int ff_exp, float bs)
{
    char n[64];
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
    add_tensor(w, T("ffn_gate_inp.bias"), n_exp, 0, 0.5f, 0);
    float *x = gen((int64_t)ff_exp * n_exp, bs, 0);
    int64_t ne[2] = {ff_exp, n_exp};
    put_tensor(w, T("ffn_gate_exps.bias"), LLM_TYPE_F32, 2, ne, x);
    free(x);
    x = gen((int64_t)ff_exp * n_exp, bs, 0);
    put_tensor(w, T("ffn_up_exps.bias"), LLM_TYPE_F32, 2, ne, x);
    free(x);
    x = gen((int64_t)dim * n_exp, 0.05f, 0);
    int64_t ned[2] = {dim, n_exp};
    put_tensor(w, T("ffn_down_exps.bias"), LLM_TYPE_F32, 2, ned, x);
    free(x);
#undef T
}

static int set_placeholder_vocab(struct gw *w, int n_vocab)
{
    /* SentencePiece-style: <unk> <s> </s>, 256 byte tokens, then pieces */
    if (n_vocab < 3 + 256)
        die("--n-vocab must be at least 259");
    char **tok = calloc((size_t)n_vocab, sizeof *tok);
    float *scores = calloc((size_t)n_vocab, sizeof *scores);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    char buf[32];
    for (int i = 0; i < n_vocab; i++) {
        if (i == 0)
            snprintf(buf, sizeof buf, "<unk>"), types[i] = 2;
        else if (i == 1)
            snprintf(buf, sizeof buf, "<s>"), types[i] = 3;
        else if (i == 2)
            snprintf(buf, sizeof buf, "</s>"), types[i] = 3;
        else if (i < 3 + 256)
            snprintf(buf, sizeof buf, "<0x%02X>", i - 3), types[i] = 6;
        else
            snprintf(buf, sizeof buf, "\xe2\x96\x81t%d", i), types[i] = 1, scores[i] = -(float)i;
        tok[i] = strdup(buf);
    }
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, (uint64_t)n_vocab);
    gw_kv_arr(w, "tokenizer.ggml.scores", LLM_GGUF_TYPE_FLOAT32, scores, (uint64_t)n_vocab);
    gw_kv_arr(w, "tokenizer.ggml.token_type", LLM_GGUF_TYPE_INT32, types, (uint64_t)n_vocab);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    for (int i = 0; i < n_vocab; i++)
        free(tok[i]);
    free(tok);
    free(scores);
    free(types);
    return n_vocab;
}

/* the vocabulary file's tokenizer keys (its chat template too, unless
 * skip_template: --template gives another) */
static int copy_vocab(struct gw *w, const char *path, bool skip_template)
{
    struct llm_gguf *v;
    char err[256];
    if (llm_gguf_open(path, &v, err, sizeof err)) {
        fprintf(stderr, "mkmodel: cannot open vocabulary '%s': %s\n", path, err);
        exit(2);
    }
    int64_t ti = llm_gguf_find_key(v, "tokenizer.ggml.tokens");
    if (ti < 0)
        die("the vocabulary file has no tokenizer.ggml.tokens");
    int n_vocab = (int)llm_gguf_arr_n(v, ti);
    for (int64_t i = 0; i < llm_gguf_n_kv(v); i++)
        if (!strncmp(llm_gguf_key(v, i), "tokenizer.", 10) &&
            !(skip_template && !strcmp(llm_gguf_key(v, i), "tokenizer.chat_template")))
            gw_kv_copy(w, v, i);
    llm_gguf_close(v);
    return n_vocab;
}

/* the whole of a small text file, NUL-terminated (caller frees) */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open the template file");
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (!b)
        die("out of memory");
    b[n] = 0;
    return b;
}

static uint32_t parse_type(const char *s)
{
    static const uint32_t types[] = {LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(s, llm_type_name(types[i])))
            return types[i];
    die("--type must be F32, F16, BF16 or Q8_0");
    return 0;
}

/* general.file_type, as llama.cpp numbers it (llama_ftype) */
static uint32_t file_type(uint32_t t)
{
    switch (t) {
    case LLM_TYPE_F16: return 1;
    case LLM_TYPE_Q8_0: return 7;
    case LLM_TYPE_BF16: return 32;
    default: return 0;
    }
}

/* ==== gemma4 ==== */

/* a comma list of n integers, each in [lo, hi] */
static void parse_list(const char *s, int n, int lo, int hi, int *out, const char *what)
{
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || (i + 1 < n ? *end != ',' : *end != 0)) {
            fprintf(stderr, "mkmodel: %s wants %d numbers in [%d, %d], separated by commas\n", what, n, lo, hi);
            exit(2);
        }
        out[i] = (int)v;
        p = end + 1;
    }
}

/* the whole gemma4 model but the vocabulary (see the top of the file) */
static void write_gemma4(struct gw *w, int argc, char **argv, int n_vocab, int dim, int layers, int heads,
                         int kv_heads, int hd, int ff, int ctx, float theta, float scale, int tied)
{
    char key[128], n[64];
#define KEY(s) (snprintf(key, sizeof key, "gemma4.%s", s), key)
#define T(l, s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
    int hd_swa = atoi(opt(argc, argv, "--head-dim-swa", "0"));
    if (hd_swa <= 0)
        hd_swa = hd / 2;
    int rope_swa = atoi(opt(argc, argv, "--rope-dim-swa", "0"));
    if (rope_swa <= 0)
        rope_swa = hd_swa;
    if (hd % 2 || hd_swa % 2 || rope_swa % 2 || rope_swa > hd_swa)
        die("gemma4: head sizes must be even, --rope-dim-swa even and at most --head-dim-swa");
    float partial = (float)atof(opt(argc, argv, "--rope-partial", "0.25"));
    int kvh_glob = atoi(opt(argc, argv, "--kv-heads-global", "0"));
    if (kvh_glob <= 0)
        kvh_glob = kv_heads;
    if (heads % kvh_glob)
        die("gemma4: heads must divide by --kv-heads-global");
    int n_shared = atoi(opt(argc, argv, "--shared-kv", "0"));
    int n_pl = atoi(opt(argc, argv, "--per-layer", "16"));
    const char *vk = opt(argc, argv, "--v-from-k", "global");
    if (strcmp(vk, "global") && strcmp(vk, "all") && strcmp(vk, "none"))
        die("gemma4: --v-from-k wants global, all or none");
    int double_wide = flag(argc, argv, "--double-wide"), layer_scale = !flag(argc, argv, "--no-layer-scale");
    int *swa = malloc((size_t)layers * sizeof *swa);
    if (!swa)
        die("out of memory");
    if (opt(argc, argv, "--swa-layers", NULL)) {
        parse_list(opt(argc, argv, "--swa-layers", NULL), layers, 0, 1, swa, "--swa-layers");
    } else {
        int p = atoi(opt(argc, argv, "--swa-pattern", "4"));
        if (p <= 0)
            die("gemma4: --swa-pattern must be positive");
        for (int l = 0; l < layers; l++)
            swa[l] = (l + 1) % p != 0;
    }
    int n_kv = layers - n_shared;
    if (n_shared < 0 || n_kv < 1)
        die("gemma4: --shared-kv must leave a layer that owns its KV");
    if (n_shared > 0 && (n_kv < 2 || !swa[n_kv - 2] || swa[n_kv - 1]))
        die("gemma4: with --shared-kv, the last two layers that own KV must be local, then global");
    if (n_pl < 0)
        die("gemma4: --per-layer must not be negative");

    gw_kv_str(w, "general.architecture", "gemma4");
    gw_kv_str(w, "general.name", "synthetic");
    gw_kv_u32(w, "general.file_type", file_type(weight_type));
    gw_kv_u32(w, KEY("context_length"), (uint32_t)ctx);
    gw_kv_u32(w, KEY("embedding_length"), (uint32_t)dim);
    gw_kv_u32(w, KEY("block_count"), (uint32_t)layers);
    int32_t *arr = malloc((size_t)layers * sizeof *arr);
    int8_t *barr = malloc((size_t)layers);
    if (!arr || !barr)
        die("out of memory");
    if (double_wide) {
        for (int l = 0; l < layers; l++)
            arr[l] = l < n_kv ? ff : 2 * ff;
        gw_kv_arr(w, KEY("feed_forward_length"), LLM_GGUF_TYPE_INT32, arr, (uint64_t)layers);
    } else {
        gw_kv_u32(w, KEY("feed_forward_length"), (uint32_t)ff);
    }
    gw_kv_u32(w, KEY("attention.head_count"), (uint32_t)heads);
    if (kvh_glob != kv_heads) {
        for (int l = 0; l < layers; l++)
            arr[l] = swa[l] ? kv_heads : kvh_glob;
        gw_kv_arr(w, KEY("attention.head_count_kv"), LLM_GGUF_TYPE_INT32, arr, (uint64_t)layers);
    } else {
        gw_kv_u32(w, KEY("attention.head_count_kv"), (uint32_t)kv_heads);
    }
    gw_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    gw_kv_u32(w, KEY("attention.key_length"), (uint32_t)hd);
    gw_kv_u32(w, KEY("attention.value_length"), (uint32_t)hd);
    gw_kv_u32(w, KEY("attention.key_length_swa"), (uint32_t)hd_swa);
    gw_kv_u32(w, KEY("attention.value_length_swa"), (uint32_t)hd_swa);
    gw_kv_u32(w, KEY("attention.sliding_window"), (uint32_t)atoi(opt(argc, argv, "--swa", "16")));
    for (int l = 0; l < layers; l++)
        barr[l] = (int8_t)swa[l];
    gw_kv_arr(w, KEY("attention.sliding_window_pattern"), LLM_GGUF_TYPE_BOOL, barr, (uint64_t)layers);
    gw_kv_u32(w, KEY("attention.shared_kv_layers"), (uint32_t)n_shared);
    gw_kv_u32(w, KEY("embedding_length_per_layer_input"), (uint32_t)n_pl);
    gw_kv_f32(w, KEY("rope.freq_base"), theta);
    gw_kv_f32(w, KEY("rope.freq_base_swa"), (float)atof(opt(argc, argv, "--rope-theta-swa", "10000")));
    gw_kv_u32(w, KEY("rope.dimension_count"), (uint32_t)hd);
    gw_kv_u32(w, KEY("rope.dimension_count_swa"), (uint32_t)rope_swa);
    /* always written: llama.cpp takes 30 when it is absent, and so do the real models */
    gw_kv_f32(w, KEY("final_logit_softcapping"), (float)atof(opt(argc, argv, "--final-softcap", "30")));
    gw_kv_u32(w, KEY("vocab_size"), (uint32_t)n_vocab);
    int n_exp = atoi(opt(argc, argv, "--experts", "0")), n_used = atoi(opt(argc, argv, "--experts-used", "2"));
    int ff_exp = atoi(opt(argc, argv, "--ff-exp", "64"));
    if (n_exp > 0) {
        if (n_used < 1 || n_used > n_exp || ff_exp <= 0)
            die("gemma4: --experts-used must be 1 to --experts, --ff-exp positive");
        gw_kv_u32(w, KEY("expert_count"), (uint32_t)n_exp);
        gw_kv_u32(w, KEY("expert_used_count"), (uint32_t)n_used);
        gw_kv_u32(w, KEY("expert_feed_forward_length"), (uint32_t)ff_exp);
    }
    free(arr);
    free(barr);

    add_tensor(w, "token_embd.weight", dim, n_vocab, (float)atof(opt(argc, argv, "--embd-scale", "1")), 0);
    if (n_pl > 0) {
        add_tensor(w, "per_layer_token_embd.weight", n_pl * layers, n_vocab, 0.5f, 0);
        add_tensor(w, "per_layer_model_proj.weight", dim, n_pl * layers, scale, 0);
        add_tensor(w, "per_layer_proj_norm.weight", n_pl, 0, 0.1f, 1.0f);
    }
    {
        /* the global layers' proportional RoPE: the first pairs rotate */
        int np = hd / 2, nr = (int)((float)hd * partial / 2);
        float *f = malloc((size_t)np * sizeof *f);
        for (int i = 0; i < np; i++)
            f[i] = i < nr ? 1.0f : 1e30f;
        int64_t ne[2] = {np, 1};
        gw_tensor(w, "rope_freqs.weight", LLM_TYPE_F32, 1, ne, f, (uint64_t)np * sizeof *f);
        free(f);
    }
    for (int l = 0; l < layers; l++) {
        int hl = swa[l] ? hd_swa : hd, kvh = swa[l] ? kv_heads : kvh_glob, ffl = double_wide && l >= n_kv ? 2 * ff : ff;
        int has_v = !strcmp(vk, "none") || (!strcmp(vk, "global") && swa[l]);
        add_tensor(w, T(l, "attn_norm.weight"), dim, 0, 0.1f, 1.0f);
        add_tensor(w, T(l, "attn_q.weight"), dim, heads * hl, scale, 0);
        add_tensor(w, T(l, "attn_q_norm.weight"), hl, 0, 0.05f, powf((float)hl, -0.25f));
        if (l < n_kv) {
            add_tensor(w, T(l, "attn_k.weight"), dim, kvh * hl, scale, 0);
            if (has_v)
                add_tensor(w, T(l, "attn_v.weight"), dim, kvh * hl, scale, 0);
            add_tensor(w, T(l, "attn_k_norm.weight"), hl, 0, 0.05f, powf((float)hl, -0.25f));
        }
        add_tensor(w, T(l, "attn_output.weight"), heads * hl, dim, scale, 0);
        add_tensor(w, T(l, "post_attention_norm.weight"), dim, 0, 0.1f, 1.0f);
        add_tensor(w, T(l, "ffn_norm.weight"), dim, 0, 0.1f, 1.0f);
        add_tensor(w, T(l, "ffn_gate.weight"), dim, ffl, scale, 0);
        add_tensor(w, T(l, "ffn_up.weight"), dim, ffl, scale, 0);
        add_tensor(w, T(l, "ffn_down.weight"), ffl, dim, scale, 0);
        add_tensor(w, T(l, "post_ffw_norm.weight"), dim, 0, 0.1f, 1.0f);
        if (n_exp > 0) { /* the 26B-A4B's experts beside the dense FFN */
            add_tensor(w, T(l, "ffn_gate_inp.scale"), dim, 0, 0.1f, 1.0f);
            add_tensor(w, T(l, "pre_ffw_norm_2.weight"), dim, 0, 0.1f, 1.0f);
            add_tensor(w, T(l, "post_ffw_norm_1.weight"), dim, 0, 0.1f, 1.0f);
            add_tensor(w, T(l, "post_ffw_norm_2.weight"), dim, 0, 0.1f, 1.0f);
            put_experts(w, l, dim, n_exp, n_used, ff_exp, -1, scale, flag(argc, argv, "--merged-gate-up"));
            add_tensor(w, T(l, "ffn_down_exps.scale"), n_exp, 0, 0.2f, 1.0f);
        }
        if (n_pl > 0) {
            add_tensor(w, T(l, "inp_gate.weight"), dim, n_pl, scale * 4, 0);
            add_tensor(w, T(l, "proj.weight"), n_pl, dim, scale, 0);
            add_tensor(w, T(l, "post_norm.weight"), dim, 0, 0.1f, 1.0f);
        }
        if (layer_scale)
            add_tensor(w, T(l, "layer_output_scale.weight"), 1, 0, 0.2f, 1.0f);
    }
    add_tensor(w, "output_norm.weight", dim, 0, 0.1f, 1.0f);
    if (!tied)
        add_tensor(w, "output.weight", dim, n_vocab, scale, 0);
    free(swa);
#undef KEY
#undef T
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: mkmodel OUT.gguf [--arch llama|qwen2|qwen3|gemma2|gemma3|phi3]\n"
                        "       [--vocab F | --n-vocab N]\n"
                        "       [--dim D] [--layers L] [--heads H] [--kv-heads K] [--head-dim HD]\n"
                        "       [--ff F] [--ctx C] [--seed S] [--rope-theta T] [--tied] [--scale X]\n"
                        "       [--embd-scale X] [--type F32|F16|BF16|Q8_0] [--template FILE]\n"
                        "       [--stream] [--fast-random]\n"
                        "  gemma2/gemma3: [--swa N] [--swa-pattern P] [--attn-softcap X]\n"
                        "       [--final-softcap X] [--rope-theta-swa T] [--rope-linear F]\n"
                        "  phi3: [--swa N] [--rope-dim R] [--orig-ctx C] [--rope-attn-factor X]\n"
                        "  qwen35: [--rope-dim R] [--rope-sections A,B,C,D] [--ssm-state S] [--ssm-groups G]\n"
                        "       [--ssm-heads V] [--ssm-conv K] [--full-attn-interval N | --recurrent-layers L,...]\n"
                        "  qwen3moe: [--experts X] [--experts-used K] [--ff-exp F] [--hot A:B] [--hot-gain G]\n"
                        "       [--merged-gate-up]\n"
                        "  qwen35moe: qwen35's and qwen3moe's options, [--ff-shexp F]\n"
                        "  gpt-oss: qwen3moe's options, [--swa N (128)] [--swa-pattern P (key left out)]\n"
                        "       [--yarn F (32)] [--orig-ctx C (4096)] [--bias-scale X (3)] [--sink-scale X (1)]\n"
                        "  gemma4: [--swa N] [--swa-pattern P | --swa-layers 1,1,0,...] [--head-dim-swa HD]\n"
                        "       [--rope-theta-swa T] [--rope-dim-swa R] [--rope-partial F] [--kv-heads-global K]\n"
                        "       [--shared-kv N] [--double-wide] [--per-layer P] [--v-from-k global|all|none]\n"
                        "       [--no-layer-scale] [--final-softcap X]\n"
                        "       [--experts X --experts-used K --ff-exp F [--merged-gate-up]]\n");
        return 1;
    }
    const char *out = argv[1];
    argc -= 2;
    argv += 2;
    const char *arch = opt(argc, argv, "--arch", "llama");
    int dim = atoi(opt(argc, argv, "--dim", "256"));
    int layers = atoi(opt(argc, argv, "--layers", "4"));
    int heads = atoi(opt(argc, argv, "--heads", "8"));
    int kv_heads = atoi(opt(argc, argv, "--kv-heads", "4"));
    int ff = atoi(opt(argc, argv, "--ff", "688"));
    int ctx = atoi(opt(argc, argv, "--ctx", "2048"));
    float theta = (float)atof(opt(argc, argv, "--rope-theta", "10000"));
    float scale = (float)atof(opt(argc, argv, "--scale", "0.05"));
    int tied = flag(argc, argv, "--tied");
    weight_type = parse_type(opt(argc, argv, "--type", "F32"));
    rng_state = strtoull(opt(argc, argv, "--seed", "1"), NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
    if (flag(argc, argv, "--fast-random")) {
        /* the big buffers reused from the heap, not mapped and faulted in afresh */
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, INT_MAX);
        if (!(fast_pool = malloc((size_t)FAST_POOL * sizeof *fast_pool)))
            die("out of memory");
        for (int i = 0; i < FAST_POOL; i++)
            fast_pool[i] = rng_normal();
    }
    int is_qwen2 = !strcmp(arch, "qwen2"), is_qwen3 = !strcmp(arch, "qwen3");
    int is_gemma2 = !strcmp(arch, "gemma2"), is_gemma3 = !strcmp(arch, "gemma3");
    int is_phi3 = !strcmp(arch, "phi3"), is_gemma = is_gemma2 || is_gemma3;
    int is_q35moe = !strcmp(arch, "qwen35moe");
    int is_gptoss = !strcmp(arch, "gpt-oss"), is_gemma4 = !strcmp(arch, "gemma4");
    int is_qwen35 = !strcmp(arch, "qwen35") || is_q35moe;
    int is_moe = !strcmp(arch, "qwen3moe") || is_q35moe || is_gptoss;
    if (strcmp(arch, "llama") && !is_qwen2 && !is_qwen3 && !is_gemma && !is_phi3 && !is_qwen35 && !is_moe &&
        !is_gemma4)
        die("--arch must be llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen35, qwen3moe, qwen35moe, gpt-oss or gemma4");
    int n_exp = atoi(opt(argc, argv, "--experts", "8")), n_used = atoi(opt(argc, argv, "--experts-used", "2"));
    int ff_exp = atoi(opt(argc, argv, "--ff-exp", "64"));
    int ff_sh = opt(argc, argv, "--ff-shexp", NULL) ? atoi(opt(argc, argv, "--ff-shexp", NULL)) : ff;
    int hot_a = -1, hot_b = -1;
    float hot_gain = (float)atof(opt(argc, argv, "--hot-gain", "8"));
    if (opt(argc, argv, "--hot", NULL) && sscanf(opt(argc, argv, "--hot", NULL), "%d:%d", &hot_a, &hot_b) != 2)
        die("--hot wants A:B, a range of token ids");
    if (is_moe && (n_exp < 1 || n_used < 1 || n_used > n_exp || ff_exp <= 0))
        die("qwen3moe, qwen35moe, gpt-oss: --experts, --experts-used, --ff-exp must be positive, experts-used at most experts");
    if (is_gemma2)
        tied = 1; /* llama.cpp's gemma2 always uses token_embd as the LM head */
    if (dim <= 0 || layers <= 0 || heads <= 0 || kv_heads <= 0 || ff <= 0 || ctx <= 0)
        die("sizes must be positive");
    if (heads % kv_heads)
        die("heads must divide by kv-heads");
    int head_dim = atoi(opt(argc, argv, "--head-dim", is_gemma4 ? "64" : "0"));
    if (head_dim == 0) {
        if (dim % heads)
            die("dim must divide by heads (or give --head-dim)");
        head_dim = dim / heads;
    }
    int q_dim = head_dim * heads, kv_dim = head_dim * kv_heads;
    if (is_phi3 && q_dim != dim)
        die("phi3: heads * head-dim must equal dim (llama.cpp's attn_output is dim x dim)");
    int rope_dim = atoi(opt(argc, argv, "--rope-dim", "0"));
    if (rope_dim <= 0)
        rope_dim = head_dim;
    if (rope_dim > head_dim || rope_dim % 2)
        die("--rope-dim must be even and at most head-dim");

    struct gw *w = gw_init();
    const char *vocab = opt(argc, argv, "--vocab", NULL);
    int n_vocab = vocab ? copy_vocab(w, vocab, opt(argc, argv, "--template", NULL) != NULL)
                        : set_placeholder_vocab(w, atoi(opt(argc, argv, "--n-vocab", "512")));

    if (is_gemma4) {
        const char *tmpl = opt(argc, argv, "--template", NULL);
        if (tmpl) {
            char *t = slurp(tmpl);
            gw_kv_str(w, "tokenizer.chat_template", t);
            free(t);
        }
        write_gemma4(w, argc, argv, n_vocab, dim, layers, heads, kv_heads, head_dim, ff, ctx, theta, scale, tied);
        if (gw_write_file(w, out))
            die("cannot write the output file");
        gw_free(w);
        printf("wrote %s: arch=%s n_vocab=%d dim=%d layers=%d heads=%d kv_heads=%d head_dim=%d ff=%d type=%s%s\n",
               out, arch, n_vocab, dim, layers, heads, kv_heads, head_dim, ff, llm_type_name(weight_type),
               tied ? " tied" : "");
        return 0;
    }

    char key[128];
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", arch, s), key)
    gw_kv_str(w, "general.architecture", arch);
    gw_kv_str(w, "general.name", "synthetic");
    gw_kv_u32(w, "general.file_type", file_type(weight_type));
    gw_kv_u32(w, KEY("context_length"), (uint32_t)ctx);
    gw_kv_u32(w, KEY("embedding_length"), (uint32_t)dim);
    gw_kv_u32(w, KEY("block_count"), (uint32_t)layers);
    gw_kv_u32(w, KEY("feed_forward_length"), (uint32_t)ff);
    gw_kv_u32(w, KEY("attention.head_count"), (uint32_t)heads);
    gw_kv_u32(w, KEY("attention.head_count_kv"), (uint32_t)kv_heads);
    gw_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    gw_kv_f32(w, KEY("rope.freq_base"), theta);
    gw_kv_u32(w, KEY("rope.dimension_count"), (uint32_t)rope_dim);
    if (is_moe) {
        gw_kv_u32(w, KEY("expert_count"), (uint32_t)n_exp);
        gw_kv_u32(w, KEY("expert_used_count"), (uint32_t)n_used);
        gw_kv_u32(w, KEY("expert_feed_forward_length"), (uint32_t)ff_exp);
        if (is_q35moe)
            gw_kv_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)ff_sh);
    }
    if (q_dim != dim || is_gemma || is_qwen35 || is_gptoss) {
        gw_kv_u32(w, KEY("attention.key_length"), (uint32_t)head_dim);
        gw_kv_u32(w, KEY("attention.value_length"), (uint32_t)head_dim);
    }
    gw_kv_u32(w, KEY("vocab_size"), (uint32_t)n_vocab);
    const char *swa = opt(argc, argv, "--swa", is_gptoss ? "128" : NULL);
    const char *pattern = opt(argc, argv, "--swa-pattern", NULL);
    if (swa)
        gw_kv_u32(w, KEY("attention.sliding_window"), (uint32_t)atoi(swa));
    if (pattern && (is_gemma || is_gptoss))
        gw_kv_u32(w, KEY("attention.sliding_window_pattern"), (uint32_t)atoi(pattern));
    if (is_gemma2)
        gw_kv_f32(w, KEY("attn_logit_softcapping"),
                  (float)atof(opt(argc, argv, "--attn-softcap", "50")));
    if (is_gemma2 || opt(argc, argv, "--final-softcap", NULL))
        gw_kv_f32(w, KEY("final_logit_softcapping"),
                  (float)atof(opt(argc, argv, "--final-softcap", "30")));
    if (is_gemma3) {
        gw_kv_f32(w, KEY("rope.freq_base_swa"),
                  (float)atof(opt(argc, argv, "--rope-theta-swa", "10000")));
        const char *lin = opt(argc, argv, "--rope-linear", NULL);
        if (lin) {
            gw_kv_str(w, KEY("rope.scaling.type"), "linear");
            gw_kv_f32(w, KEY("rope.scaling.factor"), (float)atof(lin));
        }
    }
    if (is_gptoss) { /* YaRN, as the real files have it */
        gw_kv_str(w, KEY("rope.scaling.type"), "yarn");
        gw_kv_f32(w, KEY("rope.scaling.factor"), (float)atof(opt(argc, argv, "--yarn", "32")));
        gw_kv_u32(w, KEY("rope.scaling.original_context_length"),
                  (uint32_t)atoi(opt(argc, argv, "--orig-ctx", "4096")));
    }
    if (is_phi3) {
        gw_kv_u32(w, KEY("rope.scaling.original_context_length"),
                  (uint32_t)atoi(opt(argc, argv, "--orig-ctx", "4096")));
        gw_kv_f32(w, KEY("rope.scaling.attn_factor"),
                  (float)atof(opt(argc, argv, "--rope-attn-factor", "1.1902381")));
    }
    /* qwen35: the Gated DeltaNet sizes and the layer pattern */
    int ssm_state = atoi(opt(argc, argv, "--ssm-state", "16"));
    int ssm_groups = atoi(opt(argc, argv, "--ssm-groups", "2"));
    int ssm_heads = atoi(opt(argc, argv, "--ssm-heads", "4"));
    int ssm_conv = atoi(opt(argc, argv, "--ssm-conv", "4"));
    int key_dim = ssm_state * ssm_groups, value_dim = ssm_state * ssm_heads;
    int conv_dim = 2 * key_dim + value_dim;
    int *recurrent = calloc((size_t)layers, sizeof *recurrent);
    if (!recurrent)
        die("out of memory");
    if (is_qwen35) {
        if (ssm_state <= 0 || ssm_groups <= 0 || ssm_heads <= 0 || ssm_conv < 2 || ssm_heads % ssm_groups)
            die("qwen35: --ssm-state, --ssm-groups, --ssm-heads must be positive, heads a multiple of "
                "groups, --ssm-conv at least 2");
        gw_kv_u32(w, KEY("ssm.conv_kernel"), (uint32_t)ssm_conv);
        gw_kv_u32(w, KEY("ssm.state_size"), (uint32_t)ssm_state);
        gw_kv_u32(w, KEY("ssm.group_count"), (uint32_t)ssm_groups);
        gw_kv_u32(w, KEY("ssm.time_step_rank"), (uint32_t)ssm_heads);
        gw_kv_u32(w, KEY("ssm.inner_size"), (uint32_t)value_dim);
        int32_t sec[4] = {0, 0, 0, 0};
        const char *ss = opt(argc, argv, "--rope-sections", NULL);
        if (ss) {
            if (sscanf(ss, "%d,%d,%d,%d", &sec[0], &sec[1], &sec[2], &sec[3]) != 4)
                die("--rope-sections wants four numbers A,B,C,D");
        } else {
            int np = rope_dim / 2;
            sec[2] = np / 3;
            sec[1] = (np - sec[2]) / 2;
            sec[0] = np - sec[1] - sec[2];
        }
        gw_kv_arr(w, KEY("rope.dimension_sections"), LLM_GGUF_TYPE_INT32, sec, 4);
        const char *rl = opt(argc, argv, "--recurrent-layers", NULL);
        if (rl) {
            int32_t *a = calloc((size_t)layers, sizeof *a);
            const char *p = rl;
            for (int l = 0; l < layers; l++) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || (v != 0 && v != 1) || (l + 1 < layers ? *end != ',' : *end != 0))
                    die("--recurrent-layers wants one 0 or 1 per layer, separated by commas");
                a[l] = (int32_t)v;
                recurrent[l] = (int)v;
                p = end + 1;
            }
            gw_kv_arr(w, KEY("attention.recurrent_layers"), LLM_GGUF_TYPE_INT32, a, (uint64_t)layers);
            free(a);
        } else {
            int interval = atoi(opt(argc, argv, "--full-attn-interval", "4"));
            if (interval <= 0)
                die("--full-attn-interval must be positive");
            gw_kv_u32(w, KEY("full_attention_interval"), (uint32_t)interval);
            for (int l = 0; l < layers; l++)
                recurrent[l] = (l + 1) % interval != 0;
        }
    }
    const char *tmpl = opt(argc, argv, "--template", NULL);
    if (tmpl) {
        char *t = slurp(tmpl);
        gw_kv_str(w, "tokenizer.chat_template", t);
        free(t);
    }
    /* --stream: tensors go to the file as they are made (a file larger than
     * memory; not for gemma4); at most 32 a layer and a few more */
    if (flag(argc, argv, "--stream") && gw_stream(w, out, (uint64_t)layers * 32 + 64))
        die("cannot write the output file");

    {
        float *x = gen((int64_t)dim * n_vocab, (float)atof(opt(argc, argv, "--embd-scale", "1")), 0.0f);
        if (hot_a >= 0)
            for (int r = 0; r < n_vocab; r++)
                x[(size_t)r * dim] = r >= hot_a && r < hot_b ? hot_gain : 0.0f;
        int64_t ne[2] = {dim, n_vocab};
        put_tensor(w, "token_embd.weight", weight_type, 2, ne, x);
        free(x);
    }
    if (is_phi3) {
        /* longrope: 1.0-1.1 for the short factors, 1-30 for the long ones,
         * rising with the frequency index as the real ones do */
        int nf = rope_dim / 2;
        float *f = malloc((size_t)nf * sizeof *f);
        int64_t ne[2] = {nf, 1};
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < nf; i++)
                f[i] = k ? 1.0f + 29.0f * (float)i / (float)nf + 0.1f * fabsf(rng_normal())
                         : 1.0f + 0.1f * (float)i / (float)nf;
            gw_tensor(w, k ? "rope_factors_long.weight" : "rope_factors_short.weight", LLM_TYPE_F32,
                      1, ne, f, (uint64_t)nf * sizeof *f);
        }
        free(f);
    }
    for (int l = 0; l < layers; l++) {
        char n[64];
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        add_tensor(w, T("attn_norm.weight"), dim, 0, 0.1f, 1.0f);
        if (is_qwen35) {
            add_tensor(w, T("post_attention_norm.weight"), dim, 0, 0.1f, 1.0f);
            if (recurrent[l]) {
                add_tensor(w, T("attn_qkv.weight"), dim, conv_dim, scale, 0);
                add_tensor(w, T("attn_gate.weight"), dim, value_dim, scale, 0);
                /* the conv kernel: rows of K taps, kept F32 as llama.cpp's quantizer does */
                uint32_t wt = weight_type;
                weight_type = LLM_TYPE_F32;
                add_tensor(w, T("ssm_conv1d.weight"), ssm_conv, conv_dim, 0.3f, 0);
                weight_type = wt;
                add_tensor(w, T("ssm_dt.bias"), ssm_heads, 0, 0.5f, 0);
                float *a = malloc((size_t)ssm_heads * sizeof *a);
                for (int i = 0; i < ssm_heads; i++)
                    a[i] = -expf(0.5f * rng_normal());
                int64_t ne[2] = {ssm_heads, 1};
                gw_tensor(w, T("ssm_a"), LLM_TYPE_F32, 1, ne, a, (uint64_t)ssm_heads * sizeof *a);
                free(a);
                add_tensor(w, T("ssm_alpha.weight"), dim, ssm_heads, scale * 4, 0);
                add_tensor(w, T("ssm_beta.weight"), dim, ssm_heads, scale * 4, 0);
                add_tensor(w, T("ssm_norm.weight"), ssm_state, 0, 0.1f, 1.0f);
                add_tensor(w, T("ssm_out.weight"), value_dim, dim, scale, 0);
            } else {
                add_tensor(w, T("attn_q.weight"), dim, 2 * q_dim, scale, 0);
                add_tensor(w, T("attn_k.weight"), dim, kv_dim, scale, 0);
                add_tensor(w, T("attn_v.weight"), dim, kv_dim, scale, 0);
                add_tensor(w, T("attn_q_norm.weight"), head_dim, 0, 0.1f, 1.0f);
                add_tensor(w, T("attn_k_norm.weight"), head_dim, 0, 0.1f, 1.0f);
                add_tensor(w, T("attn_output.weight"), q_dim, dim, scale, 0);
            }
            if (is_moe) { /* qwen35moe: the experts, then the shared expert and its gate */
                put_experts(w, l, dim, n_exp, n_used, ff_exp, hot_a, scale, flag(argc, argv, "--merged-gate-up"));
                add_tensor(w, T("ffn_gate_inp_shexp.weight"), dim, 0, scale * 4, 0);
                add_tensor(w, T("ffn_gate_shexp.weight"), dim, ff_sh, scale, 0);
                add_tensor(w, T("ffn_up_shexp.weight"), dim, ff_sh, scale, 0);
                add_tensor(w, T("ffn_down_shexp.weight"), ff_sh, dim, scale, 0);
                continue;
            }
            add_tensor(w, T("ffn_gate.weight"), dim, ff, scale, 0);
            add_tensor(w, T("ffn_up.weight"), dim, ff, scale, 0);
            add_tensor(w, T("ffn_down.weight"), ff, dim, scale, 0);
            continue;
        }
        if (is_phi3) {
            add_tensor(w, T("attn_qkv.weight"), dim, q_dim + 2 * kv_dim, scale, 0);
            add_tensor(w, T("attn_output.weight"), q_dim, dim, scale, 0);
            add_tensor(w, T("ffn_norm.weight"), dim, 0, 0.1f, 1.0f);
            add_tensor(w, T("ffn_up.weight"), dim, 2 * ff, scale, 0);
            add_tensor(w, T("ffn_down.weight"), ff, dim, scale, 0);
            continue;
        }
        if (is_gptoss) { /* biased attention with sinks, post-attention norm, biased experts */
            add_tensor(w, T("post_attention_norm.weight"), dim, 0, 0.1f, 1.0f);
            add_tensor(w, T("attn_q.weight"), dim, q_dim, scale, 0);
            add_tensor(w, T("attn_q.bias"), q_dim, 0, 0.02f, 0);
            add_tensor(w, T("attn_k.weight"), dim, kv_dim, scale, 0);
            add_tensor(w, T("attn_k.bias"), kv_dim, 0, 0.02f, 0);
            add_tensor(w, T("attn_v.weight"), dim, kv_dim, scale, 0);
            add_tensor(w, T("attn_v.bias"), kv_dim, 0, 0.02f, 0);
            add_tensor(w, T("attn_output.weight"), q_dim, dim, scale, 0);
            add_tensor(w, T("attn_output.bias"), dim, 0, 0.02f, 0);
            add_tensor(w, T("attn_sinks.weight"), heads, 0, (float)atof(opt(argc, argv, "--sink-scale", "1")), 0);
            put_experts(w, l, dim, n_exp, n_used, ff_exp, hot_a, scale, 0);
            put_expert_biases(w, l, dim, n_exp, ff_exp, (float)atof(opt(argc, argv, "--bias-scale", "3")));
            continue;
        }
        add_tensor(w, T("attn_q.weight"), dim, q_dim, scale, 0);
        add_tensor(w, T("attn_k.weight"), dim, kv_dim, scale, 0);
        add_tensor(w, T("attn_v.weight"), dim, kv_dim, scale, 0);
        if (is_qwen2) {
            add_tensor(w, T("attn_q.bias"), q_dim, 0, 0.02f, 0);
            add_tensor(w, T("attn_k.bias"), kv_dim, 0, 0.02f, 0);
            add_tensor(w, T("attn_v.bias"), kv_dim, 0, 0.02f, 0);
        }
        if (is_qwen3 || is_gemma3 || is_moe) {
            add_tensor(w, T("attn_q_norm.weight"), head_dim, 0, 0.1f, 1.0f);
            add_tensor(w, T("attn_k_norm.weight"), head_dim, 0, 0.1f, 1.0f);
        }
        add_tensor(w, T("attn_output.weight"), q_dim, dim, scale, 0);
        if (is_gemma)
            add_tensor(w, T("post_attention_norm.weight"), dim, 0, 0.1f, 1.0f);
        add_tensor(w, T("ffn_norm.weight"), dim, 0, 0.1f, 1.0f);
        if (is_moe) {
            put_experts(w, l, dim, n_exp, n_used, ff_exp, hot_a, scale, flag(argc, argv, "--merged-gate-up"));
            continue;
        }
        add_tensor(w, T("ffn_gate.weight"), dim, ff, scale, 0);
        add_tensor(w, T("ffn_up.weight"), dim, ff, scale, 0);
        add_tensor(w, T("ffn_down.weight"), ff, dim, scale, 0);
        if (is_gemma)
            add_tensor(w, T("post_ffw_norm.weight"), dim, 0, 0.1f, 1.0f);
#undef T
    }
    add_tensor(w, "output_norm.weight", dim, 0, 0.1f, 1.0f);
    if (!tied)
        add_tensor(w, "output.weight", dim, n_vocab, scale, 0);
    if (gw_write_file(w, out))
        die("cannot write the output file");
    gw_free(w);
    free(recurrent);
    printf("wrote %s: arch=%s n_vocab=%d dim=%d layers=%d heads=%d kv_heads=%d head_dim=%d ff=%d type=%s%s\n",
           out, arch, n_vocab, dim, layers, heads, kv_heads, head_dim, ff,
           llm_type_name(weight_type), tied ? " tied" : "");
    return 0;
}
