/*
 * think.c - splits a streamed answer into its reasoning and the answer
 * proper, for reasoning models (Qwen3, the DeepSeek-R1 distills, QwQ) that
 * write their thoughts between <think> and </think> before answering.
 * Text arrives in pieces as tokens are generated, and a tag can be split
 * across pieces ("</thi" + "nk>"), so bytes that could be the start of a tag
 * are held back until the next piece decides. The tags themselves are not
 * passed on, nor the white space that follows </think> (the templates put
 * "\n\n" there). Used by cli/ for display and `run --json`; it knows
 * nothing of sessions (which store the text as generated, tags and all).
 *
 * gpt-oss's harmony format is split the same way: its analysis channel
 * ("<|channel|>analysis<|message|>" ... "<|end|>") is the reasoning, and
 * the headers of its final channel ("<|start|>assistant" before, and
 * "<|channel|>final<|message|>") are dropped; a harmony reasoning ends only
 * at <|end|>, a <think> one only at </think>. Gemma 4's thought channel
 * ("<|channel>thought" ... "<channel|>") is a reasoning too, ending only
 * at "<channel|>".
 */
#include "core/llm.h"

#include <stdlib.h>
#include <string.h>

struct llm_think {
    bool in_reasoning;
    const char *close; /* the tag that ends the reasoning: </think>, harmony's <|end|>, Gemma 4's <channel|> */
    bool after_close;  /* eating white space after </think> */
    bool seen_text;    /* anything but white space has been passed on */
    char held[64];     /* a possible tag prefix */
    size_t n_held;
};

/* the tags looked for in the answer: each opens a reasoning that the
 * close tag ends, or (close NULL) is a header dropped */
static const struct {
    const char *tag, *close;
} answer_tags[] = {
    {"<think>", "</think>"},
    {"<|channel|>analysis<|message|>", "<|end|>"},
    {"<|start|>assistant<|channel|>analysis<|message|>", "<|end|>"},
    {"<|channel|>final<|message|>", NULL},
    {"<|start|>assistant<|channel|>final<|message|>", NULL},
    {"<|channel>thought", "<channel|>"},
};
#define N_ANSWER_TAGS (sizeof answer_tags / sizeof *answer_tags)

struct llm_think *llm_think_init(bool in_reasoning)
{
    struct llm_think *t = calloc(1, sizeof *t);
    if (t) {
        t->in_reasoning = in_reasoning;
        t->close = "</think>"; /* (a reasoning opened by the prompt: Qwen3.5's "<think>\n") */
    }
    return t;
}

void llm_think_free(struct llm_think *t) { free(t); }

bool llm_think_in_reasoning(const struct llm_think *t) { return t->in_reasoning; }

static int emit(struct llm_think *t, const char *s, size_t n, llm_think_emit_fn fn, void *ud)
{
    if (t->after_close) {
        while (n && (*s == '\n' || *s == ' ' || *s == '\r' || *s == '\t'))
            s++, n--;
        if (!n)
            return 0;
        t->after_close = false;
    }
    if (!n)
        return 0;
    t->seen_text = true;
    return fn(ud, t->in_reasoning ? LLM_THINK_REASONING : LLM_THINK_ANSWER, s, n);
}

/* what the held bytes are: -1 no tag's prefix, 0 a proper prefix of one,
 * else 1 + the index of the tag they are (in reasoning: the closing tag,
 * index 0) */
static int held_match(const struct llm_think *t)
{
    if (t->in_reasoning) {
        size_t tl = strlen(t->close);
        if (t->n_held > tl || memcmp(t->held, t->close, t->n_held))
            return -1;
        return t->n_held == tl ? 1 : 0;
    }
    int r = -1;
    for (size_t i = 0; i < N_ANSWER_TAGS; i++) {
        size_t tl = strlen(answer_tags[i].tag);
        if (t->n_held <= tl && !memcmp(t->held, answer_tags[i].tag, t->n_held)) {
            if (t->n_held == tl)
                return 1 + (int)i;
            r = 0;
        }
    }
    return r;
}

int llm_think_push(struct llm_think *t, const char *text, size_t n, llm_think_emit_fn fn, void *ud)
{
    /* work on held bytes + text, a byte at a time through the tag matcher */
    size_t i = 0;
    while (i < n) {
        char c = text[i];
        if (t->n_held || c == '<') {
            t->held[t->n_held++] = c;
            i++;
            int k = held_match(t);
            if (k < 0) {
                /* not the tag: pass the first held byte on, rescan the rest */
                char keep[sizeof t->held];
                size_t k = t->n_held - 1;
                memcpy(keep, t->held + 1, k);
                t->n_held = 0;
                int r = emit(t, (const char *)&(char){t->held[0]}, 1, fn, ud);
                if (r)
                    return r;
                /* re-feed the rest */
                if (k) {
                    r = llm_think_push(t, keep, k, fn, ud);
                    if (r)
                        return r;
                }
            } else if (k > 0) {
                t->n_held = 0;
                if (t->in_reasoning) {
                    t->in_reasoning = false;
                    t->after_close = true;
                } else if (answer_tags[k - 1].close) {
                    t->in_reasoning = true;
                    t->close = answer_tags[k - 1].close;
                }
            }
            continue;
        }
        size_t j = i;
        while (j < n && text[j] != '<')
            j++;
        int r = emit(t, text + i, j - i, fn, ud);
        if (r)
            return r;
        i = j;
    }
    return 0;
}

int llm_think_flush(struct llm_think *t, llm_think_emit_fn fn, void *ud)
{
    size_t k = t->n_held;
    t->n_held = 0;
    return k ? emit(t, t->held, k, fn, ud) : 0;
}
