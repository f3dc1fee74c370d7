/*
 * main.c - kvchat's entry point: hands argv to the command table (cmd.c)
 * and turns the command's result into the process exit status.
 */
#include "cli/cmd.h"

#include <locale.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    setlocale(LC_CTYPE, "");
    int rc = cmd_main(argc, argv);
    if (fflush(stdout) != 0 && rc == 0) {
        perror("kvchat: cannot write to standard output");
        rc = 1;
    }
    return rc;
}
