/*
 * net.h - (internal to models/) the network layers under `models pull` and
 * remote models: a TLS connection over a connected socket, or a plain one
 * for http:// to loopback and private addresses (models/tls.c, the only
 * file that includes mbedTLS), HTTP/1.1 response parsing
 * (models/http_parse.c) and the client (models/http.c).
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
#include <sys/socket.h>
#include <sys/types.h>

/* ==== TLS over a connected socket (tls.c) ==== */

/* error kinds, for retry decisions */
enum net_err {
    NET_ERR_TRANSIENT = -1, /* timeout, reset, refused, DNS: worth a retry */
    NET_ERR_FATAL = -2,     /* certificate, protocol, bad response: not */
    NET_ERR_INTERRUPTED = -3, /* a signal (Ctrl-C) */
};

/*
 * Wait until fd is ready for ev (POLLIN, POLLOUT) for at most timeout_ms,
 * polling in slices of 100 ms so that *cancel (may be NULL) is seen within
 * that time even if the signal that set it came just before the wait.
 * Returns 1 ready, 0 timed out, NET_ERR_INTERRUPTED, or -1 (errno set).
 */
int net_wait(int fd, short ev, int timeout_ms, const volatile sig_atomic_t *cancel);

/* sleep ms milliseconds unless *cancel (may be NULL) is set first: 0, or
 * NET_ERR_INTERRUPTED */
int net_sleep(int ms, const volatile sig_atomic_t *cancel);

/* a connection: TLS (net_tls_open) or plain TCP (net_plain_open); the
 * read, write and close calls below serve both */
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
/* A plain connection over fd (connected, blocking), for http:// to a
 * loopback or private address; takes ownership of fd. 0 or NET_ERR_FATAL. */
int net_plain_open(int fd, int timeout_ms, const volatile sig_atomic_t *cancel,
                   struct net_tls **out, char *err, size_t err_size);
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
#define HTTP_DEFAULT_CA_FILE "/etc/ssl/certs/ca-certificates.crt"
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
    char content_type[128];      /* the media type, lowercase, without parameters; "" if absent */
    int64_t retry_after;         /* Retry-After in seconds, -1 if absent or a date */
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
    bool tls;                /* https:// */
    char host[256];          /* without brackets for IPv6 */
    int port;
    char path[HTTP_MAX_URL]; /* from '/', with the query */
};
/* parse https://HOST[:PORT][/PATH]; http:// and others are refused */
int http_url_parse(const char *url, struct http_url *u, char *err, size_t err_size);
/* the same, also taking http://HOST[:PORT][/PATH] (port 80) */
int http_url_parse_any(const char *url, struct http_url *u, char *err, size_t err_size);
/* a Location value against the URL it came from, into out (an absolute URL);
 * a redirect from https:// to http:// is refused */
int http_url_join(const char *base, const char *location, char *out, size_t size, char *err,
                  size_t err_size);
/* "host:port" for https, "http://host:port" for http, lowercase: for origin
 * comparisons */
void http_url_origin(const struct http_url *u, char *out, size_t size);
/* may plain http:// reach this address? loopback (127/8, ::1), private
 * (10/8, 172.16/12, 192.168/16, fc00::/7) and link-local (169.254/16,
 * fe80::/10), also as IPv4-mapped IPv6; nothing else */
bool http_addr_private(const struct sockaddr *sa);

/* ==== the client (http.c) ==== */

struct http_params {
    const char *ca_file;     /* CA bundle */
    bool allow_http;         /* http:// URLs too, connected only to addresses that
                                http_addr_private allows, never through a proxy */
    int connect_timeout_ms;
    int read_timeout_ms;
    const char *proxy;       /* HTTPS_PROXY value or NULL */
    const char *no_proxy;    /* NO_PROXY value or NULL */
    const char *user_agent;
    const volatile sig_atomic_t *cancel; /* set by a signal handler: stop */
};

/* ca_file (given, else KVCHAT_CA_FILE, else the system bundle), HTTPS_PROXY
 * and NO_PROXY (or their lowercase forms) and the user agent into p; the
 * rest zeroed */
void http_params_from_env(struct http_params *p, const char *ca_file);

/* Does host resolve (within timeout_ms) only to addresses plain http:// may
 * reach? 1 yes, 0 no (err names the address), or enum net_err (err). */
int http_host_private(const char *host, int timeout_ms, const volatile sig_atomic_t *cancel,
                      char *err, size_t err_size);

struct http_req {
    const char *method;        /* "GET" (NULL) or "POST" */
    const char *body;          /* the request body (POST), body_len bytes */
    size_t body_len;
    const char *content_type;  /* of the body */
    const char *accept;        /* Accept value; NULL: star/star */
    const char *url;
    const char *bearer;        /* a token for Authorization: Bearer, or NULL */
    const char *bearer_origin; /* "host:port" that may receive it */
    int64_t range_from;        /* Range: bytes=N- if >= 0 */
    const char *if_range;      /* If-Range value (a strong ETag), or NULL */
    int max_redirects;
};

struct http_stream;
/*
 * Send the request (GET, or POST with its body) to req->url, following
 * redirects (at most max_redirects; never from https to http; a POST only
 * through 307 and 308, which keep the method and body). The bearer token
 * goes only to bearer_origin, and never again once a redirect has left it.
 * On success (any final status) *out is an open stream (close with
 * http_stream_close), resp the final response, and final_url (HTTP_MAX_URL
 * bytes) where it came from; linked_etag/size are taken from the first
 * response in the chain that had them.
 */
int http_request(const struct http_params *p, const struct http_req *req, struct http_resp *resp,
             char *final_url, char *linked_etag, size_t linked_etag_size, int64_t *linked_size,
             struct http_stream **out, char *err, size_t err_size);
/* body bytes: >0, 0 at the proper end, or enum net_err */
ssize_t http_stream_read(struct http_stream *s, char *buf, size_t n, char *err, size_t err_size);
void http_stream_close(struct http_stream *s);
/* Read the rest of the body into a malloc'd NUL-terminated buffer (caller
 * frees): 0, NET_ERR_FATAL when it is longer than max bytes (err), or
 * enum net_err. */
int http_read_all(struct http_stream *s, size_t max, char **body, size_t *len, char *err,
                  size_t err_size);

#endif
