/*
 * format.c - constrained output for chat and run: --format json,
 * --json-schema FILE|JSON and --grammar FILE (and /set format, schema,
 * grammar), turned into one compiled grammar before the model loads, so a
 * bad schema or grammar is refused (exit 1) with nothing else done.
 *
 * A format is kept with its text (the schema or the GBNF), which is what a
 * session saves; the grammar is compiled again from it when a session is
 * opened.
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "sessions/sess.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cmd_format_free(struct cmd_format *f)
{
    llm_grammar_free(f->grammar);
    free(f->source);
    memset(f, 0, sizeof *f);
}

int cmd_format_load(struct cmd_format *f, const char *kind, const char *arg, char *err, size_t n)
{
    struct cmd_format nf = {0};
    char *text = NULL, *gbnf = NULL;
    size_t len = 0;
    if (!strcmp(kind, "format")) {
        if (!strcmp(arg, "off") || !arg[0]) {
            cmd_format_free(f);
            return 0;
        }
        if (strcmp(arg, "json")) {
            snprintf(err, n, "bad value '%s' for format: expected json (or off)", arg);
            return CMD_EXIT_USAGE;
        }
        snprintf(nf.kind, sizeof nf.kind, "json");
        nf.json = true;
        text = strdup(llm_grammar_json());
        if (!text) {
            snprintf(err, n, "out of memory");
            return CMD_EXIT_USAGE;
        }
        len = strlen(text);
        gbnf = text;
    } else if (!strcmp(kind, "schema") || !strcmp(kind, "grammar")) {
        bool schema = !strcmp(kind, "schema");
        const char *p = arg;
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (schema && (*p == '{' || *p == '[' || !strcmp(p, "true"))) { /* the schema itself */
            text = strdup(arg);
            len = text ? strlen(text) : 0;
        } else {
            FILE *fp = fopen(arg, "rb");
            if (!fp) {
                snprintf(err, n, "cannot read the %s file '%s': %s", schema ? "schema" : "grammar", arg,
                         strerror(errno));
                return CMD_EXIT_MODEL;
            }
            int r = cmd_read_all(fp, 4 << 20, &text, &len);
            fclose(fp);
            if (r != CMD_READ_OK || strlen(text) != len) {
                free(text);
                snprintf(err, n, "cannot read the %s file '%s': %s", schema ? "schema" : "grammar", arg,
                         r == CMD_READ_TOO_LARGE ? "larger than 4 MiB" : r == CMD_READ_OK ? "it holds a NUL byte"
                                                                           : "read error");
                return CMD_EXIT_MODEL;
            }
        }
        if (!text) {
            snprintf(err, n, "out of memory");
            return CMD_EXIT_USAGE;
        }
        snprintf(nf.kind, sizeof nf.kind, "%s", kind);
        nf.json = schema;
        if (schema) {
            char why[512];
            if (llm_json_schema_to_grammar(text, len, &gbnf, why, sizeof why)) {
                snprintf(err, n, "%s", why);
                free(text);
                return CMD_EXIT_USAGE;
            }
        } else {
            gbnf = text;
        }
    } else {
        snprintf(err, n, "unknown format kind '%s'", kind);
        return CMD_EXIT_USAGE;
    }
    char why[512];
    int rc = llm_grammar_parse(gbnf, strlen(gbnf), &nf.grammar, why, sizeof why);
    if (gbnf != text)
        free(gbnf);
    if (rc) {
        snprintf(err, n, "%s%s", nf.json ? "the schema's grammar: " : "", why);
        free(text);
        return CMD_EXIT_USAGE;
    }
    nf.source = text;
    cmd_format_free(f);
    *f = nf;
    return 0;
}

void cmd_format_stats(const struct sess_turn_stats *ts, FILE *out)
{
    if (!ts->grammar)
        return;
    int64_t walked = ts->grammar_masks - ts->grammar_cache_hits;
    fprintf(out, "kvchat: grammar: %s; %lld masks (%lld from the cache), %lld trie nodes visited "
                 "(%.0f per token), %lld matcher steps\n",
            ts->grammar_complete ? "complete" : "incomplete", (long long)ts->grammar_masks,
            (long long)ts->grammar_cache_hits, (long long)ts->grammar_nodes,
            ts->grammar_masks ? (double)ts->grammar_nodes / (double)ts->grammar_masks : 0.0,
            (long long)ts->grammar_steps);
    (void)walked;
}

int cmd_format_set(struct cmd_format *f, struct sess_conv *conv, bool remote, const char *key, const char *value,
                   FILE *out)
{
    char err[1024];
    if (remote && strcmp(value, "off")) {
        fprintf(stderr, "kvchat: /set %s is for local models: a remote server samples its own answers\n", key);
        return 0;
    }
    if (strcmp(key, "format") && !strcmp(value, "off")) {
        fprintf(stderr, "kvchat: /set format off ends a format\n");
        return 0;
    }
    struct cmd_format nf = {0};
    if (cmd_format_load(&nf, key, value, err, sizeof err)) {
        fprintf(stderr, "kvchat: %s\n", err);
        return 0;
    }
    /* the conversation's from the next answer on, and the session's (saved) */
    if (sess_conv_keep_format(conv, nf.kind[0] ? nf.kind : NULL, nf.source)) {
        fprintf(stderr, "kvchat: %s\n", sess_conv_errmsg(conv));
        cmd_format_free(&nf);
        return 0;
    }
    cmd_format_free(f);
    *f = nf;
    if (!f->kind[0])
        fprintf(out, "format: off (answers are free text)\n");
    else
        fprintf(out, "format: %s (every answer %s)\n", f->kind,
                f->json ? (strcmp(f->kind, "json") ? "valid under the schema" : "a JSON value")
                        : "a string of the grammar");
    return 0;
}
