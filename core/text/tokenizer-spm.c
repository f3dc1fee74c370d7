/*
 * tokenizer-spm.c - SentencePiece (BPE-by-score) tokenizing of one text
 * fragment whose spaces are already escaped as U+2581.
 *
 * The text is cut into UTF-8 characters (a lead byte claims as many bytes as
 * it announces, so invalid input still makes progress); then, repeatedly,
 * the adjacent pair whose concatenation is a token with the highest score is
 * merged (ties: the leftmost pair), as llama.cpp's llm_tokenizer_spm does.
 * Symbols left that are not tokens are emitted as byte tokens <0xNN>.
 * Every merged symbol is a token by construction, so llama.cpp's
 * "resegment" step reduces to that byte fallback.
 *
 * Invariants: symbols form a doubly linked list over the text in order; a
 * merged-away symbol has n == 0; a heap entry is stale (and skipped) unless
 * both its symbols are alive and their lengths still add up to its size.
 */
#include "core/text/vocab.h"
#include "core/text/unicode.h"

#include <stdlib.h>
#include <string.h>

struct spm_bigram {
    float score;
    int32_t left, right;
    uint32_t size;
};

/* a before b in the queue: higher score, then leftmost */
static bool spm_before(const struct spm_bigram *a, const struct spm_bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

struct spm_heap {
    struct spm_bigram *h;
    size_t n, cap;
};

BASE_HEAP_DEFINE(bigram_heap, struct spm_bigram, spm_before)

static bool try_bigram(const struct llm_vocab *v, const char *text, struct llm_tok_sym *s,
                       struct spm_heap *q, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return true;
    uint32_t size = s[left].n + s[right].n;
    int32_t id = llm_token_find(v, text + s[left].off, size);
    if (id < 0)
        return true;
    return bigram_heap_push(&q->h, &q->n, &q->cap, (struct spm_bigram){v->tokens[id].score, left, right, size}) == 0;
}

static void byte_token(const struct llm_vocab *v, unsigned char c, struct llm_tokbuf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    char buf[6] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>'};
    int32_t id = llm_token_find(v, buf, 6);
    if (id < 0)
        id = llm_token_find(v, (const char *)&c, 1);
    if (id < 0)
        id = v->unk; /* llama.cpp would throw here; the unknown token is the honest answer */
    if (id >= 0)
        llm_tokbuf_push(out, id);
}

void llm_spm_tokenize(const struct llm_vocab *v, const char *text, size_t len,
                      struct llm_tokbuf *out)
{
    if (len == 0)
        return;
    if (len > UINT32_MAX / 2) {
        out->oom = true;
        return;
    }
    struct llm_tok_sym *s = malloc(len * sizeof *s);
    struct spm_heap q = {0};
    if (!s) {
        out->oom = true;
        return;
    }
    int32_t n = llm_tok_syms(text, len, s);
    bool ok = true;
    for (int32_t i = 1; i < n && ok; i++)
        ok = try_bigram(v, text, s, &q, i - 1, i);
    while (ok && q.n) {
        struct spm_bigram b = bigram_heap_pop(q.h, &q.n);
        if (!llm_tok_sym_merge(s, b.left, b.right, b.size))
            continue;
        const struct llm_tok_sym *l = &s[b.left];
        ok = try_bigram(v, text, s, &q, l->prev, b.left) &&
             try_bigram(v, text, s, &q, b.left, l->next);
    }
    if (!ok) {
        out->oom = true;
    } else {
        for (int32_t i = 0; i != -1; i = s[i].next) {
            int32_t id = llm_token_find(v, text + s[i].off, s[i].n);
            if (id >= 0) {
                llm_tokbuf_push(out, id);
                continue;
            }
            for (uint32_t j = 0; j < s[i].n; j++)
                byte_token(v, (unsigned char)text[s[i].off + j], out);
        }
    }
    free(s);
    free(q.h);
}
