/*
 * tok-util.h - helpers shared by the tokenizer tests: load a vocabulary
 * from tests/data/tokenizer/ggml-vocab-NAME.gguf.xz (decompressed with xz
 * into memory) and read whole files.
 */
#ifndef KVCHAT_TESTS_TOK_UTIL_H
#define KVCHAT_TESTS_TOK_UTIL_H

#include "core/llm.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* whole file (or command output with popen) into a malloc'd buffer */
static inline char *tu_read_stream(FILE *f, size_t *n)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    *n = 0;
    size_t k;
    while (b && (k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            cap *= 2;
            char *p = realloc(b, cap + 1);
            if (!p) {
                free(b);
                return NULL;
            }
            b = p;
        }
    }
    if (b)
        b[len] = 0;
    *n = len;
    return b;
}

static inline char *tu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f)
        return NULL;
    char *b = tu_read_stream(f, n);
    fclose(f);
    return b;
}

/* The qwen35 vocabulary is the qwen2 one with tokenizer.ggml.pre "qwen35"
 * instead of "qwen2", byte for byte (checked against llama.cpp's file when
 * this was written), so it is made here rather than committed twice. The
 * "gpt-4o" one is synthetic: llama.cpp's llama-bpe vocabulary (Llama 3's
 * tokens and merges) with the o200k pre-tokenizer's name "gpt-4o"
 * (gpt-oss's vocabulary is in its GGUF only, and llama.cpp's source has no
 * vocabulary file of it), to test that splitter against llama.cpp's on a
 * real BPE vocabulary whose merges see its pieces (265 of the 3,000 test
 * strings tokenize otherwise than with llama-bpe's own splitter). g: the
 * GGUF bytes of the source (freed), its pre `from` replaced by `to`. */
static inline char *tu_vocab_repre(char *g, size_t *n, const char *from, const char *to)
{
    char key[64];
    size_t lf = strlen(from), lt = strlen(to);
    memcpy(key, "\x12\0\0\0\0\0\0\0tokenizer.ggml.pre\x08\0\0\0", 30);
    for (int i = 0; i < 8; i++)
        key[30 + i] = (char)(lf >> (8 * i));
    memcpy(key + 38, from, lf);
    char *at = memmem(g, *n, key, 38 + lf);
    char *p = at ? malloc(*n + lt) : NULL;
    if (!p) {
        free(g);
        return NULL;
    }
    size_t head = (size_t)(at - g) + 30; /* up to the value's length */
    memcpy(p, g, head);
    for (int i = 0; i < 8; i++)
        p[head + i] = (char)(lt >> (8 * i));
    memcpy(p + head + 8, to, lt);
    memcpy(p + head + 8 + lt, g + head + 8 + lf, *n - head - 8 - lf);
    *n = *n - lf + lt;
    free(g);
    return p;
}

/* The vocabulary NAME; *mem holds the GGUF bytes (free after closing). */
static inline struct llm_vocab *tu_load_vocab(const char *name, char **mem)
{
    char cmd[512], err[256];
    /* the derived vocabularies (above): their source's file */
    const char *from = !strcmp(name, "qwen35") ? "qwen2" : !strcmp(name, "gpt-4o") ? "llama-bpe" : NULL;
    snprintf(cmd, sizeof cmd, "xz -dc tests/data/tokenizer/ggml-vocab-%s.gguf.xz", from ? from : name);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t n;
    *mem = tu_read_stream(p, &n);
    if (pclose(p) != 0 || !*mem) {
        fprintf(stderr, "cannot decompress vocabulary %s\n", name);
        return NULL;
    }
    if (from && !(*mem = tu_vocab_repre(*mem, &n, from, name)))
        return NULL;
    struct llm_gguf *g;
    if (llm_gguf_open_memory(*mem, n, &g, err, sizeof err) < 0) {
        fprintf(stderr, "vocabulary %s: %s\n", name, err);
        return NULL;
    }
    struct llm_vocab *v;
    if (llm_vocab_load(g, &v, err, sizeof err) < 0) {
        fprintf(stderr, "vocabulary %s: %s\n", name, err);
        v = NULL;
    }
    llm_gguf_close(g);
    return v;
}

#endif
