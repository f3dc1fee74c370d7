/*
 * bench_draft.c - (a benchmark, not a test; bench/bench-draft.sh runs it)
 * what speculative decoding is made of (docs/speculative.md); the cost of
 * a verification pass is `kvchat bench --draft K`'s:
 *
 *   accept MODEL [--prompt N] [--gen M] [--temp T] [--seed S] [--max K]
 *                [--costs "c1 c2 ..."]
 *       n-gram drafting on real text, as token ids: the model's own
 *       output from BOS (greedy, N tokens) is the prompt, then M more
 *       tokens are generated with the drafts of sessions/draft.c (n-grams
 *       alone) verified as conv.c verifies them (a drafted token is taken
 *       iff the sampler, at its position, picks it). Checks that the
 *       tokens are those of plain decoding; prints the acceptance, tokens
 *       per pass, and with --costs (a pass of n tokens in decode steps,
 *       n = 1, 2, ...: `kvchat bench --draft`'s) the speedup they predict.
 *   nohit MODEL [-n N] [-t N] [-r R]
 *       text with nothing to copy: N distinct ids fed one at a time, with
 *       the n-gram lookup at every step (it finds nothing) against
 *       without; best of R each, alternating.
 *
 * Figures are only meaningful on a quiet machine.
 */
#include "core/llm.h"
#include "sessions/sess-int.h"

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

static void die(const char *what)
{
    fprintf(stderr, "bench_draft: %s\n", what);
    exit(1);
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

static struct llm_model *open_model(const char *path)
{
    struct llm_model *m;
    char err[512];
    if (llm_model_open(path, llm_model_default_params(), &m, err, sizeof err))
        die(err);
    return m;
}

static struct llm_ctx *new_ctx(struct llm_model *m, int n_ctx, int threads)
{
    struct llm_ctx_params p = llm_ctx_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = threads;
    struct llm_ctx *c;
    char err[512];
    if (llm_ctx_init(m, p, &c, err, sizeof err) || llm_ctx_reserve_outputs(c, LLM_CTX_MAX_OUTPUTS))
        die(err);
    return c;
}

static int accept(int argc, char **argv)
{
    struct llm_model *m = open_model(argv[2]);
    int n_prompt = atoi(arg(argc, argv, "--prompt", "200")), n_gen = atoi(arg(argc, argv, "--gen", "400"));
    int kmax = atoi(arg(argc, argv, "--max", "8"));
    float temp = (float)atof(arg(argc, argv, "--temp", "0"));
    const char *costs_arg = arg(argc, argv, "--costs", NULL);
    double costs[LLM_CTX_MAX_OUTPUTS + 1];
    int n_costs = 0;
    for (const char *p = costs_arg; p && *p && n_costs < LLM_CTX_MAX_OUTPUTS;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p)
            break;
        costs[++n_costs] = v;
        p = end;
    }
    int64_t nv = llm_model_n_vocab(m);
    int n_ctx = n_prompt + n_gen + 8;
    struct llm_ctx *plain = new_ctx(m, n_ctx, 1), *c = new_ctx(m, n_ctx, 1);
    struct llm_sampler_params sp = llm_sampler_default_params();
    sp.temp = temp;
    sp.seed = (uint64_t)atoll(arg(argc, argv, "--seed", "1"));
    int32_t *toks = malloc((size_t)n_ctx * sizeof *toks), *ref = malloc((size_t)n_ctx * sizeof *ref);
    /* the prompt: the model's own greedy story from BOS */
    struct llm_sampler_params gp = sp;
    gp.temp = 0;
    struct llm_sampler *g = llm_sampler_init(gp, nv);
    ref[0] = 1; /* llama2.c's BOS */
    if (llm_ctx_decode(plain, ref, 1))
        die(llm_ctx_errmsg(plain));
    for (int i = 1; i < n_prompt; i++) {
        ref[i] = llm_sampler_sample_at(g, llm_ctx_logits(plain), NULL, i);
        if (llm_ctx_decode(plain, ref + i, 1))
            die(llm_ctx_errmsg(plain));
    }
    /* plain decoding of the rest */
    struct llm_sampler *s0 = llm_sampler_init(sp, nv), *s1 = llm_sampler_init(sp, nv);
    for (int i = n_prompt; i < n_prompt + n_gen; i++) {
        ref[i] = llm_sampler_sample_at(s0, llm_ctx_logits(plain), NULL, i);
        if (llm_ctx_decode(plain, ref + i, 1))
            die(llm_ctx_errmsg(plain));
    }
    /* with n-gram drafts, verified as conv.c does */
    memcpy(toks, ref, (size_t)n_prompt * sizeof *toks);
    if (llm_ctx_decode(c, toks, n_prompt))
        die(llm_ctx_errmsg(c));
    struct sess_draft_state ds;
    sess_draft_begin(&ds, SESS_DRAFT_NGRAM, kmax, 0, nv, NULL);
    int64_t n = n_prompt, kv = n_prompt, drafted = 0, accepted = 0, passes = 0, plain_steps = 0;
    double cost = 0;
    int32_t d[LLM_CTX_MAX_OUTPUTS], pass[LLM_CTX_MAX_OUTPUTS];
    int64_t k = 0, used = 0, pos = 0;
    const float *logits = llm_ctx_logits(c);
    while (n < n_prompt + n_gen) {
        int32_t t = llm_sampler_sample_at(s1, logits, NULL, n);
        if (t != ref[n]) {
            fprintf(stderr, "bench_draft: position %lld: %d drafting, %d plain\n", (long long)n, t, ref[n]);
            return 1;
        }
        toks[n++] = t;
        if (k && used < k && t == d[used]) {
            used++;
            kv++;
            logits = llm_ctx_logits_ith(c, used);
            continue;
        }
        if (k) { /* the pass ends: the rest cut */
            accepted += used;
            sess_draft_result(&ds, pos, k, used);
            llm_ctx_truncate(c, kv);
            k = used = 0;
        }
        int64_t room = n_prompt + n_gen - n;
        k = room > 0 ? sess_draft_propose(&ds, toks, n, room < kmax ? room : kmax, d) : 0;
        pass[0] = t;
        memcpy(pass + 1, d, (size_t)k * sizeof *d);
        if (k ? llm_ctx_decode_outputs(c, pass, k + 1) : llm_ctx_decode(c, pass, 1))
            die(llm_ctx_errmsg(c));
        kv++;
        if (k) {
            drafted += k;
            passes++;
            pos = n;
            cost += k + 1 <= n_costs ? costs[k + 1] : 0;
        } else {
            plain_steps++;
            cost += 1;
        }
        logits = k ? llm_ctx_logits_ith(c, 0) : llm_ctx_logits(c);
    }
    if (k)
        accepted += used;
    printf("accept: prompt %d ids (its own greedy output), %d generated (temp %g), draft max %d\n", n_prompt, n_gen,
           temp, kmax);
    printf("  the same ids as plain decoding: yes\n");
    printf("  passes with drafts %lld, plain steps %lld; drafted %lld, accepted %lld (%.1f%%)\n", (long long)passes,
           (long long)plain_steps, (long long)drafted, (long long)accepted,
           drafted ? 100.0 * (double)accepted / (double)drafted : 0.0);
    printf("  tokens per pass %.2f (all passes: %.2f)\n",
           passes ? (double)(accepted + passes) / (double)passes : 0.0,
           (double)n_gen / (double)(passes + plain_steps));
    if (n_costs)
        printf("  predicted speedup with these pass costs: %.2fx (%d generated in %.1f decode steps)\n",
               cost > 0 ? n_gen / cost : 0.0, n_gen, cost);
    free(toks);
    free(ref);
    llm_sampler_free(g);
    llm_sampler_free(s0);
    llm_sampler_free(s1);
    llm_ctx_free(plain);
    llm_ctx_free(c);
    llm_model_close(m);
    return 0;
}

static int nohit(int argc, char **argv)
{
    struct llm_model *m = open_model(argv[2]);
    int n = atoi(arg(argc, argv, "-n", "128")), threads = atoi(arg(argc, argv, "-t", "2"));
    int reps = atoi(arg(argc, argv, "-r", "3"));
    int64_t nv = llm_model_n_vocab(m);
    if (n > nv)
        n = (int)nv;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++) /* distinct: no n-gram repeats */
        ids[i] = (int32_t)(((int64_t)i * 7919) % nv);
    struct llm_ctx *c = new_ctx(m, n + 8, threads);
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 2 * reps; r++) {
        int with = r % 2;
        struct sess_draft_state ds;
        sess_draft_begin(&ds, with ? SESS_DRAFT_NGRAM : SESS_DRAFT_OFF, 8, 0, nv, NULL);
        llm_ctx_truncate(c, 0);
        int32_t d[LLM_CTX_MAX_OUTPUTS];
        double t0 = now_ms();
        for (int i = 0; i < n; i++) {
            if (with && sess_draft_propose(&ds, ids, i + 1, 8, d) != 0)
                die("a draft where there is nothing to copy");
            if (llm_ctx_decode(c, ids + i, 1))
                die(llm_ctx_errmsg(c));
        }
        double t = now_ms() - t0;
        best[with] = t < best[with] ? t : best[with];
    }
    printf("nohit: %d distinct ids one at a time: %.1f tok/s plain, %.1f tok/s with the n-gram lookup: %.3fx\n", n,
           n * 1e3 / best[0], n * 1e3 / best[1], best[0] / best[1]);
    free(ids);
    llm_ctx_free(c);
    llm_model_close(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "accept"))
        return accept(argc, argv);
    if (argc >= 3 && !strcmp(argv[1], "nohit"))
        return nohit(argc, argv);
    fprintf(stderr, "usage: bench_draft accept|nohit MODEL [options] (see the source's first comment)\n");
    return 1;
}
