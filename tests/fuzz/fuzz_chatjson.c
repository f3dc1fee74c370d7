/*
 * fuzz_chatjson.c - libFuzzer target for the JSON bodies a remote model's
 * server (or the hub) sends whole (models/json.c): a chat.completion
 * answer, an error body, a list of models or files. The input is parsed
 * each way; the request builder then takes the bytes as message text (any
 * bytes, invalid UTF-8 included) and must give JSON that parses back with
 * the same number of messages. Messages must be printable; text whole UTF-8.
 *   make tests/fuzz/fuzz_chatjson && ./tests/fuzz/fuzz_chatjson \
 *        -max_total_time=600 /tmp/chatjson-work tests/fuzz/corpus/chatjson
 */
#include "models/proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void printable_or_die(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            abort();
}

static void whole_utf8_or_die(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int k = mdl_utf8_seq((const unsigned char *)s + i, n - i);
        if (k <= 0)
            abort();
        i += (size_t)k;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    char err[512], msg[300];
    struct chat_acc a;
    chat_acc_init(&a, NULL, NULL);
    err[0] = 0;
    int rc = chat_acc_response(&a, in, size, err, sizeof err);
    if (rc < 0) {
        if (!err[0])
            abort();
        printable_or_die(err);
    }
    whole_utf8_or_die(a.text ? a.text : "", a.len);
    printable_or_die(a.finish_reason);
    printable_or_die(a.model);
    chat_acc_free(&a);

    if (chat_error_message(in, size, msg, sizeof msg) && !msg[0])
        abort();
    printable_or_die(msg);

    char **v;
    size_t n;
    if (json_string_list(in, size, "data", "id", &v, &n, err, sizeof err) == 0) {
        for (size_t i = 0; i < n; i++)
            printable_or_die(v[i]);
        mdl_strv_free(v, n);
    }

    /* the bytes as a conversation: system, then user */
    size_t half = size / 2, len;
    struct mdl_message m[2] = {{MDL_ROLE_SYSTEM, in, half}, {MDL_ROLE_USER, in + half, size - half}};
    struct mdl_chat_params p = {0};
    const char *stop = "\n";
    p.stop = &stop;
    p.n_stop = 1;
    p.temp_set = true;
    p.temp = size % 3;
    char *j = chat_request_json("m", m, 2, &p, size & 1, &len, err, sizeof err);
    if (!j)
        abort();
    whole_utf8_or_die(j, len);
    char **roles;
    size_t nr;
    if (json_string_list(j, len, "messages", "role", &roles, &nr, err, sizeof err) || nr != 2)
        abort();
    mdl_strv_free(roles, nr);
    free(j);
    return 0;
}
