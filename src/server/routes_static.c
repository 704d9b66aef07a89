/* routes_static.c - the web frontend's files (--front-end-root: ComfyUI's comfyui-frontend-package `static`
 * folder), the workflow templates under /templates/ and kiln's own page at /kiln/ (also at / when no frontend
 * is configured). Only GET and HEAD of URLs that are not under /api/ come here, after every API route.
 *
 * The path is kiln's own decoding of the raw request line (kiln_pct_decode), must pass kiln_rel_path_ok (no
 * '..', no hidden names, no control bytes) and must resolve inside its root after realpath, so neither an
 * encoded traversal (%2e%2e, %2f) nor a symlink can leave the root. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/server_internal.h"

const char *kiln_content_type(const char *name) {
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
        {".json", "application/json"}, {".map", "application/json"}, {".svg", "image/svg+xml"},
        {".png", "image/png"}, {".jpg", "image/jpeg"}, {".jpeg", "image/jpeg"}, {".webp", "image/webp"},
        {".gif", "image/gif"}, {".ico", "image/x-icon"}, {".woff", "font/woff"}, {".woff2", "font/woff2"},
        {".ttf", "font/ttf"}, {".otf", "font/otf"}, {".wasm", "application/wasm"}, {".txt", "text/plain; charset=utf-8"},
        {".md", "text/markdown; charset=utf-8"}, {".mp4", "video/mp4"}, {".webm", "video/webm"},
        {".mp3", "audio/mpeg"}, {".flac", "audio/flac"}, {".wav", "audio/wav"}, {".glb", "model/gltf-binary"},
    };
    const char *dot = strrchr(name, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (!strcasecmp(dot, types[i].ext)) return types[i].type;
    return "application/octet-stream";
}

enum MHD_Result kiln_reply_file(kiln_req *r, int fd, const char *name, const char *cache_control) {
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return kiln_reply_not_found(r);
    }
    struct MHD_Response *resp = MHD_create_response_from_fd64((uint64_t)sb.st_size, fd);
    if (!resp) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", kiln_content_type(name));
    if (cache_control) MHD_add_response_header(resp, "Cache-Control", cache_control);
    enum MHD_Result res = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    r->replied = true;
    return res;
}

/* Opens root/rel when rel is a safe relative path that resolves to a regular file inside root; -1 otherwise. */
static int open_inside(const char *root, const char *rel) {
    if (!root[0] || !kiln_rel_path_ok(rel, false)) return -1;
    char path[PATH_MAX + 1100];
    if (snprintf(path, sizeof path, "%s/%s", root, rel) >= (int)sizeof path) return -1;
    if (!kiln_path_inside(root, path, false)) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

bool kiln_routes_static(kiln_req *r, enum MHD_Result *res) {
    kiln_server *srv = r->srv;
    if (r->api_prefixed || (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)) return false;
    const char *url = r->url;
    bool fallback_page = !srv->front_end_root[0] && (!strcmp(url, "/") || !strcmp(url, "/index.html"));
    if (!strcmp(url, "/kiln") || !strcmp(url, "/kiln/") || fallback_page) {
        *res = kiln_reply_text(r, 200, "text/html; charset=utf-8", kiln_web_index_html);
        return true;
    }
    char rel[1100];
    const char *raw = r->raw_path ? r->raw_path : url;
    if (raw[0] != '/' || !kiln_pct_decode(raw + 1, strlen(raw + 1), rel, sizeof rel)) return false;
    if (!strncmp(rel, "templates/", 10)) {
        for (int i = 0; i < srv->n_templates_dirs; i++) {
            int fd = open_inside(srv->templates_dirs[i], rel + 10);
            if (fd >= 0) {
                *res = kiln_reply_file(r, fd, rel, "no-cache");
                return true;
            }
        }
        return false;
    }
    if (!srv->front_end_root[0]) return false;
    bool index = !rel[0];
    int fd = open_inside(srv->front_end_root, index ? "index.html" : rel);
    if (fd < 0) return false;
    /* the hashed bundle files never change; index.html must be re-read so a new frontend takes effect */
    *res = kiln_reply_file(r, fd, index ? "index.html" : rel,
                           index || !strcmp(rel, "index.html") ? "no-cache" : "public, max-age=86400");
    return true;
}
