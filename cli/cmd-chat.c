/*
 * cmd-chat.c - `kvchat [chat]`: PLACEHOLDER until the REPL lands (the REPL
 * engineer replaces this file). What it does now is the first-run path:
 * find the model (-m, KVCHAT_MODEL, the config file), and with none say how
 * to get one (exit 2), or on a terminal offer to pull the default alias.
 * With a model it says that the chat REPL is not built yet (exit 1).
 */
#include "cli/cmd.h"

#include <stdio.h>
#include <string.h>

static const char chat_usage[] =
    "usage: kvchat [chat] [-m MODEL]\n"
    "\n"
    "  The interactive chat. MODEL is a file path or a store name; the default\n"
    "  comes from KVCHAT_MODEL or 'model = NAME' in the config file\n"
    "  ('kvchat models default NAME' sets it).\n";

static int chat_exec(int argc, char **argv)
{
    struct cmd_opts o;
    cmd_opts_init(&o);
    int rc = cmd_opts_config(&o);
    for (int i = 1; !rc && i < argc;) {
        int r = cmd_opts_take(&cmd_chat_entry, &o, argc, argv, &i);
        if (r < 0)
            rc = CMD_EXIT_USAGE;
        else if (r == 0 && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")))
            rc = cmd_help(&cmd_chat_entry);
        else if (r == 0)
            i++;
    }
    if (!rc)
        rc = cmd_opts_finish(&cmd_chat_entry, &o);
    char path[4096];
    if (!rc)
        rc = cmd_model_resolve(o.model, true, path, sizeof path);
    /* TODO(REPL issue): start the chat with the model at path */
    if (!rc)
        rc = cmd_fail(CMD_EXIT_USAGE, "the chat REPL is not built yet (model: %s)", path);
    cmd_opts_free(&o);
    return rc;
}

const struct cmd_entry cmd_chat_entry = {
    .name = "chat",
    .summary = "chat with a model (the default command)",
    .usage = chat_usage,
    .exec = chat_exec,
};
