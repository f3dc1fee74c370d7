/*
 * cmd-chat.c - `kvchat [chat] [SESSION]`: the interactive chat (kvchat(1),
 * chat). The conversation is opened as run opens it (cli/conv.c); lines
 * are read by cli/chat-input.c, slash commands are cli/chat-slash.c's,
 * and what the chat says to the user is written by cli/chat-ui.c.
 *
 * One conversation (sessions/ sess_conv, which owns the engine context)
 * lives for the whole process, so each turn prefills only its own new
 * tokens, and whatever the KV block store already has is read instead of
 * computed; /undo and /retry cut the KV cache back instead of recomputing. Lines come from cli/repl.c
 * (readline on a terminal).
 *
 * Invariants:
 *  - stdout carries the answers and nothing else when it is not a terminal;
 *    prompts, notes, /help and statistics then go to stderr (ui);
 *  - colours only when ui is a terminal, TERM is not "dumb" and NO_COLOR is
 *    unset;
 *  - SIGINT while answering stops the answer (the partial answer is kept,
 *    and the KV cache matches it); SIGINT at the prompt drops the line;
 *    SIGTERM/SIGHUP stop the answer and end the chat cleanly (exit 130);
 *  - a named session is saved by sess_conv after every exchange, so leaving
 *    (Ctrl-D, /exit, a signal) never loses a finished turn; a new one is
 *    made with its first answer, so a chat left before it leaves no empty
 *    session; an unnamed chat lives only in memory until /save NAME.
 *
 * Context-window policy: nothing is dropped behind the user's back. When a
 * message does not fit, the chat says so and (on a terminal) asks whether
 * to drop the oldest exchanges; yes drops them one at a time, oldest first,
 * until the message fits (the system prompt is always kept; the remaining
 * exchanges are computed again). /clear drops them all.
 */
#include "cli/chat.h"
#include "cli/conv.h"
#include "cli/home.h"
#include "cli/remote.h"
#include "cli/term.h"
#include "models/mdl.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static const char chat_usage[] =
    "usage: kvchat [chat] [SESSION | -s SESSION | -c] [-m MODEL] [--system TEXT|--system-file F] [options]\n"
    "\n"
    "  The interactive chat. With SESSION, the chat is saved under that name\n"
    "  after every exchange and resumes from its KV blocks next time (a new one\n"
    "  is made with its first answer: a chat left before it leaves no session);\n"
    "  without, it is no session (at exit it is gone unless you\n"
    "  /save it), but every prompt's KV blocks and token ids stay in the store\n"
    "  as a cache until evicted or collected ('kvchat sessions forget' removes\n"
    "  them); --private reads the store and writes nothing at all.\n"
    "  -s, --session SESSION names the session as run -s does (the same as\n"
    "  SESSION alone); -c, --continue opens the session changed last (its last\n"
    "  turn).\n"
    "  In a saved session, /undo, /retry, /system and dropping exchanges to\n"
    "  make room ask first; /clear starts afresh and leaves the session as\n"
    "  saved. With stdin not a terminal they are refused unless --yes (answer\n"
    "  yes to the chat's questions) is given.\n"
    "  MODEL is a file path or a store name (a remote model too: its server\n"
    "  answers, the session is kept here); the default comes from\n"
    "  KVCHAT_MODEL or 'model = NAME' in the config file.\n"
    "\n" CMD_OPTS_HELP
    "\n"
    "Keys: Enter sends; a line ending in \\ continues on the next line; a line\n"
    "starting with \"\"\" starts a block that a line ending with \"\"\" ends\n"
    "(\"\"\"hello ... world\"\"\"); Ctrl-C stops an answer or clears the line;\n"
    "Ctrl-D (on an empty line) leaves; Tab completes /commands, session names\n"
    "and file names; Up/Down recall earlier inputs (kept in\n"
    "$XDG_STATE_HOME/kvchat/history).\n"
    "\n"
    "Commands inside the chat (/help lists them): /help /sessions /load /save\n"
    "/new /fork /system /read /undo /retry /set /show /stats /clear /exit; a\n"
    "unique prefix runs /help /sessions /set /show /stats, the others only run\n"
    "by their full name.\n"
    "\n"
    "Answers on a terminal are wrapped at its width (not inside ``` blocks);\n"
    "--no-wrap, 'wrap = off' in the config file or /set wrap off turn it off.\n"
    "\n"
    "Exit status: 0 ok, 1 usage error, 2 model error (with stdin not a terminal:\n"
    "also when a message was refused), 3 session error (e.g. the session is open\n"
    "in another kvchat; stdin not a terminal: also when an exchange could not be\n"
    "saved, e.g. on a full disk, or a change to a saved session was refused), 4 a\n"
    "remote model's network error (stdin not a terminal), 130 ended by a signal.\n";

/* ==== signals ==== */

volatile sig_atomic_t chat_interrupt, chat_quit;

static void on_sigint(int sig)
{
    (void)sig;
    chat_interrupt = 1;
}

static void on_sigterm(int sig)
{
    (void)sig;
    chat_quit = 1;
    chat_interrupt = 1; /* stop an answer in flight */
}

static void signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read returns EINTR */
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* the store is there for sessions; says why not */
int chat_store_need(struct chat *ch)
{
    if (ch->st)
        return 0;
    chat_err(ch, "no session store: it could not be opened (see above)");
    return -1;
}

/* a private chat saves nothing: what would save (a session) says so */
int chat_private_refuses(struct chat *ch, const char *what)
{
    if (!ch->o.private_mode)
        return 0;
    chat_err(ch, "%s would save a session, and this chat is private (nothing is written): /set private off "
                 "first", what);
    return -1;
}

/* ==== turns ==== */

int chat_on_text(void *ud, const char *text, size_t n)
{
    struct chat *ch = ud;
    if (!n)
        return 0;
    cmd_progress_end(&ch->prog); /* the answer starts: the line goes */
    ch->ans.show_reasoning = !ch->o.think_hide;
    ch->ans.dim = ch->color;
    int r = cmd_answer_text(&ch->ans, text, n);
    if (ch->ans.broken)
        ch->out_broken = true;
    if (ch->ans.last_char)
        ch->last_char = ch->ans.last_char;
    return r;
}

/* an answer starts streaming: wrapped (on a terminal, unless --no-wrap),
 * keys typed meanwhile not echoed, Ctrl-C armed */
void chat_answer_begin(struct chat *ch)
{
    ch->last_char = 0;
    chat_interrupt = chat_quit; /* a SIGTERM that came before the turn still stops it */
    ch->wrapping = ch->o.wrap && isatty(1);
    if (ch->wrapping)
        wrap_begin(&ch->wrap);
    ch->ans.wrap = ch->wrapping ? &ch->wrap : NULL; /* cmd_answer_end ends the wrap (chat_turn_done) */
    repl_quiet(ch->repl, true);
    cmd_progress_start(&ch->prog, ch->conv);
}

void chat_answer_end(struct chat *ch)
{
    cmd_progress_end(&ch->prog);
    repl_quiet(ch->repl, false);
}

/* a new session named at the start (ch->pending) is made with the first
 * answer, from what the chat has so far (system prompt, /set parameters,
 * the exchange); when it cannot be, the chat goes on unnamed and says so */
static void chat_make_pending(struct chat *ch)
{
    char err[1400];
    if (!ch->pending || ch->o.no_cache) /* --no-cache writes nothing: no session either */
        return;
    if (cmd_conv_make_session(ch->st, ch->conv, ch->name, err, sizeof err)) {
        chat_err(ch, "%s", err);
        chat_note(ch, C_WARN, "this chat goes on unnamed: /save NAME keeps it");
        free(ch->name);
        ch->name = NULL;
    }
    ch->pending = false;
}

void chat_turn_done(struct chat *ch, int rc, const struct sess_turn_stats *ts)
{
    cmd_answer_end(&ch->ans);
    ch->ans.last_char = 0;
    if (ch->ans.broken)
        ch->out_broken = true;
    if (ch->wrapping ? wrap_col(&ch->wrap) != 0 : ch->last_char != '\n' && ch->last_char != 0) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (rc != SESS_OK)
        return;
    chat_make_pending(ch);
    ch->last = *ts;
    ch->have_last = true;
    ch->turns++;
    ch->total_prefilled += ts->prefilled_tokens > 0 ? ts->prefilled_tokens : 0;
    ch->total_cached += ts->cached_tokens > 0 ? ts->cached_tokens : 0;
    ch->total_generated += ts->generated_tokens > 0 ? ts->generated_tokens : 0;
    ch->total_drafted += ts->drafted_tokens;
    ch->total_accepted += ts->accepted_tokens;
    ch->total_passes += ts->draft_passes;
    const char *why = ts->stop_reason ? ts->stop_reason : "";
    if (!strcmp(why, "cut")) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        chat_note(ch, C_WARN, "[the partial answer is kept%s, marked as cut off: /retry asks again, /undo drops it]",
             ch->name ? " in the session" : "");
        ch->refused = true;
        ch->refused_code = CMD_EXIT_NETWORK;
    } else if (!strcmp(why, "interrupted") && !chat_quit)
        chat_note(ch, C_DIM, "[stopped; the partial answer is kept: /retry answers again, /undo drops it]");
    else if (!strcmp(why, "context_full"))
        chat_note(ch, C_WARN, "[the context window is full: the answer stops here; /clear starts "
                         "afresh, /undo drops the last exchange]");
    else if (!strcmp(why, "length") && ch->o.verbose)
        chat_note(ch, C_DIM, "[stopped at %" PRId32 " token%s (-n)]", ch->o.n_predict, cmd_s(ch->o.n_predict));
    if (ts->kv_problem[0])
        chat_err(ch, "%s", ts->kv_problem);
    if (ch->o.verbose)
        chat_stats_line(ch, ts);
    if (ch->o.verbose)
        cmd_format_stats(ts, stderr);
    const char *fmt = sess_conv_format(ch->conv, NULL);
    if (ts->grammar && !ts->grammar_complete) /* never silently invalid */
        chat_note(ch, C_WARN, "[the answer is incomplete under the %s (stop: %s)]",
             !fmt ? "format" : !strcmp(fmt, "grammar") ? "grammar" : !strcmp(fmt, "schema") ? "schema" : "JSON format",
             ts->stop_reason);
}

/* the message does not fit: say so, and offer to drop the oldest exchanges */
static int make_room(struct chat *ch, const char *text)
{
    int64_t used = sess_conv_n_tokens(ch->conv), n_ctx = llm_ctx_n_ctx(sess_conv_ctx(ch->conv));
    int64_t ex = sess_conv_n_exchanges(ch->conv);
    chat_err(ch, "the message does not fit in the context window (%" PRId64 " of %" PRId64
                 " tokens used, %" PRId64 " exchange%s)", used, n_ctx, ex, cmd_s(ex));
    if (ex == 0) {
        chat_note(ch, C_WARN, "it is longer than the context itself; -c N sets a larger context");
        return SESS_ERR_CTX_FULL;
    }
    char q[512];
    snprintf(q, sizeof q, "Drop the oldest exchanges%s%s%s until it fits? (/clear starts afresh) [y/N] ",
             ch->name ? " from session '" : "", ch->name ? ch->name : "", ch->name ? "'" : "");
    if (!chat_confirm(ch, q, NULL)) {
        chat_note(ch, C_DIM, "nothing dropped: /clear starts afresh, /undo drops the last exchange");
        return SESS_ERR_CTX_FULL;
    }
    int64_t dropped = 0;
    int rc = SESS_ERR_CTX_FULL;
    struct sess_turn_stats ts;
    while (sess_conv_n_exchanges(ch->conv) > 0) {
        if (sess_conv_drop_oldest(ch->conv, 1) != SESS_OK) {
            chat_err(ch, "cannot drop the oldest exchange: %s", sess_conv_errmsg(ch->conv));
            return SESS_ERR;
        }
        dropped++;
        /* try again: nothing changes when it still does not fit */
        memset(&ts, 0, sizeof ts);
        chat_answer_begin(ch);
        rc = sess_conv_say(ch->conv, text, chat_on_text, ch, &chat_interrupt, &ts);
        chat_answer_end(ch);
        if (rc != SESS_ERR_CTX_FULL)
            break;
    }
    if (rc == SESS_ERR_CTX_FULL) {
        chat_note(ch, C_WARN, "dropped all %" PRId64 " exchange%s and it still does not fit", dropped,
             cmd_s(dropped));
        return rc;
    }
    chat_turn_done(ch, rc, &ts);
    if (rc == SESS_OK)
        chat_note(ch, C_DIM, "[dropped the %" PRId64 " oldest exchange%s to make room]", dropped,
             cmd_s(dropped));
    else
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
    return rc;
}

/* a turn that gave no answer: said, and (piped) the exit status */
void chat_turn_failed(struct chat *ch, int rc)
{
    if (rc == SESS_OK)
        return;
    if (rc != SESS_ERR_INTERRUPTED) {
        ch->refused = true;
        if (rc == SESS_ERR_REMOTE) /* no answer came: the conversation is as it was */
            ch->refused_code = cmd_remote_exit(ch->l.remote);
        else if (rc == SESS_ERR_STORE) /* the exchange could not be saved (a full disk): as run's */
            ch->refused_code = CMD_EXIT_SESSION;
    }
    chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
}

void chat_say(struct chat *ch, const char *text)
{
    struct sess_turn_stats ts;
    memset(&ts, 0, sizeof ts);
    if (chat_quit) { /* SIGTERM or SIGHUP came first: the message is not sent, the chat ends */
        chat_err(ch, "interrupted: the message was not sent");
        return;
    }
    chat_answer_begin(ch);
    int rc = sess_conv_say(ch->conv, text, chat_on_text, ch, &chat_interrupt, &ts);
    chat_answer_end(ch);
    if (rc == SESS_ERR_CTX_FULL) {
        if (make_room(ch, text) != SESS_OK)
            ch->refused = true;
        return;
    }
    if (rc == SESS_ERR_INTERRUPTED) { /* Ctrl-C while the message was being read */
        chat_err(ch, "interrupted: the message was not sent");
        return;
    }
    chat_turn_done(ch, rc, &ts);
    chat_turn_failed(ch, rc);
}

/* ==== conversations ==== */

/* a new unnamed chat: the conversation (made once, with its engine
 * context, by cmd_conv_open) started afresh */
int chat_conv_new(struct chat *ch, const char *system)
{
    free(ch->name);
    ch->name = NULL;
    ch->pending = false;
    ch->have_last = false;
    if (sess_conv_reset(ch->conv, system) != SESS_OK) {
        chat_err(ch, "cannot start a conversation: %s", sess_conv_errmsg(ch->conv));
        return -1;
    }
    return 0;
}

/* the conversation's system prompt, or NULL */
const char *chat_conv_system(const struct chat *ch)
{
    const char *text = NULL;
    if (sess_conv_n_messages(ch->conv) > 0 && sess_conv_message(ch->conv, 0, &text) == SESS_ROLE_SYSTEM)
        return text;
    return NULL;
}

static void restore_report(struct chat *ch, const char *name, const struct sess_restore_stats *rs)
{
    if (rs->first_problem[0])
        chat_err(ch, "session '%s': %s", name, rs->first_problem);
    if (!ch->l.remote && (ch->o.verbose || rs->missing_tokens > 0 || rs->damaged))
        chat_info(ch,
                "session '%s': %" PRId64 " token%s restored from %" PRId64 " KV block%s in %.1f ms, %" PRId64
                " to compute",
                name, rs->restored_tokens, cmd_s(rs->restored_tokens), rs->restored_blocks,
                cmd_s(rs->restored_blocks), rs->ms, rs->missing_tokens);
}

/* the conversation is session name now: said, and its sampling (restored)
 * is the chat's from now on */
static void attached(struct chat *ch, const char *name, const struct sess_restore_stats *rs)
{
    free(ch->name);
    ch->name = strdup(name);
    ch->pending = false;
    ch->have_last = false;
    restore_report(ch, name, rs);
    ch->o.sampling = sess_conv_get_params(ch->conv).sampling;
    ch->o.n_predict = sess_conv_get_params(ch->conv).n_predict;
    ch->o.think_off = sess_conv_get_params(ch->conv).think_off;
}

/*
 * Open session name (create: make it if absent) as the conversation; a
 * session the chat was in is left (it stays saved). Returns 0, or an exit
 * code after printing the error, with the conversation as it was.
 */
int chat_conv_attach(struct chat *ch, const char *name, bool create)
{
    if (chat_store_need(ch))
        return CMD_EXIT_SESSION;
    struct sess_restore_stats rs;
    memset(&rs, 0, sizeof rs);
    cmd_progress_start(&ch->prog, ch->conv);
    int rc = sess_conv_attach(ch->conv, name, create, &rs);
    cmd_progress_end(&ch->prog);
    if (rc == SESS_ERR_MODEL && ch->model_switch)
        return -SESS_ERR_MODEL; /* the caller opens the session's own model */
    if (rc != SESS_OK) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        if (rc == SESS_ERR_MODEL)
            chat_err(ch, "'kvchat %s' opens it with its own model (or, to go on with this one, computing "
                         "its history again: kvchat %s -m MODEL --switch-model)", name, name);
        return CMD_EXIT_SESSION;
    }
    attached(ch, name, &rs);
    return 0;
}

/* Ask before changing what a named session keeps (or an unsaved chat):
 * on a terminal the answer, piped input yes only with --yes (else what
 * says why nothing changed) */
bool chat_confirm(struct chat *ch, const char *question, const char *what)
{
    if (ch->interactive)
        return repl_ask(ch->repl, question);
    if (ch->yes)
        return true;
    if (what) { /* a script goes on, but its exit status says so */
        chat_err(ch, "%s: not asked with stdin not a terminal, so nothing changed (--yes answers yes)", what);
        ch->refused = true;
        ch->refused_code = CMD_EXIT_SESSION;
    }
    return false;
}

/* true if the user agrees to lose an unsaved chat (or there is nothing to lose) */
bool chat_may_discard(struct chat *ch, const char *what)
{
    if (ch->name || ch->o.private_mode || sess_conv_n_exchanges(ch->conv) == 0)
        return true;
    if (!ch->interactive && !ch->yes) {
        chat_err(ch, "%s would discard this unsaved chat; /save NAME it first", what);
        return false;
    }
    if (!ch->interactive)
        return true;
    char q[256];
    snprintf(q, sizeof q, "This chat is not saved (/save NAME keeps it). Discard it? [y/N] ");
    return repl_ask(ch->repl, q);
}

/* 0 if session name exists and no other process has it open; prints why not */
int chat_session_available(struct chat *ch, const char *name)
{
    if (chat_store_need(ch))
        return -1;
    int rc = sess_available(ch->st, name);
    if (rc == SESS_ERR_NOT_FOUND)
        chat_err(ch, "no session '%s' (/sessions lists them)", name);
    else if (rc)
        chat_err(ch, "%s", sess_errmsg(ch->st));
    return rc ? -1 : 0;
}

/* a name for a new session (the store's one rule) */
bool chat_name_ok(struct chat *ch, const char *name)
{
    char err[512];
    if (!*name) {
        chat_err(ch, "expected a session name");
        return false;
    }
    if (sess_name_check(name, err, sizeof err)) {
        chat_err(ch, "%s", err);
        return false;
    }
    return true;
}

static void make_prompt(struct chat *ch, char *buf, size_t n)
{
    if (!ch->interactive) {
        buf[0] = 0;
        return;
    }
    /* \001 \002 tell readline the colour codes take no room */
    const char *on = ch->color ? "\001\033[1;32m\002" : "";
    const char *off = ch->color ? "\001\033[0m\002" : "";
    char name[256] = "";
    if (ch->name) /* an older release's name may hold what a terminal obeys */
        for (const char *s = ch->name; *s && strlen(name) + 4 < sizeof name;) {
            size_t bad = cmd_term_unsafe(s, strlen(s)), k = strlen(name);
            if (bad) {
                memcpy(name + k, "\xef\xbf\xbd", 4);
                s += bad;
            } else {
                name[k] = *s++;
                name[k + 1] = 0;
            }
        }
    snprintf(buf, n, "%s%s> %s", on, name, off);
}

static int chat_loop(struct chat *ch)
{
    char prompt[512];
    for (;;) {
        if (chat_quit || ch->out_broken)
            return chat_quit ? CMD_EXIT_INTERRUPTED : CMD_EXIT_OK;
        make_prompt(ch, prompt, sizeof prompt);
        char *text;
        enum repl_status st = chat_read_input(ch, prompt, &text);
        if (st == REPL_TOO_LONG) {
            chat_err(ch, "cannot read the input: a message or line is larger than %s; stopped reading",
                     CMD_INPUT_MAX_TEXT);
            return CMD_EXIT_MODEL;
        }
        if (st == REPL_EOF && !chat_may_leave(ch))
            continue;
        /* piped input: a refused message makes the exit status non-zero */
        if (st == REPL_EOF)
            return ch->refused && !ch->interactive ? (ch->refused_code ? ch->refused_code : CMD_EXIT_MODEL)
                                                   : CMD_EXIT_OK;
        if (st == REPL_QUIT)
            return CMD_EXIT_INTERRUPTED;
        if (st == REPL_INTERRUPT)
            continue;
        const char *t = text;
        while (*t == ' ' || *t == '\t' || *t == '\n')
            t++;
        if (!*t) {
            free(text);
            continue;
        }
        repl_history_add(ch->repl, text);
        if (t[0] == '/' && t[1] != '/') {
            char *cmd = strdup(t);
            int leave = cmd ? chat_slash_run(ch, cmd) : 0;
            free(cmd);
            free(text);
            if (leave)
                return CMD_EXIT_OK;
            continue;
        }
        chat_say(ch, t[0] == '/' ? t + 1 : text);
        free(text);
    }
}

/* ==== the command ==== */

/* argv into ch->o, session and cont: 0, an exit code (printed), or -1
 * (--help printed) */
static int parse_args(struct chat *ch, int argc, char **argv, const char **session, bool *cont)
{
    bool dashdash = false, saw_chat = false;
    /* from the table argv[0] is "chat"; when options came first, the program */
    bool routed = !strcmp(argv[0], "chat");
    for (int i = 1; i < argc;) {
        int r = dashdash ? 0 : cmd_opts_take(&cmd_chat_entry, &ch->o, argc, argv, &i);
        if (r < 0)
            return CMD_EXIT_USAGE;
        if (r > 0)
            continue;
        const char *a = argv[i++], *name = NULL;
        if (!dashdash && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            cmd_help(&cmd_chat_entry);
            return -1;
        } else if (!dashdash && !strcmp(a, "--")) {
            dashdash = true;
        } else if (!dashdash && (!strcmp(a, "-c") || !strcmp(a, "--continue"))) {
            *cont = true;
        } else if (!dashdash && !strcmp(a, "--yes")) {
            ch->yes = true;
        } else if (!dashdash && (!strcmp(a, "-s") || !strcmp(a, "--session"))) {
            if (i >= argc) /* -s NAME, as run takes it */
                return cmd_usage_error(&cmd_chat_entry, "%s needs a session name", a);
            name = argv[i++];
        } else if (!dashdash && !strncmp(a, "--session=", 10)) {
            name = a + 10;
        } else if (!dashdash && a[0] == '-' && a[1]) {
            return cmd_usage_error(&cmd_chat_entry, "unknown option '%s'", a);
        } else if (!*session && !saw_chat && !routed && !strcmp(a, "chat")) {
            saw_chat = true; /* `kvchat -m M chat NAME`: options came before the command */
        } else {
            name = a;
        }
        if (name && *session)
            return cmd_usage_error(&cmd_chat_entry, "expected one SESSION name, got '%s' and '%s'", *session, name);
        if (name)
            *session = name;
    }
    if (*cont && *session)
        return cmd_usage_error(&cmd_chat_entry, "-c/--continue and a SESSION name: give one of them");
    if (ch->o.private_mode && (*session || *cont))
        return cmd_usage_error(&cmd_chat_entry, "a private chat (--private, or 'private = true' in the config file) "
                                                "saves nothing, so it opens no session: --no-private opens one");
    return 0;
}

static void own_model_hint(const char *name)
{
    fprintf(stderr, "kvchat: 'kvchat %s' opens it with its own model (or, to go on with this one, computing "
                    "its history again: kvchat %s -m MODEL --switch-model)\n", name, name);
}

/* the model is open: signals are the chat's from now on (a long restore
 * is not ended by Ctrl-C) */
static void model_opened(void *ud, const struct cmd_conv *c)
{
    struct chat *ch = ud;
    signals_install();
    if (c->session && ch->o.no_cache)
        cmd_term_printf(stderr, "kvchat: --no-cache: session '%s' is read, computed again, and not written\n",
                        c->session);
}

/* the first lines on a terminal: what this chat is */
static void banner(struct chat *ch)
{
    const char *arch = ch->l.remote ? "remote" : llm_model_get_meta(ch->l.model)->arch;
    const char *base = ch->l.remote ? NULL : strrchr(ch->l.path, '/');
    /* the session first; wrapped at the terminal's width, nothing cut */
    char head[5400];
    snprintf(head, sizeof head, "kvchat %s · %s%s · %s (%s) · /help for commands, Ctrl-D to leave",
             KVCHAT_VERSION, ch->name ? "session " : ch->o.private_mode ? "private chat" : "unnamed chat",
             ch->name ? ch->name : "",
             ch->l.remote ? cmd_remote_name(ch->l.remote) : base ? base + 1 : ch->l.path, arch);
    chat_print_fit(ch, C_DIM, head);
    if (!ch->name)
        chat_note(ch, C_DIM, ch->o.private_mode ? "private: the KV blocks on disk are read, nothing is written"
                                                : "not saved as a session, but its KV blocks and token ids stay on disk "
                                                  "as a cache (--private: none)");
    if (ch->name && sess_conv_n_exchanges(ch->conv) > 0) {
        chat_note(ch, C_DIM, "session '%s': %" PRId64 " exchange%s so far; the last:", ch->name,
                  sess_conv_n_exchanges(ch->conv), cmd_s(sess_conv_n_exchanges(ch->conv)));
        chat_show_last_exchange(ch);
    }
}

/* the conversation is open: the line editor, the banner, the loop */
static int chat_run(struct chat *ch)
{
    struct cmd_paths paths;
    cmd_paths_get(&paths);
    struct repl_params rp = {
        .history_path = paths.history,
        .complete = chat_complete,
        .ud = ch,
        .interrupt = &chat_interrupt,
        .quit = &chat_quit,
        .prompt_out = ch->ui,
        .max_line = CMD_INPUT_MAX,
        .history_private = ch->o.private_mode,
    };
    const char *warning = NULL;
    ch->repl = repl_open(&rp, &warning);
    cmd_paths_free(&paths);
    if (!ch->repl)
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    if (warning)
        chat_err(ch, "%s", warning);
    if (ch->interactive)
        banner(ch);
    return chat_loop(ch);
}

static int chat_exec(int argc, char **argv)
{
    struct chat ch;
    memset(&ch, 0, sizeof ch);
    const char *session = NULL;
    bool cont = false;
    cmd_opts_init(&ch.o);
    int rc = cmd_opts_config(&ch.o);
    if (!rc)
        rc = parse_args(&ch, argc, argv, &session, &cont);
    if (!rc)
        rc = cmd_opts_finish(&cmd_chat_entry, &ch.o);
    ch.ui = isatty(1) ? stdout : stderr;
    ch.color = cmd_color_ok(ch.ui);
    ch.interactive = isatty(0);
    wrap_init(&ch.wrap, stdout);
    if (!rc && cmd_answer_init(&ch.ans, stdout, true, ch.color))
        rc = cmd_fail(CMD_EXIT_MODEL, "out of memory");
    /* the store (sessions, and the KV blocks of every prompt; with
     * --no-cache sessions are only read from it), the session, the model */
    struct cmd_conv c = {0};
    struct cmd_conv_params p = {
        .e = &cmd_chat_entry,
        .session = session,
        .cont = cont,
        .offer_pull = true,
        .store_always = true,
        .model_name_refused = true,
        .what = "chat",
        .model_hint = own_model_hint,
        .model_opened = model_opened,
        .ud = &ch,
        .prog = &ch.prog,
        /* a new session is made with its first answer (chat_make_pending) */
        .new_after_answer = true,
    };
    if (!rc)
        rc = cmd_conv_begin(&c, &ch.o, &p);
    if (!rc)
        rc = cmd_conv_open(&c, &ch.o, &p);
    ch.l = c.l; /* the chat's from now on (/load changes them) */
    ch.st = c.st;
    ch.conv = c.conv;
    if (!rc && c.session && c.pending) {
        ch.name = strdup(c.session);
        ch.pending = ch.name != NULL;
    } else if (!rc && c.session) {
        attached(&ch, c.session, &c.rs);
        const char *s = chat_conv_system(&ch);
        if (ch.o.system && (!s || strcmp(s, ch.o.system)))
            chat_note(&ch, C_WARN, "session '%s' keeps its own system prompt; /system TEXT changes it", ch.name);
    }
    if (!rc)
        rc = chat_run(&ch);
    repl_close(ch.repl);
    sess_conv_free(ch.conv);
    sess_store_close(ch.st);
    free(ch.name);
    for (int i = 0; i < CMD_OPTS_MAX_STOP; i++)
        free(ch.stop[i]);
    wrap_free(&ch.wrap);
    cmd_answer_free(&ch.ans);
    cmd_llm_close(&ch.l);
    cmd_opts_free(&ch.o);
    free(ch.model_buf);
    free(c.own_model); /* o.model may have pointed at either */
    return rc < 0 ? CMD_EXIT_OK : rc;
}

const struct cmd_entry cmd_chat_entry = {
    .name = "chat",
    .summary = "chat with a model (the default command)",
    .usage = chat_usage,
    .exec = chat_exec,
};
