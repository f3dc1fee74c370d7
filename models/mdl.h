/*
 * mdl.h - the public interface of models/: where models live on disk, how a
 * model argument (-m MODEL) becomes a file, the user's config file, and
 * `models pull` (HTTPS download with resume and verification). models/ owns
 * files on disk and the network; it is the only user of mbedTLS.
 *
 * ==== The store ====
 * $KVCHAT_HOME (default ${XDG_DATA_HOME:-$HOME/.local/share}/kvchat) holds
 *   models/NAME.gguf        a model, complete and verified
 *   models/NAME.meta        its sidecar: "key = value" lines, written after
 *                           the model is in place (absent for a file copied
 *                           in by hand):
 *                             source = REF as given to pull, or the
 *                               absolute path given to add
 *                             url = the URL it was downloaded from
 *                             sha256 = 64 lowercase hex digits
 *                             sha256_checked = yes|no (yes: matched a
 *                               published or given checksum)
 *                             added = link|symlink|copy (models add: how
 *                               the file is held)
 *                             size = bytes
 *                             pulled = seconds since the epoch (UTC) it
 *                               entered the store
 *   models/NAME.part        a download in progress (resumable); locked with
 *                           flock while a pull writes it
 *   models/NAME.part.meta   the URL and ETag the .part came from
 * A NAME is 1-128 characters of [A-Za-z0-9._:+-], not starting with '.' or
 * '-'.
 *
 * ==== The config file ====
 * ${XDG_CONFIG_HOME:-$HOME/.config}/kvchat/config: "key = value" lines;
 * '#' starts a comment line; later lines win. `model` is the default model.
 *
 * Errors: functions return 0 on success or a negative enum mdl_err, with a
 * one-line message in the caller's err buffer (no "kvchat:" prefix).
 */
#ifndef KVCHAT_MODELS_MDL_H
#define KVCHAT_MODELS_MDL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mdl_err {
    MDL_ERR_USAGE = -1,       /* a bad name or reference */
    MDL_ERR_FILE = -2,        /* a file cannot be read or written, or is not a model */
    MDL_ERR_NETWORK = -3,     /* connection, TLS, HTTP */
    MDL_ERR_VERIFY = -4,      /* the download's SHA-256 did not match */
    MDL_ERR_INTERRUPTED = -5, /* the cancel flag was set */
    MDL_ERR_NOT_FOUND = -6,   /* no such model in the store */
    MDL_ERR_IN_USE = -7,      /* a session uses the model */
};

/* ==== the store ==== */

/* The kvchat home directory into buf (not created). Returns 0, or -1 if
 * neither KVCHAT_HOME, XDG_DATA_HOME nor HOME is set or buf is too small. */
int mdl_home(char *buf, size_t size);

/*
 * Resolve a model argument: an existing file path is used as is; otherwise
 * NAME is looked up as models/NAME and models/NAME.gguf in the store.
 * Returns 0 with the path in buf, or -1 (buf then holds the argument).
 */
int mdl_resolve(const char *arg, char *buf, size_t size);

/* true if name is a valid store name (see above) */
bool mdl_name_valid(const char *name);

/* $KVCHAT_HOME/models/NAME.gguf into buf: 0, or MDL_ERR_USAGE */
int mdl_store_path(const char *name, char *buf, size_t size);

struct mdl_entry {
    char name[160];
    char path[4096];
    uint64_t size;          /* bytes */
    char arch[64];          /* "" if the file cannot be read */
    int64_t n_params;       /* -1 if unknown */
    char quant[32];         /* the file type (Q4_K_M, F16...), "" if unknown */
    char source[512];       /* from the sidecar, "" if none */
    char sha256[65];        /* from the sidecar, "" if none */
    int64_t pulled;         /* seconds since the epoch, -1 if unknown */
    char error[256];        /* why the file could not be read, "" if it could */
};

/* Every model in the store, sorted by name. *out is an array the caller
 * frees with free(); *n its length. An absent store is an empty list. */
int mdl_list(struct mdl_entry **out, size_t *n, char *err, size_t err_size);
/* mdl_list with only name and path filled in: no file is opened (fast,
 * for shell completion) */
int mdl_list_names(struct mdl_entry **out, size_t *n, char *err, size_t err_size);
/* One store model by name: 0, MDL_ERR_NOT_FOUND or MDL_ERR_USAGE. */
int mdl_stat(const char *name, struct mdl_entry *e, char *err, size_t err_size);

/*
 * Is the model used by a session? The sessions code provides the answer:
 * return 1 (and a short description of who in who) if so, 0 if not, <0 if
 * it cannot tell. NULL means nothing uses any model.
 */
typedef int (*mdl_in_use_fn)(void *ctx, const char *name, const char *path, char *who,
                             size_t who_size);

/* Remove NAME (model, sidecar, any .part) from the store. Unless force,
 * refuses with MDL_ERR_IN_USE when in_use says a session uses it. */
int mdl_rm(const char *name, bool force, mdl_in_use_fn in_use, void *ctx, char *err,
           size_t err_size);

/* ==== add: a file already on disk ==== */

enum mdl_add_how { MDL_ADD_LINK, MDL_ADD_SYMLINK, MDL_ADD_COPY };

struct mdl_add_params {
    const char *name;  /* store name; NULL: the file's name without .gguf */
    bool copy;         /* copy the file instead of linking it */
    bool symlink;      /* a symbolic link even where a hard link would do */
    bool force;        /* replace a model of that name */
    const volatile sig_atomic_t *cancel; /* set by a signal: stop a copy, leave nothing */
};

struct mdl_add_result {
    char name[160];
    char path[4096];   /* models/NAME.gguf */
    char target[4096]; /* the file's absolute path */
    enum mdl_add_how how;
    bool already;      /* that file already is the store's NAME: nothing done */
    uint64_t size;
    char warning[300]; /* "" or a note (the sidecar could not be written) */
};

/*
 * Put FILE (a GGUF model; its header, metadata and tensor table are
 * checked) into the store as NAME: a hard link if the file system allows,
 * else a symbolic link to its absolute path; a copy with p->copy. Refuses
 * a name in use unless p->force. Returns 0 with res filled in, or enum
 * mdl_err: MDL_ERR_FILE (not a file, not a GGUF model, cannot write),
 * MDL_ERR_USAGE (a bad or taken name), MDL_ERR_INTERRUPTED.
 */
int mdl_add(const char *file, const struct mdl_add_params *p, struct mdl_add_result *res, char *err,
            size_t err_size);
/* "hard link", "symbolic link", "copy" */
const char *mdl_add_how_name(enum mdl_add_how how);

/* ==== the config file ==== */

/* its path into buf: 0, or -1 if no XDG_CONFIG_HOME nor HOME */
int mdl_config_path(char *buf, size_t size);
/* the value of key into buf: 1 if found, 0 if not (or no file), <0 on a
 * read error */
int mdl_config_get(const char *key, char *buf, size_t size);
/* set key = value, keeping the other lines (and comments); creates the file
 * and its directory. value NULL removes the key. 0 or MDL_ERR_FILE */
int mdl_config_set(const char *key, const char *value, char *err, size_t err_size);

/*
 * The default model, in order: KVCHAT_MODEL, then `model` in the config
 * file. Returns 1 with the setting in buf and *what naming its source
 * ("KVCHAT_MODEL" or "the config file", static strings), 0 if none is set.
 */
int mdl_default_model(char *buf, size_t size, const char **what);

/* ==== aliases: well-known instruct models ==== */

struct mdl_alias {
    const char *name;      /* "qwen2.5:0.5b" */
    const char *repo;      /* "Qwen/Qwen2.5-0.5B-Instruct-GGUF" */
    const char *file;      /* "qwen2.5-0.5b-instruct-q4_k_m.gguf" */
    uint64_t size;         /* expected bytes (approximate: for messages) */
    const char *about;     /* "Qwen2.5 0.5B Instruct, Q4_K_M" */
    /* what the file is, for the test that walks the table
     * (tests/test_models.c: a synthetic model of each) */
    const char *arch;      /* general.architecture: "qwen2" */
    const char *vocab;     /* the vocabulary of tests/data/tokenizer it has: "qwen2" */
    const char *tmpl;      /* its chat template's family: "chatml" */
};
/* the table, ended by a NULL name */
extern const struct mdl_alias mdl_aliases[];
/* the alias called name, or NULL */
const struct mdl_alias *mdl_alias_find(const char *name);
/* true when kvchat runs the alias's architecture: only those are listed
 * and pulled (the others wait for their forward pass) */
bool mdl_alias_runs(const struct mdl_alias *a);
/* the alias offered to a newcomer */
#define MDL_DEFAULT_ALIAS "qwen2.5:0.5b"

/* ==== pull ==== */

struct mdl_progress {
    uint64_t done;     /* bytes in the .part so far */
    int64_t total;     /* expected bytes, -1 if unknown */
    uint64_t resumed;  /* bytes that were already there when this request began */
    double seconds;    /* since this request began */
};

struct mdl_pull_params {
    const char *name;     /* store name; NULL: from the reference */
    const char *sha256;   /* expected SHA-256 (hex); NULL: the hub's X-Linked-ETag if any */
    const char *ca_file;  /* NULL: KVCHAT_CA_FILE, else the system bundle */
    const char *token;    /* NULL: HF_TOKEN; sent only to the hub */
    int retries;          /* after a transient failure; default 3 */
    int connect_timeout_ms, read_timeout_ms;
    bool force;           /* download again even if NAME is in the store */
    const volatile sig_atomic_t *cancel; /* set by a signal: stop, keep the .part */
    /* called as data arrives (at most ~10 times a second) and at the end */
    void (*progress)(void *ctx, const struct mdl_progress *p);
    /* one-line notes: "resuming at ...", "retrying in 2 s: ..." */
    void (*note)(void *ctx, const char *msg);
    void *ctx;
};
struct mdl_pull_params mdl_pull_default_params(void);

struct mdl_pull_result {
    char name[160];
    char path[4096];
    char url[4096];         /* where the bytes came from at last */
    char sha256[65];
    bool sha256_checked;    /* it matched a published or given checksum */
    bool already;           /* NAME was in the store; nothing was downloaded */
    uint64_t size;
    uint64_t downloaded;    /* bytes fetched by this call */
    double seconds;
};

/*
 * Download REF into the store. REF is an alias (mdl_aliases), an https://
 * URL, hf:OWNER/REPO/PATH.gguf, or hf:OWNER/REPO[:QUANT] (the repo's .gguf
 * file of that quantization, Q4_K_M by default). The hub is
 * $KVCHAT_HF_ENDPOINT, $HF_ENDPOINT or https://huggingface.co; HTTPS_PROXY
 * and NO_PROXY are honoured. Returns 0 with res filled in, or enum mdl_err.
 */
int mdl_pull(const char *ref, const struct mdl_pull_params *p, struct mdl_pull_result *res,
             char *err, size_t err_size);

/* the TLS library's name and version, for --version and bug reports */
const char *mdl_tls_version(void);

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
