/*
 * wrap.h - (internal to cli/) word wrap for an answer streamed to a
 * terminal. The text arrives in pieces (tokens); the wrapper writes it as it
 * comes, holding back only the word in progress, and breaks lines at spaces
 * so that no line is wider than the terminal.
 *
 * Rules (cli/wrap.c has the why):
 *  - widths are display columns: UTF-8 decoded, wcwidth(3) in a UTF-8
 *    locale (CJK and emoji 2, combining marks 0); escape sequences and
 *    control characters take no room;
 *  - a break replaces the spaces between two words; a word wider than a
 *    whole line is cut at the edge; a wide (CJK) character may start a line
 *    on its own;
 *  - continuation lines keep the line's indentation (of two columns or
 *    more), and a list item's ("- ", "* ", "1. ") hang under its text;
 *  - lines between ``` (or ~~~) fences pass as they are, never re-wrapped;
 *  - the width is given with every write, so a resize counts from the next
 *    piece on.
 *
 * Usage: struct wrap w; wrap_init(&w, stdout); per answer wrap_begin(&w),
 * wrap_write(&w, cols, text, n) for each piece, wrap_end(&w); wrap_free(&w).
 */
#ifndef KVCHAT_CLI_WRAP_H
#define KVCHAT_CLI_WRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define WRAP_WORD_MAX 256 /* bytes of a word held back; a longer one is cut */

struct wrap {
    FILE *out;
    void *locale;       /* a UTF-8 LC_CTYPE for wcwidth (locale_t), or NULL */
    int cols;           /* the width of this write */
    int col;            /* columns written on this line */
    int hang;           /* columns of indentation for this line's continuations */
    bool line_words;    /* a word has been written on this line */
    bool first_word;    /* the word being collected is the line's first */
    bool fence;         /* inside a ``` or ~~~ block */
    char fence_char;    /* '`' or '~' */
    bool fence_head;    /* in a fence, at a line's start: could be the closing fence */
    int n_fence;        /* fence characters seen at this line's start */
    char space[64];     /* blanks waiting before the next word */
    int n_space;
    char word[WRAP_WORD_MAX]; /* the word being collected */
    signed char word_cw[WRAP_WORD_MAX]; /* per byte: its character's width, -1 inside one */
    int n_word, word_w;
    bool word_cut;      /* the word was too long: it is being written as it comes */
    unsigned char u8[4]; /* a UTF-8 character split between writes */
    int n_u8;
    int esc;            /* inside an escape sequence: 0 no, 1 after ESC, 2 CSI, 3 OSC */
    bool failed;        /* a write failed */
};

void wrap_init(struct wrap *w, FILE *out);
void wrap_free(struct wrap *w);
/* a new answer, starting at column 0 */
void wrap_begin(struct wrap *w);
/* write n bytes wrapped at cols columns (cols < 2: not wrapped): 0, or -1
 * if writing failed */
int wrap_write(struct wrap *w, int cols, const char *text, size_t n);
/* the answer is over: write what is held back. 0 or -1 */
int wrap_end(struct wrap *w, int cols);
/* the column the cursor is at (0: the start of a line) */
int wrap_col(const struct wrap *w);

#endif
