/*
 * test_pool.c - the engine's thread pool (core/engine/pool.c) on its own,
 * with jobs of its test's making instead of the forward pass:
 * - every unit of every phase committed exactly once, with the value its
 *   chunk computed, for teams of 1 to 4 threads and chunk sizes that do
 *   and do not divide the phase;
 * - many phases in a chain (each phase reads what the one before
 *   committed): `after` runs once per phase, in order, when every chunk of
 *   its phase is committed and before any chunk of the next is;
 * - preemption and helping: a thread made to stall inside a chunk (it
 *   waits until another thread has started the same chunk) does not hold
 *   the phase up; the chunk is computed twice, committed once, and the
 *   stalled thread's late result is thrown away, also when it wakes up in
 *   a phase or job already finished;
 * - jobs back to back through llm_pool_slot's two slots.
 * The stall waits for the helper, not for a time, so the test does not
 * depend on the machine's speed; a pool that never helps fails it after
 * a generous time-out instead of hanging.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/engine/pool.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PHASES 400
#define MAX_UNITS 1000
#define STALL_TIMEOUT_S 30

struct tjob {
    int n_phases;
    struct llm_pool_phase phases[MAX_PHASES];
    uint32_t (*val)[MAX_UNITS];          /* [phase + 1][unit]: val[0] the input */
    _Atomic int (*commits)[MAX_UNITS];   /* [phase][unit] */
    _Atomic int (*computes)[MAX_UNITS];  /* [phase][first unit of the chunk] */
    _Atomic int afters[MAX_PHASES];
    _Atomic int after_order;             /* phases whose after ran, in order */
    _Atomic int bad_after;               /* an after found its phase incomplete, or out of order */
    _Atomic int early_compute;           /* a chunk of phase p computed before after(p - 1) */
    int stall_phase;                     /* the chunk of units [0, step) of this phase stalls (-1: none) */
    _Atomic int stalled, helped, timed_out, stall_over;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* what unit u of phase p computes from the phase before */
static uint32_t f(int p, int64_t u, uint32_t prev)
{
    return prev * 2654435761u + (uint32_t)p * 40503u + (uint32_t)u;
}

static void compute(void *arg, int p, int64_t u0, int64_t u1, void *scratch)
{
    struct tjob *j = arg;
    if (p > 0 && atomic_load(&j->afters[p - 1]) == 0)
        atomic_store(&j->early_compute, 1);
    int seen = atomic_fetch_add(&j->computes[p][u0], 1);
    uint32_t *out = scratch;
    for (int64_t u = u0; u < u1; u++)
        out[u - u0] = f(p, u, j->val[p][u]);
    if (p == j->stall_phase && u0 == 0 && seen == 0) {
        /* preempted mid-chunk: stay off until another thread has taken
         * this chunk up, then come back with a stale result */
        atomic_store(&j->stalled, 1);
        int waited = 0;
        while (atomic_load(&j->computes[p][u0]) < 2 && waited < STALL_TIMEOUT_S * 1000) {
            sleep_ms(1);
            waited++;
        }
        if (atomic_load(&j->computes[p][u0]) < 2)
            atomic_store(&j->timed_out, 1);
        else
            atomic_store(&j->helped, 1);
        sleep_ms(20); /* long enough for the phase (often the job) to end without us */
        for (int64_t u = u0; u < u1; u++)
            out[u - u0] = 0xdeadbeefu; /* were this committed, the values would be wrong */
        atomic_store(&j->stall_over, 1);
    }
}

static void commit(void *arg, int p, int64_t u0, int64_t u1, const void *scratch)
{
    struct tjob *j = arg;
    const uint32_t *in = scratch;
    for (int64_t u = u0; u < u1; u++) {
        atomic_fetch_add(&j->commits[p][u], 1);
        j->val[p + 1][u] = in[u - u0];
    }
}

static void after(void *arg, int p)
{
    struct tjob *j = arg;
    for (int64_t u = 0; u < j->phases[p].n_units; u++)
        if (atomic_load(&j->commits[p][u]) != 1)
            atomic_store(&j->bad_after, 1);
    if (atomic_load(&j->after_order) != p)
        atomic_store(&j->bad_after, 1);
    atomic_fetch_add(&j->afters[p], 1);
    atomic_store(&j->after_order, p + 1);
}

static struct tjob *tjob_new(int n_phases, unsigned seed, int stall_phase)
{
    struct tjob *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->val = calloc((size_t)n_phases + 1, sizeof *j->val);
    j->commits = calloc((size_t)n_phases, sizeof *j->commits);
    j->computes = calloc((size_t)n_phases, sizeof *j->computes);
    assert_true(j->val && j->commits && j->computes);
    j->n_phases = n_phases;
    j->stall_phase = stall_phase;
    srand(seed);
    for (int p = 0; p < n_phases; p++) {
        j->phases[p].n_units = 1 + rand() % MAX_UNITS;
        j->phases[p].step = 1 + rand() % 40;
    }
    /* one width for the chain: every phase reads the units the one before wrote */
    for (int p = 1; p < n_phases; p++)
        j->phases[p].n_units = j->phases[0].n_units;
    for (int64_t u = 0; u < MAX_UNITS; u++)
        j->val[0][u] = (uint32_t)u * 7u + seed;
    return j;
}

static void tjob_free(struct tjob *j)
{
    free(j->val);
    free(j->commits);
    free(j->computes);
    free(j);
}

/* the job's results against a computation on one thread, and its counts */
static void tjob_check(struct tjob *j)
{
    int64_t n = j->phases[0].n_units;
    uint32_t *want = malloc((size_t)n * sizeof *want), *next = malloc((size_t)n * sizeof *next);
    assert_true(want && next);
    for (int64_t u = 0; u < n; u++)
        want[u] = j->val[0][u];
    for (int p = 0; p < j->n_phases; p++) {
        for (int64_t u = 0; u < n; u++) {
            next[u] = f(p, u, want[u]);
            if (atomic_load(&j->commits[p][u]) != 1)
                fail_msg("phase %d unit %lld committed %d times", p, (long long)u, atomic_load(&j->commits[p][u]));
            if (j->val[p + 1][u] != next[u])
                fail_msg("phase %d unit %lld: %08x, want %08x", p, (long long)u, j->val[p + 1][u], next[u]);
        }
        memcpy(want, next, (size_t)n * sizeof *want);
        assert_int_equal(atomic_load(&j->afters[p]), 1);
        /* every chunk computed at least once */
        for (int64_t u0 = 0; u0 < n; u0 += j->phases[p].step)
            assert_true(atomic_load(&j->computes[p][u0]) >= 1);
    }
    assert_int_equal(atomic_load(&j->bad_after), 0);
    assert_int_equal(atomic_load(&j->early_compute), 0);
    free(want);
    free(next);
}

static void run_job(struct llm_pool *pool, struct llm_pool_job *slots, struct tjob *j)
{
    int s = llm_pool_slot(pool);
    assert_true(s == 0 || s == 1);
    slots[s] = (struct llm_pool_job){
        .n_phases = j->n_phases, .phases = j->phases, .arg = j,
        .compute = compute, .commit = commit, .after = after,
    };
    llm_pool_run(pool, &slots[s]);
}

static struct llm_pool *pool_new(int n)
{
    struct llm_pool *pool = NULL;
    assert_int_equal(llm_pool_init(n, MAX_UNITS * sizeof(uint32_t), MAX_UNITS, &pool), 0);
    assert_int_equal(llm_pool_n_threads(pool), n);
    return pool;
}

/* A job's data must stay readable until the pool is done with it: a stale
 * thread may still call compute on it after llm_pool_run has returned,
 * until llm_pool_slot has handed its slot out again (two jobs later) or
 * the pool is freed. The tests free their jobs after llm_pool_free. */
static void test_once_each(void **state)
{
    for (int n = 1; n <= 4; n++) {
        struct llm_pool *pool = pool_new(n);
        struct llm_pool_job slots[2];
        struct tjob *jobs[6];
        for (unsigned seed = 1; seed <= 6; seed++) {
            struct tjob *j = jobs[seed - 1] = tjob_new(1, seed * 31u + (unsigned)n, -1);
            if (seed == 1) /* one unit; then a step that divides the phase */
                j->phases[0] = (struct llm_pool_phase){1, 1};
            else if (seed == 2)
                j->phases[0] = (struct llm_pool_phase){960, 40};
            run_job(pool, slots, j);
            tjob_check(j);
        }
        llm_pool_free(pool);
        for (int i = 0; i < 6; i++)
            tjob_free(jobs[i]);
    }
}

static void test_many_phases(void **state)
{
    for (int n = 2; n <= 3; n++) {
        struct llm_pool *pool = pool_new(n);
        struct llm_pool_job slots[2];
        struct tjob *j = tjob_new(MAX_PHASES, 1000u + (unsigned)n, -1);
        run_job(pool, slots, j);
        tjob_check(j);
        assert_int_equal(atomic_load(&j->after_order), MAX_PHASES);
        llm_pool_free(pool);
        tjob_free(j);
    }
}

static void test_preempted_thread_is_helped(void **state)
{
    for (int n = 2; n <= 3; n++) {
        struct llm_pool *pool = pool_new(n);
        struct llm_pool_job slots[2];
        struct tjob *done[4];
        /* the stall in a middle phase, then in the last (the stalled thread
         * wakes after its job is over) */
        for (int k = 0; k < 2; k++) {
            struct tjob *j = tjob_new(12, 77u + (unsigned)(n * 2 + k), k == 0 ? 5 : 11);
            j->phases[j->stall_phase].step = 8; /* several chunks: the others go on around it */
            run_job(pool, slots, j);
            assert_int_equal(atomic_load(&j->stalled), 1);
            /* computed twice (the job ended while one thread was stalled in
             * it, unless the stalled one was the caller) */
            assert_true(atomic_load(&j->computes[j->stall_phase][0]) >= 2);
            tjob_check(j);
            /* the next job runs while the stalled thread may still be
             * asleep in the old one: nothing it does may touch it */
            struct tjob *k2 = tjob_new(30, 500u + (unsigned)k, -1);
            run_job(pool, slots, k2);
            tjob_check(k2);
            for (int w = 0; w < STALL_TIMEOUT_S * 1000 && !atomic_load(&j->stall_over); w++)
                sleep_ms(1);
            assert_int_equal(atomic_load(&j->stall_over), 1);
            assert_int_equal(atomic_load(&j->timed_out), 0);
            assert_int_equal(atomic_load(&j->helped), 1);
            sleep_ms(20); /* its refused commit, if it was going to try one */
            tjob_check(j); /* the stale thread's result was thrown away */
            done[2 * k] = j;
            done[2 * k + 1] = k2;
        }
        llm_pool_free(pool);
        for (int i = 0; i < 4; i++)
            tjob_free(done[i]);
    }
}

static void test_jobs_back_to_back(void **state)
{
    struct llm_pool *pool = pool_new(3);
    struct llm_pool_job slots[2];
    struct tjob *jobs[40];
    for (int i = 0; i < 40; i++) {
        /* every tenth job has a stalled chunk in its first phase */
        jobs[i] = tjob_new(1 + i % 7, 9000u + (unsigned)i, i % 10 == 3 ? 0 : -1);
        run_job(pool, slots, jobs[i]);
        if (i >= 2) { /* two jobs behind: no thread can still be in it */
            tjob_check(jobs[i - 2]);
        }
    }
    llm_pool_free(pool); /* joins the threads: everything is settled */
    for (int i = 0; i < 40; i++) {
        tjob_check(jobs[i]);
        assert_int_equal(atomic_load(&jobs[i]->timed_out), 0);
        tjob_free(jobs[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_each),
        cmocka_unit_test(test_many_phases),
        cmocka_unit_test(test_preempted_thread_is_helped),
        cmocka_unit_test(test_jobs_back_to_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
