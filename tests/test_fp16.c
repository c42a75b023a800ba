/* test_fp16.c — F16/BF16 conversions: exhaustive round trip of every binary16 value, and F32->F16
 * rounding checked against the compiler's _Float16 conversion (round to nearest even) on a sweep. */
#include "test.h"
#include "util/fp16.h"

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
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, 2);
        if (loom_f32_to_f16(f) != rb)
            bad++;
    }
    CHECK(bad == 0, "%d F32->F16 conversions differ from _Float16", bad);
    CHECK(loom_f32_to_bf16(1.0f) == 0x3f80, "bf16(1)");
    CHECK(loom_f32_to_bf16(loom_bits_f32(0x3f808000)) == 0x3f80, "tie to even down");
    CHECK(loom_f32_to_bf16(loom_bits_f32(0x3f818000)) == 0x3f82, "tie to even up");
    CHECK(loom_bf16_to_f32(0x3f80) == 1.0f, "bf16 -> f32");
    return test_finish();
}
