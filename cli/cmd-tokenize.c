/*
 * cmd-tokenize.c - the text side of a model without its weights:
 * `kvchat tokenize` (text -> token ids, as llama.cpp's llama_tokenize) and
 * `kvchat template` (a sample conversation rendered in the model's chat
 * template, as llama.cpp's llama_chat_apply_template). Both read only the
 * GGUF metadata, so vocabulary-only files work. Output is exact bytes for
 * comparison with `llref tokenize` and `llref template`.
 */
#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "core/llm.h"
#include "models/mdl.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char tokenize_usage[] =
    "usage: kvchat tokenize -m MODEL [--no-bos] [--special] [--pieces] [TEXT | -f FILE]\n"
    "\n"
    "Print the token ids of TEXT (or of FILE, or of standard input when\n"
    "neither is given), space-separated on one line.\n"
    "\n"
    "  -m, --model MODEL  a GGUF file (a vocabulary-only file will do) or a\n"
    "                     model name in the store\n"
    "      --no-bos       do not add the BOS (and EOS) token the model asks for\n"
    "      --special      match special tokens written in the text (<|im_start|>);\n"
    "                     without it they are tokenized as plain text\n"
    "      --pieces       one token per line: the id and its text\n"
    "  -f, --file FILE    tokenize the contents of FILE ('-' for standard input);\n"
    "                     the text may hold at most " CMD_INPUT_MAX_TEXT "\n"
    "  -v, --verbose      say how long tokenizing took, on stderr\n"
    "\n"
    "Exit status: 0 ok, 1 usage error, 2 the model or file cannot be read.\n";

static const char template_usage[] =
    "usage: kvchat template [-m MODEL] [--template NAME | --template-file FILE]\n"
    "       kvchat template --list\n"
    "\n"
    "Render a sample conversation (system 'You are a helpful assistant', user\n"
    "'Hello', assistant 'Hi there', user 'Who are you'), with the assistant's\n"
    "turn opened at the end, in the chat template of MODEL, of the template\n"
    "NAME, or of the Jinja template in FILE, recognised by its markers. A\n"
    "model without a template, or with one kvchat does not know, gets ChatML\n"
    "and a warning on stderr.\n"
    "\n"
    "  -m, --model MODEL       a GGUF file or a model name in the store\n"
    "      --template NAME     a template by name (see --list); overrides MODEL's\n"
    "      --template-file F   a Jinja chat template, recognised by its markers\n"
    "      --list              the template names and their turn terminators\n"
    "\n"
    "Exit status: 0 ok, 1 usage error, 2 the model or file cannot be read.\n";

/* ==== shared: opening the vocabulary ==== */

struct model_file {
    struct llm_gguf *g;
};

static int open_model(const char *arg, struct model_file *m)
{
    char err[512], *path;
    mdl_resolve(arg, &path);
    int rc = path ? llm_gguf_open(path, &m->g, err, sizeof err) : (snprintf(err, sizeof err, "out of memory"), -1);
    free(path);
    if (rc < 0)
        return cmd_fail(CMD_EXIT_MODEL, "cannot open model '%s': %s", arg, err);
    return -1;
}

/* length of the valid UTF-8 sequence at s[0..n), 0 if none */
static int32_t utf8_seq(const unsigned char *s, int32_t n)
{
    int32_t k = s[0] >= 0xF0 && s[0] < 0xF5 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (k == 0 || s[0] >= 0xF5 || k > n)
        return 0;
    for (int32_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return k;
}

/* a token's text in single quotes, with control bytes and bytes that are
 * not whole UTF-8 characters (half of an emoji) escaped as \xNN */
static void print_piece(const char *s, int32_t n)
{
    putchar('\'');
    for (int32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int32_t k;
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\' || c == '\'')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else if (c < 0x80)
            putchar(c);
        else if ((k = utf8_seq((const unsigned char *)s + i, n - i)) > 0) {
            fwrite(s + i, 1, (size_t)k, stdout);
            i += k - 1;
        } else
            printf("\\x%02x", c);
    }
    putchar('\'');
}

/* ==== tokenize ==== */

enum { OPT_NO_BOS = 256, OPT_SPECIAL, OPT_PIECES, OPT_TEMPLATE, OPT_TEMPLATE_FILE, OPT_LIST };

static int tokenize_exec(int argc, char **argv)
{
    static const struct option longs[] = {
        {"model", required_argument, NULL, 'm'}, {"no-bos", no_argument, NULL, OPT_NO_BOS},
        {"special", no_argument, NULL, OPT_SPECIAL}, {"pieces", no_argument, NULL, OPT_PIECES},
        {"file", required_argument, NULL, 'f'}, {"verbose", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0}};
    const struct cmd_entry *e = &cmd_tokenize_entry;
    const char *model = NULL, *file = NULL;
    bool no_bos = false, special = false, pieces = false, verbose = false;
    int ch;
    if (cmd_wants_help(argc, argv))
        return cmd_help(e);
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":m:f:v", longs, NULL)) != -1) {
        switch (ch) {
        case 'm': model = optarg; break;
        case 'f': file = optarg; break;
        case 'v': verbose = true; break;
        case OPT_NO_BOS: no_bos = true; break;
        case OPT_SPECIAL: special = true; break;
        case OPT_PIECES: pieces = true; break;
        case ':': return cmd_usage_error(e, "option '%s' needs a value", argv[optind - 1]);
        default: return cmd_usage_error(e, "unknown option '%s'", argv[optind - 1]);
        }
    }
    static char *default_model; /* -m, else KVCHAT_MODEL, else the config file's, as every command */
    if (!model) {
        int rc = cmd_model_resolve(NULL, false, &default_model);
        if (rc)
            return rc;
        model = default_model;
    }
    if (argc - optind > 1)
        return cmd_usage_error(e, "expected one TEXT (quote it), got %d arguments", argc - optind);
    if (argc - optind == 1 && file)
        return cmd_usage_error(e, "give TEXT or -f FILE, not both");

    char *text;
    size_t len;
    if (argc - optind == 1) {
        len = strlen(argv[optind]);
        text = malloc(len + 1);
        if (text)
            memcpy(text, argv[optind], len + 1);
    } else {
        int rc = cmd_read_file("the text", file ? file : "-", &text, &len);
        if (rc)
            return rc;
    }
    if (!text)
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");

    struct model_file mf;
    int rc = open_model(model, &mf);
    if (rc >= 0) {
        free(text);
        return rc;
    }
    char err[512];
    struct llm_vocab *v;
    if (llm_vocab_load(mf.g, &v, err, sizeof err) < 0) {
        llm_gguf_close(mf.g);
        free(text);
        return cmd_fail(CMD_EXIT_MODEL, "cannot read the vocabulary of '%s': %s", model, err);
    }
    llm_gguf_close(mf.g);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t cap = len < (size_t)INT32_MAX - 16 ? (int32_t)len + 16 : INT32_MAX;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int32_t n = ids ? llm_tokenize(v, text, len, ids, cap, !no_bos, special) : INT32_MIN;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (n < 0) {
        free(ids);
        free(text);
        llm_vocab_free(v);
        return cmd_fail(CMD_EXIT_MODEL, "cannot tokenize: %s",
                        n == INT32_MIN ? "out of memory" : "too many tokens");
    }
    if (verbose)
        fprintf(stderr, "kvchat: %zu byte%s -> %d token%s in %.3f ms\n", len, cmd_s((int64_t)len), n, cmd_s(n),
                (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    if (pieces) {
        for (int32_t i = 0; i < n; i++) {
            char buf[256];
            int32_t k = llm_token_to_piece(v, ids[i], buf, sizeof buf, 0, true);
            printf("%d ", ids[i]);
            if (k < 0) {
                char *big = malloc((size_t)-k);
                if (big) {
                    k = llm_token_to_piece(v, ids[i], big, -k, 0, true);
                    print_piece(big, k);
                    free(big);
                }
            } else {
                print_piece(buf, k);
            }
            putchar('\n');
        }
    } else {
        for (int32_t i = 0; i < n; i++)
            printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    free(ids);
    free(text);
    llm_vocab_free(v);
    return CMD_EXIT_OK;
}

/* ==== template ==== */

static const struct llm_chat_msg sample[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
};

static int template_exec(int argc, char **argv)
{
    static const struct option longs[] = {
        {"model", required_argument, NULL, 'm'},
        {"template", required_argument, NULL, OPT_TEMPLATE},
        {"template-file", required_argument, NULL, OPT_TEMPLATE_FILE},
        {"list", no_argument, NULL, OPT_LIST}, {NULL, 0, NULL, 0}};
    const struct cmd_entry *e = &cmd_template_entry;
    const char *model = NULL, *name = NULL, *file = NULL;
    bool list = false;
    int ch;
    if (cmd_wants_help(argc, argv))
        return cmd_help(e);
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":m:", longs, NULL)) != -1) {
        switch (ch) {
        case 'm': model = optarg; break;
        case OPT_TEMPLATE: name = optarg; break;
        case OPT_TEMPLATE_FILE: file = optarg; break;
        case OPT_LIST: list = true; break;
        case ':': return cmd_usage_error(e, "option '%s' needs a value", argv[optind - 1]);
        default: return cmd_usage_error(e, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cmd_usage_error(e, "unexpected argument '%s'", argv[optind]);
    if (list) {
        for (int t = LLM_TEMPLATE_CHATML; t < LLM_TEMPLATE_COUNT; t++) {
            struct llm_template_turn_end te = llm_template_turn_end((enum llm_template)t);
            printf("%-18s %s\n", llm_template_name((enum llm_template)t), te.terminator);
        }
        return CMD_EXIT_OK;
    }
    static char *default_model;
    char def[4096];
    const char *def_what;
    if (!model && !name && !file && mdl_default_model(def, sizeof def, &def_what)) {
        int rc = cmd_model_resolve(NULL, false, &default_model);
        if (rc)
            return rc;
        model = default_model; /* the default model's template, as every command finds its model */
    }
    if (!model && !name && !file)
        return cmd_usage_error(e, "give -m MODEL, --template NAME or --template-file FILE");
    if (name && file)
        return cmd_usage_error(e, "give --template or --template-file, not both");
    if (name && llm_template_from_name(name) == LLM_TEMPLATE_UNKNOWN && strcmp(name, "unknown"))
        return cmd_usage_error(e, "unknown chat template '%s' (known: chatml, llama2, llama3, mistral-v7, phi3, "
                                  "gemma, zephyr, ...)", name); /* as run's */

    char *jinja = NULL;
    size_t jlen = 0;
    const char *what = NULL; /* for the warning */
    if (file) {
        int rc = cmd_read_file("template file", file, &jinja, &jlen);
        if (rc)
            return rc;
        what = "the template file";
    } else if (model && !name) {
        struct model_file mf;
        int rc = open_model(model, &mf);
        if (rc >= 0)
            return rc;
        struct llm_str s;
        if (llm_gguf_find_str(mf.g, "tokenizer.chat_template", &s) == 0) {
            jinja = malloc(s.len + 1);
            if (jinja) {
                memcpy(jinja, s.ptr, s.len);
                jlen = s.len;
            }
        }
        llm_gguf_close(mf.g);
        what = "the model's chat template";
    }
    bool fell_back;
    enum llm_template t = llm_template_choose(name, jinja, jlen, &fell_back);
    if (fell_back) {
        if (name)
            fprintf(stderr, "kvchat: warning: unknown template '%s'; using chatml\n", name);
        else if (!jinja)
            fprintf(stderr, "kvchat: warning: the model has no chat template; using chatml\n");
        else
            fprintf(stderr, "kvchat: warning: %s is not one kvchat knows; using chatml\n", what);
    }
    free(jinja);
    int32_t need = llm_template_render(t, sample, 4, true, NULL, 0);
    char *buf = malloc((size_t)-need);
    if (!buf)
        return cmd_fail(CMD_EXIT_MODEL, "out of memory");
    int32_t n = llm_template_render(t, sample, 4, true, buf, -need);
    fwrite(buf, 1, (size_t)n, stdout);
    free(buf);
    return CMD_EXIT_OK;
}

const struct cmd_entry cmd_tokenize_entry = {
    "tokenize", "print the token ids of a text", tokenize_usage, tokenize_exec};
const struct cmd_entry cmd_template_entry = {
    "template", "render a sample conversation in a chat template", template_usage,
    template_exec};
