/*
 * llm.h - the public interface of core/: GGUF files, tensor types, and (in
 * later parts) the model, its context and KV cache, tokenizer and sampler.
 *
 * core/ knows nothing of SQLite, readline or the network. Handles are opaque;
 * functions return 0 on success and a negative value on failure, leaving a
 * message that the caller can read (never printing it themselves).
 *
 * ==== The GGUF file format (v2 and v3), as read by llm_gguf_open ====
 * All integers little-endian.
 *   offset 0   u8[4]  magic "GGUF"
 *          4   u32    version (2 or 3; v3 only adds big-endian files, which
 *                     are refused here)
 *          8   u64    n_tensors
 *         16   u64    n_kv
 *         24   n_kv key/value pairs:
 *                string key; u32 value_type; value
 *              string = u64 length, then that many bytes (no terminator)
 *              value  = the scalar (u8 i8 u16 i16 u32 i32 f32 bool(u8) u64 i64
 *                       f64), a string, or an array:
 *                       u32 element_type; u64 n; n elements (no nested arrays)
 *              n_tensors tensor infos:
 *                string name; u32 n_dims (1..4); u64 ne[n_dims];
 *                u32 ggml_type; u64 offset (relative to the data section)
 *              padding to a multiple of general.alignment (u32, default 32)
 *              the data section: each tensor at its offset, aligned
 *   A tensor of type T holds ne[0]*ne[1]*ne[2]*ne[3] elements in blocks of
 *   llm_type_block_size(T) elements, llm_type_block_bytes(T) bytes each,
 *   row after row (ne[0] is the row length, the fastest-varying dimension).
 */
#ifndef KVCHAT_CORE_LLM_H
#define KVCHAT_CORE_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

/* the base layer (buffers, mkdir -p, atomic writes, paths) is part of
 * core's face: see core/base/base.h */
#include "core/base/base.h"

/* ==== tensor types (ggml's numbering, as stored in GGUF) ==== */

enum llm_type {
    LLM_TYPE_F32 = 0,
    LLM_TYPE_F16 = 1,
    LLM_TYPE_Q4_0 = 2,
    LLM_TYPE_Q4_1 = 3,
    LLM_TYPE_Q5_0 = 6,
    LLM_TYPE_Q5_1 = 7,
    LLM_TYPE_Q8_0 = 8,
    LLM_TYPE_Q8_1 = 9,
    LLM_TYPE_Q2_K = 10,
    LLM_TYPE_Q3_K = 11,
    LLM_TYPE_Q4_K = 12,
    LLM_TYPE_Q5_K = 13,
    LLM_TYPE_Q6_K = 14,
    LLM_TYPE_Q8_K = 15,
    LLM_TYPE_IQ2_XXS = 16,
    LLM_TYPE_IQ2_XS = 17,
    LLM_TYPE_IQ3_XXS = 18,
    LLM_TYPE_IQ1_S = 19,
    LLM_TYPE_IQ4_NL = 20,
    LLM_TYPE_IQ3_S = 21,
    LLM_TYPE_IQ2_S = 22,
    LLM_TYPE_IQ4_XS = 23,
    LLM_TYPE_I8 = 24,
    LLM_TYPE_I16 = 25,
    LLM_TYPE_I32 = 26,
    LLM_TYPE_I64 = 27,
    LLM_TYPE_F64 = 28,
    LLM_TYPE_IQ1_M = 29,
    LLM_TYPE_BF16 = 30,
    LLM_TYPE_TQ1_0 = 34,
    LLM_TYPE_TQ2_0 = 35,
    LLM_TYPE_MXFP4 = 39,
    LLM_TYPE_NVFP4 = 40,
    LLM_TYPE_Q1_0 = 41,
    LLM_TYPE_Q2_0 = 42,
    LLM_TYPE_COUNT = 43
};

/* true for the ids above (ggml's removed ids 4, 5, 31-33, 36-38 are not) */
bool llm_type_known(uint32_t type);
/* "Q4_K", "F32", ...; "?" for an unknown id */
const char *llm_type_name(uint32_t type);
/* elements per block (1 for F32/F16/BF16); 0 for an unknown id */
int64_t llm_type_block_size(uint32_t type);
/* bytes per block; 0 for an unknown id */
int64_t llm_type_block_bytes(uint32_t type);
/* true where kvchat can compute with the type (the list in kvchat-files(5)) */
bool llm_type_supported(uint32_t type);

/* ==== GGUF files ==== */

enum llm_gguf_type {
    LLM_GGUF_TYPE_UINT8 = 0,
    LLM_GGUF_TYPE_INT8 = 1,
    LLM_GGUF_TYPE_UINT16 = 2,
    LLM_GGUF_TYPE_INT16 = 3,
    LLM_GGUF_TYPE_UINT32 = 4,
    LLM_GGUF_TYPE_INT32 = 5,
    LLM_GGUF_TYPE_FLOAT32 = 6,
    LLM_GGUF_TYPE_BOOL = 7,
    LLM_GGUF_TYPE_STRING = 8,
    LLM_GGUF_TYPE_ARRAY = 9,
    LLM_GGUF_TYPE_UINT64 = 10,
    LLM_GGUF_TYPE_INT64 = 11,
    LLM_GGUF_TYPE_FLOAT64 = 12,
    LLM_GGUF_TYPE_COUNT
};

#define LLM_GGUF_DEFAULT_ALIGNMENT 32
#define LLM_GGUF_MAX_DIMS 4
#define LLM_GGUF_MAX_NAME 64 /* tensor names are shorter than this (ggml's limit) */

/* A string inside the file: not NUL-terminated, borrowed from the mapping. */
struct llm_str {
    const char *ptr;
    uint64_t len;
};

struct llm_tensor_info {
    const char *name;            /* NUL-terminated, owned by the file handle */
    uint32_t type;               /* enum llm_type */
    uint32_t n_dims;             /* 1..4 */
    int64_t ne[LLM_GGUF_MAX_DIMS]; /* elements per dimension; unused ones are 1 */
    uint64_t offset;             /* from the start of the data section */
    uint64_t n_bytes;            /* size of the data */
    const void *data;            /* in the mapping: borrowed until llm_gguf_close */
};

struct llm_gguf;

/*
 * Map and validate a GGUF file. Every count, length, offset and type is
 * checked against the file before use. On failure returns a negative value
 * and writes a one-line reason (no file name) to err. On success *out is a
 * handle the caller closes with llm_gguf_close.
 */
int llm_gguf_open(const char *path, struct llm_gguf **out, char *err, size_t err_size);
/* The same over bytes in memory, borrowed until llm_gguf_close. */
int llm_gguf_open_memory(const void *buf, size_t size, struct llm_gguf **out, char *err,
                         size_t err_size);
void llm_gguf_close(struct llm_gguf *g);

uint32_t llm_gguf_version(const struct llm_gguf *g);
uint64_t llm_gguf_file_size(const struct llm_gguf *g);
/* the mapped file's device, inode and modification time (s, ns) as it was
 * opened; false (and zeros) for a GGUF opened from memory */
bool llm_gguf_identity(const struct llm_gguf *g, uint64_t ident[4]);
/* its status-change time (s, ns) as it was opened: any write, truncation,
 * chmod, link or rename sets it, and no utimes can set it back; false (and
 * zeros) for a GGUF opened from memory */
bool llm_gguf_ctime(const struct llm_gguf *g, uint64_t ctime[2]);
uint32_t llm_gguf_alignment(const struct llm_gguf *g);
uint64_t llm_gguf_data_offset(const struct llm_gguf *g);
/* the whole file, borrowed (for fingerprints) */
const uint8_t *llm_gguf_bytes(const struct llm_gguf *g);
/* the whole pages inside [p, p + n) of the file's mapping given back to the
 * system: read again, they come back from the page cache. For code that
 * reads a large part of the file once (a fingerprint, packing), so that
 * the process does not keep it all resident (issue 24: peak RSS at most
 * the file plus KV plus 10%). Nothing for a GGUF opened from memory. */
void llm_gguf_release(const struct llm_gguf *g, const void *p, size_t n);

/* -- metadata: keys are indexed 0..n_kv-1 in file order -- */
int64_t llm_gguf_n_kv(const struct llm_gguf *g);
const char *llm_gguf_key(const struct llm_gguf *g, int64_t i); /* NUL-terminated, owned by g */
int64_t llm_gguf_find_key(const struct llm_gguf *g, const char *key); /* -1 if absent */
enum llm_gguf_type llm_gguf_kv_type(const struct llm_gguf *g, int64_t i);
const char *llm_gguf_type_name(enum llm_gguf_type t); /* "u32", "string", ... */

/* Scalar values. Each returns 0, or -1 if the value is not of a fitting
 * type: get_int takes any integer type or bool; get_float f32 or f64 (or an
 * integer); get_str a string. */
int llm_gguf_get_int(const struct llm_gguf *g, int64_t i, int64_t *out);
int llm_gguf_get_uint64(const struct llm_gguf *g, int64_t i, uint64_t *out);
int llm_gguf_get_float(const struct llm_gguf *g, int64_t i, double *out);
int llm_gguf_get_str(const struct llm_gguf *g, int64_t i, struct llm_str *out);

/* Arrays: element type and count, then elements by index (checked). */
enum llm_gguf_type llm_gguf_arr_type(const struct llm_gguf *g, int64_t i);
uint64_t llm_gguf_arr_n(const struct llm_gguf *g, int64_t i);
int llm_gguf_arr_get_int(const struct llm_gguf *g, int64_t i, uint64_t j, int64_t *out);
int llm_gguf_arr_get_uint64(const struct llm_gguf *g, int64_t i, uint64_t j, uint64_t *out);
int llm_gguf_arr_get_float(const struct llm_gguf *g, int64_t i, uint64_t j, double *out);
int llm_gguf_arr_get_str(const struct llm_gguf *g, int64_t i, uint64_t j, struct llm_str *out);
/* raw little-endian elements of a numeric array, unaligned; NULL otherwise */
const void *llm_gguf_arr_data(const struct llm_gguf *g, int64_t i);

/* Lookups by key name: 0 if present and of a fitting type, -1 otherwise
 * (then *out is left alone, so callers can preset a default). */
int llm_gguf_find_int(const struct llm_gguf *g, const char *key, int64_t *out);
int llm_gguf_find_float(const struct llm_gguf *g, const char *key, double *out);
int llm_gguf_find_str(const struct llm_gguf *g, const char *key, struct llm_str *out);

/* -- tensors -- */
int64_t llm_gguf_n_tensors(const struct llm_gguf *g);
const struct llm_tensor_info *llm_gguf_tensor(const struct llm_gguf *g, int64_t i);
int64_t llm_gguf_find_tensor(const struct llm_gguf *g, const char *name); /* -1 if absent */
/* number of elements of a tensor (validated not to overflow) */
int64_t llm_tensor_n_elements(const struct llm_tensor_info *t);



/* ==== vocabulary and tokenizer ====
 * Loaded from a GGUF's tokenizer.* metadata (tensors are not needed, so
 * vocabulary-only files work): SentencePiece ("llama") and byte-level BPE
 * ("gpt2") with the pre-tokenizer named by tokenizer.ggml.pre. Tokenization
 * is token-exact with llama.cpp (llama_tokenize), including its handling of
 * special tokens, invalid UTF-8 and the SentencePiece leading space. */

struct llm_vocab;

enum llm_vocab_type {
    LLM_VOCAB_SPM = 1, /* tokenizer.ggml.model "llama" */
    LLM_VOCAB_BPE = 2, /* tokenizer.ggml.model "gpt2" */
};

/* token attributes (llama.h's values; a token can have several) */
enum llm_token_attr {
    LLM_TOKEN_ATTR_UNDEFINED = 0,
    LLM_TOKEN_ATTR_UNKNOWN = 1 << 0,
    LLM_TOKEN_ATTR_UNUSED = 1 << 1,
    LLM_TOKEN_ATTR_NORMAL = 1 << 2,
    LLM_TOKEN_ATTR_CONTROL = 1 << 3,      /* <|im_start|>, <s>, ...: never in user text */
    LLM_TOKEN_ATTR_USER_DEFINED = 1 << 4, /* matched as one token even in user text */
    LLM_TOKEN_ATTR_BYTE = 1 << 5,         /* <0x0A> */
    LLM_TOKEN_ATTR_NORMALIZED = 1 << 6,
    LLM_TOKEN_ATTR_LSTRIP = 1 << 7,       /* eats white space to its left */
    LLM_TOKEN_ATTR_RSTRIP = 1 << 8,       /* eats white space to its right */
    LLM_TOKEN_ATTR_SINGLE_WORD = 1 << 9,
};

#define LLM_TOKEN_NULL (-1)

/* Read the vocabulary of g. On success *out is a handle the caller frees
 * with llm_vocab_free; it copies what it needs, so g may be closed first.
 * On failure returns a negative value and a one-line reason in err (e.g.
 * "unknown tokenizer 'foo'", "missing tokenizer.ggml.merges"). */
int llm_vocab_load(const struct llm_gguf *g, struct llm_vocab **out, char *err, size_t err_size);
void llm_vocab_free(struct llm_vocab *v);
/* llm_vocab_load through a cache file in dir (NULL: none) for the model
 * file at model_path, which g maps: building a 150k-token vocabulary's
 * tables takes 50-130 ms at every start, mapping them ~1 ms. The file
 * (llm_vocab_cache_file; format in vocab-cache.c and kvchat-files(5)) is
 * used when it was made from this model file as it is now and checks out;
 * else the vocabulary is built from g and the file written (not being able
 * to write it is no error). The same vocabulary either way. */
int llm_vocab_load_cached(const struct llm_gguf *g, const char *dir, const char *model_path,
                          struct llm_vocab **out, char *err, size_t err_size);
/* the vocabulary cache file of the model at model_path in dir (its .kvpack
 * file's name with .kvvocab); -1 if there is none */
int llm_vocab_cache_file(const char *dir, const char *model_path, char *buf, size_t size);
/* whether v was mapped from its cache file */
bool llm_vocab_from_cache(const struct llm_vocab *v);

enum llm_vocab_type llm_vocab_type(const struct llm_vocab *v);
/* tokenizer.ggml.pre as read ("default" when absent) */
const char *llm_vocab_pre(const struct llm_vocab *v);
int32_t llm_vocab_n_tokens(const struct llm_vocab *v);
/* special ids, LLM_TOKEN_NULL when the vocabulary has none */
int32_t llm_vocab_bos(const struct llm_vocab *v);
int32_t llm_vocab_eos(const struct llm_vocab *v);
int32_t llm_vocab_eot(const struct llm_vocab *v); /* end of turn (<|eot_id|>, <|im_end|>...) */
int32_t llm_vocab_unk(const struct llm_vocab *v);
int32_t llm_vocab_pad(const struct llm_vocab *v);
int32_t llm_vocab_nl(const struct llm_vocab *v); /* the newline token */
bool llm_vocab_add_bos(const struct llm_vocab *v);
bool llm_vocab_add_eos(const struct llm_vocab *v);
/* end-of-generation: EOS, EOT, EOM and every token llama.cpp treats as one */
bool llm_vocab_is_eog(const struct llm_vocab *v, int32_t id);
/* the EOG ids, sorted; *ids borrowed until llm_vocab_free; returns the count */
int32_t llm_vocab_eog_ids(const struct llm_vocab *v, const int32_t **ids);

/* attributes of a token (0 for an id out of range) */
uint32_t llm_token_attr(const struct llm_vocab *v, int32_t id);
/* the token's text as stored (Ġ/▁ escapes and all); borrowed until
 * llm_vocab_free; NULL for an id out of range */
const char *llm_token_text(const struct llm_vocab *v, int32_t id, size_t *len);
/* the id of a token text, LLM_TOKEN_NULL if none */
int32_t llm_token_find(const struct llm_vocab *v, const char *text, size_t len);

/* Tokenize len bytes of text (any bytes; invalid UTF-8 is handled as
 * llama.cpp handles it). add_special adds BOS/EOS as the metadata asks;
 * parse_special matches control tokens written in the text (<|im_start|>);
 * user-defined tokens are matched either way. Returns the number of tokens
 * written to tokens[0..n_max), or, when n_max is too small, the number
 * needed, negated. Returns INT32_MIN when out of memory. */
int32_t llm_tokenize(const struct llm_vocab *v, const char *text, size_t len, int32_t *tokens,
                     int32_t n_max, bool add_special, bool parse_special);

/* llm_tokenize with more control, for text that continues a token
 * sequence (a new turn after the cache's last token) or mixes template
 * text with user text: */
struct llm_tokenize_params {
    bool add_special;   /* BOS/EOS as the metadata asks (default true) */
    bool parse_special; /* match control tokens in the text (default false) */
    /* The token the text follows (LLM_TOKEN_NULL: the start). After a
     * special token the text is tokenized exactly as it would be inside
     * the whole sequence (the token's rstrip, SentencePiece's leading
     * space); after an ordinary token, without SentencePiece's leading
     * space (the whole sequence could still have merged across). */
    int32_t prev;
    /* Byte ranges [plain[2i], plain[2i+1]) of user text, where control
     * tokens are not matched even with parse_special: a rendered prompt is
     * tokenized as one text (so its tokens are those of the whole), while
     * "<|im_start|>" typed by the user stays text. NULL/0: none. */
    const size_t *plain;
    size_t n_plain;
};
struct llm_tokenize_params llm_tokenize_default_params(void);
int32_t llm_tokenize_ex(const struct llm_vocab *v, const char *text, size_t len, int32_t *tokens,
                        int32_t n_max, const struct llm_tokenize_params *p);

/* The text of one token: bytes for byte tokens, spaces for ▁/Ġ. Control
 * and unknown tokens give "" unless special. Skips up to lstrip leading
 * spaces. Returns the length written, or the length needed negated. */
int32_t llm_token_to_piece(const struct llm_vocab *v, int32_t id, char *buf, int32_t size,
                           int32_t lstrip, bool special);
/* The text of a token sequence as llama_detokenize: remove_special drops a
 * leading BOS / trailing EOS the model adds; unparse_special renders control
 * tokens. Returns the length, or the length needed negated. */
int32_t llm_detokenize(const struct llm_vocab *v, const int32_t *tokens, int32_t n, char *buf,
                       int32_t size, bool remove_special, bool unparse_special);

/* Streaming detokenizer: feed tokens one at a time as they are generated;
 * each call yields only complete UTF-8 characters, holding the bytes of a
 * character split across tokens until it is whole. Caller frees with
 * llm_detok_free. */
struct llm_detok;
struct llm_detok_params {
    bool special;      /* render control tokens (default false) */
    bool strip_space;  /* drop the SentencePiece leading space of the first
                          piece, as llama_detokenize does at the start of a
                          text (default false: mid-conversation) */
};
struct llm_detok_params llm_detok_default_params(void);
struct llm_detok *llm_detok_init(const struct llm_vocab *v, struct llm_detok_params p);
void llm_detok_free(struct llm_detok *d);
/* Append token id; *out points at the complete text now ready (borrowed
 * until the next call), returns its length (0 while a character is
 * incomplete). Invalid UTF-8 that can never complete is passed through. */
size_t llm_detok_push(struct llm_detok *d, int32_t id, const char **out);
/* Whatever is held back (an incomplete character at the end); length */
size_t llm_detok_flush(struct llm_detok *d, const char **out);

/* ==== model metadata: what a GGUF says about its model ==== */

enum llm_template {
    LLM_TEMPLATE_NONE = 0, /* no tokenizer.chat_template */
    LLM_TEMPLATE_UNKNOWN,  /* present, not one we recognise */
    LLM_TEMPLATE_CHATML,
    LLM_TEMPLATE_LLAMA2,
    LLM_TEMPLATE_LLAMA3,
    LLM_TEMPLATE_MISTRAL_V1,
    LLM_TEMPLATE_MISTRAL_V3,
    LLM_TEMPLATE_MISTRAL_V3_TEKKEN,
    LLM_TEMPLATE_MISTRAL_V7,
    LLM_TEMPLATE_PHI3,
    LLM_TEMPLATE_GEMMA,
    LLM_TEMPLATE_ZEPHYR,
    LLM_TEMPLATE_DEEPSEEK,
    LLM_TEMPLATE_DEEPSEEK2,
    LLM_TEMPLATE_DEEPSEEK3,
    LLM_TEMPLATE_LLAMA2_SYS,       /* Llama 2 with <<SYS>> */
    LLM_TEMPLATE_LLAMA2_SYS_BOS,   /* ... and <s> before each later [INST] */
    LLM_TEMPLATE_LLAMA2_SYS_STRIP, /* ... and message contents trimmed */
    LLM_TEMPLATE_MISTRAL_V7_TEKKEN,
    LLM_TEMPLATE_PHI4,
    LLM_TEMPLATE_COMMAND_R,
    LLM_TEMPLATE_GPT_OSS, /* OpenAI's harmony format (gpt-oss) */
    LLM_TEMPLATE_GEMMA4,           /* Gemma 4: <|turn>role ... <turn|> */
    LLM_TEMPLATE_COUNT
};

/* Recognise a Jinja chat template by its markers (as llama.cpp does, in
 * its order); families kvchat does not render give LLM_TEMPLATE_UNKNOWN. */
enum llm_template llm_template_detect(const char *tmpl, size_t len);
/* "chatml", "llama3", ... (llama.cpp's names); "none"/"unknown" for those two */
const char *llm_template_name(enum llm_template t);
/* the template of a name from llm_template_name; LLM_TEMPLATE_UNKNOWN if none */
enum llm_template llm_template_from_name(const char *name);

/* The template to use: the override name when given, else the model's
 * Jinja text (NULL when it has none) recognised by its markers. When the
 * name is unknown, or the model has no template or one not recognised,
 * returns LLM_TEMPLATE_CHATML and sets *fell_back (the caller warns). */
enum llm_template llm_template_choose(const char *override_name, const char *jinja, size_t len,
                                      bool *fell_back);

/* ==== chat templates: rendering ====
 * A conversation is rendered as llama.cpp's llama_chat_apply_template
 * renders it (byte for byte): each message becomes a piece of text that
 * depends only on that message and those before it, and add_assistant
 * appends the opening of the assistant's turn. Because the opening is the
 * start of the assistant's own piece in every template here, the rendering
 * up to turn k is a byte prefix of the rendering up to turn k+1; the
 * caller therefore only ever tokenizes the text a new turn appends
 * (llm_template_append). See core/text/template.c for the templates that would
 * break this and how they are handled. */

struct llm_chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* NUL-terminated UTF-8 */
};

/* Render msgs[0..n). Returns the length (the text is NUL-terminated when
 * size > length), or the size needed (length + 1) negated. */
int32_t llm_template_render(enum llm_template t, const struct llm_chat_msg *msgs, size_t n,
                            bool add_assistant, char *buf, int32_t size);

#define LLM_TEMPLATE_ENOTPREFIX INT32_MIN
/* The text that rendering msgs[0..n) adds to the rendering of
 * msgs[0..n_old) with the assistant's turn opened (what the KV cache
 * already holds, before the answer): the answer's own piece, the messages
 * after it, and the new assistant opening. Same return convention;
 * LLM_TEMPLATE_ENOTPREFIX if the old text is not a prefix of the new one
 * (a template rewriting history; never the case for the templates here). */
int32_t llm_template_append(enum llm_template t, const struct llm_chat_msg *msgs, size_t n_old,
                            size_t n, bool add_assistant, char *buf, int32_t size);

/* What ends the assistant's turn in template t: the terminator text the
 * model generates (a special token in its vocabulary, "<|im_end|>"), then
 * the text the template writes after it before the next turn ("\n"). */
struct llm_template_turn_end {
    const char *terminator;
    const char *after;
};
struct llm_template_turn_end llm_template_turn_end(enum llm_template t);
/* Extra stop strings for template t (the next turn's header a model may
 * write instead of its terminator); NULL-terminated, static. */
const char *const *llm_template_stops(enum llm_template t);

/* Qwen3-style templates that can switch thinking off (their Jinja has
 * enable_thinking): the text that opens an answer with thinking off, the
 * empty think block "<think>\n\n</think>\n\n" that Qwen3's template puts
 * after the assistant's opening with enable_thinking false; NULL when the
 * model's template has no such switch. The text is the answer's, not the
 * template's: a conversation feeds it as the first tokens of the answer
 * and keeps it in the answer's text, so history renders the same whether
 * thinking is on or off and either can be chosen at any turn. */
const char *llm_template_think_off(enum llm_template t, const char *jinja, size_t len);
/* Templates whose generation prompt opens the reasoning when thinking is on
 * (Qwen3.5's: "<think>\n" after the assistant's opening): that text, which
 * a conversation feeds and keeps as the answer's first, as for
 * llm_template_think_off; NULL for the others (Qwen3's model writes its own
 * <think>). */
const char *llm_template_think_on(enum llm_template t, const char *jinja, size_t len);

/* ==== reasoning: <think>...</think> in a streamed answer ====
 * Splits generated text into the reasoning between <think> and </think>
 * and the answer, holding back a tag split across pieces; the tags and the
 * white space after </think> are dropped. */
struct llm_think;
enum llm_think_part { LLM_THINK_ANSWER, LLM_THINK_REASONING };
/* receives each piece; non-zero stops the push and is returned by it */
typedef int (*llm_think_emit_fn)(void *ud, enum llm_think_part part, const char *text, size_t n);
/* in_reasoning: the prompt already opened <think> (NULL when out of memory;
 * caller frees with llm_think_free) */
struct llm_think *llm_think_init(bool in_reasoning);
void llm_think_free(struct llm_think *t);
int llm_think_push(struct llm_think *t, const char *text, size_t n, llm_think_emit_fn fn, void *ud);
/* pass on what is held back (at the end of the answer) */
int llm_think_flush(struct llm_think *t, llm_think_emit_fn fn, void *ud);
bool llm_think_in_reasoning(const struct llm_think *t);

#define LLM_MAX_ARCH 32

/* Hyperparameters and vocabulary facts from metadata; -1 (or 0 for floats)
 * where a key is absent. Filled by llm_model_meta_read. */
struct llm_model_meta {
    char arch[LLM_MAX_ARCH];   /* general.architecture */
    char name[128];            /* general.name, may be empty */
    int64_t file_type;         /* general.file_type (llama_ftype) */
    int64_t n_ctx_train;       /* {arch}.context_length */
    int64_t n_embd;            /* {arch}.embedding_length */
    int64_t n_layer;           /* {arch}.block_count */
    int64_t n_ff;              /* {arch}.feed_forward_length */
    int64_t n_head;            /* {arch}.attention.head_count */
    int64_t n_head_kv;         /* {arch}.attention.head_count_kv (default n_head) */
    int64_t head_dim_k;        /* {arch}.attention.key_length (default n_embd/n_head) */
    int64_t head_dim_v;        /* {arch}.attention.value_length (default head_dim_k) */
    double rms_eps;            /* {arch}.attention.layer_norm_rms_epsilon */
    double rope_freq_base;     /* {arch}.rope.freq_base (default 10000) */
    int64_t rope_dim;          /* {arch}.rope.dimension_count (default head_dim_k) */
    const char *rope_type;     /* "norm" (llama), "neox" (qwen2, qwen3), "?" */
    char rope_scaling[16];     /* {arch}.rope.scaling.type, "" when none */
    double rope_scaling_factor;/* {arch}.rope.scaling.factor */
    int64_t n_vocab;           /* entries of tokenizer.ggml.tokens */
    char tokenizer[32];        /* tokenizer.ggml.model: "llama", "gpt2", ... */
    char tokenizer_pre[32];    /* tokenizer.ggml.pre, may be empty */
    int64_t bos_id, eos_id, eot_id, unk_id, pad_id;
    int add_bos;               /* tokenizer.ggml.add_bos_token: 1, 0, or -1 absent */
    enum llm_template chat_template;
    /* sliding-window attention, soft-capping, longrope (gemma2, gemma3,
     * phi3); -1 or 0 where absent */
    int64_t n_swa;             /* {arch}.attention.sliding_window */
    int64_t swa_period;        /* {arch}.attention.sliding_window_pattern (a number;
                                  -1 when absent or an array, which llama.cpp ignores) */
    double rope_freq_base_swa; /* {arch}.rope.freq_base_swa */
    int64_t rope_orig_ctx;     /* {arch}.rope.scaling.original_context_length */
    double rope_attn_factor;   /* {arch}.rope.scaling.attn_factor */
    double attn_softcap;       /* {arch}.attn_logit_softcapping */
    double final_softcap;      /* {arch}.final_logit_softcapping */
    /* hybrid recurrent models (qwen35, issue 23); -1 where absent */
    int64_t ssm_conv;          /* {arch}.ssm.conv_kernel */
    int64_t ssm_state;         /* {arch}.ssm.state_size (key and value head size) */
    int64_t ssm_groups;        /* {arch}.ssm.group_count (key heads) */
    int64_t ssm_heads;         /* {arch}.ssm.time_step_rank (value heads) */
    int64_t ssm_inner;         /* {arch}.ssm.inner_size (value heads x head size) */
    int64_t full_attn_interval;/* {arch}.full_attention_interval */
    int64_t n_nextn;           /* {arch}.nextn_predict_layers (MTP blocks after the trunk) */
    /* mixtures of experts (qwen3moe, issue 24); -1 where absent */
    int64_t n_expert;          /* {arch}.expert_count */
    int64_t n_expert_used;     /* {arch}.expert_used_count (a number; -1 when an array) */
    int64_t n_ff_exp;          /* {arch}.expert_feed_forward_length */
    int64_t n_ff_shexp;        /* {arch}.expert_shared_feed_forward_length (qwen35moe) */
    int64_t n_params;          /* elements of all tensors */
    uint64_t tensor_bytes;     /* bytes of all tensor data */
    int64_t type_count[LLM_TYPE_COUNT]; /* tensors of each type */
};

/* Read what the metadata says; never fails (absent keys stay -1), but
 * returns -1 with a reason in err when general.architecture is missing. */
int llm_model_meta_read(const struct llm_gguf *g, struct llm_model_meta *m, char *err,
                        size_t err_size);
/* "Q4_K - Medium" etc. for a llama_ftype number; "?" if unknown */
const char *llm_file_type_name(int64_t file_type);

/* ==== the model: weights bound in place from the memory map ==== */

struct llm_model;
struct llm_ctx;
struct llm_sampler;

struct llm_model_params {
    bool vocab_only; /* read metadata only: no tensors are bound or checked */
    /* bind and check every tensor as for computing, but do not prepare the
     * weights (no packing): for checking a file's tensors, and for an
     * architecture that is bound before its forward pass exists (refused
     * at open otherwise); such a model takes no context (default false) */
    bool bind_only;
    /* for tests: also open an architecture that only the reference pass
     * (llm_forward_ref) computes (none today: gemma4 was one), its weights
     * prepared as for running; such a model takes no context (default false) */
    bool ref_only;
    /* where packed weights are cached between runs (see llm_model_open);
     * NULL (the default): packed in memory at every open */
    const char *pack_dir;
};
struct llm_model_params llm_model_default_params(void);

/*
 * Open a GGUF model (architectures llama, qwen2, qwen3, gemma2, gemma3,
 * phi3, qwen35, qwen3moe, qwen35moe, gpt-oss, gemma4) and bind its tensors where they
 * lie in the mapping; nothing is copied or dequantized.
 * A missing or mis-shaped tensor, or one of a type without kernels, is
 * refused with a message naming it. On success *out is a handle the caller
 * closes with llm_model_close (after freeing its contexts); on failure
 * returns a negative value and writes the reason to err.
 */
int llm_model_open(const char *path, struct llm_model_params params, struct llm_model **out,
                   char *err, size_t err_size);
/* Packed weights: every quantized weight is stored 8 rows at a time
 * (interleaved block by block), the form its kernels read, made at open.
 * That copy is made in memory (0.1-1 s for 0.5 GB) unless params.pack_dir
 * holds a cache file for this model file as it is now
 * (llm_pack_cache_file names it), which is then mapped instead; after
 * packing in memory, a background thread writes that file (and
 * llm_model_close waits for it). How many weights are packed, their bytes,
 * and whether they came from the cache file: */
int64_t llm_model_packed(const struct llm_model *m, uint64_t *bytes, bool *from_cache);
/* the cache file for the model at model_path in dir; -1 if there is none */
int llm_pack_cache_file(const char *dir, const char *model_path, char *buf, size_t size);
/* waits until the cache file is written (kvchat bench, so that writing it
 * does not share the cores with what it measures) */
void llm_model_pack_wait(struct llm_model *m);
void llm_model_close(struct llm_model *m);
/* borrowed until llm_model_close */
const struct llm_model_meta *llm_model_get_meta(const struct llm_model *m);
const struct llm_gguf *llm_model_gguf(const struct llm_model *m);
int64_t llm_model_n_vocab(const struct llm_model *m);
int64_t llm_model_n_layer(const struct llm_model *m);
/* elements of one token's K (and of its V) row in one run of the KV export
 * layout: summed over the KV heads of a layer, or (gemma4, whose global and
 * local layers differ) a common part of every layer's (llm_model_n_layer_kv) */
int64_t llm_model_n_embd_kv(const struct llm_model *m);
/* What the binding made of the architecture (for `kvchat models info`):
 * filled from a model opened with tensors bound (not vocab_only). */
struct llm_model_arch_info {
    bool computable;        /* kvchat's forward pass runs this architecture */
    bool fused_qkv;         /* one attn_qkv weight, bound as three row ranges */
    bool fused_gate_up;     /* one ffn_up weight of 2*n_ff rows: gate, then up */
    bool post_norms;        /* post_attention_norm and post_ffw_norm */
    bool qk_norm;           /* attn_q_norm / attn_k_norm */
    bool gelu;              /* GELU (tanh) gating instead of SiLU */
    float embd_scale;       /* the token embeddings are multiplied by this */
    float attn_scale;       /* q is multiplied by this before q.k */
    float attn_softcap;     /* 0: none */
    float final_softcap;    /* 0: none */
    int64_t n_swa;          /* 0: no sliding window (phi3's is ignored, as llama.cpp does) */
    int64_t n_swa_layers;   /* layers with the sliding window */
    bool rope_factors;      /* rope_factors_long/short (longrope) */
    int64_t rope_orig_ctx;  /* longrope: the long factors apply when n_ctx exceeds this */
    float rope_attn_factor; /* longrope: cos and sin are multiplied by this */
    float rope_base_swa;    /* RoPE base of the sliding-window layers */
    float rope_freq_scale_swa;
    /* hybrid recurrent models (qwen35): 0 for the others */
    int64_t n_layer_rec;    /* Gated DeltaNet layers (llm_model_layer_recurrent) */
    int64_t ssm_conv, ssm_state, ssm_groups, ssm_heads; /* conv taps, head size, key heads, value heads */
    uint64_t rstate_bytes;  /* the recurrent state of one sequence (llm_ctx_rstate_size) */
    bool attn_gate;         /* the attention output is gated (sigmoid of a second half of attn_q) */
    /* mixtures of experts (qwen3moe): 0 for dense models */
    int64_t n_expert, n_expert_used, n_ff_exp; /* experts a layer, used a token, rows of each */
    int64_t n_layer_moe;    /* layers whose FFN is the experts */
    bool fused_gate_up_exps; /* one ffn_gate_up_exps tensor, bound as per-expert row ranges */
    const char *moe_gating; /* "softmax, top-k, renormalised" or "top-k, softmax over k" */
    int64_t n_params_active; /* parameters a token uses: all but the unchosen experts' and
                              * the other tokens' per-layer input rows (gemma4); 0 when
                              * the model has neither */
    /* per-layer attention sizes: the sliding-window (local) layers' and the
     * others' (global), which differ in gemma4; 0 where a kind is absent */
    int64_t head_dim_swa, n_head_kv_swa, rope_dim_swa;
    int64_t head_dim_full, n_head_kv_full, rope_dim_full;
    int64_t n_head_kv_layer0;  /* layer 0's KV heads (llama.cpp's n_head_kv()) */
    int64_t n_ff_layer0, n_ff_max; /* layer 0's FFN rows (llama.cpp's n_ff()), the most of any layer's */
    /* gemma4: the last n_layer_kv_shared layers own no K/V and read the
     * KV of layer kv_src_swa (local ones) or kv_src_full (global ones);
     * per-layer inputs of n_per_layer values a layer (0: none); the
     * experts beside a dense FFN (the 26B-A4B) */
    int64_t n_layer_kv_shared, kv_src_swa, kv_src_full;
    int64_t n_per_layer;
    bool experts_beside_ffn;
};
void llm_model_arch_info(const struct llm_model *m, struct llm_model_arch_info *out);
/* true when layer l attends only to the last n_swa positions */
bool llm_model_layer_swa(const struct llm_model *m, int64_t l);
/* true when layer l is a recurrent (Gated DeltaNet) layer rather than attention */
bool llm_model_layer_recurrent(const struct llm_model *m, int64_t l);
/* Bytes of weights one decoded token reads: every layer's matrices, norms
 * and biases, the output norm and the LM head matrix in full, and one row of
 * the token embedding (a tied LM head counts as the full matrix plus that
 * row); a mixture-of-experts layer counts its router and the experts a token
 * uses (expert_used_count of them). The numerator of decode's
 * memory-bandwidth bound. 0 for a model opened vocab_only. */
uint64_t llm_model_decode_bytes(const struct llm_model *m);

/* true for the architectures kvchat computes (llama, qwen2, qwen3, gemma2,
 * gemma3, phi3, qwen35, qwen3moe) */
bool llm_arch_runs(const char *arch);

/* physical cores of this machine (at least 1): the default thread count */
int llm_default_threads(void);
/* the SIMD path of the kernels: "avx2", "neon-dotprod", "neon" or "generic" */
const char *llm_kernel_path(void);
/* NULL, or why the KVCHAT_CPU environment variable cannot be honoured (an
 * unknown value, or a path this CPU cannot run; the portable kernels run) */
const char *llm_kernel_error(void);
/* the float weights' (F32, F16, BF16) products: BLIS's sgemm micro-kernel
 * and its layout ("blis 0.9.0 zen3 mr6 nr16 kc256 wb16"), or NULL when
 * they run on the portable kernels; and the micro-kernel's calls so far in
 * this process (all threads) */
const char *llm_kernel_float_ukr(void);
uint64_t llm_kernel_ukr_calls(void);
/* the weight panels kvchat's own GEMV in the micro-kernel's order has read
 * so far (one-token products on x86: AVX2 and AVX-512) */
uint64_t llm_kernel_gemv_panels(void);

/* ==== a context: KV cache and scratch for one sequence ====
 *
 * The KV cache holds, for every layer, K and V rows of positions
 * 0..n_past-1 in the cache type (F16 by default, or F32). Exported rows of
 * positions [a, b) are laid out as, for each layer l = 0..n_layer-1:
 *   K rows then V rows; each as n_head_kv heads of (b - a) positions of
 *   head_dim elements of the cache type (little-endian f16 or f32)
 * which is llm_ctx_kv_size(c, a, b) bytes. Importing them back gives
 * bit-identical state.
 */
struct llm_ctx_params {
    int32_t n_ctx;     /* cache positions; 0: the model's context length capped at 4096 */
    int32_t n_batch;   /* most tokens per prefill pass (default 512) */
    int32_t n_threads; /* 0: llm_default_threads() */
    uint32_t kv_type;  /* LLM_TYPE_F16 (default) or LLM_TYPE_F32 */
};
struct llm_ctx_params llm_ctx_default_params(void);

/* Allocate a context of model m (borrowed: close m after freeing this).
 * Caller frees with llm_ctx_free. Negative on failure with err. */
int llm_ctx_init(struct llm_model *m, struct llm_ctx_params params, struct llm_ctx **out,
                 char *err, size_t err_size);
void llm_ctx_free(struct llm_ctx *c);
/* the last error on c, borrowed until the next call */
const char *llm_ctx_errmsg(const struct llm_ctx *c);

enum llm_status {
    LLM_OK = 0,
    LLM_ERR = -1,          /* bad input (e.g. a token id out of range) */
    LLM_ERR_CTX_FULL = -2, /* the tokens do not fit in the cache */
    LLM_ERR_INTERRUPTED = -3, /* llm_ctx_set_interrupt's flag was set: nothing changed */
};

/*
 * Run n tokens at positions n_past..n_past+n-1, appending their K and V to
 * the cache, and compute the next-token logits of the last one, in passes
 * of at most n_batch tokens. The results do not depend on how tokens are
 * split into calls or passes, nor on the thread count: every K, V row and
 * logit is bit for bit what any other split gives (a batch-invariant
 * engine). Nothing is changed when it fails (ids are checked first;
 * LLM_ERR_CTX_FULL when n_past + n > n_ctx). Allocates nothing.
 */
int llm_ctx_decode(struct llm_ctx *c, const int32_t *tokens, int64_t n);
/*
 * Speculative verification: llm_ctx_decode of n tokens in one pass (n at
 * most the rows reserved and n_batch) keeping the logits of every one of
 * them: row i (llm_ctx_logits_ith) is the next-token logits after
 * tokens[i], bit for bit what decoding the tokens one by one gives (the
 * engine is batch-invariant), and llm_ctx_logits is row n - 1. The caller
 * keeps the rows it accepts and drops the rest with llm_ctx_truncate
 * (attention-only models: a recurrent state cannot go back).
 */
#define LLM_CTX_MAX_OUTPUTS 32
int llm_ctx_decode_outputs(struct llm_ctx *c, const int32_t *tokens, int64_t n);
/* room for n (1..LLM_CTX_MAX_OUTPUTS) rows of logits (a context has one
 * until this is called): allocates, so call it once, not per token */
int llm_ctx_reserve_outputs(struct llm_ctx *c, int64_t n);
/* row i of the logits of the last decode (NULL when there is no such row);
 * borrowed until the next call */
const float *llm_ctx_logits_ith(const struct llm_ctx *c, int64_t i);
/*
 * While *flag (NULL: none) is non-zero, llm_ctx_decode stops: it is checked
 * before every chunk of work of a pass (a few milliseconds apart), and the
 * call returns LLM_ERR_INTERRUPTED with n_past as it was before it (the
 * rows it wrote past n_past are garbage, never read). What a stopped pass
 * computed is thrown away, so a decode that completes gives the same bits
 * with or without a flag. The flag is typically a signal handler's.
 */
void llm_ctx_set_interrupt(struct llm_ctx *c, volatile sig_atomic_t *flag);
/* How far the cache is: n_past, and during an llm_ctx_decode, the
 * positions done counting the phases (layers' steps) of the pass under way
 * pro rata. The one call that may be made from another thread while a
 * call on c runs (for a progress line). */
int64_t llm_ctx_progress(const struct llm_ctx *c);
/* n_vocab logits of the last token decoded; borrowed until the next call */
const float *llm_ctx_logits(const struct llm_ctx *c);
int64_t llm_ctx_n_past(const struct llm_ctx *c);
int64_t llm_ctx_n_ctx(const struct llm_ctx *c);
int llm_ctx_n_threads(const struct llm_ctx *c);
uint32_t llm_ctx_kv_type(const struct llm_ctx *c);
/* what the KV rows depend on besides the model file, the tokens and the
 * cache type: 0, or 1 when the context uses phi3's long RoPE factors
 * (n_ctx above the model's original context; the same file with a smaller
 * context uses the short ones, and its rows differ) */
int llm_ctx_kv_variant(const struct llm_ctx *c);
/* bytes of KV the cache holds for n_past positions (and could hold for n_ctx) */
uint64_t llm_ctx_kv_bytes(const struct llm_ctx *c, int64_t n_pos);
/* forget positions n..n_past-1 (n <= n_past); the logits are invalid after */
int llm_ctx_truncate(struct llm_ctx *c, int64_t n);
/* bytes of the rows of positions [a, b) as exported */
uint64_t llm_ctx_kv_size(const struct llm_ctx *c, int64_t a, int64_t b);
/* copy the rows of positions [a, b) (b <= n_past) into buf (size bytes);
 * returns the bytes written, or the size needed negated when too small,
 * or LLM_ERR for a bad range */
int64_t llm_ctx_kv_export(const struct llm_ctx *c, int64_t a, int64_t b, void *buf, size_t size);
/* write rows of positions [a, b) (a <= n_past, b <= n_ctx) from buf as
 * exported by a context of the same model and kv type; n_past becomes b;
 * the logits are invalid after (decode the next token to get them) */
int llm_ctx_kv_import(struct llm_ctx *c, int64_t a, int64_t b, const void *buf, size_t size);
/* Where positions [a, b) of run l's K (kv = 0) or V (kv = 1) rows live in
 * the cache (a run: llm_model_n_layer_kv), for reading them straight from a
 * file: *n_chunks chunks (one per KV head, or one part of a head's rows) of
 * *chunk_bytes bytes, chunk g at *base + g * *stride; together
 * they are, in order, what llm_ctx_kv_export writes for that layer and kv.
 * Borrowed until the next call. After filling every layer's chunks, call
 * llm_ctx_kv_commit(c, b). LLM_ERR for a bad range (a > n_past, b > n_ctx). */
int llm_ctx_kv_rows(struct llm_ctx *c, int64_t l, int kv, int64_t a, int64_t b, uint8_t **base,
                    size_t *stride, int64_t *n_chunks, size_t *chunk_bytes);
/* positions [0, b) now hold rows written through llm_ctx_kv_rows: n_past
 * becomes b; the logits are invalid (decode the next token to get them) */
int llm_ctx_kv_commit(struct llm_ctx *c, int64_t b);

/*
 * The reference forward pass (core/engine/forward-ref.c): tokens [0, n)
 * from position 0, one at a time on one thread, the math of the engine
 * written to be read (llama2.c's forward()), computing every value by the
 * engine's definitions. logits (n_vocab floats) gets the last position's,
 * bit for bit what llm_ctx_decode gives on a fresh context with the same
 * n_ctx (phi3's RoPE factors depend on it) and kv_type; n_batch and
 * n_threads are ignored. Allocates its own cache; slow: for tests and for
 * reading. LLM_OK, or LLM_ERR with err (bad ids, n > n_ctx, no memory).
 */
int llm_forward_ref(const struct llm_model *m, struct llm_ctx_params params, const int32_t *tokens, int64_t n,
                    float *logits, char *err, size_t err_size);

/* ==== recurrent state (hybrid models) ==== */

/* qwen35's Gated DeltaNet layers keep a fixed-size state instead of K/V
 * rows. Its exported bytes, f32 little-endian, are per recurrent layer in
 * model order: the conv window ((ssm.conv_kernel - 1) rows of conv_dim =
 * 2 ssm.group_count ssm.state_size + ssm.inner_size inputs, oldest first),
 * then ssm.time_step_rank matrices of ssm.state_size^2 (matrix h row j over
 * key index i: the delta rule's S[i][j] of value head h). They are the
 * same bits on every path that reached the position. */

/* runs of the KV export layout: the attention layers that keep K/V rows (n_layer for
 * attention-only models; gemma4's layers that share another's KV keep none), in order;
 * llm_ctx_kv_size and llm_ctx_kv_rows cover these only. Where the layers' widths
 * differ (gemma4) a layer is cut into runs of llm_model_n_embd_kv elements a position:
 * K then V of run 0 is the first bytes of the layer's K then V, and so on */
int64_t llm_model_n_layer_kv(const struct llm_model *m);
/* bytes of the recurrent state of every recurrent layer (conv windows, delta-rule
 * matrices, ...) after one position; 0 for attention-only models */
uint64_t llm_ctx_rstate_size(const struct llm_ctx *c);
/* copy the state after position n_past - 1 (the state at n_past) into buf: bytes written,
 * or the size needed negated when size is too small; LLM_ERR when the state is invalid */
int64_t llm_ctx_rstate_export(const struct llm_ctx *c, void *buf, size_t size);
/* set the recurrent state to one exported by a context of the same model at position
 * n_past (the caller restored the attention KV of [0, n_past) first); it becomes valid */
int llm_ctx_rstate_import(struct llm_ctx *c, const void *buf, size_t size);
/* The state's own memory (llm_ctx_rstate_size bytes; NULL for attention-only models), to
 * read a saved state straight into instead of a buffer of its own: the state is invalid
 * from this call on, until llm_ctx_rstate_import(c, that memory, size) (which then copies
 * nothing). Borrowed until the next call on c. */
void *llm_ctx_rstate_memory(struct llm_ctx *c);
/* whether the recurrent state matches n_past (always true for attention-only models).
 * llm_ctx_truncate(c, n) with n < n_past keeps the attention rows of [0, n) and makes
 * the state invalid, except n == 0, which resets it to the initial (zero) state;
 * llm_ctx_kv_import and llm_ctx_kv_commit leave it invalid unless n_past becomes 0;
 * llm_ctx_decode on an invalid state returns LLM_ERR with a message and changes
 * nothing. An interrupted decode puts the state back as it was. */
bool llm_ctx_rstate_valid(const struct llm_ctx *c);
/* llm_ctx_decode, and the recurrent state after its first `at` tokens (0 < at <= n) into
 * buf (size = llm_ctx_rstate_size bytes): what llm_ctx_rstate_export would give had the
 * decode stopped there, taken inside the pass instead of cutting it in two (each pass
 * reads all the weights). buf's contents are undefined when it fails. Attention-only
 * models: llm_ctx_decode. */
int llm_ctx_decode_capture(struct llm_ctx *c, const int32_t *tokens, int64_t n, int64_t at, void *buf, size_t size);

/* ==== the sampler ==== */

struct llm_sampler_params {
    float temp;             /* <= 0: greedy (argmax) */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off; divides positive logits of recent tokens */
    float presence_penalty; /* 0: off; subtracted once from recent tokens */
    int32_t penalty_last_n; /* how many recent tokens the penalties see (default 64) */
    uint64_t seed;
};
struct llm_sampler_params llm_sampler_default_params(void);

/* Caller frees with llm_sampler_free. NULL when out of memory. */
struct llm_sampler *llm_sampler_init(struct llm_sampler_params params, int64_t n_vocab);
void llm_sampler_free(struct llm_sampler *s);
/* add a token to the penalty window (prompt tokens, restored history) */
void llm_sampler_accept(struct llm_sampler *s, int32_t token);
/* pick the next token from n_vocab logits (not modified) and accept it;
 * allocates nothing */
int32_t llm_sampler_sample(struct llm_sampler *s, const float *logits);
/* the same over the tokens whose bit is set in mask (bit id % 32 of word
 * id / 32; NULL: all): the others are left out before the penalties,
 * top-k, top-p, min-p and temperature, so greedy takes the best allowed
 * token and no allowed token's logit changes. -1 (nothing accepted) when
 * the mask allows no token. */
int32_t llm_sampler_sample_masked(struct llm_sampler *s, const float *logits, const uint32_t *mask);
/* The same for the token at absolute position pos (the cache position it
 * will take): the random number is a function of the seed's stream and pos
 * alone, never of how many tokens were decoded or verified together or of
 * the draws before it, so a speculative draft at pos is right iff this
 * returns it (docs/speculative.md). The two calls above use the position
 * after the last sample's. (A sampler loaded from a version-1 state draws
 * from its old stream, one number per draw, as before.) */
int32_t llm_sampler_sample_at(struct llm_sampler *s, const float *logits, const uint32_t *mask, int64_t pos);
/* the draws from now on are another stream: a new answer at positions an
 * earlier one used (a retry) draws other numbers (called after each answer) */
void llm_sampler_next_stream(struct llm_sampler *s);
/* 2, or 1 for a sampler loaded from a state saved before version 2 */
uint32_t llm_sampler_version(const struct llm_sampler *s);
/* the sampler's state (RNG and penalty window) as bytes: returns bytes
 * written, or the size needed negated when size is too small */
int64_t llm_sampler_state_save(const struct llm_sampler *s, void *buf, size_t size);
/* restore a saved state (of a sampler with the same penalty_last_n) */
int llm_sampler_state_load(struct llm_sampler *s, const void *buf, size_t size);

/* ==== constrained output ====
 * A grammar in llama.cpp's GBNF syntax (rules `name ::= ...`, alternatives
 * `|`, sequences, groups `( )`, repetitions `*` `+` `?` `{m}` `{m,}`
 * `{m,n}`, string literals, character classes `[a-z]` `[^...]`, `.`, and
 * `#` comments; the language is rule `root`'s), and a matcher that follows
 * the text generated under it and masks the vocabulary's tokens that cannot
 * continue it. docs/structured-output.md says more. */

struct llm_grammar;
/* Parse GBNF text (untrusted: any bytes give a grammar or an error with its
 * line:column in err). Left recursion is refused (it cannot be matched left
 * to right). LLM_OK with *out (caller frees with llm_grammar_free), or
 * LLM_ERR. */
int llm_grammar_parse(const char *text, size_t len, struct llm_grammar **out, char *err, size_t err_size);
void llm_grammar_free(struct llm_grammar *g);

/* the GBNF of any JSON value (`--format json`), compact: static */
const char *llm_grammar_json(void);
/* Translate a JSON Schema (the subset of docs/structured-output.md) into
 * GBNF; a keyword outside it is an error naming it. LLM_OK with *gbnf
 * (malloc'd, caller frees), or LLM_ERR with the reason in err. */
int llm_json_schema_to_grammar(const char *json, size_t len, char **gbnf, char *err, size_t err_size);

struct llm_matcher;
/* A matcher of grammar g (borrowed: must outlive it) over vocabulary v's
 * token pieces, at the start of the language (v NULL: a matcher of bytes
 * alone, for llm_matcher_feed; mask and accept then fail). NULL when out of
 * memory. Caller frees with llm_matcher_free. */
struct llm_matcher *llm_matcher_init(const struct llm_grammar *g, const struct llm_vocab *v);
void llm_matcher_free(struct llm_matcher *m);
/* back to the start of the language */
void llm_matcher_reset(struct llm_matcher *m);
/* the same matcher (its trie kept) for another grammar (borrowed, as at
 * init), at its start; the cached masks are dropped */
void llm_matcher_set_grammar(struct llm_matcher *m, const struct llm_grammar *g);
/* The tokens that can continue the text into mask ((n_vocab + 31) / 32
 * words; bit id % 32 of word id / 32): those whose piece the language
 * allows next (an incomplete UTF-8 character included, when some
 * character of the language begins with those bytes), and the
 * end-of-generation tokens where the text may end. Returns the number of
 * tokens allowed, or -1 when out of memory. */
int64_t llm_matcher_mask(struct llm_matcher *m, uint32_t *mask);
/* The most bytes the matcher's memo of its transitions (what each byte
 * makes of each state met in a mask's walk, kept across masks) may hold:
 * 64 MiB unless set; 0 turns the memo off. The masks are the same either
 * way; only their cost changes. Drops what the memo held. */
void llm_matcher_set_memo_bytes(struct llm_matcher *m, size_t bytes);
/* The text goes on with token id's piece (an end-of-generation token: the
 * text ends). LLM_OK, or LLM_ERR (unchanged) when the grammar does not
 * allow it. */
int llm_matcher_accept(struct llm_matcher *m, int32_t token);
/* the text goes on with n bytes; LLM_OK, or LLM_ERR when not allowed */
int llm_matcher_feed(struct llm_matcher *m, const char *bytes, size_t n);
/* the text so far is a string of the language (it may end here) */
bool llm_matcher_can_end(const struct llm_matcher *m);
/* ... and nothing can follow it */
bool llm_matcher_done(const struct llm_matcher *m);
/* what masking cost: CPU-independent counts */
struct llm_matcher_stats {
    uint64_t masks;      /* llm_matcher_mask calls */
    uint64_t cache_hits; /* of them, answered from the cache of masks */
    uint64_t nodes;      /* trie nodes visited */
    uint64_t steps;      /* bytes the matcher advanced over (a transition
                            taken from the memo is not one) */
    uint64_t states;     /* states the memo interned */
};
struct llm_matcher_stats llm_matcher_get_stats(const struct llm_matcher *m);
/* nodes of the trie over the vocabulary */
int32_t llm_matcher_trie_nodes(const struct llm_matcher *m);

/* ==== SHA-256 (mbedTLS): content addresses, fingerprints, download checks ====
 * A hash that cannot be computed is an error (LLM_ERR), never a digest of
 * zeros. */

struct llm_sha256;
/* A streaming hash; NULL when out of memory (update ignores NULL and final
 * then fails). Finish with llm_sha256_final, which frees it. */
struct llm_sha256 *llm_sha256_init(void);
void llm_sha256_update(struct llm_sha256 *h, const void *p, size_t n);
/* the digest into out: LLM_OK, or LLM_ERR if anything failed (out is then
 * not to be used) */
int llm_sha256_final(struct llm_sha256 *h, uint8_t out[32]);
/* bytes to hash, one of several pieces */
struct llm_bytes {
    const void *p;
    size_t n;
};
/* The digest of the pieces in order, allocating nothing: LLM_OK or LLM_ERR. */
int llm_sha256_parts(const struct llm_bytes *parts, size_t n_parts, uint8_t out[32]);
/* n bytes as 2n lowercase hex digits and a NUL */
void llm_hex(const uint8_t *p, size_t n, char *out);

/* ==== machine ==== */

/*
 * Measure DRAM read bandwidth in bytes per second: n_threads OpenMP threads
 * (<= 0: the default team) each sum their share of a buffer of `bytes`
 * (<= 0: 256 MiB; it should be many times the last-level cache), best of
 * `reps` passes after one warm-up pass. Takes about (reps + 2) * bytes /
 * bandwidth seconds. Returns a negative value when the buffer cannot be
 * allocated. (For `kvchat bench --membw`.)
 */
double llm_measure_membw(int n_threads, int64_t bytes, int reps);

#endif
