/*
 * draft.c - where speculative drafts come from, and when to draft at all
 * (docs/speculative.md). conv.c verifies what this proposes: it decodes the
 * token it sampled and the drafted ones in one pass, and keeps a drafted
 * token only where the sampler at that position picks it itself, so
 * nothing here can change an answer, only how fast it comes.
 *
 * Sources, tried in this order:
 *   - the store: what followed the conversation's exact tokens the last
 *     time any command computed them (the same question asked again, an
 *     answer regenerated with the same seed): the stored blocks that
 *     continue the chain of its full blocks (sess_kv_continuation), read
 *     ahead into a buffer that is used while the answer follows it. The
 *     chain is exact from position 0, so once the answer leaves what was
 *     stored it cannot meet it again: after one lookup finds nothing, the
 *     store is not asked again in this answer.
 *   - n-grams (prompt lookup): the latest earlier place in the
 *     conversation's own tokens (system prompt, history, message, the
 *     answer so far) where its last NGRAM_MIN..NGRAM_MAX tokens occur, and
 *     the tokens that followed there.
 *
 * Gating: no draft without a source (text with nothing to copy decodes
 * exactly as without drafting, one token a pass); the draft length adapts
 * (doubled after a pass accepted all, cut to one more than was accepted
 * otherwise); passes that accept nothing back off (no drafts for a growing
 * number of positions).
 */
#include "core/llm.h"
#include "sessions/sess-int.h"

#include <string.h>

#define NGRAM_MIN 2   /* tokens a match needs before it is drafted from */
#define NGRAM_MAX 4   /* the longest match looked for (the most recent of the longest wins) */
#define K_START 4     /* the first pass's draft length (at most the maximum) */
#define BACKOFF_MAX 32 /* positions without drafts after passes that accepted nothing, at most */

void sess_draft_begin(struct sess_draft_state *d, uint32_t sources, int32_t max, int32_t test, int64_t n_vocab,
                      struct sess_kv *kv)
{
    memset(d, 0, sizeof *d);
    d->sources = sources;
    d->max = max < 1 ? 1 : max > SESS_DRAFT_MAX_LIMIT ? SESS_DRAFT_MAX_LIMIT : max;
    d->test = test;
    d->n_vocab = n_vocab;
    d->kv = (sources & SESS_DRAFT_STORE) ? kv : NULL;
    d->k_cur = K_START < d->max ? K_START : d->max;
}

/* the store's continuation of tokens[0..p): out[0..max) */
static int64_t from_store(struct sess_draft_state *d, const int32_t *tokens, int64_t p, int64_t max, int32_t *out)
{
    if (!d->kv || d->sb_dead)
        return 0;
    /* the buffer holds what the store predicts for positions [sb_pos, sb_pos + sb_n) */
    bool follows = d->sb_n > 0 && d->sb_pos <= p && p < d->sb_pos + d->sb_n;
    for (int64_t i = d->sb_pos; follows && i < p; i++)
        follows = tokens[i] == d->sbuf[i - d->sb_pos];
    if (!follows) {
        int64_t n = sess_kv_continuation(d->kv, tokens, p, d->sbuf, SESS_DRAFT_READ_AHEAD);
        d->lookups++;
        if (n <= 0) { /* nothing stored follows (or the index failed: a draft is only a guess) */
            d->sb_dead = true;
            d->sb_n = 0;
            return 0;
        }
        d->sb_pos = p;
        d->sb_n = n;
    }
    int64_t k = d->sb_pos + d->sb_n - p;
    k = k < max ? k : max;
    memcpy(out, d->sbuf + (p - d->sb_pos), (size_t)k * sizeof *out);
    return k;
}

/* prompt lookup: what followed the latest earlier occurrence of the
 * longest suffix of tokens[0..p) (NGRAM_MIN to NGRAM_MAX tokens) */
static int64_t from_ngram(const int32_t *tokens, int64_t p, int64_t max, int32_t *out)
{
    if (p < NGRAM_MIN + 1)
        return 0;
    int32_t last = tokens[p - 1];
    int64_t best_len = 0, best_end = -1;
    for (int64_t e = p - 2; e >= 0; e--) { /* e: where a match ends */
        if (tokens[e] != last)
            continue;
        int64_t len = 1;
        while (len < NGRAM_MAX && e - len >= 0 && tokens[e - len] == tokens[p - 1 - len])
            len++;
        if (len > best_len) {
            best_len = len;
            best_end = e;
            if (len == NGRAM_MAX)
                break;
        }
    }
    if (best_len < NGRAM_MIN)
        return 0;
    int64_t k = p - (best_end + 1);
    k = k < max ? k : max;
    memcpy(out, tokens + best_end + 1, (size_t)k * sizeof *out);
    return k;
}

/* the test mode's numbers (SplitMix64 over a counter) */
static uint64_t test_next(struct sess_draft_state *d)
{
    uint64_t x = (d->test_rng += 0x9E3779B97F4A7C15ULL);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

int64_t sess_draft_propose(struct sess_draft_state *d, const int32_t *tokens, int64_t p, int64_t max, int32_t *out)
{
    if (!d->sources && !d->test)
        return 0;
    bool test = d->test == SESS_DRAFT_TEST_CORRUPT;
    int64_t want = test ? d->max : d->k_cur;
    want = want < max ? want : max;
    if (want <= 0 || (!test && p < d->skip_until))
        return 0;
    int64_t k = from_store(d, tokens, p, want, out);
    if (k == 0 && (d->sources & SESS_DRAFT_NGRAM))
        k = from_ngram(tokens, p, want, out);
    /* ids come from the store's rows (checked there) or the conversation:
     * still, only ids of the vocabulary are drafted */
    for (int64_t i = 0; i < k; i++)
        if (out[i] < 0 || out[i] >= d->n_vocab) {
            k = i;
            break;
        }
    if (test) { /* every step drafts; one pass in two has a token changed */
        while (k < want)
            out[k++] = (int32_t)(test_next(d) % (uint64_t)d->n_vocab);
        uint64_t r = test_next(d);
        if (r & 1) {
            int64_t i = (int64_t)((r >> 1) % (uint64_t)k);
            out[i] = (int32_t)(((int64_t)out[i] + 1 + (int64_t)(r >> 33) % (d->n_vocab - 1)) % d->n_vocab);
        }
    }
    return k;
}

void sess_draft_result(struct sess_draft_state *d, int64_t p, int64_t k, int64_t accepted)
{
    if (k <= 0)
        return;
    if (accepted == k) {
        d->k_cur = 2 * d->k_cur < d->max ? 2 * d->k_cur : d->max;
        d->fails = 0;
    } else if (accepted > 0) {
        d->k_cur = accepted + 1 < d->max ? (int32_t)accepted + 1 : d->max;
        d->fails = 0;
    } else {
        d->fails++;
        d->k_cur = d->k_cur > 1 ? d->k_cur / 2 : 1;
        if (d->fails >= 2) {
            int64_t wait = (int64_t)1 << (d->fails - 1 < 6 ? d->fails - 1 : 6);
            d->skip_until = p + (wait < BACKOFF_MAX ? wait : BACKOFF_MAX);
        }
    }
}

const char *sess_draft_name(uint32_t draft)
{
    switch (draft & SESS_DRAFT_ALL) {
    case SESS_DRAFT_NGRAM: return "ngram";
    case SESS_DRAFT_STORE: return "store";
    case SESS_DRAFT_ALL: return "on";
    default: return "off";
    }
}

int sess_draft_parse(const char *name)
{
    static const struct {
        const char *name;
        int v;
    } names[] = {{"off", SESS_DRAFT_OFF},  {"none", SESS_DRAFT_OFF},   {"ngram", SESS_DRAFT_NGRAM},
                 {"store", SESS_DRAFT_STORE}, {"on", SESS_DRAFT_ALL}, {"all", SESS_DRAFT_ALL},
                 {"both", SESS_DRAFT_ALL}, {"auto", SESS_DRAFT_ALL}};
    for (size_t i = 0; name && i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i].name))
            return names[i].v;
    return -1;
}
