/* cpu.c — CPU feature detection for kernel dispatch (see cpu.h): CPUID through <cpuid.h> and XCR0 through
 * XGETBV, with the bit positions of the Intel SDM (vol. 2A, CPUID; vol. 1, 13.3 XCR0). */
#include "util/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <stdint.h>

#define XCR0_AVX_STATE 0x06u    /* SSE | YMM upper halves */
#define XCR0_AVX512_STATE 0xe0u /* opmask | ZMM upper halves of 0-15 | ZMM 16-31 */

static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static unsigned bit(unsigned reg, int pos, unsigned feature) { return (reg >> pos) & 1u ? feature : 0u; }

unsigned loom_cpu_features(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(1, 0, &a, &b, &c, &d))
        return 0;
    int avx_state = bit(c, 27, 1) && bit(c, 28, 1) && (xcr0() & XCR0_AVX_STATE) == XCR0_AVX_STATE; /* OSXSAVE, AVX */
    unsigned f = avx_state ? bit(c, 12, LOOM_CPU_FMA) | bit(c, 29, LOOM_CPU_F16C) : 0u;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return f;
    unsigned max_subleaf = a;
    f |= bit(b, 8, LOOM_CPU_BMI2); /* general-purpose registers: no OS state needed */
    if (!avx_state)
        return f;
    f |= bit(b, 5, LOOM_CPU_AVX2);
    if ((xcr0() & XCR0_AVX512_STATE) != XCR0_AVX512_STATE)
        return f;
    f |= bit(b, 16, LOOM_CPU_AVX512F) | bit(b, 17, LOOM_CPU_AVX512DQ) | bit(b, 30, LOOM_CPU_AVX512BW) |
         bit(b, 31, LOOM_CPU_AVX512VL) | bit(c, 11, LOOM_CPU_AVX512VNNI);
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
        f |= bit(a, 5, LOOM_CPU_AVX512BF16);
    return f;
}

#else

unsigned loom_cpu_features(void) { return 0; }

#endif
