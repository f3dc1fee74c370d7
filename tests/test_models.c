/*
 * test_models.c - the model store and the config file (models/store.c,
 * models/config.c): store names, the config reader and writer (other lines
 * kept; a failed fsync or rename leaves the old file whole and no temporary
 * behind), the default model's precedence, listing, and `rm` with the
 * sessions hook refusing and --force overriding it. fsync and rename are
 * wrapped for fault injection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "models/mdl.h"
#include "core/llm.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fault-fs.h"
#include "tests/tmpdir.h"

static char dir[256];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static int setup(void **state)
{
    assert_int_equal(test_dir_make(dir, sizeof dir, "kvchat-test-models"), 0);
    char p[512];
    snprintf(p, sizeof p, "%s/home", dir);
    setenv("KVCHAT_HOME", p, 1);
    snprintf(p, sizeof p, "%s/config", dir);
    setenv("XDG_CONFIG_HOME", p, 1);
    unsetenv("KVCHAT_MODEL");
    fail_fsync = fail_rename = 0;
    return 0;
}

static int teardown(void **state)
{
    assert_int_equal(test_dir_remove(dir), 0);
    return 0;
}

static void test_names(void **state)
{
    assert_true(mdl_name_valid("qwen2.5:0.5b"));
    assert_true(mdl_name_valid("Llama-3.2-1B-Instruct-Q4_K_M"));
    assert_true(mdl_name_valid("a+b"));
    assert_false(mdl_name_valid(""));
    assert_false(mdl_name_valid(".hidden"));
    assert_false(mdl_name_valid("-opt"));
    assert_false(mdl_name_valid("../x"));
    assert_false(mdl_name_valid("a/b"));
    assert_false(mdl_name_valid("a b"));
    char big[200];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_false(mdl_name_valid(big));
    char p[4096];
    assert_int_equal(mdl_store_path("m", p, sizeof p), 0);
    assert_non_null(strstr(p, "/home/models/m.gguf"));
    assert_int_equal(mdl_store_path("../m", p, sizeof p), MDL_ERR_USAGE);
}

static void test_config(void **state)
{
    char path[4096], v[256], e[256];
    const char *what;
    assert_int_equal(mdl_config_path(path, sizeof path), 0);
    assert_int_equal(mdl_config_get("model", v, sizeof v), 0); /* no file */
    assert_int_equal(mdl_default_model(v, sizeof v, &what), 0);
    assert_int_equal(mdl_config_set("model", "a", e, sizeof e), 0);
    assert_int_equal(mdl_config_get("model", v, sizeof v), 1);
    assert_string_equal(v, "a");
    /* other lines and comments are kept; the key is replaced in place */
    write_file(path, "# comment\nthreads=4\n  model   =   old value  \ntemp = 0.7");
    assert_int_equal(mdl_config_get("model", v, sizeof v), 1);
    assert_string_equal(v, "old value");
    assert_int_equal(mdl_config_set("model", "new", e, sizeof e), 0);
    assert_string_equal(read_file(path), "# comment\nthreads=4\nmodel = new\ntemp = 0.7\n");
    assert_int_equal(mdl_config_get("threads", v, sizeof v), 1);
    assert_string_equal(v, "4");
    /* later lines win */
    write_file(path, "model = one\nmodel = two\n");
    assert_int_equal(mdl_config_get("model", v, sizeof v), 1);
    assert_string_equal(v, "two");
    assert_int_equal(mdl_config_set("model", NULL, e, sizeof e), 0);
    assert_string_equal(read_file(path), "");
    /* KVCHAT_MODEL over the file */
    assert_int_equal(mdl_config_set("model", "fromfile", e, sizeof e), 0);
    assert_int_equal(mdl_default_model(v, sizeof v, &what), 1);
    assert_string_equal(v, "fromfile");
    setenv("KVCHAT_MODEL", "fromenv", 1);
    assert_int_equal(mdl_default_model(v, sizeof v, &what), 1);
    assert_string_equal(v, "fromenv");
    assert_string_equal(what, "KVCHAT_MODEL");
    unsetenv("KVCHAT_MODEL");
}

/* a failed write leaves the old config whole and no temporary file */
static void test_config_faults(void **state)
{
    char path[4096], e[256], d[4096];
    assert_int_equal(mdl_config_set("model", "keep", e, sizeof e), 0);
    assert_int_equal(mdl_config_path(path, sizeof path), 0);
    for (int which = 0; which < 2; which++) {
        fail_fsync = which == 0;
        fail_rename = which == 1;
        assert_int_equal(mdl_config_set("model", "lost", e, sizeof e), MDL_ERR_FILE);
        assert_non_null(strstr(e, which == 0 ? "Input/output error" : "cannot rename"));
        fail_fsync = fail_rename = 0;
        assert_string_equal(read_file(path), "model = keep\n");
        snprintf(d, sizeof d, "%s", path);
        *strrchr(d, '/') = 0;
        DIR *dd = opendir(d);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(dd)))
            n += de->d_name[0] != '.';
        closedir(dd);
        assert_int_equal(n, 1); /* only "config" */
    }
}

static int in_use_calls;
static int says_in_use(void *ctx, const char *name, const char *path, char *who, size_t who_size)
{
    in_use_calls++;
    assert_string_equal(name, "m");
    assert_non_null(strstr(path, "/models/m.gguf"));
    snprintf(who, who_size, "session '%s'", (const char *)ctx);
    return 1;
}

static void test_list_and_rm(void **state)
{
    struct mdl_entry *es, e;
    size_t n;
    char err[512], p[4200], home[4000];
    assert_int_equal(mdl_list(&es, &n, err, sizeof err), 0); /* no store yet */
    assert_int_equal(n, 0);
    mdl_list_free(es, n);
    assert_int_equal(mdl_home(home, sizeof home), 0);
    snprintf(p, sizeof p, "%s", home);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/models", home);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/models/m.gguf", home);
    write_file(p, "not a model");
    snprintf(p, sizeof p, "%s/models/m.meta", home);
    write_file(p, "source = hf:o/r/m.gguf\npulled = 1700000000\nsha256 = short\n");
    snprintf(p, sizeof p, "%s/models/.hidden.gguf", home);
    write_file(p, "x");
    snprintf(p, sizeof p, "%s/models/b.part", home);
    write_file(p, "partial");
    assert_int_equal(mdl_list(&es, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(es[0].name, "m");
    assert_string_equal(es[0].source, "hf:o/r/m.gguf");
    assert_int_equal(es[0].pulled, 1700000000);
    assert_string_equal(es[0].sha256, ""); /* not 64 hex digits: ignored */
    assert_true(es[0].error[0] != 0);      /* not a GGUF */
    assert_int_equal(es[0].n_params, -1);
    mdl_list_free(es, n);

    /* the sessions hook refuses; --force overrides it */
    in_use_calls = 0;
    assert_int_equal(mdl_rm("m", false, says_in_use, "chat1", err, sizeof err), MDL_ERR_IN_USE);
    assert_int_equal(in_use_calls, 1);
    assert_non_null(strstr(err, "used by session 'chat1'"));
    assert_int_equal(mdl_stat("m", &e, err, sizeof err), 0);
    assert_non_null(strstr(e.path, "/models/m.gguf"));
    mdl_entry_free(&e);
    assert_int_equal(mdl_rm("m", true, says_in_use, "chat1", err, sizeof err), 0);
    assert_int_equal(in_use_calls, 1); /* not even asked */
    assert_int_equal(mdl_stat("m", &e, err, sizeof err), MDL_ERR_NOT_FOUND);
    assert_null(e.path);
    snprintf(p, sizeof p, "%s/models/m.meta", home);
    assert_int_equal(access(p, F_OK), -1);
    /* a partial download alone can be removed */
    assert_int_equal(mdl_rm("b", false, NULL, NULL, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/models/b.part", home);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(mdl_rm("b", false, NULL, NULL, err, sizeof err), MDL_ERR_NOT_FOUND);
    assert_int_equal(mdl_rm("../etc", false, NULL, NULL, err, sizeof err), MDL_ERR_USAGE);
}

/* Every alias: a synthetic model with its architecture and vocabulary
 * (tests/mkmodel, the vocabulary from tests/data/tokenizer) opens and
 * answers a chat turn rendered with the alias's template (that these
 * architectures compute what llama.cpp does: tests/cli/t0600, t0403). An
 * alias whose architecture kvchat could not run would be hidden from
 * mdl_alias_find and `models aliases`: today every one runs. */
static void test_aliases(void **state)
{
    (void)state;
    int n = 0, shown = 0;
    char dir[] = "/tmp/kvchat-alias.XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (const struct mdl_alias *a = mdl_aliases; a->name; a++, n++) {
        assert_true(mdl_name_valid(a->name));
        assert_non_null(strchr(a->repo, '/'));
        assert_non_null(strstr(a->file, ".gguf"));
        assert_true(a->size > 100000000ULL);
        assert_true(llm_template_from_name(a->tmpl) != LLM_TEMPLATE_UNKNOWN);
        bool runs = mdl_alias_runs(a);
        assert_ptr_equal(mdl_alias_find(a->name), runs ? a : NULL);
        shown += runs;
        char cmd[1024], path[256], err[512];
        snprintf(path, sizeof path, "%s/m.gguf", dir);
        if (*a->vocab)
            snprintf(cmd, sizeof cmd,
                     "xz -dc tests/data/tokenizer/ggml-vocab-%s.gguf.xz > %s/v.gguf && "
                     "tests/mkmodel %s --arch %s --vocab %s/v.gguf --dim 64 --layers 1 --heads 4 "
                     "--kv-heads 2 --ff 128 --tied >/dev/null",
                     a->vocab, dir, path, a->arch, dir);
        else /* no vocabulary file of its kind at hand: the placeholder */
            snprintf(cmd, sizeof cmd,
                     "tests/mkmodel %s --arch %s --n-vocab 512 --dim 64 --layers 1 --heads 4 "
                     "--kv-heads 2 --ff 128 --tied >/dev/null",
                     path, a->arch);
        assert_int_equal(system(cmd), 0);
        struct llm_model *m = NULL;
        int r = llm_model_open(path, llm_model_default_params(), &m, err, sizeof err);
        if (r)
            fail_msg("%s: %s", a->name, err);
        struct llm_vocab *v;
        assert_int_equal(llm_vocab_load(llm_model_gguf(m), &v, err, sizeof err), 0);
        struct llm_ctx *c;
        struct llm_ctx_params cp = llm_ctx_default_params();
        cp.n_ctx = 256;
        cp.n_threads = 1;
        assert_int_equal(llm_ctx_init(m, cp, &c, err, sizeof err), 0);
        const struct llm_chat_msg msg[] = {{"user", "Hello!"}};
        char text[512];
        int32_t len = llm_template_render(llm_template_from_name(a->tmpl), msg, 1, true, text, sizeof text);
        assert_true(len > 0);
        int32_t toks[256];
        int32_t nt = llm_tokenize(v, text, (size_t)len, toks, 256, true, true);
        assert_true(nt > 0);
        assert_int_equal(llm_ctx_decode(c, toks, nt), 0);
        for (int i = 0; i < 4; i++) {
            const float *lg = llm_ctx_logits(c);
            int32_t best = 0;
            for (int64_t k = 1; k < llm_model_n_vocab(m); k++)
                if (lg[k] > lg[best])
                    best = (int32_t)k;
            assert_int_equal(llm_ctx_decode(c, &best, 1), 0);
        }
        llm_ctx_free(c);
        llm_vocab_free(v);
        llm_model_close(m);
    }
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
    assert_int_equal(n, 25);
    assert_int_equal(shown, 25);
    assert_non_null(mdl_alias_find(MDL_DEFAULT_ALIAS));
    assert_null(mdl_alias_find("nope:1b"));
    assert_non_null(mdl_alias_find("phi3.5:mini"));
    assert_non_null(mdl_alias_find("gemma3:1b"));
    assert_non_null(mdl_alias_find("qwen3.5:0.8b"));
    assert_non_null(mdl_alias_find("gpt-oss:20b"));
    assert_non_null(mdl_alias_find("qwen3.6:35b-a3b"));
    assert_non_null(mdl_alias_find("gemma4:e2b"));
    assert_non_null(mdl_alias_find("gemma4:26b-a4b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        unit_test_fx(test_names),
        unit_test_fx(test_config),
        unit_test_fx(test_config_faults),
        unit_test_fx(test_list_and_rm),
        cmocka_unit_test(test_aliases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
