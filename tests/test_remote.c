/*
 * test_remote.c - remote models (models/sse.c, models/json.c,
 * models/remote.c, and the http:// parts of models/http_parse.c):
 * server-sent events fed in every split, the chat-completions request byte
 * for byte (and its messages a prefix of the next turn's), streamed chunks
 * and whole answers, error bodies, hostile JSON (bad UTF-8, lone
 * surrogates, deep nesting, wrong types), which addresses plain http may
 * reach, the store entries (written whole or not at all: fsync and rename
 * are wrapped), and mdl_remote_chat against canned servers on 127.0.0.1
 * run in threads: partial text kept on a cut, a cancel or a stopping
 * callback; the key sent to its origin only, and not after a redirect to
 * another port.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/mdl.h"
#include "models/net.h"
#include "models/proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fault-fs.h"
#include "tests/tmpdir.h"

static char err[2048];

/* ==== server-sent events ==== */

struct events {
    char log[8192]; /* "type|data;" for each event */
    size_t n;
    int count;
    int stop_after; /* return 7 at this event (0: never) */
};

static int collect(void *ud, const char *event, const char *data, size_t n)
{
    struct events *e = ud;
    assert_int_equal(strlen(data), n); /* NUL-terminated, no NUL inside here */
    e->n += (size_t)snprintf(e->log + e->n, sizeof e->log - e->n, "%s|%s;", event, data);
    return ++e->count == e->stop_after ? 7 : 0;
}

static void feed_pieces(const char *in, size_t n, size_t piece, struct events *e)
{
    struct sse s;
    sse_init(&s);
    memset(e, 0, sizeof *e);
    for (size_t i = 0; i < n; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        assert_int_equal(sse_feed(&s, in + i, k, collect, e, err, sizeof err), 0);
    }
    sse_free(&s);
}

static void test_sse_events(void **state)
{
    static const char in[] = "\xef\xbb\xbf"
                             ": a comment\n"
                             "data: one\n\n"
                             "data:two\r\ndata:  three\r\n\r\n"
                             "event: error\rdata: x\r\r"
                             "id: 5\nretry: 10\nfoo\n\n"    /* no data: nothing */
                             "data\n\n"                     /* an empty data field */
                             "data: last";                  /* never dispatched */
    static const char want[] = "|one;|two\n three;error|x;|;";
    struct events e;
    for (size_t piece = 1; piece <= sizeof in; piece++) {
        feed_pieces(in, sizeof in - 1, piece, &e);
        assert_string_equal(e.log, want);
    }
    /* every split into two pieces, CR LF included */
    for (size_t cut = 0; cut < sizeof in - 1; cut++) {
        struct sse s;
        sse_init(&s);
        memset(&e, 0, sizeof e);
        assert_int_equal(sse_feed(&s, in, cut, collect, &e, err, sizeof err), 0);
        assert_int_equal(sse_feed(&s, in + cut, sizeof in - 1 - cut, collect, &e, err, sizeof err), 0);
        assert_string_equal(e.log, want);
        assert_true(sse_pending(&s)); /* "data: last" */
        sse_free(&s);
    }
    /* a BOM split from the rest, and bytes that only look like one */
    struct sse s;
    sse_init(&s);
    memset(&e, 0, sizeof e);
    assert_int_equal(sse_feed(&s, "\xef", 1, collect, &e, err, sizeof err), 0);
    assert_int_equal(sse_feed(&s, "\xbb\xbf" "data: a\n\n", 11, collect, &e, err, sizeof err), 0);
    assert_int_equal(sse_feed(&s, "\xef\xbb\xbf" "data: b\n\n", 12, collect, &e, err, sizeof err), 0);
    assert_string_equal(e.log, "|a;");  /* a second BOM starts a field named "\xef\xbb\xbfdata" */
    sse_free(&s);
}

static void test_sse_stop_and_limits(void **state)
{
    struct sse s;
    struct events e = {.stop_after = 1};
    sse_init(&s);
    /* the callback's value comes back, the rest is not read */
    assert_int_equal(sse_feed(&s, "data: a\n\ndata: b\n\n", 18, collect, &e, err, sizeof err), 7);
    assert_string_equal(e.log, "|a;");
    sse_free(&s);
    /* a line longer than the limit is an error, whatever the pieces */
    size_t big = SSE_MAX_EVENT + 10;
    char *b = malloc(big);
    assert_non_null(b);
    memcpy(b, "data: ", 6);
    memset(b + 6, 'x', big - 6);
    sse_init(&s);
    memset(&e, 0, sizeof e);
    int rc = 0;
    for (size_t i = 0; i < big && rc == 0; i += 65536)
        rc = sse_feed(&s, b + i, big - i < 65536 ? big - i : 65536, collect, &e, err, sizeof err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "longer than"));
    sse_free(&s);
    /* many data lines adding up past the limit */
    sse_init(&s);
    memset(b, 'y', 1 << 20);
    rc = 0;
    for (int i = 0; i < 6 && rc == 0; i++) {
        rc = sse_feed(&s, "data: ", 6, collect, &e, err, sizeof err);
        rc = rc ? rc : sse_feed(&s, b, 1 << 20, collect, &e, err, sizeof err);
        rc = rc ? rc : sse_feed(&s, "\n", 1, collect, &e, err, sizeof err);
    }
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "larger than"));
    sse_free(&s);
    free(b);
}

/* ==== the request ==== */

static void test_request_json(void **state)
{
    struct mdl_message m[3] = {
        {MDL_ROLE_SYSTEM, "Be brief.", 9},
        {MDL_ROLE_USER, "caf\xc3\xa9 \"q\"\n\x01 bad:\xff\xfe end", 22},
        {MDL_ROLE_ASSISTANT, "ok", 2},
    };
    struct mdl_chat_params p = mdl_chat_default_params();
    size_t len;
    char *j = chat_request_json("qwen", m, 2, &p, true, &len, err, sizeof err);
    assert_non_null(j);
    assert_string_equal(j, "{\"model\":\"qwen\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                           "{\"role\":\"user\",\"content\":\"caf\xc3\xa9 \\\"q\\\"\\n\\u0001 bad:"
                           "\xef\xbf\xbd\xef\xbf\xbd end\"}],\"stream\":true,"
                           "\"stream_options\":{\"include_usage\":true}}");
    assert_int_equal(len, strlen(j));
    free(j);
    /* every sampling field, as written, and nothing the caller did not set */
    static const char *const stops[] = {"\n\n", "END"};
    p.temp_set = p.top_p_set = p.presence_penalty_set = p.seed_set = true;
    p.temp = 0.7f; /* a float, as the command line has it */
    p.top_p = 0.95f;
    p.presence_penalty = -0.5;
    p.seed = UINT64_MAX;
    p.max_tokens = 64;
    p.stop = stops;
    p.n_stop = 2;
    j = chat_request_json("m", m, 1, &p, false, &len, err, sizeof err);
    assert_non_null(j);
    assert_string_equal(j, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"}],"
                           "\"stream\":false,\"temperature\":0.7,\"top_p\":0.95,\"presence_penalty\":-0.5,"
                           "\"seed\":9223372036854775807,\"max_tokens\":64,\"stop\":[\"\\n\\n\",\"END\"]}");
    free(j);
    /* the next turn's request begins with this turn's messages, byte for byte */
    p = mdl_chat_default_params();
    char *a = chat_request_json("m", m, 2, &p, true, &len, err, sizeof err);
    struct mdl_message m2[4] = {m[0], m[1], m[2], {MDL_ROLE_USER, "more", 4}};
    char *b = chat_request_json("m", m2, 4, &p, true, &len, err, sizeof err);
    assert_non_null(a);
    assert_non_null(b);
    size_t cut = (size_t)(strstr(a, "}],") - a) + 1; /* up to the last message's end */
    assert_memory_equal(a, b, cut);
    free(a);
    free(b);
}

/* ==== responses ==== */

struct pieces {
    char all[4096];
    int n;
    int stop_at; /* return 1 at this piece (1-based), 0 never */
};

static int on_piece(void *ud, const char *t, size_t n)
{
    struct pieces *p = ud;
    /* whole characters only */
    for (size_t i = 0; i < n;) {
        int k = mdl_utf8_seq((const unsigned char *)t + i, n - i);
        assert_true(k > 0);
        i += (size_t)k;
    }
    strncat(p->all, t, n);
    return ++p->n == p->stop_at;
}

static void test_chunks(void **state)
{
    struct chat_acc a;
    struct pieces pc = {{0}, 0, 0};
    chat_acc_init(&a, on_piece, &pc);
    static const char *const ok[] = {
        "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]}",
        "{\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\\u00e9\"}}]}",
        "{\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}},"
        "{\"index\":0,\"delta\":{\"content\":\" \\ud83d\\ude00\"}}]}",
        "{\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":9007199254740993,\"completion_tokens\":3,"
        "\"prompt_tokens_details\":{\"cached_tokens\":8}}}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        assert_int_equal(chat_acc_chunk(&a, ok[i], strlen(ok[i]), err, sizeof err), CHAT_OK);
    assert_false(a.done);
    assert_int_equal(chat_acc_chunk(&a, " [DONE]\n", 8, err, sizeof err), CHAT_OK);
    assert_true(a.done);
    assert_string_equal(pc.all, "h\xc3\xa9 \xf0\x9f\x98\x80");
    assert_string_equal(a.text, pc.all);
    assert_string_equal(a.finish_reason, "length");
    assert_string_equal(a.model, "m1");
    assert_true(a.prompt_tokens == 9007199254740993LL); /* exact: not through a double */
    assert_int_equal(a.completion_tokens, 3);
    assert_int_equal(a.cached_tokens, 8);
    chat_acc_free(&a);

    /* llama-server: timings */
    chat_acc_init(&a, NULL, NULL);
    const char *t = "{\"choices\":[],\"timings\":{\"cache_n\":40,\"prompt_n\":2,\"predicted_n\":5,"
                    "\"prompt_per_second\":100.5,\"predicted_per_second\":20.25}}";
    assert_int_equal(chat_acc_chunk(&a, t, strlen(t), err, sizeof err), CHAT_OK);
    assert_int_equal(a.cached_tokens, 40);
    assert_int_equal(a.prompt_tokens, 42);
    assert_int_equal(a.completion_tokens, 5);
    assert_true(a.prompt_tok_s == 100.5 && a.decode_tok_s == 20.25);
    chat_acc_free(&a);

    /* a stopping callback */
    memset(&pc, 0, sizeof pc);
    pc.stop_at = 1;
    chat_acc_init(&a, on_piece, &pc);
    assert_int_equal(chat_acc_chunk(&a, ok[1], strlen(ok[1]), err, sizeof err), CHAT_STOPPED);
    assert_true(a.stopped);
    chat_acc_free(&a);

    /* a whole answer */
    chat_acc_init(&a, NULL, NULL);
    const char *w = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"whole\"},"
                    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":4}}";
    assert_int_equal(chat_acc_response(&a, w, strlen(w), err, sizeof err), CHAT_OK);
    assert_string_equal(a.text, "whole");
    assert_true(a.done);
    assert_int_equal(a.prompt_tokens, 4);
    assert_int_equal(a.cached_tokens, -1);
    chat_acc_free(&a);
}

static void test_bad_chunks(void **state)
{
    static const struct { const char *in; int rc; const char *why; } bad[] = {
        {"{not json", CHAT_ERR_MALFORMED, "line 1, column"},
        {"", CHAT_ERR_MALFORMED, "malformed JSON"},
        {"[1,2]", CHAT_ERR_MALFORMED, "not a JSON object"},
        {"{\"choices\":5}", CHAT_ERR_MALFORMED, "choices"},
        {"{\"choices\":[7]}", CHAT_ERR_MALFORMED, "choices"},
        {"{\"choices\":[{\"delta\":{\"content\":42}}]}", CHAT_ERR_MALFORMED, "delta.content is not a string"},
        {"{\"choices\":[{\"delta\":\"x\"}]}", CHAT_ERR_MALFORMED, "delta is not an object"},
        {"{\"choices\":[{\"delta\":{},\"finish_reason\":1}]}", CHAT_ERR_MALFORMED, "finish_reason"},
        {"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}", CHAT_ERR_MALFORMED, "0xff"},
        {"{\"choices\":[{\"delta\":{\"content\":\"\xed\xa0\x80\"}}]}", CHAT_ERR_MALFORMED, "malformed JSON"},
        {"{\"choices\":[{\"delta\":{\"content\":\"\\ud800 alone\"}}]}", CHAT_ERR_MALFORMED, "malformed JSON"},
        {"{\"choices\":[]} trailing", CHAT_ERR_MALFORMED, "malformed JSON"},
        {"{\"error\":{\"message\":\"out of \\u001b[31mmemory\"}}", CHAT_ERR_SERVER, "out of [31mmemory"},
        {"{\"error\":\"busy\"}", CHAT_ERR_SERVER, "busy"},
        {"{\"object\":\"error\",\"message\":\"vllm says no\"}", CHAT_ERR_SERVER, "vllm says no"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct chat_acc a;
        chat_acc_init(&a, NULL, NULL);
        err[0] = 0;
        int rc = chat_acc_chunk(&a, bad[i].in, strlen(bad[i].in), err, sizeof err);
        if (rc != bad[i].rc || !strstr(err, bad[i].why))
            fail_msg("'%s': got %d '%s'", bad[i].in, rc, err);
        for (const char *c = err; *c; c++)
            assert_true((unsigned char)*c >= 0x20); /* printable */
        assert_int_equal(a.len, 0);
        chat_acc_free(&a);
    }
    /* deep nesting is refused, not recursed into */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 16);
    assert_non_null(deep);
    size_t k = 0;
    k += (size_t)sprintf(deep, "{\"x\":");
    for (size_t i = 0; i < depth; i++)
        deep[k++] = '[';
    for (size_t i = 0; i < depth; i++)
        deep[k++] = ']';
    deep[k++] = '}';
    struct chat_acc a;
    chat_acc_init(&a, NULL, NULL);
    assert_int_equal(chat_acc_chunk(&a, deep, k, err, sizeof err), CHAT_ERR_MALFORMED);
    assert_non_null(strstr(err, "depth"));
    chat_acc_free(&a);
    free(deep);
    /* a NUL inside a string is not an end: it becomes U+FFFD, shown and saved alike */
    chat_acc_init(&a, NULL, NULL);
    const char *nul = "{\"choices\":[{\"delta\":{\"content\":\"a\\u0000b\"}}]}";
    assert_int_equal(chat_acc_chunk(&a, nul, strlen(nul), err, sizeof err), CHAT_OK);
    assert_int_equal(a.len, 5);
    assert_memory_equal(a.text, "a\xef\xbf\xbd" "b", 5);
    chat_acc_free(&a);
}

static void test_error_bodies(void **state)
{
    static const struct { const char *in, *want; } cases[] = {
        {"{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":\"NotFoundError\"}}",
         "The model `x` does not exist."},
        {"{\"error\":\"model 'x' not found, try pulling it first\"}", "model 'x' not found, try pulling it first"},
        {"{\"detail\":\"Not Found\"}", "Not Found"},
        {"{\"detail\":[{\"loc\":[\"body\"],\"msg\":\"field required\"}]}", "field required"},
        {"{\"message\":\"plain\"}", "plain"},
        {"\"just a string\"", "just a string"},
        {"Unauthorized\r\nmore", "Unauthorized"},
        {"  <html><body>404</body></html>", ""},
        {"{\"error\":{\"code\":500}}", ""},
        {"{\"message\":\"tab\\there\\nand \\u009b escape\"}", "tab here and   escape"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[128];
        int got = chat_error_message(cases[i].in, strlen(cases[i].in), out, sizeof out);
        if (strcmp(out, cases[i].want) || got != (cases[i].want[0] != 0))
            fail_msg("'%s': got '%s'", cases[i].in, out);
    }
    /* cut to fit, at a character */
    char small[8];
    const char *accents = "{\"message\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}";
    chat_error_message(accents, strlen(accents), small, sizeof small);
    assert_string_equal(small, "\xc3\xa9\xc3\xa9\xc3\xa9");
}

static void test_string_lists(void **state)
{
    char **v;
    size_t n;
    const char *b = "{\"object\":\"list\",\"data\":[{\"id\":\"a\"},{\"id\":7},{\"x\":1},{\"id\":\"b\\u001b\"}],"
                    "\"models\":[]}";
    assert_int_equal(json_string_list(b, strlen(b), "data", "id", &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0], "a");
    assert_string_equal(v[1], "b"); /* the control character is gone */
    mdl_strv_free(v, n);
    assert_int_equal(json_string_list("{}", 2, "data", "id", &v, &n, err, sizeof err), CHAT_ERR_MALFORMED);
    assert_non_null(strstr(err, "no list 'data'"));
    assert_int_equal(json_string_list("nope", 4, "data", "id", &v, &n, err, sizeof err), CHAT_ERR_MALFORMED);
    assert_int_equal(json_string_list("{\"data\":[]}", 11, "data", "id", &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    mdl_strv_free(v, n);
}

/* ==== addresses and URLs ==== */

static bool private4(const char *a)
{
    struct sockaddr_in in = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, a, &in.sin_addr), 1);
    return http_addr_private((struct sockaddr *)&in);
}

static bool private6(const char *a)
{
    struct sockaddr_in6 in = {.sin6_family = AF_INET6};
    assert_int_equal(inet_pton(AF_INET6, a, &in.sin6_addr), 1);
    return http_addr_private((struct sockaddr *)&in);
}

static void test_private_addresses(void **state)
{
    static const char *const yes4[] = {"127.0.0.1", "127.255.0.9", "10.0.0.1", "10.255.255.255",
                                       "172.16.0.1", "172.31.255.255", "192.168.1.5", "169.254.3.4"};
    static const char *const no4[] = {"8.8.8.8", "172.15.255.255", "172.32.0.0", "192.169.0.1",
                                      "11.0.0.1", "0.0.0.0", "100.64.0.1", "224.0.0.1",
                                      "255.255.255.255", "1.1.1.1"};
    static const char *const yes6[] = {"::1", "fd00::1", "fc12:3456::1", "fe80::1", "febf::1",
                                       "::ffff:10.1.2.3", "::ffff:127.0.0.1"};
    static const char *const no6[] = {"::", "2001:4860:4860::8888", "fec0::1", "ff02::1",
                                      "::ffff:8.8.8.8", "::2", "64:ff9b::a01:203"};
#define N(a) (sizeof a / sizeof *a)
    static const struct {
        const char *const *addr;
        size_t n;
        bool (*is_private)(const char *);
        bool want;
    } sets[] = {{yes4, N(yes4), private4, true}, {no4, N(no4), private4, false},
                {yes6, N(yes6), private6, true}, {no6, N(no6), private6, false}};
#undef N
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++)
        for (size_t i = 0; i < sets[k].n; i++)
            if (sets[k].is_private(sets[k].addr[i]) != sets[k].want)
                fail_msg("%s should%s be private", sets[k].addr[i], sets[k].want ? "" : " not");
}

static void test_http_urls(void **state)
{
    struct http_url u;
    char out[HTTP_MAX_URL], o[300];
    assert_int_equal(http_url_parse_any("http://127.0.0.1/v1", &u, err, sizeof err), 0);
    assert_false(u.tls);
    assert_int_equal(u.port, 80);
    http_url_origin(&u, o, sizeof o);
    assert_string_equal(o, "http://127.0.0.1:80");
    assert_int_equal(http_url_parse_any("HTTPS://Host:8443/v1", &u, err, sizeof err), 0);
    assert_true(u.tls);
    http_url_origin(&u, o, sizeof o);
    assert_string_equal(o, "host:8443");
    assert_true(http_url_parse("http://127.0.0.1/v1", &u, err, sizeof err) < 0); /* pull stays https */
    assert_true(http_url_parse_any("ftp://a/", &u, err, sizeof err) < 0);
    assert_true(http_url_parse_any("http://u:p@a/", &u, err, sizeof err) < 0);
    /* redirects keep the scheme; never from https down to http */
    assert_int_equal(http_url_join("http://10.0.0.2:8000/v1/chat/completions", "/v2/x", out, sizeof out, err,
                                   sizeof err), 0);
    assert_string_equal(out, "http://10.0.0.2:8000/v2/x");
    assert_int_equal(http_url_join("http://10.0.0.2/v1/a", "https://b/c", out, sizeof out, err, sizeof err), 0);
    assert_int_equal(http_url_join("http://10.0.0.2/v1/a", "http://10.0.0.3/c", out, sizeof out, err,
                                   sizeof err), 0);
    assert_true(http_url_join("https://a/v1/x", "http://a/v1/x", out, sizeof out, err, sizeof err) < 0);
}

/* ==== store entries ==== */

static char home[256];

static int setup_home(void **state)
{
    snprintf(home, sizeof home, "/tmp/kvchat-test-remote.%ld", (long)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/models'", home, home);
    assert_int_equal(system(cmd), 0);
    setenv("KVCHAT_HOME", home, 1);
    return 0;
}

static int teardown_home(void **state)
{
    return test_dir_remove(home);
}

/* mdl_resolve into a buffer (the tests' paths are short) */
static int resolve(const char *arg, char *buf, size_t size)
{
    char *p;
    int rc = mdl_resolve(arg, &p);
    snprintf(buf, size, "%s", p ? p : "");
    free(p);
    return rc;
}

static bool file_has(const char *path, const char *text)
{
    char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

static int n_files(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s/models' | wc -l", home);
    FILE *p = popen(cmd, "r");
    int n = -1;
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

static void test_entries(void **state)
{
    char note[512], path[4096];
    struct mdl_remote_params p = mdl_remote_default_params();
    p.model = "org/Model-7B";
    p.api_key_env = "SECRET_KEY_VAR";
    setenv("SECRET_KEY_VAR", "sk-do-not-store", 1);
    assert_int_equal(mdl_remote_add("big", "https://gpu.example:8443/v1/", &p, note, sizeof note, err,
                                    sizeof err), 0);
    assert_string_equal(note, "");
    assert_int_equal(resolve("big", path, sizeof path), 0);
    assert_true(mdl_is_remote(path));
    assert_true(file_has(path, "url = https://gpu.example:8443/v1\n"));
    assert_true(file_has(path, "model = org/Model-7B\n"));
    assert_true(file_has(path, "api_key_env = SECRET_KEY_VAR\n"));
    assert_false(file_has(path, "sk-do-not-store"));
    struct mdl_remote *r;
    assert_int_equal(mdl_remote_open(path, &r, err, sizeof err), 0);
    struct mdl_remote_info in;
    mdl_remote_get_info(r, &in);
    assert_string_equal(in.name, "big");
    assert_string_equal(in.url, "https://gpu.example:8443/v1");
    assert_true(in.tls && in.stream && in.timeout_s == 120 && in.retries == 3 && in.added > 0);
    mdl_remote_close(r);

    /* taken names, bad names and variables, plain http to a public address */
    assert_int_equal(mdl_remote_add("big", "https://a/v1", &p, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    assert_non_null(strstr(err, "--force"));
    FILE *f = fopen(strcat(strcpy(path, home), "/models/local.gguf"), "w");
    fclose(f);
    assert_int_equal(mdl_remote_add("local", "https://a/v1", &p, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    assert_non_null(strstr(err, "local model"));
    assert_int_equal(mdl_remote_add("../x", "https://a/v1", &p, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    struct mdl_remote_params q = p;
    q.api_key_env = "1BAD";
    assert_int_equal(mdl_remote_add("k", "https://a/v1", &q, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    q.api_key_env = "A-B";
    assert_int_equal(mdl_remote_add("k", "https://a/v1", &q, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    assert_int_equal(mdl_remote_add("pub", "http://8.8.8.8:8000/v1", &p, note, sizeof note, err, sizeof err),
                     MDL_ERR_USAGE);
    assert_non_null(strstr(err, "8.8.8.8 is not a loopback or private address"));
    assert_int_equal(mdl_remote_add("q", "https://a/v1?x=1", &p, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    assert_int_equal(mdl_remote_add("q", "gopher://a/", &p, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    q = p;
    q.model = "two\nlines";
    assert_int_equal(mdl_remote_add("q", "https://a/v1", &q, note, sizeof note, err, sizeof err), MDL_ERR_USAGE);
    /* private http is allowed, and says what it means */
    assert_int_equal(mdl_remote_add("lan", "http://192.168.7.7:8000/v1", &p, note, sizeof note, err,
                                    sizeof err), 0);
    assert_non_null(strstr(note, "unencrypted"));
    assert_non_null(strstr(note, "API key"));
    assert_int_equal(mdl_remote_add("lo", "http://127.0.0.1:8000/api", &p, note, sizeof note, err, sizeof err), 0);
    assert_non_null(strstr(note, "does not end in /v1"));
    assert_null(strstr(note, "unencrypted")); /* loopback stays on the machine */

    /* the store lists them with the local one */
    struct mdl_entry *es;
    size_t n;
    assert_int_equal(mdl_list(&es, &n, err, sizeof err), 0);
    assert_int_equal(n, 4);
    assert_string_equal(es[0].name, "big");
    assert_true(es[0].remote);
    assert_string_equal(es[0].url, "https://gpu.example:8443/v1");
    assert_string_equal(es[0].remote_model, "org/Model-7B");
    assert_string_equal(es[0].api_key_env, "SECRET_KEY_VAR");
    assert_string_equal(es[3].name, "local");
    assert_false(es[3].remote);
    mdl_list_free(es, n);
    struct mdl_entry e;
    assert_int_equal(mdl_stat("lan", &e, err, sizeof err), 0);
    assert_true(e.remote);
    mdl_entry_free(&e);
    assert_int_equal(mdl_stat("nothing", &e, err, sizeof err), MDL_ERR_NOT_FOUND);
    assert_null(e.path);

    /* --force replaces; a failed write keeps the old entry whole and leaves no temporary */
    q = p;
    q.force = true;
    q.model = "other";
    int before = n_files();
    fail_fsync = 1;
    assert_int_equal(mdl_remote_add("big", "https://b/v1", &q, note, sizeof note, err, sizeof err), MDL_ERR_FILE);
    fail_fsync = 0;
    fail_rename = 1;
    assert_int_equal(mdl_remote_add("big", "https://b/v1", &q, note, sizeof note, err, sizeof err), MDL_ERR_FILE);
    fail_rename = 0;
    assert_int_equal(n_files(), before);
    assert_int_equal(resolve("big", path, sizeof path), 0);
    assert_true(file_has(path, "model = org/Model-7B\n"));
    assert_int_equal(mdl_remote_add("big", "https://b/v1", &q, note, sizeof note, err, sizeof err), 0);
    assert_true(file_has(path, "model = other\n"));

    /* rm */
    assert_int_equal(mdl_rm("big", false, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(resolve("big", path, sizeof path), -1);
    assert_int_equal(n_files(), before - 1);
    /* a damaged entry is listed with its reason, and does not open */
    strcat(strcpy(path, home), "/models/broken.remote");
    f = fopen(path, "w");
    fputs("url = https://a/v1\n", f);
    fclose(f);
    assert_int_equal(mdl_remote_open(path, &r, err, sizeof err), MDL_ERR_FILE);
    assert_non_null(strstr(err, "lacks url or model"));
    assert_int_equal(mdl_stat("broken", &e, err, sizeof err), 0);
    assert_non_null(strstr(e.error, "lacks"));
    mdl_entry_free(&e);
}

/* ==== the client against canned servers ==== */

struct canned {
    int fd;              /* listening */
    int port;
    const char *reply;   /* written a piece at a time */
    size_t piece;        /* bytes per write (0: all at once) */
    char request[65536]; /* what came */
    size_t req_len;
    pthread_t th;
};

static void *canned_main(void *arg)
{
    struct canned *c = arg;
    int s = accept(c->fd, NULL, NULL);
    if (s < 0)
        return NULL;
    /* the head, then Content-Length bytes of body */
    size_t need = (size_t)-1;
    while (c->req_len < sizeof c->request - 1 && c->req_len < need) {
        ssize_t k = recv(s, c->request + c->req_len, sizeof c->request - 1 - c->req_len, 0);
        if (k <= 0)
            break;
        c->req_len += (size_t)k;
        c->request[c->req_len] = 0;
        char *end = strstr(c->request, "\r\n\r\n");
        char *cl = strcasestr(c->request, "Content-Length: ");
        if (end && need == (size_t)-1)
            need = (size_t)(end + 4 - c->request) + (cl && cl < end ? (size_t)atol(cl + 16) : 0);
    }
    size_t n = strlen(c->reply), piece = c->piece ? c->piece : n;
    for (size_t i = 0; i < n; i += piece) {
        if (send(s, c->reply + i, n - i < piece ? n - i : piece, MSG_NOSIGNAL) < 0)
            break;
        if (c->piece)
            usleep(500);
    }
    close(s);
    return NULL;
}

static void canned_start(struct canned *c, const char *reply, size_t piece)
{
    memset(c, 0, sizeof *c);
    c->reply = reply;
    c->piece = piece;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(c->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(c->fd, 4), 0);
    getsockname(c->fd, (struct sockaddr *)&a, &al);
    c->port = ntohs(a.sin_port);
    pthread_create(&c->th, NULL, canned_main, c);
}

static void canned_stop(struct canned *c)
{
    shutdown(c->fd, SHUT_RDWR);
    pthread_join(c->th, NULL);
    close(c->fd);
}

static struct mdl_remote *open_at(int port, const char *key_env, int retries)
{
    char url[128], note[512], path[4096];
    struct mdl_remote_params p = mdl_remote_default_params();
    p.model = "m";
    p.api_key_env = key_env;
    p.force = true;
    p.retries = retries;
    p.timeout_s = 5;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
    assert_int_equal(mdl_remote_add("canned", url, &p, note, sizeof note, err, sizeof err), 0);
    assert_int_equal(resolve("canned", path, sizeof path), 0);
    struct mdl_remote *r;
    assert_int_equal(mdl_remote_open(path, &r, err, sizeof err), 0);
    return r;
}

#define SSE_HEAD "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
#define EV(json) "data: " json "\n\n"

static const struct mdl_message one_msg[] = {{MDL_ROLE_USER, "hi", 2}};

/* one chat (one_msg) with a canned server answering reply: the server
 * started, the remote model opened (key_env, retries), the chat, the server
 * stopped and the model closed; mdl_remote_chat's status (res and err set) */
static int canned_chat(struct canned *c, const char *reply, const char *key_env, int retries,
                       const struct mdl_chat_params *p, mdl_text_fn on_text, void *ud, struct mdl_chat_result *res)
{
    canned_start(c, reply, 0);
    struct mdl_remote *r = open_at(c->port, key_env, retries);
    int rc = mdl_remote_chat(r, one_msg, 1, p, on_text, ud, res, err, sizeof err);
    canned_stop(c);
    mdl_remote_close(r);
    return rc;
}

static volatile sig_atomic_t cancel_flag;

struct stopper {
    struct pieces p;
    bool cancel_at_first; /* set the cancel flag (a Ctrl-C) at the first piece */
};

static int on_stopper(void *ud, const char *t, size_t n)
{
    struct stopper *s = ud;
    if (s->cancel_at_first)
        cancel_flag = 1;
    return on_piece(&s->p, t, n);
}

static void test_chat_stream(void **state)
{
    /* pieces split every 3 bytes, through a character's bytes too */
    static const char reply[] = SSE_HEAD
        EV("{\"model\":\"served\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Gr\\u00fc\\u00df \"}}]}")
        ": keep-alive\n\n"
        EV("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xe2\x82\xac\xf0\x9f\x8e\x89\"},\"finish_reason\":\"stop\"}]}")
        EV("{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":4,"
           "\"prompt_tokens_details\":{\"cached_tokens\":10}}}")
        "data: [DONE]\n\n";
    struct canned c;
    canned_start(&c, reply, 3);
    setenv("CANNED_KEY", "k-123", 1);
    struct mdl_remote *r = open_at(c.port, "CANNED_KEY", 0);
    struct mdl_chat_params p = mdl_chat_default_params();
    struct pieces pc = {{0}, 0, 0};
    struct mdl_chat_result res;
    int rc = mdl_remote_chat(r, one_msg, 1, &p, on_piece, &pc, &res, err, sizeof err);
    canned_stop(&c);
    assert_int_equal(rc, 0);
    assert_string_equal(pc.all, "Gr\xc3\xbc\xc3\x9f \xe2\x82\xac\xf0\x9f\x8e\x89");
    assert_string_equal(res.text, pc.all);
    assert_string_equal(res.stop_reason, "stop");
    assert_string_equal(res.server_model, "served");
    assert_int_equal(res.prompt_tokens, 12);
    assert_int_equal(res.cached_tokens, 10);
    assert_int_equal(res.completion_tokens, 4);
    assert_int_equal(res.http_status, 200);
    assert_int_equal(res.attempts, 1);
    assert_true(res.ttft_ms >= 0 && res.total_ms >= res.ttft_ms);
    /* what was sent: the path, the key to its origin, the body */
    assert_non_null(strstr(c.request, "POST /v1/chat/completions HTTP/1.1\r\n"));
    assert_non_null(strstr(c.request, "Authorization: Bearer k-123\r\n"));
    assert_non_null(strstr(c.request, "Accept: text/event-stream\r\n"));
    assert_non_null(strstr(c.request, "\r\n\r\n{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"));
    mdl_chat_result_free(&res);
    mdl_remote_close(r);
    unsetenv("CANNED_KEY");
}

static void test_chat_partial(void **state)
{
    static const char cut[] = SSE_HEAD EV("{\"choices\":[{\"delta\":{\"content\":\"half an\"}}]}")
        "data: {\"choices\":[{\"delta\":{\"content\":\" ans";
    static const char two[] = SSE_HEAD EV("{\"choices\":[{\"delta\":{\"content\":\"one\"}}]}")
        EV("{\"choices\":[{\"delta\":{\"content\":\"two\"}}]}") "data: [DONE]\n\n";
    struct canned c;
    struct mdl_chat_params p = mdl_chat_default_params();
    struct mdl_chat_result res;

    /* cut inside an event: the text so far is kept, and said to be cut */
    struct pieces pc = {{0}, 0, 0};
    int rc = canned_chat(&c, cut, NULL, 2, &p, on_piece, &pc, &res);
    assert_int_equal(rc, MDL_ERR_CUT);
    assert_string_equal(res.text, "half an");
    assert_string_equal(res.stop_reason, "cut");
    assert_int_equal(res.attempts, 1); /* text had come: never asked again */
    assert_non_null(strstr(err, "inside an event"));
    assert_null(strstr(c.request, "Authorization")); /* no key configured, none sent */
    mdl_chat_result_free(&res);

    /* Ctrl-C during the answer: interrupted, what came is kept */
    struct stopper st = {.cancel_at_first = true};
    cancel_flag = 0;
    p.cancel = &cancel_flag;
    rc = canned_chat(&c, two, NULL, 0, &p, on_stopper, &st, &res);
    assert_int_equal(rc, MDL_ERR_INTERRUPTED);
    assert_string_equal(res.stop_reason, "interrupted");
    assert_true(res.len >= 3 && !strncmp(res.text, "one", 3));
    mdl_chat_result_free(&res);
    cancel_flag = 0;

    /* the callback stops it (a closed pipe) */
    memset(&pc, 0, sizeof pc);
    pc.stop_at = 1;
    rc = canned_chat(&c, two, NULL, 0, &p, on_piece, &pc, &res);
    assert_int_equal(rc, MDL_ERR_INTERRUPTED);
    assert_string_equal(res.text, "one");
    mdl_chat_result_free(&res);
    p.cancel = NULL;
}

static void test_chat_errors(void **state)
{
    struct canned c;
    struct mdl_chat_params p = mdl_chat_default_params();
    struct mdl_chat_result res;
    struct mdl_remote *r;

    /* 401 with the variable unset: it is named */
    unsetenv("CANNED_UNSET_KEY");
    assert_int_equal(canned_chat(&c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 35\r\n\r\n{\"error\":{\"message\":\"bad token\"}}\n ",
                                 "CANNED_UNSET_KEY", 3, &p, NULL, NULL, &res),
                     MDL_ERR_AUTH);
    assert_non_null(strstr(err, "set CANNED_UNSET_KEY"));
    assert_non_null(strstr(err, "bad token"));
    assert_int_equal(res.attempts, 1);
    assert_string_equal(res.stop_reason, "error");
    assert_int_equal(res.len, 0);
    assert_non_null(res.text);
    mdl_chat_result_free(&res);

    /* a key with a newline in it is never sent */
    setenv("CANNED_BAD_KEY", "abc\r\nX-Injected: 1", 1);
    r = open_at(1, "CANNED_BAD_KEY", 0); /* port 1: nothing must connect */
    assert_int_equal(mdl_remote_chat(r, one_msg, 1, &p, NULL, NULL, &res, err, sizeof err), MDL_ERR_USAGE);
    assert_non_null(strstr(err, "refusing to send it"));
    mdl_chat_result_free(&res);
    mdl_remote_close(r);
    unsetenv("CANNED_BAD_KEY");

    /* nothing listens: a network error */
    r = open_at(1, NULL, 3);
    assert_int_equal(mdl_remote_chat(r, one_msg, 1, &p, NULL, NULL, &res, err, sizeof err), MDL_ERR_NETWORK);
    assert_non_null(strstr(err, "cannot connect"));
    mdl_chat_result_free(&res);
    mdl_remote_close(r);

    /* garbage before any text */
    assert_int_equal(canned_chat(&c, SSE_HEAD "data: {\"choices\": nope}\n\n", NULL, 0, &p, NULL, NULL, &res),
                     MDL_ERR_PROTOCOL);
    assert_non_null(strstr(err, "malformed JSON"));
    mdl_chat_result_free(&res);

    /* a whole answer where a stream was asked for */
    static const char whole[] = "{\"choices\":[{\"message\":{\"content\":\"all at once\"},\"finish_reason\":\"length\"}]}";
    char reply[512];
    snprintf(reply, sizeof reply, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(whole), whole);
    assert_int_equal(canned_chat(&c, reply, NULL, 0, &p, NULL, NULL, &res), 0);
    assert_string_equal(res.text, "all at once");
    assert_string_equal(res.stop_reason, "length");
    assert_int_equal(res.cached_tokens, -1);
    mdl_chat_result_free(&res);
}

static void test_chat_redirect(void **state)
{
    /* a 307 to another port: the request follows, the key does not */
    struct canned target, first;
    canned_start(&target, SSE_HEAD EV("{\"choices\":[{\"delta\":{\"content\":\"moved\"},\"finish_reason\":\"stop\"}]}"), 0);
    char redirect[256];
    snprintf(redirect, sizeof redirect,
             "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:%d/v1/chat/completions\r\n"
             "Content-Length: 0\r\n\r\n", target.port);
    canned_start(&first, redirect, 0);
    setenv("CANNED_KEY", "k-redirect", 1);
    struct mdl_remote *r = open_at(first.port, "CANNED_KEY", 0);
    struct mdl_chat_params p = mdl_chat_default_params();
    struct mdl_chat_result res;
    int rc = mdl_remote_chat(r, one_msg, 1, &p, NULL, NULL, &res, err, sizeof err);
    canned_stop(&first);
    canned_stop(&target);
    assert_int_equal(rc, 0);
    assert_string_equal(res.text, "moved");
    assert_non_null(strstr(first.request, "Authorization: Bearer k-redirect"));
    assert_non_null(strstr(target.request, "POST /v1/chat/completions"));
    assert_non_null(strstr(target.request, "\"content\":\"hi\"")); /* the body came along */
    assert_null(strstr(target.request, "Authorization"));
    mdl_chat_result_free(&res);
    mdl_remote_close(r);
    unsetenv("CANNED_KEY");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_events),
        cmocka_unit_test(test_sse_stop_and_limits),
        cmocka_unit_test(test_request_json),
        cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_bad_chunks),
        cmocka_unit_test(test_error_bodies),
        cmocka_unit_test(test_string_lists),
        cmocka_unit_test(test_private_addresses),
        cmocka_unit_test(test_http_urls),
        cmocka_unit_test_setup_teardown(test_entries, setup_home, teardown_home),
        cmocka_unit_test_setup_teardown(test_chat_stream, setup_home, teardown_home),
        cmocka_unit_test_setup_teardown(test_chat_partial, setup_home, teardown_home),
        cmocka_unit_test_setup_teardown(test_chat_errors, setup_home, teardown_home),
        cmocka_unit_test_setup_teardown(test_chat_redirect, setup_home, teardown_home),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
