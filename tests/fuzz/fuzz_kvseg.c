/*
 * fuzz_kvseg.c - libFuzzer target for the KV segment header parser: any
 * bytes are refused with a reason or parsed into fields that stay inside
 * the buffer (tokens included).
 *   ./tests/fuzz/fuzz_kvseg -max_total_time=600 /tmp/kvseg-work tests/fuzz/corpus/kvseg
 */
#include "sessions/kvseg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint32_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct kv_seg_desc d;
    uint8_t id[32], cid[32];
    uint32_t hb;
    char err[256] = "";
    if (kv_seg_parse_header(buf, size, &d, id, &hb, err, sizeof err) == 0) {
        if (hb > size)
            abort();
        for (uint32_t i = 0; i < d.n_tokens; i++) {
            int32_t t;
            memcpy(&t, (const uint8_t *)d.tokens + 4 * i, 4);
            sink += (uint32_t)t;
        }
        kv_seg_id(&d, cid);
        sink += cid[0];
    } else if (!err[0]) {
        abort();
    }
    free(buf);
    return 0;
}
