/* test_mxfp4_x16.c — the MXFP4 x16 layout (16 rows interleaved, mxfp4.c): pack/unpack round trip bytewise, the
 * AVX-512 x16 dot (1 to 8 activation rows) bit for bit against the one-row repacked dot loom_mxfp4_gemv on random
 * blocks with every E8M0 edge (0, 1, 2, 127, 254, 255) and on extreme quants, and loom_matmul /
 * loom_matmul_rowwise / loom_weight_get_row of an X16 weight against the same weight in the GGUF layout in
 * every kernel set. Expected values: loom's scalar gemv (itself checked against the reference in
 * tests/parity/test_ref_quants). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/protos.h"
#include "test.h"
#include "test_rng.h"
#include "util/fp16.h"
#include "util/pool.h"

#define N_OUT 40 /* two groups of 16 and a tail of 8 */
#define N_IN 864 /* 27 blocks: an odd count */
#define NB (N_IN / 32)
#define MAX_TOK 19

/* Random quants; E8M0 scales near 2^-7, with the edges on some blocks (which make Inf/NaN only where
 * check_matmul does not look: see main). */
static void make_rows(struct loom_block_mxfp4 *b, int edges)
{
    static const uint8_t edge_e[] = {0, 1, 2, 127, 254, 255};
    for (int r = 0; r < N_OUT; r++)
        for (int i = 0; i < NB; i++) {
            struct loom_block_mxfp4 *x = &b[r * NB + i];
            for (int k = 0; k < 16; k++)
                x->qs[k] = (uint8_t)rnd_u32();
            x->e = (uint8_t)(118 + rnd_u32() % 8);
            if (edges && (r + 3 * i) % 7 == 0)
                x->e = edge_e[(r + i) % 6];
        }
}

static void make_acts(struct loom_block_q8_0 *a, float *x, int n_tok)
{
    for (int t = 0; t < n_tok; t++)
        for (int k = 0; k < N_IN; k++)
            x[t * N_IN + k] = rnd_f() * (t % 3 == 2 ? 100.0f : 1.0f);
    for (int t = 0; t < n_tok; t++)
        loom_kernels_active()->types[LOOM_TYPE_Q8_0].from_float(x + t * N_IN, a + t * NB, N_IN);
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static int has_avx512(void) { return loom_kernels_select(LOOM_KERNELS_AVX512, &(loom_error){0}) == LOOM_OK; }

static void check_pack(const struct loom_block_mxfp4 *rows, const uint8_t *packed)
{
    int ok = 1;
    for (int g = 0; g < N_OUT / 16; g++)
        for (int r = 0; r < 16; r++) {
            struct loom_block_mxfp4 back[NB];
            loom_mxfp4_x16_unpack_row(packed + g * 16 * sizeof back, r, back, N_IN);
            ok &= memcmp(back, rows + (16 * g + r) * NB, sizeof back) == 0;
        }
    CHECK(ok, "MXFP4 x16 unpack(pack(rows)) equals the rows bytewise");
}

/* The AVX-512 x16 dot of one group (nb blocks) for n_act = 1..8 of the 8 activation rows at a (nb blocks
 * apart), starting at row 8 - n_act, against want[t][r] bitwise (NaN lanes only need to be NaN). */
static int dots_equal(const uint8_t *group, const struct loom_block_q8_0 *a, int nb, float want[8][16])
{
    const size_t as = (size_t)nb * sizeof(struct loom_block_q8_0);
    float got[8][16];
    int ok = 1;
    for (int n_act = 1; n_act <= 8; n_act++) {
        int t0 = 8 - n_act;
        memset(got, 0, sizeof got);
        loom_mxfp4_x16_gemv_avx512(nb * 32, n_act, got[t0], 16, group, a + t0 * nb, as);
        for (int t = t0; t < 8; t++)
            for (int r = 0; r < 16; r++)
                ok &= isnan(want[t][r]) ? isnan(got[t][r]) : same_bits(&got[t][r], &want[t][r], 1);
    }
    return ok;
}

static void check_dots(const struct loom_block_mxfp4 *rows, const uint8_t *packed, const struct loom_block_q8_0 *a)
{
    int ok = 1;
    for (int g = 0; g < N_OUT / 16; g++) {
        float want[8][16];
        for (int t = 0; t < 8; t++)
            for (int r = 0; r < 16; r++)
                loom_mxfp4_gemv(N_IN, &want[t][r], rows + (16 * g + r) * NB, a + t * NB);
        ok &= dots_equal(packed + (size_t)g * 16 * NB * sizeof *rows, a, NB, want);
    }
    CHECK(ok, "AVX-512 MXFP4 x16 dots (1 to 8 rows) equal loom_mxfp4_gemv per row bitwise (E8M0 edges included)");
}

/* The integer limits: every code 7 (+12, the offset value 24) or 15 (-12, offset 0) on some rows, against
 * activation rows of all -128, all 127 and alternating -128/127. */
static void check_extremes(void)
{
    struct loom_block_mxfp4 rows[16];
    uint8_t packed[16 * sizeof rows[0]];
    struct loom_block_q8_0 a[8];
    for (int r = 0; r < 16; r++) {
        memset(rows[r].qs, r % 3 == 0 ? 0x77 : r % 3 == 1 ? 0xff : 0x7f, sizeof rows[r].qs);
        rows[r].e = (uint8_t)(120 + r % 4);
    }
    for (int t = 0; t < 8; t++) {
        for (int k = 0; k < 32; k++)
            a[t].qs[k] = (int8_t)(t % 3 == 0 ? -128 : t % 3 == 1 ? 127 : (k % 2 ? 127 : -128));
        a[t].d = loom_f32_to_f16(0.25f + (float)t);
    }
    loom_mxfp4_x16_pack(rows, sizeof rows[0], packed, 32);
    float want[8][16];
    for (int t = 0; t < 8; t++)
        for (int r = 0; r < 16; r++)
            loom_mxfp4_gemv(32, &want[t][r], &rows[r], &a[t]);
    CHECK(dots_equal(packed, a, 1, want), "AVX-512 MXFP4 x16 dots equal loom_mxfp4_gemv on extreme quants");
}

/* loom_matmul_rowwise and loom_matmul of the X16 weight equal those of the GGUF-layout weight for n_tok
 * 1..MAX_TOK, and get_row too, in the active kernel set and on each pool. */
static void check_matmul(const struct loom_weight *std, const struct loom_weight *x16, const float *x,
                         struct loom_pool **pools)
{
    static float y0[MAX_TOK * N_OUT], y1[MAX_TOK * N_OUT];
    static unsigned char scratch[MAX_TOK * NB * sizeof(struct loom_block_q8_0)];
    int n_bad = 0;
    for (int p = 0; p < 2; p++)
        for (int rowwise = 0; rowwise < 2; rowwise++)
            for (int n_tok = 1; n_tok <= MAX_TOK; n_tok++) {
                memset(y0, 0xfe, sizeof y0);
                memset(y1, 0xff, sizeof y1);
                (rowwise ? loom_matmul_rowwise : loom_matmul)(loom_kernels_active(), pools[p], std, x, n_tok, y0,
                                                              scratch);
                (rowwise ? loom_matmul_rowwise : loom_matmul)(loom_kernels_active(), pools[p], x16, x, n_tok, y1,
                                                              scratch);
                if (!same_bits(y0, y1, (size_t)(n_tok * N_OUT)) && n_bad++ == 0)
                    CHECK(0, "%s x16 %s n_tok %d threads %d differs from the GGUF layout", loom_kernels_name(),
                          rowwise ? "rowwise" : "matmul", n_tok, loom_pool_n_threads(pools[p]));
            }
    CHECK(n_bad == 0, "%s MXFP4 x16 matmul and rowwise equal the GGUF layout (n_tok 1..%d, 1 and 2 threads): %d differ",
          loom_kernels_name(), MAX_TOK, n_bad);
    int ok = 1;
    float r0[N_IN], r1[N_IN];
    for (int o = 0; o < N_OUT; o++) {
        loom_weight_get_row(std, o, r0);
        loom_weight_get_row(x16, o, r1);
        ok &= same_bits(r0, r1, N_IN);
    }
    CHECK(ok, "%s MXFP4 x16 get_row equals the GGUF layout", loom_kernels_name());
}

int main(void)
{
    size_t rb = NB * sizeof(struct loom_block_mxfp4);
    struct loom_block_mxfp4 *rows = malloc(rb * N_OUT);
    uint8_t *packed = aligned_alloc(64, (rb * 16 * (N_OUT / 16) + 63) / 64 * 64);
    struct loom_block_q8_0 *a = malloc(sizeof *a * NB * MAX_TOK);
    float *x = malloc(sizeof *x * N_IN * MAX_TOK);
    struct loom_pool *pools[2] = {NULL, loom_pool_new(2)};
    CHECK(rows && packed && a && x && pools[1], "allocations");
    make_rows(rows, 1);
    make_acts(a, x, MAX_TOK);
    for (int g = 0; g < N_OUT / 16; g++)
        loom_mxfp4_x16_pack(rows + 16 * g * NB, rb, packed + g * 16 * rb, N_IN);
    check_pack(rows, packed);
    if (has_avx512()) {
        check_dots(rows, packed, a);
        check_extremes();
    }
    /* the matmul checks use finite scales only (NaN payloads of Inf - Inf need not match) */
    make_rows(rows, 0);
    for (int g = 0; g < N_OUT / 16; g++)
        loom_mxfp4_x16_pack(rows + 16 * g * NB, rb, packed + g * 16 * rb, N_IN);
    struct loom_weight std = {LOOM_TYPE_MXFP4, N_IN, N_OUT, rb, rows, LOOM_WEIGHT_ROWS, 0, 0};
    struct loom_weight x16 = {LOOM_TYPE_MXFP4, N_IN, N_OUT, rb, packed, LOOM_WEIGHT_X16, rows, 0};
    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        if (loom_kernels_select(modes[m], &(loom_error){0}) == LOOM_OK)
            check_matmul(&std, &x16, x, pools);
    loom_kernels_select(LOOM_KERNELS_AUTO, &(loom_error){0});
    std.ref_plain_buffer = x16.ref_plain_buffer = 1; /* the vec_dot order, which X16 weights reach by unpacking */
    check_matmul(&std, &x16, x, pools);
    CHECK(loom_weight_x16_bytes(loom_kernels_for(LOOM_KERNELS_SCALAR), &std) == 0,
          "the scalar set does not repack MXFP4");
    loom_pool_free(pools[1]);
    free(rows);
    free(packed);
    free(a);
    free(x);
    return test_finish();
}
