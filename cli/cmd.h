/*
 * cmd.h - (internal to cli/) the command table and what commands share.
 *
 * To add a subcommand: write cli/cmd-NAME.c exporting a
 * `const struct cmd_entry cmd_NAME_entry`, declare it below, and list it in
 * the table in cli/cmd.c. Its exec gets argv with argv[0] = its name.
 */
#ifndef KVCHAT_CLI_CMD_H
#define KVCHAT_CLI_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#define KVCHAT_VERSION "0.1.0"

/* exit codes (SPEC §3) */
enum cmd_exit {
    CMD_EXIT_OK = 0,
    CMD_EXIT_USAGE = 1,
    CMD_EXIT_MODEL = 2,   /* model or file error */
    CMD_EXIT_SESSION = 3,
    CMD_EXIT_NETWORK = 4,
    CMD_EXIT_INCOMPLETE = 5, /* --format, --json-schema, --grammar: the answer is not a whole value */
    CMD_EXIT_CONTEXT_FULL = 6, /* run: the answer filled the context window and was cut there */
    CMD_EXIT_INTERRUPTED = 130,
};

struct cmd_entry {
    const char *name;
    const char *summary; /* one line for `kvchat --help` */
    const char *usage;   /* the full --help text */
    int (*exec)(int argc, char **argv);
};

extern const struct cmd_entry cmd_chat_entry;
extern const struct cmd_entry cmd_models_entry;
extern const struct cmd_entry cmd_tokenize_entry;
extern const struct cmd_entry cmd_template_entry;
extern const struct cmd_entry cmd_sessions_entry;
extern const struct cmd_entry cmd_run_entry;
extern const struct cmd_entry cmd_eval_entry;
extern const struct cmd_entry cmd_generate_entry;
extern const struct cmd_entry cmd_bench_entry;
extern const struct cmd_entry cmd_paths_entry;

/* where kvchat keeps its files (cli/cmd-paths.c); "" where the environment
 * gives no place */
struct cmd_paths {
    char home[4096], database[4200], kv_store[4200], models[4200], config[4096], history[4096];
};
void cmd_paths_get(struct cmd_paths *p);
bool cmd_path_exists(const char *path);

struct mdl_pull_params;
/*
 * The model a chat or run uses: -m MODEL (m_arg), else KVCHAT_MODEL, else
 * `model` in the config file; a file path or a store name. With none set,
 * prints how to get a model and returns CMD_EXIT_MODEL, unless offer_pull
 * and stdin and stderr are terminals: then it offers to pull the default
 * alias. Returns CMD_EXIT_OK with the file in path, or the exit code after
 * printing the error.
 */
int cmd_model_resolve(const char *m_arg, bool offer_pull, char *path, size_t size);
/* does word name a model of the store (a name, not a path or a file in the
 * current directory)? For ollama's `run MODEL PROMPT` and `chat MODEL` */
bool cmd_is_store_model(const char *word);
/* how a model is named to the user: its store name for a file or entry of
 * the store ($KVCHAT_HOME/models/NAME.gguf or .remote, into buf), else path */
const char *cmd_model_shown(const char *path, char *buf, size_t size);
/* `models pull REF` with progress on a terminal; the store name into name_out
 * (may be NULL). Returns an exit code, having printed any error. */
int cmd_models_pull_ref(const char *ref, const struct mdl_pull_params *p, char *name_out,
                        size_t name_size);

/* ==== remote models (cli/cmd-remote.c) ==== */
/* `models add-remote NAME URL [options]` (argv[0] = "add-remote") */
int cmd_models_add_remote(int argc, char **argv);
/* `models info` of the remote entry at path (from mdl_resolve) */
int cmd_models_info_remote(const char *path, bool json, bool offline);
struct cmd_opts;
struct cmd_remote;
struct sess_remote;
struct sess_turn_stats;
/* The remote model whose entry is at path, as a conversation's engine
 * (cmd_remote_engine); the settings o gives (borrowed: it must outlive the
 * handle) are sent with each turn, the others noted as ignored. 0, or an
 * exit code (printed). Close with cmd_remote_close. */
int cmd_remote_open(const struct cmd_opts *o, const char *path, struct cmd_remote **out);
void cmd_remote_close(struct cmd_remote *rm);
struct sess_remote cmd_remote_engine(struct cmd_remote *rm);
/* its name in the store (borrowed) */
const char *cmd_remote_name(const struct cmd_remote *rm);
/* the exit code of the last turn's failure (SESS_ERR_REMOTE) */
int cmd_remote_exit(const struct cmd_remote *rm);
/* run --json's remote keys (", \"remote\": true, ..."); -v's line; a one-line description */
void cmd_remote_json(const struct cmd_remote *rm, FILE *f);
void cmd_remote_describe(const struct cmd_remote *rm, const struct sess_turn_stats *ts, FILE *f);
void cmd_remote_info(const struct cmd_remote *rm, char *buf, size_t n);
struct sess_conv_params;
/* the sampling fields a turn with parameters cp sends, in words (for /show) */
void cmd_remote_sent(const struct cmd_remote *rm, const struct sess_conv_params *cp, char *buf, size_t n);

/* is there a saved session called name? (for `kvchat NAME`) */
bool cmd_chat_session_exists(const char *name);

/* dispatch argv to the table; returns the exit code */
int cmd_main(int argc, char **argv);
/* `kvchat __complete WORD... CURRENT` (hidden): the candidates for the word
 * being completed, for the bash and zsh scripts (cli/completion/) */
int cmd_complete(int argc, char **argv);

/* the table, NULL-terminated */
extern const struct cmd_entry *const cmd_table[];

/* "kvchat: <what>" to stderr; returns code so callers can `return cmd_fail(...)` */
int cmd_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a usage error: the message, then "see 'kvchat NAME --help'"; returns CMD_EXIT_USAGE */
int cmd_usage_error(const struct cmd_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* true if argv holds -h or --help before any "--" */
bool cmd_wants_help(int argc, char **argv);
/* print e's usage to stdout and return CMD_EXIT_OK */
int cmd_help(const struct cmd_entry *e);

/* Until cmd_interrupts_restore, SIGINT and SIGTERM set cmd_interrupted
 * (cleared here) and end waits on the network (no SA_RESTART): for the
 * commands that talk to servers (models pull, remote models) */
extern volatile sig_atomic_t cmd_interrupted;
void cmd_interrupts_catch(void);
void cmd_interrupts_restore(void);

/* colours and bold on f: a terminal, TERM is not "dumb", NO_COLOR unset or empty */
bool cmd_color_ok(FILE *f);

/* "4G", "500M", "1.5GiB", "1024" -> bytes; -1 if malformed */
int64_t cmd_parse_size(const char *s);
/* "512 B", "12.2 KiB", "3.4 GiB" */
void cmd_fmt_bytes(char *buf, size_t n, double v);

/* JSON output: a string with escapes */
void cmd_json_str(FILE *f, const char *s, size_t n);
/* JSON output of a list: one array, whole (README "JSON output"). Before
 * item i, cmd_json_list_item(f, i) writes "[" or a separator; after n
 * items, cmd_json_list_end(f, n) closes it (an empty list is "[]"). */
void cmd_json_list_item(FILE *f, int64_t i);
void cmd_json_list_end(FILE *f, int64_t n);

/* A file's text for a message (/read, run -f): path ("-": stdin), at most
 * max bytes (CMD_INPUT_MAX), read with cmd_read_all. Refuses what is not
 * text: a directory or device, a NUL byte ("binary"), bytes that are not
 * UTF-8. Returns 0 with *out (malloc'd, NUL-terminated; caller frees) and
 * *len, or -1 with the reason in err (no "kvchat:" prefix, the path
 * quoted). */
int cmd_read_text(const char *path, size_t max, char **out, size_t *len, char *err, size_t err_size);

/* A growing string: {0} is empty; s (NUL-terminated once anything was
 * added) is the caller's to free. */
struct cmd_buf {
    char *s;
    size_t len, cap;
};
/* Append n bytes of p, keeping len at most max: 0, or -1 when out of memory
 * or when it would pass max (then *too_big, if given, is set). */
int cmd_buf_add(struct cmd_buf *b, const char *p, size_t n, size_t max, bool *too_big);

/* ==== text for a terminal (cli/term.c) ====
 * The one sanitizer: C0 controls but newline and tab, DEL, C1, bidi
 * embeddings/overrides/isolates and invalid UTF-8 become U+FFFD, so that
 * text from the store, a model or a server cannot drive the terminal. The
 * writers sanitize only when f is a terminal (a pipe gets the text as it
 * is); they return 0 or -1 (a write failed). */
#include <stdarg.h>
/* bytes of the unsafe character at s (n bytes left), 0 if it is safe */
size_t cmd_term_unsafe(const char *s, size_t n);
/* s[0..n) to put in pieces, each unsafe character as U+FFFD; put's
 * non-zero return stops it (and is returned as 1) */
int cmd_term_clean(const char *s, size_t n, int (*put)(void *ud, const char *s, size_t n), void *ud);
bool cmd_term_is(FILE *f);
int cmd_term_write(FILE *f, const char *s, size_t n);
int cmd_term_puts(FILE *f, const char *s);
int cmd_term_vprintf(FILE *f, const char *fmt, va_list ap);
int cmd_term_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "s" unless n is 1: "%d exchange%s", n, cmd_s(n) */
static inline const char *cmd_s(int64_t n) { return n == 1 ? "" : "s"; }

/* The most bytes kvchat reads from one input it is handed (a prompt on
 * stdin, a line or message piped to the chat, --system-file, tokenize's
 * text, --template-file): far more than any context window holds, little
 * enough that `< /dev/zero` ends in a clear error, not a huge RSS. */
#define CMD_INPUT_MAX ((size_t)64 << 20)
#define CMD_INPUT_MAX_TEXT "64 MiB"
enum cmd_read { CMD_READ_OK = 0, CMD_READ_ERROR = -1, CMD_READ_TOO_LARGE = -2 };
/* All of f into *out (malloc'd, NUL-terminated; caller frees), its length in
 * *len: CMD_READ_OK; CMD_READ_TOO_LARGE as soon as f has given more than
 * max bytes (nothing kept); CMD_READ_ERROR with errno set (EINTR when a
 * signal interrupted the read; ENOMEM). */
int cmd_read_all(FILE *f, size_t max, char **out, size_t *len);
/* cmd_read_all of a file ("-": stdin), the failure printed as "cannot read
 * WHAT 'PATH': ..." (exit code CMD_EXIT_MODEL returned); 0 on success */
int cmd_read_file(const char *what, const char *path, char **out, size_t *len);

/* Streaming a reasoning model's answer (`run`, the REPL): the generated
 * text goes through llm_think, and each part to out, or is kept for
 * --json. Reasoning is shown dimmed (ANSI, when dim) and set apart from
 * the answer by a blank line, or not at all (show false). */
struct wrap;
struct cmd_answer {
    struct llm_think *think;
    FILE *out;              /* NULL: keep the text only (--json) */
    struct wrap *wrap;      /* NULL, or out is a terminal and the text is wrapped
                             * (cli/wrap.h; set by the caller after init, one
                             * wrap_begin per answer, wrap_end in cmd_answer_end) */
    bool show_reasoning, dim;
    bool term;              /* out is a terminal: the text goes through the sanitizer */
    bool in_reasoning_out;  /* reasoning printed, answer not begun */
    bool broken;            /* writing to out failed (| head) */
    char last_char;         /* the last byte printed */
    struct cmd_buf text[2]; /* the answer [0] and the reasoning [1], kept when out is NULL */
};
/* 0, or -1 out of memory */
int cmd_answer_init(struct cmd_answer *a, FILE *out, bool show_reasoning, bool dim);
/* the sess_conv_say callback: ud is a struct cmd_answer */
int cmd_answer_text(void *ud, const char *text, size_t n);
/* the end of one answer: what was held back, the colour reset; ready for the next */
void cmd_answer_end(struct cmd_answer *a);
void cmd_answer_free(struct cmd_answer *a);

/* ==== options that chat and run share (cli/opts.c) ====
 * Each is also a config-file key (`temp = 0.7`) and, for the sampling ones,
 * a REPL /set key. Usage:
 *     struct cmd_opts o; cmd_opts_init(&o);
 *     if ((rc = cmd_opts_config(&o))) return rc;          // config file
 *     for (int i = 1; i < argc;) {
 *         int r = cmd_opts_take(e, &o, argc, argv, &i);   // 1 taken, 0 not ours, -1 error
 *         if (r < 0) { cmd_opts_free(&o); return CMD_EXIT_USAGE; }
 *         if (r == 0) { ...the command's own options and operands...; i++; }
 *     }
 *     if ((rc = cmd_opts_finish(e, &o))) ...               // reads --system-file
 *     struct cmd_llm l; if ((rc = cmd_llm_open(&o, offer_pull, &l))) ...
 *     sess_conv_init(store, cmd_opts_conv_params(&o, &l), ...)   // takes l.ctx
 */
#include "core/llm.h"

enum cmd_opt {
    CMD_OPT_MODEL, CMD_OPT_THREADS, CMD_OPT_CTX_SIZE, CMD_OPT_TEMP, CMD_OPT_TOP_K, CMD_OPT_TOP_P,
    CMD_OPT_MIN_P, CMD_OPT_REPEAT_PENALTY, CMD_OPT_PRESENCE_PENALTY, CMD_OPT_REPEAT_LAST_N,
    CMD_OPT_SEED, CMD_OPT_N_PREDICT, CMD_OPT_KV_TYPE, CMD_OPT_TEMPLATE, CMD_OPT_SYSTEM,
    CMD_OPT_SYSTEM_FILE, CMD_OPT_NO_CACHE, CMD_OPT_VERBOSE, CMD_OPT_SPECIAL, CMD_OPT_CACHE_MAX,
    CMD_OPT_THINK, CMD_OPT_WRAP, CMD_OPT_STOP, CMD_OPT_SWITCH_MODEL, CMD_OPT_PRIVATE, CMD_OPT_FORMAT,
    CMD_OPT_JSON_SCHEMA, CMD_OPT_GRAMMAR, CMD_OPT_COUNT
};

#define CMD_OPTS_MAX_STOP 8

#define CMD_OPTS_MAX_CONFIG 32

/* ==== constrained output (cli/format.c) ==== */
struct sess_turn_stats;
struct cmd_format {
    char kind[8];                /* "" (none), "json", "schema", "grammar" */
    bool json;                   /* answers are JSON values (json, schema) */
    struct llm_grammar *grammar; /* owned; NULL: none */
    char *source;                /* the schema's or GBNF's text (owned) */
};
/* The format `kind` ("format": arg json or off; "schema": a file or the
 * JSON itself; "grammar": a GBNF file) compiled into f (replacing what it
 * held; unchanged on failure): 0, or an exit code with the reason in err
 * (CMD_EXIT_USAGE for a bad or unsupported schema or grammar,
 * CMD_EXIT_MODEL for a file that cannot be read). */
int cmd_format_load(struct cmd_format *f, const char *kind, const char *arg, char *err, size_t n);
void cmd_format_free(struct cmd_format *f);
/* /set format json|off, /set schema FILE|JSON, /set grammar FILE: f and
 * conversation conv's grammar from the next answer on (an error said on
 * stderr, nothing changed); returns 0 */
struct sess_conv;
int cmd_format_set(struct cmd_format *f, struct sess_conv *conv, bool remote, const char *key, const char *value,
                   FILE *out);
/* -v's line of what masking cost (nothing without a grammar) */
void cmd_format_stats(const struct sess_turn_stats *ts, FILE *out);

struct cmd_opts {
    const char *model;         /* -m: NULL for the default model */
    int32_t n_threads;         /* -t: 0 for the default */
    int32_t n_ctx;             /* -c: 0 for the model's (at most 4096) */
    struct llm_sampler_params sampling; /* seed: random unless --seed/config */
    bool seed_set;             /* --seed or `seed =` was given */
    int32_t n_predict;         /* -n: <= 0 until the context is full */
    uint32_t kv_type;          /* LLM_TYPE_F16 or LLM_TYPE_F32 */
    const char *template_name; /* --template, or NULL for the model's */
    const char *system;        /* --system TEXT or --system-file's text, or NULL */
    const char *system_file;   /* --system-file F ("-": stdin) */
    bool no_cache, verbose, special;
    bool switch_model;         /* --switch-model: a session of another model goes on with this one */
    bool private_mode;         /* --private, `private = true`, /set private on: the store is read,
                                  nothing is written (no blocks, rows, session or history) */
    bool wrap;                 /* word-wrap answers on a terminal (--no-wrap, `wrap = off`) */
    int64_t cache_max;         /* --cache-max: bytes of KV blocks kept (default 4 GiB) */
    bool think_off;            /* --think off: the template's no-thinking form (Qwen3) */
    bool think_switch_given;   /* --think on|off given on the command line (or /set) */
    bool think_hide;           /* --think hide: reasoning is not shown */
    bool think_show;           /* --think show given: reasoning shown even in pipe mode */
    const char *stop[CMD_OPTS_MAX_STOP + 1]; /* --stop TEXT (NULL-terminated) */
    int n_stop;
    const char *format_kind, *format_arg; /* the last of --format, --json-schema, --grammar */
    struct cmd_format format;  /* ... compiled by cmd_opts_finish (owned) */
    uint64_t given;            /* bit CMD_OPT_X: given on the command line */
    uint64_t configured;       /* bit CMD_OPT_X: set in the config file */
    /* owned: strings from the config file, the system file's text */
    char *config_strs[CMD_OPTS_MAX_CONFIG];
    int n_config_strs;
    char *system_buf;
};

/* the common options' lines for a command's --help text */
#define CMD_OPTS_HELP \
"  -m, --model MODEL        a GGUF file or a model name in the store (default:\n" \
    "                           a session's own; else the configured one)\n" \
    "      --switch-model       go on with -m MODEL in a session saved with another\n" \
    "                           model (its history is computed again)\n" \
    "      --system TEXT        the system prompt\n" \
    "      --system-file FILE   the system prompt from a file ('-': stdin)\n" \
    "      --template NAME      chat template (chatml, llama3, ...; default: the model's)\n" \
    "  -n, --max-tokens N       most tokens per answer (default: until the context is full)\n" \
    "      --temp T             temperature; 0 is greedy (default 0.8)\n" \
    "      --top-k K            keep the K most likely tokens (default 40; 0 off)\n" \
    "      --top-p P            nucleus sampling (default 0.95; 1 off)\n" \
    "      --min-p P            drop tokens below P x the best (default 0.05; 0 off)\n" \
    "      --repeat-penalty R   penalise recent tokens (default 1, off)\n" \
    "      --repeat-last-n N    how many recent tokens the penalties see (default 64)\n" \
    "      --presence-penalty P subtract P from recent tokens' logits (default 0)\n" \
    "      --seed N             sampler seed (default: random each run)\n" \
    "      --stop TEXT          end the answer before TEXT (again for more, up to 8)\n" \
    "  -t, --threads N          threads (default: physical cores)\n" \
    "  -c, --ctx-size N         context window in tokens (default: model's, at most 4096);\n" \
    "                           -c before anything but a number is --continue\n" \
    "      --kv-type f16|f32    KV cache element type (default f16)\n" \
    "      --special            special tokens written in messages are tokens\n" \
    "      --format json        every answer a JSON value (compact)\n" \
    "      --json-schema FILE|JSON  every answer valid under a JSON Schema (the subset\n" \
    "                           of docs/structured-output.md; other keywords: exit 1)\n" \
    "      --grammar FILE       every answer a string of a GBNF grammar (llama.cpp's)\n" \
    "      --think show|hide|on|off  reasoning models: show the <think> span dimmed\n" \
    "                           (default on a terminal) or hide it; off asks the\n" \
    "                           model not to think (Qwen3's enable_thinking), on again\n" \
    "      --private            read the KV blocks on disk but write nothing: no\n" \
    "                           block, database row, session or history line\n" \
    "                           (also 'private = true' in the config file;\n" \
    "                           --no-private over it)\n" \
    "      --no-cache           neither read nor write the KV cache on disk, and\n" \
    "                           recompute the whole conversation every turn (for\n" \
    "                           comparison); a session is then read, not changed\n" \
    "      --cache-max SIZE     keep at most SIZE of KV blocks on disk (default 4G):\n" \
    "                           the least recently used go first, named sessions'\n" \
    "                           last (and are computed again if needed)\n" \
    "      --no-wrap            do not wrap answers at the terminal's width (--wrap:\n" \
    "                           do; they are never wrapped when not written to a\n" \
    "                           terminal)\n" \
    "  -v, --verbose            model details, and per-turn statistics on stderr\n"

/* defaults; a random seed */
void cmd_opts_init(struct cmd_opts *o);
/* apply the config file's keys; an exit code (printed) or 0 */
int cmd_opts_config(struct cmd_opts *o);
/* Take argv[*i] if it is a common option (with its value), advancing *i
 * past it: 1; 0 if it is not one (*i unchanged); -1 after printing a usage
 * error. Values are borrowed from argv. An on/off option --X is turned off
 * by --no-X. */
int cmd_opts_take(const struct cmd_entry *e, struct cmd_opts *o, int argc, char **argv, int *i);
/* after parsing: read --system-file, check --template; an exit code or 0 */
int cmd_opts_finish(const struct cmd_entry *e, struct cmd_opts *o);
void cmd_opts_free(struct cmd_opts *o);
/* /set KEY VALUE: 0, or -1 with a reason in err */
int cmd_opts_set(struct cmd_opts *o, const char *key, const char *value, char *err, size_t n);
/* the /set keys, NULL-terminated, static */
const char *const *cmd_opts_set_keys(void);
/* the i-th common option, for shell completion: its long name without
 * "--" (NULL past the last), its short letter (0: none) in *shrt, and
 * whether it takes a value. Every on/off one has a --no- form; *negated
 * says whether it is worth offering (the setting can be on by default or
 * from the config file) */
const char *cmd_opts_option(size_t i, char *shrt, bool *takes_value, bool *negated);
/* the /set keys into buf, separated by sep ("temp, top_k, ...") */
void cmd_opts_set_keys_join(char *buf, size_t n, const char *sep);
/* "temp 0.8, top_k 40, ..." on one line (no newline) */
void cmd_opts_describe(const struct cmd_opts *o, FILE *f);

/* what a chat or run computes with; cmd_llm_close frees it */
struct cmd_llm {
    char path[4096];
    struct cmd_remote *remote;    /* a remote model (then model, vocab, ctx are NULL) */
    struct llm_model *model;
    struct llm_vocab *vocab;
    struct llm_ctx *ctx;
    enum llm_template tmpl;
    bool can_think_off;           /* the model's template can switch thinking off (Qwen3) */
};
/* model parameters with the packed-weight cache in $KVCHAT_HOME/packed
 * (dir: its buffer) */
struct llm_model_params cmd_model_params(char *dir, size_t size);
/* for --verbose: which weights are packed and where they came from */
void cmd_describe_packed(const struct llm_model *m, FILE *f);
/* Before cmd_llm_open for session `name`: if it exists and -m was not
 * given on the command line, o->model becomes the session's own model
 * (its path copied into buf: a model file or a .remote entry); if that
 * file is gone, CMD_EXIT_MODEL (printed, naming it). 0 otherwise, or
 * CMD_EXIT_SESSION (printed) when the store cannot be read. */
int cmd_session_model(struct cmd_opts *o, const char *name, char *buf, size_t size);
/* the hint after SESS_ERR_MODEL (a session saved with another model) */
void cmd_switch_model_hint(const char *name);
/* resolve and open the model, its vocabulary and template, make a context
 * (a remote model: its entry, as l->remote; o must then outlive l); an exit
 * code (printed) or 0 */
int cmd_llm_open(const struct cmd_opts *o, bool offer_pull, struct cmd_llm *l);
void cmd_llm_close(struct cmd_llm *l);
struct sess_conv_params;
/* a conversation's parameters from the options; l's context goes to the
 * conversation (l->ctx becomes NULL) */
struct sess_conv_params cmd_opts_conv_params(const struct cmd_opts *o, struct cmd_llm *l);
/* the sessions/ parameter bits (1 << SESS_PARAM_X) of option bits (1 << CMD_OPT_X) */
uint32_t cmd_opts_sess_params(uint64_t opts);
/* Would text (a file's, named by what) fit as a message in context ctx of
 * l's model, which has room tokens left for it? Its token count into
 * *n_tokens (a lower bound when it is plainly too large). 0 if it fits, else
 * -1 with the numbers in err. */
int cmd_text_fits(const struct cmd_llm *l, const struct llm_ctx *ctx, bool special, const char *what,
                  const char *text, size_t len, int64_t room, int64_t *n_tokens, char *err, size_t err_size);
struct sess_store;
/* open $KVCHAT_HOME's store (created if create): 0; CMD_EXIT_SESSION
 * (printed); -1 (quietly) when !create and there is none. A note about
 * opening it (an upgrade) goes to stderr. */
int cmd_store_open(bool create, struct sess_store **st);
/* -c/--continue: the session changed last (the first of sess_list) into
 * name; CMD_EXIT_OK, or CMD_EXIT_SESSION having said there is none (a
 * store is not created for it) */
int cmd_last_session(char *name, size_t size);
/* is argv[i] ("-c") the context size, i.e. followed by a number? */
bool cmd_opts_c_is_ctx(int argc, char **argv, int i);
/* --private: open the store only if there is one, read-only (nothing is
 * created or written): 0 with *st (NULL when there is none, or it cannot
 * be opened: then said on stderr) */
int cmd_store_open_private(struct sess_store **st);
/* open the store only if there is one (nothing is created, nothing is
 * printed): 1 with *st, 0 if there is none, -1 if it cannot be opened (err
 * says why) */
int cmd_store_open_existing(struct sess_store **st, char *err, size_t err_size);
/* the home for the session store into home: 0, or -1 with why in err (no
 * home, a bad path variable, a path too long for SQLite) */
int cmd_store_home(char *home, size_t size, char *err, size_t err_size);

#endif
