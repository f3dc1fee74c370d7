/*
 * term.c - the one sanitizer for text a terminal shows: whatever came from
 * the store (messages, session and model names, search snippets), a model
 * or a server is written through it when it goes to a terminal, so that no
 * such text can drive the terminal (clear the screen, retitle the window,
 * move the cursor, reorder what is shown).
 *
 * Replaced by U+FFFD: C0 controls other than newline and tab (ESC starts
 * every escape sequence; CR would overwrite a line), DEL, the C1 controls
 * U+0080..U+009F (U+009B is a CSI on its own), the bidirectional
 * embeddings, overrides and isolates U+202A..U+202E and U+2066..U+2069, and
 * what is not valid UTF-8 (one U+FFFD for each maximal invalid subpart, as
 * Unicode recommends and Python decodes). What follows a replaced ESC
 * ("[2J") is plain text then and shows as such. To a pipe or a file the
 * text goes as it is.
 *
 * Also here: whether colours may be used, and the signal handling of the
 * commands that wait on the network.
 */
#include "cli/term.h"
#include "core/base/base.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char fffd[] = "\xef\xbf\xbd";

size_t cmd_term_unsafe(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t k = base_utf8_seq(p, n);
    if (k == 0) { /* the maximal invalid subpart is one U+FFFD (Unicode's practice, Python's too) */
        size_t want = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
                    : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 1;
        size_t i = 1;
        while (i < want && i < n && (p[i] & 0xc0) == 0x80 &&
               !(i == 1 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
                            (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))))
            i++;
        return i;
    }
    if (k == 1)
        return (p[0] < 0x20 && p[0] != '\n' && p[0] != '\t') || p[0] == 0x7f;
    if (k == 2 && p[0] == 0xc2 && p[1] < 0xa0)
        return 2; /* C1 */
    if (k == 3 && p[0] == 0xe2 && ((p[1] == 0x80 && p[2] >= 0xaa && p[2] <= 0xae) ||
                                   (p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9)))
        return 3; /* bidi embedding, override or isolate */
    return 0;
}

int cmd_term_clean(const char *s, size_t n, int (*put)(void *ud, const char *s, size_t n), void *ud)
{
    size_t from = 0, i = 0;
    while (i < n) {
        size_t bad = cmd_term_unsafe(s + i, n - i);
        if (!bad) {
            size_t k = base_utf8_seq(s + i, n - i);
            i += k ? k : 1;
            continue;
        }
        if ((i > from && put(ud, s + from, i - from)) || put(ud, fffd, 3))
            return 1;
        i += bad;
        from = i;
    }
    return n > from ? put(ud, s + from, n - from) : 0;
}

static int put_file(void *ud, const char *s, size_t n)
{
    return fwrite(s, 1, n, ud) == n ? 0 : 1;
}

bool cmd_term_is(FILE *f)
{
    return f && isatty(fileno(f));
}

int cmd_term_write(FILE *f, const char *s, size_t n)
{
    if (!cmd_term_is(f))
        return fwrite(s, 1, n, f) == n ? 0 : -1;
    return cmd_term_clean(s, n, put_file, f) ? -1 : 0;
}

int cmd_term_puts(FILE *f, const char *s)
{
    return cmd_term_write(f, s, strlen(s));
}

int cmd_term_vprintf(FILE *f, const char *fmt, va_list ap)
{
    char small[1024];
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof small)
        return cmd_term_write(f, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return -1;
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    int r = cmd_term_write(f, big, (size_t)n);
    free(big);
    return r;
}

int cmd_term_printf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = cmd_term_vprintf(f, fmt, ap);
    va_end(ap);
    return r;
}

/* ==== colours and signals ==== */

volatile sig_atomic_t cmd_interrupted;
static struct sigaction old_int, old_term;

static void on_interrupt(int sig)
{
    (void)sig;
    cmd_interrupted = 1;
}

void cmd_interrupts_catch(void)
{
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigemptyset(&sa.sa_mask);
    cmd_interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
}

void cmd_interrupts_restore(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}

bool cmd_color_ok(FILE *f)
{
    const char *nc = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    if (nc && *nc)
        return false;
    if (term && !strcmp(term, "dumb"))
        return false;
    return isatty(fileno(f));
}
