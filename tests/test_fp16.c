/* test_fp16.c — F16/BF16 conversions: exhaustive round trip of every binary16 value, and F32->F16
 * rounding checked on a sweep against IEEE 754's rule (round to nearest, ties to even) applied by search,
 * which needs no compiler's _Float16 (clang 14 has none on x86). */
#include <math.h>

#include "test.h"
#include "util/fp16.h"

/* The value of positive binary16 code k <= 0x7c00 by the format's definition: m * 2^-24 for exponent field
 * e = 0, else (1024 + m) * 2^(e - 25); code 0x7c00 (infinity) reads as 2^16, the step past 65504. */
static double f16_code_value(uint32_t k)
{
    uint32_t e = k >> 10, m = k & 0x3ff;
    return e == 0 ? ldexp(m, -24) : ldexp(1024.0 + m, (int)e - 25);
}

/* F32 -> F16 by the rule: the codes lo, lo + 1 whose values enclose |f|, the nearer one, on a tie the even
 * one (2|f| compared with the sum of the two values: exact in double); |f| >= 2^16 is infinity. */
static uint16_t f16_by_rule(float f)
{
    uint32_t sign = signbit(f) ? 0x8000u : 0u, lo = 0, hi = 0x7c00;
    double a = fabs((double)f);
    if (a >= f16_code_value(hi))
        return (uint16_t)(sign | hi);
    while (hi - lo > 1) { /* f16_code_value(lo) <= a < f16_code_value(hi) */
        uint32_t mid = (lo + hi) / 2;
        if (f16_code_value(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double twice = 2.0 * a, sum = f16_code_value(lo) + f16_code_value(hi);
    uint32_t k = twice < sum ? lo : twice > sum ? hi : (lo & 1) ? hi : lo;
    return (uint16_t)(sign | k);
}

int main(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = loom_f16_to_f32((uint16_t)h);
        int is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        uint16_t back = loom_f32_to_f16(f);
        if (is_nan ? !(((back >> 10) & 0x1f) == 0x1f && (back & 0x3ff)) : back != h)
            bad++;
    }
    CHECK(bad == 0, "%d binary16 values do not round-trip", bad);
    bad = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 0x1000 + 0x11) { /* sweep of float bit patterns */
        float f = loom_bits_f32((uint32_t)u);
        if (f != f)
            continue;
        if (loom_f32_to_f16(f) != f16_by_rule(f))
            bad++;
    }
    CHECK(bad == 0, "%d F32->F16 conversions differ from round to nearest even", bad);
    const float edges[] = {65504.0f, 65519.996f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x3p-25f, -0.0f};
    const uint16_t edge_f16[] = {0x7bff, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x0001, 0x0002, 0x8000};
    for (int i = 0; i < 8; i++) /* values from the binary16 definition, worked by hand */
        CHECK(loom_f32_to_f16(edges[i]) == edge_f16[i] && f16_by_rule(edges[i]) == edge_f16[i],
              "f16(%a) = %#x, rule %#x, expected %#x", (double)edges[i], loom_f32_to_f16(edges[i]),
              f16_by_rule(edges[i]), edge_f16[i]);
    CHECK(loom_f32_to_bf16(1.0f) == 0x3f80, "bf16(1)");
    CHECK(loom_f32_to_bf16(loom_bits_f32(0x3f808000)) == 0x3f80, "tie to even down");
    CHECK(loom_f32_to_bf16(loom_bits_f32(0x3f818000)) == 0x3f82, "tie to even up");
    CHECK(loom_bf16_to_f32(0x3f80) == 1.0f, "bf16 -> f32");
    return test_finish();
}
