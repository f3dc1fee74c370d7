/*
 * remote-chat.c - a test tool that holds a conversation with a remote model
 * through mdl_remote_chat, as a sessions/ conversation will: a system
 * prompt, then one user message per turn, each turn sending the whole
 * history with the earlier answers (the answer of a cut or interrupted turn
 * is kept as it came). It prints one JSON line per turn:
 *   {"turn", "status", "prompt_tokens", "cached_tokens", "completion_tokens",
 *    "stop_reason", "answer", "error"}
 * and exits 0 when every turn answered.
 *   usage: remote-chat MODEL [--system TEXT] [--temp T] [--seed N] [-n N]
 *                      [--stop TEXT]... MESSAGE...
 * MODEL is a remote model's name in $KVCHAT_HOME's store.
 */
#include "models/mdl.h"
#include "tests/json-out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: remote-chat MODEL [--system TEXT] [--temp T] [--seed N] [-n N] "
                        "[--stop TEXT]... MESSAGE...\n");
        return 1;
    }
    struct mdl_chat_params p = mdl_chat_default_params();
    const char *system = NULL, *stops[8];
    struct mdl_message *msgs = calloc((size_t)argc * 2 + 1, sizeof *msgs);
    char **answers = calloc((size_t)argc, sizeof *answers);
    size_t n_msgs = 0, n_answers = 0;
    int first = 2;
    for (; first < argc && argv[first][0] == '-'; first += 2) {
        const char *o = argv[first], *v = first + 1 < argc ? argv[first + 1] : "";
        if (!strcmp(o, "--system"))
            system = v;
        else if (!strcmp(o, "--temp"))
            p.temp_set = true, p.temp = atof(v);
        else if (!strcmp(o, "--seed"))
            p.seed_set = true, p.seed = strtoull(v, NULL, 10);
        else if (!strcmp(o, "-n"))
            p.max_tokens = atoi(v);
        else if (!strcmp(o, "--stop") && p.n_stop < 8)
            stops[p.n_stop++] = v;
        else {
            fprintf(stderr, "remote-chat: unknown option '%s'\n", o);
            return 1;
        }
    }
    p.stop = stops;
    char *path, err[4096];
    struct mdl_remote *r;
    if (mdl_resolve(argv[1], &path) || !mdl_is_remote(path)) {
        fprintf(stderr, "remote-chat: no remote model '%s'\n", argv[1]);
        return 1;
    }
    int rc = mdl_remote_open(path, &r, err, sizeof err);
    free(path);
    if (rc) {
        fprintf(stderr, "remote-chat: %s\n", err);
        return 1;
    }
    if (system)
        msgs[n_msgs++] = (struct mdl_message){MDL_ROLE_SYSTEM, system, strlen(system)};
    int bad = 0;
    for (int t = first; t < argc; t++) {
        msgs[n_msgs++] = (struct mdl_message){MDL_ROLE_USER, argv[t], strlen(argv[t])};
        struct mdl_chat_result res;
        int rc = mdl_remote_chat(r, msgs, n_msgs, &p, NULL, NULL, &res, err, sizeof err);
        printf("{\"turn\": %d, \"status\": %d, \"prompt_tokens\": %lld, \"cached_tokens\": %lld, "
               "\"completion_tokens\": %lld, \"stop_reason\": \"%s\", \"answer\": ",
               t - first + 1, rc, (long long)res.prompt_tokens, (long long)res.cached_tokens,
               (long long)res.completion_tokens, res.stop_reason);
        json_str(res.text, res.len);
        printf(", \"error\": ");
        json_str(rc ? err : "", rc ? strlen(err) : 0);
        printf("}\n");
        fflush(stdout);
        bad |= rc != 0;
        /* the answer joins the history (a partial one too), as it would be stored */
        answers[n_answers] = res.text;
        msgs[n_msgs++] = (struct mdl_message){MDL_ROLE_ASSISTANT, res.text, res.len};
        res.text = NULL;
        n_answers++;
        mdl_chat_result_free(&res);
    }
    for (size_t i = 0; i < n_answers; i++)
        free(answers[i]);
    free(answers);
    free(msgs);
    mdl_remote_close(r);
    return bad;
}
