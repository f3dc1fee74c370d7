/*
 * base.h - the small things every folder needs, solved once: a growing
 * buffer and array growth, `mkdir -p`, a file replaced atomically, a path
 * joined on the heap. Prefix base_.
 *
 * How it is reached: this header is part of core's public face and is
 * included by core/llm.h, so every folder gets it through core's one
 * public header (sessions/sess.h includes core/llm.h; models/ and cli/
 * files include it), never by naming a second header of core: the base
 * is the bottom room of core, and the arrows into it come only from
 * there. Nothing here knows of models, sessions or the terminal; nothing
 * here prints.
 *
 * Errors: 0, or -1 with errno set (ENOMEM, or the system call's). Memory:
 * what is returned malloc'd says so ("caller frees").
 */
#ifndef KVCHAT_CORE_BASE_H
#define KVCHAT_CORE_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* ==== growing memory ==== */

/*
 * Make room for need elements of elem bytes in the array *p that has room
 * for *cap: 0 (room at least doubled, at least 16, or exactly need when
 * that is more), or -1 (ENOMEM, on overflow too) with *p and *cap unchanged.
 *     if (base_grow((void **)&v, &cap, n + 1, sizeof *v)) return -1;
 *     v[n++] = x;
 */
int base_grow(void **p, size_t *cap, size_t need, size_t elem);

/*
 * free() each of a list of pointers (NULL ones too), in order: the body of
 * most x_free functions, written once.
 *     BASE_FREE(g->code, g->ranges, g);
 */
void base_free_n(void *const *p, size_t n);
#define BASE_FREE(...)                                                                              \
    base_free_n((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/*
 * A binary heap of TYPE in a growing array (items, n, cap), first the
 * element that before(a, b) ranks first (ties stay as the sift leaves them,
 * so the order of pops is a function of the pushes alone).
 * BASE_HEAP_DEFINE(name, TYPE, before) defines two static functions:
 *     int name_push(TYPE **items, size_t *n, size_t *cap, TYPE x)
 *         0, or -1 (ENOMEM) with the heap unchanged;
 *     TYPE name_pop(TYPE *items, size_t *n)   (*n > 0) removes the first.
 * before is a function bool (const TYPE *, const TYPE *).
 */
#define BASE_HEAP_DEFINE(name, TYPE, before)                                                        \
    static int name##_push(TYPE **items, size_t *n, size_t *cap, TYPE x)                            \
    {                                                                                               \
        if (base_grow((void **)items, cap, *n + 1, sizeof **items))                                 \
            return -1;                                                                              \
        TYPE *h = *items;                                                                           \
        size_t i = (*n)++;                                                                          \
        while (i > 0) {                                                                             \
            size_t parent = (i - 1) / 2;                                                            \
            if (!before(&x, &h[parent]))                                                            \
                break;                                                                              \
            h[i] = h[parent];                                                                       \
            i = parent;                                                                             \
        }                                                                                           \
        h[i] = x;                                                                                   \
        return 0;                                                                                   \
    }                                                                                               \
    static TYPE name##_pop(TYPE *h, size_t *n)                                                      \
    {                                                                                               \
        TYPE top = h[0], x = h[--*n];                                                               \
        size_t i = 0;                                                                               \
        for (;;) {                                                                                  \
            size_t c = 2 * i + 1;                                                                   \
            if (c >= *n)                                                                            \
                break;                                                                              \
            if (c + 1 < *n && before(&h[c + 1], &h[c]))                                             \
                c++;                                                                                \
            if (!before(&h[c], &x))                                                                 \
                break;                                                                              \
            h[i] = h[c];                                                                            \
            i = c;                                                                                  \
        }                                                                                           \
        if (*n)                                                                                     \
            h[i] = x;                                                                               \
        return top;                                                                                 \
    }

/* A growing byte string: {0} is empty; s is NUL-terminated once anything
 * was added (even nothing: base_buf_add(b, "", 0) makes s ""). The caller
 * owns s (frees with base_buf_free, or takes it). */
struct base_buf {
    char *s;
    size_t len, cap;
};
/* append n bytes of p: 0, or -1 (ENOMEM), b unchanged */
int base_buf_add(struct base_buf *b, const void *p, size_t n);
int base_buf_puts(struct base_buf *b, const char *s);
/* append printf's text: 0, or -1 (ENOMEM) */
int base_buf_printf(struct base_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int base_buf_vprintf(struct base_buf *b, const char *fmt, va_list ap);
void base_buf_free(struct base_buf *b);

/* ==== text ==== */

/* the length (1 to 4) of the valid UTF-8 sequence at p, n bytes left; 0
 * if it is invalid (a stray continuation, an overlong form, a surrogate,
 * above U+10FFFF) or cut short by n */
size_t base_utf8_seq(const void *p, size_t n);

/* the value of the hex digit c (0-9, a-f, A-F), -1 if c is none */
int base_hexval(int c);

/* ==== paths ==== */

/* "dir/name" (dir "" gives name): caller frees; NULL when out of memory */
char *base_path_join(const char *dir, const char *name);
/* printf into a new string: caller frees; NULL when out of memory */
char *base_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ==== files ==== */

/* `mkdir -p dir`: dir and its missing parents, each made with mode (an
 * existing directory is fine): 0, or -1 with errno */
int base_mkdir_p(const char *dir, mode_t mode);
/* the directories above the file path (its dirname), as base_mkdir_p */
int base_mkdir_parents(const char *path, mode_t mode);

/*
 * A file replaced atomically: readers see the old file or the whole new
 * one, never a part, and a crash leaves one of the two. The bytes go to
 * "PATH.tmp.PID" (created exclusively: never through a symbolic link or a
 * FIFO), which is fsync'd, renamed over PATH, and PATH's directory fsync'd.
 *     struct base_atomic a;
 *     if (base_atomic_open(&a, path, 0600)) ...cannot create a.tmp...
 *     base_atomic_write(&a, head, n1); base_atomic_write(&a, body, n2);
 *     if (base_atomic_commit(&a)) ...    // or base_atomic_abort(&a)
 * A write failure is remembered and returned by commit (which then removes
 * the temporary file), so writes need not each be checked.
 */
struct base_atomic {
    int fd;
    int err;      /* the first failure's errno, 0 */
    char *path;   /* owned copies */
    char *tmp;
};
/* 0, or -1 with errno (a->tmp, when not NULL, names what could not be made;
 * base_atomic_abort frees it) */
int base_atomic_open(struct base_atomic *a, const char *path, mode_t mode);
/* n bytes of p (EINTR and short writes retried): 0, or -1 */
int base_atomic_write(struct base_atomic *a, const void *p, size_t n);
/*
 * Sync, close and rename in: 0, or (errno set, a freed in every case):
 *  BASE_ATOMIC_WRITE: a write, the sync or the close failed; nothing
 *    changed and the temporary file is gone;
 *  BASE_ATOMIC_RENAME: the rename failed; the same;
 *  BASE_ATOMIC_DIR_SYNC: the file is in place, but its directory could
 *    not be synced.
 */
enum base_atomic_status { BASE_ATOMIC_WRITE = -1, BASE_ATOMIC_RENAME = -2, BASE_ATOMIC_DIR_SYNC = -3 };
int base_atomic_commit(struct base_atomic *a);
/* give up: the temporary file removed, a freed (errno kept) */
void base_atomic_abort(struct base_atomic *a);
/* the whole file at once: 0, or BASE_ATOMIC_WRITE (also: it could not be
 * created), _RENAME or _DIR_SYNC as base_atomic_commit (errno) */
int base_write_file_atomic(const char *path, const void *data, size_t n, mode_t mode);

/* ==== a phase trace ==== */

/*
 * Where a process's time goes, for the one who tunes it (KVCHAT_TRACE=1,
 * printed by cli/ at exit): base_trace_start() turns it on; each
 * base_trace(what) then keeps the wall time, the process's CPU time and
 * its page faults at that moment (at most BASE_TRACE_MAX marks; what is a
 * string literal, borrowed). Off, a mark costs one load. Any thread may
 * mark.
 */
enum { BASE_TRACE_MAX = 64 };
struct base_trace_mark {
    const char *what;
    double wall_ms, cpu_ms; /* since base_trace_start */
    long faults;            /* minor + major, since base_trace_start */
};
void base_trace_start(void);
void base_trace(const char *what);
/* the marks so far: their number, *marks borrowed */
int base_trace_marks(const struct base_trace_mark **marks);
/* base_trace_start's CLOCK_MONOTONIC time, in ms (to line the marks up with
 * a profiler's samples: perf record -k CLOCK_MONOTONIC) */
double base_trace_zero_ms(void);

#endif
