/*
 * conv.h - (internal to cli/) one way to open a conversation, for chat and
 * run (cli/conv.c): the session store opened once for the command, the
 * session named (or -c's) looked up on that handle, the model (the
 * session's own unless -m), the conversation, the session attached, and
 * the one fit check of a message. Each failure is printed and returned as
 * its exit code.
 *
 *     struct cmd_conv c;
 *     struct cmd_conv_params p = {.e = &cmd_run_entry, .session = name, ...};
 *     if ((rc = cmd_conv_begin(&c, &o, &p)))  // before any long work
 *         ...
 *     if ((rc = cmd_conv_open(&c, &o, &p)))   // model, store, attach
 *         ...
 *     sess_conv_say(c.conv, ...);
 *     cmd_conv_close(&c);
 */
#ifndef KVCHAT_CLI_CONV_H
#define KVCHAT_CLI_CONV_H

#include "cli/opts.h"
#include "sessions/sess.h"

struct cmd_progress;
struct cmd_conv;

struct cmd_conv_params {
    const struct cmd_entry *e; /* the command (its usage errors) */
    const char *session;       /* SESSION or -s NAME, or NULL */
    bool cont;                 /* -c/--continue: the session changed last */
    bool offer_pull;           /* no model configured: offer to pull one (chat on a terminal) */
    bool store_always;         /* the store even for --no-cache or a remote model (chat: /save) */
    bool model_name_refused;   /* a new session named like a store model is refused (chat) */
    const char *name_prefix;   /* a bad new session name is a usage error with this prefix
                                  ("run: "); NULL: said as the chat says it, without --help */
    const char *what;          /* "run", "chat": the note when the store cannot be opened */
    void (*model_hint)(const char *session); /* what to do after SESS_ERR_MODEL, or NULL */
    /* called once the model is open, before the store, the conversation
     * and the attach (the chat takes its signals there), or NULL */
    void (*model_opened)(void *ud, const struct cmd_conv *c);
    void *ud;
    struct cmd_progress *prog; /* a long restore's progress line */
    double turn_start_ms;      /* the turn's ttft counts from here (run), or 0 */
    /* a new session is made with its first exchange, after the answer
     * (cmd_conv_make_pending), so that a turn that never answers (killed,
     * interrupted, refused, or a chat left before it) leaves no empty
     * session behind (run and chat) */
    bool new_after_answer;
};

struct cmd_conv {
    struct cmd_llm l;
    struct sess_store *st;        /* NULL: no store, no KV cache on disk */
    struct sess_conv *conv;       /* owns l's context */
    const char *session;          /* the session, or NULL (borrowed from the params, or latest) */
    struct sess_restore_stats rs; /* what attaching it restored */
    char latest[256];             /* -c's session */
    char *own_model;              /* the session's own model, or NULL (o->model points here then;
                                     freed by cmd_conv_close) */
    bool pending;                 /* a new session, not made yet (params.new_after_answer) */
};

/* Before any long work: the store opened if a session is named or
 * continued, -c's session found, a new session's name checked, an
 * existing session's own model made o->model (unless -m was given). 0, or
 * an exit code (printed). cmd_conv_close frees c in either case. */
int cmd_conv_begin(struct cmd_conv *c, struct cmd_opts *o, const struct cmd_conv_params *p);
/* The model (o must outlive c), the store opened or made when the
 * conversation needs it, the conversation, the session attached (c->rs
 * says what it restored). 0, or an exit code (printed). */
int cmd_conv_open(struct cmd_conv *c, struct cmd_opts *o, const struct cmd_conv_params *p);
/* After the first answer of a pending new session: the session made
 * with that exchange. 0, or 1 when it could not be (said on stderr: made
 * by another process meanwhile, or the store failed). */
int cmd_conv_make_pending(struct cmd_conv *c);
/* The new session name made now from what conv has so far (its first
 * exchange): 0, or 1 with the reason in err (made by another process
 * meanwhile, or the store failed). cmd_conv_make_pending's, and the
 * chat's after its first answer. */
int cmd_conv_make_session(struct sess_store *st, struct sess_conv *conv, const char *name, char *err,
                          size_t err_size);
void cmd_conv_close(struct cmd_conv *c);

/* Would text (len bytes, named by what: a file) fit as a message in conv
 * with room tokens left (sess_conv_fits)? 0 with its token count in
 * *n_tokens, or -1 with the reason in err. */
int cmd_conv_text_fits(struct sess_conv *conv, bool special, const char *what, const char *text, size_t len,
                       int64_t room, int64_t *n_tokens, char *err, size_t err_size);

#endif
