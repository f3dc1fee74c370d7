/*
 * sampler.c - picks the next token from logits: repetition and presence
 * penalties over a window of recent tokens, then top-k, top-p and min-p
 * (on the untempered distribution, as llama.cpp's default chain orders
 * them), then temperature and a draw from a seeded RNG; temperature <= 0 is
 * greedy. Invariants: the result depends only on the logits and the state
 * (RNG + penalty window), which can be saved and restored as bytes, so a
 * resumed conversation samples exactly as the live one would; sampling
 * allocates nothing (scratch is sized by n_vocab at init); ties are broken
 * by the lower token id, so the order never depends on the sort.
 *
 * The random number (version 2): a counter-based draw, SplitMix64's output
 * for the counter pos (the absolute position of the token sampled) from a
 * key made of the seed. So the number used at a position never depends on
 * how many tokens were decoded or verified together, nor on how many draws
 * came before (a speculative draft is accepted iff the sample at its
 * position equals it: docs/speculative.md). The key moves on once per
 * answer (llm_sampler_next_stream), so a retry at the same positions draws
 * other numbers, and a fresh seed gives back the same answer.
 * Version 1 (states saved before kvchat had drafting): one xorshift64*
 * stream advanced per draw; a sampler loaded from such a state keeps it,
 * so sessions saved then resume with the draws they would have had (a
 * draw per sampled token in order, which verification also makes).
 *
 * Saved state, little-endian:
 *   version 1: u32 magic "KVSM"; u32 1; u64 rng; u32 window capacity;
 *              u32 tokens in the window; i32 tokens[], oldest first
 *   version 2: u32 magic "KVSM"; u32 2; u64 key; i64 pos (of the next
 *              sample when none is given); u32 window capacity;
 *              u32 tokens in the window; i32 tokens[], oldest first
 */
#include "core/llm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC 0x4d53564bu /* "KVSM" */

struct cand {
    float p;
    int32_t id;
};

struct llm_sampler {
    struct llm_sampler_params p;
    int64_t n_vocab;
    uint32_t version; /* 2, or 1 loaded from an old state */
    uint64_t rng;     /* version 2: the key; version 1: the xorshift state */
    int64_t pos;      /* version 2: the position of the next sample */
    int32_t *window; /* (cap) ring of recent tokens */
    uint32_t cap, n, head; /* head: where the next token goes */
    float *work;     /* (n_vocab) penalised logits */
    struct cand *c;  /* (n_vocab) candidates */
};

#define GOLDEN 0x9E3779B97F4A7C15ULL

/* SplitMix64's finalizer */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint64_t key_of_seed(uint64_t seed) { return mix64(seed * GOLDEN + 1); }

struct llm_sampler_params llm_sampler_default_params(void)
{
    return (struct llm_sampler_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                       .repeat_penalty = 1.0f, .presence_penalty = 0.0f,
                                       .penalty_last_n = 64, .seed = 0x5eed};
}

struct llm_sampler *llm_sampler_init(struct llm_sampler_params p, int64_t n_vocab)
{
    if (n_vocab <= 0 || n_vocab > INT32_MAX)
        return NULL;
    struct llm_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->p = p;
    s->n_vocab = n_vocab;
    s->version = 2;
    s->rng = key_of_seed(p.seed);
    s->cap = p.penalty_last_n > 0 ? (uint32_t)p.penalty_last_n : 0;
    s->window = calloc(s->cap ? s->cap : 1, sizeof *s->window);
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    if (!s->window || !s->work || !s->c) {
        llm_sampler_free(s);
        return NULL;
    }
    return s;
}

void llm_sampler_free(struct llm_sampler *s)
{
    if (!s)
        return;
    BASE_FREE(s->window, s->work, s->c, s);
}

void llm_sampler_accept(struct llm_sampler *s, int32_t token)
{
    if (!s->cap)
        return;
    s->window[s->head] = token;
    s->head = (s->head + 1) % s->cap;
    if (s->n < s->cap)
        s->n++;
}

/* a uniform float in [0, 1) for position pos: version 2, SplitMix64's
 * output for counter pos; version 1, the xorshift64* stream's next */
static float rng_uniform(struct llm_sampler *s, int64_t pos)
{
    if (s->version == 1) {
        s->rng ^= s->rng >> 12;
        s->rng ^= s->rng << 25;
        s->rng ^= s->rng >> 27;
        return (float)((s->rng * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f;
    }
    uint64_t x = mix64(s->rng + ((uint64_t)pos + 1) * GOLDEN);
    return (float)(x >> 40) / 16777216.0f;
}

void llm_sampler_next_stream(struct llm_sampler *s)
{
    if (s->version != 1)
        s->rng = mix64(s->rng ^ 0x5851F42D4C957F2DULL);
}

/* descending by p, then ascending by id */
static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* move the k best candidates to the front (order unspecified) */
static void select_top(struct cand *c, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        struct cand pivot = c[(lo + hi) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (cand_cmp(&c[i], &pivot) < 0)
                i++;
            while (cand_cmp(&c[j], &pivot) > 0)
                j--;
            if (i <= j) {
                struct cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

#define ALLOWED(mask, i) (!(mask) || ((mask)[(i) >> 5] >> ((i) & 31) & 1u))

int32_t llm_sampler_sample(struct llm_sampler *s, const float *logits)
{
    return llm_sampler_sample_at(s, logits, NULL, s->pos);
}

int32_t llm_sampler_sample_masked(struct llm_sampler *s, const float *logits, const uint32_t *mask)
{
    return llm_sampler_sample_at(s, logits, mask, s->pos);
}

/* A mask leaves tokens out (-inf, so no probability and never the best)
 * before anything else; an allowed token's logit is never changed by it. */
int32_t llm_sampler_sample_at(struct llm_sampler *s, const float *logits, const uint32_t *mask, int64_t pos)
{
    s->pos = pos + 1;
    int64_t nv = s->n_vocab;
    float *l = s->work;
    memcpy(l, logits, (size_t)nv * sizeof *l);
    int32_t best = -1;
    if (mask) {
        for (int64_t i = 0; i < nv; i++)
            if (!ALLOWED(mask, i))
                l[i] = -INFINITY;
            else if (best < 0)
                best = (int32_t)i;
        if (best < 0)
            return -1;
    } else {
        best = 0;
    }
    /* penalties, once per distinct recent token */
    if (s->p.repeat_penalty != 1.0f || s->p.presence_penalty != 0.0f) {
        for (uint32_t i = 0; i < s->n; i++) {
            int32_t t = s->window[(s->head + s->cap - s->n + i) % s->cap];
            bool seen = false;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = s->window[(s->head + s->cap - s->n + j) % s->cap] == t;
            if (seen || t < 0 || t >= nv || !ALLOWED(mask, t))
                continue;
            if (s->p.repeat_penalty > 0 && s->p.repeat_penalty != 1.0f)
                l[t] = l[t] > 0 ? l[t] / s->p.repeat_penalty : l[t] * s->p.repeat_penalty;
            l[t] -= s->p.presence_penalty;
        }
    }
    for (int64_t i = best + 1; i < nv; i++)
        if (l[i] > l[best])
            best = (int32_t)i;
    if (s->p.temp <= 0) {
        llm_sampler_accept(s, best);
        return best;
    }
    /* probabilities at temperature 1, relative to the best */
    float mx = l[best];
    int64_t n = 0;
    float min_rel = s->p.min_p > 0 ? s->p.min_p : 0;
    for (int64_t i = 0; i < nv; i++) {
        if (!ALLOWED(mask, i))
            continue;
        float p = expf(l[i] - mx);
        if (p >= min_rel && p > 0) /* min-p keeps p >= min_p * p_max (p_max is 1 here) */
            s->c[n++] = (struct cand){p, (int32_t)i};
    }
    if (s->p.top_k > 0 && n > s->p.top_k) {
        select_top(s->c, n, s->p.top_k);
        n = s->p.top_k;
    }
    qsort(s->c, (size_t)n, sizeof *s->c, cand_cmp);
    if (s->p.top_p > 0 && s->p.top_p < 1) {
        double total = 0, run = 0;
        for (int64_t i = 0; i < n; i++)
            total += s->c[i].p;
        for (int64_t i = 0; i < n; i++) {
            run += s->c[i].p;
            if (run >= s->p.top_p * total) {
                n = i + 1;
                break;
            }
        }
    }
    /* temperature: p^(1/T) of the kept candidates, then a draw */
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        s->c[i].p = expf((l[s->c[i].id] - mx) / s->p.temp);
        total += s->c[i].p;
    }
    double r = rng_uniform(s, pos) * total, run = 0;
    int32_t pick = s->c[n - 1].id;
    for (int64_t i = 0; i < n; i++) {
        run += s->c[i].p;
        if (r < run) {
            pick = s->c[i].id;
            break;
        }
    }
    llm_sampler_accept(s, pick);
    return pick;
}

/* bytes before the window's tokens in a saved state of version v */
static size_t state_head(uint32_t v) { return v == 1 ? 24 : 32; }

int64_t llm_sampler_state_save(const struct llm_sampler *s, void *buf, size_t size)
{
    size_t head = state_head(s->version), need = head + (size_t)s->n * 4;
    if (size < need)
        return -(int64_t)need;
    uint8_t *p = buf;
    uint32_t hdr[2] = {STATE_MAGIC, s->version};
    memcpy(p, hdr, 8);
    memcpy(p + 8, &s->rng, 8);
    if (s->version != 1)
        memcpy(p + 16, &s->pos, 8);
    memcpy(p + head - 8, &s->cap, 4);
    memcpy(p + head - 4, &s->n, 4);
    for (uint32_t i = 0; i < s->n; i++) {
        int32_t t = s->window[(s->head + s->cap - s->n + i) % s->cap];
        memcpy(p + head + 4 * i, &t, 4);
    }
    return (int64_t)need;
}

int llm_sampler_state_load(struct llm_sampler *s, const void *buf, size_t size)
{
    const uint8_t *p = buf;
    uint32_t hdr[2], cap, n;
    if (size < 8)
        return -1;
    memcpy(hdr, p, 8);
    if (hdr[0] != STATE_MAGIC || (hdr[1] != 1 && hdr[1] != 2))
        return -1;
    size_t head = state_head(hdr[1]);
    if (size < head)
        return -1;
    memcpy(&cap, p + head - 8, 4);
    memcpy(&n, p + head - 4, 4);
    if (cap != s->cap || n > cap || size != head + (size_t)n * 4)
        return -1;
    int64_t pos = 0;
    if (hdr[1] != 1)
        memcpy(&pos, p + 16, 8);
    if (pos < 0)
        return -1;
    s->version = hdr[1];
    memcpy(&s->rng, p + 8, 8);
    s->pos = pos;
    s->n = 0;
    s->head = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t t;
        memcpy(&t, p + head + 4 * i, 4);
        llm_sampler_accept(s, t);
    }
    return 0;
}

uint32_t llm_sampler_version(const struct llm_sampler *s) { return s->version; }
