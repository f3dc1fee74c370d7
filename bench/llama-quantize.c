/*
 * llama-quantize.c - requantizes a GGUF file with llama.cpp's quantizer,
 * for bench-bigmoe.sh and bench-pack.sh: their large sources are Q8_0 (a
 * full-size Qwen3-30B-A3B shape is 32 GB in Q8_0 against 60 GB in F16, and
 * disk is short), and llref's `quantize` does not allow requantizing, so
 * this harness calls llama.cpp's public llama_model_quantize with
 * allow_requantize set. Built and run by bench/llama-quantize.sh against
 * the llama.cpp library that ../shared/peer/setup.sh installs; not part of
 * `make`, not a test.
 *   usage: llama-quantize IN.gguf OUT.gguf [TYPE (Q4_K_M)] [-t 2]
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: llama-quantize IN.gguf OUT.gguf [Q4_K_M|Q8_0] [-t 2]\n");
        return 2;
    }
    const char *type = argc > 3 && argv[3][0] != '-' ? argv[3] : "Q4_K_M";
    int threads = 2;
    for (int i = 3; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-t"))
            threads = atoi(argv[i + 1]);
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    if (!strcmp(type, "Q4_K_M"))
        qp.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
    else if (!strcmp(type, "Q8_0"))
        qp.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    else {
        fprintf(stderr, "llama-quantize: type %s: only Q4_K_M and Q8_0\n", type);
        return 2;
    }
    qp.nthread = threads;
    qp.allow_requantize = true;
    llama_backend_init();
    if (llama_model_quantize(argv[1], argv[2], &qp)) {
        fprintf(stderr, "llama-quantize: quantizing '%s' failed\n", argv[1]);
        return 1;
    }
    llama_backend_free();
    return 0;
}
