/*
 * json-out.h - the test tools' JSON string writer (tests/grammar-gen.c,
 * tests/remote-chat.c): n bytes of s on stdout as a JSON string, '"' and
 * '\' escaped, control bytes as \u00XX, other bytes as they are (the
 * reader decodes UTF-8). Header-only; for test programs.
 */
#ifndef KVCHAT_TESTS_JSON_OUT_H
#define KVCHAT_TESTS_JSON_OUT_H

#include <stddef.h>
#include <stdio.h>

static inline void json_str(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

#endif
