/*
 * conv.c - a conversation over a live KV cache: messages rendered with the
 * chat template, only the new tokens of each turn prefilled, answers
 * generated and streamed, and (attached to a store) every finished exchange
 * saved as messages with their token ids plus one KV segment.
 *
 * Invariants:
 *   - tokens[0..n_tokens) are exactly the KV cache's positions, and
 *     n_tokens == llm_ctx_n_past(ctx) between calls;
 *   - msgs[i].tokens are the ids message i put in the cache: the first
 *     message's include BOS; a user message's include the previous answer's
 *     terminator, its own turn and the assistant's opening; an answer's are
 *     the generated ids (without the end-of-generation token, which the next
 *     user span's terminator text brings);
 *   - spans (segments) are: the system message, then each exchange (user +
 *     answer); when there is no system prompt the first exchange is the first
 *     span. The KV text is the rendering of the messages, except that an
 *     answer is the model's generated tokens (kept, never re-tokenized).
 *   - template text is tokenized with special tokens parsed; a user's text
 *     only with --special (found by rendering a sentinel in its place).
 */
#include "core/llm.h"
#include "sessions/sess.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int sess_kv_fail(struct sess_store *st, const char *fmt, ...); /* store.c */

struct conv_msg {
    enum sess_role role;
    char *text;
    int32_t *tokens;
    int64_t n_tokens;
    int64_t start; /* KV position of its first token */
};

struct sess_conv {
    const struct llm_model *m;
    const struct llm_vocab *v;
    struct llm_ctx *ctx;
    struct sess_conv_params p;
    char *system;
    char *model_path;
    struct llm_sampler *smp;
    struct conv_msg *msgs;
    int64_t n_msgs, cap_msgs;
    int32_t *tokens; /* n_ctx */
    int64_t n_tokens, n_kv, n_ctx;
    /* attached */
    struct sess_store *st;
    int64_t sid;
    struct sess_lock *lock;
    int64_t recomputed; /* tokens restore had to compute, not yet reported by a turn */
    uint8_t fp[32];
    char err[1024];
};

static int cfail(struct sess_conv *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return SESS_ERR;
}

const char *sess_conv_errmsg(const struct sess_conv *c) { return c->err; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct sess_conv_params sess_conv_default_params(void)
{
    struct sess_conv_params p;
    memset(&p, 0, sizeof p);
    p.tmpl = LLM_TEMPLATE_CHATML;
    p.sampling = llm_sampler_default_params();
    p.n_predict = -1;
    return p;
}

/* ==== messages ==== */

static void msg_free(struct conv_msg *m)
{
    free(m->text);
    free(m->tokens);
    memset(m, 0, sizeof *m);
}

static int push_msg(struct sess_conv *c, enum sess_role role, const char *text, size_t len,
                    const int32_t *toks, int64_t n, int64_t start)
{
    if (c->n_msgs == c->cap_msgs) {
        int64_t cap = c->cap_msgs ? 2 * c->cap_msgs : 16;
        struct conv_msg *p = realloc(c->msgs, (size_t)cap * sizeof *p);
        if (!p)
            return cfail(c, "out of memory");
        c->msgs = p;
        c->cap_msgs = cap;
    }
    struct conv_msg *m = &c->msgs[c->n_msgs];
    m->role = role;
    m->text = malloc(len + 1);
    m->tokens = malloc((size_t)(n ? n : 1) * sizeof *m->tokens);
    if (!m->text || !m->tokens) {
        free(m->text);
        free(m->tokens);
        return cfail(c, "out of memory");
    }
    memcpy(m->text, text, len);
    m->text[len] = 0;
    if (n)
        memcpy(m->tokens, toks, (size_t)n * sizeof *toks);
    m->n_tokens = n;
    m->start = start;
    c->n_msgs++;
    return SESS_OK;
}

/* the messages as the template sees them, with message `sentinel_at` (or
 * -1) replaced by a sentinel */
#define SENTINEL "\x01kvchat-content\x02"
static struct llm_chat_msg *chat_msgs(const struct sess_conv *c, int64_t n, int64_t sentinel_at,
                                      const char *extra_user)
{
    struct llm_chat_msg *cm = malloc((size_t)(n + 1) * sizeof *cm);
    if (!cm)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        cm[i].role = sess_role_name(c->msgs[i].role);
        cm[i].content = c->msgs[i].text;
    }
    if (extra_user) {
        cm[n].role = "user";
        cm[n].content = extra_user;
    }
    if (sentinel_at >= 0)
        cm[sentinel_at].content = SENTINEL;
    return cm;
}

/* render cm[0..n) into a malloc'd string */
static char *render(struct sess_conv *c, const struct llm_chat_msg *cm, size_t n, bool add_assistant,
                    int32_t *len)
{
    int32_t need = llm_template_render(c->p.tmpl, cm, n, add_assistant, NULL, 0);
    int32_t size = need < 0 ? -need : need + 1;
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        cfail(c, "out of memory");
        return NULL;
    }
    int32_t r = llm_template_render(c->p.tmpl, cm, n, add_assistant, buf, size);
    if (r < 0) {
        free(buf);
        cfail(c, "cannot render the conversation");
        return NULL;
    }
    buf[r] = 0;
    *len = r;
    return buf;
}

/* What rendering cm[0..n) (assistant opened if add_assistant) adds to
 * rendering cm[0..n_old) (assistant opened if old_open); malloc'd. */
static char *append_text(struct sess_conv *c, const struct llm_chat_msg *cm, size_t n_old, bool old_open,
                         size_t n, bool add_assistant, int32_t *len)
{
    int32_t ol = 0, nl;
    char *old = n_old ? render(c, cm, n_old, old_open, &ol) : NULL;
    if (n_old && !old)
        return NULL;
    char *new = render(c, cm, n, add_assistant, &nl);
    if (!new) {
        free(old);
        return NULL;
    }
    if (ol > nl || (ol && memcmp(old, new, (size_t)ol))) {
        free(old);
        free(new);
        cfail(c, "the chat template rewrites earlier turns");
        return NULL;
    }
    memmove(new, new + ol, (size_t)(nl - ol) + 1);
    *len = nl - ol;
    free(old);
    return new;
}

/* append the tokens of text[0..len) to *out (growing it) */
static int tokenize_into(struct sess_conv *c, const char *text, size_t len,
                         const struct llm_tokenize_params *tp, int32_t **out, int64_t *n, int64_t *cap)
{
    if (len == 0 && !tp->add_special)
        return SESS_OK;
    int32_t k = llm_tokenize_ex(c->v, text, len, NULL, 0, tp);
    if (k == INT32_MIN)
        return cfail(c, "out of memory");
    int64_t need = k < 0 ? -(int64_t)k : k;
    if (*n + need > *cap) {
        int64_t nc = *cap ? *cap : 64;
        while (nc < *n + need)
            nc *= 2;
        int32_t *p = realloc(*out, (size_t)nc * sizeof *p);
        if (!p)
            return cfail(c, "out of memory");
        *out = p;
        *cap = nc;
    }
    k = llm_tokenize_ex(c->v, text, len, *out + *n, (int32_t)(*cap - *n), tp);
    if (k < 0)
        return cfail(c, "cannot tokenize");
    *n += k;
    return SESS_OK;
}

/*
 * The tokens a new message adds: text is what its rendering appends,
 * content_at the index of the message whose content must not be parsed for
 * special tokens (or -1); first: the very first text of the conversation
 * (gets BOS). The content is located by rendering a sentinel in its place.
 */
static int message_tokens(struct sess_conv *c, const struct llm_chat_msg *cm, size_t n_old, bool old_open,
                          size_t n, bool add_assistant, int64_t content_at, size_t skip,
                          int32_t **out, int64_t *n_out)
{
    int64_t cap = 0;
    int32_t len, slen;
    *out = NULL;
    *n_out = 0;
    char *text = append_text(c, cm, n_old, old_open, n, add_assistant, &len);
    if (!text)
        return SESS_ERR;
    bool first = n_old == 0;
    int rc = SESS_OK;
    char *sent = NULL;
    struct llm_tokenize_params tp = llm_tokenize_default_params();
    tp.add_special = first;
    tp.parse_special = true;
    if (skip > (size_t)len) {
        free(text);
        return cfail(c, "the chat template renders the answer differently");
    }
    if (content_at >= 0 && !c->p.parse_special) {
        struct llm_chat_msg *cs = malloc(n * sizeof *cs);
        if (cs) {
            memcpy(cs, cm, n * sizeof *cs);
            cs[content_at].content = SENTINEL;
            sent = append_text(c, cs, n_old, old_open, n, add_assistant, &slen);
            free(cs);
        }
    }
    const char *t = text + skip;
    size_t tl = (size_t)len - skip;
    char *at = sent ? strstr(sent + (skip <= (size_t)slen ? skip : 0), SENTINEL) : NULL;
    if (at) {
        size_t plen = (size_t)(at - sent) - skip, slen2 = strlen(at + strlen(SENTINEL));
        const char *suffix = at + strlen(SENTINEL);
        if (plen + slen2 <= tl && !memcmp(t, sent + skip, plen) && !memcmp(t + tl - slen2, suffix, slen2)) {
            /* one text, so its tokens are those of the whole; the user's
             * content is plain text (no control tokens matched in it) */
            size_t plain[2] = {plen, tl - slen2};
            tp.plain = plain;
            tp.n_plain = 1;
            rc = tokenize_into(c, t, tl, &tp, out, n_out, &cap);
            goto done;
        }
    }
    /* no separable content (or --special): the whole text, template style */
    rc = tokenize_into(c, t, tl, &tp, out, n_out, &cap);
done:
    free(text);
    free(sent);
    if (rc) {
        free(*out);
        *out = NULL;
        *n_out = 0;
    }
    return rc;
}

/* ==== the KV cache ====
 * tokens[0..n_tokens) is the conversation; the cache holds [0..n_kv) of it:
 * a system prompt is computed (or restored) only when first needed. */

static int add_tokens(struct sess_conv *c, const int32_t *toks, int64_t n)
{
    if (c->n_tokens + n > c->n_ctx)
        return cfail(c, "context full");
    memcpy(c->tokens + c->n_tokens, toks, (size_t)n * sizeof *toks);
    c->n_tokens += n;
    return SESS_OK;
}

/* compute what the cache lacks; *n_done gets how many tokens that was */
static int sync_kv(struct sess_conv *c, int64_t *n_done)
{
    int64_t n = c->n_tokens - c->n_kv;
    if (n_done)
        *n_done = n;
    if (n <= 0)
        return SESS_OK;
    int rc = llm_ctx_decode(c->ctx, c->tokens + c->n_kv, n);
    if (rc == LLM_ERR_CTX_FULL)
        return cfail(c, "context full");
    if (rc != LLM_OK)
        return cfail(c, "%s", llm_ctx_errmsg(c->ctx));
    c->n_kv = c->n_tokens;
    return SESS_OK;
}

static int truncate_to(struct sess_conv *c, int64_t n)
{
    if (n < c->n_kv) {
        if (llm_ctx_truncate(c->ctx, n) != LLM_OK)
            return cfail(c, "%s", llm_ctx_errmsg(c->ctx));
        c->n_kv = n;
    }
    if (n < c->n_tokens)
        c->n_tokens = n;
    return SESS_OK;
}

/* logits for the next position after a truncation: compute the last token
 * again */
static int refresh_logits(struct sess_conv *c)
{
    if (c->n_tokens == 0)
        return cfail(c, "nothing to continue from");
    if (c->n_kv == c->n_tokens && truncate_to(c, c->n_tokens - 1) == SESS_OK)
        c->n_tokens++; /* the token is still in tokens[]: recompute it */
    return sync_kv(c, NULL);
}

/* ==== spans and persistence ==== */

/* index of the first message of span k and how many spans there are */
static bool has_system(const struct sess_conv *c)
{
    return c->n_msgs > 0 && c->msgs[0].role == SESS_ROLE_SYSTEM;
}

/* the span bounds (KV end positions) and the last message of each span */
static int64_t spans(const struct sess_conv *c, int64_t *bounds, int64_t *last)
{
    int64_t n = 0;
    for (int64_t i = 0; i < c->n_msgs; i++) {
        bool end = c->msgs[i].role == SESS_ROLE_SYSTEM || c->msgs[i].role == SESS_ROLE_ASSISTANT;
        if (end && c->msgs[i].start + c->msgs[i].n_tokens > (n ? bounds[n - 1] : 0)) {
            bounds[n] = c->msgs[i].start + c->msgs[i].n_tokens;
            last[n] = i;
            n++;
        }
    }
    return n;
}

static int save_state(struct sess_conv *c)
{
    int64_t need = llm_sampler_state_save(c->smp, NULL, 0);
    size_t size = (size_t)(need < 0 ? -need : need);
    void *buf = malloc(size ? size : 1);
    if (!buf)
        return cfail(c, "out of memory");
    int64_t got = llm_sampler_state_save(c->smp, buf, size);
    int rc = got >= 0 && sess_save_state(c->st, c->sid, buf, (size_t)got) == 0
                 ? SESS_OK
                 : cfail(c, "cannot save the sampler state: %s", sess_errmsg(c->st));
    free(buf);
    return rc;
}

/* write messages [from, n_msgs) and the segment of the span ending at the
 * last of them */
static int persist(struct sess_conv *c, int64_t from)
{
    if (!c->st || c->p.no_cache) /* --no-cache: the session is only read */
        return SESS_OK;
    for (int64_t i = from; i < c->n_msgs; i++) {
        struct conv_msg *m = &c->msgs[i];
        if (sess_append_message(c->st, c->sid, m->role, m->text, m->n_tokens, m->tokens))
            return cfail(c, "cannot save the conversation: %s", sess_errmsg(c->st));
    }
    int64_t *bounds = malloc((size_t)(c->n_msgs + 1) * 2 * sizeof *bounds);
    if (!bounds)
        return cfail(c, "out of memory");
    int64_t *last = bounds + c->n_msgs + 1;
    int64_t ns = spans(c, bounds, last);
    int rc = SESS_OK;
    uint8_t parent[32] = {0}, seg[32];
    if (c->p.no_cache)
        ns = 0; /* --no-cache writes no snapshots */
    for (int64_t k = 0; k < ns && rc == SESS_OK; k++) {
        int64_t a = k ? bounds[k - 1] : 0, b = bounds[k];
        if (b <= a || b > c->n_kv)
            break;
        /* a span saved before (or shared with another chat) is not written again */
        int have = sess_kv_have(c->st, c->m, c->ctx, c->fp, parent, c->tokens, a, b, seg);
        if (have < 0)
            rc = cfail(c, "cannot save the KV cache: %s", sess_errmsg(c->st));
        else if (have == 0 || last[k] >= from) {
            if (have == 1) { /* known: only put it in this session's chain */
                char path[4200];
                struct stat sb;
                if (sess_segment_path(c->st, seg, path, sizeof path) || stat(path, &sb) ||
                    sess_chain_append(c->st, c->sid, seg, parent, c->fp,
                                      llm_ctx_kv_type(c->ctx) == LLM_TYPE_F32 ? 0 : 1, a, b - a,
                                      sb.st_size, last[k]))
                    rc = cfail(c, "cannot save the KV cache: %s", sess_errmsg(c->st));
            } else if (sess_kv_snapshot(c->st, c->sid, c->m, c->ctx, c->fp, parent, c->tokens, a, b,
                                        last[k], seg)) {
                rc = cfail(c, "cannot save the KV cache: %s", sess_errmsg(c->st));
            }
        }
        memcpy(parent, seg, 32);
    }
    free(bounds);
    if (rc == SESS_OK)
        rc = save_state(c);
    if (rc == SESS_OK && c->p.cache_max > 0 && sess_store_bytes(c->st) > c->p.cache_max) {
        int64_t n, freed;
        sess_evict(c->st, c->p.cache_max, &n, &freed); /* best effort: the cache is only a cache */
    }
    return rc;
}

/* ==== life cycle ==== */

int sess_conv_init(const struct llm_model *m, const struct llm_vocab *v, struct llm_ctx *ctx,
                   struct sess_conv_params p, struct sess_conv **out, char *err, size_t err_size)
{
    *out = NULL;
    if (llm_ctx_n_past(ctx) != 0) {
        snprintf(err, err_size, "the context is not empty");
        return SESS_ERR;
    }
    struct sess_conv *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_size, "out of memory");
        return SESS_ERR;
    }
    c->m = m;
    c->v = v;
    c->ctx = ctx;
    c->p = p;
    c->sid = -1;
    c->n_ctx = llm_ctx_n_ctx(ctx);
    c->tokens = malloc((size_t)c->n_ctx * sizeof *c->tokens);
    c->smp = llm_sampler_init(p.sampling, llm_model_n_vocab(m));
    c->system = p.system && *p.system ? strdup(p.system) : NULL;
    c->model_path = strdup(p.model_path ? p.model_path : "");
    c->p.system = c->system;
    c->p.model_path = c->model_path;
    /* the model fingerprint is needed only with a store: see attach */
    if (!c->tokens || !c->smp || !c->model_path || (p.system && *p.system && !c->system)) {
        sess_conv_free(c);
        snprintf(err, err_size, "out of memory");
        return SESS_ERR;
    }
    if (c->system) {
        struct llm_chat_msg cm = {"system", c->system};
        int32_t *toks;
        int64_t n;
        if (message_tokens(c, &cm, 0, false, 1, false, -1, 0, &toks, &n) ||
            push_msg(c, SESS_ROLE_SYSTEM, c->system, strlen(c->system), toks, n, 0) ||
            add_tokens(c, toks, n)) {
            free(toks);
            snprintf(err, err_size, "%s", c->err);
            sess_conv_free(c);
            return SESS_ERR;
        }
        free(toks);
    }
    *out = c;
    return SESS_OK;
}

void sess_conv_free(struct sess_conv *c)
{
    if (!c)
        return;
    for (int64_t i = 0; i < c->n_msgs; i++)
        msg_free(&c->msgs[i]);
    free(c->msgs);
    free(c->tokens);
    llm_sampler_free(c->smp);
    free(c->system);
    free(c->model_path);
    sess_unlock(c->lock);
    free(c);
}

int64_t sess_conv_session(const struct sess_conv *c) { return c->st ? c->sid : -1; }
int64_t sess_conv_n_messages(const struct sess_conv *c) { return c->n_msgs; }
int64_t sess_conv_n_tokens(const struct sess_conv *c) { return c->n_tokens; }
const int32_t *sess_conv_tokens(const struct sess_conv *c) { return c->tokens; }
struct sess_conv_params sess_conv_get_params(const struct sess_conv *c) { return c->p; }

enum sess_role sess_conv_message(const struct sess_conv *c, int64_t i, const char **text)
{
    *text = i >= 0 && i < c->n_msgs ? c->msgs[i].text : NULL;
    return *text ? c->msgs[i].role : SESS_ROLE_COUNT;
}

int64_t sess_conv_n_exchanges(const struct sess_conv *c)
{
    int64_t n = 0;
    for (int64_t i = 0; i < c->n_msgs; i++)
        n += c->msgs[i].role == SESS_ROLE_USER;
    return n;
}

void sess_conv_set_sampling(struct sess_conv *c, struct llm_sampler_params p)
{
    c->p.sampling = p;
    struct llm_sampler *s = llm_sampler_init(p, llm_model_n_vocab(c->m));
    if (s) {
        llm_sampler_free(c->smp);
        c->smp = s;
    }
}

void sess_conv_set_n_predict(struct sess_conv *c, int32_t n_predict)
{
    c->p.n_predict = n_predict;
}

/* ==== generating an answer ==== */

struct gen {
    char *text;
    size_t len, cap, emitted;
    int64_t *ends; /* text length after each generated token */
};

static int text_append(struct gen *g, const char *p, size_t n)
{
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap < g->len + n + 1)
            cap *= 2;
        char *q = realloc(g->text, cap);
        if (!q)
            return -1;
        g->text = q;
        g->cap = cap;
    }
    memcpy(g->text + g->len, p, n);
    g->len += n;
    g->text[g->len] = 0;
    return 0;
}

/* bytes at the end of text that could begin a stop string */
static size_t held_back(const struct gen *g, const char *const *stops)
{
    size_t keep = 0;
    for (const char *const *s = stops; s && *s; s++) {
        size_t sl = strlen(*s);
        for (size_t k = sl - 1; k > keep; k--)
            if (k <= g->len && !memcmp(g->text + g->len - k, *s, k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

/* the earliest stop string in text at or after from; -1 if none */
static int64_t find_stop(const struct gen *g, const char *const *stops, size_t from)
{
    int64_t best = -1;
    for (const char *const *s = stops; s && *s; s++) {
        const char *hit = memmem(g->text + from, g->len - from, *s, strlen(*s));
        if (hit && (best < 0 || hit - g->text < best))
            best = hit - g->text;
    }
    return best;
}

static int generate(struct sess_conv *c, sess_text_fn on_text, void *ud, volatile sig_atomic_t *interrupt,
                    struct sess_turn_stats *ts, double t0)
{
    const char *const *stops = llm_template_stops(c->p.tmpl);
    struct llm_detok_params dp = llm_detok_default_params();
    struct llm_detok *dt = llm_detok_init(c->v, dp);
    struct gen g = {0};
    int64_t limit = c->p.n_predict > 0 ? c->p.n_predict : INT64_MAX, n_gen = 0;
    int64_t start = c->n_tokens;
    size_t max_stop = 0;
    for (const char *const *s = stops; s && *s; s++)
        max_stop = strlen(*s) > max_stop ? strlen(*s) : max_stop;
    g.ends = malloc((size_t)(c->n_ctx - start + 1) * sizeof *g.ends);
    if (!dt || !g.ends) {
        llm_detok_free(dt);
        free(g.ends);
        return cfail(c, "out of memory");
    }
    ts->stop_reason = "length";
    double t_first = 0;
    int rc = SESS_OK;
    const float *logits = llm_ctx_logits(c->ctx);
    while (n_gen < limit) {
        if (c->n_tokens >= c->n_ctx) {
            ts->stop_reason = "context_full";
            break;
        }
        int32_t t = llm_sampler_sample(c->smp, logits);
        if (n_gen == 0) {
            t_first = now_ms();
            ts->ttft_ms = t_first - t0;
        }
        if (llm_vocab_is_eog(c->v, t)) {
            ts->stop_reason = "stop";
            break;
        }
        const char *piece;
        size_t pl = llm_detok_push(dt, t, &piece);
        size_t before = g.len;
        if (pl && text_append(&g, piece, pl)) {
            rc = cfail(c, "out of memory");
            break;
        }
        int64_t hit = find_stop(&g, stops, before > max_stop ? before - max_stop : 0);
        if (hit >= 0) { /* keep the tokens whose text lies wholly before it */
            int64_t keep = 0;
            while (keep < n_gen && g.ends[keep] <= hit)
                keep++;
            g.len = keep ? (size_t)g.ends[keep - 1] : 0;
            g.text[g.len] = 0;
            if (g.emitted > g.len)
                g.emitted = g.len;
            if (truncate_to(c, start + keep)) {
                rc = SESS_ERR;
                break;
            }
            n_gen = keep;
            ts->stop_reason = "stop";
            break;
        }
        if (add_tokens(c, &t, 1) || sync_kv(c, NULL)) {
            rc = SESS_ERR;
            break;
        }
        g.ends[n_gen++] = (int64_t)g.len;
        size_t safe = g.len - held_back(&g, stops);
        if (safe > g.emitted && on_text) {
            int stop = on_text(ud, g.text + g.emitted, safe - g.emitted);
            g.emitted = safe;
            if (stop) {
                ts->stop_reason = "interrupted";
                break;
            }
        }
        if (interrupt && *interrupt) {
            ts->stop_reason = "interrupted";
            break;
        }
        logits = llm_ctx_logits(c->ctx);
    }
    if (rc == SESS_OK && strcmp(ts->stop_reason, "stop") != 0) {
        const char *rest;
        size_t rl = llm_detok_flush(dt, &rest);
        if (rl && text_append(&g, rest, rl))
            rc = cfail(c, "out of memory");
    }
    if (rc == SESS_OK && g.len > g.emitted && on_text)
        on_text(ud, g.text + g.emitted, g.len - g.emitted);
    double t_end = now_ms();
    ts->generated_tokens = n_gen;
    ts->decode_tok_s = n_gen > 1 && t_end > t_first ? (n_gen - 1) * 1e3 / (t_end - t_first) : 0;
    if (rc == SESS_OK)
        rc = push_msg(c, SESS_ROLE_ASSISTANT, g.text ? g.text : "", g.len, c->tokens + start, n_gen, start);
    llm_detok_free(dt);
    free(g.text);
    free(g.ends);
    return rc;
}

static void finish_stats(struct sess_conv *c, struct sess_turn_stats *ts)
{
    ts->kv_bytes_mem = llm_ctx_kv_bytes(c->ctx, c->n_kv);
    ts->kv_bytes_disk = 0;
    if (c->st) {
        struct sess_info info;
        if (sess_get(c->st, c->sid, &info) == 0) {
            ts->kv_bytes_disk = info.kv_bytes;
            sess_info_free(&info);
        }
    }
}

/* ==== turns ==== */

/* The tokens a user message appends, given everything before it. */
static int user_tokens(struct sess_conv *c, const char *user_text, int32_t **toks, int64_t *n)
{
    int64_t nm = c->n_msgs;
    struct llm_chat_msg *cm = chat_msgs(c, nm, -1, user_text);
    if (!cm)
        return cfail(c, "out of memory");
    /* what the cache holds: the rendering up to the last answer's opening
     * plus the answer (kept as generated), or the system prompt, or nothing */
    size_t n_old = (size_t)nm, skip = 0;
    bool old_open = false;
    if (nm > 0 && c->msgs[nm - 1].role == SESS_ROLE_ASSISTANT) {
        n_old = (size_t)nm - 1;
        old_open = true;
        /* the appended text starts with the answer as rendered */
        skip = strlen(c->msgs[nm - 1].text);
    }
    int rc = message_tokens(c, cm, n_old, old_open, (size_t)nm + 1, true, nm, skip, toks, n);
    if (rc && skip) { /* a template that trims content: compare it trimmed */
        const char *a = c->msgs[nm - 1].text;
        size_t al = strlen(a);
        while (al && (a[al - 1] == ' ' || a[al - 1] == '\n' || a[al - 1] == '\t' || a[al - 1] == '\r'))
            al--;
        size_t lead = 0;
        while (lead < al && (a[lead] == ' ' || a[lead] == '\n' || a[lead] == '\t'))
            lead++;
        rc = message_tokens(c, cm, n_old, old_open, (size_t)nm + 1, true, nm, al - lead, toks, n);
    }
    free(cm);
    return rc;
}

int sess_conv_say(struct sess_conv *c, const char *user_text, sess_text_fn on_text, void *ud,
                  volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts)
{
    memset(ts, 0, sizeof *ts);
    double t0 = now_ms();
    int32_t *toks;
    int64_t n;
    if (user_tokens(c, user_text, &toks, &n))
        return SESS_ERR;
    /* room for the message and at least one answer token */
    if (c->n_tokens + n + 1 > c->n_ctx) {
        free(toks);
        cfail(c, "the message needs %lld tokens, and %lld of the context's %lld are free",
              (long long)n + 1, (long long)(c->n_ctx - c->n_tokens), (long long)c->n_ctx);
        return SESS_ERR_CTX_FULL;
    }
    int64_t start = c->n_tokens, user_idx = c->n_msgs;
    if (c->p.no_cache)
        truncate_to(c, c->n_tokens), llm_ctx_truncate(c->ctx, 0), c->n_kv = 0;
    ts->cached_tokens = c->n_kv - c->recomputed;
    int64_t done;
    if (add_tokens(c, toks, n) || push_msg(c, SESS_ROLE_USER, user_text, strlen(user_text), toks, n, start) ||
        sync_kv(c, &done)) {
        free(toks);
        return SESS_ERR;
    }
    free(toks);
    double t_pf = now_ms();
    ts->prefilled_tokens = done + c->recomputed;
    c->recomputed = 0;
    ts->prompt_tokens = c->n_tokens;
    ts->prefill_tok_s = t_pf > t0 && done ? done * 1e3 / (t_pf - t0) : 0;
    int rc = generate(c, on_text, ud, interrupt, ts, t0);
    if (rc == SESS_OK)
        rc = persist(c, user_idx);
    finish_stats(c, ts);
    return rc;
}

static int drop_messages(struct sess_conv *c, int64_t from)
{
    for (int64_t i = from; i < c->n_msgs; i++)
        msg_free(&c->msgs[i]);
    c->n_msgs = from;
    if (c->st && sess_truncate_messages(c->st, c->sid, from))
        return cfail(c, "cannot change the session: %s", sess_errmsg(c->st));
    return SESS_OK;
}

int sess_conv_retry(struct sess_conv *c, sess_text_fn on_text, void *ud, volatile sig_atomic_t *interrupt,
                    struct sess_turn_stats *ts)
{
    memset(ts, 0, sizeof *ts);
    int64_t L = c->n_msgs - 1;
    if (L < 0 || c->msgs[L].role != SESS_ROLE_ASSISTANT)
        return cfail(c, "there is no answer to retry");
    double t0 = now_ms();
    if (truncate_to(c, c->msgs[L].start) || drop_messages(c, L) || refresh_logits(c))
        return SESS_ERR;
    ts->cached_tokens = c->n_tokens - 1;
    ts->prefilled_tokens = 1;
    ts->prompt_tokens = c->n_tokens;
    int rc = generate(c, on_text, ud, interrupt, ts, t0);
    if (rc == SESS_OK)
        rc = persist(c, L);
    finish_stats(c, ts);
    return rc;
}

int sess_conv_undo(struct sess_conv *c)
{
    int64_t u = c->n_msgs - 1;
    while (u >= 0 && c->msgs[u].role != SESS_ROLE_USER)
        u--;
    if (u < 0)
        return cfail(c, "there is nothing to undo");
    if (truncate_to(c, c->msgs[u].start))
        return SESS_ERR;
    return drop_messages(c, u);
}

int sess_conv_clear(struct sess_conv *c)
{
    int64_t keep = has_system(c) ? 1 : 0;
    if (truncate_to(c, keep ? c->msgs[0].n_tokens : 0))
        return SESS_ERR;
    return drop_messages(c, keep);
}

/* recompute the tokens of messages [from, n_msgs) from their text (answers
 * keep their generated tokens), after the cache was cut at msgs[from] */
static int retokenize_from(struct sess_conv *c, int64_t from)
{
    int64_t nm = c->n_msgs;
    c->n_msgs = from;
    for (int64_t i = from; i < nm; i++) {
        struct conv_msg m = c->msgs[i];
        int32_t *toks = NULL;
        int64_t n = 0;
        int rc;
        if (m.role == SESS_ROLE_ASSISTANT) {
            toks = m.tokens;
            n = m.n_tokens;
            m.tokens = NULL;
            rc = SESS_OK;
        } else if (m.role == SESS_ROLE_USER) {
            rc = user_tokens(c, m.text, &toks, &n);
        } else {
            struct llm_chat_msg cm = {"system", m.text};
            rc = message_tokens(c, &cm, 0, false, 1, false, -1, 0, &toks, &n);
        }
        if (rc == SESS_OK)
            rc = add_tokens(c, toks, n);
        if (rc == SESS_OK)
            rc = push_msg(c, m.role, m.text, strlen(m.text), toks, n, c->n_tokens - n);
        free(toks);
        msg_free(&m);
        if (rc) {
            for (int64_t j = i + 1; j < nm; j++)
                msg_free(&c->msgs[j]);
            return rc;
        }
    }
    return SESS_OK;
}

int sess_conv_drop_oldest(struct sess_conv *c, int64_t n)
{
    int64_t first = has_system(c) ? 1 : 0, i = first, users = 0;
    while (i < c->n_msgs && (users < n || c->msgs[i].role != SESS_ROLE_USER)) {
        users += c->msgs[i].role == SESS_ROLE_USER;
        i++;
    }
    if (users == 0)
        return cfail(c, "there is no exchange to drop");
    /* move the kept messages down, then compute their tokens again */
    for (int64_t j = first; j < i; j++)
        msg_free(&c->msgs[j]);
    memmove(c->msgs + first, c->msgs + i, (size_t)(c->n_msgs - i) * sizeof *c->msgs);
    c->n_msgs -= i - first;
    if (truncate_to(c, first ? c->msgs[0].n_tokens : 0) || retokenize_from(c, first) || sync_kv(c, NULL))
        return SESS_ERR;
    if (c->st) { /* the session is rewritten from its first message */
        if (sess_truncate_messages(c->st, c->sid, 0))
            return cfail(c, "cannot change the session: %s", sess_errmsg(c->st));
        return persist(c, 0);
    }
    return SESS_OK;
}

int sess_conv_set_system(struct sess_conv *c, const char *system)
{
    if (truncate_to(c, 0) || drop_messages(c, 0))
        return SESS_ERR;
    free(c->system);
    c->system = system && *system ? strdup(system) : NULL;
    c->p.system = c->system;
    if (!c->system)
        return SESS_OK;
    struct llm_chat_msg cm = {"system", c->system};
    int32_t *toks;
    int64_t n;
    int rc = message_tokens(c, &cm, 0, false, 1, false, -1, 0, &toks, &n);
    if (rc == SESS_OK)
        rc = push_msg(c, SESS_ROLE_SYSTEM, c->system, strlen(c->system), toks, n, 0);
    if (rc == SESS_OK)
        rc = add_tokens(c, toks, n);
    free(toks);
    if (rc == SESS_OK && c->st)
        rc = persist(c, 0);
    return rc;
}

/* ==== sessions ==== */

/* the cache for the whole conversation from the store's segments */
static int restore_all(struct sess_conv *c, struct sess_restore_stats *rs)
{
    int64_t *bounds = malloc((size_t)(c->n_msgs + 1) * 2 * sizeof *bounds);
    if (!bounds)
        return cfail(c, "out of memory");
    int64_t *last = bounds + c->n_msgs + 1;
    int64_t ns = spans(c, bounds, last);
    int rc = SESS_OK;
    if (truncate_to(c, c->n_tokens) || llm_ctx_truncate(c->ctx, 0) != LLM_OK)
        rc = cfail(c, "%s", llm_ctx_errmsg(c->ctx));
    c->n_kv = 0;
    if (rc == SESS_OK && ns > 0 &&
        sess_kv_restore(c->st, c->sid, c->m, c->ctx, c->fp, c->tokens, bounds, last, ns, rs))
        rc = cfail(c, "cannot restore the session: %s", sess_errmsg(c->st));
    if (rc == SESS_OK) {
        c->n_kv = ns > 0 ? bounds[ns - 1] : 0;
        c->recomputed = rs->prefilled_tokens;
    }
    free(bounds);
    return rc;
}

int sess_conv_attach(struct sess_conv *c, struct sess_store *st, const char *name, bool create,
                     struct sess_restore_stats *rs)
{
    memset(rs, 0, sizeof *rs);
    int64_t sid;
    if (c->st)
        return cfail(c, "the conversation is already in a session");
    sess_model_fingerprint_cached(st, c->model_path, llm_model_gguf(c->m), c->fp);
    bool exists = name && sess_find(st, name, &sid) == 0;
    if (!exists && !create)
        return cfail(c, "no session '%s'", name);
    if (!exists) {
        struct sess_new n = {name, c->model_path, c->fp, c->system, NULL,
                             llm_ctx_kv_type(c->ctx) == LLM_TYPE_F32 ? 0 : 1};
        if (sess_create(st, &n, &sid))
            return cfail(c, "%s", sess_errmsg(st));
    }
    struct sess_lock *lock;
    if (sess_lock(st, sid, &lock)) {
        cfail(c, "%s", sess_errmsg(st));
        return SESS_ERR_BUSY;
    }
    c->st = st;
    c->sid = sid;
    c->lock = lock;
    if (!exists) {
        /* a system prompt already on disk (another chat's) is read, not computed */
        int rc = SESS_OK;
        if (has_system(c) && c->n_kv == 0 && c->n_msgs == 1) {
            /* only a segment that is there is read: a missing one would count
             * as damage, so it is simply computed */
            int64_t b = c->msgs[0].n_tokens, l = 0;
            struct sess_restore_stats tmp;
            if (sess_kv_have(st, c->m, c->ctx, c->fp, NULL, c->tokens, 0, b, NULL) == 1 &&
                sess_kv_restore(st, sid, c->m, c->ctx, c->fp, c->tokens, &b, &l, 1, &tmp) == 0 &&
                tmp.damaged == 0) {
                c->n_kv = b;
                rs->restored_tokens = tmp.restored_tokens;
            } else {
                llm_ctx_truncate(c->ctx, 0);
            }
        }
        /* what is not restored is computed by the first turn (and counted there) */
        if (rc == SESS_OK)
            rc = persist(c, 0);
        return rc;
    }
    /* an existing session: its messages replace the conversation's */
    if (c->n_msgs > (has_system(c) ? 1 : 0))
        return cfail(c, "cannot load a session into a conversation that has turns");
    struct sess_message *msgs;
    int64_t n;
    if (sess_messages(st, sid, &msgs, &n))
        return cfail(c, "%s", sess_errmsg(st));
    for (int64_t i = 0; i < c->n_msgs; i++)
        msg_free(&c->msgs[i]);
    c->n_msgs = 0;
    truncate_to(c, 0);
    int rc = SESS_OK;
    bool all_tokens = true;
    for (int64_t i = 0; i < n; i++)
        all_tokens &= msgs[i].tokens != NULL || msgs[i].n_tokens == 0;
    for (int64_t i = 0; i < n && rc == SESS_OK; i++) {
        rc = push_msg(c, msgs[i].role, msgs[i].text, strlen(msgs[i].text), msgs[i].tokens,
                      all_tokens ? msgs[i].n_tokens : 0, c->n_tokens);
        if (rc == SESS_OK && all_tokens)
            rc = add_tokens(c, msgs[i].tokens, msgs[i].n_tokens);
    }
    sess_messages_free(msgs, n);
    if (rc == SESS_OK && !all_tokens) /* recorded without ids: render them again */
        rc = retokenize_from(c, 0);
    free(c->system);
    c->system = has_system(c) ? strdup(c->msgs[0].text) : NULL;
    c->p.system = c->system;
    if (rc == SESS_OK && c->p.no_cache) { /* recompute it all, at the first turn */
        if (llm_ctx_truncate(c->ctx, 0) != LLM_OK)
            rc = cfail(c, "%s", llm_ctx_errmsg(c->ctx));
        c->n_kv = 0;
    } else if (rc == SESS_OK) {
        rc = restore_all(c, rs);
    }
    void *state;
    size_t sn;
    if (rc == SESS_OK && sess_load_state(st, sid, &state, &sn) == 0 && state) {
        if (llm_sampler_state_load(c->smp, state, sn) != 0)
            snprintf(rs->first_problem[0] ? rs->first_problem + strlen(rs->first_problem) : rs->first_problem,
                     sizeof rs->first_problem - strlen(rs->first_problem), "%s",
                     rs->first_problem[0] ? "" : "the saved sampler state does not fit the sampler");
        free(state);
    }
    return rc;
}
