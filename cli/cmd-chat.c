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
    const char *m = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_chat_entry);
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc)
            m = argv[++i];
        else if (!strncmp(argv[i], "--model=", 8))
            m = argv[i] + 8;
    }
    char path[4096];
    int rc = cmd_model_resolve(m, true, path, sizeof path);
    if (rc)
        return rc;
    /* TODO(REPL issue): start the chat with the model at path */
    return cmd_fail(CMD_EXIT_USAGE, "the chat REPL is not built yet (model: %s)", path);
}

const struct cmd_entry cmd_chat_entry = {
    .name = "chat",
    .summary = "chat with a model (the default command)",
    .usage = chat_usage,
    .exec = chat_exec,
};
