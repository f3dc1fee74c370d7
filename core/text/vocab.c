/*
 * vocab.c - the vocabulary: loading tokenizer.* metadata from a GGUF, the
 * special tokens (BOS/EOS/EOT/EOG, control and user-defined tokens), the
 * split of text around special tokens, and detokenizing (whole sequences
 * and a streaming, UTF-8-safe detokenizer).
 *
 * The rules follow llama.cpp's llama_vocab so that token ids agree exactly:
 * the same defaults per tokenizer model, the same text-based detection of
 * end-of-turn and fill-in-the-middle tokens (which also marks them CONTROL),
 * the same longest-first matching of special tokens with their lstrip /
 * rstrip attributes, and the same space handling when detokenizing. Where
 * llama.cpp's choice depends on hash-map iteration order (which of several
 * candidate EOT texts wins), the most specific text wins here.
 *
 * Invariants: every token text is NUL-terminated in v->arena; the hash
 * tables are at most half full; v->special is ordered by text length,
 * longest first, then by id; v->eog is sorted and free of duplicates.
 */
#include "core/text/vocab.h"
#include "core/text/unicode.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ==== small helpers ==== */

uint32_t llm_hash_bytes(const char *s, size_t n, uint32_t h)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

int32_t llm_tok_syms(const char *text, size_t len, struct llm_tok_sym *sym)
{
    int32_t n = 0;
    for (size_t off = 0; off < len;) {
        size_t k = llm_utf8_len((unsigned char)text[off]);
        if (k > len - off)
            k = len - off;
        sym[n] = (struct llm_tok_sym){n - 1, off + k == len ? -1 : n + 1, (uint32_t)off, (uint32_t)k};
        off += k;
        n++;
    }
    return n;
}

bool llm_tok_sym_merge(struct llm_tok_sym *sym, int32_t left, int32_t right, uint32_t size)
{
    struct llm_tok_sym *l = &sym[left], *r = &sym[right];
    if (l->n == 0 || r->n == 0 || l->n + r->n != size)
        return false;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0)
        sym[r->next].prev = left;
    return true;
}

void llm_tokbuf_push(struct llm_tokbuf *b, int32_t id)
{
    if (base_grow((void **)&b->ids, &b->cap, b->n + 1, sizeof *b->ids)) {
        b->oom = true;
        return;
    }
    b->ids[b->n++] = id;
}

static void seterr(char *err, size_t size, const char *fmt, const char *arg)
{
    if (err && size)
        snprintf(err, size, fmt, arg);
}

static uint32_t table_size(uint64_t n)
{
    uint32_t s = 16;
    while (s < 2 * n)
        s *= 2;
    return s;
}

int32_t llm_token_find(const struct llm_vocab *v, const char *text, size_t len)
{
    uint32_t h = llm_hash_bytes(text, len, LLM_HASH_SEED) & v->tok_hash_mask;
    for (;;) {
        uint32_t e = v->tok_hash[h];
        if (!e)
            return LLM_TOKEN_NULL;
        const struct llm_token_data *t = &v->tokens[e - 1];
        if (t->len == len && !memcmp(llm_tok_text(v, t), text, len))
            return (int32_t)(e - 1);
        h = (h + 1) & v->tok_hash_mask;
    }
}

static uint32_t merge_hash(const char *a, size_t na, const char *b, size_t nb)
{
    uint32_t h = llm_hash_bytes(a, na, LLM_HASH_SEED);
    h = llm_hash_bytes(" ", 1, h);
    return llm_hash_bytes(b, nb, h);
}

int32_t llm_vocab_merge_rank(const struct llm_vocab *v, const char *a, size_t na, const char *b,
                             size_t nb)
{
    if (!v->merge_hash)
        return -1;
    uint32_t h = merge_hash(a, na, b, nb) & v->merge_hash_mask;
    for (;;) {
        uint32_t e = v->merge_hash[h];
        if (!e)
            return -1;
        const struct llm_merge *m = &v->merges[e - 1];
        if (m->split == na && m->len == na + 1 + nb && !memcmp(llm_merge_text(v, m), a, na) &&
            !memcmp(llm_merge_text(v, m) + na + 1, b, nb))
            return (int32_t)(e - 1);
        h = (h + 1) & v->merge_hash_mask;
    }
}

/* ==== loading ==== */

/* tokenizer.ggml.pre names as llama.cpp maps them: the splitting, and the
 * flags its branch sets (clean_spaces off; ignore_merges and add_bos on;
 * no default BOS) */
enum { KEEP_SPACES = 1, IGNORE_MERGES = 2, ADD_BOS = 4, NO_BOS = 8 };
static const struct {
    const char *name;
    enum llm_pre pre;
    unsigned flags;
} pre_names[] = {
    {"default", LLM_PRE_DEFAULT, 0},
    {"llama3", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"llama-v3", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"llama-bpe", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"falcon3", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"falcon-h1", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"pixtral", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"midm-2.0", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"lfm2", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"jina-v5-nano", LLM_PRE_LLAMA3, IGNORE_MERGES | ADD_BOS},
    {"dbrx", LLM_PRE_LLAMA3, 0},
    {"smaug-bpe", LLM_PRE_LLAMA3, 0},
    {"glm4", LLM_PRE_LLAMA3, NO_BOS},
    {"chatglm-bpe", LLM_PRE_LLAMA3, NO_BOS},
    {"deepseek-llm", LLM_PRE_DEEPSEEK_LLM, KEEP_SPACES},
    {"deepseek-coder", LLM_PRE_DEEPSEEK_CODER, KEEP_SPACES},
    {"falcon", LLM_PRE_FALCON, 0},
    {"mpt", LLM_PRE_GPT2, 0},
    {"gpt-2", LLM_PRE_GPT2, 0},
    {"phi-2", LLM_PRE_GPT2, 0},
    {"olmo", LLM_PRE_GPT2, 0},
    {"jais", LLM_PRE_GPT2, 0},
    {"exaone4", LLM_PRE_GPT2, 0},
    {"gigachat", LLM_PRE_GPT2, 0},
    {"a.x-4.0", LLM_PRE_GPT2, 0},
    {"mellum", LLM_PRE_GPT2, 0},
    {"trillion", LLM_PRE_GPT2, KEEP_SPACES},
    {"granite-docling", LLM_PRE_GPT2, KEEP_SPACES},
    {"starcoder", LLM_PRE_STARCODER, 0},
    {"refact", LLM_PRE_STARCODER, 0},
    {"codeshell", LLM_PRE_STARCODER, 0},
    {"exaone", LLM_PRE_STARCODER, 0},
    {"minerva-7b", LLM_PRE_STARCODER, 0},
    {"mellum2", LLM_PRE_STARCODER, 0},
    {"command-r", LLM_PRE_STARCODER, KEEP_SPACES},
    {"smollm", LLM_PRE_STARCODER, KEEP_SPACES},
    {"qwen2", LLM_PRE_QWEN2, KEEP_SPACES},
    {"deepseek-r1-qwen", LLM_PRE_QWEN2, KEEP_SPACES},
    {"kormo", LLM_PRE_QWEN2, KEEP_SPACES},
    {"f2llmv2", LLM_PRE_QWEN2, KEEP_SPACES},
    {"hunyuan", LLM_PRE_QWEN2, KEEP_SPACES},
    {"solar-open", LLM_PRE_QWEN2, KEEP_SPACES},
    {"grok-2", LLM_PRE_QWEN2, KEEP_SPACES},
    {"stablelm2", LLM_PRE_QWEN2, 0},
    {"megrez", LLM_PRE_QWEN2, 0},
    {"qwen35", LLM_PRE_QWEN35, KEEP_SPACES},
    {"gpt-4o", LLM_PRE_GPT4O, KEEP_SPACES},
    {"llama4", LLM_PRE_GPT4O, KEEP_SPACES},
    {"kanana2", LLM_PRE_GPT4O, KEEP_SPACES},
    {"talkie", LLM_PRE_GPT4O, KEEP_SPACES},
};

static int64_t kv_int(const struct llm_gguf *g, const char *key, int64_t def)
{
    int64_t x = def;
    llm_gguf_find_int(g, key, &x);
    return x;
}

static void kv_id(const struct llm_gguf *g, const char *key, int32_t n, int32_t *id)
{
    int64_t x;
    if (llm_gguf_find_int(g, key, &x) == 0 && x >= 0 && x < n)
        *id = (int32_t)x;
}

static int cmp_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* special tokens by text length, longest first, then by id */
struct len_id {
    uint32_t len;
    int32_t id;
};

static int cmp_special(const void *a, const void *b)
{
    const struct len_id *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool text_is(const struct llm_vocab *v, const struct llm_token_data *t, const char *s)
{
    return t->len == strlen(s) && !memcmp(llm_tok_text(v, t), s, t->len);
}

static bool text_in(const struct llm_vocab *v, const struct llm_token_data *t, const char *const *list)
{
    for (; *list; list++)
        if (text_is(v, t, *list))
            return true;
    return false;
}

/* Tokens recognised by their text when the metadata does not name them
 * (llama.cpp's lists). The first found becomes the id; every match is made
 * CONTROL. */
static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>",
    "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_texts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>",
    "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_texts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
    "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
    "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
    "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>",
    "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
    "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[", NULL};

/* find by text, unless already set; marks the token CONTROL. Where several
 * of the texts are in the vocabulary, the earliest in the list wins (the
 * lists run from the most to the least specific; llama.cpp's choice there
 * follows its hash map's order, which agrees with this on the llama-bpe,
 * qwen2 and phi-3 vocabularies). */
static void detect(struct llm_vocab *v, int32_t *id, const char *const *texts)
{
    if (*id != LLM_TOKEN_NULL)
        return;
    for (; *texts; texts++) {
        int32_t i = llm_token_find(v, *texts, strlen(*texts));
        if (i >= 0) {
            *id = i;
            v->tokens[i].attr |= LLM_TOKEN_ATTR_CONTROL;
            return;
        }
    }
}

static void eog_add(struct llm_vocab *v, int32_t id)
{
    if (id == LLM_TOKEN_NULL)
        return;
    for (int32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return;
    v->eog[v->n_eog++] = id;
}

static void eog_remove(struct llm_vocab *v, int32_t id)
{
    for (int32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) {
            v->eog[i] = v->eog[--v->n_eog];
            return;
        }
}

static int32_t eog_find_text(const struct llm_vocab *v, const char *s)
{
    for (int32_t i = 0; i < v->n_eog; i++)
        if (text_is(v, &v->tokens[v->eog[i]], s))
            return v->eog[i];
    return LLM_TOKEN_NULL;
}

static int load_tokens(struct llm_vocab *v, const struct llm_gguf *g, char *err, size_t es)
{
    int64_t ti = llm_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (ti < 0 || llm_gguf_kv_type(g, ti) != LLM_GGUF_TYPE_ARRAY ||
        llm_gguf_arr_type(g, ti) != LLM_GGUF_TYPE_STRING) {
        seterr(err, es, "%s", "missing or invalid tokenizer.ggml.tokens");
        return -1;
    }
    uint64_t n = llm_gguf_arr_n(g, ti);
    if (n == 0 || n > (1u << 24)) {
        seterr(err, es, "%s", "tokenizer.ggml.tokens has an unreasonable number of tokens");
        return -1;
    }
    int64_t si = llm_gguf_find_key(g, "tokenizer.ggml.scores");
    enum llm_gguf_type st = si >= 0 ? llm_gguf_arr_type(g, si) : LLM_GGUF_TYPE_COUNT;
    if (si >= 0 && (llm_gguf_kv_type(g, si) != LLM_GGUF_TYPE_ARRAY ||
                    (st != LLM_GGUF_TYPE_FLOAT32 && st != LLM_GGUF_TYPE_INT32) ||
                    llm_gguf_arr_n(g, si) < n)) {
        seterr(err, es, "%s", "invalid tokenizer.ggml.scores");
        return -1;
    }
    int64_t yi = llm_gguf_find_key(g, "tokenizer.ggml.token_type");
    if (yi >= 0 && (llm_gguf_kv_type(g, yi) != LLM_GGUF_TYPE_ARRAY ||
                    llm_gguf_arr_type(g, yi) != LLM_GGUF_TYPE_INT32 || llm_gguf_arr_n(g, yi) < n)) {
        seterr(err, es, "%s", "invalid tokenizer.ggml.token_type");
        return -1;
    }
    int64_t mi = -1;
    uint64_t nm = 0;
    if (v->type == LLM_VOCAB_BPE) {
        mi = llm_gguf_find_key(g, "tokenizer.ggml.merges");
        if (mi < 0) {
            seterr(err, es, "%s", "missing tokenizer.ggml.merges");
            return -1;
        }
        if (llm_gguf_kv_type(g, mi) != LLM_GGUF_TYPE_ARRAY ||
            llm_gguf_arr_type(g, mi) != LLM_GGUF_TYPE_STRING || llm_gguf_arr_n(g, mi) > (1u << 24)) {
            seterr(err, es, "%s", "invalid tokenizer.ggml.merges");
            return -1;
        }
        nm = llm_gguf_arr_n(g, mi);
    }
    /* one arena for all texts; empty tokens become "[EMPTY_<id>]" */
    uint64_t bytes = 0;
    struct llm_str s;
    for (uint64_t i = 0; i < n; i++) {
        if (llm_gguf_arr_get_str(g, ti, i, &s) < 0)
            return seterr(err, es, "%s", "invalid tokenizer.ggml.tokens"), -1;
        bytes += (s.len ? s.len : 24) + 1;
    }
    for (uint64_t i = 0; i < nm; i++) {
        if (llm_gguf_arr_get_str(g, mi, i, &s) < 0)
            return seterr(err, es, "%s", "invalid tokenizer.ggml.merges"), -1;
        bytes += s.len + 1;
    }
    if (bytes > (uint64_t)UINT32_MAX) /* texts are at 32-bit offsets */
        return seterr(err, es, "%s", "vocabulary too large"), -1;
    /* the tables in one mapping (zeros as mapped), in huge pages where the
     * kernel has them: a vocabulary of 150k tokens and merges is about 12
     * MB of fresh memory, read at random while it is built, at every
     * start; by the huge page that costs a fraction of what 4 KiB pages
     * do (page faults and TLB misses) */
    v->tok_hash_mask = table_size(n) - 1;
    uint32_t msize = nm ? table_size(nm) : 0;
    size_t at[6] = {0}, sz[5] = {n * sizeof *v->tokens, nm * sizeof *v->merges,
                                 ((size_t)v->tok_hash_mask + 1) * sizeof *v->tok_hash,
                                 (size_t)msize * sizeof *v->merge_hash, bytes ? bytes : 1};
    for (int i = 0; i < 5; i++)
        at[i + 1] = at[i] + (sz[i] + 63) / 64 * 64;
    void *mem = mmap(NULL, at[5], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return seterr(err, es, "%s", "out of memory"), -1;
#ifdef MADV_HUGEPAGE
    if (at[5] >= (4u << 20))
        madvise(mem, at[5], MADV_HUGEPAGE);
#endif
    v->mem = mem;
    v->mem_bytes = at[5];
    v->tokens = (struct llm_token_data *)((char *)mem + at[0]);
    v->merges = nm ? (struct llm_merge *)((char *)mem + at[1]) : NULL;
    v->tok_hash = (uint32_t *)((char *)mem + at[2]);
    v->merge_hash = nm ? (uint32_t *)((char *)mem + at[3]) : NULL;
    v->merge_hash_mask = nm ? msize - 1 : 0;
    v->arena = (char *)mem + at[4];
    v->arena_bytes = bytes ? bytes : 1;
    memcpy(v->at, at, sizeof at);
    v->n_tokens = (int32_t)n;
    char *p = v->arena;
    const void *scores = si >= 0 ? llm_gguf_arr_data(g, si) : NULL;
    const void *types = yi >= 0 ? llm_gguf_arr_data(g, yi) : NULL;
    for (uint64_t i = 0; i < n; i++) {
        struct llm_token_data *t = &v->tokens[i];
        llm_gguf_arr_get_str(g, ti, i, &s);
        t->off = (uint32_t)(p - v->arena);
        if (s.len) {
            memcpy(p, s.ptr, s.len);
            t->len = (uint32_t)s.len;
        } else {
            t->len = (uint32_t)sprintf(p, "[EMPTY_%u]", (unsigned)i);
        }
        p[t->len] = 0;
        p += t->len + 1;
        if (scores) {
            if (st == LLM_GGUF_TYPE_FLOAT32)
                memcpy(&t->score, (const char *)scores + 4 * i, 4);
            else {
                int32_t x;
                memcpy(&x, (const char *)scores + 4 * i, 4);
                t->score = (float)x;
            }
        }
        t->attr = LLM_TOKEN_ATTR_NORMAL;
        if (types) {
            int32_t ty;
            memcpy(&ty, (const char *)types + 4 * i, 4);
            static const uint32_t map[7] = {LLM_TOKEN_ATTR_UNDEFINED, LLM_TOKEN_ATTR_NORMAL,
                LLM_TOKEN_ATTR_UNKNOWN, LLM_TOKEN_ATTR_CONTROL, LLM_TOKEN_ATTR_USER_DEFINED,
                LLM_TOKEN_ATTR_UNUSED, LLM_TOKEN_ATTR_BYTE};
            t->attr = ty >= 0 && ty < 7 ? map[ty] : LLM_TOKEN_ATTR_UNDEFINED;
        }
        /* insert, a later duplicate text taking the slot (as llama.cpp's map) */
        uint32_t h = llm_hash_bytes(llm_tok_text(v, t), t->len, LLM_HASH_SEED) & v->tok_hash_mask;
        for (;;) {
            uint32_t e = v->tok_hash[h];
            if (!e || (v->tokens[e - 1].len == t->len &&
                       !memcmp(llm_tok_text(v, &v->tokens[e - 1]), llm_tok_text(v, t), t->len))) {
                v->tok_hash[h] = (uint32_t)i + 1;
                break;
            }
            h = (h + 1) & v->tok_hash_mask;
        }
    }
    if (nm) {
        for (uint64_t i = 0; i < nm; i++) {
            llm_gguf_arr_get_str(g, mi, i, &s);
            memcpy(p, s.ptr, s.len);
            p[s.len] = 0;
            /* split at the first space after the first byte; a merge
             * without one can never match (llama.cpp keys it "" + "") */
            const char *sp = s.len > 1 ? memchr(p + 1, ' ', s.len - 1) : NULL;
            if (sp) {
                struct llm_merge *m = &v->merges[v->n_merges];
                m->off = (uint32_t)(p - v->arena);
                m->len = (uint32_t)s.len;
                m->split = (uint32_t)(sp - p);
                uint32_t h = merge_hash(p, m->split, sp + 1, m->len - m->split - 1) &
                             v->merge_hash_mask;
                bool dup = false;
                for (;;) {
                    uint32_t e = v->merge_hash[h];
                    if (!e)
                        break;
                    const struct llm_merge *o = &v->merges[e - 1];
                    if (o->len == m->len && o->split == m->split && !memcmp(llm_merge_text(v, o), p, m->len)) {
                        dup = true; /* the first rank stays */
                        break;
                    }
                    h = (h + 1) & v->merge_hash_mask;
                }
                if (!dup) {
                    v->merge_hash[h] = (uint32_t)v->n_merges + 1;
                    v->n_merges++;
                }
            }
            p += s.len + 1;
        }
    }
    return 0;
}

int llm_vocab_load(const struct llm_gguf *g, struct llm_vocab **out, char *err, size_t es)
{
    struct llm_str s;
    char model[32] = "";
    *out = NULL;
    if (llm_gguf_find_str(g, "tokenizer.ggml.model", &s) < 0) {
        seterr(err, es, "%s", "no tokenizer in the file (tokenizer.ggml.model missing)");
        return -1;
    }
    snprintf(model, sizeof model, "%.*s", (int)(s.len < 31 ? s.len : 31), s.ptr);
    struct llm_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        seterr(err, es, "%s", "out of memory");
        return -1;
    }
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->nl = LLM_TOKEN_NULL;
    int32_t fim_pre = LLM_TOKEN_NULL, fim_suf = LLM_TOKEN_NULL, fim_mid = LLM_TOKEN_NULL;
    int32_t fim_pad = LLM_TOKEN_NULL, fim_rep = LLM_TOKEN_NULL, fim_sep = LLM_TOKEN_NULL;
    snprintf(v->pre_name, sizeof v->pre_name, "default");
    if (!strcmp(model, "llama")) {
        v->type = LLM_VOCAB_SPM;
        v->bos = 1, v->eos = 2, v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (!strcmp(model, "gpt2")) {
        v->type = LLM_VOCAB_BPE;
        v->bos = 11, v->eos = 11;
        v->clean_spaces = true;
        if (llm_gguf_find_str(g, "tokenizer.ggml.pre", &s) == 0) {
            snprintf(v->pre_name, sizeof v->pre_name, "%.*s", (int)(s.len < 31 ? s.len : 31),
                     s.ptr);
            size_t i, np = sizeof pre_names / sizeof pre_names[0];
            for (i = 0; i < np; i++)
                if (strlen(pre_names[i].name) == s.len && !memcmp(pre_names[i].name, s.ptr, s.len))
                    break;
            if (i == np) {
                seterr(err, es, "unknown pre-tokenizer '%s'", v->pre_name);
                llm_vocab_free(v);
                return -1;
            }
            v->pre = pre_names[i].pre;
            unsigned fl = pre_names[i].flags;
            if (fl & KEEP_SPACES)
                v->clean_spaces = false;
            if (fl & IGNORE_MERGES)
                v->ignore_merges = true;
            if (fl & ADD_BOS)
                v->add_bos = true;
            if (fl & NO_BOS)
                v->bos = LLM_TOKEN_NULL;
        }
    } else if (!strcmp(model, "gemma4")) {
        /* Gemma 4 (llama.cpp's llama-vocab.cpp, tokenizer "gemma4"): BPE
         * merges over raw UTF-8 after spaces become U+2581, split only
         * into runs of newlines and runs of other text; no default ids */
        v->type = LLM_VOCAB_BPE;
        v->pre = LLM_PRE_GEMMA4;
        snprintf(v->pre_name, sizeof v->pre_name, "gemma4");
        v->escape_spaces = true;
        v->clean_spaces = true;
        v->add_bos = true;
    } else {
        seterr(err, es, "unsupported tokenizer '%s' (kvchat reads 'llama', 'gpt2' and 'gemma4')", model);
        llm_vocab_free(v);
        return -1;
    }
    v->add_space_prefix = kv_int(g, "tokenizer.ggml.add_space_prefix", v->add_space_prefix) != 0;

    if (load_tokens(v, g, err, es) < 0) {
        llm_vocab_free(v);
        return -1;
    }
    int32_t n = v->n_tokens;
    /* default ids beyond the vocabulary are dropped */
    int32_t *ids[] = {&v->bos, &v->eos, &v->unk};
    for (size_t i = 0; i < 3; i++)
        if (*ids[i] >= n)
            *ids[i] = LLM_TOKEN_NULL;
    kv_id(g, "tokenizer.ggml.bos_token_id", n, &v->bos);
    kv_id(g, "tokenizer.ggml.eos_token_id", n, &v->eos);
    kv_id(g, "tokenizer.ggml.eot_token_id", n, &v->eot);
    kv_id(g, "tokenizer.ggml.eom_token_id", n, &v->eom);
    kv_id(g, "tokenizer.ggml.unknown_token_id", n, &v->unk);
    kv_id(g, "tokenizer.ggml.seperator_token_id", n, &v->sep);
    kv_id(g, "tokenizer.ggml.padding_token_id", n, &v->pad);
    kv_id(g, "tokenizer.ggml.fim_pre_token_id", n, &fim_pre);
    kv_id(g, "tokenizer.ggml.fim_suf_token_id", n, &fim_suf);
    kv_id(g, "tokenizer.ggml.fim_mid_token_id", n, &fim_mid);
    kv_id(g, "tokenizer.ggml.fim_pad_token_id", n, &fim_pad);
    kv_id(g, "tokenizer.ggml.fim_rep_token_id", n, &fim_rep);
    kv_id(g, "tokenizer.ggml.fim_sep_token_id", n, &fim_sep);
    kv_id(g, "tokenizer.ggml.prefix_token_id", n, &fim_pre);
    kv_id(g, "tokenizer.ggml.suffix_token_id", n, &fim_suf);
    kv_id(g, "tokenizer.ggml.middle_token_id", n, &fim_mid);
    v->add_bos = kv_int(g, "tokenizer.ggml.add_bos_token", v->add_bos) != 0;
    v->add_eos = kv_int(g, "tokenizer.ggml.add_eos_token", v->add_eos) != 0;
    if (v->pre == LLM_PRE_GEMMA4)
        v->add_bos = true; /* llama.cpp overrides a false add_bos_token for Gemma 4 */

    detect(v, &v->eot, eot_texts);
    detect(v, &v->eom, eom_texts);
    detect(v, &fim_pre, fim_pre_texts);
    detect(v, &fim_suf, fim_suf_texts);
    detect(v, &fim_mid, fim_mid_texts);
    detect(v, &fim_pad, fim_pad_texts);
    detect(v, &fim_rep, fim_rep_texts);
    detect(v, &fim_sep, fim_sep_texts);
    /* control tokens named "unused" are unused */
    for (int32_t i = 0; i < n; i++)
        if ((v->tokens[i].attr & LLM_TOKEN_ATTR_CONTROL) && strstr(llm_tok_text(v, &v->tokens[i]), "unused"))
            v->tokens[i].attr |= LLM_TOKEN_ATTR_UNUSED;

    /* end-of-generation tokens */
    v->eog = malloc((size_t)n * sizeof *v->eog);
    if (!v->eog) {
        seterr(err, es, "%s", "out of memory");
        llm_vocab_free(v);
        return -1;
    }
    eog_add(v, fim_pad);
    eog_add(v, fim_rep);
    eog_add(v, fim_sep);
    for (int32_t i = 0; i < n; i++)
        if (text_in(v, &v->tokens[i], eog_texts)) {
            eog_add(v, i);
            v->tokens[i].attr |= LLM_TOKEN_ATTR_CONTROL;
        }
    for (int32_t i = 0; i < n; i++) {
        struct llm_token_data *t = &v->tokens[i];
        if (text_is(v, t, "<|channel|>") || text_is(v, t, "<|message|>") || text_is(v, t, "<|start|>") ||
            text_is(v, t, "<|constrain|>"))
            t->attr = LLM_TOKEN_ATTR_USER_DEFINED;
    }
    eog_add(v, v->eos);
    eog_add(v, v->eot);
    eog_add(v, v->eom);
    {   /* harmony-style vocabularies: <|end|> ends a message, not generation */
        int32_t end = eog_find_text(v, "<|end|>");
        bool ret = eog_find_text(v, "<|return|>") != LLM_TOKEN_NULL;
        bool call = eog_find_text(v, "<|call|>") != LLM_TOKEN_NULL ||
                    eog_find_text(v, "<|calls|>") != LLM_TOKEN_NULL;
        bool flush = eog_find_text(v, "<|flush|>") != LLM_TOKEN_NULL;
        if (end != LLM_TOKEN_NULL && ((ret && call) || (call && flush))) {
            eog_remove(v, end);
            v->tokens[end].attr = LLM_TOKEN_ATTR_USER_DEFINED;
        }
        int32_t s_id = eog_find_text(v, "</s>");
        if (s_id != LLM_TOKEN_NULL && eog_find_text(v, "<|tool_response>") != LLM_TOKEN_NULL) {
            eog_remove(v, s_id);
            v->tokens[s_id].attr = LLM_TOKEN_ATTR_NORMAL;
        }
    }
    qsort(v->eog, (size_t)v->n_eog, sizeof *v->eog, cmp_id);

    /* the special tokens, longest first */
    v->special = malloc((size_t)n * sizeof *v->special);
    if (!v->special) {
        seterr(err, es, "%s", "out of memory");
        llm_vocab_free(v);
        return -1;
    }
    struct len_id *order = malloc((size_t)n * sizeof *order);
    if (!order) {
        seterr(err, es, "%s", "out of memory");
        llm_vocab_free(v);
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        if (v->tokens[i].attr &
            (LLM_TOKEN_ATTR_CONTROL | LLM_TOKEN_ATTR_USER_DEFINED | LLM_TOKEN_ATTR_UNKNOWN))
            order[v->n_special++] = (struct len_id){v->tokens[i].len, i};
    qsort(order, (size_t)v->n_special, sizeof *order, cmp_special);
    for (int32_t i = 0; i < v->n_special; i++)
        v->special[i] = order[i].id;
    free(order);

    /* Phi-3 models: special tokens eat the white space to their right */
    if (llm_gguf_find_str(g, "general.name", &s) == 0) {
        char name[128];
        size_t k = s.len < sizeof name - 1 ? s.len : sizeof name - 1;
        for (size_t i = 0; i < k; i++)
            name[i] = (char)tolower((unsigned char)s.ptr[i]);
        name[k] = 0;
        if (strstr(name, "phi-3") || strstr(name, "phi3")) {
            for (int32_t i = 0; i < v->n_special; i++)
                v->tokens[v->special[i]].attr |= LLM_TOKEN_ATTR_RSTRIP;
            int32_t id;
            if ((id = llm_token_find(v, "</s>", 4)) >= 0)
                v->tokens[id].attr |= LLM_TOKEN_ATTR_RSTRIP;
            const char *keep[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (size_t i = 0; i < 3; i++)
                if ((id = llm_token_find(v, keep[i], strlen(keep[i]))) >= 0)
                    v->tokens[id].attr &= ~(uint32_t)LLM_TOKEN_ATTR_RSTRIP;
        }
    }

    /* the newline token */
    if (v->type == LLM_VOCAB_SPM) {
        v->nl = llm_token_find(v, "<0x0A>", 6);
        if (v->nl < 0)
            v->nl = llm_token_find(v, "\n", 1);
        if (v->nl < 0)
            v->nl = v->pad;
    } else {
        int32_t t[8];
        int32_t k = llm_tokenize(v, "\n", 1, t, 8, false, false);
        v->nl = k > 0 ? t[0] : v->pad;
    }
    *out = v;
    return 0;
}

void llm_vocab_free(struct llm_vocab *v)
{
    if (!v)
        return;
    if (v->mem)
        munmap(v->mem, v->mem_bytes);
    if (!v->from_cache) { /* else they lay in the mapping */
        free(v->special);
        free(v->eog);
    }
    free(v);
}

enum llm_vocab_type llm_vocab_type(const struct llm_vocab *v) { return v->type; }
const char *llm_vocab_pre(const struct llm_vocab *v) { return v->pre_name; }
int32_t llm_vocab_n_tokens(const struct llm_vocab *v) { return v->n_tokens; }
int32_t llm_vocab_bos(const struct llm_vocab *v) { return v->bos; }
int32_t llm_vocab_eos(const struct llm_vocab *v) { return v->eos; }
int32_t llm_vocab_eot(const struct llm_vocab *v) { return v->eot; }
int32_t llm_vocab_unk(const struct llm_vocab *v) { return v->unk; }
int32_t llm_vocab_pad(const struct llm_vocab *v) { return v->pad; }
int32_t llm_vocab_nl(const struct llm_vocab *v) { return v->nl; }
bool llm_vocab_add_bos(const struct llm_vocab *v) { return v->add_bos; }
bool llm_vocab_add_eos(const struct llm_vocab *v) { return v->add_eos; }

bool llm_vocab_is_eog(const struct llm_vocab *v, int32_t id)
{
    return id >= 0 && bsearch(&id, v->eog, (size_t)v->n_eog, sizeof id, cmp_id) != NULL;
}

int32_t llm_vocab_eog_ids(const struct llm_vocab *v, const int32_t **ids)
{
    *ids = v->eog;
    return v->n_eog;
}

uint32_t llm_token_attr(const struct llm_vocab *v, int32_t id)
{
    return id >= 0 && id < v->n_tokens ? v->tokens[id].attr : 0;
}

const char *llm_token_text(const struct llm_vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n_tokens)
        return NULL;
    if (len)
        *len = v->tokens[id].len;
    return llm_tok_text(v, &v->tokens[id]);
}

/* ==== tokenizing: the split around special tokens ==== */

/* A fragment is raw text [off, off+len) or a special token id. */
struct frag {
    size_t off, len;
    int32_t id; /* LLM_TOKEN_NULL for raw text */
};

struct fragbuf {
    struct frag *f;
    size_t n, cap;
};

static bool frag_push(struct fragbuf *b, size_t off, size_t len, int32_t id)
{
    if (base_grow((void **)&b->f, &b->cap, b->n + 1, sizeof *b->f))
        return false;
    b->f[b->n++] = (struct frag){off, len, id};
    return true;
}

static bool is_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Replace each occurrence of special token id in the raw fragments of *a,
 * left to right, writing the result to *b (llama.cpp's
 * tokenizer_st_partition, one token at a time, longest token first). */
/* does [at, at+n) touch one of the plain (user text) ranges? */
static bool in_plain(size_t at, size_t n, const size_t *plain, size_t n_plain)
{
    for (size_t i = 0; i < n_plain; i++)
        if (at < plain[2 * i + 1] && plain[2 * i] < at + n)
            return true;
    return false;
}

static bool split_special(const struct llm_vocab *v, const char *text, int32_t id,
                          struct fragbuf *a, struct fragbuf *b, const size_t *plain,
                          size_t n_plain)
{
    const struct llm_token_data *t = &v->tokens[id];
    b->n = 0;
    for (size_t i = 0; i < a->n; i++) {
        struct frag f = a->f[i];
        if (f.id != LLM_TOKEN_NULL || f.len < t->len) {
            if (!frag_push(b, f.off, f.len, f.id))
                return false;
            continue;
        }
        size_t off = f.off, len = f.len, from = f.off;
        for (;;) {
            size_t rest = off + len - from;
            const char *m = rest >= t->len ? memmem(text + from, rest, llm_tok_text(v, t), t->len) : NULL;
            if (!m) {
                if (len > 0 && !frag_push(b, off, len, LLM_TOKEN_NULL))
                    return false;
                break;
            }
            size_t at = (size_t)(m - text);
            if (n_plain && in_plain(at, t->len, plain, n_plain)) {
                from = at + 1; /* user text: not this occurrence */
                continue;
            }
            size_t left = at - off;
            if (t->attr & LLM_TOKEN_ATTR_LSTRIP)
                while (left > 0 && is_space(text[off + left - 1]))
                    left--;
            if (left > 0 && !frag_push(b, off, left, LLM_TOKEN_NULL))
                return false;
            if (!frag_push(b, 0, 0, id))
                return false;
            size_t roff = at + t->len, rlen = off + len - roff;
            if (t->attr & LLM_TOKEN_ATTR_RSTRIP)
                while (rlen > 0 && is_space(text[roff]))
                    roff++, rlen--;
            off = from = roff;
            len = rlen;
            if (len == 0)
                break;
        }
    }
    return true;
}

struct llm_tokenize_params llm_tokenize_default_params(void)
{
    return (struct llm_tokenize_params){.add_special = true, .parse_special = false,
                                        .prev = LLM_TOKEN_NULL, .plain = NULL, .n_plain = 0};
}

int32_t llm_tokenize(const struct llm_vocab *v, const char *text, size_t len, int32_t *tokens,
                     int32_t n_max, bool add_special, bool parse_special)
{
    struct llm_tokenize_params p = llm_tokenize_default_params();
    p.add_special = add_special;
    p.parse_special = parse_special;
    return llm_tokenize_ex(v, text, len, tokens, n_max, &p);
}

int32_t llm_tokenize_ex(const struct llm_vocab *v, const char *text, size_t len, int32_t *tokens,
                        int32_t n_max, const struct llm_tokenize_params *p)
{
    struct fragbuf a = {0}, b = {0};
    struct llm_tokbuf out = {0};
    int32_t ret = INT32_MIN;
    bool add_special = p->add_special, parse_special = p->parse_special;
    /* after a special token: the white space it eats, and SentencePiece's
     * leading space; after an ordinary token: no leading space */
    bool prev_special = true;
    size_t start = 0;
    if (p->prev >= 0 && p->prev < v->n_tokens) {
        uint32_t pa = v->tokens[p->prev].attr;
        prev_special = (pa & (LLM_TOKEN_ATTR_CONTROL | LLM_TOKEN_ATTR_USER_DEFINED |
                              LLM_TOKEN_ATTR_UNKNOWN)) != 0;
        if (prev_special && (pa & LLM_TOKEN_ATTR_RSTRIP))
            while (start < len && is_space(text[start]))
                start++;
    }
    if (len > start) {
        if (!frag_push(&a, start, len - start, LLM_TOKEN_NULL))
            goto done;
        /* which bytes and byte pairs the text has: a special token with a
         * byte or pair the text lacks cannot occur in it (this keeps the
         * one-token-at-a-time split below fast with hundreds of special
         * tokens and long texts) */
        uint64_t *pairs = calloc(1024, sizeof *pairs);
        uint64_t bytes[4] = {0};
        if (!pairs)
            goto done;
        for (size_t j = start; j < len; j++) {
            unsigned c0 = (unsigned char)text[j];
            bytes[c0 >> 6] |= 1ull << (c0 & 63);
            if (j + 1 < len) {
                unsigned pr = c0 << 8 | (unsigned char)text[j + 1];
                pairs[pr >> 6] |= 1ull << (pr & 63);
            }
        }
        bool ok = true;
        for (int32_t i = 0; i < v->n_special && ok; i++) {
            int32_t id = v->special[i];
            uint32_t attr = v->tokens[id].attr;
            bool control = attr & (LLM_TOKEN_ATTR_CONTROL | LLM_TOKEN_ATTR_UNKNOWN);
            if (!parse_special && control)
                continue;
            const unsigned char *tt = (const unsigned char *)llm_tok_text(v, &v->tokens[id]);
            uint32_t tl = v->tokens[id].len;
            bool maybe = tl <= len - start && (bytes[tt[0] >> 6] >> (tt[0] & 63) & 1);
            for (uint32_t j = 0; maybe && j + 1 < tl; j++) {
                unsigned pr = (unsigned)tt[j] << 8 | tt[j + 1];
                maybe = pairs[pr >> 6] >> (pr & 63) & 1;
            }
            if (!maybe)
                continue;
            if (!split_special(v, text, id, &a, &b, control ? p->plain : NULL,
                               control ? p->n_plain : 0)) {
                ok = false;
                break;
            }
            struct fragbuf t = a;
            a = b;
            b = t;
        }
        free(pairs);
        if (!ok)
            goto done;
    }
    if (add_special && v->add_bos && v->bos != LLM_TOKEN_NULL)
        llm_tokbuf_push(&out, v->bos);
    if (v->type == LLM_VOCAB_SPM) {
        /* a raw fragment at the start or after a special token gets the
         * leading space SentencePiece expects */
        char *tmp = NULL;
        size_t tmp_cap = 0;
        for (size_t i = 0; i < a.n; i++) {
            struct frag f = a.f[i];
            if (f.id != LLM_TOKEN_NULL) {
                llm_tokbuf_push(&out, f.id);
                prev_special = true;
                continue;
            }
            /* escape spaces as U+2581 (3 bytes) */
            size_t need = 3 * (f.len + 1);
            if (need > tmp_cap) {
                free(tmp);
                tmp = malloc(need);
                tmp_cap = tmp ? need : 0;
                if (!tmp) {
                    out.oom = true;
                    break;
                }
            }
            size_t k = 0;
            if (v->add_space_prefix && prev_special)
                memcpy(tmp + k, "\xe2\x96\x81", 3), k += 3;
            for (size_t j = 0; j < f.len; j++) {
                char c = text[f.off + j];
                if (c == ' ')
                    memcpy(tmp + k, "\xe2\x96\x81", 3), k += 3;
                else
                    tmp[k++] = c;
            }
            llm_spm_tokenize(v, tmp, k, &out);
            prev_special = false;
        }
        free(tmp);
    } else {
        for (size_t i = 0; i < a.n; i++) {
            struct frag f = a.f[i];
            if (f.id != LLM_TOKEN_NULL) {
                llm_tokbuf_push(&out, f.id);
            } else if (v->escape_spaces) {
                /* gemma4: spaces as U+2581 (3 bytes), then the merges */
                char *tmp = malloc(3 * f.len + 1);
                if (!tmp) {
                    out.oom = true;
                    break;
                }
                size_t k = 0;
                for (size_t j = 0; j < f.len; j++) {
                    if (text[f.off + j] == ' ')
                        memcpy(tmp + k, "\xe2\x96\x81", 3), k += 3;
                    else
                        tmp[k++] = text[f.off + j];
                }
                llm_bpe_tokenize(v, tmp, k, &out);
                free(tmp);
            } else {
                llm_bpe_tokenize(v, text + f.off, f.len, &out);
            }
        }
    }
    if (add_special && v->add_eos && v->eos != LLM_TOKEN_NULL)
        llm_tokbuf_push(&out, v->eos);
    if (out.oom || out.n > INT32_MAX)
        goto done;
    if (out.n > (size_t)(n_max < 0 ? 0 : n_max)) {
        ret = -(int32_t)out.n;
        goto done;
    }
    if (out.n)
        memcpy(tokens, out.ids, out.n * sizeof *tokens);
    ret = (int32_t)out.n;
done:
    BASE_FREE(a.f, b.f, out.ids);
    return ret;
}

/* ==== detokenizing ==== */

static int32_t copy_piece(const char *s, size_t n, char *buf, int32_t size, int32_t lstrip)
{
    for (int32_t i = 0; i < lstrip && n && *s == ' '; i++)
        s++, n--;
    if (n > (size_t)INT32_MAX)
        return 0;
    if (n == 0)
        return 0;
    if (size < 0 || (size_t)size < n)
        return -(int32_t)n;
    memcpy(buf, s, n);
    return (int32_t)n;
}

int32_t llm_token_to_piece(const struct llm_vocab *v, int32_t id, char *buf, int32_t size,
                           int32_t lstrip, bool special)
{
    if (id < 0 || id >= v->n_tokens)
        return 0;
    const struct llm_token_data *t = &v->tokens[id];
    const char *tt = llm_tok_text(v, t);
    uint32_t attr = t->attr;
    if (!special && (attr & (LLM_TOKEN_ATTR_UNKNOWN | LLM_TOKEN_ATTR_CONTROL)))
        return 0;
    if (attr & (LLM_TOKEN_ATTR_UNKNOWN | LLM_TOKEN_ATTR_CONTROL | LLM_TOKEN_ATTR_USER_DEFINED))
        return copy_piece(tt, t->len, buf, size, lstrip);
    if (attr & LLM_TOKEN_ATTR_NORMAL) {
        /* SPM: ▁ -> ' '; BPE: each code point stands for one byte, and one
         * that stands for none becomes "[UNK_BYTE_0x<utf-8 hex>" + the
         * token's text + "]", as llama.cpp writes it. First the size, then
         * the text. */
        size_t need = 0;
        if (v->type == LLM_VOCAB_SPM || v->escape_spaces) {
            need = t->len;
        } else {
            for (size_t i = 0; i < t->len;) {
                uint32_t cp = llm_utf8_decode(tt, t->len, &i);
                need += llm_cp_to_byte(cp) >= 0 ? 1 : 12 + 8 + t->len + 1;
            }
        }
        char tmp[512] = {0};
        char *o = need <= sizeof tmp ? tmp : malloc(need);
        if (!o)
            return 0;
        size_t k = 0;
        if (v->type == LLM_VOCAB_SPM || v->escape_spaces) {
            for (size_t i = 0; i < t->len;) {
                if (i + 3 <= t->len && !memcmp(tt + i, "\xe2\x96\x81", 3))
                    o[k++] = ' ', i += 3;
                else
                    o[k++] = tt[i++];
            }
        } else {
            for (size_t i = 0; i < t->len;) {
                uint32_t cp = llm_utf8_decode(tt, t->len, &i);
                int byte = llm_cp_to_byte(cp);
                if (byte >= 0) {
                    o[k++] = (char)byte;
                    continue;
                }
                char enc[4];
                size_t ne = llm_utf8_encode(cp, enc);
                memcpy(o + k, "[UNK_BYTE_0x", 12);
                k += 12;
                for (size_t j = 0; j < ne; j++) {
                    static const char hex[] = "0123456789abcdef";
                    o[k++] = hex[(unsigned char)enc[j] >> 4];
                    o[k++] = hex[(unsigned char)enc[j] & 15];
                }
                memcpy(o + k, tt, t->len);
                k += t->len;
                o[k++] = ']';
            }
        }
        int32_t r = copy_piece(o, k, buf, size, lstrip);
        if (o != tmp)
            free(o);
        return r;
    }
    if (attr & LLM_TOKEN_ATTR_BYTE) {
        char c = 0;
        if (t->len >= 5) {
            int hi = base_hexval(tt[3]), lo = base_hexval(tt[4]);
            c = (char)((hi < 0 ? 0 : hi) << 4 | (lo < 0 ? 0 : lo));
        }
        return copy_piece(&c, 1, buf, size, lstrip);
    }
    return 0;
}

int32_t llm_detokenize(const struct llm_vocab *v, const int32_t *tokens, int32_t n, char *buf,
                       int32_t size, bool remove_special, bool unparse_special)
{
    int32_t avail = size < 0 ? 0 : size, total = 0;
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n > 0 && tokens[0] == v->bos) {
        remove_space = false;
        n--;
        tokens++;
    }
    if (remove_special && v->add_eos && n > 0 && tokens[n - 1] == v->eos)
        n--;
    char *text = buf;
    for (int32_t i = 0; i < n; i++) {
        int32_t k = llm_token_to_piece(v, tokens[i], text, avail, remove_space, unparse_special);
        remove_space = false;
        if (k < 0) {
            avail = 0;
            total -= k;
        } else if (k > 0) {
            avail -= k;
            text += k;
            total += k;
        }
    }
    if (total > size)
        return -total;
    if (v->clean_spaces) {
        /* llama.cpp's three passes: drop the space before ?!., ; around a
         * lone apostrophe; before 's 'm 're 've */
        char *t = buf;
        int32_t n1 = total;
        total = n1 ? 1 : 0;
        for (int32_t i = 1; i < n1; i++) {
            char x = t[i];
            if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
                total--;
            t[total++] = x;
        }
        int32_t n2 = total;
        total = n2 ? 1 : 0;
        for (int32_t i = 1; i < n2; i++) {
            char x = t[i];
            if (x == '\'' && i + 1 < n2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
                total--;
                t[++i] = 0;
            }
            t[total++] = x;
        }
        int32_t n3 = total;
        total = n3 ? 1 : 0;
        for (int32_t i = 1; i < n3; i++) {
            char x = t[i];
            if (t[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
                char x1 = t[i + 1];
                if (x1 == 's' || x1 == 'm')
                    total--;
                else if (i + 2 < n3 && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e')))
                    total--;
            }
            t[total++] = x;
        }
    }
    return total;
}

/* ==== streaming detokenizer ==== */

struct llm_detok {
    const struct llm_vocab *v;
    struct llm_detok_params p;
    bool first;
    char *buf;      /* held bytes, then the new piece */
    size_t n, cap;  /* bytes in buf */
    char *ready;    /* what the last call returned */
    size_t ready_cap;
};

struct llm_detok_params llm_detok_default_params(void)
{
    return (struct llm_detok_params){.special = false, .strip_space = false};
}

struct llm_detok *llm_detok_init(const struct llm_vocab *v, struct llm_detok_params p)
{
    struct llm_detok *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->v = v;
    d->p = p;
    d->first = true;
    return d;
}

void llm_detok_free(struct llm_detok *d)
{
    if (!d)
        return;
    BASE_FREE(d->buf, d->ready, d);
}

static bool grow(char **p, size_t *cap, size_t need)
{
    return base_grow((void **)p, cap, need, 1) == 0;
}

/* length of the prefix of s made of complete UTF-8 characters; a sequence
 * that can never complete (a bad lead or continuation) counts as complete */
static size_t complete_prefix(const char *s, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4) {
        unsigned char c = (unsigned char)s[i - 1];
        if ((c & 0xC0) != 0x80) { /* a lead or ASCII byte */
            size_t want = c < 0x80 ? 1 : c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if (c >= 0xF8)
                want = 1;
            return want > back + 1 ? i - 1 : n;
        }
        i--;
        back++;
    }
    return n;
}

size_t llm_detok_push(struct llm_detok *d, int32_t id, const char **out)
{
    char piece[256];
    int32_t k = llm_token_to_piece(d->v, id, piece, sizeof piece,
                                   d->first && d->p.strip_space, d->p.special);
    const char *src = piece;
    char *heap = NULL;
    if (k < 0) {
        heap = malloc((size_t)-k);
        if (heap)
            k = llm_token_to_piece(d->v, id, heap, -k, d->first && d->p.strip_space, d->p.special);
        else
            k = 0;
        src = heap;
    }
    if (k > 0)
        d->first = false;
    if (!grow(&d->buf, &d->cap, d->n + (size_t)k + 1)) {
        free(heap);
        *out = "";
        return 0;
    }
    memcpy(d->buf + d->n, src, (size_t)k);
    d->n += (size_t)k;
    free(heap);
    size_t r = complete_prefix(d->buf, d->n);
    if (!grow(&d->ready, &d->ready_cap, r + 1)) {
        *out = "";
        return 0;
    }
    memcpy(d->ready, d->buf, r);
    memmove(d->buf, d->buf + r, d->n - r);
    d->n -= r;
    *out = d->ready;
    return r;
}

size_t llm_detok_flush(struct llm_detok *d, const char **out)
{
    if (!grow(&d->ready, &d->ready_cap, d->n + 1)) {
        *out = "";
        return 0;
    }
    if (d->n)
        memcpy(d->ready, d->buf, d->n);
    size_t r = d->n;
    d->n = 0;
    *out = d->ready;
    return r;
}
