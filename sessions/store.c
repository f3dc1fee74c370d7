/*
 * store.c - the index in SQLite: sessions and their messages (the source of
 * truth), the KV blocks on disk (what each holds, how big, when last used)
 * and which blocks cover each session; schema migrations, gc, LRU eviction,
 * session names and per-session write locks. The only file that includes
 * sqlite3.h.
 *
 * Invariants: the database is in WAL mode with foreign keys on; every
 * change that spans tables happens in one transaction, so a process killed
 * at any moment leaves a consistent index (at worst a block file with no
 * row, which gc removes). A block row exists only for a file that was
 * completely written; a session's block list may name blocks whose file was
 * lost or evicted: they are computed again from the messages' tokens.
 * Every SQLite failure is reported as "database '<path>': <its reason>".
 */
#include "sessions/sess-int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct sess_store {
    sqlite3 *db;
    char home[PATH_MAX];
    char path[PATH_MAX + 16]; /* of kvchat.db */
    char err[1024];
    char notice[PATH_MAX + 256];
    int db_rc;          /* SQLite's code of the last failure */
    bool checked;       /* the whole database was checked after a failure */
    bool read_only;     /* private: nothing is written (PRAGMA query_only) */
    /* statements of the hot paths, prepared once */
    sqlite3_stmt *find_block, *child_le, *child_gt, *snaps_in, *child_cont;
};

struct sess_lock {
    int fd;
};

/* ==== errors and small helpers ==== */

static int vfail(struct sess_store *st, const char *fmt, va_list ap)
{
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    return SESS_ERR;
}

int sess_fail(struct sess_store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(st, fmt, ap);
    va_end(ap);
    return SESS_ERR;
}

/* the first problem PRAGMA quick_check (of table, or of all when NULL)
 * finds, into buf; "" when it finds none (or cannot run) */
static void quick_check(struct sess_store *st, const char *table, char *buf, size_t n)
{
    char sql[96];
    sqlite3_stmt *s = NULL;
    buf[0] = 0;
    snprintf(sql, sizeof sql, table ? "PRAGMA quick_check(%s)" : "PRAGMA quick_check", table);
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        snprintf(buf, n, "%s", sqlite3_errmsg(st->db));
        return;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) { /* the first line that is not a heading */
        const char *t = (const char *)sqlite3_column_text(s, 0);
        if (t && strcmp(t, "ok") && strncmp(t, "*** ", 4)) {
            snprintf(buf, n, "%s", t);
            break;
        }
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        snprintf(buf, n, "%s", sqlite3_errmsg(st->db));
    }
    sqlite3_finalize(s);
}

/* whether a failure of SQLite's (code) came from a full disk: SQLITE_FULL,
 * or an I/O error with ENOSPC as its last system error (sys_errno: that
 * of a handle already closed, or 0 to ask st->db) or the store's file
 * system with no room left (SQLite says "disk I/O error" when growing its
 * WAL index or syncing fails so) */
static bool disk_full(struct sess_store *st, int code, int sys_errno)
{
    code &= 0xff;
    if (code == SQLITE_FULL) /* (SQLite records no errno for it) */
        return true;
    if (code != SQLITE_IOERR && code != SQLITE_CANTOPEN)
        return false;
    if (!sys_errno && st->db)
        sys_errno = sqlite3_system_errno(st->db);
    if (sys_errno == ENOSPC || sys_errno == EDQUOT)
        return true;
    struct statvfs v;
    return statvfs(st->home, &v) == 0 && (v.f_bavail == 0 || (v.f_files > 0 && v.f_favail == 0));
}

/* SQLite's reason for the last failure, in the one form users see; a
 * damaged database is checked once, and the first damage found is said */
static int db_fail(struct sess_store *st)
{
    st->db_rc = sqlite3_errcode(st->db);
    char reason[512];
    snprintf(reason, sizeof reason, "%s", sqlite3_errmsg(st->db));
    if (disk_full(st, st->db_rc, 0)) { /* said as what it is, and room is made for it (sess_store_full) */
        st->db_rc = SQLITE_FULL;
        return sess_fail(st, "database '%s': the disk is full (%s: no space left on device); free some space, "
                             "or a smaller --cache-max keeps fewer KV blocks", st->path, reason);
    }
    if ((st->db_rc == SQLITE_CORRUPT || st->db_rc == SQLITE_NOTADB) && !st->checked) {
        char found[384];
        st->checked = true;
        quick_check(st, NULL, found, sizeof found);
        if (found[0] && strcmp(found, reason))
            return sess_fail(st, "database '%s': %s (PRAGMA quick_check: %s)", st->path, reason, found);
    }
    return sess_fail(st, "database '%s': %s", st->path, reason);
}

bool sess_store_full(const struct sess_store *st) { return st->db_rc == SQLITE_FULL; }

const char *sess_errmsg(const struct sess_store *st) { return st->err; }
const char *sess_store_notice(const struct sess_store *st) { return st->notice[0] ? st->notice : NULL; }
const char *sess_store_home(const struct sess_store *st) { return st->home; }

int64_t sess_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now(void) { return (int64_t)time(NULL); }

static int exec(struct sess_store *st, const char *sql)
{
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return db_fail(st);
    return SESS_OK;
}

static sqlite3_stmt *prep(struct sess_store *st, const char *sql)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        db_fail(st);
        return NULL;
    }
    return s;
}

/* a statement kept for the handle's life, prepared on first use and reset */
static sqlite3_stmt *kept(struct sess_store *st, sqlite3_stmt **slot, const char *sql)
{
    if (!*slot)
        *slot = prep(st, sql);
    else {
        sqlite3_reset(*slot);
        sqlite3_clear_bindings(*slot);
    }
    return *slot;
}

/* step a statement that returns no rows and finalize it */
static int step_done(struct sess_store *st, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    int r = rc == SQLITE_DONE ? SESS_OK : db_fail(st);
    sqlite3_finalize(s);
    return r;
}

static int begin(struct sess_store *st) { return exec(st, "BEGIN IMMEDIATE"); }
static int commit(struct sess_store *st) { return exec(st, "COMMIT"); }
static void rollback(struct sess_store *st) { sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL); }
/* end a transaction: commit if rc is SESS_OK, else roll back; returns the outcome */
static int finish(struct sess_store *st, int rc)
{
    if (rc == SESS_OK)
        return commit(st);
    rollback(st);
    return rc;
}

static char *dup_col(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? strdup((const char *)t) : NULL;
}

static void *dup_blob(sqlite3_stmt *s, int i, size_t *n)
{
    *n = 0;
    if (sqlite3_column_type(s, i) != SQLITE_BLOB)
        return NULL;
    int len = sqlite3_column_bytes(s, i);
    void *p = malloc(len ? (size_t)len : 1);
    if (p) {
        memcpy(p, sqlite3_column_blob(s, i), (size_t)len);
        *n = (size_t)len;
    }
    return p;
}

static void col_id(sqlite3_stmt *s, int i, uint8_t id[32])
{
    memset(id, 0, 32);
    if (sqlite3_column_bytes(s, i) == 32)
        memcpy(id, sqlite3_column_blob(s, i), 32);
}

/* Run s (bound by the caller) and decode each row into a growing array of
 * elements of elt bytes; s is finalized. SESS_OK, or SESS_ERR (the array
 * freed with free_fn). */
typedef void (*row_fn)(sqlite3_stmt *s, void *elt);
static int collect_rows(struct sess_store *st, sqlite3_stmt *s, void *out, int64_t *n, size_t elt, row_fn decode,
                        void (*free_fn)(void *, int64_t))
{
    void **arr = out;
    *arr = NULL;
    *n = 0;
    if (!s)
        return SESS_ERR;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (base_grow(arr, &cap, (size_t)*n + 1, elt)) {
            rc = SQLITE_NOMEM;
            break;
        }
        memset((uint8_t *)*arr + (size_t)*n * elt, 0, elt);
        decode(s, (uint8_t *)*arr + (size_t)(*n)++ * elt);
    }
    int r = rc == SQLITE_DONE ? SESS_OK : rc == SQLITE_NOMEM ? sess_fail(st, "out of memory") : db_fail(st);
    sqlite3_finalize(s);
    if (r) {
        free_fn(*arr, *n);
        *arr = NULL;
        *n = 0;
    }
    return r;
}

/* ==== schema ==== */

/*
 * Forward migrations: migrations[i] takes the schema from version i to
 * i+1, in one transaction with the version bump; after_commit (may be NULL)
 * then runs once outside it (file system work). A new database runs them
 * all. To change the schema, append an entry.
 */
static void drop_segment_files(struct sess_store *st);
static void drop_block_files(struct sess_store *st);
static const struct migration {
    const char *sql;
    void (*after_commit)(struct sess_store *st);
} migrations[] = {
    /* 0 -> 1: the first release (KV as one segment per message) */
    {"CREATE TABLE models("
     "  id INTEGER PRIMARY KEY,"
     "  fingerprint BLOB NOT NULL UNIQUE,"
     "  path TEXT NOT NULL,"
     "  name TEXT);"
     "CREATE TABLE fingerprints("
     "  path TEXT PRIMARY KEY,"
     "  dev INTEGER NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,"
     "  fingerprint BLOB NOT NULL) WITHOUT ROWID;"
     "CREATE TABLE sessions("
     "  id INTEGER PRIMARY KEY,"
     "  name TEXT UNIQUE,"
     "  model_id INTEGER NOT NULL REFERENCES models(id),"
     "  system_prompt TEXT,"
     "  params TEXT,"
     "  kv_type INTEGER NOT NULL,"
     "  sampler_state BLOB,"
     "  created INTEGER NOT NULL,"
     "  updated INTEGER NOT NULL);"
     "CREATE TABLE messages("
     "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
     "  seq INTEGER NOT NULL,"
     "  role INTEGER NOT NULL CHECK (role BETWEEN 0 AND 2),"
     "  text TEXT NOT NULL,"
     "  n_tokens INTEGER NOT NULL,"
     "  tokens BLOB,"
     "  created INTEGER NOT NULL,"
     "  PRIMARY KEY (session_id, seq)) WITHOUT ROWID;"
     "CREATE TABLE segments("
     "  id BLOB PRIMARY KEY, parent BLOB, fingerprint BLOB NOT NULL, kv_type INTEGER NOT NULL,"
     "  pos0 INTEGER NOT NULL, n_tokens INTEGER NOT NULL, bytes INTEGER NOT NULL,"
     "  created INTEGER NOT NULL, last_used INTEGER NOT NULL) WITHOUT ROWID;"
     "CREATE TABLE chain("
     "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
     "  idx INTEGER NOT NULL, segment BLOB NOT NULL, pos0 INTEGER NOT NULL,"
     "  n_tokens INTEGER NOT NULL, last_seq INTEGER NOT NULL,"
     "  PRIMARY KEY (session_id, idx)) WITHOUT ROWID;"
     "CREATE INDEX chain_segment ON chain(segment);",
     NULL},
    /* 1 -> 2: KV blocks for every prompt; sessions are views on them. The
     * sampler state moves to the answer it follows (so a fork at turn N
     * carries the state after turn N); segments are dropped (their files
     * too, after the commit): a session's KV is computed again, once. */
    {"ALTER TABLE messages ADD COLUMN sampler_state BLOB;"
     "UPDATE messages SET sampler_state ="
     "  (SELECT s.sampler_state FROM sessions s WHERE s.id = messages.session_id)"
     "  WHERE role = 2 AND seq = (SELECT max(m.seq) FROM messages m WHERE m.session_id = messages.session_id);"
     "ALTER TABLE sessions DROP COLUMN sampler_state;"
     "DROP TABLE chain;"
     "DROP TABLE segments;"
     /* one row per block file: tokens in the row too, so the block that
      * shares the longest prefix with a prompt is found by the index */
     "CREATE TABLE blocks("
     "  id BLOB NOT NULL UNIQUE,"          /* the content address, 32 bytes */
     "  parent BLOB NOT NULL,"             /* the previous block's id (zeros: the first) */
     "  model_id INTEGER NOT NULL REFERENCES models(id),"
     "  kv_type INTEGER NOT NULL,"
     "  tokens BLOB NOT NULL,"             /* n_tokens i32 LE */
     "  n_tokens INTEGER NOT NULL,"
     "  pos0 INTEGER NOT NULL,"
     "  bytes INTEGER NOT NULL,"           /* of the file */
     "  created INTEGER NOT NULL,"
     "  last_used INTEGER NOT NULL);"      /* unix ms, the LRU clock */
     "CREATE INDEX blocks_children ON blocks(parent, model_id, kv_type, tokens);"
     "CREATE INDEX blocks_lru ON blocks(last_used);"
     /* the blocks that cover a session's tokens: block idx holds positions
      * [idx B, idx B + B); the last may cover more than the session has */
     "CREATE TABLE session_blocks("
     "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
     "  idx INTEGER NOT NULL,"
     "  block BLOB NOT NULL,"
     "  PRIMARY KEY (session_id, idx)) WITHOUT ROWID;"
     "CREATE INDEX session_blocks_block ON session_blocks(block);"
     /* totals kept by triggers: the eviction check is one row */
     "CREATE TABLE block_totals(one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL,"
     "  bytes INTEGER NOT NULL);"
     "INSERT INTO block_totals VALUES(1, 0, 0);"
     "CREATE TRIGGER blocks_insert AFTER INSERT ON blocks BEGIN"
     "  UPDATE block_totals SET n = n + 1, bytes = bytes + NEW.bytes; END;"
     "CREATE TRIGGER blocks_delete AFTER DELETE ON blocks BEGIN"
     "  UPDATE block_totals SET n = n - 1, bytes = bytes - OLD.bytes; END;"
     "CREATE TRIGGER blocks_update AFTER UPDATE OF bytes ON blocks BEGIN"
     "  UPDATE block_totals SET bytes = bytes - OLD.bytes + NEW.bytes; END;",
     drop_segment_files},
    /* 2 -> 3: why an answer ended ("stop", "length", "interrupted", "cut",
     * "context_full"; NULL when not recorded), so that an answer a remote
     * server cut off stays marked as such */
    {"ALTER TABLE messages ADD COLUMN stop_reason TEXT;", NULL},
    /* 3 -> 4: a full-text index of every message (`sessions search`). Its
     * rowid is session_id << 32 | seq (messages has none of its own), and
     * triggers keep it in step with every change to messages: a turn, undo
     * and retry (rows deleted and written again), fork (rows copied), rm
     * (rows deleted by the cascade, which fires triggers too). */
    {"CREATE VIRTUAL TABLE message_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');"
     "INSERT INTO message_fts(rowid, text) SELECT (session_id << 32) | seq, text FROM messages;"
     "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN"
     "  INSERT INTO message_fts(rowid, text) VALUES((NEW.session_id << 32) | NEW.seq, NEW.text); END;"
     "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN"
     "  DELETE FROM message_fts WHERE rowid = (OLD.session_id << 32) | OLD.seq; END;"
     "CREATE TRIGGER messages_fts_update AFTER UPDATE OF session_id, seq, text ON messages BEGIN"
     "  DELETE FROM message_fts WHERE rowid = (OLD.session_id << 32) | OLD.seq;"
     "  INSERT INTO message_fts(rowid, text) VALUES((NEW.session_id << 32) | NEW.seq, NEW.text); END;",
     NULL},
    /* 4 -> 5: (a) the model fingerprint covers every tensor's bytes
     * (version 2; version 1 sampled three 4 KiB windows of each, so a file
     * changed elsewhere kept its fingerprint and resumed with stale KV).
     * Every block was keyed by a version-1 fingerprint: all are dropped
     * (their files after the commit), and each session's KV is computed
     * once more at its next turn - time, never a wrong answer. The
     * remembered fingerprints go; the models rows stay, marked version 1,
     * so that a session is still recognised by its file's version-1
     * fingerprint (and moved to the version-2 row when that file is opened
     * at that path). (b) A models row is a (fingerprint, path) pair: the
     * same bytes opened at another path get a row of their own, and no
     * command re-points the sessions of a row to another path. The table
     * is rebuilt for its new key (foreign keys are switched on after the
     * migrations, so the rebuild keeps every id and reference). */
    {"CREATE TABLE models_new("
     "  id INTEGER PRIMARY KEY,"
     "  fingerprint BLOB NOT NULL,"
     "  path TEXT NOT NULL,"
     "  name TEXT,"
     "  fp_version INTEGER NOT NULL DEFAULT 2,"
     "  UNIQUE (fingerprint, path));"
     "INSERT INTO models_new(id, fingerprint, path, name, fp_version) SELECT id, fingerprint, path, name, 1 FROM models;"
     "DROP TABLE models;"
     "ALTER TABLE models_new RENAME TO models;"
     "DROP TABLE fingerprints;"
     "CREATE TABLE fingerprints("
     "  path TEXT PRIMARY KEY,"
     "  dev INTEGER NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,"
     "  ctime_ns INTEGER NOT NULL, fingerprint BLOB NOT NULL) WITHOUT ROWID;"
     "DELETE FROM session_blocks;"
     "DELETE FROM blocks;",
     drop_block_files},
    /* 5 -> 6: recurrent-state snapshots of hybrid models (kvblock.h), one
     * row per file, beside the blocks: its id is that of the block ending
     * at pos, parent that block's parent, so the snapshots inside a block
     * are found by one index probe. Their bytes count in block_totals (one
     * budget, --cache-max, for both), their number in n_snapshots. */
    {"CREATE TABLE snapshots("
     "  id BLOB NOT NULL UNIQUE,"
     "  parent BLOB NOT NULL,"
     "  model_id INTEGER NOT NULL REFERENCES models(id),"
     "  kv_type INTEGER NOT NULL,"
     "  pos INTEGER NOT NULL,"             /* the state after tokens [0, pos) */
     "  bytes INTEGER NOT NULL,"           /* of the file */
     "  created INTEGER NOT NULL,"
     "  last_used INTEGER NOT NULL);"      /* unix ms, the LRU clock shared with blocks */
     "CREATE INDEX snapshots_parent ON snapshots(parent, model_id, kv_type, pos);"
     "CREATE INDEX snapshots_lru ON snapshots(last_used);"
     "ALTER TABLE block_totals ADD COLUMN n_snapshots INTEGER NOT NULL DEFAULT 0;"
     "CREATE TRIGGER snapshots_insert AFTER INSERT ON snapshots BEGIN"
     "  UPDATE block_totals SET n_snapshots = n_snapshots + 1, bytes = bytes + NEW.bytes; END;"
     "CREATE TRIGGER snapshots_delete AFTER DELETE ON snapshots BEGIN"
     "  UPDATE block_totals SET n_snapshots = n_snapshots - 1, bytes = bytes - OLD.bytes; END;"
     "CREATE TRIGGER snapshots_update AFTER UPDATE OF bytes ON snapshots BEGIN"
     "  UPDATE block_totals SET bytes = bytes - OLD.bytes + NEW.bytes; END;",
     NULL},
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof *migrations))

int sess_schema_version(struct sess_store *st)
{
    sqlite3_stmt *s = prep(st, "PRAGMA user_version");
    int v = -1;
    if (s && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int(s, 0);
    else if (s)
        db_fail(st);
    sqlite3_finalize(s);
    return v;
}

static int migrate(struct sess_store *st)
{
    if (begin(st))
        return SESS_ERR;
    int v = sess_schema_version(st), from = v;
    if (v < 0) {
        rollback(st);
        return SESS_ERR;
    }
    if (v > SCHEMA_VERSION) {
        rollback(st);
        return sess_fail(st, "database '%s': at schema version %d, newer than this kvchat's (%d)", st->path,
                         v, SCHEMA_VERSION);
    }
    for (; v < SCHEMA_VERSION; v++) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v + 1);
        if (exec(st, migrations[v].sql) || exec(st, sql)) {
            rollback(st);
            return SESS_ERR;
        }
    }
    if (commit(st))
        return SESS_ERR;
    /* a new database ran every step, and tables a later step rebuilt left
     * free pages behind: compacted once, so every page belongs to a table
     * that is checked at open (check_tables) */
    if (from == 0 && SCHEMA_VERSION > 0)
        sqlite3_exec(st->db, "VACUUM", NULL, NULL, NULL);
    for (v = from; v < SCHEMA_VERSION; v++)
        if (migrations[v].after_commit && from > 0)
            migrations[v].after_commit(st);
    return SESS_OK;
}

/* Call fn on every entry of the xx fan-out directories of kv/ (never
 * "." or "..": what is done stays inside kv/), with its path and lstat. */
typedef void (*kv_entry_fn)(struct sess_store *st, const char *path, const char *name, const struct stat *sb,
                            void *ud);
static void for_each_kv_entry(struct sess_store *st, kv_entry_fn fn, void *ud)
{
    char dir[PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s/kv", st->home);
    DIR *top = opendir(dir);
    if (!top)
        return;
    struct dirent *e;
    while ((e = readdir(top))) {
        if (strlen(e->d_name) != 2 || !isxdigit((unsigned char)e->d_name[0]) ||
            !isxdigit((unsigned char)e->d_name[1]))
            continue;
        char sub[PATH_MAX + 16];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *d = opendir(sub);
        if (!d)
            continue;
        struct dirent *f;
        while ((f = readdir(d))) {
            if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, ".."))
                continue;
            char path[PATH_MAX + 300];
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            if (lstat(path, &sb) == 0)
                fn(st, path, f->d_name, &sb, ud);
        }
        closedir(d);
    }
    closedir(top);
}

static void drop_file_named(struct sess_store *st, const char *path, const char *name, const struct stat *sb,
                            void *ud)
{
    (void)st;
    if (S_ISREG(sb->st_mode) && strstr(name, ud))
        unlink(path);
}

/* an upgrade that leaves the regular files of kv/ whose name holds suffix
 * unused: they go, and the next open says why */
static void drop_files_named(struct sess_store *st, const char *suffix, const char *why)
{
    for_each_kv_entry(st, drop_file_named, (void *)suffix);
    snprintf(st->notice, sizeof st->notice,
             "the session index '%s' was upgraded: %s, so each session's history is computed once more at "
             "its next turn",
             st->path, why);
}

/* after 1 -> 2: the segment files of the first release */
static void drop_segment_files(struct sess_store *st)
{
    drop_files_named(st, ".kvseg", "KV segments of earlier releases are not used any more");
}

/* after 4 -> 5: the blocks keyed by version-1 fingerprints */
static void drop_block_files(struct sess_store *st)
{
    drop_files_named(st, KV_BLOCK_SUFFIX, "the model fingerprint now covers every byte of the weights");
}

/* The tables that hold what cannot be computed again (and the small
 * ones) are checked at every open, so damage is said before anything is
 * read or written (milliseconds: they are small). The search index's
 * tables go with them: the triggers on messages write there at every turn.
 * The block index is only a cache, and may be large: damage there is found
 * when it is read. The snapshot index is small (a row per state of many
 * megabytes) and unread by attention-only models: checked here too. */
static int check_tables(struct sess_store *st)
{
    static const char *const tables[] = {"models",           "fingerprints",        "sessions",
                                         "messages",         "session_blocks",      "block_totals",
                                         "snapshots",
                                         "message_fts_data", "message_fts_idx",     "message_fts_content",
                                         "message_fts_docsize", "message_fts_config"};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        char found[512];
        quick_check(st, tables[i], found, sizeof found);
        if (found[0] && !strcmp(found, sqlite3_errstr(SQLITE_CORRUPT)))
            return sess_fail(st, "database '%s': %s", st->path, found);
        if (found[0])
            return sess_fail(st, "database '%s': %s (PRAGMA quick_check: %s)", st->path,
                             sqlite3_errstr(SQLITE_CORRUPT), found);
    }
    return SESS_OK;
}

/* ==== a full disk ====
 * The store keeps RESERVE_BYTES of the disk in a file ($home/reserve), so
 * that on a full disk the index can still be opened (SQLite needs room
 * for its WAL and shared memory) and KV blocks evicted to make room. */
#define RESERVE_BYTES ((int64_t)1 << 20)

static void reserve_path(const struct sess_store *st, char *buf, size_t n)
{
    snprintf(buf, n, "%s/reserve", st->home);
}

/* the reserve made if absent: best effort (none on a full disk) */
static void reserve_make(struct sess_store *st)
{
    char path[PATH_MAX + 16];
    struct stat sb;
    reserve_path(st, path, sizeof path);
    if (stat(path, &sb) == 0 && sb.st_size >= RESERVE_BYTES)
        return;
    struct base_atomic a;
    if (base_atomic_open(&a, path, 0600)) {
        base_atomic_abort(&a);
        return;
    }
    static const char zeros[65536];
    for (int64_t done = 0; done < RESERVE_BYTES; done += (int64_t)sizeof zeros) /* written, not sparse: the space is really taken */
        base_atomic_write(&a, zeros, sizeof zeros);
    base_atomic_commit(&a);
}

/* give the reserve up: true if there was one */
static bool reserve_free(struct sess_store *st)
{
    char path[PATH_MAX + 16];
    reserve_path(st, path, sizeof path);
    return unlink(path) == 0;
}

int sess_store_make_room(struct sess_store *st)
{
    int64_t total;
    struct sess_gc_stats gs = {0};
    bool had = reserve_free(st);
    int rc = sess_store_bytes(st, &total, NULL);
    if (rc == SESS_OK && total > 0)
        rc = sess_evict(st, total > 2 * RESERVE_BYTES ? total - 2 * RESERVE_BYTES : 0, &gs);
    if (gs.bytes > 0 || had)
        reserve_make(st);
    char kib[64];
    snprintf(kib, sizeof kib, "%.1f KiB", (double)gs.bytes / 1024);
    snprintf(st->notice, sizeof st->notice,
             "the disk of '%s' is full: %s of KV blocks %s evicted to go on; free space there (or keep "
             "less KV with --cache-max)", st->home, gs.bytes ? kib : "no", gs.bytes ? "were" : "could be");
    return gs.bytes > 0 || had ? SESS_OK : SESS_ERR;
}

/* ==== file modes ====
 * The store holds what users typed and the KV cache of it: its files are
 * 0600 and its folders 0700 whatever the umask. A store an earlier release
 * made with looser modes is tightened once, when it is opened: a folder of
 * the home whose mode lets others in is walked (two levels: kv/xx/ files)
 * and each folder and file in it made private. */

static void tighten_tree(const char *path, int depth)
{
    struct stat sb;
    if (lstat(path, &sb) != 0 || S_ISLNK(sb.st_mode))
        return;
    if (S_ISREG(sb.st_mode)) {
        /* a model added as a hard link is the user's own file too: left as it is */
        if ((sb.st_mode & 077) && sb.st_nlink == 1)
            chmod(path, sb.st_mode & 0700);
        return;
    }
    if (!S_ISDIR(sb.st_mode) || !(sb.st_mode & 077))
        return;
    chmod(path, 0700);
    DIR *d = depth > 0 ? opendir(path) : NULL;
    if (!d)
        return;
    struct dirent *e;
    char sub[PATH_MAX + 300];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub)
            tighten_tree(sub, depth - 1);
    }
    closedir(d);
}

static void tighten(struct sess_store *st)
{
    static const char *const names[] = {"kvchat.db", "kvchat.db-wal", "kvchat.db-shm", "kvchat.db-journal",
                                        "reserve", "kv", "locks", "packed", "models"};
    char path[PATH_MAX + 64];
    struct stat sb;
    if (stat(st->home, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 077))
        chmod(st->home, 0700);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", st->home, names[i]);
        tighten_tree(path, 2);
    }
}

static void count_entry(struct sess_store *st, const char *path, const char *name, const struct stat *sb, void *ud)
{
    (void)st, (void)path, (void)name;
    if (S_ISREG(sb->st_mode))
        ++*(int64_t *)ud;
}

struct sess_store_params sess_store_default_params(void)
{
    struct sess_store_params p = {.create = true};
    return p;
}

/* ==== the store's files ==== */

#define STORE_DB SESS_STORE_DATABASE_NAME
#define STORE_KV SESS_STORE_KV_NAME
/* SQLite's unix VFS opens paths of at most 512 bytes (MAX_PATHNAME, after
 * resolving symbolic links), and the longest file it makes of the database
 * is its journal: a longer home fails with SQLite's bare "unable to open
 * database file", so it is checked first and refused with a reason. */
#define STORE_SQLITE_PATH_MAX 512
#define STORE_HOME_MAX (STORE_SQLITE_PATH_MAX - (int)sizeof "/" STORE_DB "-journal" + 1)

char *sess_store_file(const char *home, enum sess_store_file f)
{
    return base_path_join(home, f == SESS_STORE_FILE_DATABASE ? STORE_DB : STORE_KV);
}

int sess_store_home_check(const char *home, char *err, size_t err_size)
{
    /* the length SQLite will see: the real path if there is one yet */
    char real[PATH_MAX], cwd[PATH_MAX];
    size_t len = strlen(home);
    if (realpath(home, real))
        len = strlen(real);
    else if (home[0] != '/' && getcwd(cwd, sizeof cwd))
        len += strlen(cwd) + 1;
    if (len > STORE_HOME_MAX) {
        snprintf(err, err_size,
                 "cannot use the kvchat home '%s' for sessions: its path is %zu bytes long, and SQLite "
                 "opens no database under a directory longer than %d (set KVCHAT_HOME to a shorter one)",
                 home, len, STORE_HOME_MAX);
        return SESS_ERR;
    }
    return SESS_OK;
}

static int store_open(const char *home, struct sess_store_params p, struct sess_store **out, char *err,
                      size_t err_size);

int sess_store_open(const char *home, struct sess_store_params p, struct sess_store **out, char *err,
                    size_t err_size)
{
    *out = NULL;
    if (home && *home && sess_store_home_check(home, err, err_size))
        return SESS_ERR;
    int rc = store_open(home, p, out, err, err_size);
    /* SQLite's failures name the database; the others say what failed */
    if (rc == SESS_ERR && strncmp(err, "database '", 10)) {
        char *why = strdup(err);
        snprintf(err, err_size, "cannot open the session store: %s", why ? why : "out of memory");
        free(why);
    }
    return rc;
}

static int store_open(const char *home, struct sess_store_params p, struct sess_store **out, char *err,
                      size_t err_size)
{
    *out = NULL;
    if (!home || !*home) {
        snprintf(err, err_size, "no home directory for the store");
        return SESS_ERR;
    }
    if (strlen(home) > PATH_MAX - 100) {
        snprintf(err, err_size, "the home directory '%.64s...' is longer than %d bytes", home, PATH_MAX - 100);
        return SESS_ERR;
    }
    struct sess_store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, err_size, "out of memory");
        return SESS_ERR;
    }
    snprintf(st->home, sizeof st->home, "%s", home);
    snprintf(st->path, sizeof st->path, "%s/" STORE_DB, home);
    struct stat sb;
    if (!p.create && stat(st->path, &sb) != 0) {
        snprintf(err, err_size, "no session index '%s'", st->path);
        free(st);
        return SESS_ERR_NOT_FOUND;
    }
    bool was_there = stat(st->path, &sb) == 0;
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/" STORE_KV, home);
    if (!p.read_only && base_mkdir_p(dir, 0700)) {
        snprintf(err, err_size, "cannot create '%s': %s", dir, strerror(errno));
        free(st);
        return SESS_ERR;
    }
    snprintf(dir, sizeof dir, "%s/locks", home);
    if (!p.read_only)
        base_mkdir_p(dir, 0700);
    /* SQLite opens the index's companions blocking: a FIFO (or anything but
     * a regular file) there would hang the open, so it is refused first */
    static const char *const companions[] = {"", "-journal", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof companions / sizeof *companions; i++) {
        char f[PATH_MAX + 32];
        snprintf(f, sizeof f, "%s%s", st->path, companions[i]);
        if (lstat(f, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            snprintf(err, err_size, "database '%s': '%s' is not a regular file (move it away)", st->path, f);
            free(st);
            return SESS_ERR;
        }
    }
    /* a new database is made 0600 here, whatever the umask: SQLite gives its
     * WAL, shared-memory and journal files the database's mode */
    if (p.create && !p.read_only && stat(st->path, &sb) != 0) {
        int fd = open(st->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
    int flags = SQLITE_OPEN_READWRITE | (p.create ? SQLITE_OPEN_CREATE : 0);
    bool freed = false; /* the reserve was given up to open on a full disk */
    for (;;) {
        st->db_rc = 0;
        int rc = sqlite3_open_v2(st->path, &st->db, flags, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_busy_timeout(st->db, 5000);
            /* foreign keys on after the migrations: a table rebuilt for a
             * new key (4 -> 5) must not cascade or fail on its children */
            if (exec(st, "PRAGMA journal_mode=WAL") || exec(st, "PRAGMA synchronous=NORMAL") || migrate(st) ||
                exec(st, "PRAGMA foreign_keys=ON") || check_tables(st))
                rc = SQLITE_ERROR;
        } else {
            snprintf(st->err, sizeof st->err, "database '%.900s': %s", st->path,
                     st->db ? sqlite3_errmsg(st->db) : "out of memory");
        }
        if (rc == SQLITE_OK)
            break;
        int code = st->db_rc ? st->db_rc & 0xff : st->db ? sqlite3_errcode(st->db) & 0xff : SQLITE_NOMEM;
        int sys_errno = st->db ? sqlite3_system_errno(st->db) : 0; /* (gone with the handle) */
        sqlite3_close(st->db);
        st->db = NULL;
        if (!freed && (code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_CANTOPEN) && reserve_free(st)) {
            freed = true;
            continue;
        }
        if (disk_full(st, code, sys_errno))
            snprintf(err, err_size, "database '%.900s' cannot be opened: the disk is full (no space left on "
                                    "device); free some space", st->path);
        else
            snprintf(err, err_size, "%s", st->err);
        free(st);
        return SESS_ERR;
    }
    if (p.read_only) {
        if (sess_store_set_read_only(st, true)) {
            snprintf(err, err_size, "%s", st->err);
            sess_store_close(st);
            return SESS_ERR;
        }
    } else {
        if (freed)
            sess_store_make_room(st);
        else
            reserve_make(st);
        tighten(st);
    }
    if (!was_there) { /* a store whose index is gone: said, not a silent empty list */
        int64_t n = 0;
        for_each_kv_entry(st, count_entry, &n);
        if (n > 0)
            snprintf(st->notice, sizeof st->notice,
                     "the session index '%.1000s' was missing, so a new, empty one was made: the sessions "
                     "it listed are lost, and the %lld KV block files left in '%.1000s/kv' are not used (the "
                     "next 'kvchat sessions gc' removes them)",
                     st->path, (long long)n, st->home);
    }
    *out = st;
    return SESS_OK;
}

int sess_store_set_read_only(struct sess_store *st, bool on)
{
    if (exec(st, on ? "PRAGMA query_only = ON" : "PRAGMA query_only = OFF"))
        return SESS_ERR;
    st->read_only = on;
    return SESS_OK;
}

bool sess_store_read_only(const struct sess_store *st) { return st && st->read_only; }

void sess_store_close(struct sess_store *st)
{
    if (!st)
        return;
    sqlite3_finalize(st->find_block);
    sqlite3_finalize(st->child_le);
    sqlite3_finalize(st->child_gt);
    sqlite3_finalize(st->child_cont);
    sqlite3_finalize(st->snaps_in);
    sqlite3_close(st->db);
    free(st);
}

/* ==== names ==== */

/* length of the valid UTF-8 sequence at p (a NUL-terminated string), 0 if invalid */
static int utf8_len(const unsigned char *p) { return (int)base_utf8_seq(p, strnlen((const char *)p, 4)); }

/* What keeps code point cp out of a new session name. Names are shown on
 * terminals and typed back: nothing that is a control, white space,
 * invisible, or changes the direction of what follows. */
enum name_char { NAME_OK, NAME_CONTROL, NAME_NEL, NAME_SPACE, NAME_NBSP, NAME_INVISIBLE, NAME_BIDI, NAME_SLASH };
static const char *const name_char_what[] = {
    "", "a control character", "a next-line control (NEL)", "white space", "a no-break space",
    "an invisible (zero-width) character", "a bidirectional control", "'/'",
};

static enum name_char name_char_class(uint32_t cp)
{
    if (cp == 0x85)
        return NAME_NEL;
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
        return NAME_CONTROL;
    if (cp == 0xa0 || cp == 0x202f)
        return NAME_NBSP;
    if (cp == ' ' || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x205f || cp == 0x3000)
        return NAME_SPACE;
    if ((cp >= 0x200b && cp <= 0x200d) || (cp >= 0x2060 && cp <= 0x2064) || cp == 0xfeff || cp == 0x180e ||
        cp == 0xad)
        return NAME_INVISIBLE;
    if (cp == 0x200e || cp == 0x200f || cp == 0x061c || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069))
        return NAME_BIDI;
    return cp == '/' ? NAME_SLASH : NAME_OK;
}

/* the code point of the valid UTF-8 sequence of n bytes at p */
static uint32_t utf8_cp(const unsigned char *p, int n)
{
    return n == 1 ? p[0]
         : n == 2 ? (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f)
         : n == 3 ? (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f)
                  : (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 | (uint32_t)(p[2] & 0x3f) << 6 |
                        (p[3] & 0x3f);
}

/* a refused name as it can be shown in a message: what a terminal would
 * obey or hide (controls, invisible and direction characters, invalid
 * bytes) as U+FFFD; a static buffer */
static const char *name_shown(const char *name)
{
    static char out[4 * 200 + 4];
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && k + 4 < sizeof out;) {
        int n = utf8_len(p);
        enum name_char c = n ? name_char_class(utf8_cp(p, n)) : NAME_CONTROL;
        if (c == NAME_CONTROL || c == NAME_NEL || c == NAME_INVISIBLE || c == NAME_BIDI) {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3;
        } else {
            memcpy(out + k, p, (size_t)n);
            k += (size_t)n;
        }
        p += n ? n : 1;
    }
    out[k] = 0;
    return out;
}

int sess_name_check(const char *name, char *err, size_t err_size)
{
    if (!name || !*name) {
        snprintf(err, err_size, "a session name cannot be empty");
        return SESS_ERR;
    }
    if (strlen(name) > 200) {
        snprintf(err, err_size, "session name too long (at most 200 bytes)");
        return SESS_ERR;
    }
    if (name[0] == '-') {
        snprintf(err, err_size, "bad session name '%s': it cannot start with '-'", name);
        return SESS_ERR;
    }
    for (const unsigned char *p = (const unsigned char *)name; *p;) {
        int n = utf8_len(p);
        if (n == 0) {
            snprintf(err, err_size, "bad session name '%s': it is not valid UTF-8", name_shown(name));
            return SESS_ERR;
        }
        uint32_t cp = utf8_cp(p, n);
        enum name_char c = name_char_class(cp);
        if (c != NAME_OK) {
            snprintf(err, err_size, "bad session name '%s': it holds %s (U+%04X at byte %zu); a name is "
                     "printable text with no white space, '/', control, invisible or direction character",
                     name_shown(name), name_char_what[c], (unsigned)cp, (size_t)(p - (const unsigned char *)name));
            return SESS_ERR;
        }
        p += n;
    }
    return SESS_OK;
}

static int check_name(struct sess_store *st, const char *name)
{
    return sess_name_check(name, st->err, sizeof st->err);
}

/* ==== models and fingerprints ==== */

int sess_model_id(struct sess_store *st, const uint8_t fp[32], const char *path, int64_t *id)
{
    if (st->read_only) { /* private: looked up, not added (-1: the store has nothing of it) */
        sqlite3_stmt *q = prep(st, "SELECT id FROM models WHERE fingerprint = ?1 AND path = ?2");
        if (!q)
            return SESS_ERR;
        sqlite3_bind_blob(q, 1, fp, 32, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, path ? path : "", -1, SQLITE_STATIC);
        int r = sqlite3_step(q);
        *id = r == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
        sqlite3_finalize(q);
        return r == SQLITE_ROW || r == SQLITE_DONE ? SESS_OK : db_fail(st);
    }
    /* a (fingerprint, path) pair: made once, never re-pointed */
    sqlite3_stmt *s = prep(st, "INSERT INTO models(fingerprint, path) VALUES(?1, ?2) "
                               "ON CONFLICT(fingerprint, path) DO NOTHING");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, fp, 32, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, path ? path : "", -1, SQLITE_STATIC);
    if (step_done(st, s))
        return SESS_ERR;
    s = prep(st, "SELECT id FROM models WHERE fingerprint = ?1 AND path = ?2");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, fp, 32, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, path ? path : "", -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? SESS_OK : db_fail(st);
}

int sess_model_block_id(struct sess_store *st, const uint8_t fp[32], int64_t *id)
{
    sqlite3_stmt *s = prep(st, "SELECT min(id) FROM models WHERE fingerprint = ?1");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, fp, 32, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    bool found = rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_INTEGER;
    if (found)
        *id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW && !found && st->read_only) { /* private: a model the store does not know */
        *id = -1;
        return SESS_OK;
    }
    if (rc == SQLITE_ROW && !found)
        return sess_fail(st, "no models row for the fingerprint");
    return rc == SQLITE_ROW ? SESS_OK : db_fail(st);
}

int sess_model_v1_exists(struct sess_store *st, const char *path)
{
    sqlite3_stmt *s = prep(st, "SELECT 1 FROM models WHERE fp_version = 1 AND path = ?1 LIMIT 1");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_text(s, 1, path ? path : "", -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : db_fail(st);
}

int sess_model_upgrade(struct sess_store *st, const uint8_t fp_v1[32], const char *path, int64_t id)
{
    if (!path || !*path || st->read_only || id < 0) /* private: nothing is written */
        return SESS_OK;
    sqlite3_stmt *s = prep(st, "UPDATE sessions SET model_id = ?3 WHERE model_id IN "
                               "(SELECT id FROM models WHERE fp_version = 1 AND fingerprint = ?1 AND path = ?2)");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, fp_v1, 32, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, id);
    return step_done(st, s);
}

/* ?1..?6: path, device, inode, size, mtime and ctime in ns: what says the
 * file is unchanged (blocks.c says why ctime makes that safe) */
static void bind_file_identity(sqlite3_stmt *s, const char *path, const struct stat *sb)
{
    sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (int64_t)sb->st_dev);
    sqlite3_bind_int64(s, 3, (int64_t)sb->st_ino);
    sqlite3_bind_int64(s, 4, (int64_t)sb->st_size);
    sqlite3_bind_int64(s, 5, (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec);
    sqlite3_bind_int64(s, 6, (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec);
}

int sess_fingerprint_lookup(struct sess_store *st, const char *path, const struct stat *sb, uint8_t fp[32])
{
    sqlite3_stmt *s = prep(st, "SELECT fingerprint FROM fingerprints WHERE path = ?1 AND dev = ?2 AND "
                               "ino = ?3 AND size = ?4 AND mtime_ns = ?5 AND ctime_ns = ?6");
    if (!s)
        return SESS_ERR;
    bind_file_identity(s, path, sb);
    int rc = sqlite3_step(s);
    int found = rc == SQLITE_ROW && sqlite3_column_bytes(s, 0) == 32;
    if (found)
        memcpy(fp, sqlite3_column_blob(s, 0), 32);
    int r = rc == SQLITE_ROW || rc == SQLITE_DONE ? found : db_fail(st);
    sqlite3_finalize(s);
    return r;
}

int sess_fingerprint_remember(struct sess_store *st, const char *path, const struct stat *sb,
                              const uint8_t fp[32])
{
    if (st->read_only)
        return SESS_OK;
    sqlite3_stmt *s = prep(st, "INSERT OR REPLACE INTO fingerprints(path, dev, ino, size, mtime_ns, "
                               "ctime_ns, fingerprint) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    if (!s)
        return SESS_ERR;
    bind_file_identity(s, path, sb);
    sqlite3_bind_blob(s, 7, fp, 32, SQLITE_STATIC);
    return step_done(st, s);
}

/* ==== sessions ==== */

int sess_create(struct sess_store *st, const struct sess_new *n, int64_t *id)
{
    if (check_name(st, n->name))
        return SESS_ERR;
    sqlite3_stmt *s = prep(st, "INSERT INTO sessions(name, model_id, system_prompt, kv_type, created, updated) "
                               "VALUES(?1, ?2, ?3, ?4, ?5, ?5)");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_text(s, 1, n->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, n->model_id);
    if (n->system_prompt)
        sqlite3_bind_text(s, 3, n->system_prompt, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, (int)n->kv_type);
    sqlite3_bind_int64(s, 5, now());
    int rc = sqlite3_step(s);
    if (rc == SQLITE_CONSTRAINT && sqlite3_extended_errcode(st->db) == SQLITE_CONSTRAINT_UNIQUE) {
        sqlite3_finalize(s);
        return sess_fail(st, "a session named '%s' already exists", n->name);
    }
    int r = rc == SQLITE_DONE ? SESS_OK : db_fail(st);
    sqlite3_finalize(s);
    if (r)
        return r;
    *id = sqlite3_last_insert_rowid(st->db);
    return SESS_OK;
}

int sess_find(struct sess_store *st, const char *name, int64_t *id)
{
    sqlite3_stmt *s = prep(st, "SELECT id FROM sessions WHERE name = ?1");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW)
        return SESS_OK;
    if (rc != SQLITE_DONE)
        return db_fail(st);
    sess_fail(st, "no session '%s'", name);
    return SESS_ERR_NOT_FOUND;
}

int sess_peek(struct sess_store *st, const char *name, struct sess_info *out)
{
    int64_t id;
    if (!st)
        return SESS_ERR_NOT_FOUND;
    int rc = sess_find(st, name, &id);
    return rc ? rc : sess_get(st, id, out);
}

int sess_latest(struct sess_store *st, char *name, size_t size)
{
    struct sess_info *list = NULL;
    int64_t n = 0;
    if (!st)
        return SESS_ERR_NOT_FOUND;
    if (sess_list(st, &list, &n))
        return SESS_ERR;
    int rc = n > 0 ? SESS_OK : SESS_ERR_NOT_FOUND;
    if (n > 0)
        snprintf(name, size, "%s", list[0].name);
    sess_list_free(list, n);
    return rc;
}

#define INFO_SELECT                                                                          \
    "SELECT s.id, s.name, m.path, m.fingerprint, s.system_prompt, s.params, s.kv_type,"      \
    " (SELECT count(*) FROM messages WHERE session_id = s.id),"                             \
    " (SELECT count(*) FROM messages WHERE session_id = s.id AND role = 1),"                \
    " (SELECT coalesce(sum(n_tokens), 0) FROM messages WHERE session_id = s.id),"           \
    " (SELECT coalesce(sum(b.bytes), 0) FROM session_blocks sb JOIN blocks b ON b.id = sb.block" \
    "    WHERE sb.session_id = s.id),"                                                      \
    " s.created, s.updated, m.fp_version, s.model_id FROM sessions s JOIN models m ON m.id = s.model_id "

static void info_row(sqlite3_stmt *s, void *elt)
{
    struct sess_info *o = elt;
    memset(o, 0, sizeof *o);
    o->id = sqlite3_column_int64(s, 0);
    o->name = dup_col(s, 1);
    o->model_path = dup_col(s, 2);
    col_id(s, 3, o->fingerprint);
    o->system_prompt = dup_col(s, 4);
    o->params = dup_col(s, 5);
    o->kv_type = (uint32_t)sqlite3_column_int(s, 6);
    o->n_messages = sqlite3_column_int64(s, 7);
    o->n_turns = sqlite3_column_int64(s, 8);
    o->n_tokens = sqlite3_column_int64(s, 9);
    o->kv_bytes = sqlite3_column_int64(s, 10);
    o->created = sqlite3_column_int64(s, 11);
    o->updated = sqlite3_column_int64(s, 12);
    o->fingerprint_version = sqlite3_column_int(s, 13);
    o->model_id = sqlite3_column_int64(s, 14);
}

int sess_get(struct sess_store *st, int64_t id, struct sess_info *out)
{
    sqlite3_stmt *s = prep(st, INFO_SELECT "WHERE s.id = ?1");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        info_row(s, out);
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW)
        return SESS_OK;
    if (rc != SQLITE_DONE)
        return db_fail(st);
    sess_fail(st, "no session with id %" PRId64, id);
    return SESS_ERR_NOT_FOUND;
}

void sess_info_free(struct sess_info *o)
{
    BASE_FREE(o->name, o->model_path, o->system_prompt, o->params);
    memset(o, 0, sizeof *o);
}

static void list_free(void *p, int64_t n) { sess_list_free(p, n); }

int sess_list(struct sess_store *st, struct sess_info **out, int64_t *n)
{
    return collect_rows(st, prep(st, INFO_SELECT "WHERE s.name IS NOT NULL ORDER BY s.updated DESC, s.id DESC"),
                        out, n, sizeof **out, info_row, list_free);
}

void sess_list_free(struct sess_info *list, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        sess_info_free(&list[i]);
    free(list);
}

int sess_model_users(struct sess_store *st, const char *model_path, struct sess_info **out, int64_t *n)
{
    char want[PATH_MAX], got[PATH_MAX];
    bool real = realpath(model_path, want) != NULL;
    if (sess_list(st, out, n))
        return SESS_ERR;
    int64_t k = 0;
    for (int64_t i = 0; i < *n; i++) {
        const char *mp = (*out)[i].model_path;
        bool same = mp && (real && realpath(mp, got) ? !strcmp(got, want) : !strcmp(mp, model_path));
        if (same)
            (*out)[k++] = (*out)[i];
        else
            sess_info_free(&(*out)[i]);
    }
    *n = k;
    return SESS_OK;
}

/* find name and take its lock: SESS_OK with both, or the failure */
static int find_locked(struct sess_store *st, const char *name, int64_t *id, struct sess_lock **l)
{
    int rc = sess_find(st, name, id);
    return rc ? rc : sess_lock(st, *id, l);
}

int sess_available(struct sess_store *st, const char *name)
{
    int64_t id;
    struct sess_lock *l;
    int rc = find_locked(st, name, &id, &l);
    if (rc == SESS_OK)
        sess_unlock(l);
    return rc;
}

/* UPDATE the name of session id (caller holds its lock or need not) */
static int set_name(struct sess_store *st, int64_t id, const char *name)
{
    sqlite3_stmt *s = prep(st, "UPDATE sessions SET name = ?1, updated = ?3 WHERE id = ?2");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, id);
    sqlite3_bind_int64(s, 3, now());
    int r = sqlite3_step(s);
    int ext = sqlite3_extended_errcode(st->db);
    int rc = r == SQLITE_DONE ? SESS_OK
             : ext == SQLITE_CONSTRAINT_UNIQUE ? sess_fail(st, "a session named '%s' already exists", name)
                                               : db_fail(st);
    sqlite3_finalize(s);
    return rc;
}

int sess_set_name(struct sess_store *st, int64_t id, const char *name)
{
    return check_name(st, name) ? SESS_ERR : set_name(st, id, name);
}

int sess_rename(struct sess_store *st, const char *old_name, const char *new_name)
{
    int64_t id;
    struct sess_lock *l;
    if (check_name(st, new_name))
        return SESS_ERR;
    int rc = find_locked(st, old_name, &id, &l);
    if (rc)
        return rc;
    rc = set_name(st, id, new_name);
    sess_unlock(l);
    return rc;
}

int sess_rm(struct sess_store *st, const char *name)
{
    int64_t id;
    struct sess_lock *l;
    int rc = find_locked(st, name, &id, &l);
    if (rc)
        return rc;
    sqlite3_stmt *s = prep(st, "DELETE FROM sessions WHERE id = ?1");
    if (s)
        sqlite3_bind_int64(s, 1, id);
    rc = s ? step_done(st, s) : SESS_ERR;
    sess_unlock(l);
    return rc;
}

/* one int64 from a query with ?1 = a (and ?2 = b): SESS_OK, or SESS_ERR */
static int query_int(struct sess_store *st, const char *sql, int64_t a, int64_t b, int64_t *out)
{
    sqlite3_stmt *s = prep(st, sql);
    if (!s)
        return SESS_ERR;
    sqlite3_bind_int64(s, 1, a);
    if (sqlite3_bind_parameter_count(s) > 1)
        sqlite3_bind_int64(s, 2, b);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? SESS_OK : db_fail(st);
}

int sess_fork(struct sess_store *st, const char *src, const char *dst, int64_t at_turn)
{
    int64_t sid;
    if (check_name(st, dst))
        return SESS_ERR;
    int rc = sess_find(st, src, &sid);
    if (rc)
        return rc;
    if (begin(st))
        return SESS_ERR;
    int64_t turns = 0, limit = INT64_MAX, kept_tokens = 0;
    rc = query_int(st, "SELECT count(*) FROM messages WHERE session_id = ?1 AND role = 1", sid, 0, &turns);
    if (rc == SESS_OK && at_turn > turns)
        rc = sess_fail(st, "session '%s' has %" PRId64 " turn%s: --at %" PRId64 " is past its end", src, turns,
                       turns == 1 ? "" : "s", at_turn);
    /* the last message kept: the one before the (at_turn+1)-th user message */
    if (rc == SESS_OK && at_turn >= 0 && at_turn < turns)
        rc = query_int(st, "SELECT seq - 1 FROM messages WHERE session_id = ?1 AND role = 1 "
                           "ORDER BY seq LIMIT 1 OFFSET ?2", sid, at_turn, &limit);
    if (rc == SESS_OK)
        rc = query_int(st, "SELECT coalesce(sum(n_tokens), 0) FROM messages WHERE session_id = ?1 AND seq <= ?2",
                       sid, limit, &kept_tokens);
    static const char *const copy[] = {
        "INSERT INTO sessions(name, model_id, system_prompt, params, kv_type, created, updated) "
        "SELECT ?1, model_id, system_prompt, params, kv_type, ?4, ?4 FROM sessions WHERE id = ?2",
        "INSERT INTO messages(session_id, seq, role, text, n_tokens, tokens, sampler_state, stop_reason, created) "
        "SELECT ?5, seq, role, text, n_tokens, tokens, sampler_state, stop_reason, created FROM messages "
        "WHERE session_id = ?2 AND seq <= ?3",
        /* the blocks that cover the tokens kept */
        "INSERT INTO session_blocks(session_id, idx, block) SELECT ?5, idx, block FROM session_blocks "
        "WHERE session_id = ?2 AND idx * ?6 < ?7",
    };
    int64_t did = 0;
    for (int i = 0; i < 3 && rc == SESS_OK; i++) {
        sqlite3_stmt *s = prep(st, copy[i]);
        if (!s) {
            rc = SESS_ERR;
            break;
        }
        int np = sqlite3_bind_parameter_count(s); /* bind only the parameters each has */
        if (np >= 1) sqlite3_bind_text(s, 1, dst, -1, SQLITE_STATIC);
        if (np >= 2) sqlite3_bind_int64(s, 2, sid);
        if (np >= 3) sqlite3_bind_int64(s, 3, limit);
        if (np >= 4) sqlite3_bind_int64(s, 4, now());
        if (np >= 5) sqlite3_bind_int64(s, 5, did);
        if (np >= 6) sqlite3_bind_int64(s, 6, SESS_BLOCK_TOKENS);
        if (np >= 7) sqlite3_bind_int64(s, 7, kept_tokens);
        int r = sqlite3_step(s);
        if (r == SQLITE_CONSTRAINT && i == 0 && sqlite3_extended_errcode(st->db) == SQLITE_CONSTRAINT_UNIQUE)
            rc = sess_fail(st, "a session named '%s' already exists", dst);
        else if (r != SQLITE_DONE)
            rc = db_fail(st);
        sqlite3_finalize(s);
        if (i == 0)
            did = sqlite3_last_insert_rowid(st->db);
    }
    return finish(st, rc);
}

/* ==== messages ==== */

const char *sess_role_name(enum sess_role r)
{
    static const char *const names[SESS_ROLE_COUNT] = {"system", "user", "assistant"};
    return (unsigned)r < SESS_ROLE_COUNT ? names[r] : "?";
}

/* run sql binding ?1 = id, ?2 = v */
static int exec_id(struct sess_store *st, const char *sql, int64_t id, int64_t v)
{
    sqlite3_stmt *s = prep(st, sql);
    if (!s)
        return SESS_ERR;
    sqlite3_bind_int64(s, 1, id);
    if (sqlite3_bind_parameter_count(s) > 1)
        sqlite3_bind_int64(s, 2, v);
    return step_done(st, s);
}

int sess_write_messages(struct sess_store *st, int64_t id, int64_t from, const struct sess_msg_rec *m,
                        int64_t n, int64_t first_block, int64_t model_id, const char *params)
{
    if (begin(st))
        return SESS_ERR;
    int rc = exec_id(st, "DELETE FROM messages WHERE session_id = ?1 AND seq >= ?2", id, from);
    sqlite3_stmt *s = rc ? NULL
                         : prep(st, "INSERT INTO messages(session_id, seq, role, text, n_tokens, tokens, "
                                    "sampler_state, created, stop_reason) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
    if (!rc && !s)
        rc = SESS_ERR;
    for (int64_t i = 0; i < n && rc == SESS_OK; i++) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, from + i);
        sqlite3_bind_int(s, 3, (int)m[i].role);
        sqlite3_bind_text(s, 4, m[i].text, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, m[i].n_tokens);
        if (m[i].tokens && m[i].n_tokens > 0)
            sqlite3_bind_blob64(s, 6, m[i].tokens, (sqlite3_uint64)m[i].n_tokens * 4, SQLITE_STATIC);
        if (m[i].state)
            sqlite3_bind_blob64(s, 7, m[i].state, m[i].state_bytes, SQLITE_STATIC);
        sqlite3_bind_int64(s, 8, now());
        if (m[i].stop_reason)
            sqlite3_bind_text(s, 9, m[i].stop_reason, -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = db_fail(st);
    }
    sqlite3_finalize(s);
    if (rc == SESS_OK)
        rc = exec_id(st, "DELETE FROM session_blocks WHERE session_id = ?1 AND idx >= ?2", id, first_block);
    if (rc == SESS_OK) {
        s = prep(st, "UPDATE sessions SET updated = ?2, model_id = ?3, params = coalesce(?4, params) "
                     "WHERE id = ?1");
        if (s) {
            sqlite3_bind_int64(s, 1, id);
            sqlite3_bind_int64(s, 2, now());
            sqlite3_bind_int64(s, 3, model_id);
            if (params)
                sqlite3_bind_text(s, 4, params, -1, SQLITE_STATIC);
        }
        rc = s ? step_done(st, s) : SESS_ERR;
    }
    return finish(st, rc);
}

int sess_set_params(struct sess_store *st, int64_t id, const char *params)
{
    sqlite3_stmt *s = prep(st, "UPDATE sessions SET params = ?2, updated = ?3 WHERE id = ?1");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, params, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now());
    return step_done(st, s);
}

static void message_row(sqlite3_stmt *s, void *elt)
{
    struct sess_message *m = elt;
    m->seq = sqlite3_column_int64(s, 0);
    m->role = (enum sess_role)sqlite3_column_int(s, 1);
    m->text = dup_col(s, 2);
    m->n_tokens = sqlite3_column_int64(s, 3);
    int nb = sqlite3_column_bytes(s, 4);
    if (nb > 0 && nb == m->n_tokens * 4 && (m->tokens = malloc((size_t)nb)))
        memcpy(m->tokens, sqlite3_column_blob(s, 4), (size_t)nb);
    m->sampler_state = dup_blob(s, 5, &m->sampler_state_bytes);
    m->stop_reason = dup_col(s, 6);
    if (!m->text)
        m->text = strdup("");
}

static void messages_free(void *m, int64_t n) { sess_messages_free(m, n); }

int sess_messages(struct sess_store *st, int64_t id, struct sess_message **out, int64_t *n)
{
    sqlite3_stmt *s = prep(st, "SELECT seq, role, text, n_tokens, tokens, sampler_state, stop_reason FROM messages "
                               "WHERE session_id = ?1 ORDER BY seq");
    if (s)
        sqlite3_bind_int64(s, 1, id);
    return collect_rows(st, s, out, n, sizeof **out, message_row, messages_free);
}

void sess_messages_free(struct sess_message *m, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        BASE_FREE(m[i].text, m[i].tokens, m[i].sampler_state, m[i].stop_reason);
    free(m);
}

/* ==== search ==== */

/* The FTS5 query for words: each word a quoted phrase (so "C++", "it's"
 * or "NEAR" are searched as written), all of them required. */
static char *plain_query(const char *words)
{
    size_t n = strlen(words);
    char *q = malloc(3 * n + 8), *o = q;
    if (!q)
        return NULL;
    for (const char *p = words; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (o > q)
            *o++ = ' ';
        *o++ = '"';
        for (; *p && !isspace((unsigned char)*p); p++) {
            if (*p == '"')
                *o++ = '"';
            *o++ = *p;
        }
        *o++ = '"';
    }
    *o = 0;
    return q;
}

static void hit_row(sqlite3_stmt *s, void *elt)
{
    struct sess_hit *h = elt;
    h->session = dup_col(s, 0);
    h->seq = sqlite3_column_int64(s, 1);
    h->role = (enum sess_role)sqlite3_column_int(s, 2);
    h->snippet = dup_col(s, 3);
    h->turn = sqlite3_column_int64(s, 4);
    h->updated = sqlite3_column_int64(s, 5);
    if (!h->session)
        h->session = strdup("");
    if (!h->snippet)
        h->snippet = strdup("");
}

static void hits_free(void *h, int64_t n) { sess_hits_free(h, n); }

int sess_search(struct sess_store *st, const char *query, bool raw, int64_t limit, struct sess_hit **out,
                int64_t *n)
{
    *out = NULL;
    *n = 0;
    /* bounded: each word is a scan of the index, and 500 of them took 29 s */
    int64_t words = 0;
    for (const char *p = query; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (*p)
            words++;
        while (*p && !isspace((unsigned char)*p))
            p++;
    }
    if (words > SESS_SEARCH_MAX_WORDS || strlen(query) > SESS_SEARCH_MAX_BYTES)
        return sess_fail(st, "bad search query: it has %lld words and %zu bytes, more than the %d words or "
                             "%d bytes a search takes", (long long)words, strlen(query), SESS_SEARCH_MAX_WORDS,
                         SESS_SEARCH_MAX_BYTES);
    char *q = raw ? strdup(query) : plain_query(query);
    if (!q)
        return sess_fail(st, "out of memory");
    if (!*q) {
        free(q);
        return sess_fail(st, "nothing to search for");
    }
    /* The best matches first (FTS5's bm25 rank), taken from the index with
     * the limit before anything is joined; then the session and turn of
     * each (sessions without a name are not listed). Ranking costs a
     * computation per match (~0.1 s for 20,000), and among that many, for
     * a word most messages have, it says little: over RANK_MAX matches the
     * newest sessions' come first. */
    int64_t total = -1;
    sqlite3_stmt *s = prep(st, "SELECT count(*) FROM message_fts WHERE message_fts MATCH ?1");
    if (s) {
        sqlite3_bind_text(s, 1, q, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW)
            total = sqlite3_column_int64(s, 0);
        else if (raw && sqlite3_errcode(st->db) == SQLITE_ERROR) /* FTS5 refused the query's syntax */
            sess_fail(st, "bad search query '%s': %s", query, sqlite3_errmsg(st->db));
        else
            db_fail(st);
        sqlite3_finalize(s);
        s = NULL;
    }
    if (total >= 0) {
        bool ranked = total <= SESS_SEARCH_RANK_MAX;
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "SELECT s.name, h.rid & 4294967295, m.role, h.snip,"
                 " (SELECT count(*) FROM messages u WHERE u.session_id = m.session_id AND u.role = 1"
                 "   AND u.seq <= m.seq),"
                 " s.updated"
                 " FROM (SELECT rowid AS rid, %s AS r, snippet(message_fts, 0, char(1), char(2), char(3), 16) AS snip"
                 "       FROM message_fts WHERE message_fts MATCH ?1 ORDER BY %s LIMIT ?2) h"
                 " JOIN messages m ON m.session_id = h.rid >> 32 AND m.seq = h.rid & 4294967295"
                 " JOIN sessions s ON s.id = m.session_id"
                 " WHERE s.name IS NOT NULL ORDER BY h.r, h.rid DESC",
                 ranked ? "rank" : "0", ranked ? "rank" : "rowid DESC");
        s = prep(st, sql);
    }
    if (s) {
        sqlite3_bind_text(s, 1, q, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 2, limit > 0 ? limit : -1);
    }
    free(q);
    int rc = collect_rows(st, s, out, n, sizeof **out, hit_row, hits_free);
    if (rc && strstr(st->err, "fts5: syntax error"))
        sess_fail(st, "bad search query '%s': %s", query, strstr(st->err, "fts5: "));
    return rc;
}

void sess_hits_free(struct sess_hit *h, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        free(h[i].session);
        free(h[i].snippet);
    }
    free(h);
}

/* ==== the block index ==== */

static int kv_file_path(struct sess_store *st, const uint8_t id[32], bool make_dir, const char *suffix, char *buf,
                        size_t size);
int sess_block_path(struct sess_store *st, const uint8_t id[32], bool make_dir, char *buf, size_t size)
{
    return kv_file_path(st, id, make_dir, KV_BLOCK_SUFFIX, buf, size);
}

int sess_snap_path(struct sess_store *st, const uint8_t id[32], bool make_dir, char *buf, size_t size)
{
    return kv_file_path(st, id, make_dir, KV_SNAP_SUFFIX, buf, size);
}

static int kv_file_path(struct sess_store *st, const uint8_t id[32], bool make_dir, const char *suffix, char *buf,
                        size_t size)
{
    char hex[65];
    llm_hex(id, 32, hex);
    int n = snprintf(buf, size, "%s/kv/%.2s", st->home, hex);
    if (n < 0 || (size_t)n >= size)
        return sess_fail(st, "path too long");
    if (make_dir && mkdir(buf, 0700) != 0 && errno != EEXIST)
        return sess_fail(st, "cannot create '%s': %s", buf, strerror(errno));
    n = snprintf(buf, size, "%s/kv/%.2s/%s%s", st->home, hex, hex, suffix);
    return n < 0 || (size_t)n >= size ? sess_fail(st, "path too long") : SESS_OK;
}

int sess_blocks_find(struct sess_store *st, const uint8_t (*ids)[32], int64_t n, struct sess_block_row *rows,
                     int64_t *n_found)
{
    *n_found = 0;
    for (int64_t i = 0; i < n; i++) {
        sqlite3_stmt *s = kept(st, &st->find_block, "SELECT n_tokens, bytes FROM blocks WHERE id = ?1");
        if (!s)
            return SESS_ERR;
        sqlite3_bind_blob(s, 1, ids[i], 32, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW)
            return db_fail(st);
        memcpy(rows[i].id, ids[i], 32);
        rows[i].n_tokens = sqlite3_column_int64(s, 0);
        rows[i].bytes = sqlite3_column_int64(s, 1);
        (*n_found)++;
    }
    if (st->find_block)
        sqlite3_reset(st->find_block);
    return SESS_OK;
}

/* tokens two blobs of i32 share from the start */
static int64_t common_tokens(const void *a, int64_t na, const void *b, int64_t nb)
{
    int64_t n = na < nb ? na : nb, k = 0;
    while (k < n && !memcmp((const uint8_t *)a + 4 * k, (const uint8_t *)b + 4 * k, 4))
        k++;
    return k;
}

int sess_block_best_child(struct sess_store *st, const uint8_t parent[32], int64_t model_id, uint32_t kv_type,
                          const int32_t *tokens, int64_t n, struct sess_block_row *row, int64_t *common,
                          int32_t *child_tokens)
{
    /* In memcmp order the blob sharing the longest prefix with the query
     * is next to where the query would go: the last one <= it or the
     * first one > it. Two index probes, whatever the number of children. */
    static const char *const sql[2] = {
        "SELECT id, n_tokens, bytes, tokens FROM blocks WHERE parent = ?1 AND model_id = ?2 AND "
        "kv_type = ?3 AND tokens <= ?4 ORDER BY tokens DESC LIMIT 1",
        "SELECT id, n_tokens, bytes, tokens FROM blocks WHERE parent = ?1 AND model_id = ?2 AND "
        "kv_type = ?3 AND tokens > ?4 ORDER BY tokens LIMIT 1",
    };
    sqlite3_stmt **slot[2] = {&st->child_le, &st->child_gt};
    *common = 0;
    for (int q = 0; q < 2; q++) {
        sqlite3_stmt *s = kept(st, slot[q], sql[q]);
        if (!s)
            return SESS_ERR;
        sqlite3_bind_blob(s, 1, parent, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, model_id);
        sqlite3_bind_int(s, 3, (int)kv_type);
        sqlite3_bind_blob64(s, 4, tokens, (sqlite3_uint64)n * 4, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            int64_t nt = sqlite3_column_bytes(s, 3) / 4;
            int64_t k = common_tokens(sqlite3_column_blob(s, 3), nt, tokens, n);
            if (k > *common && nt == sqlite3_column_int64(s, 1) && nt <= SESS_BLOCK_TOKENS) {
                *common = k;
                memcpy(child_tokens, sqlite3_column_blob(s, 3), (size_t)nt * 4);
                col_id(s, 0, row->id);
                row->n_tokens = nt;
                row->bytes = sqlite3_column_int64(s, 2);
            }
        } else if (rc != SQLITE_DONE) {
            return db_fail(st);
        }
        sqlite3_reset(s);
    }
    return *common > 0;
}

int sess_block_continue(struct sess_store *st, const uint8_t parent[32], int64_t model_id, uint32_t kv_type,
                        const int32_t *tokens, int64_t n, struct sess_block_row *row, int32_t *child_tokens)
{
    /* The children whose tokens begin with ours are the blobs in [ours,
     * ours with its last byte plus one): the index's range (a token's last
     * byte, its most significant, is at most 0x7f, so it never carries).
     * With no tokens of ours: all of them, below x'ff'. */
    uint8_t lo[4 * SESS_BLOCK_TOKENS + 1], hi[4 * SESS_BLOCK_TOKENS + 1];
    if (n < 0 || n >= SESS_BLOCK_TOKENS)
        return 0;
    size_t nb = (size_t)n * 4;
    memcpy(lo, tokens, nb);
    memcpy(hi, tokens, nb);
    size_t hb = nb;
    if (nb == 0)
        hi[hb++] = 0xff;
    else
        hi[nb - 1]++;
    /* (lo is a pointer even for no bytes: binding NULL would bind SQL NULL) */
    sqlite3_stmt *s = kept(st, &st->child_cont,
                           "SELECT id, n_tokens, tokens FROM blocks WHERE parent = ?1 AND model_id = ?2 AND "
                           "kv_type = ?3 AND tokens >= ?4 AND tokens < ?5 AND n_tokens > ?6 "
                           "ORDER BY last_used DESC, n_tokens DESC LIMIT 1");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, parent, 32, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, model_id);
    sqlite3_bind_int(s, 3, (int)kv_type);
    sqlite3_bind_blob(s, 4, lo, (int)nb, SQLITE_STATIC);
    sqlite3_bind_blob(s, 5, hi, (int)hb, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, n);
    int rc = sqlite3_step(s), found = 0;
    if (rc == SQLITE_ROW) {
        int64_t nt = sqlite3_column_bytes(s, 2) / 4;
        /* checked: a row of the right size whose first tokens are ours */
        if (nt == sqlite3_column_int64(s, 1) && nt > n && nt <= SESS_BLOCK_TOKENS &&
            !memcmp(sqlite3_column_blob(s, 2), tokens, nb)) {
            memcpy(child_tokens, sqlite3_column_blob(s, 2), (size_t)nt * 4);
            col_id(s, 0, row->id);
            row->n_tokens = nt;
            row->bytes = 0;
            found = 1;
        }
    } else if (rc != SQLITE_DONE) {
        return db_fail(st);
    }
    sqlite3_reset(s);
    return found;
}

int sess_block_record(struct sess_store *st, const struct kv_block_desc *d, const uint8_t id[32],
                      int64_t model_id, int64_t bytes, int64_t last_used)
{
    sqlite3_stmt *s = prep(st, "INSERT INTO blocks(id, parent, model_id, kv_type, tokens, n_tokens, pos0, bytes, "
                               "created, last_used) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
                               "ON CONFLICT(id) DO UPDATE SET last_used = excluded.last_used, "
                               "bytes = excluded.bytes");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, id, 32, SQLITE_STATIC);
    sqlite3_bind_blob(s, 2, d->parent, 32, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, model_id);
    sqlite3_bind_int(s, 4, (int)d->kv_type);
    sqlite3_bind_blob64(s, 5, d->tokens, (sqlite3_uint64)d->n_tokens * 4, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, d->n_tokens);
    sqlite3_bind_int64(s, 7, d->pos0);
    sqlite3_bind_int64(s, 8, bytes);
    sqlite3_bind_int64(s, 9, now());
    sqlite3_bind_int64(s, 10, last_used);
    return step_done(st, s);
}

/* ---- what blocks and snapshots share: a row keyed by id in their table,
 * and a file named by it ---- */

/* the row of id, by sql ("DELETE FROM TABLE WHERE id = ?1") */
static int delete_id_row(struct sess_store *st, const char *sql, const uint8_t id[32])
{
    sqlite3_stmt *s = prep(st, sql);
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, id, 32, SQLITE_STATIC);
    return step_done(st, s);
}

static int delete_block_row(struct sess_store *st, const uint8_t id[32])
{
    return delete_id_row(st, "DELETE FROM blocks WHERE id = ?1", id);
}

static int delete_snap_row(struct sess_store *st, const uint8_t id[32])
{
    return delete_id_row(st, "DELETE FROM snapshots WHERE id = ?1", id);
}

/* the row (delete_row), then the file (suffix) */
static int forget_id(struct sess_store *st, int (*delete_row)(struct sess_store *, const uint8_t *),
                     const char *suffix, const uint8_t id[32])
{
    char path[PATH_MAX + 128];
    if (delete_row(st, id))
        return SESS_ERR;
    if (kv_file_path(st, id, false, suffix, path, sizeof path) == SESS_OK)
        unlink(path);
    return SESS_OK;
}

/* last_used = t on the rows of ids, by sql ("UPDATE TABLE SET last_used =
 * ?2 WHERE id = ?1"), in one transaction */
static int touch_ids(struct sess_store *st, const char *sql, const uint8_t (*ids)[32], int64_t n, int64_t t)
{
    if (n == 0)
        return SESS_OK;
    if (begin(st))
        return SESS_ERR;
    sqlite3_stmt *s = prep(st, sql);
    int rc = s ? SESS_OK : SESS_ERR;
    for (int64_t i = 0; i < n && rc == SESS_OK; i++) {
        sqlite3_reset(s);
        sqlite3_bind_blob(s, 1, ids[i], 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, t);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = db_fail(st);
    }
    sqlite3_finalize(s);
    return finish(st, rc);
}

int sess_block_forget(struct sess_store *st, const uint8_t id[32])
{
    return forget_id(st, delete_block_row, KV_BLOCK_SUFFIX, id);
}

int sess_blocks_touch(struct sess_store *st, const uint8_t (*ids)[32], int64_t n, int64_t t)
{
    if (st->read_only) /* private: not even when a block was last used */
        return SESS_OK;
    return touch_ids(st, "UPDATE blocks SET last_used = ?2 WHERE id = ?1", ids, n, t);
}

int sess_set_blocks(struct sess_store *st, int64_t id, int64_t from, const uint8_t (*ids)[32], int64_t n)
{
    if (begin(st))
        return SESS_ERR;
    int rc = exec_id(st, "DELETE FROM session_blocks WHERE session_id = ?1 AND idx >= ?2", id, from);
    sqlite3_stmt *s = rc ? NULL : prep(st, "INSERT INTO session_blocks(session_id, idx, block) VALUES(?1, ?2, ?3)");
    if (!rc && !s)
        rc = SESS_ERR;
    for (int64_t i = 0; i < n && rc == SESS_OK; i++) {
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, from + i);
        sqlite3_bind_blob(s, 3, ids[i], 32, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = db_fail(st);
    }
    sqlite3_finalize(s);
    return finish(st, rc);
}

/* ==== the snapshot index ==== */

int sess_snap_record(struct sess_store *st, const struct kv_snap_desc *d, const uint8_t parent[32], int64_t model_id,
                     int64_t bytes, int64_t last_used)
{
    sqlite3_stmt *s = prep(st, "INSERT INTO snapshots(id, parent, model_id, kv_type, pos, bytes, created, last_used) "
                               "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO UPDATE SET "
                               "last_used = excluded.last_used, bytes = excluded.bytes");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, d->id, 32, SQLITE_STATIC);
    sqlite3_bind_blob(s, 2, parent, 32, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, model_id);
    sqlite3_bind_int(s, 4, (int)d->kv_type);
    sqlite3_bind_int64(s, 5, (int64_t)d->pos);
    sqlite3_bind_int64(s, 6, bytes);
    sqlite3_bind_int64(s, 7, now());
    sqlite3_bind_int64(s, 8, last_used);
    return step_done(st, s);
}

int sess_snaps_in_block(struct sess_store *st, const uint8_t parent[32], int64_t model_id, uint32_t kv_type,
                        int64_t lo, int64_t hi, struct sess_snap_row *rows, int64_t max, int64_t *n)
{
    *n = 0;
    sqlite3_stmt *s = kept(st, &st->snaps_in,
                           "SELECT id, pos, bytes FROM snapshots WHERE parent = ?1 AND model_id = ?2 AND "
                           "kv_type = ?3 AND pos > ?4 AND pos <= ?5 ORDER BY pos DESC LIMIT ?6");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, parent, 32, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, model_id);
    sqlite3_bind_int(s, 3, (int)kv_type);
    sqlite3_bind_int64(s, 4, lo);
    sqlite3_bind_int64(s, 5, hi);
    sqlite3_bind_int64(s, 6, max);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && *n < max) {
        col_id(s, 0, rows[*n].id);
        rows[*n].pos = sqlite3_column_int64(s, 1);
        rows[*n].bytes = sqlite3_column_int64(s, 2);
        (*n)++;
    }
    int r = rc == SQLITE_DONE || rc == SQLITE_ROW ? SESS_OK : db_fail(st);
    sqlite3_reset(s);
    return r;
}

int sess_snap_forget(struct sess_store *st, const uint8_t id[32])
{
    return forget_id(st, delete_snap_row, KV_SNAP_SUFFIX, id);
}

int sess_snaps_touch(struct sess_store *st, const uint8_t (*ids)[32], int64_t n, int64_t t)
{
    return touch_ids(st, "UPDATE snapshots SET last_used = ?2 WHERE id = ?1", ids, n, t);
}

/* ==== housekeeping ==== */

int sess_store_bytes(struct sess_store *st, int64_t *bytes, int64_t *n_blocks)
{
    sqlite3_stmt *s = prep(st, "SELECT bytes, n FROM block_totals");
    if (!s)
        return SESS_ERR;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *bytes = sqlite3_column_int64(s, 0);
        if (n_blocks)
            *n_blocks = sqlite3_column_int64(s, 1);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? SESS_OK : db_fail(st);
}

struct victim {
    uint8_t id[32];
    int64_t bytes;
    int kind; /* 0 a block, 1 a snapshot */
};

/* Delete the rows of the blocks and snapshots s selects (columns: id,
 * bytes, kind: 0 a block, 1 a snapshot), stopping
 * once *total is at most budget (budget < 0: all of them); then their
 * files. Rows first, in one transaction (a crash between leaves files with
 * no row, which the next gc removes). */
static int delete_selected(struct sess_store *st, sqlite3_stmt *s, int64_t budget, int64_t *total,
                           struct sess_gc_stats *out)
{
    if (!s)
        return SESS_ERR;
    struct victim *v = NULL;
    int64_t nv = 0;
    size_t cap = 0;
    int rc;
    while ((budget < 0 || *total > budget) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (base_grow((void **)&v, &cap, (size_t)nv + 1, sizeof *v)) {
            rc = SQLITE_NOMEM;
            break;
        }
        col_id(s, 0, v[nv].id);
        v[nv].bytes = sqlite3_column_int64(s, 1);
        v[nv].kind = sqlite3_column_int(s, 2);
        *total -= v[nv].bytes;
        nv++;
    }
    if (budget >= 0 && *total <= budget)
        rc = SQLITE_DONE;
    int r = rc == SQLITE_DONE ? SESS_OK : rc == SQLITE_NOMEM ? sess_fail(st, "out of memory") : db_fail(st);
    sqlite3_finalize(s);
    if (r == SESS_OK && nv > 0 && (r = begin(st)) == SESS_OK) {
        for (int64_t i = 0; i < nv && r == SESS_OK; i++)
            r = v[i].kind ? delete_snap_row(st, v[i].id) : delete_block_row(st, v[i].id);
        r = finish(st, r);
    }
    for (int64_t i = 0; i < nv && r == SESS_OK; i++) {
        char path[PATH_MAX + 128];
        if (kv_file_path(st, v[i].id, false, v[i].kind ? KV_SNAP_SUFFIX : KV_BLOCK_SUFFIX, path, sizeof path) ==
                SESS_OK &&
            unlink(path) == 0) {
            out->blocks++;
            out->bytes += v[i].bytes;
        }
    }
    free(v);
    return r;
}

/* the id in a file name "<hex id><suffix>": 0 for a block's, 1 for a
 * snapshot's, -1 for anything else */
static int parse_hex_id(const char *name, uint8_t id[32])
{
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (!isxdigit((unsigned char)name[2 * i]) || !isxdigit((unsigned char)name[2 * i + 1]) ||
            sscanf(name + 2 * i, "%2x", &v) != 1)
            return -1;
        id[i] = (uint8_t)v;
    }
    return strcmp(name + 64, KV_BLOCK_SUFFIX) == 0 ? 0 : strcmp(name + 64, KV_SNAP_SUFFIX) == 0 ? 1 : -1;
}

/* is a block with this id recorded? 1, 0, or SESS_ERR */
static int block_known(struct sess_store *st, const uint8_t id[32])
{
    struct sess_block_row row;
    int64_t n;
    if (sess_blocks_find(st, (const uint8_t(*)[32])id, 1, &row, &n))
        return SESS_ERR;
    return n == 1;
}

/* is a snapshot with this id recorded? 1, 0, or SESS_ERR */
static int snap_known(struct sess_store *st, const uint8_t id[32])
{
    sqlite3_stmt *s = prep(st, "SELECT 1 FROM snapshots WHERE id = ?1");
    if (!s)
        return SESS_ERR;
    sqlite3_bind_blob(s, 1, id, 32, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int r = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : db_fail(st);
    sqlite3_finalize(s);
    return r;
}

/* rows whose file is gone (or is not a regular file): forgotten (kind 0
 * the blocks', 1 the snapshots') */
static int forget_lost_rows(struct sess_store *st, int kind)
{
    uint8_t (*ids)[32] = NULL;
    int64_t n = 0;
    size_t cap = 0;
    sqlite3_stmt *s = prep(st, kind ? "SELECT id FROM snapshots" : "SELECT id FROM blocks");
    if (!s)
        return SESS_ERR;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        uint8_t id[32];
        char path[PATH_MAX + 128];
        struct stat sb;
        col_id(s, 0, id);
        if (kv_file_path(st, id, false, kind ? KV_SNAP_SUFFIX : KV_BLOCK_SUFFIX, path, sizeof path) == SESS_OK &&
            (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))) {
            if (base_grow((void **)&ids, &cap, (size_t)n + 1, sizeof *ids)) {
                rc = SQLITE_NOMEM;
                break;
            }
            memcpy(ids[n++], id, 32);
        }
    }
    int r = rc == SQLITE_DONE ? SESS_OK : rc == SQLITE_NOMEM ? sess_fail(st, "out of memory") : db_fail(st);
    sqlite3_finalize(s);
    for (int64_t i = 0; i < n && r == SESS_OK; i++)
        r = kind ? delete_snap_row(st, ids[i]) : delete_block_row(st, ids[i]);
    free(ids);
    return r;
}

/* a temporary file "<name>.tmp.PID" whose writer is gone */
static bool dead_writers_temp(const char *name)
{
    const char *tmp = strstr(name, ".tmp.");
    if (!tmp)
        return false;
    long pid = strtol(tmp + 5, NULL, 10);
    return pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* a file in kv/ with no row (left by a crash between write and record), a
 * temporary file of a dead writer, a file of an earlier release, or
 * anything else that is not a block (a FIFO, an empty directory): removed */
static void remove_stray(struct sess_store *st, const char *path, const char *name, const struct stat *sb, void *ud)
{
    struct sess_gc_stats *out = ud;
    uint8_t id[32];
    bool stray;
    int kind;
    if (strstr(name, ".tmp."))
        stray = dead_writers_temp(name);
    else
        stray = !S_ISREG(sb->st_mode) || (kind = parse_hex_id(name, id)) < 0 ||
                (kind ? snap_known(st, id) : block_known(st, id)) == 0;
    if (stray && (S_ISDIR(sb->st_mode) ? rmdir(path) == 0 : unlink(path) == 0)) {
        out->blocks += S_ISREG(sb->st_mode);
        out->bytes += S_ISREG(sb->st_mode) ? sb->st_size : 0;
    }
}

/* a lock held on fd (sess_unlock closes it): SESS_OK with *out, or the
 * failure said and fd closed */
static int lock_made(struct sess_store *st, int fd, struct sess_lock **out)
{
    struct sess_lock *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return sess_fail(st, "out of memory");
    }
    l->fd = fd;
    *out = l;
    return SESS_OK;
}

/*
 * gc and the turns that write blocks: a turn writes a block's file, then
 * its row, and only then the session's list of blocks that covers it; in
 * between, the block is "used by no session" and its file may have no row
 * yet, which is what gc removes. So writers hold $home/locks/gc.lock shared
 * from the first block file they write to the session's list
 * (sess_writer_lock), and gc holds it exclusive for its whole run (rows,
 * then files): gc waits for the turns saving now, and a turn that starts
 * saving waits for gc. The lock is flock(2)'s: a process killed holding it
 * lets it go.
 */
static int gc_lock(struct sess_store *st, int how, struct sess_lock **out)
{
    char path[PATH_MAX + 64];
    *out = NULL;
    snprintf(path, sizeof path, "%s/locks/gc.lock", st->home);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return sess_fail(st, "cannot open '%s': %s", path, strerror(errno));
    int r;
    while ((r = flock(fd, how)) != 0 && errno == EINTR)
        ;
    if (r != 0) {
        int e = errno;
        close(fd);
        return sess_fail(st, "cannot lock '%s': %s", path, strerror(e));
    }
    return lock_made(st, fd, out);
}

int sess_writer_lock(struct sess_store *st, struct sess_lock **out) { return gc_lock(st, LOCK_SH, out); }

int sess_gc(struct sess_store *st, struct sess_gc_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t total = 0;
    struct sess_lock *l;
    if (gc_lock(st, LOCK_EX, &l))
        return SESS_ERR;
    if (forget_lost_rows(st, 0) || forget_lost_rows(st, 1) ||
        delete_selected(st, prep(st, "SELECT id, bytes, 0 FROM blocks WHERE id NOT IN "
                                     "(SELECT block FROM session_blocks)"),
                        -1, &total, out) ||
        delete_selected(st, prep(st, "SELECT n.id, n.bytes, 1 FROM snapshots n WHERE n.id NOT IN "
                                     "(SELECT block FROM session_blocks) AND n.parent NOT IN "
                                     "(SELECT block FROM session_blocks) AND NOT (n.parent = zeroblob(32) AND "
                                     "EXISTS (SELECT 1 FROM session_blocks sb JOIN blocks b ON b.id = sb.block "
                                     "WHERE b.parent = zeroblob(32) AND b.model_id = n.model_id))"),
                        -1, &total, out)) {
        sess_unlock(l);
        return SESS_ERR;
    }
    for_each_kv_entry(st, remove_stray, out);
    sess_unlock(l);
    return SESS_OK;
}

/* one number of a query of one row, one column */
static int query_i64(struct sess_store *st, const char *sql, int64_t *v)
{
    sqlite3_stmt *s = prep(st, sql);
    if (!s)
        return SESS_ERR;
    int rc = sqlite3_step(s);
    *v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? SESS_OK : db_fail(st);
}

/*
 * Forget what no named session holds: sessions without a name, then, as
 * sess_gc, every block (row, token ids, file) no session uses. Deleted
 * rows are overwritten (secure_delete), the search index rebuilt, the
 * database compacted (VACUUM) and its WAL emptied, so nothing of them stays
 * in the database's free pages either.
 */
int sess_forget(struct sess_store *st, struct sess_forget_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t page, pages_before = 0, pages_after = 0, unused_tokens = 0, n_unnamed = 0;
    if (exec(st, "PRAGMA secure_delete = ON") || query_i64(st, "PRAGMA page_size", &page) ||
        query_i64(st, "PRAGMA page_count", &pages_before) ||
        query_i64(st, "SELECT count(*) FROM sessions WHERE name IS NULL", &n_unnamed))
        return SESS_ERR;
    if (n_unnamed > 0 && exec(st, "DELETE FROM sessions WHERE name IS NULL"))
        return SESS_ERR;
    if (query_i64(st, "SELECT coalesce(sum(n_tokens), 0) FROM blocks WHERE id NOT IN "
                      "(SELECT block FROM session_blocks)", &unused_tokens))
        return SESS_ERR;
    if (sess_gc(st, &out->gc))
        return SESS_ERR;
    if (exec(st, "INSERT INTO message_fts(message_fts) VALUES('rebuild')") || exec(st, "VACUUM") ||
        exec(st, "PRAGMA wal_checkpoint(TRUNCATE)") || query_i64(st, "PRAGMA page_count", &pages_after))
        return SESS_ERR;
    out->sessions = n_unnamed;
    out->tokens = unused_tokens;
    out->db_bytes_freed = pages_before > pages_after ? (pages_before - pages_after) * page : 0;
    return SESS_OK;
}

int sess_evict(struct sess_store *st, int64_t max_bytes, struct sess_gc_stats *out)
{
    memset(out, 0, sizeof *out);
    int64_t total;
    if (sess_store_bytes(st, &total, NULL))
        return SESS_ERR;
    if (total <= max_bytes)
        return SESS_OK;
    /* Blocks and snapshots in one order. Tiers: what no named session
     * uses (0); a named session's snapshots but its latest (1); its blocks
     * and its latest snapshot, the one at the end of its last block (2).
     * Within a tier the oldest first; of what was used at one time, the
     * deepest first (what ends last; a snapshot before the block it ends),
     * so what stays is still a chain from the start with the snapshots
     * along it; but in the last tier blocks before snapshots, so that a
     * named session's latest snapshot goes last of all. */
    return delete_selected(st,
                           prep(st, "WITH named AS (SELECT sb.session_id, sb.idx, sb.block FROM session_blocks sb "
                                    "JOIN sessions s ON s.id = sb.session_id WHERE s.name IS NOT NULL), "
                                    "latest AS (SELECT block FROM named n WHERE n.idx = (SELECT max(idx) FROM "
                                    "session_blocks x WHERE x.session_id = n.session_id)) "
                                    "SELECT * FROM (SELECT b.id, b.bytes, 0 AS kind, 2 * EXISTS (SELECT 1 FROM named WHERE "
                                    "named.block = b.id) AS tier, b.last_used AS t, b.pos0 + b.n_tokens AS pos FROM blocks b "
                                    "UNION ALL "
                                    "SELECT n.id, n.bytes, 1, CASE WHEN n.id IN (SELECT block FROM latest) THEN 2 "
                                    "WHEN n.id IN (SELECT block FROM named) OR n.parent IN (SELECT block FROM "
                                    "named) THEN 1 ELSE 0 END, n.last_used, n.pos FROM snapshots n) "
                                    "ORDER BY tier, t, CASE tier WHEN 2 THEN kind ELSE 0 END, pos DESC, kind DESC"),
                           max_bytes, &total, out);
}

/* ==== locks ==== */

int sess_lock(struct sess_store *st, int64_t id, struct sess_lock **out)
{
    char path[PATH_MAX + 64];
    *out = NULL;
    snprintf(path, sizeof path, "%s/locks/%" PRId64 ".lock", st->home, id);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0)
        return sess_fail(st, "cannot open '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char buf[32] = "";
        ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        long pid = r > 0 ? strtol(buf, NULL, 10) : 0;
        struct sess_info info;
        bool named = sess_get(st, id, &info) == SESS_OK;
        const char *name = named && info.name ? info.name : "?";
        if (e == EWOULDBLOCK && pid > 0)
            sess_fail(st, "session '%s' is in use by pid %ld", name, pid);
        else if (e == EWOULDBLOCK) /* the holder has not written its pid yet */
            sess_fail(st, "session '%s' is in use by another kvchat process", name);
        else
            sess_fail(st, "cannot lock session '%s': %s", name, strerror(e));
        if (named)
            sess_info_free(&info);
        return e == EWOULDBLOCK ? SESS_ERR_BUSY : SESS_ERR;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return sess_fail(st, "cannot write '%s': %s", path, strerror(e));
    }
    return lock_made(st, fd, out);
}

void sess_unlock(struct sess_lock *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}
