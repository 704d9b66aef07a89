/* routes_info.c - the read-only routes the ComfyUI frontend calls at start-up, answered as ComfyUI's server.py
 * and app/model_manager.py answer them for a server without custom nodes:
 *
 *   GET /features              {supports_preview_metadata, max_upload_size}
 *   GET /i18n                  {} (custom nodes' translations)
 *   GET /workflow_templates    {} (custom nodes' example workflows)
 *   GET /global_subgraphs      {} (subgraph blueprints of custom nodes)
 *   GET /extensions            every .js file under extensions/ of the front-end root ("/extensions/...")
 *   GET /embeddings            []
 *   GET /experiment/models     [{name, folders}]        GET /experiment/models/{folder}  [{name, pathIndex, ...}]
 *   GET /view_metadata/{folder}?filename=F            a safetensors file's __metadata__ (404 when none)
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "server/server_internal.h"

#define HEADER_MAX (64u << 20) /* the largest safetensors header read for its metadata */

static void list_js(json_t *out, const char *abs, const char *rel, int depth) {
    DIR *d = opendir(abs);
    if (!d || depth > 8) {
        if (d) closedir(d);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && json_array_size(out) < 4096) {
        if (e->d_name[0] == '.') continue;
        char a[PATH_MAX], r[PATH_MAX];
        if (snprintf(a, sizeof a, "%s/%s", abs, e->d_name) >= (int)sizeof a) continue;
        if (snprintf(r, sizeof r, "%s/%s", rel, e->d_name) >= (int)sizeof r) continue;
        struct stat sb;
        if (lstat(a, &sb) != 0) continue;
        size_t n = strlen(e->d_name);
        if (S_ISDIR(sb.st_mode)) list_js(out, a, r, depth + 1);
        else if (S_ISREG(sb.st_mode) && n > 3 && !strcmp(e->d_name + n - 3, ".js")) json_array_append_new(out, json_string(r));
    }
    closedir(d);
}

static json_t *extensions(kiln_server *srv) {
    json_t *out = json_array();
    if (srv->front_end_root[0]) {
        char abs[PATH_MAX];
        snprintf(abs, sizeof abs, "%s/extensions", srv->front_end_root);
        list_js(out, abs, "/extensions", 0);
    }
    return out;
}

static json_t *experiment_models(kiln_server *srv) {
    json_t *out = json_array();
    for (int k = 0; k < KILN_MODELS_KIND_COUNT; k++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", srv->models_dir, kiln_model_kind_folder((kiln_model_kind)k));
        json_array_append_new(out, json_pack("{s:s, s:[s]}", "name", kiln_model_kind_folder((kiln_model_kind)k),
                                             "folders", p));
    }
    return out;
}

static enum MHD_Result experiment_folder(kiln_req *r, const char *folder) {
    kiln_model_kind k;
    if (!kiln_model_kind_from_folder(folder, &k)) return kiln_reply_not_found(r);
    json_t *names = kiln_models_list(r->srv->cfg.models_dir, k), *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v) {
        char path[PATH_MAX];
        kiln_err err = {0};
        struct stat sb;
        if (kiln_models_resolve(r->srv->cfg.models_dir, k, json_string_value(v), path, sizeof path, &err) != KILN_OK ||
            stat(path, &sb) != 0)
            continue;
        json_array_append_new(out, json_pack("{s:O, s:i, s:f, s:f, s:I}", "name", v, "pathIndex", 0, "modified",
                                             (double)sb.st_mtime, "created", (double)sb.st_ctime, "size",
                                             (json_int_t)sb.st_size));
    }
    json_decref(names);
    return kiln_reply_json(r, 200, out);
}

/* The __metadata__ object of a safetensors file: an 8-byte little-endian header length, then JSON. */
static json_t *st_metadata(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    unsigned char len8[8];
    json_t *meta = NULL;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && read(fd, len8, 8) == 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = (n << 8) | len8[i];
        if (n > 0 && n <= HEADER_MAX && n <= (uint64_t)sb.st_size - 8) {
            char *buf = kiln_malloc((size_t)n);
            if (buf && read(fd, buf, (size_t)n) == (ssize_t)n) {
                json_t *h = json_loadb(buf, (size_t)n, 0, NULL);
                json_t *m = json_object_get(h, "__metadata__");
                if (json_is_object(m)) meta = json_incref(m);
                json_decref(h);
            }
            kiln_free(buf);
        }
    }
    close(fd);
    return meta;
}

static enum MHD_Result view_metadata(kiln_req *r, const char *folder) {
    kiln_model_kind k;
    const char *name = kiln_req_arg(r, "filename");
    char path[PATH_MAX];
    kiln_err err = {0};
    if (!kiln_model_kind_from_folder(folder, &k) || !name || !kiln_model_name_ok(name) ||
        kiln_models_resolve(r->srv->cfg.models_dir, k, name, path, sizeof path, &err) != KILN_OK)
        return kiln_reply_not_found(r);
    json_t *meta = st_metadata(path);
    return meta ? kiln_reply_json(r, 200, meta) : kiln_reply_not_found(r);
}

bool kiln_routes_info(kiln_req *r, enum MHD_Result *res) {
    if (strcmp(r->method, "GET") != 0) return false;
    const char *u = r->url;
    if (!strcmp(u, "/features"))
        *res = kiln_reply_json(r, 200, json_pack("{s:b, s:I}", "supports_preview_metadata", 0, "max_upload_size",
                                                 (json_int_t)r->srv->cfg.max_body));
    else if (!strcmp(u, "/i18n") || !strcmp(u, "/workflow_templates") || !strcmp(u, "/global_subgraphs"))
        *res = kiln_reply_json(r, 200, json_object());
    else if (!strcmp(u, "/extensions"))
        *res = kiln_reply_json(r, 200, extensions(r->srv));
    else if (!strcmp(u, "/embeddings"))
        *res = kiln_reply_json(r, 200, json_array());
    else if (!strcmp(u, "/experiment/models"))
        *res = kiln_reply_json(r, 200, experiment_models(r->srv));
    else if (!strncmp(u, "/experiment/models/", 19))
        *res = experiment_folder(r, u + 19);
    else if (!strncmp(u, "/view_metadata/", 15))
        *res = view_metadata(r, u + 15);
    else
        return false;
    return true;
}
