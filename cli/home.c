/*
 * home.c - where kvchat keeps its files, and the session store opened for
 * a command. The home comes from models/ (KVCHAT_HOME, XDG_DATA_HOME,
 * HOME); what the store keeps under it, and whether SQLite can open it
 * there, is sessions/' to say: no store file name or SQLite limit is
 * written here. Each function that opens the store prints its failures
 * itself, in the words sessions/ gives.
 */
#include "cli/cmd.h"
#include "cli/home.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ==== paths ==== */

void cmd_paths_get(struct cmd_paths *p)
{
    char home[4096], config[4096];
    memset(p, 0, sizeof *p);
    if (mdl_home(home, sizeof home) == 0 && (p->home = strdup(home))) {
        p->database = sess_store_file(home, SESS_STORE_FILE_DATABASE);
        p->kv_store = sess_store_file(home, SESS_STORE_FILE_KV);
        p->models = base_path_join(home, "models");
    }
    if (mdl_config_path(config, sizeof config) == 0)
        p->config = strdup(config);
    const char *state = getenv("XDG_STATE_HOME"), *h = getenv("HOME");
    if (state && *state)
        p->history = base_strdup_printf("%s/kvchat/history", state);
    else if (h && *h)
        p->history = base_strdup_printf("%s/.local/state/kvchat/history", h);
}

void cmd_paths_free(struct cmd_paths *p)
{
    char **all[] = {&p->home, &p->database, &p->kv_store, &p->models, &p->config, &p->history};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

bool cmd_path_exists(const char *path)
{
    struct stat sb;
    return path && path[0] && stat(path, &sb) == 0;
}

/* ==== the session store ==== */

/* the home for the store into home: 0, or -1 with why in err (a bad path
 * variable, no home) */
static int store_home(char *home, size_t size, char *err, size_t err_size)
{
    char e[512];
    if (mdl_env_check(e, sizeof e)) {
        snprintf(err, err_size, "%s", e);
        return -1;
    }
    if (mdl_home(home, size)) {
        snprintf(err, err_size, "cannot find the kvchat home: set KVCHAT_HOME or HOME");
        return -1;
    }
    return 0;
}

/* open the store with p: SESS_OK, SESS_ERR_NOT_FOUND, or SESS_ERR with the
 * message for the user in err */
static int store_open(struct sess_store_params p, struct sess_store **st, char *err, size_t err_size)
{
    char home[4096];
    *st = NULL;
    if (store_home(home, sizeof home, err, err_size))
        return SESS_ERR;
    int rc = sess_store_open(home, p, st, err, err_size);
    if (rc)
        *st = NULL;
    return rc;
}

int cmd_store_open(bool create, struct sess_store **st)
{
    char err[5200];
    struct sess_store_params p = sess_store_default_params();
    p.create = create;
    int rc = store_open(p, st, err, sizeof err);
    if (rc == SESS_ERR_NOT_FOUND)
        return -1;
    if (rc)
        return cmd_fail(CMD_EXIT_SESSION, "%s", err);
    if (sess_store_notice(*st))
        fprintf(stderr, "kvchat: note: %s\n", sess_store_notice(*st));
    return 0;
}

int cmd_store_open_private(struct sess_store **st)
{
    char err[5200];
    struct sess_store_params p = sess_store_default_params();
    p.create = false;
    p.read_only = true;
    int rc = store_open(p, st, err, sizeof err);
    if (rc && rc != SESS_ERR_NOT_FOUND)
        fprintf(stderr, "kvchat: %s; the KV cache on disk is off\n", err);
    return 0;
}

int cmd_store_open_existing(struct sess_store **st, char *err, size_t err_size)
{
    struct sess_store_params p = sess_store_default_params();
    p.create = false;
    int rc = store_open(p, st, err, err_size);
    if (rc == SESS_ERR_NOT_FOUND)
        return 0;
    return rc ? -1 : 1;
}

bool cmd_session_exists(const char *name)
{
    char err[256];
    struct sess_store *st;
    if (cmd_store_open_existing(&st, err, sizeof err) != 1) /* no store: no session (and none is made) */
        return false;
    int64_t id;
    bool found = sess_find(st, name, &id) == SESS_OK;
    sess_store_close(st);
    return found;
}
