/*
 * main.c - kvchat's entry point: hands argv to the command table (cmd.c)
 * and turns the command's result into the process exit status.
 */
#include "cli/cmd.h"

#include <locale.h>
#include <stdio.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
    setlocale(LC_CTYPE, "");
    /* what kvchat keeps (sessions, the KV cache of every prompt, models,
     * history, config) is the user's alone: files 0600, folders 0700,
     * whatever the umask lets others have */
    umask(umask(0) | 077);
    int rc = cmd_main(argc, argv);
    if (fflush(stdout) != 0 && rc == 0) {
        perror("kvchat: cannot write to standard output");
        rc = 1;
    }
    return rc;
}
