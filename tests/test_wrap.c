/*
 * test_wrap.c - the word wrap of answers on a terminal (cli/wrap.c): the
 * rules of wrap.h on written-out cases (breaks at blanks, a word too long
 * for a line cut at the edge, wide characters, escape sequences and
 * combining marks taking their real room, hanging indents, fences left
 * alone, a width that changes between pieces), then properties on random
 * texts of mixed scripts: nothing but blanks is lost or changed, no line is
 * wider than the terminal, every break was needed (the next word would not
 * have fitted), and the output is the same however the text is cut into
 * pieces (at every byte, even inside a UTF-8 character).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli/wrap.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* the text wrapped at cols, fed in pieces of `piece` bytes (0: whole);
 * caller frees */
static char *wrapped(const char *text, int cols, size_t piece)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    struct wrap w;
    wrap_init(&w, f);
    size_t n = strlen(text);
    if (!piece)
        piece = n ? n : 1;
    for (size_t i = 0; i < n; i += piece)
        assert_int_equal(wrap_write(&w, cols, text + i, n - i < piece ? n - i : piece), 0);
    assert_int_equal(wrap_end(&w, cols), 0);
    wrap_free(&w);
    fclose(f);
    return buf;
}

static void expect_wrap(const char *text, int cols, const char *want)
{
    char *got = wrapped(text, cols, 0);
    if (strcmp(got, want))
        fail_msg("wrapping '%s' at %d:\n got  '%s'\n want '%s'", text, cols, got, want);
    /* fed a byte at a time: the same */
    char *one = wrapped(text, cols, 1);
    if (strcmp(one, want))
        fail_msg("wrapping '%s' at %d a byte at a time:\n got  '%s'\n want '%s'", text, cols, one, want);
    free(got);
    free(one);
}

static void test_words(void **state)
{
    (void)state;
    expect_wrap("The quick brown fox jumps over the lazy dog", 20,
                "The quick brown fox\njumps over the lazy\ndog");
    expect_wrap("abc def g", 9, "abc def g");        /* exactly the width */
    expect_wrap("abc def gh", 9, "abc def\ngh");
    expect_wrap("a  b   c", 80, "a  b   c");           /* blanks inside a line stay */
    expect_wrap("one two\nthree four five", 10, "one two\nthree four\nfive");
    expect_wrap("end of line   \nnext", 12, "end of line\nnext");
    expect_wrap("ab abcdefghij cd", 5, "ab\nabcde\nfghij\ncd"); /* too long: cut */
    expect_wrap("short", 1, "short");                 /* no width: not wrapped */
    expect_wrap("", 10, "");
}

static void test_widths(void **state)
{
    (void)state;
    /* CJK: two columns each, and a line may break between them */
    expect_wrap("中文中文中文中文", 6, "中文中\n文中文\n中文");
    expect_wrap("ab 中文 cd", 5, "ab 中\n文 cd");
    /* an emoji takes two columns */
    expect_wrap("😀😀 ab cd", 7, "😀😀 ab\ncd");
    /* é as one or two code points: one column either way */
    expect_wrap("caf\xc3\xa9 caf\xc3\xa9 cafe\xcc\x81", 10, "caf\xc3\xa9 caf\xc3\xa9\ncafe\xcc\x81");
    /* escape sequences take no room */
    expect_wrap("\033[1mhello\033[0m world again", 11, "\033[1mhello\033[0m world\nagain");
    expect_wrap("\033]0;title\007abc def", 7, "\033]0;title\007abc def");
    /* bytes that are not UTF-8 show as one replacement character each */
    expect_wrap("ab\xff\xfe cd", 5, "ab\xff\xfe\ncd");
    expect_wrap("\xe4\xb8 x", 3, "\xe4\xb8 x");
}

static void test_indent(void **state)
{
    (void)state;
    expect_wrap("- one two three four five", 15, "- one two three\n  four five");
    expect_wrap("12. one two three four", 14, "12. one two\n    three four");
    expect_wrap("    indented words wrap here", 18, "    indented words\n    wrap here");
    expect_wrap(" one blank is no indent", 10, " one blank\nis no\nindent");
    expect_wrap("* a\n* b c d e f", 7, "* a\n* b c d\n  e f");
}

static void test_fences(void **state)
{
    (void)state;
    expect_wrap("some words here\n```c\nint main(void) { return 0; } // long\n```\nmore words after",
                10,
                "some words\nhere\n```c\nint main(void) { return 0; } // long\n```\nmore words\nafter");
    expect_wrap("~~~\na b c d e f g h\n~~~ x\ny z w v", 5, "~~~\na b c d e f g h\n~~~ x\ny z w\nv");
    /* a fence opened with an info string after a blank */
    expect_wrap("``` sh\nls -l /a/very/long/path\n```", 8, "``` sh\nls -l /a/very/long/path\n```");
    /* ``` inside a line opens nothing */
    expect_wrap("use ``` to fence code blocks", 10, "use ``` to\nfence code\nblocks");
    /* an unclosed fence at the end: written as it is */
    expect_wrap("```\n  ``", 3, "```\n  ``");
}

/* the width changes between pieces: later words follow the new width */
static void test_resize(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct wrap w;
    wrap_init(&w, f);
    wrap_write(&w, 40, "one two three four five ", 24);
    wrap_write(&w, 10, "six seven eight", 15);
    wrap_end(&w, 10);
    assert_int_equal(wrap_col(&w), 5);
    wrap_free(&w);
    fclose(f);
    assert_string_equal(buf, "one two three four five\nsix seven\neight");
    free(buf);
}

/* ==== properties on random texts ==== */

static int width_of(const char *s, size_t n)
{
    mbstate_t st;
    memset(&st, 0, sizeof st);
    int cols = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '\033') { /* our texts use only CSI ... m */
            while (i < n && s[i] != 'm')
                i++;
            i++;
            continue;
        }
        wchar_t wc;
        size_t k = mbrtowc(&wc, s + i, n - i, &st);
        assert_true(k > 0 && k <= 4);
        int cw = wcwidth(wc);
        cols += cw > 0 ? cw : 0;
        i += k;
    }
    return cols;
}

static const char *const pieces[] = {
    "a", "b", "x", "y", "z", "é", "ü", "ß", "中", "文", "日", "😀", "👍", "e\xcc\x81", "\033[1m", "\033[0m",
    ",", ".", "(", "'", "ñ", "Ω", "ж",
};

static char *random_text(unsigned *seed, bool newlines)
{
    size_t cap = 4096, n = 0;
    char *t = malloc(cap);
    int words = 20 + rand_r(seed) % 80;
    for (int i = 0; i < words; i++) {
        int len = 1 + rand_r(seed) % (rand_r(seed) % 8 == 0 ? 40 : 9);
        /* no word is a list marker ("-", "1."): those hang */
        for (int k = 0; k < len; k++) {
            const char *p = pieces[rand_r(seed) % (sizeof pieces / sizeof *pieces)];
            memcpy(t + n, p, strlen(p));
            n += strlen(p);
        }
        if (i + 1 < words) {
            int r = rand_r(seed) % 20;
            const char *sep = newlines && r == 0 ? "\n" : r == 1 ? "  " : " ";
            memcpy(t + n, sep, strlen(sep));
            n += strlen(sep);
        }
        assert_true(n + 512 < cap);
    }
    t[n] = 0;
    return t;
}

/* s without blanks and newlines */
static char *squeeze(const char *s)
{
    char *o = malloc(strlen(s) + 1), *p = o;
    for (; *s; s++)
        if (*s != ' ' && *s != '\n')
            *p++ = *s;
    *p = 0;
    return o;
}

static void test_random(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (int iter = 0; iter < 400; iter++) {
        bool newlines = iter % 2;
        char *text = random_text(&seed, newlines);
        int cols = 8 + (int)(rand_r(&seed) % 60);
        char *out = wrapped(text, cols, 0);
        /* the same in pieces of every size from 1 to 7 bytes */
        for (size_t piece = 1; piece <= 7; piece++) {
            char *o2 = wrapped(text, cols, piece);
            if (strcmp(o2, out))
                fail_msg("pieces of %zu bytes change the output of '%s' at %d", piece, text, cols);
            free(o2);
        }
        /* nothing lost or changed but blanks and line breaks */
        char *a = squeeze(text), *b = squeeze(out);
        assert_string_equal(a, b);
        free(a);
        free(b);
        /* the input's line breaks are all there */
        size_t in_nl = 0, out_nl = 0;
        for (const char *s = text; *s; s++)
            in_nl += *s == '\n';
        for (const char *s = out; *s; s++)
            out_nl += *s == '\n';
        assert_true(out_nl >= in_nl);
        /* no line is wider than cols; without newlines in the input, each
         * break was needed: the next line's first word (or wide character)
         * would not have fitted on the line before */
        const char *line = out;
        int prev_w = -1;
        for (;;) {
            const char *nl = strchr(line, '\n');
            size_t L = nl ? (size_t)(nl - line) : strlen(line);
            int lw = width_of(line, L);
            if (lw > cols)
                fail_msg("a line of %d columns at width %d: '%.*s'", lw, cols, (int)L, line);
            if (L && line[0] == ' ')
                fail_msg("a line starts with a blank: '%.*s'", (int)L, line);
            if (!newlines && prev_w >= 0) {
                /* the unit that had to fit: up to a blank, or up to a wide
                 * character, or that wide character alone */
                size_t fw = 0;
                mbstate_t st;
                memset(&st, 0, sizeof st);
                while (fw < L && line[fw] != ' ') {
                    wchar_t wc;
                    size_t k = line[fw] == '\033' ? strcspn(line + fw, "m") + 1 : mbrtowc(&wc, line + fw, L - fw, &st);
                    bool wide = line[fw] != '\033' && wcwidth(wc) == 2;
                    if (wide && fw > 0)
                        break;
                    fw += k;
                    if (wide)
                        break;
                }
                /* the blanks before it in the text */
                size_t nb = 0;
                for (const char *s = out; s < line; s++)
                    nb += *s != ' ' && *s != '\n';
                const char *t = text;
                for (; *t && nb; t++)
                    nb -= *t != ' ' && *t != '\n';
                while (*t == ' ')
                    t++;
                int blanks = 0;
                while (t - blanks > text && t[-blanks - 1] == ' ')
                    blanks++;
                int need = width_of(line, fw) + blanks;
                if (prev_w + need <= cols)
                    fail_msg("a needless break at width %d: a line of %d columns, then '%.*s' in\n%s", cols,
                             prev_w, (int)L, line, out);
            }
            prev_w = lw;
            if (!nl)
                break;
            line = nl + 1;
        }
        free(out);
        free(text);
    }
}

int main(void)
{
    setlocale(LC_CTYPE, "C.UTF-8");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_widths),
        cmocka_unit_test(test_indent),
        cmocka_unit_test(test_fences),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
