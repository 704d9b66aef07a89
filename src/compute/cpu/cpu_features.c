/* cpu_features.c - which instruction-set tier this CPU runs, decided once at run time.
 *
 * The binary is built for baseline x86-64; faster kernels live in files compiled with target attributes and are
 * only called when the CPU reports the features (cpuid via __builtin_cpu_supports, plus XCR0 / arch_prctl for
 * AMX, whose tile state the OS must agree to save). KILN_CPU=generic|avx2|avx512|amx caps the tier (tests use it
 * to check every tier on one machine). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "compute/cpu/cpu_internal.h"

static const char *const tier_names[] = {"generic", "avx2", "avx512", "amx"};

const char *kiln_cpu_tier_name(kiln_cpu_tier t) {
    return (unsigned)t <= KILN_CPU_AMX ? tier_names[t] : "?";
}

bool kiln_cpu_parse_tier(const char *s, kiln_cpu_tier *out) {
    for (int i = 0; i <= KILN_CPU_AMX; i++)
        if (strcmp(s, tier_names[i]) == 0) {
            *out = (kiln_cpu_tier)i;
            return true;
        }
    return false;
}

#if defined(__x86_64__)
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static bool amx_ok;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_init(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return;
    amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

bool kiln_cpu_amx_enable(void) {
    pthread_once(&amx_once, amx_init);
    return amx_ok;
}

/* F16C from CPUID.1:ECX bit 29: clang's __builtin_cpu_supports does not know "f16c". */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

static kiln_cpu_tier hw_tier(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("fma"))
        return kiln_cpu_amx_enable() ? KILN_CPU_AMX : KILN_CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        return KILN_CPU_AVX2;
    return KILN_CPU_GENERIC;
}

static bool vendor_is_amd(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "Auth" "enti" "cAMD" */
}
#else
static bool vendor_is_amd(void) { return false; }
bool kiln_cpu_amx_enable(void) { return false; }
static kiln_cpu_tier hw_tier(void) { return KILN_CPU_GENERIC; }
#endif

static kiln_cpu_tier detected;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static void detect(void) { detected = hw_tier(); }

kiln_cpu_tier kiln_cpu_detect_tier(void) {
    pthread_once(&detect_once, detect);
    return detected;
}

bool kiln_cpu_prefers_bf16_dot(void) {
    const char *env = getenv("KILN_GEMM");
    if (env && strcmp(env, "dot") == 0) return true;
    if (env && strcmp(env, "fma") == 0) return false;
    return vendor_is_amd();
}
