/* sets.c — the three kernel sets (kernels.h) as const tables, their copies in the haswell float-order profile,
 * and the choice among them: the widest the CPU runs at the first use, or the one loom_kernels_select names, in
 * the profile loom_orders_select names (else the CPU's: haswell without AVX-512F). Every SIMD kernel returns
 * bit-identical results to its scalar counterpart (tests/test_kernels.c, test_ops.c, test_q4_k_x16.c and
 * test_q6_k_x16.c check this). */
#include <pthread.h>

#include "kernels/kernels.h"
#include "kernels/orders_haswell.h"
#include "kernels/protos.h"
#include "util/cpu.h"
#include "util/error.h"

#define DOT(row) {row, 0, 0}
#define DOT4(row, rows4) {row, rows4, 0}

/* The grid IQ types (iq2.c, iq3.c) with their scalar kernels: the vec_dot and IQ panel orders. */
#define IQ_GRID_SCALAR(T, t) [LOOM_TYPE_##T] = {.vec_dot = DOT(loom_##t##_vec_dot), .iqp = DOT(loom_##t##_iqp)}
#define IQ_GRID_TYPES_SCALAR                                                                                           \
    IQ_GRID_SCALAR(IQ2_XXS, iq2_xxs), IQ_GRID_SCALAR(IQ2_XS, iq2_xs), IQ_GRID_SCALAR(IQ2_S, iq2_s),                   \
        IQ_GRID_SCALAR(IQ3_XXS, iq3_xxs), IQ_GRID_SCALAR(IQ3_S, iq3_s)
/* ... and with their AVX2 kernels (x86/iq2_avx2.c, iq3_avx2.c) or the same built for AVX-512 (x86/iq2_avx512.c,
 * iq3_avx512.c: VPDPWSSD); isa: avx2 or avx512. */
#define IQ_GRID_SIMD(T, t, isa)                                                                                        \
    [LOOM_TYPE_##T] = {.vec_dot = DOT(loom_##t##_vec_dot_##isa),                                                       \
                       .iqp = {loom_##t##_iqp_##isa, loom_##t##_iqp_rows4_##isa, loom_##t##_iqp_rows8_##isa}}
#define IQ_GRID_TYPES_SIMD(isa)                                                                                        \
    IQ_GRID_SIMD(IQ2_XXS, iq2_xxs, isa), IQ_GRID_SIMD(IQ2_XS, iq2_xs, isa), IQ_GRID_SIMD(IQ2_S, iq2_s, isa),         \
        IQ_GRID_SIMD(IQ3_XXS, iq3_xxs, isa), IQ_GRID_SIMD(IQ3_S, iq3_s, isa)

/* IQ1_S, IQ1_M, TQ1_0, TQ2_0, MXFP4 (iq1.c, tq.c, mxfp4.c) with their scalar kernels: vec_dot, the IQ panel
 * order (IQ1) and the repacked gemv/gemm order (MXFP4, one order for both). */
#define LOW_BIT_TYPES_SCALAR                                                                                           \
    [LOOM_TYPE_IQ1_S] = {.vec_dot = DOT(loom_iq1_s_vec_dot), .iqp = DOT(loom_iq1_s_iqp)},                            \
    [LOOM_TYPE_IQ1_M] = {.vec_dot = DOT(loom_iq1_m_vec_dot), .iqp = DOT(loom_iq1_m_iqp)},                            \
    [LOOM_TYPE_TQ1_0] = {.vec_dot = DOT(loom_tq1_0_vec_dot)},                                                          \
    [LOOM_TYPE_TQ2_0] = {.vec_dot = DOT(loom_tq2_0_vec_dot)},                                                          \
    [LOOM_TYPE_MXFP4] = {.vec_dot = DOT(loom_mxfp4_vec_dot), .gemv = DOT(loom_mxfp4_gemv), .gemm = DOT(loom_mxfp4_gemv)}

/* The same with the AVX2 kernels (x86/iq1_avx2.c), which the AVX-512 set keeps too (TQ in TQ_SIMD, MXFP4 in
 * MXFP4_AVX2). */
#define LOW_BIT_TYPES_AVX2                                                                                             \
    [LOOM_TYPE_IQ1_S] = {.vec_dot = DOT(loom_iq1_s_vec_dot_avx2),                                                     \
                         .iqp = DOT4(loom_iq1_s_iqp_avx2, loom_iq1_s_iqp_rows4_avx2)},                                \
    [LOOM_TYPE_IQ1_M] = {.vec_dot = DOT(loom_iq1_m_vec_dot_avx2),                                                     \
                         .iqp = DOT4(loom_iq1_m_iqp_avx2, loom_iq1_m_iqp_rows4_avx2)}
/* TQ1_0 and TQ2_0 (x86/tq_avx2.c, or the same built for AVX-512, tq_avx512.c: VPDPBUSD); isa: avx2 or avx512. */
#define TQ_SIMD(isa)                                                                                                   \
    [LOOM_TYPE_TQ1_0] = {.vec_dot = DOT(loom_tq1_0_vec_dot_##isa)},                                                    \
    [LOOM_TYPE_TQ2_0] = {.vec_dot = DOT(loom_tq2_0_vec_dot_##isa)}
/* MXFP4's AVX2 kernels; the AVX-512 set adds its x16 kernel. */
#define MXFP4_AVX2(x16_dot)                                                                                            \
    [LOOM_TYPE_MXFP4] = {.vec_dot = DOT(loom_mxfp4_vec_dot_avx2),                                                     \
                         .gemv = DOT4(loom_mxfp4_gemv_avx2, loom_mxfp4_gemv_rows4_avx2),                              \
                         .gemm = DOT4(loom_mxfp4_gemv_avx2, loom_mxfp4_gemv_rows4_avx2), .x16 = {x16_dot}}

/* The scalar set: the reference implementation of every kernel. */
/* A set's ops: the functions of ops.h with the set's suffix (none for the scalar reference). */
#define OPS(sfx)                                                                                                       \
    {                                                                                                                  \
        .silu = loom_ops_silu##sfx, .swiglu = loom_ops_swiglu##sfx, .conv1d_step = loom_ops_conv1d_step##sfx,         \
        .delta_rule_step = loom_ops_delta_rule_step##sfx, .conv1d_chunk = loom_ops_conv1d_chunk##sfx,                 \
        .delta_rule_chunk = loom_ops_delta_rule_chunk##sfx, .rmsnorm_rows = loom_ops_rmsnorm_rows##sfx,               \
        .l2norm_rows = loom_ops_l2norm_rows##sfx, .attn_head = loom_ops_attn_head##sfx,                               \
        .attn_heads = loom_ops_attn_heads##sfx, .attn_heads_q8 = loom_ops_attn_heads_q8##sfx,                         \
        .router_softmax = loom_ops_softmax_router,                                                                     \
    }

static const struct loom_kernel_set set_scalar = {
    .name = "scalar",
    .mode = LOOM_KERNELS_SCALAR,
    .orders = LOOM_ORDERS_AVX512,
    .types = {
        [LOOM_TYPE_F32] = {.from_float = loom_f32_from_float, .vec_dot = DOT(loom_f32_vec_dot),
                           .tinyblas = DOT(loom_f32_tinyblas)},
        [LOOM_TYPE_F16] = {.from_float = loom_f16_from_float, .vec_dot = DOT(loom_f16_vec_dot),
                           .tinyblas = DOT(loom_f16_tinyblas)},
        [LOOM_TYPE_BF16] = {.from_float = loom_bf16_from_float, .vec_dot = DOT(loom_bf16_vec_dot),
                            .tinyblas = DOT(loom_bf16_tinyblas)},
        [LOOM_TYPE_Q8_0] = {.from_float = loom_q8_0_from_float, .vec_dot = DOT(loom_q8_0_vec_dot)},
        [LOOM_TYPE_Q8_1] = {.from_float = loom_q8_1_from_float},
        [LOOM_TYPE_Q8_K] = {.from_float = loom_q8_k_from_float},
        [LOOM_TYPE_Q4_0] = {.vec_dot = DOT(loom_q4_0_vec_dot), .gemv = DOT(loom_q4_0_gemv),
                            .gemm = DOT(loom_q4_0_gemv)},
        [LOOM_TYPE_Q4_1] = {.vec_dot = DOT(loom_q4_1_vec_dot)},
        [LOOM_TYPE_Q5_0] = {.vec_dot = DOT(loom_q5_0_vec_dot)},
        [LOOM_TYPE_Q5_1] = {.vec_dot = DOT(loom_q5_1_vec_dot)},
        [LOOM_TYPE_Q2_K] = {.vec_dot = DOT(loom_q2_k_vec_dot), .gemv = DOT(loom_q2_k_gemv),
                            .gemm = DOT(loom_q2_k_gemm)},
        [LOOM_TYPE_Q3_K] = {.vec_dot = DOT(loom_q3_k_vec_dot)},
        [LOOM_TYPE_Q4_K] = {.vec_dot = DOT(loom_q4_k_vec_dot), .gemv = DOT(loom_q4_k_gemv),
                            .gemm = DOT(loom_q4_k_gemm)},
        [LOOM_TYPE_Q5_K] = {.vec_dot = DOT(loom_q5_k_vec_dot)},
        [LOOM_TYPE_Q6_K] = {.vec_dot = DOT(loom_q6_k_vec_dot)},
        [LOOM_TYPE_IQ4_NL] = {.vec_dot = DOT(loom_iq4_nl_vec_dot), .gemv = DOT(loom_iq4_nl_gemv),
                              .gemm = DOT(loom_iq4_nl_gemv), .tinyblas = DOT(loom_iq4_nl_tinyblas)},
        [LOOM_TYPE_IQ4_XS] = {.vec_dot = DOT(loom_iq4_xs_vec_dot), .iqp = DOT(loom_iq4_xs_iqp)},
        LOW_BIT_TYPES_SCALAR,
        IQ_GRID_TYPES_SCALAR,
    },
    .ops = OPS(),
};

/* The types whose AVX2 kernels the AVX-512 set keeps (it adds only what beats them on Zen4, below). */
#define AVX2_SHARED_TYPES                                                                                              \
    [LOOM_TYPE_F32] = {.from_float = loom_f32_from_float,                                                              \
                       .vec_dot = DOT(loom_f32_vec_dot_avx2),                                                          \
                       .tinyblas = DOT4(loom_f32_tinyblas_avx2, loom_f32_tinyblas_rows4_avx2)},                       \
    [LOOM_TYPE_F16] = {.from_float = loom_f16_from_float_avx2,                                                         \
                       .vec_dot = DOT(loom_f16_vec_dot_avx2),                                                          \
                       .tinyblas = DOT4(loom_f16_tinyblas_avx2, loom_f16_tinyblas_rows4_avx2)},                       \
    [LOOM_TYPE_Q8_1] = {.from_float = loom_q8_1_from_float_avx2},                                                      \
    [LOOM_TYPE_Q8_K] = {.from_float = loom_q8_k_from_float_avx2},                                                      \
    [LOOM_TYPE_Q4_0] = {.vec_dot = DOT(loom_q4_0_vec_dot_avx2),                                                        \
                        .gemv = DOT4(loom_q4_0_gemv_avx2, loom_q4_0_gemv_rows4_avx2),                                  \
                        .gemm = DOT4(loom_q4_0_gemv_avx2, loom_q4_0_gemv_rows4_avx2)},                                \
    [LOOM_TYPE_Q4_1] = {.vec_dot = DOT(loom_q4_1_vec_dot_avx2)},                                                      \
    [LOOM_TYPE_Q5_0] = {.vec_dot = DOT(loom_q5_0_vec_dot_avx2)},                                                      \
    [LOOM_TYPE_Q5_1] = {.vec_dot = DOT(loom_q5_1_vec_dot_avx2)},                                                      \
    [LOOM_TYPE_Q2_K] = {.vec_dot = DOT(loom_q2_k_vec_dot_avx2), .gemv = DOT(loom_q2_k_gemv_avx2),                     \
                        .gemm = DOT(loom_q2_k_gemm_avx2)},                                                            \
    [LOOM_TYPE_Q3_K] = {.vec_dot = DOT(loom_q3_k_vec_dot_avx2)},                                                      \
    [LOOM_TYPE_Q5_K] = {.vec_dot = DOT(loom_q5_k_vec_dot_avx2)},                                                      \
    [LOOM_TYPE_IQ4_NL] = {.vec_dot = DOT(loom_iq4_nl_vec_dot_avx2),                                                   \
                          .gemv = DOT4(loom_iq4_nl_gemv_avx2, loom_iq4_nl_gemv_rows4_avx2),                           \
                          .gemm = DOT4(loom_iq4_nl_gemv_avx2, loom_iq4_nl_gemv_rows4_avx2),                           \
                          .tinyblas = DOT(loom_iq4_nl_tinyblas_avx2)}

/* AVX2 (+FMA, F16C, BMI2): every type, the Q4_K and Q6_K x16 kernels, and the hand-written 8-lane ops
 * (x86/ops_avx2.c). */
static const struct loom_kernel_set set_avx2 = {
    .name = "avx2",
    .mode = LOOM_KERNELS_AVX2,
    .orders = LOOM_ORDERS_AVX512,
    .types = {
        AVX2_SHARED_TYPES,
        LOW_BIT_TYPES_AVX2,
        MXFP4_AVX2(0),
        TQ_SIMD(avx2),
        IQ_GRID_TYPES_SIMD(avx2),
        [LOOM_TYPE_BF16] = {.from_float = loom_bf16_from_float, .vec_dot = DOT(loom_bf16_vec_dot_avx2),
                            .tinyblas = DOT(loom_bf16_tinyblas_avx2)},
        [LOOM_TYPE_Q8_0] = {.from_float = loom_q8_0_from_float_avx2, .vec_dot = DOT(loom_q8_0_vec_dot_avx2)},
        [LOOM_TYPE_Q4_K] = {.vec_dot = DOT(loom_q4_k_vec_dot_avx2),
                            .gemv = DOT4(loom_q4_k_gemv_avx2, loom_q4_k_gemv_rows4_avx2),
                            .gemm = DOT4(loom_q4_k_gemm_avx2, loom_q4_k_gemm_rows4_avx2),
                            .x16 = {loom_q4_k_x16_gemv_avx2}},
        [LOOM_TYPE_Q6_K] = {.vec_dot = DOT4(loom_q6_k_vec_dot_avx2, loom_q6_k_vec_dot_rows4_avx2),
                            .x16 = {loom_q6_k_x16_vec_dot_avx2}},
        [LOOM_TYPE_IQ4_XS] = {.vec_dot = DOT(loom_iq4_xs_vec_dot_avx2),
                              .iqp = {loom_iq4_xs_iqp_avx2, loom_iq4_xs_iqp_rows4_avx2, loom_iq4_xs_iqp_rows8_avx2}},
    },
    .ops = OPS(_avx2),
};

/* AVX-512 adds only what beats the AVX2 kernels on Zen4 (which runs 512-bit operations as two 256-bit
 * halves): the native BF16 pair dot, the VNNI Q8_0 and TQ dots, the Q6_K, IQ4_XS and grid IQ dots
 * (VPDPWSSD), the 4- and 8-row Q4_K gemv/Q6_K vec_dot forms (CANONICAL prefill), the Q4_K, Q6_K and MXFP4 x16
 * kernels (VPDPBUSD outer products over 16 interleaved rows) and the hand-written ops. The one-row Q4_K and
 * F16/F32 kernels measured no faster at 512 bits. */
static const struct loom_kernel_set set_avx512 = {
    .name = "avx512",
    .mode = LOOM_KERNELS_AVX512,
    .orders = LOOM_ORDERS_AVX512,
    .types = {
        AVX2_SHARED_TYPES,
        LOW_BIT_TYPES_AVX2,
        MXFP4_AVX2(loom_mxfp4_x16_gemv_avx512),
        TQ_SIMD(avx512),
        IQ_GRID_TYPES_SIMD(avx512),
        [LOOM_TYPE_BF16] = {.from_float = loom_bf16_from_float, .vec_dot = DOT(loom_bf16_vec_dot_avx512),
                            .tinyblas = DOT4(loom_bf16_tinyblas_avx512, loom_bf16_tinyblas_rows4_avx512)},
        [LOOM_TYPE_Q8_0] = {.from_float = loom_q8_0_from_float_avx2, .vec_dot = DOT(loom_q8_0_vec_dot_avx512)},
        [LOOM_TYPE_Q4_K] = {.vec_dot = DOT(loom_q4_k_vec_dot_avx2),
                            .gemv = {loom_q4_k_gemv_avx2, loom_q4_k_gemv_rows4_avx512, loom_q4_k_gemv_rows8_avx512},
                            .gemm = DOT4(loom_q4_k_gemm_avx2, loom_q4_k_gemm_rows4_avx2),
                            .x16 = {loom_q4_k_x16_gemv_avx512}},
        [LOOM_TYPE_Q6_K] = {.vec_dot = {loom_q6_k_vec_dot_avx512, loom_q6_k_vec_dot_rows4_avx512,
                                        loom_q6_k_vec_dot_rows8_avx512},
                            .x16 = {loom_q6_k_x16_vec_dot_avx512}},
        [LOOM_TYPE_IQ4_XS] = {.vec_dot = DOT(loom_iq4_xs_vec_dot_avx512),
                              .iqp = {loom_iq4_xs_iqp_avx512, loom_iq4_xs_iqp_rows4_avx512,
                                      loom_iq4_xs_iqp_rows8_avx512}},
    },
    .ops = OPS(_avx512),
};

static const struct loom_kernel_set *active; /* in the avx512 profile; loom_kernels_active maps it */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* The process-wide float-order profile: loom_orders_select's, else the one of the reference build this CPU loads
 * (haswell without AVX-512F, avx512 with it), chosen at the first use. */
static enum loom_orders orders;
static pthread_once_t orders_once = PTHREAD_ONCE_INIT;

static void init_orders(void)
{
    orders = loom_cpu_features() & LOOM_CPU_AVX512F ? LOOM_ORDERS_AVX512 : LOOM_ORDERS_HASWELL;
}

/* The haswell profile (orders_haswell.h): each set with its F32/F16/BF16 dots and its float-order-dependent ops
 * replaced by the profile's kernels (scalar, or their bitwise AVX2 forms), indexed by mode - SCALAR. */
static struct loom_kernel_set haswell_sets[3];
static pthread_once_t haswell_once = PTHREAD_ONCE_INIT;

static void haswell_of(const struct loom_kernel_set *base, struct loom_kernel_set *s)
{
    *s = *base;
    s->orders = LOOM_ORDERS_HASWELL;
    s->types[LOOM_TYPE_F32].vec_dot = (struct loom_dot_kernels)DOT(loom_hsw_f32_vec_dot);
    s->types[LOOM_TYPE_F32].tinyblas = (struct loom_dot_kernels)DOT(loom_hsw_f32_tinyblas);
    s->types[LOOM_TYPE_F16].vec_dot = (struct loom_dot_kernels)DOT(loom_hsw_f16_vec_dot);
    s->types[LOOM_TYPE_F16].tinyblas = (struct loom_dot_kernels)DOT(loom_hsw_f16_tinyblas);
    s->types[LOOM_TYPE_BF16].vec_dot = (struct loom_dot_kernels)DOT(loom_hsw_bf16_vec_dot);
    s->types[LOOM_TYPE_BF16].tinyblas = (struct loom_dot_kernels)DOT(loom_hsw_bf16_tinyblas);
    s->ops.silu = loom_hsw_silu;
    s->ops.swiglu = loom_hsw_swiglu;
    s->ops.conv1d_step = loom_hsw_conv1d_step;
    s->ops.conv1d_chunk = loom_hsw_conv1d_chunk;
    s->ops.delta_rule_step = loom_hsw_delta_rule_step;
    s->ops.delta_rule_chunk = loom_hsw_delta_rule_chunk;
    s->ops.attn_head = loom_hsw_attn_head;
    s->ops.attn_heads = loom_hsw_attn_heads;
    s->ops.attn_heads_q8 = loom_hsw_attn_heads_q8;
    s->ops.router_softmax = loom_hsw_softmax_router;
}

/* ... and in a SIMD set, the AVX2 forms of its hot dots and ops (x86/orders_haswell_avx2.c). */
#define HSW_TINYBLAS(t)                                                                                                \
    {loom_hsw_##t##_tinyblas_avx2, loom_hsw_##t##_tinyblas_rows4_avx2, loom_hsw_##t##_tinyblas_rows8_avx2}
static void haswell_simd_of(const struct loom_kernel_set *base, struct loom_kernel_set *s)
{
    haswell_of(base, s);
    s->types[LOOM_TYPE_F32].vec_dot = (struct loom_dot_kernels)DOT(loom_hsw_f32_vec_dot_avx2);
    s->types[LOOM_TYPE_F32].tinyblas = (struct loom_dot_kernels)HSW_TINYBLAS(f32);
    s->types[LOOM_TYPE_F16].vec_dot = (struct loom_dot_kernels)DOT(loom_hsw_f16_vec_dot_avx2);
    s->types[LOOM_TYPE_F16].tinyblas = (struct loom_dot_kernels)HSW_TINYBLAS(f16);
    s->types[LOOM_TYPE_BF16].vec_dot = (struct loom_dot_kernels)DOT(loom_hsw_bf16_vec_dot_avx2);
    s->types[LOOM_TYPE_BF16].tinyblas = (struct loom_dot_kernels)HSW_TINYBLAS(bf16);
    s->ops.silu = loom_hsw_silu_avx2;
    s->ops.swiglu = loom_hsw_swiglu_avx2;
    s->ops.delta_rule_step = loom_hsw_delta_rule_step_avx2;
    s->ops.delta_rule_chunk = loom_hsw_delta_rule_chunk_avx2;
    s->ops.conv1d_step = loom_hsw_conv1d_step_avx2;
    s->ops.conv1d_chunk = loom_hsw_conv1d_chunk_avx2;
    s->ops.attn_head = loom_hsw_attn_head_avx2;
    s->ops.attn_heads = loom_hsw_attn_heads_avx2;
    s->ops.attn_heads_q8 = loom_hsw_attn_heads_q8_avx2;
}

static void init_haswell(void)
{
    haswell_of(&set_scalar, &haswell_sets[0]);
    haswell_simd_of(&set_avx2, &haswell_sets[1]);
    haswell_simd_of(&set_avx512, &haswell_sets[2]);
}

/* set (an avx512-profile table, or NULL) in the active profile. */
static const struct loom_kernel_set *in_orders(const struct loom_kernel_set *set)
{
    if (!set || loom_orders_active() == LOOM_ORDERS_AVX512)
        return set;
    pthread_once(&haswell_once, init_haswell);
    return &haswell_sets[set->mode - LOOM_KERNELS_SCALAR];
}

/* The AVX2 set needs AVX2, FMA, F16C and BMI2; the AVX-512 set adds F, BW, VL, DQ, VNNI and BF16. */
static int cpu_has(unsigned need) { return (loom_cpu_features() & need) == need; }

static const struct loom_kernel_set *base_for(enum loom_kernel_mode mode)
{
    switch (mode) {
    case LOOM_KERNELS_AUTO:
        return cpu_has(LOOM_CPU_AVX512_SET) ? &set_avx512 : cpu_has(LOOM_CPU_AVX2_SET) ? &set_avx2 : &set_scalar;
    case LOOM_KERNELS_SCALAR:
        return &set_scalar;
    case LOOM_KERNELS_AVX2:
        return cpu_has(LOOM_CPU_AVX2_SET) ? &set_avx2 : 0;
    case LOOM_KERNELS_AVX512:
        return cpu_has(LOOM_CPU_AVX512_SET) ? &set_avx512 : 0;
    }
    return 0;
}

const struct loom_kernel_set *loom_kernels_for(enum loom_kernel_mode mode) { return in_orders(base_for(mode)); }

static void init_auto(void) { active = base_for(LOOM_KERNELS_AUTO); }

const struct loom_kernel_set *loom_kernels_active(void)
{
    pthread_once(&init_once, init_auto);
    return in_orders(active);
}

int loom_kernels_select(enum loom_kernel_mode mode, loom_error *err)
{
    pthread_once(&init_once, init_auto);
    if (mode != LOOM_KERNELS_AUTO && mode != LOOM_KERNELS_SCALAR && mode != LOOM_KERNELS_AVX2 &&
        mode != LOOM_KERNELS_AVX512)
        return loom_errorf(err, LOOM_E_ARG, "kernel mode: expected AUTO, SCALAR, AVX2 or AVX512, found %d",
                           (int)mode);
    const struct loom_kernel_set *set = base_for(mode);
    if (!set)
        return loom_errorf(err, LOOM_E_ARG, "kernel mode %s: this CPU lacks the required instructions",
                           mode == LOOM_KERNELS_AVX2 ? "avx2" : "avx512");
    active = set;
    return LOOM_OK;
}

const char *loom_kernels_name(void) { return loom_kernels_active()->name; }

int loom_orders_select(enum loom_orders o, loom_error *err)
{
    if (o != LOOM_ORDERS_AVX512 && o != LOOM_ORDERS_HASWELL)
        return loom_errorf(err, LOOM_E_ARG, "float-order profile: expected AVX512 or HASWELL, found %d", (int)o);
    pthread_once(&orders_once, init_orders);
    orders = o;
    return LOOM_OK;
}

enum loom_orders loom_orders_active(void)
{
    pthread_once(&orders_once, init_orders);
    return orders;
}

const char *loom_orders_label(enum loom_orders o)
{
    return o == LOOM_ORDERS_AVX512 ? "avx512" : o == LOOM_ORDERS_HASWELL ? "haswell" : NULL;
}

const char *loom_orders_name(void) { return loom_orders_label(loom_orders_active()); }
