/*
 * conv.c - a conversation over a live KV cache: messages rendered with the
 * chat template, answers generated and streamed, and, before each answer,
 * the KV cache extended from the store's blocks (blocks.c) so that only what
 * no command ever computed is prefilled; after it, the new blocks stored
 * and (attached to a session) the exchange saved.
 *
 * Invariants:
 *   - tokens[0..n_tokens) is the conversation; the context holds the KV of
 *     tokens[0..n_kv), n_kv <= n_tokens, n_kv == llm_ctx_n_past(ctx): when
 *     the conversation changes, the cache keeps the prefix it shares with
 *     the new tokens (and the store fills in what it has);
 *   - msgs[i].tokens are the ids message i put in the cache: the first
 *     message's include BOS; a user message's include the previous answer's
 *     terminator, its own turn and the assistant's opening; an answer's are
 *     the generated ids (without the end-of-generation token, which the next
 *     user span's terminator text brings);
 *   - an answer carries the sampler's state after it; the live sampler is
 *     the state after the last answer (or fresh from the seed), so undo
 *     gives back the state of the turn before;
 *   - attached, the store holds exactly msgs[] after every call, each
 *     change in one transaction; block files come after (best effort);
 *   - template text is tokenized with special tokens parsed; a user's text
 *     only with --special (found by rendering a sentinel in its place).
 *
 * The engine is a local context or a remote one (a server, reached through
 * the sess_remote callback the caller gives). A remote conversation is the
 * same message list with the same persistence, undo, retry and fork; only
 * the token and KV half is absent (n_tokens = n_kv = 0, no sampler, no
 * blocks), so it is a flag on this one struct with a branch in the few
 * calls that compute, rather than a second conversation type that would
 * repeat the message and session logic. sessions/ stays free of network
 * code: the callback is cli/'s, over models/'s client. Its messages are
 * saved with no token ids (n_tokens 0 for a non-empty text, which a local
 * model loading the session takes as "not recorded" and tokenizes), under
 * the model row of its store entry (fingerprint: SHA-256 of
 * "kvchat remote model\n" and the entry's path).
 */
#include "core/llm.h"
#include "sessions/sess-int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct conv_msg {
    enum sess_role role;
    char *text;
    int32_t *tokens;
    int64_t n_tokens;
    int64_t start;      /* KV position of its first token */
    void *state;        /* an answer's sampler state after it, or NULL */
    size_t state_bytes;
    char stop[16];      /* an answer's stop reason ("" if not recorded) */
};

/* an answers' format as text: kind "json", "schema" or "grammar" (NULL:
 * none) and the schema's or GBNF's source (NULL for json); owned */
struct conv_format {
    char *kind, *source;
};

/* the values of the parameters a session keeps (enum sess_param) */
struct conv_vals {
    struct llm_sampler_params s;
    int32_t n_predict;
    bool think_off;
};

struct sess_conv {
    /* the engine */
    const struct llm_model *m;
    const struct llm_vocab *v;
    struct llm_ctx *ctx;    /* owned */
    struct sess_kv *kv;     /* its blocks in the store */
    struct sess_conv_params p;
    char *system;
    char *model_path;
    const char *no_think; /* what opens an answer with thinking off (static), NULL when the
                             model's template cannot switch thinking off */
    const char *think_on; /* what opens an answer with thinking on (Qwen3.5's "<think>\n"), or NULL */
    struct llm_sampler *smp;
    struct llm_matcher *gm; /* the format's matcher (NULL: answers are free) */
    struct llm_grammar *g;  /* the format compiled (owned; NULL: none) */
    uint32_t *gmask;        /* (n_vocab / 32 rounded up) its mask */
    struct conv_msg *msgs;
    int64_t n_msgs;
    size_t cap_msgs;
    int32_t *tokens; /* n_ctx */
    int64_t n_tokens, n_kv, n_ctx;
    struct sess_store *st; /* borrowed; NULL: nothing on disk */
    /* attached to a session */
    int64_t sid;
    char *name;
    struct sess_lock *lock;
    int64_t sess_model;      /* the models row the session keeps while this model is its
                                own (the same bytes at another path); -1: this model's */
    /* the parameters: base is the conversation's own (from init and
     * sess_conv_set_sampling); kept (bits 1 << SESS_PARAM_X, values in
     * vkept) is what the session keeps; p.sampling, p.n_predict and
     * p.think_off are base with the kept ones over it, except those in
     * p.given */
    struct conv_vals base, vkept;
    uint32_t kept;
    /* the answers' format likewise: base, kept (SESS_PARAM_FORMAT), and
     * the one compiled into g (p.format_kind and p.format_source point at
     * its text) */
    struct conv_format fbase, fkept, fcur;
    /* a remote engine (p.remote): no ctx, kv, smp, tokens */
    bool remote;
    bool draft_rows;         /* the context keeps the rows of logits a drafting pass needs */
    bool retokenized;        /* the session's messages got their ids here (or lost them, for
                                a remote model taking over): save them all */
    uint8_t remote_fp[32];
    int64_t remote_model_id; /* its models row (-1: no store) */
    char err[1024];
    /* what a long restore or prefill has done (sess_conv_progress) */
    _Atomic int prog_kind;
    _Atomic int64_t prog_from, prog_to;
    /* a hybrid model's snapshots: positions besides the ladder where the
     * prefill under way keeps one, and a problem met going back to one
     * (said with the next turn) */
    int64_t snap_at[4];
    int n_snap_at;
    char snap_problem[512];
    size_t token_max_bytes; /* the longest token's text (sess_conv_fits; 0: not yet known) */
};

static int cfail(struct sess_conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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

static bool attached(const struct sess_conv *c) { return c->sid >= 0; }

/* the sampler's state into m (an answer) */
static int keep_state(struct sess_conv *c, struct conv_msg *m)
{
    int64_t need = llm_sampler_state_save(c->smp, NULL, 0);
    size_t size = (size_t)(need < 0 ? -need : need);
    void *buf = malloc(size ? size : 1);
    if (!buf)
        return cfail(c, "out of memory");
    int64_t got = llm_sampler_state_save(c->smp, buf, size);
    if (got < 0) {
        free(buf);
        return cfail(c, "cannot save the sampler state");
    }
    free(m->state);
    m->state = buf;
    m->state_bytes = (size_t)got;
    return SESS_OK;
}

/* the live sampler made for p.sampling, fresh from its seed */
static void sampler_fresh(struct sess_conv *c)
{
    if (c->remote) /* the server samples */
        return;
    struct llm_sampler *s = llm_sampler_init(c->p.sampling, llm_model_n_vocab(c->m));
    if (s) {
        llm_sampler_free(c->smp);
        c->smp = s;
    }
}

/* the live sampler back to its state after the last answer (or fresh) */
static void sampler_rewind(struct sess_conv *c)
{
    if (c->remote)
        return;
    for (int64_t i = c->n_msgs - 1; i >= 0; i--)
        if (c->msgs[i].role == SESS_ROLE_ASSISTANT && c->msgs[i].state &&
            llm_sampler_state_load(c->smp, c->msgs[i].state, c->msgs[i].state_bytes) == 0)
            return;
    sampler_fresh(c);
}

/* ==== messages ==== */

static void msg_free(struct conv_msg *m)
{
    BASE_FREE(m->text, m->tokens, m->state);
    memset(m, 0, sizeof *m);
}

static int push_msg(struct sess_conv *c, enum sess_role role, const char *text, size_t len,
                    const int32_t *toks, int64_t n, int64_t start)
{
    if (base_grow((void **)&c->msgs, &c->cap_msgs, (size_t)c->n_msgs + 1, sizeof *c->msgs))
        return cfail(c, "out of memory");
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
    m->state = NULL;
    m->state_bytes = 0;
    m->stop[0] = 0;
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

/* ==== progress, for another thread's progress line ==== */

static void progress_begin(struct sess_conv *c, enum sess_progress_kind kind, int64_t to)
{
    atomic_store(&c->prog_from, llm_ctx_progress(c->ctx));
    atomic_store(&c->prog_to, to);
    atomic_store(&c->prog_kind, (int)kind);
}

static void progress_end(struct sess_conv *c) { atomic_store(&c->prog_kind, (int)SESS_PROGRESS_NONE); }

enum sess_progress_kind sess_conv_progress(const struct sess_conv *c, int64_t *done, int64_t *total)
{
    struct sess_conv *w = (struct sess_conv *)c;
    int kind = atomic_load(&w->prog_kind);
    int64_t from = atomic_load(&w->prog_from), to = atomic_load(&w->prog_to);
    int64_t at = llm_ctx_progress(c->ctx);
    *total = to > from ? to - from : 0;
    *done = at < from ? 0 : at > to ? *total : at - from;
    return (enum sess_progress_kind)kind;
}

/* ==== the KV cache ==== */

/* Snapshot placement, for a model with recurrent layers (its KV blocks
 * cannot resume it alone; docs/snapshots.md): the state is kept at every
 * multiple of SESS_SNAP_INTERVAL positions (the ladder), at the end of the
 * system prompt, one token before the end of each prompt (where a retry
 * resumes: the last token is computed again for its logits), at the end of
 * each answer (every save keeps the state at its end), and where the
 * stored K/V of another conversation stopped matching this one (a prefix
 * two chats share). A resume therefore computes its new tokens and at most
 * SESS_SNAP_INTERVAL - 1 more. Not with --no-cache (nothing is stored). */
static bool recurrent(const struct sess_conv *c) { return !c->remote && c->kv && sess_kv_recurrent(c->kv); }
static bool snapping(const struct sess_conv *c) { return recurrent(c) && c->st && !c->p.no_cache; }

/* the next position after p where the prefill keeps a snapshot (INT64_MAX: none) */
static int64_t snap_point_after(const struct sess_conv *c, int64_t p)
{
    if (!snapping(c))
        return INT64_MAX;
    int64_t next = (p / SESS_SNAP_INTERVAL + 1) * SESS_SNAP_INTERVAL;
    for (int i = 0; i < c->n_snap_at; i++)
        if (c->snap_at[i] > p && c->snap_at[i] < next)
            next = c->snap_at[i];
    return next;
}

static bool is_snap_point(const struct sess_conv *c, int64_t p)
{
    if (!snapping(c) || p <= 0)
        return false;
    if (p % SESS_SNAP_INTERVAL == 0)
        return true;
    for (int i = 0; i < c->n_snap_at; i++)
        if (c->snap_at[i] == p)
            return true;
    return false;
}

/* keep the state at n_kv (best effort: a snapshot is only a cache) */
static void snap_take(struct sess_conv *c)
{
    if (snapping(c) && c->n_kv == llm_ctx_n_past(c->ctx))
        sess_kv_snap_take(c->kv, c->tokens);
}

static int add_tokens(struct sess_conv *c, const int32_t *toks, int64_t n)
{
    if (c->n_tokens + n > c->n_ctx)
        return cfail(c, "context full");
    if (n)
        memcpy(c->tokens + c->n_tokens, toks, (size_t)n * sizeof *toks);
    c->n_tokens += n;
    return SESS_OK;
}

/* compute what the cache lacks; *n_done gets how many tokens that was;
 * a hybrid model's state at position cap (n_kv < cap <= n_tokens; 0:
 * none) is kept on the way, taken inside the pass (a pass of its own
 * would read all the weights once more) */
static int sync_kv_at(struct sess_conv *c, int64_t *n_done, int64_t cap)
{
    int64_t n = c->n_tokens - c->n_kv;
    if (n_done)
        *n_done = n;
    if (n <= 0)
        return SESS_OK;
    uint8_t *buf = cap > c->n_kv && cap <= c->n_tokens ? sess_kv_snap_buffer(c->kv) : NULL;
    int rc = buf ? llm_ctx_decode_capture(c->ctx, c->tokens + c->n_kv, n, cap - c->n_kv, buf,
                                          llm_ctx_rstate_size(c->ctx))
                 : llm_ctx_decode(c->ctx, c->tokens + c->n_kv, n);
    if (buf) /* best effort: a snapshot is only a cache */
        sess_kv_snap_give(c->kv, c->tokens, rc == LLM_OK ? cap : 0, buf);
    if (rc == LLM_ERR_CTX_FULL)
        return cfail(c, "context full");
    if (rc == LLM_ERR_INTERRUPTED)
        return SESS_ERR_INTERRUPTED;
    if (rc != LLM_OK)
        return cfail(c, "%s", llm_ctx_errmsg(c->ctx));
    c->n_kv = c->n_tokens;
    return SESS_OK;
}

static int sync_kv(struct sess_conv *c, int64_t *n_done) { return sync_kv_at(c, n_done, 0); }

/* sync_kv in passes, so a long prompt can be interrupted between them
 * and, by the engine, within one (its flag is the interrupt while this
 * runs: stopped work is discarded, the numbers of what completes never
 * change) */
#define PREFILL_PASS 256
static int sync_kv_passes(struct sess_conv *c, int64_t *n_done, volatile sig_atomic_t *interrupt);
static int sync_kv_interruptible(struct sess_conv *c, int64_t *n_done, volatile sig_atomic_t *interrupt)
{
    llm_ctx_set_interrupt(c->ctx, interrupt);
    progress_begin(c, SESS_PROGRESS_PREFILL, c->n_tokens);
    int rc = sync_kv_passes(c, n_done, interrupt);
    llm_ctx_set_interrupt(c->ctx, NULL);
    progress_end(c);
    return rc;
}

static int sync_kv_passes(struct sess_conv *c, int64_t *n_done, volatile sig_atomic_t *interrupt)
{
    int64_t done = 0;
    *n_done = 0;
    while (c->n_kv < c->n_tokens) {
        int64_t end = c->n_tokens, n = end - c->n_kv, snap = snap_point_after(c, c->n_kv), cap = 0;
        if (n > PREFILL_PASS && interrupt)
            c->n_tokens = c->n_kv + PREFILL_PASS; /* one pass; the rest stays in tokens[] */
        /* a hybrid model's state is kept at snap: taken inside the pass when
         * no other point lies in it, else the pass ends there */
        if (snap < c->n_tokens && snap_point_after(c, snap) >= c->n_tokens)
            cap = snap;
        else if (snap < c->n_tokens)
            c->n_tokens = snap;
        int64_t k;
        int rc = sync_kv_at(c, &k, cap);
        c->n_tokens = end;
        if (rc)
            return rc;
        if (is_snap_point(c, c->n_kv))
            snap_take(c);
        done += k;
        *n_done = done;
        if (interrupt && *interrupt && c->n_kv < c->n_tokens)
            return SESS_ERR_INTERRUPTED;
    }
    return SESS_OK;
}

/* the cache cut to at most n positions: a hybrid model's to a snapshot at
 * or before n (the rest is computed when next needed) */
static int cut_cache(struct sess_conv *c, int64_t n)
{
    if (!recurrent(c)) {
        if (llm_ctx_truncate(c->ctx, n) != LLM_OK)
            return cfail(c, "%s", llm_ctx_errmsg(c->ctx));
        c->n_kv = n;
        return SESS_OK;
    }
    struct sess_kv_restore r;
    memset(&r, 0, sizeof r);
    int rc = sess_kv_rewind(c->kv, c->tokens, n, c->st && !c->p.no_cache, &r);
    c->n_kv = llm_ctx_n_past(c->ctx);
    if (r.first_problem[0] && !c->snap_problem[0])
        snprintf(c->snap_problem, sizeof c->snap_problem, "%s", r.first_problem);
    if (rc)
        return cfail(c, "%s", c->st ? sess_errmsg(c->st) : "cannot go back in the recurrent state");
    return SESS_OK;
}

static int truncate_to(struct sess_conv *c, int64_t n)
{
    if (n < c->n_kv && cut_cache(c, n))
        return SESS_ERR;
    if (n < c->n_tokens)
        c->n_tokens = n;
    return SESS_OK;
}

/* the cache emptied (the conversation's tokens stay) */
static int drop_cache(struct sess_conv *c)
{
    if (llm_ctx_truncate(c->ctx, 0) != LLM_OK)
        return cfail(c, "%s", llm_ctx_errmsg(c->ctx));
    c->n_kv = 0;
    return SESS_OK;
}

/* The conversation's tokens became new[0..n): the cache keeps the prefix
 * they share with the old ones. */
static int replace_tokens(struct sess_conv *c, const int32_t *new, int64_t n)
{
    int64_t k = 0;
    while (k < n && k < c->n_kv && c->tokens[k] == new[k])
        k++;
    if (truncate_to(c, k))
        return SESS_ERR;
    if (n)
        memcpy(c->tokens, new, (size_t)n * sizeof *new);
    c->n_tokens = n;
    return SESS_OK;
}

/* Extend the cache from the store's blocks up to limit positions. A
 * failure to read the index is not the turn's: it is said in r's
 * first_problem and what the cache lacks is computed; returns whether it
 * was a failure of the database (then the caller reports it). */
static bool restore_blocks(struct sess_conv *c, int64_t limit, struct sess_kv_restore *r)
{
    memset(r, 0, sizeof *r);
    if (!c->st || c->p.no_cache || limit <= c->n_kv)
        return false;
    bool failed = false;
    progress_begin(c, SESS_PROGRESS_RESTORE, limit);
    if (sess_kv_restore(c->kv, c->tokens, limit, r)) {
        snprintf(r->first_problem, sizeof r->first_problem, "cannot read the KV cache's index: %.450s",
                 sess_errmsg(c->st));
        failed = !sess_store_full(c->st);
    }
    progress_end(c);
    c->n_kv = llm_ctx_n_past(c->ctx);
    return failed;
}

/* logits for the next position after a truncation: compute the last token
 * again (a hybrid model's, from the snapshot before it); *n_done: tokens
 * computed */
static int refresh_logits(struct sess_conv *c, int64_t *n_done)
{
    if (c->n_tokens == 0)
        return cfail(c, "nothing to continue from");
    if (c->n_kv == c->n_tokens && truncate_to(c, c->n_tokens - 1) == SESS_OK)
        c->n_tokens++; /* the token is still in tokens[]: recompute it */
    return sync_kv(c, n_done);
}

/* ==== persistence ==== */

static bool has_system(const struct sess_conv *c)
{
    return c->n_msgs > 0 && c->msgs[0].role == SESS_ROLE_SYSTEM;
}

const char *sess_param_key(enum sess_param k)
{
    static const char *const keys[SESS_PARAM_COUNT] = {"temp", "top_k", "top_p", "min_p", "repeat_penalty",
                                                        "presence_penalty", "repeat_last_n", "seed", "n_predict",
                                                        "think", "format"};
    return (unsigned)k < SESS_PARAM_COUNT ? keys[k] : "?";
}

/* parameter k of v as a number (think: 1 on, 0 off) */
static double param_get(const struct conv_vals *v, enum sess_param k)
{
    const struct llm_sampler_params *s = &v->s;
    switch (k) {
    case SESS_PARAM_TEMP: return s->temp;
    case SESS_PARAM_TOP_K: return s->top_k;
    case SESS_PARAM_TOP_P: return s->top_p;
    case SESS_PARAM_MIN_P: return s->min_p;
    case SESS_PARAM_REPEAT_PENALTY: return s->repeat_penalty;
    case SESS_PARAM_PRESENCE_PENALTY: return s->presence_penalty;
    case SESS_PARAM_REPEAT_LAST_N: return s->penalty_last_n;
    case SESS_PARAM_SEED: return (double)s->seed;
    case SESS_PARAM_N_PREDICT: return v->n_predict;
    case SESS_PARAM_THINK: return v->think_off ? 0 : 1;
    case SESS_PARAM_FORMAT: /* text: conv_format */
    case SESS_PARAM_COUNT: break;
    }
    return 0;
}

/* copy parameter k from `from` to `to` */
static void param_copy(struct conv_vals *to, const struct conv_vals *from, enum sess_param k)
{
    switch (k) {
    case SESS_PARAM_TEMP: to->s.temp = from->s.temp; break;
    case SESS_PARAM_TOP_K: to->s.top_k = from->s.top_k; break;
    case SESS_PARAM_TOP_P: to->s.top_p = from->s.top_p; break;
    case SESS_PARAM_MIN_P: to->s.min_p = from->s.min_p; break;
    case SESS_PARAM_REPEAT_PENALTY: to->s.repeat_penalty = from->s.repeat_penalty; break;
    case SESS_PARAM_PRESENCE_PENALTY: to->s.presence_penalty = from->s.presence_penalty; break;
    case SESS_PARAM_REPEAT_LAST_N: to->s.penalty_last_n = from->s.penalty_last_n; break;
    case SESS_PARAM_SEED: to->s.seed = from->s.seed; break;
    case SESS_PARAM_N_PREDICT: to->n_predict = from->n_predict; break;
    case SESS_PARAM_THINK: to->think_off = from->think_off; break;
    case SESS_PARAM_FORMAT: /* text: conv_format */
    case SESS_PARAM_COUNT: break;
    }
}

/* the models row the session records: its own while this model is the
 * same bytes (a session is never re-pointed to another path of them) */
static int64_t model_id(struct sess_conv *c)
{
    if (c->sid >= 0 && c->sess_model >= 0)
        return c->sess_model;
    if (c->remote && c->remote_model_id < 0 && c->st && !sess_store_read_only(c->st) &&
        sess_model_id(c->st, c->remote_fp, c->model_path, &c->remote_model_id))
        c->remote_model_id = -1; /* not known to a private store: added once it is writable */
    return c->remote ? c->remote_model_id : sess_kv_model_id(c->kv);
}

/* a model path as the user named it: NAME for the store's
 * $KVCHAT_HOME/models/NAME.gguf (or .remote), else the path */
static const char *shown_model(const struct sess_conv *c, const char *path, char *buf, size_t n)
{
    if (!path || !path[0])
        return "?";
    const char *home = c->st ? sess_store_home(c->st) : NULL;
    size_t hl = home ? strlen(home) : 0, pl = strlen(path);
    if (!home || pl <= hl + 8 || strncmp(path, home, hl) || strncmp(path + hl, "/models/", 8))
        return path;
    const char *name = path + hl + 8;
    size_t nl = pl - hl - 8;
    static const char *const suffixes[] = {".gguf", ".remote"};
    for (int i = 0; i < 2; i++) {
        size_t sl = strlen(suffixes[i]);
        if (nl > sl && !strcmp(name + nl - sl, suffixes[i]) && !memchr(name, '/', nl) && nl - sl < n) {
            snprintf(buf, n, "%.*s", (int)(nl - sl), name);
            return buf;
        }
    }
    return path;
}

/* the model's fingerprint, to compare with a session's */
static const uint8_t *fingerprint(const struct sess_conv *c)
{
    return c->remote ? c->remote_fp : sess_kv_fingerprint(c->kv);
}

/* s[0..n) as a JSON string's contents at out (room for 6 n bytes):
 * UTF-8 as it is, the rest escaped; the end of what was written */
static char *json_escape(char *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *out++ = '\\';
            *out++ = (char)ch;
        } else if (ch == '\n') {
            *out++ = '\\';
            *out++ = 'n';
        } else if (ch < 0x20 || ch == 0x7f) {
            memcpy(out, "\\u00", 4);
            out[4] = hex[ch >> 4];
            out[5] = hex[ch & 15];
            out += 6;
        } else {
            *out++ = (char)ch;
        }
    }
    return out;
}

/* The parameters the session keeps, as JSON: only those in c->kept
 * (malloc'd; NULL: out of memory). A format is a string: "format": "json"
 * or "off", or the schema's or grammar's text, escaped. */
static char *params_json(const struct sess_conv *c)
{
    const struct conv_format *f = &c->fkept;
    size_t n = 1024 + (f->source ? 6 * strlen(f->source) : 0), len = 0;
    char *buf = malloc(n);
    if (!buf)
        return NULL;
    for (int k = 0; k < SESS_PARAM_FORMAT; k++) {
        if (!(c->kept & (1u << k)))
            continue;
        int w = k == SESS_PARAM_SEED
                    ? snprintf(buf + len, n - len, "%s\"%s\": %llu", len ? ", " : "{", sess_param_key(k),
                               (unsigned long long)c->vkept.s.seed)
                    : snprintf(buf + len, n - len, "%s\"%s\": %.9g", len ? ", " : "{", sess_param_key(k),
                               param_get(&c->vkept, k));
        if (w > 0 && (size_t)w < n - len)
            len += (size_t)w;
    }
    if (c->kept & (1u << SESS_PARAM_FORMAT)) {
        const char *key = !f->kind || !strcmp(f->kind, "json") ? "format" : f->kind;
        len += (size_t)snprintf(buf + len, n - len, "%s\"%s\": \"", len ? ", " : "{", key);
        if (!f->kind || !f->source)
            len += (size_t)snprintf(buf + len, n - len, "%s", f->kind ? f->kind : "off");
        else
            len = (size_t)(json_escape(buf + len, f->source, strlen(f->source)) - buf);
        buf[len++] = '"';
    }
    snprintf(buf + len, n - len, "%s", len ? "}" : "{}");
    return buf;
}

/* the JSON string at s (after its opening quote) unescaped, malloc'd
 * (NULL: malformed, or out of memory) */
static char *json_unescape(const char *s)
{
    size_t n = 0;
    while (s[n] && s[n] != '"')
        n += s[n] == '\\' && s[n + 1] ? 2 : 1;
    if (s[n] != '"')
        return NULL;
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    size_t i;
    for (i = 0; i < n; i++) {
        if (s[i] != '\\') {
            *o++ = s[i];
            continue;
        }
        char e = s[++i];
        if (e == 'u') { /* \uXXXX (a surrogate pair: one character) */
            unsigned cp = 0, lo = 0;
            if (i + 4 >= n || sscanf(s + i + 1, "%4x", &cp) != 1)
                break;
            i += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < n && s[i + 1] == '\\' && s[i + 2] == 'u' &&
                sscanf(s + i + 3, "%4x", &lo) == 1 && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            if (cp == 0 || (cp >= 0xd800 && cp < 0xe000))
                break; /* a NUL or a lone surrogate: not a source text */
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xc0 | cp >> 6);
                *o++ = (char)(0x80 | (cp & 63));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xe0 | cp >> 12);
                *o++ = (char)(0x80 | (cp >> 6 & 63));
                *o++ = (char)(0x80 | (cp & 63));
            } else {
                *o++ = (char)(0xf0 | cp >> 18);
                *o++ = (char)(0x80 | (cp >> 12 & 63));
                *o++ = (char)(0x80 | (cp >> 6 & 63));
                *o++ = (char)(0x80 | (cp & 63));
            }
            continue;
        }
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *at = e ? strchr(from, e) : NULL;
        if (!at)
            break;
        *o++ = to[at - from];
    }
    if (i < n) { /* malformed */
        free(out);
        return NULL;
    }
    *o = 0;
    return out;
}

/* a session's format (what params_json writes) into f: true if it keeps
 * one ("off" included) */
static bool format_parse(const char *json, struct conv_format *f)
{
    static const char *const keys[] = {"\"format\"", "\"schema\"", "\"grammar\""};
    for (int i = 0; i < 3; i++) {
        const char *at = strstr(json, keys[i]);
        if (!at)
            continue;
        at += strlen(keys[i]);
        while (*at == ' ')
            at++;
        if (*at++ != ':')
            continue;
        while (*at == ' ')
            at++;
        if (*at++ != '"')
            continue;
        char *text = json_unescape(at);
        if (!text)
            continue;
        if (i == 0 && strcmp(text, "json")) { /* "off" (or a value of a later release: none) */
            free(text);
            return true;
        }
        f->kind = strdup(i == 0 ? "json" : i == 1 ? "schema" : "grammar");
        f->source = i == 0 ? (free(text), NULL) : text;
        if (!f->kind) {
            free(f->source);
            f->source = NULL;
        }
        return true;
    }
    return false;
}

/* Parse a session's parameters (a flat JSON object of numbers and the
 * format's string, as params_json writes and earlier releases wrote) into
 * v and f: the bits of the keys found. Unknown keys and malformed values
 * are skipped. */
static uint32_t params_parse(const char *json, struct conv_vals *v, struct conv_format *f)
{
    uint32_t found = 0;
    if (!json)
        return 0;
    if (format_parse(json, f))
        found |= 1u << SESS_PARAM_FORMAT;
    for (int k = 0; k < SESS_PARAM_FORMAT; k++) {
        char key[40];
        snprintf(key, sizeof key, "\"%s\"", sess_param_key(k));
        const char *at = strstr(json, key);
        if (!at)
            continue;
        at += strlen(key);
        while (*at == ' ')
            at++;
        if (*at++ != ':')
            continue;
        char *end;
        errno = 0;
        if (k == SESS_PARAM_SEED) {
            while (*at == ' ')
                at++;
            unsigned long long u = *at == '-' ? 0 : strtoull(at, &end, 10);
            if (*at == '-' || errno || end == at)
                continue;
            v->s.seed = u;
        } else {
            double x = strtod(at, &end);
            if (errno || end == at || !isfinite(x) || x < -1e9 || x > 1e9)
                continue;
            switch (k) {
            case SESS_PARAM_TEMP: v->s.temp = (float)x; break;
            case SESS_PARAM_TOP_K: v->s.top_k = (int32_t)x; break;
            case SESS_PARAM_TOP_P: v->s.top_p = (float)x; break;
            case SESS_PARAM_MIN_P: v->s.min_p = (float)x; break;
            case SESS_PARAM_REPEAT_PENALTY: v->s.repeat_penalty = (float)x; break;
            case SESS_PARAM_PRESENCE_PENALTY: v->s.presence_penalty = (float)x; break;
            case SESS_PARAM_REPEAT_LAST_N: v->s.penalty_last_n = (int32_t)x; break;
            case SESS_PARAM_N_PREDICT: v->n_predict = (int32_t)x; break;
            case SESS_PARAM_THINK: v->think_off = x == 0; break;
            }
        }
        found |= 1u << k;
    }
    return found;
}

/* p.sampling and n_predict made again: base, with the kept ones over it
 * except those the user gave */
static void params_effective(struct sess_conv *c)
{
    struct conv_vals e = c->base;
    for (int k = 0; k < SESS_PARAM_COUNT; k++)
        if ((c->kept & (1u << k)) && !(c->p.given & (1u << k)))
            param_copy(&e, &c->vkept, (enum sess_param)k);
    c->p.sampling = e.s;
    c->p.n_predict = e.n_predict;
    c->p.think_off = e.think_off;
}

/* ==== the answers' format ==== */

static void format_free(struct conv_format *f)
{
    free(f->kind);
    free(f->source);
    f->kind = f->source = NULL;
}

/* f becomes a copy of kind and source (kind NULL or "": none): 0, or -1
 * out of memory (f unchanged) */
static int format_set(struct conv_format *f, const char *kind, const char *source)
{
    struct conv_format n = {NULL, NULL};
    bool text = kind && *kind && strcmp(kind, "json") && source;
    if (kind && *kind) {
        n.kind = strdup(kind);
        n.source = text ? strdup(source) : NULL;
        if (!n.kind || (text && !n.source)) {
            format_free(&n);
            return -1;
        }
    }
    format_free(f);
    *f = n;
    return 0;
}

static bool format_same(const struct conv_format *a, const struct conv_format *b)
{
    if (!a->kind || !b->kind)
        return !a->kind == !b->kind;
    return !strcmp(a->kind, b->kind) && !a->source == !b->source && (!a->source || !strcmp(a->source, b->source));
}

/* whether s is UTF-8 text (which a session keeps exactly, as a JSON string) */
static bool utf8_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = *p < 0x80 ? 1 : *p >= 0xc2 && *p < 0xe0 ? 2 : *p >= 0xe0 && *p < 0xf0 ? 3 : *p >= 0xf0 && *p < 0xf5 ? 4 : 0;
        if (!n)
            return false;
        uint32_t cp = n == 1 ? *p : (uint32_t)(*p & (0x7f >> n));
        for (int i = 1; i < n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 63u);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        p += n;
    }
    return true;
}

/* f compiled into *g (NULL for none): SESS_OK, or SESS_ERR with the
 * reason as c's message */
static int format_compile(struct sess_conv *c, const struct conv_format *f, struct llm_grammar **g)
{
    *g = NULL;
    if (!f->kind)
        return SESS_OK;
    char why[512], *gbnf = NULL;
    const char *text = NULL;
    bool schema = !strcmp(f->kind, "schema");
    if (!strcmp(f->kind, "json"))
        text = llm_grammar_json();
    else if ((!schema && strcmp(f->kind, "grammar")) || !f->source)
        return cfail(c, "unknown format '%s'", f->kind);
    else if (!utf8_text(f->source))
        return cfail(c, "the %s is not UTF-8 text", f->kind);
    else if (schema && llm_json_schema_to_grammar(f->source, strlen(f->source), &gbnf, why, sizeof why))
        return cfail(c, "%s", why);
    else
        text = schema ? gbnf : f->source;
    int rc = llm_grammar_parse(text, strlen(text), g, why, sizeof why);
    free(gbnf);
    if (rc) {
        *g = NULL;
        return cfail(c, "%s%s", schema ? "the schema's grammar: " : "", why);
    }
    return SESS_OK;
}

/* the matcher over grammar g (NULL: none; a remote engine has none) */
static int matcher_set(struct sess_conv *c, const struct llm_grammar *g)
{
    if (g && c->gm) { /* the vocabulary's trie is kept */
        llm_matcher_set_grammar(c->gm, g);
        return SESS_OK;
    }
    llm_matcher_free(c->gm);
    free(c->gmask);
    c->gm = NULL;
    c->gmask = NULL;
    if (!g || c->remote)
        return SESS_OK;
    c->gm = llm_matcher_init(g, c->v);
    c->gmask = malloc(((size_t)llm_model_n_vocab(c->m) + 31) / 32 * sizeof *c->gmask);
    if (!c->gm || !c->gmask) {
        llm_matcher_free(c->gm);
        free(c->gmask);
        c->gm = NULL;
        c->gmask = NULL;
        return cfail(c, "out of memory");
    }
    return SESS_OK;
}

/* the format the answers take with these kept ones: the kept format
 * unless the user gave one, else base */
static const struct conv_format *format_wanted(const struct sess_conv *c, uint32_t kept,
                                               const struct conv_format *fkept)
{
    return (kept & (1u << SESS_PARAM_FORMAT)) && !(c->p.given & (1u << SESS_PARAM_FORMAT)) ? fkept : &c->fbase;
}

/* f compiled and made the answers' format: SESS_OK, or SESS_ERR with
 * nothing changed (a remote engine: recorded, and its turns refused) */
static int format_use(struct sess_conv *c, const struct conv_format *f)
{
    if (format_same(&c->fcur, f))
        return SESS_OK;
    struct llm_grammar *g = NULL;
    struct conv_format cur = {NULL, NULL};
    if (!c->remote && format_compile(c, f, &g))
        return SESS_ERR;
    if (format_set(&cur, f->kind, f->source)) {
        llm_grammar_free(g);
        return cfail(c, "out of memory");
    }
    bool failed = matcher_set(c, g) != SESS_OK;
    if (failed) { /* out of memory: no grammar at all (said) */
        llm_grammar_free(g);
        format_free(&cur);
        g = NULL;
    }
    llm_grammar_free(c->g);
    c->g = g;
    format_free(&c->fcur);
    c->fcur = cur;
    c->p.format_kind = c->fcur.kind;
    c->p.format_source = c->fcur.source;
    return failed ? SESS_ERR : SESS_OK;
}

/* the session keeps what the user gave this conversation */
static int keep_given(struct sess_conv *c)
{
    c->kept = c->p.given;
    c->vkept = c->base;
    if (format_set(&c->fkept, c->fbase.kind, c->fbase.source))
        return cfail(c, "out of memory");
    return SESS_OK;
}

/* the parameters the session keeps, saved (when attached) */
static int params_save(struct sess_conv *c)
{
    if (!attached(c) || c->p.no_cache)
        return SESS_OK;
    char *params = params_json(c);
    if (!params)
        return cfail(c, "out of memory");
    int rc = sess_set_params(c->st, c->sid, params);
    free(params);
    if (rc) {
        cfail(c, "cannot save the parameters: %s", sess_errmsg(c->st));
        return SESS_ERR_STORE;
    }
    return SESS_OK;
}

/* what opens the next answer: the no-thinking block when thinking is off
 * and the template can switch it, the opening of the reasoning when thinking
 * is on and the template writes it (Qwen3.5) (NULL: nothing) */
static const char *answer_prefix(const struct sess_conv *c)
{
    return c->p.think_off ? c->no_think : c->think_on;
}

/* Store the blocks of what the cache holds that the store lacks, and (in
 * a session) which blocks cover it. Best effort: a failure goes to
 * problem (if given) and the turn stands. */
static void save_blocks(struct sess_conv *c, struct sess_turn_stats *ts)
{
    if (!c->st || c->p.no_cache || c->n_kv == 0 || c->remote)
        return;
    struct sess_kv_save s;
    const char *why = NULL;
    bool db = false; /* the database failed (else a block file could not be written) */
    struct sess_lock *wl = NULL; /* gc waits until the session's list names the new blocks */
    memset(&s, 0, sizeof s);
    if (sess_writer_lock(c->st, &wl))
        wl = NULL; /* best effort: a store whose locks/ cannot be written still saves */
    if (sess_kv_save(c->kv, c->tokens, c->n_kv, &s))
        why = sess_errmsg(c->st), db = true;
    else if (s.problem[0])
        why = s.problem, db = s.db_failed;
    if (!why && attached(c) && sess_set_blocks(c->st, c->sid, 0, (const uint8_t(*)[32])s.ids, s.n_ids))
        why = sess_errmsg(c->st), db = true;
    sess_unlock(wl);
    if (ts) {
        ts->store_failed |= db && !sess_store_full(c->st);
        ts->blocks_written = s.written;
        ts->kv_bytes_disk = s.bytes;
        if (why && !ts->kv_problem[0])
            snprintf(ts->kv_problem, sizeof ts->kv_problem, "%.470s; the turn is saved without it", why);
    }
    if (c->p.cache_max > 0) {
        int64_t total;
        struct sess_gc_stats gs;
        if (sess_store_bytes(c->st, &total, NULL) == SESS_OK && total > c->p.cache_max)
            sess_evict(c->st, c->p.cache_max, &gs); /* best effort: the cache is only a cache */
    }
}

/*
 * Write messages [from, n_msgs) as the session's from seq `from` on (one
 * transaction), then the blocks of the cache (when it holds the whole
 * conversation). Without a session only the blocks.
 */
static int persist(struct sess_conv *c, int64_t from, struct sess_turn_stats *ts)
{
    /* --no-cache: nothing is written; a session is only read. A private
     * store: nothing is written at all */
    if (c->p.no_cache || sess_store_read_only(c->st))
        return SESS_OK;
    if (attached(c) && c->retokenized) /* the ids made when it was loaded, saved with the turn */
        from = 0;
    if (attached(c)) {
        int64_t n = c->n_msgs - from;
        struct sess_msg_rec *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
        if (!r)
            return cfail(c, "out of memory");
        for (int64_t i = 0; i < n; i++) {
            const struct conv_msg *m = &c->msgs[from + i];
            r[i] = (struct sess_msg_rec){m->role,  m->text,        m->tokens,
                                         m->n_tokens, m->state, m->state_bytes,
                                         m->stop[0] ? m->stop : NULL};
        }
        /* the blocks that covered tokens from the first change on no longer do */
        int64_t changed = from < c->n_msgs ? c->msgs[from].start : c->n_tokens;
        if (c->remote) /* the tokens recorded before it (a session begun with a local model) */
            for (int64_t i = changed = 0; i < from && i < c->n_msgs; i++)
                changed += c->msgs[i].n_tokens;
        char *params = params_json(c);
        if (!params) {
            free(r);
            return cfail(c, "out of memory");
        }
        int64_t first_block = (changed + SESS_BLOCK_TOKENS - 1) / SESS_BLOCK_TOKENS;
        int rc = sess_write_messages(c->st, c->sid, from, r, n, first_block, model_id(c), params);
        /* a full disk: the KV cache gives way to the conversation */
        if (rc && sess_store_full(c->st) && sess_store_make_room(c->st) == SESS_OK) {
            rc = sess_write_messages(c->st, c->sid, from, r, n, first_block, model_id(c), params);
            if (ts && sess_store_notice(c->st)) /* said once, with the turn */
                snprintf(ts->kv_problem, sizeof ts->kv_problem, "%.500s", sess_store_notice(c->st));
        }
        free(r);
        free(params);
        if (rc) {
            cfail(c, "cannot save the conversation: %s", sess_errmsg(c->st));
            return SESS_ERR_STORE;
        }
        c->retokenized = false;
    }
    if (c->n_kv == c->n_tokens)
        save_blocks(c, ts);
    return SESS_OK;
}

/* ==== life cycle ==== */

/* the system message's tokens, and the conversation made of it alone */
static int start_with_system(struct sess_conv *c, const char *system)
{
    free(c->system);
    c->system = system && *system ? strdup(system) : NULL;
    c->p.system = c->system;
    if (system && *system && !c->system)
        return cfail(c, "out of memory");
    if (!c->system)
        return replace_tokens(c, NULL, 0);
    if (c->remote)
        return push_msg(c, SESS_ROLE_SYSTEM, c->system, strlen(c->system), NULL, 0, 0);
    struct llm_chat_msg cm = {"system", c->system};
    int32_t *toks;
    int64_t n;
    int rc = message_tokens(c, &cm, 0, false, 1, false, -1, 0, &toks, &n);
    if (rc == SESS_OK && n > c->n_ctx)
        rc = cfail(c, "the system prompt (%lld tokens) does not fit in the context (%lld)", (long long)n,
                   (long long)c->n_ctx);
    if (rc == SESS_OK)
        rc = push_msg(c, SESS_ROLE_SYSTEM, c->system, strlen(c->system), toks, n, 0);
    if (rc == SESS_OK)
        rc = replace_tokens(c, toks, n);
    free(toks);
    return rc;
}

/* the rest of sess_conv_init for a remote engine */
static int init_remote(struct sess_conv *c, struct sess_conv **out, char *err, size_t err_size)
{
    static const char tag[] = "kvchat remote model\n";
    c->remote = true;
    c->remote_model_id = -1;
    c->model_path = strdup(c->p.model_path ? c->p.model_path : "");
    c->p.model_path = c->model_path;
    const char *system = c->p.system;
    c->p.system = NULL;
    c->p.model = NULL;
    c->p.vocab = NULL;
    c->p.ctx = NULL;
    struct llm_bytes parts[2] = {{tag, sizeof tag - 1}, {c->model_path, c->model_path ? strlen(c->model_path) : 0}};
    if (!c->model_path || llm_sha256_parts(parts, 2, c->remote_fp)) {
        snprintf(err, err_size, "out of memory");
        sess_conv_free(c);
        return SESS_ERR;
    }
    if (c->st && sess_model_id(c->st, c->remote_fp, c->model_path, &c->remote_model_id)) {
        snprintf(err, err_size, "%s", sess_errmsg(c->st));
        sess_conv_free(c);
        return SESS_ERR;
    }
    if (start_with_system(c, system)) {
        snprintf(err, err_size, "%s", c->err);
        sess_conv_free(c);
        return SESS_ERR;
    }
    *out = c;
    return SESS_OK;
}

int sess_conv_init(struct sess_store *st, struct sess_conv_params p, struct sess_conv **out, char *err,
                   size_t err_size)
{
    *out = NULL;
    struct sess_conv *c = calloc(1, sizeof *c);
    if (!c) {
        llm_ctx_free(p.ctx);
        snprintf(err, err_size, "out of memory");
        return SESS_ERR;
    }
    c->ctx = p.ctx;
    c->m = p.model;
    c->v = p.vocab;
    c->p = p;
    c->st = st;
    c->sid = -1;
    c->sess_model = -1;
    c->base.s = p.sampling;
    c->base.n_predict = p.n_predict;
    c->base.think_off = p.think_off;
    c->p.format_kind = c->p.format_source = NULL; /* fcur's, once it is compiled */
    if (format_set(&c->fbase, p.format_kind, p.format_source) || keep_given(c)) {
        snprintf(err, err_size, "out of memory");
        sess_conv_free(c);
        return SESS_ERR;
    }
    if (p.remote.answer)
        return init_remote(c, out, err, err_size);
    if (!c->ctx || !c->m || !c->v || llm_ctx_n_past(c->ctx) != 0) {
        snprintf(err, err_size, "a conversation needs a model, its vocabulary and an empty context");
        sess_conv_free(c);
        return SESS_ERR;
    }
    c->n_ctx = llm_ctx_n_ctx(c->ctx);
    c->tokens = malloc((size_t)c->n_ctx * sizeof *c->tokens);
    c->smp = llm_sampler_init(p.sampling, llm_model_n_vocab(c->m));
    c->model_path = strdup(p.model_path ? p.model_path : "");
    c->p.model_path = c->model_path;
    c->p.system = NULL;
    struct llm_str jinja;
    if (llm_gguf_find_str(llm_model_gguf(c->m), "tokenizer.chat_template", &jinja) == 0) {
        c->no_think = llm_template_think_off(p.tmpl, jinja.ptr, (size_t)jinja.len);
        c->think_on = llm_template_think_on(p.tmpl, jinja.ptr, (size_t)jinja.len);
    }
    if (!c->tokens || !c->smp || !c->model_path) {
        sess_conv_free(c);
        snprintf(err, err_size, "out of memory");
        return SESS_ERR;
    }
    if (format_use(c, &c->fbase)) {
        snprintf(err, err_size, "%s", c->err);
        sess_conv_free(c);
        return SESS_ERR;
    }
    /* the model's fingerprint is computed only with a store */
    int rc = sess_kv_init(st, c->m, c->ctx, c->model_path, &c->kv, err, err_size);
    if (rc) {
        sess_conv_free(c);
        return rc;
    }
    if (start_with_system(c, p.system) || sess_conv_set_draft(c, p.draft, p.draft_max)) {
        snprintf(err, err_size, "%s", c->err);
        sess_conv_free(c);
        return SESS_ERR;
    }
    *out = c;
    return SESS_OK;
}

static void drop_all_messages(struct sess_conv *c)
{
    for (int64_t i = 0; i < c->n_msgs; i++)
        msg_free(&c->msgs[i]);
    c->n_msgs = 0;
}

static void leave_session(struct sess_conv *c)
{
    sess_unlock(c->lock);
    c->lock = NULL;
    c->sid = -1;
    c->sess_model = -1;
    free(c->name);
    c->name = NULL;
}

void sess_conv_free(struct sess_conv *c)
{
    if (!c)
        return;
    drop_all_messages(c);
    free(c->msgs);
    free(c->tokens);
    llm_sampler_free(c->smp);
    llm_matcher_free(c->gm);
    free(c->gmask);
    llm_grammar_free(c->g);
    format_free(&c->fbase);
    format_free(&c->fkept);
    format_free(&c->fcur);
    free(c->system);
    free(c->model_path);
    leave_session(c);
    if (c->kv)
        sess_kv_free(c->kv);
    if (c->ctx)
        llm_ctx_free(c->ctx);
    free(c);
}

const struct llm_ctx *sess_conv_ctx(const struct sess_conv *c) { return c->ctx; }
bool sess_conv_is_remote(const struct sess_conv *c) { return c->remote; }
int64_t sess_conv_session(const struct sess_conv *c) { return c->sid; }
const char *sess_conv_session_name(const struct sess_conv *c) { return c->name; }
int64_t sess_conv_n_messages(const struct sess_conv *c) { return c->n_msgs; }
int64_t sess_conv_n_tokens(const struct sess_conv *c) { return c->n_tokens; }
const int32_t *sess_conv_tokens(const struct sess_conv *c) { return c->tokens; }
struct sess_conv_params sess_conv_get_params(const struct sess_conv *c)
{
    struct sess_conv_params p = c->p;
    p.given |= c->kept; /* set: by the user or kept by the session */
    return p;
}

enum sess_role sess_conv_message(const struct sess_conv *c, int64_t i, const char **text)
{
    *text = i >= 0 && i < c->n_msgs ? c->msgs[i].text : NULL;
    return *text ? c->msgs[i].role : SESS_ROLE_COUNT;
}

int sess_conv_fits(struct sess_conv *c, const char *text, size_t len, bool special, int64_t room,
                   int64_t *n_tokens, bool *plainly)
{
    int64_t ignored;
    if (plainly)
        *plainly = false;
    bool bytes_only = !n_tokens;
    n_tokens = n_tokens ? n_tokens : &ignored;
    *n_tokens = -1;
    if (c->remote)
        return SESS_OK;
    if (room < 0)
        room = c->n_ctx - c->n_tokens;
    if (bytes_only && (int64_t)len <= room) /* (a token is at least a byte: no scan of the vocabulary) */
        return SESS_OK;
    if (!c->token_max_bytes) { /* a token's stored text is at least as long as the bytes it stands for */
        c->token_max_bytes = 1;
        for (int32_t i = 0; i < llm_vocab_n_tokens(c->v); i++) {
            size_t n = 0;
            if (llm_token_text(c->v, i, &n) && n > c->token_max_bytes)
                c->token_max_bytes = n;
        }
    }
    /* plainly too large: megabytes are not tokenized to say so */
    int64_t at_least = (int64_t)((len + c->token_max_bytes - 1) / c->token_max_bytes);
    if (at_least > room) {
        *n_tokens = at_least;
        if (plainly)
            *plainly = true;
        return SESS_ERR_CTX_FULL;
    }
    if (bytes_only)
        return SESS_OK;
    int32_t r = llm_tokenize(c->v, text, len, NULL, 0, false, special);
    if (r == INT32_MIN)
        return cfail(c, "cannot count the tokens of the message: out of memory");
    *n_tokens = r < 0 ? -(int64_t)r : r;
    return *n_tokens > room ? SESS_ERR_CTX_FULL : SESS_OK;
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
    c->base.s = p;
    params_effective(c);
    sampler_fresh(c); /* (a remote engine: the server samples) */
}

void sess_conv_set_stop(struct sess_conv *c, const char *const *stop)
{
    c->p.stop = stop && stop[0] ? stop : NULL;
}

int sess_conv_set_draft(struct sess_conv *c, uint32_t draft, int32_t draft_max)
{
    draft &= SESS_DRAFT_ALL;
    if (draft_max <= 0)
        draft_max = SESS_DRAFT_MAX_DEFAULT;
    if (draft_max > SESS_DRAFT_MAX_LIMIT)
        draft_max = SESS_DRAFT_MAX_LIMIT;
    c->p.draft = draft;
    c->p.draft_max = draft_max;
    if (c->remote || (!draft && !c->p.draft_test))
        return SESS_OK;
    /* the token sampled and the drafted ones: a row of logits each */
    c->draft_rows = llm_ctx_reserve_outputs(c->ctx, draft_max + 1) == LLM_OK;
    if (!c->draft_rows) {
        c->p.draft = SESS_DRAFT_OFF;
        c->p.draft_test = SESS_DRAFT_TEST_OFF;
        return cfail(c, "cannot draft: %s", llm_ctx_errmsg(c->ctx));
    }
    return SESS_OK;
}

void sess_conv_set_n_predict(struct sess_conv *c, int32_t n_predict)
{
    c->base.n_predict = n_predict;
    params_effective(c);
}

int sess_conv_keep_params(struct sess_conv *c, struct llm_sampler_params p, int32_t n_predict, bool think_off,
                          uint32_t which)
{
    struct conv_vals v = {p, n_predict, think_off};
    which &= (1u << SESS_PARAM_COUNT) - 1;
    for (int k = 0; k < SESS_PARAM_COUNT; k++) {
        if (!(which & (1u << k)))
            continue;
        param_copy(&c->base, &v, (enum sess_param)k);
        param_copy(&c->vkept, &v, (enum sess_param)k);
    }
    c->kept |= which;
    c->p.given |= which; /* and over any session this conversation goes to */
    params_effective(c);
    /* the random state goes on with the new parameters, unless re-seeded */
    if (!c->remote) { /* (a remote engine: the server samples) */
        int64_t need = llm_sampler_state_save(c->smp, NULL, 0);
        size_t size = (size_t)(need < 0 ? -need : need);
        void *state = (which & (1u << SESS_PARAM_SEED)) ? NULL : malloc(size ? size : 1);
        int64_t got = state ? llm_sampler_state_save(c->smp, state, size) : -1;
        sampler_fresh(c);
        if (got > 0)
            llm_sampler_state_load(c->smp, state, (size_t)got);
        free(state);
    }
    return params_save(c);
}

int sess_conv_keep_format(struct sess_conv *c, const char *kind, const char *source)
{
    struct conv_format f = {NULL, NULL};
    if (format_set(&f, kind, source))
        return cfail(c, "out of memory");
    if (format_use(c, &f)) {
        format_free(&f);
        return SESS_ERR;
    }
    if (format_set(&c->fbase, f.kind, f.source) || format_set(&c->fkept, f.kind, f.source)) {
        format_free(&f);
        return cfail(c, "out of memory");
    }
    format_free(&f);
    c->kept |= 1u << SESS_PARAM_FORMAT;
    c->p.given |= 1u << SESS_PARAM_FORMAT; /* and over any session this conversation goes to */
    return params_save(c);
}

const char *sess_conv_format(const struct sess_conv *c, const char **source)
{
    if (source)
        *source = c->fcur.source;
    return c->fcur.kind;
}

/* a conversation of system prompt `system` alone, with a fresh sampler;
 * the cache keeps what it shares with the old one */
static int restart(struct sess_conv *c, const char *system)
{
    drop_all_messages(c);
    char *sys = system ? strdup(system) : NULL; /* system may be c->system */
    if (system && !sys)
        return cfail(c, "out of memory");
    int rc = start_with_system(c, sys);
    free(sys);
    sampler_fresh(c);
    return rc;
}

int sess_conv_reset(struct sess_conv *c, const char *system)
{
    leave_session(c);
    if (keep_given(c))
        return SESS_ERR;
    params_effective(c);
    if (format_use(c, &c->fbase))
        return SESS_ERR;
    return restart(c, system);
}

int sess_conv_rename(struct sess_conv *c, const char *new_name)
{
    if (!attached(c))
        return cfail(c, "the conversation is not a saved session");
    char *dup = strdup(new_name);
    if (!dup)
        return cfail(c, "out of memory");
    if (sess_set_name(c->st, c->sid, new_name)) {
        free(dup);
        return cfail(c, "%s", sess_errmsg(c->st));
    }
    free(c->name);
    c->name = dup;
    return SESS_OK;
}

/* ==== generating an answer ==== */

struct gen {
    char *text;
    size_t len, cap, emitted;
    int64_t *ends; /* text length after each generated token */
};

static int text_append(struct gen *g, const char *p, size_t n)
{
    if (base_grow((void **)&g->text, &g->cap, g->len + n + 1, 1))
        return -1;
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
    if (!g->text || from >= g->len)
        return -1; /* nothing to search (memmem wants a text) */
    for (const char *const *s = stops; s && *s; s++) {
        const char *hit = memmem(g->text + from, g->len - from, *s, strlen(*s));
        if (hit && (best < 0 || hit - g->text < best))
            best = hit - g->text;
    }
    return best;
}

/* ==== speculative decoding: the pass under way ====
 * A drafting pass decodes the token just sampled and k drafted ones
 * (llm_ctx_decode_outputs), so the context holds k positions past n_kv
 * that are not the conversation's yet. The loop of generate goes on as
 * without drafting: it samples from the pass's rows in turn, and while the
 * sample equals the next drafted token that position is taken as computed;
 * at the first that differs (or anything else ending the pass) the rest
 * are cut from the context. So the conversation's tokens, the KV cache and
 * the blocks stored from it only ever hold sampled tokens. */
struct spec {
    int32_t d[LLM_CTX_MAX_OUTPUTS]; /* the drafted tokens */
    int64_t k;    /* how many (0: no pass under way) */
    int64_t used; /* of them, taken so far */
    int64_t pos;  /* the position of d[0] */
};

/* whether this conversation drafts: not a remote engine's, not a hybrid
 * model's (its recurrent state cannot go back to a rejected position) */
static bool drafting(const struct sess_conv *c)
{
    return c->draft_rows && (c->p.draft || c->p.draft_test) && !c->remote && !recurrent(c);
}

/* end the pass under way: its untaken positions cut from the context */
static int spec_end(struct sess_conv *c, struct spec *sp, struct sess_draft_state *ds, struct sess_turn_stats *ts)
{
    if (!sp->k)
        return SESS_OK;
    ts->accepted_tokens += sp->used;
    sess_draft_result(ds, sp->pos, sp->k, sp->used);
    sp->k = sp->used = 0;
    if (llm_ctx_n_past(c->ctx) > c->n_kv && llm_ctx_truncate(c->ctx, c->n_kv) != LLM_OK)
        return cfail(c, "%s", llm_ctx_errmsg(c->ctx));
    return SESS_OK;
}

/* Token t (sampled at position n_tokens) joins the conversation and the
 * context: taken from the pass under way when it is the next drafted one,
 * else decoded, with drafts for the positions after it when there are
 * some (at most max). */
static int advance(struct sess_conv *c, int32_t t, struct spec *sp, struct sess_draft_state *ds, int64_t max,
                   struct sess_turn_stats *ts)
{
    if (sp->k && sp->used < sp->k && t == sp->d[sp->used]) { /* the pass computed it */
        if (add_tokens(c, &t, 1))
            return SESS_ERR;
        c->n_kv++;
        sp->used++;
        return SESS_OK;
    }
    if (spec_end(c, sp, ds, ts) || add_tokens(c, &t, 1))
        return SESS_ERR;
    int64_t room = c->n_ctx - c->n_tokens, k = 0;
    max = max < room ? max : room;
    if (ds && max > 0)
        k = sess_draft_propose(ds, c->tokens, c->n_tokens, max, sp->d);
    if (k <= 0)
        return sync_kv(c, NULL);
    int32_t pass[LLM_CTX_MAX_OUTPUTS];
    pass[0] = t;
    memcpy(pass + 1, sp->d, (size_t)k * sizeof *pass);
    int rc = llm_ctx_decode_outputs(c->ctx, pass, k + 1);
    if (rc == LLM_ERR_CTX_FULL)
        return cfail(c, "context full");
    if (rc != LLM_OK)
        return cfail(c, "%s", llm_ctx_errmsg(c->ctx));
    c->n_kv = c->n_tokens;
    sp->k = k;
    sp->used = 0;
    sp->pos = c->n_tokens;
    ts->drafted_tokens += k;
    ts->draft_passes++;
    return SESS_OK;
}

/* the logits for the next position: the pass's row after what it took */
static const float *next_logits(const struct sess_conv *c, const struct spec *sp)
{
    return sp->k ? llm_ctx_logits_ith(c->ctx, sp->used) : llm_ctx_logits(c->ctx);
}

/*
 * The answer from the last token's logits on; ans_start is where the
 * answer's tokens begin: before those of its prefix pre (NULL: none), which
 * the cache holds already (c->n_tokens - ans_start of them); the answer's
 * text begins with pre too.
 */
static int generate(struct sess_conv *c, int64_t ans_start, const char *pre, sess_text_fn on_text, void *ud,
                    volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts, double t0)
{
    /* the template's stop strings and the caller's */
    const char *const *tstops = llm_template_stops(c->p.tmpl);
    size_t nt = 0, nu = 0;
    while (tstops && tstops[nt])
        nt++;
    while (c->p.stop && c->p.stop[nu])
        nu++;
    const char **stops = malloc((nt + nu + 1) * sizeof *stops);
    if (!stops)
        return cfail(c, "out of memory");
    if (nt)
        memcpy(stops, tstops, nt * sizeof *stops);
    for (size_t i = 0; i < nu; i++)
        if (c->p.stop[i][0]) /* an empty string would stop at once */
            stops[nt++] = c->p.stop[i];
    stops[nt] = NULL;
    struct llm_detok_params dp = llm_detok_default_params();
    struct llm_detok *dt = llm_detok_init(c->v, dp);
    struct gen g = {0};
    /* n_predict 0: an empty answer, as llama.cpp's -n 0 (-1: until the context is full) */
    int64_t limit = c->p.n_predict >= 0 ? c->p.n_predict : INT64_MAX, n_gen = 0;
    int64_t start = c->n_tokens;
    size_t max_stop = 0;
    for (const char *const *s = stops; s && *s; s++)
        max_stop = strlen(*s) > max_stop ? strlen(*s) : max_stop;
    g.ends = malloc((size_t)(c->n_ctx - start + 1) * sizeof *g.ends);
    if (!dt || !g.ends) {
        llm_detok_free(dt);
        free(g.ends);
        free(stops);
        return cfail(c, "out of memory");
    }
    ts->stop_reason = "length";
    if (c->gm)
        llm_matcher_reset(c->gm);
    struct llm_matcher_stats gs0 = c->gm ? llm_matcher_get_stats(c->gm) : (struct llm_matcher_stats){0};
    double t_first = 0;
    int rc = SESS_OK;
    bool stop_hit = false;
    const float *logits = llm_ctx_logits(c->ctx);
    struct spec sp = {.k = 0};
    struct sess_draft_state dstate, *ds = NULL;
    if (drafting(c)) {
        ds = &dstate;
        sess_draft_begin(ds, c->p.draft, c->p.draft_max, c->p.draft_test, llm_model_n_vocab(c->m),
                         c->st && !c->p.no_cache ? c->kv : NULL);
    }
    /* an answer that opens in the reasoning: the reader's splitter sees the opening */
    if (pre && pre == c->think_on && on_text && on_text(ud, pre, strlen(pre))) {
        ts->stop_reason = "interrupted";
        limit = 0;
    }
    while (n_gen < limit) {
        if (c->n_tokens >= c->n_ctx) {
            ts->stop_reason = "context_full";
            break;
        }
        int32_t t;
        if (c->gm) { /* the grammar's mask: a constraint picks among tokens, never changes a logit */
            if (llm_matcher_mask(c->gm, c->gmask) < 0) {
                rc = cfail(c, "out of memory");
                break;
            }
            t = llm_sampler_sample_at(c->smp, logits, c->gmask, c->n_tokens);
            if (t < 0) {
                ts->stop_reason = "grammar";
                break;
            }
            if (llm_matcher_accept(c->gm, t)) {
                rc = cfail(c, "the grammar refused a token its mask allowed");
                break;
            }
        } else {
            t = llm_sampler_sample_at(c->smp, logits, NULL, c->n_tokens);
        }
        if (n_gen == 0) {
            base_trace("turn: first token sampled");
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
            /* (a hybrid model goes back to a snapshot and computes up to there) */
            if (spec_end(c, &sp, ds, ts) || truncate_to(c, start + keep) || sync_kv(c, NULL)) {
                rc = SESS_ERR;
                break;
            }
            n_gen = keep;
            ts->stop_reason = "stop";
            stop_hit = true;
            break;
        }
        /* (drafts for the positions after t: no more than the answer may still have) */
        if (advance(c, t, &sp, ds, limit - n_gen - 1, ts)) {
            rc = SESS_ERR;
            break;
        }
        if (is_snap_point(c, c->n_kv)) /* the ladder goes on through answers */
            snap_take(c);
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
        if (c->gm && llm_matcher_done(c->gm)) { /* nothing can follow: no need to sample the end */
            ts->stop_reason = "stop";
            break;
        }
        if (interrupt && *interrupt) {
            ts->stop_reason = "interrupted";
            break;
        }
        logits = next_logits(c, &sp);
    }
    /* what a pass drafted past the answer's end is cut */
    if (spec_end(c, &sp, ds, ts) && rc == SESS_OK)
        rc = SESS_ERR;
    if (rc == SESS_OK && strcmp(ts->stop_reason, "stop") != 0) {
        const char *rest;
        size_t rl = llm_detok_flush(dt, &rest);
        if (rl && text_append(&g, rest, rl))
            rc = cfail(c, "out of memory");
    }
    if (rc == SESS_OK && g.len > g.emitted && on_text)
        on_text(ud, g.text + g.emitted, g.len - g.emitted);
    double t_end = now_ms();
    if (c->gm) { /* complete: the text is a string of the grammar, and nothing cut it */
        struct llm_matcher_stats gs = llm_matcher_get_stats(c->gm);
        ts->grammar = true;
        ts->grammar_complete = llm_matcher_can_end(c->gm) && !strcmp(ts->stop_reason, "stop") && !stop_hit;
        ts->grammar_masks = (int64_t)(gs.masks - gs0.masks);
        ts->grammar_cache_hits = (int64_t)(gs.cache_hits - gs0.cache_hits);
        ts->grammar_nodes = (int64_t)(gs.nodes - gs0.nodes);
        ts->grammar_steps = (int64_t)(gs.steps - gs0.steps);
    }
    ts->generated_tokens = n_gen;
    ts->decode_tok_s = n_gen > 1 && t_end > t_first ? (n_gen - 1) * 1e3 / (t_end - t_first) : 0;
    if (rc == SESS_OK && pre && pre[0]) { /* the prefix's text first */
        size_t pl = strlen(pre);
        char *t = malloc(pl + g.len + 1);
        if (!t) {
            rc = cfail(c, "out of memory");
        } else {
            memcpy(t, pre, pl);
            if (g.len)
                memcpy(t + pl, g.text, g.len);
            t[pl + g.len] = 0;
            free(g.text);
            g.text = t;
            g.len += pl;
        }
    }
    if (rc == SESS_OK)
        rc = push_msg(c, SESS_ROLE_ASSISTANT, g.text ? g.text : "", g.len, c->tokens + ans_start,
                      start - ans_start + n_gen, ans_start);
    if (rc == SESS_OK)
        snprintf(c->msgs[c->n_msgs - 1].stop, sizeof c->msgs[c->n_msgs - 1].stop, "%s", ts->stop_reason);
    if (rc == SESS_OK) { /* the sampler after this answer (its draws move on), saved with it */
        llm_sampler_next_stream(c->smp);
        rc = keep_state(c, &c->msgs[c->n_msgs - 1]);
    }
    free(stops);
    llm_detok_free(dt);
    free(g.text);
    free(g.ends);
    return rc;
}
/* ==== turns ==== */

/* the tokens of the answer prefix (none without one), after token prev */
static int prefix_tokens(struct sess_conv *c, int32_t prev, int32_t **toks, int64_t *n)
{
    int64_t cap = 0;
    const char *pre = answer_prefix(c);
    *toks = NULL;
    *n = 0;
    if (!pre)
        return SESS_OK;
    struct llm_tokenize_params tp = llm_tokenize_default_params();
    tp.add_special = false;
    tp.parse_special = true;
    tp.prev = prev;
    int rc = tokenize_into(c, pre, strlen(pre), &tp, toks, n, &cap);
    if (rc) {
        free(*toks);
        *toks = NULL;
        *n = 0;
    }
    return rc;
}

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

static void finish_stats(struct sess_conv *c, struct sess_turn_stats *ts)
{
    ts->kv_bytes_mem = llm_ctx_kv_bytes(c->ctx, c->n_kv);
}

/* the cache made to hold all the tokens with the last one's logits:
 * restored from blocks where it can be, the rest prefilled */
static int prepare(struct sess_conv *c, volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts)
{
    struct sess_kv_restore r;
    int64_t before = c->n_kv;
    /* the last token is always computed: its logits are the answer's start */
    base_trace("turn: message tokenized");
    ts->store_failed |= restore_blocks(c, c->n_tokens - 1, &r);
    base_trace("turn: blocks and snapshot restored");
    ts->restored_tokens = c->n_kv > before ? c->n_kv - before : 0;
    ts->restored_blocks = r.blocks;
    ts->restore_ms = r.ms;
    if (r.snap_pos > 0)
        ts->snapshot_pos = r.snap_pos;
    if (r.first_problem[0])
        snprintf(ts->kv_problem, sizeof ts->kv_problem, "%.490s; recomputed", r.first_problem);
    else if (c->snap_problem[0])
        snprintf(ts->kv_problem, sizeof ts->kv_problem, "%.490s; recomputed", c->snap_problem);
    c->snap_problem[0] = 0;
    ts->cached_tokens = c->n_kv;
    /* a hybrid model keeps its state on the way: where this prompt stopped
     * sharing stored K/V, at the end of the system prompt, one token before
     * the end (a retry's start) */
    c->n_snap_at = 0;
    if (r.kv_reach > c->n_kv && r.kv_reach < c->n_tokens)
        c->snap_at[c->n_snap_at++] = r.kv_reach;
    if (has_system(c))
        c->snap_at[c->n_snap_at++] = c->msgs[0].n_tokens;
    c->snap_at[c->n_snap_at++] = c->n_tokens - 1;
    int64_t done;
    int rc = sync_kv_interruptible(c, &done, interrupt);
    base_trace("turn: prefilled");
    c->n_snap_at = 0;
    ts->prefilled_tokens = done;
    return rc;
}

/* ==== a remote engine's turn ==== */

/*
 * The server answers messages [0, keep) and user_text (NULL: none, a
 * retry); only when an answer comes do the messages from keep on become
 * the user's (if any) and the answer, saved from keep on. Nothing changes
 * otherwise, so a failed /retry keeps the answer it was to replace.
 */
static int remote_turn(struct sess_conv *c, int64_t keep, const char *user_text, sess_text_fn on_text, void *ud,
                       volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts)
{
    struct llm_chat_msg *cm = chat_msgs(c, keep, -1, user_text);
    if (!cm)
        return cfail(c, "out of memory");
    struct sess_remote_answer a;
    memset(&a, 0, sizeof a);
    a.prompt_tokens = a.cached_tokens = a.generated_tokens = -1;
    a.ttft_ms = a.prefill_tok_s = a.decode_tok_s = -1;
    a.stop_reason = "stop";
    struct sess_conv_params p = sess_conv_get_params(c); /* what is set goes to the server */
    int rc = c->p.remote.answer(c->p.remote.ud, cm, (size_t)keep + (user_text != NULL), &p, on_text, ud,
                                interrupt, &a);
    free(cm);
    if (rc != SESS_OK) {
        free(a.text);
        if (rc == SESS_ERR_INTERRUPTED)
            return cfail(c, "interrupted"), SESS_ERR_INTERRUPTED;
        cfail(c, "%s", a.problem[0] ? a.problem : "the server gave no answer");
        return SESS_ERR_REMOTE;
    }
    ts->prompt_tokens = a.prompt_tokens;
    ts->cached_tokens = a.cached_tokens;
    ts->prefilled_tokens =
        a.prompt_tokens >= 0 && a.cached_tokens >= 0 && a.prompt_tokens >= a.cached_tokens
            ? a.prompt_tokens - a.cached_tokens
            : -1;
    ts->generated_tokens = a.generated_tokens;
    ts->ttft_ms = a.ttft_ms;
    ts->prefill_tok_s = a.prefill_tok_s;
    ts->decode_tok_s = a.decode_tok_s;
    ts->stop_reason = a.stop_reason ? a.stop_reason : "stop";
    /* the new messages go after the kept ones */
    struct conv_msg *old = NULL;
    int64_t n_old = c->n_msgs - keep;
    if (n_old > 0 && !(old = malloc((size_t)n_old * sizeof *old))) {
        free(a.text);
        return cfail(c, "out of memory");
    }
    if (n_old > 0)
        memcpy(old, c->msgs + keep, (size_t)n_old * sizeof *old);
    c->n_msgs = keep;
    rc = user_text ? push_msg(c, SESS_ROLE_USER, user_text, strlen(user_text), NULL, 0, 0) : SESS_OK;
    if (rc == SESS_OK && (rc = push_msg(c, SESS_ROLE_ASSISTANT, a.text ? a.text : "", a.len, NULL, 0, 0)))
        msg_free(&c->msgs[--c->n_msgs]); /* the user's message goes with it */
    free(a.text);
    if (rc) { /* the conversation as it was */
        memcpy(c->msgs + keep, old, (size_t)n_old * sizeof *old);
        c->n_msgs = keep + n_old;
        free(old);
        return rc;
    }
    for (int64_t i = 0; i < n_old; i++)
        msg_free(&old[i]);
    free(old);
    snprintf(c->msgs[c->n_msgs - 1].stop, sizeof c->msgs[c->n_msgs - 1].stop, "%s", ts->stop_reason);
    rc = persist(c, keep, ts);
    if (rc == SESS_OK && !strcmp(ts->stop_reason, "cut")) /* saved, and why it is short */
        cfail(c, "%s", a.problem);
    return rc;
}

int sess_conv_say(struct sess_conv *c, const char *user_text, sess_text_fn on_text, void *ud,
                  volatile sig_atomic_t *interrupt, struct sess_turn_stats *ts)
{
    memset(ts, 0, sizeof *ts);
    ts->snapshot_pos = -1;
    if (c->remote && c->fcur.kind) /* never silently unconstrained */
        return cfail(c, "the answers' format (%s) is for local models: a remote server samples its own answers "
                        "(/set format off)", c->fcur.kind);
    if (c->remote)
        return remote_turn(c, c->n_msgs, user_text, on_text, ud, interrupt, ts);
    double t0 = now_ms();
    int32_t *toks;
    int64_t n;
    if (c->p.no_cache && drop_cache(c)) /* the whole conversation again */
        return SESS_ERR;
    if (user_tokens(c, user_text, &toks, &n))
        return SESS_ERR;
    int32_t *pre = NULL;
    int64_t n_pre = 0;
    int32_t prev = n ? toks[n - 1] : c->n_tokens ? c->tokens[c->n_tokens - 1] : LLM_TOKEN_NULL;
    if (prefix_tokens(c, prev, &pre, &n_pre)) {
        free(toks);
        return SESS_ERR;
    }
    /* room for the message, the answer's prefix and at least one answer token */
    if (c->n_tokens + n + n_pre + 1 > c->n_ctx) {
        free(toks);
        free(pre);
        cfail(c, "the message needs %lld tokens, and %lld of the context's %lld are free",
              (long long)(n + n_pre + 1), (long long)(c->n_ctx - c->n_tokens), (long long)c->n_ctx);
        return SESS_ERR_CTX_FULL;
    }
    int64_t start = c->n_tokens, user_idx = c->n_msgs;
    if (add_tokens(c, toks, n) || push_msg(c, SESS_ROLE_USER, user_text, strlen(user_text), toks, n, start)) {
        free(toks);
        free(pre);
        truncate_to(c, start);
        return SESS_ERR;
    }
    free(toks);
    int64_t ans_start = c->n_tokens;
    int rc = add_tokens(c, pre, n_pre);
    free(pre);
    if (rc == SESS_OK)
        rc = prepare(c, interrupt, ts);
    if (rc) { /* take the message back: the conversation is as it was */
        msg_free(&c->msgs[--c->n_msgs]);
        truncate_to(c, start);
        if (rc == SESS_ERR_INTERRUPTED)
            cfail(c, "interrupted");
        return rc;
    }
    double t_pf = now_ms(), t_turn = t0;
    ts->prompt_tokens = c->n_tokens;
    ts->prefill_tok_s = t_pf > t0 && ts->prefilled_tokens ? ts->prefilled_tokens * 1e3 / (t_pf - t0) : 0;
    if (c->p.turn_start_ms > 0 && c->p.turn_start_ms <= t0) /* once: the process's start */
        t_turn = c->p.turn_start_ms;
    c->p.turn_start_ms = 0;
    rc = generate(c, ans_start, answer_prefix(c), on_text, ud, interrupt, ts, t_turn);
    base_trace("turn: answered");
    if (rc == SESS_OK)
        rc = persist(c, user_idx, ts);
    base_trace("turn: saved");
    finish_stats(c, ts);
    return rc;
}

/* drop messages [from, n_msgs) and the tokens they put in the cache */
static int drop_messages(struct sess_conv *c, int64_t from)
{
    if (from < c->n_msgs && truncate_to(c, c->msgs[from].start))
        return SESS_ERR;
    for (int64_t i = from; i < c->n_msgs; i++)
        msg_free(&c->msgs[i]);
    c->n_msgs = from;
    return SESS_OK;
}

int sess_conv_retry(struct sess_conv *c, sess_text_fn on_text, void *ud, volatile sig_atomic_t *interrupt,
                    struct sess_turn_stats *ts)
{
    memset(ts, 0, sizeof *ts);
    ts->snapshot_pos = -1;
    int64_t L = c->n_msgs - 1;
    if (L < 0 || c->msgs[L].role != SESS_ROLE_ASSISTANT)
        return cfail(c, "there is no answer to retry");
    if (c->remote)
        return remote_turn(c, L, NULL, on_text, ud, interrupt, ts);
    double t0 = now_ms();
    if (drop_messages(c, L))
        return SESS_ERR;
    /* the answer's prefix as it is now (it may have changed since) */
    int32_t *pre = NULL;
    int64_t n_pre = 0, ans_start = c->n_tokens;
    if (prefix_tokens(c, c->n_tokens ? c->tokens[c->n_tokens - 1] : LLM_TOKEN_NULL, &pre, &n_pre))
        return SESS_ERR;
    if (c->n_tokens + n_pre + 1 > c->n_ctx) {
        free(pre);
        return cfail(c, "the answer's opening does not fit in the context"), SESS_ERR_CTX_FULL;
    }
    int rc = add_tokens(c, pre, n_pre);
    free(pre);
    if (rc)
        return rc;
    /* the cache may lack part of the conversation (a session just opened,
     * or a prefix): computing it gives the last token's logits; else they
     * are computed again */
    if (c->n_kv < c->n_tokens) {
        rc = prepare(c, interrupt, ts);
    } else {
        int64_t done = 0;
        rc = refresh_logits(c, &done);
        ts->cached_tokens = c->n_tokens - done;
        ts->prefilled_tokens = done;
    }
    if (rc)
        return rc == SESS_ERR_INTERRUPTED ? cfail(c, "interrupted"), SESS_ERR_INTERRUPTED : SESS_ERR;
    ts->prompt_tokens = c->n_tokens;
    rc = generate(c, ans_start, answer_prefix(c), on_text, ud, interrupt, ts, t0);
    if (rc == SESS_OK)
        rc = persist(c, L, ts);
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
    if (drop_messages(c, u))
        return SESS_ERR;
    sampler_rewind(c);
    return persist(c, u, NULL);
}

int sess_conv_clear(struct sess_conv *c)
{
    int64_t keep = has_system(c) ? 1 : 0;
    if (drop_messages(c, keep))
        return SESS_ERR;
    sampler_rewind(c);
    return persist(c, keep, NULL);
}
/* recompute the tokens of messages [from, n_msgs) from their text (answers
 * keep their generated tokens; one with none, a remote model's, gets its
 * text's), after the cache was cut at msgs[from] */
static int retokenize_from(struct sess_conv *c, int64_t from)
{
    int64_t nm = c->n_msgs;
    c->n_msgs = from;
    for (int64_t i = from; i < nm; i++) {
        struct conv_msg m = c->msgs[i];
        int32_t *toks = NULL;
        int64_t n = 0;
        int rc;
        if (m.role == SESS_ROLE_ASSISTANT && (m.n_tokens > 0 || !m.text[0])) {
            toks = m.tokens;
            n = m.n_tokens;
            m.tokens = NULL;
            rc = SESS_OK;
        } else if (m.role == SESS_ROLE_ASSISTANT) { /* no ids recorded (a remote model's): its text, plain */
            struct llm_tokenize_params tp = llm_tokenize_default_params();
            tp.add_special = false;
            tp.parse_special = false;
            int64_t cap = 0;
            rc = tokenize_into(c, m.text, strlen(m.text), &tp, &toks, &n, &cap);
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
        if (rc == SESS_OK) { /* an answer keeps the sampler state saved with it, and why it ended */
            c->msgs[c->n_msgs - 1].state = m.state;
            c->msgs[c->n_msgs - 1].state_bytes = m.state_bytes;
            m.state = NULL;
            memcpy(c->msgs[c->n_msgs - 1].stop, m.stop, sizeof m.stop);
        }
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
    if (c->remote) { /* the messages move down; token ids they had no longer hold */
        for (int64_t j = first; j < i; j++)
            msg_free(&c->msgs[j]);
        memmove(c->msgs + first, c->msgs + i, (size_t)(c->n_msgs - i) * sizeof *c->msgs);
        c->n_msgs -= i - first;
        for (int64_t j = 0; j < c->n_msgs; j++)
            c->msgs[j].n_tokens = 0;
        return persist(c, 0, NULL);
    }
    /* the kept messages move down and their tokens are made again; the
     * cache keeps what the new tokens share with the old (the system
     * prompt) and the next turn restores or computes the rest */
    int32_t *old = malloc((size_t)(c->n_tokens ? c->n_tokens : 1) * sizeof *old);
    if (!old)
        return cfail(c, "out of memory");
    int64_t n_old = c->n_tokens, n_kv = c->n_kv;
    memcpy(old, c->tokens, (size_t)n_old * sizeof *old);
    for (int64_t j = first; j < i; j++)
        msg_free(&c->msgs[j]);
    memmove(c->msgs + first, c->msgs + i, (size_t)(c->n_msgs - i) * sizeof *c->msgs);
    c->n_msgs -= i - first;
    c->n_tokens = first ? c->msgs[0].n_tokens : 0;
    int rc = retokenize_from(c, first);
    if (rc == SESS_OK) { /* what the cache holds is old[0..n_kv): keep the common prefix */
        int64_t k = 0;
        while (k < n_kv && k < c->n_tokens && old[k] == c->tokens[k])
            k++;
        if (k < c->n_kv)
            rc = cut_cache(c, k);
    }
    free(old);
    return rc ? rc : persist(c, 0, NULL);
}

int sess_conv_set_system(struct sess_conv *c, const char *system)
{
    int rc = restart(c, system);
    return rc ? rc : persist(c, 0, NULL);
}

/* ==== sessions ==== */

/* a session's messages, as the conversation's (their tokens made again
 * where they were not recorded); on failure the conversation is unchanged */
static int load_messages(struct sess_conv *c, const struct sess_message *msgs, int64_t n, bool retokenize)
{
    struct sess_conv tmp = *c; /* build into a copy, then swap */
    tmp.msgs = NULL;
    tmp.n_msgs = tmp.cap_msgs = 0;
    tmp.n_tokens = 0;
    tmp.n_kv = 0;
    tmp.tokens = malloc((size_t)(c->n_ctx ? c->n_ctx : 1) * sizeof *tmp.tokens);
    if (!tmp.tokens)
        return cfail(c, "out of memory");
    /* a message with text and no ids was not recorded (a remote engine's) */
    bool all_tokens = !retokenize;
    for (int64_t i = 0; i < n; i++)
        all_tokens &= msgs[i].tokens != NULL || (msgs[i].n_tokens == 0 && !msgs[i].text[0]);
    int rc = SESS_OK;
    for (int64_t i = 0; i < n && rc == SESS_OK; i++) {
        int64_t nt = all_tokens ? msgs[i].n_tokens : 0;
        if (c->remote) /* kept as recorded (saved again as they are), never used; another model's dropped */
            nt = msgs[i].tokens && !retokenize ? msgs[i].n_tokens : 0;
        else if (tmp.n_tokens + nt > tmp.n_ctx)
            rc = cfail(&tmp, "the session has more tokens than the context holds (-c %lld is too small)",
                       (long long)tmp.n_ctx);
        if (rc == SESS_OK)
            rc = push_msg(&tmp, msgs[i].role, msgs[i].text, strlen(msgs[i].text), msgs[i].tokens, nt,
                          tmp.n_tokens);
        if (rc == SESS_OK && !c->remote)
            rc = add_tokens(&tmp, msgs[i].tokens, nt);
        if (rc == SESS_OK && msgs[i].stop_reason)
            snprintf(tmp.msgs[tmp.n_msgs - 1].stop, sizeof tmp.msgs[tmp.n_msgs - 1].stop, "%s",
                     msgs[i].stop_reason);
        if (rc == SESS_OK && msgs[i].sampler_state && !retokenize) {
            struct conv_msg *m = &tmp.msgs[tmp.n_msgs - 1];
            m->state = malloc(msgs[i].sampler_state_bytes ? msgs[i].sampler_state_bytes : 1);
            if (!m->state)
                rc = cfail(&tmp, "out of memory");
            else
                memcpy(m->state, msgs[i].sampler_state, msgs[i].sampler_state_bytes);
            m->state_bytes = msgs[i].sampler_state_bytes;
        }
    }
    if (rc == SESS_OK && !all_tokens && !c->remote) /* recorded without ids: render them again */
        rc = retokenize_from(&tmp, 0);
    if (rc) {
        snprintf(c->err, sizeof c->err, "%s", tmp.err);
        for (int64_t i = 0; i < tmp.n_msgs; i++)
            msg_free(&tmp.msgs[i]);
        free(tmp.msgs);
        free(tmp.tokens);
        return SESS_ERR;
    }
    /* the new conversation; the cache keeps what it shares with the old */
    drop_all_messages(c);
    free(c->msgs);
    c->msgs = tmp.msgs;
    c->n_msgs = tmp.n_msgs;
    c->cap_msgs = tmp.cap_msgs;
    c->retokenized = !all_tokens && !c->remote;
    rc = c->remote ? SESS_OK : replace_tokens(c, tmp.tokens, tmp.n_tokens);
    free(tmp.tokens);
    free(c->system);
    c->system = has_system(c) ? strdup(c->msgs[0].text) : NULL;
    c->p.system = c->system;
    return rc;
}

int sess_conv_attach(struct sess_conv *c, const char *name, bool create, struct sess_restore_stats *rs)
{
    memset(rs, 0, sizeof *rs);
    rs->snapshot_pos = -1;
    if (!c->st)
        return cfail(c, "no session store");
    int64_t sid;
    int rc = sess_find(c->st, name, &sid);
    if (rc == SESS_ERR_NOT_FOUND && !create)
        return cfail(c, "%s", sess_errmsg(c->st)), SESS_ERR_NOT_FOUND;
    if (rc && rc != SESS_ERR_NOT_FOUND)
        return cfail(c, "%s", sess_errmsg(c->st));
    bool exists = rc == SESS_OK;
    if (exists && attached(c) && sid == c->sid)
        return SESS_OK;
    if (!exists && c->p.no_cache) /* --no-cache changes nothing: not even a new session */
        return SESS_OK;
    if (!exists) {
        char err[256];
        if (sess_name_check(name, err, sizeof err))
            return cfail(c, "%s", err);
        struct sess_new n = {name, model_id(c), c->system,
                             c->remote || llm_ctx_kv_type(c->ctx) != LLM_TYPE_F32 ? 1 : 0};
        if (sess_create(c->st, &n, &sid))
            return cfail(c, "%s", sess_errmsg(c->st));
    }
    struct sess_lock *lock;
    rc = sess_lock(c->st, sid, &lock);
    if (rc) {
        cfail(c, "%s", sess_errmsg(c->st));
        return rc == SESS_ERR_BUSY ? SESS_ERR_BUSY : SESS_ERR;
    }
    char *dup = strdup(name);
    if (!dup) {
        sess_unlock(lock);
        return cfail(c, "out of memory");
    }
    if (!exists) { /* a new session: what the conversation has so far */
        leave_session(c);
        c->sid = sid;
        c->lock = lock;
        c->name = dup;
        if (keep_given(c))
            return SESS_ERR;
        params_effective(c);
        return persist(c, 0, NULL);
    }
    struct sess_message *msgs;
    struct sess_info info;
    int64_t n;
    if (sess_get(c->st, sid, &info)) {
        sess_unlock(lock);
        free(dup);
        cfail(c, "%s", sess_errmsg(c->st));
        return SESS_ERR_STORE;
    }
    /* its own model (local at any context size, or the same remote entry),
     * or (asked for) this one, with its history tokenized again */
    bool other;
    if (info.fingerprint_version == 1 && !c->remote) /* a store made before schema 5 */
        other = memcmp(info.fingerprint, sess_kv_fingerprint_v1(c->kv, false), 32) != 0 &&
                memcmp(info.fingerprint, sess_kv_fingerprint_v1(c->kv, true), 32) != 0;
    else
        other = memcmp(info.fingerprint, fingerprint(c), 32) != 0 &&
                (c->remote || memcmp(info.fingerprint, sess_kv_fingerprint_other(c->kv), 32) != 0);
    /* the same path with other bytes: the file was changed (or replaced)
     * since the session was saved; it goes on with what the file is now */
    bool changed = other && !c->remote && info.model_path && !strcmp(info.model_path, c->model_path);
    if (other && !c->p.switch_model && !changed) {
        char a[256], b[256];
        const char *was = shown_model(c, info.model_path, a, sizeof a), *now = shown_model(c, c->model_path, b, sizeof b);
        size_t wl = info.model_path ? strlen(info.model_path) : 0;
        bool was_remote = wl > 7 && !strcmp(info.model_path + wl - 7, ".remote");
        if (!strcmp(was, now) && was_remote != c->remote) /* one name, a local and a remote model */
            cfail(c, "session '%s' was saved with another model named '%s' (%s '%s'; now %s '%s'): the name was "
                     "given to another model since", name, was, was_remote ? "the remote entry" : "the file",
                  info.model_path, c->remote ? "the remote entry" : "the file", c->model_path);
        else if (!strcmp(was, now)) /* one name, other bytes: never "saved with X, not X" */
            cfail(c, "session '%s' was saved with other bytes of model '%s' (at '%s'; now '%s'): the file was "
                     "changed or replaced since", name, was, info.model_path ? info.model_path : "?", c->model_path);
        else
            cfail(c, "session '%s' was saved with model '%s', not '%s'", name, was, now);
        sess_info_free(&info);
        sess_unlock(lock);
        free(dup);
        return SESS_ERR_MODEL;
    }
    if (sess_messages(c->st, sid, &msgs, &n)) {
        sess_info_free(&info);
        sess_unlock(lock);
        free(dup);
        cfail(c, "%s", sess_errmsg(c->st));
        return SESS_ERR_STORE;
    }
    rc = load_messages(c, msgs, n, other);
    sess_messages_free(msgs, n);
    char sa[256], sb[256];
    if (rc == SESS_OK && changed)
        snprintf(rs->first_problem, sizeof rs->first_problem,
                 "the model file '%.150s' has changed since session '%.60s' was saved: it goes on with the "
                 "file as it is now, its history computed again and its sampler started afresh",
                 c->model_path, name);
    else if (rc == SESS_OK && other)
        snprintf(rs->first_problem, sizeof rs->first_problem,
                 "session '%.60s' was saved with model '%.150s': it goes on with '%.150s', %s", name,
                 shown_model(c, info.model_path, sa, sizeof sa), shown_model(c, c->model_path, sb, sizeof sb),
                 c->remote ? "which answers from now on" : "its history computed again and its sampler started afresh");
    else if (rc == SESS_OK && !c->remote && memcmp(info.fingerprint, fingerprint(c), 32) && !c->p.no_cache)
        snprintf(rs->first_problem, sizeof rs->first_problem, /* phi3's RoPE factors */
                 "session '%.60s' was saved with this model at another context size, which changes its "
                 "RoPE: its KV cache is computed again", name);
    struct conv_vals vkept = c->base;
    struct conv_format fkept = {NULL, NULL};
    uint32_t kept = params_parse(info.params, &vkept, &fkept);
    int64_t info_model = info.model_id;
    sess_info_free(&info);
    /* the answers' format it keeps: compiled before anything changes */
    if (rc == SESS_OK && format_use(c, format_wanted(c, kept, &fkept))) {
        char why[sizeof c->err];
        snprintf(why, sizeof why, "%s", c->err);
        cfail(c, "session '%.200s' keeps a %s that cannot be used: %.600s (--format off answers without it)", name,
              fkept.kind ? fkept.kind : "format", why);
        rc = SESS_ERR;
    }
    if (rc) {
        format_free(&fkept);
        sess_unlock(lock);
        free(dup);
        return rc;
    }
    leave_session(c);
    c->sid = sid;
    c->lock = lock;
    c->name = dup;
    c->sess_model = other ? -1 : info_model;
    /* the session's parameters, under what the user gave; its sampler
     * goes on from its last answer, unless a seed was given */
    c->kept = kept;
    c->vkept = vkept;
    format_free(&c->fkept);
    c->fkept = fkept;
    params_effective(c);
    sampler_fresh(c);
    if (!(c->p.given & (1u << SESS_PARAM_SEED)))
        sampler_rewind(c);
    /* switched: the session is this model's now, its messages with this
     * model's ids (a remote one's: none, saved with its first answer, so
     * that a server that fails leaves the session as it was) */
    if (other && c->remote)
        c->retokenized = true;
    else if (other && (rc = persist(c, 0, NULL)))
        return rc;
    if (c->remote) {
        /* nothing to restore: the server keeps its own cache */
    } else if (c->p.no_cache) { /* recomputed at the first turn */
        if (drop_cache(c))
            return SESS_ERR;
    } else {
        struct sess_kv_restore r;
        int64_t before = c->n_kv;
        rs->store_failed = restore_blocks(c, c->n_tokens, &r);
        rs->restored_tokens = c->n_kv - before;
        rs->snapshot_pos = r.snap_pos > 0 ? r.snap_pos : -1;
        rs->restored_blocks = r.blocks;
        rs->damaged = r.damaged;
        rs->ms = r.ms;
        if (r.first_problem[0] && !rs->first_problem[0])
            snprintf(rs->first_problem, sizeof rs->first_problem, "%s", r.first_problem);
    }
    rs->missing_tokens = c->n_tokens - c->n_kv;
    return SESS_OK;
}
