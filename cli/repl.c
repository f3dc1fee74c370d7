/*
 * repl.c - line input for the chat: GNU readline on a terminal, plain
 * lines from a pipe. The only file that includes readline.
 *
 * Readline runs through its callback interface (rl_callback_read_char) in
 * a pselect loop, with its own signal handlers off (rl_catch_signals = 0):
 * SIGINT, SIGTERM and SIGHUP are blocked except inside pselect, so a signal
 * can never slip in between checking the caller's flags and waiting for a
 * key. Ctrl-C therefore drops the line being edited and shows a fresh
 * prompt; SIGTERM/SIGHUP end reading with the terminal restored.
 *
 * History: $XDG_STATE_HOME/kvchat/history (the caller gives the path),
 * created with mode 0600 in a 0700 directory. Entries are written by
 * readline with timestamps ("#<seconds>" lines), and read back by
 * history_load: every line from one timestamp to the next is one entry,
 * so an input of several lines, blank ones included, comes back whole
 * after a restart (readline's read_history drops blank lines). At most
 * REPL_HISTORY_MAX entries are kept.
 *
 * Input is UTF-8: in a locale of one-byte characters the chat switches
 * LC_CTYPE to C.UTF-8 so that readline edits characters, not bytes.
 */
#include "cli/repl.h"
#include "core/llm.h" /* core/base: mkdir -p */

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#define REPL_HISTORY_MAX 2000

struct repl {
    struct repl_params p;
    bool tty;
    char *history_path;
    /* the callback interface hands the line to on_line */
    char *got;
    bool got_line, got_eof;
    bool quiet;             /* echo is off (repl_quiet) */
    bool history_private;   /* nothing is written to the history file */
    bool history_written;   /* something was appended (then it is truncated at close) */
    struct termios saved;   /* the terminal before repl_quiet */
};

/* readline's callbacks take no user data: the one open repl */
static struct repl *the_repl;

/* ==== completion ==== */

struct acc {
    char **v;
    size_t n, cap;
    const char *word;
    size_t word_len;
};

static void acc_add(void *accp, const char *cand)
{
    struct acc *a = accp;
    if (strncmp(cand, a->word, a->word_len))
        return;
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->v[i], cand))
            return;
    if (base_grow((void **)&a->v, &a->cap, a->n + 2, sizeof *a->v))
        return;
    char *s = strdup(cand);
    if (s)
        a->v[a->n++] = s;
}

static struct acc completions;
static size_t completion_next;

static char *completion_gen(const char *text, int state)
{
    (void)text;
    if (state == 0)
        completion_next = 0;
    if (completion_next < completions.n) {
        char *s = completions.v[completion_next];
        completions.v[completion_next++] = NULL; /* readline frees it */
        return s;
    }
    return NULL;
}

static char **complete(const char *text, int start, int end)
{
    (void)end;
    rl_attempted_completion_over = 1; /* never file names */
    struct repl *r = the_repl;
    for (size_t i = 0; i < completions.n; i++)
        free(completions.v[i]);
    completions.n = 0;
    if (!r || !r->p.complete)
        return NULL;
    completions.word = text;
    completions.word_len = strlen(text);
    if (r->p.complete(r->p.ud, rl_line_buffer, start, acc_add, &completions))
        return rl_completion_matches(text, rl_filename_completion_function);
    if (completions.n == 0)
        return NULL;
    return rl_completion_matches(text, completion_gen);
}

/* ==== history ==== */

/* a "#<seconds>" line, as readline writes before each entry */
static bool is_timestamp(const char *line)
{
    if (line[0] != '#' || !line[1])
        return false;
    for (const char *p = line + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

static void history_add_entry(const char *text, const char *ts)
{
    add_history(text);
    if (ts[0])
        add_history_time(ts);
}

/* Read the history file: lines after a timestamp, up to the next one, are
 * one entry (blank lines kept); a line before any timestamp (a file of
 * another readline program) is an entry of its own, as readline reads it. */
static void history_load(const char *path)
{
    /* a regular file only (non-blocking open, fstat): a FIFO or a device
     * there is not waited on or read forever */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    FILE *f = NULL;
    if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode) || !(f = fdopen(fd, "r"))))
        close(fd);
    if (!f)
        return;
    char *line = NULL, *entry = NULL, ts[32] = "";
    size_t cap = 0, len = 0, cap_e = 0;
    long n_lines = -1; /* lines in the entry; -1 before the first timestamp */
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        if (n && line[n - 1] == '\n')
            line[--n] = 0;
        if (is_timestamp(line)) {
            if (n_lines > 0)
                history_add_entry(entry, ts);
            snprintf(ts, sizeof ts, "%s", line);
            n_lines = 0;
            len = 0;
            continue;
        }
        if (n_lines < 0) {
            if (line[0])
                add_history(line);
            continue;
        }
        size_t need = len + (n_lines > 0) + (size_t)n + 1;
        if (base_grow((void **)&entry, &cap_e, need, 1))
            break;
        if (n_lines > 0)
            entry[len++] = '\n';
        memcpy(entry + len, line, (size_t)n + 1);
        len += (size_t)n;
        n_lines++;
    }
    if (n_lines > 0)
        history_add_entry(entry, ts);
    free(line);
    free(entry);
    fclose(f);
}

static void history_open(struct repl *r, const char **warning)
{
    const char *path = r->p.history_path;
    if (!path || !*path)
        return;
    if (r->history_private) { /* read if it is there; nothing made or written */
        r->history_path = strdup(path);
        history_comment_char = '#';
        history_write_timestamps = 1;
        history_load(path);
        stifle_history(REPL_HISTORY_MAX);
        return;
    }
    /* make the directories (0700), then the file (0600) */
    if (base_mkdir_parents(path, 0700)) {
        *warning = "cannot create the history directory; history is not saved";
        return;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        *warning = "cannot open the history file (it must be a regular file); history is not saved";
        return;
    }
    close(fd);
    r->history_path = strdup(path);
    history_comment_char = '#'; /* timestamps are written as #<seconds> lines */
    history_write_timestamps = 1;
    history_load(path);
    stifle_history(REPL_HISTORY_MAX);
}

void repl_history_add(struct repl *r, const char *entry)
{
    if (!r->tty || !entry[0])
        return;
    /* no immediate duplicates */
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (last && !strcmp(last->line, entry))
        return;
    add_history(entry);
    if (r->history_path && !r->history_private) {
        /* the file may not be there yet (private until now): made 0600 */
        int fd = open(r->history_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
        append_history(1, r->history_path);
        r->history_written = true;
    }
}

void repl_history_private(struct repl *r, bool on)
{
    r->history_private = on;
}

/* ==== reading ==== */

static volatile sig_atomic_t resized;

static void on_sigwinch(int sig)
{
    (void)sig;
    resized = 1;
}

static void on_line(char *line)
{
    struct repl *r = the_repl;
    if (!line) {
        r->got_eof = true;
    } else {
        r->got = line;
        r->got_line = true;
    }
    /* take the handler away so readline does not print the next prompt */
    rl_callback_handler_remove();
}

struct repl *repl_open(const struct repl_params *p, const char **warning)
{
    *warning = NULL;
    struct repl *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->p = *p;
    r->history_private = p->history_private;
    r->tty = isatty(0);
    if (!r->tty)
        return r;
    the_repl = r;
    /* kvchat's text is UTF-8 whatever the locale says: in a one-byte locale
     * (C, POSIX) readline would take the bytes of é for meta keys */
    if (MB_CUR_MAX == 1 && setlocale(LC_CTYPE, "C.UTF-8"))
        setenv("LC_ALL", "C.UTF-8", 1); /* readline sets LC_CTYPE again from the environment */
    rl_readline_name = "kvchat";
    rl_instream = stdin;
    rl_outstream = p->prompt_out ? p->prompt_out : stdout;
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0; /* ours below: readline resizes when we ask */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigwinch;
    sigaction(SIGWINCH, &sa, NULL);
    rl_attempted_completion_function = complete;
    rl_basic_word_break_characters = " \t\n";
    rl_completer_word_break_characters = (char *)" \t\n";
    history_open(r, warning);
    return r;
}

bool repl_interactive(const struct repl *r)
{
    return r->tty;
}

void repl_quiet(struct repl *r, bool on)
{
    if (!r || !r->tty || r->quiet == on)
        return;
    if (on) {
        if (tcgetattr(0, &r->saved))
            return;
        struct termios t = r->saved;
        t.c_lflag &= ~(tcflag_t)(ECHO | ECHOCTL);
        if (tcsetattr(0, TCSANOW, &t))
            return;
        r->quiet = true;
    } else {
        tcsetattr(0, TCSANOW, &r->saved);
        r->quiet = false;
    }
}

void repl_close(struct repl *r)
{
    if (!r)
        return;
    repl_quiet(r, false);
    if (r->tty) {
        rl_callback_handler_remove();
        if (r->history_path && r->history_written)
            history_truncate_file(r->history_path, REPL_HISTORY_MAX);
        for (size_t i = 0; i < completions.n; i++)
            free(completions.v[i]);
        free(completions.v);
        completions = (struct acc){0};
        the_repl = NULL;
    }
    free(r->history_path);
    free(r);
}

static enum repl_status read_pipe(struct repl *r, char **line)
{
    char *buf = NULL;
    size_t cap = 0, n = 0, max = r->p.max_line ? r->p.max_line : SIZE_MAX - 2;
    int c = EOF;
    errno = 0;
    /* getline would grow without end on `< /dev/zero`: a line stops at max */
    while ((c = getc_unlocked(stdin)) != EOF && c != '\n') {
        if (n == max) {
            free(buf);
            return REPL_TOO_LONG;
        }
        if (base_grow((void **)&buf, &cap, n + 2, 1)) {
            free(buf);
            return REPL_TOO_LONG;
        }
        buf[n++] = (char)c;
    }
    if (c == EOF && r->p.quit && *r->p.quit) { /* SIGTERM or SIGHUP: a line it cut is not sent */
        free(buf);
        return REPL_QUIT;
    }
    if (c == EOF && n == 0) {
        free(buf);
        return REPL_EOF;
    }
    if (!buf && !(buf = malloc(n + 1))) /* (n is 0 here: nothing was read) */
        return REPL_EOF;
    buf[n] = 0;
    if (n > 0 && buf[n - 1] == '\r')
        buf[--n] = 0;
    *line = buf;
    return REPL_LINE;
}

enum repl_status repl_read(struct repl *r, const char *prompt, char **line)
{
    *line = NULL;
    if (!r->tty)
        return read_pipe(r, line);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    r->got_line = r->got_eof = false;
    r->got = NULL;
    if (r->p.interrupt)
        *r->p.interrupt = 0;
    rl_callback_handler_install(prompt, on_line);
    enum repl_status st = REPL_LINE;
    for (;;) {
        if (r->p.quit && *r->p.quit) {
            st = REPL_QUIT;
            break;
        }
        if (r->p.interrupt && *r->p.interrupt) {
            /* Ctrl-C: drop what was typed, show a fresh prompt */
            *r->p.interrupt = 0;
            rl_callback_sigcleanup();
            rl_replace_line("", 0);
            rl_point = rl_end = 0;
            fputs("^C", rl_outstream);
            rl_crlf();
            rl_callback_handler_remove();
            st = REPL_INTERRUPT;
            break;
        }
        if (resized) {
            resized = 0;
            rl_resize_terminal();
        }
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(fileno(rl_instream), &fds);
        int n = pselect(fileno(rl_instream) + 1, &fds, NULL, NULL, NULL, &old);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            st = REPL_EOF;
            break;
        }
        rl_callback_read_char();
        if (r->got_eof) {
            st = REPL_EOF;
            break;
        }
        if (r->got_line) {
            *line = r->got;
            st = REPL_LINE;
            break;
        }
    }
    if (st != REPL_LINE) {
        rl_callback_handler_remove();
        if (st != REPL_INTERRUPT && st != REPL_QUIT)
            fputc('\n', rl_outstream);
        else if (st == REPL_QUIT)
            rl_crlf();
        fflush(rl_outstream);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return st;
}

bool repl_ask(struct repl *r, const char *question)
{
    if (!r->tty)
        return false;
    for (;;) {
        char *line = NULL;
        enum repl_status st = repl_read(r, question, &line);
        if (st != REPL_LINE)
            return false;
        const char *s = line;
        while (*s == ' ')
            s++;
        bool yes = !strcasecmp(s, "y") || !strcasecmp(s, "yes");
        bool no = !*s || !strcasecmp(s, "n") || !strcasecmp(s, "no");
        free(line);
        if (yes || no)
            return yes;
    }
}

int repl_width(int fd)
{
    struct winsize ws;
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}
