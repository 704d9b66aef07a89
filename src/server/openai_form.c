/* openai_form.c - the multipart/form-data body of POST /v1/images/edits, as the OpenAI API and the `openai` SDK
 * send it: `image` (one file) or `image[]` (several), the fields as text parts (the SDK writes numbers and
 * booleans as text and nested values with brackets: lora[][name], lora[][strength]). libmicrohttpd's
 * PostProcessor splits the parts; this file bounds them (part count, images, value sizes), types the fields as
 * the JSON API has them, and checks every image before anything is written: its part's content type, then a
 * full decode (io/image_load.h: magic bytes, header limits before any pixel buffer, truncation), then the
 * official pipeline's reference checks (pipeline/ref_image.h). Only then are the images saved in the input
 * folder, under names from their SHA-256 (a retried request reuses the same files), each written to a temp
 * name and renamed, so a LoadImage node of the job's graph reads them like any upload. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "io/image_load.h"
#include "pipeline/ref_image.h"
#include "server/openai.h"

#define MAX_PARTS 64          /* fields + files of one request */
#define MAX_VALUE (64 * 1024) /* one text field (prompts are at most 32000 bytes) */
#define MAX_KEY 64
#define FIELD_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-[]"

typedef struct upload {
    uint8_t *data;
    size_t len, cap;
    kiln_image_format fmt;
} upload;

typedef struct kiln_oai_uploads {
    json_t *body;
    upload img[KILN_OAI_MAX_IMAGES];
    int n_img, parts;
    char key[MAX_KEY + 1];
    bool active, file;
    char *val; /* the current text part */
    size_t vlen;
    char err_param[MAX_KEY + 1], err[400]; /* the first problem ("" = none) */
} form; /* = kiln_oai_uploads: the images stay here, checked, until kiln_oai_form_save */

static void fail(form *f, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(form *f, const char *param, const char *fmt, ...) {
    if (f->err[0]) return;
    snprintf(f->err_param, sizeof f->err_param, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
}

static bool is_image_key(const char *k) { return !strcmp(k, "image") || !strcmp(k, "image[]"); }

/* "-12" -> 12 exactly (at most 18 digits), else NULL: the field then stays a string and fails its type check. */
static json_t *as_integer(const char *s) {
    const char *p = s + (*s == '-');
    size_t n = strspn(p, "0123456789");
    return n && n <= 18 && !p[n] ? json_integer(strtoll(s, NULL, 10)) : NULL;
}

static json_t *as_number(const char *s) {
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    return *s && !*end && !errno && isfinite(d) && !strchr(s, 'x') && !strchr(s, 'X') ? json_real(d) : NULL;
}

/* One finished text part into the body, typed as the JSON API's field. */
static void text_part(form *f, const char *key, const char *v) {
    static const char *const ints[] = {"n", "output_compression", "partial_images", "num_inference_steps", "seed", NULL};
    json_t *typed = json_string(v); /* NULL: not UTF-8, which no JSON field can hold */
    if (!typed) {
        fail(f, key, "%s is not valid UTF-8", key);
        return;
    }
    json_decref(typed);
    typed = NULL;
    for (int i = 0; ints[i]; i++)
        if (!strcmp(key, ints[i])) typed = as_integer(v);
    if (!strcmp(key, "guidance_scale")) typed = as_number(v);
    if (!strcmp(key, "stream") && (!strcmp(v, "true") || !strcmp(v, "false"))) typed = json_boolean(!strcmp(v, "true"));
    if (!strcmp(key, "lora") && (v[0] == '[' || v[0] == '{')) {
        json_error_t e;
        if (!(typed = json_loads(v, JSON_REJECT_DUPLICATES, &e))) {
            fail(f, "lora", "lora is not valid JSON: %s", e.text);
            return;
        }
    }
    /* the SDK's brackets: lora[]=a (names), lora[][name]=a + lora[][strength]=0.8 (entries), lora[name]= */
    if (!strcmp(key, "lora[]") || !strcmp(key, "lora[][name]") || !strcmp(key, "lora[][strength]") ||
        !strcmp(key, "lora[name]") || !strcmp(key, "lora[strength]")) {
        bool list = key[5] == ']', strength = strstr(key, "[strength]") != NULL;
        json_t *l = json_object_get(f->body, "lora");
        if (!l) json_object_set_new(f->body, "lora", l = list ? json_array() : json_object());
        if (json_is_array(l) != list) {
            fail(f, "lora", "lora is given in two shapes at once");
            return;
        }
        json_t *entry = list ? json_array_get(l, json_array_size(l) - 1) : l;
        if (!strcmp(key, "lora[]")) {
            json_array_append_new(l, json_string(v));
        } else if (!strcmp(key, "lora[][name]")) {
            json_array_append_new(l, json_pack("{s:s}", "name", v));
        } else if (!json_is_object(entry) || json_object_get(entry, strength ? "strength" : "name")) {
            fail(f, "lora", "lora entry %s comes without its name or twice", strength ? "strength" : "name");
        } else {
            json_t *num = strength ? as_number(v) : json_string(v);
            json_object_set_new(entry, strength ? "strength" : "name", num ? num : json_string(v));
        }
        return;
    }
    if (json_object_get(f->body, key)) {
        fail(f, key, "%s is given twice", key);
        json_decref(typed);
        return;
    }
    json_object_set_new(f->body, key, typed ? typed : json_string(v));
}

static void end_part(form *f) {
    if (!f->active) return;
    f->active = false;
    if (!f->file) {
        text_part(f, f->key, f->val ? f->val : "");
    } else if (f->img[f->n_img].len == 0) {
        fail(f, "image", "image %d is an empty file", f->n_img + 1);
    } else {
        f->n_img++;
    }
    kiln_free(f->val);
    f->val = NULL;
    f->vlen = 0;
}

static bool content_type_ok(const char *ct) {
    static const char *const ok[] = {"image/png", "image/jpeg", "image/jpg", "image/webp", "application/octet-stream"};
    if (!ct || !*ct) return true;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strncasecmp(ct, ok[i], strlen(ok[i])) && (!ct[strlen(ok[i])] || ct[strlen(ok[i])] == ';')) return true;
    return false;
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                               const char *ctype, const char *enc, const char *data, uint64_t off, size_t size) {
    form *f = cls;
    (void)kind;
    (void)enc;
    if (f->err[0]) return MHD_YES; /* the rest is read and ignored */
    if (!key) return MHD_YES;
    /* a part begins at offset 0; a second call at 0 is the same part when the first carried no bytes */
    bool same = f->active && off != 0;
    if (f->active && off == 0 && !strcmp(f->key, key))
        same = f->file ? f->img[f->n_img].len == 0 : f->vlen == 0;
    if (!same) {
        end_part(f);
        if (f->err[0]) return MHD_YES;
        if (++f->parts > MAX_PARTS) {
            fail(f, "", "more than %d form parts", MAX_PARTS);
            return MHD_YES;
        }
        if (strlen(key) > MAX_KEY || strspn(key, FIELD_CHARS) != strlen(key)) {
            fail(f, "", "a form field name must be 1 to %d letters, digits, '_', '-' or brackets", MAX_KEY);
            return MHD_YES;
        }
        if (!strcmp(key, "mask") || !strcmp(key, "mask[]")) {
            fail(f, "mask", "mask is not supported: FLUX.2 [klein] edits from reference images (the prompt says what "
                 "to change), it does not inpaint a masked area; send the image alone");
            return MHD_YES;
        }
        bool file = is_image_key(key);
        if (file && f->n_img == KILN_OAI_MAX_IMAGES) {
            fail(f, "image", "at most %d images per edit", KILN_OAI_MAX_IMAGES);
            return MHD_YES;
        }
        if (file && !content_type_ok(ctype)) {
            fail(f, "image", "image %d has content type '%.60s'; PNG, JPEG or WebP files are expected", f->n_img + 1,
                 ctype);
            return MHD_YES;
        }
        if (!file && filename) {
            fail(f, key, "%s is a file; only image takes files", key);
            return MHD_YES;
        }
        snprintf(f->key, sizeof f->key, "%s", key); /* only a part that passed is active (img[n_img] exists) */
        f->active = true;
        f->file = file;
    }
    if (!size) return MHD_YES;
    if (f->file) {
        upload *u = &f->img[f->n_img];
        if (u->len + size > u->cap) {
            size_t cap = u->cap ? u->cap : 65536;
            while (cap < u->len + size) cap *= 2;
            uint8_t *nb = kiln_realloc(u->data, cap);
            if (!nb) return MHD_NO;
            u->data = nb;
            u->cap = cap;
        }
        memcpy(u->data + u->len, data, size);
        u->len += size;
        return MHD_YES;
    }
    if (f->vlen + size > MAX_VALUE) {
        fail(f, key, "%s is longer than %d bytes", key, MAX_VALUE);
        return MHD_YES;
    }
    char *nv = kiln_realloc(f->val, f->vlen + size + 1);
    if (!nv) return MHD_NO;
    memcpy(nv + f->vlen, data, size);
    f->val = nv;
    f->vlen += size;
    f->val[f->vlen] = 0;
    if (strlen(f->val) != f->vlen) fail(f, key, "%s holds a NUL byte", key);
    return MHD_YES;
}

static void form_free(form *f) {
    for (int i = 0; i < KILN_OAI_MAX_IMAGES; i++) kiln_free(f->img[i].data);
    kiln_free(f->val);
    json_decref(f->body);
}

/* Decodes image i fully and applies the reference checks; the first one's prepared size is the "auto" size. */
static bool check_image(form *f, int i, kiln_oai_params *p, size_t max_bytes) {
    upload *u = &f->img[i];
    kiln_image_limits lim = kiln_image_limits_default();
    lim.max_bytes = max_bytes;
    uint8_t *rgb = NULL, *prep = NULL;
    int w = 0, h = 0, pw = 0, ph = 0;
    kiln_err err = {0};
    u->fmt = kiln_image_sniff(u->data, u->len);
    kiln_status s = kiln_image_decode(u->data, u->len, &lim, &rgb, &w, &h, &err);
    if (s == KILN_OK) s = kiln_ref_prepare(rgb, w, h, &prep, &pw, &ph, &err);
    kiln_free(rgb);
    kiln_free(prep);
    if (s != KILN_OK) {
        fail(f, "image", "image %d is not usable: %s", i + 1, err.msg);
        return false;
    }
    if (i == 0) {
        p->first_w = pw;
        p->first_h = ph;
    }
    return true;
}

static void hex(const unsigned char *d, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* Writes the image as input/<name> through a temp file in the same folder and a rename. */
static bool save(kiln_server *srv, const upload *u, const char *name) {
    char tmp[4200], dst[4200];
    snprintf(tmp, sizeof tmp, "%s/.openai-upload-XXXXXX", srv->input_dir);
    snprintf(dst, sizeof dst, "%s/%s", srv->input_dir, name);
    int fd = mkstemp(tmp);
    if (fd < 0) return false;
    bool ok = true;
    for (size_t off = 0; ok && off < u->len;) {
        ssize_t w = write(fd, u->data + off, u->len - off);
        ok = w > 0;
        if (ok) off += (size_t)w;
    }
    ok = fchmod(fd, 0644) == 0 && ok;
    ok = close(fd) == 0 && ok;
    if (ok) ok = rename(tmp, dst) == 0;
    if (!ok) unlink(tmp);
    return ok;
}

json_t *kiln_oai_form(kiln_req *r, kiln_oai_params *p, char sha[65], kiln_oai_uploads **up, enum MHD_Result *res) {
    *up = NULL;
    const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
    if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0) {
        *res = kiln_oai_error(r, 400, false, "invalid_request_error", NULL, "invalid_content_type",
                              "images/edits takes a multipart/form-data body (the image files and the fields as "
                              "form parts), as the OpenAI API does; got %.60s", ct ? ct : "no Content-Type");
        return NULL;
    }
    form *fp = kiln_calloc(1, sizeof *fp);
    if (!fp) {
        *res = kiln_oai_error(r, 500, true, "server_error", NULL, "out_of_memory", "out of memory");
        return NULL;
    }
    form f = {.body = json_object()};
    struct MHD_PostProcessor *pp = f.body ? MHD_create_post_processor(r->conn, 65536, on_part, &f) : NULL;
    if (!pp) {
        form_free(&f);
        kiln_free(fp);
        *res = kiln_oai_error(r, 400, false, "invalid_request_error", NULL, "invalid_multipart",
                              "the multipart/form-data body has no boundary");
        return NULL;
    }
    enum MHD_Result ok = r->body_len ? MHD_post_process(pp, r->body, r->body_len) : MHD_YES;
    end_part(&f);
    /* MHD_NO from the destroy: the body ended inside a part (no closing boundary) */
    if (MHD_destroy_post_processor(pp) != MHD_YES && ok == MHD_YES && !f.err[0])
        fail(&f, "", "the multipart/form-data body ends before its closing boundary");
    if (ok != MHD_YES && !f.err[0]) fail(&f, "", "the multipart/form-data body is malformed");
    if (!f.err[0] && f.n_img == 0)
        fail(&f, "image", "image is required: one file as image, or several as image[]");
    for (int i = 0; !f.err[0] && i < f.n_img; i++) check_image(&f, i, p, r->srv->cfg.max_body);
    if (f.err[0]) {
        *res = kiln_oai_error(r, 400, false, "invalid_request_error", f.err_param[0] ? f.err_param : NULL,
                              "invalid_value", "%s", f.err);
        form_free(&f);
        kiln_free(fp);
        return NULL;
    }
    char all[KILN_OAI_MAX_IMAGES * 64 + 1] = "";
    for (int i = 0; i < f.n_img; i++) {
        unsigned char d[SHA256_DIGEST_LENGTH];
        char h[65];
        SHA256(f.img[i].data, f.img[i].len, d);
        hex(d, sizeof d, h);
        memcpy(all + 64 * i, h, 65);
        snprintf(p->images[i], sizeof p->images[i], "openai-%.32s.%s", h,
                 f.img[i].fmt == KILN_IMAGE_JPEG ? "jpg" : kiln_image_format_name(f.img[i].fmt));
    }
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)all, strlen(all), d);
    hex(d, sizeof d, sha);
    p->n_images = f.n_img;
    json_t *body = f.body;
    f.body = NULL;
    *fp = f;
    *up = fp;
    return body;
}

bool kiln_oai_form_save(kiln_req *r, const kiln_oai_uploads *up, const kiln_oai_params *p, enum MHD_Result *res) {
    for (int i = 0; i < up->n_img; i++) {
        if (save(r->srv, &up->img[i], p->images[i])) continue;
        for (int k = 0; k < i; k++) { /* all or none: a failed write leaves no half of an edit behind */
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", r->srv->input_dir, p->images[k]);
            unlink(path);
        }
        *res = kiln_oai_error(r, 500, true, "server_error", "image", "io_error", "could not save image %d", i + 1);
        return false;
    }
    return true;
}

void kiln_oai_uploads_free(kiln_oai_uploads *up) {
    if (!up) return;
    form_free(up);
    kiln_free(up);
}
