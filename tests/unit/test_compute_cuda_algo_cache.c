/* test_compute_cuda_algo_cache.c - the GEMM algorithm cache (host logic, no GPU needed): a shape maps to the
 * algorithm pinned for it, every field of the key matters, growth keeps every entry, clear empties it. */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/cuda/cuda_algo_cache.h"
#include "test.h"

static kcu_gemm_key key_of(int64_t m, int64_t n, int64_t k) {
    kcu_gemm_key key;
    memset(&key, 0, sizeof key);
    key.m = m, key.n = n, key.k = k, key.ldx = k, key.ldw = k, key.ldy = n;
    key.in_dtype = 2, key.out_dtype = 0, key.align = 16;
    return key;
}

static kcu_algo algo_of(uint64_t tag) {
    kcu_algo a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 8; i++) a.blob[i] = tag * 8 + (uint64_t)i;
    a.workspace_bytes = (size_t)tag * 1024;
    return a;
}

static void test_find_put(void) {
    kcu_algo_cache c;
    kcu_algo_cache_init(&c);
    kcu_gemm_key k1 = key_of(4096, 9216, 3072);
    CHECK(kcu_algo_cache_find(&c, &k1) == NULL);
    kcu_algo a1 = algo_of(1);
    CHECK_EQ_INT(kcu_algo_cache_put(&c, &k1, &a1, NULL), KILN_OK);
    kcu_algo *got = kcu_algo_cache_find(&c, &k1);
    CHECK(got != NULL);
    if (got) {
        CHECK(memcmp(got->blob, a1.blob, sizeof a1.blob) == 0);
        CHECK_EQ_INT(got->workspace_bytes, 1024);
    }
    CHECK_EQ_INT(c.hits, 1);
    CHECK_EQ_INT(c.misses, 1);
    /* replacing keeps one entry */
    kcu_algo a2 = algo_of(2);
    CHECK_EQ_INT(kcu_algo_cache_put(&c, &k1, &a2, NULL), KILN_OK);
    CHECK_EQ_INT(c.count, 1);
    got = kcu_algo_cache_find(&c, &k1);
    CHECK(got && got->blob[0] == a2.blob[0]);
    kcu_algo_cache_free(&c);
}

static void test_every_field_matters(void) {
    kcu_algo_cache c;
    kcu_algo_cache_init(&c);
    kcu_gemm_key base = key_of(512, 3072, 3072);
    kcu_algo a = algo_of(7);
    CHECK_EQ_INT(kcu_algo_cache_put(&c, &base, &a, NULL), KILN_OK);
    kcu_gemm_key v[11];
    for (int i = 0; i < 11; i++) v[i] = base;
    v[0].m++, v[1].n++, v[2].k++, v[3].ldx++, v[4].ldw++, v[5].ldy++, v[6].in_dtype = 0, v[7].out_dtype = 2;
    v[8].accumulate = 1, v[9].align = 4, v[10].epilogue = KCU_GEMM_GATE;
    for (int i = 0; i < 11; i++) CHECK_MSG(kcu_algo_cache_find(&c, &v[i]) == NULL, "variant %d found", i);
    CHECK(kcu_algo_cache_find(&c, &base) != NULL);
    kcu_algo_cache_free(&c);
}

static void test_growth_keeps_entries(void) {
    kcu_algo_cache c;
    kcu_algo_cache_init(&c);
    for (int i = 1; i <= 1000; i++) {
        kcu_gemm_key k = key_of(i, 3 * i, 7 * i);
        kcu_algo a = algo_of((uint64_t)i);
        CHECK_EQ_INT(kcu_algo_cache_put(&c, &k, &a, NULL), KILN_OK);
    }
    CHECK_EQ_INT(c.count, 1000);
    int bad = 0;
    for (int i = 1; i <= 1000; i++) {
        kcu_gemm_key k = key_of(i, 3 * i, 7 * i);
        kcu_algo *a = kcu_algo_cache_find(&c, &k);
        if (!a || a->blob[0] != (uint64_t)i * 8 || a->workspace_bytes != (size_t)i * 1024) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    kcu_algo_cache_clear(&c);
    CHECK_EQ_INT(c.count, 0);
    kcu_gemm_key k5 = key_of(5, 15, 35);
    CHECK(kcu_algo_cache_find(&c, &k5) == NULL);
    kcu_algo_cache_free(&c);
}

static void test_out_of_memory(void) {
    kcu_algo_cache c;
    kcu_algo_cache_init(&c);
    kcu_gemm_key k = key_of(1, 2, 3);
    kcu_algo a = algo_of(1);
    kiln_err err = {0};
    kiln_fault_alloc_fail_at(1, false);
    CHECK_EQ_INT(kcu_algo_cache_put(&c, &k, &a, &err), KILN_E_NOMEM);
    kiln_fault_alloc_fail_at(0, false);
    CHECK_ERR_CONTAINS(&err, "algorithm cache");
    CHECK(kcu_algo_cache_find(&c, &k) == NULL);
    CHECK_EQ_INT(kcu_algo_cache_put(&c, &k, &a, &err), KILN_OK);
    CHECK(kcu_algo_cache_find(&c, &k) != NULL);
    kcu_algo_cache_free(&c);
}

static void test_ptr_align(void) {
    CHECK_EQ_INT(kcu_ptr_align((void *)0x1000, (void *)0x2000, (void *)0x3000), 16);
    CHECK_EQ_INT(kcu_ptr_align((void *)0x1008, (void *)0x2000, (void *)0x3000), 8);
    CHECK_EQ_INT(kcu_ptr_align((void *)0x1000, (void *)0x2002, (void *)0x3000), 2);
    CHECK_EQ_INT(kcu_ptr_align((void *)0x1000, (void *)0x2000, (void *)0x3001), 1);
}

int main(void) {
    RUN(test_find_put);
    RUN(test_every_field_matters);
    RUN(test_growth_keeps_entries);
    RUN(test_out_of_memory);
    RUN(test_ptr_align);
    return test_summary();
}
