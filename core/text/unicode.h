/*
 * unicode.h - (internal to core/) what the tokenizers need of Unicode:
 * UTF-8 decoding with llama.cpp's error rule, code point categories from the
 * generated table core/text/unicode-data.c, and GPT-2's byte <-> code point map.
 */
#ifndef KVCHAT_CORE_UNICODE_H
#define KVCHAT_CORE_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* category flags: exactly one of the first eight, plus LLM_UCD_WHITESPACE */
enum {
    LLM_UCD_UNDEFINED = 0x01,  /* unassigned (Cn), or beyond U+10FFFF */
    LLM_UCD_NUMBER = 0x02,     /* \p{N} */
    LLM_UCD_LETTER = 0x04,     /* \p{L} */
    LLM_UCD_SEPARATOR = 0x08,  /* \p{Z} */
    LLM_UCD_MARK = 0x10,       /* \p{M} */
    LLM_UCD_PUNCT = 0x20,      /* \p{P} */
    LLM_UCD_SYMBOL = 0x40,     /* \p{S} */
    LLM_UCD_CONTROL = 0x80,    /* \p{C} (but not Cn) */
    LLM_UCD_CATEGORIES = 0xFF,
    LLM_UCD_WHITESPACE = 0x100 /* White_Space property */
};

extern const uint32_t llm_ucd_n_ranges;
extern const uint32_t llm_ucd_start[];
extern const uint16_t llm_ucd_flags[];
extern const uint16_t llm_ucd_ascii[128];

/* flags of a code point; LLM_UCD_UNDEFINED beyond U+10FFFF */
uint16_t llm_ucd_get(uint32_t cp);

/* Bytes in the UTF-8 sequence a lead byte announces (1 for continuation
 * bytes, 4 for 0xF0..0xFF), as llama.cpp's unicode_len_utf8. */
size_t llm_utf8_len(unsigned char lead);

/* Decode the code point at s[*off], advancing *off. Invalid sequences (a
 * stray continuation byte, a truncated sequence, a lead byte 0xF8..0xFF)
 * decode to U+FFFD and advance one byte. Overlong forms and surrogates are
 * accepted as llama.cpp accepts them; 0xF5..0xF7 leads can yield code
 * points above U+10FFFF, which callers must handle. */
uint32_t llm_utf8_decode(const char *s, size_t n, size_t *off);

/* Encode cp (<= 0x1FFFFF) into out[4]; returns the length (1..4). */
size_t llm_utf8_encode(uint32_t cp, char *out);

/* GPT-2's byte-level map: byte -> code point (printable stand-ins) and back
 * (-1 for a code point that stands for no byte). */
uint32_t llm_byte_to_cp(uint8_t b);
int llm_cp_to_byte(uint32_t cp);

#endif
