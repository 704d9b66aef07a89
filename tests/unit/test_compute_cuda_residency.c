/* test_compute_cuda_residency.c - the placed-weight table of the CUDA backend (host logic, no GPU needed; the
 * "device" addresses are fake and never dereferenced). The scenario that made the old cache (keyed by host
 * address, never forgetting) hand out a stale copy: the text encoder released and a mapping made again. */
#include <stdint.h>

#include "base/alloc.h"
#include "compute/cuda/cuda_residency.h"
#include "test.h"

#define P(x) ((void *)(uintptr_t)(x))

static void test_translate(void) {
    kcu_placements pl;
    kcu_placements_init(&pl);
    kiln_err err = {0};
    CHECK(kcu_placements_translate(&pl, P(0x10000), 4) == NULL);
    CHECK_EQ_INT(kcu_placements_add(&pl, P(0x10000), 0x1000, P(0xd0000), &err), KILN_OK);
    CHECK_EQ_INT(kcu_placements_add(&pl, P(0x20000), 0x800, P(0xe0000), &err), KILN_OK);
    CHECK(kcu_placements_translate(&pl, P(0x10000), 0x1000) == P(0xd0000));
    CHECK(kcu_placements_translate(&pl, P(0x10200), 0x40) == P(0xd0200)); /* a view: same offset in the copy */
    CHECK(kcu_placements_translate(&pl, P(0x10fc0), 0x40) == P(0xd0fc0));
    CHECK(kcu_placements_translate(&pl, P(0x10fc0), 0x41) == NULL); /* runs past the placement */
    CHECK(kcu_placements_translate(&pl, P(0x207ff), 1) == P(0xe07ff));
    CHECK(kcu_placements_translate(&pl, P(0x20800), 1) == NULL);
    CHECK_EQ_INT(kcu_placements_add(&pl, P(0x10800), 0x100, P(0xf0000), &err), KILN_E_INVALID); /* overlap */
    CHECK_EQ_INT(kcu_placements_add(&pl, P(0x30000), 8, NULL, &err), KILN_E_INVALID);
    CHECK_EQ_INT(pl.bytes, 0x1800);
    for (int i = 0; i < 500; i++)
        CHECK_EQ_INT(kcu_placements_add(&pl, P(0x1000000 + 0x1000 * (uintptr_t)i), 0x800, P(0x9000000 + 0x1000 * (uintptr_t)i), &err), KILN_OK);
    int bad = 0;
    for (int i = 0; i < 500; i++) {
        uintptr_t h = 0x1000000 + 0x1000 * (uintptr_t)i;
        if (kcu_placements_translate(&pl, P(h + 0x7fc), 4) != P(0x9000000 + 0x1000 * (uintptr_t)i + 0x7fc)) bad++;
        if (kcu_placements_translate(&pl, P(h + 0x800), 4)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    kcu_placements_free(&pl, NULL, NULL);
}

/* The text encoder is placed, released (its mapping unmapped: generate.c releases it when memory is short) and
 * opened again. Whatever lands at its old address must not get its old device copy, and its copy is freed. */
static void test_release_and_remap(void) {
    kcu_placements pl;
    kcu_placements_init(&pl);
    kiln_err err = {0};
    const uintptr_t te_map = 0x7f0000000000u, elsewhere = 0x7e0000000000u;
    CHECK_EQ_INT(kcu_placements_add(&pl, P(te_map), 1 << 20, P(0xa00000000), &err), KILN_OK); /* text encoder */
    CHECK(kcu_placements_translate(&pl, P(te_map + 0x100), 32) == P(0xa00000100));
    /* released: the copy comes back to be freed, and its host range is nobody's any more */
    CHECK(kcu_placements_remove(&pl, P(te_map)) == P(0xa00000000));
    CHECK(kcu_placements_translate(&pl, P(te_map + 0x100), 32) == NULL);
    CHECK_EQ_INT(pl.bytes, 0);
    /* another model's tensors mapped at the same address, same size: they get THEIR copy, not the stale one */
    CHECK_EQ_INT(kcu_placements_add(&pl, P(te_map), 1 << 20, P(0xb00000000), &err), KILN_OK);
    CHECK(kcu_placements_translate(&pl, P(te_map + 0x100), 32) == P(0xb00000100));
    /* the text encoder mapped again elsewhere: placed again; one copy per live placement, nothing leaked */
    CHECK_EQ_INT(kcu_placements_add(&pl, P(elsewhere), 1 << 20, P(0xc00000000), &err), KILN_OK);
    CHECK(kcu_placements_translate(&pl, P(elsewhere + 0x100), 32) == P(0xc00000100));
    CHECK_EQ_INT(pl.bytes, 2 << 20);
    CHECK(kcu_placements_remove(&pl, P(te_map + 1)) == NULL); /* only by its start */
    CHECK(kcu_placements_remove(&pl, P(0x1234)) == NULL);
    kcu_placements_free(&pl, NULL, NULL);
}

static int released;
static void release(void *ctx, void *dev) { released++; }

static void test_free_releases_and_oom(void) {
    kcu_placements pl;
    kcu_placements_init(&pl);
    kiln_err err = {0};
    for (uintptr_t i = 0; i < 70; i++) CHECK_EQ_INT(kcu_placements_add(&pl, P(0x100000 + 64 * i), 64, P(0x900000 + 64 * i), &err), KILN_OK);
    CHECK(kcu_placements_remove(&pl, P(0x100000)) == P(0x900000));
    released = 0;
    kcu_placements_free(&pl, release, NULL);
    CHECK_EQ_INT(released, 69);
    CHECK(kcu_placements_translate(&pl, P(0x100040), 4) == NULL);
    kcu_placements_init(&pl);
    kiln_fault_alloc_fail_at(1, false);
    CHECK_EQ_INT(kcu_placements_add(&pl, P(0x1000), 8, P(0x2000), &err), KILN_E_NOMEM);
    kiln_fault_alloc_fail_at(0, false);
    CHECK(kcu_placements_translate(&pl, P(0x1000), 8) == NULL);
    CHECK_EQ_INT(pl.bytes, 0);
    kcu_placements_free(&pl, NULL, NULL);
}

int main(void) {
    RUN(test_translate);
    RUN(test_release_and_remap);
    RUN(test_free_releases_and_oom);
    return test_summary();
}
