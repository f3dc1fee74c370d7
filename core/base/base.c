/*
 * base.c - growing memory, paths, `mkdir -p` and atomic file replacement
 * (core/base/base.h): the one implementation of each, for every folder.
 *
 * Invariants: sizes are checked for overflow before they are multiplied;
 * a failed call leaves what it was given as it was (a buffer keeps its
 * bytes, an atomic write leaves the old file and no temporary one).
 */
#include "core/base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ==== growing memory ==== */

int base_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 8;
    while (c < need) {
        if (c > SIZE_MAX / 2) {
            c = need;
            break;
        }
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem) {
        errno = ENOMEM;
        return -1;
    }
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int base_buf_add(struct base_buf *b, const void *p, size_t n)
{
    if (n > SIZE_MAX - b->len - 1) {
        errno = ENOMEM;
        return -1;
    }
    if (base_grow((void **)&b->s, &b->cap, b->len + n + 1, 1))
        return -1;
    if (n)
        memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

int base_buf_puts(struct base_buf *b, const char *s)
{
    return base_buf_add(b, s, strlen(s));
}

int base_buf_vprintf(struct base_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return -1;
    if ((size_t)n > SIZE_MAX - b->len - 1 || base_grow((void **)&b->s, &b->cap, b->len + (size_t)n + 1, 1))
        return -1;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int base_buf_printf(struct base_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = base_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void base_free_n(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}

void base_buf_free(struct base_buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

/* ==== text ==== */

size_t base_utf8_seq(const void *s, size_t n)
{
    const unsigned char *p = s;
    if (n == 0)
        return 0;
    size_t k = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
             : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    if (k == 0 || k > n)
        return 0;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((k == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (k == 3 && p[0] == 0xed && p[1] > 0x9f) ||
        (k == 4 && p[0] == 0xf0 && p[1] < 0x90) || (k == 4 && p[0] == 0xf4 && p[1] > 0x8f))
        return 0;
    return k;
}

int base_hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* ==== paths ==== */

char *base_strdup_printf(const char *fmt, ...)
{
    struct base_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    int rc = base_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (rc || (!b.s && base_buf_add(&b, "", 0)))
        return NULL;
    return b.s;
}

char *base_path_join(const char *dir, const char *name)
{
    if (!dir[0])
        return strdup(name);
    size_t n = strlen(dir);
    return base_strdup_printf("%s%s%s", dir, dir[n - 1] == '/' ? "" : "/", name);
}

/* ==== files ==== */

int base_mkdir_p(const char *dir, mode_t mode)
{
    char *p = strdup(dir);
    if (!p)
        return -1;
    int rc = 0;
    for (char *s = p + 1; *s && !rc; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, mode) != 0 && errno != EEXIST)
            rc = -1;
        *s = '/';
    }
    if (!rc && p[0] && mkdir(p, mode) != 0 && errno != EEXIST)
        rc = -1;
    int e = errno;
    free(p);
    errno = e;
    return rc;
}

int base_mkdir_parents(const char *path, mode_t mode)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return 0;
    char *dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return -1;
    int rc = base_mkdir_p(dir, mode);
    int e = errno;
    free(dir);
    errno = e;
    return rc;
}

static void atomic_free(struct base_atomic *a)
{
    free(a->path);
    free(a->tmp);
    a->path = a->tmp = NULL;
    a->fd = -1;
}

int base_atomic_open(struct base_atomic *a, const char *path, mode_t mode)
{
    a->fd = -1;
    a->err = 0;
    a->path = strdup(path);
    a->tmp = base_strdup_printf("%s.tmp.%ld", path, (long)getpid());
    if (!a->path || !a->tmp) {
        atomic_free(a);
        errno = ENOMEM;
        return -1;
    }
    unlink(a->tmp); /* a leftover of a dead process that had our pid */
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    return a->fd < 0 ? -1 : 0;
}

int base_atomic_write(struct base_atomic *a, const void *p, size_t n)
{
    const char *q = p;
    while (n && !a->err) {
        size_t chunk = n < ((size_t)8 << 20) ? n : (size_t)8 << 20;
        ssize_t w = write(a->fd, q, chunk);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            a->err = w < 0 ? errno : EIO;
            break;
        }
        q += w;
        n -= (size_t)w;
    }
    if (a->err)
        errno = a->err;
    return a->err ? -1 : 0;
}

void base_atomic_abort(struct base_atomic *a)
{
    int e = errno;
    if (a->fd >= 0) { /* ours: made by base_atomic_open */
        close(a->fd);
        unlink(a->tmp);
    }
    atomic_free(a);
    errno = e;
}

/* fsync the directory that holds path */
static int sync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = !slash ? strdup(".") : slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
    if (!dir)
        return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int e = errno;
    free(dir);
    if (fd < 0) {
        errno = e;
        return -1;
    }
    int rc = fsync(fd);
    e = errno;
    close(fd);
    errno = e;
    return rc;
}

int base_atomic_commit(struct base_atomic *a)
{
    int rc = 0;
    if (a->err) {
        errno = a->err;
        rc = BASE_ATOMIC_WRITE;
    } else if (fsync(a->fd) != 0) {
        rc = BASE_ATOMIC_WRITE;
    }
    int e = errno;
    if (close(a->fd) != 0 && rc == 0) {
        rc = BASE_ATOMIC_WRITE;
        e = errno;
    }
    a->fd = -1;
    if (rc == 0 && rename(a->tmp, a->path) != 0) {
        rc = BASE_ATOMIC_RENAME;
        e = errno;
    }
    if (rc) {
        unlink(a->tmp);
        atomic_free(a);
        errno = e;
        return rc;
    }
    if (sync_dir_of(a->path) != 0)
        rc = BASE_ATOMIC_DIR_SYNC;
    e = errno;
    atomic_free(a);
    errno = e;
    return rc;
}

int base_write_file_atomic(const char *path, const void *data, size_t n, mode_t mode)
{
    struct base_atomic a;
    if (base_atomic_open(&a, path, mode)) {
        base_atomic_abort(&a);
        return BASE_ATOMIC_WRITE;
    }
    base_atomic_write(&a, data, n);
    return base_atomic_commit(&a);
}

/* ==== a phase trace ==== */

static struct base_trace_mark trace_marks[BASE_TRACE_MAX];
static atomic_int trace_n = -1; /* -1: off */
static struct base_trace_mark trace_zero;

static void trace_now(struct base_trace_mark *m)
{
    struct timespec t;
    struct rusage ru;
    clock_gettime(CLOCK_MONOTONIC, &t);
    getrusage(RUSAGE_SELF, &ru);
    m->wall_ms = t.tv_sec * 1e3 + t.tv_nsec / 1e6 - trace_zero.wall_ms;
    m->cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3 -
                trace_zero.cpu_ms;
    m->faults = ru.ru_minflt + ru.ru_majflt - trace_zero.faults;
}

void base_trace_start(void)
{
    trace_now(&trace_zero);
    atomic_store(&trace_n, 0);
}

void base_trace(const char *what)
{
    if (atomic_load_explicit(&trace_n, memory_order_relaxed) < 0)
        return;
    int i = atomic_fetch_add(&trace_n, 1);
    if (i >= BASE_TRACE_MAX) {
        atomic_store(&trace_n, BASE_TRACE_MAX);
        return;
    }
    trace_now(&trace_marks[i]);
    trace_marks[i].what = what;
}

double base_trace_zero_ms(void) { return trace_zero.wall_ms; }

int base_trace_marks(const struct base_trace_mark **marks)
{
    int n = atomic_load(&trace_n);
    *marks = trace_marks;
    return n < 0 ? 0 : n < BASE_TRACE_MAX ? n : BASE_TRACE_MAX;
}
