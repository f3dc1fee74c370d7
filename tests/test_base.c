/*
 * test_base.c - core/base on its own: array growth (doubling, overflow
 * refused, the array kept on failure), the growing buffer (bytes kept in
 * order, NUL-terminated, printf), path joining, `mkdir -p` (made, existing,
 * a file in the way), and the atomic file write: the whole new file or
 * the old one, never a temporary left behind, when a write, the fsync or
 * the rename fails (write, fsync and rename are wrapped); the phase trace
 * (off until started, marks in order, times and faults never going back,
 * at most BASE_TRACE_MAX kept).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fault-fs.h"
#include "tests/tmpdir.h"

ssize_t __real_write(int fd, const void *p, size_t n);
ssize_t __wrap_write(int fd, const void *p, size_t n);
static int fail_write;    /* the next write fails with ENOSPC */
static size_t short_write; /* writes give at most this many bytes (0: all) */

ssize_t __wrap_write(int fd, const void *p, size_t n)
{
    if (fail_write) {
        fail_write = 0;
        errno = ENOSPC;
        return -1;
    }
    return __real_write(fd, p, short_write && n > short_write ? short_write : n);
}

static char dir[256];

static int setup(void **state)
{
    (void)state;
    assert_int_equal(test_dir_make(dir, sizeof dir, "kvchat-test-base"), 0);
    fail_fsync = fail_rename = fail_write = 0;
    short_write = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(test_dir_remove(dir), 0);
    return 0;
}

/* the file's bytes (static buffer), NULL if it cannot be read */
static const char *slurp(const char *path, size_t *n)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    *n = fread(buf, 1, sizeof buf - 1, f);
    buf[*n] = 0;
    fclose(f);
    return buf;
}

static int entries(const char *d)
{
    DIR *dd = opendir(d);
    assert_non_null(dd);
    int n = 0;
    for (struct dirent *e; (e = readdir(dd));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dd);
    return n;
}

/* the trace: nothing kept before base_trace_start; then each mark in
 * order, its literal borrowed, wall and CPU time and faults never going
 * back (CPU time spent between two marks shows); past BASE_TRACE_MAX
 * marks the rest are dropped */
static void test_trace(void **state)
{
    (void)state;
    const struct base_trace_mark *m;
    base_trace("before the start");
    assert_int_equal(base_trace_marks(&m), 0);
    base_trace_start();
    base_trace("one");
    volatile double x = 0;
    for (int i = 0; i < 20000000; i++)
        x += i * 0.5;
    base_trace("two");
    assert_int_equal(base_trace_marks(&m), 2);
    assert_string_equal(m[0].what, "one");
    assert_string_equal(m[1].what, "two");
    assert_true(m[0].wall_ms >= 0 && m[1].wall_ms >= m[0].wall_ms);
    assert_true(m[0].cpu_ms >= 0 && m[1].cpu_ms > m[0].cpu_ms); /* the loop's time */
    assert_true(m[0].faults >= 0 && m[1].faults >= m[0].faults);
    assert_true(base_trace_zero_ms() > 0);
    for (int i = 0; i < BASE_TRACE_MAX + 10; i++)
        base_trace("many");
    assert_int_equal(base_trace_marks(&m), BASE_TRACE_MAX);
    assert_string_equal(m[1].what, "two");
    assert_string_equal(m[BASE_TRACE_MAX - 1].what, "many");
}

static void test_grow(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(base_grow((void **)&v, &cap, (size_t)i + 1, sizeof *v), 0);
        assert_true(cap >= (size_t)i + 1);
        v[i] = i * 7;
    }
    for (int i = 0; i < 1000; i++)
        assert_int_equal(v[i], i * 7);
    /* amortized: doubling, not one more each time */
    assert_true(cap < 2048);
    size_t was = cap;
    assert_int_equal(base_grow((void **)&v, &cap, 10, sizeof *v), 0); /* already room */
    assert_int_equal(cap, was);
    /* a size that overflows is refused, the array kept */
    int *keep = v;
    errno = 0;
    assert_int_equal(base_grow((void **)&v, &cap, SIZE_MAX / 2, sizeof *v), -1);
    assert_int_equal(errno, ENOMEM);
    assert_ptr_equal(v, keep);
    assert_int_equal(cap, was);
    assert_int_equal(v[999], 999 * 7);
    free(v);
}

/* the heap: (key, seq) pairs, first the least key, ties by seq */
struct kv {
    int key, seq;
};
static bool kv_before(const struct kv *a, const struct kv *b)
{
    return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}
BASE_HEAP_DEFINE(kv_heap, struct kv, kv_before)

static void test_heap(void **state)
{
    (void)state;
    struct kv *h = NULL;
    size_t n = 0, cap = 0;
    int count[50] = {0};
    uint32_t x = 12345;
    /* 1000 pushes of keys 0..49, popping one after every third: each pop is
     * the least pushed and not yet popped (checked against the counts) */
    for (int i = 0; i < 1000; i++) {
        x = x * 1103515245u + 12345u;
        struct kv e = {(int)(x >> 16) % 50, i};
        assert_int_equal(kv_heap_push(&h, &n, &cap, e), 0);
        count[e.key]++;
        if (i % 3 == 2) {
            struct kv t = kv_heap_pop(h, &n);
            int least = 0;
            while (!count[least])
                least++;
            assert_int_equal(t.key, least);
            count[least]--;
        }
    }
    assert_int_equal(n, 1000 - 333);
    struct kv prev = kv_heap_pop(h, &n);
    count[prev.key]--;
    while (n) {
        struct kv t = kv_heap_pop(h, &n);
        assert_true(kv_before(&prev, &t));
        count[t.key]--;
        prev = t;
    }
    for (int k = 0; k < 50; k++)
        assert_int_equal(count[k], 0);
    free(h);
}

static void test_utf8_seq(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t n, want;
    } cases[] = {
        {"a", 1, 1},          {"\n", 1, 1},           {"\xc3\xa9", 2, 2},      {"\xc3\xa9", 1, 0},
        {"\xe2\x82\xac", 3, 3}, {"\xf0\x9f\x98\x80", 4, 4}, {"\xf4\x8f\xbf\xbf", 4, 4},
        {"\x80", 1, 0},       {"\xc0\xaf", 2, 0},       {"\xc1\xbf", 2, 0},       /* stray, overlong */
        {"\xe0\x9f\xbf", 3, 0}, {"\xed\xa0\x80", 3, 0},  {"\xf0\x8f\xbf\xbf", 4, 0}, /* overlong, surrogate */
        {"\xf4\x90\x80\x80", 4, 0}, {"\xf5\x80\x80\x80", 4, 0}, {"\xe2\x82", 2, 0}, /* > U+10FFFF, cut */
        {"\xe2\x28\xac", 3, 0}, {"", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(base_utf8_seq(cases[i].s, cases[i].n), cases[i].want);
}

static void test_hexval(void **state)
{
    (void)state;
    const char *digits = "0123456789abcdef", *upper = "ABCDEF";
    for (int c = -128; c < 256; c++) {
        const char *at = c > 0 ? strchr(digits, c) : NULL, *up = c > 0 ? strchr(upper, c) : NULL;
        int want = at ? (int)(at - digits) : up ? 10 + (int)(up - upper) : -1;
        assert_int_equal(base_hexval(c), want);
    }
}

static void test_buf(void **state)
{
    (void)state;
    struct base_buf b = {0};
    assert_int_equal(base_buf_add(&b, "", 0), 0); /* nothing added is still a string */
    assert_non_null(b.s);
    assert_string_equal(b.s, "");
    char expect[4000];
    size_t n = 0;
    for (int i = 0; i < 300; i++) {
        assert_int_equal(base_buf_printf(&b, "%d,", i), 0);
        n += (size_t)snprintf(expect + n, sizeof expect - n, "%d,", i);
    }
    assert_int_equal(base_buf_add(&b, "a\0b", 3), 0); /* bytes, NUL included */
    memcpy(expect + n, "a\0b", 3);
    n += 3;
    assert_int_equal(b.len, n);
    assert_memory_equal(b.s, expect, n);
    assert_int_equal(b.s[b.len], 0);
    assert_int_equal(base_buf_puts(&b, "end"), 0);
    assert_string_equal(b.s + n, "end");
    base_buf_free(&b);
    assert_null(b.s);
    assert_int_equal(b.len, 0);
}

static void test_paths(void **state)
{
    (void)state;
    char *p = base_path_join("/a/b", "c.db");
    assert_string_equal(p, "/a/b/c.db");
    free(p);
    p = base_path_join("/a/b/", "c");
    assert_string_equal(p, "/a/b/c");
    free(p);
    p = base_path_join("", "c");
    assert_string_equal(p, "c");
    free(p);
    p = base_strdup_printf("%s.tmp.%d", "x", 42);
    assert_string_equal(p, "x.tmp.42");
    free(p);
}

static void test_mkdir_p(void **state)
{
    (void)state;
    char p[512], f[600];
    struct stat sb;
    snprintf(p, sizeof p, "%s/one/two/three", dir);
    assert_int_equal(base_mkdir_p(p, 0700), 0);
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_int_equal(base_mkdir_p(p, 0700), 0); /* there already */
    snprintf(f, sizeof f, "%s/x/y/file", dir);
    assert_int_equal(base_mkdir_parents(f, 0755), 0); /* the directories above a file, not the file */
    snprintf(p, sizeof p, "%s/x/y", dir);
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_not_equal(stat(f, &sb), 0);
    /* a file where a directory must go */
    FILE *w = fopen(f, "w");
    assert_non_null(w);
    fclose(w);
    snprintf(p, sizeof p, "%s/x/y/file/deeper", dir);
    assert_int_equal(base_mkdir_p(p, 0700), -1);
    assert_int_equal(errno, ENOTDIR);
}

static void test_atomic(void **state)
{
    (void)state;
    char path[512];
    size_t n;
    snprintf(path, sizeof path, "%s/file", dir);
    assert_int_equal(base_write_file_atomic(path, "old\n", 4, 0600), 0);
    const char *got = slurp(path, &n);
    assert_non_null(got);
    assert_string_equal(got, "old\n");
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    /* in pieces, with short writes resumed */
    struct base_atomic a;
    assert_int_equal(base_atomic_open(&a, path, 0600), 0);
    short_write = 3;
    char big[20000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    assert_int_equal(base_atomic_write(&a, "head:", 5), 0);
    assert_int_equal(base_atomic_write(&a, big, sizeof big), 0);
    short_write = 0;
    assert_int_equal(base_atomic_commit(&a), 0);
    got = slurp(path, &n);
    assert_int_equal(n, 5 + sizeof big);
    assert_memory_equal(got, "head:", 5);
    assert_memory_equal(got + 5, big, sizeof big);
    assert_int_equal(entries(dir), 1);
    /* a failed write, fsync or rename: the old file whole, no temporary, errno said */
    assert_int_equal(base_write_file_atomic(path, "old\n", 4, 0600), 0);
    for (int which = 0; which < 3; which++) {
        fail_write = which == 0;
        fail_fsync = which == 1;
        fail_rename = which == 2;
        errno = 0;
        int rc = base_write_file_atomic(path, "new\n", 4, 0600);
        assert_int_equal(rc, which == 2 ? BASE_ATOMIC_RENAME : BASE_ATOMIC_WRITE);
        assert_int_equal(errno, which == 0 ? ENOSPC : which == 1 ? EIO : EXDEV);
        fail_write = fail_fsync = fail_rename = 0;
        got = slurp(path, &n);
        assert_string_equal(got, "old\n");
        assert_int_equal(entries(dir), 1);
    }
    /* given up: nothing changed, nothing left */
    assert_int_equal(base_atomic_open(&a, path, 0600), 0);
    base_atomic_write(&a, "x", 1);
    base_atomic_abort(&a);
    assert_string_equal(slurp(path, &n), "old\n");
    assert_int_equal(entries(dir), 1);
    /* never through a symbolic link at the temporary's name */
    char tmp[600], target[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(target, sizeof target, "%s/target", dir);
    assert_int_equal(symlink(target, tmp), 0);
    assert_int_equal(base_write_file_atomic(path, "new\n", 4, 0600), 0);
    assert_string_equal(slurp(path, &n), "new\n");
    assert_int_not_equal(access(target, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_grow),
        cmocka_unit_test(test_heap),
        cmocka_unit_test(test_utf8_seq),
        cmocka_unit_test(test_hexval),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_paths),
        unit_test_fx(test_mkdir_p),
        unit_test_fx(test_atomic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
