/*
 * tmpdir.h - a unit test's temporary directory: made with mkdtemp under
 * $TMPDIR (else /tmp), removed whole with rm -rf; and the cmocka fixtures
 * built on it. Header-only; for tests.
 */
#ifndef KVCHAT_TESTS_TMPDIR_H
#define KVCHAT_TESTS_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

/* dir (size bytes) = a new directory TMPDIR/name.XXXXXX: 0, or -1 */
static inline int test_dir_make(char *dir, size_t size, const char *name)
{
    const char *t = getenv("TMPDIR");
    int n = snprintf(dir, size, "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);
    return n > 0 && (size_t)n < size && mkdtemp(dir) ? 0 : -1;
}

/* rm -rf dir: 0, or -1 */
static inline int test_dir_remove(const char *dir)
{
    char cmd[4200];
    if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) >= (int)sizeof cmd)
        return -1;
    return system(cmd) == 0 ? 0 : -1;
}

/*
 * The group setup and teardown of a test file whose tests share one
 * temporary directory dir (a char array of the file): TEST_DIR_GROUP(dir,
 * "name") defines test_dir_setup and test_dir_teardown for
 * cmocka_run_group_tests.
 */
#define TEST_DIR_GROUP(dir, name)                                                                                    \
    static int test_dir_setup(void **state)                                                                          \
    {                                                                                                                \
        (void)state;                                                                                                 \
        return test_dir_make(dir, sizeof dir, name);                                                                 \
    }                                                                                                                \
    static int test_dir_teardown(void **state)                                                                       \
    {                                                                                                                \
        (void)state;                                                                                                 \
        return test_dir_remove(dir);                                                                                 \
    }

/* a cmocka test run between the file's own setup() and teardown() (each
 * test in a fresh fixture: its temporary directory, most often) */
#define unit_test_fx(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

#endif
