/*
 * config.c - "key = value" files: the user's config file
 * (${XDG_CONFIG_HOME:-$HOME/.config}/kvchat/config) and the store's
 * sidecars. A line is `key = value` (spaces around '=' optional, the value
 * runs to the end of the line, trailing blanks dropped); '#' at the start
 * of a line makes a comment; later lines win. Writing keeps every line it
 * does not change, comments included, and replaces the file atomically
 * (write a temporary file, fsync, rename).
 *
 * A file is read whole, at most KVFILE_MAX bytes, and only if it is a
 * regular file: it is opened non-blocking and checked with fstat first, so
 * a FIFO, /dev/zero or /dev/urandom in its place is an error at once, not
 * a read that never ends. Lines have no length limit (a line is never
 * split, so a comment's tail cannot take effect).
 */
#include "core/llm.h" /* core/base */
#include "models/kvfile.h"
#include "models/mdl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* if line is "key = value", point at key and value (NUL-terminated in line) */
static int split_line(char *line, char **key, char **value)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
        line[--n] = 0;
    char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '#' || !*p)
        return 0;
    char *eq = strchr(p, '=');
    if (!eq)
        return 0;
    char *ke = eq;
    while (ke > p && (ke[-1] == ' ' || ke[-1] == '\t'))
        ke--;
    *ke = 0;
    char *v = eq + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    *key = p;
    *value = v;
    return **key != 0;
}

#define KVFILE_MAX (1u << 20)

int kvfile_read(const char *path, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > KVFILE_MAX) {
        int e = fstat(fd, &st) ? errno : !S_ISREG(st.st_mode) ? (S_ISDIR(st.st_mode) ? EISDIR : EINVAL) : EFBIG;
        close(fd);
        errno = e;
        return -1;
    }
    char *buf = malloc(KVFILE_MAX + 1);
    size_t n = 0;
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    for (;;) { /* bounded: a file that grows while read stops at the bound */
        ssize_t r = read(fd, buf + n, KVFILE_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > KVFILE_MAX) {
            free(buf);
            close(fd);
            errno = EFBIG;
            return -1;
        }
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 1;
}

/* the next line of buf[*pos..len) (its '\n' dropped), NUL-terminated in
 * place; NULL at the end */
static char *next_line(char *buf, size_t len, size_t *pos)
{
    if (*pos >= len)
        return NULL;
    char *line = buf + *pos, *nl = memchr(line, '\n', len - *pos);
    if (nl) {
        *nl = 0;
        *pos = (size_t)(nl - buf) + 1;
    } else {
        *pos = len;
    }
    return line;
}

int kvfile_get(const char *path, const char *key, char *buf, size_t size)
{
    char *text;
    size_t len, pos = 0;
    int r = kvfile_read(path, &text, &len);
    if (r <= 0)
        return r;
    int found = 0;
    for (char *line; (line = next_line(text, len, &pos));) {
        char *k, *v;
        if (split_line(line, &k, &v) && !strcmp(k, key)) {
            snprintf(buf, size, "%s", v);
            found = 1;
        }
    }
    free(text);
    return found;
}

int kvfile_write_text(const char *path, const struct base_buf *text, char *err, size_t err_size)
{
    char *tmp = base_strdup_printf("%s.tmp.%ld", path, (long)getpid());
    int rc = base_write_file_atomic(path, text->s ? text->s : "", text->len, 0666);
    if (rc == BASE_ATOMIC_RENAME)
        snprintf(err, err_size, "cannot rename '%s' to '%s': %s", tmp ? tmp : path, path, strerror(errno));
    else if (rc == BASE_ATOMIC_WRITE)
        snprintf(err, err_size, "cannot write '%s': %s", tmp ? tmp : path, strerror(errno));
    free(tmp);
    return rc == 0 || rc == BASE_ATOMIC_DIR_SYNC ? 0 : -1; /* in place: its directory's sync is extra care */
}

/* out replaces path unless building it ran out of memory; out freed: 0 or -1 */
static int write_out(const char *path, struct base_buf *out, bool oom, char *err, size_t err_size)
{
    int rc = -1;
    if (oom)
        snprintf(err, err_size, "out of memory");
    else
        rc = kvfile_write_text(path, out, err, err_size);
    base_buf_free(out);
    return rc;
}

int kvfile_set(const char *path, const char *key, const char *value, char *err, size_t err_size)
{
    if (base_mkdir_parents(path, 0755)) {
        snprintf(err, err_size, "cannot create the directory of '%s': %s", path, strerror(errno));
        return -1;
    }
    char *text;
    size_t len, pos = 0;
    if (kvfile_read(path, &text, &len) < 0) {
        snprintf(err, err_size, "cannot read '%s': %s", path,
                 errno == EINVAL ? "not a regular file" : errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
        return -1;
    }
    struct base_buf out = {0};
    bool done = false, oom = false;
    for (char *line; text && (line = next_line(text, len, &pos));) {
        char *k, *v, *copy = strdup(line);
        if (!copy) {
            oom = true;
            break;
        }
        bool match = split_line(copy, &k, &v) && !strcmp(k, key);
        free(copy);
        if (match) {
            if (value && !done)
                oom |= base_buf_printf(&out, "%s = %s\n", key, value) != 0;
            done = true;
            continue;
        }
        oom |= base_buf_printf(&out, "%s\n", line) != 0;
    }
    free(text);
    if (value && !done)
        oom |= base_buf_printf(&out, "%s = %s\n", key, value) != 0;
    return write_out(path, &out, oom, err, err_size);
}

int kvfile_replace(const char *path, const char *const *kv, size_t n, char *err, size_t err_size)
{
    struct base_buf out = {0};
    bool oom = false;
    for (size_t i = 0; i + 1 < 2 * n; i += 2)
        if (kv[i + 1])
            oom |= base_buf_printf(&out, "%s = %s\n", kv[i], kv[i + 1]) != 0;
    return write_out(path, &out, oom, err, err_size);
}

int mdl_config_path(char *buf, size_t size)
{
    const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;
    if (x && *x && strlen(x) <= MDL_PATH_VAR_MAX)
        n = snprintf(buf, size, "%s/kvchat/config", x);
    else if (x && *x)
        return -1;
    else if (home && *home && strlen(home) <= MDL_PATH_VAR_MAX)
        n = snprintf(buf, size, "%s/.config/kvchat/config", home);
    else
        return -1;
    return n > 0 && (size_t)n < size ? 0 : -1;
}

int mdl_config_get(const char *key, char *buf, size_t size)
{
    char path[4096];
    if (mdl_config_path(path, sizeof path))
        return 0;
    return kvfile_get(path, key, buf, size);
}

int mdl_config_unknown(const char *const *known, char *buf, size_t size)
{
    char path[4096], *text;
    size_t len, pos = 0;
    if (mdl_config_path(path, sizeof path))
        return 0;
    int r = kvfile_read(path, &text, &len), line_no = 0, found = 0;
    if (r <= 0)
        return r;
    for (char *line; !found && (line = next_line(text, len, &pos));) {
        char *k, *v;
        line_no++;
        if (!split_line(line, &k, &v))
            continue;
        found = 1;
        for (const char *const *q = known; *q && found; q++)
            found = strcmp(*q, k) != 0;
        if (found)
            snprintf(buf, size, "%.200s' (line %d", k, line_no);
    }
    free(text);
    return found;
}

int mdl_config_set(const char *key, const char *value, char *err, size_t err_size)
{
    char path[4096];
    if (mdl_config_path(path, sizeof path)) {
        snprintf(err, err_size, "cannot find the config file: neither XDG_CONFIG_HOME nor HOME is set");
        return MDL_ERR_FILE;
    }
    return kvfile_set(path, key, value, err, err_size) ? MDL_ERR_FILE : 0;
}

int mdl_default_model(char *buf, size_t size, const char **what)
{
    const char *env = getenv("KVCHAT_MODEL");
    if (env && *env) {
        snprintf(buf, size, "%s", env);
        *what = "KVCHAT_MODEL";
        return 1;
    }
    *what = "the config file";
    return mdl_config_get("model", buf, size) > 0 && buf[0] ? 1 : 0;
}
