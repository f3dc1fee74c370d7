/*
 * io.h - (internal to cli/) input read whole and checked, JSON output, and
 * an answer streamed as it is generated (cli/io.c).
 */
#ifndef KVCHAT_CLI_IO_H
#define KVCHAT_CLI_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/llm.h"

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

/* A file's text for a message (/read, run -f): path ("-": stdin), at most
 * max bytes (CMD_INPUT_MAX), read with cmd_read_all. Refuses what is not
 * text: a directory or device, a NUL byte ("binary"), bytes that are not
 * UTF-8. Returns 0 with *out (malloc'd, NUL-terminated; caller frees) and
 * *len, or -1 with the reason in err (no "kvchat:" prefix, the path
 * quoted). */
int cmd_read_text(const char *path, size_t max, char **out, size_t *len, char *err, size_t err_size);

/* base_buf_add (core/base) keeping b->len at most max: 0, or -1 when out
 * of memory or when it would pass max (then *too_big, if given, is set). */
int cmd_buf_add(struct base_buf *b, const char *p, size_t n, size_t max, bool *too_big);

/* JSON output: a string with escapes */
void cmd_json_str(FILE *f, const char *s, size_t n);
/* ', "k": "v"' (null when v is NULL or empty) */
void cmd_json_key_str(FILE *f, const char *k, const char *v);
/* JSON output of a list: one array, whole (README "JSON output"). Before
 * item i, cmd_json_list_item(f, i) writes "[" or a separator; after n
 * items, cmd_json_list_end(f, n) closes it (an empty list is "[]"). */
void cmd_json_list_item(FILE *f, int64_t i);
void cmd_json_list_end(FILE *f, int64_t n);

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
    struct base_buf text[2]; /* the answer [0] and the reasoning [1], kept when out is NULL */
};
/* 0, or -1 out of memory */
int cmd_answer_init(struct cmd_answer *a, FILE *out, bool show_reasoning, bool dim);
/* the sess_conv_say callback: ud is a struct cmd_answer */
int cmd_answer_text(void *ud, const char *text, size_t n);
/* the end of one answer: what was held back, the colour reset; ready for the next */
void cmd_answer_end(struct cmd_answer *a);
void cmd_answer_free(struct cmd_answer *a);
#endif
