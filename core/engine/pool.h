/*
 * pool.h - (internal to core/) the engine's threads: a team that lives as
 * long as a context and runs jobs, each a sequence of phases of work units.
 *
 * A phase's units are cut into chunks of `step` units; each thread takes
 * chunks from its own share, then from the others'. A chunk is computed
 * into the thread's scratch and then committed (copied to where it
 * belongs) by whoever commits it first; so a thread that has nothing left
 * to take and sees a chunk stay unfinished (its thread was preempted) can
 * compute that chunk too instead of waiting, and the phase goes on
 * without it. Results must therefore depend only on the chunk, never on
 * which thread computes it or how often (the engine's kernels are
 * deterministic). After a phase, the thread that completes it runs the
 * job's `after` step alone; then the next phase opens. A stale thread (one
 * that wakes up in a phase already finished) discards what it computed.
 * So `compute` may read inputs while a later phase rewrites them: it must
 * tolerate any bits there (its arithmetic defined for all of them, e.g.
 * wrapping integer sums, and no memory addressed by what it reads); only
 * what a committed chunk computed is ever used.
 */
#ifndef KVCHAT_CORE_POOL_H
#define KVCHAT_CORE_POOL_H

#include <stddef.h>
#include <stdint.h>

struct llm_pool;

struct llm_pool_phase {
    int64_t n_units; /* >= 1 */
    int64_t step;    /* units per chunk, >= 1 */
};

struct llm_pool_job {
    int n_phases;
    const struct llm_pool_phase *phases;
    void *arg;
    /* phase p, units [u0, u1): compute into scratch (the thread's own,
     * scratch_bytes), then commit from it; commit runs once per chunk */
    void (*compute)(void *arg, int p, int64_t u0, int64_t u1, void *scratch);
    void (*commit)(void *arg, int p, int64_t u0, int64_t u1, const void *scratch);
    /* after phase p, by one thread, before phase p + 1 opens (may be NULL) */
    void (*after)(void *arg, int p);
};

/* n_threads (>= 1) including the caller's, each with scratch_bytes of
 * scratch, phases of at most max_chunks chunks; 0 or -1 (no memory) */
int llm_pool_init(int n_threads, size_t scratch_bytes, int64_t max_chunks, struct llm_pool **out);
void llm_pool_free(struct llm_pool *pool);
/* Jobs alternate between two slots of the caller's (the job, its phases
 * and what arg points to): llm_pool_slot waits until no thread can still
 * be reading the slot the next job will use, and returns it (0 or 1);
 * fill it, then llm_pool_run runs the job on the calling thread and the
 * team and returns when its last phase (and after step) is done. */
int llm_pool_slot(struct llm_pool *pool);
void llm_pool_run(struct llm_pool *pool, const struct llm_pool_job *job);
int llm_pool_n_threads(const struct llm_pool *pool);

#endif
