/*
 * sha256.c - SHA-256 for the whole program (content addresses of KV blocks,
 * model fingerprints, download checks), from mbedTLS's implementation: the
 * one file that includes its hash header (models/tls.c includes the TLS
 * ones).
 *
 * Invariant: a hash that could not be computed is an error returned to the
 * caller, never a digest of zeros or of part of the input. The streaming
 * handle remembers the first failure and llm_sha256_final reports it; the
 * one-shot llm_sha256_parts allocates nothing.
 */
#include "core/llm.h"

#include <stdlib.h>
#include <string.h>

#include <mbedtls/version.h>
#include <mbedtls/sha256.h>

/* mbedTLS 2.28 names the checked functions *_ret; 3.x has only those */
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define sha256_starts mbedtls_sha256_starts
#define sha256_update mbedtls_sha256_update
#define sha256_finish mbedtls_sha256_finish
#else
#define sha256_starts mbedtls_sha256_starts_ret
#define sha256_update mbedtls_sha256_update_ret
#define sha256_finish mbedtls_sha256_finish_ret
#endif

struct llm_sha256 {
    mbedtls_sha256_context ctx;
    int failed; /* an mbedTLS call failed: the digest is not to be had */
};

struct llm_sha256 *llm_sha256_init(void)
{
    struct llm_sha256 *h = malloc(sizeof *h);
    if (!h)
        return NULL;
    mbedtls_sha256_init(&h->ctx);
    h->failed = sha256_starts(&h->ctx, 0) != 0;
    return h;
}

void llm_sha256_update(struct llm_sha256 *h, const void *p, size_t n)
{
    if (h && !h->failed && n && sha256_update(&h->ctx, p, n) != 0)
        h->failed = 1;
}

int llm_sha256_final(struct llm_sha256 *h, uint8_t out[32])
{
    if (!h)
        return LLM_ERR;
    int rc = !h->failed && sha256_finish(&h->ctx, out) == 0 ? LLM_OK : LLM_ERR;
    mbedtls_sha256_free(&h->ctx);
    free(h);
    return rc;
}

int llm_sha256_parts(const struct llm_bytes *parts, size_t n_parts, uint8_t out[32])
{
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    int rc = sha256_starts(&ctx, 0);
    for (size_t i = 0; i < n_parts && rc == 0; i++)
        if (parts[i].n)
            rc = sha256_update(&ctx, parts[i].p, parts[i].n);
    if (rc == 0)
        rc = sha256_finish(&ctx, out);
    mbedtls_sha256_free(&ctx);
    return rc == 0 ? LLM_OK : LLM_ERR;
}

void llm_hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = 0;
}
