/*
 * cmd-sessions.c - `kvchat sessions ...`: list, show, rm, rename, fork,
 * export and gc over the store (sessions/sess.h). Session errors exit 3; the
 * store refuses to remove or rename a session another process has open.
 */
#include "cli/cmd.h"
#include "cli/home.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "cli/term.h"
#include "sessions/sess.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char sessions_usage[] =
    "usage: kvchat sessions [list] [--json]\n"
    "       kvchat sessions show NAME [--json]\n"
    "       kvchat sessions rm NAME...\n"
    "       kvchat sessions rename OLD NEW\n"
    "       kvchat sessions fork SRC DST [--at TURN]\n"
    "       kvchat sessions export NAME [--format json|markdown]\n"
    "       kvchat sessions gc [--cache-max SIZE]\n"
    "       kvchat sessions forget\n"
    "       kvchat sessions search [--json] [--raw] [--limit N] TEXT...\n"
    "\n"
    "  list, ls  named sessions: model, turns, tokens, KV bytes on disk, last update;\n"
    "            also 'kvchat sessions' alone\n"
    "  show      a session's transcript\n"
    "  rm        remove sessions (their KV blocks stay as cache until gc or eviction)\n"
    "  rename    rename a session\n"
    "  fork      copy SRC to DST, sharing its KV blocks; --at TURN keeps only the\n"
    "            first TURN exchanges\n"
    "  export    the transcript as JSON (default) or Markdown on stdout\n"
    "  gc        delete KV blocks no session uses (the cache of runs without a\n"
    "            session too) and leftovers of interrupted writes; with\n"
    "            --cache-max SIZE (e.g. 4G, 500M) also evict the least recently\n"
    "            used blocks, named sessions' last, until the store fits\n"
    "  forget    remove everything no named session holds: the KV blocks and\n"
    "            token ids of unnamed chats and runs (every prompt's are kept as\n"
    "            a cache), with the database's freed pages overwritten and\n"
    "            compacted; says how much it removed\n"
    "  search    the saved messages with all of TEXT's words (case and accents\n"
    "            ignored), best match first: session, turn, role and a snippet\n"
    "            with the matches marked ([word], bold on a terminal); --raw takes\n"
    "            SQLite FTS5 query syntax (OR, NOT, \"a phrase\", pref*, NEAR);\n"
    "            --limit N (default 20, 0: all)\n"
    "\n"
    "--json prints one JSON document: an array for list and search, an object\n"
    "for show.\n"
    "Sessions and the index of KV blocks live in $KVCHAT_HOME/" SESS_STORE_DATABASE_NAME ", the\n"
    "blocks in $KVCHAT_HOME/" SESS_STORE_KV_NAME "/.\n"
    "Exit status: 0 ok, 1 usage error, 3 session error.\n";

static int store_fail(struct sess_store *st)
{
    int rc = cmd_fail(CMD_EXIT_SESSION, "%s", sess_errmsg(st));
    sess_store_close(st);
    return rc;
}

static void fmt_time(char *buf, size_t n, int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    localtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M", &tm);
}

static const char *base_name(const char *p)
{
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : p ? p : "";
}

/* ==== option parsing shared by the subcommands ==== */

struct sub_opts {
    bool json, raw;
    int64_t limit;
    const char *format;
    int64_t at_turn;
    const char *cache_max;
};

static int parse_opts(int argc, char **argv, struct sub_opts *o, int *first_arg)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},       {"format", required_argument, NULL, 'f'},
        {"at", required_argument, NULL, 'a'},   {"cache-max", required_argument, NULL, 'c'},
        {"raw", no_argument, NULL, 'r'},        {"limit", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->at_turn = -1;
    o->limit = 20;
    o->format = "json";
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': o->json = true; break;
        case 'f': o->format = optarg; break;
        case 'a': {
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (*end || v < 0)
                return cmd_usage_error(&cmd_sessions_entry, "--at takes a turn count, not '%s'", optarg);
            o->at_turn = v;
            break;
        }
        case 'c': o->cache_max = optarg; break;
        case 'r': o->raw = true; break;
        case 'l': {
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (!*optarg || *end || v < 0)
                return cmd_usage_error(&cmd_sessions_entry, "--limit takes a count, not '%s'", optarg);
            o->limit = v;
            break;
        }
        case 'h': cmd_help(&cmd_sessions_entry); return -2;
        default:
            return cmd_usage_error(&cmd_sessions_entry, "sessions %s: unknown option '%s'", argv[0],
                                   argv[optind - 1]);
        }
    }
    *first_arg = optind;
    return 0;
}

/* ==== subcommands ==== */

static int do_list(struct sess_store *st, const struct sub_opts *o)
{
    struct sess_info *list;
    int64_t n;
    if (sess_list(st, &list, &n))
        return store_fail(st);
    if (o->json) {
        for (int64_t i = 0; i < n; i++) {
            struct sess_info *s = &list[i];
            cmd_json_list_item(stdout, i);
            fputs("{\"name\": ", stdout);
            cmd_json_str(stdout, s->name, strlen(s->name));
            char shown[256];
            const char *name = cmd_model_shown(s->model_path, shown, sizeof shown);
            fputs(", \"model\": ", stdout); /* the store name of a store model, else the path */
            cmd_json_str(stdout, name, strlen(name));
            fputs(", \"model_path\": ", stdout);
            cmd_json_str(stdout, s->model_path, strlen(s->model_path));
            printf(", \"turns\": %" PRId64 ", \"messages\": %" PRId64 ", \"tokens\": %" PRId64
                   ", \"kv_bytes\": %" PRId64 ", \"created\": %" PRId64 ", \"updated\": %" PRId64 "}",
                   s->n_turns, s->n_messages, s->n_tokens, s->kv_bytes, s->created, s->updated);
        }
        cmd_json_list_end(stdout, n);
    } else if (n == 0) {
        fprintf(stderr, "no sessions yet: 'kvchat chat NAME' starts one\n");
    } else {
        printf("%-24s %-28s %6s %8s %10s  %s\n", "NAME", "MODEL", "TURNS", "TOKENS", "KV", "UPDATED");
        for (int64_t i = 0; i < n; i++) {
            char b[32], t[32];
            cmd_fmt_bytes(b, sizeof b, (double)list[i].kv_bytes);
            fmt_time(t, sizeof t, list[i].updated);
            char shown[256];
            const char *mp = cmd_model_shown(list[i].model_path, shown, sizeof shown);
            cmd_term_printf(stdout, "%-24s %-28s %6" PRId64 " %8" PRId64 " %10s  %s\n", list[i].name,
                   mp == shown ? shown : base_name(mp), list[i].n_turns, list[i].n_tokens, b, t);
        }
    }
    sess_list_free(list, n);
    sess_store_close(st);
    return CMD_EXIT_OK;
}

/* how an answer that did not end by itself is marked: " (cut off)" (a
 * remote server's stream broke) or " (interrupted)"; else "" */
static const char *ending(const struct sess_message *m)
{
    if (m->role != SESS_ROLE_ASSISTANT || !m->stop_reason)
        return "";
    return !strcmp(m->stop_reason, "cut") ? " (cut off)" : !strcmp(m->stop_reason, "interrupted") ? " (interrupted)" : "";
}

static int transcript(struct sess_store *st, const char *name, const char *format)
{
    int64_t id;
    struct sess_info info;
    struct sess_message *m;
    int64_t n;
    if (sess_find(st, name, &id) || sess_get(st, id, &info))
        return store_fail(st);
    if (sess_messages(st, id, &m, &n)) {
        sess_info_free(&info);
        return store_fail(st);
    }
    if (!strcmp(format, "json")) {
        fputs("{\"name\": ", stdout);
        cmd_json_str(stdout, info.name, strlen(info.name));
        fputs(", \"model\": ", stdout);
        cmd_json_str(stdout, info.model_path, strlen(info.model_path));
        printf(", \"created\": %" PRId64 ", \"updated\": %" PRId64 ", \"params\": %s, \"messages\": [",
               info.created, info.updated, info.params ? info.params : "null");
        for (int64_t i = 0; i < n; i++) {
            printf("%s{\"role\": \"%s\", \"content\": ", i ? ", " : "", sess_role_name(m[i].role));
            cmd_json_str(stdout, m[i].text, strlen(m[i].text));
            printf(", \"tokens\": %" PRId64, m[i].n_tokens);
            if (m[i].role == SESS_ROLE_ASSISTANT)
                printf(", \"stop_reason\": %s%s%s", m[i].stop_reason ? "\"" : "",
                       m[i].stop_reason ? m[i].stop_reason : "null", m[i].stop_reason ? "\"" : "");
            fputs("}", stdout);
        }
        fputs("]}\n", stdout);
    } else if (!strcmp(format, "markdown")) {
        cmd_term_printf(stdout, "# %s\n\n*Model:* `%s`\n", info.name, base_name(info.model_path));
        for (int64_t i = 0; i < n; i++) {
            const char *r = m[i].role == SESS_ROLE_SYSTEM ? "System"
                            : m[i].role == SESS_ROLE_USER ? "User" : "Assistant";
            cmd_term_printf(stdout, "\n## %s%s\n\n%s\n", r, ending(&m[i]), m[i].text);
        }
    } else { /* text */
        for (int64_t i = 0; i < n; i++)
            cmd_term_printf(stdout, "%s%s%s: %s\n", i ? "\n" : "", sess_role_name(m[i].role), ending(&m[i]), m[i].text);
        if (n == 0)
            cmd_term_printf(stderr, "session '%s' has no messages yet\n", name);
    }
    sess_messages_free(m, n);
    sess_info_free(&info);
    sess_store_close(st);
    return CMD_EXIT_OK;
}

/* a snippet for a terminal or a pipe: the marks as bold (or [ ]), a cut as
 * "...", white space and control characters as one space */
static void print_snippet(const char *snip, bool bold)
{
    bool space = false, term = cmd_term_is(stdout);
    for (const unsigned char *p = (const unsigned char *)snip; *p; p++) {
        if (*p == SESS_MARK_ON || *p == SESS_MARK_OFF) {
            fputs(bold ? (*p == SESS_MARK_ON ? "\033[1m" : "\033[0m") : (*p == SESS_MARK_ON ? "[" : "]"), stdout);
            space = false;
        } else if (*p == SESS_MARK_CUT) {
            fputs("...", stdout);
            space = false;
        } else if (*p < 0x20 || *p == 0x7f || *p == ' ') {
            if (!space)
                putchar(' ');
            space = true;
        } else {
            size_t bad = term ? cmd_term_unsafe((const char *)p, strlen((const char *)p)) : 0;
            if (bad) { /* on a terminal: what could drive it shows as U+FFFD */
                fputs("\xef\xbf\xbd", stdout);
                p += bad - 1;
            } else {
                putchar(*p);
            }
            space = false;
        }
    }
}

/* the snippet as JSON: the text (a cut as "...") and the marks as byte
 * ranges [start, end) of it */
static void json_snippet(const char *snip)
{
    size_t n = strlen(snip), k = 0, nm = 0;
    char *text = malloc(3 * n + 1);
    size_t *marks = malloc((n + 1) * sizeof *marks);
    if (!text || !marks) {
        free(text);
        free(marks);
        fputs("\"snippet\": null, \"marks\": []", stdout);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (snip[i] == SESS_MARK_ON || snip[i] == SESS_MARK_OFF) {
            if ((snip[i] == SESS_MARK_ON) == (nm % 2 == 0))
                marks[nm++] = k;
        } else if (snip[i] == SESS_MARK_CUT) {
            memcpy(text + k, "...", 3);
            k += 3;
        } else {
            text[k++] = snip[i];
        }
    }
    if (nm % 2)
        marks[nm++] = k;
    fputs("\"snippet\": ", stdout);
    cmd_json_str(stdout, text, k);
    fputs(", \"marks\": [", stdout);
    for (size_t i = 0; i + 1 < nm; i += 2)
        printf("%s[%zu, %zu]", i ? ", " : "", marks[i], marks[i + 1]);
    putchar(']');
    free(text);
    free(marks);
}

static int do_search(struct sess_store *st, const struct sub_opts *o, int npos, char **pos)
{
    size_t len = 1;
    for (int i = 0; i < npos; i++)
        len += strlen(pos[i]) + 1;
    char *query = malloc(len);
    if (!query) {
        sess_store_close(st);
        return cmd_fail(CMD_EXIT_SESSION, "out of memory");
    }
    query[0] = 0;
    for (int i = 0; i < npos; i++) {
        if (i)
            strcat(query, " ");
        strcat(query, pos[i]);
    }
    struct sess_hit *h;
    int64_t n;
    int rc = sess_search(st, query, o->raw, o->limit, &h, &n);
    free(query);
    if (rc) {
        /* a query the user wrote wrong is a usage error */
        bool usage = strstr(sess_errmsg(st), "bad search query") || strstr(sess_errmsg(st), "nothing to search");
        rc = cmd_fail(usage ? CMD_EXIT_USAGE : CMD_EXIT_SESSION, "sessions search: %s", sess_errmsg(st));
        sess_store_close(st);
        return rc;
    }
    if (o->json) {
        for (int64_t i = 0; i < n; i++) {
            cmd_json_list_item(stdout, i);
            fputs("{\"session\": ", stdout);
            cmd_json_str(stdout, h[i].session, strlen(h[i].session));
            printf(", \"turn\": %" PRId64 ", \"seq\": %" PRId64 ", \"role\": \"%s\", ", h[i].turn, h[i].seq,
                   sess_role_name(h[i].role));
            json_snippet(h[i].snippet);
            printf(", \"updated\": %" PRId64 "}", h[i].updated);
        }
        cmd_json_list_end(stdout, n);
    } else {
        bool bold = cmd_color_ok(stdout);
        if (n == 0)
            fprintf(stderr, "no saved message matches\n");
        for (int64_t i = 0; i < n; i++) {
            char t[32];
            fmt_time(t, sizeof t, h[i].updated);
            cmd_term_printf(stdout, "%s  turn %" PRId64 "  %s  %s\n  ", h[i].session, h[i].turn, sess_role_name(h[i].role), t);
            print_snippet(h[i].snippet, bold);
            putchar('\n');
        }
    }
    sess_hits_free(h, n);
    sess_store_close(st);
    return CMD_EXIT_OK;
}

static int sessions_exec(int argc, char **argv)
{
    /* `kvchat sessions` and `kvchat sessions --json` list */
    char *list_argv[64] = {argv[0], "list"};
    if (argc < 2 || (argv[1][0] == '-' && strcmp(argv[1], "-h") && strcmp(argv[1], "--help"))) {
        if (argc + 1 > (int)(sizeof list_argv / sizeof *list_argv))
            return cmd_usage_error(&cmd_sessions_entry, "sessions: too many arguments");
        for (int i = 1; i < argc; i++)
            list_argv[i + 1] = argv[i];
        argv = list_argv;
        argc++;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help"))
        return cmd_help(&cmd_sessions_entry);
    if (!strcmp(sub, "ls"))
        sub = "list";
    static const struct {
        const char *name;
        int min, max; /* positional arguments */
    } subs[] = {{"list", 0, 0}, {"show", 1, 1}, {"rm", 1, 1 << 20}, {"rename", 2, 2},
                {"fork", 2, 2}, {"export", 1, 1}, {"gc", 0, 0}, {"search", 1, 1 << 20},
                {"forget", 0, 0}};
    int which = -1;
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++)
        if (!strcmp(sub, subs[i].name))
            which = (int)i;
    if (which < 0)
        return cmd_usage_error(&cmd_sessions_entry, "sessions: unknown subcommand '%s'", sub);
    struct sub_opts o;
    int first = 0, rc = parse_opts(argc - 1, argv + 1, &o, &first);
    if (rc == -2)
        return CMD_EXIT_OK;
    if (rc)
        return rc;
    int npos = argc - 1 - first;
    char **pos = argv + 1 + first;
    if (npos < subs[which].min || npos > subs[which].max)
        return cmd_usage_error(&cmd_sessions_entry, "sessions %s: wrong number of arguments", sub);
    if (strcmp(o.format, "json") && strcmp(o.format, "markdown"))
        return cmd_usage_error(&cmd_sessions_entry, "--format must be json or markdown");
    int64_t cache_max = -1;
    if (o.cache_max && (cache_max = cmd_parse_size(o.cache_max)) < 0)
        return cmd_usage_error(&cmd_sessions_entry, "--cache-max takes a size like 4G, not '%s'",
                               o.cache_max);

    /* a home with nothing stored yet (no index, no KV folder): answered
     * without making a store (a deleted index with its KV files left is
     * opened as usual, which says so) */
    struct sess_store *st;
    char err[5200];
    struct stat sb;
    struct cmd_paths paths;
    cmd_paths_get(&paths);
    bool no_kv = paths.kv_store && lstat(paths.kv_store, &sb) != 0;
    cmd_paths_free(&paths);
    int ex = cmd_store_open_existing(&st, err, sizeof err);
    if (ex == 0 && no_kv) {
        switch (which) {
        case 0:
        case 7:
            if (o.json)
                cmd_json_list_end(stdout, 0);
            else
                fprintf(stderr, which ? "no saved message matches\n" : "no sessions yet: 'kvchat chat NAME' starts one\n");
            return CMD_EXIT_OK;
        case 6:
        case 8:
            fprintf(stderr, "%s: nothing is stored yet\n", sub);
            return CMD_EXIT_OK;
        default:
            return cmd_fail(CMD_EXIT_SESSION, "no session '%s'", pos[0]);
        }
    }
    if (ex == 1 && sess_store_notice(st))
        fprintf(stderr, "kvchat: note: %s\n", sess_store_notice(st));
    if (ex != 1 && (rc = cmd_store_open(true, &st)))
        return rc;
    switch (which) {
    case 0:
        return do_list(st, &o);
    case 1:
        return transcript(st, pos[0], o.json ? "json" : "text");
    case 2:
        for (int i = 0; i < npos; i++)
            if (sess_rm(st, pos[i]))
                return store_fail(st);
        break;
    case 3:
        if (sess_rename(st, pos[0], pos[1]))
            return store_fail(st);
        break;
    case 4:
        if (sess_fork(st, pos[0], pos[1], o.at_turn))
            return store_fail(st);
        break;
    case 5:
        return transcript(st, pos[0], o.format);
    case 7:
        return do_search(st, &o, npos, pos);
    case 8: {
        struct sess_forget_stats f;
        int64_t kept, n_kept;
        if (sess_forget(st, &f) || sess_store_bytes(st, &kept, &n_kept))
            return store_fail(st);
        char b[32], t[32], d[32];
        cmd_fmt_bytes(b, sizeof b, (double)f.gc.bytes);
        cmd_fmt_bytes(t, sizeof t, (double)kept);
        cmd_fmt_bytes(d, sizeof d, (double)f.db_bytes_freed);
        fprintf(stderr,
                "forget: removed %" PRId64 " block file%s (%s) holding %" PRId64 " token id%s%s; the database "
                "is %s smaller; kept %" PRId64 " block%s (%s) of named sessions\n",
                f.gc.blocks, cmd_s(f.gc.blocks), b, f.tokens, cmd_s(f.tokens),
                f.sessions ? " and unnamed sessions" : "", d, n_kept, cmd_s(n_kept), t);
        break;
    }
    case 6: {
        struct sess_gc_stats g, e = {0};
        int64_t kept, n_kept;
        if (sess_gc(st, &g))
            return store_fail(st);
        if (cache_max >= 0 && sess_evict(st, cache_max, &e))
            return store_fail(st);
        if (sess_store_bytes(st, &kept, &n_kept))
            return store_fail(st);
        char b[32], t[32];
        int64_t n = g.blocks + e.blocks;
        cmd_fmt_bytes(b, sizeof b, (double)(g.bytes + e.bytes));
        cmd_fmt_bytes(t, sizeof t, (double)kept);
        fprintf(stderr, "gc: removed %" PRId64 " block file%s, %s freed; %" PRId64 " block%s (%s) kept\n", n,
                n == 1 ? "" : "s", b, n_kept, n_kept == 1 ? "" : "s", t);
        break;
    }
    }
    sess_store_close(st);
    return CMD_EXIT_OK;
}

const struct cmd_entry cmd_sessions_entry = {
    .name = "sessions",
    .summary = "list, show, rm, rename, fork, export, search saved sessions; gc or forget the KV blocks",
    .usage = sessions_usage,
    .exec = sessions_exec,
};
