/*
 * cmd-remote.c - remote models in the command line: `models add-remote`,
 * `models info` of a remote entry, and the session-less turn of `kvchat
 * run -m REMOTE`. The protocol is models/'s (mdl_remote_*); this file parses
 * options, prints, and maps models/'s statuses to exit codes.
 *
 * Text from a server goes to a terminal with its control characters (C0
 * other than newline and tab, DEL, C1) shown as U+FFFD, so that a server
 * cannot drive the terminal; to a pipe or a file it goes as it came.
 */
#include "cli/cmd.h"
#include "cli/repl.h"
#include "cli/wrap.h"
#include "models/mdl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* models/'s statuses as exit codes */
static int remote_exit(int rc)
{
    switch (rc) {
    case MDL_ERR_USAGE: return CMD_EXIT_USAGE;
    case MDL_ERR_NETWORK:
    case MDL_ERR_CUT:
    case MDL_ERR_PROTOCOL: return CMD_EXIT_NETWORK;
    case MDL_ERR_INTERRUPTED: return CMD_EXIT_INTERRUPTED;
    default: return CMD_EXIT_MODEL; /* AUTH, NOT_FOUND, REJECTED, FILE */
    }
}

static void note(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "kvchat: %s\n", msg);
}

static void fmt_time(char *buf, size_t n, int64_t t)
{
    if (t < 0) {
        snprintf(buf, n, "-");
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M UTC", &tm);
}

/* ==== models add-remote ==== */

int cmd_models_add_remote(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'M'},
        {"api-key-env", required_argument, NULL, 'K'},
        {"ca-file", required_argument, NULL, 'C'},
        {"timeout", required_argument, NULL, 'T'},
        {"retries", required_argument, NULL, 'r'},
        {"no-stream", no_argument, NULL, 'S'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct mdl_remote_params p = mdl_remote_default_params();
    int c;
    char *end;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
        switch (c) {
        case 'M': p.model = optarg; break;
        case 'K': p.api_key_env = optarg; break;
        case 'C': p.ca_file = optarg; break;
        case 'S': p.no_stream = true; break;
        case 'f': p.force = true; break;
        case 'T':
            p.timeout_s = (int)strtol(optarg, &end, 10);
            if (*end || p.timeout_s < 1 || p.timeout_s > 86400)
                return cmd_usage_error(&cmd_models_entry, "models add-remote: bad --timeout '%s' (seconds, 1 to 86400)", optarg);
            break;
        case 'r':
            p.retries = (int)strtol(optarg, &end, 10);
            if (*end || p.retries < 0 || p.retries > 100)
                return cmd_usage_error(&cmd_models_entry, "models add-remote: bad --retries '%s'", optarg);
            break;
        case 'h': return cmd_help(&cmd_models_entry);
        default:
            return cmd_usage_error(&cmd_models_entry, "models add-remote: unknown option '%s'",
                                   argv[optind - 1]);
        }
    }
    if (optind != argc - 2)
        return cmd_usage_error(&cmd_models_entry, "models add-remote: expected NAME and URL");
    const char *name = argv[optind], *url = argv[optind + 1];
    char note_buf[1024], err[2048];
    cmd_interrupts_catch();
    p.cancel = &cmd_interrupted;
    int rc = mdl_remote_add(name, url, &p, note_buf, sizeof note_buf, err, sizeof err);
    cmd_interrupts_restore();
    if (rc)
        return cmd_fail(remote_exit(rc), "cannot add remote model '%s': %s", name, err);
    if (note_buf[0])
        fprintf(stderr, "kvchat: note: %s\n", note_buf);
    char path[4096];
    struct mdl_remote *r;
    if (mdl_resolve(name, path, sizeof path) == 0 && mdl_remote_open(path, &r, err, sizeof err) == 0) {
        struct mdl_remote_info in;
        mdl_remote_get_info(r, &in);
        fprintf(stderr, "kvchat: added remote model '%s': %s at %s%s%s\n", name, in.model, in.url,
                in.api_key_env[0] ? ", key from $" : "", in.api_key_env);
        mdl_remote_close(r);
    }
    return CMD_EXIT_OK;
}

/* ==== models info REMOTE ==== */

int cmd_models_info_remote(const char *path, bool json, bool offline)
{
    struct mdl_remote *r;
    char err[2048];
    int rc = mdl_remote_open(path, &r, err, sizeof err);
    if (rc)
        return cmd_fail(CMD_EXIT_MODEL, "cannot read remote model '%s': %s", path, err);
    struct mdl_remote_info in;
    mdl_remote_get_info(r, &in);
    const char *key = in.api_key_env[0] ? getenv(in.api_key_env) : NULL;
    bool key_set = key && *key;
    char **ids = NULL;
    size_t n_ids = 0;
    int srv = 1; /* 1 not asked, 0 answered, <0 failed */
    if (!offline) {
        cmd_interrupts_catch();
        srv = mdl_remote_models(r, &cmd_interrupted, &ids, &n_ids, err, sizeof err);
        cmd_interrupts_restore();
    }
    bool listed = false;
    for (size_t i = 0; i < n_ids; i++)
        listed |= !strcmp(ids[i], in.model);
    FILE *f = stdout;
    if (json) {
        fputs("{\"name\": ", f);
        cmd_json_str(f, in.name, strlen(in.name));
        fputs(", \"remote\": true, \"url\": ", f);
        cmd_json_str(f, in.url, strlen(in.url));
        fputs(", \"model\": ", f);
        cmd_json_str(f, in.model, strlen(in.model));
        fputs(", \"api_key_env\": ", f);
        if (in.api_key_env[0])
            cmd_json_str(f, in.api_key_env, strlen(in.api_key_env));
        else
            fputs("null", f);
        fprintf(f, ", \"api_key_set\": %s, \"tls\": %s, \"ca_file\": ", key_set ? "true" : "false",
                in.tls ? "true" : "false");
        if (in.ca_file[0])
            cmd_json_str(f, in.ca_file, strlen(in.ca_file));
        else
            fputs("null", f);
        fprintf(f, ", \"timeout_s\": %d, \"retries\": %d, \"stream\": %s, \"added\": ", in.timeout_s,
                in.retries, in.stream ? "true" : "false");
        if (in.added >= 0)
            fprintf(f, "%" PRId64, in.added);
        else
            fputs("null", f);
        fputs(", \"entry\": ", f);
        cmd_json_str(f, path, strlen(path));
        if (srv == 0) {
            fputs(", \"server\": {\"reachable\": true, \"models\": [", f);
            for (size_t i = 0; i < n_ids; i++) {
                if (i)
                    fputs(", ", f);
                cmd_json_str(f, ids[i], strlen(ids[i]));
            }
            fprintf(f, "], \"serves_model\": %s}", listed ? "true" : "false");
        } else if (srv < 0) {
            fputs(", \"server\": {\"reachable\": false, \"error\": ", f);
            cmd_json_str(f, err, strlen(err));
            fputs("}", f);
        }
        fputs("}\n", f);
    } else {
        char added[64];
        fmt_time(added, sizeof added, in.added);
        fprintf(f, "name:           %s (remote)\n", in.name);
        fprintf(f, "url:            %s\n", in.url);
        fprintf(f, "model:          %s\n", in.model);
        if (in.api_key_env[0])
            fprintf(f, "api key:        from $%s (%s)\n", in.api_key_env, key_set ? "set" : "not set");
        else
            fprintf(f, "api key:        none\n");
        if (in.tls)
            fprintf(f, "transport:      https, certificates checked against %s\n",
                    in.ca_file[0] ? in.ca_file : "$KVCHAT_CA_FILE or the system's CA bundle");
        else
            fprintf(f, "transport:      plain http (a loopback or private address; not encrypted)\n");
        fprintf(f, "timeout:        %d s without data; %d retries after 408, 429, 5xx\n", in.timeout_s,
                in.retries);
        fprintf(f, "streaming:      %s\n", in.stream ? "yes" : "no (whole answers)");
        fprintf(f, "added:          %s\n", added);
        fprintf(f, "entry:          %s\n", path);
        if (srv == 0) {
            fprintf(f, "server:         serves %zu model%s:", n_ids, n_ids == 1 ? "" : "s");
            for (size_t i = 0; i < n_ids && i < 50; i++)
                fprintf(f, "%s %s", i ? "," : "", ids[i]);
            fprintf(f, "%s\n", n_ids > 50 ? ", ..." : "");
            if (!listed)
                fprintf(f, "                (the server does not list '%s')\n", in.model);
        } else if (srv < 0) {
            fprintf(f, "server:         cannot list its models: %s\n", err);
        }
    }
    mdl_strv_free(ids, n_ids);
    mdl_remote_close(r);
    return CMD_EXIT_OK;
}

/* ==== kvchat run -m REMOTE ==== */

struct sink {
    bool json, tty, broken;
    char *buf;
    size_t len, cap;
    struct wrap *wrap; /* on a terminal: the answer is word-wrapped (NULL: --no-wrap) */
};

static int put_tty(struct sink *s, const char *p, size_t n)
{
    return s->wrap ? wrap_write(s->wrap, repl_width(1), p, n) : fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

/* write n bytes of valid UTF-8 to a terminal, control characters as U+FFFD */
static int write_tty(struct sink *sk, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        bool c0 = p[i] < 0x20 && p[i] != '\n' && p[i] != '\t';
        bool c1 = p[i] == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] < 0xa0;
        if (!c0 && p[i] != 0x7f && !c1)
            continue;
        if (put_tty(sk, s + from, i - from) || put_tty(sk, "\xef\xbf\xbd", 3))
            return -1;
        i += c1;
        from = i + 1;
    }
    return put_tty(sk, s + from, n - from);
}

static int on_text(void *ud, const char *text, size_t n)
{
    struct sink *s = ud;
    if (s->json)
        return 0; /* the whole answer comes back in the result */
    int bad = s->tty ? write_tty(s, text, n) : fwrite(text, 1, n, stdout) != n;
    if (bad || fflush(stdout) != 0) {
        s->broken = true; /* the reader went away (| head): stop quietly */
        return 1;
    }
    return 0;
}

static void json_count(FILE *f, const char *key, int64_t v)
{
    if (v >= 0)
        fprintf(f, ", \"%s\": %" PRId64, key, v);
    else
        fprintf(f, ", \"%s\": null", key);
}

static void json_rate(FILE *f, const char *key, double v)
{
    if (v >= 0)
        fprintf(f, ", \"%s\": %.3f", key, v);
    else
        fprintf(f, ", \"%s\": null", key);
}

/* the options that a remote model cannot use, if given: named once */
static void note_unsent(const struct cmd_opts *o, const char *name)
{
    static const struct { enum cmd_opt id; const char *opt; } local_only[] = {
        {CMD_OPT_TOP_K, "--top-k"}, {CMD_OPT_MIN_P, "--min-p"},
        {CMD_OPT_REPEAT_PENALTY, "--repeat-penalty"}, {CMD_OPT_REPEAT_LAST_N, "--repeat-last-n"},
        {CMD_OPT_THREADS, "-t"}, {CMD_OPT_CTX_SIZE, "-c"}, {CMD_OPT_KV_TYPE, "--kv-type"},
        {CMD_OPT_TEMPLATE, "--template"}, {CMD_OPT_SPECIAL, "--special"},
        {CMD_OPT_NO_CACHE, "--no-cache"}, {CMD_OPT_CACHE_MAX, "--cache-max"},
    };
    char list[256] = "";
    size_t k = 0;
    for (size_t i = 0; i < sizeof local_only / sizeof *local_only; i++)
        if (o->given & (1ull << local_only[i].id))
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", local_only[i].opt);
    if (k)
        fprintf(stderr, "kvchat: note: %s: not for remote model '%s' (the server decides); ignored\n",
                list, name);
}

int cmd_run_remote(const struct cmd_opts *o, const char *path, const char *prompt, size_t len,
                   bool json)
{
    struct mdl_remote *r;
    char err[4096];
    int rc = mdl_remote_open(path, &r, err, sizeof err);
    if (rc)
        return cmd_fail(CMD_EXIT_MODEL, "cannot read remote model '%s': %s", path, err);
    struct mdl_remote_info in;
    mdl_remote_get_info(r, &in);
    note_unsent(o, in.name);

    /* what the server is asked: the options given on the command line or
     * in the config file; the rest is the server's default */
    uint64_t set = o->given | o->configured;
    struct mdl_chat_params p = mdl_chat_default_params();
    p.temp_set = set & (1ull << CMD_OPT_TEMP);
    p.temp = o->sampling.temp;
    p.top_p_set = set & (1ull << CMD_OPT_TOP_P);
    p.top_p = o->sampling.top_p;
    p.presence_penalty_set = set & (1ull << CMD_OPT_PRESENCE_PENALTY);
    p.presence_penalty = o->sampling.presence_penalty;
    p.seed_set = o->seed_set;
    p.seed = o->sampling.seed;
    p.max_tokens = o->n_predict;
    p.cancel = &cmd_interrupted;
    p.note = note;

    struct mdl_message msgs[2];
    size_t n = 0;
    if (o->system && o->system[0])
        msgs[n++] = (struct mdl_message){MDL_ROLE_SYSTEM, o->system, strlen(o->system)};
    msgs[n++] = (struct mdl_message){MDL_ROLE_USER, prompt, len};

    struct sink sink = {.json = json, .tty = isatty(1)};
    struct wrap wrap;
    if (sink.tty && !json && o->wrap) {
        wrap_init(&wrap, stdout);
        sink.wrap = &wrap;
    }
    struct mdl_chat_result res;
    cmd_interrupts_catch();
    signal(SIGPIPE, SIG_IGN);
    rc = mdl_remote_chat(r, msgs, n, &p, on_text, &sink, &res, err, sizeof err);
    if (sink.wrap) {
        if (wrap_end(sink.wrap, repl_width(1)) || fflush(stdout))
            sink.broken = true;
        wrap_free(sink.wrap);
    }
    cmd_interrupts_restore();
    if (sink.broken && rc == MDL_ERR_INTERRUPTED && !cmd_interrupted)
        rc = 0; /* the reader left: nothing to report */
    bool answered = rc == 0 || rc == MDL_ERR_INTERRUPTED || rc == MDL_ERR_CUT;
    if (json && answered) {
        FILE *f = stdout;
        fputs("{\"answer\": ", f);
        cmd_json_str(f, res.text, res.len);
        fputs(", \"session\": null, \"model\": ", f);
        cmd_json_str(f, in.name, strlen(in.name));
        int64_t prefilled = res.prompt_tokens >= 0 && res.cached_tokens >= 0 &&
                                    res.prompt_tokens >= res.cached_tokens
                                ? res.prompt_tokens - res.cached_tokens
                                : -1;
        json_count(f, "prompt_tokens", res.prompt_tokens);
        json_count(f, "cached_tokens", res.cached_tokens);
        json_count(f, "prefilled_tokens", prefilled);
        json_count(f, "generated_tokens", res.completion_tokens);
        json_rate(f, "ttft_ms", res.ttft_ms);
        json_rate(f, "prefill_tok_s", res.prompt_tok_s);
        json_rate(f, "decode_tok_s", res.decode_tok_s);
        fprintf(f, ", \"stop_reason\": \"%s\", \"restore_ms\": null, \"remote\": true, \"url\": ",
                res.stop_reason);
        cmd_json_str(f, in.url, strlen(in.url));
        fputs(", \"server_model\": ", f);
        if (res.server_model[0])
            cmd_json_str(f, res.server_model, strlen(res.server_model));
        else
            fputs("null", f);
        fprintf(f, ", \"attempts\": %d", res.attempts);
        if (rc == MDL_ERR_CUT) {
            fputs(", \"error\": ", f);
            cmd_json_str(f, err, strlen(err));
        }
        fputs("}\n", f);
        fflush(f);
    } else if (answered && !sink.broken && sink.tty && res.len) {
        fputc('\n', stdout);
    }
    if (o->verbose && answered) {
        fprintf(stderr, "kvchat: remote '%s' (%s): ", in.name, res.server_model[0] ? res.server_model : in.model);
        if (res.prompt_tokens >= 0)
            fprintf(stderr, "%" PRId64 " prompt tokens", res.prompt_tokens);
        else
            fprintf(stderr, "prompt tokens not reported");
        if (res.cached_tokens >= 0)
            fprintf(stderr, " (%" PRId64 " from the server's cache)", res.cached_tokens);
        if (res.completion_tokens >= 0)
            fprintf(stderr, ", %" PRId64 " generated", res.completion_tokens);
        fprintf(stderr, "; first text after %.1f ms, %.1f ms in all", res.ttft_ms, res.total_ms);
        if (res.decode_tok_s >= 0)
            fprintf(stderr, ", %.1f tok/s", res.decode_tok_s);
        fprintf(stderr, "; stop: %s\n", res.stop_reason);
    }
    int code = CMD_EXIT_OK;
    if (rc == MDL_ERR_INTERRUPTED)
        code = CMD_EXIT_INTERRUPTED;
    else if (rc == MDL_ERR_CUT)
        code = cmd_fail(CMD_EXIT_NETWORK, "remote model '%s': the answer was cut off after %zu bytes: %s",
                        in.name, res.len, err);
    else if (rc)
        code = cmd_fail(remote_exit(rc), "remote model '%s': %s", in.name, err);
    mdl_chat_result_free(&res);
    mdl_remote_close(r);
    return code;
}
