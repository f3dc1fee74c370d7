/*
 * cmd.c - the command table and dispatch: `kvchat [COMMAND] ...`.
 * Only cli/ talks to the user or exits; commands return an exit code.
 */
#include "cli/cmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct cmd_entry *const cmd_table[] = {
    &cmd_chat_entry,
    &cmd_models_entry,
    &cmd_sessions_entry,
    &cmd_eval_entry,
    &cmd_generate_entry,
    &cmd_bench_entry,
    NULL,
};

int cmd_fail(int code, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("kvchat: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int cmd_usage_error(const struct cmd_entry *e, const char *fmt, ...)
{
    va_list ap;
    fputs("kvchat: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
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

void cmd_json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
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
    /* no command, or options first: the chat */
    if (argc < 2 || (argv[1][0] == '-' && (!strcmp(argv[1], "-m") || !strncmp(argv[1], "--model", 7))))
        return cmd_chat_entry.exec(argc, argv);
    const char *name = argv[1];
    if (!strcmp(name, "--version") || !strcmp(name, "-V")) {
        printf("kvchat %s\n", KVCHAT_VERSION);
        return CMD_EXIT_OK;
    }
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        if (!strcmp(name, "help") && argc > 2) {
            for (const struct cmd_entry *const *e = cmd_table; *e; e++)
                if (!strcmp((*e)->name, argv[2]))
                    return cmd_help(*e);
            return cmd_fail(CMD_EXIT_USAGE, "unknown command '%s'", argv[2]);
        }
        main_usage(stdout);
        return CMD_EXIT_OK;
    }
    for (const struct cmd_entry *const *e = cmd_table; *e; e++)
        if (!strcmp((*e)->name, name))
            return (*e)->exec(argc - 1, argv + 1);
    if (name[0] == '-')
        fprintf(stderr, "kvchat: unknown option '%s'\n", name);
    else
        fprintf(stderr, "kvchat: unknown command '%s'\n", name);
    fprintf(stderr, "see 'kvchat --help'\n");
    return CMD_EXIT_USAGE;
}
