/*
 * store.c - the session index in SQLite: sessions, their messages (the
 * source of truth), the KV segments on disk and each session's chain of
 * them, plus gc, LRU eviction and per-session write locks. The only file
 * that includes sqlite3.h.
 *
 * Invariants: the database is in WAL mode with foreign keys on; every
 * change that spans tables happens in one transaction, so a process killed
 * at any moment leaves a consistent index (at worst a segment file with no
 * row, which gc removes). A segment row exists only for a file that was
 * completely written; chain entries may name segments whose file was lost
 * or evicted: those are rebuilt from the messages.
 */
#include "sessions/sess.h"
#include "sessions/kvseg.h"
#include "models/mdl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct sess_store {
    sqlite3 *db;
    char home[4096];
    char err[1024];
};

struct sess_lock {
    int fd;
};

/* ==== errors and small helpers ==== */

static int fail(struct sess_store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int db_fail(struct sess_store *st, const char *what)
{
    return fail(st, "%s: %s", what, sqlite3_errmsg(st->db));
}

/* for the other files of sessions/ */
int sess_kv_fail(struct sess_store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
    return -1;
}

const char *sess_errmsg(const struct sess_store *st)
{
    return st->err;
}

static int exec(struct sess_store *st, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fail(st, "database error: %s", msg ? msg : sqlite3_errmsg(st->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static sqlite3_stmt *prep(struct sess_store *st, const char *sql)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        db_fail(st, "database error");
        return NULL;
    }
    return s;
}

/* step a statement that returns no rows and finalize it: 0, or -1 with
 * "what: <SQLite's reason>" */
static int step_done(struct sess_store *st, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : db_fail(st, what);
}

static int begin(struct sess_store *st) { return exec(st, "BEGIN IMMEDIATE"); }
static int commit(struct sess_store *st) { return exec(st, "COMMIT"); }
static void rollback(struct sess_store *st) { sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL); }

static char *dup_col(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? strdup((const char *)t) : NULL;
}

static int mkdirs(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *q = p + 1; *q; q++) {
        if (*q == '/') {
            *q = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return -1;
            *q = '/';
        }
    }
    return mkdir(p, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Make room for one more element in a growing array (*p of *n used, *cap
 * allocated, elements of size bytes): 0, or -1 when out of memory (*p is
 * left as it was). */
static int grow(void *p, int64_t n, int64_t *cap, size_t size)
{
    if (n < *cap)
        return 0;
    int64_t c = *cap ? 2 * *cap : 16;
    void *q = realloc(*(void **)p, (size_t)c * size);
    if (!q)
        return -1;
    *(void **)p = q;
    *cap = c;
    return 0;
}

/* Run sql (binding ?1, if it has one, to id) and decode each row into a growing array of
 * elements of elt bytes. 0, or -1 (the array freed with free_fn). */
typedef void (*row_fn)(sqlite3_stmt *s, void *elt);
static int select_rows(struct sess_store *st, const char *sql, int64_t id, void *out, int64_t *n,
                       size_t elt, row_fn decode, void (*free_fn)(void *, int64_t), const char *what)
{
    void **arr = out;
    *arr = NULL;
    *n = 0;
    sqlite3_stmt *s = prep(st, sql);
    if (!s)
        return -1;
    if (sqlite3_bind_parameter_count(s) > 0)
        sqlite3_bind_int64(s, 1, id);
    int64_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (grow(arr, *n, &cap, elt)) {
            rc = SQLITE_NOMEM;
            break;
        }
        decode(s, (uint8_t *)*arr + (size_t)(*n)++ * elt);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        free_fn(*arr, *n);
        *arr = NULL;
        *n = 0;
        return fail(st, "%s", what);
    }
    return 0;
}

/* ==== schema ==== */

/* Forward migrations: migrations[i] takes the schema from version i to i+1. */
static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE models("
    "  id INTEGER PRIMARY KEY,"
    "  fingerprint BLOB NOT NULL UNIQUE,"
    "  path TEXT NOT NULL,"
    "  name TEXT);"
    /* fingerprints by file identity, so an unchanged file is not hashed again */
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
    "  id BLOB PRIMARY KEY,"
    "  parent BLOB,"
    "  fingerprint BLOB NOT NULL,"
    "  kv_type INTEGER NOT NULL,"
    "  pos0 INTEGER NOT NULL,"
    "  n_tokens INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL,"
    "  created INTEGER NOT NULL,"
    "  last_used INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE chain("
    "  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL,"
    "  segment BLOB NOT NULL,"
    "  pos0 INTEGER NOT NULL,"
    "  n_tokens INTEGER NOT NULL,"
    "  last_seq INTEGER NOT NULL,"
    "  PRIMARY KEY (session_id, idx)) WITHOUT ROWID;"
    "CREATE INDEX chain_segment ON chain(segment);",
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof *migrations))

int sess_schema_version(struct sess_store *st)
{
    sqlite3_stmt *s = prep(st, "PRAGMA user_version");
    int v = -1;
    if (s && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return v;
}

static int migrate(struct sess_store *st)
{
    if (begin(st))
        return -1;
    int v = sess_schema_version(st);
    if (v < 0) {
        rollback(st);
        return -1;
    }
    if (v > SCHEMA_VERSION) {
        rollback(st);
        return fail(st, "the session index is at schema version %d, newer than this kvchat (%d)", v,
                    SCHEMA_VERSION);
    }
    for (; v < SCHEMA_VERSION; v++) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v + 1);
        if (exec(st, migrations[v]) || exec(st, sql)) {
            rollback(st);
            return -1;
        }
    }
    return commit(st);
}

int sess_store_open(const char *home, struct sess_store **out, char *err, size_t err_size)
{
    *out = NULL;
    struct sess_store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    snprintf(st->home, sizeof st->home, "%s", home);
    char path[4200];
    snprintf(path, sizeof path, "%s/kv", home);
    if (mkdirs(path)) {
        snprintf(err, err_size, "cannot create '%s': %s", path, strerror(errno));
        free(st);
        return -1;
    }
    snprintf(path, sizeof path, "%s/locks", home);
    mkdirs(path);
    snprintf(path, sizeof path, "%s/kvchat.db", home);
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        snprintf(err, err_size, "cannot open '%s': %s", path,
                 st->db ? sqlite3_errmsg(st->db) : "out of memory");
        sqlite3_close(st->db);
        free(st);
        return -1;
    }
    sqlite3_busy_timeout(st->db, 5000);
    if (exec(st, "PRAGMA journal_mode=WAL") || exec(st, "PRAGMA foreign_keys=ON") ||
        exec(st, "PRAGMA synchronous=NORMAL") || migrate(st)) {
        snprintf(err, err_size, "cannot open '%s': %s", path, st->err);
        sqlite3_close(st->db);
        free(st);
        return -1;
    }
    *out = st;
    return 0;
}

void sess_store_close(struct sess_store *st)
{
    if (!st)
        return;
    sqlite3_close(st->db);
    free(st);
}

/* ==== sessions ==== */

static int64_t now(void) { return (int64_t)time(NULL); }

static int model_id(struct sess_store *st, const uint8_t *fp, const char *path, int64_t *id)
{
    sqlite3_stmt *s = prep(st, "INSERT INTO models(fingerprint, path) VALUES(?1, ?2) "
                               "ON CONFLICT(fingerprint) DO UPDATE SET path = excluded.path");
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, fp, 32, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, path ? path : "", -1, SQLITE_STATIC);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db_fail(st, "cannot record the model");
    sqlite3_finalize(s);
    if (rc)
        return rc;
    s = prep(st, "SELECT id FROM models WHERE fingerprint = ?1");
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, fp, 32, SQLITE_STATIC);
    rc = sqlite3_step(s) == SQLITE_ROW ? 0 : db_fail(st, "cannot find the model");
    if (!rc)
        *id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc;
}

static int check_name(struct sess_store *st, const char *name)
{
    if (!name || !*name)
        return fail(st, "a session name cannot be empty");
    if (strlen(name) > 200)
        return fail(st, "session name too long (at most 200 bytes)");
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return fail(st, "session name '%s' has a control character", name);
    return 0;
}

int sess_create(struct sess_store *st, const struct sess_new *n, int64_t *id)
{
    if (n->name && check_name(st, n->name))
        return -1;
    if (begin(st))
        return -1;
    int64_t mid;
    if (model_id(st, n->fingerprint, n->model_path, &mid)) {
        rollback(st);
        return -1;
    }
    sqlite3_stmt *s = prep(st, "INSERT INTO sessions(name, model_id, system_prompt, params, kv_type, "
                               "created, updated) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?6)");
    if (!s) {
        rollback(st);
        return -1;
    }
    if (n->name)
        sqlite3_bind_text(s, 1, n->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, mid);
    if (n->system_prompt)
        sqlite3_bind_text(s, 3, n->system_prompt, -1, SQLITE_STATIC);
    if (n->params)
        sqlite3_bind_text(s, 4, n->params, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 5, (int)n->kv_type);
    sqlite3_bind_int64(s, 6, now());
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc == SQLITE_CONSTRAINT) {
        rollback(st);
        return fail(st, "a session named '%s' already exists", n->name);
    }
    if (rc != SQLITE_DONE) {
        db_fail(st, "cannot create the session");
        rollback(st);
        return -1;
    }
    *id = sqlite3_last_insert_rowid(st->db);
    return commit(st);
}

int sess_find(struct sess_store *st, const char *name, int64_t *id)
{
    sqlite3_stmt *s = prep(st, "SELECT id FROM sessions WHERE name = ?1");
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : fail(st, "no session '%s'", name);
}

#define INFO_SELECT                                                                         \
    "SELECT s.id, s.name, m.path, m.fingerprint, s.system_prompt, s.params, s.kv_type,"     \
    " (SELECT count(*) FROM messages WHERE session_id = s.id),"                            \
    " (SELECT count(*) FROM messages WHERE session_id = s.id AND role = 1),"               \
    " (SELECT coalesce(sum(n_tokens), 0) FROM messages WHERE session_id = s.id),"          \
    " (SELECT coalesce(sum(g.bytes), 0) FROM segments g WHERE g.id IN"                     \
    "    (SELECT segment FROM chain WHERE session_id = s.id)),"                            \
    " s.created, s.updated FROM sessions s JOIN models m ON m.id = s.model_id "

static void info_row(sqlite3_stmt *s, struct sess_info *o)
{
    memset(o, 0, sizeof *o);
    o->id = sqlite3_column_int64(s, 0);
    o->name = dup_col(s, 1);
    o->model_path = dup_col(s, 2);
    if (sqlite3_column_bytes(s, 3) == 32)
        memcpy(o->fingerprint, sqlite3_column_blob(s, 3), 32);
    o->system_prompt = dup_col(s, 4);
    o->params = dup_col(s, 5);
    o->kv_type = (uint32_t)sqlite3_column_int(s, 6);
    o->n_messages = sqlite3_column_int64(s, 7);
    o->n_turns = sqlite3_column_int64(s, 8);
    o->n_tokens = sqlite3_column_int64(s, 9);
    o->kv_bytes = sqlite3_column_int64(s, 10);
    o->created = sqlite3_column_int64(s, 11);
    o->updated = sqlite3_column_int64(s, 12);
}

int sess_get(struct sess_store *st, int64_t id, struct sess_info *out)
{
    sqlite3_stmt *s = prep(st, INFO_SELECT "WHERE s.id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        info_row(s, out);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : fail(st, "no session with id %" PRId64, id);
}

void sess_info_free(struct sess_info *o)
{
    free(o->name);
    free(o->model_path);
    free(o->system_prompt);
    free(o->params);
    memset(o, 0, sizeof *o);
}

static void info_row_fn(sqlite3_stmt *s, void *elt) { info_row(s, elt); }
static void list_free(void *p, int64_t n) { sess_list_free(p, n); }

int sess_list(struct sess_store *st, struct sess_info **out, int64_t *n)
{
    return select_rows(st, INFO_SELECT "WHERE s.name IS NOT NULL ORDER BY s.updated DESC, s.id DESC",
                       0, out, n, sizeof **out, info_row_fn, list_free, "cannot list sessions");
}

void sess_list_free(struct sess_info *list, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        sess_info_free(&list[i]);
    free(list);
}

/* run one statement binding (text a, text b | int64 id); 1 row changed or error */
static int change_one(struct sess_store *st, const char *sql, const char *a, const char *b,
                      int64_t id, const char *what)
{
    sqlite3_stmt *s = prep(st, sql);
    if (!s)
        return -1;
    if (a)
        sqlite3_bind_text(s, 1, a, -1, SQLITE_STATIC);
    if (b)
        sqlite3_bind_text(s, 2, b, -1, SQLITE_STATIC);
    else
        sqlite3_bind_int64(s, 2, id);
    sqlite3_bind_int64(s, 3, now());
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc == SQLITE_CONSTRAINT)
        return fail(st, "a session named '%s' already exists", a);
    if (rc != SQLITE_DONE)
        return db_fail(st, what);
    if (sqlite3_changes(st->db) != 1)
        return fail(st, "no session '%s'", b ? b : a);
    return 0;
}

int sess_rename(struct sess_store *st, const char *old_name, const char *new_name)
{
    if (check_name(st, new_name))
        return -1;
    return change_one(st, "UPDATE sessions SET name = ?1, updated = ?3 WHERE name = ?2", new_name,
                      old_name, 0, "cannot rename the session");
}

int sess_set_name(struct sess_store *st, int64_t id, const char *name)
{
    if (check_name(st, name))
        return -1;
    return change_one(st, "UPDATE sessions SET name = ?1, updated = ?3 WHERE id = ?2", name, NULL, id,
                      "cannot name the session");
}

int sess_set_params(struct sess_store *st, int64_t id, const char *params)
{
    sqlite3_stmt *s = prep(st, "UPDATE sessions SET params = ?1, updated = ?3 WHERE id = ?2");
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, params, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, id);
    sqlite3_bind_int64(s, 3, now());
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db_fail(st, "cannot save the parameters");
    sqlite3_finalize(s);
    return rc;
}

int sess_rm(struct sess_store *st, const char *name)
{
    sqlite3_stmt *s = prep(st, "DELETE FROM sessions WHERE name = ?1");
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return db_fail(st, "cannot remove the session");
    return sqlite3_changes(st->db) == 1 ? 0 : fail(st, "no session '%s'", name);
}

int sess_fork(struct sess_store *st, const char *src, const char *dst, int64_t at_turn)
{
    int64_t sid, did;
    if (check_name(st, dst) || sess_find(st, src, &sid))
        return -1;
    if (begin(st))
        return -1;
    /* the last message seq kept: everything before the (at_turn+1)-th user message */
    int64_t limit = INT64_MAX;
    if (at_turn >= 0) {
        sqlite3_stmt *s = prep(st, "SELECT seq FROM messages WHERE session_id = ?1 AND role = 1 "
                                   "ORDER BY seq LIMIT 1 OFFSET ?2");
        if (!s) {
            rollback(st);
            return -1;
        }
        sqlite3_bind_int64(s, 1, sid);
        sqlite3_bind_int64(s, 2, at_turn);
        if (sqlite3_step(s) == SQLITE_ROW)
            limit = sqlite3_column_int64(s, 0) - 1;
        sqlite3_finalize(s);
    }
    static const char *const copy[] = {
        "INSERT INTO sessions(name, model_id, system_prompt, params, kv_type, sampler_state, "
        "created, updated) SELECT ?1, model_id, system_prompt, params, kv_type, "
        "CASE WHEN ?3 = 9223372036854775807 THEN sampler_state END, ?4, ?4 FROM sessions WHERE id = ?2",
        "INSERT INTO messages(session_id, seq, role, text, n_tokens, tokens, created) SELECT ?5, seq, "
        "role, text, n_tokens, tokens, created FROM messages WHERE session_id = ?2 AND seq <= ?3",
        "INSERT INTO chain(session_id, idx, segment, pos0, n_tokens, last_seq) SELECT ?5, idx, "
        "segment, pos0, n_tokens, last_seq FROM chain WHERE session_id = ?2 AND last_seq <= ?3",
    };
    did = 0;
    for (int i = 0; i < 3; i++) {
        sqlite3_stmt *s = prep(st, copy[i]);
        if (!s) {
            rollback(st);
            return -1;
        }
        /* bind only the parameters each statement has */
        int np = sqlite3_bind_parameter_count(s);
        if (np >= 1) sqlite3_bind_text(s, 1, dst, -1, SQLITE_STATIC);
        if (np >= 2) sqlite3_bind_int64(s, 2, sid);
        if (np >= 3) sqlite3_bind_int64(s, 3, limit);
        if (np >= 4) sqlite3_bind_int64(s, 4, now());
        if (np >= 5) sqlite3_bind_int64(s, 5, did);
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc == SQLITE_CONSTRAINT && i == 0) {
            rollback(st);
            return fail(st, "a session named '%s' already exists", dst);
        }
        if (rc != SQLITE_DONE) {
            db_fail(st, "cannot fork the session");
            rollback(st);
            return -1;
        }
        if (i == 0)
            did = sqlite3_last_insert_rowid(st->db);
    }
    return commit(st);
}

/* ==== messages ==== */

const char *sess_role_name(enum sess_role r)
{
    static const char *const names[SESS_ROLE_COUNT] = {"system", "user", "assistant"};
    return (unsigned)r < SESS_ROLE_COUNT ? names[r] : "?";
}

int sess_append_message(struct sess_store *st, int64_t id, enum sess_role role, const char *text,
                        int64_t n_tokens, const int32_t *tokens)
{
    if (begin(st))
        return -1;
    sqlite3_stmt *s = prep(st, "INSERT INTO messages(session_id, seq, role, text, n_tokens, tokens, created) "
                               "VALUES(?1, (SELECT coalesce(max(seq), -1) + 1 FROM messages "
                               "WHERE session_id = ?1), ?2, ?3, ?4, ?6, ?5)");
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, (int)role);
    sqlite3_bind_text(s, 3, text, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, n_tokens);
    sqlite3_bind_int64(s, 5, now());
    if (tokens && n_tokens > 0)
        sqlite3_bind_blob64(s, 6, tokens, (sqlite3_uint64)n_tokens * 4, SQLITE_STATIC);
    if (step_done(st, s, "cannot save the message")) {
        rollback(st);
        return -1;
    }
    s = prep(st, "UPDATE sessions SET updated = ?2 WHERE id = ?1");
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int64(s, 2, now());
    if (step_done(st, s, "cannot save the message")) {
        rollback(st);
        return -1;
    }
    return commit(st);
}

static void message_row(sqlite3_stmt *s, void *elt)
{
    struct sess_message *m = elt;
    m->seq = sqlite3_column_int64(s, 0);
    m->role = (enum sess_role)sqlite3_column_int(s, 1);
    m->text = dup_col(s, 2);
    m->n_tokens = sqlite3_column_int64(s, 3);
    m->tokens = NULL;
    int nb = sqlite3_column_bytes(s, 4);
    if (nb > 0 && nb == m->n_tokens * 4 && (m->tokens = malloc((size_t)nb)))
        memcpy(m->tokens, sqlite3_column_blob(s, 4), (size_t)nb);
}

static void messages_free(void *m, int64_t n) { sess_messages_free(m, n); }

int sess_messages(struct sess_store *st, int64_t id, struct sess_message **out, int64_t *n)
{
    return select_rows(st, "SELECT seq, role, text, n_tokens, tokens FROM messages WHERE session_id = ?1 "
                           "ORDER BY seq",
                       id, out, n, sizeof **out, message_row, messages_free, "cannot read the messages");
}

void sess_messages_free(struct sess_message *m, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        free(m[i].text);
        free(m[i].tokens);
    }
    free(m);
}

int sess_truncate_messages(struct sess_store *st, int64_t id, int64_t from_seq)
{
    if (begin(st))
        return -1;
    static const char *const sql[] = {
        "DELETE FROM messages WHERE session_id = ?1 AND seq >= ?2",
        "DELETE FROM chain WHERE session_id = ?1 AND last_seq >= ?2",
        "UPDATE sessions SET sampler_state = NULL, updated = ?3 WHERE id = ?1",
    };
    for (int i = 0; i < 3; i++) {
        sqlite3_stmt *s = prep(st, sql[i]);
        if (!s) {
            rollback(st);
            return -1;
        }
        sqlite3_bind_int64(s, 1, id);
        if (i < 2)
            sqlite3_bind_int64(s, 2, from_seq);
        else
            sqlite3_bind_int64(s, 3, now());
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) {
            db_fail(st, "cannot truncate the session");
            rollback(st);
            return -1;
        }
    }
    return commit(st);
}

/* ==== model fingerprints, remembered by file identity ==== */

/* ?1..?5: path, device, inode, size, ctime in ns: what says the file is unchanged */
static void bind_file_identity(sqlite3_stmt *s, const char *path, const struct stat *sb)
{
    sqlite3_bind_text(s, 1, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (int64_t)sb->st_dev);
    sqlite3_bind_int64(s, 3, (int64_t)sb->st_ino);
    sqlite3_bind_int64(s, 4, (int64_t)sb->st_size);
    sqlite3_bind_int64(s, 5, (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec);
}

int sess_fingerprint_lookup(struct sess_store *st, const char *path, const struct stat *sb, uint8_t fp[32])
{
    sqlite3_stmt *s = prep(st, "SELECT fingerprint FROM fingerprints WHERE path = ?1 AND dev = ?2 AND "
                               "ino = ?3 AND size = ?4 AND ctime_ns = ?5");
    if (!s)
        return -1;
    bind_file_identity(s, path, sb);
    int found = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_bytes(s, 0) == 32;
    if (found)
        memcpy(fp, sqlite3_column_blob(s, 0), 32);
    sqlite3_finalize(s);
    return found;
}

int sess_fingerprint_remember(struct sess_store *st, const char *path, const struct stat *sb,
                              const uint8_t fp[32])
{
    sqlite3_stmt *s = prep(st, "INSERT OR REPLACE INTO fingerprints(path, dev, ino, size, ctime_ns, "
                               "fingerprint) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    if (!s)
        return -1;
    bind_file_identity(s, path, sb);
    sqlite3_bind_blob(s, 6, fp, 32, SQLITE_STATIC);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db_fail(st, "cannot remember the fingerprint");
    sqlite3_finalize(s);
    return rc;
}

/* ==== segments and chains ==== */

int sess_segment_path(struct sess_store *st, const uint8_t id[32], char *buf, size_t size)
{
    char hex[65];
    mdl_hex(id, 32, hex);
    int n = snprintf(buf, size, "%s/kv/%.2s", st->home, hex);
    if (n < 0 || (size_t)n >= size)
        return fail(st, "path too long");
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return fail(st, "cannot create '%s': %s", buf, strerror(errno));
    n = snprintf(buf, size, "%s/kv/%.2s/%s.kvseg", st->home, hex, hex);
    return n < 0 || (size_t)n >= size ? fail(st, "path too long") : 0;
}

int sess_chain_append(struct sess_store *st, int64_t id, const uint8_t segment[32],
                      const uint8_t parent[32], const uint8_t fingerprint[32], uint32_t kv_type,
                      int64_t pos0, int64_t n_tokens, int64_t bytes, int64_t last_seq)
{
    static const uint8_t zero[32];
    if (begin(st))
        return -1;
    sqlite3_stmt *s = prep(st, "INSERT INTO segments(id, parent, fingerprint, kv_type, pos0, n_tokens, "
                               "bytes, created, last_used) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8) "
                               "ON CONFLICT(id) DO UPDATE SET last_used = ?8, bytes = ?7");
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_blob(s, 1, segment, 32, SQLITE_STATIC);
    if (memcmp(parent, zero, 32))
        sqlite3_bind_blob(s, 2, parent, 32, SQLITE_STATIC);
    sqlite3_bind_blob(s, 3, fingerprint, 32, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, (int)kv_type);
    sqlite3_bind_int64(s, 5, pos0);
    sqlite3_bind_int64(s, 6, n_tokens);
    sqlite3_bind_int64(s, 7, bytes);
    sqlite3_bind_int64(s, 8, now());
    if (step_done(st, s, "cannot record the segment")) {
        rollback(st);
        return -1;
    }
    /* a rewritten segment (after damage) may already be in the chain */
    s = prep(st, "INSERT INTO chain(session_id, idx, segment, pos0, n_tokens, last_seq) "
                 "SELECT ?1, (SELECT coalesce(max(idx), -1) + 1 FROM chain WHERE session_id = ?1), "
                 "?2, ?3, ?4, ?5 WHERE NOT EXISTS (SELECT 1 FROM chain WHERE session_id = ?1 AND "
                 "segment = ?2 AND pos0 = ?3)");
    if (!s) {
        rollback(st);
        return -1;
    }
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_blob(s, 2, segment, 32, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, pos0);
    sqlite3_bind_int64(s, 4, n_tokens);
    sqlite3_bind_int64(s, 5, last_seq);
    if (step_done(st, s, "cannot extend the chain")) {
        rollback(st);
        return -1;
    }
    return commit(st);
}

static void link_row(sqlite3_stmt *s, void *elt)
{
    struct sess_chain_link *c = elt;
    memset(c->segment, 0, 32);
    if (sqlite3_column_bytes(s, 0) == 32)
        memcpy(c->segment, sqlite3_column_blob(s, 0), 32);
    c->pos0 = sqlite3_column_int64(s, 1);
    c->n_tokens = sqlite3_column_int64(s, 2);
    c->last_seq = sqlite3_column_int64(s, 3);
}

static void links_free(void *p, int64_t n)
{
    (void)n;
    free(p);
}

int sess_chain(struct sess_store *st, int64_t id, struct sess_chain_link **out, int64_t *n)
{
    return select_rows(st, "SELECT segment, pos0, n_tokens, last_seq FROM chain WHERE session_id = ?1 "
                           "ORDER BY idx",
                       id, out, n, sizeof **out, link_row, links_free, "cannot read the chain");
}

int sess_touch_segments(struct sess_store *st, const struct sess_chain_link *links, int64_t n)
{
    if (begin(st))
        return -1;
    sqlite3_stmt *s = prep(st, "UPDATE segments SET last_used = ?2 WHERE id = ?1");
    if (!s) {
        rollback(st);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        sqlite3_bind_blob(s, 1, links[i].segment, 32, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, now());
        if (sqlite3_step(s) != SQLITE_DONE) {
            sqlite3_finalize(s);
            db_fail(st, "cannot update the segments");
            rollback(st);
            return -1;
        }
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    return commit(st);
}

static int delete_segment_row(struct sess_store *st, const uint8_t seg[32])
{
    sqlite3_stmt *s = prep(st, "DELETE FROM segments WHERE id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, seg, 32, SQLITE_STATIC);
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db_fail(st, "cannot forget the segment");
    sqlite3_finalize(s);
    return rc;
}

int sess_forget_segment(struct sess_store *st, const uint8_t segment[32])
{
    char path[4200];
    if (delete_segment_row(st, segment))
        return -1;
    if (sess_segment_path(st, segment, path, sizeof path) == 0)
        unlink(path);
    return 0;
}

int sess_segment_known(struct sess_store *st, const uint8_t segment[32])
{
    sqlite3_stmt *s = prep(st, "SELECT 1 FROM segments WHERE id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_blob(s, 1, segment, 32, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : db_fail(st, "cannot look up the segment");
}

int sess_save_state(struct sess_store *st, int64_t id, const void *state, size_t n)
{
    sqlite3_stmt *s = prep(st, "UPDATE sessions SET sampler_state = ?2, updated = ?3 WHERE id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_blob(s, 2, state, (int)n, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now());
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db_fail(st, "cannot save the sampler state");
    sqlite3_finalize(s);
    return rc;
}

int sess_load_state(struct sess_store *st, int64_t id, void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = prep(st, "SELECT sampler_state FROM sessions WHERE id = ?1");
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_BLOB) {
        int len = sqlite3_column_bytes(s, 0);
        *out = malloc(len ? (size_t)len : 1);
        if (*out) {
            memcpy(*out, sqlite3_column_blob(s, 0), (size_t)len);
            *n = (size_t)len;
        }
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return fail(st, "no session with id %" PRId64, id);
    return 0;
}

/* ==== housekeeping ==== */

/* delete the segments a query selects (columns: id, bytes); counts what went */
static int delete_selected(struct sess_store *st, const char *sql, int64_t budget, int64_t total,
                           int64_t *n_segments, int64_t *freed)
{
    *n_segments = 0;
    *freed = 0;
    sqlite3_stmt *s = prep(st, sql);
    if (!s)
        return -1;
    struct victim {
        uint8_t id[32];
        int64_t bytes;
    } *v = NULL;
    int64_t nv = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (budget >= 0 && total <= budget)
            break;
        if (grow(&v, nv, &cap, sizeof *v)) {
            rc = SQLITE_NOMEM;
            break;
        }
        memset(v[nv].id, 0, 32);
        if (sqlite3_column_bytes(s, 0) == 32)
            memcpy(v[nv].id, sqlite3_column_blob(s, 0), 32);
        v[nv].bytes = sqlite3_column_int64(s, 1);
        total -= v[nv].bytes;
        nv++;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        free(v);
        return fail(st, "cannot select segments");
    }
    /* rows first, in one transaction; then files (a crash between leaves
     * files with no row, which the next gc removes) */
    if (begin(st)) {
        free(v);
        return -1;
    }
    for (int64_t i = 0; i < nv; i++)
        if (delete_segment_row(st, v[i].id)) {
            rollback(st);
            free(v);
            return -1;
        }
    if (commit(st)) {
        free(v);
        return -1;
    }
    for (int64_t i = 0; i < nv; i++) {
        char path[4200];
        if (sess_segment_path(st, v[i].id, path, sizeof path) == 0 && unlink(path) == 0) {
            (*n_segments)++;
            *freed += v[i].bytes;
        }
    }
    free(v);
    return 0;
}

static int parse_hex_id(const char *name, uint8_t id[32])
{
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(name + 2 * i, "%2x", &v) != 1)
            return -1;
        id[i] = (uint8_t)v;
    }
    return strcmp(name + 64, ".kvseg") == 0 ? 0 : -1;
}

/* files in kv/ with no row: left by a crash between write and record, or
 * temporary files of dead writers */
static void remove_stray_files(struct sess_store *st, int64_t *n_segments, int64_t *freed)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/kv", st->home);
    DIR *top = opendir(dir);
    if (!top)
        return;
    struct dirent *e;
    while ((e = readdir(top))) {
        /* only the xx fan-out directories (never "..": gc must stay in kv/) */
        if (strlen(e->d_name) != 2 || !isxdigit((unsigned char)e->d_name[0]) ||
            !isxdigit((unsigned char)e->d_name[1]))
            continue;
        char sub[4300];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *d = opendir(sub);
        if (!d)
            continue;
        struct dirent *f;
        while ((f = readdir(d))) {
            if (f->d_name[0] == '.' || f->d_type == DT_DIR)
                continue;
            char path[4600];
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            uint8_t id[32];
            const char *tmp = strstr(f->d_name, ".kvseg.tmp.");
            bool stray;
            if (tmp) { /* a temporary file: stray if its writer is gone */
                long pid = strtol(tmp + 11, NULL, 10);
                stray = pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
            } else {
                stray = parse_hex_id(f->d_name, id) != 0 || sess_segment_known(st, id) == 0;
            }
            struct stat sb;
            if (stray && stat(path, &sb) == 0 && unlink(path) == 0) {
                (*n_segments)++;
                *freed += sb.st_size;
            }
        }
        closedir(d);
    }
    closedir(top);
}

int sess_gc(struct sess_store *st, int64_t *n_segments, int64_t *freed)
{
    if (delete_selected(st, "SELECT id, bytes FROM segments WHERE id NOT IN (SELECT segment FROM chain)",
                        -1, 0, n_segments, freed))
        return -1;
    remove_stray_files(st, n_segments, freed);
    return 0;
}

int64_t sess_store_bytes(struct sess_store *st)
{
    sqlite3_stmt *s = prep(st, "SELECT coalesce(sum(bytes), 0) FROM segments");
    int64_t v = -1;
    if (s && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

int sess_evict(struct sess_store *st, int64_t max_bytes, int64_t *n_segments, int64_t *freed)
{
    int64_t total = sess_store_bytes(st);
    if (total < 0)
        return -1;
    *n_segments = *freed = 0;
    if (total <= max_bytes)
        return 0;
    return delete_selected(st,
                           "SELECT id, bytes FROM segments WHERE id NOT IN ("
                           " SELECT c.segment FROM chain c WHERE c.idx = "
                           "  (SELECT max(idx) FROM chain WHERE session_id = c.session_id)) "
                           "ORDER BY last_used, created",
                           max_bytes, total, n_segments, freed);
}

/* ==== locks ==== */

int sess_lock(struct sess_store *st, int64_t id, struct sess_lock **out)
{
    char path[4200];
    *out = NULL;
    snprintf(path, sizeof path, "%s/locks/%" PRId64 ".lock", st->home, id);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(st, "cannot open '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char buf[32] = "";
        ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        long pid = r > 0 ? strtol(buf, NULL, 10) : 0;
        struct sess_info info;
        const char *name = "?";
        if (sess_get(st, id, &info) == 0 && info.name)
            name = info.name;
        if (e == EWOULDBLOCK)
            fail(st, "session '%s' is in use by pid %ld", name, pid);
        else
            fail(st, "cannot lock session '%s': %s", name, strerror(e));
        if (strcmp(name, "?"))
            sess_info_free(&info);
        return -1;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        close(fd);
        return fail(st, "cannot write '%s': %s", path, strerror(errno));
    }
    struct sess_lock *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return fail(st, "out of memory");
    }
    l->fd = fd;
    *out = l;
    return 0;
}

void sess_unlock(struct sess_lock *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}
