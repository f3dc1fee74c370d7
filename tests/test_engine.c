/*
 * test_engine.c - the engine against llama.cpp and against itself.
 *
 * Models are regenerated here by tests/mkmodel with the options that
 * tests/data/regen-engine.sh used to make llama.cpp's goldens
 * (tests/data/engine/): llama (GQA, untied, placeholder vocabulary), qwen2
 * (biases, tied, the real Qwen2 vocabulary) and qwen3 (q/k norms, head
 * size != dim / heads), each in F32, F16, BF16 and Q8_0. Checked:
 *   - last-position logits after the 64-token prompt, in one batch (prefill
 *     path) and token by token (decode path), within
 *     max|ours - ref| / (max(ref) - min(ref)) <= 1e-4 (F32) or 1e-2;
 *   - the first 16 greedy tokens of F32 models equal llama.cpp's;
 *   - the same bits run after run; KV rows exported and imported give
 *     bit-identical logits; truncation; context overflow;
 *   - the sampler's state saved and restored continues identically; its
 *     draw at a position depends on the seed and the position alone
 *     (version 2), a version-1 state keeps its xorshift stream;
 *   - a pass keeping every row of logits (speculative verification) gives
 *     each row and K/V row bit for bit as one-by-one decoding does, for
 *     every weight type here and the quantized files of tests/data/quant;
 *   - llm_model_decode_bytes agrees with the file's tensor sizes;
 *   - bad models (missing tensor, wrong shape, unsupported type) and ids
 *     out of range are refused with a message naming what is wrong;
 *   - qwen35's recurrent state: the same bytes by every path, exported
 *     mid-prompt and imported it continues bit for bit, invalid after a
 *     truncation or a KV import alone until restored or reset, and put back
 *     by an interrupted decode.
 * Run from the top directory (make check does).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "tests/gguf-writer.h"
#include "tests/open-model.h"
#include "tests/tmpdir.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];
static int32_t prompt[64];
static const char *const types[] = {"F32", "F16", "BF16", "Q8_0"};

static const char *arch_opts(const char *arch)
{
    if (!strcmp(arch, "llama"))
        return "--arch llama --dim 128 --layers 2 --heads 4 --kv-heads 2 --ff 256 --seed 3";
    if (!strcmp(arch, "qwen2"))
        return "--arch qwen2 --vocab tests/data/vocab/ggml-vocab-qwen2.gguf --dim 64 --layers 2 "
               "--heads 4 --kv-heads 2 --ff 128 --tied --rope-theta 1000000 --seed 4";
    if (!strcmp(arch, "qwen35")) /* layers R R R A, 4 value heads on 2 key heads, state 16 */
        return "--arch qwen35 --dim 128 --layers 4 --heads 4 --kv-heads 2 --head-dim 32 --rope-dim 8 "
               "--ff 256 --ssm-state 16 --ssm-groups 2 --ssm-heads 4 --ssm-conv 4 --seed 33";
    return "--arch qwen3 --dim 128 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ff 256 "
           "--rope-theta 1000000 --seed 5";
}

/* path of the test model, made on first use */
static const char *model_path(const char *arch, const char *type)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s-%s.gguf", tmpdir, arch, type);
    if (access(path, R_OK) != 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "tests/mkmodel %s %s --type %s >/dev/null", path, arch_opts(arch), type);
        assert_int_equal(system(cmd), 0);
    }
    return path;
}

static float *read_floats(const char *path, int64_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *x = malloc((size_t)size);
    assert_non_null(x);
    assert_int_equal(fread(x, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = size / 4;
    return x;
}

/* ids[0..n): spread over ids 3..502 */
static void spread_ids(int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        ids[i] = (i * 37 + 11) % 500 + 3;
}

/* a copy of c's last logits (nv floats): the caller frees it */
static float *logits_copy(struct llm_ctx *c, int64_t nv)
{
    float *x = malloc((size_t)nv * sizeof *x);
    assert_non_null(x);
    memcpy(x, llm_ctx_logits(c), (size_t)nv * sizeof *x);
    return x;
}

static struct llm_ctx *new_ctx(struct llm_model *m, int n_ctx, int threads, uint32_t kv_type)
{
    struct llm_ctx_params p = llm_ctx_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = threads;
    p.kv_type = kv_type;
    struct llm_ctx *c;
    char err[256];
    assert_int_equal(llm_ctx_init(m, p, &c, err, sizeof err), 0);
    return c;
}

/* max |a - ref| / (max(ref) - min(ref)) over n */
static double rel_err(const float *a, const float *ref, int64_t n)
{
    float lo = ref[0], hi = ref[0];
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        lo = ref[i] < lo ? ref[i] : lo;
        hi = ref[i] > hi ? ref[i] : hi;
        double e = fabs((double)a[i] - ref[i]);
        d = e > d ? e : d;
    }
    return d / (hi - lo);
}

/* ==== agreement with llama.cpp ==== */

static void check_model(const char *arch, const char *type)
{
    char golden[256];
    snprintf(golden, sizeof golden, "tests/data/engine/%s-%s.logits", arch, type);
    int64_t n_ref;
    float *ref = read_floats(golden, &n_ref);
    struct llm_model *m = open_model(model_path(arch, type));
    assert_true(n_ref <= llm_model_n_vocab(m));
    double tol = !strcmp(type, "F32") ? 1e-4 : 1e-2;

    /* one batch (sgemm); token by token (decode); batches of 16 (for
     * quantized weights the decode kernels on several tokens) */
    static const char *const how[] = {"batch", "token by token", "batches of 16"};
    static const int step[] = {64, 1, 16};
    for (int tbt = 0; tbt < 3; tbt++) {
        struct llm_ctx *c = new_ctx(m, 128, 2, LLM_TYPE_F16);
        for (int i = 0; i < 64; i += step[tbt])
            assert_int_equal(llm_ctx_decode(c, prompt + i, step[tbt]), 0);
        double e = rel_err(llm_ctx_logits(c), ref, n_ref);
        printf("%s %s %s: relative error %.3g (tolerance %g)\n", arch, type, how[tbt], e, tol);
        assert_true(e <= tol);

        if (!strcmp(type, "F32") && !tbt) {
            snprintf(golden, sizeof golden, "tests/data/engine/%s-F32.greedy", arch);
            FILE *f = fopen(golden, "r");
            assert_non_null(f);
            int64_t nv = llm_model_n_vocab(m);
            for (int i = 0; i < 16; i++) {
                int want;
                assert_int_equal(fscanf(f, "%d", &want), 1);
                const float *lg = llm_ctx_logits(c);
                int32_t best = 0;
                for (int64_t j = 1; j < nv; j++)
                    if (lg[j] > lg[best])
                        best = (int32_t)j;
                assert_int_equal(best, want);
                assert_int_equal(llm_ctx_decode(c, &best, 1), 0);
            }
            fclose(f);
        }
        llm_ctx_free(c);
    }
    llm_model_close(m);
    free(ref);
}

static void test_llama(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++)
        check_model("llama", types[i]);
}

static void test_qwen2(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++)
        check_model("qwen2", types[i]);
}

static void test_qwen3(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++)
        check_model("qwen3", types[i]);
}

/* llm_model_decode_bytes against the file's tensor list: every tensor the
 * test models hold is read once per decoded token, except the token
 * embedding (one row), which a tied LM head reads in full as well */
static void test_decode_bytes(void **state)
{
    (void)state;
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "qwen35"};
    for (size_t a = 0; a < 4; a++) {
        for (size_t i = 0; i < 4; i++) {
            struct llm_model *m = open_model(model_path(archs[a], types[i]));
            const struct llm_gguf *g = llm_model_gguf(m);
            uint64_t want = 0;
            for (int64_t j = 0; j < llm_gguf_n_tensors(g); j++)
                want += llm_gguf_tensor(g, j)->n_bytes;
            const struct llm_tensor_info *te =
                llm_gguf_tensor(g, llm_gguf_find_tensor(g, "token_embd.weight"));
            uint64_t row = te->n_bytes / (uint64_t)te->ne[1];
            want = want - te->n_bytes + row;
            if (llm_gguf_find_tensor(g, "output.weight") < 0)
                want += te->n_bytes; /* tied */
            assert_int_equal(llm_model_decode_bytes(m), want);
            llm_model_close(m);
        }
    }
}

/* the f32 cache gives the same answer within the F32 tolerance */
static void test_kv_f32(void **state)
{
    (void)state;
    int64_t n_ref;
    float *ref = read_floats("tests/data/engine/llama-F32.logits", &n_ref);
    struct llm_model *m = open_model(model_path("llama", "F32"));
    struct llm_ctx *c = new_ctx(m, 128, 2, LLM_TYPE_F32);
    assert_int_equal(llm_ctx_decode(c, prompt, 64), 0);
    assert_true(rel_err(llm_ctx_logits(c), ref, n_ref) <= 1e-4);
    llm_ctx_free(c);
    llm_model_close(m);
    free(ref);
}

/* 600 tokens: two prefill passes (n_batch 512), as llama.cpp's ubatches */
static void test_long_prompt(void **state)
{
    (void)state;
    static const char *const am[][2] = {{"llama", "F32"}, {"qwen3", "Q8_0"}};
    int32_t ids[600];
    spread_ids(ids, 600);
    for (int k = 0; k < 2; k++) {
        char golden[256];
        snprintf(golden, sizeof golden, "tests/data/engine/%s-%s-600.logits", am[k][0], am[k][1]);
        int64_t n_ref;
        float *ref = read_floats(golden, &n_ref);
        struct llm_model *m = open_model(model_path(am[k][0], am[k][1]));
        struct llm_ctx *c = new_ctx(m, 1024, 2, LLM_TYPE_F16);
        assert_int_equal(llm_ctx_decode(c, ids, 600), 0);
        double e = rel_err(llm_ctx_logits(c), ref, n_ref), tol = k == 0 ? 1e-4 : 1e-2;
        printf("%s %s 600 tokens: relative error %.3g (tolerance %g)\n", am[k][0], am[k][1], e, tol);
        assert_true(e <= tol);
        llm_ctx_free(c);
        llm_model_close(m);
        free(ref);
    }
}

/* ==== the engine against itself ==== */

/* a prompt prefilled in pieces (a later turn) gives the same answer */
static void test_split_prefill(void **state)
{
    (void)state;
    int64_t n_ref;
    float *ref = read_floats("tests/data/engine/qwen3-F32.logits", &n_ref);
    struct llm_model *m = open_model(model_path("qwen3", "F32"));
    struct llm_ctx *c = new_ctx(m, 128, 2, LLM_TYPE_F16);
    assert_int_equal(llm_ctx_decode(c, prompt, 30), 0);
    assert_int_equal(llm_ctx_decode(c, prompt + 30, 2), 0);
    assert_int_equal(llm_ctx_decode(c, prompt + 32, 32), 0);
    double e = rel_err(llm_ctx_logits(c), ref, n_ref);
    printf("qwen3 F32 in pieces 30+2+32: relative error %.3g\n", e);
    assert_true(e <= 1e-4);
    llm_ctx_free(c);
    llm_model_close(m);
    free(ref);
}

static void test_deterministic(void **state)
{
    (void)state;
    struct llm_model *m = open_model(model_path("qwen3", "Q8_0"));
    int64_t nv = llm_model_n_vocab(m);
    float *first = malloc((size_t)nv * sizeof *first);
    for (int run = 0; run < 3; run++) {
        struct llm_ctx *c = new_ctx(m, 128, 2, LLM_TYPE_F16);
        assert_int_equal(llm_ctx_decode(c, prompt, 40), 0);
        assert_int_equal(llm_ctx_decode(c, prompt + 40, 1), 0);
        if (run == 0)
            memcpy(first, llm_ctx_logits(c), (size_t)nv * sizeof *first);
        else
            assert_memory_equal(first, llm_ctx_logits(c), (size_t)nv * sizeof *first);
        llm_ctx_free(c);
    }
    free(first);
    llm_model_close(m);
}

static void test_kv_export_import(void **state)
{
    (void)state;
    for (int kt = 0; kt < 2; kt++) {
        uint32_t kv_type = kt ? LLM_TYPE_F32 : LLM_TYPE_F16;
        struct llm_model *m = open_model(model_path("llama", "F16"));
        int64_t nv = llm_model_n_vocab(m);
        struct llm_ctx *a = new_ctx(m, 96, 2, kv_type), *b = new_ctx(m, 96, 1, kv_type);
        assert_int_equal(llm_ctx_decode(a, prompt, 30), 0);
        assert_int_equal(llm_ctx_decode(a, prompt + 30, 10), 0);
        /* export in two pieces, import them in order into a fresh context */
        uint64_t s1 = llm_ctx_kv_size(a, 0, 30), s2 = llm_ctx_kv_size(a, 30, 40);
        assert_int_equal(s1 + s2, llm_ctx_kv_bytes(a, 40));
        uint8_t *buf = malloc(s1 + s2);
        assert_int_equal(llm_ctx_kv_export(a, 0, 30, buf, 10), -(int64_t)s1); /* too small */
        assert_int_equal(llm_ctx_kv_export(a, 0, 41, buf, s1 + s2), LLM_ERR);  /* past n_past */
        assert_int_equal(llm_ctx_kv_export(a, 0, 30, buf, s1), (int64_t)s1);
        assert_int_equal(llm_ctx_kv_export(a, 30, 40, buf + s1, s2), (int64_t)s2);
        assert_int_not_equal(llm_ctx_kv_import(b, 5, 30, buf, s1), 0); /* gap */
        assert_int_not_equal(llm_ctx_kv_import(b, 0, 30, buf, s1 - 1), 0);
        assert_int_equal(llm_ctx_kv_import(b, 0, 30, buf, s1), 0);
        assert_int_equal(llm_ctx_kv_import(b, 30, 40, buf + s1, s2), 0);
        assert_int_equal(llm_ctx_n_past(b), 40);
        assert_null(llm_ctx_logits(b));
        /* the next token's logits are bit-identical (b has another thread count) */
        assert_int_equal(llm_ctx_decode(a, prompt + 40, 1), 0);
        assert_int_equal(llm_ctx_decode(b, prompt + 40, 1), 0);
        assert_memory_equal(llm_ctx_logits(a), llm_ctx_logits(b), (size_t)nv * sizeof(float));
        /* re-exported rows are the same bytes (a range's rows are laid out
         * by layer, so two ranges are two exports) */
        uint8_t *again = malloc(s1 + s2);
        assert_int_equal(llm_ctx_kv_export(b, 0, 30, again, s1), (int64_t)s1);
        assert_int_equal(llm_ctx_kv_export(b, 30, 40, again + s1, s2), (int64_t)s2);
        assert_memory_equal(buf, again, s1 + s2);
        free(again);
        free(buf);
        llm_ctx_free(a);
        llm_ctx_free(b);
        llm_model_close(m);
    }
}

static void test_truncate_and_overflow(void **state)
{
    (void)state;
    struct llm_model *m = open_model(model_path("qwen2", "Q8_0"));
    int64_t nv = llm_model_n_vocab(m);
    struct llm_ctx *c = new_ctx(m, 48, 2, LLM_TYPE_F16);
    assert_int_equal(llm_ctx_decode(c, prompt, 20), 0);
    for (int i = 20; i < 25; i++)
        assert_int_equal(llm_ctx_decode(c, prompt + i, 1), 0);
    float *l1 = logits_copy(c, nv);
    assert_int_equal(llm_ctx_truncate(c, 20), 0);
    assert_int_not_equal(llm_ctx_truncate(c, 21), 0);
    for (int i = 20; i < 25; i++)
        assert_int_equal(llm_ctx_decode(c, prompt + i, 1), 0);
    assert_memory_equal(l1, llm_ctx_logits(c), (size_t)nv * sizeof *l1);
    /* 25 + 24 > 48: refused, nothing changed */
    assert_int_equal(llm_ctx_decode(c, prompt, 24), LLM_ERR_CTX_FULL);
    assert_non_null(strstr(llm_ctx_errmsg(c), "context full"));
    assert_int_equal(llm_ctx_n_past(c), 25);
    assert_int_equal(llm_ctx_decode(c, prompt, 23), 0);
    assert_int_equal(llm_ctx_n_past(c), 48);
    assert_int_equal(llm_ctx_decode(c, prompt, 1), LLM_ERR_CTX_FULL);
    free(l1);
    llm_ctx_free(c);
    llm_model_close(m);
}

static void test_bad_ids(void **state)
{
    (void)state;
    struct llm_model *m = open_model(model_path("llama", "F32"));
    struct llm_ctx *c = new_ctx(m, 32, 1, LLM_TYPE_F16);
    int32_t bad[3] = {5, 512, 6}, neg = -1;
    assert_int_equal(llm_ctx_decode(c, bad, 3), LLM_ERR);
    assert_non_null(strstr(llm_ctx_errmsg(c), "token id 512 is out of range"));
    assert_int_equal(llm_ctx_decode(c, &neg, 1), LLM_ERR);
    assert_int_equal(llm_ctx_n_past(c), 0);
    llm_ctx_free(c);
    llm_model_close(m);
}

/* ==== bad models ==== */

enum mutation { DROP, RESHAPE, RETYPE };

/* copy the llama F32 model, changing tensor `name` */
static void mutate(const char *name, enum mutation how, const char *out)
{
    struct llm_gguf *g;
    char err[256];
    assert_int_equal(llm_gguf_open(model_path("llama", "F32"), &g, err, sizeof err), 0);
    struct gw *w = gw_init();
    for (int64_t i = 0; i < llm_gguf_n_kv(g); i++)
        gw_kv_copy(w, g, i);
    for (int64_t i = 0; i < llm_gguf_n_tensors(g); i++) {
        const struct llm_tensor_info *t = llm_gguf_tensor(g, i);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint32_t type = t->type;
        if (!strcmp(t->name, name)) {
            if (how == DROP)
                continue;
            if (how == RESHAPE) { /* same bytes, other shape */
                ne[0] *= 2;
                ne[1] /= 2;
            }
            if (how == RETYPE)
                type = LLM_TYPE_I32; /* same size as F32 */
        }
        gw_tensor(w, t->name, type, t->n_dims, ne, t->data, t->n_bytes);
    }
    assert_int_equal(gw_write_file(w, out), 0);
    gw_free(w);
    llm_gguf_close(g);
}

static void expect_refused(const char *name, enum mutation how, const char *want)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/bad.gguf", tmpdir);
    mutate(name, how, path);
    struct llm_model *m = NULL;
    assert_int_not_equal(llm_model_open(path, llm_model_default_params(), &m, err, sizeof err), 0);
    assert_null(m);
    printf("refused: %s\n", err);
    if (!strstr(err, want)) {
        print_error("expected '%s' in '%s'\n", want, err);
        fail();
    }
}

static void test_bad_models(void **state)
{
    (void)state;
    expect_refused("blk.1.ffn_up.weight", DROP, "tensor 'blk.1.ffn_up.weight' is missing");
    expect_refused("output_norm.weight", DROP, "tensor 'output_norm.weight' is missing");
    expect_refused("blk.0.attn_k.weight", RESHAPE, "tensor 'blk.0.attn_k.weight' has shape [256 x 32]");
    expect_refused("blk.0.attn_v.weight", RETYPE, "tensor 'blk.0.attn_v.weight' has type I32");
}

/* ==== sampler ==== */

static void test_sampler(void **state)
{
    (void)state;
    int64_t nv = 1000;
    float *lg = malloc((size_t)nv * sizeof *lg);
    for (int64_t i = 0; i < nv; i++)
        lg[i] = (float)sin((double)i * 0.7) * 3.0f;
    struct llm_sampler_params p = llm_sampler_default_params();
    /* greedy is the argmax */
    p.temp = 0;
    struct llm_sampler *g = llm_sampler_init(p, nv);
    int32_t best = 0;
    for (int64_t i = 1; i < nv; i++)
        if (lg[i] > lg[best])
            best = (int32_t)i;
    assert_int_equal(llm_sampler_sample(g, lg), best);
    llm_sampler_free(g);

    /* top_k = 1 is the argmax too, at any temperature */
    p = llm_sampler_default_params();
    p.top_k = 1;
    p.temp = 5;
    g = llm_sampler_init(p, nv);
    for (int i = 0; i < 5; i++)
        assert_int_equal(llm_sampler_sample(g, lg), best);
    llm_sampler_free(g);

    /* a saved state continues exactly; penalties see the window */
    p = llm_sampler_default_params();
    p.temp = 1.0f;
    p.top_k = 50;
    p.repeat_penalty = 1.3f;
    p.presence_penalty = 0.2f;
    p.seed = 42;
    struct llm_sampler *a = llm_sampler_init(p, nv), *b = llm_sampler_init(p, nv);
    int32_t seq[20];
    uint8_t saved[1024];
    int64_t n_saved = 0;
    for (int i = 0; i < 20; i++) {
        if (i == 10) {
            n_saved = llm_sampler_state_save(a, saved, sizeof saved);
            assert_true(n_saved > 0);
            assert_int_equal(llm_sampler_state_save(a, saved, 8), -n_saved);
        }
        seq[i] = llm_sampler_sample(a, lg);
        assert_true(seq[i] >= 0 && seq[i] < nv);
    }
    int distinct = 0;
    for (int i = 0; i < 20; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= seq[j] == seq[i];
        distinct += !seen;
    }
    assert_true(distinct > 3); /* it does sample */
    assert_int_not_equal(llm_sampler_state_load(b, saved, (size_t)n_saved - 1), 0);
    assert_int_equal(llm_sampler_state_load(b, saved, (size_t)n_saved), 0);
    for (int i = 10; i < 20; i++)
        assert_int_equal(llm_sampler_sample(b, lg), seq[i]);
    /* the same seed from scratch gives the same sequence */
    struct llm_sampler *c = llm_sampler_init(p, nv);
    for (int i = 0; i < 20; i++)
        assert_int_equal(llm_sampler_sample(c, lg), seq[i]);
    llm_sampler_free(a);
    llm_sampler_free(b);
    llm_sampler_free(c);
    free(lg);
}

/* version 2: the number drawn at a position is a function of the seed and
 * the position alone (not of the draws before it, nor of their order);
 * next_stream moves it on; a version-1 state (sessions saved before) keeps
 * its xorshift64* stream, one number per draw */
static void test_sampler_positions(void **state)
{
    (void)state;
    int64_t nv = 64;
    float lg[64];
    for (int i = 0; i < nv; i++)
        lg[i] = (float)(i % 7) * 0.1f; /* a flat-ish distribution: draws decide */
    struct llm_sampler_params p = llm_sampler_default_params();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0;
    p.seed = 99;
    struct llm_sampler *a = llm_sampler_init(p, nv), *b = llm_sampler_init(p, nv);
    assert_int_equal(llm_sampler_version(a), 2);
    int32_t fwd[40], diff = 0;
    for (int i = 0; i < 40; i++)
        fwd[i] = llm_sampler_sample_at(a, lg, NULL, 1000 + i);
    for (int i = 39; i >= 0; i--) { /* backwards, and with extra draws between */
        assert_int_equal(llm_sampler_sample_at(b, lg, NULL, 1000 + i), fwd[i]);
        llm_sampler_sample(b, lg);
    }
    llm_sampler_next_stream(b);
    for (int i = 0; i < 40; i++)
        diff += llm_sampler_sample_at(b, lg, NULL, 1000 + i) != fwd[i];
    assert_true(diff > 20); /* another stream: mostly other tokens */
    int distinct = 0;
    for (int i = 0; i < 40; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= fwd[j] == fwd[i];
        distinct += !seen;
    }
    assert_true(distinct > 10);
    /* a saved version-2 state carries the stream and the next position */
    uint8_t st[512];
    int64_t n = llm_sampler_state_save(b, st, sizeof st);
    assert_true(n > 0);
    struct llm_sampler *c = llm_sampler_init(p, nv);
    assert_int_equal(llm_sampler_state_load(c, st, (size_t)n), 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(llm_sampler_sample(c, lg), llm_sampler_sample(b, lg));
    /* version 1, written by hand: u32 "KVSM", u32 1, u64 rng, u32 cap, u32 0 */
    uint64_t rng = 0x1234567887654321ULL;
    uint8_t v1[24];
    uint32_t magic = 0x4d53564bu, one = 1, cap = (uint32_t)p.penalty_last_n, zero = 0;
    memcpy(v1, &magic, 4);
    memcpy(v1 + 4, &one, 4);
    memcpy(v1 + 8, &rng, 8);
    memcpy(v1 + 16, &cap, 4);
    memcpy(v1 + 20, &zero, 4);
    assert_int_equal(llm_sampler_state_load(c, v1, sizeof v1), 0);
    assert_int_equal(llm_sampler_version(c), 1);
    /* two tokens, equal logits: token 0 iff the uniform number is below 1/2 */
    float two[64];
    for (int i = 0; i < nv; i++)
        two[i] = i < 2 ? 0.0f : -INFINITY;
    int ones = 0;
    for (int i = 0; i < 64; i++) {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        float u = (float)((rng * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f;
        int32_t want = u * 2.0 < 1.0 ? 0 : 1;
        ones += want;
        assert_int_equal(llm_sampler_sample_at(c, two, NULL, 5 /* ignored */), want);
    }
    assert_true(ones > 10 && ones < 54);
    uint8_t *st1 = malloc(24 + 4 * (size_t)cap);
    n = llm_sampler_state_save(c, st1, 24 + 4 * (size_t)cap); /* saved as version 1 again */
    assert_int_equal(n, 24 + 4 * (int64_t)cap); /* (the window: the 64 tokens drawn) */
    memcpy(st, st1, 8);
    free(st1);
    assert_int_equal(((uint32_t *)st)[1], 1);
    llm_sampler_free(a);
    llm_sampler_free(b);
    llm_sampler_free(c);
}

/* ==== verifying drafted tokens: every row of logits in one pass ==== */

static void outputs_check(const char *path)
{
    struct llm_model *m = open_model(path);
    int64_t nv = llm_model_n_vocab(m);
    enum { PRE = 21, K = 9 };
    int32_t ids[PRE + K];
    for (int i = 0; i < PRE + K; i++)
        ids[i] = prompt[i] % (int32_t)nv;
    struct llm_ctx *one = new_ctx(m, 96, 2, LLM_TYPE_F16), *pass = new_ctx(m, 96, 1, LLM_TYPE_F16);
    float *want = malloc((size_t)(K * nv) * sizeof *want);
    assert_int_equal(llm_ctx_decode(one, ids, PRE), 0);
    for (int i = 0; i < K; i++) {
        assert_int_equal(llm_ctx_decode(one, ids + PRE + i, 1), 0);
        memcpy(want + i * nv, llm_ctx_logits(one), (size_t)nv * sizeof *want);
    }
    assert_int_equal(llm_ctx_decode(pass, ids, PRE), 0);
    assert_int_equal(llm_ctx_decode_outputs(pass, ids + PRE, K), LLM_ERR); /* not reserved */
    assert_int_equal(llm_ctx_n_past(pass), PRE);
    assert_int_equal(llm_ctx_reserve_outputs(pass, LLM_CTX_MAX_OUTPUTS + 1), LLM_ERR);
    assert_int_equal(llm_ctx_reserve_outputs(pass, K), 0);
    assert_int_equal(llm_ctx_decode_outputs(pass, ids + PRE, K), 0);
    for (int i = 0; i < K; i++)
        assert_memory_equal(llm_ctx_logits_ith(pass, i), want + i * nv, (size_t)nv * sizeof *want);
    assert_null(llm_ctx_logits_ith(pass, K));
    assert_ptr_equal(llm_ctx_logits(pass), llm_ctx_logits_ith(pass, K - 1));
    /* the K/V rows too */
    uint64_t sz = llm_ctx_kv_size(one, 0, PRE + K);
    uint8_t *ka = malloc(sz), *kb = malloc(sz);
    assert_int_equal(llm_ctx_kv_export(one, 0, PRE + K, ka, sz), (int64_t)sz);
    assert_int_equal(llm_ctx_kv_export(pass, 0, PRE + K, kb, sz), (int64_t)sz);
    assert_memory_equal(ka, kb, sz);
    /* four taken, the rest cut: the next token as if never drafted */
    assert_int_equal(llm_ctx_truncate(pass, PRE + 4), 0);
    assert_int_equal(llm_ctx_truncate(one, PRE + 4), 0);
    int32_t next = (ids[3] + 1) % (int32_t)nv;
    assert_int_equal(llm_ctx_decode(pass, &next, 1), 0);
    assert_int_equal(llm_ctx_decode(one, &next, 1), 0);
    assert_memory_equal(llm_ctx_logits(pass), llm_ctx_logits(one), (size_t)nv * sizeof *want);
    print_message("%s: %d rows in one pass, bit for bit\n", path, K);
    free(ka);
    free(kb);
    free(want);
    llm_ctx_free(one);
    llm_ctx_free(pass);
    llm_model_close(m);
}

static void test_decode_outputs(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        outputs_check(model_path("llama", types[t]));
        outputs_check(model_path("qwen2", types[t]));
    }
    outputs_check(model_path("qwen3", "Q8_0"));
    static const char *const quant[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"};
    for (size_t t = 0; t < sizeof quant / sizeof *quant; t++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/quant/m-%s.gguf", quant[t]);
        outputs_check(path);
    }
}

/* ==== stopping a decode ==== */

struct stopper {
    const struct llm_ctx *c;
    volatile sig_atomic_t *flag;
    int64_t at;        /* set the flag once progress passes this */
    int64_t seen;      /* the progress it saw when it set it */
    _Atomic int quit;
};

static void *stopper_main(void *p)
{
    struct stopper *s = p;
    while (!atomic_load(&s->quit)) {
        int64_t v = llm_ctx_progress(s->c);
        if (v > s->at) {
            s->seen = v;
            *s->flag = 1;
            return NULL;
        }
    }
    return NULL;
}

/* decode ids [pre, n) on c while another thread sets *flag (cleared first)
 * once c's progress passes at: the decode's status; *seen the progress the
 * thread saw (0 if it never set the flag) */
static int decode_stopped(struct llm_ctx *c, volatile sig_atomic_t *flag, const int32_t *ids, int64_t pre, int64_t n,
                          int64_t at, int64_t *seen)
{
    *flag = 0;
    struct stopper st = {c, flag, at, 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stopper_main, &st), 0);
    int rc = llm_ctx_decode(c, ids + pre, n - pre);
    atomic_store(&st.quit, 1);
    pthread_join(th, NULL);
    *seen = st.seen;
    return rc;
}

/* The interrupt flag stops a decode within a pass, leaving the cache as it
 * was; progress is reported within a pass; and a decode that completes
 * after (or with the flag never set) gives the same bits. */
static void test_interrupt(void **state)
{
    (void)state;
    enum { N = 1200, PRE = 100 }; /* 1,100 tokens: passes of 512, 512, 76 */
    int32_t ids[N];
    spread_ids(ids, N);
    struct llm_model *m = open_model(model_path("qwen3", "F32"));
    int64_t nv = llm_model_n_vocab(m);
    struct llm_ctx *a = new_ctx(m, 2048, 2, LLM_TYPE_F16);
    assert_int_equal(llm_ctx_decode(a, ids, N), 0);
    assert_int_equal(llm_ctx_progress(a), N);
    float *ref = logits_copy(a, nv);
    size_t kvb = (size_t)llm_ctx_kv_size(a, 0, N);
    uint8_t *kv_ref = malloc(kvb), *kv = malloc(kvb);
    assert_int_equal(llm_ctx_kv_export(a, 0, N, kv_ref, kvb), (int64_t)kvb);

    struct llm_ctx *b = new_ctx(m, 2048, 2, LLM_TYPE_F16);
    static volatile sig_atomic_t flag;
    llm_ctx_set_interrupt(b, &flag);
    /* set before: nothing is computed */
    flag = 1;
    assert_int_equal(llm_ctx_decode(b, ids, N), LLM_ERR_INTERRUPTED);
    assert_int_equal(llm_ctx_n_past(b), 0);
    assert_string_equal(llm_ctx_errmsg(b), "interrupted");
    /* set by another thread during the decode (after PRE positions already
     * held): the call ends with the cache as it was */
    flag = 0;
    assert_int_equal(llm_ctx_decode(b, ids, PRE), 0);
    int stopped = 0, mid_pass = 0, late = 0;
    for (int attempt = 0; attempt < 60 && stopped < 8; attempt++) {
        int64_t seen;
        int rc = decode_stopped(b, &flag, ids, PRE, N, PRE + 1 + attempt % 4 * 300, &seen);
        if (rc == LLM_OK) { /* it finished first: then it is the reference */
            assert_memory_equal(llm_ctx_logits(b), ref, (size_t)nv * sizeof *ref);
            assert_int_equal(llm_ctx_truncate(b, PRE), 0);
            continue;
        }
        assert_int_equal(rc, LLM_ERR_INTERRUPTED);
        assert_int_equal(llm_ctx_n_past(b), PRE);
        assert_int_equal(llm_ctx_progress(b), PRE);
        stopped++;
        /* a pass is 512 tokens: a figure in between is a pass under way */
        mid_pass += (seen - PRE) % 512 != 0;
        late += seen > PRE + 512;
    }
    printf("interrupted %d of the attempts (progress seen inside a pass %d times, after the first pass %d)\n",
           stopped, mid_pass, late);
    assert_true(stopped >= 1);
    assert_true(mid_pass >= 1);
    assert_true(late >= 1); /* a later pass stopped: the completed ones are undone too */
    /* the cache's first PRE rows were left alone, and completing gives the
     * very bits of the uninterrupted decode */
    flag = 0;
    assert_int_equal(llm_ctx_decode(b, ids + PRE, N - PRE), 0);
    assert_memory_equal(llm_ctx_logits(b), ref, (size_t)nv * sizeof *ref);
    assert_int_equal(llm_ctx_kv_export(b, 0, N, kv, kvb), (int64_t)kvb);
    assert_memory_equal(kv, kv_ref, kvb);
    llm_ctx_set_interrupt(b, NULL);
    free(ref);
    free(kv);
    free(kv_ref);
    llm_ctx_free(a);
    llm_ctx_free(b);
    llm_model_close(m);
}

/* ==== qwen35's recurrent state (issue 23) ==== */

/* The state after position p is the same bytes by every path; exported
 * mid-prompt with the KV rows and imported into another context, it
 * continues to the very logits of one uninterrupted decode. A context whose
 * state no longer matches n_past refuses to decode until it is restored or
 * reset to 0. */
static void test_qwen35_rstate(void **state)
{
    (void)state;
    enum { N = 150, K = 70 };
    int32_t ids[N];
    spread_ids(ids, N);
    for (int ti = 0; ti < 2; ti++) {
        struct llm_model *m = open_model(model_path("qwen35", ti ? "Q8_0" : "F32"));
        int64_t nv = llm_model_n_vocab(m);
        assert_int_equal(llm_model_n_layer(m), 4);
        assert_int_equal(llm_model_n_layer_kv(m), 1); /* R R R A */
        struct llm_ctx *ref = new_ctx(m, 256, 2, LLM_TYPE_F16), *a = new_ctx(m, 256, 2, LLM_TYPE_F16),
                       *b = new_ctx(m, 256, 1, LLM_TYPE_F16), *t = new_ctx(m, 256, 1, LLM_TYPE_F16);
        /* 3 recurrent layers of a conv window (3 x 128 channels) and 4 matrices of 16 x 16 */
        uint64_t rs = llm_ctx_rstate_size(a);
        assert_int_equal(rs, 3 * (3 * 128 + 4 * 16 * 16) * sizeof(float));
        assert_int_equal(llm_ctx_kv_bytes(a, 1), 2 * 2 * 32 * 2); /* the one attention layer's K and V */
        assert_true(llm_ctx_rstate_valid(a));
        assert_int_equal(llm_ctx_decode(ref, ids, N), 0);
        float *want = logits_copy(ref, nv);

        /* the state at K: one batch, and token by token on another thread count */
        assert_int_equal(llm_ctx_decode(a, ids, K), 0);
        for (int i = 0; i < K; i++)
            assert_int_equal(llm_ctx_decode(t, ids + i, 1), 0);
        uint8_t *s1 = malloc(rs), *s2 = malloc(rs);
        assert_int_equal(llm_ctx_rstate_export(a, s1, 10), -(int64_t)rs); /* too small */
        assert_int_equal(llm_ctx_rstate_export(a, s1, rs), (int64_t)rs);
        assert_int_equal(llm_ctx_rstate_export(t, s2, rs), (int64_t)rs);
        assert_memory_equal(s1, s2, rs);
        uint64_t kvb = llm_ctx_kv_size(a, 0, K);
        uint8_t *kv = malloc(kvb);
        assert_int_equal(llm_ctx_kv_export(a, 0, K, kv, kvb), (int64_t)kvb);

        /* restored into b: the KV rows alone leave the state invalid */
        assert_int_equal(llm_ctx_kv_import(b, 0, K, kv, kvb), 0);
        assert_false(llm_ctx_rstate_valid(b));
        assert_int_equal(llm_ctx_rstate_export(b, s2, rs), LLM_ERR);
        assert_int_equal(llm_ctx_decode(b, ids + K, 1), LLM_ERR);
        assert_non_null(strstr(llm_ctx_errmsg(b), "recurrent state"));
        assert_int_equal(llm_ctx_n_past(b), K);
        assert_int_not_equal(llm_ctx_rstate_import(b, s1, rs - 1), 0);
        assert_false(llm_ctx_rstate_valid(b));
        assert_int_equal(llm_ctx_rstate_import(b, s1, rs), 0);
        assert_true(llm_ctx_rstate_valid(b));
        assert_int_equal(llm_ctx_decode(b, ids + K, N - K), 0);
        assert_memory_equal(llm_ctx_logits(b), want, (size_t)nv * sizeof *want);
        /* and a continues the same way, in pieces */
        assert_int_equal(llm_ctx_decode(a, ids + K, 1), 0);
        assert_int_equal(llm_ctx_decode(a, ids + K + 1, N - K - 1), 0);
        assert_memory_equal(llm_ctx_logits(a), want, (size_t)nv * sizeof *want);
        assert_int_equal(llm_ctx_rstate_export(a, s1, rs), (int64_t)rs);
        assert_int_equal(llm_ctx_rstate_export(b, s2, rs), (int64_t)rs);
        assert_memory_equal(s1, s2, rs);

        /* truncation: to n_past changes nothing, below it invalidates, to 0 resets */
        assert_int_equal(llm_ctx_truncate(a, N), 0);
        assert_true(llm_ctx_rstate_valid(a));
        assert_int_equal(llm_ctx_truncate(a, 40), 0);
        assert_false(llm_ctx_rstate_valid(a));
        assert_int_equal(llm_ctx_decode(a, ids + 40, 5), LLM_ERR);
        assert_int_equal(llm_ctx_n_past(a), 40);
        assert_int_equal(llm_ctx_truncate(a, 0), 0);
        assert_true(llm_ctx_rstate_valid(a));
        assert_int_equal(llm_ctx_decode(a, ids, N), 0);
        assert_memory_equal(llm_ctx_logits(a), want, (size_t)nv * sizeof *want);
        free(kv);
        free(s1);
        free(s2);
        free(want);
        llm_ctx_free(ref);
        llm_ctx_free(a);
        llm_ctx_free(b);
        llm_ctx_free(t);
        llm_model_close(m);
    }
}

/* An interrupted decode of a recurrent model puts its state back: the
 * cache and the state are as before, and completing gives the same bits. */
static void test_qwen35_interrupt(void **state)
{
    (void)state;
    enum { N = 1200, PRE = 100 };
    int32_t ids[N];
    spread_ids(ids, N);
    struct llm_model *m = open_model(model_path("qwen35", "F32"));
    int64_t nv = llm_model_n_vocab(m);
    struct llm_ctx *a = new_ctx(m, 2048, 2, LLM_TYPE_F16), *b = new_ctx(m, 2048, 2, LLM_TYPE_F16);
    assert_int_equal(llm_ctx_decode(a, ids, N), 0);
    float *want = logits_copy(a, nv);
    uint64_t rs = llm_ctx_rstate_size(a);
    uint8_t *s_end = malloc(rs), *s_pre = malloc(rs), *s = malloc(rs);
    assert_int_equal(llm_ctx_rstate_export(a, s_end, rs), (int64_t)rs);
    static volatile sig_atomic_t flag;
    llm_ctx_set_interrupt(b, &flag);
    flag = 0;
    assert_int_equal(llm_ctx_decode(b, ids, PRE), 0);
    assert_int_equal(llm_ctx_rstate_export(b, s_pre, rs), (int64_t)rs);
    int stopped = 0;
    for (int attempt = 0; attempt < 40 && stopped < 4; attempt++) {
        int64_t seen;
        int rc = decode_stopped(b, &flag, ids, PRE, N, PRE + 1 + attempt % 4 * 300, &seen);
        if (rc == LLM_OK) {
            assert_memory_equal(llm_ctx_logits(b), want, (size_t)nv * sizeof *want);
            /* back to PRE: truncation invalidates, so restore the state */
            assert_int_equal(llm_ctx_truncate(b, PRE), 0);
            assert_int_equal(llm_ctx_rstate_import(b, s_pre, rs), 0);
            continue;
        }
        assert_int_equal(rc, LLM_ERR_INTERRUPTED);
        assert_int_equal(llm_ctx_n_past(b), PRE);
        assert_true(llm_ctx_rstate_valid(b));
        assert_int_equal(llm_ctx_rstate_export(b, s, rs), (int64_t)rs);
        assert_memory_equal(s, s_pre, rs);
        stopped++;
    }
    assert_true(stopped >= 1);
    flag = 0;
    assert_int_equal(llm_ctx_decode(b, ids + PRE, N - PRE), 0);
    assert_memory_equal(llm_ctx_logits(b), want, (size_t)nv * sizeof *want);
    assert_int_equal(llm_ctx_rstate_export(b, s, rs), (int64_t)rs);
    assert_memory_equal(s, s_end, rs);
    llm_ctx_set_interrupt(b, NULL);
    free(want);
    free(s_end);
    free(s_pre);
    free(s);
    llm_ctx_free(a);
    llm_ctx_free(b);
    llm_model_close(m);
}

static int setup(void **state)
{
    (void)state;
    if (test_dir_make(tmpdir, sizeof tmpdir, "kvchat-engine"))
        return -1;
    FILE *f = fopen("tests/data/engine/prompt.txt", "r");
    if (!f)
        return -1;
    for (int i = 0; i < 64; i++)
        if (fscanf(f, "%d", &prompt[i]) != 1)
            return -1;
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_dir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_decode_bytes),
        cmocka_unit_test(test_kv_f32),
        cmocka_unit_test(test_long_prompt),
        cmocka_unit_test(test_split_prefill),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_kv_export_import),
        cmocka_unit_test(test_truncate_and_overflow),
        cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_sampler),
        cmocka_unit_test(test_sampler_positions),
        cmocka_unit_test(test_decode_outputs),
        cmocka_unit_test(test_qwen35_rstate),
        cmocka_unit_test(test_qwen35_interrupt),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
