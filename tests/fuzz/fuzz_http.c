/*
 * fuzz_http.c - libFuzzer target for the HTTP/1.1 response parser
 * (models/http_parse.c): status line, header fields, Content-Length and
 * chunked framing, Content-Type and Retry-After, and redirect URLs (from
 * https and from http bases). The first input byte picks how the
 * rest is split into pieces; the same bytes are then parsed in one piece,
 * and the two runs must agree (status, body bytes, error or not). Every
 * call must consume at least one byte or finish, and hand back body bytes
 * that lie inside its input. ASan/UBSan catch the rest.
 *   make tests/fuzz/fuzz_http && ./tests/fuzz/fuzz_http -max_total_time=600 \
 *        /tmp/http-work tests/fuzz/corpus/http
 */
#include "models/net.h"
#include "tests/fuzz/fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct outcome {
    int head_rc;       /* 1 complete, 0 incomplete, <0 error */
    int status;
    int body_rc;       /* 0 ok, <0 error */
    bool done;
    uint64_t n_body;
    uint64_t hash;     /* FNV-1a of the body bytes */
};

static struct http_head head;
static struct http_resp resp;

static void parse(const char *in, size_t n, size_t piece, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    o->hash = 1469598103934665603ULL;
    char err[256];
    size_t pos = 0, used = 0;
    http_head_init(&head);
    while (pos < n) {
        size_t k = n - pos < piece ? n - pos : piece;
        err[0] = 0;
        o->head_rc = http_head_feed(&head, in + pos, k, &used, &resp, err, sizeof err);
        if (used > k)
            abort();
        if (o->head_rc < 0 && !err[0])
            abort(); /* every refusal has a reason */
        pos += used;
        if (o->head_rc != 0)
            break;
    }
    if (o->head_rc != 1)
        return;
    o->status = resp.status;
    if (resp.status < 100 || resp.status > 599)
        abort();
    /* what a client does with a redirect */
    if (resp.location[0]) {
        char url[HTTP_MAX_URL];
        struct http_url u;
        if (http_url_join("https://example.com:8443/a/b?c", resp.location, url, sizeof url, err,
                          sizeof err) == 0) {
            if (strncasecmp(url, "https://", 8))
                abort(); /* a redirect never leaves https */
            http_url_parse(url, &u, err, sizeof err);
        }
        if (http_url_join("http://10.0.0.1:8000/v1/chat/completions", resp.location, url, sizeof url,
                          err, sizeof err) == 0)
            http_url_parse_any(url, &u, err, sizeof err);
    }
    struct http_body b;
    http_body_init(&b, &resp);
    while (pos < n && !b.done) {
        size_t k = n - pos < piece ? n - pos : piece;
        const char *d;
        size_t dn;
        ssize_t c = http_body_feed(&b, in + pos, k, &d, &dn, err, sizeof err);
        if (c < 0) {
            o->body_rc = (int)c;
            return;
        }
        if ((c == 0 && !b.done) || (size_t)c > k || dn > (size_t)c || d < in + pos ||
            d + dn > in + pos + k)
            abort();
        for (size_t i = 0; i < dn; i++)
            o->hash = (o->hash ^ (uint8_t)d[i]) * 1099511628211ULL;
        o->n_body += dn;
        pos += (size_t)c;
    }
    if (b.mode == HTTP_BODY_LENGTH && resp.content_length >= 0 &&
        o->n_body > (uint64_t)resp.content_length)
        abort();
    o->done = b.done;
    if (!b.done)
        o->body_rc = http_body_eof(&b, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t piece, n;
    /* a private copy: the parser must not read past its end */
    char *buf = fuzz_stream_input(data, size, &piece, &n);
    if (!buf)
        return 0;
    struct outcome a, b;
    parse(buf, n, piece, &a);
    parse(buf, n, size, &b);
    if (a.head_rc != b.head_rc || a.status != b.status || (a.body_rc < 0) != (b.body_rc < 0) ||
        a.done != b.done || (a.body_rc == 0 && (a.n_body != b.n_body || a.hash != b.hash)))
        abort();
    free(buf);
    return 0;
}
