/*
 * sse.c - server-sent events (text/event-stream), parsed incrementally from
 * whatever pieces the network hands over: a line may be split anywhere,
 * even between the CR and LF of its ending, and the result is the same as
 * for the whole stream at once (tests/fuzz/fuzz_sse.c checks that).
 *
 * Invariants: the line being read and the event's data are each at most
 * SSE_MAX_EVENT bytes; every dispatched event's data is NUL-terminated;
 * nothing is read past the bytes given.
 */
#include "core/llm.h" /* core/base */
#include "models/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sse_init(struct sse *s)
{
    memset(s, 0, sizeof *s);
}

void sse_free(struct sse *s)
{
    free(s->line);
    free(s->data);
    memset(s, 0, sizeof *s);
}

bool sse_pending(const struct sse *s)
{
    return s->have_data || s->line_len > 0;
}

/* make room for n more bytes (and a NUL) in *buf: 0, or -1 */
static int reserve(char **buf, size_t *cap, size_t len, size_t n)
{
    return base_grow((void **)buf, cap, len + n + 1, 1);
}

/* one complete line (without its ending): a field, a comment, or the
 * empty line that dispatches */
static int take_line(struct sse *s, sse_event_fn fn, void *ud, char *err, size_t err_size)
{
    const char *l = s->line ? s->line : "";
    size_t n = s->line_len;
    s->line_len = 0;
    if (n == 0) {
        if (!s->have_data) {
            s->event[0] = 0;
            return 0;
        }
        /* the data without its last LF */
        size_t dn = s->data_len && s->data[s->data_len - 1] == '\n' ? s->data_len - 1 : s->data_len;
        if (reserve(&s->data, &s->data_cap, dn, 0)) {
            snprintf(err, err_size, "out of memory");
            return -1;
        }
        s->data[dn] = 0;
        char event[sizeof s->event];
        memcpy(event, s->event, sizeof event);
        s->have_data = false;
        s->data_len = 0;
        s->event[0] = 0;
        s->n_events++;
        return fn(ud, event, s->data, dn);
    }
    if (l[0] == ':')
        return 0; /* a comment (servers send them to keep the line alive) */
    const char *colon = memchr(l, ':', n);
    size_t fn_len = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vn = (size_t)(l + n - v);
    if (vn && v[0] == ' ') {
        v++;
        vn--;
    }
    if (fn_len == 4 && !memcmp(l, "data", 4)) {
        if (s->data_len + vn + 1 > SSE_MAX_EVENT) {
            snprintf(err, err_size, "server-sent event larger than %u bytes", SSE_MAX_EVENT);
            return -1;
        }
        if (reserve(&s->data, &s->data_cap, s->data_len, vn + 1)) {
            snprintf(err, err_size, "out of memory");
            return -1;
        }
        memcpy(s->data + s->data_len, v, vn);
        s->data_len += vn;
        s->data[s->data_len++] = '\n';
        s->have_data = true;
    } else if (fn_len == 5 && !memcmp(l, "event", 5)) {
        size_t k = vn < sizeof s->event - 1 ? vn : sizeof s->event - 1;
        memcpy(s->event, v, k);
        s->event[k] = 0;
    }
    /* id, retry and unknown fields: nothing we use */
    return 0;
}

int sse_feed(struct sse *s, const char *in, size_t n, sse_event_fn fn, void *ud, char *err,
             size_t err_size)
{
    size_t i = 0;
    if (!s->started && n > 0) {
        /* a UTF-8 BOM at the very start is not part of the first line; it
         * may come split, so look at what the line already holds */
        while (i < n && s->line_len < 3 && (unsigned char)in[i] == (unsigned char)"\xef\xbb\xbf"[s->line_len]) {
            if (reserve(&s->line, &s->line_cap, s->line_len, 1)) {
                snprintf(err, err_size, "out of memory");
                return -1;
            }
            s->line[s->line_len++] = in[i++];
        }
        if (s->line_len == 3) {
            s->line_len = 0;
            s->started = true;
        } else if (i < n) {
            s->started = true; /* not a BOM: the bytes held are the line's */
        }
    }
    while (i < n) {
        char c = in[i];
        if (s->after_cr) {
            s->after_cr = false;
            if (c == '\n') {
                i++;
                continue;
            }
        }
        if (c == '\r' || c == '\n') {
            i++;
            s->after_cr = c == '\r';
            int rc = take_line(s, fn, ud, err, err_size);
            if (rc)
                return rc;
            continue;
        }
        /* the rest of the line up to its end, at once */
        size_t j = i;
        while (j < n && in[j] != '\r' && in[j] != '\n')
            j++;
        if (s->line_len + (j - i) > SSE_MAX_EVENT) {
            snprintf(err, err_size, "server-sent event line longer than %u bytes", SSE_MAX_EVENT);
            return -1;
        }
        if (reserve(&s->line, &s->line_cap, s->line_len, j - i)) {
            snprintf(err, err_size, "out of memory");
            return -1;
        }
        memcpy(s->line + s->line_len, in + i, j - i);
        s->line_len += j - i;
        i = j;
    }
    return 0;
}
