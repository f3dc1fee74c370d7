/*
 * test_http.c - the HTTP/1.1 response parser and URL handling of models/
 * (models/http_parse.c): status lines, header fields, Content-Length,
 * chunked framing fed a byte at a time, Content-Range, interim responses,
 * malformed heads; https URLs, redirect joins and origins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct http_head head;
static char err[256];

/* parse a whole response; returns the head status, body bytes into body */
static int parse(const char *in, size_t n, size_t piece, struct http_resp *r, char *body,
                 size_t *body_n, int *body_rc)
{
    size_t pos = 0, used;
    int rc = 0;
    http_head_init(&head);
    *body_n = 0;
    *body_rc = 0;
    while (pos < n) {
        size_t k = n - pos < piece ? n - pos : piece;
        rc = http_head_feed(&head, in + pos, k, &used, r, err, sizeof err);
        pos += used;
        if (rc)
            break;
    }
    if (rc != 1)
        return rc;
    struct http_body b;
    http_body_init(&b, r);
    while (pos < n && !b.done) {
        size_t k = n - pos < piece ? n - pos : piece;
        const char *d;
        size_t dn;
        ssize_t c = http_body_feed(&b, in + pos, k, &d, &dn, err, sizeof err);
        if (c < 0) {
            *body_rc = (int)c;
            return rc;
        }
        memcpy(body + *body_n, d, dn);
        *body_n += dn;
        pos += (size_t)c;
    }
    if (!b.done)
        *body_rc = http_body_eof(&b, err, sizeof err);
    return rc;
}

static void test_content_length(void **state)
{
    static const char in[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"abc\"\r\n"
                             "X-Linked-ETag: \"e3b0\"\r\nX-Linked-Size: 77\r\nAccept-Ranges: bytes\r\n\r\nhelloEXTRA";
    struct http_resp r;
    char body[64];
    size_t bn;
    int brc;
    for (size_t piece = 1; piece <= sizeof in; piece += 3) {
        assert_int_equal(parse(in, sizeof in - 1, piece, &r, body, &bn, &brc), 1);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.reason, "OK");
        assert_int_equal(r.content_length, 5);
        assert_false(r.chunked);
        assert_string_equal(r.etag, "\"abc\"");
        assert_string_equal(r.linked_etag, "\"e3b0\"");
        assert_int_equal(r.linked_size, 77);
        assert_true(r.accept_ranges);
        assert_int_equal(brc, 0);
        assert_int_equal(bn, 5);
        assert_memory_equal(body, "hello", 5);
    }
}

static void test_chunked(void **state)
{
    static const char in[] = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                             "5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n";
    struct http_resp r;
    char body[64];
    size_t bn;
    int brc;
    for (size_t piece = 1; piece <= sizeof in; piece++) {
        assert_int_equal(parse(in, sizeof in - 1, piece, &r, body, &bn, &brc), 1);
        assert_true(r.chunked);
        assert_int_equal(brc, 0);
        assert_int_equal(bn, 15);
        assert_memory_equal(body, "hello0123456789", 15);
    }
}

static void test_truncated_bodies(void **state)
{
    struct http_resp r;
    char body[64];
    size_t bn;
    int brc;
    static const char cl[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf";
    assert_int_equal(parse(cl, sizeof cl - 1, 7, &r, body, &bn, &brc), 1);
    assert_int_equal(bn, 4);
    assert_int_equal(brc, NET_ERR_TRANSIENT);
    assert_non_null(strstr(err, "6 bytes of the body still to come"));
    static const char ch[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";
    assert_int_equal(parse(ch, sizeof ch - 1, 7, &r, body, &bn, &brc), 1);
    assert_int_equal(bn, 5);
    assert_int_equal(brc, NET_ERR_TRANSIENT);
    assert_non_null(strstr(err, "inside a chunked body"));
    /* no length at all: the end of the connection ends the body */
    static const char cls[] = "HTTP/1.0 200 OK\r\n\r\nall of it";
    assert_int_equal(parse(cls, sizeof cls - 1, 7, &r, body, &bn, &brc), 1);
    assert_int_equal(bn, 9);
    assert_int_equal(brc, 0);
}

static void test_bad_framing(void **state)
{
    static const char *const bad[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct http_resp r;
        char body[64];
        size_t bn;
        int brc;
        assert_int_equal(parse(bad[i], strlen(bad[i]), 1, &r, body, &bn, &brc), 1);
        assert_int_equal(brc, NET_ERR_FATAL);
    }
}

static void test_bad_heads(void **state)
{
    static const char *const bad[] = {
        "HTTX/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.1 999 Nope\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        "HTTP/1.1 302 Found\r\nLocation: https://a/\x1b[2J\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct http_resp r;
        size_t used;
        http_head_init(&head);
        err[0] = 0;
        assert_true(http_head_feed(&head, bad[i], strlen(bad[i]), &used, &r, err, sizeof err) < 0);
        assert_true(err[0] != 0);
    }
    /* an endless head is refused at HTTP_MAX_HEAD */
    char *big = malloc(HTTP_MAX_HEAD + 100);
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(big + 20, 'a', HTTP_MAX_HEAD + 80);
    struct http_resp r;
    size_t used;
    http_head_init(&head);
    assert_true(http_head_feed(&head, big, HTTP_MAX_HEAD + 100, &used, &r, err, sizeof err) < 0);
    free(big);
}

static void test_interim_and_range(void **state)
{
    static const char in[] = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 206 Partial Content\n"
                             "Content-Range: bytes 100-104/105\nContent-Length: 5\n\nworld";
    struct http_resp r;
    char body[64];
    size_t bn;
    int brc;
    assert_int_equal(parse(in, sizeof in - 1, 4, &r, body, &bn, &brc), 1);
    assert_int_equal(r.status, 206);
    assert_int_equal(r.range_first, 100);
    assert_int_equal(r.range_last, 104);
    assert_int_equal(r.range_total, 105);
    assert_int_equal(bn, 5);
    static const char u[] = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */105\r\nContent-Length: 0\r\n\r\n";
    assert_int_equal(parse(u, sizeof u - 1, 100, &r, body, &bn, &brc), 1);
    assert_int_equal(r.status, 416);
    assert_int_equal(r.range_first, -1);
    assert_int_equal(r.range_total, 105);
}

static void test_urls(void **state)
{
    struct http_url u;
    char out[HTTP_MAX_URL], o[300];
    assert_int_equal(http_url_parse("https://Example.COM/a/b?c=d#frag", &u, err, sizeof err), 0);
    assert_string_equal(u.host, "Example.COM");
    assert_int_equal(u.port, 443);
    assert_string_equal(u.path, "/a/b?c=d");
    http_url_origin(&u, o, sizeof o);
    assert_string_equal(o, "example.com:443");
    assert_int_equal(http_url_parse("https://127.0.0.1:8443", &u, err, sizeof err), 0);
    assert_int_equal(u.port, 8443);
    assert_string_equal(u.path, "/");
    assert_int_equal(http_url_parse("https://[::1]:99/x", &u, err, sizeof err), 0);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 99);
    static const char *const bad[] = {"http://a/x", "ftp://a", "https://", "https://a:0/",
                                      "https://a:65536/", "https://u:p@a/", "https://a b/",
                                      "https://a/b c", "https://a:12x/"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_true(http_url_parse(bad[i], &u, err, sizeof err) < 0);

    const char *base = "https://hub.example:444/o/r/resolve/main/f.gguf?x=1";
    assert_int_equal(http_url_join(base, "https://cdn.example/f", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "https://cdn.example/f");
    assert_int_equal(http_url_join(base, "/api/x", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "https://hub.example:444/api/x");
    assert_int_equal(http_url_join(base, "g.gguf", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "https://hub.example:444/o/r/resolve/main/g.gguf");
    assert_int_equal(http_url_join(base, "//other.example/p", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "https://other.example/p");
    assert_true(http_url_join(base, "http://cdn.example/f", out, sizeof out, err, sizeof err) < 0);
    assert_non_null(strstr(err, "away from https"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_truncated_bodies),
        cmocka_unit_test(test_bad_framing),
        cmocka_unit_test(test_bad_heads),
        cmocka_unit_test(test_interim_and_range),
        cmocka_unit_test(test_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
