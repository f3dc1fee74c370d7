/*
 * http.c - an HTTP/1.1 client for two jobs: GET a file over HTTPS, following
 * redirects, through an HTTPS_PROXY if there is one, with Range for resume
 * (`models pull`); and POST a JSON request to a remote model's server,
 * reading the streamed answer (models/remote.c). Parsing is in
 * http_parse.c; TLS in tls.c.
 *
 * The client sends one request per connection (Connection: close). The
 * bearer token is sent only to its origin and never again after a redirect
 * has left that origin; a redirect may not leave https. Plain http:// is
 * used only when the caller allows it, and then connects only to addresses
 * http_addr_private accepts (checked on every address the name resolves
 * to, at every connection, so a name cannot be re-pointed at a public
 * host), never through a proxy. Every wait (DNS aside) is bounded by a
 * timeout and ends early when the cancel flag is set.
 */
#include "models/net.h"
#include "core/base/base.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int64_t parse_port(const char *s, size_t n)
{
    int64_t v = 0;
    if (n == 0 || n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static void copy_str(char *dst, size_t size, const char *s, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

/* ==== connecting: TCP with a timeout, then a proxy tunnel, then TLS ==== */

/*
 * getaddrinfo, but bounded by timeout_ms and ended by the cancel flag: the
 * lookup runs in glibc's resolver thread (getaddrinfo_a). A lookup that
 * cannot be cancelled is abandoned, its request block left allocated for
 * the resolver thread to finish with (a small leak, only on a timeout).
 */
static int resolve(const char *host, int port, int timeout_ms, const volatile sig_atomic_t *cancel,
                   struct addrinfo **res, char *err, size_t err_size)
{
    struct lookup {
        struct gaicb cb;
        struct addrinfo hints;
        char host[256], port[16];
    } *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, err_size, "out of memory");
        return NET_ERR_FATAL;
    }
    snprintf(l->host, sizeof l->host, "%s", host);
    snprintf(l->port, sizeof l->port, "%d", port);
    l->hints.ai_family = AF_UNSPEC;
    l->hints.ai_socktype = SOCK_STREAM;
    l->cb.ar_name = l->host;
    l->cb.ar_service = l->port;
    l->cb.ar_request = &l->hints;
    struct gaicb *list[1] = {&l->cb};
    int rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
    if (rc) {
        snprintf(err, err_size, "cannot resolve '%s': %s", host, gai_strerror(rc));
        free(l);
        return NET_ERR_TRANSIENT;
    }
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = timeout_ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0 || (cancel && *cancel)) {
            bool cancelled = cancel && *cancel;
            if (gai_cancel(&l->cb) == EAI_CANCELED || gai_error(&l->cb) != EAI_INPROGRESS) {
                if (gai_error(&l->cb) == 0)
                    freeaddrinfo(l->cb.ar_result);
                free(l);
            } /* else: still running; abandoned to the resolver thread */
            if (cancelled) {
                snprintf(err, err_size, "interrupted");
                return NET_ERR_INTERRUPTED;
            }
            snprintf(err, err_size, "cannot resolve '%s': timed out after %d s", host, timeout_ms / 1000);
            return NET_ERR_TRANSIENT;
        }
        struct timespec ts = {left / 1000, (left % 1000) * 1000000};
        rc = gai_suspend((const struct gaicb *const *)list, 1, &ts);
        if (rc == 0 || rc == EAI_ALLDONE || gai_error(&l->cb) != EAI_INPROGRESS)
            break;
        /* EAI_AGAIN (timeout) or EAI_INTR (a signal): check the clock and the flag */
    }
    rc = gai_error(&l->cb);
    if (rc) {
        /* the resolver's answer (no such name, or none reachable: offline)
         * is not worth seconds of retries; a lookup that timed out is */
        snprintf(err, err_size, "cannot resolve '%s': %s", host,
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        free(l);
        return NET_ERR_FATAL;
    }
    *res = l->cb.ar_result;
    free(l);
    return 0;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t size);

int http_host_private(const char *host, int timeout_ms, const volatile sig_atomic_t *cancel,
                      char *err, size_t err_size)
{
    struct addrinfo *res;
    int rc = resolve(host, 80, timeout_ms, cancel, &res, err, err_size);
    if (rc)
        return rc;
    int ok = 1;
    for (struct addrinfo *a = res; a && ok; a = a->ai_next)
        if (!http_addr_private(a->ai_addr)) {
            char t[64];
            addr_text(a->ai_addr, t, sizeof t);
            if (strcmp(host, t))
                snprintf(err, err_size, "'%s' resolves to %s, which is not a loopback or private address",
                         host, t);
            else
                snprintf(err, err_size, "%s is not a loopback or private address", t);
            ok = 0;
        }
    freeaddrinfo(res);
    return ok;
}

/* an address in words, for messages */
static void addr_text(const struct sockaddr *sa, char *out, size_t size)
{
    const void *a = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                                              : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
    if (!inet_ntop(sa->sa_family, a, out, (socklen_t)size))
        snprintf(out, size, "?");
}

/* connect to host:port; with only_private, only to the addresses plain
 * http:// may reach */
static int tcp_connect(const char *host, int port, int timeout_ms, bool only_private,
                       const volatile sig_atomic_t *cancel, char *err, size_t err_size)
{
    struct addrinfo *res, *a;
    int rc = resolve(host, port, timeout_ms, cancel, &res, err, err_size);
    if (rc)
        return rc;
    int fd = -1, last = ECONNREFUSED, tried = 0;
    char refused[64] = "";
    for (a = res; a; a = a->ai_next) {
        if (only_private && !http_addr_private(a->ai_addr)) {
            if (!refused[0])
                addr_text(a->ai_addr, refused, sizeof refused);
            continue;
        }
        tried++;
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS) {
            int r = net_wait(fd, POLLOUT, timeout_ms, cancel);
            if (r == NET_ERR_INTERRUPTED) {
                close(fd);
                freeaddrinfo(res);
                snprintf(err, err_size, "interrupted");
                return NET_ERR_INTERRUPTED;
            }
            int so = 0;
            socklen_t sl = sizeof so;
            if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == 0)
                break;
            last = r == 0 ? ETIMEDOUT : so ? so : errno;
        } else {
            last = errno;
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0 && !tried) {
        snprintf(err, err_size,
                 "refusing plain http:// to '%s' (%s): http:// is only for loopback and private "
                 "addresses; use https://", host, refused);
        return NET_ERR_FATAL;
    }
    if (fd < 0) {
        snprintf(err, err_size, "cannot connect to %s port %d: %s", host, port,
                 last == ETIMEDOUT ? "timed out" : strerror(last));
        return NET_ERR_TRANSIENT;
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

static bool host_matches_no_proxy(const char *host, const char *no_proxy)
{
    if (!no_proxy)
        return false;
    size_t hl = strlen(host);
    const char *p = no_proxy;
    while (*p) {
        size_t n = strcspn(p, ", ");
        const char *e = p;
        size_t en = n;
        if (en && e[0] == '.') {
            e++;
            en--;
        }
        if (en == 1 && e[0] == '*')
            return true;
        if (en && hl >= en && !strncasecmp(host + hl - en, e, en) &&
            (hl == en || host[hl - en - 1] == '.'))
            return true;
        p += n;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return false;
}

/* open a tunnel through an HTTP proxy: returns the connected fd or <0 */
static int proxy_connect(const struct http_params *p, const struct http_url *u, char *err,
                         size_t err_size)
{
    const char *s = p->proxy;
    if (!strncasecmp(s, "http://", 7))
        s += 7;
    else if (strstr(s, "://")) {
        snprintf(err, err_size, "unsupported HTTPS_PROXY (only http:// proxies, with CONNECT)");
        return NET_ERR_FATAL;
    }
    /* [USER[:PASSWORD]@]HOST[:PORT][/]: credentials (percent-encoded) go
     * in Proxy-Authorization: Basic, and never into a message */
    char auth[600] = "";
    size_t authority = strcspn(s, "/");
    const char *at = NULL;
    for (const char *q = s; q < s + authority; q++)
        if (*q == '@')
            at = q;
    if (at) {
        char cred[400], b64[560];
        size_t cn = 0;
        for (const char *q = s; q < at && cn + 1 < sizeof cred; q++) {
            int hi, lo;
            if (*q == '%' && q + 2 < at && (hi = base_hexval(q[1])) >= 0 && (lo = base_hexval(q[2])) >= 0) {
                cred[cn++] = (char)(hi * 16 + lo);
                q += 2;
            } else {
                cred[cn++] = *q;
            }
        }
        bool bad = (size_t)(at - s) >= sizeof cred;
        for (size_t i = 0; i < cn; i++)
            bad |= (unsigned char)cred[i] < 0x20 || cred[i] == 0x7f;
        bad = bad || net_base64(cred, cn, b64, sizeof b64) != 0;
        memset(cred, 0, sizeof cred);
        if (bad) {
            snprintf(err, err_size, "bad credentials in HTTPS_PROXY");
            return NET_ERR_FATAL;
        }
        snprintf(auth, sizeof auth, "Proxy-Authorization: Basic %s\r\n", b64);
        memset(b64, 0, sizeof b64);
        s = at + 1;
    }
    char host[256];
    size_t hn = strcspn(s, ":/");
    if (hn == 0 || hn >= sizeof host) {
        snprintf(err, err_size, "bad HTTPS_PROXY: no host");
        return NET_ERR_FATAL;
    }
    copy_str(host, sizeof host, s, hn);
    int port = 80;
    if (s[hn] == ':') {
        int64_t pn = parse_port(s + hn + 1, strcspn(s + hn + 1, "/"));
        if (pn < 1 || pn > 65535) {
            snprintf(err, err_size, "bad HTTPS_PROXY: bad port for '%s'", host);
            return NET_ERR_FATAL;
        }
        port = (int)pn;
    }
    int fd = tcp_connect(host, port, p->connect_timeout_ms, false, p->cancel, err, err_size);
    if (fd < 0)
        return fd;
    char req[1200];
    int n = snprintf(req, sizeof req, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n", u->host,
                     u->port, u->host, u->port, auth);
    memset(auth, 0, sizeof auth);
    bool sent = net_wait(fd, POLLOUT, p->read_timeout_ms, p->cancel) == 1 &&
                send(fd, req, (size_t)n, MSG_NOSIGNAL) == n;
    memset(req, 0, sizeof req);
    if (!sent) {
        close(fd);
        snprintf(err, err_size, "cannot talk to proxy %s:%d", host, port);
        return NET_ERR_TRANSIENT;
    }
    /* read the proxy's answer byte by byte so no tunnel byte is taken */
    struct http_head *h = malloc(sizeof *h);
    struct http_resp *r = malloc(sizeof *r);
    int rc = 0;
    if (!h || !r) {
        snprintf(err, err_size, "out of memory");
        rc = NET_ERR_FATAL;
        goto out;
    }
    http_head_init(h);
    for (;;) {
        char c;
        size_t used;
        if (net_wait(fd, POLLIN, p->read_timeout_ms, p->cancel) != 1 || recv(fd, &c, 1, 0) != 1) {
            snprintf(err, err_size, "proxy %s:%d closed or timed out during CONNECT", host, port);
            rc = NET_ERR_TRANSIENT;
            goto out;
        }
        rc = http_head_feed(h, &c, 1, &used, r, err, err_size);
        if (rc < 0)
            goto out;
        if (rc == 1)
            break;
    }
    if (r->status / 100 != 2) {
        snprintf(err, err_size, "proxy %s:%d refused CONNECT to %s:%d: HTTP %d %s", host, port,
                 u->host, u->port, r->status, r->reason);
        rc = r->status >= 500 ? NET_ERR_TRANSIENT : NET_ERR_FATAL;
        goto out;
    }
    rc = 0;
out:
    free(h);
    free(r);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

/* ==== the client ==== */

static const char *env2(const char *a, const char *b)
{
    const char *v = getenv(a);
    if (!v || !*v)
        v = getenv(b);
    return v && *v ? v : NULL;
}

void http_params_from_env(struct http_params *p, const char *ca_file)
{
    memset(p, 0, sizeof *p);
    p->ca_file = ca_file && *ca_file ? ca_file : getenv("KVCHAT_CA_FILE");
    if (!p->ca_file || !*p->ca_file)
        p->ca_file = HTTP_DEFAULT_CA_FILE;
    p->proxy = env2("HTTPS_PROXY", "https_proxy");
    p->no_proxy = env2("NO_PROXY", "no_proxy");
    p->user_agent = "kvchat";
}

struct http_stream {
    struct net_tls *tls;
    struct http_body body;
    char buf[16384];
    size_t pos, len; /* unread bytes in buf */
    bool eof;
};

void http_stream_close(struct http_stream *s)
{
    if (!s)
        return;
    net_tls_close(s->tls);
    free(s);
}

/* parse url as the client's settings allow */
static int parse_url(const struct http_params *p, const char *url, struct http_url *u, char *err,
                     size_t err_size)
{
    return p->allow_http ? http_url_parse_any(url, u, err, err_size)
                         : http_url_parse(url, u, err, err_size);
}

/* one request on a new connection; the head is read into resp */
static int request_once(const struct http_params *p, const char *url, const struct http_req *req,
                        bool with_bearer, struct http_resp *resp, struct http_stream **out,
                        char *err, size_t err_size)
{
    struct http_url u;
    int rc = parse_url(p, url, &u, err, err_size), fd;
    if (rc)
        return rc;
    bool proxied = u.tls && p->proxy && *p->proxy && !host_matches_no_proxy(u.host, p->no_proxy);
    fd = proxied ? proxy_connect(p, &u, err, err_size)
                 : tcp_connect(u.host, u.port, p->connect_timeout_ms, !u.tls, p->cancel, err, err_size);
    if (fd < 0)
        return fd;
    struct http_stream *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        snprintf(err, err_size, "out of memory");
        return NET_ERR_FATAL;
    }
    rc = u.tls ? net_tls_open(fd, u.host, p->ca_file, p->read_timeout_ms, p->cancel, &s->tls, err, err_size)
               : net_plain_open(fd, p->read_timeout_ms, p->cancel, &s->tls, err, err_size);
    if (rc) {
        close(fd);
        free(s);
        return rc;
    }
    /* the request head (the body follows it) */
    size_t cap = HTTP_MAX_URL + 8192;
    char *rq = malloc(cap);
    if (!rq) {
        http_stream_close(s);
        snprintf(err, err_size, "out of memory");
        return NET_ERR_FATAL;
    }
    const char *method = req->method ? req->method : "GET";
    bool v6 = strchr(u.host, ':') != NULL;
    int n = snprintf(rq, cap, "%s %s HTTP/1.1\r\nHost: %s%s%s", method, u.path, v6 ? "[" : "", u.host,
                     v6 ? "]" : "");
    if (u.port != (u.tls ? 443 : 80))
        n += snprintf(rq + n, cap - (size_t)n, ":%d", u.port);
    n += snprintf(rq + n, cap - (size_t)n, "\r\nUser-Agent: %s\r\nAccept: %s\r\nAccept-Encoding: identity\r\nConnection: close\r\n",
                  p->user_agent ? p->user_agent : "kvchat", req->accept ? req->accept : "*/*");
    if (with_bearer && req->bearer && *req->bearer)
        n += snprintf(rq + n, cap - (size_t)n, "Authorization: Bearer %s\r\n", req->bearer);
    if (req->range_from >= 0) {
        n += snprintf(rq + n, cap - (size_t)n, "Range: bytes=%lld-\r\n", (long long)req->range_from);
        if (req->if_range && *req->if_range)
            n += snprintf(rq + n, cap - (size_t)n, "If-Range: %s\r\n", req->if_range);
    }
    if (req->body)
        n += snprintf(rq + n, cap - (size_t)n, "Content-Type: %s\r\nContent-Length: %zu\r\n",
                      req->content_type ? req->content_type : "application/octet-stream", req->body_len);
    n += snprintf(rq + n, cap - (size_t)n, "\r\n");
    if ((size_t)n >= cap) {
        memset(rq, 0, cap);
        free(rq);
        http_stream_close(s);
        snprintf(err, err_size, "request too long");
        return NET_ERR_FATAL;
    }
    rc = net_tls_write(s->tls, rq, (size_t)n, err, err_size);
    memset(rq, 0, cap); /* it may hold the token */
    free(rq);
    if (!rc && req->body && req->body_len)
        rc = net_tls_write(s->tls, req->body, req->body_len, err, err_size);
    if (rc) {
        http_stream_close(s);
        return rc;
    }
    /* the head */
    struct http_head *h = malloc(sizeof *h);
    if (!h) {
        http_stream_close(s);
        snprintf(err, err_size, "out of memory");
        return NET_ERR_FATAL;
    }
    http_head_init(h);
    for (;;) {
        ssize_t k = net_tls_read(s->tls, s->buf, sizeof s->buf, err, err_size);
        if (k <= 0) {
            if (k == 0)
                snprintf(err, err_size, "connection closed before a complete HTTP response");
            free(h);
            http_stream_close(s);
            return k == 0 ? NET_ERR_TRANSIENT : (int)k;
        }
        size_t used;
        rc = http_head_feed(h, s->buf, (size_t)k, &used, resp, err, err_size);
        if (rc < 0) {
            free(h);
            http_stream_close(s);
            return rc;
        }
        if (rc == 1) {
            s->pos = used;
            s->len = (size_t)k;
            break;
        }
    }
    free(h);
    http_body_init(&s->body, resp);
    *out = s;
    return 0;
}

int http_request(const struct http_params *p, const struct http_req *req, struct http_resp *resp,
                 char *final_url, char *linked_etag, size_t linked_etag_size, int64_t *linked_size,
                 struct http_stream **out, char *err, size_t err_size)
{
    char url[HTTP_MAX_URL], next[HTTP_MAX_URL];
    bool bearer_ok = true; /* false once a redirect has left the token's origin */
    bool post = req->method && strcmp(req->method, "GET");
    linked_etag[0] = 0;
    *linked_size = -1;
    *out = NULL;
    if (snprintf(url, sizeof url, "%s", req->url) >= (int)sizeof url) {
        snprintf(err, err_size, "URL too long");
        return NET_ERR_FATAL;
    }
    for (int hop = 0;; hop++) {
        struct http_url u;
        char origin[300];
        int rc = parse_url(p, url, &u, err, err_size);
        if (rc)
            return rc;
        http_url_origin(&u, origin, sizeof origin);
        bool send_bearer = bearer_ok && req->bearer_origin && !strcmp(origin, req->bearer_origin);
        if (req->bearer_origin && strcmp(origin, req->bearer_origin))
            bearer_ok = false;
        struct http_stream *s = NULL;
        rc = request_once(p, url, req, send_bearer, resp, &s, err, err_size);
        if (rc)
            return rc;
        if (!linked_etag[0] && resp->linked_etag[0])
            snprintf(linked_etag, linked_etag_size, "%s", resp->linked_etag);
        if (*linked_size < 0 && resp->linked_size >= 0)
            *linked_size = resp->linked_size;
        bool keeps_method = resp->status == 307 || resp->status == 308;
        bool redirect = keeps_method || resp->status == 301 || resp->status == 302 || resp->status == 303;
        if (!redirect) {
            snprintf(final_url, HTTP_MAX_URL, "%s", url);
            *out = s;
            return 0;
        }
        http_stream_close(s);
        if (!resp->location[0]) {
            snprintf(err, err_size, "HTTP %d redirect without a Location", resp->status);
            return NET_ERR_FATAL;
        }
        if (post && !keeps_method) {
            snprintf(err, err_size, "HTTP %d redirect to '%.300s' would turn the %s into a GET; "
                                    "use that URL instead", resp->status, resp->location, req->method);
            return NET_ERR_FATAL;
        }
        if (hop >= req->max_redirects) {
            snprintf(err, err_size, "too many redirects (more than %d)", req->max_redirects);
            return NET_ERR_FATAL;
        }
        if ((rc = http_url_join(url, resp->location, next, sizeof next, err, err_size)))
            return rc;
        memcpy(url, next, sizeof url);
    }
}

ssize_t http_stream_read(struct http_stream *s, char *buf, size_t n, char *err, size_t err_size)
{
    for (;;) {
        if (s->body.done)
            return 0;
        while (s->pos < s->len) {
            const char *d;
            size_t dn;
            size_t avail = s->len - s->pos;
            if (avail > n)
                avail = n; /* never hand back more than the caller's buffer */
            ssize_t k = http_body_feed(&s->body, s->buf + s->pos, avail, &d, &dn, err, err_size);
            if (k < 0)
                return k;
            s->pos += (size_t)k;
            if (dn) {
                memmove(buf, d, dn);
                return (ssize_t)dn;
            }
            if (s->body.done)
                return 0;
        }
        if (s->eof)
            return http_body_eof(&s->body, err, err_size);
        ssize_t k = net_tls_read(s->tls, s->buf, sizeof s->buf, err, err_size);
        if (k < 0)
            return k;
        s->pos = 0;
        s->len = (size_t)k;
        if (k == 0)
            s->eof = true;
    }
}

int http_read_all(struct http_stream *s, size_t max, char **body, size_t *len, char *err,
                  size_t err_size)
{
    size_t cap = 16384, n = 0;
    char *b = malloc(cap + 1);
    *body = NULL;
    *len = 0;
    for (;;) {
        if (!b) {
            snprintf(err, err_size, "out of memory");
            return NET_ERR_FATAL;
        }
        if (n == cap) {
            if (cap >= max) {
                free(b);
                snprintf(err, err_size, "response longer than %zu bytes", max);
                return NET_ERR_FATAL;
            }
            cap = cap * 2 < max ? cap * 2 : max;
            char *nb = realloc(b, cap + 1);
            if (!nb)
                free(b);
            b = nb;
            continue;
        }
        ssize_t k = http_stream_read(s, b + n, cap - n, err, err_size);
        if (k < 0) {
            free(b);
            return (int)k;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    b[n] = 0;
    *body = b;
    *len = n;
    return 0;
}
