/*
 * cmd-paths.c - `kvchat paths`: where kvchat keeps its files (the session
 * database, the KV blocks, the models, the config file, the chat's input
 * history), as the environment makes them (cli/home.c; the store's own
 * paths are sessions/'); /show in the chat prints the same.
 */
#include "cli/cmd.h"
#include "cli/home.h"
#include "cli/io.h"
#include "sessions/sess.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char paths_usage[] =
    "usage: kvchat paths [--json]\n"
    "\n"
    "Where kvchat keeps its files, from KVCHAT_HOME (default\n"
    "${XDG_DATA_HOME:-$HOME/.local/share}/kvchat), XDG_CONFIG_HOME and\n"
    "XDG_STATE_HOME (or HOME):\n"
    "  database   the session index, $KVCHAT_HOME/" SESS_STORE_DATABASE_NAME "\n"
    "  kv store   the KV block files, $KVCHAT_HOME/" SESS_STORE_KV_NAME "/\n"
    "  models     the model store, $KVCHAT_HOME/models/\n"
    "  config     ${XDG_CONFIG_HOME:-$HOME/.config}/kvchat/config\n"
    "  history    the chat's input history,\n"
    "             ${XDG_STATE_HOME:-$HOME/.local/state}/kvchat/history\n"
    "A path that does not exist yet is marked \"(not yet made)\"; nothing is\n"
    "created.\n"
    "\n"
    "--json prints one object: home, database, kv_store, models, config,\n"
    "history (null when the environment gives no place), and exists, an\n"
    "object of the same keys with true or false.\n"
    "Exit status: 0 ok, 1 usage error.\n";

static int paths_exec(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_paths_entry);
        if (!strcmp(argv[i], "--json"))
            json = true;
        else
            return cmd_usage_error(&cmd_paths_entry, "paths: unexpected argument '%s'", argv[i]);
    }
    struct cmd_paths p;
    cmd_paths_get(&p);
    const struct {
        const char *label, *key, *path;
    } rows[] = {{"database", "database", p.database}, {"kv store", "kv_store", p.kv_store},
                {"models", "models", p.models},       {"config", "config", p.config},
                {"history", "history", p.history}};
    size_t n = sizeof rows / sizeof *rows;
    if (json) {
        fputs("{\"home\": ", stdout);
        if (p.home)
            cmd_json_str(stdout, p.home, strlen(p.home));
        else
            fputs("null", stdout);
        for (size_t i = 0; i < n; i++) {
            printf(", \"%s\": ", rows[i].key);
            if (rows[i].path)
                cmd_json_str(stdout, rows[i].path, strlen(rows[i].path));
            else
                fputs("null", stdout);
        }
        printf(", \"exists\": {\"home\": %s", cmd_path_exists(p.home) ? "true" : "false");
        for (size_t i = 0; i < n; i++)
            printf(", \"%s\": %s", rows[i].key, cmd_path_exists(rows[i].path) ? "true" : "false");
        fputs("}}\n", stdout);
        cmd_paths_free(&p);
        return CMD_EXIT_OK;
    }
    for (size_t i = 0; i < n; i++)
        printf("%-10s %s%s\n", rows[i].label, rows[i].path ? rows[i].path : "(none: set HOME)",
               rows[i].path && !cmd_path_exists(rows[i].path) ? " (not yet made)" : "");
    cmd_paths_free(&p);
    return CMD_EXIT_OK;
}

const struct cmd_entry cmd_paths_entry = {
    .name = "paths",
    .summary = "where the database, KV blocks, models, config and history are",
    .usage = paths_usage,
    .exec = paths_exec,
};
