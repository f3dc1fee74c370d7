/*
 * cmd-engine.c - the commands that drive the engine on raw token ids:
 * `kvchat eval` (prefill, top-5 logits), `kvchat generate` (greedy ids) and
 * `kvchat bench` (prefill and decode speed, optionally at a depth of
 * context; weight bandwidth of decode against measured DRAM bandwidth;
 * peak RSS). They share option
 * parsing and model/context set-up; their output is made for scripts and
 * for comparison with llama.cpp (`llref logits`, `llref greedy`, `llref
 * bench`), so it is plain and stable.
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "core/llm.h"
#include "models/mdl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static const char eval_usage[] =
    "usage: kvchat eval -m MODEL -p \"IDS\" [--logits-out FILE] [options]\n"
    "\n"
    "Prefill the token ids IDS (space-separated) in one batch and print the\n"
    "five largest logits of the last position as 'id logit' lines. However\n"
    "the ids are fed (--split, --token-by-token, -t), the logits are the\n"
    "same bits.\n"
    "\n"
    "  -m, --model MODEL      a GGUF file or a model name in the store\n"
    "  -p, --prompt IDS       token ids, e.g. \"1 15043 3186\"\n"
    "      --logits-out FILE  write all n_vocab logits there as little-endian f32\n"
    "      --split K          the first K ids as one batch, the rest as a second\n"
    "      --token-by-token   feed the ids one at a time (the decode path); with\n"
    "                         --split, the ids after the first K one at a time\n"
    "  -t, --threads N        threads (default: physical cores)\n"
    "  -c, --ctx-size N       KV cache positions (default: model's, at most 4096)\n"
    "      --kv-type f16|f32  KV cache element type (default f16)\n"
    "  -v, --verbose          say which kernels run\n"
    "\n"
    "Exit status: 0 ok, 1 usage error, 2 the model cannot be used or an id is\n"
    "out of range.\n";

static const char generate_usage[] =
    "usage: kvchat generate -m MODEL -p \"IDS\" -n N [options]\n"
    "\n"
    "Prefill IDS, then generate N tokens greedily and print their ids on one\n"
    "line. Stops early, saying so on stderr, when the context is full.\n"
    "\n"
    "  -m, --model MODEL      a GGUF file or a model name in the store\n"
    "  -p, --prompt IDS       token ids, space-separated\n"
    "  -n, --max-tokens N     tokens to generate (default 16)\n"
    "  -t, --threads N        threads (default: physical cores)\n"
    "  -c, --ctx-size N       KV cache positions (default: model's, at most 4096)\n"
    "      --kv-type f16|f32  KV cache element type (default f16)\n"
    "  -v, --verbose          say which kernels run\n"
    "\n"
    "Exit status: 0 ok, 1 usage error, 2 the model cannot be used or an id is\n"
    "out of range.\n";

static const char bench_usage[] =
    "usage: kvchat bench -m MODEL [-p 512] [-n 128] [-d D] [-t N] [-r R] [--draft K] [--membw]\n"
    "                    [--json]\n"
    "       kvchat bench --membw [-t N] [--json]\n"
    "\n"
    "Measure prefill of P random tokens in one batch and decode of N tokens\n"
    "after them (so decode starts at depth P, as llref bench does), best of R\n"
    "runs after one untimed warm-up (up to 32 prompt tokens and one generated,\n"
    "as llama-bench's), and the peak resident memory. Also prints the effective weight\n"
    "bandwidth of decode: the bytes of weights read per decoded token times\n"
    "decode tokens per second.\n"
    "\n"
    "With --depth D, as llama-bench's -d: D tokens are prefilled first (in\n"
    "batches, once, not timed); then prefill of P tokens and decode of N\n"
    "tokens are each timed starting at depth D (the cache is cut back to D\n"
    "tokens between them). The rows read e.g. 'pp512 @ d4096'.\n"
    "\n"
    "With --membw, DRAM read bandwidth is measured too (a 256 MiB buffer, best\n"
    "of 5 passes, after the model runs) and decode's weight bandwidth is given\n"
    "as a fraction of it: how close decode comes to its memory-bandwidth bound.\n"
    "Without -m, --membw only measures the bandwidth.\n"
    "\n"
    "With --draft K, speculative decoding's verification passes are timed too,\n"
    "at decode's depth: one pass over the token sampled and k = 0..K drafted\n"
    "ones keeping every row of logits (best of R each), as its time, its cost in\n"
    "decode steps (one token decoded there, best of R; drafting pays when a pass\n"
    "gains more tokens than it costs) and the tokens per second if every drafted\n"
    "token is accepted. Not for models with recurrent layers (qwen35).\n"
    "\n"
    "  -m, --model MODEL      a GGUF file or a model name in the store\n"
    "  -p, --n-prompt P       prompt tokens (default 512)\n"
    "  -n, --n-gen N          generated tokens (default 128)\n"
    "  -d, --depth D          tokens already in the KV cache (default 0)\n"
    "  -r, --repetitions R    runs (default 3)\n"
    "  -t, --threads N        threads (default: physical cores)\n"
    "  -c, --ctx-size N       KV cache positions; must hold D + P + N (default:\n"
    "                         the model's, at most 4096, or D + P + N if more)\n"
    "      --kv-type f16|f32  KV cache element type (default f16)\n"
    "      --draft K          time verification passes of up to K drafted tokens (1-31)\n"
    "      --membw            measure DRAM read bandwidth\n"
    "      --json             print one JSON object\n"
    "  -v, --verbose          say which kernels run\n"
    "\n"
    "KVCHAT_CPU=generic|avx2|avx512|neon in the environment picks the kernels\n"
    "(every path gives the same bits; one this CPU lacks is a usage error).\n"
    "\n"
    "Exit status: 0 ok, 1 usage error (also a -c too small for D + P + N),\n"
    "2 the model cannot be used.\n";

enum { OPT_LOGITS_OUT = 256, OPT_KV_TYPE, OPT_JSON, OPT_TBT, OPT_MEMBW, OPT_SPLIT, OPT_DRAFT };

struct opts {
    const char *model, *prompt, *logits_out;
    long n, n_prompt, reps, threads, n_ctx, depth, split; /* split: -1 unless --split */
    long draft;                                           /* bench --draft K: 0 unless given */
    uint32_t kv_type;
    bool json, verbose, token_by_token;
    bool has_depth, membw; /* bench: --depth given; --membw */
};

/* argv into o: 0, or an exit code (printed) */
static int parse_opts(const struct cmd_entry *e, int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'},     {"prompt", required_argument, 0, 'p'},
        {"n-prompt", required_argument, 0, 'p'},  {"max-tokens", required_argument, 0, 'n'},
        {"n-gen", required_argument, 0, 'n'},     {"repetitions", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 't'},   {"ctx-size", required_argument, 0, 'c'},
        {"logits-out", required_argument, 0, OPT_LOGITS_OUT},
        {"kv-type", required_argument, 0, OPT_KV_TYPE},
        {"json", no_argument, 0, OPT_JSON},       {"token-by-token", no_argument, 0, OPT_TBT},
        {"depth", required_argument, 0, 'd'},     {"membw", no_argument, 0, OPT_MEMBW},
        {"split", required_argument, 0, OPT_SPLIT},
        {"draft", required_argument, 0, OPT_DRAFT},
        {"verbose", no_argument, 0, 'v'},         {0, 0, 0, 0},
    };
    bool is_bench = !strcmp(e->name, "bench");
    *o = (struct opts){.n = is_bench ? 128 : 16, .n_prompt = 512, .reps = 3, .kv_type = LLM_TYPE_F16, .split = -1};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, is_bench ? ":m:p:n:r:t:c:d:v" : ":m:p:n:r:t:c:v", longs,
                             NULL)) != -1) {
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 'p':
            if (is_bench) {
                if (!cmd_long_arg(optarg, 1, 1 << 20, &o->n_prompt))
                    return cmd_usage_error(e, "bad prompt size '%s'", optarg);
            } else {
                o->prompt = optarg;
            }
            break;
        case 'n':
            if (!cmd_long_arg(optarg, 0, 1 << 24, &o->n))
                return cmd_usage_error(e, "bad token count '%s'", optarg);
            break;
        case 'r':
            if (!cmd_long_arg(optarg, 1, 1000, &o->reps))
                return cmd_usage_error(e, "bad repetition count '%s'", optarg);
            break;
        case 't':
            if (!cmd_long_arg(optarg, 1, 1024, &o->threads))
                return cmd_usage_error(e, "bad thread count '%s'", optarg);
            break;
        case 'c':
            if (!cmd_long_arg(optarg, 1, 1 << 24, &o->n_ctx))
                return cmd_usage_error(e, "bad context size '%s'", optarg);
            break;
        case 'd':
            if (!is_bench)
                return cmd_usage_error(e, "option '--depth' is for kvchat bench only");
            if (!cmd_long_arg(optarg, 0, 1 << 24, &o->depth))
                return cmd_usage_error(e, "bad depth '%s'", optarg);
            o->has_depth = true;
            break;
        case OPT_MEMBW:
            if (!is_bench)
                return cmd_usage_error(e, "option '--membw' is for kvchat bench only");
            o->membw = true;
            break;
        case OPT_DRAFT:
            if (!is_bench)
                return cmd_usage_error(e, "option '--draft' is for kvchat bench only");
            if (!cmd_long_arg(optarg, 1, LLM_CTX_MAX_OUTPUTS - 1, &o->draft))
                return cmd_usage_error(e, "bad draft length '%s' (1 to %d)", optarg, LLM_CTX_MAX_OUTPUTS - 1);
            break;
        case OPT_LOGITS_OUT: o->logits_out = optarg; break;
        case OPT_SPLIT:
            if (strcmp(e->name, "eval"))
                return cmd_usage_error(e, "option '--split' is for kvchat eval only");
            if (!cmd_long_arg(optarg, 0, 1 << 24, &o->split))
                return cmd_usage_error(e, "bad split '%s'", optarg);
            break;
        case OPT_KV_TYPE:
            if (!strcmp(optarg, "f16"))
                o->kv_type = LLM_TYPE_F16;
            else if (!strcmp(optarg, "f32"))
                o->kv_type = LLM_TYPE_F32;
            else
                return cmd_usage_error(e, "--kv-type must be f16 or f32, not '%s'", optarg);
            break;
        case OPT_JSON: o->json = true; break;
        case OPT_TBT: o->token_by_token = true; break;
        case 'v': o->verbose = true; break;
        case ':': return cmd_usage_error(e, "option '%s' needs a value", argv[optind - 1]);
        default: return cmd_usage_error(e, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cmd_usage_error(e, "unexpected argument '%s'", argv[optind]);
    /* the model as every command finds it: -m, else KVCHAT_MODEL, else the
     * config file's model (--membw alone needs none) */
    static char *default_model; /* the command's, for the process's life */
    if (!o->model && !(is_bench && o->membw)) {
        int rc = cmd_model_resolve(NULL, false, &default_model);
        if (rc)
            return rc;
        o->model = default_model;
    }
    if (!is_bench && !o->prompt)
        return cmd_usage_error(e, "no token ids given (-p \"IDS\")");
    return 0;
}

/* space-separated ids; returns the count or -1 (message printed) */
static int64_t parse_ids(const char *s, int32_t **out)
{
    size_t cap = 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *p = s;
    while (ids) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ',')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX ||
            (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != ',')) {
            free(ids);
            cmd_fail(CMD_EXIT_USAGE, "bad token id list '%s'", s);
            return -1;
        }
        if (base_grow((void **)&ids, &cap, n + 1, sizeof *ids))
            break;
        ids[n++] = (int32_t)v;
        p = end;
    }
    if (!ids || n == 0) {
        free(ids);
        cmd_fail(CMD_EXIT_USAGE, "no token ids in '%s'", s);
        return -1;
    }
    *out = ids;
    return (int64_t)n;
}

struct engine {
    struct llm_model *model;
    struct llm_ctx *ctx;
};

static void engine_close(struct engine *en)
{
    llm_ctx_free(en->ctx);
    llm_model_close(en->model);
}

/* the model and a context for need_ctx tokens: 0, or an exit code (printed) */
static int engine_open(const struct opts *o, int64_t need_ctx, struct engine *en)
{
    char *path, err[512], pack_dir[4096];
    *en = (struct engine){0};
    mdl_resolve(o->model, &path);
    int rc = path ? llm_model_open(path, cmd_model_params(pack_dir, sizeof pack_dir), &en->model, err, sizeof err)
                  : (snprintf(err, sizeof err, "out of memory"), -1);
    free(path);
    if (rc)
        return cmd_fail(CMD_EXIT_MODEL, "cannot open model '%s': %s", o->model, err);
    struct llm_ctx_params cp = llm_ctx_default_params();
    cp.n_threads = (int32_t)o->threads;
    cp.kv_type = o->kv_type;
    cp.n_ctx = (int32_t)o->n_ctx;
    if (!o->n_ctx && need_ctx > 0) {
        /* room for the request, at least the default */
        const struct llm_model_meta *mt = llm_model_get_meta(en->model);
        int64_t def = mt->n_ctx_train > 0 && mt->n_ctx_train < 4096 ? mt->n_ctx_train : 4096;
        cp.n_ctx = (int32_t)(need_ctx > def ? need_ctx : def);
    }
    if (llm_ctx_init(en->model, cp, &en->ctx, err, sizeof err)) {
        llm_model_close(en->model);
        return cmd_fail(CMD_EXIT_MODEL, "cannot create a context for '%s': %s", o->model, err);
    }
    if (o->verbose) {
        fprintf(stderr, "kvchat: kernels %s, %d thread%s, n_ctx %" PRId64 ", KV %s\n", llm_kernel_path(),
                llm_ctx_n_threads(en->ctx), cmd_s(llm_ctx_n_threads(en->ctx)), llm_ctx_n_ctx(en->ctx),
                llm_ctx_kv_type(en->ctx) == LLM_TYPE_F16 ? "f16" : "f32");
        cmd_describe_packed(en->model, stderr);
    }
    return 0;
}

/* 0, or an exit code (printed) */
static int decode_or_fail(const struct engine *en, const int32_t *ids, int64_t n)
{
    int rc = llm_ctx_decode(en->ctx, ids, n);
    if (rc == LLM_ERR_CTX_FULL)
        return cmd_fail(CMD_EXIT_MODEL, "%s", llm_ctx_errmsg(en->ctx));
    if (rc)
        return cmd_fail(CMD_EXIT_MODEL, "cannot decode: %s", llm_ctx_errmsg(en->ctx));
    return 0;
}

static int32_t argmax(const float *x, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return (int32_t)b;
}

/* what eval and generate run on: the options, the ids, the model and a context */
struct ids_run {
    struct opts o;
    int32_t *ids;
    int64_t n;
    struct engine en;
};

/* eval's and generate's start (after --help): the options, the ids, the model and
 * a context with room for them (and -n more with more_n): 0 with *r (the
 * caller ends it with ids_run_end), or an exit code (printed) */
static int start_ids(const struct cmd_entry *e, int argc, char **argv, bool more_n, struct ids_run *r)
{
    int rc = parse_opts(e, argc, argv, &r->o);
    if (rc)
        return rc;
    r->n = parse_ids(r->o.prompt, &r->ids);
    if (r->n < 0)
        return CMD_EXIT_USAGE;
    if ((rc = engine_open(&r->o, r->n + (more_n ? r->o.n : 0), &r->en)))
        free(r->ids);
    return rc;
}

static void ids_run_end(struct ids_run *r)
{
    engine_close(&r->en);
    free(r->ids);
}

/* ==== eval ==== */

static int eval_exec(int argc, char **argv);
const struct cmd_entry cmd_eval_entry = {"eval", "prefill token ids and print the top logits",
                                         eval_usage, eval_exec};

static int eval_exec(int argc, char **argv)
{
    if (cmd_wants_help(argc, argv))
        return cmd_help(&cmd_eval_entry);
    struct ids_run r;
    int rc = start_ids(&cmd_eval_entry, argc, argv, false, &r);
    if (rc)
        return rc;
    /* --split K: ids [0, K) in one batch, then the rest (one batch, or
     * one at a time with --token-by-token); without it, all in one batch
     * or all one at a time */
    int64_t k = r.o.split < 0 ? (r.o.token_by_token ? 0 : r.n) : r.o.split;
    if (k > r.n) {
        ids_run_end(&r);
        return cmd_usage_error(&cmd_eval_entry, "--split %ld is more than the %" PRId64 " ids", r.o.split, r.n);
    }
    rc = k > 0 ? decode_or_fail(&r.en, r.ids, k) : 0;
    if (r.o.token_by_token) {
        for (int64_t i = k; i < r.n && rc == 0; i++)
            rc = decode_or_fail(&r.en, r.ids + i, 1);
    } else if (k < r.n && rc == 0) {
        rc = decode_or_fail(&r.en, r.ids + k, r.n - k);
    }
    if (rc == 0) {
        int64_t nv = llm_model_n_vocab(r.en.model);
        const float *lg = llm_ctx_logits(r.en.ctx);
        rc = CMD_EXIT_OK;
        if (r.o.logits_out) {
            FILE *f = fopen(r.o.logits_out, "wb");
            if (!f || fwrite(lg, sizeof *lg, (size_t)nv, f) != (size_t)nv || fclose(f)) {
                rc = cmd_fail(CMD_EXIT_MODEL, "cannot write '%s': %s", r.o.logits_out, strerror(errno));
                f = NULL;
            }
        }
        /* top 5, ties to the lower id, as llref prints them */
        bool *taken = calloc((size_t)nv, 1);
        for (int k = 0; k < 5 && k < nv && taken && rc == CMD_EXIT_OK; k++) {
            int64_t b = -1;
            for (int64_t i = 0; i < nv; i++)
                if (!taken[i] && (b < 0 || lg[i] > lg[b]))
                    b = i;
            taken[b] = true;
            printf("%" PRId64 " %.6f\n", b, lg[b]);
        }
        free(taken);
    }
    ids_run_end(&r);
    return rc;
}

/* ==== generate ==== */

static int generate_exec(int argc, char **argv);
const struct cmd_entry cmd_generate_entry = {"generate", "greedy generation on token ids",
                                             generate_usage, generate_exec};

static int generate_exec(int argc, char **argv)
{
    if (cmd_wants_help(argc, argv))
        return cmd_help(&cmd_generate_entry);
    struct ids_run r;
    int rc = start_ids(&cmd_generate_entry, argc, argv, true, &r);
    if (rc)
        return rc;
    rc = decode_or_fail(&r.en, r.ids, r.n);
    int64_t nv = llm_model_n_vocab(r.en.model);
    for (long i = 0; i < r.o.n && rc == 0; i++) {
        int32_t t = argmax(llm_ctx_logits(r.en.ctx), nv);
        printf(i ? " %" PRId32 : "%" PRId32, t);
        if (i + 1 == r.o.n)
            break;
        if (llm_ctx_n_past(r.en.ctx) >= llm_ctx_n_ctx(r.en.ctx)) {
            fprintf(stderr, "kvchat: stopped after %ld token%s: context full (%" PRId64 " positions)\n",
                    i + 1, cmd_s(i + 1), llm_ctx_n_ctx(r.en.ctx));
            break;
        }
        rc = decode_or_fail(&r.en, &t, 1);
    }
    if (rc == 0) {
        printf("\n");
        rc = CMD_EXIT_OK;
    }
    ids_run_end(&r);
    return rc;
}

/* ==== bench ==== */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench_exec(int argc, char **argv);
const struct cmd_entry cmd_bench_entry = {"bench", "measure prefill and decode speed",
                                          bench_usage, bench_exec};

/* DRAM read bandwidth in bytes/s (llm_measure_membw), or -1 (printed) */
#define MEMBW_BYTES (256LL << 20)
#define MEMBW_REPS 5
static double membw_or_fail(int threads, int *rc)
{
    double bw = llm_measure_membw(threads, MEMBW_BYTES, MEMBW_REPS);
    if (bw <= 0)
        *rc = cmd_fail(CMD_EXIT_MODEL, "cannot measure memory bandwidth: out of memory");
    return bw;
}

/* `kvchat bench --membw` without a model */
static int bench_membw_only(const struct opts *o)
{
    int threads = o->threads ? (int)o->threads : llm_default_threads(), rc = CMD_EXIT_OK;
    double bw = membw_or_fail(threads, &rc);
    if (bw <= 0)
        return rc;
    if (o->json)
        printf("{\"threads\": %d, \"membw_gb_s\": %.2f, \"membw_buffer_bytes\": %lld, "
               "\"membw_repetitions\": %d}\n",
               threads, bw / 1e9, MEMBW_BYTES, MEMBW_REPS);
    else
        printf("DRAM read bandwidth %.2f GB/s (%d thread%s, %lld MiB buffer, best of %d)\n", bw / 1e9,
               threads, cmd_s(threads), MEMBW_BYTES >> 20, MEMBW_REPS);
    return CMD_EXIT_OK;
}

static int bench_exec(int argc, char **argv)
{
    if (cmd_wants_help(argc, argv))
        return cmd_help(&cmd_bench_entry);
    struct opts o;
    int rc = parse_opts(&cmd_bench_entry, argc, argv, &o);
    if (rc)
        return rc;
    if (!o.model)
        return bench_membw_only(&o);
    int64_t np = o.n_prompt, ng = o.n, nd = o.depth;
    /* (--draft: the longest verification pass starts at decode's depth too) */
    int64_t need = nd + np + (o.draft && o.draft + 1 > ng ? o.draft + 1 : ng);
    if (o.n_ctx && o.n_ctx < need) {
        char d[48] = "";
        if (nd)
            snprintf(d, sizeof d, "depth %" PRId64 " + ", nd);
        return cmd_usage_error(&cmd_bench_entry,
                               "context size %ld is too small for %s%" PRId64 " prompt + %" PRId64
                               " generated tokens%s (needs %" PRId64 ")",
                               o.n_ctx, d, np, ng, o.draft && o.draft + 1 > ng ? " (--draft's longest pass)" : "", need);
    }
    struct engine en;
    if ((rc = engine_open(&o, need, &en)))
        return rc;
    llm_model_pack_wait(en.model); /* a first open writes the packed weights' file */
    if (o.draft && (llm_ctx_rstate_size(en.ctx) > 0 || llm_ctx_reserve_outputs(en.ctx, o.draft + 1))) {
        rc = llm_ctx_rstate_size(en.ctx) > 0
                 ? cmd_usage_error(&cmd_bench_entry, "--draft: not for a model with recurrent layers (their state "
                                                     "cannot go back to a rejected position)")
                 : cmd_fail(CMD_EXIT_MODEL, "--draft: %s", llm_ctx_errmsg(en.ctx));
        engine_close(&en);
        return rc;
    }
    int64_t nv = llm_model_n_vocab(en.model);
    int32_t *t = malloc((size_t)(need + 1) * sizeof *t);
    if (!t) {
        engine_close(&en);
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    }
    /* random ids in [3, n_vocab), like llref bench: the depth's, then the
     * prompt's, then the generated ones (without --depth, the same ids as
     * before --depth existed) */
    uint64_t s = 7;
    for (int64_t i = 0; i < need; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        t[i] = (int32_t)(3 + ((uint32_t)((s * 0x2545F4914F6CDD1DULL) >> 32)) % (uint32_t)(nv > 3 ? nv - 3 : 1));
        if (t[i] >= nv)
            t[i] = 0;
    }
    rc = 0;
    if (nd > 0) {
        /* the depth, once: llm_ctx_decode runs it in passes of n_batch */
        double t0 = now();
        rc = decode_or_fail(&en, t, nd);
        if (rc == 0 && o.verbose)
            fprintf(stderr, "kvchat: depth of %" PRId64 " tokens prefilled in %.2f s\n", nd, now() - t0);
    }
    /* a recurrent model (qwen35) goes back to the depth with its state too */
    uint64_t rs_n = llm_ctx_rstate_size(en.ctx);
    void *rs = rs_n && nd > 0 && rc == 0 ? malloc(rs_n) : NULL;
    if (rs && llm_ctx_rstate_export(en.ctx, rs, rs_n) != (int64_t)rs_n) {
        free(rs);
        rs = NULL;
    }
    /* one untimed warm-up pass first, as llama-bench's (up to 32 prompt
     * tokens, then one generated): weights faulted in, threads and caches
     * warm, so that even -r 1 measures a warm run */
    if (rc == 0) {
        double t0 = now();
        int64_t nw = np < 32 ? np : 32;
        if (nw > 0)
            rc = decode_or_fail(&en, t + nd, nw);
        if (rc == 0 && ng > 0)
            rc = decode_or_fail(&en, t + nd + np, 1);
        if (rc == 0 && o.verbose)
            fprintf(stderr, "kvchat: warm-up: %" PRId64 " prompt token%s and %d generated, untimed, in %.2f s\n", nw,
                    cmd_s(nw), ng > 0, now() - t0);
    }
    double best_p = 1e30, best_g = 1e30;
    uint64_t ukr_p = 0, ukr_g = 0; /* BLIS micro-kernel calls of the float weights */
    uint64_t gemv_g = 0;           /* panels of kvchat's float GEMV in decode */
    for (long r = 0; r < o.reps && rc == 0; r++) {
        llm_ctx_truncate(en.ctx, nd);
        if (rs)
            llm_ctx_rstate_import(en.ctx, rs, rs_n);
        uint64_t u0 = llm_kernel_ukr_calls();
        double t0 = now();
        rc = decode_or_fail(&en, t + nd, np);
        double t1 = now();
        uint64_t u1 = llm_kernel_ukr_calls(), g1 = llm_kernel_gemv_panels();
        if (o.has_depth) { /* llama-bench: decode also starts at the depth */
            llm_ctx_truncate(en.ctx, nd);
            if (rs)
                llm_ctx_rstate_import(en.ctx, rs, rs_n);
        }
        double t2 = now();
        for (int64_t i = 0; i < ng && rc == 0; i++)
            rc = decode_or_fail(&en, t + nd + np + i, 1);
        double t3 = now();
        ukr_p += u1 - u0;
        ukr_g += llm_kernel_ukr_calls() - u1;
        gemv_g += llm_kernel_gemv_panels() - g1;
        if (t1 - t0 < best_p)
            best_p = t1 - t0;
        if (t3 - t2 < best_g)
            best_g = t3 - t2;
    }
    /* --draft: a verification pass of the token sampled and k drafted ones at decode's depth */
    /* against one decode step there, timed the same way (best of R single steps) */
    double pass_ms[LLM_CTX_MAX_OUTPUTS], step_ms = 1e30;
    int64_t vdepth = o.has_depth ? nd : np;
    for (long r = 0; r < (o.draft ? o.reps : 0) && rc == 0; r++) {
        llm_ctx_truncate(en.ctx, vdepth);
        double t0 = now();
        rc = decode_or_fail(&en, t + vdepth, 1);
        double ms = (now() - t0) * 1e3;
        step_ms = ms < step_ms ? ms : step_ms;
    }
    for (long k = 0; o.draft && k <= o.draft && rc == 0; k++) {
        pass_ms[k] = 1e30;
        for (long r = 0; r < o.reps && rc == 0; r++) {
            llm_ctx_truncate(en.ctx, vdepth);
            double t0 = now();
            int e = llm_ctx_decode_outputs(en.ctx, t + vdepth, k + 1);
            double ms = (now() - t0) * 1e3;
            if (e)
                rc = cmd_fail(CMD_EXIT_MODEL, "cannot decode: %s", llm_ctx_errmsg(en.ctx));
            if (ms < pass_ms[k])
                pass_ms[k] = ms;
        }
    }
    if (rc == 0 && o.verbose) {
        const char *ukr = llm_kernel_float_ukr();
        fprintf(stderr, "kvchat: float weights on %s%s: %" PRIu64 " micro-kernel calls in prefill, %" PRIu64
                " in decode, %" PRIu64 " decode panels on kvchat's GEMV in its order\n",
                ukr ? "BLIS's micro-kernel, " : "the portable kernels", ukr ? ukr : "", ukr_p, ukr_g, gemv_g);
    }
    if (rc == 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru); /* before --membw's buffer */
        uint64_t rss = (uint64_t)ru.ru_maxrss * 1024;
        int threads = llm_ctx_n_threads(en.ctx);
        double bw = o.membw ? membw_or_fail(threads, &rc) : 0;
        if (o.membw && bw <= 0)
            goto out;
        double pp = np / best_p, tg = ng > 0 ? ng / best_g : 0;
        int64_t decode_depth = o.has_depth ? nd : np;
        uint64_t wbytes = llm_model_decode_bytes(en.model);
        double wbw = (double)wbytes * tg; /* bytes/s of weights decode reads */
        const char *name = strrchr(o.model, '/') ? strrchr(o.model, '/') + 1 : o.model;
        if (o.json) {
            printf("{\"model\": ");
            cmd_json_str(stdout, name, strlen(name));
            printf(", \"threads\": %d, \"depth\": %" PRId64 ", \"prefill_tokens\": %" PRId64
                   ", \"prefill_tok_s\": %.2f, \"decode_tokens\": %" PRId64 ", \"decode_tok_s\": %.2f"
                   ", \"decode_depth\": %" PRId64 ", \"rss_bytes\": %" PRIu64
                   ", \"decode_weight_bytes\": %" PRIu64 ", \"decode_weight_gb_s\": %.2f",
                   threads, nd, np, pp, ng, tg, decode_depth, rss, wbytes, wbw / 1e9);
            if (o.membw)
                printf(", \"membw_gb_s\": %.2f, \"membw_fraction\": %.3f", bw / 1e9, wbw / bw);
            if (o.draft) {
                printf(", \"draft_depth\": %" PRId64 ", \"draft_step_ms\": %.3f, \"draft_passes\": [", vdepth,
                       step_ms);
                for (long k = 0; k <= o.draft; k++)
                    printf("%s{\"drafted\": %ld, \"pass_ms\": %.3f, \"decode_steps\": %.3f}", k ? ", " : "", k,
                           pass_ms[k], pass_ms[k] / step_ms);
                printf("]");
            }
            printf(", \"kv_type\": \"%s\", \"kernels\": \"%s\", \"repetitions\": %ld}\n",
                   o.kv_type == LLM_TYPE_F16 ? "f16" : "f32", llm_kernel_path(), o.reps);
        } else {
            printf("| %-30s | %7s | %-15s | %12s |\n", "model", "threads", "test", "t/s");
            printf("| %-30s | %7s | %-15s | %12s |\n", "------------------------------", "------:",
                   "---------------", "-----------:");
            char test[64], at[32] = "";
            if (o.has_depth)
                snprintf(at, sizeof at, " @ d%" PRId64, nd);
            snprintf(test, sizeof test, "pp%" PRId64 "%s", np, at);
            printf("| %-30.30s | %7d | %-15s | %12.2f |\n", name, threads, test, pp);
            snprintf(test, sizeof test, "tg%" PRId64 "%s", ng, at);
            printf("| %-30.30s | %7d | %-15s | %12.2f |\n", name, threads, test, tg);
            printf("\ndecode reads %.1f MB of weights per token: %.2f GB/s at %.2f tok/s\n",
                   wbytes / 1e6, wbw / 1e9, tg);
            if (o.membw)
                printf("DRAM read bandwidth %.2f GB/s (%d thread%s): decode reaches %.0f%% of the "
                       "bandwidth bound (%.2f tok/s)\n",
                       bw / 1e9, threads, cmd_s(threads), 100 * wbw / bw, bw / (double)wbytes);
            if (o.draft) {
                printf("\nverification passes at depth %" PRId64 " (the token sampled and k drafted, every row's "
                       "logits kept), against one decode step of %.3f ms there:\n",
                       vdepth, step_ms);
                printf("| %7s | %10s | %12s | %22s |\n", "drafted", "pass ms", "decode steps", "t/s if all accepted");
                printf("| %7s | %10s | %12s | %22s |\n", "------:", "---------:", "-----------:",
                       "---------------------:");
                for (long k = 0; k <= o.draft; k++)
                    printf("| %7ld | %10.3f | %12.3f | %22.2f |\n", k, pass_ms[k],
                           pass_ms[k] / step_ms, (double)(k + 1) * 1e3 / pass_ms[k]);
            }
            printf("peak RSS %.1f MiB; best of %ld; kernels %s\n", rss / 1048576.0, o.reps, llm_kernel_path());
        }
        rc = CMD_EXIT_OK;
    }
out:
    free(rs);
    free(t);
    engine_close(&en);
    return rc;
}
