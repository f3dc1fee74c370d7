/*
 * remote.c - the engine of a conversation with a remote model
 * (sessions/'s struct sess_remote over mdl_remote_chat), which chat and run
 * use as they use a local model: the sampling settings mapped to the
 * request, models/'s statuses to exit codes.
 *
 * Text from a server goes to a terminal with its control characters (C0
 * other than newline and tab, DEL, C1) shown as U+FFFD, so that a server
 * cannot drive the terminal; to a pipe or a file it goes as it came.
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "cli/remote.h"
#include "cli/term.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* models/'s statuses as exit codes */
int cmd_remote_status_exit(int rc)
{
    switch (rc) {
    case MDL_ERR_USAGE: return CMD_EXIT_USAGE;
    case MDL_ERR_NETWORK:
    case MDL_ERR_CUT:
    case MDL_ERR_PROTOCOL: return CMD_EXIT_NETWORK;
    case MDL_ERR_INTERRUPTED: return CMD_EXIT_INTERRUPTED;
    default: return CMD_EXIT_MODEL; /* AUTH, NOT_FOUND, REJECTED, FILE */
    }
}

static void note(void *ctx, const char *msg)
{
    (void)ctx;
    cmd_term_printf(stderr, "kvchat: %s\n", msg);
}

/* ==== the engine of a conversation with a remote model ==== */

struct cmd_remote {
    struct mdl_remote *r;
    struct mdl_remote_info in;
    const struct cmd_opts *o; /* borrowed: which settings were given (sent) */
    bool sanitize;            /* the answer goes to a terminal: control characters as U+FFFD */
    /* during a call: where the text goes */
    sess_text_fn on_text;
    void *text_ud;
    /* the last turn */
    int rc;                   /* models/'s status */
    char server_model[256];
    int attempts;
    double total_ms;
};

/* pass n bytes on through the one sanitizer (cli/term.c) */
static int pass_sanitized(struct cmd_remote *rm, const char *s, size_t n)
{
    return cmd_term_clean(s, n, rm->on_text, rm->text_ud);
}

static int remote_text(void *ud, const char *text, size_t n)
{
    struct cmd_remote *rm = ud;
    if (!rm->on_text)
        return 0;
    return rm->sanitize ? pass_sanitized(rm, text, n) : rm->on_text(rm->text_ud, text, n);
}

/* what the server is asked: the settings given on the command line, in
 * the config file, by /set or kept by the session (cp->given); the rest is
 * the server's default */
static struct mdl_chat_params chat_params(const struct cmd_remote *rm, const struct sess_conv_params *cp)
{
    uint32_t set = cmd_opts_sess_params(rm->o->given | rm->o->configured) | cp->given;
    struct mdl_chat_params p = mdl_chat_default_params();
    p.temp_set = set & (1u << SESS_PARAM_TEMP);
    p.temp = cp->sampling.temp;
    p.top_p_set = set & (1u << SESS_PARAM_TOP_P);
    p.top_p = cp->sampling.top_p;
    p.presence_penalty_set = set & (1u << SESS_PARAM_PRESENCE_PENALTY);
    p.presence_penalty = cp->sampling.presence_penalty;
    p.seed_set = rm->o->seed_set || (set & (1u << SESS_PARAM_SEED));
    p.seed = cp->sampling.seed;
    p.max_tokens = cp->n_predict;
    while (cp->stop && cp->stop[p.n_stop])
        p.n_stop++;
    p.stop = cp->stop;
    return p;
}

void cmd_remote_sent(const struct cmd_remote *rm, const struct sess_conv_params *cp, char *buf, size_t n)
{
    struct mdl_chat_params p = chat_params(rm, cp);
    size_t k = 0;
    buf[0] = 0;
#define ADD(...) (k += k < n ? (size_t)snprintf(buf + k, n - k, __VA_ARGS__) : 0)
    if (p.temp_set)
        ADD("%stemperature %g", k ? ", " : "", p.temp);
    if (p.top_p_set)
        ADD("%stop_p %g", k ? ", " : "", p.top_p);
    if (p.presence_penalty_set)
        ADD("%spresence_penalty %g", k ? ", " : "", p.presence_penalty);
    if (p.seed_set)
        ADD("%sseed %" PRIu64, k ? ", " : "", p.seed);
    if (p.max_tokens > 0)
        ADD("%smax_tokens %" PRId32, k ? ", " : "", p.max_tokens);
    for (size_t i = 0; i < p.n_stop; i++)
        ADD("%s%s'%s'", k ? ", " : "", i ? "" : "stop ", p.stop[i]);
    if (!k)
        ADD("nothing: the server's defaults (--temp, --top-p, --presence-penalty, --seed, -n, --stop or /set send them)");
#undef ADD
}

/* sess_remote.answer: one turn on the server */
static int remote_answer(void *ud, const struct llm_chat_msg *msgs, size_t n, const struct sess_conv_params *cp,
                         sess_text_fn on_text, void *text_ud, volatile sig_atomic_t *interrupt,
                         struct sess_remote_answer *a)
{
    struct cmd_remote *rm = ud;
    struct mdl_message *mm = malloc((n ? n : 1) * sizeof *mm);
    if (!mm) {
        snprintf(a->problem, sizeof a->problem, "out of memory");
        rm->rc = MDL_ERR_FILE;
        return SESS_ERR_REMOTE;
    }
    for (size_t i = 0; i < n; i++) {
        enum mdl_role role = !strcmp(msgs[i].role, "system") ? MDL_ROLE_SYSTEM
                             : !strcmp(msgs[i].role, "user") ? MDL_ROLE_USER
                                                             : MDL_ROLE_ASSISTANT;
        mm[i] = (struct mdl_message){role, msgs[i].content, strlen(msgs[i].content)};
    }
    struct mdl_chat_params p = chat_params(rm, cp);
    p.cancel = interrupt;
    p.note = note;
    rm->on_text = on_text;
    rm->text_ud = text_ud;
    struct mdl_chat_result res;
    char err[sizeof a->problem - 300];
    int rc = mdl_remote_chat(rm->r, mm, n, &p, remote_text, rm, &res, err, sizeof err);
    free(mm);
    rm->on_text = NULL;
    rm->rc = rc;
    snprintf(rm->server_model, sizeof rm->server_model, "%s", res.server_model);
    rm->attempts = res.attempts;
    rm->total_ms = res.total_ms;
    a->prompt_tokens = res.prompt_tokens;
    a->cached_tokens = res.cached_tokens;
    a->generated_tokens = res.completion_tokens;
    a->ttft_ms = res.ttft_ms;
    a->prefill_tok_s = res.prompt_tok_s;
    a->decode_tok_s = res.decode_tok_s;
    int out = SESS_OK;
    if (rc == 0 || ((rc == MDL_ERR_INTERRUPTED || rc == MDL_ERR_CUT) && res.len)) {
        a->text = res.text; /* the conversation takes it */
        a->len = res.len;
        res.text = NULL;
        a->stop_reason = rc == MDL_ERR_CUT ? "cut" : rc ? "interrupted" : res.stop_reason;
        if (rc == MDL_ERR_CUT)
            snprintf(a->problem, sizeof a->problem, "remote model '%s': the answer was cut off after %zu bytes: %s",
                     rm->in.name, a->len, err);
    } else if (rc == MDL_ERR_INTERRUPTED) {
        out = SESS_ERR_INTERRUPTED;
    } else {
        if (rc == MDL_ERR_CUT) /* cut before any text: no answer */
            rm->rc = MDL_ERR_NETWORK;
        snprintf(a->problem, sizeof a->problem, "remote model '%s': %s", rm->in.name, err);
        out = SESS_ERR_REMOTE;
    }
    mdl_chat_result_free(&res);
    return out;
}

/* the options that a remote model cannot use, if given: named once */
static void note_unsent(const struct cmd_opts *o, const char *name)
{
    static const struct { enum cmd_opt id; const char *opt; } local_only[] = {
        {CMD_OPT_TOP_K, "--top-k"}, {CMD_OPT_MIN_P, "--min-p"},
        {CMD_OPT_REPEAT_PENALTY, "--repeat-penalty"}, {CMD_OPT_REPEAT_LAST_N, "--repeat-last-n"},
        {CMD_OPT_THREADS, "-t"}, {CMD_OPT_CTX_SIZE, "-c"}, {CMD_OPT_KV_TYPE, "--kv-type"},
        {CMD_OPT_TEMPLATE, "--template"}, {CMD_OPT_SPECIAL, "--special"},
        {CMD_OPT_NO_CACHE, "--no-cache"}, {CMD_OPT_CACHE_MAX, "--cache-max"},
    };
    char list[256] = "";
    size_t k = 0;
    for (size_t i = 0; i < sizeof local_only / sizeof *local_only; i++)
        if (o->given & (1ull << local_only[i].id))
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", local_only[i].opt);
    if (k)
        cmd_term_printf(stderr, "kvchat: note: %s: not for remote model '%s' (the server decides); ignored\n",
                list, name);
}

int cmd_remote_open(const struct cmd_opts *o, const char *path, struct cmd_remote **out)
{
    *out = NULL;
    struct cmd_remote *rm = calloc(1, sizeof *rm);
    if (!rm)
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    char err[4096];
    if (mdl_remote_open(path, &rm->r, err, sizeof err)) {
        free(rm);
        return cmd_fail(CMD_EXIT_MODEL, "cannot read remote model '%s': %s", path, err);
    }
    mdl_remote_get_info(rm->r, &rm->in);
    rm->o = o;
    rm->sanitize = isatty(1);
    note_unsent(o, rm->in.name);
    if (o->verbose)
        cmd_term_printf(stderr, "kvchat: remote model '%s': %s at %s\n", rm->in.name, rm->in.model, rm->in.url);
    *out = rm;
    return 0;
}

void cmd_remote_close(struct cmd_remote *rm)
{
    if (!rm)
        return;
    mdl_remote_close(rm->r);
    free(rm);
}

struct sess_remote cmd_remote_engine(struct cmd_remote *rm)
{
    return (struct sess_remote){remote_answer, rm};
}

const char *cmd_remote_name(const struct cmd_remote *rm) { return rm->in.name; }

int cmd_remote_exit(const struct cmd_remote *rm) { return cmd_remote_status_exit(rm->rc); }

void cmd_remote_json(const struct cmd_remote *rm, FILE *f)
{
    fputs(", \"remote\": true, \"url\": ", f);
    cmd_json_str(f, rm->in.url, strlen(rm->in.url));
    fputs(", \"server_model\": ", f);
    if (rm->server_model[0])
        cmd_json_str(f, rm->server_model, strlen(rm->server_model));
    else
        fputs("null", f);
    fprintf(f, ", \"attempts\": %d", rm->attempts);
}

void cmd_remote_describe(const struct cmd_remote *rm, const struct sess_turn_stats *ts, FILE *f)
{
    fprintf(f, "kvchat: remote '%s' (%s): ", rm->in.name, rm->server_model[0] ? rm->server_model : rm->in.model);
    if (ts->prompt_tokens >= 0)
        fprintf(f, "%" PRId64 " prompt tokens", ts->prompt_tokens);
    else
        fprintf(f, "prompt tokens not reported");
    if (ts->cached_tokens >= 0)
        fprintf(f, " (%" PRId64 " from the server's cache)", ts->cached_tokens);
    if (ts->generated_tokens >= 0)
        fprintf(f, ", %" PRId64 " generated", ts->generated_tokens);
    fprintf(f, "; first text after %.1f ms, %.1f ms in all", ts->ttft_ms, rm->total_ms);
    if (ts->decode_tok_s >= 0)
        fprintf(f, ", %.1f tok/s", ts->decode_tok_s);
    fprintf(f, "; stop: %s\n", ts->stop_reason);
}

void cmd_remote_info(const struct cmd_remote *rm, char *buf, size_t n)
{
    snprintf(buf, n, "remote model '%s': %s at %s", rm->in.name, rm->in.model, rm->in.url);
}
