/*
 * io.c - input read whole and checked (a prompt, a file sent as a
 * message, --system-file), JSON output, and an answer streamed as it is
 * generated, its reasoning apart (cli/io.h).
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/repl.h"
#include "cli/term.h"
#include "cli/wrap.h"
#include "models/mdl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cmd_buf_add(struct base_buf *b, const char *p, size_t n, size_t max, bool *too_big)
{
    if (b->len > max || n > max - b->len) {
        if (too_big)
            *too_big = true;
        return -1;
    }
    return base_buf_add(b, p, n);
}

int cmd_read_all(FILE *f, size_t max, char **out, size_t *len)
{
    struct base_buf b = {0};
    char chunk[65536];
    bool too_big = false;
    *out = NULL;
    *len = 0;
    for (;;) { /* read past max by a chunk at most, then stop */
        size_t r = fread(chunk, 1, sizeof chunk, f);
        if (cmd_buf_add(&b, chunk, r, max, &too_big)) {
            base_buf_free(&b);
            if (too_big)
                return CMD_READ_TOO_LARGE;
            errno = ENOMEM;
            return CMD_READ_ERROR;
        }
        /* a short read is the end (or an error): reading again would wait
         * for a second Ctrl-D on a terminal (glibc reads a large request
         * straight from the fd, past the end-of-file flag) */
        if (r == 0 || feof(f) || ferror(f))
            break;
    }
    if (ferror(f)) {
        int e = errno;
        base_buf_free(&b);
        errno = e ? e : EIO;
        return CMD_READ_ERROR;
    }
    *out = b.s;
    *len = b.len;
    return CMD_READ_OK;
}

int cmd_read_file(const char *what, const char *path, char **out, size_t *len)
{
    bool std = !strcmp(path, "-");
    FILE *f = stdin;
    if (!std) {
        /* O_NONBLOCK and fstat first: a FIFO or a device is refused, never waited on or read forever */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        const char *why = fd < 0 || fstat(fd, &st) ? strerror(errno)
                          : S_ISDIR(st.st_mode)    ? "it is a directory"
                          : !S_ISREG(st.st_mode)   ? "it is not a regular file"
                                                   : NULL;
        if (!why && (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) || !(f = fdopen(fd, "rb"))))
            why = strerror(errno);
        if (why) {
            if (fd >= 0)
                close(fd);
            return cmd_fail(CMD_EXIT_MODEL, "cannot read %s '%s': %s", what, path, why);
        }
    }
    int r = cmd_read_all(f, CMD_INPUT_MAX, out, len);
    int e = errno;
    if (!std)
        fclose(f);
    if (r == CMD_READ_TOO_LARGE)
        return cmd_fail(CMD_EXIT_MODEL, "cannot read %s '%s': it is larger than %s", what, path,
                        CMD_INPUT_MAX_TEXT);
    if (r)
        return cmd_fail(CMD_EXIT_MODEL, "cannot read %s '%s': %s", what, path, strerror(e));
    return 0;
}

void cmd_json_str(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        int len = mdl_utf8_seq(p + i, n - i);
        if (len < 0) { /* not UTF-8: JSON text must be, so U+FFFD */
            fputs("\\ufffd", f);
            i += (size_t)-len;
            continue;
        }
        if (len > 1) {
            fwrite(p + i, 1, (size_t)len, f);
            i += (size_t)len;
            continue;
        }
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
        i++;
    }
    fputc('"', f);
}

void cmd_json_key_str(FILE *f, const char *k, const char *v)
{
    fprintf(f, ", \"%s\": ", k);
    if (v && v[0])
        cmd_json_str(f, v, strlen(v));
    else
        fputs("null", f);
}

void cmd_json_list_item(FILE *f, int64_t i)
{
    fputs(i ? ",\n " : "[", f);
}

void cmd_json_list_end(FILE *f, int64_t n)
{
    fputs(n ? "]\n" : "[]\n", f);
}

int cmd_read_text(const char *path, size_t max, char **out, size_t *len, char *err, size_t err_size)
{
    bool is_stdin = !strcmp(path, "-");
    const char *shown = is_stdin ? "standard input" : path;
    FILE *f = stdin;
    *out = NULL;
    *len = 0;
    if (!is_stdin) {
        /* O_NONBLOCK: a FIFO must not hang the open; it is refused below */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        const char *why = fd < 0 || fstat(fd, &st) ? strerror(errno)
                          : S_ISDIR(st.st_mode)    ? "it is a directory"
                          : !S_ISREG(st.st_mode)   ? "it is not a regular file"
                                                   : NULL;
        if (!why && (uint64_t)st.st_size > max)
            why = "too large";
        if (!why && (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) || !(f = fdopen(fd, "rb"))))
            why = strerror(errno);
        if (why) {
            if (fd >= 0)
                close(fd);
            if (!strcmp(why, "too large"))
                snprintf(err, err_size, "cannot read '%s': it is larger than %.0f MiB", shown,
                         (double)max / (1 << 20));
            else
                snprintf(err, err_size, "cannot read '%s': %s", shown, why);
            return -1;
        }
    }
    char *buf;
    size_t n;
    int r = cmd_read_all(f, max, &buf, &n);
    int e = errno;
    if (!is_stdin)
        fclose(f);
    if (r == CMD_READ_TOO_LARGE) {
        snprintf(err, err_size, "cannot read '%s': it is larger than %.0f MiB", shown, (double)max / (1 << 20));
        return -1;
    }
    if (r) {
        snprintf(err, err_size, "cannot read '%s': %s", shown, strerror(e));
        return -1;
    }
    /* text, not binary: no NUL byte, and UTF-8 throughout */
    const char *nul = memchr(buf, 0, n);
    if (nul) {
        snprintf(err, err_size, "cannot use '%s': it is a binary file (a NUL byte at offset %zu); only text can be sent",
                 shown, (size_t)(nul - buf));
        free(buf);
        return -1;
    }
    for (size_t i = 0; i < n;) {
        int k = mdl_utf8_seq((const unsigned char *)buf + i, n - i);
        if (k < 0) {
            snprintf(err, err_size,
                     "cannot use '%s': it is not UTF-8 text (byte 0x%02x at offset %zu); convert it first "
                     "(e.g. iconv -f latin1 -t utf-8)",
                     shown, (unsigned char)buf[i], i);
            free(buf);
            return -1;
        }
        i += (size_t)k;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* ==== a reasoning model's answer, streamed ==== */

int cmd_answer_init(struct cmd_answer *a, FILE *out, bool show_reasoning, bool dim)
{
    memset(a, 0, sizeof *a);
    a->out = out;
    a->term = cmd_term_is(out);
    a->show_reasoning = show_reasoning;
    a->dim = dim;
    a->think = llm_think_init(false);
    return a->think ? 0 : -1;
}

static int keep(struct cmd_answer *a, int k, const char *s, size_t n)
{
    return cmd_buf_add(&a->text[k], s, n, SIZE_MAX - 1, NULL) ? 1 : 0;
}

/* kvchat's own bytes (colours) */
static int put_out(struct cmd_answer *a, const char *s, size_t n)
{
    int bad = n && (a->wrap ? wrap_write(a->wrap, repl_width(fileno(a->out)), s, n) : fwrite(s, 1, n, a->out) != n);
    if (n && (bad || fflush(a->out) != 0)) {
        a->broken = true;
        return 1;
    }
    if (n)
        a->last_char = s[n - 1];
    return 0;
}

static int put_piece(void *ud, const char *s, size_t n)
{
    return put_out(ud, s, n);
}

/* the model's text: through the sanitizer on a terminal */
static int put_text(struct cmd_answer *a, const char *s, size_t n)
{
    return a->term ? cmd_term_clean(s, n, put_piece, a) : put_out(a, s, n);
}

static int answer_part(void *ud, enum llm_think_part part, const char *s, size_t n)
{
    struct cmd_answer *a = ud;
    if (!a->out)
        return keep(a, part == LLM_THINK_REASONING, s, n);
    if (part == LLM_THINK_REASONING) {
        if (!a->show_reasoning)
            return 0;
        if (!a->in_reasoning_out) {
            a->in_reasoning_out = true;
            if (a->dim && put_out(a, "\033[2m", 4))
                return 1;
        }
        return put_text(a, s, n);
    }
    if (a->in_reasoning_out) {
        /* set the answer apart: the colour back, a blank line */
        a->in_reasoning_out = false;
        if ((a->dim && put_out(a, "\033[0m", 4)) ||
            put_out(a, a->last_char == '\n' ? "\n" : "\n\n", a->last_char == '\n' ? 1 : 2))
            return 1;
    }
    return put_text(a, s, n);
}

int cmd_answer_text(void *ud, const char *text, size_t n)
{
    struct cmd_answer *a = ud;
    return llm_think_push(a->think, text, n, answer_part, a);
}

void cmd_answer_end(struct cmd_answer *a)
{
    llm_think_flush(a->think, answer_part, a);
    if (a->out && a->in_reasoning_out && a->dim)
        put_out(a, "\033[0m", 4);
    if (a->out && a->wrap && (wrap_end(a->wrap, repl_width(fileno(a->out))) || fflush(a->out)))
        a->broken = true;
    a->in_reasoning_out = false;
    llm_think_free(a->think);
    a->think = llm_think_init(false);
}

void cmd_answer_free(struct cmd_answer *a)
{
    llm_think_free(a->think);
    free(a->text[0].s);
    free(a->text[1].s);
    memset(a, 0, sizeof *a);
}
