/*
 * home.h - (internal to cli/) where kvchat keeps its files, and the session
 * store opened for a command (cli/home.c). What the store keeps under the
 * home is sessions/' to say (sess_store_file); this names no store file.
 */
#ifndef KVCHAT_CLI_HOME_H
#define KVCHAT_CLI_HOME_H

#include <stdbool.h>
#include <stddef.h>

/* where kvchat keeps its files (cli/home.c), each malloc'd; NULL where the
 * environment gives no place. The caller frees them with cmd_paths_free. */
struct cmd_paths {
    char *home, *database, *kv_store, *models, *config, *history;
};
void cmd_paths_get(struct cmd_paths *p);
void cmd_paths_free(struct cmd_paths *p);
/* path is not NULL, not "" and names something */
bool cmd_path_exists(const char *path);

struct sess_store;
/* open $KVCHAT_HOME's store (created if create): 0; CMD_EXIT_SESSION
 * (printed); -1 (quietly) when !create and there is none. A note about
 * opening it (an upgrade) goes to stderr. */
int cmd_store_open(bool create, struct sess_store **st);
/* --private: open the store only if there is one, read-only (nothing is
 * created or written): 0 with *st (NULL when there is none, or it cannot
 * be opened: then said on stderr) */
int cmd_store_open_private(struct sess_store **st);
/* open the store only if there is one (nothing is created, nothing is
 * printed): 1 with *st, 0 if there is none, -1 if it cannot be opened (err
 * says why, whole) */
int cmd_store_open_existing(struct sess_store **st, char *err, size_t err_size);
/* is there a saved session called name? (for `kvchat NAME`; no store is made) */
bool cmd_session_exists(const char *name);

#endif
