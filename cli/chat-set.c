/*
 * chat-set.c - the chat's /set: what it shows (the settings, also under
 * /show) and what it changes, for this chat and, where a session keeps it
 * (sampling, think), for the session. ollama's forms (/set parameter KEY
 * VALUE, wordwrap, verbose, ...) are taken as well. The other slash
 * commands are cli/chat-slash.c's; the keys and their parsing cli/opts.c's.
 */
#include "cli/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* /set's and /show's list of what /set changes */
void chat_show_settings(struct chat *ch)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return;
    fputs("sampling   ", f);
    cmd_opts_describe(&ch->o, f);
    fclose(f);
    chat_print_wrapped(ch, text);
    free(text);
    const char *fmt = sess_conv_format(ch->conv, NULL);
    char line[1024];
    int k = snprintf(line, sizeof line, "output     think %s (reasoning %s), wrap %s, format %s",
                     ch->o.think_off ? "off" : "on", ch->o.think_hide ? "hidden" : "shown dimmed",
                     ch->o.wrap ? "on" : "off", fmt ? fmt : "off");
    for (int i = 0; ch->o.stop[i] && k > 0 && (size_t)k < sizeof line; i++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%s'%s'", i ? ", " : ", stop ", ch->o.stop[i]);
    chat_print_wrapped(ch, line);
    snprintf(line, sizeof line, "private    %s", ch->o.private_mode ? "on: nothing is written" : "off");
    chat_print_wrapped(ch, line);
    chat_draft_line(ch, line, sizeof line);
    chat_print_wrapped(ch, line);
}

/* /set private on|off: the store read-only or not, the history file too */
static int set_private(struct chat *ch, bool on)
{
    if (on == ch->o.private_mode) {
        chat_note(ch, C_DIM, "private is already %s", on ? "on" : "off");
        return 0;
    }
    if (on && ch->pending) {
        chat_err(ch, "this chat is to be session '%s' (made with its first answer): /new first for a private chat",
                 ch->name);
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
        chat_note(ch, C_DIM, "private on: from now on nothing is written (no KV blocks, database rows or history); "
                        "what earlier turns stored stays ('kvchat sessions forget' removes it)");
    else if (!ch->st)
        chat_note(ch, C_DIM, "private off: history is kept again; there was no store when this chat began, so the KV "
                        "cache on disk stays off and sessions cannot be saved until kvchat starts again");
    else
        chat_note(ch, C_DIM, "private off: this chat's KV blocks are stored from the next answer on (its earlier "
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
    chat_note(ch, C_DIM, "%s (this chat; a session does not keep them)", line);
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

int chat_slash_set(struct chat *ch, char *arg)
{
    if (!*arg) {
        chat_show_settings(ch);
        return 0;
    }
    /* ollama's forms: /set system TEXT, /set parameter KEY VALUE, and the
     * switches wordwrap, nowordwrap, verbose, quiet */
    size_t kl = strcspn(arg, " \t");
    if (kl == 6 && !strncmp(arg, "system", 6)) {
        char *text = arg + 6;
        while (*text == ' ' || *text == '\t')
            text++;
        return chat_slash_system(ch, text);
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
                return chat_slash_set(ch, kv);
            }
            ch->o.verbose = !strcmp(switches[i].value, "on");
            chat_note(ch, C_DIM, "statistics after every answer: %s", switches[i].value);
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
    if (!strcmp(key, "draft") || !strcmp(key, "draft_max")) {
        /* speculative decoding cannot change an answer: the chat's, not the session's */
        if (sess_conv_set_draft(ch->conv, next.draft, next.draft_max)) {
            chat_err(ch, "%s", sess_conv_errmsg(ch->conv));
            next.draft = SESS_DRAFT_OFF;
        }
        ch->o.draft = next.draft;
        ch->o.draft_max = next.draft_max;
        char line[512];
        chat_draft_line(ch, line, sizeof line);
        chat_note(ch, C_DIM, "%s", line);
        return 0;
    }
    if (!strcmp(key, "wrap")) {
        ch->o.wrap = next.wrap;
        chat_note(ch, C_DIM, "word wrap %s", ch->o.wrap ? "on (at the terminal's width)" : "off");
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
        chat_note(ch, C_DIM, "think: %s, %s", ch->o.think_off ? "off" : "on",
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
    chat_show_settings(ch);
    return 0;
}
