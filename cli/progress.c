/*
 * progress.c - the progress line of a long restore or prefill: on a
 * terminal's stderr only, after about half a second of the work, one line
 * redrawn ten times a second ("prefill 1,536 of 4,210 tokens · 180 tok/s"),
 * erased when the work ends and before the answer's first text. A thread
 * of its own reads sess_conv_progress (the one conversation call safe from
 * another thread); the line is drawn and erased under a mutex, so it never
 * interleaves with the answer.
 */
#include "cli/progress.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHOW_AFTER_S 0.5
#define REDRAW_NS 100000000L

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 12345 -> "12,345" */
static void thousands(char *buf, size_t n, int64_t v)
{
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%lld", (long long)(v < 0 ? 0 : v));
    size_t k = 0;
    for (int i = 0; i < len && k + 2 < n; i++) {
        if (i && (len - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = raw[i];
    }
    buf[k] = 0;
}

void cmd_progress_line(char *buf, size_t n, enum sess_progress_kind kind, int64_t done, int64_t total,
                       double tok_s)
{
    char d[32], t[32];
    thousands(d, sizeof d, done);
    thousands(t, sizeof t, total);
    int k = snprintf(buf, n, "%s %s of %s tokens", kind == SESS_PROGRESS_RESTORE ? "reading KV blocks:" : "prefill",
                     d, t);
    if (tok_s > 0 && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " \xc2\xb7 %.0f tok/s", tok_s);
}

static void erase(struct cmd_progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = false;
    }
}

static void *watch(void *arg)
{
    struct cmd_progress *p = arg;
    double t0 = now_s(), kind_t0 = t0;
    int64_t kind_done0 = 0;
    enum sess_progress_kind last = SESS_PROGRESS_NONE;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += REDRAW_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->stop)
            break;
        int64_t done, total;
        enum sess_progress_kind kind = sess_conv_progress(p->conv, &done, &total);
        double t = now_s();
        if (kind != last) {
            kind_t0 = t;
            kind_done0 = done;
            last = kind;
        }
        if (kind == SESS_PROGRESS_NONE || total <= 0) {
            erase(p);
            continue;
        }
        if (t - t0 < SHOW_AFTER_S)
            continue;
        char line[160];
        cmd_progress_line(line, sizeof line, kind, done, total,
                          t - kind_t0 > 0.2 ? (double)(done - kind_done0) / (t - kind_t0) : 0);
        fprintf(stderr, "\r\033[K%s", line);
        fflush(stderr);
        p->drawn = true;
    }
    erase(p);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void cmd_progress_start(struct cmd_progress *p, const struct sess_conv *conv)
{
    p->running = false;
    if (!conv || !isatty(2))
        return;
    p->conv = conv;
    p->stop = false;
    p->drawn = false;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* signals stay with the threads that wait for them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    p->running = pthread_create(&p->th, NULL, watch, p) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!p->running) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
    }
}

void cmd_progress_end(struct cmd_progress *p)
{
    if (!p->running)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->running = false;
}
