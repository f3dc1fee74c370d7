/*
 * chat-slash.c - the chat's slash commands (/help, /load, /save, /set, ...):
 * one table, slash_table, as cli/cmd.c's is of the commands. An entry
 * names the command, its argument, its /help line, how Tab completes its
 * argument, and whether it runs only by its full name (what leaves the
 * chat or changes the conversation: a slip of the fingers must not).
 * To add one: write slash_NAME(ch, arg) below and list it in the table.
 * /set, the longest, is cli/chat-set.c's.
 * The chat itself (its state, turns, conversations) is cli/cmd-chat.c's
 * (cli/chat.h).
 */
#include "cli/chat.h"
#include "cli/conv.h"
#include "cli/home.h"
#include "cli/remote.h"
#include "cli/term.h"
#include "models/mdl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


enum slash_arg { SLASH_ARG_NONE, SLASH_ARG_SESSION, SLASH_ARG_SET_KEY, SLASH_ARG_COMMAND, SLASH_ARG_FILE };

struct slash_cmd {
    const char *name; /* with its slash */
    const char *args;
    const char *help; /* NULL: an alias, not listed by /help nor taken by prefix */
    enum slash_arg complete;
    /* runs only by its full name: it leaves the chat or changes the
     * conversation, which a slip of the fingers must not do (/e, /r) */
    bool full_name;
    bool args_optional; /* without args it shows the setting (/set, /system) */
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
        int head = snprintf(entry, sizeof entry, "  %s%-16s%s ", chat_col(ch, C_BOLD), left, chat_col(ch, C_RESET));
        snprintf(entry + head, sizeof entry - (size_t)head, "%s%s%s", s->help, keys[0] ? " " : "", keys);
        chat_ui_text(ch, C_RESET, entry, (size_t)head, 19, true); /* continuations under the text */
    }
    chat_ui_text(ch, C_RESET,
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
bool chat_may_leave(struct chat *ch)
{
    if (ch->name || ch->o.private_mode || !ch->interactive || chat_quit || sess_conv_n_exchanges(ch->conv) == 0)
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
                chat_note(ch, C_DIM, "still here");
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
    return chat_may_leave(ch) ? 1 : 0;
}

static int slash_sessions(struct chat *ch, char *arg)
{
    (void)arg;
    if (chat_store_need(ch))
        return 0;
    struct sess_info *list;
    int64_t n;
    if (sess_list(ch->st, &list, &n)) {
        chat_err(ch, "%s", sess_errmsg(ch->st));
        return 0;
    }
    if (n == 0)
        chat_note(ch, C_DIM, "no saved sessions yet: /save NAME saves this chat");
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
        chat_print_fit(ch, cur ? C_BOLD : C_RESET, line);
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
    struct sess_info info;
    if (sess_peek(ch->st, name, &info)) {
        chat_err(ch, "%s", sess_errmsg(ch->st));
        return -1;
    }
    struct stat sb;
    int bad = !info.model_path || !info.model_path[0] || stat(info.model_path, &sb) != 0;
    if (bad)
        chat_err(ch, "session '%s' was saved with model '%s', which is gone: put it back, or go on with another "
                     "with kvchat %s -m MODEL --switch-model", name, info.model_path ? info.model_path : "?", name);
    char *path = bad ? NULL : strdup(info.model_path);
    sess_info_free(&info);
    if (!path) {
        if (!bad)
            chat_err(ch, "out of memory");
        return -1;
    }
    const char *was_model = ch->o.model;
    char *saved_buf = ch->model_buf;
    ch->model_buf = path;
    ch->o.model = ch->model_buf;
    struct cmd_llm l;
    if (cmd_llm_open(&ch->o, false, &l)) {
        ch->model_buf = saved_buf;
        ch->o.model = was_model;
        free(path);
        return -1;
    }
    char err[1024];
    struct sess_conv *conv;
    struct sess_conv_params p = cmd_opts_conv_params(&ch->o, &l);
    p.system = NULL;
    if (sess_conv_init(ch->st, p, &conv, err, sizeof err)) {
        chat_err(ch, "cannot start a conversation: %s", err);
        cmd_llm_close(&l);
        ch->model_buf = saved_buf;
        ch->o.model = was_model;
        free(path);
        return -1;
    }
    struct sess_conv *old_conv = ch->conv;
    struct cmd_llm old_l = ch->l;
    ch->conv = conv;
    ch->l = l;
    if (chat_conv_attach(ch, name, false) != 0) { /* said; back to what was */
        sess_conv_free(conv);
        cmd_llm_close(&ch->l);
        ch->conv = old_conv;
        ch->l = old_l;
        ch->model_buf = saved_buf;
        ch->o.model = was_model;
        free(path);
        return -1;
    }
    sess_conv_free(old_conv);
    cmd_llm_close(&old_l);
    free(saved_buf);
    const char *base = strrchr(path, '/');
    chat_note(ch, C_DIM, "session '%s' was saved with model %s: switched to it", name, base ? base + 1 : path);
    return 0;
}

static int slash_load(struct chat *ch, char *arg)
{
    if (ch->name && !ch->pending && !strcmp(ch->name, arg)) {
        chat_note(ch, C_DIM, "session '%s' is already open", arg);
        return 0;
    }
    if (chat_private_refuses(ch, "/load") || chat_session_available(ch, arg) || !chat_may_discard(ch, "/load"))
        return 0;
    ch->model_switch = !ch->o.switch_model;
    int rc = chat_conv_attach(ch, arg, false);
    ch->model_switch = false;
    if (rc == -SESS_ERR_MODEL)
        rc = load_with_own_model(ch, arg);
    if (rc != 0)
        return 0;
    if (ch->l.remote)
        chat_note(ch, C_DIM, "session '%s': %" PRId64 " exchange%s", arg, sess_conv_n_exchanges(ch->conv),
             cmd_s(sess_conv_n_exchanges(ch->conv)));
    else
        chat_note(ch, C_DIM, "session '%s': %" PRId64 " exchange%s, %" PRId64 " token%s", arg,
             sess_conv_n_exchanges(ch->conv), cmd_s(sess_conv_n_exchanges(ch->conv)),
             sess_conv_n_tokens(ch->conv), cmd_s(sess_conv_n_tokens(ch->conv)));
    chat_show_last_exchange(ch);
    return 0;
}

static int slash_save(struct chat *ch, char *arg)
{
    if (chat_private_refuses(ch, "/save") || !chat_name_ok(ch, arg))
        return 0;
    if (chat_store_need(ch))
        return 0;
    int64_t id;
    if (ch->name && !ch->pending && !strcmp(ch->name, arg)) {
        chat_note(ch, C_DIM, "this chat is session '%s': it is saved after every exchange", arg);
        return 0;
    }
    if (sess_find(ch->st, arg, &id) == 0) {
        chat_err(ch, "session '%s' exists: /load %s opens it; choose another name", arg, arg);
        return 0;
    }
    if (ch->name && !ch->pending) {
        /* a named chat: rename it (the conversation holds its lock) */
        if (sess_conv_rename(ch->conv, arg)) {
            chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
            return 0;
        }
        chat_note(ch, C_DIM, "session '%s' is now '%s'", ch->name, arg);
        free(ch->name);
        ch->name = strdup(arg);
        return 0;
    }
    if (chat_conv_attach(ch, arg, true) == 0)
        chat_note(ch, C_DIM, "saved as session '%s' (and after every exchange from now on)", arg);
    return 0;
}

static int slash_fork(struct chat *ch, char *arg)
{
    if (!ch->name || ch->pending) /* nothing saved yet: this chat saved as NAME */
        return slash_save(ch, arg);
    if (chat_private_refuses(ch, "/fork") || !chat_name_ok(ch, arg) || chat_store_need(ch))
        return 0;
    if (sess_fork(ch->st, ch->name, arg, -1)) {
        chat_err(ch, "%s", sess_errmsg(ch->st));
        return 0;
    }
    char *old = strdup(ch->name);
    if (chat_conv_attach(ch, arg, false) == 0)
        chat_note(ch, C_DIM, "forked '%s' as '%s'; you are now in '%s' ('%s' stays as it was)", old, arg,
             arg, old);
    free(old);
    return 0;
}

static int slash_new(struct chat *ch, char *arg)
{
    (void)arg;
    if (!chat_may_discard(ch, "/new"))
        return 0;
    const char *was = ch->name;
    if (was && ch->pending)
        chat_note(ch, C_DIM, "session '%s' was not made (it is made with its first answer); a new unnamed chat "
                             "begins", was);
    else if (was)
        chat_note(ch, C_DIM, "session '%s' is saved; a new unnamed chat begins", was);
    chat_conv_new(ch, ch->o.system);
    return 0;
}

int chat_slash_system(struct chat *ch, char *arg)
{
    if (!*arg) {
        const char *s = chat_conv_system(ch);
        chat_note(ch, C_RESET, s ? "system prompt: %s" : "no system prompt%s", s ? s : "");
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
        if (!chat_confirm(ch, q, ch->name && !ch->o.no_cache ? what : NULL)) {
            chat_note(ch, C_DIM, "the system prompt is unchanged");
            return 0;
        }
    }
    if (sess_conv_set_system(ch->conv, arg) != SESS_OK) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        return 0;
    }
    chat_note(ch, C_DIM, "new system prompt set%s", ex ? "; the conversation starts again" : "");
    return 0;
}

/* a change to the last exchange (/VERB: /undo, /retry): -1 (said) when
 * there is none, or in a named session unless confirmed; 0 in an
 * unnamed chat or with --no-cache (nothing is written) */
static int last_exchange_change(struct chat *ch, const char *verb, const char *question)
{
    if (sess_conv_n_exchanges(ch->conv) == 0) {
        chat_note(ch, C_DIM, "nothing to %s", verb);
        return -1;
    }
    if (!ch->name || ch->o.no_cache)
        return 0;
    char q[512], what[512];
    snprintf(q, sizeof q, question, ch->name);
    snprintf(what, sizeof what, "/%s would change session '%s'", verb, ch->name);
    if (chat_confirm(ch, q, what))
        return 0;
    if (ch->interactive)
        chat_note(ch, C_DIM, "session '%s' is unchanged", ch->name);
    return -1;
}

static int slash_undo(struct chat *ch, char *arg)
{
    (void)arg;
    if (last_exchange_change(ch, "undo", "Drop the last exchange from session '%s'? It cannot be brought back. [y/N] "))
        return 0;
    if (sess_conv_undo(ch->conv) != SESS_OK) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        return 0;
    }
    chat_note(ch, C_DIM, "dropped the last exchange (%" PRId64 " left)", sess_conv_n_exchanges(ch->conv));
    return 0;
}

static int slash_retry(struct chat *ch, char *arg)
{
    (void)arg;
    if (last_exchange_change(ch, "retry", "Replace the last answer saved in session '%s'? [y/N] "))
        return 0;
    struct sess_turn_stats ts;
    memset(&ts, 0, sizeof ts);
    chat_answer_begin(ch);
    int rc = sess_conv_retry(ch->conv, chat_on_text, ch, &chat_interrupt, &ts);
    chat_answer_end(ch);
    chat_turn_done(ch, rc, &ts);
    chat_turn_failed(ch, rc);
    return 0;
}

/* /read FILE: the file's text is the next message, after a note of its size */
static int slash_read(struct chat *ch, char *arg)
{
    char *path, err[4600], *text;
    size_t len;
    const char *home = getenv("HOME");
    if (arg[0] == '~' && arg[1] == '/' && home && *home)
        path = base_strdup_printf("%s%s", home, arg + 1);
    else
        path = strdup(arg);
    int rc = path ? cmd_read_text(path, CMD_INPUT_MAX, &text, &len, err, sizeof err)
                  : (snprintf(err, sizeof err, "out of memory"), -1);
    free(path);
    if (rc) {
        chat_err(ch, "%s", err);
        return 0;
    }
    /* the file's last newline is not the message's (as with run -f and stdin) */
    size_t size = len;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = 0;
    if (ch->l.remote) { /* the server counts tokens (and says when it is too long) */
        if (len == 0)
            chat_note(ch, C_DIM, "'%s' holds no text: nothing sent", arg);
        else {
            chat_note(ch, C_DIM, "[read '%s': %zu bytes]", arg, size);
            chat_say(ch, text);
        }
        free(text);
        return 0;
    }
    /* the exchanges can be dropped to make room; the system prompt cannot */
    int64_t n_tok, kept = sess_conv_n_tokens(ch->conv);
    const char *sys = chat_conv_system(ch);
    if (sess_conv_n_exchanges(ch->conv) > 0) {
        int32_t r = sys ? llm_tokenize(ch->l.vocab, sys, strlen(sys), NULL, 0, true, false) : 0;
        kept = r < 0 && r != INT32_MIN ? -(int64_t)r : 0;
    }
    int64_t room = llm_ctx_n_ctx(sess_conv_ctx(ch->conv)) - kept;
    if (len == 0) {
        chat_note(ch, C_DIM, "'%s' holds no text: nothing sent", arg);
    } else if (cmd_conv_text_fits(ch->conv, ch->o.special, arg, text, len, room, &n_tok, err, sizeof err)) {
        chat_err(ch, "%s", err);
    } else {
        chat_note(ch, C_DIM, "[read '%s': %zu bytes, %" PRId64 " token%s]", arg, size, n_tok, n_tok == 1 ? "" : "s");
        chat_say(ch, text);
    }
    free(text);
    return 0;
}

/* /show's session and system lines */
static void show_conversation(struct chat *ch, char *line, size_t n)
{
    if (ch->name && ch->pending)
        snprintf(line, n, "session    '%s' (new: made with its first answer, then saved after every exchange)",
                 ch->name);
    else if (ch->name)
        snprintf(line, n, "session    '%s' (saved after every exchange)", ch->name);
    else if (ch->o.private_mode)
        snprintf(line, n, "session    private: nothing is written (no KV blocks, database rows, session or "
                          "history); /set private off ends it");
    else
        snprintf(line, n, "session    unnamed: no session (gone at exit unless /save NAME keeps it), but its KV "
                          "blocks and token ids stay in the store as a cache until evicted or collected "
                          "('kvchat sessions forget'); /set private on writes nothing");
    chat_print_wrapped(ch, line);
    const char *sys = chat_conv_system(ch);
    snprintf(line, n, "system     %s", sys ? sys : "(none)");
    for (char *s = line; *s; s++)
        if (*s == '\n')
            *s = ' ';
    chat_print_wrapped(ch, line);
}

/* /show's line of where kvchat keeps its files (as `kvchat paths`) */
static void show_files(struct chat *ch, char *line, size_t size)
{
    struct cmd_paths p;
    cmd_paths_get(&p);
    snprintf(line, size, "files      database %s, KV blocks %s/, models %s/, config %s, history %s",
             p.database ? p.database : "", p.kv_store ? p.kv_store : "", p.models ? p.models : "",
             p.config ? p.config : "(none)", p.history ? p.history : "(none)");
    cmd_paths_free(&p);
    chat_print_wrapped(ch, line);
}

static int slash_show(struct chat *ch, char *arg)
{
    (void)arg;
    char mem[32], line[24000];
    if (ch->l.remote) {
        char info[4600];
        cmd_remote_info(ch->l.remote, info, sizeof info);
        snprintf(line, sizeof line, "model      %s", info);
        chat_print_wrapped(ch, line);
        show_conversation(ch, line, sizeof line);
        snprintf(line, sizeof line, "context    %" PRId64 " exchange%s, sent whole each turn (the server's prefix "
                                    "cache reuses what it has seen)",
                 sess_conv_n_exchanges(ch->conv), cmd_s(sess_conv_n_exchanges(ch->conv)));
        chat_print_wrapped(ch, line);
        struct sess_conv_params cp = sess_conv_get_params(ch->conv);
        char sent[1024];
        cmd_remote_sent(ch->l.remote, &cp, sent, sizeof sent);
        snprintf(line, sizeof line, "sent       %s", sent);
        chat_print_wrapped(ch, line);
        show_files(ch, line, sizeof line);
        return 0;
    }
    const struct llm_model_meta *m = llm_model_get_meta(ch->l.model);
    const struct llm_ctx *ctx = sess_conv_ctx(ch->conv);
    cmd_fmt_bytes(mem, sizeof mem, (double)llm_ctx_kv_bytes(ctx, llm_ctx_n_past(ctx)));
    snprintf(line, sizeof line, "model      %s (%s%s%s, template %s)", ch->l.path, m->arch,
             m->name[0] ? ", " : "", m->name, llm_template_name(ch->l.tmpl));
    chat_print_wrapped(ch, line);
    show_conversation(ch, line, sizeof line);
    snprintf(line, sizeof line,
             "context    %" PRId64 " of %" PRId64 " tokens, %" PRId64 " exchange%s, KV %s in memory",
             sess_conv_n_tokens(ch->conv), llm_ctx_n_ctx(ctx), sess_conv_n_exchanges(ch->conv),
             cmd_s(sess_conv_n_exchanges(ch->conv)), mem);
    chat_print_wrapped(ch, line);
    snprintf(line, sizeof line, "engine     %d thread%s, KV %s%s", llm_ctx_n_threads(ctx),
             cmd_s(llm_ctx_n_threads(ctx)), llm_type_name(llm_ctx_kv_type(ctx)),
             ch->o.no_cache ? ", --no-cache" : "");
    chat_print_wrapped(ch, line);
    if (isatty(1))
        snprintf(line, sizeof line, "terminal   %d columns, word wrap %s", repl_width(1),
                 ch->o.wrap ? "on" : "off (/set wrap on)");
    else
        snprintf(line, sizeof line, "terminal   none: answers go to a pipe or file, never wrapped");
    chat_print_wrapped(ch, line);
    show_files(ch, line, sizeof line);
    chat_show_settings(ch);
    return 0;
}

static int slash_stats(struct chat *ch, char *arg)
{
    (void)arg;
    if (ch->have_last)
        chat_stats_line(ch, &ch->last);
    else
        chat_note(ch, C_DIM, "no answer yet");
    char line[512];
    int64_t ex = sess_conv_n_exchanges(ch->conv);
    if (ch->l.remote) {
        snprintf(line, sizeof line,
                 "conversation: %" PRId64 " exchange%s; this process: %" PRId64 " answer%s, %" PRId64
                 " prompt token%s from the server's cache, %" PRId64 " computed by it, %" PRId64 " generated",
                 ex, cmd_s(ex), ch->turns, cmd_s(ch->turns), ch->total_cached, cmd_s(ch->total_cached),
                 ch->total_prefilled, ch->total_generated);
        chat_print_fit(ch, C_DIM, line);
        return 0;
    }
    snprintf(line, sizeof line,
             "conversation: %" PRId64 " of %" PRId64 " tokens, %" PRId64 " exchange%s; this process: %" PRId64
             " answer%s, %" PRId64 " token%s prefilled, %" PRId64 " reused, %" PRId64 " generated",
             sess_conv_n_tokens(ch->conv), llm_ctx_n_ctx(sess_conv_ctx(ch->conv)), ex, cmd_s(ex), ch->turns,
             cmd_s(ch->turns), ch->total_prefilled, cmd_s(ch->total_prefilled), ch->total_cached,
             ch->total_generated);
    if (ch->total_passes > 0)
        snprintf(line + strlen(line), sizeof line - strlen(line),
                 "; %" PRId64 " drafted in %" PRId64 " pass%s, %" PRId64 " of them accepted", ch->total_drafted,
                 ch->total_passes, ch->total_passes == 1 ? "" : "es", ch->total_accepted);
    chat_print_fit(ch, C_DIM, line);
    return 0;
}

static int slash_clear(struct chat *ch, char *arg)
{
    (void)arg;
    int64_t ex = sess_conv_n_exchanges(ch->conv);
    if (ch->name && !ch->pending) { /* as ollama's: a fresh context; the session stays as saved */
        const char *sys = chat_conv_system(ch);
        char *system = sys ? strdup(sys) : NULL, *was = strdup(ch->name);
        if ((sys && !system) || !was || chat_conv_new(ch, system)) {
            if (!was || (sys && !system))
                chat_err(ch, "out of memory");
            free(system);
            free(was);
            return 0;
        }
        chat_note(ch, C_DIM, "session '%s' is kept as saved (%" PRId64 " exchange%s; /load %s goes back); a fresh "
             "unnamed chat begins%s", was, ex, cmd_s(ex), was, system ? " with its system prompt" : "");
        free(system);
        free(was);
        return 0;
    }
    if (sess_conv_clear(ch->conv) != SESS_OK) {
        chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
        return 0;
    }
    chat_note(ch, C_DIM, "cleared %" PRId64 " exchange%s; the system prompt stays", ex, cmd_s(ex));
    return 0;
}

static const struct slash_cmd slash_table[] = {
    {.name = "/help", .help = "this list (also /?)", .complete = SLASH_ARG_COMMAND, .exec = slash_help},
    {.name = "/?", .complete = SLASH_ARG_COMMAND, .exec = slash_help},
    {.name = "/sessions", .help = "list saved sessions", .exec = slash_sessions},
    {.name = "/load", .args = "NAME", .help = "open a saved session with its own model (this chat is left)",
     .complete = SLASH_ARG_SESSION, .full_name = true, .exec = slash_load},
    {.name = "/save", .args = "NAME", .help = "save this chat as session NAME", .full_name = true, .exec = slash_save},
    {.name = "/new", .help = "start a new unnamed chat", .full_name = true, .exec = slash_new},
    {.name = "/fork", .args = "NAME", .help = "copy this session as NAME and go on in the copy", .full_name = true,
     .exec = slash_fork},
    {.name = "/system", .args = "TEXT", .help = "set the system prompt (restarts the conversation)",
     .full_name = true, .args_optional = true, .exec = chat_slash_system},
    {.name = "/read", .args = "FILE", .help = "send a text file as the next message", .complete = SLASH_ARG_FILE,
     .full_name = true, .exec = slash_read},
    {.name = "/undo", .help = "drop the last exchange (asks in a saved session)", .full_name = true,
     .exec = slash_undo},
    {.name = "/retry", .help = "answer the last message again (asks in a saved session)", .full_name = true,
     .exec = slash_retry},
    {.name = "/set", .args = "KEY VALUE", .help = "change a setting:", .complete = SLASH_ARG_SET_KEY,
     .args_optional = true, .exec = chat_slash_set},
    {.name = "/show", .help = "model, session, system prompt, parameters", .exec = slash_show},
    {.name = "/stats", .help = "tokens prefilled and reused, speed, KV bytes", .exec = slash_stats},
    {.name = "/clear", .help = "start afresh with the system prompt (a session stays as saved)", .full_name = true,
     .exec = slash_clear},
    {.name = "/exit", .help = "leave (also /quit, /bye, Ctrl-D; an unsaved chat asks)", .full_name = true,
     .exec = slash_exit},
    {.name = "/quit", .full_name = true, .exec = slash_exit},
    {.name = "/bye", .full_name = true, .exec = slash_exit},
    {0},
};

/* returns 1 to leave the chat */
int chat_slash_run(struct chat *ch, char *line)
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
    if (hit->args && !*arg && !hit->args_optional) {
        chat_err(ch, "usage: %s %s", hit->name, hit->args);
        return 0;
    }
    return hit->exec(ch, arg);
}

/* ==== running one, completing one ==== */

bool chat_complete(void *ud, const char *line, int start, repl_add_fn add, void *acc)
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
        if (chat_store_need(ch))
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
