/* ref_quantize.c — `ref_quantize IN OUT TYPE`: quantize a GGUF model with the reference engine's
 * llama_model_quantize (llama.cpp v0.5.0, no imatrix, 2 threads). TYPE: Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S,
 * Q6_K, Q8_0, Q4_0, IQ4_XS or F16. The oracle `loom quantize` is checked against; loom itself never links
 * the reference. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static const struct {
    const char *name;
    enum llama_ftype ftype;
} ref_quantize_types[] = {
    {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},     {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"F16", LLAMA_FTYPE_MOSTLY_F16},
};

/* The prebuilt ggml finds its CPU backend only when told where it lives: next to libllama. */
static void ref_quantize_load_backends(void)
{
    Dl_info info;
    char dir[4096];
    if (dladdr((void *)llama_model_quantize, &info) && info.dli_fname) {
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        ggml_backend_load_all_from_path(dirname(dir));
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ref_quantize IN.gguf OUT.gguf Q4_K_M|Q4_K_S|Q5_K_M|Q5_K_S|Q6_K|Q8_0|Q4_0|IQ4_XS|F16\n");
        return 2;
    }
    size_t n = sizeof ref_quantize_types / sizeof ref_quantize_types[0], i;
    for (i = 0; i < n && strcmp(argv[3], ref_quantize_types[i].name); i++)
        ;
    if (i == n) {
        fprintf(stderr, "ref_quantize: type '%s', expected Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q6_K, Q8_0, Q4_0, IQ4_XS or F16\n",
                argv[3]);
        return 2;
    }
    ref_quantize_load_backends();
    llama_backend_init();
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 2;
    qp.ftype = ref_quantize_types[i].ftype;
    uint32_t rc = llama_model_quantize(argv[1], argv[2], &qp);
    llama_backend_free();
    if (rc) {
        fprintf(stderr, "ref_quantize: llama_model_quantize(%s -> %s, %s) failed\n", argv[1], argv[2], argv[3]);
        return 1;
    }
    return 0;
}
