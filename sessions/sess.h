/*
 * sess.h - the public interface of sessions/: conversations that outlive the
 * process. The messages in SQLite ($KVCHAT_HOME/kvchat.db) are the source of
 * truth; KV segment files ($KVCHAT_HOME/kv/xx/<id>.kvseg, format in
 * sessions/kvseg.h and kvchat-files(5)) are a cache that can always be
 * rebuilt from them. sessions/ is the only user of SQLite.
 *
 * Ownership: handles are opaque; lists returned to the caller are freed
 * with the matching *_free; strings inside them belong to the list.
 */
#ifndef KVCHAT_SESSIONS_SESS_H
#define KVCHAT_SESSIONS_SESS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/llm.h"

struct sess_store;

/* Open (creating it and its directories if needed) the store under home:
 * kvchat.db in WAL mode with foreign keys on, migrated to the current
 * schema. Returns 0, or -1 with a reason in err. Close with sess_store_close. */
int sess_store_open(const char *home, struct sess_store **out, char *err, size_t err_size);
void sess_store_close(struct sess_store *st);
/* the last error on this handle: borrowed until the next call */
const char *sess_errmsg(const struct sess_store *st);
/* the schema version the database is at */
int sess_schema_version(struct sess_store *st);

/* ==== sessions ==== */

struct sess_info {
    int64_t id;
    char *name;          /* NULL for an unnamed chat */
    char *model_path;
    uint8_t fingerprint[32];
    char *system_prompt;
    char *params;        /* sampling parameters as JSON text */
    uint32_t kv_type;
    int64_t n_messages;
    int64_t n_turns;     /* user messages */
    int64_t n_tokens;    /* tokens of all messages */
    int64_t kv_bytes;    /* bytes of the segment files its chain uses */
    int64_t created, updated; /* unix seconds */
};

struct sess_new {
    const char *name;          /* NULL: unnamed */
    const char *model_path;
    const uint8_t *fingerprint; /* 32 bytes */
    const char *system_prompt; /* may be NULL */
    const char *params;        /* JSON, may be NULL */
    uint32_t kv_type;
};

/* Create a session; fails if the name is taken. *id gets its id. */
int sess_create(struct sess_store *st, const struct sess_new *n, int64_t *id);
/* 0 and the id, or -1 (with "no session 'x'") */
int sess_find(struct sess_store *st, const char *name, int64_t *id);
/* one session's summary; free with sess_info_free */
int sess_get(struct sess_store *st, int64_t id, struct sess_info *out);
void sess_info_free(struct sess_info *info);
/* every named session, most recently updated first; free with sess_list_free */
int sess_list(struct sess_store *st, struct sess_info **out, int64_t *n);
void sess_list_free(struct sess_info *list, int64_t n);
int sess_rename(struct sess_store *st, const char *old_name, const char *new_name);
/* give an unnamed session a name (or rename a named one) */
int sess_set_name(struct sess_store *st, int64_t id, const char *name);
int sess_rm(struct sess_store *st, const char *name);
/* Fork: a new session named dst with src's messages and chain up to turn
 * `at_turn` (a count of user turns kept; -1: all). Shares segments. */
int sess_fork(struct sess_store *st, const char *src, const char *dst, int64_t at_turn);
int sess_set_params(struct sess_store *st, int64_t id, const char *params_json);

/* ==== messages: the source of truth ==== */

enum sess_role { SESS_ROLE_SYSTEM, SESS_ROLE_USER, SESS_ROLE_ASSISTANT, SESS_ROLE_COUNT };
const char *sess_role_name(enum sess_role r);

struct sess_message {
    int64_t seq;
    enum sess_role role;
    char *text;
    int64_t n_tokens;
    int32_t *tokens; /* the ids this message put in the KV cache (template
                        tokens included), or NULL when not recorded */
};

/* tokens (n_tokens ids) may be NULL: then only the count is kept */
int sess_append_message(struct sess_store *st, int64_t id, enum sess_role role, const char *text,
                        int64_t n_tokens, const int32_t *tokens);
/* messages in order; free with sess_messages_free */
int sess_messages(struct sess_store *st, int64_t id, struct sess_message **out, int64_t *n);
void sess_messages_free(struct sess_message *m, int64_t n);
/* drop messages with seq >= from_seq (undo, retry), and the chain entries
 * that covered them */
int sess_truncate_messages(struct sess_store *st, int64_t id, int64_t from_seq);

/* ==== the KV segment chain ==== */

struct sess_chain_link {
    uint8_t segment[32];
    int64_t pos0;      /* position of its first token */
    int64_t n_tokens;
    int64_t last_seq;  /* the last message seq it covers */
};

/* The path of a segment file: $home/kv/xx/<hex id>.kvseg (the xx directory
 * is created). Returns 0 or -1. */
int sess_segment_path(struct sess_store *st, const uint8_t id[32], char *buf, size_t size);
/* Record a segment file just written (idempotent) and append it to the
 * session's chain, in one transaction. */
int sess_chain_append(struct sess_store *st, int64_t id, const uint8_t segment[32],
                      const uint8_t parent[32], const uint8_t fingerprint[32], uint32_t kv_type,
                      int64_t pos0, int64_t n_tokens, int64_t bytes, int64_t last_seq);
/* a session's chain from the root; free with free() */
int sess_chain(struct sess_store *st, int64_t id, struct sess_chain_link **out, int64_t *n);
/* Mark segments as used now (for the LRU). */
int sess_touch_segments(struct sess_store *st, const struct sess_chain_link *links, int64_t n);
/* A segment file found missing or damaged: forget it so it is rewritten. */
int sess_forget_segment(struct sess_store *st, const uint8_t segment[32]);
/* Is this segment recorded (its file believed present)? 1, 0, or -1 on error. */
int sess_segment_known(struct sess_store *st, const uint8_t segment[32]);

/* The saved sampler state (opaque bytes from core) with the chain head. */
int sess_save_state(struct sess_store *st, int64_t id, const void *state, size_t n);
/* *out is malloc'd (free()), *n its size; *out NULL when none was saved */
int sess_load_state(struct sess_store *st, int64_t id, void **out, size_t *n);

/* ==== a model's identity, and the KV cache on disk ==== */

struct llm_gguf;
struct llm_model;
struct llm_ctx;

/*
 * The model fingerprint segments are tied to: SHA-256 over the GGUF header,
 * all metadata and tensor infos (bytes [0, data offset)), the file size, and
 * 4 KiB samples of every tensor's data (its start, middle and end), so two
 * files with the same shapes but other weights never share a snapshot.
 */
void sess_model_fingerprint(const struct llm_gguf *g, uint8_t out[32]);
/* The same, remembered in st by the file's identity (path, device, inode,
 * size, status-change time: any write, and cp --preserve, changes it) so an unchanged file is hashed once: 1 if it was
 * remembered, 0 if computed. */
int sess_model_fingerprint_cached(struct sess_store *st, const char *path, const struct llm_gguf *g,
                                  uint8_t out[32]);

/*
 * A conversation's tokens split into spans: span i covers tokens
 * [bounds[i-1], bounds[i]) (bounds[-1] = 0) and is one segment, the last
 * message it covers being last_seq[i]. The system prompt is span 0, each
 * exchange one more.
 */
struct sess_restore_stats {
    int64_t restored_tokens;  /* rows read from segment files */
    int64_t prefilled_tokens; /* rows computed again */
    int64_t rewritten;        /* segments written again */
    int64_t damaged;          /* segments found missing, damaged or foreign */
    double ms;                /* wall time of the restore */
    char first_problem[512];  /* the first problem, for one line on stderr */
};

/*
 * Fill ctx (empty; a context of model m) with the KV of tokens[0, bounds[n_spans-1]): each span
 * from its segment file when it is there and verifies, otherwise computed
 * with llm_ctx_decode and its segment rewritten. The chain of session id is
 * made to match. Returns 0 (stats filled), or -1 on an error that leaves
 * ctx unusable (the message in sess_errmsg).
 */
int sess_kv_restore(struct sess_store *st, int64_t id, const struct llm_model *m, struct llm_ctx *ctx,
                    const uint8_t fp[32],
                    const int32_t *tokens, const int64_t *bounds, const int64_t *last_seq,
                    int64_t n_spans, struct sess_restore_stats *stats);

/*
 * Snapshot the rows of tokens [a, b) from ctx as one segment whose parent is
 * the segment ending at a (parent: 32 zero bytes when a == 0), and append it
 * to the session's chain. tokens holds the whole conversation so far.
 * *seg_id (may be NULL) gets the new segment's id. Returns 0 or -1.
 */
int sess_kv_snapshot(struct sess_store *st, int64_t id, const struct llm_model *m, struct llm_ctx *ctx,
                     const uint8_t fp[32],
                     const uint8_t parent[32], const int32_t *tokens, int64_t a, int64_t b,
                     int64_t last_seq, uint8_t seg_id[32]);

/* 1 if the segment of tokens [a, b) after parent (NULL: the root) is
 * recorded and its file present, 0 if not, -1 on error; id (may be NULL)
 * gets the segment's id either way */
int sess_kv_have(struct sess_store *st, const struct llm_model *m, struct llm_ctx *ctx,
                 const uint8_t fp[32], const uint8_t *parent, const int32_t *tokens, int64_t a,
                 int64_t b, uint8_t id[32]);

/* ==== a conversation: messages, their tokens in a KV cache, answers ====
 *
 * The KV cache of ctx always holds exactly the conversation's tokens: the
 * system span (BOS and the rendered system prompt), then for each exchange
 * the user span (what the template adds before the answer: the previous
 * turn's terminator, the user's message, the assistant's opening) and the
 * answer's generated tokens. A new message only prefills its own tokens;
 * /undo and /retry truncate the cache instead of recomputing. Attached to a
 * store, every finished exchange is saved (messages with their token ids,
 * one KV segment, the sampler state) before the call returns.
 */

struct sess_conv;

struct sess_conv_params {
    const char *system;          /* system prompt, or NULL */
    const char *model_path;      /* recorded with a new session */
    enum llm_template tmpl;      /* how messages become text */
    struct llm_sampler_params sampling;
    int32_t n_predict;           /* most tokens per answer; <= 0: until the context is full */
    bool parse_special;          /* special tokens in user text are tokens (--special) */
    bool no_cache;               /* recompute the whole conversation each turn (for comparison);
                                    an attached session is then only read: no KV restored,
                                    nothing saved */
    int64_t cache_max;           /* bytes of segments the store keeps (LRU eviction); <= 0: no limit */
};
struct sess_conv_params sess_conv_default_params(void);

/* Model, vocab and ctx are borrowed and must outlive the conversation; ctx
 * must be empty. Free with sess_conv_free. */
int sess_conv_init(const struct llm_model *m, const struct llm_vocab *v, struct llm_ctx *ctx,
                   struct sess_conv_params p, struct sess_conv **out, char *err, size_t err_size);
void sess_conv_free(struct sess_conv *c);
/* borrowed until the next call */
const char *sess_conv_errmsg(const struct sess_conv *c);

enum sess_status {
    SESS_OK = 0,
    SESS_ERR = -1,          /* see sess_conv_errmsg */
    SESS_ERR_CTX_FULL = -2, /* the message does not fit in the context window */
    SESS_ERR_BUSY = -3,     /* the session is open in another process */
};

/*
 * Tie the conversation to session `name` in st (borrowed): if it exists,
 * its messages replace the conversation's and its KV cache is restored from
 * segments (recomputing what is missing; rs says what happened) along with
 * the sampler state; if not, and create is true, it is created with the
 * conversation's messages so far. The session stays locked for writing
 * until sess_conv_free. Negative on error (SESS_ERR_BUSY when in use).
 */
int sess_conv_attach(struct sess_conv *c, struct sess_store *st, const char *name, bool create,
                     struct sess_restore_stats *rs);
/* the session id (-1 when not attached) */
int64_t sess_conv_session(const struct sess_conv *c);

struct sess_turn_stats {
    int64_t prompt_tokens;    /* tokens the answer was conditioned on */
    int64_t cached_tokens;    /* of them, already in the KV cache */
    int64_t prefilled_tokens; /* of them, computed this turn */
    int64_t generated_tokens;
    double ttft_ms;           /* from the call to the first answer token */
    double prefill_tok_s, decode_tok_s;
    const char *stop_reason;  /* "stop", "length", "context_full", "interrupted" */
    uint64_t kv_bytes_mem;    /* KV bytes held for the conversation */
    int64_t kv_bytes_disk;    /* bytes of its segments on disk (attached), else 0 */
};

/* Called with each piece of the answer as soon as it is complete UTF-8 and
 * cannot be the start of a stop string; non-zero stops generation. */
typedef int (*sess_text_fn)(void *ud, const char *text, size_t n);

/*
 * Add a user message and generate the answer, streaming it to on_text. The
 * answer ends at an end-of-generation token, a stop string of the template,
 * n_predict tokens, a full context, or when *interrupt becomes non-zero
 * (checked between tokens); the partial answer is kept either way, and the
 * KV cache matches it. SESS_ERR_CTX_FULL, with nothing changed, when the
 * message itself does not fit.
 */
int sess_conv_say(struct sess_conv *c, const char *user_text, sess_text_fn on_text, void *ud,
                  volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts);
/* Drop the last answer and generate it again (the sampler moves on, so with
 * temperature it differs). */
int sess_conv_retry(struct sess_conv *c, sess_text_fn on_text, void *ud,
                    volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts);
/* Drop the last exchange. SESS_ERR when there is none. */
int sess_conv_undo(struct sess_conv *c);
/* Drop every exchange, keeping the system prompt. */
int sess_conv_clear(struct sess_conv *c);
/* Drop the oldest n exchanges (to make room); the rest is computed again. */
int sess_conv_drop_oldest(struct sess_conv *c, int64_t n);
/* Start again with another system prompt (NULL: none); exchanges are dropped. */
int sess_conv_set_system(struct sess_conv *c, const char *system);
void sess_conv_set_sampling(struct sess_conv *c, struct llm_sampler_params p);
/* most tokens per answer from now on (<= 0: until the context is full) */
void sess_conv_set_n_predict(struct sess_conv *c, int32_t n_predict);
struct sess_conv_params sess_conv_get_params(const struct sess_conv *c);

int64_t sess_conv_n_messages(const struct sess_conv *c);
/* message i's role and text, borrowed until the next change */
enum sess_role sess_conv_message(const struct sess_conv *c, int64_t i, const char **text);
int64_t sess_conv_n_tokens(const struct sess_conv *c);
/* the conversation's token ids (what the KV cache holds), borrowed until the next change */
const int32_t *sess_conv_tokens(const struct sess_conv *c);
int64_t sess_conv_n_exchanges(const struct sess_conv *c);

/* ==== housekeeping ==== */

/* Delete segments no session's chain uses; *freed gets the bytes removed. */
int sess_gc(struct sess_store *st, int64_t *n_segments, int64_t *freed);
/* Evict least recently used segments that are not a session's head until
 * the store is at most max_bytes. */
int sess_evict(struct sess_store *st, int64_t max_bytes, int64_t *n_segments, int64_t *freed);
/* bytes of all segment files */
int64_t sess_store_bytes(struct sess_store *st);

/* ==== one writer per session ==== */

struct sess_lock;
/* Take the session's write lock (flock on $home/locks/<id>.lock; released
 * by the kernel if the process dies). Held by another process: -1 and
 * "session 'x' is in use by pid N". */
int sess_lock(struct sess_store *st, int64_t id, struct sess_lock **out);
void sess_unlock(struct sess_lock *l);

#endif
