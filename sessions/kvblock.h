/*
 * kvblock.h - (internal to sessions/ and its tests) KV block files: the K
 * and V rows of up to SESS_BLOCK_TOKENS consecutive positions, for every
 * layer, content-addressed.
 *
 * The KV cache of any token sequence is stored as blocks of B positions
 * (B = SESS_BLOCK_TOKENS, sessions/sess-int.h): block k holds positions
 * [kB, kB + n) with n = B for a full block and 0 < n < B for a session's
 * partial last block (its tail). A block's id is
 *     SHA-256(model fingerprint[32] || kv type (u32 LE) || parent id[32] ||
 *             token ids (i32 LE each))
 * where the parent is block k-1 (32 zero bytes for block 0), so equal
 * token prefixes of equal models have equal ids, in any command, session
 * or process. Files live in $KVCHAT_HOME/kv/xx/<id>.kvblk, xx being the
 * id's first two hex digits.
 *
 * ==== File format, version 1 (all integers little-endian) ====
 *   off  size  field
 *     0     8  magic "KVCHBLK\0"
 *     8     4  u32 format version (1)
 *    12     4  u32 header_bytes: where the rows start (a multiple of 64)
 *    16    32  block id
 *    48    32  parent id (zeros: the first block of a sequence)
 *    80    32  model fingerprint
 *   112     4  u32 kv type (0 = f32, 1 = f16: ggml type ids)
 *   116     4  u32 n_layer
 *   120     4  u32 n_embd_k: K elements per token per layer
 *   124     4  u32 n_embd_v: V elements per token per layer
 *   128     4  u32 pos0: the position of the first token (k * B)
 *   132     4  u32 n_tokens (1 to KV_BLOCK_MAX_TOKENS)
 *   136     8  u64 rows_bytes = n_layer * n_tokens * (n_embd_k + n_embd_v) * element size
 *   144     4  u32 header CRC-32C over bytes [0, header_bytes) with this field zero
 *   148     4  u32 reserved, zero
 *   152     4 * n_tokens        i32 token ids
 *     .     4 * 2 * n_layer     u32 CRC-32C of each layer's K rows, then its V rows
 *     .     zero padding up to header_bytes
 *   header_bytes                the rows: layer 0 K, layer 0 V, layer 1 K, ...; each
 *                               n_tokens * n_embd elements in the engine's export
 *                               order (core/llm.h: n_head_kv heads, each of n_tokens
 *                               positions of head_dim elements)
 *   The file is exactly header_bytes + rows_bytes long.
 * Every field is checked on reading; CRC-32C (not SHA-256) guards the rows
 * because restoring must run at memory speed. A block's first j rows of
 * every head depend only on its parent chain and its first j tokens, so a
 * prompt that diverges inside a block can still use them.
 */
#ifndef KVCHAT_SESSIONS_KVBLOCK_H
#define KVCHAT_SESSIONS_KVBLOCK_H

#include <stddef.h>
#include <stdint.h>

#define KV_BLOCK_MAGIC "KVCHBLK"
#define KV_BLOCK_VERSION 1
#define KV_BLOCK_FIXED_BYTES 152
#define KV_BLOCK_MAX_TOKENS 4096
#define KV_BLOCK_MAX_LAYERS 4096
#define KV_BLOCK_SUFFIX ".kvblk"

/* what identifies a block and shapes its rows */
struct kv_block_desc {
    uint8_t fingerprint[32];
    uint8_t parent[32];    /* zeros for the first block */
    uint32_t kv_type;      /* 0 f32, 1 f16 */
    uint32_t n_layer;
    uint32_t n_embd_k, n_embd_v;
    uint32_t pos0;
    uint32_t n_tokens;
    const int32_t *tokens; /* n_tokens ids; borrowed */
};

/* The content address of a block (see above): 0, or -1 if the hash could
 * not be computed (id is then not to be used). */
int kv_block_id(const struct kv_block_desc *d, uint8_t id[32]);

/* bytes per element of a kv type, 0 if unknown */
size_t kv_block_elem_size(uint32_t kv_type);
/* bytes of the rows of a block of this shape (0 if the shape is not allowed) */
uint64_t kv_block_rows_bytes(const struct kv_block_desc *d);
/* bytes of the whole file */
uint64_t kv_block_file_bytes(const struct kv_block_desc *d);

/*
 * Write a block file at path: to path.tmp.PID (created exclusively, never
 * through a symlink or a FIFO), data synced, renamed over path (an empty
 * directory or a FIFO in its place is removed first), the directory synced.
 * rows holds kv_block_rows_bytes(d) bytes in file order. Returns 0, or -1
 * with a reason in err and *err_no set to the errno of the failure (ENOSPC:
 * the disk is full); no file is left behind.
 */
int kv_block_write(const char *path, const struct kv_block_desc *d, const uint8_t id[32],
                   const void *rows, char *err, size_t err_size, int *err_no);

/* Where one run of rows (a layer's K or V rows) goes: n_chunks pieces of
 * chunk_bytes, piece g at base + g * stride, which together are the run in
 * file order (a contiguous buffer: {p, 0, 1, run bytes}). */
struct kv_block_dst {
    uint8_t *base;
    size_t stride;
    int64_t n_chunks;
    size_t chunk_bytes;
};

enum kv_block_status {
    KV_BLOCK_OK = 0,
    KV_BLOCK_DAMAGED = -1, /* there, but not the block asked for (reason in err) */
    KV_BLOCK_MISSING = -2, /* no file, or not a regular file */
};

/*
 * Read and verify a block file against what the caller expects (id,
 * fingerprint, parent, kv type, shape, pos0, the token ids). Run r (layer
 * r/2's K when r is even, V when odd) is read into dst[r], straight where
 * the caller wants it (a KV cache), and verified there; nothing is trusted
 * before its check. The file is opened so that nothing can block (a FIFO in
 * its place is a missing block). Returns KV_BLOCK_OK, KV_BLOCK_MISSING or
 * KV_BLOCK_DAMAGED with a reason in err (the destinations may then hold
 * part of the file).
 */
int kv_block_read(const char *path, const struct kv_block_desc *want, const uint8_t id[32],
                  const struct kv_block_dst *dst, char *err, size_t err_size);

/*
 * Parse and check just the header of a block held in memory (the fuzz
 * target's entry): on success fills d (tokens pointing into buf) and id.
 */
int kv_block_parse_header(const uint8_t *buf, size_t size, struct kv_block_desc *d, uint8_t id[32],
                          uint32_t *header_bytes, char *err, size_t err_size);

/*
 * ==== Snapshot files: a hybrid model's recurrent state, version 1 ====
 * A model with recurrent layers (Gated DeltaNet, short convolutions) keeps
 * for them a fixed-size state, not rows per position, so its blocks alone
 * cannot resume it. A snapshot is that state (the bytes of
 * llm_ctx_rstate_export, core/llm.h) after position pos: the state a
 * context has once it has computed tokens [0, pos). It is addressed by the
 * id of the block (full, or partial: a tail) that ends at pos, so it is
 * found from the tokens like the blocks, and lives beside them in
 * $KVCHAT_HOME/kv/xx/<id>.kvsnap. All integers little-endian:
 *   off  size  field
 *     0     8  magic "KVCHSNP\0"
 *     8     4  u32 format version (1)
 *    12     4  u32 header_bytes (128): where the state starts
 *    16    32  snapshot id: the id of the block ending at pos
 *    48    32  model fingerprint
 *    80     4  u32 kv type (0 = f32, 1 = f16: the context's, part of the id)
 *    84     4  u32 reserved, zero
 *    88     8  u64 pos: tokens computed before the state (1 to 2^31)
 *    96     8  u64 state_bytes (1 to KV_SNAP_MAX_BYTES): llm_ctx_rstate_size
 *   104     4  u32 CRC-32C of the state
 *   108     4  u32 header CRC-32C over bytes [0, 128) with this field zero
 *   112    16  zero
 *   128        the state: state_bytes bytes in the engine's layout
 *   The file is exactly 128 + state_bytes long.
 * Every field is checked against what the reader expects before the state
 * is used; the state's CRC is checked where it was read.
 */
#define KV_SNAP_MAGIC "KVCHSNP"
#define KV_SNAP_VERSION 1
#define KV_SNAP_HEADER_BYTES 128
#define KV_SNAP_MAX_BYTES ((uint64_t)1 << 34)
#define KV_SNAP_SUFFIX ".kvsnap"

struct kv_snap_desc {
    uint8_t id[32];          /* the id of the block ending at pos */
    uint8_t fingerprint[32];
    uint32_t kv_type;
    uint64_t pos;
    uint64_t state_bytes;
};

/* bytes of the whole file (0 if the description is not allowed) */
uint64_t kv_snap_file_bytes(const struct kv_snap_desc *d);
/* Write a snapshot file at path as kv_block_write writes a block (temporary
 * file, synced, renamed, directory synced): state holds d->state_bytes.
 * 0, or -1 with err and *err_no (ENOSPC: the disk is full); no file left. */
int kv_snap_write(const char *path, const struct kv_snap_desc *d, const void *state, char *err, size_t err_size,
                  int *err_no);
/* Read and verify the snapshot at path against want (id, fingerprint, kv
 * type, pos, state size) into state (want->state_bytes). KV_BLOCK_OK,
 * KV_BLOCK_MISSING or KV_BLOCK_DAMAGED with a reason in err (state may then
 * hold part of the file). Opens nothing that could block. */
int kv_snap_read(const char *path, const struct kv_snap_desc *want, void *state, char *err, size_t err_size);
/* Parse and check a snapshot's header held in memory (the fuzz target's
 * entry): 0 with d filled, or KV_BLOCK_DAMAGED with a reason. */
int kv_snap_parse_header(const uint8_t *buf, size_t size, struct kv_snap_desc *d, uint32_t *state_crc, char *err,
                         size_t err_size);

/* CRC-32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2 */
uint32_t kv_crc32c(uint32_t crc, const void *p, size_t n);

#endif
