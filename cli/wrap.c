/*
 * wrap.c - word wrap for answers streamed to a terminal (see wrap.h).
 *
 * The text is cut into units: a UTF-8 character with its display width, or
 * one byte of an escape sequence or control character (width 0). Blanks
 * between words wait in `space`; the word being collected waits in `word`,
 * because only its end tells whether it fits. When it ends, it is written
 * after the blanks if the line has room, else on a new line (the blanks are
 * dropped). A word is therefore shown one piece late at most: a token or
 * two, never more than WRAP_WORD_MAX bytes, after which it is written as it
 * comes and cut at the edge (it could not fit on any line anyway).
 *
 * Invariants:
 *  - every byte given is written exactly once, in order, except blanks
 *    replaced by a line break (and blanks held at the end of a line);
 *  - col never exceeds cols after a break could have been made;
 *  - inside a fence nothing is held back but the blanks and fence
 *    characters at a line's start, until they show whether the line closes
 *    the fence.
 *
 * Widths come from wcwidth(3) under a UTF-8 LC_CTYPE of our own
 * (newlocale "C.UTF-8"), so they are right whatever the user's locale is.
 */
#include "cli/wrap.h"

#include <limits.h>
#include <locale.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>

/* ==== output ==== */

static void put(struct wrap *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->out) != n)
        w->failed = true;
}

static void new_line_state(struct wrap *w)
{
    w->col = 0;
    w->hang = 0;
    w->line_words = false;
    w->first_word = true;
    w->n_space = 0;
    w->fence_head = w->fence;
    w->n_fence = 0;
    w->word_cut = false;
}

/* a break made by the wrapper: newline, then the hanging indent */
static void break_line(struct wrap *w)
{
    static const char blanks[] = "                                ";
    int hang = w->hang;
    put(w, "\n", 1);
    w->col = 0;
    while (hang > 0) {
        int k = hang < 32 ? hang : 32;
        put(w, blanks, (size_t)k);
        hang -= k;
        w->col += k;
    }
    w->line_words = false;
    w->n_space = 0;
}

/* columns the held blanks take from column col */
static int space_width(const struct wrap *w, int col)
{
    int c = col;
    for (int i = 0; i < w->n_space; i++)
        c = w->space[i] == '\t' ? (c / 8 + 1) * 8 : c + 1;
    return c - col;
}

/* ==== words ==== */

static bool is_list_marker(const char *s, int n)
{
    if (n == 1 && strchr("-*+", s[0]))
        return true;
    if (n == 3 && !memcmp(s, "\xe2\x80\xa2", 3)) /* • */
        return true;
    if (n < 2 || n > 4 || (s[n - 1] != '.' && s[n - 1] != ')'))
        return false;
    for (int i = 0; i < n - 1; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static bool is_fence_word(const char *s, int n)
{
    return n >= 3 && (s[0] == '`' || s[0] == '~') && s[1] == s[0] && s[2] == s[0];
}

/* write the held blanks if they fit, then the line's first word decides
 * its hanging indent and whether it opens a fence */
static void before_word(struct wrap *w)
{
    int sp = space_width(w, w->col);
    if (w->line_words && w->col + sp + w->word_w > w->cols) {
        break_line(w);
    } else if (w->col + sp + w->word_w <= w->cols) {
        put(w, w->space, (size_t)w->n_space);
        w->col += sp;
    }
    w->n_space = 0;
    if (w->first_word) {
        w->first_word = false;
        /* one blank is no indentation: answers often start with one */
        w->hang = is_list_marker(w->word, w->n_word) ? w->col + w->word_w + 1 : w->col > 1 ? w->col : 0;
        if (w->hang > w->cols / 2)
            w->hang = 0;
        if (is_fence_word(w->word, w->n_word)) {
            w->fence = true;
            w->fence_char = w->word[0];
        }
    }
}

/* one unit of a word that is being cut at the edge */
static void put_cut(struct wrap *w, const char *p, int n, int width)
{
    if (width > 0 && w->col + width > w->cols && w->col > w->hang)
        break_line(w);
    put(w, p, (size_t)n);
    w->col += width;
    w->line_words = true;
}

/* the word cannot be held (too long for a line, or for the buffer): write
 * it from a fresh line, cutting at the edge, and go on writing as it comes */
static void start_cut(struct wrap *w)
{
    if (w->line_words)
        break_line(w);
    before_word(w);
    for (int i = 0; i < w->n_word;) {
        int j = i + 1;
        while (j < w->n_word && w->word_cw[j] < 0)
            j++;
        put_cut(w, w->word + i, j - i, w->word_cw[i]);
        i = j;
    }
    w->n_word = 0;
    w->word_w = 0;
    w->word_cut = true;
}

static void end_word(struct wrap *w)
{
    if (w->word_cut) {
        w->word_cut = false;
        return;
    }
    if (w->n_word == 0)
        return;
    before_word(w);
    put(w, w->word, (size_t)w->n_word);
    w->col += w->word_w;
    w->line_words = true;
    w->n_word = 0;
    w->word_w = 0;
}

static void add_to_word(struct wrap *w, const char *p, int n, int width)
{
    if (w->word_cut) {
        put_cut(w, p, n, width);
        return;
    }
    if (w->n_word + n > WRAP_WORD_MAX) {
        start_cut(w);
        put_cut(w, p, n, width);
        return;
    }
    memcpy(w->word + w->n_word, p, (size_t)n);
    w->word_cw[w->n_word] = (signed char)width;
    for (int i = 1; i < n; i++)
        w->word_cw[w->n_word + i] = -1;
    w->n_word += n;
    w->word_w += width;
    if (w->word_w > w->cols - w->hang)
        start_cut(w);
}

/* ==== units ==== */

static void unit_fence(struct wrap *w, const char *p, int n, int width, uint32_t cp)
{
    if (w->fence_head) {
        if (((cp == ' ' || cp == '\t') && w->n_fence == 0) || cp == (uint32_t)w->fence_char) {
            /* hold: it may be the closing fence */
            if (w->n_word + n <= WRAP_WORD_MAX) {
                memcpy(w->word + w->n_word, p, (size_t)n);
                w->n_word += n;
                w->word_w += width;
                if (cp == (uint32_t)w->fence_char && ++w->n_fence == 3) {
                    put(w, w->word, (size_t)w->n_word);
                    w->col += w->word_w;
                    w->n_word = w->word_w = 0;
                    w->fence = w->fence_head = false;
                    w->first_word = false; /* the rest of the line opens nothing */
                    w->line_words = true;
                }
                return;
            }
        }
        put(w, w->word, (size_t)w->n_word);
        w->col += w->word_w;
        w->n_word = w->word_w = 0;
        w->fence_head = false;
    }
    put(w, p, (size_t)n);
    w->col += width;
    if (cp == '\n' || cp == '\r')
        new_line_state(w);
}

static void unit(struct wrap *w, const char *p, int n, int width, uint32_t cp)
{
    if (w->fence) {
        unit_fence(w, p, n, width, cp);
        return;
    }
    if (cp == '\n' || cp == '\r') {
        end_word(w);
        put(w, p, (size_t)n);
        new_line_state(w);
    } else if (cp == ' ' || cp == '\t') {
        end_word(w);
        if (w->n_space < (int)sizeof w->space)
            w->space[w->n_space++] = (char)cp;
    } else if (width == 2) {
        /* a wide (CJK) character: a line may break before and after it */
        end_word(w);
        add_to_word(w, p, n, width);
        end_word(w);
    } else {
        add_to_word(w, p, n, width);
    }
    if (w->fence && w->n_space) { /* a fence opened: the rest of its line passes */
        put(w, w->space, (size_t)w->n_space);
        w->col += space_width(w, w->col);
        w->n_space = 0;
    }
}

static int char_width(struct wrap *w, uint32_t cp)
{
    locale_t old = w->locale ? uselocale((locale_t)w->locale) : (locale_t)0;
    int k = wcwidth((wchar_t)cp);
    if (old)
        uselocale(old);
    if (k >= 0)
        return k;
    return cp < 0xa0 ? 0 : 1;
}

/* the length of a UTF-8 sequence from its first byte (0: not a first byte) */
static int u8_len(unsigned char c)
{
    return c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
}

/* the bits of the first n bytes of a sequence of len bytes */
static uint32_t u8_decode(const unsigned char *s, int n, int len)
{
    uint32_t cp = s[0] & (0x7f >> len);
    for (int i = 1; i < n; i++)
        cp = cp << 6 | (s[i] & 0x3f);
    return cp;
}

static void byte_in(struct wrap *w, unsigned char c)
{
    const char *b = (const char *)&c;
    if (w->esc) { /* escape sequences take no room */
        if (w->esc == 1)
            w->esc = c == '[' ? 2 : c == ']' ? 3 : 0;
        else if (w->esc == 2)
            w->esc = c >= 0x40 && c <= 0x7e ? 0 : 2;
        else if (w->esc == 3)
            w->esc = c == 0x07 ? 0 : c == 0x1b ? 4 : 3;
        else
            w->esc = c == '\\' ? 0 : 3;
        unit(w, b, 1, 0, 0x1b);
        return;
    }
    if (w->n_u8) {
        if ((c & 0xc0) == 0x80) {
            w->u8[w->n_u8++] = c;
            int len = u8_len(w->u8[0]);
            uint32_t cp = u8_decode(w->u8, w->n_u8, len);
            /* overlong, surrogate or beyond U+10FFFF: not a character */
            bool bad = (len == 3 && w->n_u8 == 2 && (cp < 0x20 || (w->u8[0] == 0xed && c >= 0xa0))) ||
                       (len == 4 && w->n_u8 == 2 && (cp < 0x10 || cp > 0x10f));
            if (bad) {
                unit(w, (const char *)w->u8, w->n_u8, 1, 0xfffd);
                w->n_u8 = 0;
            } else if (w->n_u8 == len) {
                unit(w, (const char *)w->u8, len, char_width(w, cp), cp);
                w->n_u8 = 0;
            }
            return;
        }
        /* a broken sequence: the terminal shows one replacement for it */
        unit(w, (const char *)w->u8, w->n_u8, 1, 0xfffd);
        w->n_u8 = 0;
    }
    if (c == 0x1b) {
        w->esc = 1;
        unit(w, b, 1, 0, 0x1b);
    } else if (c < 0x80) {
        unit(w, b, 1, c < 0x20 || c == 0x7f ? 0 : 1, c);
    } else if (u8_len(c)) {
        w->u8[w->n_u8++] = c;
    } else {
        unit(w, b, 1, 1, 0xfffd);
    }
}

/* ==== the interface ==== */

void wrap_init(struct wrap *w, FILE *out)
{
    memset(w, 0, sizeof *w);
    w->out = out;
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    w->locale = l ? (void *)l : NULL;
    wrap_begin(w);
}

void wrap_free(struct wrap *w)
{
    if (w->locale)
        freelocale((locale_t)w->locale);
    w->locale = NULL;
}

void wrap_begin(struct wrap *w)
{
    w->fence = false;
    w->n_word = w->word_w = 0;
    w->word_cut = false;
    w->n_u8 = 0;
    w->esc = 0;
    w->failed = false;
    new_line_state(w);
}

static void set_cols(struct wrap *w, int cols)
{
    w->cols = cols < 2 ? INT_MAX / 4 : cols;
}

int wrap_write(struct wrap *w, int cols, const char *text, size_t n)
{
    set_cols(w, cols);
    for (size_t i = 0; i < n; i++)
        byte_in(w, (unsigned char)text[i]);
    return w->failed ? -1 : 0;
}

int wrap_end(struct wrap *w, int cols)
{
    set_cols(w, cols);
    if (w->n_u8) {
        unit(w, (const char *)w->u8, w->n_u8, 1, 0xfffd);
        w->n_u8 = 0;
    }
    if (w->fence && w->fence_head) {
        put(w, w->word, (size_t)w->n_word);
        w->col += w->word_w;
        w->n_word = w->word_w = 0;
    } else {
        end_word(w);
    }
    w->n_space = 0;
    w->esc = 0;
    return w->failed ? -1 : 0;
}

int wrap_col(const struct wrap *w)
{
    return w->col;
}
