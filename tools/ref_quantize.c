/* ref_quantize.c — `ref_quantize IN OUT TYPE`: quantize a GGUF model with the reference engine's
 * llama_model_quantize (llama.cpp v0.5.0, no imatrix, 2 threads). TYPE: Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S,
 * Q6_K, Q8_0, Q4_0, IQ4_XS, F16, TQ1_0, TQ2_0, MXFP4_MOE, IQ3_S, IQ3_M, IQ3_XXS, IQ2_M, IQ2_S, IQ2_XS,
 * IQ2_XXS, IQ1_S or IQ1_M (IQ3_XXS, the IQ2 and IQ1 recipes need --imatrix). The
 * oracle `loom quantize` is checked against; loom itself never links the reference. Options before IN, as
 * llama-quantize takes them: --imatrix FILE (an importance matrix GGUF) and --tensor-type PATTERN=TYPE
 * (repeatable), passed to llama_model_quantize as llama-quantize passes them (tests/parity/ref_imatrix.h). */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "../tests/parity/ref_imatrix.h"
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
    /* files loom reads but does not write: ternary, and MXFP4 experts (other tensors Q8_0) */
    {"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0},   {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
    {"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
    /* the grid IQ recipes (loom writes them too: iq_quant.c); all but IQ3_S and IQ3_M need --imatrix */
    {"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S},   {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M},
    {"IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS}, {"IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M},
    {"IQ2_S", LLAMA_FTYPE_MOSTLY_IQ2_S},   {"IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS},
    {"IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS},
    {"IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S},   {"IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M}, /* both need --imatrix */
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
    const char *imatrix = NULL, *tt[64];
    size_t n_tt = 0;
    while (argc > 2 && (!strcmp(argv[1], "--imatrix") || !strcmp(argv[1], "--tensor-type")) && n_tt < 64) {
        if (argv[1][2] == 'i')
            imatrix = argv[2];
        else
            tt[n_tt++] = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: ref_quantize [--imatrix FILE] [--tensor-type PATTERN=TYPE]... IN.gguf OUT.gguf Q4_K_M|Q4_K_S|Q5_K_M|Q5_K_S|Q6_K|Q8_0|Q4_0|IQ4_XS|F16|TQ1_0|TQ2_0|MXFP4_MOE|"
                        "IQ3_S|IQ3_M|IQ3_XXS|IQ2_M|IQ2_S|IQ2_XS|IQ2_XXS\n");
        return 2;
    }
    size_t n = sizeof ref_quantize_types / sizeof ref_quantize_types[0], i;
    for (i = 0; i < n && strcmp(argv[3], ref_quantize_types[i].name); i++)
        ;
    if (i == n) {
        fprintf(stderr, "ref_quantize: type '%s', expected Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q6_K, Q8_0, Q4_0, IQ4_XS, F16, "
                "TQ1_0, TQ2_0, MXFP4_MOE, IQ3_S, IQ3_M, IQ3_XXS, IQ2_M, IQ2_S, IQ2_XS or IQ2_XXS\n",
                argv[3]);
        return 2;
    }
    ref_quantize_load_backends();
    llama_backend_init();
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 2;
    qp.ftype = ref_quantize_types[i].ftype;
    struct ref_quant_args ra = {0};
    if ((imatrix && ref_quant_imatrix(&ra, &qp, imatrix)) || ref_quant_tensor_types(&ra, &qp, tt, n_tt)) {
        ref_quant_args_free(&ra);
        return 2;
    }
    uint32_t rc = llama_model_quantize(argv[1], argv[2], &qp);
    ref_quant_args_free(&ra);
    llama_backend_free();
    if (rc) {
        fprintf(stderr, "ref_quantize: llama_model_quantize(%s -> %s, %s) failed\n", argv[1], argv[2], argv[3]);
        return 1;
    }
    return 0;
}
