/*
 * cmd-models.c - `kvchat models ...`: what is in a model file (`info`), and
 * the model store: list, pull (with a progress line on a terminal), rm,
 * default, aliases. The work is done by models/ (mdl.h); this file parses
 * options, prints, and maps errors to exit codes.
 */
#include "cli/cmd.h"
#include "cli/home.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "cli/term.h"
#include "core/llm.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char models_usage[] =
    "usage: kvchat models [list] [--json]\n"
    "       kvchat models add [--name NAME] [--copy | --symlink] [--force] FILE\n"
    "       kvchat models pull [--name NAME] [--sha256 HEX] [--ca-file FILE] [--force]\n"
    "                          [--retries N] [--timeout SECONDS] REF\n"
    "       kvchat models add-remote [--model ID] [--api-key-env VAR] [--ca-file FILE]\n"
    "                          [--timeout SECONDS] [--retries N] [--no-stream] [--force]\n"
    "                          NAME URL\n"
    "       kvchat models rm [--force] NAME...\n"
    "       kvchat models default [NAME | --unset]\n"
    "       kvchat models info [--json] [--all] [--offline] MODEL\n"
    "       kvchat models aliases [--json]\n"
    "       kvchat models path [MODEL]\n"
    "\n"
    "  list, ls      the models in the store: name, size, quantization, architecture,\n"
    "                parameters, when pulled, path ('*' marks the default); also\n"
    "                'kvchat models' alone\n"
    "      --json    one JSON array of objects instead\n"
    "  add FILE      put a GGUF file you already have into the store (its header is\n"
    "                checked): a hard link where the file system allows, else a\n"
    "                symbolic link to it; the file is never changed or moved\n"
    "      --name NAME       store it as NAME (default: the file name without .gguf)\n"
    "      --copy            copy the file instead of linking it\n"
    "      --symlink         a symbolic link even where a hard link is possible\n"
    "      --force           replace a model of that name\n"
    "  pull REF      download a model into the store over HTTPS, resuming an\n"
    "                interrupted download, checking its SHA-256 (the hub's\n"
    "                X-Linked-ETag, or --sha256) and its GGUF header. REF is\n"
    "                  an alias               qwen2.5:0.5b (see 'models aliases')\n"
    "                  hf:OWNER/REPO:QUANT    the repo's .gguf file of that quantization\n"
    "                                         (default Q4_K_M)\n"
    "                  hf:OWNER/REPO/FILE.gguf\n"
    "                  https://HOST/PATH.gguf\n"
    "      --name NAME       store it as NAME (default: the alias, or the file name)\n"
    "      --sha256 HEX      the file's expected SHA-256\n"
    "      --ca-file FILE    trust the CAs in FILE (default $KVCHAT_CA_FILE, else\n"
    "                        /etc/ssl/certs/ca-certificates.crt)\n"
    "      --force           download again even if NAME is in the store\n"
    "      --retries N       retries after a network failure (default 3, with backoff)\n"
    "      --timeout SECONDS give up on a silent connection after this long (default 30)\n"
    "  add-remote NAME URL\n"
    "                a model on an OpenAI-compatible server (vLLM, SGLang, llama-server,\n"
    "                ollama): URL is its /v1 base, https://, or http:// for a loopback or\n"
    "                private address only. NAME is then used like a local model\n"
    "      --model ID        the server's model id (default: its only model)\n"
    "      --api-key-env VAR read the API key from $VAR at each request (never stored)\n"
    "      --ca-file FILE    trust the CAs in FILE for https (default as for pull)\n"
    "      --timeout SECONDS give up on a silent server after this long (default 120)\n"
    "      --retries N       retries after 408, 429 and 5xx, with backoff (default 3)\n"
    "      --no-stream       ask for whole answers (for proxies that buffer streams)\n"
    "      --force           replace a remote model of that name\n"
    "  rm NAME       remove a model (and any partial download) from the store;\n"
    "                refuses while a session uses it unless --force\n"
    "  default NAME  make NAME (a store name or a file) the default model, written as\n"
    "                'model = NAME' to ${XDG_CONFIG_HOME:-~/.config}/kvchat/config;\n"
    "                with no NAME, print the default; --unset removes it\n"
    "  info MODEL    what a GGUF model file holds: architecture, parameters, file\n"
    "                size, tensor types, context length, layers, heads, vocabulary,\n"
    "                rope settings, chat template, special tokens\n"
    "      --json    print one JSON object instead\n"
    "      --all     also every metadata key (long arrays and strings abbreviated)\n"
    "                of a remote model: its entry, and the models its server lists\n"
    "      --offline (remote) do not ask the server\n"
    "  aliases       the built-in table of model aliases\n"
    "      --json    one JSON array of objects instead\n"
    "  path [MODEL]  the file MODEL (a path or store name) stands for; without MODEL,\n"
    "                the default model's (KVCHAT_MODEL, else the config file)\n"
    "\n"
    "MODEL is a file path or the name of a model in the store ($KVCHAT_HOME/models).\n"
    "Environment: HF_TOKEN (sent only to the hub), KVCHAT_HF_ENDPOINT or HF_ENDPOINT\n"
    "(the hub, default https://huggingface.co), HTTPS_PROXY and NO_PROXY,\n"
    "KVCHAT_CA_FILE, KVCHAT_MODEL (overrides the default model).\n"
    "JSON output is one document: an array for lists, an object for one thing.\n"
    "Exit status: 0 ok, 1 usage error, 2 the model cannot be read or written,\n"
    "4 network or verification failure, 130 interrupted.\n";

/* ==== pull ==== */

static int models_pull(int argc, char **argv)
{
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'N'},
        {"sha256", required_argument, NULL, 'S'},
        {"ca-file", required_argument, NULL, 'C'},
        {"force", no_argument, NULL, 'f'},
        {"retries", required_argument, NULL, 'r'},
        {"timeout", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct mdl_pull_params p = mdl_pull_default_params();
    int c;
    char *end;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
        switch (c) {
        case 'N': p.name = optarg; break;
        case 'S': p.sha256 = optarg; break;
        case 'C': p.ca_file = optarg; break;
        case 'f': p.force = true; break;
        case 'r':
            if (!cmd_int_arg(optarg, 0, 100, &p.retries))
                return cmd_usage_error(&cmd_models_entry, "models pull: bad --retries '%s'", optarg);
            break;
        case 'T': {
            double t = strtod(optarg, &end);
            if (*end || !(t > 0) || t > 3600)
                return cmd_usage_error(&cmd_models_entry, "models pull: bad --timeout '%s'", optarg);
            p.read_timeout_ms = p.connect_timeout_ms = (int)(t * 1000);
            break;
        }
        case 'h': return cmd_help(&cmd_models_entry);
        default:
            return cmd_usage_error(&cmd_models_entry, "models pull: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cmd_usage_error(&cmd_models_entry, "models pull: expected one REF");
    const char *ref = argv[optind];
    struct stat st;
    if (!strncmp(ref, "file:", 5) || (stat(ref, &st) == 0 && !S_ISDIR(st.st_mode)))
        return cmd_usage_error(&cmd_models_entry,
                               "models pull: '%s' is a file on disk, not a download; "
                               "'kvchat models add %s' puts it into the store",
                               ref, !strncmp(ref, "file://", 7) ? ref + 7 : !strncmp(ref, "file:", 5) ? ref + 5 : ref);
    if (p.ca_file && access(p.ca_file, R_OK))
        return cmd_fail(CMD_EXIT_USAGE, "cannot read --ca-file '%s': %s", p.ca_file, strerror(errno));
    return cmd_models_pull_ref(argv[optind], &p, NULL, 0);
}

/* ==== add ==== */

static int models_add(int argc, char **argv)
{
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'N'},
        {"copy", no_argument, NULL, 'c'},
        {"symlink", no_argument, NULL, 's'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct mdl_add_params p = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
        switch (c) {
        case 'N': p.name = optarg; break;
        case 'c': p.copy = true; break;
        case 's': p.symlink = true; break;
        case 'f': p.force = true; break;
        case 'h': return cmd_help(&cmd_models_entry);
        default:
            return cmd_usage_error(&cmd_models_entry, "models add: %s '%s'",
                                   optopt ? "option needs a value:" : "unknown option", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return cmd_usage_error(&cmd_models_entry, "models add: expected one FILE");
    if (p.copy && p.symlink)
        return cmd_usage_error(&cmd_models_entry, "models add: --copy or --symlink, not both");
    const char *file = argv[optind];
    struct mdl_add_result res;
    char err[5000];
    cmd_interrupts_catch();
    p.cancel = &cmd_interrupted;
    int rc = mdl_add(file, &p, &res, err, sizeof err);
    cmd_interrupts_restore();
    if (rc) {
        mdl_add_result_free(&res);
        return cmd_fail(cmd_mdl_exit(rc), "%s", err);
    }
    char size[32];
    cmd_fmt_size(size, sizeof size, (double)res.size);
    if (res.already) {
        fprintf(stderr, "kvchat: '%s' is already in the store as '%s'\n", file, res.name);
    } else {
        fprintf(stderr, "kvchat: added '%s' (%s; a %s %s %s)\n", res.name, size, mdl_add_how_name(res.how),
                res.how == MDL_ADD_COPY ? "of" : "to", res.target);
        if (res.how == MDL_ADD_SYMLINK)
            fprintf(stderr, "kvchat: note: the store refers to the file where it is: moving or deleting it "
                            "breaks '%s' (--copy makes a copy instead)\n", res.name);
        if (res.warning[0])
            fprintf(stderr, "kvchat: %s\n", res.warning);
    }
    cmd_models_first_default(res.name);
    mdl_add_result_free(&res);
    return CMD_EXIT_OK;
}

/* ==== list, rm, default, aliases ==== */

static void fmt_time(char *buf, size_t n, int64_t t)
{
    if (t < 0) {
        snprintf(buf, n, "-");
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M", &tm);
}

/* one entry of models list --json: the same keys for a file and a remote
 * model, null where one has no value */
static void list_json(const struct mdl_entry *e, bool is_def)
{
    fputs("{\"name\": ", stdout);
    cmd_json_str(stdout, e->name, strlen(e->name));
    printf(", \"remote\": %s", e->remote ? "true" : "false");
    if (e->remote)
        fputs(", \"size\": null", stdout);
    else
        printf(", \"size\": %" PRIu64, e->size);
    cmd_json_key_str(stdout, "quant", e->remote ? NULL : e->quant);
    cmd_json_key_str(stdout, "arch", e->remote ? NULL : e->arch);
    if (!e->remote && e->n_params >= 0)
        printf(", \"n_params\": %" PRId64, e->n_params);
    else
        fputs(", \"n_params\": null", stdout);
    cmd_json_key_str(stdout, "path", e->path);
    if (e->pulled >= 0)
        printf(", \"pulled\": %" PRId64, e->pulled);
    else
        fputs(", \"pulled\": null", stdout);
    cmd_json_key_str(stdout, "source", e->remote ? NULL : e->source);
    cmd_json_key_str(stdout, "sha256", e->remote ? NULL : e->sha256);
    cmd_json_key_str(stdout, "url", e->remote ? e->url : NULL);
    cmd_json_key_str(stdout, "remote_model", e->remote ? e->remote_model : NULL);
    cmd_json_key_str(stdout, "api_key_env", e->remote ? e->api_key_env : NULL);
    printf(", \"default\": %s", is_def ? "true" : "false");
    cmd_json_key_str(stdout, "error", e->error);
    fputs("}", stdout);
}

/* ==== tables: cells as a terminal shows them, columns that line up ==== */

struct cell_buf {
    char *p;
    size_t n, size;
};
static int cell_put(void *ud, const char *s, size_t n)
{
    struct cell_buf *b = ud;
    if (n > b->size - 1 - b->n)
        n = b->size - 1 - b->n;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* s as stdout shows it into buf (on a terminal what could drive it is
 * U+FFFD, as every text kvchat prints; names, GGUF metadata and .remote
 * fields are anyone's bytes); returns its width in columns (characters) */
static int cell(char *buf, size_t size, const char *s)
{
    struct cell_buf b = {buf, 0, size};
    if (cmd_term_is(stdout))
        cmd_term_clean(s, strlen(s), cell_put, &b);
    else
        cell_put(&b, s, strlen(s));
    buf[b.n] = 0;
    int w = 0;
    for (size_t i = 0; i < b.n; i++)
        w += ((unsigned char)buf[i] & 0xC0) != 0x80;
    return w;
}

/* s in a column of width w, padded on the right (or, right, on the left) */
static void put_cell(const char *s, int w, bool right)
{
    char buf[1024];
    int pad = w - cell(buf, sizeof buf, s);
    if (right)
        printf("%*s", pad > 0 ? pad : 0, "");
    fputs(buf, stdout);
    if (!right)
        printf("%*s", pad > 0 ? pad : 0, "");
}

/* the widest of the column's cells so far and s */
static int widest(int w, const char *s)
{
    char buf[1024];
    int k = cell(buf, sizeof buf, s);
    return k > w ? k : w;
}

static int models_list(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_models_entry);
        else
            return cmd_usage_error(&cmd_models_entry, "models list: unexpected '%s'", argv[i]);
    }
    struct mdl_entry *es;
    size_t n;
    char err[512], def[4096] = "", *defpath = NULL;
    const char *what;
    if (mdl_list(&es, &n, err, sizeof err))
        return cmd_fail(CMD_EXIT_MODEL, "cannot list models: %s", err);
    if (mdl_default_model(def, sizeof def, &what))
        mdl_resolve(def, &defpath);
    if (!json && n == 0) {
        char home[4096] = "?";
        mdl_home(home, sizeof home);
        fprintf(stderr, "kvchat: no models in %s/models; try 'kvchat models pull %s'\n", home,
                MDL_DEFAULT_ALIAS);
    }
    /* every column as wide as its widest cell: nothing shifts */
    enum { COL_NAME, COL_SIZE, COL_QUANT, COL_ARCH, COL_PARAMS, COL_PULLED, COL_COUNT };
    static const char *const head[COL_COUNT] = {"NAME", "SIZE", "QUANT", "ARCH", "PARAMS", "PULLED (UTC)"};
    char (*cells)[COL_COUNT][160] = n ? calloc(n, sizeof *cells) : NULL;
    if (n && !cells) {
        mdl_list_free(es, n);
        free(defpath);
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    }
    int w[COL_COUNT];
    for (int k = 0; k < COL_COUNT; k++)
        w[k] = widest(0, head[k]);
    for (size_t i = 0; i < n; i++) {
        const struct mdl_entry *e = &es[i];
        char *c[COL_COUNT];
        for (int k = 0; k < COL_COUNT; k++)
            c[k] = cells[i][k];
        snprintf(c[COL_NAME], 160, "%s", e->name);
        if (e->remote)
            snprintf(c[COL_SIZE], 160, "remote");
        else
            cmd_fmt_size(c[COL_SIZE], 160, (double)e->size);
        snprintf(c[COL_QUANT], 160, "%s", !e->remote && e->quant[0] ? e->quant : "-");
        snprintf(c[COL_ARCH], 160, "%s", !e->remote && e->arch[0] ? e->arch : "-");
        if (!e->remote && e->n_params >= 0)
            cmd_fmt_count(c[COL_PARAMS], 160, (double)e->n_params);
        else
            snprintf(c[COL_PARAMS], 160, "-");
        fmt_time(c[COL_PULLED], 160, e->pulled);
        for (int k = 0; k < COL_COUNT; k++)
            w[k] = widest(w[k], c[k]);
    }
    for (size_t i = 0; !json && i <= n && n; i++) { /* the heading, then the rows */
        const struct mdl_entry *e = i ? &es[i - 1] : NULL;
        bool is_def = e && defpath && !strcmp(defpath, e->path);
        fputs(is_def ? "* " : "  ", stdout);
        for (int k = 0; k < COL_COUNT; k++) {
            put_cell(e ? cells[i - 1][k] : head[k], w[k], k == COL_SIZE || k == COL_PARAMS);
            fputs("  ", stdout);
        }
        if (!e) {
            puts("PATH");
            continue;
        }
        if (e->remote)
            cmd_term_printf(stdout, "%s (model %s%s%s)", e->url, e->remote_model, e->api_key_env[0] ? ", key $" : "",
                            e->api_key_env);
        else
            cmd_term_printf(stdout, "%s", e->path);
        if (e->error[0])
            cmd_term_printf(stdout, "  (unreadable: %s)", e->error);
        putchar('\n');
    }
    for (size_t i = 0; json && i < n; i++) {
        cmd_json_list_item(stdout, (int64_t)i);
        list_json(&es[i], defpath && !strcmp(defpath, es[i].path));
    }
    free(cells);
    if (json)
        cmd_json_list_end(stdout, (int64_t)n);
    mdl_list_free(es, n);
    free(defpath);
    return CMD_EXIT_OK;
}

/*
 * Does a named session use the model? The store knows which model each
 * session was last used with. With no store yet there is nothing to ask
 * (and none is created).
 */
static int model_in_use(void *ctx, const char *name, const char *path, char *who, size_t who_size)
{
    (void)ctx, (void)name;
    struct sess_store *store;
    char err[256];
    int has = cmd_store_open_existing(&store, err, sizeof err);
    if (has < 0)
        snprintf(who, who_size, "the session store cannot be read: %s", err);
    if (has <= 0)
        return has;
    struct sess_info *list;
    int64_t n;
    if (sess_model_users(store, path, &list, &n)) {
        snprintf(who, who_size, "%s", sess_errmsg(store));
        sess_store_close(store);
        return -1;
    }
    if (n == 1)
        snprintf(who, who_size, "session '%s'", list[0].name);
    else if (n > 1)
        snprintf(who, who_size, "%lld sessions ('%s', ...)", (long long)n, list[0].name);
    sess_list_free(list, n);
    sess_store_close(store);
    return n > 0;
}

static int models_rm(int argc, char **argv)
{
    bool force = false;
    int first = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f"))
            force = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_models_entry);
        else if (argv[i][0] == '-')
            return cmd_usage_error(&cmd_models_entry, "models rm: unknown option '%s'", argv[i]);
        else if (!first)
            first = i;
    }
    if (!first)
        return cmd_usage_error(&cmd_models_entry, "models rm: expected a NAME");
    int rc = CMD_EXIT_OK;
    for (int i = first; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        char err[512], *path, pack_dir[4096], packed[4096 + 64], vocab[4096 + 64];
        /* its packed-weight and vocabulary cache files go with it (named by
         * its real path) */
        bool has_packed = mdl_resolve(argv[i], &path) == 0 && cmd_model_params(pack_dir, sizeof pack_dir).pack_dir &&
                          llm_pack_cache_file(pack_dir, path, packed, sizeof packed) == 0 &&
                          llm_vocab_cache_file(pack_dir, path, vocab, sizeof vocab) == 0;
        free(path);
        int r = mdl_rm(argv[i], force, model_in_use, NULL, err, sizeof err);
        if (!r && has_packed) {
            unlink(packed);
            unlink(vocab);
        }
        if (r) {
            rc = cmd_fail(r == MDL_ERR_USAGE ? CMD_EXIT_USAGE : CMD_EXIT_MODEL, "cannot remove '%s': %s",
                          argv[i], err);
            continue;
        }
        fprintf(stderr, "kvchat: removed '%s'\n", argv[i]);
        char def[4096];
        if (mdl_config_get("model", def, sizeof def) > 0 && !strcmp(def, argv[i])) {
            if (mdl_config_set("model", NULL, err, sizeof err) == 0)
                fprintf(stderr, "kvchat: '%s' was the default model; there is none now\n", argv[i]);
        }
    }
    return rc;
}

static int models_default(int argc, char **argv)
{
    char err[512], buf[4096], *path;
    const char *what;
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return cmd_help(&cmd_models_entry);
    if (argc == 1) {
        if (!mdl_default_model(buf, sizeof buf, &what))
            return cmd_fail(CMD_EXIT_MODEL, "no default model (set one with 'kvchat models default NAME')");
        printf("%s\n", buf);
        return CMD_EXIT_OK;
    }
    if (argc != 2)
        return cmd_usage_error(&cmd_models_entry, "models default: expected one NAME");
    if (!strcmp(argv[1], "--unset")) {
        if (mdl_config_set("model", NULL, err, sizeof err))
            return cmd_fail(CMD_EXIT_MODEL, "cannot write the config file: %s", err);
        return CMD_EXIT_OK;
    }
    const char *name = argv[1];
    if (name[0] == '-')
        return cmd_usage_error(&cmd_models_entry, "models default: unknown option '%s'", name);
    int found = mdl_resolve(name, &path);
    free(path);
    if (found) {
        if (mdl_alias_find(name))
            return cmd_fail(CMD_EXIT_MODEL, "no model '%s' in the store; pull it first: kvchat models pull %s",
                            name, name);
        return cmd_fail(CMD_EXIT_MODEL, "no model '%s' in the store (see 'kvchat models list')", name);
    }
    /* a file given by path is remembered by its absolute path */
    char abs[4096];
    const char *value = name;
    if (strchr(name, '/')) {
        if (!realpath(name, abs))
            return cmd_fail(CMD_EXIT_MODEL, "cannot resolve '%s': %s", name, strerror(errno));
        value = abs;
    }
    if (mdl_config_set("model", value, err, sizeof err))
        return cmd_fail(CMD_EXIT_MODEL, "cannot write the config file: %s", err);
    mdl_config_path(buf, sizeof buf);
    fprintf(stderr, "kvchat: default model is now '%s' (in %s)\n", value, buf);
    if (getenv("KVCHAT_MODEL") && *getenv("KVCHAT_MODEL"))
        fprintf(stderr, "kvchat: note: KVCHAT_MODEL=%s overrides it in this environment\n",
                getenv("KVCHAT_MODEL"));
    return CMD_EXIT_OK;
}

static int models_path(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return cmd_help(&cmd_models_entry);
    if (argc > 2)
        return cmd_usage_error(&cmd_models_entry, "models path: expected at most one MODEL");
    if (argc == 2 && argv[1][0] == '-')
        return cmd_usage_error(&cmd_models_entry, "models path: unknown option '%s'", argv[1]);
    char *path;
    int rc = cmd_model_resolve(argc == 2 ? argv[1] : NULL, false, &path);
    if (rc)
        return rc;
    printf("%s\n", path);
    free(path);
    return CMD_EXIT_OK;
}

static int models_aliases(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return cmd_help(&cmd_models_entry);
        if (strcmp(argv[i], "--json"))
            return cmd_usage_error(&cmd_models_entry, "models aliases: unexpected '%s'", argv[i]);
        json = true;
    }
    int64_t n = 0;
    int w_name = 1, w_about = 1, w_size = 1; /* the columns as wide as their widest entry: nothing shifts */
    for (const struct mdl_alias *a = mdl_aliases; a->name; a++)
        if (mdl_alias_runs(a)) {
            char size[32], approx[40];
            cmd_fmt_size(size, sizeof size, (double)a->size);
            snprintf(approx, sizeof approx, "~%s", size);
            w_name = widest(w_name, a->name);
            w_about = widest(w_about, a->about);
            w_size = widest(w_size, approx);
        }
    for (const struct mdl_alias *a = mdl_aliases; a->name; a++) {
        if (!mdl_alias_runs(a))
            continue; /* prepared for an architecture kvchat does not run yet */
        char size[32], ref[1024];
        snprintf(ref, sizeof ref, "hf:%s/%s", a->repo, a->file);
        if (json) {
            cmd_json_list_item(stdout, n++);
            fputs("{\"name\": ", stdout);
            cmd_json_str(stdout, a->name, strlen(a->name));
            fputs(", \"about\": ", stdout);
            cmd_json_str(stdout, a->about, strlen(a->about));
            printf(", \"size\": %" PRIu64 ", \"ref\": ", a->size);
            cmd_json_str(stdout, ref, strlen(ref));
            fputs("}", stdout);
            continue;
        }
        cmd_fmt_size(size, sizeof size, (double)a->size);
        char approx[40];
        snprintf(approx, sizeof approx, "~%s", size);
        put_cell(a->name, w_name, false);
        fputs("  ", stdout);
        put_cell(a->about, w_about, false);
        fputs("  ", stdout);
        put_cell(approx, w_size, true);
        cmd_term_printf(stdout, "  %s\n", ref);
        n++;
    }
    if (json)
        cmd_json_list_end(stdout, n);
    return CMD_EXIT_OK;
}

static int models_exec(int argc, char **argv)
{
    /* `kvchat models` and `kvchat models --json` list */
    if (argc < 2 || (argv[1][0] == '-' && strcmp(argv[1], "-h") && strcmp(argv[1], "--help")))
        return models_list(argc, argv);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
        return cmd_help(&cmd_models_entry);
    if (!strcmp(argv[1], "add"))
        return models_add(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info"))
        return cmd_models_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "pull"))
        return models_pull(argc - 1, argv + 1);
    if (!strcmp(argv[1], "list") || !strcmp(argv[1], "ls"))
        return models_list(argc - 1, argv + 1);
    if (!strcmp(argv[1], "rm"))
        return models_rm(argc - 1, argv + 1);
    if (!strcmp(argv[1], "add-remote"))
        return cmd_models_add_remote(argc - 1, argv + 1);
    if (!strcmp(argv[1], "default"))
        return models_default(argc - 1, argv + 1);
    if (!strcmp(argv[1], "aliases"))
        return models_aliases(argc - 1, argv + 1);
    if (!strcmp(argv[1], "path"))
        return models_path(argc - 1, argv + 1);
    return cmd_usage_error(&cmd_models_entry, "models: unknown subcommand '%s'", argv[1]);
}

const struct cmd_entry cmd_models_entry = {
    .name = "models",
    .summary = "the model store: list, add, pull, add-remote, rm, default, info, aliases, path",
    .usage = models_usage,
    .exec = models_exec,
};
