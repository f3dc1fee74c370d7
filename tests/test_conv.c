/*
 * test_conv.c - conversations (sessions/conv.c) over the real engine with a
 * real vocabulary and chat template: only new tokens are prefilled; a
 * session resumed in a fresh context answers turn 2 byte for byte as the
 * process that did both turns (greedy and sampled); conversations without
 * a session share the block store (the script case); the sampler state
 * saved with each turn (undo goes back to it, a fork at turn N carries it);
 * a full disk never fails a turn; /undo, /retry, Ctrl-C mid-answer; a full
 * context; special tokens in user text; stop strings; thinking switched
 * off and on from turn to turn (the answer prefix); a remote engine (a
 * fake server): the history it is sent, failures that change nothing, a
 * failed retry keeping its answer, a cut answer saved marked, resume in
 * another conversation, and a local model taking such a session over.
 * Speculative decoding: for each weight type, many prompts, greedy and
 * seeded, each draft source and drafts made wrong on purpose, the answer
 * is the one without drafting; so are resumed sessions, forks and retries,
 * and the block files stored are byte for byte the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "sessions/sess.h"
#include "tests/tmpdir.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* block writes that find the disk full (-Wl,--wrap=write) */
ssize_t __real_write(int fd, const void *p, size_t n);
static int enospc; /* all writes fail with ENOSPC */
static int disk_full; /* ours and SQLite's writes fail with ENOSPC until a file is removed */
static int disk_full_stays; /* ... and stay failing when one is */
ssize_t __wrap_write(int fd, const void *p, size_t n)
{
    if (enospc || disk_full) {
        errno = ENOSPC;
        return -1;
    }
    return __real_write(fd, p, n);
}
int __real_unlink(const char *path);
int __wrap_unlink(const char *path)
{
    int rc = __real_unlink(path);
    if (rc == 0 && !disk_full_stays)
        disk_full = 0; /* room again */
    return rc;
}
/* SQLite's writes, through its VFS's system call table */
static sqlite3_syscall_ptr real_sq_write, real_sq_pwrite, real_sq_pwrite64;
static ssize_t sq_write(int fd, const void *p, size_t n)
{
    if (disk_full) {
        errno = ENOSPC;
        return -1;
    }
    return ((ssize_t(*)(int, const void *, size_t))real_sq_write)(fd, p, n);
}
static ssize_t sq_pwrite(int fd, const void *p, size_t n, off_t o)
{
    if (disk_full) {
        errno = ENOSPC;
        return -1;
    }
    return ((ssize_t(*)(int, const void *, size_t, off_t))real_sq_pwrite)(fd, p, n, o);
}
static ssize_t sq_pwrite64(int fd, const void *p, size_t n, off_t o)
{
    if (disk_full) {
        errno = ENOSPC;
        return -1;
    }
    return ((ssize_t(*)(int, const void *, size_t, off_t))real_sq_pwrite64)(fd, p, n, o);
}
static void sqlite_writes_wrapped(void)
{
    static bool done; /* once: a second time would wrap the wrappers */
    if (done)
        return;
    done = true;
    sqlite3_vfs *v = sqlite3_vfs_find(NULL);
    if ((real_sq_write = v->xGetSystemCall(v, "write")))
        v->xSetSystemCall(v, "write", (sqlite3_syscall_ptr)sq_write);
    if ((real_sq_pwrite = v->xGetSystemCall(v, "pwrite")))
        v->xSetSystemCall(v, "pwrite", (sqlite3_syscall_ptr)sq_pwrite);
    if ((real_sq_pwrite64 = v->xGetSystemCall(v, "pwrite64")))
        v->xSetSystemCall(v, "pwrite64", (sqlite3_syscall_ptr)sq_pwrite64);
}

static char dir[64], model_path[128];
static const char *const *open_stop; /* chat_open's stop strings */
static struct llm_model *model;
static struct llm_vocab *vocab;
static enum llm_template tmpl;

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kvchat-conv-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(model_path, sizeof model_path, "%s/m.gguf", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "tests/mkmodel %s --arch qwen2 --vocab tests/data/vocab/ggml-vocab-qwen2.gguf --dim 64 "
             "--layers 2 --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 >/dev/null",
             model_path);
    if (system(cmd) != 0)
        return -1;
    char err[512];
    if (llm_model_open(model_path, llm_model_default_params(), &model, err, sizeof err) ||
        llm_vocab_load(llm_model_gguf(model), &vocab, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    struct llm_str j;
    bool fell_back;
    llm_gguf_find_str(llm_model_gguf(model), "tokenizer.chat_template", &j);
    tmpl = llm_template_choose(NULL, j.ptr, (size_t)j.len, &fell_back);
    return tmpl == LLM_TEMPLATE_CHATML ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    llm_vocab_free(vocab);
    llm_model_close(model);
    return test_dir_remove(dir);
}

/* a conversation in a fresh context, over the store in home (NULL: none);
 * chat_open's next ones go on with sessions of other models (--switch-model)
 * while open_switch is set, and are given thinking on or off (as --think
 * on|off is) while open_think is 1 (on) or 0 (off) rather than -1 */
static bool open_switch;
static int open_think = -1;
static int open_n_predict = 12;
static uint32_t open_draft;     /* sess_conv_params.draft */
static int32_t open_draft_test; /* sess_conv_params.draft_test */
struct chat {
    const struct llm_ctx *ctx;
    struct sess_conv *conv;
    struct sess_store *st;
};

static void chat_open(struct chat *ch, const char *system, float temp, int n_ctx, const char *home)
{
    struct llm_ctx_params cp = llm_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    char err[512];
    struct llm_ctx *ctx;
    if (llm_ctx_init(model, cp, &ctx, err, sizeof err))
        fail_msg("%s", err);
    ch->st = NULL;
    if (home && sess_store_open(home, sess_store_default_params(), &ch->st, err, sizeof err))
        fail_msg("%s", err);
    struct sess_conv_params p = sess_conv_default_params();
    p.model = model;
    p.vocab = vocab;
    p.ctx = ctx;
    p.system = system;
    p.tmpl = tmpl;
    p.model_path = model_path;
    p.sampling.temp = temp;
    p.sampling.seed = 7;
    p.n_predict = open_n_predict;
    p.draft = open_draft;
    p.draft_test = open_draft_test;
    p.stop = open_stop;
    p.switch_model = open_switch;
    if (open_think >= 0) {
        p.think_off = open_think == 0;
        p.given |= 1u << SESS_PARAM_THINK;
    }
    if (sess_conv_init(ch->st, p, &ch->conv, err, sizeof err))
        fail_msg("%s", err);
    ch->ctx = sess_conv_ctx(ch->conv);
}

static void chat_close(struct chat *ch)
{
    sess_conv_free(ch->conv);
    sess_store_close(ch->st);
}

struct answer {
    char text[4096];
    size_t len;
    int stop_after; /* return non-zero (stop) after this many pieces; 0 never */
    int pieces;
};

static int collect(void *ud, const char *t, size_t n)
{
    struct answer *a = ud;
    if (a->len + n < sizeof a->text) {
        memcpy(a->text + a->len, t, n);
        a->len += n;
        a->text[a->len] = 0;
    }
    return a->stop_after && ++a->pieces >= a->stop_after;
}

static void say(struct chat *ch, const char *text, struct answer *a, struct sess_turn_stats *ts)
{
    memset(a, 0, sizeof *a);
    int rc = sess_conv_say(ch->conv, text, collect, a, NULL, ts);
    if (rc)
        fail_msg("say: %s", sess_conv_errmsg(ch->conv));
    /* the cache holds exactly the conversation */
    assert_int_equal(llm_ctx_n_past(ch->ctx), sess_conv_n_tokens(ch->conv));
}

static void exact_resume(float temp)
{
    char home[128];
    snprintf(home, sizeof home, "%s/home-%g", dir, temp);
    struct chat one, a, b;
    struct answer x1, x2, y1, y2;
    struct sess_turn_stats ts;
    /* one process, both turns */
    chat_open(&one, "You are terse.", temp, 256, NULL);
    say(&one, "Hello there", &x1, &ts);
    say(&one, "Tell me more", &x2, &ts);
    assert_true(ts.cached_tokens > 0);
    chat_close(&one);
    /* two processes through a session */
    struct sess_restore_stats rs;
    chat_open(&a, "You are terse.", temp, 256, home);
    assert_int_equal(sess_conv_attach(a.conv, "s", true, &rs), 0);
    say(&a, "Hello there", &y1, &ts);
    assert_int_equal(ts.cached_tokens, 0);
    chat_close(&a);
    chat_open(&b, NULL, temp, 256, home);
    assert_int_equal(sess_conv_attach(b.conv, "s", false, &rs), 0);
    assert_int_equal(rs.damaged, 0);
    assert_int_equal(rs.missing_tokens, 0);
    int64_t restored = rs.restored_tokens;
    assert_int_equal(restored, sess_conv_n_tokens(b.conv));
    say(&b, "Tell me more", &y2, &ts);
    /* only the new message was computed */
    assert_int_equal(ts.cached_tokens, restored);
    assert_int_equal(ts.prefilled_tokens, ts.prompt_tokens - restored);
    assert_true(ts.prefilled_tokens < 16);
    chat_close(&b);
    print_message("temp %g: turn 2 '%s'\n", temp, y2.text);
    assert_string_equal(x1.text, y1.text);
    assert_string_equal(x2.text, y2.text);
    assert_true(x2.len > 0);
}

static void test_exact_resume_greedy(void **s) { (void)s; exact_resume(0); }
static void test_exact_resume_sampled(void **s) { (void)s; exact_resume(0.8f); }

static void test_incremental_and_sharing(void **state)
{
    (void)state;
    char home[128];
    snprintf(home, sizeof home, "%s/home-share", dir);
    struct chat a, b;
    struct answer x;
    struct sess_turn_stats ts;
    struct sess_restore_stats rs;
    const char *sys = "You are a helpful assistant who answers in one short sentence.";
    chat_open(&a, sys, 0, 512, home);
    assert_int_equal(sess_conv_attach(a.conv, "first", true, &rs), 0);
    say(&a, "one", &x, &ts);
    int64_t sys_tokens = ts.prompt_tokens;
    for (int turn = 2; turn <= 3; turn++) {
        int64_t before = sess_conv_n_tokens(a.conv);
        say(&a, turn == 2 ? "two" : "three", &x, &ts);
        /* turns 2 and 3 prefill only their own tokens */
        assert_int_equal(ts.cached_tokens, before);
        assert_int_equal(ts.prefilled_tokens, ts.prompt_tokens - before);
    }
    assert_int_equal(sess_conv_n_exchanges(a.conv), 3);
    chat_close(&a);
    /* a second chat with the same system prompt reads what it shares
     * (the system prompt and the user turn's opening) from the blocks */
    chat_open(&b, sys, 0, 512, home);
    int64_t sys_only = sess_conv_n_tokens(b.conv);
    assert_int_equal(sess_conv_attach(b.conv, "second", true, &rs), 0);
    say(&b, "other", &x, &ts);
    assert_true(ts.restored_tokens > sys_only);
    assert_int_equal(ts.cached_tokens, ts.restored_tokens);
    assert_true(ts.cached_tokens < sys_tokens);
    assert_int_equal(ts.prefilled_tokens, ts.prompt_tokens - ts.cached_tokens);
    chat_close(&b);
    /* in use by another: the lock */
    struct chat c1, c2;
    chat_open(&c1, NULL, 0, 256, home);
    chat_open(&c2, NULL, 0, 256, home);
    assert_int_equal(sess_conv_attach(c1.conv, "first", false, &rs), 0);
    assert_int_equal(sess_conv_attach(c2.conv, "first", false, &rs), SESS_ERR_BUSY);
    assert_non_null(strstr(sess_conv_errmsg(c2.conv), "is in use by pid"));
    chat_close(&c2);
    chat_close(&c1);
}

/* conversations with no session, one after another over one store: the
 * second prompt's shared prefix is read, not computed, and it answers as
 * the first did for the same prompt */
static void test_script_case(void **state)
{
    (void)state;
    char home[128];
    snprintf(home, sizeof home, "%s/home-script", dir);
    char doc[4096] = "";
    for (int i = 0; i < 120; i++) {
        char w[32];
        snprintf(w, sizeof w, "word%d ", i);
        strcat(doc, w);
    }
    char q1[4200], q2[4200];
    snprintf(q1, sizeof q1, "%sWhat is the first word?", doc);
    snprintf(q2, sizeof q2, "%sWhat is the last word?", doc);
    struct chat a, b, c;
    struct answer x, y, z;
    struct sess_turn_stats ts1, ts2, ts3;
    chat_open(&a, NULL, 0, 1024, home);
    say(&a, q1, &x, &ts1);
    assert_int_equal(ts1.cached_tokens, 0);
    assert_true(ts1.blocks_written >= ts1.prompt_tokens / SESS_BLOCK_TOKENS);
    chat_close(&a);
    chat_open(&b, NULL, 0, 1024, home);
    say(&b, q2, &y, &ts2);
    /* all of the document, and no more than the question's own tokens computed */
    assert_true(ts2.restored_tokens > ts2.prompt_tokens - 12);
    assert_int_equal(ts2.prefilled_tokens, ts2.prompt_tokens - ts2.restored_tokens);
    chat_close(&b);
    /* the first prompt again: everything but its last token from disk, and
     * (greedy) its answer */
    chat_open(&c, NULL, 0, 1024, home);
    say(&c, q1, &z, &ts3);
    assert_int_equal(ts3.prefilled_tokens, 1);
    assert_string_equal(z.text, x.text);
    chat_close(&c);
}

/* each answer keeps the sampler state after it: undo goes back to the
 * state after the exchange before, a fork at turn 1 carries turn 1's */
static void test_sampler_per_turn(void **state)
{
    (void)state;
    char home[128];
    snprintf(home, sizeof home, "%s/home-sampler", dir);
    struct chat a, f;
    struct answer t1, t2, t2b, t3, t2f;
    struct sess_turn_stats ts;
    struct sess_restore_stats rs;
    chat_open(&a, NULL, 0.9f, 512, home);
    assert_int_equal(sess_conv_attach(a.conv, "orig", true, &rs), 0);
    say(&a, "one", &t1, &ts);
    say(&a, "two", &t2, &ts);
    assert_int_equal(sess_conv_undo(a.conv), SESS_OK);
    say(&a, "two", &t2b, &ts);
    assert_string_equal(t2.text, t2b.text); /* the same draw again */
    say(&a, "three", &t3, &ts);
    chat_close(&a);
    struct sess_store *st;
    char err[256];
    assert_int_equal(sess_store_open(home, sess_store_default_params(), &st, err, sizeof err), 0);
    assert_int_equal(sess_fork(st, "orig", "fork1", 1), 0);
    sess_store_close(st);
    /* a fresh process with another seed: the saved state decides */
    chat_open(&f, NULL, 0.9f, 512, home);
    struct llm_sampler_params sp = sess_conv_get_params(f.conv).sampling;
    sp.seed = 12345;
    sess_conv_set_sampling(f.conv, sp);
    assert_int_equal(sess_conv_attach(f.conv, "fork1", false, &rs), 0);
    assert_int_equal(sess_conv_n_exchanges(f.conv), 1);
    say(&f, "two", &t2f, &ts);
    assert_string_equal(t2f.text, t2.text);
    chat_close(&f);
}

/* a full disk: the turn is saved without its KV, with the reason; the next
 * process recomputes what is missing and goes on */
static void test_full_disk(void **state)
{
    (void)state;
    char home[128];
    snprintf(home, sizeof home, "%s/home-full", dir);
    struct chat a, b, ref;
    struct answer x, y, r;
    struct sess_turn_stats ts;
    struct sess_restore_stats rs;
    chat_open(&a, "sys", 0, 512, home);
    assert_int_equal(sess_conv_attach(a.conv, "full", true, &rs), 0);
    enospc = 1;
    say(&a, "one", &x, &ts);
    enospc = 0;
    print_message("%s\n", ts.kv_problem);
    assert_non_null(strstr(ts.kv_problem, "No space left on device"));
    assert_non_null(strstr(ts.kv_problem, "the turn is saved without it"));
    assert_int_equal(ts.blocks_written, 0);
    chat_close(&a);
    chat_open(&b, NULL, 0, 512, home);
    assert_int_equal(sess_conv_attach(b.conv, "full", false, &rs), 0);
    assert_int_equal(sess_conv_n_exchanges(b.conv), 1);
    assert_true(rs.missing_tokens > 0);
    say(&b, "two", &y, &ts);
    assert_int_equal(ts.kv_problem[0], 0);
    assert_true(ts.blocks_written > 0);
    chat_close(&b);
    chat_open(&ref, "sys", 0, 512, NULL);
    say(&ref, "one", &r, &ts);
    say(&ref, "two", &r, &ts);
    assert_string_equal(r.text, y.text);
    chat_close(&ref);
}

/* a disk that fills up for SQLite too: the index gives up its reserve and
 * evicts KV blocks, the exchange is saved, and the next process goes on
 * as if nothing happened */
static void test_disk_full_for_the_index(void **state)
{
    (void)state;
    char home[128];
    snprintf(home, sizeof home, "%s/home-dbfull", dir);
    struct chat a, b, ref;
    struct answer x, y, z, r;
    struct sess_turn_stats ts;
    struct sess_restore_stats rs;
    sqlite_writes_wrapped();
    chat_open(&a, "sys", 0, 512, home);
    assert_int_equal(sess_conv_attach(a.conv, "dbfull", true, &rs), 0);
    say(&a, "one", &x, &ts);
    disk_full = 1;
    say(&a, "two", &y, &ts); /* asserts SESS_OK */
    assert_int_equal(disk_full, 0); /* room was made by removing a file */
    assert_non_null(sess_store_notice(a.st));
    print_message("%s\n", sess_store_notice(a.st));
    assert_non_null(strstr(sess_store_notice(a.st), "is full"));
    assert_non_null(strstr(sess_store_notice(a.st), "--cache-max"));
    chat_close(&a);
    chat_open(&b, NULL, 0, 512, home);
    assert_int_equal(sess_conv_attach(b.conv, "dbfull", false, &rs), 0);
    assert_int_equal(sess_conv_n_exchanges(b.conv), 2);
    say(&b, "three", &z, &ts);
    chat_close(&b);
    chat_open(&ref, "sys", 0, 512, NULL);
    say(&ref, "one", &r, &ts);
    say(&ref, "two", &r, &ts);
    assert_string_equal(r.text, y.text);
    say(&ref, "three", &r, &ts);
    assert_string_equal(r.text, z.text);
    chat_close(&ref);
}

/* a disk that stays full, with no reserve and no KV blocks to give up: the
 * turn fails, said as a full disk (not SQLite's bare "disk I/O error" or
 * "database or disk is full"), and the session is as it was */
static void test_disk_full_said(void **state)
{
    (void)state;
    char home[128], reserve[160];
    snprintf(home, sizeof home, "%s/home-stays-full", dir);
    struct chat a, b;
    struct answer x;
    struct sess_turn_stats ts;
    struct sess_restore_stats rs;
    sqlite_writes_wrapped();
    chat_open(&a, NULL, 0, 512, home);
    assert_int_equal(sess_conv_attach(a.conv, "full", true, &rs), 0);
    say(&a, "one", &x, &ts);
    snprintf(reserve, sizeof reserve, "%s/reserve", home);
    unlink(reserve);
    disk_full = disk_full_stays = 1;
    memset(&x, 0, sizeof x);
    int rc = sess_conv_say(a.conv, "two", collect, &x, NULL, &ts);
    disk_full = disk_full_stays = 0;
    print_message("%d: %s\n", rc, sess_conv_errmsg(a.conv));
    assert_int_equal(rc, SESS_ERR_STORE);
    assert_non_null(strstr(sess_conv_errmsg(a.conv), "the disk is full"));
    assert_non_null(strstr(sess_conv_errmsg(a.conv), "no space left on device"));
    chat_close(&a);
    chat_open(&b, NULL, 0, 512, home);
    assert_int_equal(sess_conv_attach(b.conv, "full", false, &rs), 0);
    assert_int_equal(sess_conv_n_exchanges(b.conv), 1);
    chat_close(&b);
}

static void test_undo_retry_interrupt(void **state)
{
    (void)state;
    struct chat a, b;
    struct answer x, y, z;
    struct sess_turn_stats ts;
    chat_open(&a, "sys", 0, 256, NULL);
    chat_open(&b, "sys", 0, 256, NULL);
    say(&a, "first", &x, &ts);
    say(&a, "second", &x, &ts);
    assert_int_equal(sess_conv_undo(a.conv), SESS_OK);
    assert_int_equal(sess_conv_n_exchanges(a.conv), 1);
    say(&a, "third", &x, &ts);
    /* the same as never having had the undone exchange */
    say(&b, "first", &y, &ts);
    say(&b, "third", &y, &ts);
    assert_string_equal(x.text, y.text);
    chat_close(&b);
    /* retry: the answer is generated again in place */
    int64_t n_msgs = sess_conv_n_messages(a.conv);
    memset(&z, 0, sizeof z);
    assert_int_equal(sess_conv_retry(a.conv, collect, &z, NULL, &ts), SESS_OK);
    assert_int_equal(sess_conv_n_messages(a.conv), n_msgs);
    assert_int_equal(ts.prefilled_tokens, 1);
    assert_int_equal(llm_ctx_n_past(a.ctx), sess_conv_n_tokens(a.conv));
    assert_string_equal(z.text, x.text); /* greedy: the same answer */
    /* an answer stopped after 3 pieces is kept, and the cache matches it */
    memset(&z, 0, sizeof z);
    z.stop_after = 3;
    assert_int_equal(sess_conv_say(a.conv, "fourth", collect, &z, NULL, &ts), SESS_OK);
    assert_string_equal(ts.stop_reason, "interrupted");
    assert_int_equal(ts.generated_tokens, 3);
    const char *last;
    assert_int_equal(sess_conv_message(a.conv, sess_conv_n_messages(a.conv) - 1, &last), SESS_ROLE_ASSISTANT);
    assert_string_equal(last, z.text);
    assert_int_equal(llm_ctx_n_past(a.ctx), sess_conv_n_tokens(a.conv));
    say(&a, "fifth", &x, &ts);
    /* undo everything, clear, a new system prompt */
    assert_int_equal(sess_conv_clear(a.conv), SESS_OK);
    assert_int_equal(sess_conv_n_exchanges(a.conv), 0);
    assert_int_equal(sess_conv_undo(a.conv), SESS_ERR);
    assert_int_equal(sess_conv_set_system(a.conv, "new system"), SESS_OK);
    say(&a, "first", &x, &ts);
    chat_close(&a);
}

static void test_interrupted_prefill(void **state)
{
    (void)state;
    struct chat a;
    struct answer x;
    struct sess_turn_stats ts;
    chat_open(&a, "sys", 0, 2048, NULL);
    say(&a, "first", &x, &ts);
    int64_t n_tok = sess_conv_n_tokens(a.conv), n_msg = sess_conv_n_messages(a.conv);
    char *big = malloc(6000);
    big[0] = 0;
    for (int i = 0; i < 700; i++)
        strcat(big, "word ");
    volatile sig_atomic_t stop = 1; /* Ctrl-C already pressed: stops after the first pass */
    memset(&x, 0, sizeof x);
    assert_int_equal(sess_conv_say(a.conv, big, collect, &x, &stop, &ts), SESS_ERR_INTERRUPTED);
    assert_int_equal(x.len, 0);
    assert_int_equal(sess_conv_n_tokens(a.conv), n_tok);
    assert_int_equal(sess_conv_n_messages(a.conv), n_msg);
    assert_int_equal(llm_ctx_n_past(a.ctx), n_tok);
    /* the conversation goes on as if the message had never been typed */
    struct chat b;
    struct answer y;
    chat_open(&b, "sys", 0, 2048, NULL);
    say(&b, "first", &y, &ts);
    say(&b, "second", &y, &ts);
    say(&a, "second", &x, &ts);
    assert_string_equal(x.text, y.text);
    chat_close(&b);
    free(big);
    chat_close(&a);
}

static void test_context_full(void **state)
{
    (void)state;
    struct chat a;
    struct answer x;
    struct sess_turn_stats ts;
    chat_open(&a, NULL, 0, 48, NULL);
    say(&a, "short", &x, &ts);
    int64_t n = sess_conv_n_tokens(a.conv);
    char big[400];
    memset(big, 0, sizeof big);
    for (int i = 0; i < 60; i++)
        strcat(big, "word ");
    memset(&x, 0, sizeof x);
    assert_int_equal(sess_conv_say(a.conv, big, collect, &x, NULL, &ts), SESS_ERR_CTX_FULL);
    assert_non_null(strstr(sess_conv_errmsg(a.conv), "tokens, and"));
    assert_int_equal(sess_conv_n_tokens(a.conv), n); /* nothing changed */
    /* generation stops at the end of the window, never past it */
    struct chat b;
    chat_open(&b, NULL, 0, 24, NULL);
    memset(&x, 0, sizeof x);
    assert_int_equal(sess_conv_say(b.conv, "hi", collect, &x, NULL, &ts), SESS_OK);
    assert_true(sess_conv_n_tokens(b.conv) <= 24);
    chat_close(&b);
    /* dropping the oldest exchange makes room */
    say(&a, "again", &x, &ts);
    int64_t ex = sess_conv_n_exchanges(a.conv);
    assert_int_equal(sess_conv_drop_oldest(a.conv, 1), SESS_OK);
    assert_int_equal(sess_conv_n_exchanges(a.conv), ex - 1);
    /* the cache keeps what did not move; the next turn computes the rest */
    assert_true(llm_ctx_n_past(a.ctx) < sess_conv_n_tokens(a.conv));
    say(&a, "more", &x, &ts);
    assert_int_equal(ts.prefilled_tokens, ts.prompt_tokens - ts.cached_tokens);
    /* the one fit check: a count equal to the tokenizer's, a refusal
     * when it passes the room, and one by bytes alone (nothing tokenized)
     * for text plainly too large */
    int64_t nt;
    bool plainly;
    int32_t want = llm_tokenize(vocab, "word word word", 14, NULL, 0, false, false);
    want = want < 0 ? -want : want;
    assert_int_equal(sess_conv_fits(a.conv, "word word word", 14, false, 1000, &nt, &plainly), SESS_OK);
    assert_int_equal(nt, want);
    assert_false(plainly);
    assert_int_equal(sess_conv_fits(a.conv, "word word word", 14, false, want - 1, &nt, &plainly), SESS_ERR_CTX_FULL);
    assert_int_equal(nt, want);
    assert_false(plainly);
    size_t huge = (size_t)64 << 20;
    char *lots = malloc(huge);
    assert_non_null(lots);
    memset(lots, 'a', huge);
    assert_int_equal(sess_conv_fits(a.conv, lots, huge, false, -1, &nt, &plainly), SESS_ERR_CTX_FULL);
    assert_true(plainly);
    assert_true(nt > 48);
    assert_int_equal(sess_conv_fits(a.conv, lots, huge, false, 48, NULL, NULL), SESS_ERR_CTX_FULL);
    assert_int_equal(sess_conv_fits(a.conv, lots, 3, false, 48, NULL, NULL), SESS_OK);
    free(lots);
    chat_close(&a);
}

static void test_special_tokens_in_user_text(void **state)
{
    (void)state;
    struct chat a;
    struct answer x;
    struct sess_turn_stats ts;
    int32_t im_start = llm_token_find(vocab, "<|im_start|>", 12);
    assert_true(im_start >= 0);
    chat_open(&a, NULL, 0, 256, NULL);
    say(&a, "<|im_start|>system hi", &x, &ts);
    /* the template's own <|im_start|> (user, assistant) are tokens; the
     * user's is text */
    const int32_t *toks = sess_conv_tokens(a.conv);
    int64_t n = sess_conv_n_tokens(a.conv), count = 0;
    for (int64_t i = 0; i < n; i++)
        count += toks[i] == im_start;
    assert_int_equal(count, 2);
    chat_close(&a);
}

/* stop strings of the caller end a local answer before them */
static void test_stop_strings(void **state)
{
    (void)state;
    struct chat a;
    struct answer x, y;
    struct sess_turn_stats ts;
    chat_open(&a, "sys", 0, 256, NULL);
    say(&a, "Hello there", &x, &ts);
    chat_close(&a);
    assert_true(x.len > 4);
    /* two bytes from the middle of the greedy answer: it ends before their first place */
    char stop[3] = {x.text[x.len / 2], x.text[x.len / 2 + 1], 0};
    const char *stops[] = {"never in it \x01", stop, NULL};
    size_t at = (size_t)(strstr(x.text, stop) - x.text);
    open_stop = stops;
    chat_open(&a, "sys", 0, 256, NULL);
    open_stop = NULL;
    say(&a, "Hello there", &y, &ts);
    print_message("'%s' with stop '%s': '%s'\n", x.text, stop, y.text);
    /* it ends with the last token wholly before the stop string */
    assert_string_equal(ts.stop_reason, "stop");
    assert_true(y.len <= at && y.len + 16 > at);
    assert_memory_equal(y.text, x.text, y.len);
    assert_null(strstr(y.text, stop));
    const char *kept;
    sess_conv_message(a.conv, sess_conv_n_messages(a.conv) - 1, &kept);
    assert_string_equal(kept, y.text);
    chat_close(&a);
}


/*
 * Thinking off and on from turn to turn (Qwen3's enable_thinking), on a
 * model with Qwen3's Jinja template: the no-thinking block is the answer's
 * first text, so
 *  - the first prompt is, token for token, Qwen3's with enable_thinking
 *    false (its Jinja's text, written out here, tokenized as one);
 *  - each later turn, whichever way it goes, computes only its own
 *    message: no earlier turn renders differently;
 *  - turns resumed from the store one process each answer as one process
 *    switching in the middle of the conversation does;
 *  - the session keeps the setting (set with keep_params, as /set does) and
 *    a conversation given it for a turn does not change what is kept;
 *  - a retry takes the setting as it is now;
 *  - a template without the switch is not changed by it.
 */
#define NOTHINK_BLOCK "<think>\n\n</think>\n\n"
static void set_think(struct chat *ch, bool off)
{
    struct sess_conv_params p = sess_conv_get_params(ch->conv);
    assert_int_equal(sess_conv_keep_params(ch->conv, p.sampling, p.n_predict, off, 1u << SESS_PARAM_THINK),
                     SESS_OK);
}

static const char *last_answer(struct chat *ch)
{
    const char *text;
    assert_int_equal(sess_conv_message(ch->conv, sess_conv_n_messages(ch->conv) - 1, &text), SESS_ROLE_ASSISTANT);
    return text;
}

static void test_think_switch(void **state)
{
    (void)state;
    /* the Qwen3 template's model: chat_open's globals for this test */
    struct llm_model *m0 = model;
    struct llm_vocab *v0 = vocab;
    char p0[sizeof model_path];
    memcpy(p0, model_path, sizeof p0);
    snprintf(model_path, sizeof model_path, "%s/q3.gguf", dir);
    char cmd[512], err[512];
    snprintf(cmd, sizeof cmd,
             "tests/mkmodel %s --arch qwen3 --vocab tests/data/vocab/ggml-vocab-qwen2.gguf --dim 64 "
             "--layers 2 --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 "
             "--template tests/data/templates/jinja/Qwen-Qwen3-0.6B.jinja >/dev/null",
             model_path);
    assert_int_equal(system(cmd), 0);
    if (llm_model_open(model_path, llm_model_default_params(), &model, err, sizeof err) ||
        llm_vocab_load(llm_model_gguf(model), &vocab, err, sizeof err))
        fail_msg("%s", err);
    char home[128];
    snprintf(home, sizeof home, "%s/home-think", dir);
    const char *pre = NOTHINK_BLOCK;
    size_t pl = strlen(pre);
    const char *turns[3] = {"Hi", "Why?", "Go on"};
    const bool off[3] = {true, false, true};
    struct chat one;
    struct answer x[3], y;
    struct sess_turn_stats ts;
    chat_open(&one, NULL, 0, 512, NULL);
    for (int i = 0; i < 3; i++) {
        int64_t before = sess_conv_n_tokens(one.conv);
        set_think(&one, off[i]);
        say(&one, turns[i], &x[i], &ts);
        if (i > 0) { /* only this turn's tokens */
            assert_int_equal(ts.cached_tokens, before);
            assert_int_equal(ts.prefilled_tokens, ts.prompt_tokens - before);
        }
        const char *text = last_answer(&one); /* the block kept, not streamed */
        assert_memory_equal(text, pre, off[i] ? pl : 0);
        assert_string_equal(text + (off[i] ? pl : 0), x[i].text);
        if (i == 0) {
            const char *qwen3 = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" NOTHINK_BLOCK;
            int32_t ids[64];
            int32_t k = llm_tokenize(vocab, qwen3, strlen(qwen3), ids, 64, true, true);
            assert_true(k > 0);
            assert_int_equal(ts.prompt_tokens, k);
            assert_memory_equal(sess_conv_tokens(one.conv), ids, (size_t)k * sizeof *ids);
        }
    }
    chat_close(&one);
    /* one process per turn, through a session that keeps the setting */
    for (int i = 0; i < 3; i++) {
        struct chat c;
        struct sess_restore_stats rs;
        chat_open(&c, NULL, 0, 512, home);
        assert_int_equal(sess_conv_attach(c.conv, "think", i == 0, &rs), 0);
        assert_int_equal(rs.missing_tokens, 0);
        if (i > 0) /* the setting of the turn before, kept */
            assert_int_equal(sess_conv_get_params(c.conv).think_off, off[i - 1]);
        int64_t restored = rs.restored_tokens;
        set_think(&c, off[i]);
        say(&c, turns[i], &y, &ts);
        assert_int_equal(ts.cached_tokens, restored);
        assert_string_equal(y.text, x[i].text);
        if (i == 2) { /* retry with thinking on: the answer has no block */
            set_think(&c, false);
            memset(&y, 0, sizeof y);
            assert_int_equal(sess_conv_retry(c.conv, collect, &y, NULL, &ts), SESS_OK);
            assert_int_equal(llm_ctx_n_past(c.ctx), sess_conv_n_tokens(c.conv));
            assert_string_equal(last_answer(&c), y.text);
            /* and back: the block again, the first answer again */
            set_think(&c, true);
            memset(&y, 0, sizeof y);
            assert_int_equal(sess_conv_retry(c.conv, collect, &y, NULL, &ts), SESS_OK);
            assert_string_equal(y.text, x[2].text);
        }
        chat_close(&c);
    }
    /* given for a conversation (as --think on is): it holds there, and the
     * session still keeps "off" */
    {
        struct chat c;
        struct sess_restore_stats rs;
        open_think = 1;
        chat_open(&c, NULL, 0, 512, home);
        open_think = -1;
        assert_int_equal(sess_conv_attach(c.conv, "think", false, &rs), 0);
        assert_false(sess_conv_get_params(c.conv).think_off);
        say(&c, "More", &y, &ts);
        assert_int_equal(strncmp(last_answer(&c), pre, pl) == 0, false);
        chat_close(&c);
        chat_open(&c, NULL, 0, 512, home); /* nothing given: the kept "off" */
        assert_int_equal(sess_conv_attach(c.conv, "think", false, &rs), 0);
        assert_true(sess_conv_get_params(c.conv).think_off);
        say(&c, "Again", &y, &ts);
        assert_memory_equal(last_answer(&c), pre, pl);
        chat_close(&c);
    }
    llm_vocab_free(vocab);
    llm_model_close(model);
    model = m0, vocab = v0;
    memcpy(model_path, p0, sizeof p0);
    /* ChatML without Qwen3's switch: thinking off changes nothing */
    struct chat a, b;
    chat_open(&a, NULL, 0, 256, NULL);
    chat_open(&b, NULL, 0, 256, NULL);
    set_think(&a, true);
    say(&a, "Hi", &x[0], &ts);
    say(&b, "Hi", &y, &ts);
    assert_string_equal(last_answer(&a), y.text);
    assert_string_equal(x[0].text, y.text);
    chat_close(&a);
    chat_close(&b);
}

/* ==== a remote engine: a fake server ==== */

enum fake_mode { FAKE_OK, FAKE_FAIL, FAKE_CUT, FAKE_INTERRUPTED };
struct fake {
    enum fake_mode mode;
    int calls;
    char sent[4096]; /* the last request's messages, "role:content|" each */
    int64_t sent_tokens; /* "tokens": bytes of all messages, as a server counts */
    int64_t prev_tokens;
    uint32_t given; /* the last request's: which parameters were set, and temp */
    float temp;
};

static int fake_answer(void *ud, const struct llm_chat_msg *msgs, size_t n, const struct sess_conv_params *p,
                       sess_text_fn on_text, void *text_ud, volatile sig_atomic_t *interrupt,
                       struct sess_remote_answer *a)
{
    (void)interrupt;
    struct fake *f = ud;
    f->calls++;
    f->given = p->given;
    f->temp = p->sampling.temp;
    f->sent[0] = 0;
    int64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        snprintf(f->sent + strlen(f->sent), sizeof f->sent - strlen(f->sent), "%s:%s|", msgs[i].role,
                 msgs[i].content);
        bytes += (int64_t)strlen(msgs[i].content);
    }
    if (f->mode == FAKE_FAIL) {
        snprintf(a->problem, sizeof a->problem, "the server is down");
        return SESS_ERR_REMOTE;
    }
    if (f->mode == FAKE_INTERRUPTED)
        return SESS_ERR_INTERRUPTED;
    char text[64];
    snprintf(text, sizeof text, f->mode == FAKE_CUT ? "cut %d" : "answer %d", f->calls);
    on_text(text_ud, text, strlen(text));
    a->text = strdup(text);
    a->len = strlen(text);
    a->stop_reason = f->mode == FAKE_CUT ? "cut" : "stop";
    if (f->mode == FAKE_CUT)
        snprintf(a->problem, sizeof a->problem, "the stream broke");
    a->prompt_tokens = bytes;
    a->cached_tokens = f->prev_tokens < bytes ? f->prev_tokens : bytes;
    a->generated_tokens = 2;
    f->prev_tokens = bytes;
    return SESS_OK;
}

static void remote_open_as(struct chat *ch, struct fake *f, const char *system, const char *home, const char *entry,
                           bool switch_model)
{
    char err[512];
    ch->st = NULL;
    if (home && sess_store_open(home, sess_store_default_params(), &ch->st, err, sizeof err))
        fail_msg("%s", err);
    struct sess_conv_params p = sess_conv_default_params();
    p.remote = (struct sess_remote){fake_answer, f};
    p.system = system;
    p.model_path = entry;
    p.switch_model = switch_model;
    if (sess_conv_init(ch->st, p, &ch->conv, err, sizeof err))
        fail_msg("%s", err);
    ch->ctx = sess_conv_ctx(ch->conv);
}

static void remote_open(struct chat *ch, struct fake *f, const char *system, const char *home)
{
    remote_open_as(ch, f, system, home, "/models/big.remote", false);
}

static const char *last_text(struct chat *ch)
{
    const char *t;
    sess_conv_message(ch->conv, sess_conv_n_messages(ch->conv) - 1, &t);
    return t;
}

static int rsay(struct chat *ch, const char *text, struct answer *a, struct sess_turn_stats *ts)
{
    memset(a, 0, sizeof *a);
    return sess_conv_say(ch->conv, text, collect, a, NULL, ts);
}

static void test_remote_engine(void **state)
{
    (void)state;
    char home[128];
    snprintf(home, sizeof home, "%s/home-remote", dir);
    struct fake f = {0};
    struct chat a;
    struct answer x;
    struct sess_turn_stats ts;
    struct sess_restore_stats rs;
    remote_open(&a, &f, "sys", home);
    assert_true(sess_conv_is_remote(a.conv));
    assert_null(a.ctx);
    assert_int_equal(sess_conv_attach(a.conv, "r", true, &rs), SESS_OK);
    assert_int_equal(rsay(&a, "one", &x, &ts), SESS_OK);
    assert_string_equal(x.text, "answer 1");
    assert_string_equal(f.sent, "system:sys|user:one|");
    assert_int_equal(ts.prompt_tokens, 6);
    assert_int_equal(ts.cached_tokens, 0);
    assert_int_equal(ts.prefilled_tokens, 6);
    assert_int_equal(ts.blocks_written, 0);
    assert_int_equal(sess_conv_n_tokens(a.conv), 0);
    /* a failure changes nothing */
    f.mode = FAKE_FAIL;
    assert_int_equal(rsay(&a, "two", &x, &ts), SESS_ERR_REMOTE);
    assert_string_equal(sess_conv_errmsg(a.conv), "the server is down");
    assert_int_equal(sess_conv_n_messages(a.conv), 3);
    f.mode = FAKE_INTERRUPTED;
    assert_int_equal(rsay(&a, "two", &x, &ts), SESS_ERR_INTERRUPTED);
    assert_int_equal(sess_conv_n_messages(a.conv), 3);
    f.mode = FAKE_OK;
    assert_int_equal(rsay(&a, "two", &x, &ts), SESS_OK);
    assert_string_equal(f.sent, "system:sys|user:one|assistant:answer 1|user:two|");
    assert_int_equal(ts.cached_tokens, 6); /* the fake's prefix cache */
    /* a failed retry keeps the answer it was to replace; one that works replaces it */
    char kept[64];
    snprintf(kept, sizeof kept, "%s", last_text(&a));
    f.mode = FAKE_FAIL;
    assert_int_equal(sess_conv_retry(a.conv, collect, &x, NULL, &ts), SESS_ERR_REMOTE);
    assert_int_equal(sess_conv_n_messages(a.conv), 5);
    assert_string_equal(last_text(&a), kept);
    f.mode = FAKE_OK;
    assert_int_equal(sess_conv_retry(a.conv, collect, &x, NULL, &ts), SESS_OK);
    assert_string_equal(f.sent, "system:sys|user:one|assistant:answer 1|user:two|");
    assert_int_equal(sess_conv_n_messages(a.conv), 5);
    assert_string_not_equal(last_text(&a), kept);
    /* a cut answer is kept, with why */
    f.mode = FAKE_CUT;
    assert_int_equal(rsay(&a, "three", &x, &ts), SESS_OK);
    assert_string_equal(ts.stop_reason, "cut");
    assert_string_equal(sess_conv_errmsg(a.conv), "the stream broke");
    assert_int_equal(sess_conv_n_messages(a.conv), 7);
    f.mode = FAKE_OK;
    chat_close(&a);

    /* another conversation resumes it: the same messages, the cut one marked */
    struct fake g = {0};
    remote_open(&a, &g, NULL, home);
    assert_int_equal(sess_conv_attach(a.conv, "r", false, &rs), SESS_OK);
    assert_int_equal(sess_conv_n_messages(a.conv), 7);
    assert_string_equal(last_text(&a), "cut 7");
    assert_int_equal(rsay(&a, "four", &x, &ts), SESS_OK);
    assert_string_equal(g.sent, "system:sys|user:one|assistant:answer 1|user:two|assistant:answer 6|user:three|"
                                "assistant:cut 7|user:four|");
    assert_false(g.given & (1u << SESS_PARAM_TEMP)); /* nothing set: the server's defaults */
    /* /set temp: saved with the session at once, and sent to the server */
    struct llm_sampler_params sp = sess_conv_get_params(a.conv).sampling;
    sp.temp = 0.25f;
    assert_int_equal(sess_conv_keep_params(a.conv, sp, -1, false, 1u << SESS_PARAM_TEMP), SESS_OK);
    struct sess_info pi;
    assert_int_equal(sess_get(a.st, sess_conv_session(a.conv), &pi), 0);
    assert_non_null(strstr(pi.params, "\"temp\": 0.25"));
    sess_info_free(&pi);
    assert_int_equal(sess_conv_retry(a.conv, collect, &x, NULL, &ts), SESS_OK);
    assert_true(g.given & (1u << SESS_PARAM_TEMP));
    assert_true(g.temp == 0.25f);
    int64_t sid = sess_conv_session(a.conv);
    struct sess_message *m;
    int64_t n;
    assert_int_equal(sess_messages(a.st, sid, &m, &n), 0);
    assert_int_equal(n, 9);
    assert_string_equal(m[6].stop_reason, "cut");
    assert_string_equal(m[8].stop_reason, "stop");
    for (int64_t i = 0; i < n; i++)
        assert_null(m[i].tokens); /* no token ids for a remote engine's messages */
    sess_messages_free(m, n);
    /* undo and drop_oldest are saved too */
    assert_int_equal(sess_conv_undo(a.conv), SESS_OK);
    assert_int_equal(sess_conv_drop_oldest(a.conv, 1), SESS_OK);
    assert_int_equal(sess_messages(a.st, sid, &m, &n), 0);
    assert_int_equal(n, 5);
    assert_string_equal(m[1].text, "two");
    sess_messages_free(m, n);
    struct sess_info info;
    assert_int_equal(sess_get(a.st, sid, &info), 0);
    assert_string_equal(info.model_path, "/models/big.remote");
    assert_int_equal(info.kv_bytes, 0);
    sess_info_free(&info);
    chat_close(&a);
    /* reopened by name, its kept temp is sent without being given again */
    struct fake h = {0};
    remote_open(&a, &h, NULL, home);
    assert_int_equal(sess_conv_attach(a.conv, "r", false, &rs), SESS_OK);
    assert_int_equal(rsay(&a, "five", &x, &ts), SESS_OK);
    assert_true((h.given & (1u << SESS_PARAM_TEMP)) && h.temp == 0.25f);
    assert_int_equal(sess_conv_undo(a.conv), SESS_OK);
    chat_close(&a);
    /* another remote entry is another model: refused, unless switching */
    remote_open_as(&a, &h, NULL, home, "/models/other.remote", false);
    assert_int_equal(sess_conv_attach(a.conv, "r", false, &rs), SESS_ERR_MODEL);
    assert_int_equal(sess_conv_session(a.conv), -1);
    chat_close(&a);

    /* a local model takes the session over: it tokenizes the remote turns */
    struct chat l;
    struct answer y;
    chat_open(&l, NULL, 0, 256, home);
    assert_int_equal(sess_conv_attach(l.conv, "r", false, &rs), SESS_ERR_MODEL); /* not without asking */
    assert_non_null(strstr(sess_conv_errmsg(l.conv), "was saved with model '/models/big.remote'"));
    assert_int_equal(sess_conv_n_messages(l.conv), 0);
    chat_close(&l);
    open_switch = true;
    chat_open(&l, NULL, 0, 256, home);
    open_switch = false;
    assert_int_equal(sess_conv_attach(l.conv, "r", false, &rs), SESS_OK);
    assert_non_null(strstr(rs.first_problem, "it goes on with"));
    assert_int_equal(sess_conv_n_messages(l.conv), 5);
    assert_true(sess_conv_n_tokens(l.conv) > 10);
    assert_int_equal(rs.missing_tokens, sess_conv_n_tokens(l.conv));
    /* the remote answers are in its tokens, as their text */
    char text[4096] = "";
    for (int64_t i = 0; i < sess_conv_n_tokens(l.conv); i++) {
        char piece[256];
        int32_t k = llm_token_to_piece(vocab, sess_conv_tokens(l.conv)[i], piece, sizeof piece - 1, 0, true);
        if (k > 0 && strlen(text) + (size_t)k < sizeof text)
            strncat(text, piece, (size_t)k);
    }
    assert_non_null(strstr(text, "<|im_start|>assistant\nanswer 6<|im_end|>"));
    size_t tl = strlen(text), el = strlen("<|im_start|>assistant\ncut 7"); /* the last: its end comes next turn */
    assert_true(tl >= el && !strcmp(text + tl - el, "<|im_start|>assistant\ncut 7"));
    say(&l, "five", &y, &ts);
    assert_int_equal(ts.cached_tokens, 0);
    chat_close(&l);
    /* and that is what a fresh local conversation of the same messages holds */
    chat_open(&l, NULL, 0, 256, home);
    assert_int_equal(sess_conv_attach(l.conv, "r", false, &rs), SESS_OK);
    assert_int_equal(rs.missing_tokens, 0); /* its blocks now cover it */
    /* the ids made when the local model took it over were saved (at once) */
    assert_int_equal(sess_messages(l.st, sess_conv_session(l.conv), &m, &n), 0);
    for (int64_t i = 0; i < n; i++)
        if (!(m[i].tokens != NULL || m[i].text[0] == 0))
            fail_msg("message %lld (%s) has no ids, n_tokens %lld", (long long)i, m[i].text, (long long)m[i].n_tokens);
    sess_messages_free(m, n);
    chat_close(&l);
}

/* A hybrid model (qwen35): turns, /undo, /retry and dropping the oldest
 * exchange, in one process and through a session resumed in new ones (its
 * recurrent state from snapshots), answer alike; a resumed turn computes
 * only its message, from the snapshot at the end of the history. */
static void hybrid_script(struct chat *ch, struct answer *out, int from, int to, bool check_resume)
{
    static const char *const msgs[] = {"Hello there, who are you", "Tell me more about that",
                                       "And what then", "Another thing", "The last one"};
    struct sess_turn_stats ts;
    for (int i = from; i < to; i++) {
        switch (i) {
        case 3: /* undo turn 3 and say it again */
            assert_int_equal(sess_conv_undo(ch->conv), SESS_OK);
            say(ch, msgs[2], &out[i], &ts);
            break;
        case 4: /* retry it */
            memset(&out[i], 0, sizeof out[i]);
            assert_int_equal(sess_conv_retry(ch->conv, collect, &out[i], NULL, &ts), SESS_OK);
            assert_int_equal(llm_ctx_n_past(ch->ctx), sess_conv_n_tokens(ch->conv));
            break;
        case 5: /* drop the oldest exchange, then a turn */
            assert_int_equal(sess_conv_drop_oldest(ch->conv, 1), SESS_OK);
            say(ch, msgs[3], &out[i], &ts);
            break;
        default:
            say(ch, msgs[i < 3 ? i : 4], &out[i], &ts);
            /* resumed: only the message computed (the attach restored the rest) */
            if (check_resume && i > 0)
                assert_true(ts.prefilled_tokens < 20 && ts.prefilled_tokens == ts.prompt_tokens - ts.cached_tokens);
        }
        print_message("hybrid %d: '%s'\n", i, out[i].text);
    }
}

static void test_hybrid(void **state)
{
    (void)state;
    char path[160], err[512], home[160];
    snprintf(path, sizeof path, "%s/q35.gguf", dir);
    snprintf(home, sizeof home, "%s/home-q35", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "tests/mkmodel %s --arch qwen35 --vocab tests/data/vocab/ggml-vocab-qwen2.gguf --dim 64 --layers 4 "
             "--heads 4 --kv-heads 2 --head-dim 16 --ff 128 --ssm-state 16 --ssm-groups 2 --ssm-heads 4 "
             "--ssm-conv 4 --full-attn-interval 4 --scale 0.2 >/dev/null",
             path);
    assert_int_equal(system(cmd), 0);
    struct llm_model *q;
    assert_int_equal(llm_model_open(path, llm_model_default_params(), &q, err, sizeof err), 0);
    struct llm_model *keep_model = model;
    char keep_path[128];
    snprintf(keep_path, sizeof keep_path, "%s", model_path);
    model = q;
    snprintf(model_path, sizeof model_path, "%.120s", path);
    struct answer live[7], res[7];
    struct chat a;
    chat_open(&a, "You are terse.", 0, 512, NULL);
    hybrid_script(&a, live, 0, 7, false);
    chat_close(&a);
    /* the same through a session: a process per step */
    struct sess_restore_stats rs;
    for (int i = 0; i < 7; i++) {
        chat_open(&a, "You are terse.", 0, 512, home);
        assert_int_equal(sess_conv_attach(a.conv, "h", i == 0, &rs), 0);
        assert_int_equal(rs.damaged, 0);
        if (i > 0) {
            assert_int_equal(rs.missing_tokens, 0); /* all restored: the state at the end too */
            assert_int_equal(rs.snapshot_pos, sess_conv_n_tokens(a.conv));
        }
        hybrid_script(&a, res, i, i + 1, true);
        chat_close(&a);
        assert_string_equal(res[i].text, live[i].text);
    }
    assert_string_equal(live[3].text, live[2].text); /* greedy: undo and again, retry */
    assert_string_equal(live[4].text, live[2].text);
    model = keep_model;
    snprintf(model_path, sizeof model_path, "%s", keep_path);
    llm_model_close(q);
}

/* ==== speculative decoding ==== */

/* prompt i of n: some repeat themselves (what n-gram drafts feed on) */
static void draft_prompt(int i, char *buf, size_t n)
{
    static const char *const words[] = {"apple", "river", "seven", "blue", "stone", "quick", "night", "paper"};
    switch (i % 5) {
    case 0:
        snprintf(buf, n, "Say %s %s %s %s %s %s again and again", words[i % 8], words[(i + 3) % 8], words[(i + 5) % 8],
                 words[i % 8], words[(i + 3) % 8], words[(i + 5) % 8]);
        break;
    case 1:
        snprintf(buf, n, "def f%d(x):\n    return x + %d\ndef g%d(x):\n    return x + %d\n", i, i, i, i + 1);
        break;
    case 2:
        snprintf(buf, n, "Hello number %d, how are you?", i);
        break;
    case 3:
        snprintf(buf, n, "%d %d %d %d %d %d %d %d", i, i + 1, i + 2, i, i + 1, i + 2, i, i + 1);
        break;
    default:
        snprintf(buf, n, "Tell me about the %s %s.", words[i % 8], words[(i * 3 + 1) % 8]);
        break;
    }
}

#define DRAFT_PROMPTS 50
struct draft_totals {
    int64_t generated, drafted, accepted, passes;
};

/* each prompt in turn in one conversation (reset between: a fresh sampler
 * each time) over the store in home; the answers into out */
static void draft_run(const char *home, float temp, uint32_t draft, int32_t test, int n_prompts,
                      struct answer *out, struct draft_totals *tot)
{
    struct chat ch;
    struct sess_turn_stats ts;
    open_draft = draft;
    open_draft_test = test;
    open_n_predict = 24;
    chat_open(&ch, "You are terse.", temp, 512, home);
    open_draft = 0;
    open_draft_test = 0;
    open_n_predict = 12;
    memset(tot, 0, sizeof *tot);
    for (int i = 0; i < n_prompts; i++) {
        char q[256];
        draft_prompt(i, q, sizeof q);
        if (i)
            assert_int_equal(sess_conv_reset(ch.conv, "You are terse."), SESS_OK);
        say(&ch, q, &out[i], &ts);
        tot->generated += ts.generated_tokens;
        tot->drafted += ts.drafted_tokens;
        tot->accepted += ts.accepted_tokens;
        tot->passes += ts.draft_passes;
        assert_true(ts.accepted_tokens <= ts.drafted_tokens);
        assert_true(ts.accepted_tokens <= ts.generated_tokens);
        if (!draft && !test)
            assert_int_equal(ts.drafted_tokens, 0);
    }
    chat_close(&ch);
}

static void test_draft_exact(void **state)
{
    (void)state;
    static const char *const wtypes[] = {"F32", "F16", "BF16", "Q8_0"};
    struct llm_model *keep_model = model;
    char keep_path[128];
    snprintf(keep_path, sizeof keep_path, "%s", model_path);
    static struct answer ref[DRAFT_PROMPTS], got[DRAFT_PROMPTS];
    int64_t ngram_accepted = 0;
    for (size_t w = 0; w < sizeof wtypes / sizeof *wtypes; w++) {
        char path[160], cmd[512], err[512];
        snprintf(path, sizeof path, "%s/draft-%s.gguf", dir, wtypes[w]);
        snprintf(cmd, sizeof cmd,
                 "tests/mkmodel %s --arch qwen2 --vocab tests/data/vocab/ggml-vocab-qwen2.gguf --dim 64 "
                 "--layers 2 --heads 4 --kv-heads 2 --ff 128 --tied --scale 0.2 --seed %d --type %s >/dev/null",
                 path, 40 + (int)w, wtypes[w]);
        assert_int_equal(system(cmd), 0);
        struct llm_model *m;
        assert_int_equal(llm_model_open(path, llm_model_default_params(), &m, err, sizeof err), 0);
        model = m;
        snprintf(model_path, sizeof model_path, "%.120s", path);
        /* all 50 prompts on Q8_0, fewer on the others (test time) */
        int np = w == 3 ? DRAFT_PROMPTS : w == 0 ? 12 : 6;
        for (int ti = 0; ti < 2; ti++) {
            float temp = ti ? 0.8f : 0;
            char home[200];
            snprintf(home, sizeof home, "%s/home-draft-%s-%d", dir, wtypes[w], ti);
            struct draft_totals t0, t;
            /* without drafting first: its answers go to the store, which
             * the store source then drafts from (the repeat workload) */
            draft_run(home, temp, SESS_DRAFT_OFF, 0, np, ref, &t0);
            static const struct {
                uint32_t draft;
                int32_t test;
                const char *name;
            } modes[] = {{SESS_DRAFT_NGRAM, 0, "ngram"},
                         {SESS_DRAFT_STORE, 0, "store"},
                         {SESS_DRAFT_OFF, SESS_DRAFT_TEST_CORRUPT, "wrong drafts"},
                         {SESS_DRAFT_ALL, SESS_DRAFT_TEST_CORRUPT, "all, some wrong"}};
            for (size_t mi = 0; mi < sizeof modes / sizeof *modes; mi++) {
                /* (the store only where it is a source: writing blocks is what takes the time) */
                draft_run(modes[mi].draft & SESS_DRAFT_STORE ? home : NULL, temp, modes[mi].draft, modes[mi].test, np,
                          got, &t);
                for (int i = 0; i < np; i++)
                    if (strcmp(got[i].text, ref[i].text))
                        fail_msg("%s temp %g %s prompt %d: '%s' drafting, '%s' without", wtypes[w], temp,
                                 modes[mi].name, i, got[i].text, ref[i].text);
                assert_int_equal(t.generated, t0.generated);
                print_message("%s temp %g %-16s: %lld generated, %lld drafted in %lld passes, %lld accepted\n",
                              wtypes[w], temp, modes[mi].name, (long long)t.generated, (long long)t.drafted,
                              (long long)t.passes, (long long)t.accepted);
                if (modes[mi].draft == SESS_DRAFT_STORE) /* the same answers were stored: nearly all drafted */
                    assert_true(t.accepted * 2 >= t.generated);
                if (modes[mi].draft == SESS_DRAFT_NGRAM) { /* the prompts repeat themselves */
                    assert_true(t.drafted > 0);
                    ngram_accepted += t.accepted;
                }
                if (modes[mi].test) { /* every step drafts, and some are wrong */
                    assert_true(t.passes > 0);
                    assert_true(t.accepted < t.drafted);
                }
            }
        }
        llm_model_close(m);
    }
    assert_true(ngram_accepted > 0);
    model = keep_model;
    snprintf(model_path, sizeof model_path, "%s", keep_path);
}

/* the block files under home/kv, named and hashed, into out */
static void block_listing(const char *home, const char *out)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd '%s/kv' && find . -type f | LC_ALL=C sort | xargs -r sha256sum > '%s'", home, out);
    assert_int_equal(system(cmd), 0);
}

/* sessions, resumed, forked and retried, with drafting as without; the
 * blocks stored are the same files */
static void test_draft_sessions(void **state)
{
    (void)state;
    static const struct {
        uint32_t draft;
        int32_t test;
    } modes[] = {{SESS_DRAFT_OFF, 0}, {SESS_DRAFT_ALL, 0}, {SESS_DRAFT_ALL, SESS_DRAFT_TEST_CORRUPT}};
    enum { N_ANS = 7 };
    static struct answer ans[3][N_ANS];
    int64_t accepted[3] = {0};
    for (int mi = 0; mi < 3; mi++) {
        char home[160], err[256];
        snprintf(home, sizeof home, "%s/home-dsess-%d", dir, mi);
        struct chat a;
        struct sess_turn_stats ts;
        struct sess_restore_stats rs;
        struct answer *x = ans[mi];
        open_draft = modes[mi].draft;
        open_draft_test = modes[mi].test;
        open_n_predict = 24;
        chat_open(&a, "You are terse.", 0.8f, 512, home);
        assert_int_equal(sess_conv_attach(a.conv, "s", true, &rs), 0);
        say(&a, "one two three one two three one two", &x[0], &ts);
        accepted[mi] += ts.accepted_tokens;
        say(&a, "again: one two three", &x[1], &ts);
        accepted[mi] += ts.accepted_tokens;
        memset(&x[2], 0, sizeof x[2]);
        assert_int_equal(sess_conv_retry(a.conv, collect, &x[2], NULL, &ts), SESS_OK); /* seeded: another draw */
        assert_int_equal(llm_ctx_n_past(a.ctx), sess_conv_n_tokens(a.conv));
        accepted[mi] += ts.accepted_tokens;
        chat_close(&a);
        /* resumed in another process */
        chat_open(&a, NULL, 0.8f, 512, home);
        assert_int_equal(sess_conv_attach(a.conv, "s", false, &rs), 0);
        say(&a, "and once more: one two three", &x[3], &ts);
        accepted[mi] += ts.accepted_tokens;
        memset(&x[4], 0, sizeof x[4]);
        assert_int_equal(sess_conv_retry(a.conv, collect, &x[4], NULL, &ts), SESS_OK);
        assert_int_equal(llm_ctx_n_past(a.ctx), sess_conv_n_tokens(a.conv));
        chat_close(&a);
        /* a fork at turn 1 */
        struct sess_store *st;
        assert_int_equal(sess_store_open(home, sess_store_default_params(), &st, err, sizeof err), 0);
        assert_int_equal(sess_fork(st, "s", "f", 1), 0);
        sess_store_close(st);
        chat_open(&a, NULL, 0.8f, 512, home);
        assert_int_equal(sess_conv_attach(a.conv, "f", false, &rs), 0);
        /* turn 2's message again: the fork has the sampler after turn 1,
         * so the answer is turn 2's first (x[1]), and the store has it */
        say(&a, "again: one two three", &x[5], &ts);
        accepted[mi] += ts.accepted_tokens;
        say(&a, "one two three one two three", &x[6], &ts);
        accepted[mi] += ts.accepted_tokens;
        chat_close(&a);
        open_draft = 0;
        open_draft_test = 0;
        open_n_predict = 12;
        for (int i = 0; mi > 0 && i < N_ANS; i++)
            if (strcmp(x[i].text, ans[0][i].text))
                fail_msg("mode %d answer %d: '%s' drafting, '%s' without", mi, i, x[i].text, ans[0][i].text);
        char list[200], ref[200];
        snprintf(list, sizeof list, "%s/blocks-%d.txt", dir, mi);
        snprintf(ref, sizeof ref, "%s/blocks-0.txt", dir);
        block_listing(home, list);
        if (mi > 0) {
            char cmd[512];
            snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", list, ref);
            assert_int_equal(system(cmd), 0);
        }
    }
    assert_string_not_equal(ans[0][1].text, ans[0][2].text); /* a retry draws again */
    assert_string_equal(ans[0][5].text, ans[0][1].text);     /* the same state, the same draws */
    assert_int_equal(accepted[0], 0);
    assert_true(accepted[1] > 0);
    assert_true(accepted[2] > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_resume_greedy),
        cmocka_unit_test(test_exact_resume_sampled),
        cmocka_unit_test(test_incremental_and_sharing),
        cmocka_unit_test(test_script_case),
        cmocka_unit_test(test_sampler_per_turn),
        cmocka_unit_test(test_full_disk),
        cmocka_unit_test(test_disk_full_for_the_index),
        cmocka_unit_test(test_disk_full_said),
        cmocka_unit_test(test_undo_retry_interrupt),
        cmocka_unit_test(test_interrupted_prefill),
        cmocka_unit_test(test_context_full),
        cmocka_unit_test(test_special_tokens_in_user_text),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_think_switch),
        cmocka_unit_test(test_remote_engine),
        cmocka_unit_test(test_hybrid),
        cmocka_unit_test(test_draft_exact),
        cmocka_unit_test(test_draft_sessions),
    };
    if (getenv("TEST_FILTER")) /* one test, e.g. TEST_FILTER=test_disk_full_said */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
