/* dispatch.c — choosing the kernel set process-wide: detects what the CPU supports, installs the
 * scalar, AVX2 or AVX-512 kernels into the type trait table and names the active set. */
#include <pthread.h>

#include "kernels/kernels_internal.h"
#include "loom.h"
#include "util/cpu.h"
#include "util/error.h"

static enum loom_kernel_mode active = LOOM_KERNELS_SCALAR;
static int q4_k_repacked = 1;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* The AVX2 set needs AVX2, FMA, F16C and BMI2; the AVX-512 set adds F, BW, VL, DQ, VNNI and BF16. */
static int cpu_has(enum loom_kernel_mode mode)
{
    unsigned need = mode == LOOM_KERNELS_AVX2     ? LOOM_CPU_AVX2_SET
                    : mode == LOOM_KERNELS_AVX512 ? LOOM_CPU_AVX512_SET
                                                  : 0u;
    return (loom_cpu_features() & need) == need;
}

static enum loom_kernel_mode best_mode(void)
{
    if (cpu_has(LOOM_KERNELS_AVX512))
        return LOOM_KERNELS_AVX512;
    if (cpu_has(LOOM_KERNELS_AVX2))
        return LOOM_KERNELS_AVX2;
    return LOOM_KERNELS_SCALAR;
}

static void init_auto(void)
{
    active = best_mode();
    loom_types_install(active);
}

void loom_kernels_ensure_init(void) { pthread_once(&init_once, init_auto); }

int loom_kernels_select(enum loom_kernel_mode mode, loom_error *err)
{
    loom_kernels_ensure_init();
    if (mode == LOOM_KERNELS_AUTO)
        mode = best_mode();
    if (mode != LOOM_KERNELS_SCALAR && mode != LOOM_KERNELS_AVX2 && mode != LOOM_KERNELS_AVX512)
        return loom_errorf(err, LOOM_E_ARG, "kernel mode: expected AUTO, SCALAR, AVX2 or AVX512, found %d",
                           (int)mode);
    if (!cpu_has(mode))
        return loom_errorf(err, LOOM_E_ARG, "kernel mode %s: this CPU lacks the required instructions",
                           mode == LOOM_KERNELS_AVX2 ? "avx2" : "avx512");
    active = mode;
    loom_types_install(mode);
    return LOOM_OK;
}

void loom_kernels_set_q4_k_repacked(int on) { q4_k_repacked = on != 0; }

int loom_kernels_q4_k_repacked(void) { return q4_k_repacked; }

int loom_kernels_cpu_avx512(void)
{
    return (loom_cpu_features() & LOOM_CPU_AVX512F) != 0;
}

const char *loom_kernels_name(void)
{
    loom_kernels_ensure_init();
    switch (active) {
    case LOOM_KERNELS_AVX512:
        return "avx512";
    case LOOM_KERNELS_AVX2:
        return "avx2";
    default:
        return "scalar";
    }
}
