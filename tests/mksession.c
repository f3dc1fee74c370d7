/*
 * mksession.c - (tests only) puts a session into a store the way the chat
 * will: messages, then a KV segment per exchange written with kv_seg_write
 * and appended to the chain. Lets CLI tests exercise `kvchat sessions`
 * before a model is involved.
 *   tests/mksession HOME NAME [--system TEXT] [--turns N] [--seed S]
 * Segments are content-addressed from the (deterministic) token ids, so two
 * sessions with the same --system share the first segment.
 */
#include "sessions/kvseg.h"
#include "sessions/sess.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void die(const char *what, const char *why)
{
    fprintf(stderr, "mksession: %s: %s\n", what, why);
    exit(2);
}

/* a segment of n tokens derived from text; returns its id */
static void segment(struct sess_store *st, int64_t id, const uint8_t fp[32], uint8_t parent[32],
                    uint32_t *pos, const char *text, int64_t last_seq)
{
    uint32_t n = (uint32_t)strlen(text);
    if (n == 0)
        n = 1;
    int32_t *toks = malloc(n * sizeof *toks);
    for (uint32_t i = 0; i < n; i++)
        toks[i] = (unsigned char)text[i % (strlen(text) ? strlen(text) : 1)];
    struct kv_seg_desc d = {0};
    memcpy(d.fingerprint, fp, 32);
    memcpy(d.parent, parent, 32);
    d.kv_type = 1;
    d.n_layer = 2;
    d.n_embd_k = d.n_embd_v = 16;
    d.pos0 = *pos;
    d.n_tokens = n;
    d.tokens = toks;
    uint8_t sid[32];
    kv_seg_id(&d, sid);
    size_t rb = (size_t)n * 16 * 2;
    uint8_t *rows = malloc(rb);
    for (size_t i = 0; i < rb; i++)
        rows[i] = (uint8_t)(i * 13 + *pos);
    const void *k[2] = {rows, rows}, *v[2] = {rows, rows};
    char path[4200], err[256];
    if (sess_segment_path(st, sid, path, sizeof path))
        die("segment path", sess_errmsg(st));
    struct stat sb;
    if (stat(path, &sb) != 0 && kv_seg_write(path, &d, sid, k, v, err, sizeof err))
        die("segment", err);
    stat(path, &sb);
    if (sess_chain_append(st, id, sid, parent, fp, 1, *pos, n, sb.st_size, last_seq))
        die("chain", sess_errmsg(st));
    memcpy(parent, sid, 32);
    *pos += n;
    free(rows);
    free(toks);
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
    if (sess_store_open(home, &st, err, sizeof err))
        die(home, err);
    uint8_t fp[32], parent[32] = {0};
    memset(fp, 0x42, 32);
    struct sess_new n = {name, model, fp, system, "{\"temp\": 0.8, \"seed\": 7}", 1};
    int64_t id;
    if (sess_create(st, &n, &id))
        die(name, sess_errmsg(st));
    uint32_t pos = 0;
    int64_t seq = 0;
    if (system) {
        sess_append_message(st, id, SESS_ROLE_SYSTEM, system, (int64_t)strlen(system), NULL);
        segment(st, id, fp, parent, &pos, system, seq++);
    }
    for (int t = 0; t < turns; t++) {
        char q[64], a[128], both[200];
        snprintf(q, sizeof q, "question %d of %s", t + 1, name);
        snprintf(a, sizeof a, "answer %d: \"quoted\"\nsecond line", t + 1);
        sess_append_message(st, id, SESS_ROLE_USER, q, (int64_t)strlen(q), NULL);
        sess_append_message(st, id, SESS_ROLE_ASSISTANT, a, (int64_t)strlen(a), NULL);
        seq += 2;
        snprintf(both, sizeof both, "%s%s", q, a);
        segment(st, id, fp, parent, &pos, both, seq - 1);
    }
    sess_store_close(st);
    return 0;
}
