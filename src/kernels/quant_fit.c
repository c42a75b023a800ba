/* quant_fit.c — the scale searches the weight quantizers share on llama.cpp's importance-matrix path
 * (ggml-quants.c make_qx_quants with caller weights, make_qkx3_quants, make_qp_quants), float operations in
 * the reference's order and without FMA (ggml-base is built for plain x86-64), so bit-identical. No
 * allocation: fixed-size scratch on the stack (n <= 32). */
#include <math.h>

#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"

#define FIT_EPS 1e-15f /* ggml-quants.c GROUP_MAX_EPS */

static inline int clamp_i(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* sum(w x l) and sum(w l l) of the rounding of x * iscale to [-nmax, nmax - 1], w[i] = qw[i] or x^2. */
static void qx_sums(int n, int nmax, const float *x, const float *qw, float iscale, float *sumlx, float *suml2)
{
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_i(loom_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        float w = qw ? qw[i] : x[i] * x[i];
        *sumlx += w * x[i] * (float)l;
        *suml2 += w * (float)l * (float)l;
    }
}

float loom_fit_qx(int n, int nmax, const float *x, const float *qw, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < FIT_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(nmax + clamp_i(loom_nearest_int(iscale * x[i]), -nmax, nmax - 1));
    float sumlx, suml2;
    qx_sums(n, nmax, x, qw, iscale, &sumlx, &suml2);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        qx_sums(n, nmax, x, qw, iscale, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_i(loom_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Weighted error sum(w |scale L + min - x|^p) (p = 1 if use_mad, else 2), w = weights or x^2. */
static float qkx3_error(int n, const float *x, const float *weights, const uint8_t *L, float scale, float min,
                        int use_mad)
{
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights ? weights[i] : x[i] * x[i];
        err += w * diff;
    }
    return err;
}

float loom_fit_qkx3(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *neg_min, float rmin,
                    float rdelta, int nstep, int use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = weights ? weights[0] : x[0] * x[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights ? weights[i] : x[i] * x[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)clamp_i(loom_nearest_int(iscale * (x[i] - min)), 0, nmax);
    float best = qkx3_error(n, x, weights, L, scale, min, use_mad);
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    uint8_t aux[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_i(loom_nearest_int(iscale * (x[i] - min)), 0, nmax);
            aux[i] = (uint8_t)l;
            float w = weights ? weights[i] : x[i] * x[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D, this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = qkx3_error(n, x, weights, aux, this_scale, this_min, use_mad);
        if (err < best) {
            memcpy(L, aux, (size_t)n);
            best = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

/* sum(w (x - scale_is * min(nmax, round(iscale_is x)))^2) for one trial scale. */
static float qp_mse(int n, int nmax, const float *x, const float *qw, float iscale_is)
{
    float scale_is = 1 / iscale_is, mse = 0;
    for (int i = 0; i < n; i++) {
        int l = loom_nearest_int(iscale_is * x[i]);
        l = l < nmax ? l : nmax;
        float diff = x[i] - scale_is * (float)l;
        mse += qw[i] * diff * diff;
    }
    return mse;
}

float loom_fit_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw)
{
    float max = 0;
    for (int i = 0; i < n; i++)
        max = max > x[i] ? max : x[i];
    if (max < FIT_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)nmax / max, scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)loom_nearest_int(iscale * x[i]);
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * (float)L[i];
        best += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0)
            continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max, mse = qp_mse(n, nmax, x, qw, iscale_is);
        if (mse < best) {
            best = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = loom_nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += qw[i] * x[i] * (float)l;
        suml2 += qw[i] * (float)l * (float)l;
    }
    /* coordinate descent: move one quant at a time while the fit sum(w x l)^2 / sum(w l l) improves */
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = qw[i];
            float slx = sumlx - w * x[i] * (float)L[i], sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (!(slx > 0 && sl2 > 0))
                continue;
            int new_l = loom_nearest_int(x[i] * sl2 / slx);
            new_l = new_l < nmax ? new_l : nmax;
            if (new_l == L[i])
                continue;
            slx += w * x[i] * (float)new_l;
            sl2 += w * (float)new_l * (float)new_l;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed)
            break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}
