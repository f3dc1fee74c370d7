/*
 * cmd.h - (internal to cli/) the command table and what commands share.
 *
 * To add a subcommand: write cli/cmd-NAME.c exporting a
 * `const struct cmd_entry cmd_NAME_entry`, declare it below, and list it in
 * the table in cli/cmd.c. Its exec gets argv with argv[0] = its name.
 */
#ifndef KVCHAT_CLI_CMD_H
#define KVCHAT_CLI_CMD_H

#include <stdbool.h>
#include <stdio.h>

#define KVCHAT_VERSION "0.1.0"

/* exit codes (SPEC §3) */
enum cmd_exit {
    CMD_EXIT_OK = 0,
    CMD_EXIT_USAGE = 1,
    CMD_EXIT_MODEL = 2,   /* model or file error */
    CMD_EXIT_SESSION = 3,
    CMD_EXIT_NETWORK = 4,
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
extern const struct cmd_entry cmd_sessions_entry;
extern const struct cmd_entry cmd_eval_entry;
extern const struct cmd_entry cmd_generate_entry;
extern const struct cmd_entry cmd_bench_entry;

struct mdl_pull_params;
/*
 * The model a chat or run uses: -m MODEL (m_arg), else KVCHAT_MODEL, else
 * `model` in the config file; a file path or a store name. With none set,
 * prints how to get a model and returns CMD_EXIT_MODEL, unless offer_pull
 * and stdin and stderr are terminals: then it offers to pull the default
 * alias. Returns CMD_EXIT_OK with the file in path, or the exit code after
 * printing the error.
 */
int cmd_model_resolve(const char *m_arg, bool offer_pull, char *path, size_t size);
/* `models pull REF` with progress on a terminal; the store name into name_out
 * (may be NULL). Returns an exit code, having printed any error. */
int cmd_models_pull_ref(const char *ref, const struct mdl_pull_params *p, char *name_out,
                        size_t name_size);

/* dispatch argv to the table; returns the exit code */
int cmd_main(int argc, char **argv);

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

/* JSON output: a string with escapes */
void cmd_json_str(FILE *f, const char *s, size_t n);

#endif
