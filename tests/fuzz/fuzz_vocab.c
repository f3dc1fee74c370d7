/*
 * fuzz_vocab.c - libFuzzer target for loading a vocabulary from untrusted
 * GGUF metadata: any bytes must be refused (by the GGUF reader or by
 * llm_vocab_load, with a reason) or give a vocabulary that tokenizes,
 * detokenizes and renders pieces without reading or writing out of
 * bounds. ASan/UBSan catch the rest.
 *   make tests/fuzz/fuzz_vocab && ./tests/fuzz/fuzz_vocab -max_total_time=600 \
 *        /tmp/vocab-work tests/fuzz/corpus/vocab
 */
#include "core/llm.h"
#include "tests/fuzz/fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char sample[] = "Hello, world! <|im_start|> <s> caf\xc3\xa9 \xf0\x9f\xa6\x99 123 \xff\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    if (!buf)
        return 0;
    struct llm_gguf *g;
    struct llm_vocab *v;
    char err[512];
    if (llm_gguf_open_memory(buf, size, &g, err, sizeof err)) {
        free(buf);
        return 0;
    }
    err[0] = 0;
    int rc = llm_vocab_load(g, &v, err, sizeof err);
    llm_gguf_close(g);
    free(buf); /* the vocabulary must not borrow from the file */
    if (rc < 0) {
        if (!err[0])
            abort(); /* every refusal has a reason */
        return 0;
    }
    int32_t t[256];
    for (int special = 0; special < 2; special++) {
        int32_t n = llm_tokenize(v, sample, sizeof sample - 1, t, 256, true, special);
        for (int32_t i = 0; i < n; i++)
            if (t[i] < 0 || t[i] >= llm_vocab_n_tokens(v))
                abort();
        char text[4096];
        llm_detokenize(v, t, n > 0 ? n : 0, text, sizeof text, true, special);
    }
    int32_t nv = llm_vocab_n_tokens(v);
    for (int32_t i = 0; i < nv && i < 512; i++) {
        char piece[64];
        llm_token_to_piece(v, i, piece, sizeof piece, 1, true);
    }
    llm_vocab_free(v);
    return 0;
}
