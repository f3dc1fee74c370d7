/*
 * test_moe.c - the mixture-of-experts FFN (core/engine/moe.c, issue 24).
 *   - gating: softmax, top k, renormalised (qwen3moe) and top k on the
 *     logits, softmax over k (gpt-oss), against values computed here in
 *     double from the definitions; ties go to the lower expert index; k equal
 *     to the expert count; the renormalising sum's clamp;
 *   - a synthetic qwen3moe model (tests/mkmodel): what the binding reads
 *     (experts, experts used, their rows, active parameters), decode bytes
 *     counting the router and k experts of each layer, and the merged
 *     ffn_gate_up_exps form giving the same bits as the separate tensors,
 *     in F32 and Q8_0, for a prompt in one batch and token by token.
 * (Batch invariance over every way in, llama.cpp's logits and the float64
 * reference are tests/cli/t0620-qwen3moe.sh's.)
 * Run from the top directory (make check does).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/engine/moe.h"
#include "core/llm.h"
#include "tests/open-model.h"
#include "tests/tmpdir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

/* softmax over n doubles of x */
static void softmax_d(const double *x, int n, double *p)
{
    double mx = x[0], s = 0;
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++)
        s += p[i] = exp(x[i] - mx);
    for (int i = 0; i < n; i++)
        p[i] /= s;
}

static void test_gate_softmax(void **state)
{
    (void)state;
    const float l[6] = {0.5f, -1.0f, 2.0f, 1.25f, 0.0f, 1.9f};
    double ld[6], p[6];
    for (int i = 0; i < 6; i++)
        ld[i] = l[i];
    softmax_d(ld, 6, p);
    int32_t sel[6];
    float w[6];
    /* top 3: 2 (2.0), 5 (1.9), 3 (1.25); renormalised */
    llm_moe_gate(LLM_MOE_SOFTMAX, true, l, 6, 3, sel, w);
    assert_int_equal(sel[0], 2);
    assert_int_equal(sel[1], 5);
    assert_int_equal(sel[2], 3);
    double s = p[2] + p[5] + p[3];
    assert_true(fabs(w[0] - p[2] / s) < 1e-6 && fabs(w[1] - p[5] / s) < 1e-6 && fabs(w[2] - p[3] / s) < 1e-6);
    /* without renormalising: the probabilities themselves */
    llm_moe_gate(LLM_MOE_SOFTMAX, false, l, 6, 2, sel, w);
    assert_true(fabs(w[0] - p[2]) < 1e-7 && fabs(w[1] - p[5]) < 1e-7);
    /* every expert: all six, in order of their logits, summing to 1 */
    llm_moe_gate(LLM_MOE_SOFTMAX, true, l, 6, 6, sel, w);
    const int32_t order[6] = {2, 5, 3, 0, 4, 1};
    float sum = 0;
    for (int j = 0; j < 6; j++) {
        assert_int_equal(sel[j], order[j]);
        sum += w[j];
    }
    assert_true(fabs(sum - 1.0f) < 1e-6f);
}

static void test_gate_ties(void **state)
{
    (void)state;
    const float l[5] = {1.0f, 5.0f, 5.0f, 0.0f, 5.0f};
    int32_t sel[5];
    float w[5];
    for (int g = 0; g < LLM_MOE_GATING_COUNT; g++) {
        llm_moe_gate((enum llm_moe_gating)g, true, l, 5, 3, sel, w);
        assert_int_equal(sel[0], 1);
        assert_int_equal(sel[1], 2);
        assert_int_equal(sel[2], 4);
        assert_true(w[0] == w[1] && w[1] == w[2]);
        assert_true(fabs(w[0] - 1.0f / 3) < 1e-6);
    }
    /* equal logits everywhere: the first k experts */
    const float z[4] = {0, 0, 0, 0};
    llm_moe_gate(LLM_MOE_SOFTMAX, true, z, 4, 2, sel, w);
    assert_int_equal(sel[0], 0);
    assert_int_equal(sel[1], 1);
}

static void test_gate_softmax_weight(void **state)
{
    (void)state;
    const float l[5] = {0.0f, 3.0f, 1.0f, 2.5f, -4.0f};
    int32_t sel[5];
    float w[5];
    llm_moe_gate(LLM_MOE_SOFTMAX_WEIGHT, false, l, 5, 2, sel, w);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 3);
    double k2[2] = {3.0, 2.5}, p[2];
    softmax_d(k2, 2, p);
    assert_true(fabs(w[0] - p[0]) < 1e-7 && fabs(w[1] - p[1]) < 1e-7);
    /* one expert: weight 1 */
    llm_moe_gate(LLM_MOE_SOFTMAX_WEIGHT, false, l, 5, 1, sel, w);
    assert_int_equal(sel[0], 1);
    assert_true(w[0] == 1.0f);
}

/* the renormalising sum is at least 2^-14 (llama.cpp's clamp): weights that
 * underflow to 0 stay 0 instead of becoming NaN */
static void test_gate_clamp(void **state)
{
    (void)state;
    const float l[3] = {0.0f, -200.0f, -300.0f};
    int32_t sel[3];
    float w[3];
    llm_moe_gate(LLM_MOE_SOFTMAX, true, l, 3, 3, sel, w);
    llm_moe_gate(LLM_MOE_SOFTMAX, false, l, 3, 3, sel, w);
    assert_int_equal(sel[0], 0);
    assert_true(w[0] == 1.0f && w[1] == 0.0f && w[2] == 0.0f);
    /* the k chosen all underflow: renormalised by the clamp, not by 0 */
    const float m[3] = {0.0f, -200.0f, -300.0f};
    float w2[2];
    int32_t s2[2];
    llm_moe_gate(LLM_MOE_SOFTMAX, true, m, 3, 1, s2, w2);
    assert_true(w2[0] == 1.0f);
}

/* ==== a synthetic qwen3moe model ==== */

#define MOE_OPTS "--arch qwen3moe --dim 64 --layers 2 --heads 2 --kv-heads 1 --head-dim 32 --ff 128 " \
                 "--experts 6 --experts-used 2 --ff-exp 32 --seed 11"

static const char *moe_model(const char *type, bool merged)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/moe-%s%s.gguf", tmpdir, type, merged ? "-m" : "");
    if (access(path, R_OK) != 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "tests/mkmodel %s " MOE_OPTS " --type %s %s >/dev/null", path, type,
                 merged ? "--merged-gate-up" : "");
        assert_int_equal(system(cmd), 0);
    }
    return path;
}

/* the logits after ids, in one batch or token by token */
static void run(struct llm_model *m, const int32_t *ids, int n, bool one_by_one, int threads, float *out)
{
    struct llm_ctx_params p = llm_ctx_default_params();
    p.n_ctx = 256;
    p.n_threads = threads;
    struct llm_ctx *c;
    char err[256];
    assert_int_equal(llm_ctx_init(m, p, &c, err, sizeof err), 0);
    if (one_by_one)
        for (int i = 0; i < n; i++)
            assert_int_equal(llm_ctx_decode(c, ids + i, 1), LLM_OK);
    else
        assert_int_equal(llm_ctx_decode(c, ids, n), LLM_OK);
    memcpy(out, llm_ctx_logits(c), (size_t)llm_model_n_vocab(m) * sizeof(float));
    llm_ctx_free(c);
}

static void test_model(void **state)
{
    (void)state;
    int32_t ids[150];
    for (int i = 0; i < 150; i++)
        ids[i] = (int32_t)(3 + (i * 37 + 11) % 500);
    const char *const types[] = {"F32", "Q8_0"};
    for (int ti = 0; ti < 2; ti++) {
        struct llm_model *m = open_model(moe_model(types[ti], false));
        struct llm_model_arch_info a;
        llm_model_arch_info(m, &a);
        assert_true(a.computable);
        assert_int_equal(a.n_expert, 6);
        assert_int_equal(a.n_expert_used, 2);
        assert_int_equal(a.n_ff_exp, 32);
        assert_int_equal(a.n_layer_moe, 2);
        assert_false(a.fused_gate_up_exps);
        assert_string_equal(a.moe_gating, "softmax, top-k, renormalised");
        /* 2 layers of 4 unchosen experts of 3 x 64 x 32 elements */
        assert_int_equal(a.n_params_active, llm_model_get_meta(m)->n_params - 2 * 4 * 3 * 64 * 32);
        /* decode bytes: all but the unchosen experts and all but one row of token_embd */
        const struct llm_gguf *g = llm_model_gguf(m);
        uint64_t want = 0;
        for (int64_t j = 0; j < llm_gguf_n_tensors(g); j++) {
            const struct llm_tensor_info *t = llm_gguf_tensor(g, j);
            if (strstr(t->name, "_exps."))
                want += t->n_bytes / 6 * 2;
            else if (!strcmp(t->name, "token_embd.weight"))
                want += t->n_bytes / (uint64_t)t->ne[1];
            else
                want += t->n_bytes;
        }
        assert_int_equal(llm_model_decode_bytes(m), want);

        /* the merged gate+up tensor: the same bits, every way */
        struct llm_model *mm = open_model(moe_model(types[ti], true));
        llm_model_arch_info(mm, &a);
        assert_true(a.fused_gate_up_exps);
        int64_t nv = llm_model_n_vocab(m);
        float *ref = malloc((size_t)nv * sizeof *ref), *got = malloc((size_t)nv * sizeof *got);
        run(m, ids, 150, false, 2, ref);
        run(mm, ids, 150, false, 1, got);
        assert_memory_equal(ref, got, (size_t)nv * sizeof *ref);
        run(mm, ids, 150, true, 2, got);
        assert_memory_equal(ref, got, (size_t)nv * sizeof *ref);
        free(ref);
        free(got);
        llm_model_close(mm);
        llm_model_close(m);
    }
}

/* the u32 metadata value of key in the GGUF file path (in its first 64 KiB)
 * set to v in place: the value follows the key's name and its u32 type */
static void patch_u32(const char *path, const char *key, uint32_t v)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f), kl = strlen(key);
    char *hit = memmem(buf, n, key, kl);
    assert_non_null(hit);
    uint32_t type;
    memcpy(&type, hit + kl, 4);
    assert_int_equal(type, LLM_GGUF_TYPE_UINT32);
    fseek(f, (long)(hit + kl + 4 - buf), SEEK_SET);
    assert_int_equal(fwrite(&v, 4, 1, f), 1);
    fclose(f);
}

/* expert_used_count above expert_count: refused, naming the key */
static void test_bad(void **state)
{
    (void)state;
    char path[512], cmd[1024], err[256];
    snprintf(path, sizeof path, "%s/bad.gguf", tmpdir);
    snprintf(cmd, sizeof cmd, "tests/mkmodel %s " MOE_OPTS " >/dev/null", path);
    assert_int_equal(system(cmd), 0);
    patch_u32(path, "qwen3moe.expert_used_count", 7);
    struct llm_model *m;
    assert_int_not_equal(llm_model_open(path, llm_model_default_params(), &m, err, sizeof err), 0);
    assert_non_null(strstr(err, "expert_used_count"));
}

/* gemma4: a dense E2B-like model and a 26B-A4B-like one are read as
 * llama.cpp reads them, and run; their KV cache holds the layers that own
 * KV only, each at its own width (the E2B-like: layers 0-2 local, of one
 * KV head of 16, layer 3 global, of 32; layers 4-7 share theirs: in runs
 * of 16, 5 of them; the 26B-A4B-like: 4 local layers of 4 heads of 16, 2
 * global of 1 head of 32: in runs of 32, 10), and rows exported from one
 * context and imported into another give the same logits; a file whose
 * shared layers would read the KV of a layer of the other kind is refused,
 * naming the layers */
static void test_gemma4_bind(void **state)
{
    (void)state;
    char path[512], cmd[1024], err[256];
    struct llm_model *m;
    struct llm_model_params p = llm_model_default_params();
    p.bind_only = true;
    const char *const opts[] = {
        "--arch gemma4 --dim 64 --layers 8 --heads 2 --kv-heads 1 --head-dim 32 --head-dim-swa 16 --ff 64 "
        "--swa 16 --shared-kv 4 --double-wide --per-layer 32",
        "--arch gemma4 --dim 64 --layers 6 --heads 4 --kv-heads 4 --kv-heads-global 1 --head-dim 32 "
        "--head-dim-swa 16 --ff 64 --swa 8 --swa-pattern 3 --per-layer 0 --experts 8 --experts-used 2 "
        "--ff-exp 32 --final-softcap 20",
    };
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/g4-%d.gguf", tmpdir, i);
        snprintf(cmd, sizeof cmd, "tests/mkmodel %s %s >/dev/null", path, opts[i]);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(llm_model_open(path, p, &m, err, sizeof err), 0);
        struct llm_model_arch_info a;
        llm_model_arch_info(m, &a);
        assert_true(a.computable);
        assert_true(a.qk_norm && a.post_norms && a.gelu);
        assert_true(a.attn_scale == 1.0f);
        assert_true(a.embd_scale == sqrtf(64.0f));
        assert_true(a.final_softcap == (i ? 20.0f : 30.0f));
        assert_int_equal(a.n_swa, i ? 8 : 16);
        assert_int_equal(a.n_swa_layers, i ? 4 : 6);
        assert_int_equal(a.n_expert, i ? 8 : 0);
        assert_int_equal(a.n_layer_moe, i ? 6 : 0);
        for (int64_t l = 0; l < llm_model_n_layer(m); l++)
            assert_int_equal(llm_model_layer_swa(m, l), i ? (l + 1) % 3 != 0 : (l + 1) % 4 != 0);
        llm_model_close(m);
        assert_int_equal(llm_model_open(path, llm_model_default_params(), &m, err, sizeof err), 0);
        assert_int_equal(llm_model_n_layer_kv(m), i ? 10 : 5);
        assert_int_equal(llm_model_n_embd_kv(m), i ? 32 : 16);
        struct llm_ctx_params cp = llm_ctx_default_params();
        cp.n_ctx = 64;
        cp.n_threads = 2;
        struct llm_ctx *a_ctx, *b_ctx;
        assert_int_equal(llm_ctx_init(m, cp, &a_ctx, err, sizeof err), 0);
        assert_int_equal(llm_ctx_init(m, cp, &b_ctx, err, sizeof err), 0);
        /* f16 rows of the owning layers only: (3 * 16 + 32) or (4 * 64 + 2 * 32) a position, K and V */
        assert_int_equal(llm_ctx_kv_size(a_ctx, 0, 1), i ? (4 * 64 + 2 * 32) * 2 * 2 : (3 * 16 + 32) * 2 * 2);
        int32_t ids[24];
        for (int k = 0; k < 24; k++)
            ids[k] = 3 + (k * 37) % 200;
        assert_int_equal(llm_ctx_decode(a_ctx, ids, 24), LLM_OK);
        int64_t nv = llm_model_n_vocab(m);
        float *want = malloc((size_t)nv * sizeof *want);
        assert_non_null(want);
        memcpy(want, llm_ctx_logits(a_ctx), (size_t)nv * sizeof *want);
        /* rows [0, 20) exported in two pieces, imported, the last 4 ids decoded again */
        size_t s1 = llm_ctx_kv_size(a_ctx, 0, 13), s2 = llm_ctx_kv_size(a_ctx, 13, 20);
        uint8_t *rows = malloc(s1 + s2);
        assert_non_null(rows);
        assert_int_equal(llm_ctx_kv_export(a_ctx, 0, 13, rows, s1), (int64_t)s1);
        assert_int_equal(llm_ctx_kv_export(a_ctx, 13, 20, rows + s1, s2), (int64_t)s2);
        assert_int_equal(llm_ctx_kv_import(b_ctx, 0, 13, rows, s1), 0);
        assert_int_equal(llm_ctx_kv_import(b_ctx, 13, 20, rows + s1, s2), 0);
        assert_int_equal(llm_ctx_decode(b_ctx, ids + 20, 4), LLM_OK);
        assert_memory_equal(llm_ctx_logits(b_ctx), want, (size_t)nv * sizeof *want);
        /* and through llm_ctx_kv_rows, run by run, as the block files are read */
        assert_int_equal(llm_ctx_truncate(b_ctx, 0), LLM_OK);
        const uint8_t *src = rows;
        for (int64_t r = 0; r < llm_model_n_layer_kv(m); r++)
            for (int kv = 0; kv < 2; kv++) {
                uint8_t *base;
                size_t stride, chunk;
                int64_t n_chunks;
                assert_int_equal(llm_ctx_kv_rows(b_ctx, r, kv, 0, 13, &base, &stride, &n_chunks, &chunk), LLM_OK);
                for (int64_t g = 0; g < n_chunks; g++, src += chunk)
                    memcpy(base + (size_t)g * stride, src, chunk);
            }
        assert_int_equal(src - rows, (ptrdiff_t)s1);
        assert_int_equal(llm_ctx_kv_commit(b_ctx, 13), LLM_OK);
        assert_int_equal(llm_ctx_decode(b_ctx, ids + 13, 11), LLM_OK);
        assert_memory_equal(llm_ctx_logits(b_ctx), want, (size_t)nv * sizeof *want);
        free(rows);
        free(want);
        llm_ctx_free(a_ctx);
        llm_ctx_free(b_ctx);
        llm_model_close(m);
    }
    /* shared_kv_layers 4 -> 5: the global layer 7 would read layer 2, a local one */
    snprintf(path, sizeof path, "%s/g4-0.gguf", tmpdir);
    patch_u32(path, "gemma4.attention.shared_kv_layers", 5);
    assert_int_not_equal(llm_model_open(path, p, &m, err, sizeof err), 0);
    assert_non_null(strstr(err, "shares the KV of layer"));
}

TEST_DIR_GROUP(tmpdir, "kvchat-test-moe")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_softmax),
        cmocka_unit_test(test_gate_ties),
        cmocka_unit_test(test_gate_softmax_weight),
        cmocka_unit_test(test_gate_clamp),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_gemma4_bind),
    };
    return cmocka_run_group_tests(tests, test_dir_setup, test_dir_teardown);
}
