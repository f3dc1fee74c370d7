/*
 * remote.h - (internal to cli/) a remote model (an OpenAI-compatible
 * server, entry of the model store) as a conversation's engine
 * (cli/remote.c).
 */
#ifndef KVCHAT_CLI_REMOTE_H
#define KVCHAT_CLI_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

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
/* models/'s status (MDL_ERR_X) of a remote call as an exit code */
int cmd_remote_status_exit(int rc);
/* the exit code of the last turn's failure (SESS_ERR_REMOTE) */
int cmd_remote_exit(const struct cmd_remote *rm);
/* run --json's remote keys (", \"remote\": true, ..."); -v's line; a one-line description */
void cmd_remote_json(const struct cmd_remote *rm, FILE *f);
void cmd_remote_describe(const struct cmd_remote *rm, const struct sess_turn_stats *ts, FILE *f);
void cmd_remote_info(const struct cmd_remote *rm, char *buf, size_t n);
struct sess_conv_params;
/* the sampling fields a turn with parameters cp sends, in words (for /show) */
void cmd_remote_sent(const struct cmd_remote *rm, const struct sess_conv_params *cp, char *buf, size_t n);
#endif
