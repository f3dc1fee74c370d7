/*
 * fuzz_sse.c - libFuzzer target for a streamed answer as the client reads
 * it: server-sent events (models/sse.c) whose data are chat-completion
 * chunks (models/json.c). The first input byte picks how the rest is split
 * into pieces; the same bytes are then fed in one piece, and the two runs
 * must agree (events, text, status, usage). Every piece of text handed on
 * must be whole UTF-8 characters and lie inside what was accumulated.
 * ASan/UBSan catch the rest.
 *   make tests/fuzz/fuzz_sse && ./tests/fuzz/fuzz_sse -max_total_time=600 \
 *        /tmp/sse-work tests/fuzz/corpus/sse
 */
#include "models/proto.h"
#include "tests/fuzz/fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct run {
    struct chat_acc acc;
    uint64_t n_events, n_pieces;
    uint64_t hash;          /* FNV-1a over event types and data */
    int last_rc;            /* of the last chunk */
    int n_bad;              /* chunks refused */
};

static int on_text(void *ud, const char *t, size_t n)
{
    struct run *r = ud;
    if (n == 0)
        abort(); /* empty pieces are never handed on */
    for (size_t i = 0; i < n;) {
        int k = mdl_utf8_seq((const unsigned char *)t + i, n - i);
        if (k <= 0)
            abort(); /* never half a character */
        i += (size_t)k;
    }
    r->n_pieces++;
    return 0;
}

static int on_event(void *ud, const char *event, const char *data, size_t n)
{
    struct run *r = ud;
    char err[512];
    if (data[n] != 0)
        abort();
    for (const char *p = event; *p; p++)
        r->hash = (r->hash ^ (uint8_t)*p) * 1099511628211ULL;
    for (size_t i = 0; i < n; i++)
        r->hash = (r->hash ^ (uint8_t)data[i]) * 1099511628211ULL;
    r->n_events++;
    err[0] = 0;
    r->last_rc = chat_acc_chunk(&r->acc, data, n, err, sizeof err);
    if (r->last_rc < 0) {
        r->n_bad++;
        if (!err[0])
            abort(); /* every refusal has a reason */
        for (const char *p = err; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                abort(); /* and it is printable */
    }
    return 0;
}

static int feed(const char *in, size_t n, size_t piece, struct run *r)
{
    struct sse s;
    char err[256];
    memset(r, 0, sizeof *r);
    r->hash = 1469598103934665603ULL;
    chat_acc_init(&r->acc, on_text, r);
    sse_init(&s);
    int rc = 0;
    for (size_t pos = 0; pos < n && rc == 0; pos += piece) {
        size_t k = n - pos < piece ? n - pos : piece;
        rc = sse_feed(&s, in + pos, k, on_event, r, err, sizeof err);
    }
    if (r->acc.len && (!r->acc.text || strlen(r->acc.text) > r->acc.len))
        abort();
    sse_free(&s);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t piece, n;
    char *buf = fuzz_stream_input(data, size, &piece, &n);
    if (!buf)
        return 0;
    struct run a, b;
    int ra = feed(buf, n, piece, &a);
    int rb = feed(buf, n, size, &b);
    if (ra != rb || a.n_events != b.n_events || a.hash != b.hash || a.acc.len != b.acc.len ||
        (a.acc.len && memcmp(a.acc.text, b.acc.text, a.acc.len)) || a.acc.done != b.acc.done ||
        a.acc.prompt_tokens != b.acc.prompt_tokens || a.acc.cached_tokens != b.acc.cached_tokens ||
        a.n_bad != b.n_bad || strcmp(a.acc.finish_reason, b.acc.finish_reason))
        abort();
    chat_acc_free(&a.acc);
    chat_acc_free(&b.acc);
    free(buf);
    return 0;
}
