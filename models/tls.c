/*
 * tls.c - the one file that includes mbedTLS's TLS headers: a TLS client
 * connection over a socket the caller has connected (for models/http.c), the
 * same interface over a plain socket (http:// to private addresses), and
 * waits on sockets. (SHA-256 is core's, core/base/sha256.c.)
 *
 * Invariants: a handshake succeeds only with a certificate chain that
 * verifies against the given CA bundle and names the host we asked for
 * (MBEDTLS_SSL_VERIFY_REQUIRED plus mbedtls_ssl_set_hostname, which also
 * sends SNI); TLS 1.2 is the floor. A host that is an IP address (a local
 * mirror at https://127.0.0.1:8443/) must be named by an iPAddress entry of
 * the server certificate's subjectAltName, as RFC 6125 and curl have it:
 * mbedTLS 2.28 compares only DNS names and the CN, so for an address no
 * host name is set (nor SNI sent, which RFC 6066 forbids for addresses)
 * and verify_ip checks the leaf certificate's SAN entries itself; a DNS
 * name or CN that spells the address does not count. Every wait on the socket is a poll()
 * bounded by the timeout, so a silent peer cannot hang us, and a signal
 * that sets the cancel flag ends the wait. Builds with mbedTLS 2.28 and 3.x
 * (the differences are guarded by MBEDTLS_VERSION_NUMBER).
 */
#include "models/mdl.h"
#include "models/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/version.h>
#if MBEDTLS_VERSION_NUMBER < 0x03000000
#include <mbedtls/config.h>
#endif
#include <mbedtls/base64.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#if MBEDTLS_VERSION_NUMBER >= 0x03000000 && defined(MBEDTLS_PSA_CRYPTO_C)
#include <psa/crypto.h>
#endif

/* ==== base64 ==== */

int net_base64(const void *in, size_t n, char *out, size_t out_size)
{
    size_t olen = 0;
    if (mbedtls_base64_encode((unsigned char *)out, out_size, &olen, in, n))
        return -1;
    return 0;
}

/* ==== TLS ==== */

struct net_tls {
    bool plain;       /* no TLS: reads and writes go straight to the socket */
    int fd;
    int timeout_ms;
    const volatile sig_atomic_t *cancel;
    int io_err;       /* why the last socket call failed: enum net_err */
    char io_msg[128]; /* and in words */
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt ca;
    mbedtls_ssl_config conf;
    mbedtls_ssl_context ssl;
    unsigned char ip[16]; /* the host as an address (4 or 16 bytes), if it is one */
    size_t ip_len;        /* 0: the host is a DNS name */
};

const char *net_tls_version(void)
{
    return MBEDTLS_VERSION_STRING_FULL;
}

int net_wait(int fd, short ev, int timeout_ms, const volatile sig_atomic_t *cancel)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (cancel && *cancel)
            return NET_ERR_INTERRUPTED;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = timeout_ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, left < 100 ? (int)left : 100);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
        /* a slice ended, or a signal came: look at the flag and the clock */
    }
}

int net_sleep(int ms, const volatile sig_atomic_t *cancel)
{
    for (int left = ms; left > 0; left -= 100) {
        if (cancel && *cancel)
            return NET_ERR_INTERRUPTED;
        struct timespec ts = {0, (left < 100 ? left : 100) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return cancel && *cancel ? NET_ERR_INTERRUPTED : 0;
}

/* wait until fd is ready for ev: 0, or -1 with io_err/io_msg set */
static int wait_fd(struct net_tls *t, short ev)
{
    int r = net_wait(t->fd, ev, t->timeout_ms, t->cancel);
    if (r == 1)
        return 0;
    if (r == 0) {
        t->io_err = NET_ERR_TRANSIENT;
        snprintf(t->io_msg, sizeof t->io_msg, "timed out after %d s without data", t->timeout_ms / 1000);
    } else if (r == NET_ERR_INTERRUPTED) {
        t->io_err = NET_ERR_INTERRUPTED;
        snprintf(t->io_msg, sizeof t->io_msg, "interrupted");
    } else {
        t->io_err = NET_ERR_TRANSIENT;
        snprintf(t->io_msg, sizeof t->io_msg, "%s", strerror(errno));
    }
    return -1;
}

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    struct net_tls *t = ctx;
    for (;;) {
        if (wait_fd(t, POLLOUT))
            return MBEDTLS_ERR_NET_SEND_FAILED;
        ssize_t n = send(t->fd, buf, len, MSG_NOSIGNAL);
        if (n >= 0)
            return (int)n;
        if (errno == EINTR && !(t->cancel && *t->cancel))
            continue;
        t->io_err = errno == EINTR ? NET_ERR_INTERRUPTED : NET_ERR_TRANSIENT;
        snprintf(t->io_msg, sizeof t->io_msg, "%s", errno == EINTR ? "interrupted" : strerror(errno));
        return MBEDTLS_ERR_NET_SEND_FAILED;
    }
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    struct net_tls *t = ctx;
    for (;;) {
        if (wait_fd(t, POLLIN))
            return MBEDTLS_ERR_NET_RECV_FAILED;
        ssize_t n = recv(t->fd, buf, len, 0);
        if (n >= 0)
            return (int)n;
        if (errno == EINTR && !(t->cancel && *t->cancel))
            continue;
        t->io_err = errno == EINTR ? NET_ERR_INTERRUPTED : NET_ERR_TRANSIENT;
        snprintf(t->io_msg, sizeof t->io_msg, "%s",
                 errno == EINTR ? "interrupted" : errno == ECONNRESET ? "connection reset by peer"
                                                                       : strerror(errno));
        return MBEDTLS_ERR_NET_RECV_FAILED;
    }
}

/* an mbedTLS error as a message and a kind */
static int tls_error(struct net_tls *t, int ret, const char *what, char *err, size_t err_size)
{
    if ((ret == MBEDTLS_ERR_NET_RECV_FAILED || ret == MBEDTLS_ERR_NET_SEND_FAILED) && t->io_err) {
        snprintf(err, err_size, "%s: %s", what, t->io_msg);
        return t->io_err;
    }
    char m[160];
    mbedtls_strerror(ret, m, sizeof m);
    snprintf(err, err_size, "%s: %s", what, m);
    return NET_ERR_FATAL;
}

/* load ca_file (a bundle, or a directory of certificates) into ca */
static int load_ca(mbedtls_x509_crt *ca, const char *ca_file, char *err, size_t err_size)
{
    /* a negative result means not one certificate could be loaded */
    struct stat st;
    bool is_dir = stat(ca_file, &st) == 0 && S_ISDIR(st.st_mode);
    int ret = is_dir ? mbedtls_x509_crt_parse_path(ca, ca_file) : mbedtls_x509_crt_parse_file(ca, ca_file);
    if (ret < 0) {
        char m[160];
        mbedtls_strerror(ret, m, sizeof m);
        snprintf(err, err_size, "cannot load CA certificates from '%s': %s", ca_file, m);
        return NET_ERR_FATAL;
    }
    return 0;
}

int net_tls_check_ca(const char *ca_file, char *err, size_t err_size)
{
    mbedtls_x509_crt ca;
    mbedtls_x509_crt_init(&ca);
    int rc = load_ca(&ca, ca_file, err, err_size);
    mbedtls_x509_crt_free(&ca);
    return rc;
}

static void free_parts(struct net_tls *t)
{
    mbedtls_ssl_free(&t->ssl);
    mbedtls_ssl_config_free(&t->conf);
    mbedtls_x509_crt_free(&t->ca);
    mbedtls_ctr_drbg_free(&t->drbg);
    mbedtls_entropy_free(&t->entropy);
}

/* the first reason a verification failed, in words */
static void verify_reason(uint32_t flags, const char *host, char *out, size_t size)
{
    if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)
        snprintf(out, size, "the certificate is not valid for '%s' (hostname mismatch)", host);
    else if (flags & MBEDTLS_X509_BADCERT_EXPIRED)
        snprintf(out, size, "the certificate has expired");
    else if (flags & MBEDTLS_X509_BADCERT_FUTURE)
        snprintf(out, size, "the certificate is not valid yet");
    else if (flags & MBEDTLS_X509_BADCERT_REVOKED)
        snprintf(out, size, "the certificate was revoked");
    else if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED)
        snprintf(out, size, "the certificate is not trusted (no trusted CA signed it; see --ca-file)");
    else {
        char m[256];
        int n = mbedtls_x509_crt_verify_info(m, sizeof m, "", flags);
        while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
            m[--n] = 0;
        snprintf(out, size, "the certificate failed verification (%s)", n > 0 ? m : "unknown reason");
    }
}

/* host as an IPv4 or IPv6 address into ip: its length (4 or 16), 0 if it is a name */
static size_t parse_ip(const char *host, unsigned char ip[16])
{
    if (inet_pton(AF_INET, host, ip) == 1)
        return 4;
    if (inet_pton(AF_INET6, host, ip) == 1)
        return 16;
    return 0;
}

/*
 * mbedTLS's verification callback, once per certificate of the chain: for
 * the server's own (depth 0) and an address as host, the address must be
 * one of its iPAddress subjectAltName entries (context tag [7], the 4 or 16
 * address bytes); otherwise the certificate is flagged as not naming the
 * host, so the handshake fails as for a wrong DNS name.
 */
static int verify_ip(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    const struct net_tls *t = ctx;
    if (depth != 0 || t->ip_len == 0)
        return 0;
    for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s && s->buf.p; s = s->next)
        if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
            s->buf.len == t->ip_len && !memcmp(s->buf.p, t->ip, t->ip_len))
            return 0;
    *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    return 0;
}

int net_tls_open(int fd, const char *host, const char *ca_file, int timeout_ms,
                 const volatile sig_atomic_t *cancel, struct net_tls **out, char *err,
                 size_t err_size)
{
    static const char pers[] = "kvchat models pull";
    struct net_tls *t = calloc(1, sizeof *t);
    int ret;
    *out = NULL;
    if (!t) {
        snprintf(err, err_size, "out of memory");
        return NET_ERR_FATAL;
    }
    t->fd = fd;
    t->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
    t->cancel = cancel;
    mbedtls_entropy_init(&t->entropy);
    mbedtls_ctr_drbg_init(&t->drbg);
    mbedtls_x509_crt_init(&t->ca);
    mbedtls_ssl_config_init(&t->conf);
    mbedtls_ssl_init(&t->ssl);
#if MBEDTLS_VERSION_NUMBER >= 0x03000000 && defined(MBEDTLS_PSA_CRYPTO_C)
    if (psa_crypto_init() != PSA_SUCCESS) {
        snprintf(err, err_size, "cannot initialise PSA crypto");
        goto fail;
    }
#endif
    if ((ret = mbedtls_ctr_drbg_seed(&t->drbg, mbedtls_entropy_func, &t->entropy,
                                     (const unsigned char *)pers, sizeof pers - 1))) {
        tls_error(t, ret, "cannot seed the random generator", err, err_size);
        goto fail;
    }
    if (load_ca(&t->ca, ca_file, err, err_size))
        goto fail;
    if ((ret = mbedtls_ssl_config_defaults(&t->conf, MBEDTLS_SSL_IS_CLIENT,
                                           MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT))) {
        tls_error(t, ret, "cannot configure TLS", err, err_size);
        goto fail;
    }
#if MBEDTLS_VERSION_NUMBER < 0x03000000
    mbedtls_ssl_conf_min_version(&t->conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
#endif
    mbedtls_ssl_conf_authmode(&t->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(&t->conf, &t->ca, NULL);
    mbedtls_ssl_conf_rng(&t->conf, mbedtls_ctr_drbg_random, &t->drbg);
    t->ip_len = parse_ip(host, t->ip);
    mbedtls_ssl_conf_verify(&t->conf, verify_ip, t);
    /* an address: no host name for mbedTLS to compare (NULL, said
     * explicitly, is how mbedTLS 3.6 is told so too); verify_ip checks it */
    if ((ret = mbedtls_ssl_setup(&t->ssl, &t->conf)) ||
        (ret = mbedtls_ssl_set_hostname(&t->ssl, t->ip_len ? NULL : host))) {
        tls_error(t, ret, "cannot set up TLS", err, err_size);
        goto fail;
    }
    mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
    while ((ret = mbedtls_ssl_handshake(&t->ssl)) != 0) {
        if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
        uint32_t flags = mbedtls_ssl_get_verify_result(&t->ssl);
        if (ret == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED && flags && flags != (uint32_t)-1) {
            char why[300];
            verify_reason(flags, host, why, sizeof why);
            snprintf(err, err_size, "TLS handshake with '%s' failed: %s", host, why);
            free_parts(t);
            free(t);
            return NET_ERR_FATAL;
        }
        char what[300];
        snprintf(what, sizeof what, "TLS handshake with '%s' failed", host);
        int kind = tls_error(t, ret, what, err, err_size);
        free_parts(t);
        free(t);
        return kind;
    }
    *out = t;
    return 0;
fail:
    free_parts(t);
    free(t);
    return NET_ERR_FATAL;
}

int net_plain_open(int fd, int timeout_ms, const volatile sig_atomic_t *cancel,
                   struct net_tls **out, char *err, size_t err_size)
{
    struct net_tls *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t) {
        snprintf(err, err_size, "out of memory");
        return NET_ERR_FATAL;
    }
    t->plain = true;
    t->fd = fd;
    t->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
    t->cancel = cancel;
    *out = t;
    return 0;
}

ssize_t net_tls_read(struct net_tls *t, void *buf, size_t n, char *err, size_t err_size)
{
    if (t->plain) {
        t->io_err = 0;
        int ret = bio_recv(t, buf, n > 65536 ? 65536 : n);
        if (ret >= 0)
            return ret;
        snprintf(err, err_size, "read failed: %s", t->io_msg);
        return t->io_err;
    }
    for (;;) {
        t->io_err = 0;
        int ret = mbedtls_ssl_read(&t->ssl, buf, n > 65536 ? 65536 : n);
        if (ret > 0)
            return ret;
        if (ret == 0 || ret == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
            return 0;
        if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
#if defined(MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
        if (ret == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
            continue;
#endif
#if defined(MBEDTLS_ERR_SSL_CONN_EOF)
        /* the peer closed the socket without close_notify: an end of
         * stream; the HTTP layer decides whether the body was complete */
        if (ret == MBEDTLS_ERR_SSL_CONN_EOF)
            return 0;
#endif
        if (ret == MBEDTLS_ERR_NET_CONN_RESET) {
            snprintf(err, err_size, "read failed: connection reset by peer");
            return NET_ERR_TRANSIENT;
        }
        int kind = tls_error(t, ret, "read failed", err, err_size);
        /* a broken record mid-stream is as likely a network fault */
        return kind == NET_ERR_FATAL ? NET_ERR_TRANSIENT : kind;
    }
}

int net_tls_write(struct net_tls *t, const void *buf, size_t n, char *err, size_t err_size)
{
    const unsigned char *p = buf;
    while (n > 0 && t->plain) {
        t->io_err = 0;
        int ret = bio_send(t, p, n > 65536 ? 65536 : n);
        if (ret < 0) {
            snprintf(err, err_size, "write failed: %s", t->io_msg);
            return t->io_err;
        }
        p += ret;
        n -= (size_t)ret;
    }
    while (n > 0) {
        t->io_err = 0;
        int ret = mbedtls_ssl_write(&t->ssl, p, n);
        if (ret > 0) {
            p += ret;
            n -= (size_t)ret;
            continue;
        }
        if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
            continue;
        int kind = tls_error(t, ret, "write failed", err, err_size);
        return kind == NET_ERR_FATAL ? NET_ERR_TRANSIENT : kind;
    }
    return 0;
}

void net_tls_close(struct net_tls *t)
{
    if (!t)
        return;
    if (t->plain) {
        close(t->fd);
        free(t);
        return;
    }
    t->timeout_ms = 1000; /* do not linger over a goodbye */
    mbedtls_ssl_close_notify(&t->ssl);
    close(t->fd);
    free_parts(t);
    free(t);
}
