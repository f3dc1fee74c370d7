/*
 * conv.c - opening a conversation, the one way chat and run both take
 * (cli/conv.h): the store, the session, the model, the attach, the fit of
 * a message, and the exit code of each failure.
 *
 * Invariants: the store is opened once for a command (read first, to look
 * a session up; made only when the conversation needs it and there was
 * none); nothing is created before the session's name has been checked;
 * an existing session opens with its own model unless -m was given.
 */
#include "cli/conv.h"
#include "cli/cmd.h"
#include "cli/home.h"
#include "cli/progress.h"
#include "cli/term.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* a new session's name: the store's one rule; chat refuses a store
 * model's name too (ollama's `chat MODEL`) */
static int new_session_ok(const struct cmd_conv *c, const struct cmd_opts *o, const struct cmd_conv_params *p)
{
    char err[1024];
    if (!p->name_prefix && !c->session[0])
        return cmd_fail(CMD_EXIT_USAGE, "expected a session name");
    if (sess_name_check(c->session, err, sizeof err))
        return p->name_prefix ? cmd_usage_error(p->e, "%s%s", p->name_prefix, err) : cmd_fail(CMD_EXIT_USAGE, "%s", err);
    if (p->model_name_refused && !o->model && cmd_is_store_model(c->session))
        return cmd_usage_error(p->e,
                               "'%s' is a model in the store, not a session: did you mean -m %s? (a session "
                               "named so needs -m too: kvchat chat -m MODEL %s)",
                               c->session, c->session, c->session);
    return 0;
}

/* an existing session opens with its own model (a model file or a .remote
 * entry: which of the two decides local or remote), unless -m was given */
static int own_model(struct cmd_conv *c, struct cmd_opts *o, const struct sess_info *info)
{
    struct stat sb;
    const char *name = c->session;
    if (o->given & (1ull << CMD_OPT_MODEL))
        return 0;
    if (!info->model_path || !info->model_path[0])
        return cmd_fail(CMD_EXIT_MODEL, "session '%s' does not say which model it was saved with: give one "
                                        "with -m MODEL --switch-model", name);
    if (stat(info->model_path, &sb) != 0)
        return cmd_fail(CMD_EXIT_MODEL, "session '%s' was saved with model '%s', which is gone (%s): put it "
                                        "back, or go on with another with -m MODEL --switch-model",
                        name, info->model_path, strerror(errno));
    free(c->own_model);
    if (!(c->own_model = strdup(info->model_path)))
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    o->model = c->own_model;
    return 0;
}

int cmd_conv_begin(struct cmd_conv *c, struct cmd_opts *o, const struct cmd_conv_params *p)
{
    memset(c, 0, sizeof *c);
    c->session = p->session;
    if (!p->session && !p->cont)
        return 0; /* the store is opened with the conversation, if it needs one */
    char err[5200];
    if (cmd_store_open_existing(&c->st, err, sizeof err) < 0)
        return cmd_fail(CMD_EXIT_SESSION, "%s", err);
    if (c->st && sess_store_notice(c->st))
        fprintf(stderr, "kvchat: note: %s\n", sess_store_notice(c->st));
    if (p->cont) { /* the session changed last */
        int rc = sess_latest(c->st, c->latest, sizeof c->latest);
        if (rc == SESS_ERR_NOT_FOUND)
            return cmd_fail(CMD_EXIT_SESSION, "no session to continue: 'kvchat chat NAME' starts one");
        if (rc)
            return cmd_fail(CMD_EXIT_SESSION, "%s", sess_errmsg(c->st));
        c->session = c->latest;
    }
    struct sess_info info;
    int rc = sess_peek(c->st, c->session, &info);
    if (rc == SESS_ERR_NOT_FOUND) {
        c->pending = p->new_after_answer;
        return new_session_ok(c, o, p);
    }
    if (rc)
        return cmd_fail(CMD_EXIT_SESSION, "%s", sess_errmsg(c->st));
    rc = own_model(c, o, &info);
    sess_info_free(&info);
    return rc;
}

/* the option that asked for constrained output */
static const char *format_option(const struct cmd_format *f)
{
    return !strcmp(f->kind, "json") ? "format" : !strcmp(f->kind, "schema") ? "json-schema" : "grammar";
}

int cmd_conv_open(struct cmd_conv *c, struct cmd_opts *o, const struct cmd_conv_params *p)
{
    int rc = cmd_llm_open(o, p->offer_pull, &c->l);
    if (rc)
        return rc;
    if (c->l.remote && o->format.grammar) /* never silently unconstrained */
        return cmd_fail(CMD_EXIT_USAGE, "--%s is for local models: a remote server samples its own answers",
                        format_option(&o->format));
    if (p->model_opened)
        p->model_opened(p->ud, c);
    /* the store: sessions, and the KV blocks of every prompt; without it
     * a conversation that is no session still answers */
    bool wanted = c->session || p->store_always || (!o->no_cache && !c->l.remote);
    if (!c->st && wanted) {
        if (o->private_mode)
            cmd_store_open_private(&c->st); /* read-only, and only if there is one */
        else if (cmd_store_open(true, &c->st)) {
            if (c->session)
                return CMD_EXIT_SESSION;
            cmd_term_printf(stderr, "kvchat: the KV cache on disk is off for this %s\n", p->what);
        }
    }
    base_trace("store: opened");
    char err[1024];
    struct sess_conv_params cp = cmd_opts_conv_params(o, &c->l);
    cp.turn_start_ms = p->turn_start_ms;
    rc = sess_conv_init(c->st, cp, &c->conv, err, sizeof err);
    if (rc)
        return rc == SESS_ERR_STORE ? cmd_fail(CMD_EXIT_SESSION, "%s", err)
                                    : cmd_fail(CMD_EXIT_MODEL, "cannot start the conversation: %s", err);
    base_trace("conversation: started (model fingerprint)");
    if (!c->session || c->pending)
        return 0;
    cmd_progress_start(p->prog, c->conv);
    rc = sess_conv_attach(c->conv, c->session, true, &c->rs);
    cmd_progress_end(p->prog);
    base_trace("session: attached (messages read, blocks and snapshot restored)");
    if (rc) {
        cmd_fail(CMD_EXIT_SESSION, "%s", sess_conv_errmsg(c->conv));
        if (rc == SESS_ERR_MODEL && p->model_hint)
            p->model_hint(c->session);
        return CMD_EXIT_SESSION;
    }
    return 0;
}

int cmd_conv_make_session(struct sess_store *st, struct sess_conv *conv, const char *name, char *err,
                          size_t err_size)
{
    int64_t sid;
    struct sess_restore_stats rs;
    if (st && sess_find(st, name, &sid) == SESS_OK) {
        snprintf(err, err_size, "session '%s' was made by another kvchat process meanwhile: this exchange is not "
                                "saved in it", name);
        return 1;
    }
    if (sess_conv_attach(conv, name, true, &rs)) {
        snprintf(err, err_size, "%s", sess_conv_errmsg(conv));
        return 1;
    }
    return 0;
}

int cmd_conv_make_pending(struct cmd_conv *c)
{
    char err[1400];
    if (!c->pending)
        return 0;
    if (cmd_conv_make_session(c->st, c->conv, c->session, err, sizeof err)) {
        cmd_term_printf(stderr, "kvchat: %s\n", err);
        return 1;
    }
    c->pending = false;
    return 0;
}

void cmd_conv_close(struct cmd_conv *c)
{
    sess_conv_free(c->conv);
    sess_store_close(c->st);
    cmd_llm_close(&c->l);
    free(c->own_model);
    c->conv = NULL;
    c->st = NULL;
    c->own_model = NULL;
}

int cmd_conv_text_fits(struct sess_conv *conv, bool special, const char *what, const char *text, size_t len,
                       int64_t room, int64_t *n_tokens, char *err, size_t err_size)
{
    int64_t n_ctx = llm_ctx_n_ctx(sess_conv_ctx(conv));
    bool plainly;
    if (room < 0)
        room = 0;
    int rc = sess_conv_fits(conv, text, len, special, room, n_tokens, &plainly);
    if (rc == SESS_OK)
        return 0;
    if (rc != SESS_ERR_CTX_FULL)
        snprintf(err, err_size, "cannot count the tokens of '%s': out of memory", what);
    else if (plainly)
        snprintf(err, err_size,
                 "'%s' is too large for the context: at least %" PRId64 " tokens (%zu bytes), and the "
                 "context has room for %" PRId64 " of its %" PRId64 " (-c N sets a larger context)",
                 what, *n_tokens, len, room, n_ctx);
    else
        snprintf(err, err_size,
                 "'%s' is too large for the context: %" PRId64 " tokens, and the context has room for "
                 "%" PRId64 " of its %" PRId64 " (-c N sets a larger context)",
                 what, *n_tokens, room, n_ctx);
    return -1;
}
