/*
 * chat-ui.c - how the chat says things to the user (cli/chat.h's "saying
 * things"): notes and status lines on ui, errors and information on
 * stderr in kvchat's form, each wrapped at a terminal's width as answers
 * are and sanitized unless it is our own text; -v's and /stats' figures;
 * the last exchange of a reopened session. Colours only when ch->color.
 * The chat itself (turns, conversations, the command) is cli/cmd-chat.c's.
 */
#include "cli/chat.h"
#include "cli/term.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const color_seq[] = {"\033[0m", "\033[2m", "\033[1m", "\033[1;32m", "\033[33m",
                                        "\033[31m"};

const char *chat_col(const struct chat *ch, enum chat_color c)
{
    return ch->color ? color_seq[c] : "";
}

/* wrap_write as cmd_term_clean's writer */
struct ui_put {
    struct wrap *w;
    int cols;
};
static int ui_put(void *ud, const char *s, size_t n)
{
    struct ui_put *u = ud;
    return wrap_write(u->w, u->cols, s, n) ? 1 : 0;
}

/*
 * Text for the user on f, ended by a newline: on a terminal wrapped at
 * its width as answers are (cli/wrap.c: breaks at spaces, nothing lost, a
 * word wider than the line cut at the edge), and sanitized unless raw (our
 * own text with colours). The first head bytes (a /show or /help label,
 * padding included) are written as they are; the lines after the first
 * then start at column hang, under the label's value.
 */
static void text_to(struct chat *ch, FILE *f, enum chat_color c, const char *text, size_t head, int hang, bool raw)
{
    int cols = isatty(fileno(f)) ? repl_width(fileno(f)) : 0;
    size_t n = strlen(text);
    bool colored = ch->color && (f == ch->ui || cols > 0);
    fflush(stdout);
    if (f != stdout && ch->ui)
        fflush(ch->ui);
    fputs(colored ? color_seq[c] : "", f);
    if (cols < 2) {
        if (raw)
            fputs(text, f);
        else
            cmd_term_write(f, text, n);
    } else {
        struct wrap w;
        wrap_init(&w, f);
        wrap_begin(&w);
        struct ui_put u = {&w, cols};
        head = head < n ? head : 0;
        for (int part = 0; part < 2; part++) {
            const char *p = part ? text + head : text;
            size_t len = part ? n - head : head;
            if (raw)
                wrap_write(&w, cols, p, len);
            else
                cmd_term_clean(p, len, ui_put, &u);
            if (!part && head && hang > 0 && hang < cols / 2)
                w.hang = hang;
        }
        wrap_end(&w, cols);
        wrap_free(&w);
    }
    fprintf(f, "%s\n", colored ? color_seq[C_RESET] : "");
    fflush(f);
}

void chat_ui_text(struct chat *ch, enum chat_color c, const char *text, size_t head, int hang, bool raw)
{
    text_to(ch, ch->ui, c, text, head, hang, raw);
}

/* "kvchat: " and a message on stderr, wrapped on a terminal as ui's lines */
static void chat_vsay(struct chat *ch, enum chat_color c, const char *fmt, va_list ap)
{
    char *msg = NULL, *line = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        return;
    if (asprintf(&line, "kvchat: %s", msg) >= 0) {
        text_to(ch, stderr, c, line, 0, 0, false);
        free(line);
    }
    free(msg);
}

/* a note to the user: wrapped on ui */
void chat_note(struct chat *ch, enum chat_color c, const char *fmt, ...)
{
    va_list ap;
    char *text = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n >= 0)
        chat_ui_text(ch, c, text, 0, 0, false); /* names and texts of the store: sanitized */
    free(n >= 0 ? text : NULL);
}

/* an error inside the chat: to stderr in kvchat's form */
void chat_err(struct chat *ch, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    chat_vsay(ch, C_ERR, fmt, ap);
    va_end(ap);
}

/* information (not an error) on stderr in kvchat's form */
void chat_info(struct chat *ch, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    chat_vsay(ch, C_RESET, fmt, ap);
    va_end(ap);
}

/* a status line on ui, wrapped */
void chat_print_fit(struct chat *ch, enum chat_color c, const char *line)
{
    chat_ui_text(ch, c, line, 0, 0, false);
}

/* a /show line: its label padded to column 11, the value's lines under it */
void chat_print_wrapped(struct chat *ch, const char *line)
{
    chat_ui_text(ch, C_RESET, line, 11, 11, false);
}

/* a server's figure, "?" when it reported none */
static const char *figure(char *buf, size_t n, int64_t v)
{
    if (v < 0)
        return "?";
    snprintf(buf, n, "%" PRId64, v);
    return buf;
}

void chat_stats_line(struct chat *ch, const struct sess_turn_stats *ts)
{
    char mem[32], disk[32], line[512];
    if (ch->l.remote) { /* the server's figures: its prefix cache is the reuse */
        char a[24], b[24], c[24];
        snprintf(line, sizeof line,
                 "[server: prompt %s · cached %s · generated %s · first text %.0f ms", figure(a, sizeof a, ts->prompt_tokens),
                 figure(b, sizeof b, ts->cached_tokens), figure(c, sizeof c, ts->generated_tokens), ts->ttft_ms);
        if (ts->decode_tok_s >= 0)
            snprintf(line + strlen(line), sizeof line - strlen(line), " · %.1f tok/s", ts->decode_tok_s);
        snprintf(line + strlen(line), sizeof line - strlen(line), "]");
        chat_print_fit(ch, C_DIM, line);
        return;
    }
    cmd_fmt_bytes(mem, sizeof mem, (double)ts->kv_bytes_mem);
    cmd_fmt_bytes(disk, sizeof disk, (double)ts->kv_bytes_disk);
    snprintf(line, sizeof line,
             "[prefilled %" PRId64 " · reused %" PRId64 " · generated %" PRId64
             " · first token %.0f ms · %.1f tok/s · KV %s in memory, %s on disk]",
             ts->prefilled_tokens, ts->cached_tokens, ts->generated_tokens, ts->ttft_ms,
             ts->decode_tok_s, mem, disk);
    if (ts->draft_passes > 0) /* inside the brackets */
        snprintf(line + strlen(line) - 1, sizeof line - strlen(line) + 1,
                 " · drafted %" PRId64 ", accepted %" PRId64 " in %" PRId64 " pass%s]", ts->drafted_tokens,
                 ts->accepted_tokens, ts->draft_passes, ts->draft_passes == 1 ? "" : "es");
    chat_print_fit(ch, C_DIM, line);
}

void chat_draft_line(const struct chat *ch, char *line, size_t n)
{
    static const char *const from[] = {"", "the conversation's n-grams", "the block store",
                                       "the block store, then n-grams"};
    if (ch->l.remote)
        snprintf(line, n, "drafting   %s: none for a remote model (its server decodes)", sess_draft_name(ch->o.draft));
    else if (ch->conv && llm_ctx_rstate_size(sess_conv_ctx(ch->conv)) > 0)
        snprintf(line, n, "drafting   %s: none for a model with recurrent layers (their state cannot go back)",
                 sess_draft_name(ch->o.draft));
    else if (!ch->o.draft)
        snprintf(line, n, "drafting   off: one token a pass (/set draft on)");
    else
        snprintf(line, n, "drafting   %s: %s, at most %" PRId32 " token%s a pass (never changes an answer)",
                 sess_draft_name(ch->o.draft), from[ch->o.draft & SESS_DRAFT_ALL], ch->o.draft_max,
                 cmd_s(ch->o.draft_max));
}

/* text cut after max bytes (at a character's start), "[...]" marking the cut */
static char *cut_text(const char *text, size_t max)
{
    size_t n = strlen(text);
    if (n > max)
        while (max > 0 && ((unsigned char)text[max] & 0xC0) == 0x80)
            max--;
    char *out = NULL;
    if (asprintf(&out, "%.*s%s", (int)(n > max ? max : n), text, n > max ? " [...]" : "") < 0)
        return NULL;
    return out;
}

/* a session reopened on a terminal: its last exchange, dimmed, where the
 * conversation goes on (each side cut after 1000 bytes) */
void chat_show_last_exchange(struct chat *ch)
{
    int64_t n = sess_conv_n_messages(ch->conv), u = n - 1;
    const char *q = NULL, *a = NULL;
    if (!ch->interactive)
        return;
    while (u >= 0 && sess_conv_message(ch->conv, u, &q) != SESS_ROLE_USER)
        u--;
    if (u < 0)
        return;
    if (u + 1 < n && sess_conv_message(ch->conv, u + 1, &a) != SESS_ROLE_ASSISTANT)
        a = NULL;
    char *cq = cut_text(q, 1000), *ca = a ? cut_text(a, 1000) : NULL, *line = NULL;
    if (cq && asprintf(&line, "> %s", cq) >= 0) {
        chat_ui_text(ch, C_DIM, line, 2, 2, false);
        free(line);
    }
    if (ca)
        chat_ui_text(ch, C_DIM, ca, 0, 0, false);
    free(cq);
    free(ca);
}
