/*
 * cmd.c - the command table and dispatch: `kvchat [COMMAND] ...`.
 * Only cli/ talks to the user or exits; commands return an exit code.
 */
#include "cli/cmd.h"
#include "sessions/sess.h"
#include "cli/repl.h"
#include "cli/wrap.h"
#include "models/mdl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct cmd_entry *const cmd_table[] = {
    &cmd_chat_entry,
    &cmd_models_entry,
    &cmd_run_entry,
    &cmd_sessions_entry,
    &cmd_tokenize_entry,
    &cmd_template_entry,
    &cmd_eval_entry,
    &cmd_generate_entry,
    &cmd_bench_entry,
    &cmd_paths_entry,
    NULL,
};

int cmd_fail(int code, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("kvchat: ", stderr);
    va_start(ap, fmt);
    cmd_term_vprintf(stderr, fmt, ap); /* names and reasons may come from the store or a server */
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int cmd_usage_error(const struct cmd_entry *e, const char *fmt, ...)
{
    va_list ap;
    fputs("kvchat: ", stderr);
    va_start(ap, fmt);
    cmd_term_vprintf(stderr, fmt, ap);
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

void cmd_fmt_bytes(char *buf, size_t n, double v)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

int64_t cmd_parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    return *end ? -1 : (int64_t)(v * mul);
}

int cmd_buf_add(struct cmd_buf *b, const char *p, size_t n, size_t max, bool *too_big)
{
    if (b->len > max || n > max - b->len) {
        if (too_big)
            *too_big = true;
        return -1;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->s, cap);
        if (!q)
            return -1;
        b->s = q;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

int cmd_read_all(FILE *f, size_t max, char **out, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    *out = NULL;
    *len = 0;
    if (!b) {
        errno = ENOMEM;
        return CMD_READ_ERROR;
    }
    for (;;) {
        if (n + 1 == cap) { /* full: grow, but never past max + 2 */
            if (n > max) {
                free(b);
                return CMD_READ_TOO_LARGE;
            }
            size_t want = cap * 2 > max + 2 ? max + 2 : cap * 2;
            char *p = realloc(b, want);
            if (!p) {
                free(b);
                errno = ENOMEM;
                return CMD_READ_ERROR;
            }
            b = p;
            cap = want;
        }
        size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (n > max) {
            free(b);
            return CMD_READ_TOO_LARGE;
        }
        /* a short read is the end (or an error): reading again would wait
         * for a second Ctrl-D on a terminal (glibc reads a large request
         * straight from the fd, past the end-of-file flag) */
        if (r == 0 || feof(f) || ferror(f))
            break;
    }
    if (ferror(f)) {
        int e = errno;
        free(b);
        errno = e ? e : EIO;
        return CMD_READ_ERROR;
    }
    b[n] = 0;
    *out = b;
    *len = n;
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
    const char *name = argc < 2 ? NULL : argv[1];
    if (name && (!strcmp(name, "--version") || !strcmp(name, "-V"))) {
        printf("kvchat %s\n", KVCHAT_VERSION);
        return CMD_EXIT_OK;
    }
    if (name && (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help"))) {
        if (!strcmp(name, "help") && argc > 2) {
            for (const struct cmd_entry *const *e = cmd_table; *e; e++)
                if (!strcmp((*e)->name, argv[2]))
                    return cmd_help(*e);
            return cmd_fail(CMD_EXIT_USAGE, "unknown command '%s'", argv[2]);
        }
        main_usage(stdout);
        return CMD_EXIT_OK;
    }
    /* where kvchat keeps its files: refused here, once, if unusable */
    char err[512];
    if (!cmd_wants_help(argc, argv) && mdl_env_check(err, sizeof err))
        return cmd_fail(CMD_EXIT_USAGE, "%s", err);
    /* the kernels KVCHAT_CPU asks for: refused if unknown or not this CPU's */
    if (!cmd_wants_help(argc, argv) && llm_kernel_error())
        return cmd_fail(CMD_EXIT_USAGE, "%s", llm_kernel_error());
    if (name && !strcmp(name, "__complete"))
        return cmd_complete(argc - 1, argv + 1);
    /* no command, or the chat's options first: the chat */
    if (!name || name[0] == '-')
        return cmd_chat_entry.exec(argc, argv);
    for (const struct cmd_entry *const *e = cmd_table; *e; e++)
        if (!strcmp((*e)->name, name))
            return (*e)->exec(argc - 1, argv + 1);
    /* `kvchat NAME` opens session NAME when there is one */
    if (cmd_chat_session_exists(name))
        return cmd_chat_entry.exec(argc, argv);
    fprintf(stderr, "kvchat: unknown command '%s'\n", name);
    char why[512];
    if (sess_name_check(name, why, sizeof why) == SESS_OK)
        fprintf(stderr, "see 'kvchat --help' (a new chat session: 'kvchat chat %s')\n", name);
    else /* not a name a session can have either: say why */
        fprintf(stderr, "see 'kvchat --help' (and not a session: %s)\n", why);
    return CMD_EXIT_USAGE;
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
