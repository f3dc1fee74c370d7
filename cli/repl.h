/*
 * repl.h - (internal to cli/) reading the user's lines: GNU readline on a
 * terminal (history kept in a file, completion, Ctrl-C clearing the line),
 * plain lines from a pipe otherwise. cli/repl.c is the only file that
 * includes readline; the chat (cmd-chat.c) sees only this.
 */
#ifndef KVCHAT_CLI_REPL_H
#define KVCHAT_CLI_REPL_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

struct repl;

/* collects one completion candidate (only those starting with the word
 * being completed are kept) */
typedef void (*repl_add_fn)(void *acc, const char *candidate);

struct repl_params {
    const char *history_path; /* NULL: no history file */
    /* Candidates for the word at line[start..]: the caller looks at what
     * precedes it (line[0..start)) and calls add for each; or returns true
     * for file names instead. */
    bool (*complete)(void *ud, const char *line, int start, repl_add_fn add, void *acc);
    void *ud;
    /* set by the caller's signal handlers: interrupt (SIGINT) clears the
     * line being edited; quit (SIGTERM, SIGHUP) ends reading */
    volatile sig_atomic_t *interrupt;
    volatile sig_atomic_t *quit;
    FILE *prompt_out;         /* where prompts and echo go (stdout or stderr) */
    size_t max_line;          /* longest line read from a pipe, in bytes (0: no limit) */
    bool history_private;     /* the history file is read, not created nor written
                                 (repl_history_private) */
};

/* Caller frees with repl_close (which restores the terminal). On a
 * terminal (stdin a tty) readline is used; otherwise lines come from stdin
 * as they are, with no prompt. *warning gets a note when the history file
 * cannot be used (static, or NULL). */
struct repl *repl_open(const struct repl_params *p, const char **warning);
void repl_close(struct repl *r);
/* true when reading a terminal */
bool repl_interactive(const struct repl *r);

enum repl_status {
    REPL_LINE = 0,      /* *line holds a line (malloc'd, no newline) */
    REPL_EOF,           /* Ctrl-D on an empty line, or the end of the input */
    REPL_INTERRUPT,     /* Ctrl-C: the line was dropped */
    REPL_QUIT,          /* *quit was set */
    REPL_TOO_LONG,      /* a piped line longer than max_line: reading stops */
};
/* Read one line with prompt (a terminal only). Blocks. */
enum repl_status repl_read(struct repl *r, const char *prompt, char **line);
/* Remember a submitted input (may hold newlines) in the history and
 * append it to the history file. */
void repl_history_add(struct repl *r, const char *entry);
/* Private (on): inputs are recalled in this process but no line goes to
 * the history file, and the file is neither created nor rewritten. */
void repl_history_private(struct repl *r, bool on);
/* Ask a yes/no question (default no): true for y/yes. Without a terminal
 * the answer is no. */
bool repl_ask(struct repl *r, const char *question);
/* While an answer streams (on true): keys typed are not echoed into it
 * (they wait, unseen, for the next prompt) and Ctrl-C prints no ^C. Off
 * again on false and at repl_close. Nothing without a terminal. */
void repl_quiet(struct repl *r, bool on);
/* columns of the terminal on fd (80 when it is not one) */
int repl_width(int fd);

#endif
