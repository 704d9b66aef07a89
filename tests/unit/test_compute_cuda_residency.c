/* test_compute_cuda_residency.c - device ranges and the uploaded-weight cache (host logic, no GPU needed; the
 * "device" addresses are fake and never dereferenced). */
#include <stdint.h>

#include "base/alloc.h"
#include "compute/cuda/cuda_residency.h"
#include "test.h"

#define P(x) ((void *)(uintptr_t)(x))

static void test_ranges(void) {
    kcu_ranges rs;
    kcu_ranges_init(&rs);
    CHECK(!kcu_ranges_contains(&rs, P(0x1000)));
    CHECK_EQ_INT(kcu_ranges_add(&rs, P(0x10000), 0x1000, NULL), KILN_OK);
    CHECK_EQ_INT(kcu_ranges_add(&rs, P(0x30000), 0x100, NULL), KILN_OK);
    CHECK_EQ_INT(kcu_ranges_add(&rs, P(0x20000), 0x800, NULL), KILN_OK); /* out of order: kept sorted */
    CHECK(kcu_ranges_contains(&rs, P(0x10000)));
    CHECK(kcu_ranges_contains(&rs, P(0x10fff))); /* a view into the middle */
    CHECK(!kcu_ranges_contains(&rs, P(0x11000)));
    CHECK(kcu_ranges_contains(&rs, P(0x207ff)));
    CHECK(!kcu_ranges_contains(&rs, P(0x20800)));
    CHECK(!kcu_ranges_contains(&rs, P(0xffff)));
    CHECK(kcu_ranges_contains(&rs, P(0x300ff)));
    kiln_err err = {0};
    CHECK_EQ_INT(kcu_ranges_add(&rs, P(0x10800), 0x100, &err), KILN_E_INTERNAL); /* inside */
    CHECK_EQ_INT(kcu_ranges_add(&rs, P(0xf000), 0x1001, &err), KILN_E_INTERNAL); /* runs into the next */
    CHECK_EQ_INT(kcu_ranges_add(&rs, P(0xf000), 0x1000, &err), KILN_OK);        /* touches: fine */
    CHECK(!kcu_ranges_remove(&rs, P(0x10001)));
    CHECK(kcu_ranges_remove(&rs, P(0x10000)));
    CHECK(!kcu_ranges_contains(&rs, P(0x10010)));
    CHECK(kcu_ranges_contains(&rs, P(0xf010)));
    CHECK(!kcu_ranges_remove(&rs, P(0x10000)));
    for (int i = 0; i < 500; i++) CHECK_EQ_INT(kcu_ranges_add(&rs, P(0x1000000 + 0x1000 * (uintptr_t)i), 0x800, NULL), KILN_OK);
    int bad = 0;
    for (int i = 0; i < 500; i++) {
        if (!kcu_ranges_contains(&rs, P(0x1000000 + 0x1000 * (uintptr_t)i + 0x7ff))) bad++;
        if (kcu_ranges_contains(&rs, P(0x1000000 + 0x1000 * (uintptr_t)i + 0x800))) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    kcu_ranges_free(&rs);
}

static int released;
static void release(void *ctx, void *dev) { released++; }

static void test_wcache(void) {
    kcu_wcache c;
    kcu_wcache_init(&c);
    CHECK(kcu_wcache_find(&c, P(0x1000), 64) == NULL);
    CHECK_EQ_INT(kcu_wcache_put(&c, P(0x1000), 64, P(0xd000), NULL), KILN_OK);
    CHECK(kcu_wcache_find(&c, P(0x1000), 64) == P(0xd000));
    CHECK(kcu_wcache_find(&c, P(0x1000), 32) == NULL); /* same address, other size: another weight view */
    CHECK_EQ_INT(kcu_wcache_put(&c, P(0x1000), 32, P(0xe000), NULL), KILN_OK);
    CHECK(kcu_wcache_find(&c, P(0x1000), 32) == P(0xe000));
    CHECK(kcu_wcache_find(&c, P(0x1000), 64) == P(0xd000));
    for (uintptr_t i = 0; i < 2000; i++) CHECK_EQ_INT(kcu_wcache_put(&c, P(0x100000 + 64 * i), 64, P(0x900000 + i), NULL), KILN_OK);
    int bad = 0;
    for (uintptr_t i = 0; i < 2000; i++)
        if (kcu_wcache_find(&c, P(0x100000 + 64 * i), 64) != P(0x900000 + i)) bad++;
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(c.count, 2002);
    CHECK_EQ_INT(c.bytes, 64 + 32 + 2000 * 64);
    kiln_err err = {0};
    CHECK_EQ_INT(kcu_wcache_put(&c, NULL, 1, P(1), &err), KILN_E_INVALID);
    released = 0;
    kcu_wcache_free(&c, release, NULL);
    CHECK_EQ_INT(released, 2002);
    CHECK(kcu_wcache_find(&c, P(0x1000), 64) == NULL);
}

static void test_out_of_memory(void) {
    kcu_wcache c;
    kcu_wcache_init(&c);
    kiln_err err = {0};
    kiln_fault_alloc_fail_at(1, false);
    CHECK_EQ_INT(kcu_wcache_put(&c, P(0x1000), 8, P(0x2000), &err), KILN_E_NOMEM);
    kiln_fault_alloc_fail_at(0, false);
    CHECK(kcu_wcache_find(&c, P(0x1000), 8) == NULL);
    kcu_wcache_free(&c, NULL, NULL);
    kcu_ranges rs;
    kcu_ranges_init(&rs);
    kiln_fault_alloc_fail_at(1, false);
    CHECK_EQ_INT(kcu_ranges_add(&rs, P(0x1000), 8, &err), KILN_E_NOMEM);
    kiln_fault_alloc_fail_at(0, false);
    CHECK(!kcu_ranges_contains(&rs, P(0x1000)));
    kcu_ranges_free(&rs);
}

int main(void) {
    RUN(test_ranges);
    RUN(test_wcache);
    RUN(test_out_of_memory);
    return test_summary();
}
