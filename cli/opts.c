/*
 * opts.c - the options that `chat` and `run` share (kvchat(1),
 * OPTIONS), and what they set up together: the model, its vocabulary and
 * chat template, a context, the conversation parameters. The store, the
 * session and the conversation are opened by cli/conv.c.
 *
 * One table (opt_table) names every setting three ways: its config-file key
 * (`temp = 0.7`), its command-line option (`--temp 0.7`) and its /set key in
 * the REPL (`/set temp 0.7`), so the three always accept the same values
 * with the same checks. Precedence: built-in defaults, then the config file,
 * then the command line (then /set, for the rest of a chat).
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "cli/remote.h"
#include "cli/term.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum opt_kind { OPT_KIND_INT, OPT_KIND_FLOAT, OPT_KIND_U64, OPT_KIND_STR, OPT_KIND_FLAG, OPT_KIND_KV };

/* where a setting may be given */
#define OPT_IN_CONFIG 1u
#define OPT_IN_SET 2u

struct opt_def {
    enum cmd_opt id;
    const char *key;  /* config file and /set */
    const char *lng;  /* --long */
    char shrt;        /* -s, or 0 */
    enum opt_kind kind;
    double lo, hi;    /* for numbers */
    unsigned where;
};

static const struct opt_def opt_table[] = {
    {CMD_OPT_MODEL, "model", "model", 'm', OPT_KIND_STR, 0, 0, 0},
    {CMD_OPT_THREADS, "threads", "threads", 't', OPT_KIND_INT, 1, 1024, OPT_IN_CONFIG},
    {CMD_OPT_CTX_SIZE, "ctx_size", "ctx-size", 'c', OPT_KIND_INT, 16, 1 << 24, OPT_IN_CONFIG},
    {CMD_OPT_TEMP, "temp", "temp", 0, OPT_KIND_FLOAT, 0, 100, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_TOP_K, "top_k", "top-k", 0, OPT_KIND_INT, 0, 1 << 24, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_TOP_P, "top_p", "top-p", 0, OPT_KIND_FLOAT, 0, 1, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_MIN_P, "min_p", "min-p", 0, OPT_KIND_FLOAT, 0, 1, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_REPEAT_PENALTY, "repeat_penalty", "repeat-penalty", 0, OPT_KIND_FLOAT, 0.01, 100,
     OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_PRESENCE_PENALTY, "presence_penalty", "presence-penalty", 0, OPT_KIND_FLOAT, -100, 100,
     OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_REPEAT_LAST_N, "repeat_last_n", "repeat-last-n", 0, OPT_KIND_INT, 0, 1 << 20,
     OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_SEED, "seed", "seed", 0, OPT_KIND_U64, 0, 0, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_N_PREDICT, "n_predict", "max-tokens", 'n', OPT_KIND_INT, -1, 1 << 24,
     OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_KV_TYPE, "kv_type", "kv-type", 0, OPT_KIND_KV, 0, 0, OPT_IN_CONFIG},
    {CMD_OPT_TEMPLATE, "template", "template", 0, OPT_KIND_STR, 0, 0, OPT_IN_CONFIG},
    {CMD_OPT_SYSTEM, "system", "system", 0, OPT_KIND_STR, 0, 0, 0},
    {CMD_OPT_SYSTEM_FILE, "system_file", "system-file", 0, OPT_KIND_STR, 0, 0, 0},
    {CMD_OPT_NO_CACHE, "no_cache", "no-cache", 0, OPT_KIND_FLAG, 0, 0, 0},
    {CMD_OPT_VERBOSE, "verbose", "verbose", 'v', OPT_KIND_FLAG, 0, 0, 0},
    {CMD_OPT_SPECIAL, "special", "special", 0, OPT_KIND_FLAG, 0, 0, 0},
    {CMD_OPT_CACHE_MAX, "cache_max", "cache-max", 0, OPT_KIND_STR, 0, 0, OPT_IN_CONFIG},
    {CMD_OPT_WRAP, "wrap", "wrap", 0, OPT_KIND_FLAG, 0, 0, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_THINK, "think", "think", 0, OPT_KIND_STR, 0, 0, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_STOP, "stop", "stop", 0, OPT_KIND_STR, 0, 0, 0},
    {CMD_OPT_SWITCH_MODEL, "switch_model", "switch-model", 0, OPT_KIND_FLAG, 0, 0, 0},
    {CMD_OPT_PRIVATE, "private", "private", 0, OPT_KIND_FLAG, 0, 0, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_FORMAT, "format", "format", 0, OPT_KIND_STR, 0, 0, 0},
    {CMD_OPT_JSON_SCHEMA, "schema", "json-schema", 0, OPT_KIND_STR, 0, 0, 0},
    {CMD_OPT_GRAMMAR, "grammar", "grammar", 0, OPT_KIND_STR, 0, 0, 0},
    {CMD_OPT_DRAFT, "draft", "draft", 0, OPT_KIND_STR, 0, 0, OPT_IN_CONFIG | OPT_IN_SET},
    {CMD_OPT_DRAFT_MAX, "draft_max", "draft-max", 0, OPT_KIND_INT, 1, SESS_DRAFT_MAX_LIMIT,
     OPT_IN_CONFIG | OPT_IN_SET},
};
#define N_OPTS (sizeof opt_table / sizeof opt_table[0])

static const struct opt_def *opt_by_key(const char *key)
{
    for (size_t i = 0; i < N_OPTS; i++)
        if (!strcmp(opt_table[i].key, key))
            return &opt_table[i];
    if (!strcmp(key, "max_tokens"))
        return opt_by_key("n_predict");
    return NULL;
}

void cmd_opts_init(struct cmd_opts *o)
{
    memset(o, 0, sizeof *o);
    o->sampling = llm_sampler_default_params();
    o->n_predict = -1;
    o->kv_type = LLM_TYPE_F16;
    o->cache_max = 4ll << 30;
    o->wrap = true;
    o->draft = SESS_DRAFT_DEFAULT;
    o->draft_max = SESS_DRAFT_MAX_DEFAULT;
    /* a fresh seed per process unless one is given: chats differ from run
     * to run as users of llama.cpp and ollama expect; --seed fixes it */
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
        seed = (uint64_t)time(NULL) * 6364136223846793005ull;
    o->sampling.seed = seed;
}

/* Parse a value for def into o; 0, or -1 with a reason in err. */
static int opt_apply(struct cmd_opts *o, const struct opt_def *d, const char *v, char *err, size_t n)
{
    char *end;
    long long iv = 0;
    double fv = 0;
    uint64_t uv = 0;
    errno = 0;
    switch (d->kind) {
    case OPT_KIND_INT:
        iv = strtoll(v, &end, 10);
        if (errno || end == v || *end || iv < (long long)d->lo || iv > (long long)d->hi) {
            snprintf(err, n, "bad value '%s' for %s: expected a whole number from %.0f to %.0f", v,
                     d->key, d->lo, d->hi);
            return -1;
        }
        break;
    case OPT_KIND_FLOAT:
        fv = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(fv) || fv < d->lo || fv > d->hi) {
            snprintf(err, n, "bad value '%s' for %s: expected a number from %g to %g", v, d->key,
                     d->lo, d->hi);
            return -1;
        }
        break;
    case OPT_KIND_U64:
        if (v[0] == '-') {
            snprintf(err, n, "bad value '%s' for %s: expected a whole number from 0", v, d->key);
            return -1;
        }
        uv = strtoull(v, &end, 10);
        if (errno || end == v || *end) {
            snprintf(err, n, "bad value '%s' for %s: expected a whole number from 0", v, d->key);
            return -1;
        }
        break;
    case OPT_KIND_KV:
        if (strcmp(v, "f16") && strcmp(v, "f32")) {
            snprintf(err, n, "bad value '%s' for %s: expected f16 or f32", v, d->key);
            return -1;
        }
        break;
    case OPT_KIND_FLAG:
        if (strcmp(v, "1") && strcmp(v, "0") && strcmp(v, "true") && strcmp(v, "false") &&
            strcmp(v, "yes") && strcmp(v, "no") && strcmp(v, "on") && strcmp(v, "off")) {
            snprintf(err, n, "bad value '%s' for %s: expected on or off", v, d->key);
            return -1;
        }
        break;
    case OPT_KIND_STR:
        if (d->id == CMD_OPT_THINK && strcmp(v, "show") && strcmp(v, "hide") && strcmp(v, "on") &&
            strcmp(v, "off")) {
            snprintf(err, n, "bad value '%s' for %s: expected show, hide, on or off", v, d->key);
            return -1;
        }
        if (d->id == CMD_OPT_DRAFT && sess_draft_parse(v) < 0) {
            snprintf(err, n, "bad value '%s' for %s: expected off, ngram, store or on", v, d->key);
            return -1;
        }
        if (d->id == CMD_OPT_STOP && (!v[0] || o->n_stop >= CMD_OPTS_MAX_STOP)) {
            if (v[0])
                snprintf(err, n, "too many stop strings (at most %d)", CMD_OPTS_MAX_STOP);
            else
                snprintf(err, n, "bad value '' for stop: an empty string would end every answer at once");
            return -1;
        }
        break;
    }
    bool flag = !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on");
    if (d->id == CMD_OPT_CACHE_MAX && cmd_parse_size(v) < 0) {
        snprintf(err, n, "bad value '%s' for %s: expected a size like 4G or 500M", v, d->key);
        return -1;
    }
    switch (d->id) {
    case CMD_OPT_MODEL: o->model = v; break;
    case CMD_OPT_THREADS: o->n_threads = (int32_t)iv; break;
    case CMD_OPT_CTX_SIZE: o->n_ctx = (int32_t)iv; break;
    case CMD_OPT_TEMP: o->sampling.temp = (float)fv; break;
    case CMD_OPT_TOP_K: o->sampling.top_k = (int32_t)iv; break;
    case CMD_OPT_TOP_P: o->sampling.top_p = (float)fv; break;
    case CMD_OPT_MIN_P: o->sampling.min_p = (float)fv; break;
    case CMD_OPT_REPEAT_PENALTY: o->sampling.repeat_penalty = (float)fv; break;
    case CMD_OPT_PRESENCE_PENALTY: o->sampling.presence_penalty = (float)fv; break;
    case CMD_OPT_REPEAT_LAST_N: o->sampling.penalty_last_n = (int32_t)iv; break;
    case CMD_OPT_SEED:
        o->sampling.seed = uv;
        o->seed_set = true;
        break;
    case CMD_OPT_N_PREDICT: o->n_predict = (int32_t)iv; break;
    case CMD_OPT_KV_TYPE: o->kv_type = !strcmp(v, "f32") ? LLM_TYPE_F32 : LLM_TYPE_F16; break;
    case CMD_OPT_TEMPLATE: o->template_name = v; break;
    case CMD_OPT_SYSTEM: o->system = v; o->system_file = NULL; break;
    case CMD_OPT_SYSTEM_FILE: o->system_file = v; o->system = NULL; break;
    case CMD_OPT_NO_CACHE: o->no_cache = flag; break;
    case CMD_OPT_VERBOSE: o->verbose = flag; break;
    case CMD_OPT_SPECIAL: o->special = flag; break;
    case CMD_OPT_CACHE_MAX: o->cache_max = cmd_parse_size(v); break;
    case CMD_OPT_STOP: o->stop[o->n_stop++] = v; break;
    case CMD_OPT_WRAP: o->wrap = flag; break;
    case CMD_OPT_SWITCH_MODEL: o->switch_model = flag; break;
    case CMD_OPT_PRIVATE: o->private_mode = flag; break;
    case CMD_OPT_FORMAT: o->format_kind = "format", o->format_arg = v; break;
    case CMD_OPT_JSON_SCHEMA: o->format_kind = "schema", o->format_arg = v; break;
    case CMD_OPT_GRAMMAR: o->format_kind = "grammar", o->format_arg = v; break;
    case CMD_OPT_DRAFT: o->draft = (uint32_t)sess_draft_parse(v); break;
    case CMD_OPT_DRAFT_MAX: o->draft_max = (int32_t)iv; break;
    case CMD_OPT_THINK:
        if (!strcmp(v, "on") || !strcmp(v, "off"))
            o->think_off = !strcmp(v, "off"), o->think_switch_given = true;
        else
            o->think_hide = !strcmp(v, "hide"), o->think_show = !o->think_hide;
        break;
    case CMD_OPT_COUNT: break;
    }
    o->given |= 1ull << d->id;
    return 0;
}

int cmd_opts_config(struct cmd_opts *o)
{
    /* config values must outlive o: they are copied into o->config_strs */
    for (size_t i = 0; i < N_OPTS; i++) {
        const struct opt_def *d = &opt_table[i];
        if (!(d->where & OPT_IN_CONFIG))
            continue;
        char buf[1024], err[512];
        int r = mdl_config_get(d->key, buf, sizeof buf);
        if (r < 0) {
            int e = errno;
            char path[4096] = "the config file";
            mdl_config_path(path, sizeof path);
            return cmd_fail(CMD_EXIT_USAGE, "cannot read the config file '%s': %s", path,
                            e == EINVAL ? "it is not a regular file" : e == EFBIG ? "it is larger than 1 MiB"
                                                                        : strerror(e));
        }
        if (r == 0 || !buf[0])
            continue;
        char *copy = strdup(buf);
        if (!copy)
            return cmd_fail(CMD_EXIT_USAGE, "out of memory");
        if (opt_apply(o, d, copy, err, sizeof err)) {
            free(copy);
            char path[4096] = "the config file";
            mdl_config_path(path, sizeof path);
            return cmd_fail(CMD_EXIT_USAGE, "%s (in '%s')", err, path);
        }
        if (o->n_config_strs < CMD_OPTS_MAX_CONFIG)
            o->config_strs[o->n_config_strs++] = copy;
        else
            free(copy);
    }
    /* a key nothing reads (a typo such as 'tmep = 0') is said, not ignored */
    const char *known[N_OPTS + 2];
    size_t nk = 0;
    known[nk++] = "model"; /* read by the model's resolution */
    for (size_t i = 0; i < N_OPTS; i++)
        if (opt_table[i].where & OPT_IN_CONFIG)
            known[nk++] = opt_table[i].key;
    known[nk] = NULL;
    char unknown[256];
    if (mdl_config_unknown(known, unknown, sizeof unknown) > 0) {
        char path[4096] = "the config file";
        mdl_config_path(path, sizeof path);
        cmd_term_printf(stderr, "kvchat: warning: unknown key '%s) in the config file '%s': ignored (see "
                                "kvchat(1), FILES)\n", unknown, path);
    }
    o->configured = o->given;
    o->given = 0; /* "given" means on the command line */
    o->think_switch_given = false;
    return 0;
}

bool cmd_opts_c_is_ctx(int argc, char **argv, int i)
{
    if (i + 1 >= argc || !argv[i + 1][0])
        return false;
    for (const char *p = argv[i + 1]; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

int cmd_opts_take(const struct cmd_entry *e, struct cmd_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const struct opt_def *d = NULL;
    const char *val = NULL;
    if (a[0] != '-' || !a[1])
        return 0;
    if (a[1] == '-') {
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        for (size_t k = 0; k < N_OPTS; k++)
            if (strlen(opt_table[k].lng) == len && !strncmp(opt_table[k].lng, name, len))
                d = &opt_table[k];
        if (!d && len == 9 && !strncmp(name, "n-predict", 9))
            d = opt_by_key("n_predict");
        /* --no-X turns the on/off option X off (not one named --no-X itself:
         * --no-no-cache is no option) */
        for (size_t k = 0; !d && len > 3 && !strncmp(name, "no-", 3) && k < N_OPTS; k++)
            if (opt_table[k].kind == OPT_KIND_FLAG && strncmp(opt_table[k].lng, "no-", 3) &&
                strlen(opt_table[k].lng) == len - 3 &&
                !strncmp(opt_table[k].lng, name + 3, len - 3)) {
                d = &opt_table[k];
                val = "0";
            }
        if (!d)
            return 0;
        if (eq) {
            if (d->kind == OPT_KIND_FLAG) {
                cmd_usage_error(e, "option '--%.*s' takes no value", (int)len, name);
                return -1;
            }
            val = eq + 1;
        }
    } else {
        /* -c is the context size before a number (llama.cpp's -c N), else
         * --continue, which the chat and run take themselves */
        if (!strcmp(a, "-c") && !cmd_opts_c_is_ctx(argc, argv, *i))
            return 0;
        for (size_t k = 0; k < N_OPTS; k++)
            if (opt_table[k].shrt && opt_table[k].shrt == a[1])
                d = &opt_table[k];
        if (!d)
            return 0;
        if (a[2]) {
            if (d->kind == OPT_KIND_FLAG)
                return 0; /* bundled flags are not ours to split */
            val = a + 2;
        }
    }
    if (d->kind == OPT_KIND_FLAG) {
        val = val ? val : "1";
    } else if (!val) {
        if (*i + 1 >= argc) {
            cmd_usage_error(e, "option '%s' needs a value", a);
            return -1;
        }
        val = argv[++*i];
    }
    char err[512];
    if (opt_apply(o, d, val, err, sizeof err)) {
        cmd_usage_error(e, "%s", err);
        return -1;
    }
    (*i)++;
    return 1;
}

int cmd_opts_finish(const struct cmd_entry *e, struct cmd_opts *o)
{
    (void)e;
    if (o->system_file) {
        char *buf;
        size_t len;
        char err[640];
        /* text, as -f's files: a binary file is refused, not cut at its first NUL */
        if (cmd_read_text(o->system_file, CMD_INPUT_MAX, &buf, &len, err, sizeof err))
            return cmd_fail(CMD_EXIT_MODEL, "system prompt file: %s", err);
        /* one trailing newline is the file's, not the prompt's */
        if (len && buf[len - 1] == '\n')
            buf[--len] = 0;
        free(o->system_buf);
        o->system_buf = buf;
        o->system = buf;
    }
    if (o->template_name && llm_template_from_name(o->template_name) == LLM_TEMPLATE_UNKNOWN &&
        strcmp(o->template_name, "unknown"))
        return cmd_usage_error(e, "unknown chat template '%s' (known: chatml, llama2, llama3, "
                                  "mistral-v7, phi3, gemma, zephyr, ...)",
                               o->template_name);
    if (o->format_kind) { /* before the model loads: a bad schema costs nothing */
        char err[1024];
        int rc = cmd_format_load(&o->format, o->format_kind, o->format_arg, err, sizeof err);
        if (rc == CMD_EXIT_USAGE)
            return cmd_usage_error(e, "%s", err);
        if (rc)
            return cmd_fail(rc, "%s", err);
    }
    return 0;
}

void cmd_opts_free(struct cmd_opts *o)
{
    for (int i = 0; i < o->n_config_strs; i++)
        free(o->config_strs[i]);
    o->n_config_strs = 0;
    free(o->system_buf);
    o->system_buf = NULL;
    cmd_format_free(&o->format);
}

bool cmd_long_arg(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi)
        return false;
    *v = x;
    return true;
}

bool cmd_int_arg(const char *s, int lo, int hi, int *v)
{
    long x;
    if (!cmd_long_arg(s, lo, hi, &x))
        return false;
    *v = (int)x;
    return true;
}

int cmd_opts_set(struct cmd_opts *o, const char *key, const char *value, char *err, size_t n)
{
    const struct opt_def *d = opt_by_key(key);
    if (!d || !(d->where & OPT_IN_SET)) {
        char keys[512];
        cmd_opts_set_keys_join(keys, sizeof keys, ", ");
        snprintf(err, n, "unknown setting '%s' (try: %s)", key, keys);
        return -1;
    }
    return opt_apply(o, d, value, err, n);
}

const char *const *cmd_opts_set_keys(void)
{
    static const char *keys[N_OPTS + 1];
    if (!keys[0]) {
        size_t k = 0;
        for (size_t i = 0; i < N_OPTS; i++)
            if (opt_table[i].where & OPT_IN_SET)
                keys[k++] = opt_table[i].key;
        keys[k] = NULL;
    }
    return keys;
}

const char *cmd_opts_option(size_t i, char *shrt, bool *takes_value, bool *negated)
{
    if (i >= N_OPTS)
        return NULL;
    *shrt = opt_table[i].shrt;
    *takes_value = opt_table[i].kind != OPT_KIND_FLAG;
    *negated = !*takes_value && (opt_table[i].where & OPT_IN_CONFIG);
    return opt_table[i].lng;
}

void cmd_opts_set_keys_join(char *buf, size_t n, const char *sep)
{
    size_t len = 0;
    buf[0] = 0;
    for (const char *const *k = cmd_opts_set_keys(); *k && len < n; k++) {
        int w = snprintf(buf + len, n - len, "%s%s", len ? sep : "", *k);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

void cmd_opts_describe(const struct cmd_opts *o, FILE *f)
{
    const struct llm_sampler_params *s = &o->sampling;
    fprintf(f, "temp %g, top_k %" PRId32 ", top_p %g, min_p %g, repeat_penalty %g, repeat_last_n %" PRId32
               ", presence_penalty %g, seed %" PRIu64 ", n_predict %" PRId32 "%s",
            s->temp, s->top_k, s->top_p, s->min_p, s->repeat_penalty, s->penalty_last_n, s->presence_penalty,
            s->seed, o->n_predict, o->n_predict < 0 ? " (until the context is full)" : "");
}

/* ==== the model, its vocabulary and template, a context ==== */

struct llm_model_params cmd_model_params(char *dir, size_t size)
{
    struct llm_model_params p = llm_model_default_params();
    if (mdl_home(dir, size) == 0 && strlen(dir) + sizeof "/packed" <= size) {
        strcat(dir, "/packed");
        p.pack_dir = dir;
    }
    return p;
}

void cmd_describe_packed(const struct llm_model *m, FILE *f)
{
    uint64_t bytes;
    bool cached;
    int64_t n = llm_model_packed(m, &bytes, &cached);
    if (n > 0)
        fprintf(f, "kvchat: %" PRId64 " weight%s packed (%.1f MiB, %s)\n", n, cmd_s(n),
                (double)bytes / (1 << 20), cached ? "mapped from the cache" : "packed now");
}

int cmd_llm_open(const struct cmd_opts *o, bool offer_pull, struct cmd_llm *l)
{
    memset(l, 0, sizeof *l);
    int rc = cmd_model_resolve(o->model, offer_pull, &l->path);
    if (rc)
        return rc;
    if (mdl_is_remote(l->path)) /* its server answers: nothing to load here */
        return cmd_remote_open(o, l->path, &l->remote);
    char err[1024], pack_dir[4096];
    struct llm_model_params mp = cmd_model_params(pack_dir, sizeof pack_dir);
    if (o->private_mode) /* the packed-weight cache is a file in the store too */
        mp.pack_dir = NULL;
    base_trace("model: resolved");
    if (llm_model_open(l->path, mp, &l->model, err, sizeof err) < 0)
        return cmd_fail(CMD_EXIT_MODEL, "cannot open model '%s': %s", l->path, err);
    base_trace("model: opened (GGUF parsed, tensors bound, packed weights mapped)");
    const struct llm_gguf *g = llm_model_gguf(l->model);
    /* the vocabulary's tables: mapped from their cache file beside the
     * packed weights', built (and that file written) the first time */
    if (llm_vocab_load_cached(g, mp.pack_dir, l->path, &l->vocab, err, sizeof err) < 0) {
        cmd_llm_close(l);
        return cmd_fail(CMD_EXIT_MODEL, "cannot read the vocabulary of '%s': %s", l->path, err);
    }
    base_trace("model: vocabulary loaded");
    struct llm_str jinja = {0};
    bool has = llm_gguf_find_str(g, "tokenizer.chat_template", &jinja) == 0;
    bool fell_back = false;
    l->tmpl = llm_template_choose(o->template_name, has ? jinja.ptr : NULL, has ? (size_t)jinja.len : 0,
                                  &fell_back);
    if (fell_back && !o->template_name)
        fprintf(stderr, "kvchat: warning: %s; using chatml (choose one with --template NAME)\n",
                has ? "the model's chat template is not one kvchat knows" : "the model has no chat template");
    l->can_think_off = llm_template_think_off(l->tmpl, has ? jinja.ptr : NULL, has ? (size_t)jinja.len : 0);
    if (o->think_off && !l->can_think_off)
        fprintf(stderr, "kvchat: warning: the model's chat template cannot switch thinking off; "
                        "--think off does nothing\n");
    struct llm_ctx_params cp = llm_ctx_default_params();
    cp.n_ctx = o->n_ctx;
    cp.n_threads = o->n_threads;
    cp.kv_type = o->kv_type;
    if (llm_ctx_init(l->model, cp, &l->ctx, err, sizeof err) < 0) {
        cmd_llm_close(l);
        return cmd_fail(CMD_EXIT_MODEL, "cannot make a context for '%s': %s", l->path, err);
    }
    base_trace("model: context made (KV cache mapped)");
    /* positions past the trained length: allowed, but the user should know */
    int64_t n_train = llm_model_get_meta(l->model)->n_ctx_train;
    if (n_train > 0 && llm_ctx_n_ctx(l->ctx) > n_train)
        fprintf(stderr, "kvchat: warning: a context of %" PRId64 " tokens is more than the %" PRId64
                        " positions '%s' was trained for; past them its answers may degrade\n",
                llm_ctx_n_ctx(l->ctx), n_train, l->path);
    if (o->verbose) {
        fprintf(stderr, "kvchat: model %s (%s, template %s), context %" PRId64 ", %d thread%s, kv %s, "
                        "kernels %s\n",
                l->path, llm_model_get_meta(l->model)->arch, llm_template_name(l->tmpl),
                llm_ctx_n_ctx(l->ctx), llm_ctx_n_threads(l->ctx), cmd_s(llm_ctx_n_threads(l->ctx)),
                llm_type_name(o->kv_type), llm_kernel_path());
        cmd_describe_packed(l->model, stderr);
    }
    return 0;
}

void cmd_llm_close(struct cmd_llm *l)
{
    cmd_remote_close(l->remote);
    if (l->ctx)
        llm_ctx_free(l->ctx);
    if (l->vocab)
        llm_vocab_free(l->vocab);
    if (l->model)
        llm_model_close(l->model);
    free(l->path);
    memset(l, 0, sizeof *l);
}

struct sess_conv_params cmd_opts_conv_params(const struct cmd_opts *o, struct cmd_llm *l)
{
    struct sess_conv_params p = sess_conv_default_params();
    if (l->remote) {
        p.remote = cmd_remote_engine(l->remote);
        p.model_path = l->path;
        p.system = o->system && o->system[0] ? o->system : NULL;
        p.sampling = o->sampling;
        p.n_predict = o->n_predict;
        p.stop = o->n_stop ? o->stop : NULL;
        p.given = cmd_opts_sess_params(o->given);
        p.switch_model = o->switch_model;
        return p;
    }
    p.model = l->model;
    p.vocab = l->vocab;
    p.ctx = l->ctx; /* the conversation owns it from now on */
    l->ctx = NULL;
    p.system = o->system && o->system[0] ? o->system : NULL;
    p.tmpl = l->tmpl;
    p.think_off = o->think_off;
    p.model_path = l->path;
    p.sampling = o->sampling;
    p.n_predict = o->n_predict;
    p.parse_special = o->special;
    p.stop = o->n_stop ? o->stop : NULL;
    p.no_cache = o->no_cache;
    p.cache_max = o->cache_max;
    p.given = cmd_opts_sess_params(o->given) | (o->think_switch_given ? 1u << SESS_PARAM_THINK : 0);
    p.switch_model = o->switch_model;
    p.format_kind = o->format.kind[0] ? o->format.kind : NULL;
    p.format_source = o->format.source;
    p.draft = o->draft;
    p.draft_max = o->draft_max;
    /* for tests: drafts made wrong on purpose (docs/speculative.md) */
    const char *dt = getenv("KVCHAT_DRAFT_TEST");
    p.draft_test = dt && !strcmp(dt, "1") ? SESS_DRAFT_TEST_CORRUPT : SESS_DRAFT_TEST_OFF;
    return p;
}

uint32_t cmd_opts_sess_params(uint64_t opts)
{
    static const struct {
        enum cmd_opt o;
        enum sess_param p;
    } map[] = {
        {CMD_OPT_TEMP, SESS_PARAM_TEMP}, {CMD_OPT_TOP_K, SESS_PARAM_TOP_K}, {CMD_OPT_TOP_P, SESS_PARAM_TOP_P},
        {CMD_OPT_MIN_P, SESS_PARAM_MIN_P}, {CMD_OPT_REPEAT_PENALTY, SESS_PARAM_REPEAT_PENALTY},
        {CMD_OPT_PRESENCE_PENALTY, SESS_PARAM_PRESENCE_PENALTY},
        {CMD_OPT_REPEAT_LAST_N, SESS_PARAM_REPEAT_LAST_N}, {CMD_OPT_SEED, SESS_PARAM_SEED},
        {CMD_OPT_N_PREDICT, SESS_PARAM_N_PREDICT}, {CMD_OPT_FORMAT, SESS_PARAM_FORMAT},
        {CMD_OPT_JSON_SCHEMA, SESS_PARAM_FORMAT}, {CMD_OPT_GRAMMAR, SESS_PARAM_FORMAT},
    };
    uint32_t bits = 0;
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (opts & (1ull << map[i].o))
            bits |= 1u << map[i].p;
    return bits;
}
