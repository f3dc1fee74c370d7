/*
 * model.c - the model a command uses: resolved from -m, KVCHAT_MODEL or
 * the config file (a file or a store name), offered for download on the
 * first run; how a model is named to the user; `models pull` with its
 * progress line (shared by `kvchat models pull` and that first run).
 */
#include "cli/cmd.h"
#include "cli/opts.h"
#include "cli/term.h"
#include "models/mdl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

void cmd_fmt_count(char *buf, size_t n, double v)
{
    if (v >= 1e9)
        snprintf(buf, n, "%.2f B", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, n, "%.2f M", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, n, "%.2f K", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
}

void cmd_fmt_size(char *buf, size_t n, double v)
{
    if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else if (v >= 1024.0 * 1024)
        snprintf(buf, n, "%.2f MiB", v / (1024.0 * 1024));
    else if (v >= 1024.0)
        snprintf(buf, n, "%.2f KiB", v / 1024.0);
    else
        snprintf(buf, n, "%.0f bytes", v);
}

/* ==== pulling with progress ==== */

struct pull_ui {
    bool tty;        /* stderr is a terminal: redraw one progress line */
    bool drawn;      /* a progress line is on screen */
    const char *name;
};

static void fmt_eta(char *buf, size_t n, double s)
{
    if (s < 0 || s > 99 * 3600)
        snprintf(buf, n, "--:--");
    else if (s >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else
        snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void pull_progress(void *ctx, const struct mdl_progress *p)
{
    struct pull_ui *ui = ctx;
    if (!ui->tty)
        return;
    char done[32], total[32], rate[32] = "", eta[32] = "--:--", line[512];
    /* the rate needs a moment of data before it means anything */
    double r = p->seconds >= 0.5 ? (double)(p->done - p->resumed) / p->seconds : 0;
    cmd_fmt_size(done, sizeof done, (double)p->done);
    if (r > 0) {
        cmd_fmt_size(rate, sizeof rate, r);
        strcat(rate, "/s");
    }
    int n;
    if (p->total > 0) {
        cmd_fmt_size(total, sizeof total, (double)p->total);
        if (r > 0)
            fmt_eta(eta, sizeof eta, (double)((uint64_t)p->total - p->done) / r);
        int pct = (int)(100.0 * (double)p->done / (double)p->total);
        int bar = pct / 5;
        n = snprintf(line, sizeof line, "%.24s [%.*s%*s] %3d%%  %s / %s  %s  ETA %s", ui->name, bar,
                     "####################", 20 - bar, "", pct, done, total, rate, eta);
    } else {
        n = snprintf(line, sizeof line, "%.24s %s  %s", ui->name, done, rate);
    }
    /* one line: never wider than the terminal, or \r cannot redraw it */
    struct winsize ws;
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && n >= ws.ws_col)
        line[ws.ws_col - 1] = 0;
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    ui->drawn = true;
}

static void pull_note(void *ctx, const char *msg)
{
    struct pull_ui *ui = ctx;
    if (ui->drawn) {
        fputc('\n', stderr);
        ui->drawn = false;
    }
    fprintf(stderr, "kvchat: %s\n", msg);
}

int cmd_mdl_exit(int rc)
{
    switch (rc) {
    case MDL_ERR_USAGE: return CMD_EXIT_USAGE;
    case MDL_ERR_NETWORK:
    case MDL_ERR_VERIFY: return CMD_EXIT_NETWORK;
    case MDL_ERR_INTERRUPTED: return CMD_EXIT_INTERRUPTED;
    default: return CMD_EXIT_MODEL;
    }
}

void cmd_models_first_default(const char *name)
{
    char cur[4096], err[512];
    if (mdl_config_get("model", cur, sizeof cur) == 0 && !getenv("KVCHAT_MODEL")) {
        if (mdl_config_set("model", name, err, sizeof err) == 0)
            fprintf(stderr, "kvchat: '%s' is now the default model\n", name);
    }
}

int cmd_models_pull_ref(const char *ref, const struct mdl_pull_params *given, char *name_out,
                        size_t name_size)
{
    struct mdl_pull_params p = *given;
    const char *label = strrchr(ref, '/');
    struct pull_ui ui = {.tty = isatty(2), .name = label && label[1] ? label + 1 : ref};
    struct mdl_pull_result res;
    char err[1024];
    cmd_interrupts_catch();
    p.cancel = &cmd_interrupted;
    p.progress = pull_progress;
    p.note = pull_note;
    p.ctx = &ui;
    int rc = mdl_pull(ref, &p, &res, err, sizeof err);
    cmd_interrupts_restore();
    if (ui.drawn)
        fputc('\n', stderr);
    if (rc) {
        mdl_pull_result_free(&res);
        return cmd_fail(cmd_mdl_exit(rc), "cannot pull '%s': %s", ref, err);
    }
    if (name_out)
        snprintf(name_out, name_size, "%s", res.name);
    char size[32], rate[32];
    cmd_fmt_size(size, sizeof size, (double)res.size);
    if (res.already) {
        fprintf(stderr, "kvchat: '%s' is already in the store (%s, %s); --force downloads it again\n",
                res.name, size, res.path);
    } else {
        cmd_fmt_size(rate, sizeof rate, res.seconds > 0 ? (double)res.downloaded / res.seconds : 0);
        fprintf(stderr, "kvchat: pulled '%s': %s in %.1f s (%s/s), sha256 %s %s\n", res.name, size,
                res.seconds, rate, res.sha256,
                res.sha256_checked ? "verified" : "(no checksum was published to check against)");
    }
    cmd_models_first_default(res.name);
    mdl_pull_result_free(&res);
    return CMD_EXIT_OK;
}

/* ==== the model for chat and run, and the first run ==== */

const char *cmd_model_shown(const char *path, char *buf, size_t size)
{
    char home[4096];
    if (!path || mdl_home(home, sizeof home))
        return path ? path : "";
    size_t hl = strlen(home), pl = strlen(path);
    static const char *const suffixes[] = {".gguf", ".remote"};
    if (pl > hl + 8 && !strncmp(path, home, hl) && !strncmp(path + hl, "/models/", 8))
        for (size_t i = 0; i < 2; i++) {
            size_t sl = strlen(suffixes[i]);
            const char *name = path + hl + 8;
            size_t nl = pl - hl - 8;
            if (nl > sl && !strcmp(name + nl - sl, suffixes[i]) && !memchr(name, '/', nl) && nl - sl < size) {
                snprintf(buf, size, "%.*s", (int)(nl - sl), name);
                return buf;
            }
        }
    return path;
}

bool cmd_is_store_model(const char *word)
{
    struct stat st;
    /* a name (not a path, not a file here) that names an entry of the store */
    if (!word || !mdl_name_valid(word) || strchr(word, '/') || stat(word, &st) == 0)
        return false;
    char *path;
    bool found = mdl_resolve(word, &path) == 0;
    free(path);
    return found;
}

int cmd_model_resolve(const char *m_arg, bool offer_pull, char **path)
{
    char buf[4096];
    const char *what = "-m", *arg = m_arg ? m_arg : buf;
    *path = NULL;
    if (!m_arg && !mdl_default_model(buf, sizeof buf, &what)) {
        struct mdl_entry *es;
        size_t n = 0;
        char err[256];
        if (mdl_list(&es, &n, err, sizeof err) == 0)
            mdl_list_free(es, n);
        else /* an unreadable store is not "no model" */
            return cmd_fail(CMD_EXIT_MODEL, "no default model, and the model store cannot be read: %s", err);
        if (n > 0)
            return cmd_fail(CMD_EXIT_MODEL,
                            "no default model: choose one with 'kvchat models default NAME' or -m NAME "
                            "(see 'kvchat models list')");
        const struct mdl_alias *a = mdl_alias_find(MDL_DEFAULT_ALIAS);
        char sz[32];
        cmd_fmt_size(sz, sizeof sz, (double)a->size);
        if (offer_pull && isatty(0) && isatty(2)) {
            fprintf(stderr, "kvchat has no model yet. Download %s (%s, about %s) now? [Y/n] ",
                    a->name, a->about, sz);
            char line[64];
            if (!fgets(line, sizeof line, stdin))
                line[0] = 'n';
            if (line[0] == '\n' || line[0] == 'y' || line[0] == 'Y') {
                struct mdl_pull_params p = mdl_pull_default_params();
                char name[160];
                int rc = cmd_models_pull_ref(a->name, &p, name, sizeof name);
                if (rc)
                    return rc;
                if (mdl_resolve(name, path)) {
                    free(*path);
                    *path = NULL;
                    return cmd_fail(CMD_EXIT_MODEL, "cannot find the model just pulled");
                }
                return CMD_EXIT_OK;
            }
        }
        fprintf(stderr,
                "kvchat: no model configured\n"
                "To get started, download a small model (%s, about %s):\n"
                "\n"
                "    kvchat models pull %s\n"
                "\n"
                "then run 'kvchat' again. 'kvchat models aliases' lists other models;\n"
                "a GGUF file you already have: 'kvchat models add FILE' puts it in the\n"
                "store (the first one added is the default), or -m FILE.gguf uses it once.\n",
                a->about, sz, a->name);
        return CMD_EXIT_MODEL;
    }
    if (mdl_resolve(arg, path)) {
        free(*path);
        *path = NULL;
        if (strcmp(what, "-m"))
            return cmd_fail(CMD_EXIT_MODEL, "cannot find the default model '%s' (from %s); see 'kvchat models list'",
                            arg, what);
        return cmd_fail(CMD_EXIT_MODEL, "cannot find model '%s': no such file or store name", arg);
    }
    return CMD_EXIT_OK;
}
