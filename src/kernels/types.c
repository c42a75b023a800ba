/* types.c — the per-type trait table: block geometry of every GGUF tensor type loom knows, its weight
 * quantizer and row validator, and the kernel function pointers (dequantize, activation quantize, dot)
 * installed by the dispatcher. */
#include "kernels/kernels_internal.h"
#include "kernels/types.h"

static struct loom_type_traits traits[LOOM_TYPE_COUNT] = {
    [LOOM_TYPE_F32] = {"F32", 1, 4, LOOM_TYPE_F32, 0, 0, 0, 0, loom_f32_validate_row},
    [LOOM_TYPE_F16] = {"F16", 1, 2, LOOM_TYPE_F16, 0, 0, 0, 0, loom_f16_validate_row},
    [LOOM_TYPE_BF16] = {"BF16", 1, 2, LOOM_TYPE_BF16, 0, 0, 0, 0, loom_bf16_validate_row},
    [LOOM_TYPE_Q4_0] = {"Q4_0", 32, 18, LOOM_TYPE_Q8_0, 0, 0, 0, loom_q4_0_quantize, loom_q4_0_validate_row},
    [LOOM_TYPE_Q4_1] = {"Q4_1", 32, 20, LOOM_TYPE_Q8_1, 0, 0, 0, loom_q4_1_quantize, loom_q4_1_validate_row},
    [LOOM_TYPE_Q5_0] = {"Q5_0", 32, 22, LOOM_TYPE_Q8_0, 0, 0, 0, loom_q5_0_quantize, loom_q5_0_validate_row},
    [LOOM_TYPE_Q5_1] = {"Q5_1", 32, 24, LOOM_TYPE_Q8_1, 0, 0, 0, loom_q5_1_quantize, loom_q5_1_validate_row},
    [LOOM_TYPE_Q8_0] = {"Q8_0", 32, 34, LOOM_TYPE_Q8_0, 0, 0, 0, loom_q8_0_quantize, loom_q8_0_validate_row},
    [LOOM_TYPE_Q8_1] = {"Q8_1", 32, 36, LOOM_TYPE_Q8_1, 0, 0, 0, 0, 0},
    [LOOM_TYPE_Q2_K] = {"Q2_K", 256, 84, LOOM_TYPE_Q8_K, 0, 0, 0, loom_q2_k_quantize, loom_q2_k_validate_row},
    [LOOM_TYPE_Q3_K] = {"Q3_K", 256, 110, LOOM_TYPE_Q8_K, 0, 0, 0, loom_q3_k_quantize, loom_q3_k_validate_row},
    [LOOM_TYPE_Q4_K] = {"Q4_K", 256, 144, LOOM_TYPE_Q8_K, 0, 0, 0, loom_q4_k_quantize, loom_q4_k_validate_row},
    [LOOM_TYPE_Q5_K] = {"Q5_K", 256, 176, LOOM_TYPE_Q8_K, 0, 0, 0, loom_q5_k_quantize, loom_q5_k_validate_row},
    [LOOM_TYPE_Q6_K] = {"Q6_K", 256, 210, LOOM_TYPE_Q8_K, 0, 0, 0, loom_q6_k_quantize, loom_q6_k_validate_row},
    [LOOM_TYPE_Q8_K] = {"Q8_K", 256, 292, LOOM_TYPE_Q8_K, 0, 0, 0, 0, loom_q8_k_validate_row},
    [LOOM_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18, LOOM_TYPE_Q8_0, 0, 0, 0, loom_iq4_nl_quantize, loom_iq4_nl_validate_row},
    [LOOM_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136, LOOM_TYPE_Q8_K, 0, 0, 0, loom_iq4_xs_quantize, loom_iq4_xs_validate_row},
};

/* The reference's other kernels: its repacked Q4_K gemv/gemm order, and llamafile's tinyBLAS order
 * (one 16-lane accumulator per output) for F32/F16/BF16 products with several activation rows, which
 * it uses when n_in is a multiple of gemm_step (its vector step). */
static loom_vec_dot_fn repacked_q4_k_dot, repacked_q4_k_dot_x4;
static loom_vec_dot_fn gemm_dot[LOOM_TYPE_COUNT];
static const int64_t gemm_step[LOOM_TYPE_COUNT] = {[LOOM_TYPE_F32] = 16, [LOOM_TYPE_F16] = 16, [LOOM_TYPE_BF16] = 32,
                                                   [LOOM_TYPE_IQ4_NL] = 32};
/* The reference's repacked orders for Q4_0, IQ4_NL (one order for gemv and gemm) and Q2_K (gemm for
 * activation rows in groups of 4, gemv for the rest), used with n_out % 8 == 0 when repacking is on. */
static loom_vec_dot_fn repacked_dot[LOOM_TYPE_COUNT], repacked_dot_x4[LOOM_TYPE_COUNT];
/* The reference's IQ panel gemm order for IQ4_XS (iqp.cpp; AVX2, n_out % 8 == 0, n_tok >= 8). */
static loom_vec_dot_fn panel_iq4_xs_dot;

/* Kernels over Q4_K x16 weight groups (AVX2 and AVX-512 sets), in the order of the one-row repacked Q4_K
 * dot. */
static struct loom_x16_kernels q4_k_x16;

/* 4- and 8-row forms of the installed dots (only SIMD sets have them). */
#define N_DOT4 16
static struct {
    loom_vec_dot_fn dot;
    loom_vec_dot4_fn dot4;
    loom_vec_dot8_fn dot8;
} dot4_table[N_DOT4];
static int n_dot4;

static void add_dot48(loom_vec_dot_fn dot, loom_vec_dot4_fn dot4, loom_vec_dot8_fn dot8)
{
    for (int i = 0; i < n_dot4; i++)
        if (dot4_table[i].dot == dot) {
            dot4_table[i].dot4 = dot4;
            dot4_table[i].dot8 = dot8;
            return;
        }
    if (n_dot4 < N_DOT4) {
        dot4_table[n_dot4].dot = dot;
        dot4_table[n_dot4].dot4 = dot4;
        dot4_table[n_dot4++].dot8 = dot8;
    }
}

static void add_dot4(loom_vec_dot_fn dot, loom_vec_dot4_fn dot4) { add_dot48(dot, dot4, 0); }

static void set(enum loom_type type, loom_to_float_fn to_float, loom_from_float_fn from_float,
                loom_vec_dot_fn vec_dot)
{
    traits[type].to_float = to_float;
    traits[type].from_float = from_float;
    traits[type].vec_dot = vec_dot;
}

static void install_scalar(void)
{
    n_dot4 = 0;
    set(LOOM_TYPE_F32, loom_f32_to_float, loom_f32_from_float, loom_f32_vec_dot);
    set(LOOM_TYPE_F16, loom_f16_to_float, loom_f16_from_float, loom_f16_vec_dot);
    set(LOOM_TYPE_BF16, loom_bf16_to_float, loom_bf16_from_float, loom_bf16_vec_dot);
    set(LOOM_TYPE_Q8_0, loom_q8_0_to_float, loom_q8_0_from_float, loom_q8_0_vec_dot);
    set(LOOM_TYPE_Q8_K, loom_q8_k_to_float, loom_q8_k_from_float, 0);
    set(LOOM_TYPE_Q4_K, loom_q4_k_to_float, 0, loom_q4_k_vec_dot);
    set(LOOM_TYPE_Q5_K, loom_q5_k_to_float, 0, loom_q5_k_vec_dot);
    set(LOOM_TYPE_Q6_K, loom_q6_k_to_float, 0, loom_q6_k_vec_dot);
    set(LOOM_TYPE_Q4_0, loom_q4_0_to_float, 0, loom_q4_0_vec_dot);
    set(LOOM_TYPE_Q4_1, loom_q4_1_to_float, 0, loom_q4_1_vec_dot);
    set(LOOM_TYPE_Q5_0, loom_q5_0_to_float, 0, loom_q5_0_vec_dot);
    set(LOOM_TYPE_Q5_1, loom_q5_1_to_float, 0, loom_q5_1_vec_dot);
    set(LOOM_TYPE_Q8_1, loom_q8_1_to_float, loom_q8_1_from_float, 0);
    set(LOOM_TYPE_Q2_K, loom_q2_k_to_float, 0, loom_q2_k_vec_dot);
    set(LOOM_TYPE_Q3_K, loom_q3_k_to_float, 0, loom_q3_k_vec_dot);
    set(LOOM_TYPE_IQ4_NL, loom_iq4_nl_to_float, 0, loom_iq4_nl_vec_dot);
    set(LOOM_TYPE_IQ4_XS, loom_iq4_xs_to_float, 0, loom_iq4_xs_vec_dot);
    repacked_q4_k_dot = loom_q4_k_vec_dot_repacked;
    repacked_q4_k_dot_x4 = loom_q4_k_vec_dot_repacked_x4;
    q4_k_x16 = (struct loom_x16_kernels){0, 0, 0};
    gemm_dot[LOOM_TYPE_F32] = loom_f32_dot_gemm;
    gemm_dot[LOOM_TYPE_F16] = loom_f16_dot_gemm;
    gemm_dot[LOOM_TYPE_BF16] = loom_bf16_dot_gemm;
    gemm_dot[LOOM_TYPE_IQ4_NL] = loom_iq4_nl_dot_gemm;
    panel_iq4_xs_dot = loom_iq4_xs_dot_panel;
    repacked_dot[LOOM_TYPE_Q4_0] = repacked_dot_x4[LOOM_TYPE_Q4_0] = loom_q4_0_vec_dot_repacked;
    repacked_dot[LOOM_TYPE_IQ4_NL] = repacked_dot_x4[LOOM_TYPE_IQ4_NL] = loom_iq4_nl_vec_dot_repacked;
    repacked_dot[LOOM_TYPE_Q2_K] = loom_q2_k_vec_dot_repacked;
    repacked_dot_x4[LOOM_TYPE_Q2_K] = loom_q2_k_vec_dot_repacked_x4;
}

/* AVX2 kernels over the scalar ones; every SIMD kernel returns bit-identical results to its scalar
 * counterpart (tests/test_kernels.c checks this). */
static void install_avx2(void)
{
    traits[LOOM_TYPE_F32].vec_dot = loom_f32_vec_dot_avx2;
    traits[LOOM_TYPE_F16].from_float = loom_f16_from_float_avx2;
    traits[LOOM_TYPE_F16].vec_dot = loom_f16_vec_dot_avx2;
    traits[LOOM_TYPE_BF16].vec_dot = loom_bf16_vec_dot_avx2;
    traits[LOOM_TYPE_Q8_0].from_float = loom_q8_0_from_float_avx2;
    traits[LOOM_TYPE_Q8_0].vec_dot = loom_q8_0_vec_dot_avx2;
    traits[LOOM_TYPE_Q8_K].from_float = loom_q8_k_from_float_avx2;
    traits[LOOM_TYPE_Q4_K].vec_dot = loom_q4_k_vec_dot_avx2;
    traits[LOOM_TYPE_Q5_K].vec_dot = loom_q5_k_vec_dot_avx2;
    traits[LOOM_TYPE_Q6_K].vec_dot = loom_q6_k_vec_dot_avx2;
    traits[LOOM_TYPE_Q4_0].vec_dot = loom_q4_0_vec_dot_avx2;
    traits[LOOM_TYPE_Q4_1].vec_dot = loom_q4_1_vec_dot_avx2;
    traits[LOOM_TYPE_Q5_0].vec_dot = loom_q5_0_vec_dot_avx2;
    traits[LOOM_TYPE_Q5_1].vec_dot = loom_q5_1_vec_dot_avx2;
    traits[LOOM_TYPE_Q8_1].from_float = loom_q8_1_from_float_avx2;
    traits[LOOM_TYPE_Q2_K].vec_dot = loom_q2_k_vec_dot_avx2;
    traits[LOOM_TYPE_Q3_K].vec_dot = loom_q3_k_vec_dot_avx2;
    traits[LOOM_TYPE_IQ4_NL].vec_dot = loom_iq4_nl_vec_dot_avx2;
    traits[LOOM_TYPE_IQ4_XS].vec_dot = loom_iq4_xs_vec_dot_avx2;
    gemm_dot[LOOM_TYPE_IQ4_NL] = loom_iq4_nl_dot_gemm_avx2;
    panel_iq4_xs_dot = loom_iq4_xs_dot_panel_avx2;
    repacked_dot[LOOM_TYPE_Q4_0] = repacked_dot_x4[LOOM_TYPE_Q4_0] = loom_q4_0_vec_dot_repacked_avx2;
    repacked_dot[LOOM_TYPE_IQ4_NL] = repacked_dot_x4[LOOM_TYPE_IQ4_NL] = loom_iq4_nl_vec_dot_repacked_avx2;
    repacked_dot[LOOM_TYPE_Q2_K] = loom_q2_k_vec_dot_repacked_avx2;
    repacked_dot_x4[LOOM_TYPE_Q2_K] = loom_q2_k_vec_dot_repacked_x4_avx2;
    repacked_q4_k_dot = loom_q4_k_vec_dot_repacked_avx2;
    repacked_q4_k_dot_x4 = loom_q4_k_vec_dot_repacked_x4_avx2;
    gemm_dot[LOOM_TYPE_F32] = loom_f32_dot_gemm_avx2;
    gemm_dot[LOOM_TYPE_F16] = loom_f16_dot_gemm_avx2;
    gemm_dot[LOOM_TYPE_BF16] = loom_bf16_dot_gemm_avx2;
    add_dot4(loom_q4_k_vec_dot_repacked_x4_avx2, loom_q4_k_dot4_repacked_x4_avx2);
    add_dot4(loom_q4_k_vec_dot_repacked_avx2, loom_q4_k_dot4_repacked_avx2);
    add_dot4(loom_q6_k_vec_dot_avx2, loom_q6_k_dot4_avx2);
    add_dot4(loom_f32_dot_gemm_avx2, loom_f32_dot4_gemm_avx2);
    add_dot4(loom_f16_dot_gemm_avx2, loom_f16_dot4_gemm_avx2);
    add_dot4(loom_q4_0_vec_dot_repacked_avx2, loom_q4_0_dot4_repacked_avx2);
    add_dot4(loom_iq4_nl_vec_dot_repacked_avx2, loom_iq4_nl_dot4_repacked_avx2);
    add_dot4(loom_iq4_xs_dot_panel_avx2, loom_iq4_xs_dot4_panel_avx2);
    q4_k_x16 = (struct loom_x16_kernels){loom_q4_k_x16_dot_avx2, loom_q4_k_x16_dot4_avx2, loom_q4_k_x16_dot8_avx2};
}

/* AVX-512 adds only what beats the AVX2 kernels on Zen4 (which runs 512-bit operations as two 256-bit
 * halves): the native BF16 pair dot, the VNNI Q8_0 dot, the Q6_K dot (VPDPWSSD), the 4- and 8-row
 * Q4_K/Q6_K dots of the one-row orders (CANONICAL prefill) and the Q4_K x16 group kernels (VPDPBUSD outer
 * products over 16 interleaved rows, for weights repacked at load). The one-row Q4_K and F16/F32 kernels
 * measured no faster at 512 bits. */
static void install_avx512(void)
{
    traits[LOOM_TYPE_BF16].vec_dot = loom_bf16_vec_dot_avx512;
    traits[LOOM_TYPE_Q8_0].vec_dot = loom_q8_0_vec_dot_avx512;
    gemm_dot[LOOM_TYPE_BF16] = loom_bf16_dot_gemm_avx512;
    add_dot4(loom_bf16_dot_gemm_avx512, loom_bf16_dot4_gemm_avx512);
    add_dot48(loom_q4_k_vec_dot_repacked_avx2, loom_q4_k_dot4_repacked_avx512, loom_q4_k_dot8_repacked_avx512);
    traits[LOOM_TYPE_Q6_K].vec_dot = loom_q6_k_vec_dot_avx512;
    add_dot48(loom_q6_k_vec_dot_avx512, loom_q6_k_dot4_avx512, loom_q6_k_dot8_avx512);
    q4_k_x16 = (struct loom_x16_kernels){loom_q4_k_x16_dot_avx512, loom_q4_k_x16_dot4_avx512,
                                         loom_q4_k_x16_dot8_avx512};
}

void loom_types_install(enum loom_kernel_mode mode)
{
    install_scalar();
    if (mode == LOOM_KERNELS_AVX2 || mode == LOOM_KERNELS_AVX512)
        install_avx2();
    if (mode == LOOM_KERNELS_AVX512)
        install_avx512();
}

loom_vec_dot_fn loom_kernels_matmul_dot(uint32_t type, int64_t n_out, int64_t n_in, int64_t n_tok, int64_t t)
{
    const struct loom_type_traits *t_traits = loom_type_traits(type);
    if (!t_traits)
        return 0;
    if (type == LOOM_TYPE_Q4_K && n_out % 8 == 0 && loom_kernels_q4_k_repacked())
        return t < n_tok - n_tok % 4 ? repacked_q4_k_dot_x4 : repacked_q4_k_dot;
    if (repacked_dot[type] && n_out % 8 == 0 && loom_kernels_q4_k_repacked() &&
        (type != LOOM_TYPE_Q2_K || loom_kernels_cpu_avx512()))
        return t < n_tok - n_tok % 4 ? repacked_dot_x4[type] : repacked_dot[type];
    if (type == LOOM_TYPE_IQ4_XS && n_out % 8 == 0 && n_tok >= 8)
        return panel_iq4_xs_dot;
    /* tinyBLAS's quantized (Q0) kernels take any row count; its float ones need n_out % 4 == 0 */
    if (n_tok >= 2 && (n_out % 4 == 0 || type == LOOM_TYPE_IQ4_NL) && gemm_dot[type] && n_in % gemm_step[type] == 0)
        return gemm_dot[type];
    return t_traits->vec_dot;
}

const struct loom_x16_kernels *loom_kernels_matmul_x16(uint32_t type, loom_vec_dot_fn dot)
{
    if (type == LOOM_TYPE_Q4_K && q4_k_x16.dot && dot == repacked_q4_k_dot)
        return &q4_k_x16;
    return 0;
}

int loom_kernels_x16_available(uint32_t type)
{
    loom_kernels_ensure_init();
    return type == LOOM_TYPE_Q4_K && q4_k_x16.dot != 0;
}

loom_vec_dot4_fn loom_kernels_matmul_dot4(loom_vec_dot_fn dot)
{
    for (int i = 0; i < n_dot4; i++)
        if (dot4_table[i].dot == dot)
            return dot4_table[i].dot4;
    return 0;
}

loom_vec_dot8_fn loom_kernels_matmul_dot8(loom_vec_dot_fn dot)
{
    for (int i = 0; i < n_dot4; i++)
        if (dot4_table[i].dot == dot)
            return dot4_table[i].dot8;
    return 0;
}

const struct loom_type_traits *loom_type_traits(uint32_t type)
{
    loom_kernels_ensure_init();
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
