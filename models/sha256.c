/*
 * sha256.c - SHA-256 through mbedTLS, behind models/'s header so that the
 * rest of kvchat never includes mbedTLS. Works with mbedTLS 2.28 (the _ret
 * functions) and 3.x (the same names without _ret).
 */
#include "models/mdl.h"

#include <mbedtls/sha256.h>
#include <mbedtls/version.h>
#include <stdlib.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define sha256_starts mbedtls_sha256_starts
#define sha256_update mbedtls_sha256_update
#define sha256_finish mbedtls_sha256_finish
#else
#define sha256_starts mbedtls_sha256_starts_ret
#define sha256_update mbedtls_sha256_update_ret
#define sha256_finish mbedtls_sha256_finish_ret
#endif

struct mdl_sha256 {
    mbedtls_sha256_context ctx;
};

struct mdl_sha256 *mdl_sha256_init(void)
{
    struct mdl_sha256 *h = malloc(sizeof *h);
    if (!h)
        return NULL;
    mbedtls_sha256_init(&h->ctx);
    sha256_starts(&h->ctx, 0);
    return h;
}

void mdl_sha256_update(struct mdl_sha256 *h, const void *p, size_t n)
{
    sha256_update(&h->ctx, p, n);
}

void mdl_sha256_final(struct mdl_sha256 *h, unsigned char out[32])
{
    sha256_finish(&h->ctx, out);
    mbedtls_sha256_free(&h->ctx);
    free(h);
}

void mdl_sha256(const void *p, size_t n, unsigned char out[32])
{
    mbedtls_sha256_context ctx;
    mbedtls_sha256_init(&ctx);
    sha256_starts(&ctx, 0);
    sha256_update(&ctx, p, n);
    sha256_finish(&ctx, out);
    mbedtls_sha256_free(&ctx);
}

void mdl_hex(const unsigned char *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = 0;
}
