/* nodes.c - what each node class does when the executor runs it (the table is in node_table.c). Inputs arrive
 * already validated against the table, so these functions check only what validation cannot know (files that
 * vanished since, a latent that is not a sampler's, the engine's own errors). */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "graph/exec.h"
#include "graph/pixelize.h"
#include "io/image_png.h"

static kiln_status nomem(kiln_exec *ex) { return KILN_FAIL(ex->err, KILN_E_NOMEM, "out of memory"); }

int kiln_node_pixelize(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    const kiln_value *img = in[0];
    size_t one = (size_t)img->width * (size_t)img->height * 3, all;
    if (!kiln_mul_size(one, (size_t)img->n_images, &all)) return nomem(ex);
    out->kind = KILN_V_IMAGE;
    out->n_images = img->n_images;
    out->width = img->width;
    out->height = img->height;
    if (!(out->pixels = kiln_malloc(all))) return nomem(ex);
    memcpy(out->pixels, img->pixels, all);
    for (int i = 0; i < img->n_images; i++)
        KILN_TRY(kiln_pixelize(out->pixels + one * (size_t)i, img->width, img->height, 3, (int)in[1]->i, ex->err));
    return KILN_OK;
}

/* ---- SaveImage ---------------------------------------------------------------------------------------------- */

/* Splits "sub/dir/name" into subfolder and file prefix; refuses anything that could leave the output folder. */
static kiln_status split_prefix(kiln_exec *ex, const char *prefix, char *sub, size_t subcap, char *name,
                                size_t namecap) {
    if (!*prefix) prefix = "ComfyUI";
    if (prefix[0] == '/' || strchr(prefix, '\\') || strlen(prefix) > 200)
        return KILN_FAIL(ex->err, KILN_E_INVALID, "filename_prefix must be a relative name of at most 200 bytes");
    for (const char *p = prefix; *p; p++)
        if ((unsigned char)*p < 0x20) return KILN_FAIL(ex->err, KILN_E_INVALID, "filename_prefix has a control character");
    /* every path component must be a plain name */
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", prefix);
    for (char *save = NULL, *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save))
        if (!strcmp(c, "..") || !strcmp(c, "."))
            return KILN_FAIL(ex->err, KILN_E_INVALID, "filename_prefix must not contain . or .. components");
    const char *slash = strrchr(prefix, '/');
    if (slash) {
        snprintf(sub, subcap, "%.*s", (int)(slash - prefix), prefix);
        snprintf(name, namecap, "%s", slash + 1);
    } else {
        sub[0] = 0;
        snprintf(name, namecap, "%s", prefix);
    }
    if (!name[0]) snprintf(name, namecap, "ComfyUI");
    return KILN_OK;
}

static kiln_status mkdirs(kiln_exec *ex, const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KILN_FAIL(ex->err, KILN_E_IO, "mkdir %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KILN_FAIL(ex->err, KILN_E_IO, "mkdir %s: %s", tmp, strerror(errno));
    return KILN_OK;
}

/* The next counter for name in dir: one more than the largest {name}_{NNNNN}_.png present (ComfyUI's rule). */
static int next_counter(const char *dir, const char *name) {
    int best = 0;
    DIR *d = opendir(dir);
    if (!d) return 1;
    size_t nl = strlen(name);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, name, nl) != 0 || e->d_name[nl] != '_') continue;
        char *end;
        long c = strtol(e->d_name + nl + 1, &end, 10);
        if (end != e->d_name + nl + 1 && !strcmp(end, "_.png") && c > best && c < 10000000) best = (int)c;
    }
    closedir(d);
    return best + 1;
}

/* Writes img as PNGs {prefix}_{counter:05}_.png under base (SaveImage: output/, PreviewImage: temp/) and
 * reports them as the node's ui {"images": [{filename, subfolder, type}]}. */
static int save_pngs(kiln_exec *ex, const char *id, const kiln_value *img, const char *base, const char *prefix,
                     const char *type) {
    char sub[256], name[256], dir[4096];
    KILN_TRY(split_prefix(ex, prefix, sub, sizeof sub, name, sizeof name));
    snprintf(dir, sizeof dir, "%s%s%s", base, sub[0] ? "/" : "", sub);
    KILN_TRY(mkdirs(ex, dir));

    char *prompt_txt = json_dumps(ex->g->root, JSON_COMPACT | JSON_SORT_KEYS);
    kiln_png_text texts[4] = {{"prompt", prompt_txt}};
    int nt = 1;
    char *extra_txt[3] = {0};
    const char *key;
    json_t *val;
    if (json_is_object(ex->env->extra_pnginfo)) {
        json_object_foreach(ex->env->extra_pnginfo, key, val) {
            if (nt >= 4) break;
            extra_txt[nt - 1] = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
            texts[nt].key = key;
            texts[nt].value = extra_txt[nt - 1];
            nt++;
        }
    }
    json_t *images = json_array();
    kiln_status s = KILN_OK;
    size_t one = (size_t)img->width * (size_t)img->height * 3;
    int counter = next_counter(dir, name);
    for (int i = 0; i < img->n_images && s == KILN_OK; i++) {
        uint8_t *png = NULL;
        size_t len = 0;
        s = kiln_png_encode(img->pixels + one * (size_t)i, img->width, img->height, texts, (size_t)nt, &png, &len,
                            ex->err);
        if (s != KILN_OK) break;
        int fd = -1;
        char file[300], path[4400];
        for (int tries = 0; tries < 1000 && fd < 0; tries++, counter++) {
            snprintf(file, sizeof file, "%s_%05d_.png", name, counter);
            snprintf(path, sizeof path, "%s/%s", dir, file);
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 && errno != EEXIST) break;
        }
        if (fd < 0) {
            s = KILN_FAIL(ex->err, KILN_E_IO, "cannot create %s: %s", path, strerror(errno));
        } else {
            size_t off = 0;
            while (off < len) {
                ssize_t w = write(fd, png + off, len - off);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) break;
                off += (size_t)w;
            }
            if (off != len || close(fd) != 0) {
                s = KILN_FAIL(ex->err, KILN_E_IO, "writing %s: %s", path, strerror(errno));
                unlink(path);
            } else {
                json_array_append_new(images, json_pack("{s:s, s:s, s:s}", "filename", file, "subfolder", sub,
                                                        "type", type));
            }
        }
        kiln_free(png);
    }
    free(prompt_txt);
    for (int k = 0; k < 3; k++) free(extra_txt[k]);
    json_t *ui = json_pack("{s:o}", "images", images);
    json_object_set(ex->outputs, id, ui);
    if (ex->hooks && ex->hooks->executed && s == KILN_OK) ex->hooks->executed(ex->hooks->ctx, id, ui);
    json_decref(ui);
    return s;
}

int kiln_node_save_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)out;
    if (!ex->env->output_dir) return KILN_FAIL(ex->err, KILN_E_INVALID, "no output folder configured");
    return save_pngs(ex, id, in[0], ex->env->output_dir, in[1]->str ? in[1]->str : "", "output");
}

/* ---- PreviewImage, SaveImageWebsocket, Primitive* ------------------------------------------------------- */

int kiln_node_preview_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)out;
    if (!ex->env->temp_dir) return KILN_FAIL(ex->err, KILN_E_INVALID, "no temp folder configured");
    /* ComfyUI's name: ComfyUI_temp_ and five random letters, so previews of different prompts never collide */
    char prefix[32] = "ComfyUI_temp_";
    uint64_t t = (uint64_t)kiln_clock_ns() ^ ((uint64_t)(uintptr_t)ex << 7);
    for (int i = 0; i < 5; i++, t /= 26) prefix[13 + i] = (char)('a' + (int)(t % 26));
    prefix[18] = 0;
    mkdirs(ex, ex->env->temp_dir);
    return save_pngs(ex, id, in[0], ex->env->temp_dir, prefix, "temp");
}

int kiln_node_save_image_websocket(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)out;
    const kiln_value *img = in[0];
    size_t one = (size_t)img->width * (size_t)img->height * 3;
    for (int i = 0; i < img->n_images; i++) {
        uint8_t *png = NULL;
        size_t len = 0;
        KILN_TRY(kiln_png_encode(img->pixels + one * (size_t)i, img->width, img->height, NULL, 0, &png, &len, ex->err));
        if (ex->hooks && ex->hooks->image_frame) ex->hooks->image_frame(ex->hooks->ctx, id, png, len);
        kiln_free(png);
    }
    return KILN_OK;
}

int kiln_node_primitive(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    *out = *in[0]; /* the literal's value, taken over */
    if (in[0]->str && !(out->str = kiln_strdup(in[0]->str))) return nomem(ex);
    out->str2 = out->str3 = NULL;
    return KILN_OK;
}
