/*
 * cmd-models-info.c - `kvchat models info MODEL`: what is in a model file
 * (its architecture, tokenizer, template, tensors and metadata), as text
 * or one JSON object; a remote entry's is cli/cmd-remote.c's.
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "cli/remote.h"
#include "cli/term.h"
#include "core/llm.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== text helpers ==== */

static void print_escaped(FILE *f, const char *s, uint64_t n, uint64_t max)
{
    uint64_t k = n < max ? n : max;
    for (uint64_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\\' || c == '"')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    if (k < n)
        fprintf(f, "... (%" PRIu64 " bytes)", n);
}

/* tensor types, most frequent first */
static int sorted_types(const struct llm_model_meta *m, uint32_t *out)
{
    int n = 0;
    for (uint32_t t = 0; t < LLM_TYPE_COUNT; t++)
        if (m->type_count[t])
            out[n++] = t;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && m->type_count[out[j]] > m->type_count[out[j - 1]]; j--) {
            uint32_t x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    return n;
}

static void token_text(const struct llm_gguf *g, int64_t id, FILE *f)
{
    struct llm_str s;
    int64_t ti = llm_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (id >= 0 && llm_gguf_arr_get_str(g, ti, (uint64_t)id, &s) == 0) {
        fputs(" '", f);
        print_escaped(f, s.ptr, s.len, 40);
        fputc('\'', f);
    }
}

/* ==== one metadata value, abbreviated ==== */

static void print_scalar(const struct llm_gguf *g, int64_t i, FILE *f, bool json)
{
    enum llm_gguf_type t = llm_gguf_kv_type(g, i);
    int64_t v;
    uint64_t u;
    double d;
    struct llm_str s;
    if (t == LLM_GGUF_TYPE_STRING) {
        llm_gguf_get_str(g, i, &s);
        if (json)
            cmd_json_str(f, s.ptr, s.len);
        else {
            fputc('"', f);
            print_escaped(f, s.ptr, s.len, 160);
            fputc('"', f);
        }
    } else if (t == LLM_GGUF_TYPE_BOOL) {
        llm_gguf_get_int(g, i, &v);
        fputs(v ? "true" : "false", f);
    } else if (t == LLM_GGUF_TYPE_FLOAT32 || t == LLM_GGUF_TYPE_FLOAT64) {
        llm_gguf_get_float(g, i, &d);
        fprintf(f, "%.9g", d);
    } else if (llm_gguf_get_int(g, i, &v) == 0) {
        fprintf(f, "%" PRId64, v);
    } else if (llm_gguf_get_uint64(g, i, &u) == 0) {
        fprintf(f, "%" PRIu64, u);
    }
}

static void print_array(const struct llm_gguf *g, int64_t i, FILE *f, bool json)
{
    enum llm_gguf_type et = llm_gguf_arr_type(g, i);
    uint64_t n = llm_gguf_arr_n(g, i), shown = n < 8 ? n : 8;
    if (json)
        fprintf(f, "{\"type\": \"%s\", \"n\": %" PRIu64 ", \"head\": [", llm_gguf_type_name(et), n);
    else
        fprintf(f, "[%" PRIu64 " x %s] ", n, llm_gguf_type_name(et));
    for (uint64_t j = 0; j < shown; j++) {
        int64_t v;
        uint64_t u;
        double d;
        struct llm_str s;
        if (j)
            fputs(", ", f);
        if (et == LLM_GGUF_TYPE_STRING) {
            llm_gguf_arr_get_str(g, i, j, &s);
            if (json) {
                cmd_json_str(f, s.ptr, s.len < 64 ? s.len : 64);
            } else {
                fputc('"', f);
                print_escaped(f, s.ptr, s.len, 40);
                fputc('"', f);
            }
        } else if (et == LLM_GGUF_TYPE_FLOAT32 || et == LLM_GGUF_TYPE_FLOAT64) {
            llm_gguf_arr_get_float(g, i, j, &d);
            fprintf(f, "%.9g", d);
        } else if (et == LLM_GGUF_TYPE_BOOL) {
            llm_gguf_arr_get_int(g, i, j, &v);
            fputs(v ? "true" : "false", f);
        } else if (llm_gguf_arr_get_int(g, i, j, &v) == 0) {
            fprintf(f, "%" PRId64, v);
        } else if (llm_gguf_arr_get_uint64(g, i, j, &u) == 0) {
            fprintf(f, "%" PRIu64, u);
        }
    }
    if (json)
        fputs("]}", f);
    else if (shown < n)
        fputs(", ...", f);
}

static void print_value(const struct llm_gguf *g, int64_t i, FILE *f, bool json)
{
    if (llm_gguf_kv_type(g, i) == LLM_GGUF_TYPE_ARRAY)
        print_array(g, i, f, json);
    else
        print_scalar(g, i, f, json);
}

/* ==== info: text ==== */

static void print_id(FILE *f, const char *label, const struct llm_gguf *g, int64_t id)
{
    if (id < 0)
        fprintf(f, "%s -", label);
    else {
        fprintf(f, "%s %" PRId64, label, id);
        token_text(g, id, f);
    }
}

/* what the binding makes of the model: opened with every tensor bound and
 * checked, not prepared for computing; *why gets the reason it would not
 * open for computing (empty when it would) */
struct bound {
    bool ok;       /* the tensors bind */
    struct llm_model_arch_info a;
    char why[512]; /* why it does not run, or "" */
    char pattern[4100]; /* hybrid models: R (recurrent) or A (attention) per layer, or "" */
    char swa_pattern[4100]; /* windowed models: L (local) or G (global) per layer, or "" */
};

static void bind_check(const char *path, struct bound *bd)
{
    struct llm_model_params p = llm_model_default_params();
    p.bind_only = true;
    struct llm_model *mdl;
    memset(bd, 0, sizeof *bd);
    if (llm_model_open(path, p, &mdl, bd->why, sizeof bd->why))
        return;
    bd->ok = true;
    llm_model_arch_info(mdl, &bd->a);
    if (bd->a.n_layer_rec) {
        int64_t n = llm_model_n_layer(mdl);
        for (int64_t l = 0; l < n && l + 1 < (int64_t)sizeof bd->pattern; l++)
            bd->pattern[l] = llm_model_layer_recurrent(mdl, l) ? 'R' : 'A';
    }
    if (bd->a.n_swa_layers) {
        int64_t n = llm_model_n_layer(mdl);
        for (int64_t l = 0; l < n && l + 1 < (int64_t)sizeof bd->swa_pattern; l++)
            bd->swa_pattern[l] = llm_model_layer_swa(mdl, l) ? 'L' : 'G';
    }
    llm_model_close(mdl);
    if (!bd->a.computable) {
        /* the refusal a run would give */
        struct llm_model *m2 = NULL;
        if (llm_model_open(path, llm_model_default_params(), &m2, bd->why, sizeof bd->why) == 0) {
            llm_model_close(m2);
            bd->why[0] = 0;
        }
    }
}

static void arch_text(FILE *f, const struct llm_model_meta *m, const struct bound *bd)
{
    if (!bd->ok) {
        fprintf(f, "runs:           no: %s\n", bd->why);
        return;
    }
    const struct llm_model_arch_info *a = &bd->a;
    if (a->n_swa > 0) {
        fprintf(f, "sliding window: %" PRId64 " positions on %" PRId64 " of %" PRId64 " layers",
                a->n_swa, a->n_swa_layers, m->n_layer);
        if (a->rope_base_swa != (float)m->rope_freq_base)
            fprintf(f, " (rope freq base %g there)", a->rope_base_swa);
        if (!strcmp(m->arch, "gemma4") && bd->swa_pattern[0]) /* its sliding_window_pattern array */
            fprintf(f, ": %s (L local, G global)", bd->swa_pattern);
        fprintf(f, "\n");
    } else if (m->n_swa > 0) {
        fprintf(f, "sliding window: %" PRId64 " declared, not used (as llama.cpp)\n", m->n_swa);
    }
    if (a->attn_softcap > 0 || a->final_softcap > 0) {
        fprintf(f, "soft-capping:   ");
        if (a->attn_softcap > 0)
            fprintf(f, "attention %g%s", a->attn_softcap, a->final_softcap > 0 ? ", " : "");
        if (a->final_softcap > 0)
            fprintf(f, "final logits %g", a->final_softcap);
        fprintf(f, "\n");
    }
    if (a->rope_factors)
        fprintf(f, "longrope:       factors long and short, original context %" PRId64
                   ", attn factor %g\n", a->rope_orig_ctx, a->rope_attn_factor);
    if (a->n_layer_rec) {
        char sz[64];
        cmd_fmt_size(sz, sizeof sz, (double)a->rstate_bytes);
        fprintf(f, "recurrent:      Gated DeltaNet on %" PRId64 " of %" PRId64 " layers, %s (R recurrent, "
                   "A attention)\n", a->n_layer_rec, (int64_t)strlen(bd->pattern), bd->pattern);
        fprintf(f, "state:          %s a sequence (%" PRIu64 " bytes): conv of %" PRId64 " taps, %" PRId64
                   " value heads on %" PRId64 " key heads, heads of %" PRId64 "\n",
                sz, a->rstate_bytes, a->ssm_conv, a->ssm_heads, a->ssm_groups, a->ssm_state);
    }
    if (a->n_layer_kv_shared)
        fprintf(f, "shared KV:      the last %" PRId64 " layers have no K/V of their own: they read layer %" PRId64
                   "'s (local) and %" PRId64 "'s (global); %" PRId64 " layers hold KV\n",
                a->n_layer_kv_shared, a->kv_src_swa, a->kv_src_full, m->n_layer - a->n_layer_kv_shared);
    if (a->n_per_layer)
        fprintf(f, "per-layer input: %" PRId64 " values a layer\n", a->n_per_layer);
    if (a->n_expert)
        fprintf(f, "experts:        %" PRId64 " a layer on %" PRId64 " of %" PRId64 " layers%s, %" PRId64
                   " used a token (%s), %" PRId64 " rows each%s\n",
                a->n_expert, a->n_layer_moe, m->n_layer, a->experts_beside_ffn ? " beside the dense FFN" : "",
                a->n_expert_used, a->moe_gating, a->n_ff_exp, a->fused_gate_up_exps ? ", gate+up merged" : "");
    if (a->n_params_active) {
        char act[64];
        cmd_fmt_count(act, sizeof act, (double)a->n_params_active);
        fprintf(f, "active params:  %s a token (%" PRId64 ")\n", act, a->n_params_active);
    }
    if (a->fused_qkv || a->fused_gate_up || a->post_norms || a->qk_norm || a->gelu ||
        a->embd_scale != 1.0f || a->attn_gate) {
        fprintf(f, "block:         ");
        if (a->attn_gate)
            fprintf(f, " gated attention,");
        if (a->fused_qkv)
            fprintf(f, " fused qkv,");
        if (a->fused_gate_up)
            fprintf(f, " fused gate+up,");
        if (a->qk_norm)
            fprintf(f, " q/k norms,");
        if (a->post_norms)
            fprintf(f, " post-norms,");
        fprintf(f, " %s gating", a->gelu ? "gelu (tanh)" : "silu");
        if (a->embd_scale != 1.0f)
            fprintf(f, ", embeddings x%g", a->embd_scale);
        fprintf(f, ", query scale %g\n", a->attn_scale);
    }
    if (bd->why[0])
        fprintf(f, "runs:           no: %s\n", bd->why);
    else
        fprintf(f, "runs:           yes\n");
}

static void info_text(const char *path, const struct llm_gguf *g, const struct llm_model_meta *m,
                      const struct bound *bd, bool all)
{
    char a[64], b[64];
    FILE *f = stdout;
    cmd_fmt_size(a, sizeof a, (double)llm_gguf_file_size(g));
    cmd_term_printf(f, "file:           %s (%s, GGUF v%" PRIu32 ")\n", path, a, llm_gguf_version(g));
    fprintf(f, "architecture:   %s\n", m->arch);
    if (m->name[0])
        cmd_term_printf(f, "name:           %s\n", m->name); /* the GGUF's own text */
    if (m->file_type >= 0)
        fprintf(f, "file type:      %s\n", llm_file_type_name(m->file_type));
    cmd_fmt_count(a, sizeof a, (double)m->n_params);
    cmd_fmt_size(b, sizeof b, (double)m->tensor_bytes);
    fprintf(f, "parameters:     %s (%" PRId64 ")\n", a, m->n_params);
    fprintf(f, "weights:        %s, %.2f bits per weight\n", b,
            m->n_params ? m->tensor_bytes * 8.0 / (double)m->n_params : 0.0);
    uint32_t order[LLM_TYPE_COUNT];
    int nt = sorted_types(m, order);
    fprintf(f, "tensors:        %" PRId64 " (", llm_gguf_n_tensors(g));
    for (int i = 0; i < nt; i++)
        fprintf(f, "%s%s: %" PRId64, i ? ", " : "", llm_type_name(order[i]), m->type_count[order[i]]);
    fprintf(f, ")\n");
    fprintf(f, "context length: %" PRId64 "\n", m->n_ctx_train);
    fprintf(f, "embedding:      %" PRId64 "\n", m->n_embd);
    fprintf(f, "layers:         %" PRId64 "\n", m->n_layer);
    const struct llm_model_arch_info *ai = &bd->a;
    if (bd->ok && ai->head_dim_swa && ai->head_dim_full &&
        (ai->head_dim_swa != ai->head_dim_full || ai->n_head_kv_swa != ai->n_head_kv_full))
        fprintf(f, "heads:          %" PRId64 " (kv heads %" PRId64 " local, %" PRId64 " global; head dim %" PRId64
                   " local, %" PRId64 " global)\n",
                m->n_head, ai->n_head_kv_swa, ai->n_head_kv_full, ai->head_dim_swa, ai->head_dim_full);
    else {
        fprintf(f, "heads:          %" PRId64 " (kv heads %" PRId64 ", head dim %" PRId64, m->n_head,
                bd->ok ? ai->n_head_kv_layer0 : m->n_head_kv, m->head_dim_k);
        if (m->head_dim_v != m->head_dim_k)
            fprintf(f, ", value dim %" PRId64, m->head_dim_v);
        fprintf(f, ")\n");
    }
    if (bd->ok && ai->n_ff_max != ai->n_ff_layer0) /* gemma4's per-layer rows */
        fprintf(f, "feed forward:   %" PRId64 " (up to %" PRId64 " on later layers)\n", ai->n_ff_layer0, ai->n_ff_max);
    else
        fprintf(f, "feed forward:   %" PRId64 "\n", bd->ok ? ai->n_ff_layer0 : m->n_ff);
    fprintf(f, "rms norm eps:   %g\n", m->rms_eps);
    fprintf(f, "rope:           %s, freq base %g, %" PRId64 " dims", m->rope_type, m->rope_freq_base,
            m->rope_dim);
    if (bd->ok && ai->rope_dim_swa && ai->rope_dim_full && ai->rope_dim_swa != ai->rope_dim_full)
        fprintf(f, " (local layers %" PRId64 ")", ai->rope_dim_swa);
    if (m->rope_scaling[0])
        fprintf(f, ", scaling %s x%g", m->rope_scaling, m->rope_scaling_factor);
    fprintf(f, "\n");
    fprintf(f, "vocabulary:     %" PRId64 " tokens, %s", m->n_vocab,
            m->tokenizer[0] ? m->tokenizer : "(no tokenizer)");
    if (m->tokenizer_pre[0])
        fprintf(f, " (pre-tokenizer %s)", m->tokenizer_pre);
    fprintf(f, "\n");
    fprintf(f, "special tokens: ");
    print_id(f, "bos", g, m->bos_id);
    print_id(f, ", eos", g, m->eos_id);
    if (m->eot_id >= 0)
        print_id(f, ", eot", g, m->eot_id);
    if (m->unk_id >= 0)
        print_id(f, ", unk", g, m->unk_id);
    if (m->pad_id >= 0)
        print_id(f, ", pad", g, m->pad_id);
    if (m->add_bos >= 0)
        fprintf(f, "; add bos %s", m->add_bos ? "yes" : "no");
    fprintf(f, "\n");
    fprintf(f, "chat template:  %s\n",
            m->chat_template == LLM_TEMPLATE_NONE ? "none (kvchat falls back to chatml)"
            : m->chat_template == LLM_TEMPLATE_UNKNOWN
                ? "present, not recognised (kvchat falls back to chatml)"
                : llm_template_name(m->chat_template));
    arch_text(f, m, bd);
    if (!all)
        return;
    fprintf(f, "\nmetadata (%" PRId64 " keys):\n", llm_gguf_n_kv(g));
    for (int64_t i = 0; i < llm_gguf_n_kv(g); i++) {
        enum llm_gguf_type t = llm_gguf_kv_type(g, i);
        fprintf(f, "  %s (%s) = ", llm_gguf_key(g, i), llm_gguf_type_name(t));
        print_value(g, i, f, false);
        fputc('\n', f);
    }
}

/* ==== info: JSON ==== */

static void json_int(FILE *f, const char *k, int64_t v, bool absent_if_negative)
{
    if (absent_if_negative && v < 0)
        fprintf(f, ", \"%s\": null", k);
    else
        fprintf(f, ", \"%s\": %" PRId64, k, v);
}

static void arch_json(FILE *f, const struct bound *bd)
{
    const struct llm_model_arch_info *a = &bd->a;
    fprintf(f, ", \"runs\": %s", bd->ok && !bd->why[0] ? "true" : "false");
    cmd_json_key_str(f, "runs_error", bd->why);
    if (!bd->ok)
        return;
    fprintf(f, ", \"sliding_window\": %" PRId64 ", \"sliding_window_layers\": %" PRId64, a->n_swa,
            a->n_swa_layers);
    fprintf(f, ", \"rope_freq_base_swa\": %.9g", a->rope_base_swa);
    fprintf(f, ", \"attn_logit_softcapping\": %.9g, \"final_logit_softcapping\": %.9g",
            a->attn_softcap, a->final_softcap);
    fprintf(f, ", \"rope_factors\": %s", a->rope_factors ? "true" : "false");
    if (a->rope_factors)
        fprintf(f, ", \"rope_scaling_original_context_length\": %" PRId64
                   ", \"rope_scaling_attn_factor\": %.9g", a->rope_orig_ctx, a->rope_attn_factor);
    fprintf(f, ", \"fused_qkv\": %s, \"fused_gate_up\": %s, \"post_norms\": %s",
            a->fused_qkv ? "true" : "false", a->fused_gate_up ? "true" : "false",
            a->post_norms ? "true" : "false");
    fprintf(f, ", \"ffn_activation\": \"%s\", \"embedding_scale\": %.9g, \"query_scale\": %.9g",
            a->gelu ? "gelu_tanh" : "silu", a->embd_scale, a->attn_scale);
    fprintf(f, ", \"recurrent_layers\": %" PRId64 ", \"layer_pattern\": ", a->n_layer_rec);
    if (bd->pattern[0])
        cmd_json_str(f, bd->pattern, strlen(bd->pattern));
    else
        fputs("null", f);
    fprintf(f, ", \"recurrent_state_bytes\": %" PRIu64 ", \"attention_gate\": %s", a->rstate_bytes,
            a->attn_gate ? "true" : "false");
    if (a->n_expert)
        fprintf(f, ", \"expert_count\": %" PRId64 ", \"expert_used_count\": %" PRId64
                   ", \"expert_feed_forward_length\": %" PRId64 ", \"expert_layers\": %" PRId64
                   ", \"expert_gating\": \"%s\", \"experts_beside_dense_ffn\": %s",
                a->n_expert, a->n_expert_used, a->n_ff_exp, a->n_layer_moe, a->moe_gating,
                a->experts_beside_ffn ? "true" : "false");
    if (a->n_params_active)
        fprintf(f, ", \"n_params_active\": %" PRId64, a->n_params_active);
    if (a->n_swa_layers) {
        fprintf(f, ", \"sliding_window_pattern\": ");
        cmd_json_str(f, bd->swa_pattern, strlen(bd->swa_pattern));
        fprintf(f, ", \"key_length_swa\": %" PRId64 ", \"head_count_kv_swa\": %" PRId64
                   ", \"rope_dimension_count_swa\": %" PRId64,
                a->head_dim_swa, a->n_head_kv_swa, a->rope_dim_swa);
    }
    if (a->head_dim_full)
        fprintf(f, ", \"key_length_global\": %" PRId64 ", \"head_count_kv_global\": %" PRId64
                   ", \"rope_dimension_count_global\": %" PRId64,
                a->head_dim_full, a->n_head_kv_full, a->rope_dim_full);
    if (a->n_layer_kv_shared)
        fprintf(f, ", \"shared_kv_layers\": %" PRId64 ", \"shared_kv_source_swa\": %" PRId64
                   ", \"shared_kv_source_global\": %" PRId64,
                a->n_layer_kv_shared, a->kv_src_swa, a->kv_src_full);
    if (a->n_per_layer)
        fprintf(f, ", \"embedding_length_per_layer_input\": %" PRId64, a->n_per_layer);
    if (a->n_layer_rec)
        fprintf(f, ", \"ssm_conv_kernel\": %" PRId64 ", \"ssm_state_size\": %" PRId64
                   ", \"ssm_group_count\": %" PRId64 ", \"ssm_time_step_rank\": %" PRId64,
                a->ssm_conv, a->ssm_state, a->ssm_groups, a->ssm_heads);
}

static void info_json(const char *path, const struct llm_gguf *g, const struct llm_model_meta *m,
                      const struct bound *bd, bool all)
{
    FILE *f = stdout;
    fputs("{\"file\": ", f);
    cmd_json_str(f, path, strlen(path));
    fprintf(f, ", \"file_size\": %" PRIu64 ", \"gguf_version\": %" PRIu32, llm_gguf_file_size(g),
            llm_gguf_version(g));
    cmd_json_key_str(f, "architecture", m->arch);
    cmd_json_key_str(f, "name", m->name);
    cmd_json_key_str(f, "file_type", m->file_type >= 0 ? llm_file_type_name(m->file_type) : NULL);
    json_int(f, "n_params", m->n_params, false);
    fprintf(f, ", \"weight_bytes\": %" PRIu64 ", \"bits_per_weight\": %.4f", m->tensor_bytes,
            m->n_params ? m->tensor_bytes * 8.0 / (double)m->n_params : 0.0);
    json_int(f, "n_tensors", llm_gguf_n_tensors(g), false);
    fputs(", \"tensor_types\": {", f);
    uint32_t order[LLM_TYPE_COUNT];
    int nt = sorted_types(m, order);
    for (int i = 0; i < nt; i++)
        fprintf(f, "%s\"%s\": %" PRId64, i ? ", " : "", llm_type_name(order[i]), m->type_count[order[i]]);
    fputs("}", f);
    json_int(f, "context_length", m->n_ctx_train, true);
    json_int(f, "embedding_length", m->n_embd, true);
    json_int(f, "block_count", m->n_layer, true);
    json_int(f, "feed_forward_length", bd->ok ? bd->a.n_ff_layer0 : m->n_ff, true); /* layer 0's, as llama.cpp */
    json_int(f, "head_count", m->n_head, true);
    json_int(f, "head_count_kv", bd->ok ? bd->a.n_head_kv_layer0 : m->n_head_kv, true); /* layer 0's, as llama.cpp */
    json_int(f, "key_length", m->head_dim_k, true);
    json_int(f, "value_length", m->head_dim_v, true);
    fprintf(f, ", \"rms_norm_eps\": %.9g, \"rope_freq_base\": %.9g", m->rms_eps, m->rope_freq_base);
    json_int(f, "rope_dimension_count", m->rope_dim, true);
    cmd_json_key_str(f, "rope_type", m->rope_type);
    cmd_json_key_str(f, "rope_scaling_type", m->rope_scaling);
    fprintf(f, ", \"rope_scaling_factor\": %.9g", m->rope_scaling_factor);
    json_int(f, "vocab_size", m->n_vocab, true);
    cmd_json_key_str(f, "tokenizer_model", m->tokenizer);
    cmd_json_key_str(f, "tokenizer_pre", m->tokenizer_pre);
    json_int(f, "bos_token_id", m->bos_id, true);
    json_int(f, "eos_token_id", m->eos_id, true);
    json_int(f, "eot_token_id", m->eot_id, true);
    json_int(f, "unknown_token_id", m->unk_id, true);
    json_int(f, "padding_token_id", m->pad_id, true);
    fprintf(f, ", \"add_bos_token\": %s",
            m->add_bos < 0 ? "null" : m->add_bos ? "true" : "false");
    fprintf(f, ", \"chat_template\": %s", m->chat_template == LLM_TEMPLATE_NONE ? "false" : "true");
    cmd_json_key_str(f, "chat_template_family",
              m->chat_template > LLM_TEMPLATE_UNKNOWN ? llm_template_name(m->chat_template) : NULL);
    arch_json(f, bd);
    if (all) {
        fputs(", \"metadata\": {", f);
        for (int64_t i = 0; i < llm_gguf_n_kv(g); i++) {
            const char *k = llm_gguf_key(g, i);
            if (i)
                fputs(", ", f);
            cmd_json_str(f, k, strlen(k));
            fputs(": ", f);
            print_value(g, i, f, true);
        }
        fputs("}", f);
    }
    fputs("}\n", f);
}

/* ==== the subcommands ==== */

/* models info of the file (or remote entry) at path, given as arg */
static int info_path(const char *arg, const char *path, bool json, bool all, bool offline)
{
    char err[512];
    if (mdl_is_remote(path))
        return cmd_models_info_remote(path, json, offline);
    struct llm_gguf *g;
    if (llm_gguf_open(path, &g, err, sizeof err))
        return cmd_fail(CMD_EXIT_MODEL, "cannot open model '%s': %s", arg, err);
    struct llm_model_meta m;
    if (llm_model_meta_read(g, &m, err, sizeof err)) {
        llm_gguf_close(g);
        return cmd_fail(CMD_EXIT_MODEL, "cannot open model '%s': %s", arg, err);
    }
    struct bound bd;
    bind_check(path, &bd);
    if (json)
        info_json(path, g, &m, &bd, all);
    else
        info_text(path, g, &m, &bd, all);
    llm_gguf_close(g);
    return CMD_EXIT_OK;
}

int cmd_models_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"all", no_argument, NULL, 'a'},
        {"offline", no_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, all = false, offline = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'a': all = true; break;
        case 'o': offline = true; break;
        case 'h': return cmd_help(&cmd_models_entry);
        default:
            return cmd_usage_error(&cmd_models_entry, "models info: unknown option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cmd_usage_error(&cmd_models_entry, "models info: expected one MODEL");
    const char *arg = argv[optind];
    char *path;
    mdl_resolve(arg, &path);
    if (!path)
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    int rc = info_path(arg, path, json, all, offline);
    free(path);
    return rc;
}
