/*
 * kvseg.h - (internal to sessions/ and its tests) KV segment files: the K
 * and V rows of a run of tokens, for every layer, content-addressed.
 *
 * A conversation's KV cache is a chain of segments: the system prompt's,
 * then one per turn. A segment's id is
 *     SHA-256(model fingerprint[32] || kv type (u32 LE) || parent id[32] ||
 *             token ids (i32 LE each))
 * (a root segment's parent id is 32 zero bytes), so equal prefixes of equal
 * models share files. Files live in $KVCHAT_HOME/kv/xx/<id>.kvseg, xx being
 * the id's first two hex digits.
 *
 * ==== File format, version 1 (all integers little-endian) ====
 *   off  size  field
 *     0     8  magic "KVCHSEG\0"
 *     8     4  u32 format version (1)
 *    12     4  u32 header_bytes: where the rows start (a multiple of 64)
 *    16    32  segment id
 *    48    32  parent id (zeros: a root segment)
 *    80    32  model fingerprint
 *   112     4  u32 kv type (0 = f32, 1 = f16: ggml type ids)
 *   116     4  u32 n_layer
 *   120     4  u32 n_embd_k: K elements per token per layer
 *   124     4  u32 n_embd_v: V elements per token per layer
 *   128     4  u32 pos0: the position of the first token (tokens before it in the chain)
 *   132     4  u32 n_tokens (at least 1)
 *   136     8  u64 rows_bytes = n_layer * n_tokens * (n_embd_k + n_embd_v) * element size
 *   144     4  u32 header CRC-32C over bytes [0, header_bytes) with this field zero
 *   148     4  u32 reserved, zero
 *   152     4 * n_tokens        i32 token ids
 *     .     4 * 2 * n_layer     u32 CRC-32C of each layer's K block, then its V block
 *     .     zero padding up to header_bytes
 *   header_bytes                the rows: layer 0 K block, layer 0 V block, layer 1 K
 *                               block, ...; a block is n_tokens * n_embd elements in
 *                               the engine's export order (core/llm.h: n_head_kv heads,
 *                               each of n_tokens positions of head_dim elements)
 *   The file is exactly header_bytes + rows_bytes long.
 * Every field is checked on reading; CRC-32C (not SHA-256) guards the rows
 * because restoring must run at memory speed, and the per-block checksums
 * let layers be verified in parallel.
 */
#ifndef KVCHAT_SESSIONS_KVSEG_H
#define KVCHAT_SESSIONS_KVSEG_H

#include <stddef.h>
#include <stdint.h>

#define KV_SEG_MAGIC "KVCHSEG"
#define KV_SEG_VERSION 1
#define KV_SEG_FIXED_BYTES 152
#define KV_SEG_MAX_TOKENS (1u << 24)
#define KV_SEG_MAX_LAYERS 4096

/* what identifies a segment and shapes its rows */
struct kv_seg_desc {
    uint8_t fingerprint[32];
    uint8_t parent[32];   /* zeros for a root segment */
    uint32_t kv_type;     /* 0 f32, 1 f16 */
    uint32_t n_layer;
    uint32_t n_embd_k, n_embd_v;
    uint32_t pos0;
    uint32_t n_tokens;
    const int32_t *tokens; /* n_tokens ids; borrowed */
};

/* the content address of a segment (see above) */
void kv_seg_id(const struct kv_seg_desc *d, uint8_t id[32]);

/* bytes per element of a kv type, 0 if unknown */
size_t kv_seg_elem_size(uint32_t kv_type);

/*
 * Write a segment file at path: to path.tmp.PID, fsync, rename, fsync the
 * directory. k_rows[l] / v_rows[l] point at layer l's n_tokens contiguous
 * rows. Returns 0, or -1 with a reason in err (no file left behind).
 */
int kv_seg_write(const char *path, const struct kv_seg_desc *d, const uint8_t id[32],
                 const void *const *k_rows, const void *const *v_rows, char *err, size_t err_size);

/* Where one block (a layer's K or V rows) goes: n_chunks pieces of
 * chunk_bytes, piece g at base + g * stride, which together are the block
 * in file order (a contiguous buffer: {p, 0, 1, block bytes}). */
struct kv_seg_dst {
    uint8_t *base;
    size_t stride;
    int64_t n_chunks;
    size_t chunk_bytes;
};

/*
 * Read and verify a segment file against what the caller expects (id,
 * fingerprint, parent, kv type, shape, pos0; tokens are returned). Block b
 * (layer b/2's K when b is even, V when odd) is read into dst[b], straight
 * where the caller wants it (a KV cache), and verified there; nothing is
 * trusted before its check. tokens_out must hold want->n_tokens ids.
 * Returns 0, or -1 with a reason in err (the destinations may then hold
 * part of the file).
 */
int kv_seg_read(const char *path, const struct kv_seg_desc *want, const uint8_t id[32],
                int32_t *tokens_out, const struct kv_seg_dst *dst, char *err, size_t err_size);

/*
 * Parse and check just the header of a segment held in memory (the fuzz
 * target's entry): on success fills d (tokens pointing into buf) and id.
 */
int kv_seg_parse_header(const uint8_t *buf, size_t size, struct kv_seg_desc *d, uint8_t id[32],
                        uint32_t *header_bytes, char *err, size_t err_size);

/* CRC-32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2 */
uint32_t kv_crc32c(uint32_t crc, const void *p, size_t n);

#endif
