/*
 * llinfo.c - what llama.cpp itself reports about a model file, as
 * key=value lines: the reference for `kvchat models info`. Built and run
 * only by regen-models-info.sh against llref's llama.cpp library; never by
 * `make check`.
 */
#include "ggml-backend.h"
#include "llama.h"

#include <stdlib.h>

#include <stdio.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *ud)
{
    (void)ud;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: llinfo MODEL.gguf\n");
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    const char *libdir = getenv("LLREF_LIBDIR");
    if (libdir)
        ggml_backend_load_all_from_path(libdir);
    else
        ggml_backend_load_all();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) {
        fprintf(stderr, "llinfo: llama.cpp cannot load %s\n", argv[1]);
        return 2;
    }
    const struct llama_vocab *v = llama_model_get_vocab(m);
    char desc[256], buf[256];
    llama_model_desc(m, desc, sizeof desc);
    printf("desc=%s\n", desc);
    printf("n_params=%llu\n", (unsigned long long)llama_model_n_params(m));
    printf("weight_bytes=%llu\n", (unsigned long long)llama_model_size(m));
    printf("context_length=%d\n", llama_model_n_ctx_train(m));
    printf("embedding_length=%d\n", llama_model_n_embd(m));
    printf("block_count=%d\n", llama_model_n_layer(m));
    printf("head_count=%d\n", llama_model_n_head(m));
    printf("head_count_kv=%d\n", llama_model_n_head_kv(m));
    printf("vocab_size=%d\n", llama_vocab_n_tokens(v));
    printf("bos_token_id=%d\n", llama_vocab_bos(v));
    printf("eos_token_id=%d\n", llama_vocab_eos(v));
    printf("rope_type=%s\n", llama_model_rope_type(m) == LLAMA_ROPE_TYPE_NEOX ? "neox" : "norm");
    printf("sliding_window=%d\n", llama_model_n_swa(m));
    const char *tmpl = llama_model_chat_template(m, NULL);
    printf("chat_template=%s\n", tmpl ? "true" : "false");
    if (llama_model_meta_val_str(m, "general.architecture", buf, sizeof buf) > 0)
        printf("architecture=%s\n", buf);
    llama_model_free(m);
    llama_backend_free();
    return 0;
}
