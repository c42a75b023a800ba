/* cpu.h — which x86 instruction set extensions this CPU has and the OS lets programs use, read from CPUID
 * and XCR0 (the same on GCC and clang; the compilers' __builtin_cpu_supports accept different feature
 * names). Kernel dispatch and `loom bench --mem` ask here. Other architectures report none. */
#ifndef LOOM_UTIL_CPU_H
#define LOOM_UTIL_CPU_H

enum loom_cpu_feature {
    LOOM_CPU_AVX2 = 1u << 0,
    LOOM_CPU_FMA = 1u << 1,
    LOOM_CPU_F16C = 1u << 2,
    LOOM_CPU_BMI2 = 1u << 3,
    LOOM_CPU_AVX512F = 1u << 4,
    LOOM_CPU_AVX512BW = 1u << 5,
    LOOM_CPU_AVX512VL = 1u << 6,
    LOOM_CPU_AVX512DQ = 1u << 7,
    LOOM_CPU_AVX512VNNI = 1u << 8,
    LOOM_CPU_AVX512BF16 = 1u << 9,
};

/* What loom's AVX2 and AVX-512 kernel sets are compiled for (the Makefile's AVX2_FLAGS, AVX512_FLAGS). */
#define LOOM_CPU_AVX2_SET (LOOM_CPU_AVX2 | LOOM_CPU_FMA | LOOM_CPU_F16C | LOOM_CPU_BMI2)
#define LOOM_CPU_AVX512_SET                                                                                         \
    (LOOM_CPU_AVX2_SET | LOOM_CPU_AVX512F | LOOM_CPU_AVX512BW | LOOM_CPU_AVX512VL | LOOM_CPU_AVX512DQ |            \
     LOOM_CPU_AVX512VNNI | LOOM_CPU_AVX512BF16)

/* The loom_cpu_feature bits this CPU reports in CPUID (leaves 1, 7.0 and 7.1), the vector ones only where
 * the OS saves their registers (XCR0: the YMM state for AVX2, FMA and F16C, and the opmask and ZMM states
 * too for AVX-512); 0 on CPUs other than x86-64. */
unsigned loom_cpu_features(void);

#endif
