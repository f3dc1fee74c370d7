/*
 * pull.c - `models pull`: turn a reference (alias, hf:..., https://...) into
 * a URL and a store name, download it into models/NAME.part with resume,
 * verify it, and move it into place.
 *
 * Invariants: models/NAME.gguf only ever appears by rename(2) of a complete
 * file whose SHA-256 matched (when a checksum was published or given) and
 * whose GGUF header parsed; a mismatching download is deleted. A .part is
 * written by one process at a time (flock) and carries in .part.meta the
 * URL and ETag it came from, so a resume asks for the same bytes (Range
 * with If-Range) and a server that ignores the range starts the file over.
 * The hub token goes only to the hub's origin (http.c enforces it per hop).
 */
#include "core/llm.h"
#include "models/kvfile.h"
#include "models/mdl.h"
#include "models/net.h"
#include "models/proto.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_HUB "https://huggingface.co"
#define HUB_API_MAX (8 << 20) /* bytes of a repo's file list we accept */
/* fetch_once: the .part cannot be written (distinct from enum net_err) */
#define FETCH_FILE_ERR (-100)

struct mdl_pull_params mdl_pull_default_params(void)
{
    return (struct mdl_pull_params){
        .retries = 3,
        .connect_timeout_ms = 15000,
        .read_timeout_ms = 30000,
    };
}

const char *mdl_tls_version(void)
{
    return net_tls_version();
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct pull {
    const struct mdl_pull_params *p;
    struct http_params hp;
    char hub[1024];
    char hub_origin[300];
    const char *token;
    char url[HTTP_MAX_URL];  /* what to GET */
    char name[160];
    int64_t expect_size;     /* -1 unknown */
    char *err;
    size_t err_size;
};

static void note(struct pull *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct pull *c, const char *fmt, ...)
{
    if (!c->p->note)
        return;
    char m[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    c->p->note(c->p->ctx, m);
}

static int net_to_mdl(int rc)
{
    return rc == NET_ERR_INTERRUPTED ? MDL_ERR_INTERRUPTED : MDL_ERR_NETWORK;
}

/* true if s has no control characters (it may go into a request header) */
static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* ==== references ==== */

/* a repo id: OWNER/REPO of [A-Za-z0-9._-] */
static bool repo_valid(const char *s, size_t n)
{
    const char *slash = memchr(s, '/', n);
    if (!slash || slash == s || slash == s + n - 1 || memchr(slash + 1, '/', (size_t)(s + n - slash - 1)))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || strchr("._-/", s[i])))
            return false;
    return true;
}

/* does file name the quantization q (as a whole token, any case)? */
static bool file_has_quant(const char *file, const char *q)
{
    size_t fl = strlen(file), ql = strlen(q);
    if (fl < 5 || strcasecmp(file + fl - 5, ".gguf"))
        return false;
    for (size_t i = 0; i + ql <= fl; i++) {
        if (strncasecmp(file + i, q, ql))
            continue;
        char before = i ? file[i - 1] : '-', after = file[i + ql];
        if (strchr("-._/", before) && strchr("-.", after))
            return true;
    }
    return false;
}

/* GET a small body (the hub's API) into a NUL-terminated malloc'd buffer:
 * 0 or enum net_err */
static int get_small_once(struct pull *c, const char *url, char **body, size_t *len)
{
    struct http_req rq = {.url = url, .bearer = c->token, .bearer_origin = c->hub_origin,
                          .range_from = -1, .max_redirects = 10};
    struct http_resp *resp = malloc(sizeof *resp);
    char *final = malloc(HTTP_MAX_URL), le[256];
    int64_t ls;
    struct http_stream *s = NULL;
    int rc = NET_ERR_FATAL;
    *body = NULL;
    if (!resp || !final) {
        snprintf(c->err, c->err_size, "out of memory");
        goto out;
    }
    int nrc = http_request(&c->hp, &rq, resp, final, le, sizeof le, &ls, &s, c->err, c->err_size);
    if (nrc) {
        rc = nrc;
        goto out;
    }
    if (resp->status != 200) {
        snprintf(c->err, c->err_size, "HTTP %d %s from '%s'%s", resp->status, resp->reason, url,
                 resp->status == 401 || resp->status == 403 ? " (a private or gated repo needs HF_TOKEN)" : "");
        if (resp->status >= 500 || resp->status == 408 || resp->status == 429)
            rc = NET_ERR_TRANSIENT;
        goto out;
    }
    rc = http_read_all(s, HUB_API_MAX, body, len, c->err, c->err_size);
out:
    http_stream_close(s);
    free(resp);
    free(final);
    return rc;
}

static int backoff(struct pull *c, int s);

/* get_small_once with the pull's retries: 0 or enum mdl_err */
static int get_small(struct pull *c, const char *url, char **body, size_t *len)
{
    for (int attempt = 0;; attempt++) {
        int rc = get_small_once(c, url, body, len);
        if (rc == 0)
            return 0;
        if (rc != NET_ERR_TRANSIENT || attempt >= c->p->retries)
            return net_to_mdl(rc);
        note(c, "%s; retrying in %d s", c->err, 1 << attempt);
        if (backoff(c, 1 << attempt)) {
            snprintf(c->err, c->err_size, "interrupted");
            return MDL_ERR_INTERRUPTED;
        }
    }
}

/* hf:OWNER/REPO:QUANT -> the file of that quantization, from the hub API */
static int hub_pick_file(struct pull *c, const char *repo, const char *quant, char *file,
                         size_t size)
{
    char url[HTTP_MAX_URL];
    if (snprintf(url, sizeof url, "%s/api/models/%s", c->hub, repo) >= (int)sizeof url) {
        snprintf(c->err, c->err_size, "reference too long");
        return MDL_ERR_USAGE;
    }
    char *body;
    size_t len = 0;
    int rc = get_small(c, url, &body, &len);
    if (rc)
        return rc;
    /* {"siblings": [{"rfilename": "a.gguf"}, ...], ...} */
    char **files, best[1024] = "";
    size_t n_files;
    int n_gguf = 0;
    if (json_string_list(body, len, "siblings", "rfilename", &files, &n_files, c->err, c->err_size)) {
        free(body);
        return MDL_ERR_NETWORK;
    }
    for (size_t i = 0; i < n_files; i++) {
        const char *f = files[i];
        size_t fl = strlen(f);
        if (fl > 5 && !strcasecmp(f + fl - 5, ".gguf"))
            n_gguf++;
        if (!file_has_quant(f, quant) || fl >= sizeof best)
            continue;
        if (!best[0] || fl < strlen(best))
            snprintf(best, sizeof best, "%s", f);
    }
    mdl_strv_free(files, n_files);
    free(body);
    if (!best[0]) {
        snprintf(c->err, c->err_size, "no %s .gguf file in '%s' (%d .gguf files there)", quant, repo, n_gguf);
        return MDL_ERR_USAGE;
    }
    if (strstr(best, "-of-")) {
        snprintf(c->err, c->err_size, "'%s' is split into several files; kvchat needs a single-file GGUF", best);
        return MDL_ERR_USAGE;
    }
    snprintf(file, size, "%s", best);
    return 0;
}

/* set c->url, c->name and c->expect_size from the reference */
static int resolve_ref(struct pull *c, const char *ref)
{
    const struct mdl_alias *a = mdl_alias_find(ref);
    c->expect_size = -1;
    if (a) {
        if (snprintf(c->url, sizeof c->url, "%s/%s/resolve/main/%s", c->hub, a->repo, a->file) >=
            (int)sizeof c->url)
            return MDL_ERR_USAGE;
        snprintf(c->name, sizeof c->name, "%s", a->name);
        return 0;
    }
    if (!strncasecmp(ref, "https://", 8)) {
        struct http_url u;
        if (http_url_parse(ref, &u, c->err, c->err_size))
            return MDL_ERR_USAGE;
        if (snprintf(c->url, sizeof c->url, "%s", ref) >= (int)sizeof c->url)
            return MDL_ERR_USAGE;
        name_from_file(u.path, c->name, sizeof c->name);
        return 0;
    }
    if (!strncasecmp(ref, "http://", 7)) {
        snprintf(c->err, c->err_size, "refusing plain http:// for '%s': use https://", ref);
        return MDL_ERR_USAGE;
    }
    if (!strncmp(ref, "hf:", 3) || !strncmp(ref, "hf.co/", 6) || !strncmp(ref, "huggingface.co/", 15)) {
        const char *r = ref + (ref[2] == ':' ? 3 : ref[2] == '.' ? 6 : 15);
        /* OWNER/REPO then /PATH.gguf or :QUANT or nothing */
        const char *s1 = strchr(r, '/');
        const char *s2 = s1 ? s1 + 1 + strcspn(s1 + 1, "/:") : NULL;
        if (!s1 || !s2 || !repo_valid(r, (size_t)(s2 - r))) {
            snprintf(c->err, c->err_size, "bad reference '%s' (expected hf:OWNER/REPO/FILE.gguf or hf:OWNER/REPO:QUANT)", ref);
            return MDL_ERR_USAGE;
        }
        char repo[512], file[1024];
        snprintf(repo, sizeof repo, "%.*s", (int)(s2 - r), r);
        if (*s2 == '/') {
            snprintf(file, sizeof file, "%s", s2 + 1);
            size_t fl = strlen(file);
            if (fl < 6 || strcasecmp(file + fl - 5, ".gguf") || strstr(file, "..") ||
                strpbrk(file, " ?#%\"\\")) {
                snprintf(c->err, c->err_size, "bad reference '%s': the file must be a .gguf path in the repo", ref);
                return MDL_ERR_USAGE;
            }
        } else {
            const char *q = *s2 == ':' ? s2 + 1 : "Q4_K_M";
            if (!*q || strlen(q) > 32 || strpbrk(q, "/ ")) {
                snprintf(c->err, c->err_size, "bad quantization in '%s'", ref);
                return MDL_ERR_USAGE;
            }
            int rc = hub_pick_file(c, repo, q, file, sizeof file);
            if (rc)
                return rc;
        }
        if (snprintf(c->url, sizeof c->url, "%s/%s/resolve/main/%s", c->hub, repo, file) >= (int)sizeof c->url) {
            snprintf(c->err, c->err_size, "reference too long");
            return MDL_ERR_USAGE;
        }
        name_from_file(file, c->name, sizeof c->name);
        return 0;
    }
    snprintf(c->err, c->err_size,
             "unknown model '%s' (an alias such as '%s', hf:OWNER/REPO:QUANT, hf:OWNER/REPO/FILE.gguf, or an https:// URL)",
             ref, MDL_DEFAULT_ALIAS);
    return MDL_ERR_USAGE;
}

/* ==== the download ==== */

struct part {
    int fd;
    char path[4200], meta[4300];
    uint64_t size;
    struct hasher *hs;      /* SHA-256 of the file, kept in step by a thread */
};

/* the sha256 a response vouches for: 64 hex digits in X-Linked-ETag */
static bool etag_sha256(const char *etag, char out[65])
{
    const char *p = etag;
    if (!strncmp(p, "W/", 2))
        p += 2;
    if (*p == '"')
        p++;
    size_t n = 0;
    while (n < 64 && isxdigit((unsigned char)p[n]))
        n++;
    if (n != 64 || (p[64] && p[64] != '"'))
        return false;
    for (int i = 0; i < 64; i++)
        out[i] = (char)tolower((unsigned char)p[i]);
    out[64] = 0;
    return true;
}

/*
 * The hasher: a thread that keeps a SHA-256 of the .part in step with the
 * download, reading back (pread, from the page cache) the bytes the
 * downloader has written, so hashing overlaps the network and TLS work
 * instead of following it. It starts with the bytes an earlier run left.
 * Shared fields are under mu; the thread blocks every signal, so Ctrl-C
 * still interrupts the downloader's waits.
 */
struct hasher {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    struct llm_sha256 *sha;
    uint64_t hashed;  /* bytes hashed (the thread's) */
    uint64_t written; /* bytes that may be hashed (the downloader's) */
    bool done;        /* no more bytes will come: hash up to written, stop */
    bool abort;       /* stop now */
    int read_errno;   /* pread failed (0 if not); the file shrank: -1 */
};

static void *hasher_main(void *arg)
{
    struct hasher *h = arg;
    char *buf = malloc(1 << 20);
    pthread_mutex_lock(&h->mu);
    if (!buf)
        h->read_errno = ENOMEM;
    while (buf && !h->abort && !h->read_errno) {
        if (h->hashed == h->written) {
            if (h->done)
                break;
            pthread_cond_wait(&h->cv, &h->mu);
            continue;
        }
        uint64_t at = h->hashed, left = h->written - h->hashed;
        pthread_mutex_unlock(&h->mu);
        size_t want = left < (1 << 20) ? (size_t)left : (1 << 20);
        ssize_t k = pread(h->fd, buf, want, (off_t)at);
        int e = k < 0 ? errno : k == 0 ? -1 : 0;
        if (k > 0)
            llm_sha256_update(h->sha, buf, (size_t)k);
        pthread_mutex_lock(&h->mu);
        if (k > 0)
            h->hashed += (uint64_t)k;
        else if (e != EINTR)
            h->read_errno = e;
    }
    pthread_mutex_unlock(&h->mu);
    free(buf);
    return NULL;
}

/* a hasher of fd from byte 0, knowing that `written` bytes are there */
static struct hasher *hasher_start(int fd, uint64_t written)
{
    struct hasher *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->fd = fd;
    h->written = written;
    h->sha = llm_sha256_init();
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = h->sha ? pthread_create(&h->th, NULL, hasher_main, h) : -1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        if (h->sha) {
            uint8_t d[32];
            llm_sha256_final(h->sha, d);
        }
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
        return NULL;
    }
    return h;
}

/* more bytes are in the file */
static void hasher_feed(struct hasher *h, uint64_t written)
{
    pthread_mutex_lock(&h->mu);
    h->written = written;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/*
 * Stop the thread and free the hasher. With hex, first let it hash every
 * written byte and give the digest: 0, or -1 with the read error in err.
 */
static int hasher_end(struct hasher *h, char hex[65], char *err, size_t err_size)
{
    if (!h)
        return -1;
    pthread_mutex_lock(&h->mu);
    if (hex)
        h->done = true;
    else
        h->abort = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    uint8_t d[32];
    int hashed = llm_sha256_final(h->sha, d);
    int rc = 0;
    if (hex) {
        if (hashed != LLM_OK) {
            snprintf(err, err_size, "cannot compute the download's SHA-256");
            rc = -1;
        } else if (h->read_errno || h->hashed != h->written) {
            snprintf(err, err_size, "cannot read back the download: %s",
                     h->read_errno > 0 ? strerror(h->read_errno) : "the file shrank");
            rc = -1;
        } else {
            llm_hex(d, 32, hex);
        }
    }
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
    return rc;
}

/* start the hash of the .part over (it was truncated) */
static int sha_reset(struct pull *c, struct part *pt)
{
    if (pt->hs)
        hasher_end(pt->hs, NULL, NULL, 0);
    pt->hs = hasher_start(pt->fd, pt->size);
    if (!pt->hs) {
        snprintf(c->err, c->err_size, "cannot start the hashing thread");
        return FETCH_FILE_ERR;
    }
    return 0;
}

static void part_close(struct part *pt)
{
    if (pt->hs) {
        hasher_end(pt->hs, NULL, NULL, 0);
        pt->hs = NULL;
    }
    if (pt->fd >= 0)
        close(pt->fd);
    pt->fd = -1;
}

/* a pull that failed: keep a .part that holds bytes (the next pull resumes
 * it), but leave no empty one behind */
static void part_give_up(struct part *pt)
{
    if (pt->fd >= 0 && pt->size == 0) {
        unlink(pt->path); /* still under our flock: no other pull is writing it */
        unlink(pt->meta);
    }
    part_close(pt);
}

static int truncate_part(struct pull *c, struct part *pt)
{
    if (ftruncate(pt->fd, 0) || lseek(pt->fd, 0, SEEK_SET) < 0) {
        snprintf(c->err, c->err_size, "cannot truncate '%s': %s", pt->path, strerror(errno));
        return FETCH_FILE_ERR;
    }
    pt->size = 0;
    unlink(pt->meta);
    return sha_reset(c, pt);
}

/*
 * One request: continue the .part from its end. Returns 0 when the .part
 * is complete, or enum net_err (transient ones are retried by the caller)
 * or FETCH_FILE_ERR. *linked gets the checksum the hub vouched for.
 */
static int fetch_once(struct pull *c, struct part *pt, char *linked, size_t linked_size,
                      char *final_url, uint64_t *fetched)
{
    char meta_url[HTTP_MAX_URL] = "", etag[256] = "";
    if (pt->size > 0) {
        if (kvfile_get(pt->meta, "url", meta_url, sizeof meta_url) <= 0 || strcmp(meta_url, c->url)) {
            note(c, "discarding a partial download of another URL");
            if (truncate_part(c, pt))
                return FETCH_FILE_ERR;
        } else {
            kvfile_get(pt->meta, "etag", etag, sizeof etag);
        }
    }
    bool strong = etag[0] == '"' && printable(etag);
    struct http_req rq = {.url = c->url, .bearer = c->token, .bearer_origin = c->hub_origin,
                          .range_from = pt->size > 0 ? (int64_t)pt->size : -1,
                          .if_range = strong ? etag : NULL, .max_redirects = 10};
    struct http_resp *resp = malloc(sizeof *resp);
    char *buf = malloc(1 << 16);
    struct http_stream *s = NULL;
    int64_t lsize;
    char le[256];
    int rc = NET_ERR_FATAL;
    if (!resp || !buf) {
        snprintf(c->err, c->err_size, "out of memory");
        goto out;
    }
    rc = http_request(&c->hp, &rq, resp, final_url, le, sizeof le, &lsize, &s, c->err, c->err_size);
    if (rc)
        goto out;
    if (le[0] && !linked[0])
        snprintf(linked, linked_size, "%s", le);
    if (lsize >= 0)
        c->expect_size = lsize;
    int64_t total = -1;
    if (resp->status == 200) {
        if (pt->size > 0) {
            note(c, "the server sent the whole file instead of the rest; starting over");
            if (truncate_part(c, pt)) {
                rc = FETCH_FILE_ERR;
                goto out;
            }
        }
        total = resp->content_length;
    } else if (resp->status == 206) {
        if (pt->size == 0 || resp->range_first != (int64_t)pt->size) {
            snprintf(c->err, c->err_size, "the server sent the wrong range (asked from %llu)",
                     (unsigned long long)pt->size);
            truncate_part(c, pt);
            rc = NET_ERR_TRANSIENT;
            goto out;
        }
        total = resp->range_total;
        note(c, "resuming at byte %llu", (unsigned long long)pt->size);
    } else if (resp->status == 416 && pt->size > 0) {
        if (resp->range_total == (int64_t)pt->size) {
            rc = 0; /* it was all there */
            goto out;
        }
        note(c, "the partial download does not fit the file on the server; starting over");
        truncate_part(c, pt);
        snprintf(c->err, c->err_size, "HTTP 416 for a resumed download");
        rc = NET_ERR_TRANSIENT;
        goto out;
    } else {
        bool transient = resp->status >= 500 || resp->status == 408 || resp->status == 429;
        snprintf(c->err, c->err_size, "HTTP %d%s%s from '%s'%s", resp->status, resp->reason[0] ? " " : "",
                 resp->reason, final_url,
                 resp->status == 404 ? " (no such file)"
                 : resp->status == 401 || resp->status == 403 ? " (a private or gated repo needs HF_TOKEN)"
                                                              : "");
        rc = transient ? NET_ERR_TRANSIENT : NET_ERR_FATAL;
        goto out;
    }
    /* remember where these bytes come from, for a later resume */
    char merr[256];
    if (kvfile_set(pt->meta, "url", c->url, merr, sizeof merr) ||
        kvfile_set(pt->meta, "etag", resp->etag[0] ? resp->etag : NULL, merr, sizeof merr)) {
        snprintf(c->err, c->err_size, "%s", merr);
        rc = FETCH_FILE_ERR;
        goto out;
    }
    if (total < 0 && c->expect_size >= 0)
        total = c->expect_size;
    struct mdl_progress pr = {.done = pt->size, .total = total, .resumed = pt->size};
    double t0 = now_s(), last = 0;
    for (;;) {
        ssize_t k = http_stream_read(s, buf, 1 << 16, c->err, c->err_size);
        if (k < 0) {
            rc = (int)k;
            break;
        }
        if (k == 0) {
            rc = 0;
            break;
        }
        for (ssize_t off = 0; off < k;) {
            ssize_t w = write(pt->fd, buf + off, (size_t)(k - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                snprintf(c->err, c->err_size, "cannot write '%s': %s", pt->path, strerror(errno));
                rc = FETCH_FILE_ERR;
                goto out;
            }
            off += w;
        }
        pt->size += (uint64_t)k;
        hasher_feed(pt->hs, pt->size);
        *fetched += (uint64_t)k;
        if (total >= 0 && pt->size > (uint64_t)total) {
            snprintf(c->err, c->err_size, "the server sent more bytes than announced");
            rc = NET_ERR_FATAL;
            goto out;
        }
        double t = now_s();
        if (c->p->progress && t - last >= 0.1) {
            last = t;
            pr.done = pt->size;
            pr.seconds = t - t0;
            c->p->progress(c->p->ctx, &pr);
        }
        if (c->p->cancel && *c->p->cancel) {
            snprintf(c->err, c->err_size, "interrupted");
            rc = NET_ERR_INTERRUPTED;
            goto out;
        }
    }
    if (rc == 0 && total >= 0 && pt->size != (uint64_t)total) {
        snprintf(c->err, c->err_size, "download ended at %llu of %lld bytes",
                 (unsigned long long)pt->size, (long long)total);
        rc = NET_ERR_TRANSIENT;
    }
    if (c->p->progress) {
        pr.done = pt->size;
        pr.seconds = now_s() - t0;
        c->p->progress(c->p->ctx, &pr);
    }
out:
    http_stream_close(s);
    free(resp);
    free(buf);
    return rc;
}

/* sleep s seconds unless cancelled: 0, or -1 if cancelled */
static int backoff(struct pull *c, int s)
{
    return net_sleep(s * 1000, c->p->cancel) ? -1 : 0;
}

/* the pull was interrupted: say what is kept */
static void interrupted(char *err, size_t err_size, struct part *pt)
{
    if (pt->size > 0)
        snprintf(err, err_size, "interrupted; %llu bytes kept in '%s': pull again to resume",
                 (unsigned long long)pt->size, pt->path);
    else
        snprintf(err, err_size, "interrupted before any data came");
    part_give_up(pt);
}

static void hub_setup(struct pull *c)
{
    const char *e = getenv("KVCHAT_HF_ENDPOINT");
    if (!e || !*e)
        e = getenv("HF_ENDPOINT");
    if (!e || !*e)
        e = DEFAULT_HUB;
    snprintf(c->hub, sizeof c->hub, "%s", e);
    size_t n = strlen(c->hub);
    while (n && c->hub[n - 1] == '/')
        c->hub[--n] = 0;
    struct http_url u;
    char ignore[256];
    if (http_url_parse(c->hub, &u, ignore, sizeof ignore) == 0)
        http_url_origin(&u, c->hub_origin, sizeof c->hub_origin);
    else
        c->hub_origin[0] = 0; /* reported when the hub is used */
}

static const char *env2(const char *a, const char *b)
{
    const char *v = getenv(a);
    if (!v || !*v)
        v = getenv(b);
    return v && *v ? v : NULL;
}

/* NAME is in the store already (at path): nothing to download */
static int pulled_already(struct mdl_pull_result *res, const char *name, const char *path, const struct stat *st,
                          char *err, size_t err_size)
{
    snprintf(res->name, sizeof res->name, "%s", name);
    if (!(res->path = strdup(path))) {
        snprintf(err, err_size, "out of memory");
        return MDL_ERR_FILE;
    }
    res->size = (uint64_t)st->st_size;
    res->already = true;
    return 0;
}

void mdl_pull_result_free(struct mdl_pull_result *res)
{
    free(res->path);
    free(res->url);
    res->path = res->url = NULL;
}

int mdl_pull(const char *ref, const struct mdl_pull_params *p, struct mdl_pull_result *res,
             char *err, size_t err_size)
{
    struct pull c = {.p = p, .err = err, .err_size = err_size};
    memset(res, 0, sizeof *res);
    double t0 = now_s();
    hub_setup(&c);
    c.token = p->token ? p->token : env2("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN");
    http_params_from_env(&c.hp, p->ca_file);
    c.hp.connect_timeout_ms = p->connect_timeout_ms > 0 ? p->connect_timeout_ms : 15000;
    c.hp.read_timeout_ms = p->read_timeout_ms > 0 ? p->read_timeout_ms : 30000;
    c.hp.cancel = p->cancel;

    if (!printable(ref)) {
        snprintf(err, err_size, "bad reference: control characters in it");
        return MDL_ERR_USAGE;
    }
    if (c.token && (!printable(c.token) || strchr(c.token, ' '))) {
        snprintf(err, err_size, "HF_TOKEN holds spaces or control characters; refusing to send it");
        return MDL_ERR_USAGE;
    }
    if (p->name && !mdl_name_valid(p->name)) {
        snprintf(err, err_size, "'%s' is not a valid model name (letters, digits and ._:+- only)", p->name);
        return MDL_ERR_USAGE;
    }
    /* a store name already present needs no network at all */
    if (p->name || mdl_alias_find(ref)) {
        const char *nm = p->name ? p->name : ref;
        char path[4096];
        struct stat st;
        if (!p->force && mdl_store_path(nm, path, sizeof path) == 0 && stat(path, &st) == 0)
            return pulled_already(res, nm, path, &st, err, err_size);
    }
    if (net_tls_check_ca(c.hp.ca_file, err, err_size))
        return MDL_ERR_FILE;
    int rc = resolve_ref(&c, ref);
    if (rc)
        return rc;
    if (p->name)
        snprintf(c.name, sizeof c.name, "%s", p->name);
    if (!mdl_name_valid(c.name)) {
        snprintf(err, err_size, "cannot make a model name from '%s'; give one with --name", ref);
        return MDL_ERR_USAGE;
    }
    char want[65] = "";
    if (p->sha256) {
        if (!etag_sha256(p->sha256, want)) {
            snprintf(err, err_size, "--sha256 wants 64 hex digits, not '%s'", p->sha256);
            return MDL_ERR_USAGE;
        }
    }

    struct part pt = {.fd = -1};
    char dest[4096], sidecar[4200];
    if (mdl_store_path(c.name, dest, sizeof dest)) {
        snprintf(err, err_size, "cannot find the kvchat home: set KVCHAT_HOME or HOME");
        return MDL_ERR_FILE;
    }
    snprintf(pt.path, sizeof pt.path, "%.*s.part", (int)(strlen(dest) - 5), dest);
    if (snprintf(pt.meta, sizeof pt.meta, "%s.meta", pt.path) >= (int)sizeof pt.meta)
        return MDL_ERR_USAGE;
    snprintf(sidecar, sizeof sidecar, "%.*s.meta", (int)(strlen(dest) - 5), dest);
    struct stat st;
    char remote_entry[4200];
    snprintf(remote_entry, sizeof remote_entry, "%.*s.remote", (int)(strlen(dest) - 5), dest);
    if (stat(remote_entry, &st) == 0) {
        snprintf(err, err_size, "'%s' is a remote model in the store; choose another name with --name", c.name);
        return MDL_ERR_USAGE;
    }
    if (!p->force && stat(dest, &st) == 0)
        return pulled_already(res, c.name, dest, &st, err, err_size);
    if (base_mkdir_parents(dest, 0755)) {
        snprintf(err, err_size, "cannot create the directory of '%s': %s", dest, strerror(errno));
        return MDL_ERR_FILE;
    }
    pt.fd = open(pt.path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (pt.fd < 0) {
        snprintf(err, err_size, "cannot open '%s': %s", pt.path, strerror(errno));
        return MDL_ERR_FILE;
    }
    if (flock(pt.fd, LOCK_EX | LOCK_NB)) {
        part_close(&pt);
        snprintf(err, err_size, "another 'models pull' is downloading '%s'", c.name);
        return MDL_ERR_FILE;
    }
    off_t end = lseek(pt.fd, 0, SEEK_END);
    pt.size = end > 0 ? (uint64_t)end : 0;
    if (sha_reset(&c, &pt)) {
        part_give_up(&pt);
        return MDL_ERR_FILE;
    }

    /* download, retrying transient failures with backoff */
    char linked[256] = "", final_url[HTTP_MAX_URL] = "";
    uint64_t fetched = 0;
    int attempt = 0;
    for (;;) {
        uint64_t before = pt.size;
        rc = fetch_once(&c, &pt, linked, sizeof linked, final_url, &fetched);
        if (rc == 0)
            break;
        if (rc == NET_ERR_INTERRUPTED || (p->cancel && *p->cancel)) {
            interrupted(err, err_size, &pt);
            return MDL_ERR_INTERRUPTED;
        }
        if (rc == FETCH_FILE_ERR || rc == NET_ERR_FATAL) {
            part_give_up(&pt);
            return rc == FETCH_FILE_ERR ? MDL_ERR_FILE : MDL_ERR_NETWORK;
        }
        if (pt.size > before)
            attempt = 0; /* progress was made: the budget starts again */
        if (attempt >= p->retries) {
            part_give_up(&pt);
            if (pt.size > 0) {
                size_t L = strlen(err);
                snprintf(err + L, err_size - L, " (%llu bytes kept: pull again to resume)",
                         (unsigned long long)pt.size);
            }
            return MDL_ERR_NETWORK;
        }
        int wait = 1 << attempt;
        note(&c, "%s; retrying in %d s", err, wait);
        attempt++;
        if (backoff(&c, wait)) {
            interrupted(err, err_size, &pt);
            return MDL_ERR_INTERRUPTED;
        }
    }
    if (fsync(pt.fd)) {
        snprintf(err, err_size, "cannot write '%s': %s", pt.path, strerror(errno));
        part_close(&pt);
        return MDL_ERR_FILE;
    }

    /* verify: the checksum, then the GGUF header */
    char got[65];
    rc = hasher_end(pt.hs, got, err, err_size);
    pt.hs = NULL;
    if (rc) {
        part_close(&pt);
        return MDL_ERR_FILE;
    }
    char published[65] = "";
    bool have_pub = etag_sha256(linked, published);
    const char *expect = want[0] ? want : have_pub ? published : NULL;
    if (expect && strcmp(expect, got)) {
        unlink(pt.path);
        unlink(pt.meta);
        part_close(&pt);
        snprintf(err, err_size, "sha256 mismatch for '%s': expected %s (%s), got %s; the download was deleted",
                 c.name, expect, want[0] ? "--sha256" : "the hub's X-Linked-ETag", got);
        return MDL_ERR_VERIFY;
    }
    struct llm_gguf *g;
    char gerr[256];
    if (llm_gguf_open(pt.path, &g, gerr, sizeof gerr)) {
        unlink(pt.path);
        unlink(pt.meta);
        part_close(&pt);
        snprintf(err, err_size, "the download from '%s' is not a GGUF model (%s); it was deleted", c.url, gerr);
        return MDL_ERR_FILE;
    }
    llm_gguf_close(g);

    /* into place */
    if (rename(pt.path, dest)) {
        snprintf(err, err_size, "cannot rename '%s' to '%s': %s", pt.path, dest, strerror(errno));
        part_close(&pt);
        return MDL_ERR_FILE;
    }
    part_close(&pt);
    unlink(pt.meta);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", dest);
    *strrchr(dir, '/') = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    char num[32], merr[256];
    snprintf(num, sizeof num, "%lld", (long long)time(NULL));
    char szs[32];
    stat(dest, &st);
    snprintf(szs, sizeof szs, "%lld", (long long)st.st_size);
    /* one atomic write: a kill leaves the old sidecar or the new one */
    const char *kv[] = {"source", ref, "url", c.url, "sha256", got, "sha256_checked", expect ? "yes" : "no",
                        "size", szs, "pulled", num};
    if (kvfile_replace(sidecar, kv, sizeof kv / sizeof *kv / 2, merr, sizeof merr))
        note(&c, "cannot write the model's sidecar: %s", merr);

    snprintf(res->name, sizeof res->name, "%s", c.name);
    res->path = strdup(dest);
    res->url = strdup(final_url[0] ? final_url : c.url);
    if (!res->path || !res->url) {
        snprintf(err, err_size, "out of memory");
        return MDL_ERR_FILE;
    }
    snprintf(res->sha256, sizeof res->sha256, "%s", got);
    res->sha256_checked = expect != NULL;
    res->size = (uint64_t)st.st_size;
    res->downloaded = fetched;
    res->seconds = now_s() - t0;
    return 0;
}
