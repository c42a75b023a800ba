/* test_q6_k_x16.c — the Q6_K x16 layout (16 rows interleaved word by word): pack/unpack round trip bytewise,
 * the scalar x16 dot bit for bit against loom_q6_k_vec_dot per row, the AVX2 and AVX-512 x16 dots against
 * the scalar one on random, edge-case and extreme blocks, and loom_matmul / loom_matmul_rowwise /
 * loom_weight_get_row of an X16 weight against the same weight in the GGUF layout, in every kernel set; a repack
 * shared among a pool's threads gives the bytes of one made on the caller. */
#include <stdlib.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels.h"
#include "kernels/protos.h"
#include "kernels/matmul.h"
#include "util/pool.h"
#include "test.h"
#include "test_rng.h"
#include "util/fp16.h"

#define N_OUT 40 /* two groups of 16 and a tail of 8 */
#define N_IN 768
#define NB (N_IN / LOOM_QK_K)
#define MAX_TOK 19

/* Random quants and int8 scales; F16 super-scales by row: moderate (positive, negative), and on a few
 * blocks the edges: scales all -128 or all 127, all quants 63, an all-zero block, subnormal and Inf d. */
static void make_rows(struct loom_block_q6_k *b)
{
    for (int r = 0; r < N_OUT; r++)
        for (int i = 0; i < NB; i++) {
            struct loom_block_q6_k *x = &b[r * NB + i];
            uint8_t *bytes = (uint8_t *)x;
            for (size_t k = 0; k < sizeof *x; k++)
                bytes[k] = (uint8_t)rnd_u32();
            x->d = loom_f32_to_f16(rnd_f() * 0.02f * (float)(1 + r % 4));
            switch ((r + i) % 9) {
            case 1: /* extreme scales */
                memset(x->scales, r % 2 ? 0x80 : 0x7f, sizeof x->scales);
                break;
            case 2: /* subnormal F16 super-scale */
                x->d = r % 2 ? 0x8001 : 0x0003;
                break;
            case 3:
                if (r == 5 && i == 1) /* Inf super-scale (the row's result is then Inf or NaN) */
                    x->d = 0x7c00;
                break;
            case 4: /* an all-zero block */
                memset(x, 0, sizeof *x);
                break;
            case 5: /* every quant 63 */
                memset(x->ql, 0xff, sizeof x->ql);
                memset(x->qh, 0xff, sizeof x->qh);
                break;
            default:
                break;
            }
        }
}

/* n_tok activation rows quantized to Q8_K (so their bsums are consistent), larger on some rows. */
static void make_acts(struct loom_block_q8_k *a, float *x, int n_tok)
{
    for (int t = 0; t < n_tok; t++)
        for (int k = 0; k < N_IN; k++)
            x[t * N_IN + k] = rnd_f() * (t % 3 == 2 ? 100.0f : 1.0f);
    for (int t = 0; t < n_tok; t++)
        loom_kernels_active()->types[LOOM_TYPE_Q8_K].from_float(x + t * N_IN, a + t * NB, N_IN);
}

static void check_pack(const struct loom_block_q6_k *rows, const struct loom_block_q6_k_x16 *packed)
{
    int ok = 1;
    for (int g = 0; g < N_OUT / 16; g++)
        for (int r = 0; r < 16; r++) {
            struct loom_block_q6_k back[NB];
            loom_q6_k_x16_unpack_row(packed + g * NB, r, back, N_IN);
            ok &= memcmp(back, rows + (16 * g + r) * NB, sizeof back) == 0;
        }
    CHECK(ok, "x16 unpack(pack(rows)) equals the rows bytewise");
}

/* A SIMD set's x16 dot (1 to 8 activation rows), checked when the CPU has the set. */
struct x16_set {
    enum loom_kernel_mode mode;
    const char *name;
    loom_x16_dot_fn dot;
};

static const struct x16_set simd_sets[] = {
    {LOOM_KERNELS_AVX2, "AVX2", loom_q6_k_x16_vec_dot_avx2},
    {LOOM_KERNELS_AVX512, "AVX-512", loom_q6_k_x16_vec_dot_avx512},
};
#define N_SETS ((int)(sizeof simd_sets / sizeof simd_sets[0]))

/* Whether got[n] and want[n] are bitwise equal; if not, prints the first difference as what[i / cols][i % cols]. */
static int report_diff(const char *what, const float *got, const float *want, size_t n, size_t cols)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0) {
            uint32_t gb, wb;
            memcpy(&gb, &got[i], 4);
            memcpy(&wb, &want[i], 4);
            fprintf(stderr, "  %s: [%zu][%zu]: got %g (0x%08x) want %g (0x%08x)\n", what, i / cols, i % cols,
                    (double)got[i], (unsigned)gb, (double)want[i], (unsigned)wb);
            return 0;
        }
    return 1;
}

/* Whether set k's dot of group block column packed (n_in = nb * 256) with n_act = 1..8 of the 8 activation
 * rows at a (nb blocks apart), starting at row 8 - n_act, equals want[t][r] bitwise; the first difference
 * of each is printed. */
static int simd_dots_equal(const struct x16_set *k, const struct loom_block_q6_k_x16 *packed,
                           const struct loom_block_q8_k *a, int nb, float want[8][16])
{
    const size_t as = (size_t)nb * sizeof(struct loom_block_q8_k);
    float got[8][16];
    int ok = 1;
    for (int n_act = 1; n_act <= 8; n_act++) {
        int t0 = 8 - n_act;
        memset(got, 0, sizeof got);
        k->dot(nb * LOOM_QK_K, n_act, got[t0], 16, packed, a + t0 * nb, as);
        char what[48];
        snprintf(what, sizeof what, "n_act %d y[token][row]", n_act);
        ok &= report_diff(what, got[t0], want[t0], (size_t)n_act * 16, 16);
    }
    return ok;
}

static int cpu_has(enum loom_kernel_mode mode) { return loom_kernels_select(mode, &(loom_error){0}) == LOOM_OK; }

/* The x16 dots: scalar against loom_q6_k_vec_dot per row, and each SIMD set's dot for 1 to 8 rows
 * against the scalar x16 dot (the oracle). */
static void check_dots(const struct loom_block_q6_k *rows, const struct loom_block_q6_k_x16 *packed,
                       const struct loom_block_q8_k *a)
{
    int scalar_ok = 1, simd_ok[N_SETS], has[N_SETS];
    for (int k = 0; k < N_SETS; k++) {
        has[k] = cpu_has(simd_sets[k].mode);
        simd_ok[k] = 1;
    }
    for (int g = 0; g < N_OUT / 16; g++) {
        float want[8][16], oracle[8][16];
        for (int t = 0; t < 8; t++) {
            for (int r = 0; r < 16; r++)
                loom_q6_k_vec_dot(N_IN, &want[t][r], rows + (16 * g + r) * NB, a + t * NB);
            loom_q6_k_x16_vec_dot(N_IN, oracle[t], packed + g * NB, a + t * NB);
        }
        scalar_ok &= report_diff("scalar x16 y[token][row]", oracle[0], want[0], 8 * 16, 16);
        for (int k = 0; k < N_SETS; k++)
            if (has[k] && !simd_dots_equal(&simd_sets[k], packed + g * NB, a, NB, oracle)) {
                fprintf(stderr, "  (%s, group %d: rows %d..%d)\n", simd_sets[k].name, g, 16 * g, 16 * g + 15);
                simd_ok[k] = 0;
            }
    }
    CHECK(scalar_ok, "scalar x16 dot equals loom_q6_k_vec_dot per row bitwise");
    for (int k = 0; k < N_SETS; k++)
        if (has[k])
            CHECK(simd_ok[k], "%s x16 dots (1 to 8 rows) equal the scalar x16 dot bitwise", simd_sets[k].name);
}

/* One block column of 16 rows at the int16 limits: every quant 63 (0 on some rows, 47 and 32 on
 * others), scales -128, 127 or alternating, against 8 activation rows of all -128, all 127, alternating
 * -128/127 and 127/0 quants (negated in the second half on rows 4..7; bsums consistent). */
static void make_extremes(struct loom_block_q6_k rows[16], struct loom_block_q8_k a[8])
{
    for (int r = 0; r < 16; r++) {
        int q = r % 5 == 4 ? 0x00 : 0xff;
        memset(rows[r].ql, r % 7 == 6 ? 0x0f : q, sizeof rows[r].ql);
        memset(rows[r].qh, r % 7 == 6 ? 0xaa : q, sizeof rows[r].qh);
        for (int j = 0; j < 16; j++)
            rows[r].scales[j] = (int8_t)(r % 3 == 0 ? -128 : r % 3 == 1 ? 127 : j % 2 ? 127 : -128);
        rows[r].d = loom_f32_to_f16((r % 2 ? -0.001f : 0.001f) * (float)(r + 1));
    }
    for (int t = 0; t < 8; t++) {
        for (int k = 0; k < LOOM_QK_K; k++) {
            int v = t % 4 == 0 ? -128 : t % 4 == 1 ? 127 : t % 4 == 2 ? (k % 2 ? 127 : -128) : (k % 2 ? 0 : 127);
            a[t].qs[k] = (int8_t)(t >= 4 && k >= 128 ? -v - 1 : v);
        }
        for (int j = 0; j < LOOM_QK_K / 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++)
                sum += a[t].qs[16 * j + k];
            a[t].bsums[j] = (int16_t)sum;
        }
        a[t].d = 0.25f + (float)t;
    }
}

static void check_extremes(void)
{
    struct loom_block_q6_k rows[16];
    struct loom_block_q6_k_x16 packed;
    struct loom_block_q8_k a[8];
    make_extremes(rows, a);
    loom_q6_k_x16_pack(rows, sizeof rows[0], &packed, LOOM_QK_K);
    float want[8][16], oracle[8][16];
    for (int t = 0; t < 8; t++) {
        for (int r = 0; r < 16; r++)
            loom_q6_k_vec_dot(LOOM_QK_K, &want[t][r], &rows[r], &a[t]);
        loom_q6_k_x16_vec_dot(LOOM_QK_K, oracle[t], &packed, &a[t]);
    }
    CHECK(report_diff("scalar x16 extremes y[token][row]", oracle[0], want[0], 8 * 16, 16),
          "scalar x16 dot equals loom_q6_k_vec_dot on extreme quants");
    for (int k = 0; k < N_SETS; k++)
        if (cpu_has(simd_sets[k].mode))
            CHECK(simd_dots_equal(&simd_sets[k], &packed, a, 1, oracle),
                  "%s x16 dots equal the scalar x16 dot on extreme quants (int16 sums at their limits)",
                  simd_sets[k].name);
}

/* loom_matmul_rowwise and loom_matmul of the X16 weight equal those of the GGUF-layout weight for n_tok
 * 1..MAX_TOK, and get_row too, in the active kernel set and on each pool. */
static void check_matmul(const struct loom_weight *std, const struct loom_weight *x16, const float *x,
                         struct loom_pool **pools)
{
    static float y0[MAX_TOK * N_OUT], y1[MAX_TOK * N_OUT];
    static unsigned char scratch[MAX_TOK * NB * sizeof(struct loom_block_q8_k)];
    int n_bad = 0;
    for (int p = 0; p < 2; p++)
        for (int rowwise = 0; rowwise < 2; rowwise++)
            for (int n_tok = 1; n_tok <= MAX_TOK; n_tok++) {
                memset(y0, 0xfe, sizeof y0);
                memset(y1, 0xff, sizeof y1);
                (rowwise ? loom_matmul_rowwise : loom_matmul)(loom_kernels_active(), pools[p], std, x, n_tok, y0, scratch);
                (rowwise ? loom_matmul_rowwise : loom_matmul)(loom_kernels_active(), pools[p], x16, x, n_tok, y1, scratch);
                if (memcmp(y0, y1, sizeof(float) * (size_t)(n_tok * N_OUT)) != 0 && n_bad++ == 0) {
                    CHECK(0, "%s x16 %s n_tok %d threads %d differs from the GGUF layout", loom_kernels_name(),
                          rowwise ? "rowwise" : "matmul", n_tok, loom_pool_n_threads(pools[p]));
                    report_diff("y[token][row]", y1, y0, (size_t)(n_tok * N_OUT), N_OUT);
                }
            }
    CHECK(n_bad == 0, "%s x16 matmul and rowwise equal the GGUF layout (n_tok 1..%d, 1 and 2 threads): %d differ",
          loom_kernels_name(), MAX_TOK, n_bad);
    int ok = 1;
    float r0[N_IN], r1[N_IN];
    for (int o = 0; o < N_OUT && ok; o++) {
        loom_weight_get_row(std, o, r0);
        loom_weight_get_row(x16, o, r1);
        char what[32];
        snprintf(what, sizeof what, "get_row %d [0][element]", o);
        ok = report_diff(what, r1, r0, N_IN, N_IN);
    }
    CHECK(ok, "%s x16 get_row equals the GGUF layout", loom_kernels_name());
}

/* loom_weight_repack_x16 with a pool of 3 threads: the same bytes as on the caller alone, the groups split among
 * the threads (66 groups, 8 at a time), the tail rows left in the file layout. Random bytes: a repack copies. */
static void check_repack_threads(void)
{
    enum { GROUPS = 66, ROWS = 16 * GROUPS + 5 }; /* one block column of 256 weights per row */
    size_t bytes = (size_t)GROUPS * 16 * sizeof(struct loom_block_q6_k);
    struct loom_block_q6_k *src = malloc(ROWS * sizeof *src);
    char *one = aligned_alloc(64, bytes), *three = aligned_alloc(64, bytes);
    struct loom_pool *pool = loom_pool_new(3);
    CHECK(src && one && three && pool, "allocations");
    if (src && one && three && pool) {
        for (size_t k = 0; k < ROWS * sizeof *src; k++)
            ((uint8_t *)src)[k] = (uint8_t)rnd_u32();
        struct loom_weight a = {LOOM_TYPE_Q6_K, LOOM_QK_K, ROWS, sizeof *src, src, LOOM_WEIGHT_ROWS, 0, 0}, b = a;
        memset(three, 0xa5, bytes);
        loom_weight_repack_x16(NULL, &a, one);
        loom_weight_repack_x16(pool, &b, three);
        CHECK(!memcmp(one, three, bytes), "repack with 3 threads: the bytes of the repack on the caller");
        CHECK(b.layout == LOOM_WEIGHT_X16 && b.data == three && b.rows == src,
              "repacked weight: X16, data the copy, rows the file layout (its %d tail rows read there)", ROWS % 16);
    }
    loom_pool_free(pool);
    free(src);
    free(one);
    free(three);
}

int main(void)
{
    size_t rb = NB * sizeof(struct loom_block_q6_k);
    struct loom_block_q6_k *rows = malloc(rb * N_OUT);
    struct loom_block_q6_k_x16 *packed = aligned_alloc(64, rb * 16 * (N_OUT / 16));
    struct loom_block_q8_k *a = malloc(sizeof *a * NB * MAX_TOK);
    float *x = malloc(sizeof *x * N_IN * MAX_TOK);
    struct loom_pool *pools[2] = {NULL, loom_pool_new(2)};
    CHECK(rows && packed && a && x && pools[1], "allocations");
    make_rows(rows);
    make_acts(a, x, MAX_TOK);
    for (int g = 0; g < N_OUT / 16; g++)
        loom_q6_k_x16_pack(rows + 16 * g * NB, rb, packed + g * NB, N_IN);
    check_pack(rows, packed);
    check_dots(rows, packed, a);
    check_extremes();
    check_repack_threads();
    /* the matmul checks use finite weights only (NaN payloads of Inf - Inf need not match) */
    for (int i = 0; i < N_OUT * NB; i++)
        if ((rows[i].d & 0x7c00) == 0x7c00)
            rows[i].d = 0x3c00;
    for (int g = 0; g < N_OUT / 16; g++)
        loom_q6_k_x16_pack(rows + 16 * g * NB, rb, packed + g * NB, N_IN);
    struct loom_weight std = {LOOM_TYPE_Q6_K, N_IN, N_OUT, rb, rows, LOOM_WEIGHT_ROWS, 0, 0};
    struct loom_weight x16 = {LOOM_TYPE_Q6_K, N_IN, N_OUT, rb, packed, LOOM_WEIGHT_X16, rows, 0};
    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        if (loom_kernels_select(modes[m], &(loom_error){0}) == LOOM_OK)
            check_matmul(&std, &x16, x, pools);
    loom_kernels_select(LOOM_KERNELS_AUTO, &(loom_error){0});
    loom_pool_free(pools[1]);
    free(rows);
    free(packed);
    free(a);
    free(x);
    return test_finish();
}
