/*
 * fault-fs.h - fault injection for tests of code that writes files whole
 * (write a temporary, fsync, rename): a test binary linked with
 * -Wl,--wrap=fsync,--wrap=rename (TEST_WRAP_ in Makefile.in) includes this
 * once, then sets fail_fsync or fail_rename to make the next calls fail
 * with EIO or EXDEV.
 */
#ifndef KVCHAT_TESTS_FAULT_FS_H
#define KVCHAT_TESTS_FAULT_FS_H

#include <errno.h>

int __real_fsync(int fd);
int __real_rename(const char *a, const char *b);
int __wrap_fsync(int fd);
int __wrap_rename(const char *a, const char *b);
static int fail_fsync, fail_rename;

int __wrap_fsync(int fd)
{
    if (fail_fsync) {
        errno = EIO;
        return -1;
    }
    return __real_fsync(fd);
}

int __wrap_rename(const char *a, const char *b)
{
    if (fail_rename) {
        errno = EXDEV;
        return -1;
    }
    return __real_rename(a, b);
}

#endif
