/*
 * opts.h - (internal to cli/) the options that chat and run share, the
 * model they open, and constrained output.
 */
#ifndef KVCHAT_CLI_OPTS_H
#define KVCHAT_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/llm.h"

struct cmd_entry;

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

enum cmd_opt {
    CMD_OPT_MODEL, CMD_OPT_THREADS, CMD_OPT_CTX_SIZE, CMD_OPT_TEMP, CMD_OPT_TOP_K, CMD_OPT_TOP_P,
    CMD_OPT_MIN_P, CMD_OPT_REPEAT_PENALTY, CMD_OPT_PRESENCE_PENALTY, CMD_OPT_REPEAT_LAST_N,
    CMD_OPT_SEED, CMD_OPT_N_PREDICT, CMD_OPT_KV_TYPE, CMD_OPT_TEMPLATE, CMD_OPT_SYSTEM,
    CMD_OPT_SYSTEM_FILE, CMD_OPT_NO_CACHE, CMD_OPT_VERBOSE, CMD_OPT_SPECIAL, CMD_OPT_CACHE_MAX,
    CMD_OPT_THINK, CMD_OPT_WRAP, CMD_OPT_STOP, CMD_OPT_SWITCH_MODEL, CMD_OPT_PRIVATE, CMD_OPT_FORMAT,
    CMD_OPT_JSON_SCHEMA, CMD_OPT_GRAMMAR, CMD_OPT_DRAFT, CMD_OPT_DRAFT_MAX, CMD_OPT_COUNT
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
    uint32_t draft;            /* --draft: speculative decoding's sources (enum sess_draft bits; 0 off) */
    int32_t draft_max;         /* --draft-max: the most tokens one pass verifies */
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
    "      --draft off|ngram|store|on  speculative decoding: draft tokens from the\n" \
    "                           conversation (ngram), from what followed the same\n" \
    "                           tokens in the block store (store) or both (on, the\n" \
    "                           default) and verify them in one pass; the answer is\n" \
    "                           byte for byte the one with --draft off\n" \
    "      --draft-max K        the most tokens one pass verifies (default 8, 1-31)\n" \
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
/* a command's whole-number argument s in [lo, hi] into *v: true; false
 * (*v unchanged) for anything else, "" and "12x" included */
bool cmd_long_arg(const char *s, long lo, long hi, long *v);
bool cmd_int_arg(const char *s, int lo, int hi, int *v);
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
    char *path;                   /* the model's file or remote entry */
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
/* is argv[i] ("-c") the context size, i.e. followed by a number? */
bool cmd_opts_c_is_ctx(int argc, char **argv, int i);

/* ==== the model for chat and run, and pulling one (cli/model.c) ==== */
struct mdl_pull_params;
/*
 * The model a chat or run uses: -m MODEL (m_arg), else KVCHAT_MODEL, else
 * `model` in the config file; a file path or a store name. With none set,
 * prints how to get a model and returns CMD_EXIT_MODEL, unless offer_pull
 * and stdin and stderr are terminals: then it offers to pull the default
 * alias. Returns CMD_EXIT_OK with the file in *path (the caller frees it),
 * or the exit code after printing the error (*path NULL).
 */
int cmd_model_resolve(const char *m_arg, bool offer_pull, char **path);
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
/* models/' error (MDL_ERR_X) as an exit code */
int cmd_mdl_exit(int rc);
/* the first model pulled or added becomes the default (said on stderr) */
void cmd_models_first_default(const char *name);
/* a count: "7.24 B", "512 M", "12.00 K", "9" */
void cmd_fmt_count(char *buf, size_t n, double v);
/* a model's size: "512 bytes", "1.50 KiB", "3.20 GiB" */
void cmd_fmt_size(char *buf, size_t n, double v);
#endif
