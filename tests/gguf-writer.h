/*
 * gguf-writer.h - (tests only) builds GGUF files: the test-model generator
 * and the reader's unit tests use it. kvchat itself never writes GGUF.
 * Byte layout: see core/llm.h.
 */
#ifndef KVCHAT_TESTS_GGUF_WRITER_H
#define KVCHAT_TESTS_GGUF_WRITER_H

#include "core/llm.h"

#include <stddef.h>
#include <stdint.h>

/* a growable byte buffer with little-endian writers, for hand-made files */
struct gw_buf {
    uint8_t *p;
    size_t n, cap;
};
void gw_put(struct gw_buf *b, const void *p, size_t n);
void gw_put_u32(struct gw_buf *b, uint32_t v);
void gw_put_u64(struct gw_buf *b, uint64_t v);
void gw_put_str(struct gw_buf *b, const char *s); /* u64 length + bytes */
void gw_buf_free(struct gw_buf *b);

struct gw;
struct gw *gw_init(void); /* caller frees with gw_free */
void gw_free(struct gw *w);
void gw_set_version(struct gw *w, uint32_t version); /* default 3 */
void gw_set_alignment(struct gw *w, uint32_t alignment); /* also writes general.alignment */

void gw_kv_u32(struct gw *w, const char *key, uint32_t v);
void gw_kv_i32(struct gw *w, const char *key, int32_t v);
void gw_kv_u64(struct gw *w, const char *key, uint64_t v);
void gw_kv_f32(struct gw *w, const char *key, float v);
void gw_kv_bool(struct gw *w, const char *key, int v);
void gw_kv_str(struct gw *w, const char *key, const char *v);
/* any scalar type: v holds the value's bytes (little-endian) */
void gw_kv_scalar(struct gw *w, const char *key, enum llm_gguf_type t, const void *v);
/* a numeric array of n elements of type t */
void gw_kv_arr(struct gw *w, const char *key, enum llm_gguf_type t, const void *data, uint64_t n);
void gw_kv_arr_str(struct gw *w, const char *key, const char *const *v, uint64_t n);
/* copy key i of g, value and all */
void gw_kv_copy(struct gw *w, const struct llm_gguf *g, int64_t i);

/* a tensor; data (n_bytes of it) is copied */
void gw_tensor(struct gw *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
               const void *data, uint64_t n_bytes);

/* the whole file; returns 0 or -1 */
/* gw_stream: the tensors that follow are written to path as they come
 * (at most max_tensors of them; no key/value after the first), for files
 * larger than memory; gw_write_file then writes the header in front, with
 * a "mkmodel.padding" key of spaces that fills the room kept for it (and
 * ignores its path). */
int gw_stream(struct gw *w, const char *path, uint64_t max_tensors);
int gw_write_file(struct gw *w, const char *path);
/* the whole file into *out (caller frees out->p with gw_buf_free) */
void gw_write_buf(struct gw *w, struct gw_buf *out);

#endif
