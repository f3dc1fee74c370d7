/*
 * fuzz_grammar.c - libFuzzer target for the parsers of constrained output:
 * the first byte chooses GBNF (even) or a JSON Schema (odd); the input up to
 * the first NUL is the grammar or schema, what follows is text fed to the
 * matcher byte by byte. Any bytes must give a grammar or an error with a
 * reason, and a grammar must match any text without reading or writing out
 * of bounds, looping or running out of stack. ASan/UBSan catch the rest.
 *   make tests/fuzz/fuzz_grammar && ./tests/fuzz/fuzz_grammar -max_total_time=600 \
 *        /tmp/grammar-work tests/fuzz/corpus/grammar
 */
#include "core/llm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    bool schema = data[0] & 1;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    const uint8_t *nul = memchr(p, 0, n);
    size_t glen = nul ? (size_t)(nul - p) : n;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t tlen = nul ? n - glen - 1 : 0;
    char *g_text = malloc(glen + 1);
    if (!g_text)
        return 0;
    memcpy(g_text, p, glen);
    g_text[glen] = 0;
    char err[512];
    char *gbnf = NULL;
    if (schema) {
        if (llm_json_schema_to_grammar(g_text, glen, &gbnf, err, sizeof err)) {
            if (!err[0])
                abort(); /* every failure says why */
            free(g_text);
            return 0;
        }
    }
    struct llm_grammar *g;
    const char *src = gbnf ? gbnf : g_text;
    if (llm_grammar_parse(src, strlen(src), &g, err, sizeof err) == 0) {
        struct llm_matcher *m = llm_matcher_init(g, NULL);
        if (m) {
            for (size_t i = 0; i < tlen && i < 4096; i++)
                if (llm_matcher_feed(m, text + i, 1))
                    break;
            (void)llm_matcher_can_end(m);
            (void)llm_matcher_done(m);
            llm_matcher_free(m);
        }
        llm_grammar_free(g);
    } else if (schema) {
        abort(); /* the schema translator wrote a grammar the parser refuses */
    } else if (!err[0]) {
        abort();
    }
    free(gbnf);
    free(g_text);
    return 0;
}
