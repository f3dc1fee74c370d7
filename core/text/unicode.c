/*
 * unicode.c - UTF-8 and Unicode categories for the tokenizers.
 *
 * Decoding follows llama.cpp's unicode_cpt_from_utf8 byte for byte, because
 * a tokenizer that decodes invalid input differently produces different
 * tokens: a bad sequence becomes U+FFFD and consumes exactly one byte.
 * Categories come from the generated range table (core/text/unicode-data.c); a
 * lookup is a binary search, with a 128-entry table for ASCII.
 */
#include "core/text/unicode.h"

size_t llm_utf8_len(unsigned char lead)
{
    static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[lead >> 4];
}

static int cont(const char *s, size_t i)
{
    return ((unsigned char)s[i] & 0xC0) == 0x80;
}

uint32_t llm_utf8_decode(const char *s, size_t n, size_t *off)
{
    size_t i = *off;
    unsigned char c = (unsigned char)s[i];
    if (!(c & 0x80)) {
        *off = i + 1;
        return c;
    }
    if (!(c & 0x40))
        goto bad;
    if (!(c & 0x20)) {
        if (i + 1 >= n || !cont(s, i + 1))
            goto bad;
        *off = i + 2;
        return ((uint32_t)(c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F);
    }
    if (!(c & 0x10)) {
        if (i + 2 >= n || !cont(s, i + 1) || !cont(s, i + 2))
            goto bad;
        *off = i + 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)((unsigned char)s[i + 1] & 0x3F) << 6) |
               ((unsigned char)s[i + 2] & 0x3F);
    }
    if (!(c & 0x08)) {
        if (i + 3 >= n || !cont(s, i + 1) || !cont(s, i + 2) || !cont(s, i + 3))
            goto bad;
        *off = i + 4;
        return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)((unsigned char)s[i + 1] & 0x3F) << 12) |
               ((uint32_t)((unsigned char)s[i + 2] & 0x3F) << 6) | ((unsigned char)s[i + 3] & 0x3F);
    }
bad:
    *off = i + 1;
    return 0xFFFD;
}

size_t llm_utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

uint16_t llm_ucd_get(uint32_t cp)
{
    if (cp < 128)
        return llm_ucd_ascii[cp];
    if (cp >= 0x110000)
        return LLM_UCD_UNDEFINED;
    uint32_t lo = 0, hi = llm_ucd_n_ranges; /* find the last start <= cp */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (llm_ucd_start[mid] <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return llm_ucd_flags[lo];
}

/* GPT-2 maps the printable bytes ! .. ~, ¡ .. ¬, ® .. ÿ to themselves and the
 * other 68 bytes, in order, to U+0100 onwards. */
static int byte_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t llm_byte_to_cp(uint8_t b)
{
    if (byte_printable(b))
        return b;
    if (b <= 0x20)
        return 256 + b;        /* 0x00..0x20 -> U+0100..U+0120 */
    if (b <= 0xA0)
        return 256 + 33 + (b - 0x7F); /* 0x7F..0xA0 -> U+0121..U+0142 */
    return 256 + 67;           /* 0xAD -> U+0143 */
}

int llm_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return byte_printable(cp) ? (int)cp : -1;
    if (cp <= 256 + 32)
        return (int)(cp - 256);
    if (cp <= 256 + 66)
        return (int)(cp - 256 - 33 + 0x7F);
    if (cp == 256 + 67)
        return 0xAD;
    return -1;
}
