/*
 * grammar-gen.c - answers under grammars, many at once, for the validity
 * tests (t0900): one model load, then for each grammar a fresh context, a
 * short prompt, and up to N tokens sampled with the grammar's mask, exactly
 * as a conversation samples them (llm_matcher_mask, then
 * llm_sampler_sample_masked). One JSON line per grammar on stdout:
 *   {"file": F, "text": T, "complete": true|false, "stop": "stop"|"length"|"grammar",
 *    "tokens": N, "nodes": trie nodes visited, "masks": M, "hits": cached masks,
 *    "mask_ms", "sample_ms", "decode_ms": time in masking, in the masked sampler
 *    and in decoding (for bench/bench-grammar.sh; never asserted)}
 * GEN_THREADS sets the decode threads (default 1), GEN_CTX the context.
 * ARG is a .gbnf file, a .json schema, or "json" (--format json).
 *
 * usage: grammar-gen MODEL N_PREDICT SEED|greedy ARG...
 */
#include "core/llm.h"
#include "tests/json-out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += k;
        if (len + 1 == cap) {
            char *q = realloc(b, cap *= 2);
            if (!q) {
                free(b);
                b = NULL;
            }
            b = q;
        }
    }
    fclose(f);
    if (b)
        b[len] = 0;
    *n = len;
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: grammar-gen MODEL N_PREDICT SEED|greedy ARG...\n");
        return 2;
    }
    char err[1024];
    struct llm_model *m;
    if (llm_model_open(argv[1], llm_model_default_params(), &m, err, sizeof err)) {
        fprintf(stderr, "grammar-gen: %s\n", err);
        return 2;
    }
    struct llm_vocab *v;
    if (llm_vocab_load(llm_model_gguf(m), &v, err, sizeof err)) {
        fprintf(stderr, "grammar-gen: %s\n", err);
        return 2;
    }
    int n_predict = atoi(argv[2]);
    struct llm_sampler_params sp = llm_sampler_default_params();
    if (!strcmp(argv[3], "greedy"))
        sp.temp = 0;
    else
        sp.seed = strtoull(argv[3], NULL, 10), sp.temp = 1.0f, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0;
    int64_t nv = llm_model_n_vocab(m);
    uint32_t *mask = malloc(((size_t)nv + 31) / 32 * sizeof *mask);
    int32_t prompt[64];
    int32_t np = llm_tokenize(v, "Answer:", 7, prompt, 64, true, false);
    struct llm_matcher *mt = NULL;
    for (int a = 4; a < argc; a++) {
        char *gbnf = NULL, *text = NULL;
        size_t len = 0;
        const char *arg = argv[a];
        size_t al = strlen(arg);
        if (!strcmp(arg, "json")) {
            gbnf = strdup(llm_grammar_json());
        } else if (al > 5 && !strcmp(arg + al - 5, ".json")) {
            text = slurp(arg, &len);
            if (!text || llm_json_schema_to_grammar(text, len, &gbnf, err, sizeof err)) {
                printf("{\"file\": \"%s\", \"error\": ", arg);
                json_str(text ? err : "unreadable", strlen(text ? err : "unreadable"));
                printf("}\n");
                free(text);
                continue;
            }
        } else {
            gbnf = slurp(arg, &len);
        }
        const char *dump = getenv("GRAMMAR_DUMP"); /* the GBNF used, for the checker */
        if (dump && gbnf) {
            const char *base = strrchr(arg, '/') ? strrchr(arg, '/') + 1 : arg;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.gbnf", dump, base);
            FILE *df = fopen(path, "wb");
            if (df) {
                fputs(gbnf, df);
                fclose(df);
            }
        }
        struct llm_grammar *g = NULL;
        if (!gbnf || llm_grammar_parse(gbnf, strlen(gbnf), &g, err, sizeof err)) {
            printf("{\"file\": \"%s\", \"error\": ", arg);
            json_str(gbnf ? err : "unreadable", strlen(gbnf ? err : "unreadable"));
            printf("}\n");
            free(gbnf);
            free(text);
            continue;
        }
        if (!mt)
            mt = llm_matcher_init(g, v);
        else
            llm_matcher_set_grammar(mt, g);
        struct llm_matcher_stats st0 = mt ? llm_matcher_get_stats(mt) : (struct llm_matcher_stats){0};
        struct llm_ctx_params cp = llm_ctx_default_params();
        cp.n_ctx = 64 + n_predict;
        cp.n_threads = getenv("GEN_THREADS") ? atoi(getenv("GEN_THREADS")) : 1;
        struct llm_ctx *ctx;
        struct llm_sampler *s = llm_sampler_init(sp, nv);
        if (!mt || !s || llm_ctx_init(m, cp, &ctx, err, sizeof err) || llm_ctx_decode(ctx, prompt, np)) {
            fprintf(stderr, "grammar-gen: cannot start '%s'\n", arg);
            return 2;
        }
        char out[65536];
        size_t on = 0;
        const char *stop = "length";
        int n = 0;
        double t_mask = 0, t_sample = 0, t_decode = 0;
        for (; n < n_predict; n++) {
            double t0 = now_ms();
            if (llm_matcher_mask(mt, mask) < 0)
                return 2;
            double t1 = now_ms();
            int32_t t = llm_sampler_sample_masked(s, llm_ctx_logits(ctx), mask);
            t_mask += t1 - t0;
            t_sample += now_ms() - t1;
            if (t < 0) {
                stop = "grammar";
                break;
            }
            if (llm_matcher_accept(mt, t)) {
                fprintf(stderr, "grammar-gen: '%s': the matcher refused token %d its mask allowed\n", arg, t);
                return 2;
            }
            if (llm_vocab_is_eog(v, t)) {
                stop = "stop";
                break;
            }
            char piece[512];
            int32_t k = llm_token_to_piece(v, t, piece, sizeof piece, 0, false);
            if (k > 0 && on + (size_t)k < sizeof out) {
                memcpy(out + on, piece, (size_t)k);
                on += (size_t)k;
            }
            if (llm_matcher_done(mt)) { /* as a conversation does: nothing can follow */
                stop = "stop";
                n++;
                break;
            }
            double t2 = now_ms();
            if (llm_ctx_decode(ctx, &t, 1))
                return 2;
            t_decode += now_ms() - t2;
        }
        struct llm_matcher_stats st = llm_matcher_get_stats(mt);
        printf("{\"file\": \"%s\", \"text\": ", arg);
        json_str(out, on);
        printf(", \"complete\": %s, \"stop\": \"%s\", \"tokens\": %d, \"nodes\": %llu, \"masks\": %llu, "
               "\"hits\": %llu, \"trie\": %d, \"mask_ms\": %.3f, \"sample_ms\": %.3f, \"decode_ms\": %.3f}\n",
               !strcmp(stop, "stop") && llm_matcher_can_end(mt) ? "true" : "false", stop, n,
               (unsigned long long)(st.nodes - st0.nodes), (unsigned long long)(st.masks - st0.masks),
               (unsigned long long)(st.cache_hits - st0.cache_hits),
               llm_matcher_trie_nodes(mt), t_mask, t_sample, t_decode);
        fflush(stdout);
        llm_ctx_free(ctx);
        llm_sampler_free(s);
        llm_grammar_free(g);
        free(gbnf);
        free(text);
    }
    free(mask);
    llm_matcher_free(mt);
    llm_vocab_free(v);
    llm_model_close(m);
    return 0;
}
