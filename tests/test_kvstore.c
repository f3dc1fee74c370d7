/*
 * test_kvstore.c - the KV cache on disk over the real engine: a context
 * restored from segments gives bit-identical next-token logits to the live
 * one; a missing, damaged or foreign segment is reported, computed again and
 * rewritten; fingerprints tell models apart. Models come from tests/mkmodel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "sessions/sess.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

struct fx {
    char dir[64], model_path[128], other_path[128];
    struct sess_store *st;
    struct llm_model *m;
    uint8_t fp[32];
    int64_t sid;
};

#define N_TOK 24
static const int32_t toks[N_TOK + 1] = {1,  17, 29, 33, 41, 55, 60, 71, 80, 99, 101, 120, 133,
                                        140, 150, 160, 170, 180, 190, 200, 210, 220, 230, 240, 250};
static const int64_t bounds[3] = {10, 18, 24}, last_seq[3] = {0, 2, 4};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/kvchat-kvstore-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->model_path, sizeof f->model_path, "%s/m.gguf", f->dir);
    snprintf(f->other_path, sizeof f->other_path, "%s/other.gguf", f->dir);
    char cmd[512];
    static const char *shape = "--arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ff 128 --n-vocab 300";
    snprintf(cmd, sizeof cmd, "tests/mkmodel %s %s >/dev/null && tests/mkmodel %s %s --seed 2 >/dev/null",
             f->model_path, shape, f->other_path, shape);
    if (system(cmd) != 0)
        return -1;
    char err[512];
    if (llm_model_open(f->model_path, llm_model_default_params(), &f->m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    sess_model_fingerprint(llm_model_gguf(f->m), f->fp);
    if (sess_store_open(f->dir, &f->st, err, sizeof err))
        return -1;
    struct sess_new n = {"s", f->model_path, f->fp, "sys", NULL, 1};
    if (sess_create(f->st, &n, &f->sid))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sess_store_close(f->st);
    llm_model_close(f->m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc ? -1 : 0;
}

static struct llm_ctx *new_ctx(struct fx *f)
{
    struct llm_ctx_params p = llm_ctx_default_params();
    p.n_ctx = 64;
    p.n_threads = 2;
    struct llm_ctx *c;
    char err[512];
    if (llm_ctx_init(f->m, p, &c, err, sizeof err))
        fail_msg("ctx: %s", err);
    return c;
}

/* the live conversation: system prefill, turn 1 prefill + token-by-token
 * answer, turn 2 prefill; a snapshot after each span; then the next token */
static void live(struct fx *f, float *logits)
{
    struct llm_ctx *c = new_ctx(f);
    uint8_t parent[32] = {0}, seg[32];
    assert_int_equal(llm_ctx_decode(c, toks, 10), LLM_OK);
    assert_int_equal(sess_kv_snapshot(f->st, f->sid, f->m, c, f->fp, parent, toks, 0, 10, 0, seg), 0);
    memcpy(parent, seg, 32);
    assert_int_equal(llm_ctx_decode(c, toks + 10, 5), LLM_OK);
    for (int i = 15; i < 18; i++)
        assert_int_equal(llm_ctx_decode(c, toks + i, 1), LLM_OK);
    assert_int_equal(sess_kv_snapshot(f->st, f->sid, f->m, c, f->fp, parent, toks, 10, 18, 2, seg), 0);
    memcpy(parent, seg, 32);
    assert_int_equal(llm_ctx_decode(c, toks + 18, 6), LLM_OK);
    assert_int_equal(sess_kv_snapshot(f->st, f->sid, f->m, c, f->fp, parent, toks, 18, 24, 4, seg), 0);
    assert_int_equal(llm_ctx_decode(c, toks + 24, 1), LLM_OK);
    memcpy(logits, llm_ctx_logits(c), 300 * sizeof *logits);
    llm_ctx_free(c);
}

static void restore(struct fx *f, const struct llm_model *m, const uint8_t *fp,
                    struct sess_restore_stats *s, float *logits)
{
    struct llm_ctx *c = new_ctx(f);
    if (sess_kv_restore(f->st, f->sid, m, c, fp, toks, bounds, last_seq, 3, s))
        fail_msg("restore: %s", sess_errmsg(f->st));
    assert_int_equal(llm_ctx_n_past(c), N_TOK);
    assert_int_equal(llm_ctx_decode(c, toks + 24, 1), LLM_OK);
    memcpy(logits, llm_ctx_logits(c), 300 * sizeof *logits);
    llm_ctx_free(c);
}

static char *seg_path(struct fx *f, int i)
{
    static char path[4200];
    struct sess_chain_link *c;
    int64_t n;
    assert_int_equal(sess_chain(f->st, f->sid, &c, &n), 0);
    assert_int_equal(n, 3);
    sess_segment_path(f->st, c[i].segment, path, sizeof path);
    free(c);
    return path;
}

static void test_exact_resume(void **state)
{
    struct fx *f = *state;
    float l_live[300], l_rest[300];
    struct sess_restore_stats s;
    live(f, l_live);
    restore(f, f->m, f->fp, &s, l_rest);
    assert_int_equal(s.restored_tokens, N_TOK);
    assert_int_equal(s.prefilled_tokens, 0);
    assert_int_equal(s.damaged, 0);
    /* bit-identical, not merely close */
    assert_memory_equal(l_live, l_rest, sizeof l_live);
    /* bytes on disk per token are the KV size, no bloat */
    struct llm_ctx *c = new_ctx(f);
    int64_t store = sess_store_bytes(f->st), kv = (int64_t)llm_ctx_kv_size(c, 0, N_TOK);
    llm_ctx_free(c);
    assert_true(store >= kv && store <= kv + 3 * 512);
}

static void test_missing_and_damaged(void **state)
{
    struct fx *f = *state;
    float l_live[300], l1[300], l2[300];
    struct sess_restore_stats s;
    live(f, l_live);
    /* a missing segment: reported once, computed again, rewritten */
    char *p = seg_path(f, 1);
    assert_int_equal(unlink(p), 0);
    restore(f, f->m, f->fp, &s, l1);
    assert_int_equal(s.damaged, 1);
    assert_int_equal(s.prefilled_tokens, 8);
    assert_int_equal(s.restored_tokens, 16);
    assert_int_equal(s.rewritten, 1);
    assert_non_null(strstr(s.first_problem, "is missing"));
    assert_int_equal(access(seg_path(f, 1), F_OK), 0);
    /* recomputed in one batch instead of token by token: close, if not bitwise */
    float maxd = 0, lo = l_live[0], hi = l_live[0];
    for (int i = 0; i < 300; i++) {
        maxd = fmaxf(maxd, fabsf(l_live[i] - l1[i]));
        lo = fminf(lo, l_live[i]);
        hi = fmaxf(hi, l_live[i]);
    }
    assert_true(maxd / (hi - lo) < 1e-2);
    /* the rewritten segment now restores exactly what was recomputed */
    restore(f, f->m, f->fp, &s, l2);
    assert_int_equal(s.damaged, 0);
    assert_memory_equal(l1, l2, sizeof l1);
    /* a flipped byte in the last segment's rows */
    p = seg_path(f, 2);
    FILE *fp = fopen(p, "r+b");
    fseek(fp, -5, SEEK_END);
    int ch = fgetc(fp);
    fseek(fp, -5, SEEK_END);
    fputc(ch ^ 1, fp);
    fclose(fp);
    restore(f, f->m, f->fp, &s, l1);
    assert_int_equal(s.damaged, 1);
    assert_non_null(strstr(s.first_problem, "checksum mismatch"));
    assert_int_equal(s.prefilled_tokens, 6);
    /* a truncated first segment */
    p = seg_path(f, 0);
    struct stat sb;
    stat(p, &sb);
    assert_int_equal(truncate(p, sb.st_size / 2), 0);
    restore(f, f->m, f->fp, &s, l1);
    assert_int_equal(s.damaged, 1);
    assert_int_equal(s.prefilled_tokens, 10);
    restore(f, f->m, f->fp, &s, l2);
    assert_int_equal(s.damaged, 0);
}

static void test_other_model(void **state)
{
    struct fx *f = *state;
    float l[300];
    struct sess_restore_stats s;
    live(f, l);
    struct llm_model *o;
    char err[512];
    assert_int_equal(llm_model_open(f->other_path, llm_model_default_params(), &o, err, sizeof err), 0);
    uint8_t ofp[32];
    sess_model_fingerprint(llm_model_gguf(o), ofp);
    /* same shapes and metadata, other weights: another fingerprint */
    assert_memory_not_equal(ofp, f->fp, 32);
    uint8_t again[32];
    sess_model_fingerprint(llm_model_gguf(f->m), again);
    assert_memory_equal(again, f->fp, 32);
    /* remembered by file identity: computed once, then looked up, and
     * computed again once the file's status changes */
    assert_int_equal(sess_model_fingerprint_cached(f->st, f->model_path, llm_model_gguf(f->m), again), 0);
    assert_memory_equal(again, f->fp, 32);
    memset(again, 0, 32);
    assert_int_equal(sess_model_fingerprint_cached(f->st, f->model_path, llm_model_gguf(f->m), again), 1);
    assert_memory_equal(again, f->fp, 32);
    usleep(10000);
    assert_int_equal(utimensat(AT_FDCWD, f->model_path, NULL, 0), 0); /* a touch changes ctime */
    assert_int_equal(sess_model_fingerprint_cached(f->st, f->model_path, llm_model_gguf(f->m), again), 0);
    assert_memory_equal(again, f->fp, 32);
    /* the other model finds none of this model's segments */
    struct llm_ctx *c;
    struct llm_ctx_params p = llm_ctx_default_params();
    p.n_ctx = 64;
    assert_int_equal(llm_ctx_init(o, p, &c, err, sizeof err), 0);
    assert_int_equal(sess_kv_restore(f->st, f->sid, o, c, ofp, toks, bounds, last_seq, 3, &s), 0);
    assert_int_equal(s.restored_tokens, 0);
    assert_int_equal(s.prefilled_tokens, N_TOK);
    llm_ctx_free(c);
    llm_model_close(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exact_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_damaged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_model, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
