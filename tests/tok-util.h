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
 * this was written), so it is made here rather than committed twice. */
static inline char *tu_qwen35_from_qwen2(char *g, size_t *n)
{
    static const char key[] = "\x12\0\0\0\0\0\0\0tokenizer.ggml.pre\x08\0\0\0"
                              "\x05\0\0\0\0\0\0\0qwen2";
    char *at = memmem(g, *n, key, sizeof key - 1);
    char *p = at ? malloc(*n + 2) : NULL;
    if (!p) {
        free(g);
        return NULL;
    }
    size_t head = (size_t)(at - g) + 30; /* up to the value's length */
    memcpy(p, g, head);
    memcpy(p + head, "\x06\0\0\0\0\0\0\0qwen35", 14);
    memcpy(p + head + 14, g + head + 13, *n - head - 13);
    *n += 1;
    free(g);
    return p;
}

/* The vocabulary NAME; *mem holds the GGUF bytes (free after closing). */
static inline struct llm_vocab *tu_load_vocab(const char *name, char **mem)
{
    char cmd[512], err[256];
    bool q35 = !strcmp(name, "qwen35");
    snprintf(cmd, sizeof cmd, "xz -dc tests/data/tokenizer/ggml-vocab-%s.gguf.xz",
             q35 ? "qwen2" : name);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t n;
    *mem = tu_read_stream(p, &n);
    if (pclose(p) != 0 || !*mem) {
        fprintf(stderr, "cannot decompress vocabulary %s\n", name);
        return NULL;
    }
    if (q35 && !(*mem = tu_qwen35_from_qwen2(*mem, &n)))
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
