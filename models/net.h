/*
 * net.h - (internal to models/) the network layers under `models pull`: a
 * TLS connection over a connected socket (models/tls.c, the only file that
 * includes mbedTLS), HTTP/1.1 response
 * parsing (models/http_parse.c) and the client (models/http.c).
 *
 * Errors: functions return 0 (or a byte count) on success and a negative
 * value on failure, with a one-line reason in the caller's err buffer.
 */
#ifndef KVCHAT_MODELS_NET_H
#define KVCHAT_MODELS_NET_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ==== TLS over a connected socket (tls.c) ==== */

/* error kinds, for retry decisions */
enum net_err {
    NET_ERR_TRANSIENT = -1, /* timeout, reset, refused, DNS: worth a retry */
    NET_ERR_FATAL = -2,     /* certificate, protocol, bad response: not */
    NET_ERR_INTERRUPTED = -3, /* a signal (Ctrl-C) */
};

struct net_tls;
/*
 * Handshake over fd (connected, blocking) with SNI and certificate and
 * hostname verification of host against the CA bundle ca_file. Each read
 * or write waits at most timeout_ms. On success *out owns fd (closed by
 * net_tls_close); on failure fd is left open for the caller. A signal that
 * sets *cancel (may be NULL) ends any wait with NET_ERR_INTERRUPTED.
 */
int net_tls_open(int fd, const char *host, const char *ca_file, int timeout_ms,
                 const volatile sig_atomic_t *cancel, struct net_tls **out, char *err,
                 size_t err_size);
/* can ca_file (a bundle or a directory) be loaded? 0 or NET_ERR_FATAL */
int net_tls_check_ca(const char *ca_file, char *err, size_t err_size);
/* bytes read (>0), 0 at the end of the stream, or enum net_err */
ssize_t net_tls_read(struct net_tls *t, void *buf, size_t n, char *err, size_t err_size);
/* writes all n bytes: 0 or enum net_err */
int net_tls_write(struct net_tls *t, const void *buf, size_t n, char *err, size_t err_size);
void net_tls_close(struct net_tls *t);
/* base64 of n bytes into out (NUL-terminated): 0, or -1 if out is too small */
int net_base64(const void *in, size_t n, char *out, size_t out_size);
/* "mbed TLS 2.28.3" */
const char *net_tls_version(void);

/* ==== HTTP/1.1 response parsing (http.c; fed from bytes, so fuzzable) ==== */

#define HTTP_MAX_HEAD 65536   /* status line and headers together */
#define HTTP_MAX_URL 4096

struct http_resp {
    int status;                  /* 100..599 */
    char reason[128];
    int64_t content_length;      /* -1 if absent */
    bool chunked;                /* Transfer-Encoding: chunked */
    char location[HTTP_MAX_URL]; /* "" if absent */
    char etag[256];              /* ETag as sent (quotes kept); "" if absent */
    char linked_etag[256];       /* X-Linked-ETag (the hub: sha256 of an LFS file) */
    int64_t linked_size;         /* X-Linked-Size, -1 if absent */
    int64_t range_first, range_last, range_total; /* Content-Range; -1 if absent or '*' */
    bool accept_ranges;          /* Accept-Ranges: bytes */
};

struct http_head {
    char buf[HTTP_MAX_HEAD];
    size_t len;
};
void http_head_init(struct http_head *h);
/*
 * Feed response bytes. Returns 1 when the head is complete (*consumed bytes
 * of in belonged to it; the rest is body), 0 if all of in was taken and
 * more is needed, or a negative value on a malformed or oversized head.
 * 1xx interim responses are skipped.
 */
int http_head_feed(struct http_head *h, const char *in, size_t n, size_t *consumed,
                   struct http_resp *out, char *err, size_t err_size);

enum http_body_mode { HTTP_BODY_NONE, HTTP_BODY_LENGTH, HTTP_BODY_CHUNKED, HTTP_BODY_CLOSE };

struct http_body {
    enum http_body_mode mode;
    int state;          /* chunked framing state */
    uint64_t left;      /* bytes left in the body (LENGTH) or the chunk (CHUNKED) */
    char line[1024];    /* a chunk-size or trailer line being read */
    size_t line_len;
    size_t trailer_bytes;
    bool done;
};
/* the framing of r's body (a response to GET) */
void http_body_init(struct http_body *b, const struct http_resp *r);
/*
 * Decode framing: takes some of in (returns how many bytes, at least one if
 * n > 0 and the body is not done) and points *data at up to that many body
 * bytes inside in (*data_len may be 0). Negative on bad framing.
 */
ssize_t http_body_feed(struct http_body *b, const char *in, size_t n, const char **data,
                       size_t *data_len, char *err, size_t err_size);
/* the stream ended: 0 if that is a proper end of this body, else negative */
int http_body_eof(const struct http_body *b, char *err, size_t err_size);

/* ==== URLs ==== */

struct http_url {
    char host[256];          /* without brackets for IPv6 */
    int port;
    char path[HTTP_MAX_URL]; /* from '/', with the query */
};
/* parse https://HOST[:PORT][/PATH]; http:// and others are refused */
int http_url_parse(const char *url, struct http_url *u, char *err, size_t err_size);
/* a Location value against the URL it came from, into out (an absolute URL) */
int http_url_join(const char *base, const char *location, char *out, size_t size, char *err,
                  size_t err_size);
/* "host:port", for origin comparisons */
void http_url_origin(const struct http_url *u, char *out, size_t size);

/* ==== the client (http.c) ==== */

struct http_params {
    const char *ca_file;     /* CA bundle */
    int connect_timeout_ms;
    int read_timeout_ms;
    const char *proxy;       /* HTTPS_PROXY value or NULL */
    const char *no_proxy;    /* NO_PROXY value or NULL */
    const char *user_agent;
    const volatile sig_atomic_t *cancel; /* set by a signal handler: stop */
};

struct http_req {
    const char *url;
    const char *bearer;        /* a token for Authorization: Bearer, or NULL */
    const char *bearer_origin; /* "host:port" that may receive it */
    int64_t range_from;        /* Range: bytes=N- if >= 0 */
    const char *if_range;      /* If-Range value (a strong ETag), or NULL */
    int max_redirects;
};

struct http_stream;
/*
 * GET req->url, following redirects (https only, at most max_redirects).
 * The bearer token goes only to bearer_origin, and never again once a
 * redirect has left it. On success (any final status) *out is an open
 * stream (close with http_stream_close), resp the final response, and
 * final_url (HTTP_MAX_URL bytes) where it came from; linked_etag/size are
 * taken from the first response in the chain that had them.
 */
int http_get(const struct http_params *p, const struct http_req *req, struct http_resp *resp,
             char *final_url, char *linked_etag, size_t linked_etag_size, int64_t *linked_size,
             struct http_stream **out, char *err, size_t err_size);
/* body bytes: >0, 0 at the proper end, or enum net_err */
ssize_t http_stream_read(struct http_stream *s, char *buf, size_t n, char *err, size_t err_size);
void http_stream_close(struct http_stream *s);

#endif
