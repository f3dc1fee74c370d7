/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader: any bytes must be
 * either refused with a message or opened into a handle whose every
 * accessor stays inside the buffer. ASan/UBSan catch the rest.
 *   make tests/fuzz/fuzz_gguf && ./tests/fuzz/fuzz_gguf -max_total_time=600 \
 *        /tmp/gguf-work tests/fuzz/corpus/gguf
 */
#include "core/llm.h"
#include "tests/fuzz/fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy: the reader must not read past size */
    uint8_t *buf = fuzz_copy(data, size);
    if (!buf)
        return 0;
    struct llm_gguf *g;
    char err[512];
    if (llm_gguf_open_memory(buf, size, &g, err, sizeof err)) {
        if (!err[0])
            abort(); /* every refusal has a reason */
        free(buf);
        return 0;
    }
    for (int64_t i = 0; i < llm_gguf_n_kv(g); i++) {
        int64_t v;
        uint64_t u;
        double d;
        struct llm_str s;
        sink += strlen(llm_gguf_key(g, i));
        if (llm_gguf_get_int(g, i, &v) == 0) sink += (uint64_t)v;
        if (llm_gguf_get_uint64(g, i, &u) == 0) sink += u;
        if (llm_gguf_get_float(g, i, &d) == 0) sink += (uint64_t)(d != d);
        if (llm_gguf_get_str(g, i, &s) == 0 && s.len) sink += (uint8_t)s.ptr[s.len - 1];
        uint64_t n = llm_gguf_arr_n(g, i);
        for (uint64_t j = 0; j < n && j < 64; j++) {
            if (llm_gguf_arr_get_int(g, i, j, &v) == 0) sink += (uint64_t)v;
            if (llm_gguf_arr_get_float(g, i, j, &d) == 0) sink += (uint64_t)(d != d);
            if (llm_gguf_arr_get_str(g, i, j, &s) == 0 && s.len) sink += (uint8_t)s.ptr[s.len - 1];
        }
        if (n) { /* the last element too */
            if (llm_gguf_arr_get_uint64(g, i, n - 1, &u) == 0) sink += u;
            if (llm_gguf_arr_get_str(g, i, n - 1, &s) == 0 && s.len) sink += (uint8_t)s.ptr[s.len - 1];
        }
    }
    for (int64_t i = 0; i < llm_gguf_n_tensors(g); i++) {
        const struct llm_tensor_info *t = llm_gguf_tensor(g, i);
        if (t->n_bytes) /* first and last byte of the data are readable */
            sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->n_bytes - 1];
        sink += (uint64_t)llm_tensor_n_elements(t);
        if (llm_gguf_find_tensor(g, t->name) != i)
            abort();
    }
    struct llm_model_meta m;
    llm_model_meta_read(g, &m, err, sizeof err);
    sink += (uint64_t)m.n_params;
    llm_gguf_close(g);
    free(buf);
    return 0;
}
