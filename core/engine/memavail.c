/*
 * memavail.c - the memory a new allocation can count on, so that a context
 * whose KV cache cannot fit is refused with the numbers instead of being
 * faulted in (MADV_POPULATE_WRITE) until the OOM killer ends the process.
 *
 * The figure is the least of: MemAvailable (/proc/meminfo: free memory
 * plus what the kernel can reclaim without swapping), and for each cgroup
 * the process is in and each of its ancestors up to the root, its limit
 * minus its usage (cgroup v2: memory.max - memory.current; v1:
 * memory.limit_in_bytes - memory.usage_in_bytes). Files that are absent or
 * unreadable (no cgroup file system, "max", v1's "unlimited" figure) impose
 * no limit. Every file is small and read with a bound.
 */
#include "core/engine/memavail.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* up to size-1 bytes of a small file, NUL-ended: its length, or -1 */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    return (ssize_t)n;
}

/* an unsigned decimal at the start of a file (a limit or a usage); false for "max" or none */
static bool read_u64(const char *path, uint64_t *v)
{
    char buf[64];
    if (read_small(path, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9')
        return false;
    char *end;
    unsigned long long x = strtoull(buf, &end, 10);
    *v = (uint64_t)x;
    return true;
}

/* lower *best to limit - usage of the cgroup directory dir, if it has both */
static void cgroup_dir(const char *dir, const char *limit_file, const char *usage_file, uint64_t *best,
                       bool *found, char *what, size_t what_size, const char *label)
{
    char p[4200];
    uint64_t limit, usage;
    snprintf(p, sizeof p, "%s/%s", dir, limit_file);
    if (!read_u64(p, &limit) || limit >= ((uint64_t)1 << 60)) /* v1's "no limit" is near 2^63 */
        return;
    snprintf(p, sizeof p, "%s/%s", dir, usage_file);
    if (!read_u64(p, &usage))
        usage = 0;
    uint64_t left = limit > usage ? limit - usage : 0;
    if (!*found || left < *best) {
        *best = left;
        *found = true;
        snprintf(what, what_size, "%s of cgroup '%s'", label, dir);
    }
}

/* every ancestor of root/rel (rel from /proc/self/cgroup), root itself included */
static void cgroup_walk(const char *root, const char *rel, const char *limit_file, const char *usage_file,
                        uint64_t *best, bool *found, char *what, size_t what_size, const char *label)
{
    char dir[4200];
    if (snprintf(dir, sizeof dir, "%s%s", root, rel) >= (int)sizeof dir)
        return;
    size_t rl = strlen(root);
    for (;;) {
        size_t n = strlen(dir);
        while (n > rl && dir[n - 1] == '/')
            dir[--n] = 0;
        cgroup_dir(dir, limit_file, usage_file, best, found, what, what_size, label);
        char *slash = strrchr(dir, '/');
        if (n <= rl || !slash || (size_t)(slash - dir) < rl)
            break;
        *slash = 0;
    }
}

bool llm_mem_available(uint64_t *bytes, char *what, size_t what_size)
{
    bool found = false;
    uint64_t best = 0;
    char buf[8192];
    if (read_small("/proc/meminfo", buf, sizeof buf) > 0) {
        const char *p = strstr(buf, "MemAvailable:");
        if (p) {
            best = (uint64_t)strtoull(p + 13, NULL, 10) * 1024; /* kB */
            found = true;
            snprintf(what, what_size, "MemAvailable in /proc/meminfo");
        }
    }
    if (read_small("/proc/self/cgroup", buf, sizeof buf) > 0) {
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
            char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (!c2)
                continue;
            *c2 = 0;
            const char *ctrl = c1 + 1, *rel = c2 + 1;
            if (!strcmp(line, "0") && !*ctrl) /* v2 */
                cgroup_walk("/sys/fs/cgroup", rel, "memory.max", "memory.current", &best, &found, what,
                            what_size, "memory.max - memory.current");
            else if (strstr(ctrl, "memory")) { /* v1: the hierarchy may be mounted at its own root */
                cgroup_walk("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes", "memory.usage_in_bytes",
                            &best, &found, what, what_size, "memory.limit_in_bytes - memory.usage_in_bytes");
                cgroup_dir("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", &best,
                           &found, what, what_size, "memory.limit_in_bytes - memory.usage_in_bytes");
            }
        }
    }
    *bytes = best;
    return found;
}
