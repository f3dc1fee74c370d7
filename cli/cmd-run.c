/*
 * cmd-run.c - `kvchat run`: one turn for a script. The prompt comes from the
 * arguments and/or stdin (stdin first, as llm does); only the answer goes to
 * stdout, streamed as it is generated (or one JSON object with --json);
 * diagnostics go to stderr. The KV cache of any prompt computed before (by
 * any command) is read back from the block store instead of computed; with
 * -s NAME the turn is appended to a named session. -f FILE sends a text
 * file instead of stdin. On a terminal the answer is word-wrapped. A
 * remote model is the same conversation with a remote engine
 * (cli/cmd-remote.c): no KV blocks, the server's figures in --json.
 */
#include "cli/cmd.h"
#include "cli/conv.h"
#include "cli/io.h"
#include "cli/progress.h"
#include "cli/remote.h"
#include "cli/term.h"
#include "cli/wrap.h"
#include "models/mdl.h"
#include "sessions/sess.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char run_usage[] =
    "usage: kvchat run [-s SESSION | -c] [-m MODEL] [-f FILE]... [--json] [options] [PROMPT...]\n"
    "\n"
    "One turn: the answer to PROMPT (or to all of stdin when no PROMPT is given;\n"
    "with both, stdin comes first, then PROMPT) goes to stdout, nothing else.\n"
    "\n"
    "The KV cache of every prompt is kept on disk as blocks: a prompt that\n"
    "shares a prefix with one computed before (by any command) computes only\n"
    "the rest. Without -s those blocks and the prompt's token ids stay in the\n"
    "store as a cache until evicted or collected ('kvchat sessions forget'\n"
    "removes them); --private reads the blocks and writes nothing.\n"
    "\n"
    "  -f, --file FILE          send FILE's text (before PROMPT; stdin is then not\n"
    "                           read, unless FILE is '-'); again for more files.\n"
    "                           Binary files and files too large for the context\n"
    "                           are refused; the token count is noted on stderr\n"
    "                           when it is a terminal, or with -v\n"
    "  -s, --session NAME       append the turn to session NAME (a new one is made\n"
    "                           with its first answer), resuming its KV cache\n"
    "                           from disk with no re-prefill\n"
    "                           (with --no-cache: the session is recomputed and\n"
    "                           left unchanged, for comparison)\n"
    "  -c, --continue           -s with the session changed last (its last turn)\n"
    "      --json               print one JSON object: answer, reasoning (the\n"
    "                           <think> span, or null), session, model, prompt_tokens,\n"
    "                           cached_tokens, prefilled_tokens,\n"
    "                           generated_tokens, ttft_ms, prefill_tok_s,\n"
    "                           decode_tok_s, stop_reason, drafted_tokens,\n"
    "                           accepted_tokens (of the drafted, part of\n"
    "                           generated_tokens), draft_passes, restore_ms,\n"
    "                           restored_tokens, restored_blocks, blocks_written,\n"
    "                           restored_snapshot_pos (a hybrid model's recurrent-\n"
    "                           state snapshot the turn resumed from, or null);\n"
    "                           with --format json or --json-schema also parsed\n"
    "                           (the answer as JSON, or null when incomplete)\n"
    CMD_OPTS_HELP
    "\n"
    "Without -m, a first word of two or more that names a store model is the\n"
    "model (ollama's 'run MODEL PROMPT'): 'kvchat run g3-q8 hi' asks g3-q8 \"hi\".\n"
    "With -s, --system (or --system-file) is for a new session: an existing\n"
    "session with another system prompt is refused (exit 1), unchanged.\n"
    "The prompt (stdin and PROMPT) may hold at most " CMD_INPUT_MAX_TEXT ".\n"
    "\n"
    "MODEL may be a remote model ('kvchat models add-remote'): the turn then goes to\n"
    "its server (with -s, after the session's messages); --temp, --top-p,\n"
    "--presence-penalty, --seed, -n and --stop are sent, cached_tokens is what the\n"
    "server took from its prefix cache, and --json adds remote, url, server_model,\n"
    "attempts (and error for a cut answer, kept in the session marked as cut).\n"
    "\n"
    "Exit status: 0 ok, 1 usage, 2 model or file error (for a remote model also a\n"
    "refused key, an unknown model or a rejected request), 3 session error,\n"
    "4 network error (cannot connect, timed out, the server failing or busy, an\n"
    "answer cut off or malformed), 5 the answer is incomplete under --format,\n"
    "--json-schema or --grammar (-n or the context ran out before the value\n"
    "closed: stop_reason length; printed and kept all the same), 6 the answer\n"
    "filled the context window and stops there (stop_reason context_full; said on\n"
    "stderr, printed and kept all the same), 130 interrupted by SIGINT, SIGTERM or\n"
    "SIGHUP (the partial answer is printed, with --json too, and kept in the session).\n";

static volatile sig_atomic_t interrupted;
static struct sess_restore_stats attach_rs; /* of the session's KV cache, for --json */
static bool run_parsed; /* answers are JSON values (--format json, --json-schema, or the session's): "parsed" */
static struct cmd_progress prog; /* the progress line of a long prefill or restore */

/* the answer's text: the progress line goes before the first */
struct run_text {
    struct cmd_answer *ans;
    struct cmd_progress *prog;
};
static int run_text(void *ud, const char *text, size_t n)
{
    struct run_text *rt = ud;
    if (n)
        cmd_progress_end(rt->prog);
    return cmd_answer_text(rt->ans, text, n);
}

/* SIGINT, SIGTERM (as `timeout` sends) and SIGHUP all end the answer
 * where it is: the partial answer is printed and saved, exit 130 */
/* Between the prompt read and the turn's start (opening the model, the
 * store, hashing a new model file, restoring its KV), a signal ends the
 * process at once: nothing is being saved then, and the store is made to
 * survive a kill at any moment. */
static volatile sig_atomic_t exit_at_signal;
static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
    if (exit_at_signal) {
        static const char msg[] = "kvchat: interrupted before the answer began: the message was not sent\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(130);
    }
}

static void signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_signal; /* no SA_RESTART: a blocked read of stdin ends */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* a count or a rate, null when not known (a remote server's unreported figures) */
static void json_num(const char *key, double v, bool whole)
{
    if (v < 0)
        printf(", \"%s\": null", key);
    else if (whole)
        printf(", \"%s\": %lld", key, (long long)v);
    else
        printf(", \"%s\": %.3f", key, v);
}

static void print_json(const struct cmd_answer *ans, const char *session, const struct cmd_llm *l,
                       const struct sess_turn_stats *ts, const char *error)
{
    char shown[256];
    const char *model = l->remote ? cmd_remote_name(l->remote) : cmd_model_shown(l->path, shown, sizeof shown);
    printf("{\"answer\": ");
    cmd_json_str(stdout, ans->text[0].s ? ans->text[0].s : "", ans->text[0].len);
    printf(", \"reasoning\": ");
    if (ans->text[1].s)
        cmd_json_str(stdout, ans->text[1].s, ans->text[1].len);
    else
        printf("null");
    printf(", \"session\": ");
    if (session)
        cmd_json_str(stdout, session, strlen(session));
    else
        printf("null");
    printf(", \"model\": ");
    cmd_json_str(stdout, model, strlen(model));
    json_num("prompt_tokens", (double)ts->prompt_tokens, true);
    json_num("cached_tokens", (double)ts->cached_tokens, true);
    json_num("prefilled_tokens", (double)ts->prefilled_tokens, true);
    json_num("generated_tokens", (double)ts->generated_tokens, true);
    json_num("ttft_ms", ts->ttft_ms, false);
    json_num("prefill_tok_s", ts->prefill_tok_s, false);
    json_num("decode_tok_s", ts->decode_tok_s, false);
    printf(", \"stop_reason\": \"%s\"", ts->stop_reason ? ts->stop_reason : "interrupted");
    printf(", \"drafted_tokens\": %lld, \"accepted_tokens\": %lld, \"draft_passes\": %lld",
           (long long)ts->drafted_tokens, (long long)ts->accepted_tokens, (long long)ts->draft_passes);
    if (l->remote) { /* no KV here: the server's cache is cached_tokens */
        printf(", \"restore_ms\": null, \"restored_tokens\": 0, \"restored_blocks\": 0, \"blocks_written\": 0");
        cmd_remote_json(l->remote, stdout);
    } else {
        printf(", \"restore_ms\": %.3f, \"restored_tokens\": %lld, \"restored_blocks\": %lld, "
               "\"blocks_written\": %lld",
               attach_rs.ms + ts->restore_ms, (long long)(attach_rs.restored_tokens + ts->restored_tokens),
               (long long)(attach_rs.restored_blocks + ts->restored_blocks), (long long)ts->blocks_written);
    }
    /* a hybrid model's snapshot the turn resumed from (the turn's own restore, else the session's) */
    int64_t snap = ts->snapshot_pos >= 0 ? ts->snapshot_pos : l->remote ? -1 : attach_rs.snapshot_pos;
    if (snap > 0)
        printf(", \"restored_snapshot_pos\": %lld", (long long)snap);
    else
        printf(", \"restored_snapshot_pos\": null");
    if (error) {
        printf(", \"error\": ");
        cmd_json_str(stdout, error, strlen(error));
    }
    if (run_parsed) { /* the answer is a whole JSON value, or null */
        printf(", \"parsed\": ");
        if (ts->grammar_complete && ans->text[0].s)
            fwrite(ans->text[0].s, 1, ans->text[0].len, stdout);
        else
            printf("null");
    }
    printf("}\n");
}

/* the texts of the -f files, each without its trailing newlines, joined
 * by one; *bytes the files' sizes: 0, or an exit code with the reason in err */
static int read_files(const char **files, int n, char **out, size_t *len, size_t *bytes, char *err,
                      size_t err_size)
{
    struct base_buf acc = {0};
    *bytes = 0;
    for (int i = 0; i < n; i++) {
        char *t;
        size_t tl;
        if (cmd_read_text(files[i], CMD_INPUT_MAX, &t, &tl, err, err_size)) {
            base_buf_free(&acc);
            return CMD_EXIT_MODEL;
        }
        *bytes += tl;
        while (tl && (t[tl - 1] == '\n' || t[tl - 1] == '\r'))
            tl--;
        bool big = false;
        if ((acc.len && cmd_buf_add(&acc, "\n", 1, CMD_INPUT_MAX - 2, &big)) ||
            cmd_buf_add(&acc, t, tl, CMD_INPUT_MAX - 2, &big) || (!acc.s && base_buf_add(&acc, "", 0))) {
            snprintf(err, err_size, "cannot read '%s': %s", files[i],
                     big ? "the files are too large together" : "out of memory");
            free(t);
            base_buf_free(&acc);
            return CMD_EXIT_MODEL;
        }
        free(t);
    }
    *out = acc.s;
    *len = acc.len;
    return 0;
}

/* what the command line asks for */
struct run_args {
    const char *session;
    bool json, cont;
    char **words;       /* PROMPT's words */
    const char **files; /* -f FILE */
    int n_words, n_files;
};

/* argv into a (the common options into o): 0, or an exit code (printed);
 * -1: --help was printed */
static int parse_args(int argc, char **argv, struct cmd_opts *o, struct run_args *a)
{
    a->words = calloc((size_t)argc + 1, sizeof *a->words);
    a->files = calloc((size_t)argc + 1, sizeof *a->files);
    if (!a->words || !a->files)
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    for (int i = 1; i < argc; i++) {
        int r = cmd_opts_take(&cmd_run_entry, o, argc, argv, &i);
        if (r < 0)
            return CMD_EXIT_USAGE;
        if (r > 0) {
            i--;
            continue;
        }
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            cmd_help(&cmd_run_entry);
            return -1;
        } else if (!strcmp(s, "--json")) {
            a->json = true;
        } else if (!strcmp(s, "-s") || !strcmp(s, "--session")) {
            if (i + 1 >= argc)
                return cmd_usage_error(&cmd_run_entry, "%s needs a session name", s);
            a->session = argv[++i];
        } else if (!strncmp(s, "--session=", 10)) {
            a->session = s + 10;
        } else if (!strcmp(s, "-c") || !strcmp(s, "--continue")) {
            a->cont = true;
        } else if (!strcmp(s, "-f") || !strcmp(s, "--file")) {
            if (i + 1 >= argc)
                return cmd_usage_error(&cmd_run_entry, "%s needs a file name", s);
            a->files[a->n_files++] = argv[++i];
        } else if (!strncmp(s, "--file=", 7)) {
            a->files[a->n_files++] = s + 7;
        } else if (!strcmp(s, "--")) {
            while (++i < argc)
                a->words[a->n_words++] = argv[i];
        } else if (s[0] == '-' && s[1]) {
            return cmd_usage_error(&cmd_run_entry, "run: unknown option '%s'", s);
        } else {
            a->words[a->n_words++] = argv[i];
        }
    }
    if (a->cont && a->session)
        return cmd_usage_error(&cmd_run_entry, "run: -c/--continue and -s: give one of them");
    if (o->private_mode && (a->session || a->cont))
        return cmd_usage_error(&cmd_run_entry, "run: a private run (--private, or 'private = true' in the config "
                                               "file) saves nothing, so it takes no session: --no-private");
    /* ollama's habit, `run MODEL PROMPT`: without -m, a first word of
     * several that names a store model is the model */
    if (!o->model && a->n_words >= 2 && cmd_is_store_model(a->words[0])) {
        o->model = a->words[0];
        memmove(a->words, a->words + 1, (size_t)(a->n_words - 1) * sizeof *a->words);
        a->n_words--;
    }
    return 0;
}

/* stdin as the prompt's start (alone: no PROMPT words follow): 0, or an
 * exit code (printed) */
static int read_stdin(bool alone, char **in, size_t *in_len)
{
    if (alone && isatty(0))
        cmd_term_printf(stderr, "kvchat: reading the prompt from stdin (end with Ctrl-D)\n");
    int r = cmd_read_all(stdin, CMD_INPUT_MAX, in, in_len);
    if (r == CMD_READ_OK && strlen(*in) != *in_len)
        r = 1;
    if (r != CMD_READ_OK) {
        int e = errno;
        free(*in);
        *in = NULL;
        if (r == CMD_READ_ERROR && e == EINTR && interrupted)
            return CMD_EXIT_INTERRUPTED;
        if (r == CMD_READ_TOO_LARGE)
            return cmd_fail(CMD_EXIT_MODEL, "cannot read the prompt from stdin: it is larger than %s",
                            CMD_INPUT_MAX_TEXT);
        if (r > 0)
            return cmd_fail(CMD_EXIT_MODEL, "cannot use stdin as the prompt: it holds a NUL byte");
        return cmd_fail(CMD_EXIT_MODEL, "cannot read stdin: %s", strerror(e));
    }
    /* `echo hi | kvchat run` asks the same as `kvchat run hi` */
    while (*in_len && ((*in)[*in_len - 1] == '\n' || (*in)[*in_len - 1] == '\r'))
        (*in)[--*in_len] = 0;
    return 0;
}

/* The prompt: the files, else stdin (unless it is a terminal and PROMPT
 * was given), then PROMPT. 0 with *prompt (malloc'd), the files' part's
 * length and bytes; or an exit code (printed). */
static int read_prompt(const struct run_args *a, struct base_buf *prompt, size_t *files_len, size_t *file_bytes)
{
    char err[4400];
    int rc = 0;
    *files_len = *file_bytes = 0;
    if (a->n_files) {
        if ((rc = read_files(a->files, a->n_files, &prompt->s, &prompt->len, file_bytes, err, sizeof err)))
            return cmd_fail(rc, "%s", err);
        prompt->cap = prompt->len + 1;
        *files_len = prompt->len;
    } else if (a->n_words == 0 || !isatty(0)) {
        if ((rc = read_stdin(a->n_words == 0, &prompt->s, &prompt->len)))
            return rc;
        prompt->cap = prompt->len + 1;
    }
    bool big = false;
    for (int i = 0; i < a->n_words && !rc; i++) {
        const char *sep = !prompt->len || (i == 0 && prompt->s[prompt->len - 1] == '\n') ? "" : i == 0 ? "\n" : " ";
        rc = cmd_buf_add(prompt, sep, strlen(sep), CMD_INPUT_MAX, &big) ||
             cmd_buf_add(prompt, a->words[i], strlen(a->words[i]), CMD_INPUT_MAX, &big);
    }
    if (rc && big)
        return cmd_fail(CMD_EXIT_MODEL, "cannot use the prompt: it is larger than %s", CMD_INPUT_MAX_TEXT);
    if (rc)
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    if (prompt->len == 0)
        return cmd_usage_error(&cmd_run_entry, "run: the prompt is empty");
    return 0;
}

/* after the session is attached: its notes, and --system checked against
 * it (a script cannot answer, so run refuses and changes nothing): 0 or an
 * exit code (printed) */
static int session_ready(const struct cmd_conv *c, const struct cmd_opts *o)
{
    const char *session = c->session;
    const struct sess_restore_stats *rs = &c->rs;
    if (rs->first_problem[0])
        cmd_term_printf(stderr, "kvchat: %s\n", rs->first_problem);
    const char *has = NULL;
    if (sess_conv_n_messages(c->conv) == 0 || sess_conv_message(c->conv, 0, &has) != SESS_ROLE_SYSTEM)
        has = NULL;
    const char *want = o->system && o->system[0] ? o->system : NULL;
    if (want && (!has || strcmp(has, want)))
        return cmd_usage_error(&cmd_run_entry,
                               "session '%s' %s; --system%s is only for a new session (to change it: "
                               "'kvchat chat %s', then /system TEXT)",
                               session, has ? "has another system prompt" : "has no system prompt",
                               o->system_file ? "-file" : "", session);
    if (o->verbose && c->l.remote)
        cmd_term_printf(stderr, "kvchat: session '%s': %lld message%s so far\n", session,
                        (long long)sess_conv_n_messages(c->conv), cmd_s(sess_conv_n_messages(c->conv)));
    else if (o->verbose)
        cmd_term_printf(stderr, "kvchat: session '%s': %lld token%s restored from %lld block%s, %lld to compute, "
                        "in %.1f ms\n",
                        session, (long long)rs->restored_tokens, cmd_s(rs->restored_tokens),
                        (long long)rs->restored_blocks, cmd_s(rs->restored_blocks), (long long)rs->missing_tokens,
                        rs->ms);
    if (o->no_cache)
        cmd_term_printf(stderr, "kvchat: --no-cache: session '%s' is read and computed again, not saved\n",
                        session);
    return 0;
}

/* the prompt fits in what the context has left (the files' text, the
 * prompt's start, counted and noted): 0 or an exit code (printed) */
static int prompt_fits(struct cmd_conv *c, const struct cmd_opts *o, const struct run_args *a,
                       const struct base_buf *prompt, size_t files_len, size_t file_bytes)
{
    if (c->l.remote) /* the server counts tokens (and says when it is too long) */
        return 0;
    int64_t n_ctx = llm_ctx_n_ctx(sess_conv_ctx(c->conv)), n_tok;
    /* megabytes of one repeated letter would take seconds to tokenize */
    if (sess_conv_fits(c->conv, prompt->s, prompt->len, o->special, n_ctx, NULL, NULL) == SESS_ERR_CTX_FULL)
        return cmd_fail(CMD_EXIT_MODEL, "the prompt does not fit: its %zu bytes are more than the %" PRId64
                                        " tokens of the context can hold (a larger -c helps)",
                        prompt->len, n_ctx);
    if (!a->n_files)
        return 0;
    char what[4200], err[4600]; /* how the -f files are named in notes */
    snprintf(what, sizeof what, "%s%s", a->files[0], a->n_files > 1 ? " and the other files" : "");
    if (cmd_conv_text_fits(c->conv, o->special, what, prompt->s, files_len, n_ctx - sess_conv_n_tokens(c->conv),
                           &n_tok, err, sizeof err))
        return cmd_fail(CMD_EXIT_MODEL, "%s", err);
    if (o->verbose || isatty(2))
        cmd_term_printf(stderr, "kvchat: read '%s': %zu bytes, %lld token%s\n", what, file_bytes, (long long)n_tok,
                        n_tok == 1 ? "" : "s");
    return 0;
}

/* -v's line after the answer */
static void verbose_stats(const struct cmd_conv *c, const struct sess_turn_stats *ts)
{
    if (c->l.remote) {
        cmd_remote_describe(c->l.remote, ts, stderr);
    } else {
        cmd_term_printf(stderr, "kvchat: %lld prompt tokens (%lld cached, %lld of them restored from disk; %lld "
                        "prefilled), %lld generated; ttft %.1f ms, prefill %.1f tok/s, decode %.1f tok/s; "
                        "%lld KV block%s written; stop: %s\n",
                        (long long)ts->prompt_tokens, (long long)ts->cached_tokens, (long long)ts->restored_tokens,
                        (long long)ts->prefilled_tokens, (long long)ts->generated_tokens, ts->ttft_ms,
                        ts->prefill_tok_s, ts->decode_tok_s, (long long)ts->blocks_written, cmd_s(ts->blocks_written),
                        ts->stop_reason);
        if (ts->draft_passes > 0)
            cmd_term_printf(stderr, "kvchat: drafting: %lld drafted in %lld pass%s, %lld accepted\n",
                            (long long)ts->drafted_tokens, (long long)ts->draft_passes,
                            ts->draft_passes == 1 ? "" : "es", (long long)ts->accepted_tokens);
    }
    cmd_format_stats(ts, stderr);
}

/* The turn: the answer streamed (word-wrapped on a terminal; dimmed
 * reasoning unless --think hide; in pipe mode only the answer unless
 * --think show; apart in --json), then what it ended with as an exit code. */
static int run_turn(struct cmd_conv *c, const struct cmd_opts *o, bool json, const char *prompt)
{
    const char *session = c->session;
    /* the answers' format: given, or the session's own */
    const char *fmt = sess_conv_format(c->conv, NULL);
    run_parsed = fmt && strcmp(fmt, "grammar");
    struct cmd_answer ans;
    bool tty = isatty(1);
    if (cmd_answer_init(&ans, json ? NULL : stdout, tty ? !o->think_hide : o->think_show, tty && !getenv("NO_COLOR")))
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    struct wrap wrap;
    bool wrapping = !json && o->wrap && tty;
    if (wrapping) {
        wrap_init(&wrap, stdout);
        wrap_begin(&wrap);
        ans.wrap = &wrap;
    }
    struct sess_turn_stats ts;
    struct run_text rt = {&ans, &prog};
    cmd_progress_start(&prog, c->conv);
    exit_at_signal = 0; /* the turn: a signal ends the answer where it is, and it is saved */
    int r = sess_conv_say(c->conv, prompt, run_text, &rt, &interrupted, &ts);
    cmd_progress_end(&prog);
    bool cut = r == SESS_OK && ts.stop_reason && !strcmp(ts.stop_reason, "cut");
    cmd_answer_end(&ans);
    if (wrapping)
        wrap_free(&wrap);
    /* a new session is made with its first exchange (--no-cache saves
     * nothing, so makes none) */
    bool unsaved = r == SESS_OK && c->pending && !o->no_cache && cmd_conv_make_pending(c);
    if (ts.kv_problem[0])
        cmd_term_printf(stderr, "kvchat: %s\n", ts.kv_problem);
    int rc = 0;
    if (r == SESS_ERR_INTERRUPTED) { /* before the answer began: nothing was saved */
        rc = CMD_EXIT_INTERRUPTED;
        cmd_term_printf(stderr, "kvchat: interrupted before the answer began: the message was not sent\n");
        if (json) {
            memset(&ts, 0, sizeof ts);
            print_json(&ans, session, &c->l, &ts, NULL);
        }
    } else if (r == SESS_ERR_CTX_FULL) {
        rc = cmd_fail(CMD_EXIT_MODEL, "the prompt does not fit: %s (a larger -c helps)", sess_conv_errmsg(c->conv));
    } else if (r == SESS_ERR_STORE) {
        rc = cmd_fail(CMD_EXIT_SESSION, "%s", sess_conv_errmsg(c->conv));
    } else if (r == SESS_ERR_REMOTE) { /* no answer came: nothing was saved */
        rc = cmd_fail(cmd_remote_exit(c->l.remote), "%s", sess_conv_errmsg(c->conv));
    } else if (r) {
        rc = cmd_fail(CMD_EXIT_MODEL, "%s", sess_conv_errmsg(c->conv));
    } else if (json) {
        print_json(&ans, session, &c->l, &ts, cut ? sess_conv_errmsg(c->conv) : NULL);
    } else if (!ans.broken && ans.last_char != '\n') {
        /* each answer ends its line, as llm's and ollama's do: answers
         * appended to one log stay apart */
        fputc('\n', stdout);
    }
    if (r == 0 && o->verbose)
        verbose_stats(c, &ts);
    if (r == 0 && interrupted)
        rc = CMD_EXIT_INTERRUPTED;
    else if (r == 0 && ts.grammar && !ts.grammar_complete) /* never silently invalid */
        rc = cmd_fail(CMD_EXIT_INCOMPLETE, "the answer is incomplete under the %s (stop: %s)%s",
                      !fmt ? "format" : !strcmp(fmt, "grammar") ? "grammar" : !strcmp(fmt, "schema") ? "schema"
                                                                                                   : "JSON format",
                      ts.stop_reason, !strcmp(ts.stop_reason, "length") ? ": a larger -n lets it close" : "");
    else if (r == 0 && ts.stop_reason && !strcmp(ts.stop_reason, "context_full")) /* never a silent cut */
        rc = cmd_fail(CMD_EXIT_CONTEXT_FULL, "the answer filled the context window (%" PRId64 " tokens) and stops "
                                             "there%s (a larger -c helps)",
                      c->l.remote ? (int64_t)0 : llm_ctx_n_ctx(sess_conv_ctx(c->conv)),
                      session && !unsaved ? "; it is kept in the session" : "");
    else if (cut) /* the server's stream broke off: what came is kept, marked as cut */
        rc = cmd_fail(CMD_EXIT_NETWORK, "%s%s%s%s", sess_conv_errmsg(c->conv), session ? " (kept in session '" : "",
                      session ? session : "", session ? "', marked as cut off)" : "");
    else if (r == 0 && (ts.store_failed || c->rs.store_failed || unsaved)) /* said above */
        rc = CMD_EXIT_SESSION;
    cmd_answer_free(&ans);
    return rc;
}

static void switch_model_hint(const char *name)
{
    fprintf(stderr, "kvchat: without -m the session opens with its own model; to go on with the one "
                    "given, computing the history of '%s' again, add --switch-model\n", name);
}

static int run_exec(int argc, char **argv)
{
    signals_install();
    struct cmd_opts o;
    struct run_args a = {0};
    struct cmd_conv c = {0};
    struct base_buf prompt = {0};
    size_t files_len = 0, file_bytes = 0;
    cmd_opts_init(&o);
    int rc = cmd_opts_config(&o);
    if (!rc)
        rc = parse_args(argc, argv, &o, &a);
    if (!rc)
        rc = cmd_opts_finish(&cmd_run_entry, &o);
    struct cmd_conv_params p = {
        .e = &cmd_run_entry,
        .session = a.session,
        .cont = a.cont,
        .name_prefix = "run: ",
        .what = "run",
        .model_hint = switch_model_hint,
        .prog = &prog,
        .new_after_answer = true,
    };
    /* the session: its name checked, -c's found, its own model; before any work */
    base_trace("run: options read");
    if (!rc)
        rc = cmd_conv_begin(&c, &o, &p);
    base_trace("run: session looked up");
    if (!rc)
        rc = read_prompt(&a, &prompt, &files_len, &file_bytes);
    if (!rc) {
        exit_at_signal = 1;
        if (interrupted) /* a signal that came while the prompt was put together */
            on_signal(SIGTERM);
        /* the turn's work starts here, its input read: its ttft counts
         * opening the session and the model, restoring and faulting in
         * the weights (sess_conv_params.turn_start_ms) */
        struct timespec t_start;
        clock_gettime(CLOCK_MONOTONIC, &t_start);
        p.turn_start_ms = t_start.tv_sec * 1e3 + t_start.tv_nsec / 1e6;
        rc = cmd_conv_open(&c, &o, &p);
    }
    if (!rc && c.session && !c.pending) { /* an existing session */
        attach_rs = c.rs;
        rc = session_ready(&c, &o);
    }
    if (!rc)
        rc = prompt_fits(&c, &o, &a, &prompt, files_len, file_bytes);
    base_trace("run: prompt fits");
    if (!rc)
        rc = run_turn(&c, &o, a.json, prompt.s);
    base_trace("run: turn done");
    cmd_conv_close(&c);
    base_trace("run: closed");
    base_buf_free(&prompt);
    free(a.words);
    free(a.files);
    cmd_opts_free(&o);
    return rc < 0 ? CMD_EXIT_OK : rc;
}

const struct cmd_entry cmd_run_entry = {
    .name = "run",
    .summary = "answer one prompt (from arguments or stdin) for a script",
    .usage = run_usage,
    .exec = run_exec,
};
