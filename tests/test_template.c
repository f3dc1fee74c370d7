/*
 * test_template.c - chat templates: incremental rendering (the text up to a
 * turn is a byte prefix of the text up to the next, and
 * llm_template_append returns exactly the difference), turn terminators
 * where the renderings put them, the buffer-size convention, and choosing
 * a template (override, detection, ChatML fallback). Byte-exactness with
 * llama.cpp is tests/cli/t0201-template.sh's job.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"

#include <stdlib.h>
#include <string.h>

static const struct llm_chat_msg conv[] = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello! How can I help?"},
    {"user", "Name a colour."},
    {"assistant", "Blue."},
    {"user", "Another?"},
    {"assistant", "Red."},
};

static char *render(enum llm_template t, size_t n, bool add_ass)
{
    int32_t need = llm_template_render(t, conv, n, add_ass, NULL, 0);
    assert_true(need < 0);
    char *b = malloc((size_t)-need);
    assert_int_equal(llm_template_render(t, conv, n, add_ass, b, -need), -need - 1);
    assert_int_equal(strlen(b), (size_t)(-need - 1));
    return b;
}

static void test_incremental(void **state)
{
    (void)state;
    for (int t = LLM_TEMPLATE_CHATML; t < LLM_TEMPLATE_COUNT; t++) {
        /* after each user message, with the assistant's turn opened */
        for (size_t k = 2; k + 2 <= 6; k += 2) {
            char *a = render((enum llm_template)t, k, true);
            char *b = render((enum llm_template)t, k + 2, true);
            if (strncmp(a, b, strlen(a)))
                fail_msg("%s: turn %zu is not a prefix of turn %zu", llm_template_name(t), k, k + 2);
            char d[4096];
            int32_t n = llm_template_append((enum llm_template)t, conv, k, k + 2, true, d, sizeof d);
            assert_int_equal(n, (int32_t)(strlen(b) - strlen(a)));
            assert_string_equal(d, b + strlen(a));
            /* the whole conversation ends with the last answer */
            free(a);
            free(b);
        }
        char *full = render((enum llm_template)t, 7, false), *open6 = render((enum llm_template)t, 6, true);
        assert_int_equal(strncmp(open6, full, strlen(open6)), 0);
        free(full);
        free(open6);
    }
}

static void test_terminators(void **state)
{
    (void)state;
    for (int t = LLM_TEMPLATE_CHATML; t < LLM_TEMPLATE_COUNT; t++) {
        struct llm_template_turn_end te = llm_template_turn_end((enum llm_template)t);
        char *full = render((enum llm_template)t, 7, false);
        /* each answer is followed (after at most a newline) by the
         * terminator, then by what the template writes after it */
        const char *answers[] = {"How can I help?", "Blue.", "Red."};
        for (size_t i = 0; i < 3; i++) {
            const char *p = strstr(full, answers[i]);
            assert_non_null(p);
            p += strlen(answers[i]);
            if (*p == '\n' && strncmp(p, te.terminator, strlen(te.terminator)))
                p++;
            if (strncmp(p, te.terminator, strlen(te.terminator)))
                fail_msg("%s: no terminator %s after answer %zu", llm_template_name(t),
                         te.terminator, i);
            p += strlen(te.terminator);
            assert_int_equal(strncmp(p, te.after, strlen(te.after)), 0);
        }
        const char *const *stops = llm_template_stops((enum llm_template)t);
        assert_string_equal(stops[0], te.terminator);
        free(full);
    }
}

static void test_sizes(void **state)
{
    (void)state;
    char small[8];
    int32_t n = llm_template_render(LLM_TEMPLATE_CHATML, conv, 2, true, small, sizeof small);
    char *b = render(LLM_TEMPLATE_CHATML, 2, true);
    assert_int_equal(n, -(int32_t)strlen(b) - 1);
    free(b);
    /* history shrinking is refused */
    assert_int_equal(llm_template_append(LLM_TEMPLATE_CHATML, conv, 4, 2, true, small, 8),
                     LLM_TEMPLATE_ENOTPREFIX);
    /* Llama 2 and Mistral add no assistant opening */
    char x[512], y[512];
    llm_template_render(LLM_TEMPLATE_LLAMA2_SYS, conv, 2, true, x, sizeof x);
    llm_template_render(LLM_TEMPLATE_LLAMA2_SYS, conv, 2, false, y, sizeof y);
    assert_string_equal(x, y);
    assert_string_equal(x, "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST]");
}

static void test_choose(void **state)
{
    (void)state;
    bool fb;
    assert_int_equal(llm_template_choose("llama3", NULL, 0, &fb), LLM_TEMPLATE_LLAMA3);
    assert_false(fb);
    assert_int_equal(llm_template_choose("nonsense", NULL, 0, &fb), LLM_TEMPLATE_CHATML);
    assert_true(fb);
    assert_int_equal(llm_template_choose(NULL, NULL, 0, &fb), LLM_TEMPLATE_CHATML);
    assert_true(fb);
    const char *j = "{% for m in messages %}<start_of_turn>{{ m.role }}{% endfor %}";
    assert_int_equal(llm_template_choose(NULL, j, strlen(j), &fb), LLM_TEMPLATE_GEMMA);
    assert_false(fb);
    const char *odd = "{{ messages }}";
    assert_int_equal(llm_template_choose(NULL, odd, strlen(odd), &fb), LLM_TEMPLATE_CHATML);
    assert_true(fb);
    /* an override wins over the model's template */
    assert_int_equal(llm_template_choose("phi3", j, strlen(j), &fb), LLM_TEMPLATE_PHI3);
    for (int t = LLM_TEMPLATE_CHATML; t < LLM_TEMPLATE_COUNT; t++) {
        const char *name = llm_template_name((enum llm_template)t);
        assert_int_equal(llm_template_from_name(name), t);
        assert_int_equal(llm_template_detect(name, strlen(name)), t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_terminators),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_choose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
