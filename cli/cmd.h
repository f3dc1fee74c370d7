/*
 * cmd.h - (internal to cli/) the command table, exit codes, and how every
 * command reports an error. What commands share besides is in the other
 * headers of cli/, one a purpose:
 *   opts.h    the options of chat and run, the model they open, --format
 *   conv.h    opening a conversation (model, store, session) for chat and run
 *   home.h    where kvchat keeps its files; the session store opened
 *   io.h      reading input, JSON output, an answer streamed
 *   term.h    text for a terminal, colours, signals
 *   remote.h  a remote model as a conversation's engine
 *
 * To add a subcommand: write cli/cmd-NAME.c exporting a
 * `const struct cmd_entry cmd_NAME_entry`, declare it below, and list it in
 * the table in cli/cmd.c. Its exec gets argv with argv[0] = its name.
 */
#ifndef KVCHAT_CLI_CMD_H
#define KVCHAT_CLI_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/llm.h" /* core/base: buffers, paths, files */

#define KVCHAT_VERSION "0.1.0"

/* exit codes (kvchat(1), EXIT STATUS) */
enum cmd_exit {
    CMD_EXIT_OK = 0,
    CMD_EXIT_USAGE = 1,
    CMD_EXIT_MODEL = 2,   /* model or file error */
    CMD_EXIT_SESSION = 3,
    CMD_EXIT_NETWORK = 4,
    CMD_EXIT_INCOMPLETE = 5, /* --format, --json-schema, --grammar: the answer is not a whole value */
    CMD_EXIT_CONTEXT_FULL = 6, /* run: the answer filled the context window and was cut there */
    CMD_EXIT_INTERRUPTED = 130,
};

struct cmd_entry {
    const char *name;
    const char *summary; /* one line for `kvchat --help` */
    const char *usage;   /* the full --help text */
    int (*exec)(int argc, char **argv);
};

extern const struct cmd_entry cmd_chat_entry;
extern const struct cmd_entry cmd_models_entry;
extern const struct cmd_entry cmd_tokenize_entry;
extern const struct cmd_entry cmd_template_entry;
extern const struct cmd_entry cmd_sessions_entry;
extern const struct cmd_entry cmd_run_entry;
extern const struct cmd_entry cmd_eval_entry;
extern const struct cmd_entry cmd_generate_entry;
extern const struct cmd_entry cmd_bench_entry;
extern const struct cmd_entry cmd_paths_entry;
/* parts of `kvchat models` in files of their own (argv[0] = the subcommand) */
int cmd_models_info(int argc, char **argv);       /* cli/cmd-models-info.c */
int cmd_models_add_remote(int argc, char **argv); /* cli/cmd-remote.c */
/* `models info` of the remote entry at path (from mdl_resolve) */
int cmd_models_info_remote(const char *path, bool json, bool offline);

/* dispatch argv to the table; returns the exit code */
int cmd_main(int argc, char **argv);
/* `kvchat __complete WORD... CURRENT` (hidden): the candidates for the word
 * being completed, for the bash and zsh scripts (cli/completion/) */
int cmd_complete(int argc, char **argv);

/* the table, NULL-terminated */
extern const struct cmd_entry *const cmd_table[];

/* "kvchat: <what>" to stderr; returns code so callers can `return cmd_fail(...)` */
int cmd_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a usage error: the message, then "see 'kvchat NAME --help'"; returns CMD_EXIT_USAGE */
int cmd_usage_error(const struct cmd_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* true if argv holds -h or --help before any "--" */
bool cmd_wants_help(int argc, char **argv);
/* print e's usage to stdout and return CMD_EXIT_OK */
int cmd_help(const struct cmd_entry *e);

/* "4G", "500M", "1.5GiB", "1024" -> bytes; -1 if malformed */
int64_t cmd_parse_size(const char *s);
/* "512 B", "12.2 KiB", "3.4 GiB" */
void cmd_fmt_bytes(char *buf, size_t n, double v);

/* "s" unless n is 1: "%d exchange%s", n, cmd_s(n) */
static inline const char *cmd_s(int64_t n) { return n == 1 ? "" : "s"; }

#endif
