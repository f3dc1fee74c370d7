/*
 * cmd.c - the command table and dispatch: `kvchat [COMMAND] ...`.
 * Only cli/ talks to the user or exits; commands return an exit code.
 */
#include "cli/cmd.h"
#include "cli/home.h"
#include "cli/term.h"
#include "sessions/sess.h"
#include "models/mdl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct cmd_entry *const cmd_table[] = {
    &cmd_chat_entry,
    &cmd_models_entry,
    &cmd_run_entry,
    &cmd_sessions_entry,
    &cmd_tokenize_entry,
    &cmd_template_entry,
    &cmd_eval_entry,
    &cmd_generate_entry,
    &cmd_bench_entry,
    &cmd_paths_entry,
    NULL,
};

int cmd_fail(int code, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("kvchat: ", stderr);
    va_start(ap, fmt);
    cmd_term_vprintf(stderr, fmt, ap); /* names and reasons may come from the store or a server */
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int cmd_usage_error(const struct cmd_entry *e, const char *fmt, ...)
{
    va_list ap;
    fputs("kvchat: ", stderr);
    va_start(ap, fmt);
    cmd_term_vprintf(stderr, fmt, ap);
    va_end(ap);
    if (e)
        fprintf(stderr, "\nsee 'kvchat %s --help'\n", e->name);
    else
        fprintf(stderr, "\nsee 'kvchat --help'\n");
    return CMD_EXIT_USAGE;
}

bool cmd_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            return false;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return true;
    }
    return false;
}

int cmd_help(const struct cmd_entry *e)
{
    fputs(e->usage, stdout);
    return CMD_EXIT_OK;
}

void cmd_fmt_bytes(char *buf, size_t n, double v)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

int64_t cmd_parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    return *end ? -1 : (int64_t)(v * mul);
}

static void main_usage(FILE *f)
{
    fprintf(f, "usage: kvchat [--version] [--help] COMMAND [ARGS]\n\n"
               "kvchat is a terminal chat program for local language models on the CPU\n"
               "that never throws a conversation's KV cache away.\n\ncommands:\n");
    for (const struct cmd_entry *const *e = cmd_table; *e; e++)
        fprintf(f, "  %-10s %s\n", (*e)->name, (*e)->summary);
    fprintf(f, "\n'kvchat COMMAND --help' tells more about a command; 'man kvchat' about all.\n");
}

int cmd_main(int argc, char **argv)
{
    const char *name = argc < 2 ? NULL : argv[1];
    if (name && (!strcmp(name, "--version") || !strcmp(name, "-V"))) {
        printf("kvchat %s\n", KVCHAT_VERSION);
        return CMD_EXIT_OK;
    }
    if (name && (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help"))) {
        if (!strcmp(name, "help") && argc > 2) {
            for (const struct cmd_entry *const *e = cmd_table; *e; e++)
                if (!strcmp((*e)->name, argv[2]))
                    return cmd_help(*e);
            return cmd_fail(CMD_EXIT_USAGE, "unknown command '%s'", argv[2]);
        }
        main_usage(stdout);
        return CMD_EXIT_OK;
    }
    /* where kvchat keeps its files: refused here, once, if unusable */
    char err[512];
    if (!cmd_wants_help(argc, argv) && mdl_env_check(err, sizeof err))
        return cmd_fail(CMD_EXIT_USAGE, "%s", err);
    /* the kernels KVCHAT_CPU asks for: refused if unknown or not this CPU's */
    if (!cmd_wants_help(argc, argv) && llm_kernel_error())
        return cmd_fail(CMD_EXIT_USAGE, "%s", llm_kernel_error());
    if (name && !strcmp(name, "__complete"))
        return cmd_complete(argc - 1, argv + 1);
    /* no command, or the chat's options first: the chat */
    if (!name || name[0] == '-')
        return cmd_chat_entry.exec(argc, argv);
    for (const struct cmd_entry *const *e = cmd_table; *e; e++)
        if (!strcmp((*e)->name, name))
            return (*e)->exec(argc - 1, argv + 1);
    /* `kvchat NAME` opens session NAME when there is one */
    if (cmd_session_exists(name))
        return cmd_chat_entry.exec(argc, argv);
    fprintf(stderr, "kvchat: unknown command '%s'\n", name);
    char why[512];
    if (sess_name_check(name, why, sizeof why) == SESS_OK)
        fprintf(stderr, "see 'kvchat --help' (a new chat session: 'kvchat chat %s')\n", name);
    else /* not a name a session can have either: say why */
        fprintf(stderr, "see 'kvchat --help' (and not a session: %s)\n", why);
    return CMD_EXIT_USAGE;
}

