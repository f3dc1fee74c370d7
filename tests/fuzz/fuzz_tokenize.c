/*
 * fuzz_tokenize.c - libFuzzer target for the tokenizers over untrusted
 * text: any bytes, tokenized with and without special tokens by a
 * SentencePiece vocabulary (llama-spm) and byte-level BPE ones with the
 * hand-written scanners (qwen2) and the regex-emulating pre-tokenizers
 * (deepseek-llm, falcon), must give ids inside the vocabulary, the same
 * count when asked for the size, and detokenize (whole and streamed)
 * without reading or writing out of bounds. ASan/UBSan catch the rest.
 * The vocabularies are read once from tests/data/tokenizer (run from the
 * top directory):
 *   make tests/fuzz/fuzz_tokenize && ./tests/fuzz/fuzz_tokenize \
 *        -max_total_time=600 /tmp/tok-work tests/fuzz/corpus/tokenize
 */
#include "core/llm.h"

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"llama-spm", "qwen2", "deepseek-llm", "falcon"};
static struct llm_vocab *vocabs[4];

static struct llm_vocab *load(const char *name)
{
    char cmd[256], err[256];
    snprintf(cmd, sizeof cmd, "xz -dc tests/data/tokenizer/ggml-vocab-%s.gguf.xz", name);
    FILE *p = popen(cmd, "r");
    if (!p)
        abort();
    size_t cap = 1 << 20, n = 0, k;
    char *b = malloc(cap);
    while ((k = fread(b + n, 1, cap - n, p)) > 0)
        if ((n += k) == cap)
            b = realloc(b, cap *= 2);
    pclose(p);
    struct llm_gguf *g;
    struct llm_vocab *v;
    if (llm_gguf_open_memory(b, n, &g, err, sizeof err) || llm_vocab_load(g, &v, err, sizeof err)) {
        fprintf(stderr, "fuzz_tokenize: cannot load %s (run from the top directory): %s\n", name, err);
        abort();
    }
    llm_gguf_close(g);
    free(b); /* the vocabulary copies what it needs */
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vocabs[0])
        for (int i = 0; i < 4; i++)
            vocabs[i] = load(names[i]);
    if (size == 0)
        return 0;
    struct llm_vocab *v = vocabs[data[0] & 3];
    bool special = data[0] & 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    /* a private copy of exactly len bytes */
    char *buf = malloc(len ? len : 1);
    memcpy(buf, text, len);
    int32_t need = llm_tokenize(v, buf, len, NULL, 0, true, special);
    if (need > 0)
        abort(); /* len >= 0 bytes always give at least BOS or nothing */
    int32_t n = -need;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (llm_tokenize(v, buf, len, ids, n, true, special) != n)
        abort();
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= llm_vocab_n_tokens(v))
            abort();
    int32_t dn = llm_detokenize(v, ids, n, NULL, 0, false, special);
    if (dn < 0) {
        char *t = malloc((size_t)-dn);
        if (llm_detokenize(v, ids, n, t, -dn, false, special) < 0)
            abort();
        free(t);
    }
    struct llm_detok *d = llm_detok_init(v, llm_detok_default_params());
    const char *out;
    for (int32_t i = 0; i < n; i++)
        llm_detok_push(d, ids[i], &out);
    llm_detok_flush(d, &out);
    llm_detok_free(d);
    free(ids);
    free(buf);
    return 0;
}
