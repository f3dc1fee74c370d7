/*
 * sess.h - the public interface of sessions/: conversations, and the store
 * that keeps them and every prompt's KV cache.
 *
 * The store is $KVCHAT_HOME: kvchat.db (SQLite, the index) and kv/ (KV
 * block files, format in kvchat-files(5)). Saved sessions' messages are the
 * source of truth; the KV cache of any token sequence any command computed
 * is kept as content-addressed blocks of SESS_BLOCK_TOKENS positions, a
 * cache that can always be rebuilt from the tokens. A conversation looks up
 * the longest chain of stored blocks matching its tokens before it
 * prefills, and stores the new blocks after each turn, so every prompt that
 * shares a prefix with anything computed before resumes without
 * recomputing it. sessions/ is the only user of SQLite.
 *
 * Errors: functions return SESS_OK (0) or a negative enum sess_status and
 * leave a message on their handle (sess_errmsg, sess_conv_errmsg); SQLite's
 * errors read "database '<path>': <SQLite's reason>".
 * Ownership: handles are opaque; lists returned to the caller are freed with
 * the matching *_free; strings inside them belong to the list.
 */
#ifndef KVCHAT_SESSIONS_SESS_H
#define KVCHAT_SESSIONS_SESS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/llm.h"

/* positions per KV block (B): chosen by measurement (README, "The KV cache on
 * disk"); blocks of another B are simply never found */
#define SESS_BLOCK_TOKENS 64
/* a model with recurrent layers (llm_ctx_rstate_size > 0) keeps its state
 * at least every SESS_SNAP_INTERVAL positions of what it computes (besides
 * the end of each prompt and answer and of the system prompt), so that a
 * resume computes at most SESS_SNAP_INTERVAL - 1 tokens more than its new
 * ones (docs/snapshots.md) */
#define SESS_SNAP_INTERVAL (4 * SESS_BLOCK_TOKENS)

enum sess_status {
    SESS_OK = 0,
    SESS_ERR = -1,             /* see the handle's message */
    SESS_ERR_CTX_FULL = -2,    /* the message does not fit in the context window */
    SESS_ERR_BUSY = -3,        /* the session is open in another process */
    SESS_ERR_INTERRUPTED = -4, /* interrupted before the answer began: nothing changed */
    SESS_ERR_NOT_FOUND = -5,   /* no such session (or, opening without create, no store) */
    SESS_ERR_REMOTE = -6,      /* a remote engine gave no answer: nothing changed (the
                                  message says why; the engine's caller knows the kind) */
    SESS_ERR_MODEL = -7,       /* the session belongs to another model (see switch_model) */
    SESS_ERR_STORE = -8,       /* the store failed (its database or files): the message says why */
};

/* ==== the store ==== */

struct sess_store;

struct sess_store_params {
    bool create; /* create kvchat.db (and kv/) if absent; false: SESS_ERR_NOT_FOUND */
    bool read_only; /* private: nothing is written (see sess_store_set_read_only) */
};
struct sess_store_params sess_store_default_params(void);

/*
 * Open the store under home: kvchat.db in WAL mode with foreign keys on,
 * migrated to the current schema. Its files are made 0600 and its folders
 * 0700 (an older store's are tightened; not when p.read_only). Returns
 * SESS_OK, SESS_ERR_NOT_FOUND (no store and !p.create), or SESS_ERR with
 * the message for the user in err, whole: "database 'PATH': REASON" for
 * SQLite's failures, "cannot use the kvchat home ..." when home's path is
 * longer than SQLite opens (see sess_store_home_check), else "cannot open
 * the session store: REASON". A database made by an earlier release keeps
 * its sessions and messages; what it held of the KV cache in an older form
 * is dropped (sess_store_notice says so once). One open serves a whole
 * command. Close with sess_store_close.
 */
int sess_store_open(const char *home, struct sess_store_params p, struct sess_store **out, char *err,
                    size_t err_size);
void sess_store_close(struct sess_store *st);
/* Can home hold a store? SQLite opens no file whose path (symbolic links
 * resolved) is longer than 512 bytes, and the store's longest is its
 * journal: SESS_OK, or SESS_ERR with the message for the user in err.
 * sess_store_open checks it first; this is for asking before. */
int sess_store_home_check(const char *home, char *err, size_t err_size);
/* the store's files under home, for `kvchat paths` and /show (the names,
 * for help texts) */
#define SESS_STORE_DATABASE_NAME "kvchat.db"
#define SESS_STORE_KV_NAME "kv"
enum sess_store_file {
    SESS_STORE_FILE_DATABASE, /* the session index, HOME/kvchat.db */
    SESS_STORE_FILE_KV,       /* the KV block and snapshot files, HOME/kv (a directory) */
    SESS_STORE_FILE_COUNT
};
/* where the store in home keeps f: caller frees; NULL when out of memory */
char *sess_store_file(const char *home, enum sess_store_file f);
/* the last error on this handle: borrowed until the next call */
const char *sess_errmsg(const struct sess_store *st);
/* something the user should hear once about opening (a migration), or NULL */
const char *sess_store_notice(const struct sess_store *st);
/* the schema version the database is at */
int sess_schema_version(struct sess_store *st);
/* Private (on) or not: a private store is read and never written, not a
 * row nor a file (SQLite's query_only, checked by SQLite itself): blocks
 * are restored but their use is not recorded, a model it does not know is
 * looked up, not added; a conversation over it saves nothing (sessions
 * cannot be created or changed). SESS_OK or SESS_ERR. */
int sess_store_set_read_only(struct sess_store *st, bool on);
bool sess_store_read_only(const struct sess_store *st);

/* ==== session names ====
 * A new name (create, rename, fork, /save) is 1 to 200 bytes of UTF-8 with
 * no white space, control character or '/', and does not start with '-'.
 * Names an earlier release accepted stay openable. */
int sess_name_check(const char *name, char *err, size_t err_size);

/* ==== store administration ==== */

struct sess_info {
    int64_t id;
    char *name;          /* NULL for an unnamed session */
    char *model_path;    /* the model it was last used with */
    uint8_t fingerprint[32];
    char *system_prompt;
    char *params;        /* sampling parameters as JSON text, or NULL */
    uint32_t kv_type;
    int64_t n_messages;
    int64_t n_turns;     /* user messages */
    int64_t n_tokens;    /* tokens of all messages */
    int64_t kv_bytes;    /* bytes of the block files that cover it */
    int64_t created, updated; /* unix seconds */
    int32_t fingerprint_version; /* of fingerprint: 2, or 1 for a model row of a store made
                                    before schema 5 (sess_model_fingerprint says what changed) */
    int64_t model_id;    /* its models row */
};

/* SESS_OK and the id, or SESS_ERR_NOT_FOUND ("no session 'x'") */
int sess_find(struct sess_store *st, const char *name, int64_t *id);
/* session name's summary (sess_find and sess_get): SESS_OK (free it with
 * sess_info_free), SESS_ERR_NOT_FOUND, or SESS_ERR; st may be NULL (no
 * store: SESS_ERR_NOT_FOUND) */
int sess_peek(struct sess_store *st, const char *name, struct sess_info *out);
/* the name of the session changed last (the first of sess_list) into
 * name: SESS_OK, SESS_ERR_NOT_FOUND (none; st may be NULL), or SESS_ERR */
int sess_latest(struct sess_store *st, char *name, size_t size);
/* one session's summary; free with sess_info_free */
int sess_get(struct sess_store *st, int64_t id, struct sess_info *out);
void sess_info_free(struct sess_info *info);
/* every named session, most recently updated first; free with sess_list_free */
int sess_list(struct sess_store *st, struct sess_info **out, int64_t *n);
void sess_list_free(struct sess_info *list, int64_t n);
/* Named sessions whose model is the file at model_path (compared after
 * realpath), most recent first; free with sess_list_free. */
int sess_model_users(struct sess_store *st, const char *model_path, struct sess_info **out, int64_t *n);
/* SESS_OK if session name exists and no other process has it open;
 * SESS_ERR_NOT_FOUND or SESS_ERR_BUSY ("session 'x' is in use by pid N") */
int sess_available(struct sess_store *st, const char *name);
/* Rename or remove a session; refused (SESS_ERR_BUSY) while another process
 * has it open. A removed session's blocks stay as cache until evicted or
 * collected. */
int sess_rename(struct sess_store *st, const char *old_name, const char *new_name);
int sess_rm(struct sess_store *st, const char *name);
/* Fork: a new session dst with src's messages up to turn at_turn (a count
 * of exchanges kept; -1: all; more than src has is refused), and the
 * sampler state saved with the last turn kept. Shares every block. */
int sess_fork(struct sess_store *st, const char *src, const char *dst, int64_t at_turn);

enum sess_role { SESS_ROLE_SYSTEM, SESS_ROLE_USER, SESS_ROLE_ASSISTANT, SESS_ROLE_COUNT };
const char *sess_role_name(enum sess_role r);

struct sess_message {
    int64_t seq;
    enum sess_role role;
    char *text;
    int64_t n_tokens;
    int32_t *tokens;      /* the ids this message put in the KV cache (template
                             tokens included), or NULL when not recorded */
    void *sampler_state;  /* an answer's: the sampler after it, or NULL */
    size_t sampler_state_bytes;
    char *stop_reason;    /* an answer's: why it ended (sess_turn_stats' words; "cut":
                             a remote server's stream broke off), or NULL if not recorded */
};
/* a session's messages in order; free with sess_messages_free */
int sess_messages(struct sess_store *st, int64_t id, struct sess_message **out, int64_t *n);
void sess_messages_free(struct sess_message *m, int64_t n);

/* ==== search ==== */

/* In a hit's snippet, the matched words are between SESS_MARK_ON and
 * SESS_MARK_OFF, and SESS_MARK_CUT stands where the message's text was cut. */
#define SESS_MARK_ON '\x01'
#define SESS_MARK_OFF '\x02'
#define SESS_MARK_CUT '\x03'

struct sess_hit {
    char *session;       /* the session's name */
    int64_t seq;         /* the message's index in the session (0 is the first) */
    int64_t turn;        /* the exchange it is in, from 1 (0: the system prompt) */
    enum sess_role role;
    char *snippet;       /* up to 16 words around the match, marked as above */
    int64_t updated;     /* the session's last update, unix seconds */
};
/*
 * The messages of named sessions that match query, best first (SQLite
 * FTS5's bm25; among equals, the newest first), or, when more than
 * SESS_SEARCH_RANK_MAX match, the newest sessions' first (ranking that
 * many costs more than it tells); at most limit (<= 0: all).
 * query is words, each searched as written and all required (case and
 * diacritics ignored), or with raw, FTS5's query syntax (AND, OR, NOT,
 * "phrases", prefix*, NEAR(...)): a bad one is refused with the reason.
 * Free the hits with sess_hits_free.
 */
#define SESS_SEARCH_RANK_MAX 1000
/* a query of more words or bytes is refused ("bad search query: ...") */
#define SESS_SEARCH_MAX_WORDS 64
#define SESS_SEARCH_MAX_BYTES 2048
int sess_search(struct sess_store *st, const char *query, bool raw, int64_t limit, struct sess_hit **out,
                int64_t *n);
void sess_hits_free(struct sess_hit *h, int64_t n);

struct sess_gc_stats {
    int64_t blocks;       /* block and snapshot files removed */
    int64_t bytes;        /* bytes freed */
};
/* Delete blocks no session uses (the cache of commands without a session
 * goes too), snapshots whose KV no session uses, index rows whose file is
 * gone, and files with no row (leftovers of interrupted writes, files of
 * earlier releases). */
int sess_gc(struct sess_store *st, struct sess_gc_stats *out);
struct sess_forget_stats {
    struct sess_gc_stats gc; /* block files removed, their bytes */
    int64_t sessions;        /* sessions without a name removed (an earlier release's) */
    int64_t tokens;          /* token ids of removed blocks */
    int64_t db_bytes_freed;  /* the database file's shrinking */
};
/* `sessions forget`: everything not reachable from a named session goes -
 * unnamed sessions, blocks no session uses (files, rows, token ids, as
 * sess_gc) - with the deleted rows overwritten and the database compacted,
 * so none of it stays in free pages or the WAL. */
int sess_forget(struct sess_store *st, struct sess_forget_stats *out);
/* Evict least recently used blocks and snapshots until their files take
 * at most max_bytes: what no named session uses first, then named
 * sessions' snapshots but their latest, then their blocks and latest
 * snapshots; the oldest first, and of what was used at one time, blocks
 * deepest first, the latest snapshot last. */
int sess_evict(struct sess_store *st, int64_t max_bytes, struct sess_gc_stats *out);
/* bytes of all block and snapshot files, and the number of block files */
int sess_store_bytes(struct sess_store *st, int64_t *bytes, int64_t *n_blocks);

/* ==== a model's identity ==== */

struct llm_gguf;
struct llm_grammar;
/*
 * The model fingerprint blocks are tied to (version 2): SHA-256 over the
 * GGUF header, all metadata and tensor infos (bytes [0, data offset)), the
 * file size, and every byte of every tensor's data, so two files that differ
 * in any weight never share a block. (Version 1, before schema 5, hashed
 * only 4 KiB samples of each tensor.) It is hashed once per file and
 * remembered by the file's path, device, inode, size, mtime and ctime.
 * Returns SESS_OK or SESS_ERR (the hash could not be computed).
 */
int sess_model_fingerprint(const struct llm_gguf *g, uint8_t out[32]);

/* ==== a conversation: messages, their tokens in a KV cache, answers ====
 *
 * A conversation owns its engine: a local model's context, or a remote
 * engine (struct sess_remote: a server that answers the messages, with no
 * KV cache here).
 * The KV cache holds a prefix of the conversation's tokens: the system span
 * (BOS and the rendered system prompt), then for each exchange the user span
 * (the previous turn's terminator, the user's message, the assistant's
 * opening) and the answer's generated tokens. Before each answer, what the
 * cache lacks is restored from the store's blocks (the longest chain
 * matching the tokens, and the first rows of a block that diverges) and the
 * rest is prefilled; after it, the new blocks are stored. /undo and /retry
 * cut the cache back instead of recomputing. Attached to a session, every
 * finished exchange is saved (its messages with their token ids and the
 * sampler state after it, in one transaction) before the call returns; the
 * KV blocks are written after that, and a failure to write them (a full
 * disk) never fails the turn.
 */

struct sess_conv;
struct sess_conv_params;

/* Called with each piece of the answer as soon as it is complete UTF-8 and
 * cannot be the start of a stop string; non-zero stops generation. */
typedef int (*sess_text_fn)(void *ud, const char *text, size_t n);

/* ==== a remote engine ====
 * A server answers instead of a local model. The messages stay the source
 * of truth here: each turn hands the engine the whole conversation, in the
 * same order and bytes as the turn before plus the new message (what a
 * server's prefix cache needs to hit), and keeps what comes back. No token
 * ids and no KV blocks are kept for its messages (a local model resuming
 * the session tokenizes them). */
struct sess_remote_answer {
    char *text;              /* the answer as far as it came, malloc'd (the conversation
                                takes it); NULL for none */
    size_t len;
    const char *stop_reason; /* static: "stop", "length", "interrupted" (*interrupt or
                                on_text), "cut" (the stream broke off: problem says why) */
    int64_t prompt_tokens;   /* the server's figures; -1 when it did not report them */
    int64_t cached_tokens;   /* prompt tokens it took from its prefix cache */
    int64_t generated_tokens;
    double ttft_ms, prefill_tok_s, decode_tok_s; /* -1 when unknown */
    char problem[1024];      /* why there is no answer, or why it was cut */
};
struct sess_remote {
    /* Answer msgs[0..n) (a system message first if any, then user and
     * assistant in turn, ending with a user message) with p's sampling,
     * n_predict and stop strings, streaming the answer to on_text(text_ud)
     * and ending early when *interrupt becomes non-zero. Returns SESS_OK
     * with an answer in *a (complete, or cut or interrupted after some
     * text), SESS_ERR_INTERRUPTED when interrupted before any text, or
     * SESS_ERR_REMOTE with no answer (a->problem says why). */
    int (*answer)(void *ud, const struct llm_chat_msg *msgs, size_t n, const struct sess_conv_params *p,
                  sess_text_fn on_text, void *text_ud, volatile sig_atomic_t *interrupt,
                  struct sess_remote_answer *a);
    void *ud;                /* borrowed: must outlive the conversation */
};

/* the sampling parameters a session keeps (as JSON, kvchat-files(5)) */
enum sess_param {
    SESS_PARAM_TEMP, SESS_PARAM_TOP_K, SESS_PARAM_TOP_P, SESS_PARAM_MIN_P, SESS_PARAM_REPEAT_PENALTY,
    SESS_PARAM_PRESENCE_PENALTY, SESS_PARAM_REPEAT_LAST_N, SESS_PARAM_SEED, SESS_PARAM_N_PREDICT,
    SESS_PARAM_THINK, /* 1 thinking on, 0 off (think_off) */
    SESS_PARAM_FORMAT, /* the answers' format (p.format_kind, p.format_source): saved as
                          "format": "json" or "off", "schema": TEXT or "grammar": TEXT */
    SESS_PARAM_COUNT
};
/* the JSON key of a parameter ("temp", "top_k", ...) */
const char *sess_param_key(enum sess_param k);

struct sess_conv_params {
    /* the engine: a remote one when remote.answer is set (model, vocab, ctx
     * and tmpl are then unused: NULL), else a local model (borrowed; must
     * outlive the conversation) */
    struct sess_remote remote;
    const struct llm_model *model;
    const struct llm_vocab *vocab;
    struct llm_ctx *ctx;         /* an empty context of model: the conversation takes ownership */
    const char *model_path;      /* recorded with sessions (a remote engine: its store entry) */
    const char *system;          /* system prompt, or NULL */
    enum llm_template tmpl;      /* how messages become text */
    /* a reasoning model whose template can switch thinking off
     * (llm_template_think_off, over tmpl and the model's Jinja) answers
     * without thinking: each answer opens with the template's no-thinking
     * block, fed to the model as the answer's first tokens and kept in its
     * text. Being the answer's, it changes no earlier turn's rendering, so
     * it can differ from turn to turn; a session keeps it as "think" (a
     * parameter like the sampling ones). No effect on other templates or
     * a remote engine. */
    bool think_off;
    struct llm_sampler_params sampling;
    int32_t n_predict;           /* most tokens per answer; <= 0: until the context is full */
    const char *const *stop;     /* more strings that end an answer (NULL-terminated, borrowed;
                                  NULL: none): the answer ends before the first one */
    bool parse_special;          /* special tokens in user text are tokens (--special) */
    bool no_cache;               /* neither read nor write the block store and recompute the
                                    whole conversation each turn (for comparison); an
                                    attached session is then only read */
    int64_t cache_max;           /* bytes of blocks the store keeps (LRU eviction); <= 0: no limit */
    double turn_start_ms;        /* > 0: the first turn's ttft counts from this CLOCK_MONOTONIC
                                    time in ms (run: once its prompt is read, so that opening
                                    the model and session and faulting in weights count);
                                    else each turn's from its own start */
    /* bits 1 << SESS_PARAM_X of sampling and n_predict the user set: a new
     * session keeps them (and only them); over an existing session's own
     * they hold for this conversation without being saved; a set seed
     * re-seeds the sampler from the next answer on */
    uint32_t given;
    /* attaching to a session saved with another model goes on with this
     * one (the history computed again) instead of failing SESS_ERR_MODEL */
    bool switch_model;
    /* every answer a string of this format (copied; NULL: free answers):
     * kind "json" (any JSON value), "schema" (source: a JSON Schema's text)
     * or "grammar" (source: GBNF text), compiled here (a session keeps the
     * text, a parameter like the sampling ones: SESS_PARAM_FORMAT in given
     * when the user gave it). At each step the sampler chooses among the
     * tokens that can continue it, and the end-of-generation token only
     * where it may end. A remote engine refuses a turn under a format. */
    const char *format_kind, *format_source;
    /* speculative decoding: the sources (bits of enum sess_draft; 0: off),
     * the most tokens drafted per pass (<= 0: SESS_DRAFT_MAX_DEFAULT; at
     * most SESS_DRAFT_MAX_LIMIT), and the test mode (enum
     * sess_draft_test). No effect on a remote engine or a model with
     * recurrent layers (its state cannot go back). */
    uint32_t draft;
    int32_t draft_max;
    int32_t draft_test;
};
struct sess_conv_params sess_conv_default_params(void);

/* ==== speculative decoding (docs/speculative.md) ====
 * Drafted tokens are verified in one pass and kept only where the
 * sampler, at that position, picks them itself: the answer is byte for
 * byte the one without drafting; rejected positions never reach the KV
 * blocks. Where drafts come from (bits of sess_conv_params.draft): */
enum sess_draft {
    SESS_DRAFT_OFF = 0,
    SESS_DRAFT_NGRAM = 1 << 0, /* the conversation's own tokens (prompt lookup) */
    SESS_DRAFT_STORE = 1 << 1, /* what followed the same tokens in the block store */
    SESS_DRAFT_ALL = SESS_DRAFT_NGRAM | SESS_DRAFT_STORE,
};
/* the default --draft: off. The issue asks for on "when it measures no
 * slower", and on a quiet Zen 3-class machine (docs/speculative.md) it
 * does not yet: a pass over 2 rows costs 2.15 decode steps, so n-gram
 * drafting on trained text predicts 0.91x and text with nothing to copy
 * measured 0.965x; only a question asked again gains (2.55x) */
#define SESS_DRAFT_DEFAULT SESS_DRAFT_ALL
/* the most tokens drafted per pass by default, and at most */
#define SESS_DRAFT_MAX_DEFAULT 8
#define SESS_DRAFT_MAX_LIMIT (LLM_CTX_MAX_OUTPUTS - 1)
/* For tests: drafts made wrong on purpose, to show that a wrong draft
 * never changes the answer (KVCHAT_DRAFT_TEST=1): every step drafts (the
 * sources' tokens, or made-up ones), and one drafted token in two passes
 * is changed to another. 0: off. */
enum sess_draft_test { SESS_DRAFT_TEST_OFF = 0, SESS_DRAFT_TEST_CORRUPT = 1 };

/* A conversation over store st (borrowed; NULL: nothing on disk). It owns
 * p.ctx from the call on, even when it fails. Free with sess_conv_free.
 * SESS_OK, SESS_ERR, or SESS_ERR_STORE (the store's database failed). */
int sess_conv_init(struct sess_store *st, struct sess_conv_params p, struct sess_conv **out, char *err,
                   size_t err_size);
void sess_conv_free(struct sess_conv *c);
/* borrowed until the next call */
const char *sess_conv_errmsg(const struct sess_conv *c);
/* the engine's context, to read its settings (NULL for a remote engine) */
const struct llm_ctx *sess_conv_ctx(const struct sess_conv *c);
/* does a remote engine answer? */
bool sess_conv_is_remote(const struct sess_conv *c);

struct sess_restore_stats {
    int64_t restored_tokens;  /* rows read from block files */
    int64_t restored_blocks;  /* blocks read (a partial one included) */
    int64_t missing_tokens;   /* not on disk: computed by the next turn */
    int64_t damaged;          /* blocks or snapshots found missing, damaged or foreign (and dropped) */
    int64_t snapshot_pos;     /* a hybrid model's: the position of the recurrent-state snapshot
                                 restored (what is after it is computed by the next turn), -1 none */
    double ms;                /* wall time of the restore */
    char first_problem[512];  /* the first problem, for one line on stderr */
    bool store_failed;        /* the store's database failed (first_problem says how): what
                                 was not restored is computed, but the caller should say so
                                 as a session error */
};

/*
 * Tie the conversation to session `name` of its store. If it exists, its
 * messages replace the conversation's (an unsaved conversation's exchanges
 * are dropped: ask first), the KV cache keeps what the two share and is
 * extended from the blocks there are (rs says what happened; what is
 * missing is computed by the next turn), and the sampler takes the state
 * saved with its last turn. If not, and create is true, it is created with
 * the conversation's messages so far. A session the conversation was in is
 * left (it stays saved). The session stays locked for writing until the
 * conversation leaves it. On failure the conversation is as it was.
 * SESS_ERR_BUSY when the session is in use, SESS_ERR_NOT_FOUND when it does
 * not exist and !create, SESS_ERR_MODEL when it was saved with another
 * model (unless p.switch_model: then its messages are tokenized again for
 * this model, its sampler starts afresh, and rs->first_problem says so).
 * The session's saved sampling parameters replace the conversation's,
 * except those in p.given.
 */
int sess_conv_attach(struct sess_conv *c, const char *name, bool create, struct sess_restore_stats *rs);
/* the session id (-1 when not attached) and name (NULL), borrowed */
int64_t sess_conv_session(const struct sess_conv *c);
const char *sess_conv_session_name(const struct sess_conv *c);
/* rename the attached session (we hold its lock) */
int sess_conv_rename(struct sess_conv *c, const char *new_name);
/* Leave the session (unlocked; it stays saved) and start a new unnamed
 * conversation with system prompt `system` (NULL: none). The KV cache keeps
 * what the new conversation shares with the old one. */
int sess_conv_reset(struct sess_conv *c, const char *system);

/* A remote engine's turn fills prompt_tokens, cached_tokens (what the
 * server took from its prefix cache), prefilled_tokens, generated_tokens,
 * ttft_ms and the rates with the server's figures, -1 where it reported
 * none; the KV and block fields are 0. */
struct sess_turn_stats {
    int64_t prompt_tokens;    /* tokens the answer was conditioned on */
    int64_t cached_tokens;    /* of them, not computed: in memory or restored from blocks */
    int64_t restored_tokens;  /* of the cached, read from block files by this call */
    int64_t restored_blocks;  /* the block files they came from (the last may be partly used) */
    int64_t prefilled_tokens; /* computed this turn (a hybrid model's: from its snapshot on) */
    int64_t snapshot_pos;     /* a hybrid model's: the position of the recurrent-state snapshot
                                 this call resumed from, -1 none (cached_tokens is at most it) */
    int64_t generated_tokens;
    double restore_ms;        /* of the blocks read by this call */
    double ttft_ms;           /* from the call to the first answer token (restore included) */
    double prefill_tok_s, decode_tok_s;
    const char *stop_reason;  /* "stop", "length", "context_full", "interrupted", "cut" (a
                                 remote stream broke off: sess_conv_errmsg says why),
                                 "grammar" (no token can continue p.grammar's text) */
    uint64_t kv_bytes_mem;    /* KV bytes held for the conversation */
    int64_t kv_bytes_disk;    /* bytes of the block files that cover it */
    int64_t blocks_written;   /* block files written after the turn */
    char kv_problem[512];     /* a block found damaged, or one that could not be written
                                 (the turn is saved all the same): one line for stderr */
    bool store_failed;        /* kv_problem is a failure of the store's database (not a
                                 full disk): the turn is saved, but the caller should say
                                 so as a session error */
    /* under a grammar (p.grammar): whether the answer is a whole string of
     * it (false when -n, a full context, an interruption or a stop string
     * cut it, or stop_reason "grammar": no token could continue it), and
     * what masking cost (llm_matcher_stats over this answer) */
    bool grammar, grammar_complete;
    int64_t grammar_masks, grammar_cache_hits, grammar_nodes, grammar_steps;
    /* speculative decoding: tokens drafted and verified, of them accepted
     * (part of generated_tokens), and verification passes */
    int64_t drafted_tokens, accepted_tokens, draft_passes;
};

/* What a conversation is doing before an answer (sess_conv_say, _retry,
 * _attach): reading KV blocks, or computing the prompt. */
enum sess_progress_kind { SESS_PROGRESS_NONE, SESS_PROGRESS_RESTORE, SESS_PROGRESS_PREFILL };
/* The one call that may be made from another thread while a call on c
 * runs: what it is doing, and *done of *total tokens of it (a pass under
 * way counted by its layers' steps), for a progress line. */
enum sess_progress_kind sess_conv_progress(const struct sess_conv *c, int64_t *done, int64_t *total);

/*
 * Add a user message and generate the answer, streaming it to on_text. The
 * answer ends at an end-of-generation token, a stop string of the template,
 * n_predict tokens, a full context, or when *interrupt becomes non-zero
 * (checked between tokens); the partial answer is kept either way, and the
 * KV cache matches it. SESS_ERR_CTX_FULL, with nothing changed, when the
 * message itself does not fit; SESS_ERR_INTERRUPTED, with nothing changed,
 * when *interrupt is set while the message is being prefilled (the engine
 * checks it between chunks of work, milliseconds apart).
 * A remote engine: the answer is the server's; SESS_ERR_INTERRUPTED when
 * interrupted before any text came, SESS_ERR_REMOTE when no answer came
 * (the message says why), both with nothing changed; an answer the
 * server's stream cut short is kept and saved with stop_reason "cut".
 */
int sess_conv_say(struct sess_conv *c, const char *user_text, sess_text_fn on_text, void *ud,
                  volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts);
/* Drop the last answer and generate it again (the sampler moves on, so with
 * temperature it differs). With a remote engine the old answer stays until
 * a new one has come. */
int sess_conv_retry(struct sess_conv *c, sess_text_fn on_text, void *ud,
                    volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts);
/* Drop the last exchange; the sampler goes back to its state after the
 * exchange before. SESS_ERR when there is none. */
int sess_conv_undo(struct sess_conv *c);
/* Drop every exchange, keeping the system prompt. */
int sess_conv_clear(struct sess_conv *c);
/* Drop the oldest n exchanges (to make room); the rest is computed again
 * (or restored, where its blocks are stored). */
int sess_conv_drop_oldest(struct sess_conv *c, int64_t n);
/* Start again with another system prompt (NULL: none); exchanges are dropped. */
int sess_conv_set_system(struct sess_conv *c, const char *system);
/* new sampling parameters (a fresh sampler seeded with p.seed) */
void sess_conv_set_sampling(struct sess_conv *c, struct llm_sampler_params p);
/* The answers' format from now on, as the user's own (/set format, schema,
 * grammar; kind NULL: none, as p.format_kind): the session keeps it (saved
 * now, when attached). SESS_OK; SESS_ERR (the schema or grammar cannot be
 * used: the message says why; nothing changed); SESS_ERR_STORE. */
int sess_conv_keep_format(struct sess_conv *c, const char *kind, const char *source);
/* the answers' format (kind "json", "schema", "grammar"; the source in
 * *source when not NULL), or NULL: free answers. Borrowed until the next
 * change. */
const char *sess_conv_format(const struct sess_conv *c, const char **source);
/* the strings that end an answer from now on (borrowed, as p.stop) */
void sess_conv_set_stop(struct sess_conv *c, const char *const *stop);
/* speculative decoding from now on (as p.draft, p.draft_max): SESS_OK, or
 * SESS_ERR out of memory (the rows of logits a pass keeps; drafting off) */
int sess_conv_set_draft(struct sess_conv *c, uint32_t draft, int32_t draft_max);
/* "off", "ngram", "store" or "on" (both) for a value of p.draft */
const char *sess_draft_name(uint32_t draft);
/* the value of such a name (and "none", "all", "both", "auto"); -1 if none */
int sess_draft_parse(const char *name);
/* most tokens per answer from now on (<= 0: until the context is full) */
void sess_conv_set_n_predict(struct sess_conv *c, int32_t n_predict);
/* Set the parameters named by which (bits 1 << SESS_PARAM_X) from p,
 * n_predict and think_off, as the user's own (/set): the session keeps
 * them (saved now, when attached). The sampler keeps its random state
 * unless the seed is among them (then it is re-seeded). SESS_OK, or
 * SESS_ERR_STORE. */
int sess_conv_keep_params(struct sess_conv *c, struct llm_sampler_params p, int32_t n_predict, bool think_off,
                          uint32_t which);
/* the conversation's parameters; given has the bits of those set, by the
 * user or kept by the session (what a remote engine is sent) */
struct sess_conv_params sess_conv_get_params(const struct sess_conv *c);

int64_t sess_conv_n_messages(const struct sess_conv *c);
/* message i's role and text, borrowed until the next change */
enum sess_role sess_conv_message(const struct sess_conv *c, int64_t i, const char **text);
int64_t sess_conv_n_tokens(const struct sess_conv *c);
/* the conversation's token ids, borrowed until the next change */
const int32_t *sess_conv_tokens(const struct sess_conv *c);
int64_t sess_conv_n_exchanges(const struct sess_conv *c);
/*
 * Would len bytes of text fit as a message with room tokens free (room < 0:
 * what the context has left now)? The one fit check, for chat and run.
 * *n_tokens gets its token count (special: special tokens written in it
 * are tokens); when it is plainly too large (more bytes than room tokens
 * of the vocabulary's longest can stand for) it is not tokenized, and
 * *n_tokens is a lower bound from its bytes, with *plainly true (may be
 * NULL). With n_tokens NULL only that bound is checked (nothing is
 * tokenized: sess_conv_say counts exactly). SESS_OK if it fits, SESS_ERR_CTX_FULL if not, SESS_ERR when out
 * of memory. A remote conversation counts nothing: SESS_OK, *n_tokens -1.
 */
int sess_conv_fits(struct sess_conv *c, const char *text, size_t len, bool special, int64_t room,
                   int64_t *n_tokens, bool *plainly);

#endif
