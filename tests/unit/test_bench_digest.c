/* test_bench_digest.c - canonical JSON (against Python's json.dumps(sort_keys, compact, ensure_ascii=False)),
 * sha256 of bytes/files/graphs, and the model digest cache keyed by path + size + mtime. */
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "bench/canon.h"
#include "bench/digest.h"
#include "test.h"

static void test_real_format_matches_python_repr(void) {
    /* json.dumps(v) in Python 3 for each value */
    struct { double v; const char *s; } cases[] = {
        {1.0, "1.0"}, {0.1, "0.1"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {1e-5, "1e-05"},
        {0.0001, "0.0001"}, {-0.0, "-0.0"}, {123456.789, "123456.789"}, {1.5e-7, "1.5e-07"},
        {2.5e300, "2.5e+300"}, {5e-324, "5e-324"}, {0.30000000000000004, "0.30000000000000004"}, {95.0, "95.0"},
        {1790018454.922508, "1790018454.922508"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_EQ_STR(kiln_json_format_real(cases[i].v, buf, sizeof buf), cases[i].s);
}

static void test_canonical_json_and_graph_digest(void) {
    json_error_t je;
    const char *text = "{ \"b\": [1, 2.5, \"x\\n\\u0001\\\"\\\\\xc3\xa9\"],\n  \"a\": null, \"A\": true }";
    json_t *v = json_loads(text, 0, &je);
    CHECK(v != NULL);
    char *s;
    size_t n;
    CHECK_EQ_INT(kiln_json_canonical(v, &s, &n, NULL), KILN_OK);
    CHECK_EQ_STR(s, "{\"A\":true,\"a\":null,\"b\":[1,2.5,\"x\\n\\u0001\\\"\\\\\xc3\xa9\"]}");
    CHECK_EQ_INT(n, strlen(s));
    kiln_free(s);
    char hex[65];
    CHECK_EQ_INT(kiln_graph_digest(v, hex, NULL), KILN_OK);
    /* hashlib.sha256(json.dumps(..., sort_keys=True, separators=(',',':'), ensure_ascii=False).encode()) */
    CHECK_EQ_STR(hex, "b7f42e346f176b2a87dde6dc0eee91e626e871e315cc5237dcabb79ef03f2423");
    /* Same meaning, different whitespace and key order: same digest. */
    json_t *w = json_loads("{\"A\":true,\"b\":[1,2.5,\"x\\n\\u0001\\\"\\\\\xc3\xa9\"],\"a\":null}", 0, &je);
    char hex2[65];
    CHECK_EQ_INT(kiln_graph_digest(w, hex2, NULL), KILN_OK);
    CHECK_EQ_STR(hex, hex2);
    json_decref(v);
    json_decref(w);
    /* Empty containers (an empty inputs object) are canonical too. */
    json_t *e = json_loads("{\"b\":{},\"a\":[]}", 0, &je);
    CHECK_EQ_INT(kiln_json_canonical(e, &s, &n, NULL), KILN_OK);
    CHECK_EQ_STR(s, "{\"a\":[],\"b\":{}}");
    kiln_free(s);
    json_decref(e);
}

static void test_sha256_bytes_and_file(void) {
    char hex[65];
    kiln_sha256_hex("abc", 3, hex); /* FIPS 180-2 example */
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    kiln_sha256_hex("", 0, hex);
    CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    char path[] = "/tmp/kiln-digest-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "abc", 3) == 3);
    close(fd);
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_sha256_file(path, hex, &err), KILN_OK);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_EQ_INT(kiln_sha256_file("/nonexistent/kiln/x", hex, &err), KILN_E_NOT_FOUND);
    CHECK_ERR_CONTAINS(&err, "/nonexistent/kiln/x");
    unlink(path);
}

static void test_digest_cache_by_path_size_mtime(void) {
    char dir[] = "/tmp/kiln-dcache-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char model[256], cache[256];
    snprintf(model, sizeof model, "%s/model.bin", dir);
    snprintf(cache, sizeof cache, "%s/cache.json", dir);
    FILE *f = fopen(model, "wb");
    fputs("abc", f);
    fclose(f);
    kiln_err err = {0};
    kiln_digest_cache *c = kiln_digest_cache_open(cache, &err);
    CHECK(c != NULL);
    char hex[65];
    bool hit = true;
    CHECK_EQ_INT(kiln_digest_cache_file(c, model, hex, &hit, &err), KILN_OK);
    CHECK(!hit);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_EQ_INT(kiln_digest_cache_file(c, model, hex, &hit, &err), KILN_OK);
    CHECK(hit);
    kiln_digest_cache_close(c); /* written back */
    /* A second process sees the entry; proof it is used: the cached digest is returned, not the file's. */
    c = kiln_digest_cache_open(cache, &err);
    CHECK_EQ_INT(kiln_digest_cache_file(c, model, hex, &hit, &err), KILN_OK);
    CHECK(hit);
    kiln_digest_cache_close(c);
    /* Change size (and so the entry no longer matches): hashed again. */
    f = fopen(model, "wb");
    fputs("abcd", f);
    fclose(f);
    c = kiln_digest_cache_open(cache, &err);
    CHECK_EQ_INT(kiln_digest_cache_file(c, model, hex, &hit, &err), KILN_OK);
    CHECK(!hit);
    CHECK_EQ_STR(hex, "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589");
    CHECK_EQ_INT(kiln_digest_cache_file(c, "/nonexistent/kiln/m", hex, &hit, &err), KILN_E_NOT_FOUND);
    kiln_digest_cache_close(c);
    /* A corrupt cache is an empty cache, not a failure. */
    f = fopen(cache, "wb");
    fputs("{not json", f);
    fclose(f);
    c = kiln_digest_cache_open(cache, &err);
    CHECK(c != NULL);
    CHECK_EQ_INT(kiln_digest_cache_file(c, model, hex, &hit, &err), KILN_OK);
    CHECK(!hit);
    kiln_digest_cache_close(c);
    unlink(model);
    unlink(cache);
    rmdir(dir);
}

int main(void) {
    RUN(test_real_format_matches_python_repr);
    RUN(test_canonical_json_and_graph_digest);
    RUN(test_sha256_bytes_and_file);
    RUN(test_digest_cache_by_path_size_mtime);
    return test_summary();
}
