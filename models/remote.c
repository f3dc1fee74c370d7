/*
 * remote.c - remote models: their store entries (models/NAME.remote) and
 * the client that chats with an OpenAI-compatible server one turn at a
 * time (POST /chat/completions, streamed as server-sent events, or whole).
 * The bytes are parsed by sse.c and json.c; the connection is http.c's.
 *
 * Invariants: an entry never holds a key; the key is read from its
 * variable for each request and goes only to the entry's origin (http.c
 * drops it once a redirect leaves that origin). Retries happen only before
 * any text has been handed to the caller, so an answer is never shown
 * twice. Every failure leaves the text that did come in the result, and a
 * status that says whether the answer is whole, interrupted or cut.
 */
#include "core/llm.h" /* core/base */
#include "models/kvfile.h"
#include "models/mdl.h"
#include "models/net.h"
#include "models/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 120
#define DEFAULT_RETRIES 3
#define MAX_RETRY_AFTER_S 60
#define ERROR_BODY_MAX (64u << 10)    /* bytes of an error body we read */
#define RESPONSE_MAX (64u << 20)      /* bytes of a whole (not streamed) answer */

struct mdl_remote {
    char name[160];
    char url[1024];        /* the /v1 base, without a trailing '/' */
    char model[256];
    char key_env[128];
    char ca_file[4096];
    int timeout_s, retries;
    bool stream, tls;
    int64_t added;
    char origin[300];      /* where the key may go */
};

struct mdl_remote_params mdl_remote_default_params(void)
{
    return (struct mdl_remote_params){.timeout_s = DEFAULT_TIMEOUT_S, .retries = DEFAULT_RETRIES};
}

struct mdl_chat_params mdl_chat_default_params(void)
{
    return (struct mdl_chat_params){0};
}

void mdl_chat_result_free(struct mdl_chat_result *res)
{
    free(res->text);
    res->text = NULL;
    res->len = 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* ==== entries ==== */

bool mdl_is_remote(const char *path)
{
    size_t n = strlen(path);
    struct stat st;
    return n > 7 && !strcmp(path + n - 7, ".remote") && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool env_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 127 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* printable, one line: it may go into an entry and a request */
static bool one_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* $KVCHAT_HOME/models/NAME + suffix: 0, or -1 */
static int entry_file(const char *name, const char *suffix, char *buf, size_t size)
{
    char home[4096];
    if (!mdl_name_valid(name) || mdl_home(home, sizeof home))
        return -1;
    int n = snprintf(buf, size, "%s/models/%s%s", home, name, suffix);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* fill r from the entry at path */
static int entry_read(const char *path, struct mdl_remote *r, char *err, size_t err_size)
{
    char v[64];
    memset(r, 0, sizeof *r);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(r->name, sizeof r->name, "%.*s", (int)(strlen(base) - strlen(".remote")), base);
    int got = kvfile_get(path, "url", r->url, sizeof r->url);
    if (got < 0) {
        snprintf(err, err_size, "cannot read '%s': %s", path, strerror(errno));
        return MDL_ERR_FILE;
    }
    if (got == 0 || !r->url[0] || kvfile_get(path, "model", r->model, sizeof r->model) <= 0 ||
        !r->model[0]) {
        snprintf(err, err_size, "'%s' is not a remote model entry (it lacks url or model)", path);
        return MDL_ERR_FILE;
    }
    kvfile_get(path, "api_key_env", r->key_env, sizeof r->key_env);
    kvfile_get(path, "ca_file", r->ca_file, sizeof r->ca_file);
    r->timeout_s = kvfile_get(path, "timeout", v, sizeof v) > 0 ? atoi(v) : DEFAULT_TIMEOUT_S;
    if (r->timeout_s <= 0 || r->timeout_s > 86400)
        r->timeout_s = DEFAULT_TIMEOUT_S;
    r->retries = kvfile_get(path, "retries", v, sizeof v) > 0 ? atoi(v) : DEFAULT_RETRIES;
    if (r->retries < 0 || r->retries > 100)
        r->retries = DEFAULT_RETRIES;
    r->stream = !(kvfile_get(path, "stream", v, sizeof v) > 0 && !strcmp(v, "no"));
    r->added = kvfile_get(path, "added", v, sizeof v) > 0 ? strtoll(v, NULL, 10) : -1;
    struct http_url u;
    if (http_url_parse_any(r->url, &u, err, err_size)) {
        size_t l = strlen(err);
        snprintf(err + l, err_size - l, " (in '%s')", path);
        return MDL_ERR_FILE;
    }
    if (r->key_env[0] && !env_name_valid(r->key_env)) {
        snprintf(err, err_size, "bad api_key_env '%s' in '%s'", r->key_env, path);
        return MDL_ERR_FILE;
    }
    r->tls = u.tls;
    http_url_origin(&u, r->origin, sizeof r->origin);
    return 0;
}

int mdl_remote_open(const char *path, struct mdl_remote **out, char *err, size_t err_size)
{
    *out = NULL;
    struct mdl_remote *r = malloc(sizeof *r);
    if (!r) {
        snprintf(err, err_size, "out of memory");
        return MDL_ERR_FILE;
    }
    int rc = entry_read(path, r, err, err_size);
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void mdl_remote_close(struct mdl_remote *r)
{
    free(r);
}

void mdl_remote_get_info(const struct mdl_remote *r, struct mdl_remote_info *o)
{
    *o = (struct mdl_remote_info){
        .name = r->name, .url = r->url, .model = r->model, .api_key_env = r->key_env,
        .ca_file = r->ca_file, .timeout_s = r->timeout_s, .retries = r->retries,
        .stream = r->stream, .tls = r->tls, .added = r->added,
    };
}

void mdl_remote_fill_entry(struct mdl_entry *e)
{
    struct mdl_remote r;
    char err[512];
    e->remote = true;
    e->n_params = -1;
    e->pulled = -1;
    if (entry_read(e->path, &r, err, sizeof err)) {
        snprintf(e->error, sizeof e->error, "%.*s", (int)sizeof e->error - 1, err);
        return;
    }
    snprintf(e->url, sizeof e->url, "%s", r.url);
    snprintf(e->remote_model, sizeof e->remote_model, "%s", r.model);
    snprintf(e->api_key_env, sizeof e->api_key_env, "%s", r.key_env);
    snprintf(e->source, sizeof e->source, "%.*s", (int)sizeof e->source - 1, r.url);
    e->pulled = r.added;
}

/* ==== talking to the server ==== */

static void http_setup(const struct mdl_remote *r, const volatile sig_atomic_t *cancel,
                       struct http_params *hp)
{
    http_params_from_env(hp, r->ca_file);
    hp->allow_http = true;
    hp->read_timeout_ms = r->timeout_s * 1000;
    hp->connect_timeout_ms = r->timeout_s < 15 ? r->timeout_s * 1000 : 15000;
    hp->cancel = cancel;
}

/* the key from its variable: 0 with *key (NULL when none), or MDL_ERR_USAGE */
static int get_key(const struct mdl_remote *r, const char **key, char *err, size_t err_size)
{
    *key = NULL;
    if (!r->key_env[0])
        return 0;
    const char *k = getenv(r->key_env);
    if (!k || !*k)
        return 0;
    if (!one_line(k) || strchr(k, ' ')) {
        snprintf(err, err_size, "the API key in %s holds spaces or control characters; refusing to send it",
                 r->key_env);
        return MDL_ERR_USAGE;
    }
    *key = k;
    return 0;
}

static int net_to_mdl(int rc)
{
    return rc == NET_ERR_INTERRUPTED ? MDL_ERR_INTERRUPTED : MDL_ERR_NETWORK;
}

/* one request; on success (any status) *s is open and resp filled */
static int send_request(const struct mdl_remote *r, const char *path, const char *body, size_t body_len,
                        bool stream, const volatile sig_atomic_t *cancel, struct http_resp *resp,
                        struct http_stream **s, char *err, size_t err_size)
{
    char url[HTTP_MAX_URL], final[HTTP_MAX_URL], le[256];
    int64_t ls;
    const char *key;
    int rc = get_key(r, &key, err, err_size);
    if (rc)
        return rc;
    if (snprintf(url, sizeof url, "%s%s", r->url, path) >= (int)sizeof url) {
        snprintf(err, err_size, "URL too long");
        return MDL_ERR_USAGE;
    }
    struct http_params hp;
    http_setup(r, cancel, &hp);
    struct http_req rq = {
        .method = body ? "POST" : "GET",
        .body = body,
        .body_len = body_len,
        .content_type = "application/json",
        .accept = stream ? "text/event-stream" : "application/json",
        .url = url,
        .bearer = key,
        .bearer_origin = r->origin,
        .range_from = -1,
        .max_redirects = 5,
    };
    char why[512];
    rc = http_request(&hp, &rq, resp, final, le, sizeof le, &ls, s, why, sizeof why);
    if (rc) {
        snprintf(err, err_size, "%s", why);
        return net_to_mdl(rc);
    }
    return 0;
}

/* the message of an error response, read from s (closed here): "HTTP 404
 * (model not found)" */
static void error_status(struct http_stream *s, const struct http_resp *resp, char *out, size_t size)
{
    char *body = NULL, msg[400] = "", ignore[128];
    size_t n = 0;
    if (http_read_all(s, ERROR_BODY_MAX, &body, &n, ignore, sizeof ignore) == 0)
        chat_error_message(body, n, msg, sizeof msg);
    free(body);
    http_stream_close(s);
    if (msg[0])
        snprintf(out, size, "HTTP %d: %s", resp->status, msg);
    else
        snprintf(out, size, "HTTP %d %s", resp->status, resp->reason);
}

static int list_models(const struct mdl_remote *r, const volatile sig_atomic_t *cancel, char ***ids,
                       size_t *n, int *status, char *err, size_t err_size)
{
    struct http_resp resp;
    struct http_stream *s;
    *ids = NULL;
    *n = 0;
    *status = 0;
    int rc = send_request(r, "/models", NULL, 0, false, cancel, &resp, &s, err, err_size);
    if (rc)
        return rc;
    *status = resp.status;
    if (resp.status != 200) {
        char st[512];
        error_status(s, &resp, st, sizeof st);
        snprintf(err, err_size, "%s from %s/models", st, r->url);
        return resp.status == 401 || resp.status == 403 ? MDL_ERR_AUTH
               : resp.status == 404                      ? MDL_ERR_NOT_FOUND
               : resp.status >= 500                      ? MDL_ERR_NETWORK
                                                         : MDL_ERR_REJECTED;
    }
    char *body;
    size_t len;
    rc = http_read_all(s, RESPONSE_MAX, &body, &len, err, err_size);
    http_stream_close(s);
    if (rc)
        return net_to_mdl(rc);
    char why[512];
    rc = json_string_list(body, len, "data", "id", ids, n, why, sizeof why);
    free(body);
    if (rc) {
        snprintf(err, err_size, "%s/models: %s", r->url, why);
        return rc == CHAT_ERR_MEMORY ? MDL_ERR_FILE : MDL_ERR_PROTOCOL;
    }
    return 0;
}

int mdl_remote_models(struct mdl_remote *r, const volatile sig_atomic_t *cancel, char ***ids,
                      size_t *n, char *err, size_t err_size)
{
    int status;
    return list_models(r, cancel, ids, n, &status, err, err_size);
}

/* "a, b, c" (at most 20) into out */
static void join_ids(char **ids, size_t n, char *out, size_t size)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && i < 20 && o + 1 < size; i++)
        o += (size_t)snprintf(out + o, size - o, "%s'%s'", i ? ", " : "", ids[i]);
    if (n > 20 && o + 1 < size)
        snprintf(out + o, size - o, " and %zu more", n - 20);
}

/* ==== adding an entry ==== */

int mdl_remote_add(const char *name, const char *url, const struct mdl_remote_params *p,
                   char *note, size_t note_size, char *err, size_t err_size)
{
    struct mdl_remote r;
    struct http_url u;
    char gguf[4200], path[4200];
    note[0] = 0;
    memset(&r, 0, sizeof r);
    if (!mdl_name_valid(name)) {
        snprintf(err, err_size, "'%s' is not a valid model name (letters, digits and ._:+- only)", name);
        return MDL_ERR_USAGE;
    }
    if (entry_file(name, ".gguf", gguf, sizeof gguf) || entry_file(name, ".remote", path, sizeof path)) {
        snprintf(err, err_size, "cannot find the kvchat home: set KVCHAT_HOME or HOME");
        return MDL_ERR_FILE;
    }
    struct stat st;
    if (stat(gguf, &st) == 0) {
        snprintf(err, err_size, "'%s' is a local model in the store; choose another name", name);
        return MDL_ERR_USAGE;
    }
    if (!p->force && stat(path, &st) == 0) {
        snprintf(err, err_size, "there is already a remote model '%s' (--force replaces it)", name);
        return MDL_ERR_USAGE;
    }
    /* the URL: the /v1 base, without a trailing '/' */
    if (!one_line(url) || snprintf(r.url, sizeof r.url, "%s", url) >= (int)sizeof r.url) {
        snprintf(err, err_size, "bad URL '%s'", url);
        return MDL_ERR_USAGE;
    }
    size_t ul = strlen(r.url);
    while (ul && r.url[ul - 1] == '/')
        r.url[--ul] = 0;
    if (strpbrk(r.url, "?#")) {
        snprintf(err, err_size, "the URL '%s' has a query or fragment: give the server's /v1 base", url);
        return MDL_ERR_USAGE;
    }
    if (http_url_parse_any(r.url, &u, err, err_size))
        return MDL_ERR_USAGE;
    r.tls = u.tls;
    if (!u.tls) {
        char why[512];
        int pr = http_host_private(u.host, 10000, p->cancel, why, sizeof why);
        if (pr < 0) {
            snprintf(err, err_size, "cannot check '%s': %s (plain http:// needs a host that resolves to "
                                    "loopback or private addresses)", u.host, why);
            return pr == NET_ERR_INTERRUPTED ? MDL_ERR_INTERRUPTED : MDL_ERR_USAGE;
        }
        if (pr == 0) {
            snprintf(err, err_size, "refusing plain http://: %s; use https:// (http:// is only for "
                                    "loopback and private addresses)", why);
            return MDL_ERR_USAGE;
        }
    }
    http_url_origin(&u, r.origin, sizeof r.origin);
    if (p->api_key_env) {
        if (!env_name_valid(p->api_key_env)) {
            snprintf(err, err_size, "'%s' is not an environment variable name (letters, digits and _)",
                     p->api_key_env);
            return MDL_ERR_USAGE;
        }
        snprintf(r.key_env, sizeof r.key_env, "%s", p->api_key_env);
    }
    if (p->ca_file) {
        if (!realpath(p->ca_file, r.ca_file)) {
            snprintf(err, err_size, "cannot read CA file '%s': %s", p->ca_file, strerror(errno));
            return MDL_ERR_USAGE;
        }
        if (net_tls_check_ca(r.ca_file, err, err_size))
            return MDL_ERR_USAGE;
        if (!one_line(r.ca_file)) {
            snprintf(err, err_size, "bad CA file name '%s'", p->ca_file);
            return MDL_ERR_USAGE;
        }
    }
    r.timeout_s = p->timeout_s > 0 ? p->timeout_s : DEFAULT_TIMEOUT_S;
    r.retries = p->retries >= 0 ? p->retries : DEFAULT_RETRIES;
    r.stream = !p->no_stream;
    snprintf(r.name, sizeof r.name, "%s", name);
    if (p->model) {
        if (!p->model[0] || !one_line(p->model) || strlen(p->model) >= sizeof r.model) {
            snprintf(err, err_size, "bad model id '%s'", p->model);
            return MDL_ERR_USAGE;
        }
        snprintf(r.model, sizeof r.model, "%s", p->model);
    } else {
        /* the server's only model */
        char **ids, why[1024], list[1024];
        size_t n;
        int status;
        int rc = list_models(&r, p->cancel, &ids, &n, &status, why, sizeof why);
        if (rc) {
            snprintf(err, err_size, "cannot ask %s for its models (%s); give the model with --model ID",
                     r.url, why);
            return rc == MDL_ERR_USAGE ? MDL_ERR_USAGE : rc == MDL_ERR_INTERRUPTED ? rc : MDL_ERR_NETWORK;
        }
        join_ids(ids, n, list, sizeof list);
        if (n != 1 || !ids[0][0] || !one_line(ids[0]) || strlen(ids[0]) >= sizeof r.model) {
            if (n == 0)
                snprintf(err, err_size, "%s lists no models; give the model with --model ID", r.url);
            else
                snprintf(err, err_size, "%s serves %zu models (%s); choose one with --model ID", r.url, n, list);
            mdl_strv_free(ids, n);
            return MDL_ERR_USAGE;
        }
        snprintf(r.model, sizeof r.model, "%s", ids[0]);
        mdl_strv_free(ids, n);
    }
    /* notes */
    size_t nl = 0;
    bool loopback = !strcasecmp(u.host, "localhost") || !strncmp(u.host, "127.", 4) || !strcmp(u.host, "::1");
    if (!r.tls && !loopback)
        nl += (size_t)snprintf(note + nl, note_size - nl,
                               "plain http:// (allowed only for loopback and private addresses): the "
                               "conversation%s the local network unencrypted",
                               r.key_env[0] ? " and the API key cross" : " crosses");
    if (nl < note_size && (ul < 3 || strcmp(r.url + ul - 3, "/v1")))
        snprintf(note + nl, note_size - nl, "%sthe URL does not end in /v1: requests go to %s/chat/completions",
                 nl ? "; " : "", r.url);
    /* the entry: written whole to a temporary file, then renamed in */
    if (base_mkdir_parents(path, 0755)) {
        snprintf(err, err_size, "cannot create the directory of '%s': %s", path, strerror(errno));
        return MDL_ERR_FILE;
    }
    struct base_buf f = {0};
    int w = base_buf_printf(&f, "# a remote model, written by 'kvchat models add-remote'; it never holds an API key\n");
    w |= base_buf_printf(&f, "url = %s\nmodel = %s\n", r.url, r.model);
    if (r.key_env[0])
        w |= base_buf_printf(&f, "api_key_env = %s\n", r.key_env);
    if (r.ca_file[0])
        w |= base_buf_printf(&f, "ca_file = %s\n", r.ca_file);
    w |= base_buf_printf(&f, "timeout = %d\nretries = %d\nstream = %s\nadded = %lld\n", r.timeout_s, r.retries,
                         r.stream ? "yes" : "no", (long long)time(NULL));
    if (w)
        snprintf(err, err_size, "out of memory");
    w = w || kvfile_write_text(path, &f, err, err_size);
    base_buf_free(&f);
    if (w)
        return MDL_ERR_FILE;
    return 0;
}

/* ==== one turn ==== */

struct turn {
    const struct mdl_remote *r;
    const struct mdl_chat_params *p;
    mdl_text_fn on_text;
    void *ud;
    struct chat_acc acc;
    double t0, t_first, t_last;
    int chat_rc;            /* what chat_acc said about the last event */
    bool event_failed;      /* on_event refused an event (chat_rc, why say how) */
    char why[1024];
};

/* every piece of text passes here on its way to the caller */
static int relay(void *ud, const char *text, size_t n)
{
    struct turn *t = ud;
    double now = now_ms();
    if (t->t_first < 0)
        t->t_first = now;
    t->t_last = now;
    return t->on_text ? t->on_text(t->ud, text, n) : 0;
}

/* stop values of on_event beyond enum chat_status */
#define EVENT_DONE 100

static int on_event(void *ud, const char *event, const char *data, size_t n)
{
    struct turn *t = ud;
    if (t->p->cancel && *t->p->cancel)
        return 1; /* a Ctrl-C while the text of one read is handed on */
    if (!strcmp(event, "error")) {
        /* an SSE "error" event: its data is the message, JSON or not */
        char msg[400];
        if (!chat_error_message(data, n, msg, sizeof msg))
            snprintf(msg, sizeof msg, "(no message)");
        snprintf(t->why, sizeof t->why, "the server reported an error: %s", msg);
        t->chat_rc = CHAT_ERR_SERVER;
        t->event_failed = true;
        return -1;
    }
    int rc = chat_acc_chunk(&t->acc, data, n, t->why, sizeof t->why);
    t->chat_rc = rc;
    if (rc == CHAT_STOPPED)
        return 1;
    if (rc < 0) {
        t->event_failed = true;
        return -1;
    }
    return t->acc.done ? EVENT_DONE : 0;
}

/* the outcome of reading a response, for the retry loop */
enum read_outcome {
    READ_DONE,        /* a whole answer */
    READ_STOPPED,     /* interrupted or stopped by on_text */
    READ_FAILED,      /* an error; see rc */
};

static const char *stop_reason_of(const char *finish)
{
    static const char *const known[] = {"stop", "length", "content_filter", "tool_calls"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(finish, known[i]))
            return known[i];
    if (!strcmp(finish, "function_call"))
        return "tool_calls";
    return "stop";
}

/*
 * Read a 200 response: a stream of events, or a whole JSON answer. Returns
 * 0 (answer complete), MDL_ERR_INTERRUPTED, or an error with *retry telling
 * whether nothing came yet and it is worth asking again.
 */
static int read_answer(struct turn *t, struct http_stream *s, const struct http_resp *resp,
                       bool *retry, char *err, size_t err_size)
{
    const volatile sig_atomic_t *cancel = t->p->cancel;
    bool sse_body = !strcmp(resp->content_type, "text/event-stream");
    *retry = false;
    char *buf = malloc(16384);
    if (!buf) {
        snprintf(err, err_size, "out of memory");
        return MDL_ERR_FILE;
    }
    int rc = 0;
    if (!sse_body && strcmp(resp->content_type, "application/json") && t->r->stream) {
        /* no Content-Type we know: a stream if it starts like one */
        sse_body = true;
    }
    if (!sse_body) {
        char *body;
        size_t len;
        int k = http_read_all(s, RESPONSE_MAX, &body, &len, err, err_size);
        if (k) {
            free(buf);
            return net_to_mdl(k); /* no retry: it may have been a timeout */
        }
        int c = chat_acc_response(&t->acc, body, len, t->why, sizeof t->why);
        free(body);
        free(buf);
        if (c == CHAT_STOPPED)
            return MDL_ERR_INTERRUPTED;
        if (c < 0) {
            snprintf(err, err_size, "%s", t->why);
            return c == CHAT_ERR_SERVER ? MDL_ERR_REJECTED : c == CHAT_ERR_MEMORY ? MDL_ERR_FILE
                                                                                  : MDL_ERR_PROTOCOL;
        }
        return 0;
    }
    struct sse sse;
    sse_init(&sse);
    bool ended = false;
    char why[1024] = "";
    for (;;) {
        if (cancel && *cancel) {
            rc = MDL_ERR_INTERRUPTED;
            break;
        }
        ssize_t k = http_stream_read(s, buf, 16384, why, sizeof why);
        if (k == 0) {
            ended = true;
            break;
        }
        if (k < 0) {
            rc = k == NET_ERR_INTERRUPTED ? MDL_ERR_INTERRUPTED : MDL_ERR_CUT;
            break;
        }
        int f = sse_feed(&sse, buf, (size_t)k, on_event, t, why, sizeof why);
        if (f == EVENT_DONE)
            break;
        if (f == 1) {
            rc = MDL_ERR_INTERRUPTED;
            break;
        }
        if (f < 0) {
            if (!t->event_failed)
                rc = MDL_ERR_PROTOCOL; /* the event stream itself (why says how) */
            else if (t->chat_rc == CHAT_ERR_SERVER)
                rc = t->acc.len ? MDL_ERR_CUT : MDL_ERR_REJECTED;
            else
                rc = t->chat_rc == CHAT_ERR_MEMORY ? MDL_ERR_FILE : MDL_ERR_PROTOCOL;
            if (t->event_failed)
                snprintf(why, sizeof why, "%s", t->why);
            break;
        }
    }
    bool pending = sse_pending(&sse);
    sse_free(&sse);
    free(buf);
    if (rc == 0 && !t->acc.done && !t->acc.finish_reason[0]) {
        /* the body ended (or broke) without the end of the answer */
        if (ended)
            snprintf(why, sizeof why, "%s", pending ? "the connection closed inside an event"
                                                    : "the connection closed before the end of the answer");
        rc = MDL_ERR_CUT;
    } else if (rc == MDL_ERR_CUT && (t->acc.done || t->acc.finish_reason[0])) {
        rc = 0; /* it broke after the answer was whole: nothing is missing */
    }
    if (rc == MDL_ERR_CUT && t->acc.len == 0) {
        /* nothing came: not a cut answer but a failed request, worth another
         * try if the server hung up (not if it was silent until the timeout) */
        *retry = ended;
        if (ended && !pending)
            snprintf(err, err_size, "the server closed the connection before any answer");
        else
            snprintf(err, err_size, "%s (before any answer)", why);
        return MDL_ERR_NETWORK;
    }
    if (rc && rc != MDL_ERR_INTERRUPTED)
        snprintf(err, err_size, "%s", why);
    return rc;
}

/* sleep before attempt number `attempt` (1, 2, ...): Retry-After if the
 * server gave one, else 1, 2, 4 ... s. 0, MDL_ERR_INTERRUPTED, or 1 when
 * the server asks for longer than we wait */
static int wait_retry(const struct turn *t, int attempt, int64_t retry_after, const char *why)
{
    int s = retry_after >= 0 ? (int)(retry_after < 1000 ? retry_after : 1000) : 1 << (attempt - 1);
    if (s > MAX_RETRY_AFTER_S)
        return 1;
    if (t->p->note) {
        char m[1200];
        snprintf(m, sizeof m, "%s; retrying in %d s (%d of %d)", why, s, attempt, t->r->retries);
        t->p->note(t->p->ctx, m);
    }
    return net_sleep(s * 1000, t->p->cancel) ? MDL_ERR_INTERRUPTED : 0;
}

/* 404: the model is not there (list what is), or the URL is not a /v1 base */
static int not_found(struct turn *t, const char *status, char *err, size_t err_size)
{
    char **ids = NULL, why[512], list[1024];
    size_t n = 0;
    int st;
    int rc = list_models(t->r, t->p->cancel, &ids, &n, &st, why, sizeof why);
    if (rc == 0) {
        join_ids(ids, n, list, sizeof list);
        snprintf(err, err_size, "%s has no model '%s' (%s); it serves %s", t->r->url, t->r->model, status,
                 n ? list : "none");
    } else if (st == 404) {
        snprintf(err, err_size, "%s answered 404 to /chat/completions and /models (%s): is it the "
                                "server's /v1 base?", t->r->url, status);
    } else {
        snprintf(err, err_size, "%s has no model '%s' (%s); its list of models could not be read: %s",
                 t->r->url, t->r->model, status, why);
    }
    mdl_strv_free(ids, n);
    return MDL_ERR_NOT_FOUND;
}

static int auth_error(const struct turn *t, int status, const char *st, char *err, size_t err_size)
{
    const char *k = t->r->key_env[0] ? getenv(t->r->key_env) : NULL;
    if (!t->r->key_env[0] && status == 403)
        snprintf(err, err_size, "%s refused the request (%s); if it wants an API key, add the model "
                                "again with --api-key-env VAR (--force) and set VAR", t->r->url, st);
    else if (!t->r->key_env[0])
        snprintf(err, err_size, "%s wants an API key (%s): add the model again with --api-key-env VAR "
                                "(--force) and set VAR", t->r->url, st);
    else if (!k || !*k)
        snprintf(err, err_size, "%s wants an API key (%s): set %s", t->r->url, st, t->r->key_env);
    else
        snprintf(err, err_size, "%s %s the API key in %s (%s)", t->r->url,
                 status == 403 ? "does not allow this with" : "refused", t->r->key_env, st);
    return MDL_ERR_AUTH;
}

int mdl_remote_chat(struct mdl_remote *r, const struct mdl_message *msgs, size_t n_msgs,
                    const struct mdl_chat_params *p, mdl_text_fn on_text, void *ud,
                    struct mdl_chat_result *res, char *err, size_t err_size)
{
    struct turn t = {.r = r, .p = p, .on_text = on_text, .ud = ud, .t_first = -1};
    t.t0 = now_ms();
    chat_acc_init(&t.acc, relay, &t);
    memset(res, 0, sizeof *res);
    size_t body_len;
    char *body = chat_request_json(r->model, msgs, n_msgs, p, r->stream, &body_len, err, err_size);
    int rc = body ? 0 : MDL_ERR_FILE;
    for (int attempt = 0; body; attempt++) {
        struct http_resp resp;
        struct http_stream *s = NULL;
        res->attempts = attempt + 1;
        rc = send_request(r, "/chat/completions", body, body_len, r->stream, p->cancel, &resp, &s, err,
                          err_size);
        if (rc)
            break; /* cannot connect, timed out, interrupted: no retry */
        res->http_status = resp.status;
        if (resp.status == 200) {
            bool retry;
            rc = read_answer(&t, s, &resp, &retry, err, err_size);
            http_stream_close(s);
            if (!(rc && retry && attempt < r->retries))
                break;
            int w = wait_retry(&t, attempt + 1, -1, err);
            if (w) {
                rc = w == 1 ? rc : w;
                break;
            }
            chat_acc_free(&t.acc); /* start the answer afresh */
            chat_acc_init(&t.acc, relay, &t);
            t.event_failed = false;
            continue;
        }
        char st[512];
        error_status(s, &resp, st, sizeof st);
        if (resp.status == 401 || resp.status == 403) {
            rc = auth_error(&t, resp.status, st, err, err_size);
            break;
        }
        if (resp.status == 404) {
            rc = not_found(&t, st, err, err_size);
            break;
        }
        bool transient = resp.status == 408 || resp.status == 429 || resp.status >= 500;
        const char *what = resp.status == 429 ? "the server is busy" : "the server failed";
        if (transient && attempt < r->retries) {
            char why[700];
            snprintf(why, sizeof why, "%s (%s)", what, st);
            int w = wait_retry(&t, attempt + 1, resp.retry_after, why);
            if (w == 0)
                continue;
            if (w == MDL_ERR_INTERRUPTED) {
                rc = w;
                break;
            }
            snprintf(err, err_size, "%s (%s) and asks to wait %lld s; try again later", what, st,
                     (long long)resp.retry_after);
            rc = MDL_ERR_NETWORK;
            break;
        }
        if (transient) {
            snprintf(err, err_size, "%s (%s) at %s; gave up after %d attempt%s", what, st, r->url,
                     attempt + 1, attempt ? "s" : "");
            rc = MDL_ERR_NETWORK;
        } else if (resp.status >= 400) {
            snprintf(err, err_size, "%s rejected the request (%s)", r->url, st);
            rc = MDL_ERR_REJECTED;
        } else {
            snprintf(err, err_size, "unexpected answer from %s (%s)", r->url, st);
            rc = MDL_ERR_PROTOCOL;
        }
        break;
    }
    free(body);
    /* the result, whatever happened */
    double end = now_ms();
    res->text = t.acc.text;
    res->len = t.acc.len;
    t.acc.text = NULL;
    if (!res->text) {
        res->text = calloc(1, 1);
        if (!res->text && rc == 0) {
            snprintf(err, err_size, "out of memory");
            rc = MDL_ERR_FILE;
        }
    }
    snprintf(res->finish_reason, sizeof res->finish_reason, "%s", t.acc.finish_reason);
    snprintf(res->server_model, sizeof res->server_model, "%s", t.acc.model);
    res->prompt_tokens = t.acc.prompt_tokens;
    res->cached_tokens = t.acc.cached_tokens;
    res->completion_tokens = t.acc.completion_tokens;
    res->prompt_tok_s = t.acc.prompt_tok_s;
    res->decode_tok_s = t.acc.decode_tok_s;
    if (res->decode_tok_s < 0 && res->completion_tokens > 1 && t.t_last > t.t_first && t.t_first >= 0)
        res->decode_tok_s = (double)(res->completion_tokens - 1) / ((t.t_last - t.t_first) / 1000.0);
    res->ttft_ms = t.t_first >= 0 ? t.t_first - t.t0 : -1;
    res->total_ms = end - t.t0;
    if (rc == 0)
        res->stop_reason = stop_reason_of(res->finish_reason);
    else if (rc == MDL_ERR_INTERRUPTED)
        res->stop_reason = "interrupted";
    else
        res->stop_reason = res->len ? "cut" : "error";
    if (rc == MDL_ERR_PROTOCOL && res->len)
        rc = MDL_ERR_CUT; /* text came, then garbage: the answer is cut */
    chat_acc_free(&t.acc);
    return rc;
}
