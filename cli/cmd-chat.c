/*
 * cmd-chat.c - `kvchat [chat] [SESSION]`: the interactive chat (SPEC §3
 * "The REPL").
 *
 * One conversation (sessions/ sess_conv, which owns the engine context)
 * lives for the whole process, so each turn prefills only its own new
 * tokens, and whatever the KV block store already has is read instead of
 * computed; /undo and /retry cut the KV cache back instead of recomputing. Lines come from cli/repl.c
 * (readline on a terminal). Slash commands are entries of slash_table.
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
 *    (Ctrl-D, /exit, a signal) never loses a finished turn; an unnamed chat
 *    lives only in memory until /save NAME.
 *
 * Context-window policy: nothing is dropped behind the user's back. When a
 * message does not fit, the chat says so and (on a terminal) asks whether
 * to drop the oldest exchanges; yes drops them one at a time, oldest first,
 * until the message fits (the system prompt is always kept; the remaining
 * exchanges are computed again). /clear drops them all.
 */
#include "cli/cmd.h"
#include "cli/progress.h"
#include "cli/repl.h"
#include "cli/wrap.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

static const char chat_usage[] =
    "usage: kvchat [chat] [SESSION | -c] [-m MODEL] [--system TEXT|--system-file F] [options]\n"
    "\n"
    "  The interactive chat. With SESSION, the chat is saved under that name\n"
    "  after every exchange and resumes from its KV blocks next time (it is\n"
    "  created if new); without, it is no session (at exit it is gone unless you\n"
    "  /save it), but every prompt's KV blocks and token ids stay in the store\n"
    "  as a cache until evicted or collected ('kvchat sessions forget' removes\n"
    "  them); --private reads the store and writes nothing at all.\n"
    "  -c, --continue opens the session changed last (its last turn).\n"
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
    "in another kvchat; stdin not a terminal: also when a change to a saved\n"
    "session was refused), 4 a remote model's network error (stdin not a terminal),\n"
    "130 ended by a signal.\n";

/* ==== signals ==== */

static volatile sig_atomic_t g_interrupt, g_quit;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupt = 1;
}

static void on_sigterm(int sig)
{
    (void)sig;
    g_quit = 1;
    g_interrupt = 1; /* stop an answer in flight */
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

/* ==== the chat's state ==== */

struct chat {
    struct cmd_progress prog; /* the progress line of a long prefill or restore */
    struct cmd_opts o;
    struct cmd_llm l;
    struct sess_conv *conv;
    struct sess_store *st; /* the store (NULL when it cannot be opened) */
    char *name;            /* the session's name; NULL for an unnamed chat */
    struct repl *repl;
    FILE *ui;              /* stdout on a terminal, else stderr */
    bool color;
    bool interactive;      /* stdin is a terminal */
    bool yes;              /* --yes: piped input, the chat's questions are answered yes */
    bool out_broken;       /* stdout went away */
    bool refused;          /* a message was refused or failed (the exit status, when piped) */
    int refused_code;      /* that exit status (0: CMD_EXIT_MODEL) */
    char last_char;        /* of the answer being streamed */
    struct wrap wrap;      /* word wrap of answers on a terminal */
    bool wrapping;         /* the answer being streamed is wrapped */
    struct cmd_answer ans; /* splits reasoning from the answer as it streams */
    char *stop[CMD_OPTS_MAX_STOP]; /* /set parameter stop's strings (o.stop points here then) */
    struct sess_turn_stats last;
    bool have_last;
    int64_t turns;          /* answers in this process */
    int64_t total_prefilled, total_cached, total_generated;
    bool model_switch;     /* conv_attach: a session of another model is not an error (/load) */
    char model_buf[4096];  /* the model /load switched to (o.model points here then) */
};

enum color { C_RESET, C_DIM, C_BOLD, C_PROMPT, C_WARN, C_ERR };
static const char *const color_seq[] = {"\033[0m", "\033[2m", "\033[1m", "\033[1;32m", "\033[33m",
                                        "\033[31m"};

static const char *col(const struct chat *ch, enum color c)
{
    return ch->color ? color_seq[c] : "";
}

/* wrap_write as cmd_term_clean's writer */
struct ui_put {
    struct wrap *w;
    int cols;
};
static int ui_put(void *ud, const char *s, size_t n)
{
    struct ui_put *u = ud;
    return wrap_write(u->w, u->cols, s, n) ? 1 : 0;
}

/*
 * Text for the user on ui, ended by a newline: on a terminal wrapped at
 * its width as answers are (cli/wrap.c: breaks at spaces, nothing lost, a
 * word wider than the line cut at the edge), and sanitized unless raw (our
 * own text with colours). The first head bytes (a /show or /help label,
 * padding included) are written as they are; the lines after the first
 * then start at column hang, under the label's value.
 */
static void text_to(struct chat *ch, FILE *f, enum color c, const char *text, size_t head, int hang, bool raw)
{
    int cols = isatty(fileno(f)) ? repl_width(fileno(f)) : 0;
    size_t n = strlen(text);
    bool colored = ch->color && (f == ch->ui || cols > 0);
    fflush(stdout);
    if (f != stdout && ch->ui)
        fflush(ch->ui);
    fputs(colored ? color_seq[c] : "", f);
    if (cols < 2) {
        if (raw)
            fputs(text, f);
        else
            cmd_term_write(f, text, n);
    } else {
        struct wrap w;
        wrap_init(&w, f);
        wrap_begin(&w);
        struct ui_put u = {&w, cols};
        head = head < n ? head : 0;
        for (int part = 0; part < 2; part++) {
            const char *p = part ? text + head : text;
            size_t len = part ? n - head : head;
            if (raw)
                wrap_write(&w, cols, p, len);
            else
                cmd_term_clean(p, len, ui_put, &u);
            if (!part && head && hang > 0 && hang < cols / 2)
                w.hang = hang;
        }
        wrap_end(&w, cols);
        wrap_free(&w);
    }
    fprintf(f, "%s\n", colored ? color_seq[C_RESET] : "");
    fflush(f);
}

static void ui_text(struct chat *ch, enum color c, const char *text, size_t head, int hang, bool raw)
{
    text_to(ch, ch->ui, c, text, head, hang, raw);
}

/* "kvchat: " and a message on stderr, wrapped on a terminal as ui's lines */
static void chat_vsay(struct chat *ch, enum color c, const char *fmt, va_list ap)
{
    char *msg = NULL, *line = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        return;
    if (asprintf(&line, "kvchat: %s", msg) >= 0) {
        text_to(ch, stderr, c, line, 0, 0, false);
        free(line);
    }
    free(msg);
}

/* a note to the user: wrapped on ui */
static void note(struct chat *ch, enum color c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(struct chat *ch, enum color c, const char *fmt, ...)
{
    va_list ap;
    char *text = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n >= 0)
        ui_text(ch, c, text, 0, 0, false); /* names and texts of the store: sanitized */
    free(n >= 0 ? text : NULL);
}

/* an error inside the chat: to stderr in kvchat's form */
static void chat_err(struct chat *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void chat_err(struct chat *ch, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    chat_vsay(ch, C_ERR, fmt, ap);
    va_end(ap);
}

/* information (not an error) on stderr in kvchat's form */
static void chat_info(struct chat *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void chat_info(struct chat *ch, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    chat_vsay(ch, C_RESET, fmt, ap);
    va_end(ap);
}

/* a status line on ui, wrapped */
static void print_fit(struct chat *ch, enum color c, const char *line)
{
    ui_text(ch, c, line, 0, 0, false);
}

/* a /show line: its label padded to column 11, the value's lines under it */
static void print_wrapped(struct chat *ch, const char *line)
{
    ui_text(ch, C_RESET, line, 11, 11, false);
}

/* the store is there for sessions; says why not */
static int store_need(struct chat *ch)
{
    if (ch->st)
        return 0;
    chat_err(ch, "no session store: it could not be opened (see above)");
    return -1;
}

/* a private chat saves nothing: what would save (a session) says so */
static int private_refuses(struct chat *ch, const char *what)
{
    if (!ch->o.private_mode)
        return 0;
    chat_err(ch, "%s would save a session, and this chat is private (nothing is written): /set private off "
                 "first", what);
    return -1;
}

/* ==== turns ==== */

static int on_text(void *ud, const char *text, size_t n)
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
static void answer_begin(struct chat *ch)
{
    ch->last_char = 0;
    g_interrupt = g_quit; /* a SIGTERM that came before the turn still stops it */
    ch->wrapping = ch->o.wrap && isatty(1);
    if (ch->wrapping)
        wrap_begin(&ch->wrap);
    ch->ans.wrap = ch->wrapping ? &ch->wrap : NULL; /* cmd_answer_end ends the wrap (turn_done) */
    repl_quiet(ch->repl, true);
    cmd_progress_start(&ch->prog, ch->conv);
}

static void answer_end(struct chat *ch)
{
    cmd_progress_end(&ch->prog);
    repl_quiet(ch->repl, false);
}

/* a server's figure, "?" when it reported none */
static const char *figure(char *buf, size_t n, int64_t v)
{
    if (v < 0)
        return "?";
    snprintf(buf, n, "%" PRId64, v);
    return buf;
}

static void stats_line(struct chat *ch, const struct sess_turn_stats *ts)
{
    char mem[32], disk[32], line[512];
    if (ch->l.remote) { /* the server's figures: its prefix cache is the reuse */
        char a[24], b[24], c[24];
        snprintf(line, sizeof line,
                 "[server: prompt %s · cached %s · generated %s · first text %.0f ms", figure(a, sizeof a, ts->prompt_tokens),
                 figure(b, sizeof b, ts->cached_tokens), figure(c, sizeof c, ts->generated_tokens), ts->ttft_ms);
        if (ts->decode_tok_s >= 0)
            snprintf(line + strlen(line), sizeof line - strlen(line), " · %.1f tok/s", ts->decode_tok_s);
        snprintf(line + strlen(line), sizeof line - strlen(line), "]");
        print_fit(ch, C_DIM, line);
        return;
    }
    cmd_fmt_bytes(mem, sizeof mem, (double)ts->kv_bytes_mem);
    cmd_fmt_bytes(disk, sizeof disk, (double)ts->kv_bytes_disk);
    snprintf(line, sizeof line,
             "[prefilled %" PRId64 " · reused %" PRId64 " · generated %" PRId64
             " · first token %.0f ms · %.1f tok/s · KV %s in memory, %s on disk]",
             ts->prefilled_tokens, ts->cached_tokens, ts->generated_tokens, ts->ttft_ms,
             ts->decode_tok_s, mem, disk);
    print_fit(ch, C_DIM, line);
}

static void turn_done(struct chat *ch, int rc, const struct sess_turn_stats *ts)
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
    ch->last = *ts;
    ch->have_last = true;
    ch->turns++;
    ch->total_prefilled += ts->prefilled_tokens > 0 ? ts->prefilled_tokens : 0;
    ch->total_cached += ts->cached_tokens > 0 ? ts->cached_tokens : 0;
    ch->total_generated += ts->generated_tokens > 0 ? ts->generated_tokens : 0;
    const char *why = ts->stop_reason ? ts->stop_reason : "";
    if (!strcmp(why, "cut")) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        note(ch, C_WARN, "[the partial answer is kept%s, marked as cut off: /retry asks again, /undo drops it]",
             ch->name ? " in the session" : "");
        ch->refused = true;
        ch->refused_code = CMD_EXIT_NETWORK;
    } else if (!strcmp(why, "interrupted") && !g_quit)
        note(ch, C_DIM, "[stopped; the partial answer is kept: /retry answers again, /undo drops it]");
    else if (!strcmp(why, "context_full"))
        note(ch, C_WARN, "[the context window is full: the answer stops here; /clear starts "
                         "afresh, /undo drops the last exchange]");
    else if (!strcmp(why, "length") && ch->o.verbose)
        note(ch, C_DIM, "[stopped at %" PRId32 " token%s (-n)]", ch->o.n_predict, cmd_s(ch->o.n_predict));
    if (ts->kv_problem[0])
        chat_err(ch, "%s", ts->kv_problem);
    if (ch->o.verbose)
        stats_line(ch, ts);
    if (ch->o.verbose)
        cmd_format_stats(ts, stderr);
    const char *fmt = sess_conv_format(ch->conv, NULL);
    if (ts->grammar && !ts->grammar_complete) /* never silently invalid */
        note(ch, C_WARN, "[the answer is incomplete under the %s (stop: %s)]",
             !fmt ? "format" : !strcmp(fmt, "grammar") ? "grammar" : !strcmp(fmt, "schema") ? "schema" : "JSON format",
             ts->stop_reason);
}

static bool confirm(struct chat *ch, const char *question, const char *what);

/* the message does not fit: say so, and offer to drop the oldest exchanges */
static int make_room(struct chat *ch, const char *text)
{
    int64_t used = sess_conv_n_tokens(ch->conv), n_ctx = llm_ctx_n_ctx(sess_conv_ctx(ch->conv));
    int64_t ex = sess_conv_n_exchanges(ch->conv);
    chat_err(ch, "the message does not fit in the context window (%" PRId64 " of %" PRId64
                 " tokens used, %" PRId64 " exchange%s)", used, n_ctx, ex, cmd_s(ex));
    if (ex == 0) {
        note(ch, C_WARN, "it is longer than the context itself; -c N sets a larger context");
        return SESS_ERR_CTX_FULL;
    }
    char q[512];
    snprintf(q, sizeof q, "Drop the oldest exchanges%s%s%s until it fits? (/clear starts afresh) [y/N] ",
             ch->name ? " from session '" : "", ch->name ? ch->name : "", ch->name ? "'" : "");
    if (!confirm(ch, q, NULL)) {
        note(ch, C_DIM, "nothing dropped: /clear starts afresh, /undo drops the last exchange");
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
        answer_begin(ch);
        rc = sess_conv_say(ch->conv, text, on_text, ch, &g_interrupt, &ts);
        answer_end(ch);
        if (rc != SESS_ERR_CTX_FULL)
            break;
    }
    if (rc == SESS_ERR_CTX_FULL) {
        note(ch, C_WARN, "dropped all %" PRId64 " exchange%s and it still does not fit", dropped,
             cmd_s(dropped));
        return rc;
    }
    turn_done(ch, rc, &ts);
    if (rc == SESS_OK)
        note(ch, C_DIM, "[dropped the %" PRId64 " oldest exchange%s to make room]", dropped,
             cmd_s(dropped));
    else
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
    return rc;
}

/* a turn that gave no answer: said, and (piped) the exit status */
static void turn_failed(struct chat *ch, int rc)
{
    if (rc == SESS_OK)
        return;
    if (rc != SESS_ERR_INTERRUPTED) {
        ch->refused = true;
        if (rc == SESS_ERR_REMOTE) /* no answer came: the conversation is as it was */
            ch->refused_code = cmd_remote_exit(ch->l.remote);
    }
    chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
}

static void say(struct chat *ch, const char *text)
{
    struct sess_turn_stats ts;
    memset(&ts, 0, sizeof ts);
    if (g_quit) { /* SIGTERM or SIGHUP came first: the message is not sent, the chat ends */
        chat_err(ch, "interrupted: the message was not sent");
        return;
    }
    answer_begin(ch);
    int rc = sess_conv_say(ch->conv, text, on_text, ch, &g_interrupt, &ts);
    answer_end(ch);
    if (rc == SESS_ERR_CTX_FULL) {
        if (make_room(ch, text) != SESS_OK)
            ch->refused = true;
        return;
    }
    if (rc == SESS_ERR_INTERRUPTED) { /* Ctrl-C while the message was being read */
        chat_err(ch, "interrupted: the message was not sent");
        return;
    }
    turn_done(ch, rc, &ts);
    turn_failed(ch, rc);
}

/* ==== conversations ==== */

/* a new unnamed chat: the conversation (and its engine context) is made
 * once, then started afresh */
static int conv_new(struct chat *ch, const char *system)
{
    char err[1024];
    free(ch->name);
    ch->name = NULL;
    ch->have_last = false;
    if (ch->conv) {
        if (sess_conv_reset(ch->conv, system) != SESS_OK) {
            chat_err(ch, "cannot start a conversation: %s", sess_conv_errmsg(ch->conv));
            return -1;
        }
        return 0;
    }
    if (ch->l.remote && ch->o.format.grammar) { /* never silently unconstrained */
        chat_err(ch, "--format, --json-schema and --grammar are for local models: a remote server samples "
                     "its own answers");
        return -1;
    }
    struct sess_conv_params p = cmd_opts_conv_params(&ch->o, &ch->l);
    p.system = system && *system ? system : NULL;
    if (sess_conv_init(ch->st, p, &ch->conv, err, sizeof err) != 0) {
        chat_err(ch, "cannot start a conversation: %s", err);
        return -1;
    }
    return 0;
}

/* the conversation's system prompt, or NULL */
static const char *conv_system(const struct chat *ch)
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

/*
 * Open session name (create: make it if absent) as the conversation; a
 * session the chat was in is left (it stays saved). Returns 0, or an exit
 * code after printing the error, with the conversation as it was.
 */
static int conv_attach(struct chat *ch, const char *name, bool create)
{
    if (store_need(ch))
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
    free(ch->name);
    ch->name = strdup(name);
    ch->have_last = false;
    restore_report(ch, name, &rs);
    /* the session's sampling (restored) is the chat's from now on */
    ch->o.sampling = sess_conv_get_params(ch->conv).sampling;
    ch->o.n_predict = sess_conv_get_params(ch->conv).n_predict;
    ch->o.think_off = sess_conv_get_params(ch->conv).think_off;
    return 0;
}

/* Ask before changing what a named session keeps (or an unsaved chat):
 * on a terminal the answer, piped input yes only with --yes (else what
 * says why nothing changed) */
static bool confirm(struct chat *ch, const char *question, const char *what)
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
static bool may_discard(struct chat *ch, const char *what)
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
static int session_available(struct chat *ch, const char *name)
{
    if (store_need(ch))
        return -1;
    int rc = sess_available(ch->st, name);
    if (rc == SESS_ERR_NOT_FOUND)
        chat_err(ch, "no session '%s' (/sessions lists them)", name);
    else if (rc)
        chat_err(ch, "%s", sess_errmsg(ch->st));
    return rc ? -1 : 0;
}

/* a name for a new session (the store's one rule) */
static bool name_ok(struct chat *ch, const char *name)
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

/* ==== slash commands ==== */

enum slash_arg { SLASH_ARG_NONE, SLASH_ARG_SESSION, SLASH_ARG_SET_KEY, SLASH_ARG_COMMAND, SLASH_ARG_FILE };

struct slash_cmd {
    const char *name; /* with its slash */
    const char *args;
    const char *help; /* NULL: an alias, not listed by /help nor taken by prefix */
    enum slash_arg complete;
    /* runs only by its full name: it leaves the chat or changes the
     * conversation, which a slip of the fingers must not do (/e, /r) */
    bool full_name;
    int (*exec)(struct chat *ch, char *arg); /* 1: leave the chat */
};

static const struct slash_cmd slash_table[];

static int slash_help(struct chat *ch, char *arg)
{
    (void)arg;
    for (const struct slash_cmd *s = slash_table; s->name; s++) {
        if (!s->help)
            continue;
        char left[64], keys[512] = "";
        snprintf(left, sizeof left, "%s%s%s", s->name, s->args ? " " : "", s->args ? s->args : "");
        if (s->complete == SLASH_ARG_SET_KEY) /* the keys /set takes, from the one table */
            cmd_opts_set_keys_join(keys, sizeof keys, " ");
        char entry[1024];
        int head = snprintf(entry, sizeof entry, "  %s%-16s%s ", col(ch, C_BOLD), left, col(ch, C_RESET));
        snprintf(entry + head, sizeof entry - (size_t)head, "%s%s%s", s->help, keys[0] ? " " : "", keys);
        ui_text(ch, C_RESET, entry, (size_t)head, 19, true); /* continuations under the text */
    }
    ui_text(ch, C_RESET,
            "\nEnter sends. End a line with \\ to go on with the next one, or start a line "
            "with \"\"\" to start a block and end a line with \"\"\" to end it. A line starting "
            "with // sends a message that starts with /. A unique prefix is enough for "
            "/help /sessions /set /show /stats; the others need their full name. "
            "Ctrl-C stops an answer or clears the line; Ctrl-D leaves (inside a \"\"\" "
            "block it drops the block); Tab completes; Up/Down recall earlier inputs. "
            "/set system TEXT and /set parameter KEY VALUE work as in ollama.", 0, 0, true);
    return 0;
}

static int slash_save(struct chat *ch, char *arg);

/*
 * Leaving (/exit, /bye, Ctrl-D): an unnamed chat with exchanges, on a
 * terminal, asks as /load and /new do: save it under a name, discard it, or
 * stay. Ctrl-D at the question discards (so Ctrl-D twice leaves). Piped
 * input ends without asking (an unnamed chat is discarded at exit).
 */
static bool may_leave(struct chat *ch)
{
    if (ch->name || ch->o.private_mode || !ch->interactive || g_quit || sess_conv_n_exchanges(ch->conv) == 0)
        return true;
    for (;;) {
        char *line = NULL;
        enum repl_status st = repl_read(ch->repl,
                                        "This chat is not saved: s NAME saves it, d discards it, Enter stays "
                                        "(Ctrl-D: discard) ",
                                        &line);
        if (st == REPL_EOF || st == REPL_QUIT)
            return true;
        if (st != REPL_LINE)
            return false; /* Ctrl-C: stay */
        char *a = line;
        while (*a == ' ' || *a == '\t')
            a++;
        size_t n = strlen(a);
        while (n && (a[n - 1] == ' ' || a[n - 1] == '\t'))
            a[--n] = 0;
        bool discard = !strcmp(a, "d") || !strcmp(a, "discard");
        bool save = (a[0] == 's' && (a[1] == ' ' || a[1] == '\t')) || !strncmp(a, "save ", 5);
        if (!*a || discard) {
            free(line);
            if (!discard)
                note(ch, C_DIM, "still here");
            return discard;
        }
        if (save) {
            char *name = a + (a[1] == 'a' ? 4 : 1);
            while (*name == ' ' || *name == '\t')
                name++;
            slash_save(ch, name);
            bool saved = ch->name != NULL;
            free(line);
            if (saved)
                return true;
            continue;
        }
        free(line);
    }
}

static int slash_exit(struct chat *ch, char *arg)
{
    (void)arg;
    return may_leave(ch) ? 1 : 0;
}

static int slash_sessions(struct chat *ch, char *arg)
{
    (void)arg;
    if (store_need(ch))
        return 0;
    struct sess_info *list;
    int64_t n;
    if (sess_list(ch->st, &list, &n)) {
        chat_err(ch, "%s", sess_errmsg(ch->st));
        return 0;
    }
    if (n == 0)
        note(ch, C_DIM, "no saved sessions yet: /save NAME saves this chat");
    for (int64_t i = 0; i < n; i++) {
        char when[32], line[512], kv[32];
        time_t t = (time_t)list[i].updated;
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        cmd_fmt_bytes(kv, sizeof kv, (double)list[i].kv_bytes);
        bool cur = ch->name && !strcmp(ch->name, list[i].name);
        snprintf(line, sizeof line, "%c %-20s %4" PRId64 " turn%s %7" PRId64 " token%s %10s  %s",
                 cur ? '*' : ' ', list[i].name, list[i].n_turns, list[i].n_turns == 1 ? " " : "s",
                 list[i].n_tokens, list[i].n_tokens == 1 ? " " : "s", kv, when);
        print_fit(ch, cur ? C_BOLD : C_RESET, line);
    }
    sess_list_free(list, n);
    return 0;
}

/*
 * /load of a session saved with another model: that model is opened (as
 * `kvchat NAME` would), a conversation made on it and attached to the
 * session; then the old conversation and model go. On any failure the chat
 * goes on as it was.
 */
static int load_with_own_model(struct chat *ch, const char *name)
{
    int64_t id;
    struct sess_info info;
    if (sess_find(ch->st, name, &id) || sess_get(ch->st, id, &info)) {
        chat_err(ch, "%s", sess_errmsg(ch->st));
        return -1;
    }
    struct stat sb;
    char path[sizeof ch->model_buf];
    int bad = !info.model_path || !info.model_path[0] || stat(info.model_path, &sb) != 0 ||
              (size_t)snprintf(path, sizeof path, "%s", info.model_path) >= sizeof path;
    if (bad)
        chat_err(ch, "session '%s' was saved with model '%s', which is gone: put it back, or go on with another "
                     "with kvchat %s -m MODEL --switch-model", name, info.model_path ? info.model_path : "?", name);
    sess_info_free(&info);
    if (bad)
        return -1;
    const char *was_model = ch->o.model;
    char saved_buf[sizeof ch->model_buf];
    memcpy(saved_buf, ch->model_buf, sizeof saved_buf);
    memcpy(ch->model_buf, path, sizeof path);
    ch->o.model = ch->model_buf;
    struct cmd_llm l;
    if (cmd_llm_open(&ch->o, false, &l)) {
        memcpy(ch->model_buf, saved_buf, sizeof saved_buf);
        ch->o.model = was_model;
        return -1;
    }
    char err[1024];
    struct sess_conv *conv;
    struct sess_conv_params p = cmd_opts_conv_params(&ch->o, &l);
    p.system = NULL;
    if (sess_conv_init(ch->st, p, &conv, err, sizeof err)) {
        chat_err(ch, "cannot start a conversation: %s", err);
        cmd_llm_close(&l);
        memcpy(ch->model_buf, saved_buf, sizeof saved_buf);
        ch->o.model = was_model;
        return -1;
    }
    struct sess_conv *old_conv = ch->conv;
    struct cmd_llm old_l = ch->l;
    ch->conv = conv;
    ch->l = l;
    if (conv_attach(ch, name, false) != 0) { /* said; back to what was */
        sess_conv_free(conv);
        cmd_llm_close(&ch->l);
        ch->conv = old_conv;
        ch->l = old_l;
        memcpy(ch->model_buf, saved_buf, sizeof saved_buf);
        ch->o.model = was_model;
        return -1;
    }
    sess_conv_free(old_conv);
    cmd_llm_close(&old_l);
    const char *base = strrchr(path, '/');
    note(ch, C_DIM, "session '%s' was saved with model %s: switched to it", name, base ? base + 1 : path);
    return 0;
}

/* text cut after max bytes (at a character's start), "[...]" marking the cut */
static char *cut_text(const char *text, size_t max)
{
    size_t n = strlen(text);
    if (n > max)
        while (max > 0 && ((unsigned char)text[max] & 0xC0) == 0x80)
            max--;
    char *out = NULL;
    if (asprintf(&out, "%.*s%s", (int)(n > max ? max : n), text, n > max ? " [...]" : "") < 0)
        return NULL;
    return out;
}

/* a session reopened on a terminal: its last exchange, dimmed, where the
 * conversation goes on (each side cut after 1000 bytes) */
static void show_last_exchange(struct chat *ch)
{
    int64_t n = sess_conv_n_messages(ch->conv), u = n - 1;
    const char *q = NULL, *a = NULL;
    if (!ch->interactive)
        return;
    while (u >= 0 && sess_conv_message(ch->conv, u, &q) != SESS_ROLE_USER)
        u--;
    if (u < 0)
        return;
    if (u + 1 < n && sess_conv_message(ch->conv, u + 1, &a) != SESS_ROLE_ASSISTANT)
        a = NULL;
    char *cq = cut_text(q, 1000), *ca = a ? cut_text(a, 1000) : NULL, *line = NULL;
    if (cq && asprintf(&line, "> %s", cq) >= 0) {
        ui_text(ch, C_DIM, line, 2, 2, false);
        free(line);
    }
    if (ca)
        ui_text(ch, C_DIM, ca, 0, 0, false);
    free(cq);
    free(ca);
}

static int slash_load(struct chat *ch, char *arg)
{
    if (ch->name && !strcmp(ch->name, arg)) {
        note(ch, C_DIM, "session '%s' is already open", arg);
        return 0;
    }
    if (private_refuses(ch, "/load") || session_available(ch, arg) || !may_discard(ch, "/load"))
        return 0;
    ch->model_switch = !ch->o.switch_model;
    int rc = conv_attach(ch, arg, false);
    ch->model_switch = false;
    if (rc == -SESS_ERR_MODEL)
        rc = load_with_own_model(ch, arg);
    if (rc != 0)
        return 0;
    if (ch->l.remote)
        note(ch, C_DIM, "session '%s': %" PRId64 " exchange%s", arg, sess_conv_n_exchanges(ch->conv),
             cmd_s(sess_conv_n_exchanges(ch->conv)));
    else
        note(ch, C_DIM, "session '%s': %" PRId64 " exchange%s, %" PRId64 " token%s", arg,
             sess_conv_n_exchanges(ch->conv), cmd_s(sess_conv_n_exchanges(ch->conv)),
             sess_conv_n_tokens(ch->conv), cmd_s(sess_conv_n_tokens(ch->conv)));
    show_last_exchange(ch);
    return 0;
}

static int slash_save(struct chat *ch, char *arg)
{
    if (private_refuses(ch, "/save") || !name_ok(ch, arg))
        return 0;
    if (store_need(ch))
        return 0;
    int64_t id;
    if (ch->name && !strcmp(ch->name, arg)) {
        note(ch, C_DIM, "this chat is session '%s': it is saved after every exchange", arg);
        return 0;
    }
    if (sess_find(ch->st, arg, &id) == 0) {
        chat_err(ch, "session '%s' exists: /load %s opens it; choose another name", arg, arg);
        return 0;
    }
    if (ch->name) {
        /* a named chat: rename it (the conversation holds its lock) */
        if (sess_conv_rename(ch->conv, arg)) {
            chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
            return 0;
        }
        note(ch, C_DIM, "session '%s' is now '%s'", ch->name, arg);
        free(ch->name);
        ch->name = strdup(arg);
        return 0;
    }
    if (conv_attach(ch, arg, true) == 0)
        note(ch, C_DIM, "saved as session '%s' (and after every exchange from now on)", arg);
    return 0;
}

static int slash_fork(struct chat *ch, char *arg)
{
    if (!ch->name)
        return slash_save(ch, arg);
    if (private_refuses(ch, "/fork") || !name_ok(ch, arg) || store_need(ch))
        return 0;
    if (sess_fork(ch->st, ch->name, arg, -1)) {
        chat_err(ch, "%s", sess_errmsg(ch->st));
        return 0;
    }
    char *old = strdup(ch->name);
    if (conv_attach(ch, arg, false) == 0)
        note(ch, C_DIM, "forked '%s' as '%s'; you are now in '%s' ('%s' stays as it was)", old, arg,
             arg, old);
    free(old);
    return 0;
}

static int slash_new(struct chat *ch, char *arg)
{
    (void)arg;
    if (!may_discard(ch, "/new"))
        return 0;
    const char *was = ch->name;
    if (was)
        note(ch, C_DIM, "session '%s' is saved; a new unnamed chat begins", was);
    conv_new(ch, ch->o.system);
    return 0;
}

static int slash_system(struct chat *ch, char *arg)
{
    if (!*arg) {
        const char *s = conv_system(ch);
        note(ch, C_RESET, s ? "system prompt: %s" : "no system prompt%s", s ? s : "");
        return 0;
    }
    int64_t ex = sess_conv_n_exchanges(ch->conv);
    if (ex > 0) {
        char q[256];
        snprintf(q, sizeof q,
                 "A new system prompt restarts the conversation: its %" PRId64
                 " exchange%s will be dropped%s. Go on? [y/N] ",
                 ex, cmd_s(ex), ch->name ? " from the session" : "");
        char what[512];
        snprintf(what, sizeof what, "/system would drop the exchanges of session '%s'", ch->name ? ch->name : "");
        if (!confirm(ch, q, ch->name && !ch->o.no_cache ? what : NULL)) {
            note(ch, C_DIM, "the system prompt is unchanged");
            return 0;
        }
    }
    if (sess_conv_set_system(ch->conv, arg) != SESS_OK) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        return 0;
    }
    note(ch, C_DIM, "new system prompt set%s", ex ? "; the conversation starts again" : "");
    return 0;
}

/* a change to what a named session keeps (/undo, /retry): -1 (said) unless
 * confirmed; 0 in an unnamed chat or with --no-cache (nothing is written) */
static int saved_change(struct chat *ch, const char *cmd, const char *question)
{
    if (!ch->name || ch->o.no_cache)
        return 0;
    char q[512], what[512];
    snprintf(q, sizeof q, question, ch->name);
    snprintf(what, sizeof what, "%s would change session '%s'", cmd, ch->name);
    if (confirm(ch, q, what))
        return 0;
    if (ch->interactive)
        note(ch, C_DIM, "session '%s' is unchanged", ch->name);
    return -1;
}

static int slash_undo(struct chat *ch, char *arg)
{
    (void)arg;
    if (sess_conv_n_exchanges(ch->conv) == 0) {
        note(ch, C_DIM, "nothing to undo");
        return 0;
    }
    if (saved_change(ch, "/undo", "Drop the last exchange from session '%s'? It cannot be brought back. [y/N] "))
        return 0;
    if (sess_conv_undo(ch->conv) != SESS_OK) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        return 0;
    }
    note(ch, C_DIM, "dropped the last exchange (%" PRId64 " left)", sess_conv_n_exchanges(ch->conv));
    return 0;
}

static int slash_retry(struct chat *ch, char *arg)
{
    (void)arg;
    if (sess_conv_n_exchanges(ch->conv) == 0) {
        note(ch, C_DIM, "nothing to retry");
        return 0;
    }
    if (saved_change(ch, "/retry", "Replace the last answer saved in session '%s'? [y/N] "))
        return 0;
    struct sess_turn_stats ts;
    memset(&ts, 0, sizeof ts);
    answer_begin(ch);
    int rc = sess_conv_retry(ch->conv, on_text, ch, &g_interrupt, &ts);
    answer_end(ch);
    turn_done(ch, rc, &ts);
    turn_failed(ch, rc);
    return 0;
}

/* /read FILE: the file's text is the next message, after a note of its size */
static int slash_read(struct chat *ch, char *arg)
{
    char path[4096], err[4600], *text;
    size_t len;
    const char *home = getenv("HOME");
    if (arg[0] == '~' && arg[1] == '/' && home && *home)
        snprintf(path, sizeof path, "%s%s", home, arg + 1);
    else
        snprintf(path, sizeof path, "%s", arg);
    if (cmd_read_text(path, CMD_INPUT_MAX, &text, &len, err, sizeof err)) {
        chat_err(ch, "%s", err);
        return 0;
    }
    /* the file's last newline is not the message's (as with run -f and stdin) */
    size_t size = len;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = 0;
    if (ch->l.remote) { /* the server counts tokens (and says when it is too long) */
        if (len == 0)
            note(ch, C_DIM, "'%s' holds no text: nothing sent", arg);
        else {
            note(ch, C_DIM, "[read '%s': %zu bytes]", arg, size);
            say(ch, text);
        }
        free(text);
        return 0;
    }
    /* the exchanges can be dropped to make room; the system prompt cannot */
    int64_t n_tok, kept = sess_conv_n_tokens(ch->conv);
    const char *sys = conv_system(ch);
    if (sess_conv_n_exchanges(ch->conv) > 0) {
        int32_t r = sys ? llm_tokenize(ch->l.vocab, sys, strlen(sys), NULL, 0, true, false) : 0;
        kept = r < 0 && r != INT32_MIN ? -(int64_t)r : 0;
    }
    int64_t room = llm_ctx_n_ctx(sess_conv_ctx(ch->conv)) - kept;
    if (len == 0) {
        note(ch, C_DIM, "'%s' holds no text: nothing sent", arg);
    } else if (cmd_text_fits(&ch->l, sess_conv_ctx(ch->conv), ch->o.special, arg, text, len, room, &n_tok, err, sizeof err)) {
        chat_err(ch, "%s", err);
    } else {
        note(ch, C_DIM, "[read '%s': %zu bytes, %" PRId64 " token%s]", arg, size, n_tok, n_tok == 1 ? "" : "s");
        say(ch, text);
    }
    free(text);
    return 0;
}

/* /set's and /show's list of what /set changes */
static void show_settings(struct chat *ch)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return;
    fputs("sampling   ", f);
    cmd_opts_describe(&ch->o, f);
    fclose(f);
    print_wrapped(ch, text);
    free(text);
    const char *fmt = sess_conv_format(ch->conv, NULL);
    char line[1024];
    int k = snprintf(line, sizeof line, "output     think %s (reasoning %s), wrap %s, format %s",
                     ch->o.think_off ? "off" : "on", ch->o.think_hide ? "hidden" : "shown dimmed",
                     ch->o.wrap ? "on" : "off", fmt ? fmt : "off");
    for (int i = 0; ch->o.stop[i] && k > 0 && (size_t)k < sizeof line; i++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%s'%s'", i ? ", " : ", stop ", ch->o.stop[i]);
    print_wrapped(ch, line);
    snprintf(line, sizeof line, "private    %s", ch->o.private_mode ? "on: nothing is written" : "off");
    print_wrapped(ch, line);
}

/* /set private on|off: the store read-only or not, the history file too */
static int set_private(struct chat *ch, bool on)
{
    if (on == ch->o.private_mode) {
        note(ch, C_DIM, "private is already %s", on ? "on" : "off");
        return 0;
    }
    if (on && ch->name) {
        chat_err(ch, "this chat is session '%s', saved after every exchange: /new (or /clear) first for a private "
                     "chat", ch->name);
        return 0;
    }
    if (ch->st && sess_store_set_read_only(ch->st, on)) {
        chat_err(ch, "%s", sess_errmsg(ch->st));
        return 0;
    }
    ch->o.private_mode = on;
    repl_history_private(ch->repl, on);
    if (on)
        note(ch, C_DIM, "private on: from now on nothing is written (no KV blocks, database rows or history); "
                        "what earlier turns stored stays ('kvchat sessions forget' removes it)");
    else if (!ch->st)
        note(ch, C_DIM, "private off: history is kept again; there was no store when this chat began, so the KV "
                        "cache on disk stays off and sessions cannot be saved until kvchat starts again");
    else
        note(ch, C_DIM, "private off: this chat's KV blocks are stored from the next answer on (its earlier "
                        "turns' too), and history is kept again");
    return 0;
}

/* ollama's names for /set parameter KEY VALUE */
static const char *const ollama_params[][2] = {
    {"temperature", "temp"}, {"num_predict", "n_predict"}, {NULL, NULL},
};

/* ollama's /set parameter stop A B ...: the answers end before any of the
 * strings (words; quotes around one are dropped), for this chat (a
 * session does not keep them, as --stop) */
static int set_stop(struct chat *ch, char *value)
{
    char *copy[CMD_OPTS_MAX_STOP] = {0};
    int n = 0;
    for (char *w = strtok(value, " \t"); w; w = strtok(NULL, " \t")) {
        size_t len = strlen(w);
        if (len > 2 && w[0] == '"' && w[len - 1] == '"')
            w[len - 1] = 0, w++;
        bool full = n == CMD_OPTS_MAX_STOP;
        if (full || !(copy[n] = strdup(w))) {
            if (full)
                chat_err(ch, "too many stop strings (at most %d)", CMD_OPTS_MAX_STOP);
            else
                chat_err(ch, "out of memory");
            for (int i = 0; i < n; i++)
                free(copy[i]);
            return 0;
        }
        n++;
    }
    for (int i = 0; i < CMD_OPTS_MAX_STOP; i++) {
        free(ch->stop[i]);
        ch->stop[i] = copy[i];
        ch->o.stop[i] = copy[i];
    }
    ch->o.stop[CMD_OPTS_MAX_STOP] = NULL;
    ch->o.n_stop = n;
    sess_conv_set_stop(ch->conv, ch->o.stop);
    char line[1024];
    int k = snprintf(line, sizeof line, "stop strings:");
    for (int i = 0; i < n && k > 0 && (size_t)k < sizeof line; i++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%s '%s'", i ? "," : "", ch->stop[i]);
    note(ch, C_DIM, "%s (this chat; a session does not keep them)", line);
    return 0;
}

/* split "KEY VALUE" (or KEY=VALUE) at arg: the value, or "" */
static char *split_key(char *arg)
{
    char *value = arg;
    while (*value && *value != ' ' && *value != '\t' && *value != '=')
        value++;
    if (*value)
        *value++ = 0;
    while (*value == ' ' || *value == '\t' || *value == '=')
        value++;
    return value;
}

static int slash_set(struct chat *ch, char *arg)
{
    if (!*arg) {
        show_settings(ch);
        return 0;
    }
    /* ollama's forms: /set system TEXT, /set parameter KEY VALUE, and the
     * switches wordwrap, nowordwrap, verbose, quiet */
    size_t kl = strcspn(arg, " \t");
    if (kl == 6 && !strncmp(arg, "system", 6)) {
        char *text = arg + 6;
        while (*text == ' ' || *text == '\t')
            text++;
        return slash_system(ch, text);
    }
    static const struct {
        const char *name, *key, *value;
    } switches[] = {
        {"wordwrap", "wrap", "on"}, {"nowordwrap", "wrap", "off"}, {"verbose", NULL, "on"}, {"quiet", NULL, "off"},
    };
    for (size_t i = 0; i < sizeof switches / sizeof *switches; i++)
        if (!strcmp(arg, switches[i].name)) {
            if (switches[i].key) {
                char kv[32];
                snprintf(kv, sizeof kv, "%s %s", switches[i].key, switches[i].value);
                return slash_set(ch, kv);
            }
            ch->o.verbose = !strcmp(switches[i].value, "on");
            note(ch, C_DIM, "statistics after every answer: %s", switches[i].value);
            return 0;
        }
    char *key = arg, *value = split_key(arg);
    if (!strcmp(key, "parameter")) {
        key = value;
        value = split_key(value);
        for (size_t i = 0; ollama_params[i][0]; i++)
            if (!strcmp(key, ollama_params[i][0]))
                key = (char *)ollama_params[i][1];
        if (!strcmp(key, "num_ctx")) {
            chat_err(ch, "the context size is fixed for a chat: start kvchat with -c N");
            return 0;
        }
    }
    if (!*value) {
        char keys[512];
        cmd_opts_set_keys_join(keys, sizeof keys, ", ");
        chat_err(ch, "usage: /set KEY VALUE (keys: %s)", keys);
        return 0;
    }
    if (!strcmp(key, "stop"))
        return set_stop(ch, value);
    if (!strcmp(key, "format") || !strcmp(key, "schema") || !strcmp(key, "grammar"))
        return cmd_format_set(&ch->o.format, ch->conv, ch->l.remote != NULL, key, value, stdout);
    char err[512];
    struct cmd_opts next = ch->o;
    next.given = 0; /* to see which setting this is */
    if (cmd_opts_set(&next, key, value, err, sizeof err)) {
        chat_err(ch, "%s", err);
        return 0;
    }
    if (!strcmp(key, "private"))
        return set_private(ch, next.private_mode);
    if (!strcmp(key, "wrap")) {
        ch->o.wrap = next.wrap;
        note(ch, C_DIM, "word wrap %s", ch->o.wrap ? "on (at the terminal's width)" : "off");
        return 0;
    }
    if (!strcmp(key, "think")) {
        ch->o.think_hide = next.think_hide;
        if (next.think_switch_given) {
            if (next.think_off != ch->o.think_off && ch->l.remote) {
                chat_err(ch, "think on|off is for local models: a remote server renders its own template");
                return 0;
            }
            if (next.think_off && !ch->l.remote && !ch->l.can_think_off) {
                chat_err(ch, "the model's chat template cannot switch thinking off");
                return 0;
            }
            /* the no-thinking block is the answer's: earlier turns render
             * as they were, so the switch holds from the next answer on
             * and the KV cache carries over; the session keeps it */
            if (sess_conv_keep_params(ch->conv, ch->o.sampling, ch->o.n_predict, next.think_off,
                                      1u << SESS_PARAM_THINK)) {
                chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
                return 0;
            }
            ch->o.think_off = next.think_off;
            ch->o.think_switch_given = true;
        }
        note(ch, C_DIM, "think: %s, %s", ch->o.think_off ? "off" : "on",
             ch->o.think_hide ? "reasoning hidden" : "reasoning shown dimmed");
        return 0;
    }
    ch->o.sampling = next.sampling;
    ch->o.n_predict = next.n_predict;
    ch->o.seed_set = next.seed_set;
    ch->o.given |= next.given; /* set: what a remote model's server is sent */
    /* what the user sets is the session's from now on (saved), and is sent to a remote server */
    if (sess_conv_keep_params(ch->conv, ch->o.sampling, ch->o.n_predict, ch->o.think_off,
                              cmd_opts_sess_params(next.given)))
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
    show_settings(ch);
    return 0;
}

/* /show's session and system lines */
static void show_conversation(struct chat *ch, char *line, size_t n)
{
    if (ch->name)
        snprintf(line, n, "session    '%s' (saved after every exchange)", ch->name);
    else if (ch->o.private_mode)
        snprintf(line, n, "session    private: nothing is written (no KV blocks, database rows, session or "
                          "history); /set private off ends it");
    else
        snprintf(line, n, "session    unnamed: no session (gone at exit unless /save NAME keeps it), but its KV "
                          "blocks and token ids stay in the store as a cache until evicted or collected "
                          "('kvchat sessions forget'); /set private on writes nothing");
    print_wrapped(ch, line);
    const char *sys = conv_system(ch);
    snprintf(line, n, "system     %s", sys ? sys : "(none)");
    for (char *s = line; *s; s++)
        if (*s == '\n')
            *s = ' ';
    print_wrapped(ch, line);
}

/* /show's line of where kvchat keeps its files (as `kvchat paths`) */
static void show_files(struct chat *ch, char *line, size_t size)
{
    struct cmd_paths p;
    cmd_paths_get(&p);
    snprintf(line, size, "files      database %s, KV blocks %s/, models %s/, config %s, history %s", p.database,
             p.kv_store, p.models, p.config[0] ? p.config : "(none)", p.history[0] ? p.history : "(none)");
    print_wrapped(ch, line);
}

static int slash_show(struct chat *ch, char *arg)
{
    (void)arg;
    char mem[32], line[24000];
    if (ch->l.remote) {
        char info[4600];
        cmd_remote_info(ch->l.remote, info, sizeof info);
        snprintf(line, sizeof line, "model      %s", info);
        print_wrapped(ch, line);
        show_conversation(ch, line, sizeof line);
        snprintf(line, sizeof line, "context    %" PRId64 " exchange%s, sent whole each turn (the server's prefix "
                                    "cache reuses what it has seen)",
                 sess_conv_n_exchanges(ch->conv), cmd_s(sess_conv_n_exchanges(ch->conv)));
        print_wrapped(ch, line);
        struct sess_conv_params cp = sess_conv_get_params(ch->conv);
        char sent[1024];
        cmd_remote_sent(ch->l.remote, &cp, sent, sizeof sent);
        snprintf(line, sizeof line, "sent       %s", sent);
        print_wrapped(ch, line);
        show_files(ch, line, sizeof line);
        return 0;
    }
    const struct llm_model_meta *m = llm_model_get_meta(ch->l.model);
    const struct llm_ctx *ctx = sess_conv_ctx(ch->conv);
    cmd_fmt_bytes(mem, sizeof mem, (double)llm_ctx_kv_bytes(ctx, llm_ctx_n_past(ctx)));
    snprintf(line, sizeof line, "model      %s (%s%s%s, template %s)", ch->l.path, m->arch,
             m->name[0] ? ", " : "", m->name, llm_template_name(ch->l.tmpl));
    print_wrapped(ch, line);
    show_conversation(ch, line, sizeof line);
    snprintf(line, sizeof line,
             "context    %" PRId64 " of %" PRId64 " tokens, %" PRId64 " exchange%s, KV %s in memory",
             sess_conv_n_tokens(ch->conv), llm_ctx_n_ctx(ctx), sess_conv_n_exchanges(ch->conv),
             cmd_s(sess_conv_n_exchanges(ch->conv)), mem);
    print_wrapped(ch, line);
    snprintf(line, sizeof line, "engine     %d thread%s, KV %s%s", llm_ctx_n_threads(ctx),
             cmd_s(llm_ctx_n_threads(ctx)), llm_type_name(llm_ctx_kv_type(ctx)),
             ch->o.no_cache ? ", --no-cache" : "");
    print_wrapped(ch, line);
    if (isatty(1))
        snprintf(line, sizeof line, "terminal   %d columns, word wrap %s", repl_width(1),
                 ch->o.wrap ? "on" : "off (/set wrap on)");
    else
        snprintf(line, sizeof line, "terminal   none: answers go to a pipe or file, never wrapped");
    print_wrapped(ch, line);
    show_files(ch, line, sizeof line);
    show_settings(ch);
    return 0;
}

static int slash_stats(struct chat *ch, char *arg)
{
    (void)arg;
    if (ch->have_last)
        stats_line(ch, &ch->last);
    else
        note(ch, C_DIM, "no answer yet");
    char line[512];
    int64_t ex = sess_conv_n_exchanges(ch->conv);
    if (ch->l.remote) {
        snprintf(line, sizeof line,
                 "conversation: %" PRId64 " exchange%s; this process: %" PRId64 " answer%s, %" PRId64
                 " prompt token%s from the server's cache, %" PRId64 " computed by it, %" PRId64 " generated",
                 ex, cmd_s(ex), ch->turns, cmd_s(ch->turns), ch->total_cached, cmd_s(ch->total_cached),
                 ch->total_prefilled, ch->total_generated);
        print_fit(ch, C_DIM, line);
        return 0;
    }
    snprintf(line, sizeof line,
             "conversation: %" PRId64 " of %" PRId64 " tokens, %" PRId64 " exchange%s; this process: %" PRId64
             " answer%s, %" PRId64 " token%s prefilled, %" PRId64 " reused, %" PRId64 " generated",
             sess_conv_n_tokens(ch->conv), llm_ctx_n_ctx(sess_conv_ctx(ch->conv)), ex, cmd_s(ex), ch->turns,
             cmd_s(ch->turns), ch->total_prefilled, cmd_s(ch->total_prefilled), ch->total_cached,
             ch->total_generated);
    print_fit(ch, C_DIM, line);
    return 0;
}

static int slash_clear(struct chat *ch, char *arg)
{
    (void)arg;
    int64_t ex = sess_conv_n_exchanges(ch->conv);
    if (ch->name) { /* as ollama's: a fresh context; the session stays as saved */
        const char *sys = conv_system(ch);
        char *system = sys ? strdup(sys) : NULL, *was = strdup(ch->name);
        if ((sys && !system) || !was || conv_new(ch, system)) {
            if (!was || (sys && !system))
                chat_err(ch, "out of memory");
            free(system);
            free(was);
            return 0;
        }
        note(ch, C_DIM, "session '%s' is kept as saved (%" PRId64 " exchange%s; /load %s goes back); a fresh "
             "unnamed chat begins%s", was, ex, cmd_s(ex), was, system ? " with its system prompt" : "");
        free(system);
        free(was);
        return 0;
    }
    if (sess_conv_clear(ch->conv) != SESS_OK) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        return 0;
    }
    note(ch, C_DIM, "cleared %" PRId64 " exchange%s; the system prompt stays", ex, cmd_s(ex));
    return 0;
}

static const struct slash_cmd slash_table[] = {
    {"/help", NULL, "this list (also /?)", SLASH_ARG_COMMAND, false, slash_help},
    {"/?", NULL, NULL, SLASH_ARG_COMMAND, false, slash_help},
    {"/sessions", NULL, "list saved sessions", SLASH_ARG_NONE, false, slash_sessions},
    {"/load", "NAME", "open a saved session with its own model (this chat is left)", SLASH_ARG_SESSION, true, slash_load},
    {"/save", "NAME", "save this chat as session NAME", SLASH_ARG_NONE, true, slash_save},
    {"/new", NULL, "start a new unnamed chat", SLASH_ARG_NONE, true, slash_new},
    {"/fork", "NAME", "copy this session as NAME and go on in the copy", SLASH_ARG_NONE, true, slash_fork},
    {"/system", "TEXT", "set the system prompt (restarts the conversation)", SLASH_ARG_NONE, true,
     slash_system},
    {"/read", "FILE", "send a text file as the next message", SLASH_ARG_FILE, true, slash_read},
    {"/undo", NULL, "drop the last exchange (asks in a saved session)", SLASH_ARG_NONE, true, slash_undo},
    {"/retry", NULL, "answer the last message again (asks in a saved session)", SLASH_ARG_NONE, true, slash_retry},
    {"/set", "KEY VALUE", "change a setting:", SLASH_ARG_SET_KEY, false, slash_set},
    {"/show", NULL, "model, session, system prompt, parameters", SLASH_ARG_NONE, false, slash_show},
    {"/stats", NULL, "tokens prefilled and reused, speed, KV bytes", SLASH_ARG_NONE, false, slash_stats},
    {"/clear", NULL, "start afresh with the system prompt (a session stays as saved)", SLASH_ARG_NONE, true,
     slash_clear},
    {"/exit", NULL, "leave (also /quit, /bye, Ctrl-D; an unsaved chat asks)", SLASH_ARG_NONE, true, slash_exit},
    {"/quit", NULL, NULL, SLASH_ARG_NONE, true, slash_exit},
    {"/bye", NULL, NULL, SLASH_ARG_NONE, true, slash_exit},
    {NULL, NULL, NULL, SLASH_ARG_NONE, false, NULL},
};

/* returns 1 to leave the chat */
static int run_slash(struct chat *ch, char *line)
{
    char *arg = line;
    while (*arg && *arg != ' ' && *arg != '\t')
        arg++;
    if (*arg)
        *arg++ = 0;
    while (*arg == ' ' || *arg == '\t')
        arg++;
    size_t n = strlen(arg);
    while (n && (arg[n - 1] == ' ' || arg[n - 1] == '\t'))
        arg[--n] = 0;
    const struct slash_cmd *hit = NULL;
    int n_hits = 0;
    char names[256] = "";
    for (const struct slash_cmd *s = slash_table; s->name; s++) {
        if (!strcmp(s->name, line)) {
            hit = s;
            n_hits = 1;
            break;
        }
        if (!strncmp(s->name, line, strlen(line)) && s->help) {
            hit = s;
            n_hits++;
            size_t k = strlen(names);
            snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", s->name);
        }
    }
    if (n_hits == 0) {
        chat_err(ch, "unknown command '%s' (/help lists them; // starts a message with /)", line);
        return 0;
    }
    if (n_hits > 1) {
        chat_err(ch, "ambiguous command '%s': %s", line, names);
        return 0;
    }
    if (hit->full_name && strcmp(hit->name, line)) {
        chat_err(ch, "'%s' runs nothing: type %s in full (commands that leave the chat or change the "
                     "conversation are never abbreviated)", line, hit->name);
        return 0;
    }
    if (hit->args && !*arg && hit->exec != slash_set && hit->exec != slash_system) {
        chat_err(ch, "usage: %s %s", hit->name, hit->args);
        return 0;
    }
    return hit->exec(ch, arg);
}

/* ==== completion ==== */

static bool complete(void *ud, const char *line, int start, repl_add_fn add, void *acc)
{
    struct chat *ch = ud;
    /* the words before the one being completed */
    const char *p = line;
    while (*p == ' ')
        p++;
    if (p - line >= start) {
        if (*p == '/' || start == (int)(p - line))
            for (const struct slash_cmd *s = slash_table; s->name; s++)
                add(acc, s->name);
        return false;
    }
    if (*p != '/')
        return false;
    size_t len = strcspn(p, " \t");
    const struct slash_cmd *cmd = NULL;
    for (const struct slash_cmd *s = slash_table; s->name; s++)
        if (strlen(s->name) == len && !strncmp(s->name, p, len))
            cmd = s;
    if (!cmd)
        return false;
    /* only the first argument completes */
    const char *q = p + len;
    while (*q == ' ' || *q == '\t')
        q++;
    if (q - line != start)
        return false;
    switch (cmd->complete) {
    case SLASH_ARG_SESSION: {
        if (store_need(ch))
            return false;
        struct sess_info *list;
        int64_t n;
        if (sess_list(ch->st, &list, &n))
            return false;
        for (int64_t i = 0; i < n; i++)
            add(acc, list[i].name);
        sess_list_free(list, n);
        break;
    }
    case SLASH_ARG_SET_KEY:
        for (const char *const *k = cmd_opts_set_keys(); *k; k++)
            add(acc, *k);
        add(acc, "system");
        add(acc, "parameter");
        break;
    case SLASH_ARG_COMMAND:
        for (const struct slash_cmd *s = slash_table; s->name; s++)
            add(acc, s->name);
        break;
    case SLASH_ARG_FILE:
        return true;
    case SLASH_ARG_NONE:
        break;
    }
    return false;
}

/* ==== input: one message, maybe of several lines ==== */

/* an input being put together from lines, at most CMD_INPUT_MAX bytes */
struct input {
    struct cmd_buf b;
    bool big; /* it would have been longer than CMD_INPUT_MAX */
};

static int input_add(struct input *in, const char *p, size_t n)
{
    return cmd_buf_add(&in->b, p, n, CMD_INPUT_MAX, &in->big);
}

/* the status for an input that could not be put together (it is freed) */
static enum repl_status input_fail(struct input *in)
{
    free(in->b.s);
    return in->big ? REPL_TOO_LONG : REPL_EOF;
}

/* a line opening a """ block: the text after the quotes, else NULL */
static char *block_open(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return strncmp(s, "\"\"\"", 3) ? NULL : s + 3;
}

/* does s end a """ block (blanks may follow the quotes)? Then s is cut
 * before them, and blanks before them too when nothing else is there */
static bool block_close(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n < 3 || strncmp(s + n - 3, "\"\"\"", 3))
        return false;
    n -= 3;
    s[n] = 0;
    if (strspn(s, " \t") == n)
        s[0] = 0;
    return true;
}

/*
 * Read one input: a line; lines joined while one ends in a backslash; or a
 * """ block (the end of input also ends these two). A block opens with a
 * line starting with """ and closes with a line ending with """; text on
 * those two lines belongs to the message, as ollama takes it ("""hello ...
 * world"""; """one line""" is a message on its own). *text gets it
 * (malloc'd). Returns REPL_LINE, or another status (nothing in *text):
 * Ctrl-C drops everything typed for this input; REPL_TOO_LONG for an input
 * of more than CMD_INPUT_MAX bytes.
 */
static enum repl_status read_input(struct chat *ch, const char *prompt, char **text)
{
    char *line;
    struct input in = {0};
    *text = NULL;
    enum repl_status st = repl_read(ch->repl, prompt, &line);
    if (st != REPL_LINE)
        return st;
    const char *cont = ch->interactive ? "... " : "";
    char *rest = block_open(line);
    if (rest) {
        bool first = true, done = block_close(rest);
        int r = 0;
        if (*rest || done) { /* the opening line's own text */
            r = input_add(&in, rest, strlen(rest));
            first = false;
        }
        free(line);
        if (r)
            return input_fail(&in);
        while (!done) {
            st = repl_read(ch->repl, cont, &line);
            if (st == REPL_EOF && ch->interactive) { /* Ctrl-D: the block is not sent */
                free(in.b.s);
                note(ch, C_DIM, "[Ctrl-D: the unfinished \"\"\" block is discarded, nothing was sent]");
                return REPL_INTERRUPT;
            }
            if (st == REPL_EOF && !first) /* the end of piped input ends the block too */
                break;
            if (st != REPL_LINE) {
                free(in.b.s);
                return st;
            }
            done = block_close(line);
            if (!done || *line) { /* a closing line adds its text, if any */
                r = (first ? 0 : input_add(&in, "\n", 1)) || input_add(&in, line, strlen(line));
                first = false;
            }
            free(line);
            if (r)
                return input_fail(&in);
        }
        if (!in.b.s && input_add(&in, "", 0)) /* an empty block is an empty message */
            return input_fail(&in);
        *text = in.b.s;
        return REPL_LINE;
    }
    for (;;) {
        size_t n = strlen(line);
        bool more = n > 0 && line[n - 1] == '\\';
        int r = input_add(&in, line, more ? n - 1 : n) || (more && input_add(&in, "\n", 1));
        free(line);
        if (r)
            return input_fail(&in);
        if (!more)
            break;
        st = repl_read(ch->repl, cont, &line);
        if (st == REPL_EOF) /* the end of input ends the message too */
            break;
        if (st != REPL_LINE) {
            free(in.b.s);
            return st;
        }
    }
    *text = in.b.s;
    return REPL_LINE;
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
        if (g_quit || ch->out_broken)
            return g_quit ? CMD_EXIT_INTERRUPTED : CMD_EXIT_OK;
        make_prompt(ch, prompt, sizeof prompt);
        char *text;
        enum repl_status st = read_input(ch, prompt, &text);
        if (st == REPL_TOO_LONG) {
            chat_err(ch, "cannot read the input: a message or line is larger than %s; stopped reading",
                     CMD_INPUT_MAX_TEXT);
            return CMD_EXIT_MODEL;
        }
        if (st == REPL_EOF && !may_leave(ch))
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
            int leave = cmd ? run_slash(ch, cmd) : 0;
            free(cmd);
            free(text);
            if (leave)
                return CMD_EXIT_OK;
            continue;
        }
        say(ch, t[0] == '/' ? t + 1 : text);
        free(text);
    }
}

/* ==== the command ==== */

static int chat_exec(int argc, char **argv)
{
    struct chat ch;
    memset(&ch, 0, sizeof ch);
    const char *session = NULL;
    char last[256];
    cmd_opts_init(&ch.o);
    int rc = cmd_opts_config(&ch.o);
    bool dashdash = false, saw_chat = false, cont = false;
    /* from the table argv[0] is "chat"; when options came first, the program */
    bool routed = !strcmp(argv[0], "chat");
    for (int i = 1; !rc && i < argc;) {
        int r = dashdash ? 0 : cmd_opts_take(&cmd_chat_entry, &ch.o, argc, argv, &i);
        if (r < 0) {
            rc = CMD_EXIT_USAGE;
        } else if (r == 0) {
            const char *a = argv[i++];
            if (!dashdash && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
                cmd_opts_free(&ch.o);
                return cmd_help(&cmd_chat_entry);
            } else if (!dashdash && !strcmp(a, "--")) {
                dashdash = true;
            } else if (!dashdash && (!strcmp(a, "-c") || !strcmp(a, "--continue"))) {
                cont = true;
            } else if (!dashdash && !strcmp(a, "--yes")) {
                ch.yes = true;
            } else if (!dashdash && a[0] == '-' && a[1]) {
                rc = cmd_usage_error(&cmd_chat_entry, "unknown option '%s'", a);
            } else if (!session && !saw_chat && !routed && !strcmp(a, "chat")) {
                /* `kvchat -m M chat NAME`: options came before the command */
                saw_chat = true;
            } else if (session) {
                rc = cmd_usage_error(&cmd_chat_entry, "expected one SESSION name, got '%s' and '%s'",
                                     session, a);
            } else {
                session = a;
            }
        }
    }
    if (!rc && cont && session)
        rc = cmd_usage_error(&cmd_chat_entry, "-c/--continue and a SESSION name: give one of them");
    if (!rc && ch.o.private_mode && (session || cont))
        rc = cmd_usage_error(&cmd_chat_entry, "a private chat (--private, or 'private = true' in the config file) "
                                              "saves nothing, so it opens no session: --no-private opens one");
    if (!rc)
        rc = cmd_opts_finish(&cmd_chat_entry, &ch.o);
    if (!rc && cont && !(rc = cmd_last_session(last, sizeof last)))
        session = last; /* the session changed last */
    if (rc) {
        cmd_opts_free(&ch.o);
        return rc;
    }
    ch.ui = isatty(1) ? stdout : stderr;
    ch.color = cmd_color_ok(ch.ui);
    if (cmd_answer_init(&ch.ans, stdout, true, ch.color))
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    ch.interactive = isatty(0);
    wrap_init(&ch.wrap, stdout);
    /* the store: sessions, and the KV blocks of every prompt (with
     * --no-cache sessions are only read from it) */
    if (ch.o.private_mode)
        cmd_store_open_private(&ch.st); /* read-only, and only if there is one */
    else if (cmd_store_open(true, &ch.st)) {
        if (session) {
            wrap_free(&ch.wrap);
            cmd_answer_free(&ch.ans);
            cmd_opts_free(&ch.o);
            return CMD_EXIT_SESSION;
        }
        fprintf(stderr, "kvchat: the KV cache on disk is off for this chat\n");
    }
    /* a name that is not a session yet must be one the store accepts */
    int64_t sid;
    if (session && sess_find(ch.st, session, &sid) != SESS_OK && !name_ok(&ch, session)) {
        sess_store_close(ch.st);
        wrap_free(&ch.wrap);
        cmd_answer_free(&ch.ans);
        cmd_opts_free(&ch.o);
        return CMD_EXIT_USAGE;
    }
    /* ollama's `chat MODEL`: a new session's name that names a store model
     * is refused, rather than an empty session named like the model */
    if (session && !ch.o.model && sess_find(ch.st, session, &sid) != SESS_OK && cmd_is_store_model(session)) {
        sess_store_close(ch.st);
        wrap_free(&ch.wrap);
        cmd_answer_free(&ch.ans);
        cmd_opts_free(&ch.o);
        return cmd_usage_error(&cmd_chat_entry,
                               "'%s' is a model in the store, not a session: did you mean -m %s? (a session "
                               "named so needs -m too: kvchat chat -m MODEL %s)",
                               session, session, session);
    }
    char own_model[4096]; /* an existing session opens with its own model */
    rc = cmd_session_model(&ch.o, session, own_model, sizeof own_model);
    if (!rc)
        rc = cmd_llm_open(&ch.o, true, &ch.l);
    if (rc) {
        sess_store_close(ch.st);
        wrap_free(&ch.wrap);
        cmd_answer_free(&ch.ans);
        cmd_opts_free(&ch.o);
        return rc;
    }
    signals_install();
    if (conv_new(&ch, ch.o.system)) {
        rc = CMD_EXIT_MODEL;
    } else if (session) {
        if (ch.o.no_cache)
            cmd_term_printf(stderr, "kvchat: --no-cache: session '%s' is read, computed again, and not written\n",
                    session);
        rc = conv_attach(&ch, session, true);
        if (!rc && ch.o.system) {
            const char *s = conv_system(&ch);
            if (!s || strcmp(s, ch.o.system))
                note(&ch, C_WARN, "session '%s' keeps its own system prompt; /system TEXT changes it",
                     session);
        }
    }
    if (!rc) {
        struct cmd_paths paths;
        cmd_paths_get(&paths);
        struct repl_params rp = {
            .history_path = paths.history[0] ? paths.history : NULL,
            .complete = complete,
            .ud = &ch,
            .interrupt = &g_interrupt,
            .quit = &g_quit,
            .prompt_out = ch.ui,
            .max_line = CMD_INPUT_MAX,
            .history_private = ch.o.private_mode,
        };
        const char *warning = NULL;
        ch.repl = repl_open(&rp, &warning);
        if (!ch.repl) {
            rc = cmd_fail(CMD_EXIT_MODEL, "out of memory");
        } else {
            if (warning)
                chat_err(&ch, "%s", warning);
            if (ch.interactive) {
                const char *arch = ch.l.remote ? "remote" : llm_model_get_meta(ch.l.model)->arch;
                const char *base = ch.l.remote ? NULL : strrchr(ch.l.path, '/');
                /* the session first; wrapped at the terminal's width, nothing cut */
                char head[5400];
                snprintf(head, sizeof head, "kvchat %s · %s%s · %s (%s) · /help for commands, Ctrl-D to leave",
                         KVCHAT_VERSION, ch.name ? "session " : ch.o.private_mode ? "private chat" : "unnamed chat",
                         ch.name ? ch.name : "",
                         ch.l.remote ? cmd_remote_name(ch.l.remote) : base ? base + 1 : ch.l.path, arch);
                print_fit(&ch, C_DIM, head);
                if (!ch.name)
                    note(&ch, C_DIM, ch.o.private_mode
                                         ? "private: the KV blocks on disk are read, nothing is written"
                                         : "not saved as a session, but its KV blocks and token ids stay on disk "
                                           "as a cache (--private: none)");
                if (ch.name && sess_conv_n_exchanges(ch.conv) > 0) {
                    note(&ch, C_DIM, "session '%s': %" PRId64 " exchange%s so far; the last:", ch.name,
                         sess_conv_n_exchanges(ch.conv), cmd_s(sess_conv_n_exchanges(ch.conv)));
                    show_last_exchange(&ch);
                }
            }
            rc = chat_loop(&ch);
        }
    }
    repl_close(ch.repl);
    if (ch.conv)
        sess_conv_free(ch.conv);
    if (ch.st)
        sess_store_close(ch.st);
    free(ch.name);
    for (int i = 0; i < CMD_OPTS_MAX_STOP; i++)
        free(ch.stop[i]);
    wrap_free(&ch.wrap);
    cmd_answer_free(&ch.ans);
    cmd_llm_close(&ch.l);
    cmd_opts_free(&ch.o);
    return rc;
}

bool cmd_chat_session_exists(const char *name)
{
    char err[256];
    struct sess_store *st;
    if (cmd_store_open_existing(&st, err, sizeof err) != 1) /* no store: no session (and none is made) */
        return false;
    int64_t id;
    bool found = sess_find(st, name, &id) == SESS_OK;
    sess_store_close(st);
    return found;
}

const struct cmd_entry cmd_chat_entry = {
    .name = "chat",
    .summary = "chat with a model (the default command)",
    .usage = chat_usage,
    .exec = chat_exec,
};
