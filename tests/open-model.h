/*
 * open-model.h - the engine tests' model opening (test_engine,
 * test_forward_ref, test_moe): the file with the default parameters, or
 * the test fails saying why. Include after cmocka.h and core/llm.h.
 */
#ifndef KVCHAT_TESTS_OPEN_MODEL_H
#define KVCHAT_TESTS_OPEN_MODEL_H

static struct llm_model *open_model(const char *path)
{
    struct llm_model *m;
    char err[256];
    if (llm_model_open(path, llm_model_default_params(), &m, err, sizeof err)) {
        print_error("cannot open %s: %s\n", path, err);
        fail();
    }
    return m;
}

#endif
