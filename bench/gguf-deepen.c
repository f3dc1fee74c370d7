/*
 * gguf-deepen.c - a deeper model from a shallow one, for bench-bigmoe.sh:
 * writes OUT.gguf with LAYERS layers whose tensors are copies of IN.gguf's
 * (a few layers, already quantized by llama.cpp), so that a full-size
 * Qwen3-30B-A3B-shaped Q4_K_M file of 48 layers (18.6 GB) takes minutes of
 * copying instead of making and quantizing 30 billion weights (an hour and
 * more on a loaded 2-core machine). Speed, memory and load time do not
 * depend on the weights' values; the layers repeat, which only a
 * deduplicating store would notice (neither the page cache nor kvchat's
 * packed cache does).
 * Layer i copies a source layer of the same Q4_K_M type mix: llama.cpp's
 * quantizer gives Q6_K to attn_v and ffn_down(_exps) on the layers where
 * i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 (use_more_bits in
 * src/llama-quant.cpp), so layer i takes the next source layer of its
 * class under that rule for the source's and the output's layer counts.
 * Every key is copied but block_count; tensors are streamed to the file.
 * Not part of `make`'s default targets; not a test.
 *   usage: gguf-deepen IN.gguf OUT.gguf LAYERS
 */
#include "core/llm.h"
#include "tests/gguf-writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *msg)
{
    fprintf(stderr, "gguf-deepen: %s\n", msg);
    exit(1);
}

static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: gguf-deepen IN.gguf OUT.gguf LAYERS\n");
        return 2;
    }
    struct llm_gguf *g;
    char err[256];
    if (llm_gguf_open(argv[1], &g, err, sizeof err))
        die(err);
    int layers = atoi(argv[3]);
    struct llm_str arch;
    char key[128];
    int64_t src_layers;
    if (llm_gguf_find_str(g, "general.architecture", &arch))
        die("no general.architecture");
    snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
    if (llm_gguf_find_int(g, key, &src_layers) || src_layers < 1 || layers < 1)
        die("no block_count, or LAYERS < 1");
    int n_src = (int)src_layers, *cls[2], n_cls[2] = {0, 0}, next[2] = {0, 0};
    cls[0] = malloc(sizeof(int) * (size_t)n_src);
    cls[1] = malloc(sizeof(int) * (size_t)n_src);
    for (int j = 0; j < n_src; j++)
        cls[more_bits(j, n_src)][n_cls[more_bits(j, n_src)]++] = j;

    struct gw *w = gw_init();
    for (int64_t i = 0; i < llm_gguf_n_kv(g); i++) {
        const char *k = llm_gguf_key(g, i);
        if (!strcmp(k, key))
            gw_kv_u32(w, key, (uint32_t)layers);
        else if (strcmp(k, "general.alignment") && strcmp(k, "mkmodel.padding"))
            gw_kv_copy(w, g, i);
    }
    int64_t n_t = llm_gguf_n_tensors(g), per_layer = 0;
    for (int64_t t = 0; t < n_t; t++)
        per_layer += !strncmp(llm_gguf_tensor(g, t)->name, "blk.0.", 6);
    if (gw_stream(w, argv[2], (uint64_t)(n_t + per_layer * layers)))
        die("cannot write the output file");
    /* the tensors outside the layers, then each layer's */
    for (int64_t t = 0; t < n_t; t++) {
        const struct llm_tensor_info *ti = llm_gguf_tensor(g, t);
        if (strncmp(ti->name, "blk.", 4))
            gw_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, ti->data, ti->n_bytes);
    }
    for (int l = 0; l < layers; l++) {
        int c = more_bits(l, layers);
        if (!n_cls[c])
            c = !c;
        int src = cls[c][next[c]++ % n_cls[c]];
        char pre[32];
        int np = snprintf(pre, sizeof pre, "blk.%d.", src);
        for (int64_t t = 0; t < n_t; t++) {
            const struct llm_tensor_info *ti = llm_gguf_tensor(g, t);
            if (strncmp(ti->name, pre, (size_t)np))
                continue;
            char name[LLM_GGUF_MAX_NAME];
            snprintf(name, sizeof name, "blk.%d.%s", l, ti->name + np);
            gw_tensor(w, name, ti->type, ti->n_dims, ti->ne, ti->data, ti->n_bytes);
        }
        fprintf(stderr, "\rgguf-deepen: layer %d of %d (from %d)", l + 1, layers, src);
    }
    fprintf(stderr, "\n");
    if (gw_write_file(w, argv[2]))
        die("cannot write the output file");
    gw_free(w);
    llm_gguf_close(g);
    free(cls[0]);
    free(cls[1]);
    return 0;
}
