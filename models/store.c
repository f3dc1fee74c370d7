/*
 * store.c - the model store: the kvchat home directory, the mapping from a
 * model name to its file (a GGUF model, or a remote model's entry),
 * listing (with what each GGUF header says) and removal. A name never
 * escapes the store: names with '/' are taken as paths, not looked up, and
 * store names are checked by mdl_name_valid.
 */
#include "core/llm.h"
#include "models/kvfile.h"
#include "models/mdl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* a path variable's value: NULL if unset (or empty, except KVCHAT_HOME) */
static const char *path_var(const char *name)
{
    const char *v = getenv(name);
    return v && (*v || !strcmp(name, "KVCHAT_HOME")) ? v : NULL;
}

int mdl_env_check(char *err, size_t err_size)
{
    static const char *const vars[] = {"KVCHAT_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
                                       "XDG_STATE_HOME", "HOME"};
    const char *h = path_var("KVCHAT_HOME");
    if (h && !*h) {
        snprintf(err, err_size, "KVCHAT_HOME is set but empty: unset it to use the default "
                                "(${XDG_DATA_HOME:-$HOME/.local/share}/kvchat), or name a directory");
        return -1;
    }
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = path_var(vars[i]);
        if (v && strlen(v) > MDL_PATH_VAR_MAX) {
            snprintf(err, err_size, "%s is too long: %zu bytes, more than the %d kvchat takes", vars[i],
                     strlen(v), MDL_PATH_VAR_MAX);
            return -1;
        }
    }
    return 0;
}

int mdl_home(char *buf, size_t size)
{
    const char *h = path_var("KVCHAT_HOME"), *x = path_var("XDG_DATA_HOME"), *home = path_var("HOME");
    const char *from = h ? h : x ? x : home;
    if (!from || !*from || strlen(from) > MDL_PATH_VAR_MAX)
        return -1;
    int n;
    if (h)
        n = snprintf(buf, size, "%s", h);
    else if (x)
        n = snprintf(buf, size, "%s/kvchat", x);
    else
        n = snprintf(buf, size, "%s/.local/share/kvchat", home);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* a store entry: a file, or a symbolic link (models add) even if its
 * target is gone, so that it can be listed and removed */
static int is_entry(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode));
}

int mdl_resolve(const char *arg, char **path)
{
    char home[4096];
    if (!is_file(arg) && !strchr(arg, '/') && arg[0] && mdl_home(home, sizeof home) == 0) {
        static const char *const suffixes[] = {"", ".gguf", ".remote"};
        for (size_t i = 0; i < 3; i++) {
            char *p = base_strdup_printf("%s/models/%s%s", home, arg, suffixes[i]);
            if (p && is_file(p)) {
                *path = p;
                return 0;
            }
            free(p);
        }
    }
    *path = strdup(arg);
    return *path && is_file(arg) ? 0 : -1;
}

bool mdl_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128 || name[0] == '.' || name[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("._:+-", c)))
            return false;
    }
    return true;
}

/* NAME from a file name: the basename without .gguf, made valid */
void name_from_file(const char *file, char *name, size_t size)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t n = strcspn(b, "?#");
    if (n >= 5 && !strncasecmp(b + n - 5, ".gguf", 5))
        n -= 5;
    if (n >= size)
        n = size - 1;
    for (size_t i = 0; i < n; i++) {
        char ch = b[i];
        name[i] = (isalnum((unsigned char)ch) || strchr("._:+-", ch)) ? ch : '-';
    }
    name[n] = 0;
    while (name[0] == '.' || name[0] == '-')
        memmove(name, name + 1, strlen(name));
}

/* $KVCHAT_HOME/models/NAME + suffix */
static int store_file(const char *name, const char *suffix, char *buf, size_t size)
{
    char home[4096];
    if (!mdl_name_valid(name) || mdl_home(home, sizeof home))
        return MDL_ERR_USAGE;
    int n = snprintf(buf, size, "%s/models/%s%s", home, name, suffix);
    return n > 0 && (size_t)n < size ? 0 : MDL_ERR_USAGE;
}

int mdl_store_path(const char *name, char *buf, size_t size)
{
    return store_file(name, ".gguf", buf, size);
}

/* fill e from the file at e->path and the sidecar next to it */
static void fill_entry(struct mdl_entry *e)
{
    struct stat st;
    char err[256], meta[4200], v[512];
    e->size = stat(e->path, &st) == 0 ? (uint64_t)st.st_size : 0;
    e->n_params = -1;
    e->pulled = -1;
    struct llm_gguf *g;
    char target[4096];
    ssize_t tl;
    if (!is_file(e->path) && (tl = readlink(e->path, target, sizeof target - 1)) > 0) {
        target[tl] = 0;
        snprintf(e->error, sizeof e->error, "a link to '%.200s', which is gone", target);
    } else if (llm_gguf_open(e->path, &g, err, sizeof err) == 0) {
        struct llm_model_meta m;
        if (llm_model_meta_read(g, &m, err, sizeof err) == 0) {
            snprintf(e->arch, sizeof e->arch, "%s", m.arch);
            e->n_params = m.n_params;
            if (m.file_type >= 0) {
                /* the name files and hubs use: Q4_K_M for llama.cpp's "Q4_K - Medium" */
                const char *q = llm_file_type_name(m.file_type);
                snprintf(e->quant, sizeof e->quant, "%s", strncmp(q, "all ", 4) ? q : q + 4);
                static const char *const sizes[][2] = {{" - Small", "_S"}, {" - Medium", "_M"},
                                                       {" - Large", "_L"}, {" MoE", "_MOE"}};
                for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                    char *at = strstr(e->quant, sizes[k][0]);
                    if (at)
                        memmove(at, sizes[k][1], strlen(sizes[k][1]) + 1);
                }
            }
        } else {
            snprintf(e->error, sizeof e->error, "%s", err);
        }
        llm_gguf_close(g);
    } else {
        snprintf(e->error, sizeof e->error, "%s", err);
    }
    if (store_file(e->name, ".meta", meta, sizeof meta) == 0) {
        if (kvfile_get(meta, "source", v, sizeof v) > 0)
            snprintf(e->source, sizeof e->source, "%s", v);
        if (kvfile_get(meta, "sha256", v, sizeof v) > 0 && strlen(v) == 64)
            snprintf(e->sha256, sizeof e->sha256, "%s", v);
        if (kvfile_get(meta, "pulled", v, sizeof v) > 0)
            e->pulled = strtoll(v, NULL, 10);
    }
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct mdl_entry *)a)->name, ((const struct mdl_entry *)b)->name);
}

static int list_store(struct mdl_entry **out, size_t *n, bool headers, char *err, size_t err_size);

void mdl_entry_free(struct mdl_entry *e)
{
    free(e->path);
    e->path = NULL;
}

void mdl_list_free(struct mdl_entry *es, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mdl_entry_free(&es[i]);
    free(es);
}

int mdl_list(struct mdl_entry **out, size_t *n, char *err, size_t err_size)
{
    return list_store(out, n, true, err, err_size);
}

int mdl_list_names(struct mdl_entry **out, size_t *n, char *err, size_t err_size)
{
    return list_store(out, n, false, err, err_size);
}

static int list_store(struct mdl_entry **out, size_t *n, bool headers, char *err, size_t err_size)
{
    char home[4096], dir[4200];
    *out = NULL;
    *n = 0;
    if (mdl_home(home, sizeof home)) {
        snprintf(err, err_size, "cannot find the kvchat home: set KVCHAT_HOME or HOME");
        return MDL_ERR_FILE;
    }
    snprintf(dir, sizeof dir, "%s/models", home);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, err_size, "cannot read '%s': %s", dir, strerror(errno));
        return MDL_ERR_FILE;
    }
    struct dirent *de;
    size_t cap = 0;
    while ((de = readdir(d))) {
        size_t L = strlen(de->d_name), sl;
        bool remote = false;
        if (L > 5 && !strcmp(de->d_name + L - 5, ".gguf"))
            sl = 5;
        else if (L > 7 && !strcmp(de->d_name + L - 7, ".remote"))
            sl = 7, remote = true;
        else
            continue;
        char name[160];
        if (L - sl >= sizeof name)
            continue;
        memcpy(name, de->d_name, L - sl);
        name[L - sl] = 0;
        if (!mdl_name_valid(name))
            continue;
        char *path = base_path_join(dir, de->d_name);
        if (!path || base_grow((void **)out, &cap, *n + 1, sizeof **out)) {
            free(path);
            closedir(d);
            mdl_list_free(*out, *n);
            *out = NULL;
            *n = 0;
            snprintf(err, err_size, "out of memory");
            return MDL_ERR_FILE;
        }
        struct mdl_entry *e = &(*out)[(*n)++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", name);
        e->path = path;
        e->remote = remote;
        if (!headers)
            continue;
        if (remote)
            mdl_remote_fill_entry(e);
        else
            fill_entry(e);
    }
    closedir(d);
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_entry);
    return 0;
}

int mdl_stat(const char *name, struct mdl_entry *e, char *err, size_t err_size)
{
    memset(e, 0, sizeof *e);
    if (!mdl_name_valid(name)) {
        snprintf(err, err_size, "'%s' is not a valid model name", name);
        return MDL_ERR_USAGE;
    }
    char path[4200];
    if (store_file(name, ".gguf", path, sizeof path)) {
        snprintf(err, err_size, "cannot find the kvchat home: set KVCHAT_HOME or HOME");
        return MDL_ERR_FILE;
    }
    bool local = is_entry(path);
    if (!local && (store_file(name, ".remote", path, sizeof path) || !is_file(path))) {
        snprintf(err, err_size, "no model '%s' in the store", name);
        return MDL_ERR_NOT_FOUND;
    }
    if (!(e->path = strdup(path))) {
        snprintf(err, err_size, "out of memory");
        return MDL_ERR_FILE;
    }
    snprintf(e->name, sizeof e->name, "%s", name);
    if (local)
        fill_entry(e);
    else
        mdl_remote_fill_entry(e);
    return 0;
}

static int rm_stat(const char *name, bool force, mdl_in_use_fn in_use, void *ctx, const struct mdl_entry *e,
                   char *err, size_t err_size)
{
    char part[4200], partmeta[4200], meta[4200];
    if (in_use && !force && e->path) {
        char who[256] = "";
        int u = in_use(ctx, name, e->path, who, sizeof who);
        if (u > 0) {
            snprintf(err, err_size, "model '%s' is used by %s (use --force to remove it anyway)",
                     name, who[0] ? who : "a session");
            return MDL_ERR_IN_USE;
        }
        if (u < 0) {
            snprintf(err, err_size, "cannot tell whether a session uses model '%s': %s (use --force)",
                     name, who);
            return MDL_ERR_IN_USE;
        }
    }
    store_file(name, ".part", part, sizeof part);
    store_file(name, ".meta", meta, sizeof meta);
    store_file(name, ".part.meta", partmeta, sizeof partmeta);
    if (e->path && is_entry(e->path) && unlink(e->path)) {
        snprintf(err, err_size, "cannot remove '%s': %s", e->path, strerror(errno));
        return MDL_ERR_FILE;
    }
    unlink(meta);
    unlink(part);
    unlink(partmeta);
    return 0;
}

int mdl_rm(const char *name, bool force, mdl_in_use_fn in_use, void *ctx, char *err,
           size_t err_size)
{
    struct mdl_entry e;
    char part[4200];
    int rc = mdl_stat(name, &e, err, err_size);
    bool have_part = store_file(name, ".part", part, sizeof part) == 0 && is_file(part);
    if (rc == MDL_ERR_NOT_FOUND && have_part)
        rc = 0; /* only a partial download: remove it */
    if (!rc)
        rc = rm_stat(name, force, in_use, ctx, &e, err, err_size);
    mdl_entry_free(&e);
    return rc;
}
