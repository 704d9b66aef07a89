/* test_io_safetensors.c - the safetensors reader and writer: every corrupt-file case gets its own specific
 * message, shards and indexes are cross-checked, prefixes are stripped, lookups work, the writer round-trips,
 * and every allocation failure during open is a clean KILN_E_NOMEM (ASan proves no leak). */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "io/safetensors.h"
#include "test.h"

/* ---- building images in memory ------------------------------------------------------------------------ */

typedef struct image {
    uint8_t *buf;
    size_t len;
} image;

/* [u64 len][header][data_len bytes of a pattern] */
static image make_image(const char *header, size_t data_len) {
    size_t hl = strlen(header);
    image im = {malloc(8 + hl + data_len + 1), 8 + hl + data_len};
    for (int i = 0; i < 8; i++) im.buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(im.buf + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) im.buf[8 + hl + i] = (uint8_t)(i * 7 + 1);
    return im;
}

/* Opens header+data from memory; expects failure with status want and a message containing needle. */
static void expect_bad(const char *header, size_t data_len, kiln_status want, const char *needle) {
    image im = make_image(header, data_len);
    kiln_err err = {0};
    kiln_st_file *f = (kiln_st_file *)1;
    kiln_status s = kiln_st_open_memory(im.buf, im.len, "bad.safetensors", &f, &err);
    CHECK_MSG(s == want, "header %s: status %d, want %d (%s)", header, s, want, err.msg);
    CHECK(f == NULL);
    CHECK_ERR_CONTAINS(&err, needle);
    CHECK_ERR_CONTAINS(&err, "bad.safetensors");
    if (s == KILN_OK) kiln_st_close(f);
    free(im.buf);
}

static const char *good_header =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
    "\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"
    "\"empty\":{\"dtype\":\"I64\",\"shape\":[0,5],\"data_offsets\":[32,32]},"
    "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]}}";

static void test_valid_file_opens(void) {
    image im = make_image(good_header, 40);
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, im.len, "good", &f, &err), KILN_OK);
    if (!f) return;
    CHECK_EQ_INT(kiln_st_count(f), 4);
    CHECK_EQ_STR(kiln_st_at(f, 0)->name, "a"); /* sorted by offset, not header order */
    CHECK_EQ_STR(kiln_st_at(f, 1)->name, "b");
    CHECK(kiln_st_at(f, 4) == NULL);
    const kiln_st_tensor *b = kiln_st_find(f, "b");
    CHECK(b && b->dtype == KILN_DT_F32 && b->ndim == 2 && b->shape[0] == 2 && b->shape[1] == 3);
    CHECK(b && b->nbytes == 24 && b->data == im.buf + 8 + strlen(good_header) + 8); /* no copy */
    const kiln_st_tensor *s = kiln_st_find(f, "s");
    CHECK(s && s->ndim == 0 && s->nbytes == 8);
    CHECK(kiln_st_find(f, "c") == NULL);
    CHECK_EQ_STR(kiln_st_metadata(f, "format"), "pt");
    CHECK(kiln_st_metadata(f, "nope") == NULL);
    CHECK_EQ_INT(kiln_st_metadata_count(f), 2);
    const char *k, *v;
    kiln_st_metadata_at(f, 1, &k, &v);
    CHECK_EQ_STR(k, "note");
    CHECK_EQ_STR(v, "x");
    CHECK_EQ_STR(kiln_st_prefix(f), "");
    CHECK_EQ_INT(kiln_st_shard_count(f), 1);
    kiln_tensor t;
    CHECK_EQ_INT(kiln_st_get(f, "b", KILN_DT_F32, 2, (int64_t[]){2, 3}, &t, &err), KILN_OK);
    CHECK_EQ_INT(kiln_tensor_numel(&t), 6);
    CHECK_EQ_INT(kiln_st_get(f, "b", KILN_DT_BF16, 2, (int64_t[]){2, 3}, &t, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "is f32, expected bf16");
    CHECK_EQ_INT(kiln_st_get(f, "b", KILN_DT_F32, 2, (int64_t[]){3, 2}, &t, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "has shape [2, 3], expected [3, 2]");
    CHECK_EQ_INT(kiln_st_get(f, "b", KILN_DT_COUNT, 2, (int64_t[]){-1, 3}, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_st_get(f, "zz", KILN_DT_F32, -1, NULL, &t, &err), KILN_E_NOT_FOUND);
    CHECK_ERR_CONTAINS(&err, "no tensor 'zz'");
    kiln_st_close(f);
    free(im.buf);
}

/* A header with no tensors (only metadata, or nothing) is a valid, empty checkpoint. */
static void test_empty_checkpoint(void) {
    const char *headers[] = {"{}", "{\"__metadata__\":{\"format\":\"pt\"}}"};
    for (int i = 0; i < 2; i++) {
        image im = make_image(headers[i], 0);
        kiln_err err = {0};
        kiln_st_file *f;
        CHECK_EQ_INT(kiln_st_open_memory(im.buf, im.len, "empty", &f, &err), KILN_OK);
        if (f) {
            CHECK_EQ_INT(kiln_st_count(f), 0);
            CHECK(kiln_st_find(f, "x") == NULL);
            CHECK_EQ_STR(kiln_st_prefix(f), "");
            kiln_st_close(f);
        }
        free(im.buf);
    }
}

static void test_truncated(void) {
    kiln_err err = {0};
    kiln_st_file *f;
    uint8_t tiny[5] = {1, 2, 3, 4, 5};
    CHECK_EQ_INT(kiln_st_open_memory(tiny, sizeof tiny, "t", &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "too short");
    /* header declared longer than the file */
    image im = make_image(good_header, 40);
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, 8 + 20, "t", &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "runs past the end of the file");
    /* data cut short */
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, im.len - 1, "t", &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "past the end of the file");
    /* the header one byte longer than what follows the 8-byte length (the bound is len - 8, not len) */
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, 8 + strlen(good_header) - 1, "t", &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "runs past the end of the file");
    free(im.buf);
}

static void test_header_length_2_63(void) {
    image im = make_image(good_header, 40);
    memset(im.buf, 0, 8);
    im.buf[7] = 0x80; /* 2^63 */
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, im.len, "big", &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "header length 9223372036854775808 exceeds the limit");
    memset(im.buf, 0, 8);
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, im.len, "zero", &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "header length is 0");
    free(im.buf);
}

static void test_bad_json(void) {
    expect_bad("{\"a\":{\"dtype\":\"F32\",", 0, KILN_E_FORMAT, "not valid JSON");
    expect_bad("{\"a\":1} trailing", 0, KILN_E_FORMAT, "not valid JSON");
    expect_bad("{\"a\\u0000b\":{}}", 0, KILN_E_FORMAT, "not valid JSON");
}

static void test_header_not_object(void) {
    expect_bad("[1,2,3]", 0, KILN_E_FORMAT, "header is not a JSON object");
    expect_bad("{\"a\":[1]}", 0, KILN_E_FORMAT, "tensor 'a': entry is not an object");
}

static void test_offsets_past_eof(void) {
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, KILN_E_FORMAT,
               "data_offsets [0, 16] run past the end");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[9,9]}}", 8, KILN_E_FORMAT,
               "run past the end");
}

static void test_overlapping(void) {
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               16, KILN_E_FORMAT, "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
    /* one shared byte is an overlap */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[7,15]}}",
               16, KILN_E_FORMAT, "tensors 'a' [0, 8) and 'b' [7, 15) overlap");
    /* identical ranges overlap too */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               8, KILN_E_FORMAT, "overlap");
}

static void test_dtype_shape_mismatch(void) {
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, KILN_E_FORMAT,
               "dtype F32 x shape [3] is 12 bytes but data_offsets span 8 bytes");
    /* a span longer than the tensor is as wrong as a shorter one */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 12, KILN_E_FORMAT,
               "dtype F32 x shape [2] is 8 bytes but data_offsets span 12 bytes");
    expect_bad("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}", 8,
               KILN_E_FORMAT, "shape is too large");
}

static void test_unknown_dtype(void) {
    expect_bad("{\"a\":{\"dtype\":\"F12\",\"shape\":[2],\"data_offsets\":[0,2]}}", 8, KILN_E_FORMAT,
               "tensor 'a': unknown dtype 'F12'");
    expect_bad("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,2]}}", 8, KILN_E_FORMAT,
               "non-string dtype");
}

static void test_duplicate_names(void) {
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}",
               4, KILN_E_FORMAT, "duplicate tensor names");
}

static void test_non_utf8_names(void) {
    expect_bad("{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 4, KILN_E_FORMAT,
               "not valid UTF-8 (byte 3");
    expect_bad("{\"a\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 4, KILN_E_FORMAT,
               "not valid UTF-8"); /* encoded surrogate */
    expect_bad("{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 4, KILN_E_FORMAT,
               "not valid UTF-8"); /* overlong */
}

static void test_negative_and_bad_shape(void) {
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[-2],\"data_offsets\":[0,2]}}", 4, KILN_E_FORMAT,
               "shape entry 0 is not a non-negative integer");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[2.0],\"data_offsets\":[0,2]}}", 4, KILN_E_FORMAT,
               "shape entry 0");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":\"2\",\"data_offsets\":[0,2]}}", 4, KILN_E_FORMAT,
               "shape is missing or not a list");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 4,
               KILN_E_FORMAT, "9 dimensions, more than 8");
}

static void test_begin_after_end(void) {
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,2]}}", 4, KILN_E_FORMAT,
               "data_offsets begin 3 > end 2");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0]}}", 4, KILN_E_FORMAT,
               "data_offsets is not [begin, end]");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[-1,1]}}", 4, KILN_E_FORMAT,
               "data_offsets is not [begin, end]");
}

static void test_empty_name(void) {
    expect_bad("{\"\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 4, KILN_E_FORMAT,
               "a tensor has an empty name");
}

static void test_bad_metadata(void) {
    expect_bad("{\"__metadata__\":[1]}", 0, KILN_E_FORMAT, "__metadata__ is not an object of strings");
    expect_bad("{\"__metadata__\":{\"format\":3}}", 0, KILN_E_FORMAT, "__metadata__ value for 'format'");
}

static void test_prefix_stripped(void) {
    image im = make_image("{\"model.diffusion_model.img_in.weight\":{\"dtype\":\"BF16\",\"shape\":[2,2],"
                          "\"data_offsets\":[0,8]},\"model.diffusion_model.x\":{\"dtype\":\"U8\",\"shape\":[1],"
                          "\"data_offsets\":[8,9]}}",
                          9);
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, im.len, "p", &f, &err), KILN_OK);
    if (!f) return;
    CHECK_EQ_STR(kiln_st_prefix(f), "model.diffusion_model.");
    const kiln_st_tensor *t = kiln_st_find(f, "img_in.weight");
    CHECK(t && strcmp(t->name, "model.diffusion_model.img_in.weight") == 0);
    CHECK(kiln_st_find(f, "model.diffusion_model.img_in.weight") == t);
    CHECK(kiln_st_find(f, "img_in") == NULL);
    CHECK_EQ_INT(kiln_st_get(f, "x", KILN_DT_U8, 1, (int64_t[]){1}, NULL, &err), KILN_OK);
    kiln_st_close(f);
    free(im.buf);
}

/* A ComfyUI all-in-one checkpoint: each part opens alone under its prefix (count, names, per-layer fp8 metadata
 * kept to the part's layers); a plain file opens whole; a checkpoint without the part asked for is NOT_FOUND. */
static void test_checkpoint_parts(void) {
    const char *hdr =
        "{\"__metadata__\":{\"_quantization_metadata\":\"{\\\"format_version\\\":\\\"1.0\\\",\\\"layers\\\":{"
        "\\\"model.diffusion_model.img_in\\\":{\\\"format\\\":\\\"float8_e4m3fn\\\"}}}\"},"
        "\"model.diffusion_model.img_in.weight\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
        "\"model.diffusion_model.txt_in.weight\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
        "\"text_encoders.clip_l.transformer.text_model.w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
        "\"vae.decoder.conv_in.weight\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]}}";
    image im = make_image(hdr, 16);
    char path[] = "/tmp/kiln_ckpt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, im.buf, im.len) == (ssize_t)im.len);
    close(fd);
    kiln_err err = {0};
    kiln_st_file *f = NULL;
    CHECK_EQ_INT(kiln_st_open_part(path, KILN_CKPT_DIT, &f, &err), KILN_OK);
    if (f) {
        CHECK_EQ_INT((int)kiln_st_count(f), 2);
        CHECK(kiln_st_find(f, "img_in.weight") && kiln_st_find(f, "txt_in.weight"));
        CHECK(!kiln_st_find(f, "decoder.conv_in.weight") && !kiln_st_find(f, "text_model.w"));
        CHECK(strstr(kiln_st_metadata(f, "_quantization_metadata"), "img_in") != NULL);
        kiln_st_close(f);
    }
    CHECK_EQ_INT(kiln_st_open_part(path, KILN_CKPT_VAE, &f, &err), KILN_OK);
    if (f) {
        CHECK_EQ_INT((int)kiln_st_count(f), 1);
        CHECK(kiln_st_find(f, "decoder.conv_in.weight") && !kiln_st_find(f, "img_in.weight"));
        CHECK(strstr(kiln_st_metadata(f, "_quantization_metadata"), "img_in") == NULL); /* not the VAE's layer */
        kiln_st_close(f);
    }
    CHECK_EQ_INT(kiln_st_open_part(path, KILN_CKPT_T5XXL, &f, &err), KILN_E_NOT_FOUND);
    CHECK(f == NULL);
    CHECK_ERR_CONTAINS(&err, "text_encoders.t5xxl.transformer.");
    CHECK_EQ_INT(kiln_st_open(path, &f, &err), KILN_OK); /* the whole file, as before */
    if (f) {
        CHECK(kiln_st_is_checkpoint(f));
        CHECK_EQ_INT((int)kiln_st_count(f), 4);
        kiln_st_close(f);
    }
    unlink(path);
    free(im.buf);
    /* a plain file: every part opens it whole */
    image pl = make_image("{\"img_in.weight\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    char p2[] = "/tmp/kiln_plain_XXXXXX";
    fd = mkstemp(p2);
    CHECK(fd >= 0 && write(fd, pl.buf, pl.len) == (ssize_t)pl.len);
    close(fd);
    CHECK_EQ_INT(kiln_st_open_part(p2, KILN_CKPT_VAE, &f, &err), KILN_OK);
    if (f) {
        CHECK(kiln_st_find(f, "img_in.weight") && !kiln_st_is_checkpoint(f));
        kiln_st_close(f);
    }
    unlink(p2);
    free(pl.buf);
}

/* Many tensors: every one is found through the hash table (collisions, growth). */
static void test_lookup_many(void) {
    enum { N = 3000 };
    size_t cap = N * 80 + 16;
    char *h = malloc(cap);
    size_t used = (size_t)snprintf(h, cap, "{");
    for (int i = 0; i < N; i++)
        used += (size_t)snprintf(h + used, cap - used, "%s\"layers.%d.w\":{\"dtype\":\"U8\",\"shape\":[1],"
                                 "\"data_offsets\":[%d,%d]}", i ? "," : "", i, i, i + 1);
    snprintf(h + used, cap - used, "}");
    image im = make_image(h, N);
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open_memory(im.buf, im.len, "many", &f, &err), KILN_OK);
    if (f) {
        int found = 0;
        char name[64];
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "layers.%d.w", i);
            const kiln_st_tensor *t = kiln_st_find(f, name);
            found += t && t->data == im.buf + 8 + strlen(h) + i;
        }
        CHECK_EQ_INT(found, N);
        CHECK(kiln_st_find(f, "layers.3000.w") == NULL);
        kiln_st_close(f);
    }
    free(im.buf);
    free(h);
}

/* ---- files on disk ---------------------------------------------------------------------------------------- */

static char tmpdir[256];

static const char *tmp(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    CHECK_EQ_INT(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

/* Writes a checkpoint with the writer: tensors named names[i] with f32 [2, i+1] and values i*100 + j. */
static kiln_status write_ckpt(const char *path, const char *const *names, int n, kiln_err *err) {
    kiln_st_spec specs[8];
    for (int i = 0; i < n; i++) specs[i] = (kiln_st_spec){names[i], KILN_DT_F32, 2, {2, i + 1}};
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    kiln_st_writer *w;
    KILN_TRY(kiln_st_writer_open(path, specs, (size_t)n, mk, mv, 1, &w, err));
    for (int i = 0; i < n; i++) {
        float v[16];
        for (int j = 0; j < 2 * (i + 1); j++) v[j] = (float)(i * 100 + j);
        kiln_status s = kiln_st_writer_write(w, v, sizeof(float) * 2 * (size_t)(i + 1), err);
        if (s != KILN_OK) {
            kiln_st_writer_abort(w);
            return s;
        }
    }
    return kiln_st_writer_finish(w, err);
}

static void test_writer_round_trip(void) {
    kiln_err err = {0};
    const char *names[] = {"z.weight", "a.weight", "m.bias"};
    CHECK_EQ_INT(write_ckpt(tmp("rt.safetensors"), names, 3, &err), KILN_OK);
    CHECK(access(tmp("rt.safetensors.tmp"), F_OK) != 0);
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open(tmp("rt.safetensors"), &f, &err), KILN_OK);
    if (!f) return;
    CHECK_EQ_INT(kiln_st_count(f), 3);
    CHECK_EQ_STR(kiln_st_at(f, 0)->name, "z.weight"); /* file order = spec order */
    CHECK_EQ_STR(kiln_st_metadata(f, "format"), "pt");
    const kiln_st_tensor *t = kiln_st_find(f, "m.bias");
    CHECK(t && t->nbytes == 24 && ((const float *)t->data)[5] == 205.0f);
    /* the data section starts 8-byte aligned */
    FILE *fp = fopen(tmp("rt.safetensors"), "rb");
    unsigned char lenbuf[8] = {0};
    CHECK(fp && fread(lenbuf, 1, 8, fp) == 8);
    if (fp) fclose(fp);
    CHECK_EQ_INT(lenbuf[0] % 8, 0);
    kiln_st_close(f);
}

static void test_writer_rejects_bad_use(void) {
    kiln_err err = {0};
    kiln_st_writer *w;
    kiln_st_spec dup[2] = {{"a", KILN_DT_U8, 1, {1}}, {"a", KILN_DT_U8, 1, {1}}};
    CHECK_EQ_INT(kiln_st_writer_open(tmp("w.safetensors"), dup, 2, NULL, NULL, 0, &w, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "listed twice");
    kiln_st_spec one[1] = {{"a", KILN_DT_U8, 1, {4}}};
    CHECK_EQ_INT(kiln_st_writer_open(tmp("w.safetensors"), one, 1, NULL, NULL, 0, &w, &err), KILN_OK);
    CHECK_EQ_INT(kiln_st_writer_write(w, "abcdef", 6, &err), KILN_E_INVALID);
    CHECK_EQ_INT(kiln_st_writer_write(w, "ab", 2, &err), KILN_OK);
    CHECK_EQ_INT(kiln_st_writer_finish(w, &err), KILN_E_INVALID); /* 2 of 4 bytes: no file appears */
    CHECK_ERR_CONTAINS(&err, "only 2 of 4");
    CHECK(access(tmp("w.safetensors"), F_OK) != 0);
    CHECK(access(tmp("w.safetensors.tmp"), F_OK) != 0);
    CHECK_EQ_INT(kiln_st_writer_open(tmp("w.safetensors"), one, 1, NULL, NULL, 0, &w, &err), KILN_OK);
    kiln_st_writer_abort(w);
    CHECK(access(tmp("w.safetensors.tmp"), F_OK) != 0);
    CHECK_EQ_INT(kiln_st_writer_open(tmp("no/such/dir/w.safetensors"), one, 1, NULL, NULL, 0, &w, &err),
                 KILN_E_NOT_FOUND);
}

static const char *index_json(const char *a_file, const char *b_file, const char *extra) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "{\"metadata\":{\"total_size\":40},\"weight_map\":{\"a\":\"%s\",\"b\":\"%s\"%s}}",
             a_file, b_file, extra);
    return buf;
}

static void test_sharded(void) {
    kiln_err err = {0};
    mkdir(tmp("sh"), 0755);
    const char *n1[] = {"a"}, *n2[] = {"b", "c"};
    CHECK_EQ_INT(write_ckpt(tmp("sh/m-00001-of-00002.safetensors"), n1, 1, &err), KILN_OK);
    CHECK_EQ_INT(write_ckpt(tmp("sh/m-00002-of-00002.safetensors"), n2, 2, &err), KILN_OK);
    const char *good = index_json("m-00001-of-00002.safetensors", "m-00002-of-00002.safetensors",
                                  ",\"c\":\"m-00002-of-00002.safetensors\"");
    write_file(tmp("sh/m.safetensors.index.json"), good, strlen(good));
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open(tmp("sh/m.safetensors.index.json"), &f, &err), KILN_OK);
    if (f) {
        CHECK_EQ_INT(kiln_st_count(f), 3);
        CHECK_EQ_INT(kiln_st_shard_count(f), 2);
        const kiln_st_tensor *c = kiln_st_find(f, "c");
        CHECK(c && c->shard == 1 && ((const float *)c->data)[3] == 103.0f);
        CHECK(strstr(kiln_st_shard_path(f, c->shard), "m-00002-of-00002") != NULL);
        kiln_st_close(f);
    }
    /* a folder with an index opens the index */
    CHECK_EQ_INT(kiln_st_open(tmp("sh"), &f, &err), KILN_OK);
    if (f) {
        CHECK_EQ_INT(kiln_st_count(f), 3);
        kiln_st_close(f);
    }
    /* the index lies about where a tensor is */
    const char *wrong = index_json("m-00001-of-00002.safetensors", "m-00002-of-00002.safetensors", "");
    write_file(tmp("sh/m.safetensors.index.json"), wrong, strlen(wrong));
    CHECK_EQ_INT(kiln_st_open(tmp("sh/m.safetensors.index.json"), &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "shard m-00002-of-00002.safetensors holds 'c', which the index does not list");
    const char *wrong2 = index_json("m-00001-of-00002.safetensors", "m-00001-of-00002.safetensors",
                                    ",\"c\":\"m-00002-of-00002.safetensors\"");
    write_file(tmp("sh/m.safetensors.index.json"), wrong2, strlen(wrong2));
    CHECK_EQ_INT(kiln_st_open(tmp("sh/m.safetensors.index.json"), &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "the index puts 'b' in m-00001-of-00002.safetensors, but it is in");
    /* the index lists a tensor no shard holds */
    const char *ghost = index_json("m-00001-of-00002.safetensors", "m-00002-of-00002.safetensors",
                                   ",\"c\":\"m-00002-of-00002.safetensors\",\"d\":\"m-00002-of-00002.safetensors\"");
    write_file(tmp("sh/m.safetensors.index.json"), ghost, strlen(ghost));
    CHECK_EQ_INT(kiln_st_open(tmp("sh/m.safetensors.index.json"), &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "puts 'd' in m-00002-of-00002.safetensors, but that shard does not hold it");
    /* missing shard */
    const char *missing = index_json("m-00001-of-00002.safetensors", "gone.safetensors",
                                     ",\"c\":\"m-00002-of-00002.safetensors\"");
    write_file(tmp("sh/m.safetensors.index.json"), missing, strlen(missing));
    CHECK_EQ_INT(kiln_st_open(tmp("sh/m.safetensors.index.json"), &f, &err), KILN_E_NOT_FOUND);
    CHECK_ERR_CONTAINS(&err, "names shard gone.safetensors");
    /* a shard path escaping the folder */
    const char *escape = index_json("../m-00001-of-00002.safetensors", "m-00002-of-00002.safetensors", "");
    write_file(tmp("sh/m.safetensors.index.json"), escape, strlen(escape));
    CHECK_EQ_INT(kiln_st_open(tmp("sh/m.safetensors.index.json"), &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "does not name a shard file inside");
    write_file(tmp("sh/m.safetensors.index.json"), "{\"weight_map\":", 14);
    CHECK_EQ_INT(kiln_st_open(tmp("sh/m.safetensors.index.json"), &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "not valid JSON");
    unlink(tmp("sh/m.safetensors.index.json"));
    /* two shards, no index: ambiguous */
    CHECK_EQ_INT(kiln_st_open(tmp("sh"), &f, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "2 .safetensors files and no index");
    unlink(tmp("sh/m-00001-of-00002.safetensors"));
    unlink(tmp("sh/m-00002-of-00002.safetensors"));
    CHECK_EQ_INT(kiln_st_open(tmp("sh"), &f, &err), KILN_E_NOT_FOUND);
    rmdir(tmp("sh"));
}

static void test_open_errors(void) {
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open(tmp("absent.safetensors"), &f, &err), KILN_E_NOT_FOUND);
    CHECK(f == NULL);
    write_file(tmp("empty.safetensors"), "", 0);
    CHECK_EQ_INT(kiln_st_open(tmp("empty.safetensors"), &f, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "empty.safetensors: file is 0 bytes");
    unlink(tmp("empty.safetensors"));
}

/* Fail allocation N = 1, 2, 3, ... until none fires: each failure is a clean NOMEM (ASan checks leaks). */
static void test_open_survives_every_alloc_failure(void) {
    kiln_err err = {0};
    const char *names[] = {"x", "y", "z"};
    CHECK_EQ_INT(write_ckpt(tmp("fi.safetensors"), names, 3, &err), KILN_OK);
    mkdir(tmp("fish"), 0755);
    CHECK_EQ_INT(write_ckpt(tmp("fish/s1.safetensors"), names, 2, &err), KILN_OK);
    const char *n2[] = {"z"};
    CHECK_EQ_INT(write_ckpt(tmp("fish/s2.safetensors"), n2, 1, &err), KILN_OK);
    const char *idx = "{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s1.safetensors\",\"z\":\"s2.safetensors\"}}";
    write_file(tmp("fish/i.safetensors.index.json"), idx, strlen(idx));
    const char *paths[] = {tmp("fi.safetensors"), tmp("fish")};
    for (int p = 0; p < 2; p++) {
        int failures = 0;
        bool finished = false;
        for (uint64_t n = 1; n < 500 && !finished; n++) {
            kiln_st_file *f = (kiln_st_file *)1;
            kiln_fault_alloc_fail_at(n, false);
            kiln_status s = kiln_st_open(paths[p], &f, &err);
            bool fired = kiln_fault_alloc_fired();
            kiln_fault_alloc_fail_at(0, false);
            if (!fired) {
                CHECK_EQ_INT(s, KILN_OK);
                CHECK(f && kiln_st_count(f) == 3);
                kiln_st_close(f);
                finished = true;
                break;
            }
            CHECK_MSG(s == KILN_E_NOMEM, "alloc %llu: status %d (%s)", (unsigned long long)n, s, err.msg);
            CHECK(f == NULL);
            failures++;
        }
        CHECK(finished);
        CHECK(failures >= 5);
    }
    unlink(tmp("fi.safetensors"));
    unlink(tmp("fish/s1.safetensors"));
    unlink(tmp("fish/s2.safetensors"));
    unlink(tmp("fish/i.safetensors.index.json"));
    rmdir(tmp("fish"));
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kiln-test-st-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_valid_file_opens);
    RUN(test_empty_checkpoint);
    RUN(test_truncated);
    RUN(test_header_length_2_63);
    RUN(test_bad_json);
    RUN(test_header_not_object);
    RUN(test_offsets_past_eof);
    RUN(test_overlapping);
    RUN(test_dtype_shape_mismatch);
    RUN(test_unknown_dtype);
    RUN(test_duplicate_names);
    RUN(test_non_utf8_names);
    RUN(test_negative_and_bad_shape);
    RUN(test_begin_after_end);
    RUN(test_empty_name);
    RUN(test_bad_metadata);
    RUN(test_prefix_stripped);
    RUN(test_checkpoint_parts);
    RUN(test_lookup_many);
    RUN(test_writer_round_trip);
    RUN(test_writer_rejects_bad_use);
    RUN(test_sharded);
    RUN(test_open_errors);
    RUN(test_open_survives_every_alloc_failure);
    unlink(tmp("rt.safetensors"));
    rmdir(tmpdir);
    return test_summary();
}
