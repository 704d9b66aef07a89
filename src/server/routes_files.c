/* routes_files.c - GET /view and POST /upload/image. The server never trusts a path: a file name is one plain
 * component, a subfolder is relative with no '.'/'..' components, NUL bytes (raw or %00) are refused, and the
 * opened file must resolve (symlinks followed by realpath) inside its base folder. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "io/image_load.h"
#include "server/server_internal.h"

static bool name_ok(const char *s) {
    if (!s || !*s || strlen(s) > 255 || s[0] == '.') return false;
    for (const char *p = s; *p; p++)
        if (*p == '/' || *p == '\\' || *p == '"' || (unsigned char)*p < 0x20) return false;
    return true;
}

/* libmicrohttpd's form parser ends a quoted filename at its first '"', so filename="a"b.png" would arrive
 * as "a": every filename="..." in a part's Content-Disposition header must end where the header's syntax says
 * (then ';', a space or the line's end), or the upload is refused rather than saved under a cut name. */
static bool part_filenames_ok(const char *body, size_t len) {
    static const char key[] = "filename=\"";
    const size_t kl = sizeof key - 1;
    for (size_t i = 0; i + kl <= len; i++) {
        if (strncasecmp(body + i, key, kl) != 0) continue;
        size_t ls = i; /* the start of this line: only header lines count */
        while (ls > 0 && body[ls - 1] != '\n') ls--;
        if (len - ls < 20 || strncasecmp(body + ls, "Content-Disposition:", 20) != 0) continue;
        size_t j = i + kl;
        while (j < len && body[j] != '"' && body[j] != '\r' && body[j] != '\n') j++;
        if (j >= len || body[j] != '"') return false;
        char after = j + 1 < len ? body[j + 1] : '\r';
        if (after != ';' && after != '\r' && after != '\n' && after != ' ' && after != '\t') return false;
    }
    return true;
}

static bool subfolder_ok(const char *s) {
    if (!s || !*s) return true;
    if (s[0] == '/' || strlen(s) > 255) return false;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", s);
    for (const char *p = s; *p; p++)
        if (*p == '\\' || (unsigned char)*p < 0x20) return false;
    for (char *save = NULL, *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save))
        if (c[0] == '.') return false; /* ., .., and hidden folders */
    return true;
}

static const char *base_dir(kiln_server *srv, const char *type) {
    if (!type || !*type || !strcmp(type, "output")) return srv->output_dir;
    if (!strcmp(type, "input")) return srv->input_dir;
    if (!strcmp(type, "temp")) return srv->temp_dir;
    return NULL;
}

static const char *content_type(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return "application/octet-stream";
    if (!strcasecmp(dot, ".png")) return "image/png";
    if (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg")) return "image/jpeg";
    if (!strcasecmp(dot, ".webp")) return "image/webp";
    if (!strcasecmp(dot, ".json")) return "application/json";
    return "application/octet-stream";
}

/* true when an argument carries a NUL byte (e.g. %00): libmicrohttpd keeps the decoded length, so a value
 * whose C string is shorter than its length was cut by an embedded NUL. */
static bool arg_has_nul(kiln_req *r, const char *key) {
    const char *v = NULL;
    size_t n = 0;
    if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v, &n) != MHD_YES || !v)
        return false;
    return strlen(v) != n;
}

static enum MHD_Result view(kiln_req *r) {
    const char *filename = kiln_req_arg(r, "filename"), *sub = kiln_req_arg(r, "subfolder"),
               *type = kiln_req_arg(r, "type");
    const char *base = base_dir(r->srv, type);
    if (!base) return kiln_reply_comfy_error(r, 400, "invalid_request", "type must be output, input or temp", "");
    if (!name_ok(filename) || !subfolder_ok(sub) || arg_has_nul(r, "filename") ||
        arg_has_nul(r, "subfolder"))
        return kiln_reply_comfy_error(r, 400, "invalid_request", "Invalid filename or subfolder", "");
    char path[PATH_MAX + 600], real[PATH_MAX], real_base[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s%s%s", base, sub && *sub ? sub : "", sub && *sub ? "/" : "", filename);
    if (!realpath(base, real_base) || !realpath(path, real))
        return kiln_reply_comfy_error(r, 404, "not_found", "File not found", "");
    size_t bl = strlen(real_base);
    if (strncmp(real, real_base, bl) != 0 || real[bl] != '/')
        return kiln_reply_comfy_error(r, 404, "not_found", "File not found", "");
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        if (fd >= 0) close(fd);
        return kiln_reply_comfy_error(r, 404, "not_found", "File not found", "");
    }
    struct MHD_Response *resp = MHD_create_response_from_fd64((uint64_t)sb.st_size, fd);
    if (!resp) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", content_type(filename));
    char disp[400];
    snprintf(disp, sizeof disp, "filename=\"%s\"", filename);
    MHD_add_response_header(resp, "Content-Disposition", disp);
    enum MHD_Result res = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    r->replied = true;
    return res;
}

/* ---- upload ------------------------------------------------------------------------------------------------------ */

typedef struct upload {
    char filename[256];
    bool have_image, bad_name;
    char *data;
    size_t len, cap, limit;
    char subfolder[256], type[16];
    bool overwrite;
    bool too_big;
} upload;

static enum MHD_Result upload_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                    const char *ctype, const char *enc, const char *data, uint64_t off, size_t size) {
    upload *u = cls;
    if (!key) return MHD_YES;
    if (!strcmp(key, "image")) {
        if (off == 0) {
            u->have_image = true;
            if (!filename || strlen(filename) >= sizeof u->filename) u->bad_name = true;
            else snprintf(u->filename, sizeof u->filename, "%s", filename);
        }
        if (size == 0) return MHD_YES; /* an empty part: no data pointer to copy from (u->data may be NULL) */
        if (u->len + size > u->limit) {
            u->too_big = true;
            return MHD_YES;
        }
        if (!kiln_bytes_append(&u->data, &u->len, &u->cap, 65536, data, size)) return MHD_NO;
    } else {
        char *dst = !strcmp(key, "subfolder") ? u->subfolder : !strcmp(key, "type") ? u->type : NULL;
        size_t cap = !strcmp(key, "subfolder") ? sizeof u->subfolder : sizeof u->type;
        if (size == 0) return MHD_YES;
        if (dst && off + size < cap) {
            memcpy(dst + off, data, size);
            dst[off + size] = 0;
        }
        /* the chunk is `size` bytes, not a C string */
        if (!strcmp(key, "overwrite") && off == 0)
            u->overwrite = (size >= 4 && !memcmp(data, "true", 4)) || data[0] == '1';
    }
    return MHD_YES;
}

/* The upload decodes as an image within io/image_load.h's limits (the pixels are dropped again). */
static bool upload_decodes(const upload *u, kiln_err *err) {
    uint8_t *rgb = NULL;
    int w = 0, h = 0;
    if (kiln_image_decode((const uint8_t *)u->data, u->len, NULL, &rgb, &w, &h, err) != KILN_OK) return false;
    kiln_free(rgb);
    return true;
}

static bool mkdirs(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(tmp, 0755) == 0 || errno == EEXIST;
}

static enum MHD_Result upload_image(kiln_req *r) {
    if (r->body && !part_filenames_ok(r->body, r->body_len))
        return kiln_reply_comfy_error(r, 400, "invalid_request", "Invalid filename: a quote in the file name", "");
    upload u = {.limit = r->srv->cfg.max_body};
    snprintf(u.type, sizeof u.type, "input");
    struct MHD_PostProcessor *pp = MHD_create_post_processor(r->conn, 65536, upload_field, &u);
    if (!pp) return kiln_reply_comfy_error(r, 400, "invalid_request", "Expected a multipart/form-data body", "");
    enum MHD_Result ok = r->body_len ? MHD_post_process(pp, r->body, r->body_len) : MHD_YES;
    MHD_destroy_post_processor(pp);
    enum MHD_Result res;
    kiln_err ierr = {0};
    if (ok != MHD_YES || !u.have_image) {
        res = kiln_reply_comfy_error(r, 400, "invalid_request", "No image field in the form", "");
    } else if (u.too_big) {
        res = kiln_reply_comfy_error(r, 413, "request_too_large", "Image larger than the body limit", "");
    } else if (u.bad_name || !name_ok(u.filename) || !subfolder_ok(u.subfolder)) {
        res = kiln_reply_comfy_error(r, 400, "invalid_request", "Invalid filename or subfolder", "");
    } else if (!base_dir(r->srv, u.type) || !strcmp(u.type, "output")) {
        /* uploads go to input/ or temp/, never over the server's own outputs */
        res = kiln_reply_comfy_error(r, 400, "invalid_request", "type must be input or temp", "");
    } else if (!upload_decodes(&u, &ierr)) {
        /* what LoadImage would refuse is refused now, before anything is written: a truncated or corrupt file, a
         * header over the pixel limits (checked before any pixel buffer exists), something that is no image */
        char msg[600];
        snprintf(msg, sizeof msg, "Invalid image %s: %s", u.filename, ierr.msg);
        res = kiln_reply_comfy_error(r, 400, "invalid_image", msg, "");
    } else {
        char dir[PATH_MAX], path[PATH_MAX + 300], name[300];
        snprintf(dir, sizeof dir, "%s%s%s", base_dir(r->srv, u.type), u.subfolder[0] ? "/" : "", u.subfolder);
        snprintf(name, sizeof name, "%s", u.filename);
        int fd = -1;
        if (mkdirs(dir)) {
            /* ComfyUI's rule: an existing name gets " (1)", " (2)"... unless overwrite */
            const char *dot = strrchr(u.filename, '.');
            int stem = dot ? (int)(dot - u.filename) : (int)strlen(u.filename);
            for (int i = 0; i < 10000 && fd < 0; i++) {
                if (i) snprintf(name, sizeof name, "%.*s (%d)%s", stem, u.filename, i, dot ? dot : "");
                snprintf(path, sizeof path, "%s/%s", dir, name);
                fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (u.overwrite ? O_TRUNC : O_EXCL), 0644);
                if (fd < 0 && errno != EEXIST) break;
            }
        }
        bool written = fd >= 0;
        for (size_t off = 0; written && off < u.len;) {
            ssize_t w = write(fd, u.data + off, u.len - off);
            if (w <= 0) written = false;
            else off += (size_t)w;
        }
        if (fd >= 0 && close(fd) != 0) written = false;
        if (fd >= 0 && !written) unlink(path); /* no half-written upload stays behind */
        res = written ? kiln_reply_json(r, 200, json_pack("{s:s, s:s, s:s}", "name", name, "subfolder", u.subfolder,
                                                          "type", u.type))
                      : kiln_reply_comfy_error(r, 500, "io_error", "Could not save the upload", "");
    }
    kiln_free(u.data);
    return res;
}

bool kiln_routes_files(kiln_req *r, enum MHD_Result *res) {
    if (!strcmp(r->url, "/view") && !strcmp(r->method, "GET")) {
        *res = view(r);
    } else if (!strcmp(r->url, "/upload/image") && !strcmp(r->method, "POST")) {
        *res = upload_image(r);
    } else {
        return false;
    }
    return true;
}
