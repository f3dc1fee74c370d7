/*
 * bench_search.c - (a benchmark, not a test; `make bench` runs it) how long
 * `kvchat sessions search` takes on a big store: --sessions sessions
 * (default 1,000) of --messages messages each (20), written as turns write
 * them (one transaction per session, the full-text index kept by its
 * triggers), each message 20 to 80 words drawn with a Zipf law from 200
 * common English words and 5,000 rarer made-up ones. Then, for queries from
 * the commonest word to one no message has, the time of sess_search in the
 * process (the median of --runs, default 21; the store opened once, page
 * cache warm) and the number of hits (the default limit of 20, and all).
 * `bench/bench-search.sh` adds the time of the whole command.
 *
 *   bench/bench_search [--sessions N] [--messages M] [--runs R] [--keep] DIR
 *
 * DIR is made (it must not exist) and removed after, unless --keep.
 */
#include "sessions/sess-int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const common[] = {
    "the", "be", "to", "of", "and", "a", "in", "that", "have", "it", "for", "not", "on", "with", "he", "as",
    "you", "do", "at", "this", "but", "his", "by", "from", "they", "we", "say", "her", "she", "or", "an",
    "will", "my", "one", "all", "would", "there", "their", "what", "so", "up", "out", "if", "about", "who",
    "get", "which", "go", "me", "when", "make", "can", "like", "time", "no", "just", "him", "know", "take",
    "people", "into", "year", "your", "good", "some", "could", "them", "see", "other", "than", "then", "now",
    "look", "only", "come", "its", "over", "think", "also", "back", "after", "use", "two", "how", "our",
    "work", "first", "well", "way", "even", "new", "want", "because", "any", "these", "give", "day", "most",
    "us", "code", "file", "error", "function", "model", "memory", "python", "list", "string", "value",
    "train", "city", "trip", "hotel", "museum", "recipe", "bread", "flour", "butter", "oven", "minutes",
    "question", "answer", "example", "problem", "because", "should", "write", "read", "test", "build",
    "server", "client", "request", "response", "network", "cache", "disk", "thread", "lock", "queue",
    "garden", "tomato", "water", "soil", "summer", "winter", "river", "mountain", "walk", "map", "ticket",
    "price", "money", "bank", "account", "letter", "email", "meeting", "week", "month", "morning", "evening",
    "night", "coffee", "tea", "milk", "sugar", "salt", "pepper", "onion", "garlic", "lemon", "apple", "song",
    "guitar", "piano", "book", "chapter", "story", "poem", "history", "war", "king", "queen", "church",
    "school", "teacher", "student", "class", "math", "number", "table", "chair", "door", "window",
};
#define N_COMMON (sizeof common / sizeof *common)
#define N_RARE 5000
#define N_WORDS (N_COMMON + N_RARE)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uniform(void) { return (double)(next() >> 11) / 9007199254740992.0; }

static double cdf[N_WORDS];

static void word(int64_t k, char *buf, size_t n)
{
    static const char *const syl[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qu", "bre", "dan"};
    if (k < (int64_t)N_COMMON) {
        snprintf(buf, n, "%s", common[k]);
        return;
    }
    k -= N_COMMON;
    snprintf(buf, n, "%s%s%s%s", syl[k % 12], syl[k / 12 % 12], syl[k / 144 % 12], k >= 1728 ? "n" : "");
    if (k >= 3456)
        strncat(buf, "x", n - strlen(buf) - 1);
}

static int64_t draw(void)
{
    double u = uniform();
    int64_t lo = 0, hi = N_WORDS - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_search: %s: %s\n", what, why);
    exit(2);
}

int main(int argc, char **argv)
{
    int64_t n_sess = 1000, n_msg = 20;
    int runs = 21;
    bool keep = false;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sessions") && i + 1 < argc)
            n_sess = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--messages") && i + 1 < argc)
            n_msg = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep"))
            keep = true;
        else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else
            die(argv[i], "usage: bench_search [--sessions N] [--messages M] [--runs R] [--keep] DIR");
    }
    if (!dir || n_sess < 1 || n_msg < 1 || n_msg > 1000 || runs < 1 || runs > 1001)
        die("arguments", "usage: bench_search [--sessions N] [--messages M] [--runs R] [--keep] DIR");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "test ! -e '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd))
        die(dir, "exists, or cannot be made");

    double sum = 0;
    for (int64_t k = 0; k < (int64_t)N_WORDS; k++)
        sum += 1.0 / pow((double)k + 1, 1.0);
    for (int64_t k = 0, acc = 0; k < (int64_t)N_WORDS; k++) {
        (void)acc;
        cdf[k] = (k ? cdf[k - 1] : 0) + 1.0 / pow((double)k + 1, 1.0) / sum;
    }

    struct sess_store *st;
    char err[1024];
    if (sess_store_open(dir, sess_store_default_params(), &st, err, sizeof err))
        die(dir, err);
    uint8_t fp[32];
    memset(fp, 0x42, 32);
    int64_t model_id;
    if (sess_model_id(st, fp, "/models/bench.gguf", &model_id))
        die("model", sess_errmsg(st));
    double t0 = now_ms();
    char **texts = calloc((size_t)n_msg, sizeof *texts);
    struct sess_msg_rec *m = calloc((size_t)n_msg, sizeof *m);
    int64_t bytes = 0;
    for (int64_t s = 0; s < n_sess; s++) {
        char name[64];
        snprintf(name, sizeof name, "session-%04lld", (long long)s);
        struct sess_new nw = {name, model_id, NULL, 1};
        int64_t id;
        if (sess_create(st, &nw, &id))
            die(name, sess_errmsg(st));
        for (int64_t i = 0; i < n_msg; i++) {
            size_t cap = 1024, len = 0;
            texts[i] = malloc(cap);
            int64_t n_words = 20 + (int64_t)(next() % 61);
            for (int64_t w = 0; w < n_words; w++) {
                char wb[32];
                word(draw(), wb, sizeof wb);
                len += (size_t)snprintf(texts[i] + len, cap - len, "%s%s", w ? " " : "", wb);
            }
            bytes += (int64_t)len;
            m[i] = (struct sess_msg_rec){.role = i % 2 ? SESS_ROLE_ASSISTANT : SESS_ROLE_USER, .text = texts[i]};
        }
        if (sess_write_messages(st, id, 0, m, n_msg, 0, model_id, NULL))
            die(name, sess_errmsg(st));
        for (int64_t i = 0; i < n_msg; i++)
            free(texts[i]);
    }
    free(texts);
    free(m);
    printf("store: %lld sessions x %lld messages, %.1f MiB of text, written in %.1f s\n", (long long)n_sess,
           (long long)n_msg, bytes / 1048576.0, (now_ms() - t0) / 1e3);

    char rare[32], mid[32];
    word(N_COMMON + 4321, rare, sizeof rare);
    word(N_COMMON + 40, mid, sizeof mid);
    char two[80];
    snprintf(two, sizeof two, "coffee %s", mid);
    const struct {
        const char *q;
        bool raw;
    } qs[] = {{"the", false}, {"coffee", false}, {mid, false}, {rare, false}, {two, false},
              {"coff* OR tea", true}, {"zzznothing", false}};
    printf("%-22s %8s %10s %8s %10s\n", "query", "hits", "median ms", "all hits", "median ms");
    double worst = 0;
    for (size_t q = 0; q < sizeof qs / sizeof *qs; q++) {
        double ms[2];
        int64_t hits[2];
        for (int lim = 0; lim < 2; lim++) {
            double *t = calloc((size_t)runs, sizeof *t);
            for (int r = 0; r < runs; r++) {
                struct sess_hit *h;
                double a = now_ms();
                if (sess_search(st, qs[q].q, qs[q].raw, lim ? 0 : 20, &h, &hits[lim]))
                    die(qs[q].q, sess_errmsg(st));
                t[r] = now_ms() - a;
                sess_hits_free(h, hits[lim]);
            }
            qsort(t, (size_t)runs, sizeof *t, cmp_d);
            ms[lim] = t[runs / 2];
            free(t);
        }
        if (ms[0] > worst)
            worst = ms[0];
        printf("%-22s %8lld %10.2f %8lld %10.2f\n", qs[q].q, (long long)hits[0], ms[0], (long long)hits[1], ms[1]);
    }
    printf("slowest query with the default limit of 20: %.2f ms\n", worst);
    sess_store_close(st);
    if (!keep) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd))
            die(dir, "cannot remove");
    }
    return 0;
}
