/*
 * sess-int.h - (internal to sessions/ and its tests) what the files of
 * sessions/ share: the store's lower layer that blocks.c and conv.c build
 * on (store.c is the only file that includes sqlite3.h), and the block
 * cache over an engine context (blocks.c) that conv.c uses.
 */
#ifndef KVCHAT_SESSIONS_SESS_INT_H
#define KVCHAT_SESSIONS_SESS_INT_H

#include "sessions/kvblock.h"
#include "sessions/sess.h"

#include <sys/stat.h>

/* ==== store.c: errors, paths ==== */

/* set the store's message; returns SESS_ERR */
int sess_fail(struct sess_store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* was the last database failure SQLite's "database or disk is full"? */
bool sess_store_full(const struct sess_store *st);
/* The disk is full: give up the store's reserve and evict KV blocks (the
 * least recently used, unpinned first) to make room; the notice says so.
 * SESS_OK if any room was made. */
int sess_store_make_room(struct sess_store *st);
/* the home directory the store is in, borrowed */
const char *sess_store_home(const struct sess_store *st);
/* $home/kv/xx/<hex id>.kvblk into buf; with mkdir, the xx directory is made.
 * SESS_OK or SESS_ERR. */
int sess_block_path(struct sess_store *st, const uint8_t id[32], bool mkdir, char *buf, size_t size);
/* unix milliseconds (the LRU clock) */
int64_t sess_now_ms(void);

/* ==== store.c: models and fingerprints ==== */

/* the models row of a (fingerprint, path) pair (made if new; never
 * re-pointed to another path): its id */
int sess_model_id(struct sess_store *st, const uint8_t fp[32], const char *path, int64_t *id);
/* the models row blocks of a fingerprint are recorded under (the first
 * row with it, whatever its path: the same bytes share their blocks) */
int sess_model_block_id(struct sess_store *st, const uint8_t fp[32], int64_t *id);
/* the sessions of version-1 rows of path whose fingerprint was fp_v1 (a
 * store made before schema 5) moved to row id, the file's version-2 row */
int sess_model_upgrade(struct sess_store *st, const uint8_t fp_v1[32], const char *path, int64_t id);
/* whether a version-1 models row of path is there (1, 0, SESS_ERR): only
 * then is the file's version-1 fingerprint wanted */
int sess_model_v1_exists(struct sess_store *st, const char *path);
/* a fingerprint remembered for a file's identity (path, device, inode,
 * size, mtime, status-change time): 1 and fp, 0 if none, SESS_ERR */
int sess_fingerprint_lookup(struct sess_store *st, const char *path, const struct stat *sb, uint8_t fp[32]);
int sess_fingerprint_remember(struct sess_store *st, const char *path, const struct stat *sb,
                              const uint8_t fp[32]);

/* the store's writer lock, shared (gc takes it exclusive): held from the
 * first block file a turn writes until the session's block list names
 * them, so gc never removes a turn's new blocks. Blocks while gc runs.
 * Release with sess_unlock. */
struct sess_lock;
int sess_writer_lock(struct sess_store *st, struct sess_lock **out);

/* ==== store.c: the block index ==== */

struct sess_block_row {
    uint8_t id[32];
    int64_t n_tokens;
    int64_t bytes;
};

/* How many of ids[0..n) are recorded, counting from the first up to the
 * first that is not: *n_found, with their rows in rows (n entries). */
int sess_blocks_find(struct sess_store *st, const uint8_t (*ids)[32], int64_t n, struct sess_block_row *rows,
                     int64_t *n_found);
/* The recorded block after parent (model model_id, kv type) whose tokens
 * share the longest prefix with tokens[0..n): 1 with the row, *common (>= 1)
 * tokens in common and its row->n_tokens ids in child_tokens (room for
 * SESS_BLOCK_TOKENS), 0 if none shares any, SESS_ERR. */
int sess_block_best_child(struct sess_store *st, const uint8_t parent[32], int64_t model_id, uint32_t kv_type,
                          const int32_t *tokens, int64_t n, struct sess_block_row *row, int64_t *common,
                          int32_t *child_tokens);
/* What followed tokens[0..n) (n < SESS_BLOCK_TOKENS) after parent last
 * time: the most recently used recorded block after parent (model
 * model_id, kv type) whose first n tokens are these and which has more:
 * 1 with its row (bytes 0) and its row->n_tokens ids in child_tokens
 * (room for SESS_BLOCK_TOKENS), 0 if none, SESS_ERR. (Speculative drafts.) */
int sess_block_continue(struct sess_store *st, const uint8_t parent[32], int64_t model_id, uint32_t kv_type,
                        const int32_t *tokens, int64_t n, struct sess_block_row *row, int32_t *child_tokens);
/* Record a block file just written (or known again), used at time
 * last_used (unix ms): idempotent. */
int sess_block_record(struct sess_store *st, const struct kv_block_desc *d, const uint8_t id[32],
                      int64_t model_id, int64_t bytes, int64_t last_used);
/* A block found missing or damaged: its row and file go (rewritten when next computed). */
int sess_block_forget(struct sess_store *st, const uint8_t id[32]);
/* mark blocks as used at time t (unix ms, for the LRU): the blocks of one
 * prompt get one time, so eviction takes a chain from its end */
int sess_blocks_touch(struct sess_store *st, const uint8_t (*ids)[32], int64_t n, int64_t t);

/* ==== store.c: the snapshot index (recurrent state, kvblock.h) ==== */

/* $home/kv/xx/<hex id>.kvsnap into buf (with mkdir, the xx directory made) */
int sess_snap_path(struct sess_store *st, const uint8_t id[32], bool mkdir, char *buf, size_t size);

struct sess_snap_row {
    uint8_t id[32];
    int64_t pos;
    int64_t bytes;
};
/* Record a snapshot file just written (d->id is the id of the block ending
 * at d->pos, parent that block's parent), used at last_used: idempotent. */
int sess_snap_record(struct sess_store *st, const struct kv_snap_desc *d, const uint8_t parent[32], int64_t model_id,
                     int64_t bytes, int64_t last_used);
/* The recorded snapshots of model model_id and kv type inside a block of
 * parent `parent` (their block's parent) at positions in (lo, hi], the
 * deepest first: at most max rows, *n of them. Their ids are to be checked
 * against the caller's tokens (another sequence's block with the same
 * parent has other ids). */
int sess_snaps_in_block(struct sess_store *st, const uint8_t parent[32], int64_t model_id, uint32_t kv_type,
                        int64_t lo, int64_t hi, struct sess_snap_row *rows, int64_t max, int64_t *n);
/* a snapshot found missing or damaged: its row and file go */
int sess_snap_forget(struct sess_store *st, const uint8_t id[32]);
/* mark snapshots as used at time t (unix ms, the LRU clock of the blocks) */
int sess_snaps_touch(struct sess_store *st, const uint8_t (*ids)[32], int64_t n, int64_t t);

/* ==== store.c: sessions ==== */

struct sess_new {
    const char *name;           /* must pass sess_name_check */
    int64_t model_id;
    const char *system_prompt;  /* may be NULL */
    uint32_t kv_type;
};
/* SESS_OK and *id; SESS_ERR ("a session named 'x' already exists", ...) */
int sess_create(struct sess_store *st, const struct sess_new *n, int64_t *id);

/* name (or rename) session id; the caller holds its lock */
int sess_set_name(struct sess_store *st, int64_t id, const char *name);

/* one message as written by sess_write_messages */
struct sess_msg_rec {
    enum sess_role role;
    const char *text;
    const int32_t *tokens;
    int64_t n_tokens;
    const void *state;   /* an answer's sampler state after it, or NULL */
    size_t state_bytes;
    const char *stop_reason; /* an answer's (sess_turn_stats' words), or NULL */
};
/*
 * In one transaction: the session's messages from seq `from` on become
 * m[0..n) (seq from, from+1, ...), its blocks from index first_block on
 * are dropped (the ones before still cover its tokens), and the session
 * records model_id and params (JSON, may be NULL) as its own.
 */
int sess_write_messages(struct sess_store *st, int64_t id, int64_t from, const struct sess_msg_rec *m,
                        int64_t n, int64_t first_block, int64_t model_id, const char *params);
/* the session's sampling parameters become params (JSON) */
int sess_set_params(struct sess_store *st, int64_t id, const char *params);
/* the session's blocks from index `from` on become ids[0..n) (one transaction) */
int sess_set_blocks(struct sess_store *st, int64_t id, int64_t from, const uint8_t (*ids)[32], int64_t n);

/* one writer per session: flock on $home/locks/<id>.lock, released by the
 * kernel if the process dies. Held elsewhere: SESS_ERR_BUSY and "session
 * 'x' is in use by pid N". */
struct sess_lock;
int sess_lock(struct sess_store *st, int64_t id, struct sess_lock **out);
void sess_unlock(struct sess_lock *l);

/* ==== blocks.c: the block cache over one engine context ==== */

struct sess_kv;

/* The block cache of ctx (borrowed), a context of model m, over st
 * (borrowed; may be NULL: then nothing is read or written). Free with
 * sess_kv_free. SESS_OK, SESS_ERR, or SESS_ERR_STORE (the database). */
int sess_kv_init(struct sess_store *st, const struct llm_model *m, struct llm_ctx *ctx, const char *model_path,
                 struct sess_kv **out, char *err, size_t err_size);
void sess_kv_free(struct sess_kv *kv);
/* the model's fingerprint and its models row (after a successful init) */
const uint8_t *sess_kv_fingerprint(const struct sess_kv *kv);
/* the fingerprint the same file has in a context of the other KV variant
 * (phi3: the other RoPE factors; llm_ctx_kv_variant) */
const uint8_t *sess_kv_fingerprint_other(const struct sess_kv *kv);
/* the file's version-1 fingerprint (for sessions of stores before schema
 * 5), of this context's KV variant or (other) of the other */
const uint8_t *sess_kv_fingerprint_v1(struct sess_kv *kv, bool other);
/* (a private store's unknown model is added here once the store is writable;
 * -1 if it cannot be) */
int64_t sess_kv_model_id(struct sess_kv *kv);


struct sess_kv_restore {
    int64_t tokens, blocks;   /* restored */
    int64_t damaged;          /* blocks and snapshots found missing or damaged */
    double ms;
    char first_problem[512];
    /* a hybrid model's: the snapshot the context was set to (-1: none), and
     * how far the stored K/V matched the tokens (what is past the snapshot
     * is computed again: the caller may keep a snapshot there) */
    int64_t snap_pos, kv_reach;
};
/*
 * The context holds tokens[0..n_past); extend it from the store up to at
 * most `limit` positions: the longest chain of recorded blocks that match
 * tokens[0..limit), then the first rows of the child block that shares the
 * most tokens with what follows. A block that is missing or fails its
 * checks is reported (the first in r->first_problem), dropped from the
 * index, and ends the chain. SESS_OK (the context may have grown), or
 * SESS_ERR with the message in the store (the context is then as it was).
 */
int sess_kv_restore(struct sess_kv *kv, const int32_t *tokens, int64_t limit, struct sess_kv_restore *r);

struct sess_kv_save {
    uint8_t (*ids)[32];  /* the ids of the blocks covering tokens[0..n) (the last one
                            maybe partial); borrowed until the next call */
    int64_t n_ids;
    int64_t written;     /* block files written */
    int64_t bytes;       /* bytes of the covering blocks' files */
    int64_t snaps_written; /* snapshot files written (a hybrid model's) */
    char problem[512];   /* why a block could not be written, or "" */
    bool db_failed;      /* problem is a failure of the database (not a full disk) */
};
/*
 * Store the blocks of tokens[0..n) (all in the context) that the store does
 * not have: each full block, then the partial last one. Writing is best
 * effort: a failure (ENOSPC: the disk is full; unpinned blocks are evicted
 * first and the write tried once more) is put in s->problem and the rest is
 * skipped. SESS_OK, or SESS_ERR only for a failure to read the index.
 */
int sess_kv_save(struct sess_kv *kv, const int32_t *tokens, int64_t n, struct sess_kv_save *s);

/* What followed tokens[0..p) the last time the store saw them (for
 * speculative drafts): the tokens after p of the most recently used stored
 * block that continues the chain of tokens' full blocks with tokens' own
 * next ones, then of that block's most recent child, and so on, at most
 * max into out. How many (0: nothing stored follows), or SESS_ERR. */
int64_t sess_kv_continuation(struct sess_kv *kv, const int32_t *tokens, int64_t p, int32_t *out, int64_t max);

/* ==== draft.c: speculative drafts (where they come from, when to draft) ==== */

#define SESS_DRAFT_READ_AHEAD 128 /* tokens of the store's continuation read at once */
/* one answer's drafting: plain data, set up by sess_draft_begin */
struct sess_draft_state {
    uint32_t sources;        /* enum sess_draft bits */
    int32_t max;             /* most tokens a pass drafts */
    int32_t test;            /* enum sess_draft_test */
    int64_t n_vocab;
    int32_t k_cur;           /* the next pass's draft length (adaptive) */
    int32_t fails;           /* passes in a row that accepted nothing */
    int64_t skip_until;      /* no drafts before this position (backing off) */
    struct sess_kv *kv;      /* the store's blocks (NULL: not a source) */
    int32_t sbuf[SESS_DRAFT_READ_AHEAD]; /* the store's continuation ... */
    int64_t sb_pos, sb_n;    /* ... of positions [sb_pos, sb_pos + sb_n) */
    bool sb_dead;            /* the store had nothing: not asked again this answer */
    int64_t lookups;         /* store lookups made */
    uint64_t test_rng;
};
/* kv: the conversation's blocks (used when sources has SESS_DRAFT_STORE;
 * NULL: no store) */
void sess_draft_begin(struct sess_draft_state *d, uint32_t sources, int32_t max, int32_t test, int64_t n_vocab,
                      struct sess_kv *kv);
/* Drafts for positions p, p + 1, ... of a conversation whose tokens are
 * tokens[0..p): how many (at most max) into out; 0 for none. */
int64_t sess_draft_propose(struct sess_draft_state *d, const int32_t *tokens, int64_t p, int64_t max, int32_t *out);
/* a pass drafted k tokens from position p and the sampler took accepted of them */
void sess_draft_result(struct sess_draft_state *d, int64_t p, int64_t k, int64_t accepted);

/* ==== blocks.c: a hybrid model's recurrent-state snapshots ====
 * For a model with recurrent layers (llm_ctx_rstate_size > 0), restoring
 * (sess_kv_restore) ends on a snapshot: the latest at or before where the
 * blocks reach (the context holds only up to it; the rest is computed
 * again), and sess_kv_save also writes the snapshots taken on the tokens it
 * stores, the state at n first among them (when n is the context's n_past).
 * Attention-only models: none of this (take and rewind are a no-op and a
 * plain truncation). */
bool sess_kv_recurrent(const struct sess_kv *kv);
/* Keep the context's state at its n_past (tokens[0..n_past) its tokens)
 * in memory, to be written by the next sess_kv_save if it lies on what
 * that stores. At most SNAP_PENDING_MAX are held: past that they are
 * written at once, or without a store the oldest dropped. */
int sess_kv_snap_take(struct sess_kv *kv, const int32_t *tokens);
/* A buffer of llm_ctx_rstate_size bytes for llm_ctx_decode_capture (NULL
 * when out of memory), to hand back to sess_kv_snap_give. */
uint8_t *sess_kv_snap_buffer(struct sess_kv *kv);
/* The state at position p (<= n_past) of tokens, in state (from
 * sess_kv_snap_buffer, taken back: NULL is allowed), kept as
 * sess_kv_snap_take keeps the context's own. */
int sess_kv_snap_give(struct sess_kv *kv, const int32_t *tokens, int64_t p, uint8_t *state);
/* Cut the context to at most n positions (n <= n_past) with its state
 * valid: an attention-only model to n; a hybrid one to the latest snapshot
 * of tokens at or before n (held in memory, or with use_store the store's;
 * damage reported in r), or to 0 (r->snap_pos: where, -1 none). The caller
 * computes the rest. SESS_OK or SESS_ERR. */
int sess_kv_rewind(struct sess_kv *kv, const int32_t *tokens, int64_t n, bool use_store, struct sess_kv_restore *r);

#endif
