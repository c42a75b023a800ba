/* fp16.h — exact scalar conversions between F32 and the 16-bit float formats GGUF uses (IEEE binary16 and
 * bfloat16), rounding to nearest even like the hardware (F16C) conversions llama.cpp uses on x86. */
#ifndef LOOM_UTIL_FP16_H
#define LOOM_UTIL_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t loom_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float loom_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* binary16 -> binary32, exact (subnormals, infinities, NaN payloads preserved). */
static inline float loom_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)
        return loom_bits_f32(sign | 0x7f800000 | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return loom_bits_f32(sign);
        float f = (float)man * (1.0f / 16777216.0f); /* man * 2^-24 */
        return sign ? -f : f;
    }
    return loom_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* binary32 -> binary16, round to nearest even; overflow to infinity; NaN stays NaN (quiet). */
static inline uint16_t loom_f32_to_f16(float f)
{
    uint32_t u = loom_f32_bits(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000)
        return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a >= 0x477ff000) /* rounds to >= 65520 -> inf */
        return (uint16_t)(sign | 0x7c00);
    if (a < 0x38800000) { /* result subnormal or zero: scale by 2^24 exactly, round in float */
        float r = loom_bits_f32(a) * 16777216.0f; /* now an integer-valued count of 2^-24 units after rounding */
        uint32_t m = (uint32_t)__builtin_rintf(r);
        return (uint16_t)(sign | m);
    }
    uint32_t rounded = a + 0xfff + ((a >> 13) & 1);
    return (uint16_t)(sign | ((rounded - 0x38000000) >> 13));
}

/* bfloat16 -> binary32, exact. */
static inline float loom_bf16_to_f32(uint16_t h) { return loom_bits_f32((uint32_t)h << 16); }

/* binary32 -> bfloat16, round to nearest even; NaN stays NaN (quiet bit set). */
static inline uint16_t loom_f32_to_bf16(float f)
{
    uint32_t u = loom_f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

#endif
