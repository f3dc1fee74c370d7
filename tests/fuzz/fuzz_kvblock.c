/*
 * fuzz_kvblock.c - libFuzzer target for the KV block header parser: any
 * bytes are refused with a reason or parsed into fields that stay inside
 * the buffer (tokens included), whose id can be computed.
 *   ./tests/fuzz/fuzz_kvblock -max_total_time=600 /tmp/kvblock-work tests/fuzz/corpus/kvblock
 * The corpus: KVCHAT_WRITE_CORPUS=tests/fuzz/corpus/kvblock tests/test_kvblock
 */
#include "sessions/kvblock.h"
#include "tests/fuzz/fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint32_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    if (!buf)
        return 0;
    struct kv_block_desc d;
    uint8_t id[32], cid[32];
    uint32_t hb;
    char err[256] = "";
    if (kv_block_parse_header(buf, size, &d, id, &hb, err, sizeof err) == 0) {
        if (hb > size || kv_block_rows_bytes(&d) == 0)
            abort();
        for (uint32_t i = 0; i < d.n_tokens; i++) {
            int32_t t;
            memcpy(&t, (const uint8_t *)d.tokens + 4 * i, 4);
            sink += (uint32_t)t;
        }
        if (kv_block_id(&d, cid) == 0)
            sink += cid[0];
    } else if (!err[0]) {
        abort();
    }
    free(buf);
    return 0;
}
