/*
 * llama-depth.c - llama.cpp's prefill of a few tokens at depth, for
 * bench-turn.sh (issue 28's chat turn at depth). llref has no such mode,
 * and measuring it by difference (prefill of D + P tokens minus D) is lost
 * in the noise of two long runs, so this harness does what a chat server
 * does on a turn: D tokens are decoded once (not timed), then P new tokens
 * are decoded in one batch at depth D, and the time of that batch is the
 * figure; the cache is cut back to D (llama_memory_seq_rm) between
 * repetitions. Built by bench-turn.sh against the llama.cpp library that
 * ../shared/peer/setup.sh installs; not part of `make`, not a test.
 *   usage: llama-depth MODEL [-d 4000] [-p 20] [-t 2] [-r 3]
 * Prints "depth_prefill_ms BEST" and "decode_ms BEST" (one token at D).
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *ud)
{
    (void)level, (void)text, (void)ud;
}

static void decode(struct llama_context *c, llama_token *t, int n)
{
    if (llama_decode(c, llama_batch_get_one(t, n))) {
        fprintf(stderr, "llama-depth: llama_decode failed\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: llama-depth MODEL [-d 4000] [-p 20] [-t 2] [-r 3]\n");
        return 2;
    }
    int depth = atoi(opt(argc, argv, "-d", "4000")), np = atoi(opt(argc, argv, "-p", "20"));
    int threads = atoi(opt(argc, argv, "-t", "2")), reps = atoi(opt(argc, argv, "-r", "3"));
    llama_log_set(quiet_log, NULL);
    const char *libdir = getenv("LLREF_LIBDIR");
    if (libdir)
        ggml_backend_load_all_from_path(libdir);
    else
        ggml_backend_load_all();
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) {
        fprintf(stderr, "llama-depth: cannot load '%s'\n", argv[1]);
        return 1;
    }
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(depth + np + 16);
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.no_perf = true;
    struct llama_context *c = llama_init_from_model(m, cp);
    if (!c) {
        fprintf(stderr, "llama-depth: cannot make a context\n");
        return 1;
    }
    llama_token *t = malloc(sizeof *t * (size_t)(depth + np + 1));
    unsigned s = 12345;
    for (int i = 0; i < depth + np + 1; i++) {
        s = s * 1103515245u + 12345u;
        t[i] = 3 + (int)((s >> 8) % (unsigned)(nv - 3));
    }
    for (int i = 0; i < depth; i += 512) /* the history, in server-sized batches */
        decode(c, t + i, depth - i < 512 ? depth - i : 512);
    double best_p = 1e30, best_d = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        decode(c, t + depth, np);
        double t1 = now_ms();
        llama_memory_seq_rm(llama_get_memory(c), 0, depth, -1);
        decode(c, t + depth, 1);
        double t2 = now_ms();
        llama_memory_seq_rm(llama_get_memory(c), 0, depth, -1);
        if (t1 - t0 < best_p)
            best_p = t1 - t0;
        if (t2 - t1 < best_d)
            best_d = t2 - t1;
    }
    printf("depth_prefill_ms %.3f\ndecode_ms %.3f\n", best_p, best_d);
    llama_free(c);
    llama_model_free(m);
    free(t);
    return 0;
}
