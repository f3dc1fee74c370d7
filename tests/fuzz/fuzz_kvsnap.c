/*
 * fuzz_kvsnap.c - libFuzzer target for the recurrent-state snapshot header
 * parser: any bytes are refused with a reason or parsed into fields within
 * their limits (a known kv type, a position and a state size in range).
 *   ./tests/fuzz/fuzz_kvsnap -max_total_time=600 /tmp/kvsnap-work tests/fuzz/corpus/kvsnap
 * The corpus: KVCHAT_WRITE_CORPUS=tests/fuzz/corpus/kvsnap tests/test_kvblock
 */
#include "sessions/kvblock.h"
#include "tests/fuzz/fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = fuzz_copy(data, size);
    if (!buf)
        return 0;
    struct kv_snap_desc d;
    uint32_t crc;
    char err[256] = "";
    if (kv_snap_parse_header(buf, size, &d, &crc, err, sizeof err) == 0) {
        if (kv_snap_file_bytes(&d) != KV_SNAP_HEADER_BYTES + d.state_bytes || d.pos == 0 ||
            d.state_bytes > KV_SNAP_MAX_BYTES || kv_block_elem_size(d.kv_type) == 0)
            abort();
        /* the state the header describes, as far as the input holds it */
        size_t have = size - KV_SNAP_HEADER_BYTES;
        sink += kv_crc32c(0, buf + KV_SNAP_HEADER_BYTES, have < d.state_bytes ? have : (size_t)d.state_bytes) ^ crc;
    } else if (!err[0]) {
        abort();
    }
    free(buf);
    return 0;
}
