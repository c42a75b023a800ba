/* types.c — the type traits (types.h): block geometry of every GGUF tensor type loom knows, its activation
 * type, dequantizer, weight quantizer and row validator. One const table; nothing in it depends on the
 * instruction set. */
#include "kernels/types.h"

#include "kernels/protos.h"

static const struct loom_type_traits traits[LOOM_TYPE_COUNT] = {
    [LOOM_TYPE_F32] = {"F32", 1, 4, LOOM_TYPE_F32, loom_f32_to_float, 0, loom_f32_validate_row, 0},
    [LOOM_TYPE_F16] = {"F16", 1, 2, LOOM_TYPE_F16, loom_f16_to_float, 0, loom_f16_validate_row, 0},
    [LOOM_TYPE_BF16] = {"BF16", 1, 2, LOOM_TYPE_BF16, loom_bf16_to_float, 0, loom_bf16_validate_row, 0},
    [LOOM_TYPE_Q4_0] = {"Q4_0", 32, 18, LOOM_TYPE_Q8_0, loom_q4_0_to_float, loom_q4_0_quantize,
                        loom_q4_0_validate_row, loom_q4_0_quantize_w},
    [LOOM_TYPE_Q4_1] = {"Q4_1", 32, 20, LOOM_TYPE_Q8_1, loom_q4_1_to_float, loom_q4_1_quantize,
                        loom_q4_1_validate_row, loom_q4_1_quantize_w},
    [LOOM_TYPE_Q5_0] = {"Q5_0", 32, 22, LOOM_TYPE_Q8_0, loom_q5_0_to_float, loom_q5_0_quantize,
                        loom_q5_0_validate_row, 0},
    [LOOM_TYPE_Q5_1] = {"Q5_1", 32, 24, LOOM_TYPE_Q8_1, loom_q5_1_to_float, loom_q5_1_quantize,
                        loom_q5_1_validate_row, 0},
    [LOOM_TYPE_Q8_0] = {"Q8_0", 32, 34, LOOM_TYPE_Q8_0, loom_q8_0_to_float, loom_q8_0_quantize,
                        loom_q8_0_validate_row, 0},
    [LOOM_TYPE_Q8_1] = {"Q8_1", 32, 36, LOOM_TYPE_Q8_1, loom_q8_1_to_float, 0, 0, 0},
    [LOOM_TYPE_Q2_K] = {"Q2_K", 256, 84, LOOM_TYPE_Q8_K, loom_q2_k_to_float, loom_q2_k_quantize,
                        loom_q2_k_validate_row, loom_q2_k_quantize_w},
    [LOOM_TYPE_Q3_K] = {"Q3_K", 256, 110, LOOM_TYPE_Q8_K, loom_q3_k_to_float, loom_q3_k_quantize,
                        loom_q3_k_validate_row, loom_q3_k_quantize_w},
    [LOOM_TYPE_Q4_K] = {"Q4_K", 256, 144, LOOM_TYPE_Q8_K, loom_q4_k_to_float, loom_q4_k_quantize,
                        loom_q4_k_validate_row, loom_q4_k_quantize_w},
    [LOOM_TYPE_Q5_K] = {"Q5_K", 256, 176, LOOM_TYPE_Q8_K, loom_q5_k_to_float, loom_q5_k_quantize,
                        loom_q5_k_validate_row, loom_q5_k_quantize_w},
    [LOOM_TYPE_Q6_K] = {"Q6_K", 256, 210, LOOM_TYPE_Q8_K, loom_q6_k_to_float, loom_q6_k_quantize,
                        loom_q6_k_validate_row, loom_q6_k_quantize_w},
    [LOOM_TYPE_Q8_K] = {"Q8_K", 256, 292, LOOM_TYPE_Q8_K, loom_q8_k_to_float, 0, loom_q8_k_validate_row, 0},
    [LOOM_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18, LOOM_TYPE_Q8_0, loom_iq4_nl_to_float, loom_iq4_nl_quantize,
                          loom_iq4_nl_validate_row, loom_iq4_nl_quantize_w},
    [LOOM_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136, LOOM_TYPE_Q8_K, loom_iq4_xs_to_float, loom_iq4_xs_quantize,
                          loom_iq4_xs_validate_row, loom_iq4_xs_quantize_w},
    [LOOM_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66, LOOM_TYPE_Q8_K, loom_iq2_xxs_to_float, 0, loom_iq2_xxs_validate_row,
                           loom_iq2_xxs_quantize_w},
    [LOOM_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74, LOOM_TYPE_Q8_K, loom_iq2_xs_to_float, 0, loom_iq2_xs_validate_row,
                          loom_iq2_xs_quantize_w},
    [LOOM_TYPE_IQ2_S] = {"IQ2_S", 256, 82, LOOM_TYPE_Q8_K, loom_iq2_s_to_float, loom_iq2_s_quantize,
                         loom_iq2_s_validate_row, loom_iq2_s_quantize_w},
    [LOOM_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98, LOOM_TYPE_Q8_K, loom_iq3_xxs_to_float, loom_iq3_xxs_quantize,
                           loom_iq3_xxs_validate_row, loom_iq3_xxs_quantize_w},
    [LOOM_TYPE_IQ3_S] = {"IQ3_S", 256, 110, LOOM_TYPE_Q8_K, loom_iq3_s_to_float, loom_iq3_s_quantize,
                         loom_iq3_s_validate_row, loom_iq3_s_quantize_w},
    [LOOM_TYPE_IQ1_S] = {"IQ1_S", 256, 50, LOOM_TYPE_Q8_K, loom_iq1_s_to_float, 0, loom_iq1_s_validate_row,
                         loom_iq1_s_quantize_w},
    [LOOM_TYPE_IQ1_M] = {"IQ1_M", 256, 56, LOOM_TYPE_Q8_K, loom_iq1_m_to_float, loom_iq1_m_quantize,
                         loom_iq1_m_validate_row, loom_iq1_m_quantize_w},
    [LOOM_TYPE_TQ1_0] = {"TQ1_0", 256, 54, LOOM_TYPE_Q8_K, loom_tq1_0_to_float, loom_tq1_0_quantize,
                         loom_tq1_0_validate_row, 0},
    [LOOM_TYPE_TQ2_0] = {"TQ2_0", 256, 66, LOOM_TYPE_Q8_K, loom_tq2_0_to_float, loom_tq2_0_quantize,
                         loom_tq2_0_validate_row, 0},
    [LOOM_TYPE_MXFP4] = {"MXFP4", 32, 17, LOOM_TYPE_Q8_0, loom_mxfp4_to_float, loom_mxfp4_quantize,
                         loom_mxfp4_validate_row, 0},
};

const struct loom_type_traits *loom_type_traits(uint32_t type)
{
    if (type >= LOOM_TYPE_COUNT || !traits[type].name)
        return 0;
    return &traits[type];
}

size_t loom_type_row_bytes(uint32_t type, int64_t n)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    if (!t || n < 0 || n % t->block_size)
        return 0;
    return (size_t)(n / t->block_size) * t->type_size;
}
