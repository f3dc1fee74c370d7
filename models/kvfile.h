/*
 * kvfile.h - (internal to models/) "key = value" text files: the config
 * file and the store's sidecars (models/config.c), and remote models'
 * entries (models/remote.c).
 */
#ifndef KVCHAT_MODELS_KVFILE_H
#define KVCHAT_MODELS_KVFILE_H

#include <stddef.h>

/* the whole file (a regular file of at most 1 MiB, opened non-blocking:
 * never waits on a FIFO or reads a device forever) into *out, NUL-ended;
 * caller frees. 1 read, 0 no such file, -1 (errno: EINVAL not a regular
 * file, EISDIR, EFBIG larger than 1 MiB, or the read's) */
int kvfile_read(const char *path, char **out, size_t *len);
/* the last value of key in the file into buf: 1 found, 0 not (or no file),
 * -1 read error (as kvfile_read) */
int kvfile_get(const char *path, const char *key, char *buf, size_t size);
/* set (value != NULL) or remove key, keeping every other line; writes a
 * temporary file and renames it over path. 0 or -1 with err set */
int kvfile_set(const char *path, const char *key, const char *value, char *err, size_t err_size);
/* path replaced, in one rename, by a file of n "key = value" lines (kv:
 * key0, value0, key1, ...; a NULL value leaves its key out): a kill at any
 * moment leaves the old file or the new, whole. 0 or -1 with err set */
int kvfile_replace(const char *path, const char *const *kv, size_t n, char *err, size_t err_size);
/* text replaces path atomically (core/base's base_write_file_atomic): 0,
 * or -1 with err set ("cannot write 'PATH.tmp.PID': ...", "cannot rename") */
struct base_buf;
int kvfile_write_text(const char *path, const struct base_buf *text, char *err, size_t err_size);
/* a store name from a file name or URL path: its basename without .gguf
 * (and any ?query), other characters made '-' (models/store.c); may be
 * empty or still invalid */
void name_from_file(const char *file, char *name, size_t size);

struct mdl_entry;
/* the store's view of the remote entry at e->path (e->name set): url,
 * model, key variable, when added; e->error if it cannot be read */
void mdl_remote_fill_entry(struct mdl_entry *e);

#endif
