/*
 * store.c - the model store's layout: the kvchat home directory and the
 * mapping from a model name to its file. A name never escapes the store:
 * names with '/' are taken as paths, not looked up.
 */
#include "models/mdl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int mdl_home(char *buf, size_t size)
{
    const char *h = getenv("KVCHAT_HOME"), *x = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n;
    if (h && *h)
        n = snprintf(buf, size, "%s", h);
    else if (x && *x)
        n = snprintf(buf, size, "%s/kvchat", x);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.local/share/kvchat", home);
    else
        return -1;
    return n > 0 && (size_t)n < size ? 0 : -1;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int mdl_resolve(const char *arg, char *buf, size_t size)
{
    char home[4096];
    snprintf(buf, size, "%s", arg);
    if (is_file(arg) || strchr(arg, '/') || !arg[0] || mdl_home(home, sizeof home))
        return is_file(arg) ? 0 : -1;
    static const char *const suffixes[] = {"", ".gguf"};
    for (size_t i = 0; i < 2; i++) {
        int n = snprintf(buf, size, "%s/models/%s%s", home, arg, suffixes[i]);
        if (n > 0 && (size_t)n < size && is_file(buf))
            return 0;
    }
    snprintf(buf, size, "%s", arg);
    return -1;
}
