/*
 * json.c - the one file that includes jansson: the JSON of the
 * chat-completions protocol (the request, streamed chunks, whole responses,
 * error bodies) and lists of strings in JSON bodies (a server's /v1/models,
 * the hub's file list for `models pull`).
 *
 * Why jansson: it checks that every string it parses is valid UTF-8 (the
 * server's text goes to terminals), rejects lone surrogate escapes, reports
 * errors with line, column and position, limits nesting depth, keeps 64-bit
 * integers exact, and decodes from a buffer that needs no NUL.
 *
 * Invariants: nothing here trusts a response's shape: every member is
 * looked up and type-checked before use, and a wrong type is an error
 * naming the member, never a crash. The request is built in one fixed
 * order from its inputs alone, so a conversation that grows by a turn
 * gives a request whose messages begin with the same bytes (what a
 * server's prefix cache needs).
 */
#include "core/llm.h" /* core/base */
#include "models/proto.h"

#include <jansson.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ==== text ==== */

int mdl_utf8_seq(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    int len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else
        return -1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n || p[i] < lo || p[i] > hi)
            return -i;
        lo = 0x80;
        hi = 0xbf;
    }
    return len;
}

/* a JSON string of n bytes of s, each invalid UTF-8 subpart as U+FFFD */
static json_t *string_clean(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        int k = mdl_utf8_seq(p + i, n - i);
        if (k < 0)
            bad++;
        i += (size_t)(k < 0 ? -k : k);
    }
    if (!bad)
        return json_stringn(s, n);
    char *out = malloc(n + 2 * bad + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int k = mdl_utf8_seq(p + i, n - i);
        if (k < 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += (size_t)-k;
        } else {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        }
    }
    json_t *j = json_stringn(out, o);
    free(out);
    return j;
}

/* valid UTF-8 s of n bytes, for a one-line message: control characters
 * (C0, DEL, C1) become spaces, and it is cut at a character to fit size */
static void printable(const char *s, size_t n, char *out, size_t size)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    if (!size)
        return;
    for (size_t i = 0; i < n;) {
        int k = mdl_utf8_seq(p + i, n - i);
        if (k < 0) {
            k = -k;
            if (o + 1 >= size)
                break;
            out[o++] = '?';
        } else if (k == 1 && (p[i] < 0x20 || p[i] == 0x7f)) {
            if (o + 1 >= size)
                break;
            if (!(o && out[o - 1] == ' '))
                out[o++] = ' ';
        } else if (k == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0) {
            if (o + 1 >= size)
                break;
            out[o++] = ' ';
        } else {
            if (o + (size_t)k >= size)
                break;
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    while (o && out[o - 1] == ' ')
        o--;
    out[o] = 0;
}

/* ==== the request ==== */

/* a float option as the user wrote it (0.7, not 0.699999988) */
static json_t *real_clean(double v)
{
    char b[32];
    snprintf(b, sizeof b, "%.6g", v);
    return json_real(strtod(b, NULL));
}

static const char *const role_names[MDL_ROLE_COUNT] = {"system", "user", "assistant"};

char *chat_request_json(const char *model, const struct mdl_message *msgs, size_t n_msgs,
                        const struct mdl_chat_params *p, bool stream, size_t *len, char *err,
                        size_t err_size)
{
    json_t *root = json_object(), *arr = json_array();
    bool ok = root && arr;
    ok = ok && !json_object_set_new(root, "model", string_clean(model ? model : "", model ? strlen(model) : 0));
    for (size_t i = 0; ok && i < n_msgs; i++) {
        json_t *m = json_object();
        unsigned r = (unsigned)msgs[i].role < MDL_ROLE_COUNT ? (unsigned)msgs[i].role : MDL_ROLE_USER;
        ok = m && !json_object_set_new(m, "role", json_string(role_names[r])) &&
             !json_object_set_new(m, "content", string_clean(msgs[i].text ? msgs[i].text : "", msgs[i].len));
        if (!ok)
            json_decref(m); /* NULL is fine */
        else
            ok = !json_array_append_new(arr, m); /* takes m, even when it fails */
    }
    ok = ok && !json_object_set(root, "messages", arr);
    ok = ok && !json_object_set_new(root, "stream", json_boolean(stream));
    if (ok && stream) {
        json_t *so = json_object();
        ok = so && !json_object_set_new(so, "include_usage", json_true()) &&
             !json_object_set_new(root, "stream_options", so);
    }
    if (ok && p->temp_set)
        ok = !json_object_set_new(root, "temperature", real_clean(p->temp));
    if (ok && p->top_p_set)
        ok = !json_object_set_new(root, "top_p", real_clean(p->top_p));
    if (ok && p->presence_penalty_set)
        ok = !json_object_set_new(root, "presence_penalty", real_clean(p->presence_penalty));
    if (ok && p->seed_set) /* the protocol's seed is a signed 64-bit integer */
        ok = !json_object_set_new(root, "seed", json_integer((json_int_t)(p->seed & INT64_MAX)));
    if (ok && p->max_tokens > 0)
        ok = !json_object_set_new(root, "max_tokens", json_integer(p->max_tokens));
    if (ok && p->n_stop > 0) {
        json_t *st = json_array();
        ok = st != NULL;
        for (size_t i = 0; ok && i < p->n_stop; i++)
            ok = !json_array_append_new(st, string_clean(p->stop[i], strlen(p->stop[i])));
        ok = ok && !json_object_set_new(root, "stop", st);
    }
    char *out = ok ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    json_decref(arr);
    json_decref(root);
    if (!out) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    *len = strlen(out);
    return out;
}

/* ==== responses ==== */

void chat_acc_init(struct chat_acc *a, mdl_text_fn on_text, void *ud)
{
    memset(a, 0, sizeof *a);
    a->on_text = on_text;
    a->ud = ud;
    a->prompt_tokens = a->completion_tokens = a->cached_tokens = -1;
    a->prompt_tok_s = a->decode_tok_s = -1;
}

void chat_acc_free(struct chat_acc *a)
{
    free(a->text);
    a->text = NULL;
    a->len = a->cap = 0;
}

/* parse a body that must be JSON: the value, or NULL with err set */
static json_t *load(const char *body, size_t n, char *err, size_t err_size)
{
    json_error_t e;
    json_t *j = json_loadb(body, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!j) {
        char why[160];
        printable(e.text, strlen(e.text), why, sizeof why);
        snprintf(err, err_size, "malformed JSON from the server (line %d, column %d, byte %d): %s",
                 e.line, e.column, e.position, why);
    }
    return j;
}

/* a non-negative integer member, or -1 (absent, null or not a whole number) */
static int64_t count_of(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 9e15 &&
        json_real_value(v) == (double)(int64_t)json_real_value(v))
        return (int64_t)json_real_value(v);
    return -1;
}

static double rate_of(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    double d = json_is_number(v) ? json_number_value(v) : -1;
    return d >= 0 && d < 1e12 ? d : -1;
}

/* usage and llama-server's timings, wherever they come */
static void take_usage(struct chat_acc *a, const json_t *root)
{
    const json_t *u = json_object_get(root, "usage");
    if (json_is_object(u)) {
        int64_t v;
        if ((v = count_of(u, "prompt_tokens")) >= 0)
            a->prompt_tokens = v;
        if ((v = count_of(u, "completion_tokens")) >= 0)
            a->completion_tokens = v;
        const json_t *d = json_object_get(u, "prompt_tokens_details");
        if (json_is_object(d) && (v = count_of(d, "cached_tokens")) >= 0)
            a->cached_tokens = v;
    }
    const json_t *t = json_object_get(root, "timings");
    if (json_is_object(t)) {
        int64_t v;
        /* llama-server: cache_n prompt tokens came from its cache; the
         * usage object, when there is one, says the same or nothing */
        if ((v = count_of(t, "cache_n")) >= 0 && a->cached_tokens < 0)
            a->cached_tokens = v;
        if (a->prompt_tokens < 0 && (v = count_of(t, "prompt_n")) >= 0 && count_of(t, "cache_n") >= 0)
            a->prompt_tokens = v + count_of(t, "cache_n");
        if (a->completion_tokens < 0 && (v = count_of(t, "predicted_n")) >= 0)
            a->completion_tokens = v;
        double r;
        if ((r = rate_of(t, "prompt_per_second")) >= 0)
            a->prompt_tok_s = r;
        if ((r = rate_of(t, "predicted_per_second")) >= 0)
            a->decode_tok_s = r;
    }
}

/* an error object at the top of a body or chunk: CHAT_ERR_SERVER with its
 * message, or 0 if there is none */
static int take_error(const json_t *root, char *err, size_t err_size)
{
    const json_t *e = json_object_get(root, "error");
    const json_t *obj = json_object_get(root, "object");
    const char *m = NULL;
    size_t mn = 0;
    if (json_is_object(e)) {
        const json_t *msg = json_object_get(e, "message");
        if (json_is_string(msg)) {
            m = json_string_value(msg);
            mn = json_string_length(msg);
        } else {
            m = "(no message)";
            mn = strlen(m);
        }
    } else if (json_is_string(e)) {
        m = json_string_value(e);
        mn = json_string_length(e);
    } else if (json_is_string(obj) && !strcmp(json_string_value(obj), "error")) {
        /* vLLM's older ErrorResponse: {"object": "error", "message": ...} */
        const json_t *msg = json_object_get(root, "message");
        m = json_is_string(msg) ? json_string_value(msg) : "(no message)";
        mn = json_is_string(msg) ? json_string_length(msg) : strlen(m);
    } else {
        return 0;
    }
    char why[400];
    printable(m, mn, why, sizeof why);
    snprintf(err, err_size, "the server reported an error: %s", why[0] ? why : "(empty message)");
    return CHAT_ERR_SERVER;
}

/* add a piece of the answer and hand it on */
static int take_text(struct chat_acc *a, const char *s, size_t n, char *err, size_t err_size)
{
    if (n == 0)
        return 0;
    /* a NUL (JSON's \u0000) becomes U+FFFD, in what is shown and in what is
     * saved alike: text is NUL-terminated everywhere after this */
    if (memchr(s, 0, n)) {
        size_t nul = 0;
        for (size_t i = 0; i < n; i++)
            nul += s[i] == 0;
        char *clean = nul > (SIZE_MAX - n) / 2 ? NULL : malloc(n + 2 * nul);
        if (!clean) {
            snprintf(err, err_size, "out of memory");
            return CHAT_ERR_MEMORY;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i])
                clean[k++] = s[i];
            else
                memcpy(clean + k, "\xef\xbf\xbd", 3), k += 3;
        }
        int rc = take_text(a, clean, k, err, err_size);
        free(clean);
        return rc;
    }
    if (base_grow((void **)&a->text, &a->cap, a->len + n + 1, 1)) {
        snprintf(err, err_size, "out of memory");
        return CHAT_ERR_MEMORY;
    }
    memcpy(a->text + a->len, s, n);
    a->len += n;
    a->text[a->len] = 0;
    if (a->on_text && a->on_text(a->ud, s, n)) {
        a->stopped = true;
        return CHAT_STOPPED;
    }
    return 0;
}

static int malformed(char *err, size_t err_size, const char *what)
{
    snprintf(err, err_size, "malformed response from the server: %s", what);
    return CHAT_ERR_MALFORMED;
}

/* choice 0 of root's choices: NULL if there are none (that is allowed: the
 * usage chunk has an empty list); *bad when choices is not as it must be */
static const json_t *first_choice(const json_t *root, bool *bad)
{
    const json_t *ch = json_object_get(root, "choices");
    *bad = false;
    if (!ch || json_is_null(ch))
        return NULL;
    if (!json_is_array(ch)) {
        *bad = true;
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(ch); i++) {
        const json_t *c = json_array_get(ch, i);
        if (!json_is_object(c)) {
            *bad = true;
            return NULL;
        }
        const json_t *idx = json_object_get(c, "index");
        if (!idx || (json_is_integer(idx) && json_integer_value(idx) == 0))
            return c;
    }
    return NULL;
}

/* the parts of a chunk or response besides its text */
static int take_common(struct chat_acc *a, const json_t *root, const json_t *choice, char *err,
                       size_t err_size)
{
    const json_t *model = json_object_get(root, "model");
    if (json_is_string(model))
        printable(json_string_value(model), json_string_length(model), a->model, sizeof a->model);
    take_usage(a, root);
    if (choice) {
        const json_t *fr = json_object_get(choice, "finish_reason");
        if (json_is_string(fr))
            printable(json_string_value(fr), json_string_length(fr), a->finish_reason,
                      sizeof a->finish_reason);
        else if (fr && !json_is_null(fr))
            return malformed(err, err_size, "choices[0].finish_reason is not a string");
    }
    return 0;
}

/* the text member of obj (delta or message): a string, null or absent */
static int take_content(struct chat_acc *a, const json_t *obj, const char *where, char *err,
                        size_t err_size)
{
    if (!obj || json_is_null(obj))
        return 0;
    if (!json_is_object(obj)) {
        char m[64];
        snprintf(m, sizeof m, "choices[0].%s is not an object", where);
        return malformed(err, err_size, m);
    }
    const json_t *c = json_object_get(obj, "content");
    if (!c || json_is_null(c))
        return 0;
    if (!json_is_string(c)) {
        char m[64];
        snprintf(m, sizeof m, "choices[0].%s.content is not a string", where);
        return malformed(err, err_size, m);
    }
    return take_text(a, json_string_value(c), json_string_length(c), err, err_size);
}

static int take_body(struct chat_acc *a, const char *data, size_t n, const char *member, char *err,
                     size_t err_size)
{
    json_t *root = load(data, n, err, err_size);
    if (!root)
        return CHAT_ERR_MALFORMED;
    int rc;
    bool bad;
    const json_t *choice;
    if (!json_is_object(root)) {
        rc = malformed(err, err_size, "not a JSON object");
    } else if ((rc = take_error(root, err, err_size))) {
        /* the error's message is in err */
    } else if ((choice = first_choice(root, &bad)), bad) {
        rc = malformed(err, err_size, "choices is not a list of objects");
    } else if (!(rc = take_common(a, root, choice, err, err_size)) && choice) {
        rc = take_content(a, json_object_get(choice, member), member, err, err_size);
    }
    json_decref(root);
    a->n_chunks++;
    return rc;
}

int chat_acc_chunk(struct chat_acc *a, const char *data, size_t n, char *err, size_t err_size)
{
    /* the stream's end, as OpenAI and everyone after it send it */
    size_t i = 0, j = n;
    while (i < j && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n'))
        i++;
    while (j > i && (data[j - 1] == ' ' || data[j - 1] == '\t' || data[j - 1] == '\n'))
        j--;
    if (j - i == 6 && !memcmp(data + i, "[DONE]", 6)) {
        a->done = true;
        return CHAT_OK;
    }
    return take_body(a, data, n, "delta", err, err_size);
}

int chat_acc_response(struct chat_acc *a, const char *body, size_t n, char *err, size_t err_size)
{
    int rc = take_body(a, body, n, "message", err, err_size);
    if (rc == CHAT_OK)
        a->done = true;
    return rc;
}

int chat_error_message(const char *body, size_t n, char *out, size_t size)
{
    json_error_t e;
    out[0] = 0;
    json_t *root = n ? json_loadb(body, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e) : NULL;
    if (!root) {
        /* a plain-text body says something too; HTML does not, in a line */
        size_t k = 0;
        while (k < n && (body[k] == ' ' || body[k] == '\n' || body[k] == '\r' || body[k] == '\t'))
            k++;
        if (k == n || body[k] == '<' || body[k] == '{' || body[k] == '[')
            return 0;
        size_t line = k;
        while (line < n && body[line] != '\n')
            line++;
        printable(body + k, line - k, out, size);
        return out[0] != 0;
    }
    const json_t *m = NULL, *er = json_object_get(root, "error");
    if (json_is_object(er))
        m = json_object_get(er, "message");
    else if (json_is_string(er))
        m = er;
    if (!json_is_string(m))
        m = json_object_get(root, "message");
    if (!json_is_string(m))
        m = json_object_get(root, "detail");
    if (json_is_array(m) && json_array_size(m) && json_is_object(json_array_get(m, 0)))
        m = json_object_get(json_array_get(m, 0), "msg"); /* FastAPI's validation errors */
    if (json_is_string(root))
        m = root;
    if (json_is_string(m))
        printable(json_string_value(m), json_string_length(m), out, size);
    json_decref(root);
    return out[0] != 0;
}

/* ==== lists of strings ==== */

void mdl_strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

int json_string_list(const char *body, size_t n, const char *array, const char *field, char ***out,
                     size_t *count, char *err, size_t err_size)
{
    *out = NULL;
    *count = 0;
    json_t *root = load(body, n, err, err_size);
    if (!root)
        return CHAT_ERR_MALFORMED;
    const json_t *arr = json_object_get(root, array);
    if (!json_is_array(arr)) {
        json_decref(root);
        snprintf(err, err_size, "malformed response from the server: no list '%s'", array);
        return CHAT_ERR_MALFORMED;
    }
    size_t m = json_array_size(arr), k = 0;
    char **v = calloc(m ? m : 1, sizeof *v);
    if (!v) {
        json_decref(root);
        snprintf(err, err_size, "out of memory");
        return CHAT_ERR_MEMORY;
    }
    for (size_t i = 0; i < m; i++) {
        const json_t *s = json_object_get(json_array_get(arr, i), field);
        if (!json_is_string(s))
            continue;
        size_t sl = json_string_length(s);
        char *c = malloc(sl + 1);
        if (!c) {
            mdl_strv_free(v, k);
            json_decref(root);
            snprintf(err, err_size, "out of memory");
            return CHAT_ERR_MEMORY;
        }
        printable(json_string_value(s), sl, c, sl + 1);
        v[k++] = c;
    }
    json_decref(root);
    *out = v;
    *count = k;
    return 0;
}
