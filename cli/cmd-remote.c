/*
 * cmd-remote.c - remote models in the command line: `models add-remote`
 * and `models info` of a remote entry. The protocol is models/'s
 * (mdl_remote_*); the engine of a conversation with a remote model is
 * cli/remote.c's.
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "cli/remote.h"
#include "cli/term.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
            if (!cmd_int_arg(optarg, 1, 86400, &p.timeout_s))
                return cmd_usage_error(&cmd_models_entry, "models add-remote: bad --timeout '%s' (seconds, 1 to 86400)", optarg);
            break;
        case 'r':
            if (!cmd_int_arg(optarg, 0, 100, &p.retries))
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
        return cmd_fail(cmd_remote_status_exit(rc), "cannot add remote model '%s': %s", name, err);
    if (note_buf[0])
        cmd_term_printf(stderr, "kvchat: note: %s\n", note_buf);
    char *path;
    struct mdl_remote *r;
    int found = mdl_resolve(name, &path);
    if (found == 0 && mdl_remote_open(path, &r, err, sizeof err) == 0) {
        struct mdl_remote_info in;
        mdl_remote_get_info(r, &in);
        cmd_term_printf(stderr, "kvchat: added remote model '%s': %s at %s%s%s\n", name, in.model, in.url,
                in.api_key_env[0] ? ", key from $" : "", in.api_key_env);
        mdl_remote_close(r);
    }
    free(path);
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
