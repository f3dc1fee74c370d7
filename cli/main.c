/*
 * main.c - kvchat's entry point: hands argv to the command table (cmd.c)
 * and turns the command's result into the process exit status.
 */
#include "cli/cmd.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* KVCHAT_TRACE=1: where the time went, phase by phase, on stderr at exit
 * (core/base's trace: wall and CPU ms since the start, page faults) */
static void trace_print(void)
{
    const struct base_trace_mark *m;
    int n = base_trace_marks(&m);
    double wall = 0, cpu = 0;
    long faults = 0;
    if (n)
        fprintf(stderr, "kvchat trace: started at %.3f ms (CLOCK_MONOTONIC)\n", base_trace_zero_ms());
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "kvchat trace: %8.1f ms (+%7.1f) cpu %8.1f (+%7.1f) faults %7ld (+%6ld) %s\n", m[i].wall_ms,
                m[i].wall_ms - wall, m[i].cpu_ms, m[i].cpu_ms - cpu, m[i].faults, m[i].faults - faults, m[i].what);
        wall = m[i].wall_ms, cpu = m[i].cpu_ms, faults = m[i].faults;
    }
}

int main(int argc, char **argv)
{
    const char *trace = getenv("KVCHAT_TRACE");
    if (trace && *trace && *trace != '0') {
        base_trace_start();
        atexit(trace_print);
    }
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
