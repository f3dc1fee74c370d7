/*
 * chat.h - (internal to cli/) the interactive chat's state and what its
 * slash commands (cli/chat-slash.c, /set in cli/chat-set.c) share with the
 * chat (cli/cmd-chat.c): saying things to the user, turns, conversations,
 * questions.
 */
#ifndef KVCHAT_CLI_CHAT_H
#define KVCHAT_CLI_CHAT_H

#include "cli/cmd.h"
#include "cli/io.h"
#include "cli/opts.h"
#include "cli/progress.h"
#include "cli/repl.h"
#include "cli/wrap.h"
#include "sessions/sess.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct chat {
    struct cmd_progress prog; /* the progress line of a long prefill or restore */
    struct cmd_opts o;
    struct cmd_llm l;
    struct sess_conv *conv;
    struct sess_store *st; /* the store (NULL when it cannot be opened) */
    char *name;            /* the session's name; NULL for an unnamed chat */
    bool pending;          /* name is a new session, not made yet: made with the first answer, so
                              that a chat left (or killed) before any answer leaves no empty session */
    struct repl *repl;
    FILE *ui;              /* stdout on a terminal, else stderr */
    bool color;
    bool interactive;      /* stdin is a terminal */
    bool yes;              /* --yes: piped input, the chat's questions are answered yes */
    bool out_broken;       /* stdout went away */
    bool refused;          /* a message was refused or failed (the exit status, when piped) */
    int refused_code;      /* that exit status (0: CMD_EXIT_MODEL) */
    char last_char;        /* of the answer being streamed */
    struct wrap wrap;      /* word wrap of answers on a terminal */
    bool wrapping;         /* the answer being streamed is wrapped */
    struct cmd_answer ans; /* splits reasoning from the answer as it streams */
    char *stop[CMD_OPTS_MAX_STOP]; /* /set parameter stop's strings (o.stop points here then) */
    struct sess_turn_stats last;
    bool have_last;
    int64_t turns;          /* answers in this process */
    int64_t total_prefilled, total_cached, total_generated;
    int64_t total_drafted, total_accepted, total_passes; /* speculative decoding's, in this process */
    bool model_switch;     /* chat_conv_attach: a session of another model is not an error (/load) */
    char *model_buf;       /* the model /load switched to, or NULL (o.model points here then) */
};


/* what a line of the chat is coloured as (when colours are on) */
enum chat_color { C_RESET, C_DIM, C_BOLD, C_PROMPT, C_WARN, C_ERR };

/* SIGINT: stop the answer or drop the line; SIGTERM, SIGHUP: leave (cmd-chat.c) */
extern volatile sig_atomic_t chat_interrupt, chat_quit;

/* ==== saying things (chat-ui.c) ==== */
/* the escape sequence of c, "" without colours */
const char *chat_col(const struct chat *ch, enum chat_color c);
/*
 * Text for the user on ui, ended by a newline: on a terminal wrapped at its
 * width as answers are (cli/wrap.c), sanitized unless raw (our own text with
 * colours). The first head bytes (a label, padding included) are written as
 * they are; the lines after the first start at column hang.
 */
void chat_ui_text(struct chat *ch, enum chat_color c, const char *text, size_t head, int hang, bool raw);
/* a note to the user: wrapped on ui */
void chat_note(struct chat *ch, enum chat_color c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* an error inside the chat: to stderr in kvchat's form, wrapped on a terminal */
void chat_err(struct chat *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* information (not an error) on stderr in kvchat's form, wrapped on a terminal */
void chat_info(struct chat *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a status line on ui, wrapped at the terminal's width (nothing cut) */
void chat_print_fit(struct chat *ch, enum chat_color c, const char *line);
/* a /show line: its label padded to column 11, the value's lines under it */
void chat_print_wrapped(struct chat *ch, const char *line);
/* a session reopened on a terminal: its last exchange, dimmed */
void chat_show_last_exchange(struct chat *ch);
/* -v's line of one turn's figures */
void chat_stats_line(struct chat *ch, const struct sess_turn_stats *ts);
/* /set's and /show's line of speculative decoding ("drafting   on ...") into line */
void chat_draft_line(const struct chat *ch, char *line, size_t n);

/* ==== turns (cmd-chat.c) ==== */
/* text as the next message: answered, or said why not */
void chat_say(struct chat *ch, const char *text);
/* around a turn the chat runs itself (/retry): streaming set up and ended */
void chat_answer_begin(struct chat *ch);
void chat_answer_end(struct chat *ch);
/* the sess_conv_say callback (ud: the chat) */
int chat_on_text(void *ud, const char *text, size_t n);
/* after a turn: the line ended, its figures kept, notes about how it stopped */
void chat_turn_done(struct chat *ch, int rc, const struct sess_turn_stats *ts);
/* a turn that gave no answer: said, and (piped) the exit status */
void chat_turn_failed(struct chat *ch, int rc);

/* ==== conversations and questions (cmd-chat.c) ==== */
/* a new unnamed chat with system prompt system: 0, or -1 (said) */
int chat_conv_new(struct chat *ch, const char *system);
/* the conversation's system prompt, or NULL */
const char *chat_conv_system(const struct chat *ch);
/* open session name (create: make it if absent) as the conversation: 0,
 * -SESS_ERR_MODEL (ch->model_switch: another model's session, unsaid), or an
 * exit code (said), the conversation as it was */
int chat_conv_attach(struct chat *ch, const char *name, bool create);
/* the store is there for sessions: 0, or -1 having said why not */
int chat_store_need(struct chat *ch);
/* a private chat saves nothing: -1 having said so when what would save */
int chat_private_refuses(struct chat *ch, const char *what);
/* ask before changing what a saved session keeps; piped, yes only with --yes */
bool chat_confirm(struct chat *ch, const char *question, const char *what);
/* may an unsaved chat be lost (asked on a terminal)? */
bool chat_may_discard(struct chat *ch, const char *what);
/* 0 if session name exists and no other process has it open; -1 (said) */
int chat_session_available(struct chat *ch, const char *name);
/* a name for a new session (the store's one rule); false (said) if not */
bool chat_name_ok(struct chat *ch, const char *name);

/* ==== input (chat-input.c) ==== */
/*
 * Read one input: a line; lines joined while one ends in a backslash; or a
 * """ block. *text gets it (malloc'd). Returns REPL_LINE, or another status
 * (nothing in *text): Ctrl-C drops everything typed for this input;
 * REPL_TOO_LONG for an input of more than CMD_INPUT_MAX bytes.
 */
enum repl_status chat_read_input(struct chat *ch, const char *prompt, char **text);

/* ==== slash commands (chat-slash.c) ==== */
/* run the slash command in line (changed): 1 to leave the chat */
int chat_slash_run(struct chat *ch, char *line);
/* Tab's candidates for line (cli/repl.h's completion callback; ud: the chat) */
bool chat_complete(void *ud, const char *line, int start, repl_add_fn add, void *acc);
/* leaving: an unnamed chat with exchanges asks on a terminal; true to leave */
bool chat_may_leave(struct chat *ch);
/* /system TEXT: the system prompt shown, or set (asks before dropping exchanges); 0 */
int chat_slash_system(struct chat *ch, char *arg);

/* ==== /set (chat-set.c) ==== */
/* /set KEY VALUE (and ollama's forms); without arg, the settings: 0 */
int chat_slash_set(struct chat *ch, char *arg);
/* /set's and /show's lines of what /set changes */
void chat_show_settings(struct chat *ch);

#endif
