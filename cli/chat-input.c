/*
 * chat-input.c - one input of the chat: a line, lines joined by a
 * trailing backslash, or a """ block, at most CMD_INPUT_MAX bytes.
 */
#include "cli/chat.h"

#include <stdlib.h>
#include <string.h>


/* an input being put together from lines, at most CMD_INPUT_MAX bytes */
struct input {
    struct base_buf b;
    bool big; /* it would have been longer than CMD_INPUT_MAX */
};

static int input_add(struct input *in, const char *p, size_t n)
{
    return cmd_buf_add(&in->b, p, n, CMD_INPUT_MAX, &in->big);
}

/* the status for an input that could not be put together (it is freed) */
static enum repl_status input_fail(struct input *in)
{
    free(in->b.s);
    return in->big ? REPL_TOO_LONG : REPL_EOF;
}

/* a line opening a """ block: the text after the quotes, else NULL */
static char *block_open(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return strncmp(s, "\"\"\"", 3) ? NULL : s + 3;
}

/* does s end a """ block (blanks may follow the quotes)? Then s is cut
 * before them, and blanks before them too when nothing else is there */
static bool block_close(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n < 3 || strncmp(s + n - 3, "\"\"\"", 3))
        return false;
    n -= 3;
    s[n] = 0;
    if (strspn(s, " \t") == n)
        s[0] = 0;
    return true;
}

/*
 * Read one input: a line; lines joined while one ends in a backslash; or a
 * """ block (the end of input also ends these two). A block opens with a
 * line starting with """ and closes with a line ending with """; text on
 * those two lines belongs to the message, as ollama takes it ("""hello ...
 * world"""; """one line""" is a message on its own). *text gets it
 * (malloc'd). Returns REPL_LINE, or another status (nothing in *text):
 * Ctrl-C drops everything typed for this input; REPL_TOO_LONG for an input
 * of more than CMD_INPUT_MAX bytes.
 */
enum repl_status chat_read_input(struct chat *ch, const char *prompt, char **text)
{
    char *line;
    struct input in = {0};
    *text = NULL;
    enum repl_status st = repl_read(ch->repl, prompt, &line);
    if (st != REPL_LINE)
        return st;
    const char *cont = ch->interactive ? "... " : "";
    char *rest = block_open(line);
    if (rest) {
        bool first = true, done = block_close(rest);
        int r = 0;
        if (*rest || done) { /* the opening line's own text */
            r = input_add(&in, rest, strlen(rest));
            first = false;
        }
        free(line);
        if (r)
            return input_fail(&in);
        while (!done) {
            st = repl_read(ch->repl, cont, &line);
            if (st == REPL_EOF && ch->interactive) { /* Ctrl-D: the block is not sent */
                free(in.b.s);
                chat_note(ch, C_DIM, "[Ctrl-D: the unfinished \"\"\" block is discarded, nothing was sent]");
                return REPL_INTERRUPT;
            }
            if (st == REPL_EOF && !first) /* the end of piped input ends the block too */
                break;
            if (st != REPL_LINE) {
                free(in.b.s);
                return st;
            }
            done = block_close(line);
            if (!done || *line) { /* a closing line adds its text, if any */
                r = (first ? 0 : input_add(&in, "\n", 1)) || input_add(&in, line, strlen(line));
                first = false;
            }
            free(line);
            if (r)
                return input_fail(&in);
        }
        if (!in.b.s && input_add(&in, "", 0)) /* an empty block is an empty message */
            return input_fail(&in);
        *text = in.b.s;
        return REPL_LINE;
    }
    for (;;) {
        size_t n = strlen(line);
        bool more = n > 0 && line[n - 1] == '\\';
        int r = input_add(&in, line, more ? n - 1 : n) || (more && input_add(&in, "\n", 1));
        free(line);
        if (r)
            return input_fail(&in);
        if (!more)
            break;
        st = repl_read(ch->repl, cont, &line);
        if (st == REPL_EOF) /* the end of input ends the message too */
            break;
        if (st != REPL_LINE) {
            free(in.b.s);
            return st;
        }
    }
    *text = in.b.s;
    return REPL_LINE;
}
