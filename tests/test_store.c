/*
 * test_store.c - the session index: schema and migrations, sessions and
 * their messages, chains of segment files shared between sessions and
 * forks, gc and LRU eviction, sampler state, and the one-writer lock
 * across processes (including a writer killed with SIGKILL).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sessions/kvseg.h"
#include "sessions/sess.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct fx {
    char home[64];
    struct sess_store *st;
    uint8_t fp[32];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->home, sizeof f->home, "/tmp/kvchat-store-XXXXXX");
    if (!mkdtemp(f->home))
        return -1;
    char err[512];
    if (sess_store_open(f->home, &f->st, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    memset(f->fp, 0x11, 32);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sess_store_close(f->st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->home);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

static int64_t new_session(struct fx *f, const char *name, const char *system)
{
    struct sess_new n = {name, "/models/m.gguf", f->fp, system, "{\"temp\":0.7}", 1};
    int64_t id = -1;
    if (sess_create(f->st, &n, &id))
        fail_msg("create '%s': %s", name ? name : "(unnamed)", sess_errmsg(f->st));
    return id;
}

/* write a real segment of n tokens after parent and add it to session id */
static void add_segment(struct fx *f, int64_t id, const uint8_t parent[32], uint32_t pos0, uint32_t n,
                        int32_t first_token, int64_t last_seq, uint8_t out_id[32])
{
    int32_t toks[64];
    assert_true(n <= 64);
    for (uint32_t i = 0; i < n; i++)
        toks[i] = first_token + (int32_t)i;
    struct kv_seg_desc d = {0};
    memcpy(d.fingerprint, f->fp, 32);
    memcpy(d.parent, parent, 32);
    d.kv_type = 1;
    d.n_layer = 2;
    d.n_embd_k = d.n_embd_v = 8;
    d.pos0 = pos0;
    d.n_tokens = n;
    d.tokens = toks;
    kv_seg_id(&d, out_id);
    static uint8_t rows[64 * 8 * 2];
    const void *k[2] = {rows, rows}, *v[2] = {rows, rows};
    char path[4200], err[256];
    assert_int_equal(sess_segment_path(f->st, out_id, path, sizeof path), 0);
    if (kv_seg_write(path, &d, out_id, k, v, err, sizeof err))
        fail_msg("%s", err);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    if (sess_chain_append(f->st, id, out_id, parent, f->fp, 1, pos0, n, sb.st_size, last_seq))
        fail_msg("chain: %s", sess_errmsg(f->st));
}

static int seg_file_exists(struct fx *f, const uint8_t id[32])
{
    char path[4200];
    sess_segment_path(f->st, id, path, sizeof path);
    return access(path, F_OK) == 0;
}

static void test_schema(void **state)
{
    struct fx *f = *state;
    assert_int_equal(sess_schema_version(f->st), 1);
    /* reopening migrates nothing and keeps data */
    int64_t id = new_session(f, "keep", NULL);
    sess_store_close(f->st);
    char err[512];
    assert_int_equal(sess_store_open(f->home, &f->st, err, sizeof err), 0);
    int64_t id2;
    assert_int_equal(sess_find(f->st, "keep", &id2), 0);
    assert_int_equal(id, id2);
    /* WAL mode */
    char path[128];
    snprintf(path, sizeof path, "%s/kvchat.db-wal", f->home);
    assert_int_equal(access(path, F_OK), 0);
    /* a database from a newer kvchat is refused, not damaged */
    sess_store_close(f->st);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sqlite3 '%s/kvchat.db' 'PRAGMA user_version = 99' 2>/dev/null || "
                              "python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); "
                              "c.execute('PRAGMA user_version = 99'); c.commit()\"", f->home, f->home);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(sess_store_open(f->home, &f->st, err, sizeof err), -1);
    assert_non_null(strstr(err, "schema version 99, newer than this kvchat (1)"));
    snprintf(cmd, sizeof cmd, "python3 -c \"import sqlite3; c=sqlite3.connect('%s/kvchat.db'); "
                              "c.execute('PRAGMA user_version = 1'); c.commit()\"", f->home);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(sess_store_open(f->home, &f->st, err, sizeof err), 0);
}

static void test_sessions(void **state)
{
    struct fx *f = *state;
    int64_t a = new_session(f, "alpha", "You are terse.");
    int64_t b = new_session(f, "beta", NULL);
    new_session(f, NULL, NULL); /* unnamed: not listed */
    struct sess_new dup = {"alpha", "/m", f->fp, NULL, NULL, 1};
    int64_t x;
    assert_int_equal(sess_create(f->st, &dup, &x), -1);
    assert_string_equal(sess_errmsg(f->st), "a session named 'alpha' already exists");
    struct sess_new bad = {"bad\nname", "/m", f->fp, NULL, NULL, 1};
    assert_int_equal(sess_create(f->st, &bad, &x), -1);
    assert_non_null(strstr(sess_errmsg(f->st), "control character"));
    assert_int_equal(sess_find(f->st, "nope", &x), -1);
    assert_string_equal(sess_errmsg(f->st), "no session 'nope'");

    assert_int_equal(sess_append_message(f->st, a, SESS_ROLE_SYSTEM, "You are terse.", 5, NULL), 0);
    assert_int_equal(sess_append_message(f->st, a, SESS_ROLE_USER, "hi", 3, NULL), 0);
    assert_int_equal(sess_append_message(f->st, a, SESS_ROLE_ASSISTANT, "hello", 2, NULL), 0);
    struct sess_message *m;
    int64_t n;
    assert_int_equal(sess_messages(f->st, a, &m, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(m[1].seq, 1);
    assert_int_equal(m[1].role, SESS_ROLE_USER);
    assert_string_equal(m[2].text, "hello");
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
    assert_string_equal(list[ia].params, "{\"temp\":0.7}");
    assert_string_equal(list[ia].model_path, "/models/m.gguf");
    assert_memory_equal(list[ia].fingerprint, f->fp, 32);
    sess_list_free(list, n);

    assert_int_equal(sess_rename(f->st, "beta", "alpha"), -1);
    assert_string_equal(sess_errmsg(f->st), "a session named 'alpha' already exists");
    assert_int_equal(sess_rename(f->st, "beta", "gamma"), 0);
    assert_int_equal(sess_find(f->st, "gamma", &x), 0);
    assert_int_equal(x, b);
    assert_int_equal(sess_rename(f->st, "beta", "delta"), -1);
    assert_string_equal(sess_errmsg(f->st), "no session 'beta'");
    assert_int_equal(sess_rm(f->st, "gamma"), 0);
    assert_int_equal(sess_rm(f->st, "gamma"), -1);

    /* truncation (undo) drops messages from a seq on */
    assert_int_equal(sess_truncate_messages(f->st, a, 1), 0);
    assert_int_equal(sess_messages(f->st, a, &m, &n), 0);
    assert_int_equal(n, 1);
    sess_messages_free(m, n);

    /* sampler state */
    void *blob;
    size_t bn;
    assert_int_equal(sess_load_state(f->st, a, &blob, &bn), 0);
    assert_null(blob);
    assert_int_equal(sess_save_state(f->st, a, "\x01\x02\x00\x03", 4), 0);
    assert_int_equal(sess_load_state(f->st, a, &blob, &bn), 0);
    assert_int_equal(bn, 4);
    assert_memory_equal(blob, "\x01\x02\x00\x03", 4);
    free(blob);
}

static void test_chains_fork_gc(void **state)
{
    struct fx *f = *state;
    static const uint8_t root[32];
    uint8_t sys[32], t1[32], t2[32], t1b[32];
    int64_t a = new_session(f, "a", "sys");
    int64_t b = new_session(f, "b", "sys");
    sess_append_message(f->st, a, SESS_ROLE_SYSTEM, "sys", 10, NULL);
    sess_append_message(f->st, a, SESS_ROLE_USER, "q1", 3, NULL);
    sess_append_message(f->st, a, SESS_ROLE_ASSISTANT, "a1", 4, NULL);
    sess_append_message(f->st, a, SESS_ROLE_USER, "q2", 3, NULL);
    sess_append_message(f->st, a, SESS_ROLE_ASSISTANT, "a2", 4, NULL);
    add_segment(f, a, root, 0, 10, 100, 0, sys);
    add_segment(f, a, sys, 10, 7, 200, 2, t1);
    add_segment(f, a, t1, 17, 7, 300, 4, t2);
    /* b: the same system prompt shares the segment; its own turn differs */
    sess_append_message(f->st, b, SESS_ROLE_SYSTEM, "sys", 10, NULL);
    uint8_t sys_b[32];
    add_segment(f, b, root, 0, 10, 100, 0, sys_b);
    assert_memory_equal(sys, sys_b, 32);
    add_segment(f, b, sys, 10, 5, 900, 2, t1b);

    struct sess_chain_link *c;
    int64_t n;
    assert_int_equal(sess_chain(f->st, a, &c, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(c[0].segment, sys, 32);
    assert_memory_equal(c[2].segment, t2, 32);
    assert_int_equal(c[2].pos0, 17);
    assert_int_equal(c[1].last_seq, 2);
    free(c);
    int64_t shared_bytes = sess_store_bytes(f->st);
    assert_true(shared_bytes > 0);

    /* fork a at one turn: messages up to a1, chain sys + t1 */
    assert_int_equal(sess_fork(f->st, "a", "a-fork", 1), 0);
    int64_t af;
    assert_int_equal(sess_find(f->st, "a-fork", &af), 0);
    assert_int_equal(sess_chain(f->st, af, &c, &n), 0);
    assert_int_equal(n, 2);
    assert_memory_equal(c[1].segment, t1, 32);
    free(c);
    struct sess_message *m;
    assert_int_equal(sess_messages(f->st, af, &m, &n), 0);
    assert_int_equal(n, 3);
    sess_messages_free(m, n);
    assert_int_equal(sess_store_bytes(f->st), shared_bytes); /* nothing stored twice */
    assert_int_equal(sess_fork(f->st, "a", "b", -1), -1);
    assert_string_equal(sess_errmsg(f->st), "a session named 'b' already exists");
    assert_int_equal(sess_fork(f->st, "nope", "x", -1), -1);

    /* gc: nothing to do while everything is referenced */
    int64_t ns, freed;
    assert_int_equal(sess_gc(f->st, &ns, &freed), 0);
    assert_int_equal(ns, 0);
    char dbpath[128];
    snprintf(dbpath, sizeof dbpath, "%s/kvchat.db", f->home);
    assert_int_equal(access(dbpath, F_OK), 0); /* gc stays inside kv/ */
    /* remove a: t2 is unreferenced; sys and t1 are kept by a-fork (and b) */
    assert_int_equal(sess_rm(f->st, "a"), 0);
    assert_int_equal(sess_gc(f->st, &ns, &freed), 0);
    assert_int_equal(ns, 1);
    assert_true(freed > 0);
    assert_false(seg_file_exists(f, t2));
    assert_true(seg_file_exists(f, t1));
    assert_true(seg_file_exists(f, sys));
    assert_int_equal(sess_segment_known(f->st, t2), 0);
    /* a stray file (written, never recorded) and a dead writer's temp file */
    char path[4200], tmp[4300];
    uint8_t stray[32];
    memset(stray, 0xee, 32);
    sess_segment_path(f->st, stray, path, sizeof path);
    FILE *fp = fopen(path, "w");
    fputs("junk", fp);
    fclose(fp);
    snprintf(tmp, sizeof tmp, "%s.tmp.999999999", path);
    fp = fopen(tmp, "w");
    fputs("junk", fp);
    fclose(fp);
    assert_int_equal(sess_gc(f->st, &ns, &freed), 0);
    assert_int_equal(ns, 2);
    assert_int_equal(freed, 8);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_not_equal(access(tmp, F_OK), 0);

    /* LRU eviction never takes a session's head */
    int64_t total = sess_store_bytes(f->st);
    assert_int_equal(sess_evict(f->st, 0, &ns, &freed), 0);
    /* heads: a-fork's t1, b's t1b; sys goes */
    assert_int_equal(ns, 1);
    assert_false(seg_file_exists(f, sys));
    assert_true(seg_file_exists(f, t1));
    assert_true(seg_file_exists(f, t1b));
    assert_int_equal(sess_store_bytes(f->st), total - freed);
    /* the chain still names it: the session rebuilds it from messages */
    assert_int_equal(sess_chain(f->st, b, &c, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(sess_segment_known(f->st, c[0].segment), 0);
    free(c);
    /* forgetting a damaged segment removes row and file */
    assert_int_equal(sess_forget_segment(f->st, t1b), 0);
    assert_false(seg_file_exists(f, t1b));
    assert_int_equal(sess_segment_known(f->st, t1b), 0);
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
        if (sess_store_open(f->home, &st, err, sizeof err) || sess_lock(st, a, &l))
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
    assert_int_equal(sess_lock(f->st, a, &l), -1);
    char want[64];
    snprintf(want, sizeof want, "session 'locked' is in use by pid %ld", (long)child);
    assert_string_equal(sess_errmsg(f->st), want);
    /* another session is free meanwhile */
    assert_int_equal(sess_lock(f->st, b, &l), 0);
    sess_unlock(l);
    /* kill -9 the holder: the kernel drops its lock */
    kill(child, SIGKILL);
    int status;
    waitpid(child, &status, 0);
    assert_int_equal(sess_lock(f->st, a, &l), 0);
    sess_unlock(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sessions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chains_fork_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
