/* test_ops.c — the multi-token Gated DeltaNet kernels (loom_ops_conv1d_chunk, loom_ops_delta_rule_chunk)
 * and the many-row norms (loom_ops_rmsnorm_rows, loom_ops_l2norm_rows) against the single-token and
 * single-row scalar kernels, bitwise, in each float-order profile: scalar and active variants, several kernel
 * widths, head dims and row lengths, channel counts with a tail past the last 16-lane group, strided rows, and
 * runs of tokens that switch between state buffers as a multi-sequence chunk does; and the MoE router on
 * non-finite logits. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "loom.h"
#include "test.h"
#include "test_rng.h"

/* The scalar kernels of the active float-order profile: the oracle each variant must equal bitwise. */
static const struct loom_ops_kernels *scalar_ops(void) { return &loom_kernels_for(LOOM_KERNELS_SCALAR)->ops; }

static void fill(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = scale * rnd_f();
}

/* ---- conv1d ---------------------------------------------------------------------------------------- */

enum { CONV_T = 33, CONV_CH = 70, CONV_KMAX = 9, CONV_PAD = 3 };

/* Tokens of a chunk and the state buffer (0 or 1) each one updates; runs switch buffers. */
static const int conv_buf[CONV_T] = {0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                     1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

/* n tokens (rows of stride CH + PAD) of CH channels, kernel K: per-token scalar reference vs `chunk`
 * called on maximal runs of tokens that share a state buffer. */
static void conv_case(const char *name,
                      void (*chunk)(int64_t, int, int, float *, const float *, const float *, int64_t, float *, int64_t),
                     int K, int64_t CH, int n)
{
    static float w[CONV_CH * CONV_KMAX], x[CONV_T * (CONV_CH + CONV_PAD)];
    static float s_ref[2][CONV_CH * CONV_KMAX], s[2][CONV_CH * CONV_KMAX];
    static float y_ref[CONV_T * (CONV_CH + CONV_PAD)], y[CONV_T * (CONV_CH + CONV_PAD)];
    int64_t stride = CH + CONV_PAD;
    fill(w, CH * K, 1.0f);
    fill(x, n * stride, 2.0f);
    fill(&s_ref[0][0], 2 * CONV_CH * CONV_KMAX, 2.0f);
    memcpy(s, s_ref, sizeof s);
    for (int64_t i = 0; i < n * stride; i++)
        y_ref[i] = y[i] = -7.0f; /* the padding between rows must stay untouched */
    for (int t = 0; t < n; t++)
        scalar_ops()->conv1d_step(CH, K, s_ref[conv_buf[t]], w, x + t * stride, y_ref + t * stride);
    for (int t0 = 0; t0 < n;) {
        int t1 = t0 + 1;
        while (t1 < n && conv_buf[t1] == conv_buf[t0])
            t1++;
        chunk(CH, K, t1 - t0, s[conv_buf[t0]], w, x + t0 * stride, stride, y + t0 * stride, stride);
        t0 = t1;
    }
    int same = memcmp(y, y_ref, (size_t)(n * stride) * sizeof(float)) == 0 && memcmp(s, s_ref, sizeof s) == 0;
    CHECK(same, "conv1d chunk (%s) K=%d channels=%lld n=%d differs from the per-token kernel", name, K,
          (long long)CH, n);
}

static void test_conv1d_chunk(void)
{
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    const int kernels[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const int64_t channels[] = {5, 16, 37, 64, 70};
    const int tokens[] = {1, 2, 7, CONV_T};
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++)
        for (size_t ci = 0; ci < sizeof channels / sizeof channels[0]; ci++)
            for (size_t ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++) {
                conv_case("scalar", scalar_ops()->conv1d_chunk, kernels[ki], channels[ci], tokens[ti]);
                conv_case(loom_kernels_name(), ops->conv1d_chunk, kernels[ki], channels[ci], tokens[ti]);
            }
    /* the active single-token variant is the one-token chunk */
    static float w[CONV_CH * 4], s1[CONV_CH * 3], s2[CONV_CH * 3], x[CONV_CH], y1[CONV_CH], y2[CONV_CH];
    fill(w, CONV_CH * 4, 1.0f);
    fill(s1, CONV_CH * 3, 1.0f);
    memcpy(s2, s1, sizeof s1);
    int same = 1;
    for (int t = 0; t < 5; t++) {
        fill(x, CONV_CH, 1.0f);
        scalar_ops()->conv1d_step(CONV_CH, 4, s1, w, x, y1);
        ops->conv1d_step(CONV_CH, 4, s2, w, x, y2);
        same &= memcmp(y1, y2, sizeof y1) == 0 && memcmp(s1, s2, sizeof s1) == 0;
    }
    CHECK(same, "conv1d step: %s variant differs from scalar", loom_kernels_name());
}

/* ---- delta rule ------------------------------------------------------------------------------------ */

enum { DR_T = 40, DR_DMAX = 256, DR_HV = 3 };

/* Inputs of a chunk laid out as qwen35 does: token rows of q | k | v (stride 3d + 5), g and beta with
 * stride DR_HV, outputs with stride d + 2. */
struct delta_inputs {
    float qkv[DR_T * (3 * DR_DMAX + 5)];
    float g[DR_T * DR_HV], beta[DR_T * DR_HV];
};

static const int delta_buf[DR_T] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
                                    1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};

static void delta_fill(struct delta_inputs *in, int d, int n)
{
    int64_t stride = 3 * d + 5;
    fill(in->qkv, n * stride, 1.0f);
    for (int t = 0; t < n; t++) {
        float *row = in->qkv + t * stride;
        loom_ops_l2norm(d, row, 1e-6f, row);
        loom_ops_l2norm(d, row + d, 1e-6f, row + d);
        for (int h = 0; h < DR_HV; h++) {
            in->g[t * DR_HV + h] = -0.05f - 0.5f * (1.0f + rnd_f());
            in->beta[t * DR_HV + h] = 0.5f + 0.4f * rnd_f();
        }
    }
}

typedef void (*delta_chunk_fn)(int, int, const float *, float *, const float *, const float *, const float *,
                               int64_t, const float *, const float *, int64_t, float *, int64_t);

/* The chunk kernel against per-token steps: in place (out_of_place = 0), or with each run's state read from
 * a separate source copy and written over a garbage-filled M (out_of_place = 1, the transaction's copy). */
static void delta_case(const char *name, delta_chunk_fn chunk, int d, int n, int switch_buffers, int out_of_place)
{
    static struct delta_inputs in;
    static float M_ref[2][DR_DMAX * DR_DMAX], M[2][DR_DMAX * DR_DMAX], src[DR_DMAX * DR_DMAX];
    static float o_ref[DR_T * (DR_DMAX + 2)], o[DR_T * (DR_DMAX + 2)];
    int64_t stride = 3 * d + 5, os = d + 2;
    const int h = 1; /* g and beta of the middle head */
    delta_fill(&in, d, n);
    fill(&M_ref[0][0], 2 * DR_DMAX * DR_DMAX, 0.5f);
    memcpy(M, M_ref, sizeof M);
    for (int64_t i = 0; i < n * os; i++)
        o_ref[i] = o[i] = -7.0f;
    for (int t = 0; t < n; t++) {
        const float *row = in.qkv + t * stride;
        scalar_ops()->delta_rule_step(d, M_ref[switch_buffers ? delta_buf[t] : 0], row, row + d, row + 2 * d,
                                 in.g[t * DR_HV + h], in.beta[t * DR_HV + h], o_ref + t * os);
    }
    for (int t0 = 0; t0 < n;) {
        int b = switch_buffers ? delta_buf[t0] : 0, t1 = t0 + 1;
        while (t1 < n && (switch_buffers ? delta_buf[t1] : 0) == b)
            t1++;
        const float *row = in.qkv + t0 * stride;
        const float *M_src = M[b];
        if (out_of_place) {
            memcpy(src, M[b], (size_t)d * (size_t)d * sizeof(float));
            fill(M[b], d * d, 9.0f);
            M_src = src;
        }
        chunk(d, t1 - t0, M_src, M[b], row, row + d, row + 2 * d, stride, in.g + t0 * DR_HV + h, in.beta + t0 * DR_HV + h,
              DR_HV, o + t0 * os, os);
        t0 = t1;
    }
    int same = memcmp(o, o_ref, (size_t)(n * os) * sizeof(float)) == 0 && memcmp(M, M_ref, sizeof M) == 0;
    CHECK(same, "delta rule chunk (%s) d=%d n=%d%s%s differs from the per-token kernel", name, d, n,
          switch_buffers ? " (switching states)" : "", out_of_place ? " (out of place)" : "");
}

static void test_delta_rule_chunk(void)
{
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    const int dims[] = {16, 20, 24, 36, 48, 64, 128, 192, 256}; /* 20, 36: tails past the last 8 */
    const int tokens[] = {1, 3, 16, 17, DR_T};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (size_t ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++)
            for (int mode = 0; mode < 4; mode++) {
                delta_case("scalar", scalar_ops()->delta_rule_chunk, dims[di], tokens[ti], mode & 1, mode >> 1);
                delta_case(loom_kernels_name(), ops->delta_rule_chunk, dims[di], tokens[ti], mode & 1, mode >> 1);
            }
    /* the active single-token variant against the scalar one */
    static float M1[128 * 128], M2[128 * 128], q[128], k[128], v[128], o1[128], o2[128];
    fill(M1, 128 * 128, 0.5f);
    memcpy(M2, M1, sizeof M1);
    int same = 1;
    for (int t = 0; t < 4; t++) {
        fill(q, 128, 1.0f);
        fill(k, 128, 1.0f);
        fill(v, 128, 1.0f);
        loom_ops_l2norm(128, q, 1e-6f, q);
        loom_ops_l2norm(128, k, 1e-6f, k);
        scalar_ops()->delta_rule_step(128, M1, q, k, v, -0.3f, 0.7f, o1);
        ops->delta_rule_step(128, M2, q, k, v, -0.3f, 0.7f, o2);
        same &= memcmp(o1, o2, sizeof o1) == 0 && memcmp(M1, M2, sizeof M1) == 0;
    }
    CHECK(same, "delta rule step d=128: %s variant differs from scalar", loom_kernels_name());
}

/* ---- RMSNorm / L2 norm of rows --------------------------------------------------------------------- */

enum { NR_ROWS = 33, NR_NMAX = 1024, NR_PAD = 5 };

/* n_rows rows of n (stride n + PAD) through the kernel set's rows variants vs one scalar call per row,
 * out of place and in place. */
static void norm_case(const struct loom_ops_kernels *ops, int64_t n_rows, int64_t n)
{
    static float x[NR_ROWS * (NR_NMAX + NR_PAD)], w[NR_NMAX], ref[NR_ROWS * (NR_NMAX + NR_PAD)];
    static float y[NR_ROWS * (NR_NMAX + NR_PAD)];
    int64_t xs = n + NR_PAD, ys = n + 2 * (n_rows > 1);
    fill(x, n_rows * xs, 1.0f);
    for (int64_t r = 0; r < n_rows; r += 3) /* rows of very different magnitudes */
        for (int64_t i = 0; i < n; i++)
            x[r * xs + i] *= (float)(1 << (r % 13));
    fill(w, n, 2.0f);
    for (int mode = 0; mode < 3; mode++) { /* weight, no weight, L2 norm */
        const float *wm = mode == 0 ? w : NULL;
        for (int64_t r = 0; r < n_rows; r++) {
            if (mode < 2)
                loom_ops_rmsnorm(n, x + r * xs, wm, 1e-6f, ref + r * ys);
            else
                loom_ops_l2norm(n, x + r * xs, 1e-6f, ref + r * ys);
        }
        if (mode < 2)
            ops->rmsnorm_rows(n_rows, n, x, xs, wm, 1e-6f, y, ys);
        else
            ops->l2norm_rows(n_rows, n, x, xs, 1e-6f, y, ys);
        int same = 1;
        for (int64_t r = 0; r < n_rows; r++)
            same &= memcmp(y + r * ys, ref + r * ys, (size_t)n * sizeof(float)) == 0;
        CHECK(same, "%s norm rows (mode %d) rows=%lld n=%lld differs from one call per row", loom_kernels_name(), mode,
              (long long)n_rows, (long long)n);
        /* in place */
        memcpy(y, x, (size_t)(n_rows * xs) * sizeof(float));
        if (mode < 2)
            ops->rmsnorm_rows(n_rows, n, y, xs, wm, 1e-6f, y, xs);
        else
            ops->l2norm_rows(n_rows, n, y, xs, 1e-6f, y, xs);
        same = 1;
        for (int64_t r = 0; r < n_rows; r++)
            same &= memcmp(y + r * xs, ref + r * ys, (size_t)n * sizeof(float)) == 0;
        CHECK(same, "%s norm rows in place (mode %d) rows=%lld n=%lld differs", loom_kernels_name(), mode, (long long)n_rows,
              (long long)n);
    }
}

static void test_norm_rows(void)
{
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    const int64_t rows[] = {1, 7, 8, 9, 17, NR_ROWS};
    const int64_t lens[] = {8, 16, 37, 64, 128, 256, NR_NMAX};
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            norm_case(ops, rows[ri], lens[li]);
}

/* ---- the mixture-of-experts router ------------------------------------------------------------------
 * (its float results are checked against ggml by tests/parity/test_ref_moe_ops) */

/* Logits with NaN and infinities among ordinary values (an overflowing or poisoned row) make the sort's keys
 * compare inconsistently: the router must still stay inside its arrays and select distinct experts in range. */
static void test_route_nonfinite(void)
{
    const int ns[] = {8, 17, 64, 256, 1024};
    const float specials[] = {NAN, INFINITY, -INFINITY};
    int bad = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int pattern = 0; pattern < 6; pattern++) {
            int n = ns[i], k = n < 8 ? n : 8;
            float logits[1024], w[8];
            int32_t ids[8], order[1024];
            for (int e = 0; e < n; e++)
                logits[e] = (int)(rnd_u32() % 6) <= pattern ? specials[rnd_u32() % 3] : rnd_f();
            loom_ops_argsort_desc(n, logits, order);
            loom_ops_moe_route(loom_ops_softmax_router, n, k, logits, ids, w);
            uint8_t seen[1024] = {0};
            for (int e = 0; e < n; e++) {
                bad += order[e] < 0 || order[e] >= n || seen[order[e]];
                if (order[e] >= 0 && order[e] < n)
                    seen[order[e]] = 1;
            }
            for (int j = 0; j < k; j++)
                bad += ids[j] < 0 || ids[j] >= n;
        }
    CHECK(bad == 0, "router on non-finite logits: %d out-of-range or repeated indices", bad);
}

int main(void)
{
    test_route_nonfinite();
    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    const enum loom_orders profiles[] = {LOOM_ORDERS_AVX512, LOOM_ORDERS_HASWELL};
    loom_error err;
    for (size_t o = 0; o < sizeof profiles / sizeof profiles[0]; o++) { /* each float-order profile */
        CHECK(loom_orders_select(profiles[o], &err) == LOOM_OK, "float-order profile %d: %s", (int)profiles[o],
              err.msg);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            if (loom_kernels_select(modes[m], &err) != LOOM_OK) {
                printf("kernel mode %d: not on this CPU (%s)\n", (int)modes[m], err.msg);
                continue;
            }
            printf("kernel set: %s, %s orders\n", loom_kernels_name(), loom_orders_name());
            test_conv1d_chunk();
            test_delta_rule_chunk();
            test_norm_rows();
        }
    }
    return test_finish();
}
