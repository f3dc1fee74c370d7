/*
 * add.c - `models add FILE`: put a GGUF file that is already on disk into
 * the store, for people who have one (offline, or from another tool).
 *
 * The file is checked first (a GGUF whose header, metadata and tensor table
 * parse, with a model architecture), then entered as models/NAME.gguf: a
 * hard link where the file system allows one (no copy, no second file to
 * keep in step, and the store entry survives the original being moved or
 * deleted), else a symbolic link to its absolute path, or with copy a copy.
 *
 * Invariants: models/NAME.gguf appears only by link(2) or rename(2) of a
 * finished entry made under a hidden temporary name (.NAME.add-PID.tmp,
 * which mdl_list never shows, since store names cannot start with '.'), so
 * an interrupted add leaves no half entry; without force an existing entry
 * is never replaced (link(2) refuses, atomically). The user's file is never
 * changed, moved or removed.
 *
 * Adds are serialized by an flock(2) on models/.add.lock (one file for the
 * store, so no lock file per name is left behind), held from the check for
 * an existing entry until the sidecar is in place, so two concurrent
 * `add --force` of one name leave one file's .gguf with that file's .meta. The sidecar is written whole and renamed into place (one
 * step: a kill leaves the old one or the new). Leftovers of adds that were
 * killed (.NAME.add-PID.tmp, NAME.meta.tmp.PID, of processes that are
 * gone) are removed by the next add.
 */
#include "core/llm.h"
#include "models/kvfile.h"
#include "models/mdl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *mdl_add_how_name(enum mdl_add_how how)
{
    switch (how) {
    case MDL_ADD_LINK: return "hard link";
    case MDL_ADD_SYMLINK: return "symbolic link";
    case MDL_ADD_COPY: return "copy";
    }
    return "?";
}

/* copy src to the new file dst (fsync'd): 0, or an mdl_err with err set */
static int copy_file(const char *src, const char *dst, const volatile sig_atomic_t *cancel, char *err,
                     size_t err_size)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, err_size, "cannot read '%s': %s", src, strerror(errno));
        return MDL_ERR_FILE;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        snprintf(err, err_size, "cannot create '%s': %s", dst, strerror(errno));
        close(in);
        return MDL_ERR_FILE;
    }
    int rc = 0;
    char *buf = malloc(1 << 20);
    if (!buf) {
        snprintf(err, err_size, "out of memory");
        rc = MDL_ERR_FILE;
    }
    while (!rc) {
        if (cancel && *cancel) {
            snprintf(err, err_size, "interrupted");
            rc = MDL_ERR_INTERRUPTED;
            break;
        }
        ssize_t k = read(in, buf, 1 << 20);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            snprintf(err, err_size, "cannot read '%s': %s", src, strerror(errno));
            rc = MDL_ERR_FILE;
            break;
        }
        if (k == 0)
            break;
        for (ssize_t off = 0; off < k;) {
            ssize_t w = write(out, buf + off, (size_t)(k - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                snprintf(err, err_size, "cannot write '%s': %s", dst, w < 0 ? strerror(errno) : "no space");
                rc = MDL_ERR_FILE;
                break;
            }
            off += w;
        }
    }
    free(buf);
    if (!rc && fsync(out)) {
        snprintf(err, err_size, "cannot write '%s': %s", dst, strerror(errno));
        rc = MDL_ERR_FILE;
    }
    if (close(out) && !rc) {
        snprintf(err, err_size, "cannot write '%s': %s", dst, strerror(errno));
        rc = MDL_ERR_FILE;
    }
    close(in);
    return rc;
}

/* is file a GGUF model? 0, or MDL_ERR_FILE with the reason */
static int check_gguf(const char *file, char *err, size_t err_size)
{
    struct llm_gguf *g;
    struct llm_model_meta m;
    char why[512];
    if (llm_gguf_open(file, &g, why, sizeof why)) {
        snprintf(err, err_size, "cannot add '%s': %s", file, why);
        return MDL_ERR_FILE;
    }
    int rc = llm_model_meta_read(g, &m, why, sizeof why);
    llm_gguf_close(g);
    if (rc) {
        snprintf(err, err_size, "cannot add '%s': %s", file, why);
        return MDL_ERR_FILE;
    }
    if (!m.arch[0]) {
        snprintf(err, err_size, "cannot add '%s': a GGUF file without a model (no general.architecture)", file);
        return MDL_ERR_FILE;
    }
    return 0;
}

/* the pid in a temporary name after marker ("add-" or "tmp."), if that process is gone */
static bool dead_writer(const char *name, const char *marker)
{
    const char *t = strstr(name, marker);
    if (!t)
        return false;
    char *end;
    long pid = strtol(t + strlen(marker), &end, 10);
    return pid > 0 && (end[0] == 0 || !strcmp(end, ".tmp")) && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* leftovers of adds (and sidecar writes) killed in the store's directory dir */
static void remove_leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        bool add_tmp = n[0] == '.' && len > 4 && !strcmp(n + len - 4, ".tmp") && dead_writer(n, ".add-");
        bool meta_tmp = strstr(n, ".meta.tmp.") && dead_writer(n, ".meta.tmp.");
        if (add_tmp || meta_tmp) {
            char path[4400];
            if (snprintf(path, sizeof path, "%s/%s", dir, n) < (int)sizeof path)
                unlink(path);
        }
    }
    closedir(d);
}

/* the store's add lock (models/.add.lock), held until close: fd, or -1 */
static int lock_adds(const char *dir, char *err, size_t err_size)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/.add.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, err_size, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    int r;
    while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    if (r) {
        snprintf(err, err_size, "cannot lock '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int add_locked(const char *file, const struct mdl_add_params *p, struct mdl_add_result *res,
                      const struct stat *stp, const char *name, char *err, size_t err_size);

void mdl_add_result_free(struct mdl_add_result *res)
{
    free(res->path);
    free(res->target);
    res->path = res->target = NULL;
}

int mdl_add(const char *file, const struct mdl_add_params *p, struct mdl_add_result *res, char *err,
            size_t err_size)
{
    struct stat st;
    memset(res, 0, sizeof *res);
    if (stat(file, &st)) {
        snprintf(err, err_size, "cannot add '%s': %s", file, strerror(errno));
        return MDL_ERR_FILE;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, err_size, "cannot add '%s': %s", file,
                 S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
        return MDL_ERR_FILE;
    }
    int rc = check_gguf(file, err, err_size);
    if (rc)
        return rc;
    char name[160];
    if (p->name)
        snprintf(name, sizeof name, "%s", p->name);
    else
        name_from_file(file, name, sizeof name);
    if (!mdl_name_valid(name)) {
        if (p->name)
            snprintf(err, err_size, "'%s' is not a valid model name (letters, digits and ._:+- only)", p->name);
        else
            snprintf(err, err_size, "cannot make a model name from '%s'; give one with --name", file);
        return MDL_ERR_USAGE;
    }
    char store[4096];
    if (mdl_store_path(name, store, sizeof store)) {
        snprintf(err, err_size, "cannot find the kvchat home: set KVCHAT_HOME or HOME");
        return MDL_ERR_FILE;
    }
    if (base_mkdir_parents(store, 0755)) {
        snprintf(err, err_size, "cannot create the directory of '%s': %s", store, strerror(errno));
        return MDL_ERR_FILE;
    }
    *strrchr(store, '/') = 0;
    int lock = lock_adds(store, err, err_size);
    if (lock < 0)
        return MDL_ERR_FILE;
    remove_leftovers(store);
    rc = add_locked(file, p, res, &st, name, err, err_size);
    close(lock);
    return rc;
}

static int add_locked(const char *file, const struct mdl_add_params *p, struct mdl_add_result *res,
                      const struct stat *stp, const char *name, char *err, size_t err_size)
{
    struct stat st = *stp, dst;
    int rc = 0;
    char abs[PATH_MAX], dest[4096], tmp[4300], sidecar[4200];
    if (!realpath(file, abs)) {
        snprintf(err, err_size, "cannot add '%s': %s", file, strerror(errno));
        return MDL_ERR_FILE;
    }
    if (mdl_store_path(name, dest, sizeof dest)) {
        snprintf(err, err_size, "cannot find the kvchat home: set KVCHAT_HOME or HOME");
        return MDL_ERR_FILE;
    }
    snprintf(res->name, sizeof res->name, "%s", name);
    if (!(res->path = strdup(dest)) || !(res->target = strdup(abs))) {
        snprintf(err, err_size, "out of memory");
        return MDL_ERR_FILE;
    }
    res->size = (uint64_t)st.st_size;
    bool exists = lstat(dest, &dst) == 0;
    if (exists && stat(dest, &dst) == 0 && dst.st_dev == st.st_dev && dst.st_ino == st.st_ino) {
        res->already = true; /* that very file is the store's NAME already */
        return 0;
    }
    if (exists && !p->force) {
        snprintf(err, err_size, "model '%s' is already in the store (--force replaces it; --name NAME "
                                "adds the file under another name)", name);
        return MDL_ERR_USAGE;
    }
    if (base_mkdir_parents(dest, 0755)) {
        snprintf(err, err_size, "cannot create the directory of '%s': %s", dest, strerror(errno));
        return MDL_ERR_FILE;
    }

    /* the entry, under a hidden name first */
    const char *slash = strrchr(dest, '/');
    snprintf(tmp, sizeof tmp, "%.*s/.%s.add-%ld.tmp", (int)(slash - dest), dest, name, (long)getpid());
    unlink(tmp);
    if (p->copy) {
        res->how = MDL_ADD_COPY;
        rc = copy_file(abs, tmp, p->cancel, err, err_size);
    } else if (!p->symlink && link(abs, tmp) == 0) {
        res->how = MDL_ADD_LINK;
    } else if (p->symlink || errno == EXDEV || errno == EPERM || errno == EMLINK || errno == ENOTSUP ||
               errno == EOPNOTSUPP) {
        /* another file system, or links refused (protected_hardlinks) */
        res->how = MDL_ADD_SYMLINK;
        if (symlink(abs, tmp)) {
            snprintf(err, err_size, "cannot link '%s' into the store: %s", abs, strerror(errno));
            rc = MDL_ERR_FILE;
        }
    } else {
        snprintf(err, err_size, "cannot link '%s' into the store: %s", abs, strerror(errno));
        rc = MDL_ERR_FILE;
    }
    if (rc) {
        unlink(tmp);
        return rc;
    }
    /* into place: without force, link(2) never replaces an entry that
     * appeared meanwhile (it links the symbolic link itself, not its target) */
    if (p->force ? rename(tmp, dest) : link(tmp, dest)) {
        int e = errno;
        if (e == EEXIST)
            snprintf(err, err_size, "model '%s' appeared in the store meanwhile", name);
        else
            snprintf(err, err_size, "cannot put '%s' into the store: %s", name, strerror(e));
        unlink(tmp);
        return e == EEXIST ? MDL_ERR_USAGE : MDL_ERR_FILE;
    }
    unlink(tmp);
    char dir[4200];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - dest), dest);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }

    /* the sidecar: where it came from and how it is held */
    char num[32], szs[32], merr[256];
    snprintf(sidecar, sizeof sidecar, "%.*s.meta", (int)(strlen(dest) - 5), dest);
    snprintf(num, sizeof num, "%lld", (long long)time(NULL));
    snprintf(szs, sizeof szs, "%lld", (long long)st.st_size);
    const char *kv[] = {"source", abs, "added",
                        res->how == MDL_ADD_LINK ? "link" : res->how == MDL_ADD_SYMLINK ? "symlink" : "copy",
                        "size", szs, "pulled", num};
    if (kvfile_replace(sidecar, kv, sizeof kv / sizeof *kv / 2, merr, sizeof merr))
        snprintf(res->warning, sizeof res->warning, "cannot write the model's sidecar: %s", merr);
    return 0;
}
