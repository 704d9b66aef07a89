/* noise.c - seeded Gaussian noise (xoshiro256** + Box-Muller) and injected-noise files (see noise.h). */
#include "pipeline/noise.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "io/safetensors.h"
#include "models/weights.h"

typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* In (0, 1]: never 0, so log(u) is finite. */
static double uniform(rng *r) { return (double)((xoshiro_next(r) >> 11) + 1) * 0x1.0p-53; }

void kiln_noise_fill(float *out, size_t n, uint64_t seed) {
    rng r;
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++) r.s[i] = splitmix64(&sm);
    for (size_t i = 0; i < n; i += 2) {
        double u1 = uniform(&r), u2 = uniform(&r);
        double rad = sqrt(-2.0 * log(u1));
        double ang = 2.0 * M_PI * u2;
        out[i] = (float)(rad * cos(ang));
        if (i + 1 < n) out[i + 1] = (float)(rad * sin(ang));
    }
}

static kiln_status load_safetensors(const char *path, size_t count, float **out, kiln_err *err) {
    kiln_st_file *f;
    KILN_TRY(kiln_st_open(path, &f, err));
    const kiln_st_tensor *t = kiln_st_find(f, "noise");
    if (!t && kiln_st_count(f) == 1) t = kiln_st_at(f, 0);
    kiln_status s = KILN_OK;
    if (!t) {
        s = KILN_FAIL(err, KILN_E_INVALID, "%s: expected one tensor or one named \"noise\", found %zu", path,
                      kiln_st_count(f));
        goto done;
    }
    kiln_tensor v = kiln_st_view(t);
    size_t n = (size_t)kiln_tensor_numel(&v);
    if (n != count) {
        s = KILN_FAIL(err, KILN_E_INVALID, "%s: noise tensor '%s' has %zu values, the request needs %zu", path,
                      t->name, n, count);
        goto done;
    }
    if (t->dtype != KILN_DT_F32 && t->dtype != KILN_DT_BF16 && t->dtype != KILN_DT_F16) {
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: noise dtype %s (want f32, bf16 or f16)", path,
                      kiln_dtype_name(t->dtype));
        goto done;
    }
    float *buf = kiln_malloc(count * sizeof(float) + 1);
    if (!buf) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "noise: out of memory");
        goto done;
    }
    kiln_to_f32(buf, t->data, t->dtype, count);
    *out = buf;
done:
    kiln_st_close(f);
    return s;
}

kiln_status kiln_noise_load(const char *path, size_t count, float **out, kiln_err *err) {
    size_t len = strlen(path);
    if (len >= 12 && !strcmp(path + len - 12, ".safetensors")) return load_safetensors(path, count, out, err);
    FILE *fp = fopen(path, "rb");
    if (!fp) return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || (size_t)st.st_size != count * sizeof(float)) {
        long long size = (long long)st.st_size;
        fclose(fp);
        return KILN_FAIL(err, KILN_E_INVALID,
                         "%s: raw noise file has %lld bytes, the request needs %zu f32 values (%zu bytes)", path,
                         size, count, count * sizeof(float));
    }
    float *buf = kiln_malloc(count * sizeof(float) + 1);
    if (!buf) {
        fclose(fp);
        return KILN_FAIL(err, KILN_E_NOMEM, "noise: out of memory");
    }
    size_t got = fread(buf, sizeof(float), count, fp);
    fclose(fp);
    if (got != count) {
        kiln_free(buf);
        return KILN_FAIL(err, KILN_E_IO, "%s: short read", path);
    }
    *out = buf;
    return KILN_OK;
}
