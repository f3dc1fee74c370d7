/*
 * mdl.h - the public interface of models/: where models live on disk, how a
 * model argument (-m MODEL) becomes a file, the user's config file,
 * `models pull` (HTTPS download with resume and verification), and remote
 * models (an OpenAI-compatible server, and the client that chats with it
 * one turn at a time). models/ owns files on disk and the network; it is
 * the only user of mbedTLS and of jansson.
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
 *   models/NAME.remote      a remote model (see "remote models" below)
 * A NAME is 1-128 characters of [A-Za-z0-9._:+-], not starting with '.' or
 * '-'. A name is a local model or a remote one, never both.
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

#include <limits.h>
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
    /* remote models */
    MDL_ERR_AUTH = -8,        /* HTTP 401/403: the API key is missing or refused */
    MDL_ERR_REJECTED = -9,    /* another 4xx: the request cannot succeed as it is */
    MDL_ERR_CUT = -10,        /* the answer stopped before its end (the partial text is kept) */
    MDL_ERR_PROTOCOL = -11,   /* a response that is not the protocol */
};
/* (a remote server's 404 for the model is MDL_ERR_NOT_FOUND; a refused
 * connection, a timeout, and 429/5xx after the retries are MDL_ERR_NETWORK) */

/* ==== the store ==== */

/*
 * The path variables kvchat reads (KVCHAT_HOME, XDG_DATA_HOME,
 * XDG_CONFIG_HOME, XDG_STATE_HOME, HOME) may hold at most
 * MDL_PATH_VAR_MAX bytes: PATH_MAX less room for the longest name kvchat
 * puts under them. An empty XDG_* or HOME counts as unset (as the XDG base
 * directory specification says); an empty KVCHAT_HOME is an error, not the
 * default.
 */
#define MDL_PATH_VAR_MAX (PATH_MAX - 256)
/* 0 if the path variables are usable; else -1 with the problem in err
 * ("KVCHAT_HOME is set but empty: ...", "HOME is too long: ...") */
int mdl_env_check(char *err, size_t err_size);

/* The kvchat home directory into buf (not created). Returns 0, or -1 if
 * neither KVCHAT_HOME, XDG_DATA_HOME nor HOME is set, KVCHAT_HOME is empty,
 * the variable is too long (mdl_env_check says which) or buf is too small. */
int mdl_home(char *buf, size_t size);

/*
 * Resolve a model argument: an existing file path is used as is; otherwise
 * NAME is looked up as models/NAME and models/NAME.gguf in the store.
 * Returns 0 with the path in *path, or -1 (*path then holds a copy of the
 * argument, or is NULL when out of memory). The caller frees *path.
 */
int mdl_resolve(const char *arg, char **path);

/* true if name is a valid store name (see above) */
bool mdl_name_valid(const char *name);

/* $KVCHAT_HOME/models/NAME.gguf into buf: 0, or MDL_ERR_USAGE */
int mdl_store_path(const char *name, char *buf, size_t size);

/* mdl_list's and mdl_stat's: path is the caller's (mdl_entry_free) */
struct mdl_entry {
    char name[160];
    char *path;
    uint64_t size;          /* bytes */
    char arch[64];          /* "" if the file cannot be read */
    int64_t n_params;       /* -1 if unknown */
    char quant[32];         /* the file type (Q4_K_M, F16...), "" if unknown */
    char source[512];       /* from the sidecar, "" if none */
    char sha256[65];        /* from the sidecar, "" if none */
    int64_t pulled;         /* seconds since the epoch, -1 if unknown (remote: when added) */
    char error[256];        /* why the file could not be read, "" if it could */
    bool remote;            /* a remote model: path is its entry, and these say where */
    char url[1024];         /* the server's /v1 base */
    char remote_model[256]; /* the model id sent to it */
    char api_key_env[128];  /* the variable the key is read from, "" if none */
};

/* Every model in the store (local and remote), sorted by name. *out is an array the caller
 * frees with mdl_list_free; *n its length. An absent store is an empty list. */
int mdl_list(struct mdl_entry **out, size_t *n, char *err, size_t err_size);
/* mdl_list with only name and path filled in: no file is opened (fast,
 * for shell completion) */
int mdl_list_names(struct mdl_entry **out, size_t *n, char *err, size_t err_size);
/* One store model (local or remote) by name: 0, MDL_ERR_NOT_FOUND or MDL_ERR_USAGE.
 * The caller frees e with mdl_entry_free whatever the result. */
int mdl_stat(const char *name, struct mdl_entry *e, char *err, size_t err_size);
void mdl_entry_free(struct mdl_entry *e);
void mdl_list_free(struct mdl_entry *es, size_t n);

/*
 * Is the model used by a session? The sessions code provides the answer:
 * return 1 (and a short description of who in who) if so, 0 if not, <0 if
 * it cannot tell. NULL means nothing uses any model.
 */
typedef int (*mdl_in_use_fn)(void *ctx, const char *name, const char *path, char *who,
                             size_t who_size);

/* Remove NAME (model, sidecar, any .part; or a remote entry) from the store. Unless force,
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

/* the caller frees it with mdl_add_result_free, whatever mdl_add returned */
struct mdl_add_result {
    char name[160];
    char *path;        /* models/NAME.gguf */
    char *target;      /* the file's absolute path */
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
void mdl_add_result_free(struct mdl_add_result *res);
/* "hard link", "symbolic link", "copy" */
const char *mdl_add_how_name(enum mdl_add_how how);
/* ==== remote models ====
 *
 * A remote model is an OpenAI-compatible chat-completions server (vLLM,
 * SGLang, llama-server, ollama, ...): the store entry models/NAME.remote
 * says where it is, in "key = value" lines written once by mdl_remote_add
 * (atomically; a key is never written there):
 *   url = the server's /v1 base: https://HOST[:PORT]/PATH, or http:// when
 *         HOST is (and resolves only to) a loopback or private address
 *   model = the model id sent in every request
 *   api_key_env = the environment variable the API key is read from at each
 *         request (absent: no key is sent)
 *   ca_file = CA bundle for https (absent: KVCHAT_CA_FILE, else the system's)
 *   timeout = seconds a request may wait without a byte (default 120)
 *   retries = retries after 408, 429 and 5xx, with backoff (default 3)
 *   stream = yes|no (no: ask for whole answers, for servers or proxies that
 *         buffer streams)
 *   added = seconds since the epoch
 *
 * The key goes only to the url's origin (scheme, host and port), never
 * again once a redirect has left it, and only over https unless the
 * address is loopback or private. The messages stay with the caller
 * (sessions/ keeps them); each turn sends the whole conversation, in the
 * same order and bytes as before plus the new messages, which is what the
 * servers' prefix caches (vLLM's automatic prefix caching, SGLang's radix
 * cache, llama-server's cache_prompt) need to reuse their KV.
 */

struct mdl_remote_params {
    const char *model;       /* NULL: the server's only model (asked at /models) */
    const char *api_key_env; /* NULL: no key */
    const char *ca_file;     /* NULL: KVCHAT_CA_FILE at request time, else the system bundle */
    int timeout_s;           /* <= 0: 120 */
    int retries;             /* < 0: 3 */
    bool no_stream;          /* whole answers instead of streams */
    bool force;              /* replace an existing remote entry of that name */
    const volatile sig_atomic_t *cancel; /* ends a wait on the server */
};
struct mdl_remote_params mdl_remote_default_params(void);

/*
 * Add the remote model NAME at URL (the server's /v1 base; a trailing '/'
 * is dropped). Checks the URL (http:// only for loopback and private
 * addresses, as the host resolves now), the variable's name, the CA file;
 * asks the server for its models when p->model is NULL. A note for the
 * user (e.g. that http:// is unencrypted) goes into note ("" if none).
 * Returns 0, MDL_ERR_USAGE (bad name, URL, variable, or NAME taken),
 * MDL_ERR_NETWORK, MDL_ERR_FILE.
 */
int mdl_remote_add(const char *name, const char *url, const struct mdl_remote_params *p,
                   char *note, size_t note_size, char *err, size_t err_size);
/* does path (as mdl_resolve gives it) name a remote model's entry? */
bool mdl_is_remote(const char *path);

struct mdl_remote;
/* Open the remote model whose entry is at path (from mdl_resolve): reads
 * the entry, nothing more (no network). Close with mdl_remote_close. */
int mdl_remote_open(const char *path, struct mdl_remote **out, char *err, size_t err_size);
void mdl_remote_close(struct mdl_remote *r);

struct mdl_remote_info {    /* strings borrowed for the handle's lifetime */
    const char *name;
    const char *url;         /* the /v1 base */
    const char *model;       /* the model id */
    const char *api_key_env; /* "" if none */
    const char *ca_file;     /* "" if the default */
    int timeout_s, retries;
    bool stream;
    bool tls;                /* https */
    int64_t added;           /* seconds since the epoch, -1 if unknown */
};
void mdl_remote_get_info(const struct mdl_remote *r, struct mdl_remote_info *out);

/* The model ids the server lists at /models: *ids is an array of *n
 * strings, freed with mdl_strv_free. 0 or enum mdl_err (err). */
int mdl_remote_models(struct mdl_remote *r, const volatile sig_atomic_t *cancel, char ***ids,
                      size_t *n, char *err, size_t err_size);
void mdl_strv_free(char **v, size_t n);

enum mdl_role { MDL_ROLE_SYSTEM, MDL_ROLE_USER, MDL_ROLE_ASSISTANT, MDL_ROLE_COUNT };

struct mdl_message {
    enum mdl_role role;
    const char *text;        /* len bytes; invalid UTF-8 is sent as U+FFFD */
    size_t len;
};

struct mdl_chat_params {
    /* sampling: only what is set is sent (else the server's defaults) */
    bool temp_set, top_p_set, presence_penalty_set, seed_set;
    double temp, top_p, presence_penalty;
    uint64_t seed;           /* sent as a signed 64-bit integer (the top bit dropped) */
    int32_t max_tokens;      /* <= 0: as the server likes */
    const char *const *stop; /* n_stop strings that end the answer (not included in it) */
    size_t n_stop;
    const volatile sig_atomic_t *cancel; /* set (by a signal): stop waiting, keep what came */
    /* one-line notes while it works ("server busy (HTTP 429); retrying in 2 s") */
    void (*note)(void *ctx, const char *msg);
    void *ctx;
};
struct mdl_chat_params mdl_chat_default_params(void);

/* each piece of the answer, whole UTF-8 characters only; non-zero stops
 * the answer (as an interrupt does) */
typedef int (*mdl_text_fn)(void *ud, const char *text, size_t n);

struct mdl_chat_result {
    char *text;              /* the answer as far as it came, NUL-terminated (len bytes);
                                freed by mdl_chat_result_free */
    size_t len;
    const char *stop_reason; /* static: "stop", "length", "content_filter", ... (the
                                server's finish_reason), "interrupted", "cut" (ended early:
                                see the status), "error" (no answer) */
    char finish_reason[32];  /* as the server sent it, "" if none */
    char server_model[256];  /* the model the server says answered, "" if it did not say */
    int64_t prompt_tokens;   /* the server's usage; -1 when it did not report it */
    int64_t cached_tokens;   /* prompt tokens the server took from its prefix cache
                                (usage.prompt_tokens_details.cached_tokens, or
                                llama-server's timings.cache_n); -1 if not reported */
    int64_t completion_tokens;
    double ttft_ms;          /* from the call to the first piece of text; -1 if none came */
    double total_ms;
    double prompt_tok_s;     /* from llama-server's timings, -1 if unknown */
    double decode_tok_s;     /* the server's figure, else completion tokens over the
                                time from the first piece to the last; -1 if unknown */
    int http_status;         /* of the last response, 0 if none came */
    int attempts;            /* requests sent (retries + 1) */
};
void mdl_chat_result_free(struct mdl_chat_result *res);

/*
 * One turn: send the conversation msgs[0..n) (a system message first if
 * there is one, then user and assistant in order, ending with the user's
 * new message) and stream the answer to on_text as it comes. Retries 408,
 * 429 and 5xx responses (honouring Retry-After up to 60 s) and
 * connections that end before any answer, with backoff, before any text
 * has been delivered; never after. res is filled in every case; its text
 * is everything on_text was given.
 *
 * Returns 0 (the answer is complete; res->stop_reason says why it ended),
 * or:
 *   MDL_ERR_INTERRUPTED  *p->cancel was set or on_text returned non-zero:
 *                        the text so far is in res (stop_reason "interrupted")
 *   MDL_ERR_CUT          the stream ended (closed, timed out, broken, or an error
 *                        event) after text had come: the partial text is in
 *                        res (stop_reason "cut"), err says why
 *   MDL_ERR_NETWORK      cannot connect, timed out, or 408/429/5xx after the
 *                        retries: no text
 *   MDL_ERR_AUTH         401/403: err names the key's variable (or says to set one)
 *   MDL_ERR_NOT_FOUND    404: the server has no such model; err lists the ones it has
 *   MDL_ERR_REJECTED     another 4xx (e.g. the conversation is too long for it)
 *   MDL_ERR_PROTOCOL     a malformed response before any text (one after some
 *                        text is MDL_ERR_CUT, err saying what was wrong)
 *   MDL_ERR_USAGE        the key's variable holds characters that cannot be sent
 */
int mdl_remote_chat(struct mdl_remote *r, const struct mdl_message *msgs, size_t n_msgs,
                    const struct mdl_chat_params *p, mdl_text_fn on_text, void *ud,
                    struct mdl_chat_result *res, char *err, size_t err_size);

/* ==== the config file ==== */

/* its path into buf: 0, or -1 if no XDG_CONFIG_HOME nor HOME (or one too long) */
int mdl_config_path(char *buf, size_t size);
/* the value of key into buf: 1 if found, 0 if not (or no file), <0 on a
 * read error */
int mdl_config_get(const char *key, char *buf, size_t size);
/* the first key of the file not in known (NULL-terminated) into buf, as
 * "KEY' (line N": 1 if there is one, 0 if not (or no file), <0 on a read
 * error */
int mdl_config_unknown(const char *const *known, char *buf, size_t size);
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
    const char *vocab;     /* the vocabulary of tests/data/tokenizer it has: "qwen2"
                            * ("": none there; the test's placeholder) */
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

/* the caller frees it with mdl_pull_result_free, whatever mdl_pull returned */
struct mdl_pull_result {
    char name[160];
    char *path;
    char *url;              /* where the bytes came from at last, or NULL */
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
void mdl_pull_result_free(struct mdl_pull_result *res);

/* ==== text ==== */

/* Length of the valid UTF-8 sequence at p (n > 0 bytes left), or -k: the
 * first k bytes are a maximal invalid subpart, to be shown as one U+FFFD
 * (Unicode's "substitution of maximal subparts", as Python's
 * errors='replace' does). For JSON writers and terminals. */
int mdl_utf8_seq(const unsigned char *p, size_t n);

/* the TLS library's name and version, for --version and bug reports */
const char *mdl_tls_version(void);

#endif
