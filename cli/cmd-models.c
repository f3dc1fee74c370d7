/*
 * cmd-models.c - `kvchat models ...`: what is in a model file (`info`), and
 * the model store: list, pull (with a progress line on a terminal), rm,
 * default, aliases. The work is done by models/ (mdl.h); this file parses
 * options, prints, and maps errors to exit codes.
 */
#include "cli/cmd.h"
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

static const char models_usage[] =
    "usage: kvchat models [list] [--json]\n"
    "       kvchat models add [--name NAME] [--copy | --symlink] [--force] FILE\n"
    "       kvchat models pull [--name NAME] [--sha256 HEX] [--ca-file FILE] [--force]\n"
    "                          [--retries N] [--timeout SECONDS] REF\n"
    "       kvchat models add-remote [--model ID] [--api-key-env VAR] [--ca-file FILE]\n"
    "                          [--timeout SECONDS] [--retries N] [--no-stream] [--force]\n"
    "                          NAME URL\n"
    "       kvchat models rm [--force] NAME...\n"
    "       kvchat models default [NAME | --unset]\n"
    "       kvchat models info [--json] [--all] [--offline] MODEL\n"
    "       kvchat models aliases [--json]\n"
    "       kvchat models path [MODEL]\n"
    "\n"
    "  list, ls      the models in the store: name, size, quantization, architecture,\n"
    "                parameters, when pulled, path ('*' marks the default); also\n"
    "                'kvchat models' alone\n"
    "      --json    one JSON array of objects instead\n"
    "  add FILE      put a GGUF file you already have into the store (its header is\n"
    "                checked): a hard link where the file system allows, else a\n"
    "                symbolic link to it; the file is never changed or moved\n"
    "      --name NAME       store it as NAME (default: the file name without .gguf)\n"
    "      --copy            copy the file instead of linking it\n"
    "      --symlink         a symbolic link even where a hard link is possible\n"
    "      --force           replace a model of that name\n"
    "  pull REF      download a model into the store over HTTPS, resuming an\n"
    "                interrupted download, checking its SHA-256 (the hub's\n"
    "                X-Linked-ETag, or --sha256) and its GGUF header. REF is\n"
    "                  an alias               qwen2.5:0.5b (see 'models aliases')\n"
    "                  hf:OWNER/REPO:QUANT    the repo's .gguf file of that quantization\n"
    "                                         (default Q4_K_M)\n"
    "                  hf:OWNER/REPO/FILE.gguf\n"
    "                  https://HOST/PATH.gguf\n"
    "      --name NAME       store it as NAME (default: the alias, or the file name)\n"
    "      --sha256 HEX      the file's expected SHA-256\n"
    "      --ca-file FILE    trust the CAs in FILE (default $KVCHAT_CA_FILE, else\n"
    "                        /etc/ssl/certs/ca-certificates.crt)\n"
    "      --force           download again even if NAME is in the store\n"
    "      --retries N       retries after a network failure (default 3, with backoff)\n"
    "      --timeout SECONDS give up on a silent connection after this long (default 30)\n"
    "  add-remote NAME URL\n"
    "                a model on an OpenAI-compatible server (vLLM, SGLang, llama-server,\n"
    "                ollama): URL is its /v1 base, https://, or http:// for a loopback or\n"
    "                private address only. NAME is then used like a local model\n"
    "      --model ID        the server's model id (default: its only model)\n"
    "      --api-key-env VAR read the API key from $VAR at each request (never stored)\n"
    "      --ca-file FILE    trust the CAs in FILE for https (default as for pull)\n"
    "      --timeout SECONDS give up on a silent server after this long (default 120)\n"
    "      --retries N       retries after 408, 429 and 5xx, with backoff (default 3)\n"
    "      --no-stream       ask for whole answers (for proxies that buffer streams)\n"
    "      --force           replace a remote model of that name\n"
    "  rm NAME       remove a model (and any partial download) from the store;\n"
    "                refuses while a session uses it unless --force\n"
    "  default NAME  make NAME (a store name or a file) the default model, written as\n"
    "                'model = NAME' to ${XDG_CONFIG_HOME:-~/.config}/kvchat/config;\n"
    "                with no NAME, print the default; --unset removes it\n"
    "  info MODEL    what a GGUF model file holds: architecture, parameters, file\n"
    "                size, tensor types, context length, layers, heads, vocabulary,\n"
    "                rope settings, chat template, special tokens\n"
    "      --json    print one JSON object instead\n"
    "      --all     also every metadata key (long arrays and strings abbreviated)\n"
    "                of a remote model: its entry, and the models its server lists\n"
    "      --offline (remote) do not ask the server\n"
    "  aliases       the built-in table of model aliases\n"
    "      --json    one JSON array of objects instead\n"
    "  path [MODEL]  the file MODEL (a path or store name) stands for; without MODEL,\n"
    "                the default model's (KVCHAT_MODEL, else the config file)\n"
    "\n"
    "MODEL is a file path or the name of a model in the store ($KVCHAT_HOME/models).\n"
    "Environment: HF_TOKEN (sent only to the hub), KVCHAT_HF_ENDPOINT or HF_ENDPOINT\n"
    "(the hub, default https://huggingface.co), HTTPS_PROXY and NO_PROXY,\n"
    "KVCHAT_CA_FILE, KVCHAT_MODEL (overrides the default model).\n"
    "JSON output is one document: an array for lists, an object for one thing.\n"
    "Exit status: 0 ok, 1 usage error, 2 the model cannot be read or written,\n"
    "4 network or verification failure, 130 interrupted.\n";

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

static void fmt_count(char *buf, size_t n, double v)
{
    if (v >= 1e9)
        snprintf(buf, n, "%.2f B", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, n, "%.2f M", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%.2f K", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
}

static void fmt_bytes(char *buf, size_t n, double v)
{
    if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else if (v >= 1024.0 * 1024)
        snprintf(buf, n, "%.2f MiB", v / (1024.0 * 1024));
    else if (v >= 1024.0)
        snprintf(buf, n, "%.2f KiB", v / 1024.0);
    else
        snprintf(buf, n, "%.0f bytes", v);
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
        fmt_bytes(sz, sizeof sz, (double)a->rstate_bytes);
        fprintf(f, "recurrent:      Gated DeltaNet on %" PRId64 " of %" PRId64 " layers, %s (R recurrent, "
                   "A attention)\n", a->n_layer_rec, (int64_t)strlen(bd->pattern), bd->pattern);
        fprintf(f, "state:          %s a sequence (%" PRIu64 " bytes): conv of %" PRId64 " taps, %" PRId64
                   " value heads on %" PRId64 " key heads, heads of %" PRId64 "\n",
                sz, a->rstate_bytes, a->ssm_conv, a->ssm_heads, a->ssm_groups, a->ssm_state);
    }
    if (a->n_expert) {
        char act[64];
        fmt_count(act, sizeof act, (double)a->n_params_active);
        fprintf(f, "experts:        %" PRId64 " a layer on %" PRId64 " of %" PRId64 " layers, %" PRId64
                   " used a token (%s), %" PRId64 " rows each%s\n",
                a->n_expert, a->n_layer_moe, m->n_layer, a->n_expert_used, a->moe_gating, a->n_ff_exp,
                a->fused_gate_up_exps ? ", gate+up merged" : "");
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
    fmt_bytes(a, sizeof a, (double)llm_gguf_file_size(g));
    cmd_term_printf(f, "file:           %s (%s, GGUF v%" PRIu32 ")\n", path, a, llm_gguf_version(g));
    fprintf(f, "architecture:   %s\n", m->arch);
    if (m->name[0])
        cmd_term_printf(f, "name:           %s\n", m->name); /* the GGUF's own text */
    if (m->file_type >= 0)
        fprintf(f, "file type:      %s\n", llm_file_type_name(m->file_type));
    fmt_count(a, sizeof a, (double)m->n_params);
    fmt_bytes(b, sizeof b, (double)m->tensor_bytes);
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
    fprintf(f, "heads:          %" PRId64 " (kv heads %" PRId64 ", head dim %" PRId64, m->n_head,
            m->n_head_kv, m->head_dim_k);
    if (m->head_dim_v != m->head_dim_k)
        fprintf(f, ", value dim %" PRId64, m->head_dim_v);
    fprintf(f, ")\n");
    fprintf(f, "feed forward:   %" PRId64 "\n", m->n_ff);
    fprintf(f, "rms norm eps:   %g\n", m->rms_eps);
    fprintf(f, "rope:           %s, freq base %g, %" PRId64 " dims", m->rope_type, m->rope_freq_base,
            m->rope_dim);
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

static void json_cstr(FILE *f, const char *k, const char *v)
{
    fprintf(f, ", \"%s\": ", k);
    if (v && v[0])
        cmd_json_str(f, v, strlen(v));
    else
        fputs("null", f);
}

static void arch_json(FILE *f, const struct bound *bd)
{
    const struct llm_model_arch_info *a = &bd->a;
    fprintf(f, ", \"runs\": %s", bd->ok && !bd->why[0] ? "true" : "false");
    json_cstr(f, "runs_error", bd->why);
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
                   ", \"expert_gating\": \"%s\", \"n_params_active\": %" PRId64,
                a->n_expert, a->n_expert_used, a->n_ff_exp, a->n_layer_moe, a->moe_gating, a->n_params_active);
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
    json_cstr(f, "architecture", m->arch);
    json_cstr(f, "name", m->name);
    json_cstr(f, "file_type", m->file_type >= 0 ? llm_file_type_name(m->file_type) : NULL);
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
    json_int(f, "feed_forward_length", m->n_ff, true);
    json_int(f, "head_count", m->n_head, true);
    json_int(f, "head_count_kv", m->n_head_kv, true);
    json_int(f, "key_length", m->head_dim_k, true);
    json_int(f, "value_length", m->head_dim_v, true);
    fprintf(f, ", \"rms_norm_eps\": %.9g, \"rope_freq_base\": %.9g", m->rms_eps, m->rope_freq_base);
    json_int(f, "rope_dimension_count", m->rope_dim, true);
    json_cstr(f, "rope_type", m->rope_type);
    json_cstr(f, "rope_scaling_type", m->rope_scaling);
    fprintf(f, ", \"rope_scaling_factor\": %.9g", m->rope_scaling_factor);
    json_int(f, "vocab_size", m->n_vocab, true);
    json_cstr(f, "tokenizer_model", m->tokenizer);
    json_cstr(f, "tokenizer_pre", m->tokenizer_pre);
    json_int(f, "bos_token_id", m->bos_id, true);
    json_int(f, "eos_token_id", m->eos_id, true);
    json_int(f, "eot_token_id", m->eot_id, true);
    json_int(f, "unknown_token_id", m->unk_id, true);
    json_int(f, "padding_token_id", m->pad_id, true);
    fprintf(f, ", \"add_bos_token\": %s",
            m->add_bos < 0 ? "null" : m->add_bos ? "true" : "false");
    fprintf(f, ", \"chat_template\": %s", m->chat_template == LLM_TEMPLATE_NONE ? "false" : "true");
    json_cstr(f, "chat_template_family",
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

static int models_info(int argc, char **argv)
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
    char path[4096], err[512];
    mdl_resolve(arg, path, sizeof path);
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

/* ==== pull ==== */

struct pull_ui {
    bool tty;        /* stderr is a terminal: redraw one progress line */
    bool drawn;      /* a progress line is on screen */
    const char *name;
};

static void fmt_eta(char *buf, size_t n, double s)
{
    if (s < 0 || s > 99 * 3600)
        snprintf(buf, n, "--:--");
    else if (s >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else
        snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void pull_progress(void *ctx, const struct mdl_progress *p)
{
    struct pull_ui *ui = ctx;
    if (!ui->tty)
        return;
    char done[32], total[32], rate[32] = "", eta[32] = "--:--", line[512];
    /* the rate needs a moment of data before it means anything */
    double r = p->seconds >= 0.5 ? (double)(p->done - p->resumed) / p->seconds : 0;
    fmt_bytes(done, sizeof done, (double)p->done);
    if (r > 0) {
        fmt_bytes(rate, sizeof rate, r);
        strcat(rate, "/s");
    }
    int n;
    if (p->total > 0) {
        fmt_bytes(total, sizeof total, (double)p->total);
        if (r > 0)
            fmt_eta(eta, sizeof eta, (double)((uint64_t)p->total - p->done) / r);
        int pct = (int)(100.0 * (double)p->done / (double)p->total);
        int bar = pct / 5;
        n = snprintf(line, sizeof line, "%.24s [%.*s%*s] %3d%%  %s / %s  %s  ETA %s", ui->name, bar,
                     "####################", 20 - bar, "", pct, done, total, rate, eta);
    } else {
        n = snprintf(line, sizeof line, "%.24s %s  %s", ui->name, done, rate);
    }
    /* one line: never wider than the terminal, or \r cannot redraw it */
    struct winsize ws;
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && n >= ws.ws_col)
        line[ws.ws_col - 1] = 0;
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    ui->drawn = true;
}

static void pull_note(void *ctx, const char *msg)
{
    struct pull_ui *ui = ctx;
    if (ui->drawn) {
        fputc('\n', stderr);
        ui->drawn = false;
    }
    fprintf(stderr, "kvchat: %s\n", msg);
}

static int mdl_exit(int rc)
{
    switch (rc) {
    case MDL_ERR_USAGE: return CMD_EXIT_USAGE;
    case MDL_ERR_NETWORK:
    case MDL_ERR_VERIFY: return CMD_EXIT_NETWORK;
    case MDL_ERR_INTERRUPTED: return CMD_EXIT_INTERRUPTED;
    default: return CMD_EXIT_MODEL;
    }
}

/* the first model pulled or added becomes the default */
static void first_default(const char *name)
{
    char cur[4096], err[512];
    if (mdl_config_get("model", cur, sizeof cur) == 0 && !getenv("KVCHAT_MODEL")) {
        if (mdl_config_set("model", name, err, sizeof err) == 0)
            fprintf(stderr, "kvchat: '%s' is now the default model\n", name);
    }
}

int cmd_models_pull_ref(const char *ref, const struct mdl_pull_params *given, char *name_out,
                        size_t name_size)
{
    struct mdl_pull_params p = *given;
    const char *label = strrchr(ref, '/');
    struct pull_ui ui = {.tty = isatty(2), .name = label && label[1] ? label + 1 : ref};
    struct mdl_pull_result res;
    char err[1024];
    cmd_interrupts_catch();
    p.cancel = &cmd_interrupted;
    p.progress = pull_progress;
    p.note = pull_note;
    p.ctx = &ui;
    int rc = mdl_pull(ref, &p, &res, err, sizeof err);
    cmd_interrupts_restore();
    if (ui.drawn)
        fputc('\n', stderr);
    if (rc)
        return cmd_fail(mdl_exit(rc), "cannot pull '%s': %s", ref, err);
    if (name_out)
        snprintf(name_out, name_size, "%s", res.name);
    char size[32], rate[32];
    fmt_bytes(size, sizeof size, (double)res.size);
    if (res.already) {
        fprintf(stderr, "kvchat: '%s' is already in the store (%s, %s); --force downloads it again\n",
                res.name, size, res.path);
    } else {
        fmt_bytes(rate, sizeof rate, res.seconds > 0 ? (double)res.downloaded / res.seconds : 0);
        fprintf(stderr, "kvchat: pulled '%s': %s in %.1f s (%s/s), sha256 %s %s\n", res.name, size,
                res.seconds, rate, res.sha256,
                res.sha256_checked ? "verified" : "(no checksum was published to check against)");
    }
    first_default(res.name);
    return CMD_EXIT_OK;
}

static int models_pull(int argc, char **argv)
{
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'N'},
        {"sha256", required_argument, NULL, 'S'},
        {"ca-file", required_argument, NULL, 'C'},
        {"force", no_argument, NULL, 'f'},
        {"retries", required_argument, NULL, 'r'},
        {"timeout", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct mdl_pull_params p = mdl_pull_default_params();
    int c;
    char *end;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
        switch (c) {
        case 'N': p.name = optarg; break;
        case 'S': p.sha256 = optarg; break;
        case 'C': p.ca_file = optarg; break;
        case 'f': p.force = true; break;
        case 'r':
            p.retries = (int)strtol(optarg, &end, 10);
            if (*end || p.retries < 0 || p.retries > 100)
                return cmd_usage_error(&cmd_models_entry, "models pull: bad --retries '%s'", optarg);
            break;
        case 'T': {
            double t = strtod(optarg, &end);
            if (*end || !(t > 0) || t > 3600)
                return cmd_usage_error(&cmd_models_entry, "models pull: bad --timeout '%s'", optarg);
            p.read_timeout_ms = p.connect_timeout_ms = (int)(t * 1000);
            break;
        }
        case 'h': return cmd_help(&cmd_models_entry);
        default:
            return cmd_usage_error(&cmd_models_entry, "models pull: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cmd_usage_error(&cmd_models_entry, "models pull: expected one REF");
    const char *ref = argv[optind];
    struct stat st;
    if (!strncmp(ref, "file:", 5) || (stat(ref, &st) == 0 && !S_ISDIR(st.st_mode)))
        return cmd_usage_error(&cmd_models_entry,
                               "models pull: '%s' is a file on disk, not a download; "
                               "'kvchat models add %s' puts it into the store",
                               ref, !strncmp(ref, "file://", 7) ? ref + 7 : !strncmp(ref, "file:", 5) ? ref + 5 : ref);
    if (p.ca_file && access(p.ca_file, R_OK))
        return cmd_fail(CMD_EXIT_USAGE, "cannot read --ca-file '%s': %s", p.ca_file, strerror(errno));
    return cmd_models_pull_ref(argv[optind], &p, NULL, 0);
}

/* ==== add ==== */

static int models_add(int argc, char **argv)
{
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'N'},
        {"copy", no_argument, NULL, 'c'},
        {"symlink", no_argument, NULL, 's'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct mdl_add_params p = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
        switch (c) {
        case 'N': p.name = optarg; break;
        case 'c': p.copy = true; break;
        case 's': p.symlink = true; break;
        case 'f': p.force = true; break;
        case 'h': return cmd_help(&cmd_models_entry);
        default:
            return cmd_usage_error(&cmd_models_entry, "models add: %s '%s'",
                                   optopt ? "option needs a value:" : "unknown option", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cmd_usage_error(&cmd_models_entry, "models add: expected one FILE");
    if (p.copy && p.symlink)
        return cmd_usage_error(&cmd_models_entry, "models add: --copy or --symlink, not both");
    const char *file = argv[optind];
    struct mdl_add_result res;
    char err[5000];
    cmd_interrupts_catch();
    p.cancel = &cmd_interrupted;
    int rc = mdl_add(file, &p, &res, err, sizeof err);
    cmd_interrupts_restore();
    if (rc)
        return cmd_fail(mdl_exit(rc), "%s", err);
    char size[32];
    fmt_bytes(size, sizeof size, (double)res.size);
    if (res.already) {
        fprintf(stderr, "kvchat: '%s' is already in the store as '%s'\n", file, res.name);
    } else {
        fprintf(stderr, "kvchat: added '%s' (%s; a %s %s %s)\n", res.name, size, mdl_add_how_name(res.how),
                res.how == MDL_ADD_COPY ? "of" : "to", res.target);
        if (res.how == MDL_ADD_SYMLINK)
            fprintf(stderr, "kvchat: note: the store refers to the file where it is: moving or deleting it "
                            "breaks '%s' (--copy makes a copy instead)\n", res.name);
        if (res.warning[0])
            fprintf(stderr, "kvchat: %s\n", res.warning);
    }
    first_default(res.name);
    return CMD_EXIT_OK;
}

/* ==== list, rm, default, aliases ==== */

static void fmt_time(char *buf, size_t n, int64_t t)
{
    if (t < 0) {
        snprintf(buf, n, "-");
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M", &tm);
}

/* one entry of models list --json: the same keys for a file and a remote
 * model, null where one has no value */
static void list_json(const struct mdl_entry *e, bool is_def)
{
    fputs("{\"name\": ", stdout);
    cmd_json_str(stdout, e->name, strlen(e->name));
    printf(", \"remote\": %s", e->remote ? "true" : "false");
    if (e->remote)
        fputs(", \"size\": null", stdout);
    else
        printf(", \"size\": %" PRIu64, e->size);
    json_cstr(stdout, "quant", e->remote ? NULL : e->quant);
    json_cstr(stdout, "arch", e->remote ? NULL : e->arch);
    if (!e->remote && e->n_params >= 0)
        printf(", \"n_params\": %" PRId64, e->n_params);
    else
        fputs(", \"n_params\": null", stdout);
    json_cstr(stdout, "path", e->path);
    if (e->pulled >= 0)
        printf(", \"pulled\": %" PRId64, e->pulled);
    else
        fputs(", \"pulled\": null", stdout);
    json_cstr(stdout, "source", e->remote ? NULL : e->source);
    json_cstr(stdout, "sha256", e->remote ? NULL : e->sha256);
    json_cstr(stdout, "url", e->remote ? e->url : NULL);
    json_cstr(stdout, "remote_model", e->remote ? e->remote_model : NULL);
    json_cstr(stdout, "api_key_env", e->remote ? e->api_key_env : NULL);
    printf(", \"default\": %s", is_def ? "true" : "false");
    json_cstr(stdout, "error", e->error);
    fputs("}", stdout);
}

/* ==== tables: cells as a terminal shows them, columns that line up ==== */

struct cell_buf {
    char *p;
    size_t n, size;
};
static int cell_put(void *ud, const char *s, size_t n)
{
    struct cell_buf *b = ud;
    if (n > b->size - 1 - b->n)
        n = b->size - 1 - b->n;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* s as stdout shows it into buf (on a terminal what could drive it is
 * U+FFFD, as every text kvchat prints; names, GGUF metadata and .remote
 * fields are anyone's bytes); returns its width in columns (characters) */
static int cell(char *buf, size_t size, const char *s)
{
    struct cell_buf b = {buf, 0, size};
    if (cmd_term_is(stdout))
        cmd_term_clean(s, strlen(s), cell_put, &b);
    else
        cell_put(&b, s, strlen(s));
    buf[b.n] = 0;
    int w = 0;
    for (size_t i = 0; i < b.n; i++)
        w += ((unsigned char)buf[i] & 0xC0) != 0x80;
    return w;
}

/* s in a column of width w, padded on the right (or, right, on the left) */
static void put_cell(const char *s, int w, bool right)
{
    char buf[1024];
    int pad = w - cell(buf, sizeof buf, s);
    if (right)
        printf("%*s", pad > 0 ? pad : 0, "");
    fputs(buf, stdout);
    if (!right)
        printf("%*s", pad > 0 ? pad : 0, "");
}

/* the widest of the column's cells so far and s */
static int widest(int w, const char *s)
{
    char buf[1024];
    int k = cell(buf, sizeof buf, s);
    return k > w ? k : w;
}

static int models_list(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_models_entry);
        else
            return cmd_usage_error(&cmd_models_entry, "models list: unexpected '%s'", argv[i]);
    }
    struct mdl_entry *es;
    size_t n;
    char err[512], def[4096] = "", defpath[4096] = "";
    const char *what;
    if (mdl_list(&es, &n, err, sizeof err))
        return cmd_fail(CMD_EXIT_MODEL, "cannot list models: %s", err);
    if (mdl_default_model(def, sizeof def, &what))
        mdl_resolve(def, defpath, sizeof defpath);
    if (!json && n == 0) {
        char home[4096] = "?";
        mdl_home(home, sizeof home);
        fprintf(stderr, "kvchat: no models in %s/models; try 'kvchat models pull %s'\n", home,
                MDL_DEFAULT_ALIAS);
    }
    /* every column as wide as its widest cell: nothing shifts */
    enum { COL_NAME, COL_SIZE, COL_QUANT, COL_ARCH, COL_PARAMS, COL_PULLED, COL_COUNT };
    static const char *const head[COL_COUNT] = {"NAME", "SIZE", "QUANT", "ARCH", "PARAMS", "PULLED (UTC)"};
    char (*cells)[COL_COUNT][160] = n ? calloc(n, sizeof *cells) : NULL;
    if (n && !cells) {
        free(es);
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    }
    int w[COL_COUNT];
    for (int k = 0; k < COL_COUNT; k++)
        w[k] = widest(0, head[k]);
    for (size_t i = 0; i < n; i++) {
        const struct mdl_entry *e = &es[i];
        char *c[COL_COUNT];
        for (int k = 0; k < COL_COUNT; k++)
            c[k] = cells[i][k];
        snprintf(c[COL_NAME], 160, "%s", e->name);
        if (e->remote)
            snprintf(c[COL_SIZE], 160, "remote");
        else
            fmt_bytes(c[COL_SIZE], 160, (double)e->size);
        snprintf(c[COL_QUANT], 160, "%s", !e->remote && e->quant[0] ? e->quant : "-");
        snprintf(c[COL_ARCH], 160, "%s", !e->remote && e->arch[0] ? e->arch : "-");
        if (!e->remote && e->n_params >= 0)
            fmt_count(c[COL_PARAMS], 160, (double)e->n_params);
        else
            snprintf(c[COL_PARAMS], 160, "-");
        fmt_time(c[COL_PULLED], 160, e->pulled);
        for (int k = 0; k < COL_COUNT; k++)
            w[k] = widest(w[k], c[k]);
    }
    for (size_t i = 0; !json && i <= n && n; i++) { /* the heading, then the rows */
        const struct mdl_entry *e = i ? &es[i - 1] : NULL;
        bool is_def = e && defpath[0] && !strcmp(defpath, e->path);
        fputs(is_def ? "* " : "  ", stdout);
        for (int k = 0; k < COL_COUNT; k++) {
            put_cell(e ? cells[i - 1][k] : head[k], w[k], k == COL_SIZE || k == COL_PARAMS);
            fputs("  ", stdout);
        }
        if (!e) {
            puts("PATH");
            continue;
        }
        if (e->remote)
            cmd_term_printf(stdout, "%s (model %s%s%s)", e->url, e->remote_model, e->api_key_env[0] ? ", key $" : "",
                            e->api_key_env);
        else
            cmd_term_printf(stdout, "%s", e->path);
        if (e->error[0])
            cmd_term_printf(stdout, "  (unreadable: %s)", e->error);
        putchar('\n');
    }
    for (size_t i = 0; json && i < n; i++) {
        cmd_json_list_item(stdout, (int64_t)i);
        list_json(&es[i], defpath[0] && !strcmp(defpath, es[i].path));
    }
    free(cells);
    if (json)
        cmd_json_list_end(stdout, (int64_t)n);
    free(es);
    return CMD_EXIT_OK;
}

/*
 * Does a named session use the model? The store knows which model each
 * session was last used with. With no store yet there is nothing to ask
 * (and none is created).
 */
static int model_in_use(void *ctx, const char *name, const char *path, char *who, size_t who_size)
{
    (void)ctx, (void)name;
    struct sess_store *store;
    char err[256];
    int has = cmd_store_open_existing(&store, err, sizeof err);
    if (has < 0)
        snprintf(who, who_size, "the session store cannot be read: %s", err);
    if (has <= 0)
        return has;
    struct sess_info *list;
    int64_t n;
    if (sess_model_users(store, path, &list, &n)) {
        snprintf(who, who_size, "%s", sess_errmsg(store));
        sess_store_close(store);
        return -1;
    }
    if (n == 1)
        snprintf(who, who_size, "session '%s'", list[0].name);
    else if (n > 1)
        snprintf(who, who_size, "%lld sessions ('%s', ...)", (long long)n, list[0].name);
    sess_list_free(list, n);
    sess_store_close(store);
    return n > 0;
}

static int models_rm(int argc, char **argv)
{
    bool force = false;
    int first = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
            force = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_models_entry);
        else if (argv[i][0] == '-')
            return cmd_usage_error(&cmd_models_entry, "models rm: unknown option '%s'", argv[i]);
        else if (!first)
            first = i;
    }
    if (!first)
        return cmd_usage_error(&cmd_models_entry, "models rm: expected a NAME");
    int rc = CMD_EXIT_OK;
    for (int i = first; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        char err[512], path[4096], pack_dir[4096], packed[4096 + 64];
        /* its packed-weight cache file goes with it (named by its real path) */
        bool has_packed = mdl_resolve(argv[i], path, sizeof path) == 0 &&
                          cmd_model_params(pack_dir, sizeof pack_dir).pack_dir &&
                          llm_pack_cache_file(pack_dir, path, packed, sizeof packed) == 0;
        int r = mdl_rm(argv[i], force, model_in_use, NULL, err, sizeof err);
        if (!r && has_packed)
            unlink(packed);
        if (r) {
            rc = cmd_fail(r == MDL_ERR_USAGE ? CMD_EXIT_USAGE : CMD_EXIT_MODEL, "cannot remove '%s': %s",
                          argv[i], err);
            continue;
        }
        fprintf(stderr, "kvchat: removed '%s'\n", argv[i]);
        char def[4096];
        if (mdl_config_get("model", def, sizeof def) > 0 && !strcmp(def, argv[i])) {
            if (mdl_config_set("model", NULL, err, sizeof err) == 0)
                fprintf(stderr, "kvchat: '%s' was the default model; there is none now\n", argv[i]);
        }
    }
    return rc;
}

static int models_default(int argc, char **argv)
{
    char err[512], buf[4096], path[4096];
    const char *what;
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return cmd_help(&cmd_models_entry);
    if (argc == 1) {
        if (!mdl_default_model(buf, sizeof buf, &what))
            return cmd_fail(CMD_EXIT_MODEL, "no default model (set one with 'kvchat models default NAME')");
        printf("%s\n", buf);
        return CMD_EXIT_OK;
    }
    if (argc != 2)
        return cmd_usage_error(&cmd_models_entry, "models default: expected one NAME");
    if (!strcmp(argv[1], "--unset")) {
        if (mdl_config_set("model", NULL, err, sizeof err))
            return cmd_fail(CMD_EXIT_MODEL, "cannot write the config file: %s", err);
        return CMD_EXIT_OK;
    }
    const char *name = argv[1];
    if (name[0] == '-')
        return cmd_usage_error(&cmd_models_entry, "models default: unknown option '%s'", name);
    if (mdl_resolve(name, path, sizeof path)) {
        if (mdl_alias_find(name))
            return cmd_fail(CMD_EXIT_MODEL, "no model '%s' in the store; pull it first: kvchat models pull %s",
                            name, name);
        return cmd_fail(CMD_EXIT_MODEL, "no model '%s' in the store (see 'kvchat models list')", name);
    }
    /* a file given by path is remembered by its absolute path */
    char abs[4096];
    const char *value = name;
    if (strchr(name, '/')) {
        if (!realpath(name, abs))
            return cmd_fail(CMD_EXIT_MODEL, "cannot resolve '%s': %s", name, strerror(errno));
        value = abs;
    }
    if (mdl_config_set("model", value, err, sizeof err))
        return cmd_fail(CMD_EXIT_MODEL, "cannot write the config file: %s", err);
    mdl_config_path(buf, sizeof buf);
    fprintf(stderr, "kvchat: default model is now '%s' (in %s)\n", value, buf);
    if (getenv("KVCHAT_MODEL") && *getenv("KVCHAT_MODEL"))
        fprintf(stderr, "kvchat: note: KVCHAT_MODEL=%s overrides it in this environment\n",
                getenv("KVCHAT_MODEL"));
    return CMD_EXIT_OK;
}

static int models_path(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return cmd_help(&cmd_models_entry);
    if (argc > 2)
        return cmd_usage_error(&cmd_models_entry, "models path: expected at most one MODEL");
    if (argc == 2 && argv[1][0] == '-')
        return cmd_usage_error(&cmd_models_entry, "models path: unknown option '%s'", argv[1]);
    char path[4096];
    int rc = cmd_model_resolve(argc == 2 ? argv[1] : NULL, false, path, sizeof path);
    if (rc)
        return rc;
    printf("%s\n", path);
    return CMD_EXIT_OK;
}

static int models_aliases(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_models_entry);
        if (strcmp(argv[i], "--json"))
            return cmd_usage_error(&cmd_models_entry, "models aliases: unexpected '%s'", argv[i]);
        json = true;
    }
    int64_t n = 0;
    int w_name = 1, w_about = 1, w_size = 1; /* the columns as wide as their widest entry: nothing shifts */
    for (const struct mdl_alias *a = mdl_aliases; a->name; a++)
        if (mdl_alias_runs(a)) {
            char size[32], approx[40];
            fmt_bytes(size, sizeof size, (double)a->size);
            snprintf(approx, sizeof approx, "~%s", size);
            w_name = widest(w_name, a->name);
            w_about = widest(w_about, a->about);
            w_size = widest(w_size, approx);
        }
    for (const struct mdl_alias *a = mdl_aliases; a->name; a++) {
        if (!mdl_alias_runs(a))
            continue; /* prepared for an architecture kvchat does not run yet */
        char size[32], ref[1024];
        snprintf(ref, sizeof ref, "hf:%s/%s", a->repo, a->file);
        if (json) {
            cmd_json_list_item(stdout, n++);
            fputs("{\"name\": ", stdout);
            cmd_json_str(stdout, a->name, strlen(a->name));
            fputs(", \"about\": ", stdout);
            cmd_json_str(stdout, a->about, strlen(a->about));
            printf(", \"size\": %" PRIu64 ", \"ref\": ", a->size);
            cmd_json_str(stdout, ref, strlen(ref));
            fputs("}", stdout);
            continue;
        }
        fmt_bytes(size, sizeof size, (double)a->size);
        char approx[40];
        snprintf(approx, sizeof approx, "~%s", size);
        put_cell(a->name, w_name, false);
        fputs("  ", stdout);
        put_cell(a->about, w_about, false);
        fputs("  ", stdout);
        put_cell(approx, w_size, true);
        cmd_term_printf(stdout, "  %s\n", ref);
        n++;
    }
    if (json)
        cmd_json_list_end(stdout, n);
    return CMD_EXIT_OK;
}

/* ==== the model for chat/run, and the first run ==== */

const char *cmd_model_shown(const char *path, char *buf, size_t size)
{
    char home[4096];
    if (!path || mdl_home(home, sizeof home))
        return path ? path : "";
    size_t hl = strlen(home), pl = strlen(path);
    static const char *const suffixes[] = {".gguf", ".remote"};
    if (pl > hl + 8 && !strncmp(path, home, hl) && !strncmp(path + hl, "/models/", 8))
        for (size_t i = 0; i < 2; i++) {
            size_t sl = strlen(suffixes[i]);
            const char *name = path + hl + 8;
            size_t nl = pl - hl - 8;
            if (nl > sl && !strcmp(name + nl - sl, suffixes[i]) && !memchr(name, '/', nl) && nl - sl < size) {
                snprintf(buf, size, "%.*s", (int)(nl - sl), name);
                return buf;
            }
        }
    return path;
}

bool cmd_is_store_model(const char *word)
{
    struct stat st;
    char path[4096];
    /* a name (not a path, not a file here) that names an entry of the store */
    return word && mdl_name_valid(word) && !strchr(word, '/') && stat(word, &st) != 0 &&
           mdl_resolve(word, path, sizeof path) == 0;
}

int cmd_model_resolve(const char *m_arg, bool offer_pull, char *path, size_t size)
{
    char buf[4096];
    const char *what = "-m";
    if (m_arg) {
        snprintf(buf, sizeof buf, "%s", m_arg);
    } else if (!mdl_default_model(buf, sizeof buf, &what)) {
        struct mdl_entry *es;
        size_t n = 0;
        char err[256];
        if (mdl_list(&es, &n, err, sizeof err) == 0)
            free(es);
        else /* an unreadable store is not "no model" */
            return cmd_fail(CMD_EXIT_MODEL, "no default model, and the model store cannot be read: %s", err);
        if (n > 0)
            return cmd_fail(CMD_EXIT_MODEL,
                            "no default model: choose one with 'kvchat models default NAME' or -m NAME "
                            "(see 'kvchat models list')");
        const struct mdl_alias *a = mdl_alias_find(MDL_DEFAULT_ALIAS);
        char sz[32];
        fmt_bytes(sz, sizeof sz, (double)a->size);
        if (offer_pull && isatty(0) && isatty(2)) {
            fprintf(stderr, "kvchat has no model yet. Download %s (%s, about %s) now? [Y/n] ",
                    a->name, a->about, sz);
            char line[64];
            if (!fgets(line, sizeof line, stdin))
                line[0] = 'n';
            if (line[0] == '\n' || line[0] == 'y' || line[0] == 'Y') {
                struct mdl_pull_params p = mdl_pull_default_params();
                char name[160];
                int rc = cmd_models_pull_ref(a->name, &p, name, sizeof name);
                if (rc)
                    return rc;
                if (mdl_resolve(name, path, size))
                    return cmd_fail(CMD_EXIT_MODEL, "cannot find the model just pulled");
                return CMD_EXIT_OK;
            }
        }
        fprintf(stderr,
                "kvchat: no model configured\n"
                "To get started, download a small model (%s, about %s):\n"
                "\n"
                "    kvchat models pull %s\n"
                "\n"
                "then run 'kvchat' again. 'kvchat models aliases' lists other models;\n"
                "a GGUF file you already have: 'kvchat models add FILE' puts it in the\n"
                "store (the first one added is the default), or -m FILE.gguf uses it once.\n",
                a->about, sz, a->name);
        return CMD_EXIT_MODEL;
    }
    if (mdl_resolve(buf, path, size)) {
        if (strcmp(what, "-m"))
            return cmd_fail(CMD_EXIT_MODEL, "cannot find the default model '%s' (from %s); see 'kvchat models list'",
                            buf, what);
        return cmd_fail(CMD_EXIT_MODEL, "cannot find model '%s': no such file or store name", buf);
    }
    return CMD_EXIT_OK;
}

static int models_exec(int argc, char **argv)
{
    /* `kvchat models` and `kvchat models --json` list */
    if (argc < 2 || (argv[1][0] == '-' && strcmp(argv[1], "-h") && strcmp(argv[1], "--help")))
        return models_list(argc, argv);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
        return cmd_help(&cmd_models_entry);
    if (!strcmp(argv[1], "add"))
        return models_add(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info"))
        return models_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "pull"))
        return models_pull(argc - 1, argv + 1);
    if (!strcmp(argv[1], "list") || !strcmp(argv[1], "ls"))
        return models_list(argc - 1, argv + 1);
    if (!strcmp(argv[1], "rm"))
        return models_rm(argc - 1, argv + 1);
    if (!strcmp(argv[1], "add-remote"))
        return cmd_models_add_remote(argc - 1, argv + 1);
    if (!strcmp(argv[1], "default"))
        return models_default(argc - 1, argv + 1);
    if (!strcmp(argv[1], "aliases"))
        return models_aliases(argc - 1, argv + 1);
    if (!strcmp(argv[1], "path"))
        return models_path(argc - 1, argv + 1);
    return cmd_usage_error(&cmd_models_entry, "models: unknown subcommand '%s'", argv[1]);
}

const struct cmd_entry cmd_models_entry = {
    .name = "models",
    .summary = "the model store: list, add, pull, add-remote, rm, default, info, aliases, path",
    .usage = models_usage,
    .exec = models_exec,
};
