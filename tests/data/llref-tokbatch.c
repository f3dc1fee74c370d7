/*
 * llref-tokbatch.c - the oracle side of the tokenizer differential test:
 * the same llama_tokenize call as `llref tokenize`, run over many strings
 * with one vocabulary load (llref reloads the vocabulary per string, which
 * takes minutes for thousands of strings). Built and run only by
 * tests/data/regen-tokenizer.sh, against llama.cpp's library from llref.
 *
 *   llref-tokbatch VOCAB.gguf < strings.hex > ids.txt
 *   llref-tokbatch VOCAB.gguf --info > info.txt
 *
 * Each input line is a hex-encoded string; each output line is
 * "IDS | IDS | HEX | HEX": the ids with add_special=true,
 * parse_special=false (what `llref tokenize` prints), then with
 * add_special=false, parse_special=true; then llama_detokenize of the first
 * (remove_special=true, unparse_special=false) and of the second
 * (remove_special=false, unparse_special=true), hex-encoded.
 * --info prints the vocabulary's special ids, its end-of-generation set,
 * and FNV-1a hashes of every token's attributes and pieces.
 */
#include "llama.h"
#include "ggml-backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level l, const char *t, void *u) { (void)l; (void)t; (void)u; }

static llama_token toks[2][1 << 19];
static int ntoks[2];

static void run(const struct llama_vocab *v, const char *s, int n, bool add, bool special, int slot)
{
    int k = llama_tokenize(v, s, n, toks[slot], 1 << 19, add, special);
    ntoks[slot] = k;
    if (k < 0) {
        printf("ERROR");
        return;
    }
    for (int i = 0; i < k; i++)
        printf(i ? " %d" : "%d", toks[slot][i]);
}

static void detok(const struct llama_vocab *v, int slot, bool remove, bool unparse)
{
    static char text[1 << 22];
    int k = llama_detokenize(v, toks[slot], ntoks[slot], text, sizeof text, remove, unparse);
    for (int i = 0; i < k; i++)
        printf("%02x", (unsigned char)text[i]);
}

static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 16777619u;
    return h;
}

static void info(const struct llama_vocab *v)
{
    int n = llama_vocab_n_tokens(v);
    printf("n_vocab %d bos %d eos %d eot %d nl %d add_bos %d add_eos %d eog", n,
           llama_vocab_bos(v), llama_vocab_eos(v), llama_vocab_eot(v), llama_vocab_nl(v),
           llama_vocab_get_add_bos(v), llama_vocab_get_add_eos(v));
    for (int i = 0; i < n; i++)
        if (llama_vocab_is_eog(v, i))
            printf(" %d", i);
    uint32_t ha = 2166136261u, hp = 2166136261u, hq = 2166136261u;
    for (int i = 0; i < n; i++) {
        uint32_t a = (uint32_t)llama_vocab_get_attr(v, i);
        ha = fnv(ha, &a, 4);
        char buf[1024];
        int k = llama_token_to_piece(v, i, buf, sizeof buf, 0, true);
        hp = fnv(hp, buf, k > 0 ? (size_t)k : 0);
        hp = fnv(hp, "", 1);
        k = llama_token_to_piece(v, i, buf, sizeof buf, 1, false);
        hq = fnv(hq, buf, k > 0 ? (size_t)k : 0);
        hq = fnv(hq, "", 1);
    }
    printf(" attr %08x pieces %08x %08x\n", ha, hp, hq);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    llama_log_set(quiet, NULL);
    const char *libdir = getenv("LLREF_LIBDIR");
    if (libdir)
        ggml_backend_load_all_from_path(libdir);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m)
        return 2;
    const struct llama_vocab *v = llama_model_get_vocab(m);
    if (argc > 2 && !strcmp(argv[2], "--info")) {
        info(v);
        return 0;
    }
    static char line[1 << 20], buf[1 << 19];
    while (fgets(line, sizeof line, stdin)) {
        int n = 0;
        for (char *p = line; p[0] && p[0] != '\n' && p[1]; p += 2) {
            unsigned x;
            sscanf(p, "%2x", &x);
            buf[n++] = (char)x;
        }
        run(v, buf, n, true, false, 0);
        printf(" | ");
        run(v, buf, n, false, true, 1);
        printf(" | ");
        detok(v, 0, true, false);
        printf(" | ");
        detok(v, 1, false, true);
        printf("\n");
    }
    return 0;
}
