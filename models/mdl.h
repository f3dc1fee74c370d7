/*
 * mdl.h - the public interface of models/: where models live on disk and how
 * a model argument (-m MODEL) becomes a file. models/ owns files on disk and
 * the network; it is the only user of mbedTLS.
 *
 * The store: $KVCHAT_HOME (default ${XDG_DATA_HOME:-$HOME/.local/share}/kvchat)
 * holds models/NAME.gguf.
 */
#ifndef KVCHAT_MODELS_MDL_H
#define KVCHAT_MODELS_MDL_H

#include <stddef.h>

/* The kvchat home directory into buf (not created). Returns 0, or -1 if
 * neither KVCHAT_HOME, XDG_DATA_HOME nor HOME is set or buf is too small. */
int mdl_home(char *buf, size_t size);

/*
 * Resolve a model argument: an existing file path is used as is; otherwise
 * NAME is looked up as models/NAME and models/NAME.gguf in the store.
 * Returns 0 with the path in buf, or -1 (buf then holds the argument).
 */
int mdl_resolve(const char *arg, char *buf, size_t size);

/* ==== SHA-256 (mbedTLS), for content addresses and download checks ==== */

struct mdl_sha256;
/* NULL when out of memory; finish with mdl_sha256_final, which frees it */
struct mdl_sha256 *mdl_sha256_init(void);
void mdl_sha256_update(struct mdl_sha256 *h, const void *p, size_t n);
void mdl_sha256_final(struct mdl_sha256 *h, unsigned char out[32]);
/* the digest of one buffer */
void mdl_sha256(const void *p, size_t n, unsigned char out[32]);
/* 64 lowercase hex digits and a NUL */
void mdl_hex(const unsigned char *p, size_t n, char *out);

#endif
