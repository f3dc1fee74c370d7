/*
 * config.c - "key = value" files: the user's config file
 * (${XDG_CONFIG_HOME:-$HOME/.config}/kvchat/config) and the store's
 * sidecars. A line is `key = value` (spaces around '=' optional, the value
 * runs to the end of the line, trailing blanks dropped); '#' at the start
 * of a line makes a comment; later lines win. Writing keeps every line it
 * does not change, comments included, and replaces the file atomically
 * (write a temporary file, fsync, rename).
 */
#include "models/kvfile.h"
#include "models/mdl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mkdir_parents(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return -1;
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp)
        return 0;
    *slash = 0;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        return -1;
    return 0;
}

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

int kvfile_get(const char *path, const char *key, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char *k, *v;
        if (split_line(line, &k, &v) && !strcmp(k, key)) {
            snprintf(buf, size, "%s", v);
            found = 1;
        }
    }
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : found;
}

int kvfile_set(const char *path, const char *key, const char *value, char *err, size_t err_size)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (mkdir_parents(path)) {
        snprintf(err, err_size, "cannot create the directory of '%s': %s", path, strerror(errno));
        return -1;
    }
    FILE *in = fopen(path, "r");
    if (!in && errno != ENOENT) {
        snprintf(err, err_size, "cannot read '%s': %s", path, strerror(errno));
        return -1;
    }
    FILE *out = fopen(tmp, "w");
    if (!out) {
        snprintf(err, err_size, "cannot write '%s': %s", tmp, strerror(errno));
        if (in)
            fclose(in);
        return -1;
    }
    bool done = false;
    char line[8192], copy[8192];
    while (in && fgets(line, sizeof line, in)) {
        char *k, *v;
        memcpy(copy, line, sizeof line);
        if (split_line(copy, &k, &v) && !strcmp(k, key)) {
            if (value && !done)
                fprintf(out, "%s = %s\n", key, value);
            done = true;
            continue;
        }
        fputs(line, out);
        if (line[0] && line[strlen(line) - 1] != '\n')
            fputc('\n', out);
    }
    if (value && !done)
        fprintf(out, "%s = %s\n", key, value);
    if (in)
        fclose(in);
    if (fflush(out) || fsync(fileno(out)) || fclose(out)) {
        snprintf(err, err_size, "cannot write '%s': %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        snprintf(err, err_size, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
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
