/*
 * pool.c - the engine's team of threads (pool.h): phases of chunks taken
 * from per-thread shares, committed by whoever finishes first, so that a
 * preempted thread never holds the others up.
 *
 * Why not OpenMP: its barriers (and the implicit one at the end of every
 * parallel region) wait for every thread of the team; on a machine where
 * another process takes a core, the thread that shares that core is off
 * the CPU for whole scheduler slices (milliseconds), and decode, with five
 * steps per layer, waited for it at every one (the OpenMP engine before
 * this pool, under bench/bench-load.sh's busy loop on one of 2 cores: Q8_0
 * decode with 2 threads 21.9 tok/s, with 1 thread 37.3; docs/performance.md, Under load).
 * Here no thread waits for another beyond a short grace period: it
 * computes a stalled chunk itself.
 *
 * Invariants:
 * - Every phase has a unique epoch (the value of `tick` while it is open);
 *   claim words, done counters and chunk states carry the epoch they
 *   belong to, so what a stale thread does to them fails or is ignored.
 * - A chunk is committed at most once per epoch: the committer moves its
 *   state to COMMITTING by compare-and-swap, copies, then marks it DONE.
 *   Everything a later phase reads was committed before the phase opened
 *   (release/acquire through the done counters and tick).
 * - A job's data stays readable while a thread still works on it
 *   (busy[]; llm_pool_slot waits for threads two jobs behind).
 */
#include "core/engine/pool.h"
#include "core/base/base.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PAUSE() _mm_pause()
#else
#define PAUSE() ((void)0)
#endif

#define VAL_BITS 24                     /* claim and done words: epoch << 24 | value */
#define VAL_MASK ((1ull << VAL_BITS) - 1)
#define ST_COMMITTING 1u                /* chunk states: epoch << 2 | status */
#define ST_DONE 2u
#define SPIN_NS 300000                  /* spin this long for a new phase, then sleep */
#define HELP_MIN_NS 30000               /* wait at least this long before computing another's chunk */

struct line {
    _Atomic uint64_t v;
    char pad[64 - sizeof(uint64_t)];
};

struct job_rec {
    const struct llm_pool_job *job;
    uint64_t base; /* epoch of phase 0 */
};

struct worker_arg {
    struct llm_pool *pool;
    int tid;
};

struct llm_pool {
    int n;
    pthread_t *threads;
    void **scratch;
    size_t scratch_map; /* each scratch's mapping (2 MiB aligned), when it has one; 0: malloc'd */
    int64_t max_chunks;
    struct line *state;      /* (max_chunks) a line each: chunks of different threads share none */
    struct line *claim;      /* (n): the next chunk of thread t's share */
    struct line *done;       /* (n): units thread t committed in the phase */
    struct line *busy;       /* (n): the job seq thread t is working on, 0 if none */
    struct line tick;        /* the open phase's epoch */
    struct line finished;    /* the last epoch whose after step was claimed */
    struct line cur;         /* the current job's seq */
    _Atomic uint32_t futex;  /* the low bits of tick, to sleep on */
    _Atomic int sleepers;
    _Atomic int stop;
    struct job_rec rec[2];   /* by seq % 2 */
    uint64_t seq;            /* the caller's: jobs started */
    struct worker_arg *args; /* (n) */
    int n_started;           /* threads running (the caller's counts) */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ==== one phase ==== */

struct phase_run {
    struct llm_pool *pool;
    const struct llm_pool_job *job;
    int p, tid;
    uint64_t e;
    int64_t n_units, step, n_chunks;
    uint64_t last_ns; /* how long this thread's last chunk took */
};

static int64_t share_start(const struct phase_run *r, int t) { return (int64_t)t * r->n_chunks / r->pool->n; }

/* the next chunk of thread v's share, or -1 */
static int64_t claim_next(struct phase_run *r, int v)
{
    _Atomic uint64_t *w = &r->pool->claim[v].v;
    int64_t end = share_start(r, v + 1);
    uint64_t old = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        if ((old >> VAL_BITS) > r->e)
            return -1; /* a later phase: we are stale */
        int64_t next = (old >> VAL_BITS) == r->e ? (int64_t)(old & VAL_MASK) : share_start(r, v);
        if (next >= end)
            return -1;
        if (atomic_compare_exchange_weak_explicit(w, &old, r->e << VAL_BITS | (uint64_t)(next + 1),
                                                  memory_order_acq_rel, memory_order_acquire))
            return next;
    }
}

/* compute chunk c and commit it unless someone has; true if this thread committed it */
static bool run_chunk(struct phase_run *r, int64_t c)
{
    struct llm_pool *pool = r->pool;
    int64_t u0 = c * r->step, u1 = u0 + r->step < r->n_units ? u0 + r->step : r->n_units;
    uint64_t t0 = now_ns();
    r->job->compute(r->job->arg, r->p, u0, u1, pool->scratch[r->tid]);
    r->last_ns = now_ns() - t0;
    _Atomic uint64_t *st = &pool->state[c].v;
    uint64_t old = atomic_load_explicit(st, memory_order_acquire);
    for (;;) {
        if ((old >> 2) >= r->e)
            return false; /* committed (or being committed) by another, or we are stale */
        if (atomic_compare_exchange_weak_explicit(st, &old, r->e << 2 | ST_COMMITTING, memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    r->job->commit(r->job->arg, r->p, u0, u1, pool->scratch[r->tid]);
    atomic_store_explicit(st, r->e << 2 | ST_DONE, memory_order_release);
    _Atomic uint64_t *d = &pool->done[r->tid].v;
    uint64_t dv = atomic_load_explicit(d, memory_order_relaxed);
    uint64_t have = (dv >> VAL_BITS) == r->e ? dv & VAL_MASK : 0;
    atomic_store_explicit(d, r->e << VAL_BITS | (have + (uint64_t)(u1 - u0)), memory_order_release);
    return true;
}

static bool phase_complete(const struct phase_run *r)
{
    uint64_t sum = 0;
    for (int t = 0; t < r->pool->n; t++) {
        uint64_t dv = atomic_load_explicit(&r->pool->done[t].v, memory_order_acquire);
        if ((dv >> VAL_BITS) == r->e)
            sum += dv & VAL_MASK;
    }
    return sum >= (uint64_t)r->n_units;
}

/* a chunk claimed but not done in this epoch (another thread's, stalled), or -1 */
static int64_t find_unfinished(const struct phase_run *r)
{
    struct llm_pool *pool = r->pool;
    for (int k = 1; k <= pool->n; k++) {
        int v = (r->tid + k) % pool->n;
        uint64_t w = atomic_load_explicit(&pool->claim[v].v, memory_order_acquire);
        if ((w >> VAL_BITS) != r->e)
            continue;
        int64_t next = (int64_t)(w & VAL_MASK), end = share_start(r, v + 1);
        for (int64_t c = share_start(r, v); c < next && c < end; c++) {
            uint64_t s = atomic_load_explicit(&pool->state[c].v, memory_order_acquire);
            if ((s >> 2) < r->e)
                return c;
        }
    }
    return -1;
}

/* after the phase completes: the one thread that claims it runs `after`
 * and opens the next epoch */
static void finish_phase(const struct phase_run *r)
{
    struct llm_pool *pool = r->pool;
    uint64_t f = atomic_load_explicit(&pool->finished.v, memory_order_acquire);
    do {
        if (f >= r->e)
            return;
    } while (!atomic_compare_exchange_weak_explicit(&pool->finished.v, &f, r->e, memory_order_acq_rel,
                                                    memory_order_acquire));
    if (r->job->after)
        r->job->after(r->job->arg, r->p);
    atomic_store_explicit(&pool->tick.v, r->e + 1, memory_order_release);
    atomic_store_explicit(&pool->futex, (uint32_t)(r->e + 1), memory_order_release);
    if (atomic_load_explicit(&pool->sleepers, memory_order_acquire) > 0)
        futex_wake_all(&pool->futex);
}

static void run_phase(struct llm_pool *pool, const struct llm_pool_job *job, int p, uint64_t e, int tid)
{
    const struct llm_pool_phase *ph = &job->phases[p];
    struct phase_run r = {pool, job, p, tid, e, ph->n_units, ph->step, (ph->n_units + ph->step - 1) / ph->step, 0};
    if (r.n_chunks > pool->max_chunks)
        abort(); /* a programmer error: the engine sizes phases for the pool */
    /* own share first, then the others' */
    for (int k = 0; k < pool->n; k++) {
        int v = (tid + k) % pool->n;
        int64_t c;
        while ((c = claim_next(&r, v)) >= 0)
            run_chunk(&r, c);
    }
    uint64_t wait_from = now_ns();
    for (;;) {
        if (atomic_load_explicit(&pool->tick.v, memory_order_acquire) != e)
            return; /* finished by others */
        if (phase_complete(&r)) {
            finish_phase(&r);
            return;
        }
        uint64_t grace = 2 * r.last_ns > HELP_MIN_NS ? 2 * r.last_ns : HELP_MIN_NS;
        if (now_ns() - wait_from > grace) {
            int64_t c = find_unfinished(&r);
            if (c >= 0)
                run_chunk(&r, c);
            wait_from = now_ns();
        }
        for (int i = 0; i < 32; i++)
            PAUSE();
    }
}

/*
 * Work on the current job until it is done (caller: want_seq is its job)
 * or, for a worker (want_seq 0), forever. Returns when the job want_seq is
 * finished, or on stop.
 */
static void participate(struct llm_pool *pool, int tid, uint64_t want_seq)
{
    uint64_t seen = 0;
    for (;;) {
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            return;
        uint64_t s = atomic_load(&pool->cur.v);
        atomic_store(&pool->busy[tid].v, s);
        uint64_t e = atomic_load(&pool->tick.v);
        if (atomic_load(&pool->cur.v) != s) {
            atomic_store(&pool->busy[tid].v, 0);
            continue;
        }
        const struct job_rec *rec = &pool->rec[s % 2];
        bool valid = s && e >= rec->base && e < rec->base + (uint64_t)rec->job->n_phases;
        if (want_seq && s == want_seq && !valid && e >= rec->base) {
            atomic_store(&pool->busy[tid].v, 0);
            return; /* our job is done */
        }
        if (valid && e != seen) {
            seen = e;
            run_phase(pool, rec->job, (int)(e - rec->base), e, tid);
            atomic_store(&pool->busy[tid].v, 0);
            continue;
        }
        atomic_store(&pool->busy[tid].v, 0);
        /* nothing to do: spin a while, then sleep until tick moves */
        uint64_t t0 = now_ns();
        while (atomic_load_explicit(&pool->tick.v, memory_order_acquire) == e &&
               atomic_load_explicit(&pool->cur.v, memory_order_acquire) == s &&
               !atomic_load_explicit(&pool->stop, memory_order_acquire)) {
            if (now_ns() - t0 < SPIN_NS) {
                for (int i = 0; i < 16; i++)
                    PAUSE();
                continue;
            }
            uint32_t fv = atomic_load_explicit(&pool->futex, memory_order_acquire);
            atomic_fetch_add(&pool->sleepers, 1);
            if (atomic_load(&pool->tick.v) == e && atomic_load(&pool->cur.v) == s && !atomic_load(&pool->stop))
                futex_wait(&pool->futex, fv);
            atomic_fetch_sub(&pool->sleepers, 1);
        }
    }
}

static void *worker_main(void *p)
{
    struct worker_arg *a = p;
    participate(a->pool, a->tid, 0);
    return NULL;
}

/* A thread's scratch: of huge pages where the kernel has them, when it is
 * large enough to fill some (attention's scores at depth are megabytes:
 * fresh 4 KiB pages cost about 5 us each on the VMs we measure on, under a
 * hypervisor that shadows page tables, a 2 MiB huge page about 0.1 ms),
 * else malloc'd. *map gets the mapping's size, 0 for malloc'd. */
#define HUGE_BYTES ((size_t)2 << 20)
static void *scratch_alloc(size_t n, size_t *map)
{
    *map = 0;
#ifdef MADV_HUGEPAGE
    if (n >= HUGE_BYTES) {
        size_t len = (n + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES + HUGE_BYTES;
        uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            /* the part on huge-page boundaries kept; the rest given back */
            uint8_t *a = (uint8_t *)(((uintptr_t)p + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES);
            size_t keep = len - HUGE_BYTES;
            if (a > p)
                munmap(p, (size_t)(a - p));
            if (p + len > a + keep)
                munmap(a + keep, (size_t)(p + len - (a + keep)));
            madvise(a, keep, MADV_HUGEPAGE);
            *map = keep;
            return a;
        }
    }
#endif
    return aligned_alloc(64, n);
}

/* ==== the team ==== */

int llm_pool_init(int n_threads, size_t scratch_bytes, int64_t max_chunks, struct llm_pool **out)
{
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    struct llm_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return -1;
    pool->n = n_threads;
    pool->max_chunks = max_chunks > 0 ? max_chunks : 1;
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    pool->scratch = calloc((size_t)n_threads, sizeof *pool->scratch);
    pool->state = aligned_alloc(64, (size_t)pool->max_chunks * sizeof *pool->state);
    if (pool->state)
        for (int64_t c = 0; c < pool->max_chunks; c++)
            atomic_init(&pool->state[c].v, 0);
    pool->claim = aligned_alloc(64, (size_t)n_threads * sizeof *pool->claim);
    pool->done = aligned_alloc(64, (size_t)n_threads * sizeof *pool->done);
    pool->busy = aligned_alloc(64, (size_t)n_threads * sizeof *pool->busy);
    bool ok = pool->threads && pool->scratch && pool->state && pool->claim && pool->done && pool->busy;
    for (int t = 0; ok && t < n_threads; t++) {
        pool->scratch[t] = scratch_alloc((scratch_bytes + 63) / 64 * 64 + 64, &pool->scratch_map);
        ok = pool->scratch[t] != NULL;
        atomic_init(&pool->claim[t].v, 0);
        atomic_init(&pool->done[t].v, 0);
        atomic_init(&pool->busy[t].v, 0);
    }
    if (!ok) {
        llm_pool_free(pool);
        return -1;
    }
    atomic_init(&pool->tick.v, 1);
    atomic_init(&pool->finished.v, 0);
    atomic_init(&pool->cur.v, 0);
    pool->n_started = 1;
    pool->args = calloc((size_t)n_threads, sizeof *pool->args);
    if (!pool->args) {
        llm_pool_free(pool);
        return -1;
    }
    /* workers take no signals: they go to the thread that waits for them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int t = 1; t < n_threads; t++) {
        pool->args[t] = (struct worker_arg){pool, t};
        if (pthread_create(&pool->threads[t], NULL, worker_main, &pool->args[t])) {
            pool->n_started = t;
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            llm_pool_free(pool);
            return -1;
        }
        pool->n_started = t + 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = pool;
    return 0;
}

void llm_pool_free(struct llm_pool *pool)
{
    if (!pool)
        return;
    atomic_store(&pool->stop, 1);
    atomic_fetch_add(&pool->futex, 1);
    futex_wake_all(&pool->futex);
    for (int t = 1; t < pool->n_started; t++)
        pthread_join(pool->threads[t], NULL);
    for (int t = 0; pool->scratch && t < pool->n; t++) {
        if (pool->scratch_map && pool->scratch[t])
            munmap(pool->scratch[t], pool->scratch_map);
        else
            free(pool->scratch[t]);
    }
    BASE_FREE(pool->scratch, pool->threads, pool->state, pool->claim, pool->done, pool->busy, pool->args, pool);
}

int llm_pool_slot(struct llm_pool *pool)
{
    uint64_t s = pool->seq + 1;
    for (int t = 1; t < pool->n; t++)
        for (;;) {
            uint64_t b = atomic_load(&pool->busy[t].v);
            if (b == 0 || b + 2 > s)
                break;
            sched_yield(); /* a thread two jobs behind: rare, and it is running */
        }
    return (int)(s % 2);
}

void llm_pool_run(struct llm_pool *pool, const struct llm_pool_job *job)
{
    if (job->n_phases <= 0)
        return;
    uint64_t s = ++pool->seq;
    struct job_rec *rec = &pool->rec[s % 2];
    uint64_t t0 = atomic_load(&pool->tick.v);
    rec->job = job;
    rec->base = t0 + 1;
    atomic_store(&pool->cur.v, s);
    atomic_store_explicit(&pool->tick.v, t0 + 1, memory_order_release);
    atomic_store_explicit(&pool->futex, (uint32_t)(t0 + 1), memory_order_release);
    if (atomic_load(&pool->sleepers) > 0)
        futex_wake_all(&pool->futex);
    participate(pool, 0, s);
}

int llm_pool_n_threads(const struct llm_pool *pool) { return pool->n; }
