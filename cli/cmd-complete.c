/*
 * cmd-complete.c - `kvchat __complete WORD... CURRENT`: what the shell may
 * put in place of CURRENT (the word being completed, maybe empty) after
 * the words before it. The bash and zsh scripts (cli/completion/) are thin
 * wrappers around it, so both shells complete the same commands, options,
 * session names and model names, and the knowledge lives here once (as
 * git's --git-completion-helper does).
 *
 * Output, one candidate per line starting with CURRENT: "word" or
 * "word<TAB>description"; a line ":files" asks the shell to offer file
 * names as well. Nothing is created or written (the session index is only
 * read if it exists), no model file is opened, and it takes a few
 * milliseconds: it runs on every Tab.
 *
 * The tables below are kept in step with each command's --help by
 * tests/cli/t0800-completion.sh, which compares the two.
 */
#include "cli/cmd.h"
#include "cli/home.h"
#include "cli/opts.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kinds of words */
#define K_SESSION 1u  /* a saved session's name */
#define K_MODEL 2u    /* a model in the store */
#define K_FILE 4u     /* a file name (the shell completes it) */
#define K_ALIAS 8u    /* a built-in alias (models pull) */
#define K_TEMPLATE 16u
#define K_COMMAND 32u /* a kvchat command (help) */
#define K_SUB 64u     /* a subcommand of the family */

/*
 * A command's options: space-separated, each "NAMES" (a flag) or
 * "NAMES=VALUE" where NAMES are its spellings joined by ',' and VALUE is
 * empty (a value that is not completed), MODEL, FILE, SESSION, TEMPLATE,
 * or the possible values joined by '|'.
 */
struct comp_cmd {
    const char *name;  /* "chat", "models add" */
    const char *about; /* for a subcommand: a few words (zsh shows them) */
    bool common;       /* also the options chat and run share (cli/opts.c) */
    const char *opts;
    unsigned first;    /* what the first positional argument is */
    unsigned rest;     /* what the later ones are */
    int max_args;      /* positional arguments completed: -1 any */
};

static const struct comp_cmd comp_table[] = {
    {"chat", NULL, true, "-h,--help -s,--session=SESSION --continue --yes", K_SESSION, 0, 1},
    {"run", NULL, true, "-h,--help -s,--session=SESSION --continue --json -f,--file=FILE", 0, 0, 0},
    {"models", NULL, false, "-h,--help --json", K_SUB, 0, 1},
    {"models list", "the models in the store", false, "-h,--help --json", 0, 0, 0},
    {"models ls", "the models in the store", false, "-h,--help --json", 0, 0, 0},
    {"models add", "put a GGUF file you have into the store", false,
     "-h,--help --name= --copy --symlink --force", K_FILE, 0, 1},
    {"models pull", "download a model", false,
     "-h,--help --name= --sha256= --ca-file=FILE -f,--force --retries= --timeout=", K_ALIAS, 0, 1},
    {"models add-remote", "a model on an OpenAI-compatible server", false,
     "-h,--help --model= --api-key-env= --ca-file=FILE --timeout= --retries= --no-stream --force", 0, 0, 0},
    {"models rm", "remove models from the store", false, "-h,--help -f,--force", K_MODEL, K_MODEL, -1},
    {"models default", "set or show the default model", false, "-h,--help --unset", K_MODEL | K_FILE, 0, 1},
    {"models info", "what a model holds", false, "-h,--help --json --all --offline", K_MODEL | K_FILE, 0, 1},
    {"models aliases", "the built-in aliases", false, "-h,--help --json", 0, 0, 0},
    {"models path", "the file a model name stands for", false, "-h,--help", K_MODEL | K_FILE, 0, 1},
    {"sessions", NULL, false, "-h,--help --json", K_SUB, 0, 1},
    {"sessions list", "the saved sessions", false, "-h,--help --json", 0, 0, 0},
    {"sessions ls", "the saved sessions", false, "-h,--help --json", 0, 0, 0},
    {"sessions show", "a session's transcript", false, "-h,--help --json", K_SESSION, 0, 1},
    {"sessions rm", "remove sessions", false, "-h,--help", K_SESSION, K_SESSION, -1},
    {"sessions rename", "rename a session", false, "-h,--help", K_SESSION, 0, 2},
    {"sessions fork", "copy a session, sharing its KV", false, "-h,--help --at=", K_SESSION, 0, 2},
    {"sessions export", "a transcript as JSON or Markdown", false, "-h,--help --format=json|markdown",
     K_SESSION, 0, 1},
    {"sessions gc", "delete KV blocks nothing uses", false, "-h,--help --cache-max=", 0, 0, 0},
    {"sessions search", "search every saved message", false, "-h,--help --json --raw --limit=", 0, 0, 0},
    {"paths", NULL, false, "-h,--help --json", 0, 0, 0},
    {"tokenize", NULL, false,
     "-h,--help -m,--model=MODEL --no-bos --special --pieces -f,--file=FILE -v,--verbose", 0, 0, 0},
    {"template", NULL, false, "-h,--help -m,--model=MODEL --template=TEMPLATE --template-file=FILE --list", 0,
     0, 0},
    {"eval", NULL, false,
     "-h,--help -m,--model=MODEL -p,--prompt= --logits-out=FILE --split= --token-by-token -t,--threads= "
     "-c,--ctx-size= --kv-type=f16|f32 -v,--verbose",
     0, 0, 0},
    {"generate", NULL, false,
     "-h,--help -m,--model=MODEL -p,--prompt= -n,--max-tokens= -t,--threads= -c,--ctx-size= "
     "--kv-type=f16|f32 -v,--verbose",
     0, 0, 0},
    {"bench", NULL, false,
     "-h,--help -m,--model=MODEL -p,--n-prompt= -n,--n-gen= -d,--depth= -r,--repetitions= -t,--threads= "
     "-c,--ctx-size= --kv-type=f16|f32 --draft= --membw --json -v,--verbose",
     0, 0, 0},
    {"help", NULL, false, "", K_COMMAND, 0, 1},
    {NULL, NULL, false, NULL, 0, 0, 0},
};

/* the value kinds of the common options that have one worth completing */
static const char *common_value(const char *lng)
{
    static const char *const kinds[][2] = {
        {"model", "MODEL"}, {"system-file", "FILE"}, {"template", "TEMPLATE"}, {"kv-type", "f16|f32"},
        {"think", "on|off|show|hide"}, {"draft", "off|ngram|store|on"}, {NULL, NULL},
    };
    for (size_t i = 0; kinds[i][0]; i++)
        if (!strcmp(kinds[i][0], lng))
            return kinds[i][1];
    return "";
}

/* ==== output ==== */

static const char *cur; /* the word being completed */

static void out(const char *word, const char *about)
{
    if (strncmp(word, cur, strlen(cur)))
        return;
    if (about)
        printf("%s\t%s\n", word, about);
    else
        printf("%s\n", word);
}

static void out_kind(unsigned kinds, const char *family)
{
    if (kinds & K_SESSION) {
        struct sess_store *st;
        struct sess_info *list;
        int64_t n;
        char err[256];
        if (cmd_store_open_existing(&st, err, sizeof err) == 1) {
            if (sess_list(st, &list, &n) == 0) {
                for (int64_t i = 0; i < n; i++)
                    if (list[i].name)
                        out(list[i].name, NULL);
                sess_list_free(list, n);
            }
            sess_store_close(st);
        }
    }
    if (kinds & K_MODEL) {
        struct mdl_entry *es;
        size_t n;
        char err[256];
        if (mdl_list_names(&es, &n, err, sizeof err) == 0) {
            for (size_t i = 0; i < n; i++)
                out(es[i].name, NULL);
            mdl_list_free(es, n);
        }
    }
    if (kinds & K_ALIAS)
        for (const struct mdl_alias *a = mdl_aliases; a->name; a++)
            if (mdl_alias_runs(a))
                out(a->name, a->about);
    if (kinds & K_TEMPLATE)
        for (int t = LLM_TEMPLATE_CHATML; t < LLM_TEMPLATE_COUNT; t++)
            out(llm_template_name((enum llm_template)t), NULL);
    if (kinds & K_COMMAND)
        for (const struct cmd_entry *const *e = cmd_table; *e; e++)
            out((*e)->name, (*e)->summary);
    if (kinds & K_SUB) {
        size_t fl = strlen(family);
        for (const struct comp_cmd *c = comp_table; c->name; c++)
            if (!strncmp(c->name, family, fl) && c->name[fl] == ' ')
                out(c->name + fl + 1, c->about);
    }
    if (kinds & K_FILE)
        puts(":files");
}

static void out_value(const char *value)
{
    if (!strcmp(value, "MODEL"))
        out_kind(K_MODEL | K_FILE, NULL);
    else if (!strcmp(value, "FILE"))
        out_kind(K_FILE, NULL);
    else if (!strcmp(value, "SESSION"))
        out_kind(K_SESSION, NULL);
    else if (!strcmp(value, "TEMPLATE"))
        out_kind(K_TEMPLATE, NULL);
    else if (strchr(value, '|')) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", value);
        for (char *save, *w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
            out(w, NULL);
    }
}

/* ==== options ==== */

/* Find option word w in c's options: 1 with *value (the VALUE part: NULL
 * for a flag) if found, 0 if not. A word "--x=v" carries its value. */
static int find_opt(const struct comp_cmd *c, const char *w, const char **value)
{
    size_t wl = strcspn(w, "=");
    if (c->common) {
        char shrt;
        bool takes, negated;
        const char *lng;
        for (size_t i = 0; (lng = cmd_opts_option(i, &shrt, &takes, &negated)); i++) {
            bool hit = (wl == strlen(lng) + 2 && !strncmp(w, "--", 2) && !strncmp(w + 2, lng, wl - 2)) ||
                       (shrt && wl == 2 && w[0] == '-' && w[1] == shrt);
            bool neg = !takes && wl == strlen(lng) + 5 && !strncmp(w, "--no-", 5) && !strncmp(w + 5, lng, wl - 5);
            if (hit || neg) {
                *value = takes ? common_value(lng) : NULL;
                return 1;
            }
        }
    }
    const char *p = c->opts;
    while (*p) {
        size_t n = strcspn(p, " ");
        const char *eq = memchr(p, '=', n);
        size_t names = eq ? (size_t)(eq - p) : n;
        for (size_t i = 0; i < names;) {
            size_t k = strcspn(p + i, ",= ");
            if (k > names - i)
                k = names - i;
            if (k == wl && !strncmp(p + i, w, k)) {
                static char val[128];
                snprintf(val, sizeof val, "%.*s", eq ? (int)(n - names - 1) : 0, eq ? eq + 1 : "");
                *value = eq ? val : NULL;
                return 1;
            }
            i += k + 1;
        }
        p += n;
        while (*p == ' ')
            p++;
    }
    return 0;
}

static void out_opts(const struct comp_cmd *c)
{
    if (c->common) {
        char shrt, s[3] = "-x", l[80];
        bool takes, negated;
        const char *lng;
        for (size_t i = 0; (lng = cmd_opts_option(i, &shrt, &takes, &negated)); i++) {
            snprintf(l, sizeof l, "--%s", lng);
            out(l, NULL);
            if (negated) {
                snprintf(l, sizeof l, "--no-%s", lng);
                out(l, NULL);
            }
            if (shrt) {
                s[1] = shrt;
                out(s, NULL);
            }
        }
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", c->opts);
    for (char *save, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        w[strcspn(w, "=")] = 0;
        for (char *s2, *name = strtok_r(w, ",", &s2); name; name = strtok_r(NULL, ",", &s2))
            out(name, NULL);
    }
}

static const struct comp_cmd *find_cmd(const char *name)
{
    for (const struct comp_cmd *c = comp_table; c->name; c++)
        if (!strcmp(c->name, name))
            return c;
    return NULL;
}

/* ==== the command ==== */

int cmd_complete(int argc, char **argv)
{
    /* argv: __complete WORD... CURRENT */
    if (argc < 2)
        return CMD_EXIT_OK;
    cur = argv[argc - 1];
    char **w = argv + 1;
    int n = argc - 2;
    const struct comp_cmd *c = find_cmd("chat"); /* options before a command are the chat's */
    bool top = true; /* no command seen yet */
    int args = 0;    /* positional arguments of c so far */
    bool dashdash = false;
    for (int i = 0; i < n; i++) {
        const char *value;
        if (!dashdash && !strcmp(w[i], "--")) {
            dashdash = true;
        } else if (!dashdash && w[i][0] == '-' && w[i][1]) {
            if (find_opt(c, w[i], &value) && value && !strchr(w[i], '=')) {
                if (i + 1 == n) { /* CURRENT is this option's value */
                    out_value(value);
                    return CMD_EXIT_OK;
                }
                i++;
            }
        } else if (top) {
            top = false;
            const struct comp_cmd *sub = strchr(w[i], ' ') ? NULL : find_cmd(w[i]);
            if (sub) {
                c = sub;
                args = 0;
            } else {
                args = 1; /* `kvchat NAME`: a session for the chat */
            }
        } else if ((c->first & K_SUB) && args == 0) {
            char name[128];
            snprintf(name, sizeof name, "%s %s", c->name, w[i]);
            const struct comp_cmd *sub = find_cmd(name);
            if (!sub)
                return CMD_EXIT_OK; /* an unknown subcommand: nothing to offer */
            c = sub;
        } else {
            args++;
        }
    }
    if (cur[0] == '-' && !dashdash) {
        out_opts(c);
        if (top) {
            out("--version", NULL);
        }
        return CMD_EXIT_OK;
    }
    if (top) {
        for (const struct cmd_entry *const *e = cmd_table; *e; e++)
            out((*e)->name, (*e)->summary);
        out("help", "a command's usage");
        out_kind(K_SESSION, NULL); /* `kvchat NAME` opens a session */
        return CMD_EXIT_OK;
    }
    if (c->max_args >= 0 && args >= c->max_args)
        return CMD_EXIT_OK;
    out_kind(args == 0 ? c->first : c->rest, c->name);
    return CMD_EXIT_OK;
}
