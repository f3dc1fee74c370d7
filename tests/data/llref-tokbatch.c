/*
 * llref-tokbatch.c - the oracle side of the tokenizer differential test:
 * the same llama_tokenize call as `llref tokenize`, run over many strings
 * with one vocabulary load (llref reloads the vocabulary per string, which
 * takes minutes for thousands of strings). Built and run only by
 * tests/data/regen-tokenizer.sh, against llama.cpp's library from llref.
 *
 *   llref-tokbatch VOCAB.gguf < strings.hex > ids.txt
 *
 * Each input line is a hex-encoded string; each output line is
 * "IDS | IDS": the ids with add_special=true, parse_special=false (what
 * `llref tokenize` prints), then with add_special=false, parse_special=true.
 */
#include "llama.h"
#include "ggml-backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level l, const char *t, void *u) { (void)l; (void)t; (void)u; }

static void run(const struct llama_vocab *v, const char *s, int n, bool add, bool special)
{
    int cap = n + 16;
    llama_token *t = malloc(sizeof *t * (size_t)cap);
    int k = llama_tokenize(v, s, n, t, cap, add, special);
    if (k < 0) {
        printf("ERROR");
        free(t);
        return;
    }
    for (int i = 0; i < k; i++)
        printf(i ? " %d" : "%d", t[i]);
    free(t);
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
    static char line[1 << 20], buf[1 << 19];
    while (fgets(line, sizeof line, stdin)) {
        int n = 0;
        for (char *p = line; p[0] && p[0] != '\n' && p[1]; p += 2) {
            unsigned x;
            sscanf(p, "%2x", &x);
            buf[n++] = (char)x;
        }
        run(v, buf, n, true, false);
        printf(" | ");
        run(v, buf, n, false, true);
        printf("\n");
    }
    return 0;
}
