/*
 * progress.h - (internal to cli/) the progress line of a long restore or
 * prefill on a terminal's stderr (cli/progress.c).
 */
#ifndef KVCHAT_CLI_PROGRESS_H
#define KVCHAT_CLI_PROGRESS_H

#include "sessions/sess.h"

#include <pthread.h>
#include <stdbool.h>

struct cmd_progress {
    const struct sess_conv *conv;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running, stop, drawn;
};

/* Watch conv's restore or prefill until cmd_progress_end: nothing at all
 * unless stderr is a terminal. */
void cmd_progress_start(struct cmd_progress *p, const struct sess_conv *conv);
/* Erase the line (if drawn) and stop watching; idempotent: call it before
 * the answer's first text and after the call. */
void cmd_progress_end(struct cmd_progress *p);
/* the line's text */
void cmd_progress_line(char *buf, size_t n, enum sess_progress_kind kind, int64_t done, int64_t total,
                       double tok_s);

#endif
