/*
 * term.h - (internal to cli/) text for a terminal: the one sanitizer
 * (cli/term.c), colours, and the signals that end a wait on the network.
 */
#ifndef KVCHAT_CLI_TERM_H
#define KVCHAT_CLI_TERM_H

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ==== text for a terminal (cli/term.c) ====
 * The one sanitizer: C0 controls but newline and tab, DEL, C1, bidi
 * embeddings/overrides/isolates and invalid UTF-8 become U+FFFD, so that
 * text from the store, a model or a server cannot drive the terminal. The
 * writers sanitize only when f is a terminal (a pipe gets the text as it
 * is); they return 0 or -1 (a write failed). */
/* bytes of the unsafe character at s (n bytes left), 0 if it is safe */
size_t cmd_term_unsafe(const char *s, size_t n);
/* s[0..n) to put in pieces, each unsafe character as U+FFFD; put's
 * non-zero return stops it (and is returned as 1) */
int cmd_term_clean(const char *s, size_t n, int (*put)(void *ud, const char *s, size_t n), void *ud);
bool cmd_term_is(FILE *f);
int cmd_term_write(FILE *f, const char *s, size_t n);
int cmd_term_puts(FILE *f, const char *s);
int cmd_term_vprintf(FILE *f, const char *fmt, va_list ap);
int cmd_term_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* colours and bold on f: a terminal, TERM is not "dumb", NO_COLOR unset or empty */
bool cmd_color_ok(FILE *f);

/* Until cmd_interrupts_restore, SIGINT and SIGTERM set cmd_interrupted
 * (cleared here) and end waits on the network (no SA_RESTART): for the
 * commands that talk to servers (models pull, remote models) */
extern volatile sig_atomic_t cmd_interrupted;
void cmd_interrupts_catch(void);
void cmd_interrupts_restore(void);
#endif
