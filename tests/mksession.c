/*
 * mksession.c - (tests only) puts a session into a store the way a chat
 * does: its messages (one token per byte of text, so counts are easy to
 * check), then the KV blocks of its token sequence (SESS_BLOCK_TOKENS
 * positions each, the last one partial) written as block files, recorded,
 * and listed as the session's. Lets CLI tests exercise `kvchat sessions`
 * before a model is involved.
 *   tests/mksession HOME NAME [--system TEXT] [--turns N] [--model PATH]
 * Blocks are content-addressed from the token ids, so two sessions whose
 * system prompts agree share the blocks that prompt fills.
 */
#include "sessions/sess-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *why)
{
    fprintf(stderr, "mksession: %s: %s\n", what, why);
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: mksession HOME NAME [--system TEXT] [--turns N] [--model PATH]\n");
        return 1;
    }
    const char *home = argv[1], *name = argv[2], *system = NULL, *model = "/models/test.gguf";
    int turns = 2;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--system"))
            system = argv[i + 1];
        else if (!strcmp(argv[i], "--turns"))
            turns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--model"))
            model = argv[i + 1];
        else
            die(argv[i], "unknown option");
    }
    struct sess_store *st;
    char err[1024];
    if (sess_store_open(home, sess_store_default_params(), &st, err, sizeof err))
        die(home, err);
    uint8_t fp[32];
    memset(fp, 0x42, 32);
    int64_t model_id, id;
    if (sess_model_id(st, fp, model, &model_id))
        die(model, sess_errmsg(st));
    struct sess_new n = {name, model_id, system, 1};
    if (sess_create(st, &n, &id))
        die(name, sess_errmsg(st));

    /* the messages, and all their tokens in one sequence */
    int n_msgs = (system ? 1 : 0) + 2 * turns;
    char **texts = calloc((size_t)n_msgs, sizeof *texts);
    struct sess_msg_rec *m = calloc((size_t)n_msgs, sizeof *m);
    int32_t *tokens = NULL;
    int64_t n_tok = 0;
    for (int i = 0; i < n_msgs; i++) {
        char buf[256];
        int t = (i - (system ? 1 : 0)) / 2 + 1;
        enum sess_role role = system && i == 0 ? SESS_ROLE_SYSTEM
                              : (i - (system ? 1 : 0)) % 2 == 0 ? SESS_ROLE_USER : SESS_ROLE_ASSISTANT;
        if (role == SESS_ROLE_SYSTEM)
            snprintf(buf, sizeof buf, "%s", system);
        else if (role == SESS_ROLE_USER)
            snprintf(buf, sizeof buf, "question %d of %s", t, name);
        else
            snprintf(buf, sizeof buf, "answer %d: \"quoted\"\nsecond line", t);
        texts[i] = strdup(buf);
        int64_t len = (int64_t)strlen(buf);
        tokens = realloc(tokens, (size_t)(n_tok + len) * sizeof *tokens);
        for (int64_t k = 0; k < len; k++)
            tokens[n_tok + k] = (unsigned char)buf[k];
        m[i] = (struct sess_msg_rec){role, texts[i], NULL, len, NULL, 0, NULL};
        n_tok += len;
    }
    for (int i = 0, at = 0; i < n_msgs; at += (int)m[i].n_tokens, i++)
        m[i].tokens = tokens + at;
    if (sess_write_messages(st, id, 0, m, n_msgs, 0, model_id, "{\"temp\": 0.8, \"seed\": 7}"))
        die(name, sess_errmsg(st));

    /* its blocks: 2 layers of 8 f16 elements per token */
    int64_t n_blocks = (n_tok + SESS_BLOCK_TOKENS - 1) / SESS_BLOCK_TOKENS;
    uint8_t (*ids)[32] = calloc((size_t)(n_blocks ? n_blocks : 1), sizeof *ids);
    static uint8_t rows[SESS_BLOCK_TOKENS * 2 * 2 * 8 * 2];
    for (int64_t k = 0; k < n_blocks; k++) {
        struct kv_block_desc d = {0};
        memcpy(d.fingerprint, fp, 32);
        if (k)
            memcpy(d.parent, ids[k - 1], 32);
        d.kv_type = 1;
        d.n_layer = 2;
        d.n_embd_k = d.n_embd_v = 8;
        d.pos0 = (uint32_t)(k * SESS_BLOCK_TOKENS);
        d.n_tokens = (uint32_t)(n_tok - d.pos0 < SESS_BLOCK_TOKENS ? n_tok - d.pos0 : SESS_BLOCK_TOKENS);
        d.tokens = tokens + d.pos0;
        for (size_t i = 0; i < sizeof rows; i++)
            rows[i] = (uint8_t)(i * 13 + d.pos0);
        char path[4200];
        int e;
        err[0] = 0;
        if (kv_block_id(&d, ids[k]) || sess_block_path(st, ids[k], true, path, sizeof path) ||
            kv_block_write(path, &d, ids[k], rows, err, sizeof err, &e) ||
            sess_block_record(st, &d, ids[k], model_id, (int64_t)kv_block_file_bytes(&d), sess_now_ms()))
            die("block", err[0] ? err : sess_errmsg(st));
    }
    if (sess_set_blocks(st, id, 0, (const uint8_t(*)[32])ids, n_blocks))
        die(name, sess_errmsg(st));
    for (int i = 0; i < n_msgs; i++)
        free(texts[i]);
    free(texts);
    free(m);
    free(tokens);
    free(ids);
    sess_store_close(st);
    return 0;
}
