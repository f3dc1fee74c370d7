/*
 * fuzz.h - what the libFuzzer targets share: the input copied into a
 * buffer of exactly its size, so that ASan sees any read past the end (the
 * fuzzer's own buffer may have room after it), and the piece size the
 * streaming targets feed their parsers in.
 */
#ifndef KVCHAT_TESTS_FUZZ_H
#define KVCHAT_TESTS_FUZZ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a private copy of data's size bytes (malloc'd, caller frees); NULL when
 * out of memory */
static inline void *fuzz_copy(const uint8_t *data, size_t size)
{
    void *buf = malloc(size ? size : 1);
    if (buf)
        memcpy(buf, data, size);
    return buf;
}

/* the streaming targets' piece size, from the input's first byte b: 1 to
 * 16 bytes, or 7 * b (896 and more) when b >= 128 */
static inline size_t fuzz_piece(uint8_t b)
{
    return b >= 128 ? (size_t)b * 7 : (size_t)(b % 16) + 1;
}

/* a streaming target's input: the piece size from data's first byte
 * (*piece), the rest copied as fuzz_copy does (*n bytes); NULL for an
 * empty input or out of memory */
static inline char *fuzz_stream_input(const uint8_t *data, size_t size, size_t *piece, size_t *n)
{
    if (size < 1)
        return NULL;
    *piece = fuzz_piece(data[0]);
    *n = size - 1;
    return fuzz_copy(data + 1, size - 1);
}

#endif
