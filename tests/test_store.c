/*
 * test_store.c - the store's index: schema and the migration from the first
 * release's (a database that release wrote, tests/data/sessions/v1.db),
 * sessions and their messages with each answer's sampler state, one rule
 * for new session names, the block index (chains, the child sharing the
 * longest prefix among many), forks sharing blocks, gc, LRU eviction in its
 * order, recurrent-state snapshots beside the blocks (found, counted, gc'd,
 * evicted in their tier, migrated to), SQLite's errors reported as "database '...': <reason>", and the
 * one-writer lock across processes (including a writer killed with SIGKILL).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sessions/sess-int.h"
#include "tests/tmpdir.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define B SESS_BLOCK_TOKENS

struct fx {
    char home[64];
    struct sess_store *st;
    uint8_t fp[32];
    int64_t model_id;
    int64_t clock; /* the blocks' last use, as a turn gives it */
};

static int open_store(struct fx *f)
{
    char err[512];
    if (sess_store_open(f->home, sess_store_default_params(), &f->st, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->home, sizeof f->home, "/tmp/kvchat-store-XXXXXX");
    if (!mkdtemp(f->home) || open_store(f))
        return -1;
    memset(f->fp, 0x11, 32);
    if (sess_model_id(f->st, f->fp, "/models/m.gguf", &f->model_id))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sess_store_close(f->st);
    int rc = test_dir_remove(f->home);
    free(f);
    return rc == 0 ? 0 : -1;
}

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    assert_int_equal(system(cmd), 0);
}

static int64_t new_session(struct fx *f, const char *name, const char *system)
{
    struct sess_new n = {name, f->model_id, system, 1};
    int64_t id = -1;
    if (sess_create(f->st, &n, &id))
        fail_msg("create '%s': %s", name, sess_errmsg(f->st));
    return id;
}

/* block k of n tokens after parent (NULL: the first), 2 layers of 8 f16 */
static void test_desc(struct fx *f, const uint8_t *parent, int64_t k, uint32_t n, const int32_t *toks,
                      struct kv_block_desc *d)
{
    memset(d, 0, sizeof *d);
    memcpy(d->fingerprint, f->fp, 32);
    if (parent)
        memcpy(d->parent, parent, 32);
    d->kv_type = 1;
    d->n_layer = 2;
    d->n_embd_k = d->n_embd_v = 8;
    d->pos0 = (uint32_t)(k * B);
    d->n_tokens = n;
    d->tokens = toks;
}

/* record (only: no file) block k of toks[0..n) after parent; its id into out */
static void record_row(struct fx *f, const uint8_t *parent, int64_t k, const int32_t *toks, uint32_t n,
                       uint8_t out[32])
{
    struct kv_block_desc d;
    test_desc(f, parent, k, n, toks, &d);
    assert_int_equal(kv_block_id(&d, out), 0);
    assert_int_equal(sess_block_record(f->st, &d, out, f->model_id, 100, 0), 0);
}

/* Write and record block k (n tokens first_token, first_token + 1, ...)
 * after parent; its id into out. */
static int64_t add_block(struct fx *f, const uint8_t *parent, int64_t k, uint32_t n, int32_t first_token,
                         uint8_t out[32])
{
    static int32_t toks[B];
    assert_true(n <= B);
    for (uint32_t i = 0; i < n; i++)
        toks[i] = first_token + (int32_t)i;
    struct kv_block_desc d;
    test_desc(f, parent, k, n, toks, &d);
    assert_int_equal(kv_block_id(&d, out), 0);
    static uint8_t rows[B * 8 * 2 * 2 * 2];
    char path[4200], err[256];
    int e;
    assert_int_equal(sess_block_path(f->st, out, true, path, sizeof path), 0);
    if (kv_block_write(path, &d, out, rows, err, sizeof err, &e))
        fail_msg("%s", err);
    if (sess_block_record(f->st, &d, out, f->model_id, (int64_t)kv_block_file_bytes(&d), f->clock))
        fail_msg("record: %s", sess_errmsg(f->st));
    return (int64_t)kv_block_file_bytes(&d);
}

/* 1 if the file path_of (sess_block_path, sess_snap_path) names for id is there */
static int stored_file_exists(struct fx *f, int (*path_of)(struct sess_store *, const uint8_t *, bool, char *, size_t),
                              const uint8_t id[32])
{
    char path[4200];
    path_of(f->st, id, false, path, sizeof path);
    return access(path, F_OK) == 0;
}

static int block_file_exists(struct fx *f, const uint8_t id[32]) { return stored_file_exists(f, sess_block_path, id); }

static int block_known(struct fx *f, const uint8_t id[32])
{
    struct sess_block_row row;
    int64_t n;
    assert_int_equal(sess_blocks_find(f->st, (const uint8_t(*)[32])id, 1, &row, &n), 0);
    return (int)n;
}

static int64_t total_bytes(struct fx *f, int64_t *n)
{
    int64_t b;
    assert_int_equal(sess_store_bytes(f->st, &b, n), 0);
    return b;
}

static void test_schema(void **state)
{
    struct fx *f = *state;
    assert_int_equal(sess_schema_version(f->st), 6);
    assert_null(sess_store_notice(f->st)); /* a new store needs no note */
    /* reopening migrates nothing and keeps data */
    int64_t id = new_session(f, "keep", NULL);
    sess_store_close(f->st);
    assert_int_equal(open_store(f), 0);
    int64_t id2;
    assert_int_equal(sess_find(f->st, "keep", &id2), 0);
    assert_int_equal(id, id2);
    /* WAL mode */
    char path[128];
    snprintf(path, sizeof path, "%s/kvchat.db-wal", f->home);
    assert_int_equal(access(path, F_OK), 0);
    /* a database from a newer kvchat is refused, not damaged */
    sess_store_close(f->st);
    sh("python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); c.execute('PRAGMA user_version = 99'); "
       "c.commit()\"%s", f->home, "");
    char err[512];
    assert_int_equal(sess_store_open(f->home, sess_store_default_params(), &f->st, err, sizeof err), SESS_ERR);
    assert_non_null(strstr(err, "at schema version 99, newer than this kvchat's (6)"));
    sh("python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); c.execute('PRAGMA user_version = 6'); "
       "c.commit()\"%s", f->home, "");
    assert_int_equal(open_store(f), 0);
    /* without create, a home with no store is not made one */
    char empty[80];
    snprintf(empty, sizeof empty, "%s/empty", f->home);
    assert_int_equal(mkdir(empty, 0755), 0);
    struct sess_store_params p = sess_store_default_params();
    p.create = false;
    struct sess_store *st;
    assert_int_equal(sess_store_open(empty, p, &st, err, sizeof err), SESS_ERR_NOT_FOUND);
    snprintf(path, sizeof path, "%s/kvchat.db", empty);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(sess_store_open(f->home, p, &st, err, sizeof err), SESS_OK);
    sess_store_close(st);
}

/* the first release's database, made by tests/data/sessions/regen-v1.sh */
static void test_migrate_v1(void **state)
{
    struct fx *f = *state;
    sess_store_close(f->st);
    sh("rm -f '%s'/kvchat.db* && cp tests/data/sessions/v1.db '%s/kvchat.db'", f->home, f->home);
    /* and that release's segment files, which go */
    sh("mkdir -p '%s/kv/ab' && echo x > '%s/kv/ab/ab12.kvseg'", f->home, f->home);
    assert_int_equal(open_store(f), 0);
    assert_int_equal(sess_schema_version(f->st), 6);
    assert_non_null(sess_store_notice(f->st));
    assert_non_null(strstr(sess_store_notice(f->st), "computed once more"));
    char seg[128];
    snprintf(seg, sizeof seg, "%s/kv/ab/ab12.kvseg", f->home);
    assert_int_not_equal(access(seg, F_OK), 0);
    /* the sessions and messages are all there */
    struct sess_info *list;
    int64_t n;
    assert_int_equal(sess_list(f->st, &list, &n), 0);
    assert_int_equal(n, 2);
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(list[i].n_turns, 2);
        assert_int_equal(list[i].kv_bytes, 0);
        assert_non_null(strstr(list[i].model_path, "m.gguf"));
    }
    sess_list_free(list, n);
    int64_t id;
    assert_int_equal(sess_find(f->st, "sampled", &id), 0);
    struct sess_message *m;
    assert_int_equal(sess_messages(f->st, id, &m, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(m[0].role, SESS_ROLE_SYSTEM);
    assert_string_equal(m[0].text, "You are terse.");
    assert_string_equal(m[1].text, "first question");
    assert_string_equal(m[3].text, "second question");
    for (int64_t i = 0; i < n; i++)
        assert_non_null(m[i].tokens);
    /* the session's sampler state went to its last answer */
    for (int64_t i = 0; i < 4; i++)
        assert_null(m[i].sampler_state);
    assert_non_null(m[4].sampler_state);
    assert_int_equal(m[4].sampler_state_bytes, 72);
    sess_messages_free(m, n);
    /* and it works as a store of this release */
    uint8_t b0[32];
    add_block(f, NULL, 0, B, 1, b0);
    assert_int_equal(sess_set_blocks(f->st, id, 0, (const uint8_t(*)[32])b0, 1), 0);
    /* reopening does not migrate (or note) again */
    sess_store_close(f->st);
    assert_int_equal(open_store(f), 0);
    assert_null(sess_store_notice(f->st));
}

/* messages as a turn writes them (no tokens): texts[0..n), roles from the first */
static void write_texts(struct fx *f, int64_t id, int64_t from, const char *const *texts, int64_t n,
                        enum sess_role first)
{
    struct sess_msg_rec m[16];
    assert_true(n <= 16);
    for (int64_t i = 0; i < n; i++) {
        enum sess_role r = first == SESS_ROLE_SYSTEM && i == 0 ? SESS_ROLE_SYSTEM
                           : (i + (first == SESS_ROLE_ASSISTANT) - (first == SESS_ROLE_SYSTEM)) % 2 == 0
                               ? SESS_ROLE_USER : SESS_ROLE_ASSISTANT;
        m[i] = (struct sess_msg_rec){.role = r, .text = texts[i]};
    }
    if (sess_write_messages(f->st, id, from, m, n, 0, f->model_id, NULL))
        fail_msg("write: %s", sess_errmsg(f->st));
}

/* hits of a plain search, as "session:turn:role:snippet" lines */
static char *search(struct fx *f, const char *q, bool raw, int64_t limit, int64_t *n_out)
{
    struct sess_hit *h;
    int64_t n;
    if (sess_search(f->st, q, raw, limit, &h, &n))
        fail_msg("search '%s': %s", q, sess_errmsg(f->st));
    static char buf[8192];
    buf[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        char line[512];
        snprintf(line, sizeof line, "%s:%lld:%s:%s\n", h[i].session, (long long)h[i].turn,
                 sess_role_name(h[i].role), h[i].snippet);
        strncat(buf, line, sizeof buf - strlen(buf) - 1);
    }
    sess_hits_free(h, n);
    if (n_out)
        *n_out = n;
    return buf;
}

/* the full-text index follows every change to messages */
static void test_search(void **state)
{
    struct fx *f = *state;
    int64_t a = new_session(f, "lisbon", "You plan trips.");
    int64_t b = new_session(f, "paris", NULL);
    static const char *const ta[] = {"You plan trips.", "Three days in Lisbon?", "Day one: Alfama and the tram.",
                                     "And the food?", "Pastéis de nata in Belém."};
    write_texts(f, a, 0, ta, 5, SESS_ROLE_SYSTEM);
    static const char *const tb[] = {"A weekend in Paris, with food", "Croissants at the TRAM stop."};
    write_texts(f, b, 0, tb, 2, SESS_ROLE_USER);
    int64_t n;
    /* case and diacritics are ignored; the match is marked; turns count exchanges */
    assert_string_equal(search(f, "pasteis", false, 0, &n), "lisbon:2:assistant:\001Pastéis\002 de nata in Belém.\n");
    assert_string_equal(search(f, "trips", false, 0, &n), "lisbon:0:system:You plan \001trips\002.\n");
    /* every word is required, in any order */
    search(f, "tram", false, 0, &n);
    assert_int_equal(n, 2);
    assert_string_equal(search(f, "tram croissants", false, 0, &n),
                        "paris:1:assistant:\001Croissants\002 at the \001TRAM\002 stop.\n");
    /* words are searched as written: FTS5's operators and quotes are text */
    search(f, "food OR nothing", false, 0, &n);
    assert_int_equal(n, 0);
    search(f, "\"food", false, 0, &n);
    assert_int_equal(n, 2);
    /* unless raw */
    search(f, "nata OR croissants", true, 0, &n);
    assert_int_equal(n, 2);
    search(f, "tra*", true, 0, &n);
    assert_int_equal(n, 2);
    struct sess_hit *h;
    assert_int_equal(sess_search(f->st, "AND (", true, 0, &h, &n), SESS_ERR);
    assert_non_null(strstr(sess_errmsg(f->st), "bad search query 'AND ('"));
    assert_int_equal(sess_search(f->st, "  ", false, 0, &h, &n), SESS_ERR);
    /* the limit */
    search(f, "the", false, 1, &n);
    assert_int_equal(n, 1);
    /* undo (the last exchange deleted), retry (an answer written again) */
    write_texts(f, a, 3, NULL, 0, SESS_ROLE_USER);
    search(f, "nata", false, 0, &n);
    assert_int_equal(n, 0);
    static const char *const retry[] = {"Day one: Sintra instead."};
    write_texts(f, a, 2, retry, 1, SESS_ROLE_ASSISTANT);
    search(f, "alfama", false, 0, &n);
    assert_int_equal(n, 0);
    assert_string_equal(search(f, "sintra", false, 0, &n), "lisbon:1:assistant:Day one: \001Sintra\002 instead.\n");
    /* fork copies, rename follows, rm removes */
    assert_int_equal(sess_fork(f->st, "lisbon", "porto", -1), 0);
    search(f, "sintra", false, 0, &n);
    assert_int_equal(n, 2);
    assert_int_equal(sess_rename(f->st, "porto", "oporto"), 0);
    assert_non_null(strstr(search(f, "sintra", false, 0, &n), "oporto:1:assistant:"));
    assert_int_equal(sess_rm(f->st, "lisbon"), 0);
    assert_string_equal(search(f, "sintra", false, 0, &n), "oporto:1:assistant:Day one: \001Sintra\002 instead.\n");
    assert_int_equal(sess_rm(f->st, "oporto"), 0);
    search(f, "sintra", false, 0, &n);
    assert_int_equal(n, 0);
    /* a long message gives a snippet around the match, cut where it was cut */
    char longtext[4096] = "";
    for (int i = 0; i < 100; i++)
        strcat(longtext, i == 50 ? "needle " : "hay ");
    const char *lt[] = {longtext};
    write_texts(f, b, 2, lt, 1, SESS_ROLE_USER);
    const char *got = search(f, "needle", false, 0, &n);
    assert_int_equal(n, 1);
    assert_non_null(strstr(got, "\001needle\002"));
    assert_non_null(strchr(got, SESS_MARK_CUT));
    assert_true(strlen(got) < 200);
    /* over SESS_SEARCH_RANK_MAX matches, the newest sessions' first */
    int64_t per = 16, n_many = SESS_SEARCH_RANK_MAX / per + 1;
    const char *many[16];
    for (int64_t i = 0; i < per; i++)
        many[i] = i % 2 ? "a common answer, and a longer one than the question" : "a common question";
    for (int64_t k = 0; k < n_many; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "many%03lld", (long long)k);
        write_texts(f, new_session(f, nm, NULL), 0, many, per, SESS_ROLE_USER);
    }
    search(f, "common", false, 0, &n);
    assert_int_equal(n, n_many * per);
    char want[64];
    snprintf(want, sizeof want, "many%03lld:", (long long)n_many - 1);
    got = search(f, "common", false, 3, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(got, want, strlen(want));
    assert_non_null(strstr(got, "\nmany"));
    for (int64_t k = 0; k < n_many; k++) {
        char nm[32];
        snprintf(nm, sizeof nm, "many%03lld", (long long)k);
        assert_int_equal(sess_rm(f->st, nm), 0);
    }
    /* and under it, the best first (bm25: the shorter message, older as it is) */
    static const char *const ranked[] = {"a common question", "a common answer, and a longer one than that"};
    write_texts(f, new_session(f, "ranked", NULL), 0, ranked, 2, SESS_ROLE_USER);
    assert_string_equal(search(f, "common", false, 1, &n), "ranked:1:user:a \001common\002 question\n");
    assert_int_equal(sess_rm(f->st, "ranked"), 0);
    /* the index has a row for each message and no other (the cascade of rm
     * went through its trigger) */
    sess_store_close(f->st);
    sh("test \"$(python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); "
       "print(c.execute('SELECT (SELECT count(*) FROM messages) = (SELECT count(*) FROM message_fts) AND "
       "(SELECT count(*) FROM messages) = 3').fetchone()[0])\")\" = 1%s", f->home, "");
    /* a store at schema 3 (before the index) gets it, with what it holds */
    sh("python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); "
       "c.executescript('DROP TABLE snapshots; ALTER TABLE block_totals DROP COLUMN n_snapshots; DROP TRIGGER messages_fts_insert; DROP TRIGGER messages_fts_delete; DROP TRIGGER messages_fts_update; DROP TABLE message_fts; PRAGMA user_version = 3;'); "
       "c.execute(\\\"INSERT INTO messages(session_id, seq, role, text, n_tokens, created) VALUES(%s, 9, 1, 'an older message about Zanzibar', 0, 0)\\\"); c.commit()\"",
       f->home, "2");
    assert_int_equal(open_store(f), 0);
    assert_int_equal(sess_schema_version(f->st), 6);
    assert_string_equal(search(f, "zanzibar", false, 0, &n), "paris:3:user:an older message about \001Zanzibar\002\n");
    search(f, "croissants", false, 0, &n);
    assert_int_equal(n, 1);
}

static void test_names(void **state)
{
    struct fx *f = *state;
    char err[256];
    static const char *const good[] = {"a", "trip", "trip-2026.v1", "café", "日本語", "a:b@c+d_e",
                                       "\xd8\xb3\xd9\x84\xd8\xa7\xd9\x85", /* Arabic: right to left is fine */
                                       "emoji\xf0\x9f\x99\x82", NULL};
    /* issue 29: C1 (NEL, CSI), NBSP and Unicode spaces, zero-width and bidi characters too */
    static const char *const bad[] = {"", "my chat", "a/b", "-s", "tab\there", "nl\n", "del\x7f", "\xff\xfe",
                                      "nel\xc2\x85", "csi\xc2\x9b" "2J", "nb\xc2\xa0sp", "ideo\xe3\x80\x80sp",
                                      "zw\xe2\x80\x8bsp", "bom\xef\xbb\xbf", "\xe2\x80\xae" "evil",
                                      "iso\xe2\x81\xa6x", "lrm\xe2\x80\x8e", "nnbsp\xe2\x80\xaf", "esc\x1b[2J",
                                      NULL};
    for (const char *const *g = good; *g; g++)
        if (sess_name_check(*g, err, sizeof err))
            fail_msg("'%s' refused: %s", *g, err);
    for (const char *const *b = bad; *b; b++) {
        assert_int_equal(sess_name_check(*b, err, sizeof err), SESS_ERR);
        /* the message shows the name without what a terminal would obey */
        assert_null(strchr(err, 0x1b));
        assert_null(strstr(err, "\xe2\x80\xae"));
        assert_null(strstr(err, "\xc2\x9b"));
    }
    char longname[202];
    memset(longname, 'x', 201);
    longname[201] = 0;
    assert_int_equal(sess_name_check(longname, err, sizeof err), SESS_ERR);
    longname[200] = 0;
    assert_int_equal(sess_name_check(longname, err, sizeof err), SESS_OK);
    /* the store applies the rule to new names */
    struct sess_new n = {"my chat", f->model_id, NULL, 1};
    int64_t id;
    assert_int_equal(sess_create(f->st, &n, &id), SESS_ERR);
    assert_non_null(strstr(sess_errmsg(f->st), "bad session name 'my chat'"));
    new_session(f, "ok", NULL);
    assert_int_equal(sess_rename(f->st, "ok", "not ok"), SESS_ERR);
    assert_int_equal(sess_fork(f->st, "ok", "a/b", -1), SESS_ERR);
    /* but a name an earlier release accepted stays usable */
    sess_store_close(f->st);
    sh("python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); "
       "c.execute(\\\"UPDATE sessions SET name = 'old name' WHERE name = 'ok'\\\"); c.commit()\"%s", f->home, "");
    assert_int_equal(open_store(f), 0);
    assert_int_equal(sess_find(f->st, "old name", &id), 0);
    assert_int_equal(sess_available(f->st, "old name"), 0);
    assert_int_equal(sess_fork(f->st, "old name", "new-name", -1), 0);
    assert_int_equal(sess_rename(f->st, "old name", "renamed"), 0);
}

static void test_sessions(void **state)
{
    struct fx *f = *state;
    int64_t a = new_session(f, "alpha", "You are terse.");
    int64_t b = new_session(f, "beta", NULL);
    struct sess_new dup = {"alpha", f->model_id, NULL, 1};
    int64_t x;
    assert_int_equal(sess_create(f->st, &dup, &x), SESS_ERR);
    assert_string_equal(sess_errmsg(f->st), "a session named 'alpha' already exists");
    assert_int_equal(sess_find(f->st, "nope", &x), SESS_ERR_NOT_FOUND);
    assert_string_equal(sess_errmsg(f->st), "no session 'nope'");

    int32_t t_sys[5] = {1, 2, 3, 4, 5}, t_u[3] = {6, 7, 8}, t_a[2] = {9, 10};
    struct sess_msg_rec m3[3] = {
        {SESS_ROLE_SYSTEM, "You are terse.", t_sys, 5, NULL, 0, NULL},
        {SESS_ROLE_USER, "hi", t_u, 3, NULL, 0, NULL},
        {SESS_ROLE_ASSISTANT, "hello", t_a, 2, "\x01\x02\x00\x03", 4, "length"},
    };
    assert_int_equal(sess_write_messages(f->st, a, 0, m3, 3, 0, f->model_id, "{\"temp\": 0.7}"), 0);
    struct sess_message *m;
    int64_t n;
    assert_int_equal(sess_messages(f->st, a, &m, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(m[1].seq, 1);
    assert_int_equal(m[1].role, SESS_ROLE_USER);
    assert_memory_equal(m[1].tokens, t_u, sizeof t_u);
    assert_string_equal(m[2].text, "hello");
    assert_null(m[1].sampler_state);
    assert_int_equal(m[2].sampler_state_bytes, 4);
    assert_memory_equal(m[2].sampler_state, "\x01\x02\x00\x03", 4);
    assert_null(m[1].stop_reason); /* why an answer ended, as written */
    assert_string_equal(m[2].stop_reason, "length");
    sess_messages_free(m, n);

    struct sess_info *list;
    assert_int_equal(sess_list(f->st, &list, &n), 0);
    assert_int_equal(n, 2);
    int ia = strcmp(list[0].name, "alpha") == 0 ? 0 : 1;
    assert_string_equal(list[ia].name, "alpha");
    assert_int_equal(list[ia].n_messages, 3);
    assert_int_equal(list[ia].n_turns, 1);
    assert_int_equal(list[ia].n_tokens, 10);
    assert_string_equal(list[ia].system_prompt, "You are terse.");
    assert_string_equal(list[ia].params, "{\"temp\": 0.7}");
    assert_string_equal(list[ia].model_path, "/models/m.gguf");
    assert_memory_equal(list[ia].fingerprint, f->fp, 32);
    sess_list_free(list, n);

    /* rewriting from a seq on (undo, retry) replaces those messages; a
     * NULL params keeps the session's */
    struct sess_msg_rec again = {SESS_ROLE_ASSISTANT, "hey", t_a, 2, NULL, 0, "cut"};
    assert_int_equal(sess_write_messages(f->st, a, 2, &again, 1, 0, f->model_id, NULL), 0);
    assert_int_equal(sess_messages(f->st, a, &m, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(m[2].text, "hey");
    assert_null(m[2].sampler_state);
    assert_string_equal(m[2].stop_reason, "cut");
    sess_messages_free(m, n);
    assert_int_equal(sess_write_messages(f->st, a, 1, NULL, 0, 0, f->model_id, NULL), 0);
    assert_int_equal(sess_messages(f->st, a, &m, &n), 0);
    assert_int_equal(n, 1);
    sess_messages_free(m, n);
    struct sess_info info;
    assert_int_equal(sess_get(f->st, a, &info), 0);
    assert_string_equal(info.params, "{\"temp\": 0.7}");
    sess_info_free(&info);

    assert_int_equal(sess_rename(f->st, "beta", "alpha"), SESS_ERR);
    assert_string_equal(sess_errmsg(f->st), "a session named 'alpha' already exists");
    assert_int_equal(sess_rename(f->st, "beta", "gamma"), 0);
    assert_int_equal(sess_find(f->st, "gamma", &x), 0);
    assert_int_equal(x, b);
    assert_int_equal(sess_rename(f->st, "beta", "delta"), SESS_ERR_NOT_FOUND);
    assert_string_equal(sess_errmsg(f->st), "no session 'beta'");
    assert_int_equal(sess_rm(f->st, "gamma"), 0);
    assert_int_equal(sess_rm(f->st, "gamma"), SESS_ERR_NOT_FOUND);

    /* the models a session was used with, by file */
    char model[128];
    snprintf(model, sizeof model, "%s/m.gguf", f->home);
    sh("touch '%s'%s", model, "");
    uint8_t fp2[32];
    memset(fp2, 0x22, 32);
    int64_t mid2;
    assert_int_equal(sess_model_id(f->st, fp2, model, &mid2), 0);
    struct sess_new on2 = {"on-two", mid2, NULL, 1};
    assert_int_equal(sess_create(f->st, &on2, &x), 0);
    char via[160];
    snprintf(via, sizeof via, "%s/../%s/m.gguf", f->home, strrchr(f->home, '/') + 1);
    assert_int_equal(sess_model_users(f->st, via, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].name, "on-two");
    sess_list_free(list, n);
    assert_int_equal(sess_model_users(f->st, "/models/other.gguf", &list, &n), 0);
    assert_int_equal(n, 0);
    sess_list_free(list, n);
}

static void test_block_index(void **state)
{
    struct fx *f = *state;
    uint8_t ids[4][32];
    add_block(f, NULL, 0, B, 100, ids[0]);
    add_block(f, ids[0], 1, B, 200, ids[1]);
    add_block(f, ids[1], 2, B, 300, ids[2]);
    struct sess_block_row rows[4];
    int64_t n;
    assert_int_equal(sess_blocks_find(f->st, (const uint8_t(*)[32])ids, 3, rows, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(rows[2].n_tokens, B);
    /* the chain stops at the first block that is not there */
    memset(ids[3], 9, 32);
    uint8_t gap[3][32];
    memcpy(gap[0], ids[0], 32);
    memcpy(gap[1], ids[3], 32);
    memcpy(gap[2], ids[2], 32);
    assert_int_equal(sess_blocks_find(f->st, (const uint8_t(*)[32])gap, 3, rows, &n), 0);
    assert_int_equal(n, 1);
    int64_t count, bytes = total_bytes(f, &count);
    assert_int_equal(count, 3);
    assert_true(bytes > 3 * B * 8 * 2 * 2 * 2);
    /* recording again changes nothing */
    add_block(f, NULL, 0, B, 100, ids[0]);
    assert_int_equal(total_bytes(f, &count), bytes);
    assert_int_equal(count, 3);

    /* many children after block 1: tails and full blocks of other
     * continuations, some under another model, and the one that shares the
     * most tokens with a prompt is found by two index probes */
    int32_t want[B], got[B];
    for (int i = 0; i < B; i++)
        want[i] = 5000 + i;
    for (int c = 0; c < 40; c++) {
        int32_t toks[B];
        int nt = 1 + (c * 7) % B;
        for (int i = 0; i < nt; i++)
            toks[i] = 5000 + i + (i >= c % 20 ? 1000 * (c + 1) : 0); /* shares c % 20 tokens */
        uint8_t cid[32];
        record_row(f, ids[1], 2, toks, (uint32_t)nt, cid);
    }
    struct sess_block_row row;
    int64_t common, best = 0;
    for (int c = 0; c < 40; c++) { /* the answer by looking at every child */
        int64_t nt = 1 + (c * 7) % B, k = c % 20 < nt ? c % 20 : nt;
        best = k > best ? k : best;
    }
    assert_int_equal(sess_block_best_child(f->st, ids[1], f->model_id, 1, want, B, &row, &common, got), 1);
    assert_int_equal(common, best);
    assert_true(row.n_tokens >= best);
    assert_memory_equal(got, want, (size_t)best * 4);
    /* a longer shared prefix: the real block 2 is not a child of ids[1] with
     * these tokens; put one in that shares 50 */
    int32_t toks50[B];
    memcpy(toks50, want, sizeof toks50);
    toks50[50] = -1;
    uint8_t id50[32];
    record_row(f, ids[1], 2, toks50, B, id50);
    assert_int_equal(sess_block_best_child(f->st, ids[1], f->model_id, 1, want, B, &row, &common, got), 1);
    assert_int_equal(common, 50);
    assert_memory_equal(row.id, id50, 32);
    assert_int_equal(got[50], -1);
    /* the same tokens under another model, or another kv type: not ours */
    int64_t other_model;
    uint8_t fp2[32];
    memset(fp2, 0x33, 32);
    assert_int_equal(sess_model_id(f->st, fp2, "/other.gguf", &other_model), 0);
    assert_int_equal(sess_block_best_child(f->st, ids[1], other_model, 1, want, B, &row, &common, got), 0);
    assert_int_equal(sess_block_best_child(f->st, ids[1], f->model_id, 0, want, B, &row, &common, got), 0);
    /* nothing shared: none */
    int32_t none[4] = {-5, -6, -7, -8};
    assert_int_equal(sess_block_best_child(f->st, ids[1], f->model_id, 1, none, 4, &row, &common, got), 0);

    /* forgetting a block removes row and file */
    assert_true(block_file_exists(f, ids[2]));
    assert_int_equal(sess_block_forget(f->st, ids[2]), 0);
    assert_false(block_file_exists(f, ids[2]));
    assert_int_equal(block_known(f, ids[2]), 0);
}

static void test_fork_gc_evict(void **state)
{
    struct fx *f = *state;
    int64_t a = new_session(f, "a", "sys");
    /* a: system (5 tokens), two exchanges; 2B + 10 tokens in all */
    int32_t toks[2 * B + 10];
    for (int i = 0; i < 2 * B + 10; i++)
        toks[i] = i;
    struct sess_msg_rec m[5] = {
        {SESS_ROLE_SYSTEM, "sys", toks, 5, NULL, 0, NULL},
        {SESS_ROLE_USER, "q1", toks + 5, B - 5 + 10, NULL, 0, NULL},
        {SESS_ROLE_ASSISTANT, "a1", toks + B + 10, 20, "s1", 2, "cut"},
        {SESS_ROLE_USER, "q2", toks + B + 30, B - 30, NULL, 0, NULL},
        {SESS_ROLE_ASSISTANT, "a2", toks + 2 * B, 10, "s2", 2, NULL},
    };
    assert_int_equal(sess_write_messages(f->st, a, 0, m, 5, 0, f->model_id, NULL), 0);
    uint8_t ids[3][32];
    int64_t full = add_block(f, NULL, 0, B, 0, ids[0]);
    add_block(f, ids[0], 1, B, B, ids[1]);
    add_block(f, ids[1], 2, 10, 2 * B, ids[2]); /* the tail */
    assert_int_equal(sess_set_blocks(f->st, a, 0, (const uint8_t(*)[32])ids, 3), 0);
    struct sess_info info;
    assert_int_equal(sess_get(f->st, a, &info), 0);
    int64_t a_bytes = info.kv_bytes;
    assert_true(a_bytes > 0);
    sess_info_free(&info);
    int64_t nb, bytes0 = total_bytes(f, &nb);
    assert_int_equal(a_bytes, bytes0);

    /* fork at one turn: messages up to a1 (B + 30 tokens), the two blocks
     * that cover them, the state saved with a1; nothing stored twice */
    assert_int_equal(sess_fork(f->st, "a", "a1", 1), 0);
    int64_t f1;
    assert_int_equal(sess_find(f->st, "a1", &f1), 0);
    struct sess_message *msgs;
    int64_t n;
    assert_int_equal(sess_messages(f->st, f1, &msgs, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(msgs[2].sampler_state_bytes, 2);
    assert_memory_equal(msgs[2].sampler_state, "s1", 2);
    assert_string_equal(msgs[2].stop_reason, "cut"); /* a cut answer stays marked in a fork */
    sess_messages_free(msgs, n);
    assert_int_equal(sess_get(f->st, f1, &info), 0);
    assert_int_equal(info.kv_bytes, 2 * full);
    sess_info_free(&info);
    assert_int_equal(total_bytes(f, &nb), bytes0);
    /* past the end is refused with the number of turns */
    assert_int_equal(sess_fork(f->st, "a", "a9", 9), SESS_ERR);
    assert_string_equal(sess_errmsg(f->st), "session 'a' has 2 turns: --at 9 is past its end");
    assert_int_equal(sess_fork(f->st, "a", "a2", 2), 0); /* all of it */
    assert_int_equal(sess_fork(f->st, "a", "a1", -1), SESS_ERR);
    assert_string_equal(sess_errmsg(f->st), "a session named 'a1' already exists");
    assert_int_equal(sess_fork(f->st, "nope", "x", -1), SESS_ERR_NOT_FOUND);

    /* gc keeps what sessions use; the cache of a run without a session goes */
    uint8_t loose[32];
    add_block(f, NULL, 0, B, 7777, loose);
    struct sess_gc_stats g;
    assert_int_equal(sess_gc(f->st, &g), 0);
    assert_int_equal(g.blocks, 1);
    assert_false(block_file_exists(f, loose));
    char dbpath[128];
    snprintf(dbpath, sizeof dbpath, "%s/kvchat.db", f->home);
    assert_int_equal(access(dbpath, F_OK), 0); /* gc stays inside kv/ */
    /* remove a and a2: the tail is a1's no more; blocks 0 and 1 stay */
    assert_int_equal(sess_rm(f->st, "a"), 0);
    assert_int_equal(sess_rm(f->st, "a2"), 0);
    assert_int_equal(sess_gc(f->st, &g), 0);
    assert_int_equal(g.blocks, 1);
    assert_false(block_file_exists(f, ids[2]));
    assert_true(block_file_exists(f, ids[1]));
    /* strays: a file never recorded, a dead writer's temp file, a FIFO, a
     * first-release segment, a row whose file is gone */
    char path[4200], tmp[4300], fifo[4300], seg[4300];
    uint8_t stray[32];
    memset(stray, 0xee, 32);
    sess_block_path(f->st, stray, true, path, sizeof path);
    FILE *fp = fopen(path, "w");
    fputs("junk", fp);
    fclose(fp);
    snprintf(tmp, sizeof tmp, "%s.tmp.999999999", path);
    fp = fopen(tmp, "w");
    fputs("junk", fp);
    fclose(fp);
    snprintf(fifo, sizeof fifo, "%.*s/%064x" KV_BLOCK_SUFFIX, (int)(strrchr(path, '/') - path), path, 0);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    snprintf(seg, sizeof seg, "%.*s/old.kvseg", (int)(strrchr(path, '/') - path), path);
    fp = fopen(seg, "w");
    fputs("junk", fp);
    fclose(fp);
    uint8_t lost[32];
    add_block(f, NULL, 0, 3, 4242, lost);
    sess_block_path(f->st, lost, false, path, sizeof path);
    unlink(path);
    sess_block_path(f->st, stray, false, path, sizeof path);
    assert_int_equal(sess_gc(f->st, &g), 0);
    assert_int_equal(g.blocks, 3);
    assert_int_equal(g.bytes, 12);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_not_equal(access(tmp, F_OK), 0);
    assert_int_not_equal(access(fifo, F_OK), 0);
    assert_int_not_equal(access(seg, F_OK), 0);
    assert_int_equal(block_known(f, lost), 0);
}

static void test_evict_order(void **state)
{
    struct fx *f = *state;
    /* a named session's chain of 3 blocks, used first; then a loose chain of
     * 3 (a run without a session), used later */
    int64_t s = new_session(f, "pinned", NULL);
    uint8_t p[3][32], q[3][32];
    add_block(f, NULL, 0, B, 0, p[0]);
    add_block(f, p[0], 1, B, B, p[1]);
    add_block(f, p[1], 2, B, 2 * B, p[2]);
    assert_int_equal(sess_set_blocks(f->st, s, 0, (const uint8_t(*)[32])p, 3), 0);
    f->clock = 1000;
    add_block(f, NULL, 0, B, 9000, q[0]);
    add_block(f, q[0], 1, B, 9000 + B, q[1]);
    add_block(f, q[1], 2, B, 9000 + 2 * B, q[2]);
    int64_t nb, total = total_bytes(f, &nb), one = total / 6;
    assert_int_equal(nb, 6);
    struct sess_gc_stats g;
    assert_int_equal(sess_evict(f->st, total, &g), 0); /* fits: nothing */
    assert_int_equal(g.blocks, 0);
    /* unpinned first though more recent, the end of a chain first */
    assert_int_equal(sess_evict(f->st, total - one, &g), 0);
    assert_int_equal(g.blocks, 1);
    assert_false(block_file_exists(f, q[2]));
    assert_true(block_file_exists(f, q[1]));
    assert_int_equal(sess_evict(f->st, 3 * one, &g), 0);
    assert_int_equal(g.blocks, 2);
    assert_false(block_file_exists(f, q[0]));
    for (int i = 0; i < 3; i++)
        assert_true(block_file_exists(f, p[i]));
    /* then the session's, least recently used first, from the end */
    assert_int_equal(sess_blocks_touch(f->st, (const uint8_t(*)[32])p, 2, 2000), 0);
    assert_int_equal(sess_evict(f->st, 2 * one, &g), 0);
    assert_false(block_file_exists(f, p[2]));
    assert_true(block_file_exists(f, p[1]));
    assert_int_equal(sess_evict(f->st, 0, &g), 0);
    assert_int_equal(total_bytes(f, &nb), 0);
    assert_int_equal(nb, 0);
}

/* write and record a snapshot of `bytes` bytes of state at pos, inside the
 * block after parent (NULL: the first) whose id is id */
static int64_t add_snap(struct fx *f, const uint8_t *parent, const uint8_t id[32], int64_t pos, size_t bytes)
{
    static const uint8_t zero[32];
    struct kv_snap_desc d;
    memset(&d, 0, sizeof d);
    memcpy(d.id, id, 32);
    memcpy(d.fingerprint, f->fp, 32);
    d.kv_type = 1;
    d.pos = (uint64_t)pos;
    d.state_bytes = bytes;
    uint8_t *state = calloc(1, bytes);
    char path[4200], err[256];
    int e;
    assert_int_equal(sess_snap_path(f->st, id, true, path, sizeof path), 0);
    if (kv_snap_write(path, &d, state, err, sizeof err, &e))
        fail_msg("%s", err);
    free(state);
    if (sess_snap_record(f->st, &d, parent ? parent : zero, f->model_id, (int64_t)kv_snap_file_bytes(&d), f->clock))
        fail_msg("record: %s", sess_errmsg(f->st));
    return (int64_t)kv_snap_file_bytes(&d);
}

static int snap_file_exists(struct fx *f, const uint8_t id[32]) { return stored_file_exists(f, sess_snap_path, id); }

/* snapshots beside the blocks: found inside a block by its parent, the
 * deepest first; counted in the store's bytes; forgotten; kept by gc while
 * a session uses their KV; evicted with the blocks in their order; a store
 * at schema 4 gets the table with its blocks' totals kept */
static void test_snapshots(void **state)
{
    struct fx *f = *state;
    static const uint8_t zero[32];
    int64_t s = new_session(f, "named", NULL);
    uint8_t b[3][32];
    int64_t blk = add_block(f, NULL, 0, B, 0, b[0]);
    add_block(f, b[0], 1, B, B, b[1]);
    add_block(f, b[1], 2, 10, 2 * B, b[2]); /* the session's tail: its end at 2B + 10 */
    assert_int_equal(sess_set_blocks(f->st, s, 0, (const uint8_t(*)[32])b, 3), 0);
    int64_t nb, before = total_bytes(f, &nb);
    /* at the end of block 0 (its id), inside block 1 (a tail of 5 tokens' id), at the end */
    uint8_t mid[32];
    int32_t toks[5] = {B, B + 1, B + 2, B + 3, B + 4};
    record_row(f, b[0], 1, toks, 5, mid); /* (a row for the id only: removed below) */
    int64_t one = add_snap(f, NULL, b[0], B, 1000);
    add_snap(f, b[0], mid, B + 5, 1000);
    add_snap(f, b[1], b[2], 2 * B + 10, 1000);
    assert_int_equal(sess_block_forget(f->st, mid), 0);
    assert_int_equal(one, KV_SNAP_HEADER_BYTES + 1000);
    assert_int_equal(total_bytes(f, &nb), before + 3 * one); /* one budget */
    assert_int_equal(nb, 3);                                /* blocks counted alone */
    struct sess_snap_row rows[4];
    int64_t n;
    assert_int_equal(sess_snaps_in_block(f->st, b[0], f->model_id, 1, B, 2 * B, rows, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].pos, B + 5);
    assert_memory_equal(rows[0].id, mid, 32);
    assert_int_equal(sess_snaps_in_block(f->st, zero, f->model_id, 1, 0, B, rows, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].pos, B);
    /* the range is (lo, hi]; another kv type or model finds none */
    assert_int_equal(sess_snaps_in_block(f->st, zero, f->model_id, 1, B, 2 * B, rows, 4, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(sess_snaps_in_block(f->st, zero, f->model_id, 0, 0, B, rows, 4, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(sess_snaps_in_block(f->st, zero, f->model_id + 1, 1, 0, B, rows, 4, &n), 0);
    assert_int_equal(n, 0);
    /* recording again is idempotent (and touches it) */
    add_snap(f, NULL, b[0], B, 1000);
    assert_int_equal(total_bytes(f, &nb), before + 3 * one);

    /* gc: the session's KV holds them all; a snapshot after a loose block goes */
    uint8_t loose[32], lsnap[32];
    add_block(f, NULL, 0, B, 5000, loose);
    memset(lsnap, 0x5a, 32);
    add_snap(f, loose, lsnap, B + 3, 1000);
    struct sess_gc_stats g;
    assert_int_equal(sess_gc(f->st, &g), 0);
    assert_int_equal(g.blocks, 2); /* the loose block and its snapshot */
    assert_false(snap_file_exists(f, lsnap));
    assert_true(snap_file_exists(f, b[0]) && snap_file_exists(f, mid) && snap_file_exists(f, b[2]));
    /* a snapshot file with no row, and a row with no file: gc mends both */
    uint8_t stray[32];
    memset(stray, 0x77, 32);
    add_snap(f, b[0], stray, B + 7, 1000);
    char path[4200];
    sess_snap_path(f->st, stray, false, path, sizeof path);
    sh("python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); c.execute('DELETE FROM snapshots WHERE pos = %s'); c.commit()\"",
       f->home, "71");
    assert_int_equal(B + 7, 71);
    assert_int_equal(sess_snap_forget(f->st, mid), 0); /* row and file */
    assert_false(snap_file_exists(f, mid));
    assert_int_equal(sess_gc(f->st, &g), 0);
    assert_int_equal(access(path, F_OK) == 0, 0);
    assert_int_equal(total_bytes(f, &nb), before + 2 * one);

    /* eviction: what no named session uses first (a loose chain with a
     * snapshot, used later), then the named one's snapshots but its
     * latest, then its blocks from the end, its latest snapshot last */
    add_snap(f, b[0], mid, B + 5, 1000);
    f->clock = 1000;
    uint8_t q[32], qs[32];
    add_block(f, NULL, 0, B, 9000, q);
    memset(qs, 0x99, 32);
    add_snap(f, q, qs, B + 1, 1000);
    int64_t total = total_bytes(f, &nb);
    assert_int_equal(sess_evict(f->st, total - 1, &g), 0);
    assert_int_equal(g.blocks, 1); /* the loose chain's end: its snapshot (deepest) */
    assert_false(snap_file_exists(f, qs));
    assert_true(block_file_exists(f, q));
    assert_int_equal(sess_evict(f->st, total - one - blk, &g), 0);
    assert_false(block_file_exists(f, q));
    /* the named session's: its snapshots inside the chain go first */
    assert_int_equal(sess_evict(f->st, total - one - blk - 1, &g), 0);
    assert_int_equal(g.blocks, 1);
    assert_false(snap_file_exists(f, mid));
    assert_true(snap_file_exists(f, b[0]) && snap_file_exists(f, b[2]));
    assert_int_equal(sess_evict(f->st, total - 2 * one - blk - 1, &g), 0);
    assert_false(snap_file_exists(f, b[0]));
    assert_true(snap_file_exists(f, b[2]));
    for (int i = 0; i < 3; i++)
        assert_true(block_file_exists(f, b[i]));
    /* then its blocks, the end first, and the latest snapshot after them */
    total = total_bytes(f, &nb);
    assert_int_equal(sess_evict(f->st, total - 1, &g), 0);
    assert_false(block_file_exists(f, b[2]));
    assert_true(snap_file_exists(f, b[2]));
    assert_int_equal(sess_evict(f->st, one, &g), 0);
    assert_true(snap_file_exists(f, b[2]));
    assert_false(block_file_exists(f, b[0]));
    assert_int_equal(sess_evict(f->st, 0, &g), 0);
    assert_false(snap_file_exists(f, b[2]));
    assert_int_equal(total_bytes(f, &nb), 0);

    /* a store at schema 5 (no snapshots): migrated, its totals kept */
    add_block(f, NULL, 0, B, 0, b[0]);
    sess_store_close(f->st);
    sh("python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); "
       "c.executescript('DROP TABLE snapshots; ALTER TABLE block_totals DROP COLUMN n_snapshots; PRAGMA user_version = 5;'); c.commit()\"%s",
       f->home, "");
    assert_int_equal(open_store(f), 0);
    assert_int_equal(sess_schema_version(f->st), 6);
    assert_int_equal(total_bytes(f, &nb), blk);
    add_snap(f, NULL, b[0], B, 1000);
    assert_int_equal(total_bytes(f, &nb), blk + one);
}

/* every failure of SQLite reaches the caller as "database '<path>': <reason>" */
static void test_db_errors(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 30; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        new_session(f, name, "a system prompt long enough to fill pages of the database file");
    }
    sess_store_close(f->st);
    /* the WAL checkpointed into the file at close; damage every page after the first */
    char path[128];
    snprintf(path, sizeof path, "%s/kvchat.db", f->home);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    assert_true(sb.st_size >= 3 * 4096);
    static uint8_t junk[4096];
    memset(junk, 0xa5, sizeof junk);
    for (off_t off = 4096; off < sb.st_size; off += 4096)
        assert_int_equal(pwrite(fd, junk, sizeof junk, off), (ssize_t)sizeof junk);
    close(fd);
    char err[512] = "";
    struct sess_store *st;
    int rc = sess_store_open(f->home, sess_store_default_params(), &st, err, sizeof err);
    char want[160];
    snprintf(want, sizeof want, "database '%s': ", path);
    if (rc == SESS_OK) {
        struct sess_info *list;
        int64_t n;
        assert_int_equal(sess_list(st, &list, &n), SESS_ERR);
        snprintf(err, sizeof err, "%s", sess_errmsg(st));
        sess_store_close(st);
    }
    print_message("%s\n", err);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, "malformed"));
    f->st = NULL;
}

static void test_lock(void **state)
{
    struct fx *f = *state;
    int64_t a = new_session(f, "locked", NULL);
    int64_t b = new_session(f, "free", NULL);
    int go[2], done[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid_t child = fork();
    if (child == 0) {
        struct sess_lock *l;
        char err[512];
        struct sess_store *st;
        if (sess_store_open(f->home, sess_store_default_params(), &st, err, sizeof err) ||
            sess_lock(st, a, &l))
            _exit(1);
        if (write(done[1], "x", 1) != 1)
            _exit(1);
        char c;
        if (read(go[0], &c, 1) < 0)
            _exit(1);
        _exit(0); /* never reached before the SIGKILL below */
    }
    char c;
    assert_int_equal(read(done[0], &c, 1), 1);
    struct sess_lock *l;
    assert_int_equal(sess_lock(f->st, a, &l), SESS_ERR_BUSY);
    char want[64];
    snprintf(want, sizeof want, "session 'locked' is in use by pid %ld", (long)child);
    assert_string_equal(sess_errmsg(f->st), want);
    /* removing, renaming, even asking: refused while it is held */
    assert_int_equal(sess_available(f->st, "locked"), SESS_ERR_BUSY);
    assert_int_equal(sess_rm(f->st, "locked"), SESS_ERR_BUSY);
    assert_string_equal(sess_errmsg(f->st), want);
    assert_int_equal(sess_rename(f->st, "locked", "other"), SESS_ERR_BUSY);
    assert_int_equal(sess_available(f->st, "nope"), SESS_ERR_NOT_FOUND);
    /* another session is free meanwhile */
    assert_int_equal(sess_lock(f->st, b, &l), 0);
    sess_unlock(l);
    assert_int_equal(sess_available(f->st, "free"), 0);
    /* kill -9 the holder: the kernel drops its lock */
    kill(child, SIGKILL);
    int status;
    waitpid(child, &status, 0);
    assert_int_equal(sess_lock(f->st, a, &l), 0);
    sess_unlock(l);
    assert_int_equal(sess_rename(f->st, "locked", "other"), 0);
    assert_int_equal(sess_rm(f->st, "other"), 0);
}

/* what sessions/ says of the store for the command line: its files, the
 * home SQLite cannot open under, the whole message of a failed open, and
 * the questions asked on one handle (sess_peek, sess_latest) */
static void test_store_face(void **state)
{
    struct fx *f = *state;
    char *p = sess_store_file(f->home, SESS_STORE_FILE_DATABASE), want[128], err[1024], name[64];
    snprintf(want, sizeof want, "%s/kvchat.db", f->home);
    assert_string_equal(p, want);
    free(p);
    p = sess_store_file(f->home, SESS_STORE_FILE_KV);
    snprintf(want, sizeof want, "%s/kv", f->home);
    assert_string_equal(p, want);
    free(p);
    /* no session yet; no store at all */
    assert_int_equal(sess_latest(f->st, name, sizeof name), SESS_ERR_NOT_FOUND);
    assert_int_equal(sess_latest(NULL, name, sizeof name), SESS_ERR_NOT_FOUND);
    struct sess_info info;
    assert_int_equal(sess_peek(f->st, "only", &info), SESS_ERR_NOT_FOUND);
    assert_int_equal(sess_peek(NULL, "only", &info), SESS_ERR_NOT_FOUND);
    new_session(f, "only", NULL);
    assert_int_equal(sess_latest(f->st, name, sizeof name), SESS_OK);
    assert_string_equal(name, "only");
    assert_int_equal(sess_peek(f->st, "only", &info), SESS_OK);
    assert_string_equal(info.name, "only");
    assert_string_equal(info.model_path, "/models/m.gguf");
    sess_info_free(&info);
    /* a home longer than SQLite opens a database under: refused, said why */
    char deep[600];
    int n = snprintf(deep, sizeof deep, "%s/", f->home);
    while (n < 520)
        deep[n++] = 'd';
    deep[n] = 0;
    assert_int_equal(sess_store_home_check(deep, err, sizeof err), SESS_ERR);
    assert_non_null(strstr(err, "SQLite opens no database under a directory longer than"));
    assert_int_equal(sess_store_home_check(f->home, err, sizeof err), SESS_OK);
    struct sess_store *st;
    assert_int_equal(sess_store_open(deep, sess_store_default_params(), &st, err, sizeof err), SESS_ERR);
    assert_null(st);
    assert_true(!strncmp(err, "cannot use the kvchat home '", 28));
    /* a failure that is not SQLite's says what failed, whole */
    char file[128];
    snprintf(file, sizeof file, "%s/a-file", f->home);
    FILE *w = fopen(file, "w");
    assert_non_null(w);
    fclose(w);
    assert_int_equal(sess_store_open(file, sess_store_default_params(), &st, err, sizeof err), SESS_ERR);
    assert_true(!strncmp(err, "cannot open the session store: ", 31));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        unit_test_fx(test_schema),
        unit_test_fx(test_migrate_v1),
        unit_test_fx(test_search),
        unit_test_fx(test_names),
        unit_test_fx(test_sessions),
        unit_test_fx(test_block_index),
        unit_test_fx(test_fork_gc_evict),
        unit_test_fx(test_evict_order),
        unit_test_fx(test_snapshots),
        unit_test_fx(test_db_errors),
        unit_test_fx(test_lock),
        unit_test_fx(test_store_face),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
