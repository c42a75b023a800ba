/* test_cpu.c — CPU feature detection (util/cpu.h) against the Linux kernel's view: every feature loom
 * reads from CPUID and XCR0 is reported exactly when /proc/cpuinfo's "flags" line lists it (the kernel
 * also drops the vector flags when it does not save their registers); and the kernel sets loom accepts
 * follow from those features. Skipped where /proc/cpuinfo has no flags line (not Linux on x86). */
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "test.h"
#include "util/cpu.h"

static const struct {
    unsigned bit;
    const char *flag;
} features[] = {
    {LOOM_CPU_AVX2, "avx2"},           {LOOM_CPU_FMA, "fma"},
    {LOOM_CPU_F16C, "f16c"},           {LOOM_CPU_BMI2, "bmi2"},
    {LOOM_CPU_AVX512F, "avx512f"},     {LOOM_CPU_AVX512BW, "avx512bw"},
    {LOOM_CPU_AVX512VL, "avx512vl"},   {LOOM_CPU_AVX512DQ, "avx512dq"},
    {LOOM_CPU_AVX512VNNI, "avx512_vnni"}, {LOOM_CPU_AVX512BF16, "avx512_bf16"},
};
#define N_FEATURES (sizeof features / sizeof features[0])

/* The first "flags" line of /proc/cpuinfo, padded with a space at each end; NULL if none. */
static char *cpuinfo_flags(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return NULL;
    char *line = NULL, *out = NULL;
    size_t cap = 0;
    while (!out && getline(&line, &cap, f) > 0) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "flags", 5) != 0 || !colon)
            continue;
        line[strcspn(line, "\n")] = '\0';
        out = malloc(strlen(colon) + 2);
        if (out)
            sprintf(out, "%s ", colon + 1);
    }
    free(line);
    fclose(f);
    return out;
}

static int has_flag(const char *flags, const char *name)
{
    char word[32];
    snprintf(word, sizeof word, " %s ", name);
    return strstr(flags, word) != NULL;
}

/* LOOM_KERNELS_AVX2 / AVX512 are accepted exactly when every feature their code is built for is there. */
static void test_kernel_sets(unsigned f)
{
    loom_error err;
    int avx2 = (f & LOOM_CPU_AVX2_SET) == LOOM_CPU_AVX2_SET, avx512 = (f & LOOM_CPU_AVX512_SET) == LOOM_CPU_AVX512_SET;
    CHECK((loom_kernels_select(LOOM_KERNELS_AVX2, &err) == LOOM_OK) == avx2, "AVX2 set accepted iff features %#x", f);
    CHECK((loom_kernels_select(LOOM_KERNELS_AVX512, &err) == LOOM_OK) == avx512, "AVX-512 set accepted iff %#x", f);
    CHECK(loom_kernels_select(LOOM_KERNELS_AUTO, &err) == LOOM_OK, "auto: %s", err.msg);
    const char *want = avx512 ? "avx512" : avx2 ? "avx2" : "scalar";
    CHECK(strcmp(loom_kernels_name(), want) == 0, "auto picks %s, expected %s", loom_kernels_name(), want);
}

int main(void)
{
    unsigned f = loom_cpu_features();
    char *flags = cpuinfo_flags();
    if (flags) {
        printf("cpu:");
        for (size_t i = 0; i < N_FEATURES; i++) {
            int loom = (f & features[i].bit) != 0, kernel = has_flag(flags, features[i].flag);
            CHECK(loom == kernel, "%s: loom_cpu_features says %d, /proc/cpuinfo says %d", features[i].flag, loom,
                  kernel);
            if (loom)
                printf(" %s", features[i].flag);
        }
        printf("\n");
    } else {
        printf("no flags line in /proc/cpuinfo: features not cross-checked\n");
    }
    free(flags);
    test_kernel_sets(f);
    return test_finish();
}
