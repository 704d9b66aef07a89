/* test_io_gguf.c - the GGUF reader (io/gguf.h): a file written by the gguf PyPI package (tests/data/gguf/tiny.gguf,
 * tools/reference/make_gguf.py) read back field by field, and corrupt files built here byte by byte, each
 * refused with an error that names the problem. Every prefix of the valid file is refused too (no read past the
 * end; ASan watches). */
#include <stdint.h>

#include "base/alloc.h"
#include "io/gguf.h"
#include "tensor/quant.h"
#include "test.h"

/* ---- a byte builder for hand-made files ---------------------------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = kiln_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_u64(buf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void header(buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void kv_str(buf *b, const char *key, const char *val) {
    put_str(b, key);
    put_u32(b, KILN_GGUF_STRING);
    put_str(b, val);
}
static void kv_u32(buf *b, const char *key, uint32_t val) {
    put_str(b, key);
    put_u32(b, KILN_GGUF_U32);
    put_u32(b, val);
}
/* A tensor info with ne given in file order (ne[0] = a row). */
static void tinfo(buf *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    put_str(b, name);
    put_u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++) put_u64(b, ne[i]);
    put_u32(b, type);
    put_u64(b, off);
}
static void pad_data(buf *b, size_t align, size_t data_bytes) {
    while (b->n % align) put(b, "", 1);
    for (size_t i = 0; i < data_bytes; i++) put(b, "\x11", 1);
}

/* Opens b and expects failure with code and a message containing needle. */
static void expect_fail(buf *b, kiln_status code, const char *needle) {
    kiln_gguf_file *g = (kiln_gguf_file *)1;
    kiln_err err = {0};
    kiln_status s = kiln_gguf_open_memory(b->p, b->n, "t.gguf", &g, &err);
    CHECK_MSG(s == code, "status %d, expected %d (%s); message: %s", s, code, needle, err.msg);
    CHECK(g == NULL);
    CHECK_ERR_CONTAINS(&err, needle);
    CHECK_ERR_CONTAINS(&err, "t.gguf");
    if (s == KILN_OK) kiln_gguf_close(g);
    kiln_free(b->p);
    memset(b, 0, sizeof *b);
}

/* A valid base: one Q8_0 tensor [2 rows x 32] and one F32 [4], default alignment. */
static void small_file(buf *b, uint64_t off_b, size_t data) {
    header(b, 3, 2, 1);
    kv_str(b, "general.architecture", "flux2");
    tinfo(b, "a.weight", 2, (uint64_t[]){32, 2}, KILN_QT_Q8_0, 0);
    tinfo(b, "b.weight", 1, (uint64_t[]){4}, KILN_QT_F32, off_b);
    pad_data(b, 32, data);
}

/* ---- the valid file from the gguf package --------------------------------------------------------------------- */

static void test_tiny_from_gguf_package(void) {
    kiln_gguf_file *g;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_gguf_open(test_src_path("tests/data/gguf/tiny.gguf"), &g, &err), KILN_OK);
    if (!g) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    CHECK_EQ_INT(kiln_gguf_version(g), 3);
    CHECK_EQ_INT(kiln_gguf_alignment(g), 64);
    CHECK_EQ_STR(kiln_gguf_architecture(g), "flux2");
    CHECK_EQ_INT(kiln_gguf_kv_count(g), 19);
    CHECK_EQ_INT(kiln_gguf_count(g), 8);
    int64_t i;
    uint64_t u;
    double f;
    const kiln_gguf_kv *kv;
    CHECK((kv = kiln_gguf_kv_find(g, "test.u8")) && kv->type == KILN_GGUF_U8 && kiln_gguf_kv_int(kv, 0, &i) && i == 200);
    CHECK((kv = kiln_gguf_kv_find(g, "test.i8")) && kiln_gguf_kv_int(kv, 0, &i) && i == -100);
    CHECK((kv = kiln_gguf_kv_find(g, "test.u16")) && kiln_gguf_kv_int(kv, 0, &i) && i == 60000);
    CHECK((kv = kiln_gguf_kv_find(g, "test.i16")) && kiln_gguf_kv_int(kv, 0, &i) && i == -30000);
    CHECK((kv = kiln_gguf_kv_find(g, "test.u32")) && kiln_gguf_kv_int(kv, 0, &i) && i == 4000000000ll);
    CHECK((kv = kiln_gguf_kv_find(g, "test.i32")) && kiln_gguf_kv_int(kv, 0, &i) && i == -2000000000ll);
    CHECK((kv = kiln_gguf_kv_find(g, "test.f32")) && kiln_gguf_kv_float(kv, 0, &f) && f == 0.375);
    CHECK((kv = kiln_gguf_kv_find(g, "test.u64")) && kiln_gguf_kv_uint(kv, 0, &u) && u == 18000000000000000000ull);
    CHECK(kv && !kiln_gguf_kv_int(kv, 0, &i)); /* does not fit an int64 */
    CHECK((kv = kiln_gguf_kv_find(g, "test.i64")) && kiln_gguf_kv_int(kv, 0, &i) && i == -9000000000000000000ll);
    CHECK((kv = kiln_gguf_kv_find(g, "test.f64")) && kiln_gguf_kv_float(kv, 0, &f) && f == -2.5e300);
    CHECK((kv = kiln_gguf_kv_find(g, "test.bool")) && kv->type == KILN_GGUF_BOOL && kiln_gguf_kv_int(kv, 0, &i) && i == 1);
    CHECK((kv = kiln_gguf_kv_find(g, "test.str")) && kv->str && strcmp(kv->str, "klein \xc3\xa9t\xc3\xa9") == 0);
    CHECK((kv = kiln_gguf_kv_find(g, "test.arr_i32")) && kv->type == KILN_GGUF_ARRAY && kv->elem_type == KILN_GGUF_I32 &&
          kv->count == 3 && kiln_gguf_kv_int(kv, 1, &i) && i == -2 && kiln_gguf_kv_int(kv, 2, &i) && i == 3 &&
          !kiln_gguf_kv_int(kv, 3, &i));
    CHECK((kv = kiln_gguf_kv_find(g, "test.arr_f32")) && kv->count == 2 && kiln_gguf_kv_float(kv, 1, &f) && f == -1.25);
    CHECK((kv = kiln_gguf_kv_find(g, "test.arr_bool")) && kv->count == 3 && kiln_gguf_kv_int(kv, 1, &i) && i == 0);
    CHECK((kv = kiln_gguf_kv_find(g, "test.arr_u8")) && kv->elem_type == KILN_GGUF_U8 && kv->count == 4 &&
          kiln_gguf_kv_int(kv, 3, &i) && i == 10);
    const char *s;
    size_t n;
    kv = kiln_gguf_kv_find(g, "test.arr_str");
    CHECK(kv && kv->elem_type == KILN_GGUF_STRING && kv->count == 3);
    CHECK(kv && kiln_gguf_kv_array_str(kv, 0, &s, &n) && n == 1 && s[0] == 'a');
    CHECK(kv && kiln_gguf_kv_array_str(kv, 1, &s, &n) && n == 0);
    CHECK(kv && kiln_gguf_kv_array_str(kv, 2, &s, &n) && n == 5 && memcmp(s, "\xc3\xbc" "ber", 5) == 0);
    CHECK(kv && !kiln_gguf_kv_array_str(kv, 3, &s, &n));
    /* tensors: as tiny.gguf.txt lists them (the gguf package's reader) */
    static const struct {
        const char *name;
        uint32_t type;
        int64_t rows, cols;
        uint64_t offset;
    } want[] = {
        {"img_in.weight", KILN_QT_Q8_0, 64, 256, 0},
        {"txt_in.weight", KILN_QT_Q4_K, 64, 512, 18624 - 1216},
        {"double_stream_modulation_img.lin.weight", KILN_QT_Q6_K, 48, 256, 37056 - 1216},
        {"double_blocks.0.img_attn.qkv.weight", KILN_QT_Q4_K, 24, 256, 47168 - 1216},
        {"double_blocks.1.img_attn.qkv.weight", KILN_QT_Q8_0, 24, 256, 50624 - 1216},
        {"single_blocks.0.linear1.weight", KILN_QT_BF16, 16, 256, 57152 - 1216},
        {"final_layer.linear.weight", KILN_QT_F16, 16, 64, 65472 - 1216},
    };
    CHECK_EQ_INT(kiln_gguf_data_offset(g), 1216);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const kiln_gguf_tensor *t = kiln_gguf_find(g, want[k].name);
        CHECK_MSG(t != NULL, "no tensor %s", want[k].name);
        if (!t) continue;
        CHECK_EQ_INT(t->type, want[k].type);
        CHECK(t->ndim == 2 && t->shape[0] == want[k].rows && t->shape[1] == want[k].cols);
        CHECK(t->ne[0] == want[k].cols && t->ne[1] == want[k].rows);
        CHECK_EQ_INT(t->offset, want[k].offset);
        CHECK_EQ_INT(t->nbytes, kiln_qtype_nbytes(kiln_qtype_get(t->type), (size_t)t->numel));
    }
    const kiln_gguf_tensor *sc = kiln_gguf_find(g, "double_blocks.0.img_attn.norm.query_norm.scale");
    CHECK(sc && sc->ndim == 1 && sc->shape[0] == 32 && sc->type == KILN_QT_F32 && sc->nbytes == 128);
    CHECK(kiln_gguf_find(g, "nope") == NULL);
    CHECK(kiln_gguf_at(g, 0) && strcmp(kiln_gguf_at(g, 0)->name, "img_in.weight") == 0);
    /* the F16 tensor dequantises to what the gguf package stored (f16 of small normal values: within 0.3) */
    const kiln_gguf_tensor *fl = kiln_gguf_find(g, "final_layer.linear.weight");
    float vals[1024];
    CHECK(fl && kiln_dequant(vals, fl->type, fl->data, 1024, NULL) == KILN_OK);
    for (int k = 0; fl && k < 1024; k++) CHECK(fabsf(vals[k]) < 0.3f);
    kiln_gguf_close(g);
}

static void test_every_prefix_is_refused(void) {
    FILE *f = fopen(test_src_path("tests/data/gguf/tiny.gguf"), "rb");
    CHECK(f != NULL);
    if (!f) return;
    static uint8_t data[1 << 17];
    size_t n = fread(data, 1, sizeof data, f);
    fclose(f);
    int refused = 0;
    /* every length up to the end of the tensor infos, then strides through the data */
    for (size_t len = 0; len < n; len += len < 1300 ? 1 : 997) {
        uint8_t *copy = kiln_malloc(len ? len : 1); /* exact-size copy: ASan sees any read past len */
        memcpy(copy, data, len);
        kiln_gguf_file *g;
        kiln_err err = {0};
        kiln_status s = kiln_gguf_open_memory(copy, len, "cut.gguf", &g, &err);
        if (s == KILN_E_FORMAT) refused++;
        else CHECK_MSG(0, "prefix of %zu bytes: status %d", len, s);
        kiln_gguf_close(g);
        kiln_free(copy);
    }
    CHECK(refused > 1300);
}

/* ---- corrupt files -------------------------------------------------------------------------------------------- */

static void test_small_valid_and_v2(void) {
    buf b = {0};
    small_file(&b, 96, 112);
    kiln_gguf_file *g;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_gguf_open_memory(b.p, b.n, "t.gguf", &g, &err), KILN_OK);
    if (g) {
        CHECK(kiln_gguf_count(g) == 2 && kiln_gguf_find(g, "a.weight")->nbytes == 68);
        CHECK(kiln_gguf_find(g, "b.weight")->data == b.p + kiln_gguf_data_offset(g) + 96);
        kiln_gguf_close(g);
    }
    b.p[4] = 2; /* version 2: same layout */
    CHECK_EQ_INT(kiln_gguf_open_memory(b.p, b.n, "t.gguf", &g, &err), KILN_OK);
    kiln_gguf_close(g);
    kiln_free(b.p);
}

static void test_header_errors(void) {
    buf b = {0};
    small_file(&b, 96, 112);
    b.p[3] = 'G';
    expect_fail(&b, KILN_E_FORMAT, "not a GGUF file");
    small_file(&b, 96, 112);
    b.p[4] = 1;
    expect_fail(&b, KILN_E_FORMAT, "version 1");
    small_file(&b, 96, 112);
    b.p[4] = 0, b.p[7] = 3;
    expect_fail(&b, KILN_E_FORMAT, "big-endian");
    small_file(&b, 96, 112);
    b.p[4] = 4;
    expect_fail(&b, KILN_E_FORMAT, "version 4 is not supported");
    header(&b, 3, 0, 1ull << 40);
    expect_fail(&b, KILN_E_FORMAT, "metadata entries cannot fit");
    header(&b, 3, 1ull << 50, 0);
    pad_data(&b, 32, 200);
    expect_fail(&b, KILN_E_FORMAT, "tensor infos cannot fit");
    put(&b, "GGU", 3);
    expect_fail(&b, KILN_E_FORMAT, "the magic at byte 0 needs 4 bytes");
}

static void test_kv_errors(void) {
    buf b = {0};
    header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, 13);
    put_u32(&b, 0);
    expect_fail(&b, KILN_E_FORMAT, "'k' has unknown value type 13");
    header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, KILN_GGUF_ARRAY);
    put_u32(&b, KILN_GGUF_ARRAY);
    put_u64(&b, 1);
    put_u64(&b, 0);
    expect_fail(&b, KILN_E_FORMAT, "array of arrays");
    header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, KILN_GGUF_ARRAY);
    put_u32(&b, KILN_GGUF_U32);
    put_u64(&b, 1000);
    put_u64(&b, 0);
    expect_fail(&b, KILN_E_FORMAT, "array 'k' claims 1000 u32 elements");
    header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, KILN_GGUF_ARRAY);
    put_u32(&b, KILN_GGUF_STRING);
    put_u64(&b, 2);
    put_str(&b, "ok");
    put_u64(&b, 99); /* second string's length runs off the end */
    put(&b, "abc", 3);
    expect_fail(&b, KILN_E_FORMAT, "string value of 'k' (99 bytes)");
    header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, KILN_GGUF_BOOL);
    put(&b, "\x02", 1);
    expect_fail(&b, KILN_E_FORMAT, "bool value of 'k' at byte 37 is 2");
    header(&b, 3, 0, 1);
    put_str(&b, "");
    put_u32(&b, KILN_GGUF_U8);
    put(&b, "\x02\x00", 2);
    expect_fail(&b, KILN_E_FORMAT, "a metadata key at byte 24 is empty");
    header(&b, 3, 0, 1);
    put_u64(&b, 2);
    put(&b, "\xff\xfe", 2);
    put_u32(&b, KILN_GGUF_U8);
    put(&b, "\x02", 1);
    expect_fail(&b, KILN_E_FORMAT, "is not UTF-8");
    header(&b, 3, 0, 2);
    kv_u32(&b, "dup", 1);
    kv_u32(&b, "dup", 2);
    expect_fail(&b, KILN_E_FORMAT, "key 'dup' appears twice");
    header(&b, 3, 0, 1);
    put_str(&b, "s");
    put_u32(&b, KILN_GGUF_STRING);
    put_u64(&b, 3);
    put(&b, "a\0b", 3);
    expect_fail(&b, KILN_E_FORMAT, "string value of 's' holds a NUL");
    header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, KILN_GGUF_U64);
    put_u32(&b, 7); /* 4 of 8 bytes */
    expect_fail(&b, KILN_E_FORMAT, "u64 value of 'k' at byte 37 needs 8 bytes but only 4 are left");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect_fail(&b, KILN_E_FORMAT, "general.alignment 48 is not a power of two");
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect_fail(&b, KILN_E_FORMAT, "general.alignment 0 is not a power of two");
    header(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "32");
    expect_fail(&b, KILN_E_FORMAT, "general.alignment is a string, not a u32");
}

static void test_tensor_errors(void) {
    buf b = {0};
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 0, NULL, KILN_QT_F32, 0);
    pad_data(&b, 32, 8);
    expect_fail(&b, KILN_E_FORMAT, "tensor 't' has 0 dimensions (GGUF allows 1 to 4)");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 5, (uint64_t[]){1, 1, 1, 1, 1}, KILN_QT_F32, 0);
    pad_data(&b, 32, 8);
    expect_fail(&b, KILN_E_FORMAT, "has 5 dimensions");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, (uint64_t[]){4, 0}, KILN_QT_F32, 0);
    pad_data(&b, 32, 8);
    expect_fail(&b, KILN_E_FORMAT, "tensor 't' has a dimension of size 0");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 3, (uint64_t[]){1ull << 30, 1ull << 30, 1ull << 30}, KILN_QT_F32, 0);
    pad_data(&b, 32, 8);
    expect_fail(&b, KILN_E_FORMAT, "tensor 't': its shape is too large");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, (uint64_t[]){1ull << 31, 1ull << 31}, KILN_QT_Q8_0, 0);
    pad_data(&b, 32, 8);
    expect_fail(&b, KILN_E_FORMAT, "runs past the end of the file");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 1, (uint64_t[]){32}, 99, 0);
    pad_data(&b, 32, 64);
    expect_fail(&b, KILN_E_FORMAT, "tensor 't' has unknown GGML type 99");
    header(&b, 3, 1, 0);
    tinfo(&b, "t", 2, (uint64_t[]){100, 2}, KILN_QT_Q4_K, 0);
    pad_data(&b, 32, 400);
    expect_fail(&b, KILN_E_FORMAT, "a row of 100 values is not a whole number of Q4_K blocks of 256");
    small_file(&b, 4, 112); /* b.weight at data offset 4 */
    expect_fail(&b, KILN_E_FORMAT, "tensor 'b.weight' starts at data offset 4, not a multiple of the alignment 32");
    small_file(&b, 32, 112); /* b.weight inside a.weight's 68 bytes */
    expect_fail(&b, KILN_E_FORMAT, "tensors 'a.weight' [0, 68) and 'b.weight' [32, 48) overlap");
    small_file(&b, 96, 111); /* one byte short */
    expect_fail(&b, KILN_E_FORMAT, "tensor 'b.weight' (16 bytes at data offset 96, file offset 256) runs past the end");
    small_file(&b, 96, 112);
    b.n = 100; /* cut inside the tensor infos */
    expect_fail(&b, KILN_E_FORMAT, "needs");
    header(&b, 3, 2, 0);
    tinfo(&b, "same", 1, (uint64_t[]){4}, KILN_QT_F32, 0);
    tinfo(&b, "same", 1, (uint64_t[]){4}, KILN_QT_F32, 32);
    pad_data(&b, 32, 64);
    expect_fail(&b, KILN_E_FORMAT, "tensor name 'same' appears twice");
    /* alignment from general.alignment: offset 64 is fine with 64, 32 is not */
    header(&b, 3, 2, 1);
    kv_u32(&b, "general.alignment", 64);
    tinfo(&b, "a", 1, (uint64_t[]){4}, KILN_QT_F32, 0);
    tinfo(&b, "b", 1, (uint64_t[]){4}, KILN_QT_F32, 32);
    pad_data(&b, 64, 80);
    expect_fail(&b, KILN_E_FORMAT, "data offset 32, not a multiple of the alignment 64");
}

static void test_known_but_not_dequantisable_type_opens(void) {
    buf b = {0};
    header(&b, 3, 1, 0);
    tinfo(&b, "iq", 1, (uint64_t[]){256}, 16 /* IQ2_XXS */, 0);
    pad_data(&b, 32, 66);
    kiln_gguf_file *g;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_gguf_open_memory(b.p, b.n, "t.gguf", &g, &err), KILN_OK);
    if (g) {
        const kiln_gguf_tensor *t = kiln_gguf_find(g, "iq");
        CHECK(t && t->nbytes == 66);
        float out[256];
        CHECK_EQ_INT(kiln_dequant(out, t->type, t->data, 256, &err), KILN_E_UNSUPPORTED);
        CHECK_ERR_CONTAINS(&err, "IQ2_XXS");
        kiln_gguf_close(g);
    }
    kiln_free(b.p);
}

static void test_open_errors(void) {
    kiln_gguf_file *g;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_gguf_open("/nonexistent/x.gguf", &g, &err), KILN_E_NOT_FOUND);
    CHECK(g == NULL);
    CHECK(kiln_gguf_sniff(test_src_path("tests/data/gguf/tiny.gguf")));
    CHECK(!kiln_gguf_sniff(test_src_path("tests/data/gguf/tiny.gguf.txt")));
}

int main(void) {
    RUN(test_tiny_from_gguf_package);
    RUN(test_every_prefix_is_refused);
    RUN(test_small_valid_and_v2);
    RUN(test_header_errors);
    RUN(test_kv_errors);
    RUN(test_tensor_errors);
    RUN(test_known_but_not_dequantisable_type_opens);
    RUN(test_open_errors);
    return test_summary();
}
