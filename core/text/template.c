/*
 * template.c - chat templates: recognising a model's Jinja template by the
 * markers its family always contains (llama.cpp's approach and order; no
 * Jinja interpreter), and rendering conversations in that family's format
 * exactly as llama.cpp's llama_chat_apply_template does.
 *
 * Incremental rendering. kvchat keeps a conversation's KV cache across
 * turns, so the text of turn k+1 must start with the text of turn k, byte
 * for byte. The renderers below are written as one piece per message plus
 * an assistant opening, and the opening is where the assistant's piece
 * starts, so this holds by construction; llm_template_append checks it
 * anyway and fails rather than return text that would need a re-prefill.
 * The templates that could break it, and what happens:
 *  - Gemma has no system turn: the system prompt is merged into the first
 *    user turn. Still a prefix (the system prompt is only ever first), but
 *    the system prompt has no text of its own to share between chats.
 *  - Llama 3, Gemma, Mistral v3, Command-R and llama2-sys-strip trim the
 *    content they render. Trimming is per message, so renderings stay
 *    prefixes of each other; the answer a model generated with leading or
 *    trailing white space renders trimmed, so a caller keeping the
 *    generated tokens in its cache must store the answer as rendered
 *    (llm_template_append's text starts at the answer's own piece so the
 *    caller can compare).
 *  - Llama 2 and Mistral have no assistant opening (add_assistant adds
 *    nothing), so the answer follows [/INST] directly: still a prefix.
 *  - gpt-oss (harmony): the model writes its channels itself after the
 *    assistant's opening "<|start|>assistant" ("<|channel|>analysis
 *    <|message|>...<|end|><|start|>assistant<|channel|>final<|message|>
 *    ..."), so an answer that starts with "<|channel|>" renders as it was
 *    generated, right after the opening; any other assistant content as
 *    llama.cpp renders it ("<|message|>" first). Both end "<|return|>".
 *  - Real Jinja templates that drop earlier reasoning (<think>..., Gemma
 *    4's <|channel>...<channel|>) or reorder history are not interpreted:
 *    kvchat renders the family's plain format, which never rewrites
 *    earlier turns.
 *  - Gemma 4's generation prompt ends with an empty thought channel unless
 *    thinking is enabled (by <|think|> in the system turn, which kvchat
 *    does not write): that channel is its think-off text, which the
 *    conversation feeds as the answer's first tokens (--think off), so the
 *    plain opening is "<|turn>model\n".
 *
 * Invariant: every renderer writes through struct out, which counts the
 * bytes needed even when the buffer is too small.
 */
#include "core/llm.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool has(const char *t, size_t n, const char *needle)
{
    return memmem(t, n, needle, strlen(needle)) != NULL;
}

static const char *const names[LLM_TEMPLATE_COUNT] = {
    [LLM_TEMPLATE_NONE] = "none",
    [LLM_TEMPLATE_UNKNOWN] = "unknown",
    [LLM_TEMPLATE_CHATML] = "chatml",
    [LLM_TEMPLATE_LLAMA2] = "llama2",
    [LLM_TEMPLATE_LLAMA3] = "llama3",
    [LLM_TEMPLATE_MISTRAL_V1] = "mistral-v1",
    [LLM_TEMPLATE_MISTRAL_V3] = "mistral-v3",
    [LLM_TEMPLATE_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
    [LLM_TEMPLATE_MISTRAL_V7] = "mistral-v7",
    [LLM_TEMPLATE_PHI3] = "phi3",
    [LLM_TEMPLATE_GEMMA] = "gemma",
    [LLM_TEMPLATE_ZEPHYR] = "zephyr",
    [LLM_TEMPLATE_DEEPSEEK] = "deepseek",
    [LLM_TEMPLATE_DEEPSEEK2] = "deepseek2",
    [LLM_TEMPLATE_DEEPSEEK3] = "deepseek3",
    [LLM_TEMPLATE_LLAMA2_SYS] = "llama2-sys",
    [LLM_TEMPLATE_LLAMA2_SYS_BOS] = "llama2-sys-bos",
    [LLM_TEMPLATE_LLAMA2_SYS_STRIP] = "llama2-sys-strip",
    [LLM_TEMPLATE_MISTRAL_V7_TEKKEN] = "mistral-v7-tekken",
    [LLM_TEMPLATE_PHI4] = "phi4",
    [LLM_TEMPLATE_COMMAND_R] = "command-r",
    [LLM_TEMPLATE_GPT_OSS] = "gpt-oss",
    [LLM_TEMPLATE_GEMMA4] = "gemma4",
};

const char *llm_template_name(enum llm_template t)
{
    return (unsigned)t < LLM_TEMPLATE_COUNT ? names[t] : "unknown";
}

enum llm_template llm_template_from_name(const char *name)
{
    for (int t = LLM_TEMPLATE_CHATML; t < LLM_TEMPLATE_COUNT; t++)
        if (!strcmp(name, names[t]))
            return (enum llm_template)t;
    return LLM_TEMPLATE_UNKNOWN;
}

#define FW_BAR "\xef\xbd\x9c" /* U+FF5C, DeepSeek's ｜ */
#define SPM_SPACE "\xe2\x96\x81" /* U+2581 ▁ */
#define NOTHINK "<think>\n\n</think>\n\n" /* Qwen3's, enable_thinking false */
#define THINK "<think>\n"                  /* Qwen3.5's, thinking on */
#define G4_NOTHINK "<|channel>thought\n<channel|>" /* Gemma 4's, thinking off */

enum llm_template llm_template_detect(const char *t, size_t n)
{
    /* llama.cpp first takes the text as a template name */
    if (n > 0 && n < 32) {
        char name[32];
        memcpy(name, t, n);
        name[n] = 0;
        enum llm_template k = llm_template_from_name(name);
        if (k != LLM_TEMPLATE_UNKNOWN)
            return k;
    }
    /* Gemma 4 (not among llama.cpp's built-in formats: its Jinja renders it) */
    if (has(t, n, "<|turn>") && has(t, n, "<turn|>"))
        return LLM_TEMPLATE_GEMMA4;
    if (has(t, n, "<|im_start|>")) {
        if (has(t, n, "<|im_sep|>"))
            return LLM_TEMPLATE_PHI4;
        if (has(t, n, "<end_of_utterance>"))
            return LLM_TEMPLATE_UNKNOWN; /* SmolVLM: not ChatML */
        return LLM_TEMPLATE_CHATML;
    }
    if ((n >= 7 && !memcmp(t, "mistral", 7)) || has(t, n, "[INST]")) {
        if (has(t, n, "[SYSTEM_PROMPT]"))
            return LLM_TEMPLATE_MISTRAL_V7;
        if (has(t, n, "' [INST] ' + system_message") || has(t, n, "[AVAILABLE_TOOLS]")) {
            if (has(t, n, " [INST]"))
                return LLM_TEMPLATE_MISTRAL_V1;
            if (has(t, n, "\"[INST]\""))
                return LLM_TEMPLATE_MISTRAL_V3_TEKKEN;
            return LLM_TEMPLATE_MISTRAL_V3;
        }
        if (has(t, n, "content.strip()"))
            return LLM_TEMPLATE_LLAMA2_SYS_STRIP;
        if (has(t, n, "bos_token + '[INST]"))
            return LLM_TEMPLATE_LLAMA2_SYS_BOS;
        if (has(t, n, "<<SYS>>"))
            return LLM_TEMPLATE_LLAMA2_SYS;
        return LLM_TEMPLATE_LLAMA2;
    }
    if (has(t, n, "<|start|>") && has(t, n, "<|channel|>"))
        return LLM_TEMPLATE_GPT_OSS;
    if (has(t, n, "<|assistant|>") && has(t, n, "<|end|>"))
        return LLM_TEMPLATE_PHI3;
    if (has(t, n, "[gMASK]<sop>"))
        return LLM_TEMPLATE_UNKNOWN; /* ChatGLM 4 */
    if (has(t, n, "<|assistant|>") && has(t, n, "<|user|>"))
        return LLM_TEMPLATE_UNKNOWN; /* Falcon 3, GLM-Edge, EXAONE MoE */
    if (has(t, n, "<|{{ item['role'] }}|>") && has(t, n, "<|begin_of_image|>"))
        return LLM_TEMPLATE_UNKNOWN; /* GLM-Edge */
    if (has(t, n, "<|user|>") && has(t, n, "<|endoftext|>"))
        return LLM_TEMPLATE_ZEPHYR;
    if (has(t, n, "bos_token + message['role']"))
        return LLM_TEMPLATE_UNKNOWN; /* Monarch */
    if (has(t, n, "<start_of_turn>"))
        return LLM_TEMPLATE_GEMMA;
    if (has(t, n, "'\\n\\nAssistant: ' + eos_token") || has(t, n, "GPT4 Correct ") ||
        (has(t, n, "USER: ") && has(t, n, "ASSISTANT: ")))
        return LLM_TEMPLATE_UNKNOWN; /* Orion, OpenChat, Vicuna */
    if (has(t, n, "### Instruction:") && has(t, n, "<|EOT|>"))
        return LLM_TEMPLATE_DEEPSEEK;
    if (has(t, n, "<|START_OF_TURN_TOKEN|>") && has(t, n, "<|USER_TOKEN|>"))
        return LLM_TEMPLATE_COMMAND_R;
    if (has(t, n, "<|start_header_id|>") && has(t, n, "<|end_header_id|>"))
        return LLM_TEMPLATE_LLAMA3;
    if (has(t, n, "[gMASK]sop") || has(t, n, "<\xe7\x94\xa8\xe6\x88\xb7>"))
        return LLM_TEMPLATE_UNKNOWN; /* ChatGLM 3, MiniCPM */
    if (has(t, n, "'Assistant: ' + message['content'] + eos_token"))
        return LLM_TEMPLATE_DEEPSEEK2;
    if (has(t, n, "<" FW_BAR "Assistant" FW_BAR ">") && has(t, n, "<" FW_BAR "User" FW_BAR ">") &&
        has(t, n, "<" FW_BAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FW_BAR ">"))
        return LLM_TEMPLATE_DEEPSEEK3;
    return LLM_TEMPLATE_UNKNOWN;
}

enum llm_template llm_template_choose(const char *override_name, const char *jinja, size_t len,
                                      bool *fell_back)
{
    enum llm_template t = LLM_TEMPLATE_UNKNOWN;
    if (override_name)
        t = llm_template_from_name(override_name);
    else if (jinja)
        t = llm_template_detect(jinja, len);
    *fell_back = t == LLM_TEMPLATE_UNKNOWN;
    return *fell_back ? LLM_TEMPLATE_CHATML : t;
}

const char *llm_template_think_off(enum llm_template t, const char *jinja, size_t len)
{
    /* Gemma 4's generation prompt without enable_thinking (its default)
     * ends with an empty thought channel */
    if (t == LLM_TEMPLATE_GEMMA4)
        return G4_NOTHINK;
    if (t == LLM_TEMPLATE_CHATML && jinja && has(jinja, len, "enable_thinking") && has(jinja, len, "<think>"))
        return NOTHINK;
    return NULL;
}

const char *llm_template_think_on(enum llm_template t, const char *jinja, size_t len)
{
    /* Qwen3.5's generation prompt: {%- else %}{{- '<think>\n' }} (a quoted
     * '<think>\n' and nothing more; Qwen3's quoted strings all go on to
     * '\n</think>') */
    if (llm_template_think_off(t, jinja, len) && has(jinja, len, "'<think>\\n'"))
        return THINK;
    return NULL;
}

/* ==== rendering ==== */

struct out {
    char *buf;
    size_t size, len; /* len counts every byte, written or not */
};

static void put_n(struct out *o, const char *s, size_t n)
{
    if (o->len < o->size) {
        size_t k = o->size - o->len < n ? o->size - o->len : n;
        memcpy(o->buf + o->len, s, k);
    }
    o->len += n;
}

static void put(struct out *o, const char *s)
{
    put_n(o, s, strlen(s));
}

static bool c_space(char c)
{
    return isspace((unsigned char)c) != 0;
}

/* s without leading and trailing (ASCII) white space, as llama.cpp's trim */
static void put_trim(struct out *o, const char *s)
{
    size_t a = 0, b = strlen(s);
    while (a < b && c_space(s[a]))
        a++;
    while (b > a && c_space(s[b - 1]))
        b--;
    put_n(o, s + a, b - a);
}

static bool is(const char *role, const char *r)
{
    return !strcmp(role, r);
}

static void render(struct out *o, enum llm_template t, const struct llm_chat_msg *m, size_t n,
                   bool add_ass)
{
    switch (t) {
    case LLM_TEMPLATE_CHATML:
    default:
        for (size_t i = 0; i < n; i++) {
            put(o, "<|im_start|>");
            put(o, m[i].role);
            put(o, "\n");
            put(o, m[i].content);
            put(o, "<|im_end|>\n");
        }
        if (add_ass)
            put(o, "<|im_start|>assistant\n");
        break;
    case LLM_TEMPLATE_GPT_OSS: /* llama.cpp's LLM_CHAT_TEMPLATE_OPENAI_MOE, and see the top */
        for (size_t i = 0; i < n; i++) {
            bool ass = is(m[i].role, "assistant");
            put(o, "<|start|>");
            put(o, m[i].role);
            if (!(ass && !strncmp(m[i].content, "<|channel|>", 11)))
                put(o, "<|message|>");
            put(o, m[i].content);
            put(o, ass ? "<|return|>" : "<|end|>");
        }
        if (add_ass)
            put(o, "<|start|>assistant");
        break;
    case LLM_TEMPLATE_MISTRAL_V7:
    case LLM_TEMPLATE_MISTRAL_V7_TEKKEN: {
        const char *sp = t == LLM_TEMPLATE_MISTRAL_V7 ? " " : "";
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) {
                put(o, "[SYSTEM_PROMPT]"), put(o, sp), put(o, m[i].content);
                put(o, "[/SYSTEM_PROMPT]");
            } else if (is(m[i].role, "user")) {
                put(o, "[INST]"), put(o, sp), put(o, m[i].content), put(o, "[/INST]");
            } else {
                put(o, sp), put(o, m[i].content), put(o, "</s>");
            }
        }
        break;
    }
    case LLM_TEMPLATE_MISTRAL_V1:
    case LLM_TEMPLATE_MISTRAL_V3:
    case LLM_TEMPLATE_MISTRAL_V3_TEKKEN: {
        const char *lead = t == LLM_TEMPLATE_MISTRAL_V1 ? " " : "";
        const char *trail = t == LLM_TEMPLATE_MISTRAL_V3_TEKKEN ? "" : " ";
        bool inside = false;
        for (size_t i = 0; i < n; i++) {
            if (!inside) {
                put(o, lead), put(o, "[INST]"), put(o, trail);
                inside = true;
            }
            if (is(m[i].role, "system")) {
                put(o, m[i].content), put(o, "\n\n");
            } else if (is(m[i].role, "user")) {
                put(o, m[i].content), put(o, lead), put(o, "[/INST]");
            } else {
                put(o, trail);
                if (t == LLM_TEMPLATE_MISTRAL_V3)
                    put_trim(o, m[i].content);
                else
                    put(o, m[i].content);
                put(o, "</s>");
                inside = false;
            }
        }
        break;
    }
    case LLM_TEMPLATE_LLAMA2:
    case LLM_TEMPLATE_LLAMA2_SYS:
    case LLM_TEMPLATE_LLAMA2_SYS_BOS:
    case LLM_TEMPLATE_LLAMA2_SYS_STRIP: {
        bool sys = t != LLM_TEMPLATE_LLAMA2;
        bool bos = t == LLM_TEMPLATE_LLAMA2_SYS_BOS;
        bool strip = t == LLM_TEMPLATE_LLAMA2_SYS_STRIP;
        bool inside = true;
        put(o, "[INST] ");
        for (size_t i = 0; i < n; i++) {
            if (!inside) {
                inside = true;
                put(o, bos ? "<s>[INST] " : "[INST] ");
            }
            if (is(m[i].role, "system")) {
                put(o, sys ? "<<SYS>>\n" : "");
                strip ? put_trim(o, m[i].content) : put(o, m[i].content);
                put(o, sys ? "\n<</SYS>>\n\n" : "\n");
            } else if (is(m[i].role, "user")) {
                strip ? put_trim(o, m[i].content) : put(o, m[i].content);
                put(o, " [/INST]");
            } else {
                strip ? put_trim(o, m[i].content) : put(o, m[i].content);
                put(o, "</s>");
                inside = false;
            }
        }
        break;
    }
    case LLM_TEMPLATE_PHI3:
        for (size_t i = 0; i < n; i++) {
            put(o, "<|"), put(o, m[i].role), put(o, "|>\n");
            put(o, m[i].content), put(o, "<|end|>\n");
        }
        if (add_ass)
            put(o, "<|assistant|>\n");
        break;
    case LLM_TEMPLATE_PHI4:
        for (size_t i = 0; i < n; i++) {
            put(o, "<|im_start|>"), put(o, m[i].role), put(o, "<|im_sep|>");
            put(o, m[i].content), put(o, "<|im_end|>");
        }
        if (add_ass)
            put(o, "<|im_start|>assistant<|im_sep|>");
        break;
    case LLM_TEMPLATE_ZEPHYR:
        for (size_t i = 0; i < n; i++) {
            put(o, "<|"), put(o, m[i].role), put(o, "|>\n");
            put(o, m[i].content), put(o, "<|endoftext|>\n");
        }
        if (add_ass)
            put(o, "<|assistant|>\n");
        break;
    case LLM_TEMPLATE_GEMMA: {
        /* no system turn: the system prompts (trimmed, concatenated) open
         * the next user turn */
        size_t pend = 0;     /* first pending system message */
        size_t pend_len = 0; /* their trimmed length */
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) {
                struct out count = {NULL, 0, 0};
                put_trim(&count, m[i].content);
                if (!pend_len)
                    pend = i;
                pend_len += count.len;
                continue;
            }
            bool model = is(m[i].role, "assistant");
            put(o, "<start_of_turn>"), put(o, model ? "model" : m[i].role), put(o, "\n");
            if (pend_len && !model) {
                for (size_t j = pend; j < i; j++)
                    if (is(m[j].role, "system"))
                        put_trim(o, m[j].content);
                put(o, "\n\n");
                pend_len = 0;
            }
            put_trim(o, m[i].content);
            put(o, "<end_of_turn>\n");
        }
        if (add_ass)
            put(o, "<start_of_turn>model\n");
        break;
    }
    case LLM_TEMPLATE_GEMMA4:
        /* Gemma 4's Jinja without tools or thinking: every message is a
         * turn, the assistant's named model, the content trimmed. The
         * Jinja also strips <|channel>...<channel|> from earlier answers;
         * kvchat keeps what the model saw (see the top of the file) */
        for (size_t i = 0; i < n; i++) {
            put(o, "<|turn>"), put(o, is(m[i].role, "assistant") ? "model" : m[i].role), put(o, "\n");
            put_trim(o, m[i].content), put(o, "<turn|>\n");
        }
        if (add_ass)
            put(o, "<|turn>model\n");
        break;
    case LLM_TEMPLATE_DEEPSEEK:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system"))
                put(o, m[i].content);
            else if (is(m[i].role, "user"))
                put(o, "### Instruction:\n"), put(o, m[i].content), put(o, "\n");
            else if (is(m[i].role, "assistant"))
                put(o, "### Response:\n"), put(o, m[i].content), put(o, "\n<|EOT|>\n");
        }
        if (add_ass)
            put(o, "### Response:\n");
        break;
    case LLM_TEMPLATE_COMMAND_R:
        for (size_t i = 0; i < n; i++) {
            const char *tag = is(m[i].role, "system") ? "<|SYSTEM_TOKEN|>"
                              : is(m[i].role, "user") ? "<|USER_TOKEN|>"
                              : is(m[i].role, "assistant") ? "<|CHATBOT_TOKEN|>" : NULL;
            if (!tag)
                continue;
            put(o, "<|START_OF_TURN_TOKEN|>"), put(o, tag);
            put_trim(o, m[i].content), put(o, "<|END_OF_TURN_TOKEN|>");
        }
        if (add_ass)
            put(o, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
        break;
    case LLM_TEMPLATE_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            put(o, "<|start_header_id|>"), put(o, m[i].role), put(o, "<|end_header_id|>\n\n");
            put_trim(o, m[i].content), put(o, "<|eot_id|>");
        }
        if (add_ass)
            put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case LLM_TEMPLATE_DEEPSEEK2:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system"))
                put(o, m[i].content), put(o, "\n\n");
            else if (is(m[i].role, "user"))
                put(o, "User: "), put(o, m[i].content), put(o, "\n\n");
            else if (is(m[i].role, "assistant"))
                put(o, "Assistant: "), put(o, m[i].content),
                    put(o, "<" FW_BAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FW_BAR ">");
        }
        if (add_ass)
            put(o, "Assistant:");
        break;
    case LLM_TEMPLATE_DEEPSEEK3:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system"))
                put(o, m[i].content), put(o, "\n\n");
            else if (is(m[i].role, "user"))
                put(o, "<" FW_BAR "User" FW_BAR ">"), put(o, m[i].content);
            else if (is(m[i].role, "assistant"))
                put(o, "<" FW_BAR "Assistant" FW_BAR ">"), put(o, m[i].content),
                    put(o, "<" FW_BAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FW_BAR ">");
        }
        if (add_ass)
            put(o, "<" FW_BAR "Assistant" FW_BAR ">");
        break;
    }
}

static int32_t finish(struct out *o)
{
    if (o->len >= (size_t)INT32_MAX)
        return LLM_TEMPLATE_ENOTPREFIX;
    if (o->len < o->size) {
        o->buf[o->len] = 0;
        return (int32_t)o->len;
    }
    return -(int32_t)(o->len + 1);
}

int32_t llm_template_render(enum llm_template t, const struct llm_chat_msg *msgs, size_t n,
                            bool add_assistant, char *buf, int32_t size)
{
    struct out o = {buf, size > 0 ? (size_t)size : 0, 0};
    render(&o, t, msgs, n, add_assistant);
    return finish(&o);
}

int32_t llm_template_append(enum llm_template t, const struct llm_chat_msg *msgs, size_t n_old,
                            size_t n, bool add_assistant, char *buf, int32_t size)
{
    /* measure both renderings, then render the new one into a scratch
     * buffer to check the old one is its prefix */
    struct out a = {NULL, 0, 0}, b = {NULL, 0, 0};
    if (n_old > n)
        return LLM_TEMPLATE_ENOTPREFIX;
    render(&a, t, msgs, n_old, true);
    render(&b, t, msgs, n, add_assistant);
    if (a.len > b.len || b.len >= (size_t)INT32_MAX)
        return LLM_TEMPLATE_ENOTPREFIX;
    char *old = malloc(a.len + 1), *new = malloc(b.len + 1);
    int32_t r = LLM_TEMPLATE_ENOTPREFIX;
    if (old && new) {
        struct out x = {old, a.len + 1, 0}, y = {new, b.len + 1, 0};
        render(&x, t, msgs, n_old, true);
        render(&y, t, msgs, n, add_assistant);
        if (!memcmp(old, new, a.len)) {
            struct out o = {buf, size > 0 ? (size_t)size : 0, 0};
            put_n(&o, new + a.len, b.len - a.len);
            r = finish(&o);
        }
    }
    free(old);
    free(new);
    return r;
}

struct llm_template_turn_end llm_template_turn_end(enum llm_template t)
{
    switch (t) {
    case LLM_TEMPLATE_LLAMA3: return (struct llm_template_turn_end){"<|eot_id|>", ""};
    case LLM_TEMPLATE_GPT_OSS: return (struct llm_template_turn_end){"<|return|>", ""};
    case LLM_TEMPLATE_PHI3: return (struct llm_template_turn_end){"<|end|>", "\n"};
    case LLM_TEMPLATE_PHI4: return (struct llm_template_turn_end){"<|im_end|>", ""};
    case LLM_TEMPLATE_GEMMA: return (struct llm_template_turn_end){"<end_of_turn>", "\n"};
    case LLM_TEMPLATE_GEMMA4: return (struct llm_template_turn_end){"<turn|>", "\n"};
    case LLM_TEMPLATE_ZEPHYR: return (struct llm_template_turn_end){"<|endoftext|>", "\n"};
    case LLM_TEMPLATE_DEEPSEEK: return (struct llm_template_turn_end){"<|EOT|>", "\n"};
    case LLM_TEMPLATE_COMMAND_R:
        return (struct llm_template_turn_end){"<|END_OF_TURN_TOKEN|>", ""};
    case LLM_TEMPLATE_DEEPSEEK2:
    case LLM_TEMPLATE_DEEPSEEK3:
        return (struct llm_template_turn_end){
            "<" FW_BAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FW_BAR ">", ""};
    case LLM_TEMPLATE_LLAMA2: case LLM_TEMPLATE_LLAMA2_SYS: case LLM_TEMPLATE_LLAMA2_SYS_BOS:
    case LLM_TEMPLATE_LLAMA2_SYS_STRIP: case LLM_TEMPLATE_MISTRAL_V1:
    case LLM_TEMPLATE_MISTRAL_V3: case LLM_TEMPLATE_MISTRAL_V3_TEKKEN:
    case LLM_TEMPLATE_MISTRAL_V7: case LLM_TEMPLATE_MISTRAL_V7_TEKKEN:
        return (struct llm_template_turn_end){"</s>", ""};
    default:
        return (struct llm_template_turn_end){"<|im_end|>", "\n"};
    }
}

const char *const *llm_template_stops(enum llm_template t)
{
    static const char *const chatml[] = {"<|im_end|>", "<|im_start|>", NULL};
    static const char *const llama3[] = {"<|eot_id|>", "<|start_header_id|>", NULL};
    /* harmony: <|end|> and <|start|> also come between the analysis and the
     * final message, so only the ends of a turn stop it */
    static const char *const gpt_oss[] = {"<|return|>", "<|call|>", "<|start|>user", NULL};
    static const char *const inst[] = {"</s>", "[INST]", NULL};
    static const char *const phi3[] = {"<|end|>", "<|user|>", "<|endoftext|>", NULL};
    static const char *const phi4[] = {"<|im_end|>", "<|im_start|>", NULL};
    static const char *const gemma[] = {"<end_of_turn>", "<start_of_turn>", NULL};
    static const char *const gemma4[] = {"<turn|>", "<|turn>", NULL};
    static const char *const zephyr[] = {"<|endoftext|>", "</s>", "<|user|>", NULL};
    static const char *const deepseek[] = {"<|EOT|>", "### Instruction:", NULL};
    static const char *const command_r[] = {"<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>",
                                            NULL};
    static const char *const deepseek2[] = {
        "<" FW_BAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FW_BAR ">", "\n\nUser:", NULL};
    static const char *const deepseek3[] = {
        "<" FW_BAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FW_BAR ">",
        "<" FW_BAR "User" FW_BAR ">", NULL};
    switch (t) {
    case LLM_TEMPLATE_LLAMA3: return llama3;
    case LLM_TEMPLATE_GPT_OSS: return gpt_oss;
    case LLM_TEMPLATE_PHI3: return phi3;
    case LLM_TEMPLATE_PHI4: return phi4;
    case LLM_TEMPLATE_GEMMA: return gemma;
    case LLM_TEMPLATE_GEMMA4: return gemma4;
    case LLM_TEMPLATE_ZEPHYR: return zephyr;
    case LLM_TEMPLATE_DEEPSEEK: return deepseek;
    case LLM_TEMPLATE_COMMAND_R: return command_r;
    case LLM_TEMPLATE_DEEPSEEK2: return deepseek2;
    case LLM_TEMPLATE_DEEPSEEK3: return deepseek3;
    case LLM_TEMPLATE_LLAMA2: case LLM_TEMPLATE_LLAMA2_SYS: case LLM_TEMPLATE_LLAMA2_SYS_BOS:
    case LLM_TEMPLATE_LLAMA2_SYS_STRIP: case LLM_TEMPLATE_MISTRAL_V1:
    case LLM_TEMPLATE_MISTRAL_V3: case LLM_TEMPLATE_MISTRAL_V3_TEKKEN:
    case LLM_TEMPLATE_MISTRAL_V7: case LLM_TEMPLATE_MISTRAL_V7_TEKKEN:
        return inst;
    default: return chatml;
    }
}
