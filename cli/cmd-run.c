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
#include "cli/progress.h"
#include "cli/repl.h"
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
    "                           decode_tok_s, stop_reason, restore_ms,\n"
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
static struct sess_restore_stats attach_rs;
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
} /* of the session's KV cache, for --json */

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

/* The most bytes of text n_ctx tokens can stand for: n_ctx times the
 * longest token's text. A prompt longer than that cannot fit, whatever its
 * tokens, so it is refused before tokenizing it (which on megabytes of one
 * repeated letter takes seconds and about 40 bytes of memory a byte). */
static uint64_t ctx_bytes_max(const struct cmd_llm *l)
{
    int32_t longest = 1, n = llm_vocab_n_tokens(l->vocab);
    char buf[512];
    for (int32_t id = 0; id < n; id++) {
        int32_t k = llm_token_to_piece(l->vocab, id, buf, sizeof buf, 0, true);
        k = k < 0 ? -k : k;
        if (k > longest)
            longest = k;
    }
    return (uint64_t)llm_ctx_n_ctx(l->ctx) * (uint64_t)longest;
}

/* the texts of the -f files, each without its trailing newlines, joined
 * by one; *bytes the files' sizes: 0, or an exit code with the reason in err */
static int read_files(const char **files, int n, char **out, size_t *len, size_t *bytes, char *err,
                      size_t err_size)
{
    char *acc = NULL;
    size_t al = 0;
    *bytes = 0;
    for (int i = 0; i < n; i++) {
        char *t;
        size_t tl;
        if (cmd_read_text(files[i], CMD_INPUT_MAX, &t, &tl, err, err_size)) {
            free(acc);
            return CMD_EXIT_MODEL;
        }
        *bytes += tl;
        while (tl && (t[tl - 1] == '\n' || t[tl - 1] == '\r'))
            tl--;
        char *na = al + tl + 2 > CMD_INPUT_MAX ? NULL : realloc(acc, al + tl + 2);
        if (!na) {
            snprintf(err, err_size, "cannot read '%s': %s", files[i],
                     al + tl + 2 > CMD_INPUT_MAX ? "the files are too large together" : "out of memory");
            free(t);
            free(acc);
            return CMD_EXIT_MODEL;
        }
        acc = na;
        if (al)
            acc[al++] = '\n';
        memcpy(acc + al, t, tl);
        al += tl;
        acc[al] = 0;
        free(t);
    }
    *out = acc;
    *len = al;
    return 0;
}

static int run_exec(int argc, char **argv)
{
    signals_install();
    struct cmd_opts o;
    cmd_opts_init(&o);
    int rc = cmd_opts_config(&o);
    if (rc)
        return rc;
    const char *session = NULL;
    char last[256];
    bool json = false, cont = false;
    char **words = calloc((size_t)argc + 1, sizeof *words);
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    int n_words = 0, n_files = 0;
    if (!words || !files) {
        free(words);
        free(files);
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    }
    for (int i = 1; i < argc;) {
        int r = cmd_opts_take(&cmd_run_entry, &o, argc, argv, &i);
        if (r < 0) {
            free(words);
            free(files);
            cmd_opts_free(&o);
            return CMD_EXIT_USAGE;
        }
        if (r > 0)
            continue;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            free(words);
            free(files);
            cmd_opts_free(&o);
            return cmd_help(&cmd_run_entry);
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "-s") || !strcmp(a, "--session")) {
            if (i + 1 >= argc) {
                free(words);
                free(files);
                cmd_opts_free(&o);
                return cmd_usage_error(&cmd_run_entry, "%s needs a session name", a);
            }
            session = argv[++i];
        } else if (!strncmp(a, "--session=", 10)) {
            session = a + 10;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--continue")) {
            cont = true;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (i + 1 >= argc) {
                free(words);
                free(files);
                cmd_opts_free(&o);
                return cmd_usage_error(&cmd_run_entry, "%s needs a file name", a);
            }
            files[n_files++] = argv[++i];
        } else if (!strncmp(a, "--file=", 7)) {
            files[n_files++] = a + 7;
        } else if (!strcmp(a, "--")) {
            while (++i < argc)
                words[n_words++] = argv[i];
            break;
        } else if (a[0] == '-' && a[1]) {
            free(words);
            free(files);
            cmd_opts_free(&o);
            return cmd_usage_error(&cmd_run_entry, "run: unknown option '%s'", a);
        } else {
            words[n_words++] = argv[i];
        }
        i++;
    }
    if (cont && session)
        rc = cmd_usage_error(&cmd_run_entry, "run: -c/--continue and -s: give one of them");
    char name_err[1024];
    if (!rc && session && !cont && sess_name_check(session, name_err, sizeof name_err) &&
        !cmd_chat_session_exists(session)) /* a new session's name: the one rule, before any work */
        rc = cmd_usage_error(&cmd_run_entry, "run: %s", name_err);
    if (!rc && o.private_mode && (session || cont))
        rc = cmd_usage_error(&cmd_run_entry, "run: a private run (--private, or 'private = true' in the config "
                                             "file) saves nothing, so it takes no session: --no-private");
    if (!rc)
        rc = cmd_opts_finish(&cmd_run_entry, &o);
    if (!rc && cont && !(rc = cmd_last_session(last, sizeof last)))
        session = last; /* the session changed last */
    /* ollama's habit, `run MODEL PROMPT`: without -m, a first word of
     * several that names a store model is the model */
    if (!rc && !o.model && n_words >= 2 && cmd_is_store_model(words[0])) {
        o.model = words[0];
        memmove(words, words + 1, (size_t)(n_words - 1) * sizeof *words);
        n_words--;
    }
    if (rc) {
        free(words);
        free(files);
        cmd_opts_free(&o);
        return rc;
    }

    /* the prompt: the files, else stdin (unless it is a terminal and PROMPT
     * was given), then PROMPT */
    size_t in_len = 0, cap = 1, file_bytes = 0;
    char *in = NULL;
    if (n_files) {
        char err[4400];
        if ((rc = read_files(files, n_files, &in, &in_len, &file_bytes, err, sizeof err))) {
            free(words);
            free(files);
            cmd_opts_free(&o);
            return cmd_fail(rc, "%s", err);
        }
    } else if (n_words == 0 || !isatty(0)) {
        if (n_words == 0 && isatty(0))
            cmd_term_printf(stderr, "kvchat: reading the prompt from stdin (end with Ctrl-D)\n");
        int r = cmd_read_all(stdin, CMD_INPUT_MAX, &in, &in_len);
        if (r == CMD_READ_OK && strlen(in) != in_len)
            r = 1;
        if (r != CMD_READ_OK) {
            int e = errno;
            free(in);
            free(words);
            free(files);
            cmd_opts_free(&o);
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
        while (in_len && (in[in_len - 1] == '\n' || in[in_len - 1] == '\r'))
            in[--in_len] = 0;
    }
    for (int i = 0; i < n_words; i++)
        cap += strlen(words[i]) + 1;
    if (in_len + cap > CMD_INPUT_MAX + 1) {
        free(in);
        free(words);
        free(files);
        cmd_opts_free(&o);
        return cmd_fail(CMD_EXIT_MODEL, "cannot use the prompt: it is larger than %s", CMD_INPUT_MAX_TEXT);
    }
    char *prompt = malloc(in_len + cap + 1);
    size_t pl = 0;
    if (prompt) {
        if (in_len) {
            memcpy(prompt, in, in_len);
            pl = in_len;
        }
        for (int i = 0; i < n_words; i++) {
            if (pl && !(i == 0 && prompt[pl - 1] == '\n'))
                prompt[pl++] = i == 0 ? '\n' : ' ';
            memcpy(prompt + pl, words[i], strlen(words[i]));
            pl += strlen(words[i]);
        }
        prompt[pl] = 0;
    }
    size_t files_len = n_files ? in_len : 0;
    free(in);
    free(words);
    if (!prompt) {
        free(files);
        cmd_opts_free(&o);
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    }
    if (pl == 0) {
        free(files);
        free(prompt);
        cmd_opts_free(&o);
        return cmd_usage_error(&cmd_run_entry, "run: the prompt is empty");
    }
    exit_at_signal = 1;
    if (interrupted) /* a signal that came while the prompt was put together */
        on_signal(SIGTERM);
    /* how the -f files are named in notes */
    char what[4200];
    snprintf(what, sizeof what, "%s%s", n_files ? files[0] : "", n_files > 1 ? " and the other files" : "");
    free(files);

    /* the turn's work starts here, its input read: its ttft counts opening
     * the session and the model, restoring and faulting in the weights
     * (sess_conv_params.turn_start_ms) */
    struct timespec t_start;
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    /* an existing session opens with its own model (a model file or a .remote
     * entry: which of the two decides local or remote) */
    char own_model[4096];
    if ((rc = cmd_session_model(&o, session, own_model, sizeof own_model))) {
        free(prompt);
        cmd_opts_free(&o);
        return rc;
    }
    struct cmd_llm l;
    struct sess_store *st = NULL;
    struct sess_conv *conv = NULL;
    char err[1024];
    if ((rc = cmd_llm_open(&o, false, &l))) {
        free(prompt);
        cmd_opts_free(&o);
        return rc;
    }
    if (l.remote && o.format.grammar) {
        rc = cmd_fail(CMD_EXIT_USAGE, "--%s is for local models: a remote server samples its own answers",
                      !strcmp(o.format.kind, "json") ? "format" : !strcmp(o.format.kind, "schema") ? "json-schema"
                                                                                                    : "grammar");
        goto out;
    }
    if (!l.remote && pl > ctx_bytes_max(&l)) {
        rc = cmd_fail(CMD_EXIT_MODEL, "the prompt does not fit: its %zu bytes are more than the %" PRId64
                                      " tokens of the context can hold (a larger -c helps)",
                      pl, llm_ctx_n_ctx(l.ctx));
        goto out;
    }
    /* the block store, unless there is nothing to read or write; without
     * it a run without a session still answers */
    if (o.private_mode && !o.no_cache && !l.remote)
        cmd_store_open_private(&st); /* read-only, and only if there is one */
    else if (!o.private_mode && (session || (!o.no_cache && !l.remote)) && cmd_store_open(true, &st)) {
        if (session) {
            rc = CMD_EXIT_SESSION;
            goto out;
        }
        cmd_term_printf(stderr, "kvchat: the KV cache on disk is off for this run\n");
    }
    struct sess_conv_params cp = cmd_opts_conv_params(&o, &l);
    cp.turn_start_ms = t_start.tv_sec * 1e3 + t_start.tv_nsec / 1e6;
    int ir = sess_conv_init(st, cp, &conv, err, sizeof err);
    if (ir) {
        rc = ir == SESS_ERR_STORE ? cmd_fail(CMD_EXIT_SESSION, "%s", err)
                                  : cmd_fail(CMD_EXIT_MODEL, "cannot start the conversation: %s", err);
        goto out;
    }
    /* a new session is made with its first exchange (after the answer), so
     * that a turn that never answers (killed, interrupted, refused) leaves
     * no empty session behind */
    int64_t sid;
    int found = session ? sess_find(st, session, &sid) : SESS_ERR_NOT_FOUND;
    if (found != SESS_OK && found != SESS_ERR_NOT_FOUND) {
        rc = cmd_fail(CMD_EXIT_SESSION, "%s", sess_errmsg(st));
        goto out;
    }
    bool new_session = session && found == SESS_ERR_NOT_FOUND, unsaved = false;
    if (session && !new_session) {
        struct sess_restore_stats rs;
        cmd_progress_start(&prog, conv);
        int r = sess_conv_attach(conv, session, true, &rs);
        cmd_progress_end(&prog);
        if (r) {
            rc = cmd_fail(CMD_EXIT_SESSION, "%s", sess_conv_errmsg(conv));
            if (r == SESS_ERR_MODEL)
                cmd_switch_model_hint(session);
            goto out;
        }
        attach_rs = rs;
        if (rs.first_problem[0])
            cmd_term_printf(stderr, "kvchat: %s\n", rs.first_problem);
        /* --system is for a new session: the chat warns and offers /system;
         * a script cannot answer, so run refuses and changes nothing */
        const char *has = NULL;
        if (sess_conv_n_messages(conv) == 0 || sess_conv_message(conv, 0, &has) != SESS_ROLE_SYSTEM)
            has = NULL;
        const char *want = o.system && o.system[0] ? o.system : NULL;
        if (want && (!has || strcmp(has, want))) {
            rc = cmd_usage_error(&cmd_run_entry,
                                 "session '%s' %s; --system%s is only for a new session (to change it: "
                                 "'kvchat chat %s', then /system TEXT)",
                                 session, has ? "has another system prompt" : "has no system prompt",
                                 o.system_file ? "-file" : "", session);
            goto out;
        }
        if (o.verbose && l.remote)
            cmd_term_printf(stderr, "kvchat: session '%s': %lld message%s so far\n", session,
                    (long long)sess_conv_n_messages(conv), cmd_s(sess_conv_n_messages(conv)));
        else if (o.verbose)
            cmd_term_printf(stderr, "kvchat: session '%s': %lld token%s restored from %lld block%s, %lld to compute, "
                            "in %.1f ms\n",
                    session, (long long)rs.restored_tokens, cmd_s(rs.restored_tokens),
                    (long long)rs.restored_blocks, cmd_s(rs.restored_blocks), (long long)rs.missing_tokens, rs.ms);
        if (o.no_cache)
            cmd_term_printf(stderr, "kvchat: --no-cache: session '%s' is read and computed again, not saved\n",
                    session);
    }
    if (n_files && !l.remote) { /* the files' text (the prompt's start) must fit in what the context has left */
        int64_t n_tok;
        char ferr[4600];
        const struct llm_ctx *ctx = sess_conv_ctx(conv);
        if (cmd_text_fits(&l, ctx, o.special, what, prompt, files_len, llm_ctx_n_ctx(ctx) - sess_conv_n_tokens(conv),
                          &n_tok, ferr, sizeof ferr)) {
            rc = cmd_fail(CMD_EXIT_MODEL, "%s", ferr);
            goto out;
        }
        if (o.verbose || isatty(2))
            cmd_term_printf(stderr, "kvchat: read '%s': %zu bytes, %lld token%s\n", what, file_bytes, (long long)n_tok,
                    n_tok == 1 ? "" : "s");
    }

    /* the answers' format: given, or the session's own */
    const char *fmt = sess_conv_format(conv, NULL);
    run_parsed = fmt && strcmp(fmt, "grammar");
    /* reasoning: dimmed on a terminal unless --think hide; in pipe mode
     * only the answer unless --think show; apart in --json */
    struct cmd_answer ans;
    bool tty = isatty(1);
    if (cmd_answer_init(&ans, json ? NULL : stdout, tty ? !o.think_hide : o.think_show,
                        tty && !getenv("NO_COLOR"))) {
        rc = cmd_fail(CMD_EXIT_MODEL, "out of memory");
        goto out;
    }
    /* on a terminal the answer is word-wrapped */
    struct wrap wrap;
    bool wrapping = !json && o.wrap && tty;
    if (wrapping) {
        wrap_init(&wrap, stdout);
        wrap_begin(&wrap);
        ans.wrap = &wrap;
    }
    struct sess_turn_stats ts;
    struct run_text rt = {&ans, &prog};
    cmd_progress_start(&prog, conv);
    exit_at_signal = 0; /* the turn: a signal ends the answer where it is, and it is saved */
    int r = sess_conv_say(conv, prompt, run_text, &rt, &interrupted, &ts);
    cmd_progress_end(&prog);
    bool cut = r == SESS_OK && ts.stop_reason && !strcmp(ts.stop_reason, "cut");
    cmd_answer_end(&ans);
    if (wrapping)
        wrap_free(&wrap);
    if (r == SESS_OK && new_session && !o.no_cache) { /* the session, made with its first exchange
                                                         (--no-cache saves nothing, so makes none) */
        struct sess_restore_stats rs;
        if (sess_find(st, session, &sid) == SESS_OK)
            cmd_term_printf(stderr, "kvchat: session '%s' was made by another kvchat process meanwhile: this "
                                    "exchange is not saved in it\n", session);
        else if (sess_conv_attach(conv, session, true, &rs))
            cmd_term_printf(stderr, "kvchat: %s\n", sess_conv_errmsg(conv));
        else
            new_session = false;
        unsaved = new_session;
    }
    if (ts.kv_problem[0])
        cmd_term_printf(stderr, "kvchat: %s\n", ts.kv_problem);
    if (r == SESS_ERR_INTERRUPTED) { /* before the answer began: nothing was saved */
        rc = CMD_EXIT_INTERRUPTED;
        cmd_term_printf(stderr, "kvchat: interrupted before the answer began: the message was not sent\n");
        if (json) {
            memset(&ts, 0, sizeof ts);
            print_json(&ans, session, &l, &ts, NULL);
        }
    } else if (r == SESS_ERR_CTX_FULL) {
        rc = cmd_fail(CMD_EXIT_MODEL, "the prompt does not fit: %s (a larger -c helps)", sess_conv_errmsg(conv));
    } else if (r == SESS_ERR_STORE) {
        rc = cmd_fail(CMD_EXIT_SESSION, "%s", sess_conv_errmsg(conv));
    } else if (r == SESS_ERR_REMOTE) { /* no answer came: nothing was saved */
        rc = cmd_fail(cmd_remote_exit(l.remote), "%s", sess_conv_errmsg(conv));
    } else if (r) {
        rc = cmd_fail(CMD_EXIT_MODEL, "%s", sess_conv_errmsg(conv));
    } else if (json) {
        print_json(&ans, session, &l, &ts, cut ? sess_conv_errmsg(conv) : NULL);
    } else if (!ans.broken && ans.last_char != '\n') {
        /* each answer ends its line, as llm's and ollama's do: answers
         * appended to one log stay apart */
        fputc('\n', stdout);
    }
    if (r == 0 && o.verbose && l.remote)
        cmd_remote_describe(l.remote, &ts, stderr);
    else if (r == 0 && o.verbose)
        cmd_term_printf(stderr, "kvchat: %lld prompt tokens (%lld cached, %lld of them restored from disk; %lld "
                        "prefilled), %lld generated; ttft %.1f ms, prefill %.1f tok/s, decode %.1f tok/s; "
                        "%lld KV block%s written; stop: %s\n",
                (long long)ts.prompt_tokens, (long long)ts.cached_tokens, (long long)ts.restored_tokens,
                (long long)ts.prefilled_tokens, (long long)ts.generated_tokens, ts.ttft_ms, ts.prefill_tok_s,
                ts.decode_tok_s, (long long)ts.blocks_written, cmd_s(ts.blocks_written), ts.stop_reason);
    if (r == 0 && o.verbose)
        cmd_format_stats(&ts, stderr);
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
                      l.remote ? (int64_t)0 : llm_ctx_n_ctx(sess_conv_ctx(conv)),
                      session ? "; it is kept in the session" : "");
    else if (cut) /* the server's stream broke off: what came is kept, marked as cut */
        rc = cmd_fail(CMD_EXIT_NETWORK, "%s%s%s%s", sess_conv_errmsg(conv), session ? " (kept in session '" : "",
                      session ? session : "", session ? "', marked as cut off)" : "");
    else if (r == 0 && (ts.store_failed || attach_rs.store_failed || unsaved)) /* said above */
        rc = CMD_EXIT_SESSION;
    cmd_answer_free(&ans);
out:
    sess_conv_free(conv);
    sess_store_close(st);
    cmd_llm_close(&l);
    free(prompt);
    cmd_opts_free(&o);
    return rc;
}

const struct cmd_entry cmd_run_entry = {
    .name = "run",
    .summary = "answer one prompt (from arguments or stdin) for a script",
    .usage = run_usage,
    .exec = run_exec,
};
