/*
 * fault-full.c - a full disk for the CLI tests, without mounting anything:
 * a library preloaded into kvchat (LD_PRELOAD=tests/fault-full.so) that
 * makes the writes of the files under one folder fail with ENOSPC while a
 * flag file exists, as a file system with no room left does. kvchat's own
 * writes and SQLite's (write, pwrite, pwrite64, ftruncate growing a file)
 * both go through it, and statvfs/fstatvfs there say no block is free.
 *
 *   KVCHAT_FAULT_DIR=DIR    the folder whose files are on the "disk" (the store)
 *   KVCHAT_FAULT_FULL=FILE  the disk is full while FILE exists (the test
 *                           creates it and removes it when it likes)
 *   KVCHAT_FAULT_FREES=1    removing a file under DIR makes room: FILE is
 *                           removed then (the store giving up its reserve)
 *   KVCHAT_FAULT_STATVFS=0  statvfs says what the real file system says (a
 *                           file system that reports free blocks it cannot
 *                           give: only the writes' ENOSPC tells)
 *
 * Without KVCHAT_FAULT_FULL nothing changes. Only regular files under DIR
 * are affected: standard streams, pipes and the test's own files are not.
 * Used by tests/cli/t0038-disk-full.sh.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_statvfs)(const char *, struct statvfs *);
static int (*real_fstatvfs)(int, struct statvfs *);

static const char *dir, *flag;
static char dir_real[PATH_MAX + 1];
static size_t dir_len;
static bool frees, statvfs_lies = true;

__attribute__((constructor)) static void fault_init(void)
{
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    real_writev = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    real_ftruncate = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate64");
    real_fallocate = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, "fallocate");
    real_posix_fallocate = (int (*)(int, off_t, off_t))dlsym(RTLD_NEXT, "posix_fallocate");
    real_unlink = (int (*)(const char *))dlsym(RTLD_NEXT, "unlink");
    real_unlinkat = (int (*)(int, const char *, int))dlsym(RTLD_NEXT, "unlinkat");
    real_statvfs = (int (*)(const char *, struct statvfs *))dlsym(RTLD_NEXT, "statvfs");
    real_fstatvfs = (int (*)(int, struct statvfs *))dlsym(RTLD_NEXT, "fstatvfs");
    dir = getenv("KVCHAT_FAULT_DIR");
    flag = getenv("KVCHAT_FAULT_FULL");
    frees = getenv("KVCHAT_FAULT_FREES") && !strcmp(getenv("KVCHAT_FAULT_FREES"), "1");
    statvfs_lies = !(getenv("KVCHAT_FAULT_STATVFS") && !strcmp(getenv("KVCHAT_FAULT_STATVFS"), "0"));
    if (!dir || !*dir || !flag || !*flag)
        dir = flag = NULL;
    else if (realpath(dir, dir_real)) /* as /proc/self/fd names the files */
        dir = dir_real;
    dir_len = dir ? strlen(dir) : 0;
    while (dir_len > 1 && dir[dir_len - 1] == '/')
        dir_len--;
}

static bool full(void)
{
    return flag && access(flag, F_OK) == 0;
}

static bool under_dir(const char *path)
{
    return !strncmp(path, dir, dir_len) && (path[dir_len] == '/' || path[dir_len] == 0);
}

/* is fd a regular file under the folder (while the disk is full)? */
static bool fd_on_disk(int fd)
{
    struct stat sb;
    if (!full() || fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return false;
    char link[64], path[PATH_MAX + 1];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return false;
    path[n] = 0;
    return under_dir(path);
}

/* a write of n bytes at offset (or the file's position, -1) that needs no
 * new block (it overwrites what the file has) still succeeds: only growth
 * fails, as on a full file system */
static bool grows(int fd, off_t offset, size_t n)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return true;
    if (offset < 0)
        offset = lseek(fd, 0, SEEK_CUR);
    return offset < 0 || offset + (off_t)n > sb.st_size;
}

static int enospc(void)
{
    errno = ENOSPC;
    return -1;
}

ssize_t write(int fd, const void *p, size_t n)
{
    if (n && fd_on_disk(fd) && grows(fd, -1, n))
        return enospc();
    return real_write(fd, p, n);
}

ssize_t pwrite(int fd, const void *p, size_t n, off_t o)
{
    if (n && fd_on_disk(fd) && grows(fd, o, n))
        return enospc();
    return real_pwrite(fd, p, n, o);
}

ssize_t pwrite64(int fd, const void *p, size_t n, off_t o)
{
    if (n && fd_on_disk(fd) && grows(fd, o, n))
        return enospc();
    return real_pwrite64(fd, p, n, o);
}

ssize_t writev(int fd, const struct iovec *v, int k)
{
    size_t n = 0;
    for (int i = 0; i < k; i++)
        n += v[i].iov_len;
    if (n && fd_on_disk(fd) && grows(fd, -1, n))
        return enospc();
    return real_writev(fd, v, k);
}

static bool truncate_grows(int fd, off_t len)
{
    struct stat sb;
    return fd_on_disk(fd) && fstat(fd, &sb) == 0 && len > sb.st_size;
}

int ftruncate(int fd, off_t len)
{
    return truncate_grows(fd, len) ? enospc() : real_ftruncate(fd, len);
}

int ftruncate64(int fd, off_t len)
{
    return truncate_grows(fd, len) ? enospc() : real_ftruncate64(fd, len);
}

int fallocate(int fd, int mode, off_t o, off_t len)
{
    return fd_on_disk(fd) ? enospc() : real_fallocate(fd, mode, o, len);
}

int posix_fallocate(int fd, off_t o, off_t len)
{
    return fd_on_disk(fd) ? ENOSPC : real_posix_fallocate(fd, o, len);
}

/* room again when a file there is removed (KVCHAT_FAULT_FREES=1) */
static void freed(const char *path, int rc)
{
    char abs[PATH_MAX + 1];
    if (rc == 0 && frees && full() && realpath(".", abs) && (path[0] == '/' || strlen(abs) + strlen(path) + 2 < sizeof abs)) {
        if (path[0] != '/') {
            strcat(abs, "/");
            strcat(abs, path);
            path = abs;
        }
        if (under_dir(path))
            real_unlink(flag);
    }
}

int unlink(const char *path)
{
    int rc = real_unlink(path);
    freed(path, rc);
    return rc;
}

int unlinkat(int dfd, const char *path, int flags)
{
    int rc = real_unlinkat(dfd, path, flags);
    if (dfd == AT_FDCWD || path[0] == '/')
        freed(path, rc);
    return rc;
}

static void no_room(struct statvfs *v)
{
    v->f_bfree = v->f_bavail = 0;
}

int statvfs(const char *path, struct statvfs *v)
{
    int rc = real_statvfs(path, v);
    char abs[PATH_MAX + 1];
    if (rc == 0 && statvfs_lies && full() && realpath(path, abs) && under_dir(abs))
        no_room(v);
    return rc;
}

int fstatvfs(int fd, struct statvfs *v)
{
    int rc = real_fstatvfs(fd, v);
    if (rc == 0 && statvfs_lies && fd_on_disk(fd))
        no_room(v);
    return rc;
}
