/*
 * vocab.h - (internal to core/) the vocabulary's representation, shared by
 * core/text/vocab.c (loading, special tokens, detokenizing) and the two
 * tokenizers, core/text/tokenizer-spm.c and core/text/tokenizer-bpe.c.
 */
#ifndef KVCHAT_CORE_VOCAB_H
#define KVCHAT_CORE_VOCAB_H

#include "core/llm.h"

/* pre-tokenizers (tokenizer.ggml.pre), grouped by the splitting they share */
enum llm_pre {
    LLM_PRE_DEFAULT = 0,    /* absent / "default": aquila, gpt-neox */
    LLM_PRE_LLAMA3,         /* llama-bpe, llama3, smaug-bpe, dbrx, glm4 ... */
    LLM_PRE_DEEPSEEK_LLM,
    LLM_PRE_DEEPSEEK_CODER,
    LLM_PRE_FALCON,
    LLM_PRE_STARCODER,      /* also refact, command-r, smollm, codeshell ... */
    LLM_PRE_GPT2,           /* also mpt, phi-2, olmo, jais ... */
    LLM_PRE_QWEN2,          /* also stablelm2, hunyuan, grok-2 ... */
    LLM_PRE_QWEN35,
    LLM_PRE_GPT4O,          /* o200k (gpt-oss), also llama4, kanana2, talkie */
    LLM_PRE_GEMMA4,         /* tokenizer.ggml.model "gemma4": SentencePiece-style BPE */
    LLM_PRE_COUNT
};

/* Texts are offsets into v->arena, not pointers, so that the tables hold
 * no address and a cache file of them can be mapped as it is
 * (vocab-cache.c). */
struct llm_token_data {
    uint32_t off; /* text at v->arena + off, NUL-terminated */
    uint32_t len;
    float score;
    uint32_t attr;
};

struct llm_merge {
    uint32_t off; /* "first second" at v->arena + off */
    uint32_t len, split; /* first = text[0..split), second = text[split+1..len) */
};

struct llm_vocab {
    enum llm_vocab_type type;
    enum llm_pre pre;
    char pre_name[32];
    int32_t n_tokens;
    struct llm_token_data *tokens;
    char *arena;          /* every token and merge text */
    uint32_t *tok_hash;   /* open addressing: id + 1, 0 empty */
    uint32_t tok_hash_mask;
    struct llm_merge *merges;
    int32_t n_merges;
    uint32_t *merge_hash; /* merge index + 1, 0 empty */
    uint32_t merge_hash_mask;
    void *mem;            /* the mapping tokens, arena, tok_hash, merges and merge_hash lie in */
    size_t mem_bytes;
    size_t arena_bytes;   /* the texts' bytes, NULs included */
    size_t at[6];         /* where tokens, merges, tok_hash, merge_hash, arena and their end lie from the tables' start */
    bool from_cache;      /* mem is a cache file's mapping (read-only), which holds special and eog too */

    int32_t bos, eos, eot, eom, unk, sep, pad, nl;
    bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges;
    bool escape_spaces;   /* gemma4: ' ' is U+2581 in the tokens (a BPE over raw UTF-8,
                             not GPT-2's byte code points; bytes as <0xXX> tokens) */

    int32_t *special;     /* CONTROL | USER_DEFINED | UNKNOWN ids, longest text first */
    int32_t n_special;
    int32_t *eog;         /* sorted */
    int32_t n_eog;
};

/* a token's text, a merge's text */
static inline const char *llm_tok_text(const struct llm_vocab *v, const struct llm_token_data *t)
{
    return v->arena + t->off;
}
static inline const char *llm_merge_text(const struct llm_vocab *v, const struct llm_merge *m)
{
    return v->arena + m->off;
}

/* FNV-1a over bytes */
uint32_t llm_hash_bytes(const char *s, size_t n, uint32_t h);
#define LLM_HASH_SEED 2166136261u

/* rank of merging first+second, -1 if no such merge */
int32_t llm_vocab_merge_rank(const struct llm_vocab *v, const char *a, size_t na, const char *b,
                             size_t nb);

/* A growable token list for the tokenizers: appends fail only for memory. */
struct llm_tokbuf {
    int32_t *ids;
    size_t n, cap;
    bool oom;
};
void llm_tokbuf_push(struct llm_tokbuf *b, int32_t id);

/* The symbols the BPE and SPM tokenizers merge pairwise: a doubly linked
 * list over a word's UTF-8 characters (off, n: its bytes); a symbol merged
 * away has n == 0. */
struct llm_tok_sym {
    int32_t prev, next;
    uint32_t off, n;
};
/* text's len bytes (len > 0) as one symbol per UTF-8 character (a truncated
 * last one as it stands) into sym, room for len: returns their number */
int32_t llm_tok_syms(const char *text, size_t len, struct llm_tok_sym *sym);
/* merge the symbol right into left when the two still stand with size bytes
 * between them (a queued pair not made stale by an earlier merge): true if
 * merged */
bool llm_tok_sym_merge(struct llm_tok_sym *sym, int32_t left, int32_t right, uint32_t size);

/* Tokenize one fragment of text (no special tokens in it) onto out. */
void llm_spm_tokenize(const struct llm_vocab *v, const char *text, size_t len,
                      struct llm_tokbuf *out);
void llm_bpe_tokenize(const struct llm_vocab *v, const char *text, size_t len,
                      struct llm_tokbuf *out);

#endif
