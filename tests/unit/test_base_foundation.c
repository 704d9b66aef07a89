/* test_base_foundation.c - UTF-8 validation, arena, SHA-256 (known vectors, buffer vs streamed file). */
#include <stdint.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/sha256.h"
#include "base/utf8.h"
#include "test.h"

static void test_utf8(void) {
    size_t bad = 99;
    CHECK(kiln_utf8_valid("", 0, &bad));
    CHECK(kiln_utf8_valid("plain.weight", 12, &bad));
    CHECK(kiln_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, &bad)); /* e-acute, euro, emoji */
    CHECK(!kiln_utf8_valid("ab\xff", 3, &bad) && bad == 2);
    CHECK(!kiln_utf8_valid("\xc0\xaf", 2, &bad) && bad == 0);     /* overlong '/' */
    CHECK(!kiln_utf8_valid("x\xed\xa0\x80", 4, &bad) && bad == 1); /* surrogate D800 */
    CHECK(!kiln_utf8_valid("\xf4\x90\x80\x80", 4, &bad));         /* above U+10FFFF */
    CHECK(!kiln_utf8_valid("\xe2\x82", 2, &bad) && bad == 0);      /* truncated sequence */
    CHECK(!kiln_utf8_valid("\xe2\x28\xa1", 3, &bad));              /* bad continuation */
    CHECK(kiln_utf8_valid("\xf4\x8f\xbf\xbf", 4, &bad));           /* U+10FFFF itself */
}

static void test_arena(void) {
    kiln_arena a;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_arena_init(&a, 1000, &err), KILN_OK);
    char *p = kiln_arena_alloc(&a, 10);
    char *q = kiln_arena_alloc(&a, 10);
    CHECK(p && q && ((uintptr_t)p % 64) == 0 && ((uintptr_t)q % 64) == 0 && q - p == 64);
    size_t mark = kiln_arena_mark(&a);
    CHECK(kiln_arena_alloc(&a, 900) == NULL); /* does not fit: arena unchanged */
    CHECK_EQ_INT(kiln_arena_mark(&a), mark);
    int *z = kiln_arena_calloc(&a, 4, sizeof(int));
    CHECK(z && z[0] == 0 && z[3] == 0);
    CHECK(kiln_arena_calloc(&a, SIZE_MAX / 2, 4) == NULL);
    kiln_arena_reset_to(&a, mark);
    CHECK_EQ_INT(kiln_arena_mark(&a), mark);
    CHECK(kiln_arena_high_water(&a) >= mark + 16);
    kiln_arena_reset(&a);
    CHECK(kiln_arena_alloc(&a, 1000) == p); /* the whole block again */
    kiln_arena_free(&a);
    kiln_fault_alloc_fail_at(1, false);
    CHECK_EQ_INT(kiln_arena_init(&a, 64, &err), KILN_E_NOMEM);
    kiln_fault_alloc_fail_at(0, false);
    kiln_arena_free(&a);
    char buf[300];
    kiln_arena_init_buffer(&a, buf, sizeof buf);
    void *b1 = kiln_arena_alloc(&a, 100);
    CHECK(b1 && (char *)b1 >= buf && (char *)b1 + 100 <= buf + sizeof buf);
    kiln_arena_free(&a); /* does not free buf */
}

static void test_sha256(void) {
    char hex[65];
    CHECK(kiln_sha256_buffer("", 0, hex));
    CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(kiln_sha256_buffer("abc", 3, hex));
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* a file of 20 MiB + 3 bytes (crosses the 8 MiB read block) hashes like the same bytes in memory */
    size_t n = (20u << 20) + 3;
    unsigned char *data = kiln_malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 2654435761u >> 13);
    char path[] = "/tmp/kiln-sha-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, data, n) == (ssize_t)n);
    close(fd);
    char want[65], got[65];
    CHECK(kiln_sha256_buffer(data, n, want));
    kiln_sha256 *h = kiln_sha256_new(NULL);
    kiln_sha256_update(h, data, 5);
    kiln_sha256_update(h, data + 5, n - 5);
    kiln_sha256_final(h, hex);
    CHECK_EQ_STR(hex, want);
    uint64_t bytes = 0;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_sha256_path(path, got, &bytes, &err), KILN_OK);
    CHECK_EQ_STR(got, want);
    CHECK_EQ_INT(bytes, n);
    unlink(path);
    CHECK_EQ_INT(kiln_sha256_path(path, got, NULL, &err), KILN_E_NOT_FOUND);
    CHECK_ERR_CONTAINS(&err, path);
    kiln_free(data);
}

int main(void) {
    RUN(test_utf8);
    RUN(test_arena);
    RUN(test_sha256);
    return test_summary();
}
