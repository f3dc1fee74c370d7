/*
 * http_parse.c - HTTP/1.1 response parsing, http(s):// URLs and the rule for
 * which addresses plain http:// may reach, from bytes and nothing else (no
 * sockets, no TLS), so that tests/fuzz/fuzz_http.c drives it directly. The
 * client around it is http.c.
 *
 * Invariants: the head is at most HTTP_MAX_HEAD bytes; every number is
 * parsed with an overflow check; a body is framed by chunked encoding, by
 * Content-Length, or by the end of the connection, in that order of
 * precedence (RFC 9112 §6.3), and a body that ends early is an error, never
 * a short file taken as whole.
 */
#include "models/net.h"
#include "core/base/base.h"

#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ==== numbers ==== */

/* decimal digits only, no sign; -1 on anything else or overflow */
static int64_t parse_dec(const char *s, size_t n)
{
    int64_t v = 0;
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (INT64_MAX - (s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

static void copy_str(char *dst, size_t size, const char *s, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static bool name_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && !strncasecmp(name, want, n);
}

/* "bytes FIRST-LAST/TOTAL" or "bytes *\/TOTAL" */
static void parse_content_range(struct http_resp *r, const char *v, size_t n)
{
    if (n < 6 || strncasecmp(v, "bytes ", 6))
        return;
    v += 6, n -= 6;
    const char *slash = memchr(v, '/', n);
    if (!slash)
        return;
    size_t a = (size_t)(slash - v);
    r->range_total = (n - a - 1 == 1 && slash[1] == '*') ? -1 : parse_dec(slash + 1, n - a - 1);
    const char *dash = memchr(v, '-', a);
    if (dash) {
        r->range_first = parse_dec(v, (size_t)(dash - v));
        r->range_last = parse_dec(dash + 1, a - (size_t)(dash - v) - 1);
        if (r->range_first < 0 || r->range_last < r->range_first)
            r->range_first = r->range_last = -1;
    }
}

/* ==== the head: status line and header fields ==== */

void http_head_init(struct http_head *h)
{
    h->len = 0;
}

/* parse a complete head of n bytes (ending with an empty line) */
static int parse_head(const char *buf, size_t n, struct http_resp *r, char *err, size_t err_size)
{
    memset(r, 0, sizeof *r);
    r->content_length = r->linked_size = r->retry_after = -1;
    r->range_first = r->range_last = r->range_total = -1;
    const char *p = buf, *end = buf + n;
    /* status line: HTTP/1.x SP 3DIGIT [SP reason] */
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    size_t ln = (size_t)(eol - p);
    if (ln && p[ln - 1] == '\r')
        ln--;
    if (ln < 12 || memcmp(p, "HTTP/1.", 7) || !isdigit((unsigned char)p[7]) || p[8] != ' ' ||
        !isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) ||
        !isdigit((unsigned char)p[11]) || (ln > 12 && p[12] != ' ')) {
        snprintf(err, err_size, "malformed HTTP status line");
        return NET_ERR_FATAL;
    }
    r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    if (r->status < 100 || r->status > 599) {
        snprintf(err, err_size, "bad HTTP status %d", r->status);
        return NET_ERR_FATAL;
    }
    if (ln > 13) {
        size_t k = 0;
        for (size_t i = 13; i < ln && k + 1 < sizeof r->reason; i++)
            r->reason[k++] = isprint((unsigned char)p[i]) ? p[i] : '?';
        r->reason[k] = 0;
    }
    p = eol + 1;
    bool have_cl = false;
    while (p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            break;
        ln = (size_t)(eol - p);
        if (ln && p[ln - 1] == '\r')
            ln--;
        if (ln == 0)
            break; /* the empty line */
        if (p[0] == ' ' || p[0] == '\t') {
            snprintf(err, err_size, "obsolete header line folding");
            return NET_ERR_FATAL;
        }
        const char *colon = memchr(p, ':', ln);
        if (!colon || colon == p) {
            snprintf(err, err_size, "malformed HTTP header line");
            return NET_ERR_FATAL;
        }
        size_t nn = (size_t)(colon - p);
        for (size_t i = 0; i < nn; i++)
            if (p[i] <= ' ' || p[i] >= 0x7f) {
                snprintf(err, err_size, "malformed HTTP header name");
                return NET_ERR_FATAL;
            }
        const char *v = colon + 1;
        size_t vn = ln - nn - 1;
        trim(&v, &vn);
        if (name_is(p, nn, "Content-Length")) {
            int64_t cl = parse_dec(v, vn);
            if (cl < 0 || (have_cl && cl != r->content_length)) {
                snprintf(err, err_size, "bad Content-Length");
                return NET_ERR_FATAL;
            }
            r->content_length = cl;
            have_cl = true;
        } else if (name_is(p, nn, "Transfer-Encoding")) {
            /* the last coding must be chunked; we accept no other coding */
            if (vn >= 7 && !strncasecmp(v + vn - 7, "chunked", 7) && (vn == 7 || v[vn - 8] == ' ' || v[vn - 8] == ','))
                r->chunked = true;
            if (!(vn == 7 && r->chunked)) {
                snprintf(err, err_size, "unsupported Transfer-Encoding");
                return NET_ERR_FATAL;
            }
        } else if (name_is(p, nn, "Location")) {
            if (vn >= sizeof r->location) {
                snprintf(err, err_size, "redirect location too long");
                return NET_ERR_FATAL;
            }
            copy_str(r->location, sizeof r->location, v, vn);
        } else if (name_is(p, nn, "ETag")) {
            copy_str(r->etag, sizeof r->etag, v, vn);
        } else if (name_is(p, nn, "X-Linked-ETag")) {
            copy_str(r->linked_etag, sizeof r->linked_etag, v, vn);
        } else if (name_is(p, nn, "X-Linked-Size")) {
            r->linked_size = parse_dec(v, vn);
        } else if (name_is(p, nn, "Content-Range")) {
            parse_content_range(r, v, vn);
        } else if (name_is(p, nn, "Accept-Ranges")) {
            r->accept_ranges = vn == 5 && !strncasecmp(v, "bytes", 5);
        } else if (name_is(p, nn, "Content-Type")) {
            /* the media type alone, lowercase: "text/event-stream" */
            size_t k = 0;
            for (size_t i = 0; i < vn && v[i] != ';' && v[i] != ' ' && k + 1 < sizeof r->content_type; i++)
                r->content_type[k++] = (char)tolower((unsigned char)v[i]);
            r->content_type[k] = 0;
        } else if (name_is(p, nn, "Retry-After")) {
            /* seconds only; an HTTP date is taken as absent */
            r->retry_after = parse_dec(v, vn);
        }
        p = eol + 1;
    }
    /* a control character in a kept value would reach the terminal */
    for (char *s = r->location; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) {
            snprintf(err, err_size, "bad character in redirect location");
            return NET_ERR_FATAL;
        }
    for (char *s = r->content_type; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
    return 0;
}

int http_head_feed(struct http_head *h, const char *in, size_t n, size_t *consumed,
                   struct http_resp *out, char *err, size_t err_size)
{
    *consumed = 0;
    for (size_t i = 0; i < n; i++) {
        if (h->len >= sizeof h->buf) {
            snprintf(err, err_size, "HTTP response head longer than %d bytes", HTTP_MAX_HEAD);
            return NET_ERR_FATAL;
        }
        h->buf[h->len++] = in[i];
        /* the head ends at an empty line: "\n\n" or "\n\r\n" */
        size_t L = h->len;
        if (in[i] != '\n' || L < 2)
            continue;
        if (!(h->buf[L - 2] == '\n' || (L >= 3 && h->buf[L - 2] == '\r' && h->buf[L - 3] == '\n')))
            continue;
        int rc = parse_head(h->buf, L, out, err, err_size);
        h->len = 0;
        if (rc)
            return rc;
        if (out->status >= 100 && out->status < 200)
            continue; /* interim response: the real one follows */
        *consumed = i + 1;
        return 1;
    }
    *consumed = n;
    return 0;
}

/* ==== the body: chunked framing ==== */

enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

void http_body_init(struct http_body *b, const struct http_resp *r)
{
    memset(b, 0, sizeof *b);
    if (r->status == 204 || r->status == 304 || r->status < 200) {
        b->mode = HTTP_BODY_NONE;
        b->done = true;
    } else if (r->chunked) {
        b->mode = HTTP_BODY_CHUNKED;
        b->state = CH_SIZE;
    } else if (r->content_length >= 0) {
        b->mode = HTTP_BODY_LENGTH;
        b->left = (uint64_t)r->content_length;
        b->done = b->left == 0;
    } else {
        b->mode = HTTP_BODY_CLOSE;
    }
}

/* a complete chunk-size line in b->line (without the LF) */
static int chunk_size_line(struct http_body *b, char *err, size_t err_size)
{
    size_t n = b->line_len, i = 0;
    if (n && b->line[n - 1] == '\r')
        n--;
    uint64_t v = 0;
    for (; i < n && base_hexval((unsigned char)b->line[i]) >= 0; i++) {
        if (v >> 59) {
            snprintf(err, err_size, "chunk size too large");
            return NET_ERR_FATAL;
        }
        v = v * 16 + (uint64_t)base_hexval((unsigned char)b->line[i]);
    }
    if (i == 0 || (i < n && b->line[i] != ';' && b->line[i] != ' ' && b->line[i] != '\t')) {
        snprintf(err, err_size, "malformed chunk size line");
        return NET_ERR_FATAL;
    }
    b->left = v;
    b->state = v ? CH_DATA : CH_TRAILER;
    return 0;
}

ssize_t http_body_feed(struct http_body *b, const char *in, size_t n, const char **data,
                       size_t *data_len, char *err, size_t err_size)
{
    *data = in;
    *data_len = 0;
    if (b->done || n == 0)
        return 0;
    switch (b->mode) {
    case HTTP_BODY_NONE:
        b->done = true;
        return 0;
    case HTTP_BODY_CLOSE:
        *data_len = n;
        return (ssize_t)n;
    case HTTP_BODY_LENGTH: {
        size_t k = n < b->left ? n : (size_t)b->left;
        *data_len = k;
        b->left -= k;
        b->done = b->left == 0;
        return (ssize_t)(k ? k : n); /* bytes past the body are dropped */
    }
    case HTTP_BODY_CHUNKED:
        break;
    }
    switch (b->state) {
    case CH_DATA: {
        size_t k = n < b->left ? n : (size_t)b->left;
        *data_len = k;
        b->left -= k;
        if (b->left == 0) {
            b->state = CH_DATA_END;
            b->line_len = 0;
        }
        return (ssize_t)k;
    }
    case CH_DATA_END: /* CRLF (or a bare LF) after the data */
        if (in[0] == '\r' && b->line_len == 0) {
            b->line_len = 1;
            return 1;
        }
        if (in[0] != '\n') {
            snprintf(err, err_size, "chunk data not followed by CRLF");
            return NET_ERR_FATAL;
        }
        b->state = CH_SIZE;
        b->line_len = 0;
        return 1;
    case CH_SIZE:
    case CH_TRAILER: {
        size_t i = 0;
        for (; i < n; i++) {
            char c = in[i];
            if (c == '\n') {
                i++;
                if (b->state == CH_SIZE) {
                    int rc = chunk_size_line(b, err, err_size);
                    if (rc)
                        return rc;
                } else {
                    size_t L = b->line_len;
                    if (L && b->line[L - 1] == '\r')
                        L--;
                    if (L == 0)
                        b->done = true; /* the empty line ends the trailer */
                }
                b->line_len = 0;
                return (ssize_t)i;
            }
            if (b->state == CH_TRAILER && (b->trailer_bytes += 1) > HTTP_MAX_HEAD) {
                snprintf(err, err_size, "chunked trailer too long");
                return NET_ERR_FATAL;
            }
            if (b->line_len >= sizeof b->line) {
                if (b->state == CH_SIZE) {
                    snprintf(err, err_size, "chunk size line too long");
                    return NET_ERR_FATAL;
                }
                b->line_len = 1; /* long trailer field: only emptiness matters */
                b->line[0] = 'x';
                continue;
            }
            b->line[b->line_len++] = c;
        }
        return (ssize_t)i;
    }
    }
    snprintf(err, err_size, "bad chunked state");
    return NET_ERR_FATAL;
}

int http_body_eof(const struct http_body *b, char *err, size_t err_size)
{
    if (b->done || b->mode == HTTP_BODY_CLOSE)
        return 0;
    if (b->mode == HTTP_BODY_LENGTH)
        snprintf(err, err_size, "connection closed with %llu bytes of the body still to come",
                 (unsigned long long)b->left);
    else
        snprintf(err, err_size, "connection closed inside a chunked body");
    return NET_ERR_TRANSIENT;
}

/* ==== URLs ==== */

static int url_parse(const char *url, bool allow_http, struct http_url *u, char *err,
                     size_t err_size)
{
    memset(u, 0, sizeof *u);
    const char *h;
    if (!strncasecmp(url, "https://", 8)) {
        u->tls = true;
        h = url + 8;
    } else if (allow_http && !strncasecmp(url, "http://", 7)) {
        h = url + 7;
    } else {
        snprintf(err, err_size, allow_http ? "'%s' is not an http:// or https:// URL"
                                           : "'%s' is not an https:// URL", url);
        return NET_ERR_FATAL;
    }
    const char *he, *slash = h + strcspn(h, "/?#");
    if (memchr(h, '@', (size_t)(slash - h))) {
        snprintf(err, err_size, "credentials in URLs are not supported");
        return NET_ERR_FATAL;
    }
    const char *portp = NULL;
    if (*h == '[') {
        he = memchr(h, ']', (size_t)(slash - h));
        if (!he) {
            snprintf(err, err_size, "bad IPv6 address in URL '%s'", url);
            return NET_ERR_FATAL;
        }
        h++;
        if (he[1] == ':')
            portp = he + 2;
    } else {
        he = memchr(h, ':', (size_t)(slash - h));
        if (he)
            portp = he + 1;
        else
            he = slash;
    }
    size_t hn = (size_t)(he - h);
    if (hn == 0 || hn >= sizeof u->host) {
        snprintf(err, err_size, "bad host in URL '%s'", url);
        return NET_ERR_FATAL;
    }
    for (size_t i = 0; i < hn; i++)
        if (!(isalnum((unsigned char)h[i]) || strchr("-._:", h[i]))) {
            snprintf(err, err_size, "bad host in URL '%s'", url);
            return NET_ERR_FATAL;
        }
    copy_str(u->host, sizeof u->host, h, hn);
    u->port = u->tls ? 443 : 80;
    if (portp) {
        int64_t pn = parse_dec(portp, (size_t)(slash - portp));
        if (pn < 1 || pn > 65535) {
            snprintf(err, err_size, "bad port in URL '%s'", url);
            return NET_ERR_FATAL;
        }
        u->port = (int)pn;
    }
    size_t pl = strcspn(slash, "#");
    if (pl + 2 >= sizeof u->path) {
        snprintf(err, err_size, "URL too long");
        return NET_ERR_FATAL;
    }
    if (*slash != '/')
        u->path[0] = '/';
    strncat(u->path, slash, pl);
    for (char *s = u->path; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f) {
            snprintf(err, err_size, "bad character in URL '%s'", url);
            return NET_ERR_FATAL;
        }
    return 0;
}

int http_url_parse(const char *url, struct http_url *u, char *err, size_t err_size)
{
    return url_parse(url, false, u, err, err_size);
}

int http_url_parse_any(const char *url, struct http_url *u, char *err, size_t err_size)
{
    return url_parse(url, true, u, err, err_size);
}

int http_url_join(const char *base, const char *loc, char *out, size_t size, char *err,
                  size_t err_size)
{
    int n;
    struct http_url b;
    if (url_parse(base, true, &b, err, err_size))
        return NET_ERR_FATAL;
    const char *scheme = b.tls ? "https" : "http";
    if (strstr(loc, "://")) {
        if (strncasecmp(loc, "https://", 8) && (b.tls || strncasecmp(loc, "http://", 7))) {
            snprintf(err, err_size, "refusing a redirect away from %s to '%.200s'", scheme, loc);
            return NET_ERR_FATAL;
        }
        n = snprintf(out, size, "%s", loc);
    } else {
        const char *bracket = strchr(b.host, ':') ? "[" : "", *close = *bracket ? "]" : "";
        if (loc[0] == '/' && loc[1] == '/')
            n = snprintf(out, size, "%s:%s", scheme, loc);
        else if (loc[0] == '/')
            n = snprintf(out, size, "%s://%s%s%s:%d%s", scheme, bracket, b.host, close, b.port, loc);
        else {
            /* relative to the base path's directory */
            size_t dir = strcspn(b.path, "?");
            while (dir > 0 && b.path[dir - 1] != '/')
                dir--;
            n = snprintf(out, size, "%s://%s%s%s:%d%.*s%s", scheme, bracket, b.host, close, b.port,
                         (int)dir, b.path, loc);
        }
    }
    if (n < 0 || (size_t)n >= size) {
        snprintf(err, err_size, "redirect URL too long");
        return NET_ERR_FATAL;
    }
    return 0;
}

void http_url_origin(const struct http_url *u, char *out, size_t size)
{
    snprintf(out, size, "%s%s:%d", u->tls ? "" : "http://", u->host, u->port);
    for (char *s = out; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}


/* ==== which addresses plain http:// may reach ==== */

static bool v4_private(const unsigned char a[4])
{
    return a[0] == 127 ||                                  /* loopback 127/8 */
           a[0] == 10 ||                                   /* 10/8 */
           (a[0] == 172 && (a[1] & 0xf0) == 16) ||         /* 172.16/12 */
           (a[0] == 192 && a[1] == 168) ||                 /* 192.168/16 */
           (a[0] == 169 && a[1] == 254);                   /* link-local 169.254/16 */
}

bool http_addr_private(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return v4_private((const unsigned char *)&in->sin_addr.s_addr);
    }
    if (sa->sa_family == AF_INET6) {
        const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const unsigned char loop[16] = {[15] = 1};
        static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
        if (!memcmp(a, loop, 16))
            return true;                                   /* ::1 */
        if (!memcmp(a, mapped, 12))
            return v4_private(a + 12);                     /* ::ffff:a.b.c.d */
        return (a[0] & 0xfe) == 0xfc ||                    /* unique local fc00::/7 */
               (a[0] == 0xfe && (a[1] & 0xc0) == 0x80);    /* link-local fe80::/10 */
    }
    return false;
}
