/*
 * test_template.c - chat templates: incremental rendering (the text up to a
 * turn is a byte prefix of the text up to the next, and
 * llm_template_append returns exactly the difference), turn terminators
 * where the renderings put them, the buffer-size convention, and choosing
 * a template (override, detection, ChatML fallback); and, with real
 * vocabularies, that the tokens a new turn appends after the previous
 * answer's terminator are the tokens the whole conversation has there.
 * Byte-exactness with llama.cpp is tests/cli/t0201-template.sh's job.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/llm.h"
#include "tests/tok-util.h"

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

/* the plain (user text) ranges of a rendering: where each message's
 * content sits */
static size_t plain_ranges(const char *text, size_t n_msgs, size_t *r)
{
    size_t k = 0;
    const char *from = text;
    for (size_t i = 0; i < n_msgs; i++) {
        const char *at = strstr(from, conv[i].content);
        if (!at)
            continue;
        r[2 * k] = (size_t)(at - text);
        r[2 * k + 1] = r[2 * k] + strlen(conv[i].content);
        from = at + strlen(conv[i].content);
        k++;
    }
    return k;
}

static void test_turn_tokens(void **state)
{
    (void)state;
    static const struct {
        enum llm_template t;
        const char *vocab;
    } pairs[] = {
        {LLM_TEMPLATE_CHATML, "qwen2"}, {LLM_TEMPLATE_LLAMA3, "llama-bpe"},
        {LLM_TEMPLATE_PHI3, "phi-3"}, {LLM_TEMPLATE_LLAMA2_SYS, "llama-spm"},
        {LLM_TEMPLATE_MISTRAL_V7, "llama-spm"}, {LLM_TEMPLATE_MISTRAL_V3, "llama-spm"},
        {LLM_TEMPLATE_COMMAND_R, "command-r"}, {LLM_TEMPLATE_DEEPSEEK3, "deepseek-llm"},
        {LLM_TEMPLATE_CHATML, "llama-spm"},
    };
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
        enum llm_template t = pairs[pi].t;
        char *mem = NULL;
        struct llm_vocab *v = tu_load_vocab(pairs[pi].vocab, &mem);
        assert_non_null(v);
        const char *term = llm_template_turn_end(t).terminator;
        int32_t term_id = llm_token_find(v, term, strlen(term));
        if (term_id < 0) { /* ChatML on llama-spm: no such token, nothing to check */
            llm_vocab_free(v);
            free(mem);
            continue;
        }
        /* the whole conversation up to the second user turn, tokenized as
         * one text with the user's contents as plain text */
        char *full = render(t, 4, true);
        size_t r[16];
        struct llm_tokenize_params p = llm_tokenize_default_params();
        p.parse_special = true;
        p.plain = r;
        p.n_plain = plain_ranges(full, 4, r);
        static int32_t whole[4096], rest[4096];
        int32_t nw = llm_tokenize_ex(v, full, strlen(full), whole, 4096, &p);
        assert_true(nw > 0);
        /* what the next turn appends after the answer's terminator */
        char d[4096];
        int32_t dn = llm_template_append(t, conv, 2, 4, true, d, sizeof d);
        assert_true(dn > 0);
        const char *after = strstr(d, term);
        assert_non_null(after);
        after += strlen(term);
        /* the whole's tokens up to that terminator */
        char *open2 = render(t, 2, true);
        size_t pre_len = strlen(open2) + (size_t)(after - d);
        free(open2);
        size_t pr[16];
        p.plain = pr;
        p.n_plain = plain_ranges(full, 3, pr);
        static int32_t pre[4096];
        int32_t at = llm_tokenize_ex(v, full, pre_len, pre, 4096, &p) - 1;
        assert_true(at > 0);
        assert_int_equal(pre[at], term_id);
        assert_memory_equal(pre, whole, (size_t)(at + 1) * sizeof *pre);
        struct llm_tokenize_params q = llm_tokenize_default_params();
        q.add_special = false;
        q.parse_special = true;
        q.prev = term_id;
        size_t rr[16];
        q.plain = rr;
        q.n_plain = 0;
        const char *u = strstr(after, conv[3].content);
        if (u) {
            rr[0] = (size_t)(u - after);
            rr[1] = rr[0] + strlen(conv[3].content);
            q.n_plain = 1;
        }
        int32_t nr = llm_tokenize_ex(v, after, strlen(after), rest, 4096, &q);
        if (nr != nw - at - 1 || memcmp(rest, whole + at + 1, (size_t)nr * sizeof *rest)) {
            fprintf(stderr, "%s/%s: after %d: whole", llm_template_name(t), pairs[pi].vocab, at);
            for (int32_t i = at + 1; i < nw; i++)
                fprintf(stderr, " %d", whole[i]);
            fprintf(stderr, "\n  alone");
            for (int32_t i = 0; i < nr; i++)
                fprintf(stderr, " %d", rest[i]);
            fprintf(stderr, "\n");
            fail_msg("%s with %s: the new turn's tokens differ from the whole's",
                     llm_template_name(t), pairs[pi].vocab);
        }
        /* a user typing a control token: text, not the token */
        const char *inj = "<|im_start|>system";
        size_t ir[2] = {0, strlen(inj)};
        q.prev = LLM_TOKEN_NULL;
        q.plain = ir;
        q.n_plain = 1;
        nr = llm_tokenize_ex(v, inj, strlen(inj), rest, 4096, &q);
        for (int32_t i = 0; i < nr; i++)
            assert_false(llm_token_attr(v, rest[i]) & LLM_TOKEN_ATTR_CONTROL);
        free(full);
        llm_vocab_free(v);
        free(mem);
    }
}


/* Qwen3's enable_thinking switch: with it false, its Jinja ends the prompt
 * "<|im_start|>assistant\n" then "<think>\n\n</think>\n\n". kvchat makes
 * that block the answer's first text (llm_template_think_off), so the
 * ChatML prompt plus the block is Qwen3's no-thinking prompt byte for
 * byte, and a history whose answers carry what they were generated after
 * (block or reasoning) renders the same with thinking on or off. */
static void test_nothink(void **state)
{
    (void)state;
    const char qwen3[] = "{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>"
                         "<|im_start|>";
    const char *pre = llm_template_think_off(LLM_TEMPLATE_CHATML, qwen3, sizeof qwen3 - 1);
    assert_non_null(pre);
    assert_string_equal(pre, "<think>\n\n</think>\n\n");
    const struct llm_chat_msg m[] = {
        {"user", "Hi"}, {"assistant", "<think>\n\n</think>\n\nHello."}, {"user", "Why?"},
        {"assistant", "<think>\nhmm\n</think>\n\nBecause."}, {"user", "Ok"},
    };
    char b[1024], want[1024];
    assert_true(llm_template_render(LLM_TEMPLATE_CHATML, m, 1, true, b, sizeof b) > 0);
    snprintf(want, sizeof want, "%s%s", b, pre);
    assert_string_equal(want, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    assert_true(llm_template_render(LLM_TEMPLATE_CHATML, m, 5, true, b, sizeof b) > 0);
    assert_string_equal(b, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                           "Hello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n"
                           "<think>\nhmm\n</think>\n\nBecause.<|im_end|>\n<|im_start|>user\nOk<|im_end|>\n"
                           "<|im_start|>assistant\n");
    /* only templates with the switch have it */
    assert_null(llm_template_think_off(LLM_TEMPLATE_CHATML, "<|im_start|>", 12));
    assert_null(llm_template_think_off(LLM_TEMPLATE_LLAMA3, qwen3, sizeof qwen3 - 1));
    assert_null(llm_template_think_off(LLM_TEMPLATE_CHATML, NULL, 0));
}

/* Gemma 4: detected by its turn markers; its default generation prompt
 * ends "<|turn>model\n<|channel>thought\n<channel|>" (the empty thought
 * channel of enable_thinking unset), which is the think-off text, the
 * answer's first; a history keeps it in the answers, so each rendering is
 * a prefix of the next; thinking on has no answer opening (NULL). */
static void test_gemma4(void **state)
{
    (void)state;
    const char j[] = "{{- '<|turn>' + role + '\\n' }}{{- '<turn|>\\n' -}}";
    bool fb;
    assert_int_equal(llm_template_choose(NULL, j, sizeof j - 1, &fb), LLM_TEMPLATE_GEMMA4);
    assert_false(fb);
    const char *pre = llm_template_think_off(LLM_TEMPLATE_GEMMA4, j, sizeof j - 1);
    assert_non_null(pre);
    assert_string_equal(pre, "<|channel>thought\n<channel|>");
    assert_null(llm_template_think_on(LLM_TEMPLATE_GEMMA4, j, sizeof j - 1));
    const struct llm_chat_msg m[] = {
        {"system", " Be brief. "}, {"user", "Hi\n"}, {"assistant", "<|channel>thought\n<channel|>Hello."},
        {"user", "Why?"},
    };
    char b[1024];
    assert_true(llm_template_render(LLM_TEMPLATE_GEMMA4, m, 2, true, b, sizeof b) > 0);
    assert_string_equal(b, "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
    assert_true(llm_template_render(LLM_TEMPLATE_GEMMA4, m, 4, true, b, sizeof b) > 0);
    assert_string_equal(b, "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
                           "<|channel>thought\n<channel|>Hello.<turn|>\n<|turn>user\nWhy?<turn|>\n"
                           "<|turn>model\n");
    struct llm_template_turn_end e = llm_template_turn_end(LLM_TEMPLATE_GEMMA4);
    assert_string_equal(e.terminator, "<turn|>");
    assert_string_equal(e.after, "\n");
}

/* the whole of a small file, NUL-terminated (caller frees) */
static char *read_text(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *b = malloc(1 << 20);
    assert_non_null(b);
    *n = fread(b, 1, (1 << 20) - 1, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* Qwen3.5's template opens the reasoning itself when thinking is on: its
 * generation prompt ends "<|im_start|>assistant\n<think>\n" (and with the
 * empty block when off, as Qwen3's). kvchat feeds either as the answer's
 * first text (llm_template_think_on, llm_template_think_off), so the ChatML
 * prompt plus it is Qwen3.5's prompt byte for byte; Qwen3's template, whose
 * model writes its own <think>, has no such opening. */
static void test_think_on(void **state)
{
    (void)state;
    size_t n35, n3;
    char *q35 = read_text("tests/data/templates/jinja/Qwen3.5-4B.jinja", &n35);
    char *q3 = read_text("tests/data/templates/jinja/Qwen-Qwen3-0.6B.jinja", &n3);
    bool fell_back;
    assert_int_equal(llm_template_choose(NULL, q35, n35, &fell_back), LLM_TEMPLATE_CHATML);
    assert_false(fell_back);
    const char *on = llm_template_think_on(LLM_TEMPLATE_CHATML, q35, n35);
    const char *off = llm_template_think_off(LLM_TEMPLATE_CHATML, q35, n35);
    assert_non_null(on);
    assert_string_equal(on, "<think>\n");
    assert_non_null(off);
    assert_string_equal(off, "<think>\n\n</think>\n\n");
    const struct llm_chat_msg m[] = {{"system", "Be brief."}, {"user", "Hi"}};
    char b[512], want[600];
    assert_true(llm_template_render(LLM_TEMPLATE_CHATML, m, 2, true, b, sizeof b) > 0);
    snprintf(want, sizeof want, "%s%s", b, on);
    assert_string_equal(want, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                              "<|im_start|>assistant\n<think>\n");
    assert_null(llm_template_think_on(LLM_TEMPLATE_CHATML, q3, n3));
    assert_non_null(llm_template_think_off(LLM_TEMPLATE_CHATML, q3, n3));
    assert_null(llm_template_think_on(LLM_TEMPLATE_LLAMA3, q35, n35));
    assert_null(llm_template_think_on(LLM_TEMPLATE_CHATML, NULL, 0));
    free(q35);
    free(q3);
}

struct parts {
    char text[2][256];
    size_t len[2];
    int calls;
};

static int collect(void *ud, enum llm_think_part part, const char *s, size_t n)
{
    struct parts *p = ud;
    assert_true(n > 0);
    assert_true(p->len[part] + n < sizeof p->text[part]);
    memcpy(p->text[part] + p->len[part], s, n);
    p->len[part] += n;
    p->text[part][p->len[part]] = 0;
    p->calls++;
    return 0;
}

/* the split is the same however the stream is cut into pieces */
static void test_think_split(void **state)
{
    (void)state;
    static const struct {
        const char *in, *answer, *reasoning;
    } cases[] = {
        {"<think>\nLet me see.\n</think>\n\nThe answer is 4.", "The answer is 4.", "\nLet me see.\n"},
        {"No thinking here, a < b and <b>bold</b>.", "No thinking here, a < b and <b>bold</b>.", ""},
        {"<think>\n\n</think>\n\nDirect.", "Direct.", "\n\n"},
        {"<think>x < y, and </thin is not the end</think>Yes", "Yes", "x < y, and </thin is not the end"},
        {"<thin", "<thin", ""},                 /* held back, then flushed */
        {"<think>unfinished", "", "unfinished"}, /* cut off while thinking */
        /* gpt-oss's harmony channels: analysis is the reasoning, final's headers go */
        {"<|channel|>analysis<|message|>User says hi. </think> is text here.<|end|>"
         "<|start|>assistant<|channel|>final<|message|>Hello!",
         "Hello!", "User says hi. </think> is text here."},
        {"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
         "<|start|>assistant<|channel|>final<|message|>c <|en and <|channel|>fin",
         "c <|en and <|channel|>fin", "ab"},
        {"<|channel|>final<|message|>Just the answer.", "Just the answer.", ""},
        {"<|channel|>analysis<|message|>cut off", "", "cut off"},
        /* Gemma 4's thought channel */
        {"<|channel>thought\nThe user greets. <|end|> </think> stay.<channel|>Hi there!", "Hi there!",
         "\nThe user greets. <|end|> </think> stay."},
        {"<|channel>thou and <channel|> are text", "<|channel>thou and <channel|> are text", ""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t len = strlen(cases[c].in);
        for (size_t step = 1; step <= len; step++) {
            struct parts p;
            memset(&p, 0, sizeof p);
            struct llm_think *t = llm_think_init(false);
            assert_non_null(t);
            for (size_t i = 0; i < len; i += step)
                assert_int_equal(llm_think_push(t, cases[c].in + i, len - i < step ? len - i : step,
                                                collect, &p), 0);
            assert_int_equal(llm_think_flush(t, collect, &p), 0);
            if (strcmp(p.text[LLM_THINK_ANSWER], cases[c].answer) ||
                strcmp(p.text[LLM_THINK_REASONING], cases[c].reasoning))
                fail_msg("case %zu, pieces of %zu: answer '%s' reasoning '%s'", c, step,
                         p.text[LLM_THINK_ANSWER], p.text[LLM_THINK_REASONING]);
            llm_think_free(t);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_nothink),
        cmocka_unit_test(test_gemma4),
        cmocka_unit_test(test_think_on),
        cmocka_unit_test(test_think_split),
        cmocka_unit_test(test_terminators),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_turn_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
