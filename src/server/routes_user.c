/* routes_user.c - ComfyUI's per-user storage (app/user_manager.py, app/app_settings.py), single-user mode: the
 * user "default" owns <user_dir>/default/, its settings are comfy.settings.json there.
 *
 *   GET  /users                        {storage:"server", migrated:bool}
 *   GET  /settings                     the settings object        POST /settings      merge an object
 *   GET  /settings/{id}                one value (null if unset)  POST /settings/{id} set one value
 *   GET  /userdata?dir=D[&recurse][&full_info][&split]            the files under D (404 if D is missing)
 *   GET  /v2/userdata?path=D           [{name, path, type, size?, modified}] one level
 *   GET  /userdata/{file}              the file                   DELETE /userdata/{file}   204
 *   POST /userdata/{file}[?overwrite=false][&full_info=true]      body -> file (409 if it exists and !overwrite)
 *   POST /userdata/{file}/move/{dest}[?overwrite=...]             rename
 *
 * {file} is one percent-encoded path segment (the frontend sends workflows%2Fa.json); kiln splits the raw
 * request line on its real slashes and decodes each part itself. Every path must pass kiln_rel_path_ok and
 * resolve inside the user's folder (kiln_path_inside); writes go to a temporary name and are renamed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "server/server_internal.h"

#define SETTINGS_FILE "comfy.settings.json"
#define LIST_MAX 10000 /* files one listing reports */

static void user_root(kiln_server *srv, char *out, size_t cap) { snprintf(out, cap, "%s/default", srv->user_dir); }

static enum MHD_Result bad_path(kiln_req *r) { return kiln_reply_text(r, 400, "text/plain; charset=utf-8", "Invalid path"); }

/* root/rel for a checked rel; false when rel is unsafe or resolves outside the user's folder. */
static bool user_path(kiln_req *r, const char *rel, bool may_not_exist, char *out, size_t cap) {
    char root[PATH_MAX];
    user_root(r->srv, root, sizeof root);
    if (!kiln_mkdirs(root) || !kiln_rel_path_ok(rel, true)) return false;
    if (snprintf(out, cap, "%s/%s", root, rel) >= (int)cap) return false;
    return kiln_path_inside(root, out, may_not_exist);
}

/* Writes len bytes to path through path.tmp-XXXXXX + rename, so a reader never sees half a file. */
static bool write_atomic(const char *path, const char *data, size_t len) {
    char tmp[PATH_MAX + 16];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp) return false;
    int fd = mkstemp(tmp);
    if (fd < 0) return false;
    bool ok = true;
    for (size_t off = 0; ok && off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = false;
        else off += (size_t)w;
    }
    if (fchmod(fd, 0644) != 0) ok = false;
    if (close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) unlink(tmp);
    return ok;
}

/* ---- settings ------------------------------------------------------------------------------------------- */

static json_t *load_settings(kiln_server *srv) {
    char root[PATH_MAX], path[PATH_MAX + 64];
    user_root(srv, root, sizeof root);
    snprintf(path, sizeof path, "%s/" SETTINGS_FILE, root);
    json_t *j = json_load_file(path, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        j = json_object();
    }
    return j;
}

static bool save_settings(kiln_server *srv, json_t *settings) {
    char root[PATH_MAX], path[PATH_MAX + 64];
    user_root(srv, root, sizeof root);
    if (!kiln_mkdirs(root)) return false;
    snprintf(path, sizeof path, "%s/" SETTINGS_FILE, root);
    char *txt = json_dumps(settings, JSON_INDENT(4));
    bool ok = txt && write_atomic(path, txt, strlen(txt));
    free(txt);
    return ok;
}

static enum MHD_Result settings_route(kiln_req *r, const char *id) {
    kiln_server *srv = r->srv;
    bool post = !strcmp(r->method, "POST");
    if (!post && strcmp(r->method, "GET") != 0) return kiln_reply_not_found(r);
    json_t *value = NULL;
    if (post) {
        json_error_t e;
        value = r->body ? json_loadb(r->body, r->body_len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e) : NULL;
        if (!value || (!id && !json_is_object(value))) {
            json_decref(value);
            return kiln_reply_text(r, 400, "text/plain; charset=utf-8",
                                   id ? "Invalid JSON body" : "The settings body must be a JSON object");
        }
    }
    if (id && (!*id || strlen(id) > 256)) {
        json_decref(value);
        return kiln_reply_text(r, 400, "text/plain; charset=utf-8", "Invalid setting id");
    }
    pthread_mutex_lock(&srv->user_mu);
    json_t *settings = load_settings(srv);
    enum MHD_Result res;
    if (!post) {
        json_t *v = id ? json_object_get(settings, id) : settings;
        res = kiln_reply_json(r, 200, json_incref(v ? v : json_null()));
    } else {
        if (id) json_object_set(settings, id, value);
        else json_object_update(settings, value);
        res = save_settings(srv, settings) ? kiln_reply_text(r, 200, "text/plain; charset=utf-8", "")
                                           : kiln_reply_text(r, 500, "text/plain; charset=utf-8", "Could not save the settings");
    }
    json_decref(settings);
    pthread_mutex_unlock(&srv->user_mu);
    json_decref(value);
    return res;
}

/* ---- listing -------------------------------------------------------------------------------------------- */

typedef struct lister {
    json_t *out;
    bool recurse, full_info, split;
    int count;
} lister;

static void list_dir(lister *l, const char *abs, const char *rel) {
    DIR *d = opendir(abs);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && l->count < LIST_MAX) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || strstr(e->d_name, ".tmp-")) continue;
        char a[PATH_MAX], rp[PATH_MAX];
        if (snprintf(a, sizeof a, "%s/%s", abs, e->d_name) >= (int)sizeof a) continue;
        if (snprintf(rp, sizeof rp, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >= (int)sizeof rp) continue;
        struct stat sb;
        if (lstat(a, &sb) != 0) continue; /* symlinks are not followed (they could lead outside) */
        if (S_ISDIR(sb.st_mode)) {
            if (l->recurse) list_dir(l, a, rp);
            continue;
        }
        if (!S_ISREG(sb.st_mode)) continue;
        l->count++;
        if (l->full_info) {
            json_array_append_new(l->out, json_pack("{s:s, s:I, s:f}", "path", rp, "size", (json_int_t)sb.st_size,
                                                    "modified", (double)sb.st_mtime));
        } else if (l->split) {
            json_t *parts = json_pack("[s]", rp);
            char tmp[PATH_MAX];
            snprintf(tmp, sizeof tmp, "%s", rp);
            for (char *save = NULL, *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save))
                json_array_append_new(parts, json_string(c));
            json_array_append_new(l->out, parts);
        } else {
            json_array_append_new(l->out, json_string(rp));
        }
    }
    closedir(d);
}

static bool flag(kiln_req *r, const char *name) {
    const char *v = kiln_req_arg(r, name);
    return v && (!strcmp(v, "true") || !strcmp(v, "1"));
}

static enum MHD_Result list_userdata(kiln_req *r) {
    const char *dir = kiln_req_arg(r, "dir");
    char abs[PATH_MAX];
    if (!dir || !*dir) return kiln_reply_text(r, 400, "text/plain; charset=utf-8", "dir is required");
    if (!user_path(r, dir, false, abs, sizeof abs)) {
        /* ComfyUI: an unsafe dir is a 403, a missing one a 404 */
        return kiln_rel_path_ok(dir, true) ? kiln_reply_not_found(r)
                                           : kiln_reply_text(r, 403, "text/plain; charset=utf-8", "Forbidden");
    }
    struct stat sb;
    if (stat(abs, &sb) != 0 || !S_ISDIR(sb.st_mode)) return kiln_reply_not_found(r);
    lister l = {.out = json_array(), .recurse = flag(r, "recurse"), .full_info = flag(r, "full_info"),
                .split = flag(r, "split")};
    list_dir(&l, abs, "");
    return kiln_reply_json(r, 200, l.out);
}

static enum MHD_Result list_userdata_v2(kiln_req *r) {
    const char *path = kiln_req_arg(r, "path");
    char root[PATH_MAX], abs[PATH_MAX];
    user_root(r->srv, root, sizeof root);
    if (!kiln_mkdirs(root)) return kiln_reply_text(r, 500, "text/plain; charset=utf-8", "No user folder");
    bool top = !path || !*path || !strcmp(path, "/");
    if (top) snprintf(abs, sizeof abs, "%s", root);
    else if (!user_path(r, path, false, abs, sizeof abs)) return kiln_reply_not_found(r);
    DIR *d = opendir(abs);
    if (!d) return kiln_reply_not_found(r);
    json_t *out = json_array();
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) && n < LIST_MAX) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || strstr(e->d_name, ".tmp-")) continue;
        char a[PATH_MAX], rp[PATH_MAX];
        if (snprintf(a, sizeof a, "%s/%s", abs, e->d_name) >= (int)sizeof a) continue;
        snprintf(rp, sizeof rp, "%s%s%s", top ? "" : path, top ? "" : "/", e->d_name);
        struct stat sb;
        if (lstat(a, &sb) != 0 || !(S_ISDIR(sb.st_mode) || S_ISREG(sb.st_mode))) continue;
        json_t *item = json_pack("{s:s, s:s, s:s, s:f}", "name", e->d_name, "path", rp, "type",
                                 S_ISDIR(sb.st_mode) ? "directory" : "file", "modified", (double)sb.st_mtime);
        if (S_ISREG(sb.st_mode)) json_object_set_new(item, "size", json_integer((json_int_t)sb.st_size));
        json_array_append_new(out, item);
        n++;
    }
    closedir(d);
    return kiln_reply_json(r, 200, out);
}

/* ---- one file ----------------------------------------------------------------------------------------------- */

static json_t *file_info(const char *rel, const char *abs) {
    struct stat sb;
    if (stat(abs, &sb) != 0) return json_string(rel);
    return json_pack("{s:s, s:I, s:f}", "path", rel, "size", (json_int_t)sb.st_size, "modified", (double)sb.st_mtime);
}

static enum MHD_Result get_file(kiln_req *r, const char *rel) {
    char abs[PATH_MAX];
    if (!user_path(r, rel, false, abs, sizeof abs)) return kiln_reply_not_found(r);
    int fd = open(abs, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return kiln_reply_not_found(r);
    return kiln_reply_file(r, fd, rel, "no-store");
}

static enum MHD_Result post_file(kiln_req *r, const char *rel) {
    char abs[PATH_MAX];
    if (!kiln_rel_path_ok(rel, true)) return bad_path(r);
    /* the folders on the way are created first, so their resolution can be checked */
    char root[PATH_MAX], dir[PATH_MAX];
    user_root(r->srv, root, sizeof root);
    snprintf(dir, sizeof dir, "%s/%s", root, rel);
    char *slash = strrchr(dir, '/');
    *slash = 0;
    if (!kiln_mkdirs(root)) return kiln_reply_text(r, 500, "text/plain; charset=utf-8", "No user folder");
    /* each existing ancestor must stay inside before anything is created under it */
    char walk[PATH_MAX];
    snprintf(walk, sizeof walk, "%s", dir);
    for (char *p = strlen(walk) > strlen(root) ? walk + strlen(root) + 1 : NULL; p && *p;) {
        char *next = strchr(p, '/');
        if (next) *next = 0;
        if (!kiln_path_inside(root, walk, true)) return bad_path(r);
        if (mkdir(walk, 0755) != 0 && errno != EEXIST) return kiln_reply_text(r, 500, "text/plain; charset=utf-8", "mkdir failed");
        if (!kiln_path_inside(root, walk, false)) return bad_path(r);
        if (next) *next = '/';
        p = next ? next + 1 : NULL;
    }
    if (!user_path(r, rel, true, abs, sizeof abs)) return bad_path(r);
    const char *ow = kiln_req_arg(r, "overwrite");
    bool overwrite = !ow || strcmp(ow, "false") != 0; /* ComfyUI: overwrite unless overwrite=false */
    struct stat sb;
    if (lstat(abs, &sb) == 0) {
        if (!overwrite) return kiln_reply_text(r, 409, "text/plain; charset=utf-8", "File already exists");
        if (!S_ISREG(sb.st_mode)) return bad_path(r);
    }
    pthread_mutex_lock(&r->srv->user_mu);
    bool ok = write_atomic(abs, r->body ? r->body : "", r->body_len);
    pthread_mutex_unlock(&r->srv->user_mu);
    if (!ok) return kiln_reply_text(r, 500, "text/plain; charset=utf-8", "Could not write the file");
    return kiln_reply_json(r, 200, flag(r, "full_info") ? file_info(rel, abs) : json_string(rel));
}

static enum MHD_Result delete_file(kiln_req *r, const char *rel) {
    char abs[PATH_MAX];
    struct stat sb;
    if (!user_path(r, rel, false, abs, sizeof abs) || lstat(abs, &sb) != 0 || !S_ISREG(sb.st_mode))
        return kiln_reply_not_found(r);
    if (unlink(abs) != 0) return kiln_reply_text(r, 500, "text/plain; charset=utf-8", "Could not delete the file");
    return kiln_reply_text(r, 204, "text/plain; charset=utf-8", "");
}

static enum MHD_Result move_file(kiln_req *r, const char *src, const char *dst) {
    char a[PATH_MAX], b[PATH_MAX];
    struct stat sb;
    if (!user_path(r, src, false, a, sizeof a) || lstat(a, &sb) != 0 || !S_ISREG(sb.st_mode))
        return kiln_reply_not_found(r);
    if (!kiln_rel_path_ok(dst, true)) return bad_path(r);
    char root[PATH_MAX], dir[PATH_MAX];
    user_root(r->srv, root, sizeof root);
    snprintf(dir, sizeof dir, "%s/%s", root, dst);
    *strrchr(dir, '/') = 0;
    if (strcmp(dir, root) != 0) { /* the destination's folder: created inside the user's folder only */
        if (!kiln_path_inside(root, dir, true)) return bad_path(r);
        if (!kiln_mkdirs(dir) || !kiln_path_inside(root, dir, false)) return bad_path(r);
    }
    if (!user_path(r, dst, true, b, sizeof b)) return bad_path(r);
    const char *ow = kiln_req_arg(r, "overwrite");
    bool overwrite = !ow || strcmp(ow, "false") != 0;
    if (lstat(b, &sb) == 0 && (!overwrite || !S_ISREG(sb.st_mode)))
        return kiln_reply_text(r, 409, "text/plain; charset=utf-8", "File already exists");
    if (rename(a, b) != 0) return kiln_reply_text(r, 500, "text/plain; charset=utf-8", "Could not move the file");
    return kiln_reply_json(r, 200, flag(r, "full_info") ? file_info(dst, b) : json_string(dst));
}

/* /userdata/{file}[/move/{dest}] from the raw path: one or three segments, each decoded here. */
static enum MHD_Result userdata_file(kiln_req *r) {
    const char *raw = r->raw_path ? r->raw_path : r->url;
    const char *seg = raw + strlen("/userdata/");
    const char *slash = strchr(seg, '/');
    char src[1100], dst[1100];
    if (!kiln_pct_decode(seg, slash ? (size_t)(slash - seg) : strlen(seg), src, sizeof src)) return bad_path(r);
    if (slash) {
        if (strncmp(slash, "/move/", 6) != 0 || strchr(slash + 6, '/') || strcmp(r->method, "POST") != 0)
            return kiln_reply_not_found(r);
        if (!kiln_pct_decode(slash + 6, strlen(slash + 6), dst, sizeof dst)) return bad_path(r);
        return move_file(r, src, dst);
    }
    if (!strcmp(r->method, "GET")) return get_file(r, src);
    if (!strcmp(r->method, "POST")) return post_file(r, src);
    if (!strcmp(r->method, "DELETE")) return delete_file(r, src);
    return kiln_reply_not_found(r);
}

bool kiln_routes_user(kiln_req *r, enum MHD_Result *res) {
    const char *u = r->url;
    bool get = !strcmp(r->method, "GET");
    if (!strcmp(u, "/users") && get) {
        char root[PATH_MAX];
        user_root(r->srv, root, sizeof root);
        struct stat sb;
        *res = kiln_reply_json(r, 200, json_pack("{s:s, s:b}", "storage", "server", "migrated",
                                                 stat(root, &sb) == 0 && S_ISDIR(sb.st_mode)));
    } else if (!strcmp(u, "/settings")) {
        *res = settings_route(r, NULL);
    } else if (!strncmp(u, "/settings/", 10)) {
        char id[300];
        const char *raw = r->raw_path ? r->raw_path : u;
        if (strncmp(raw, "/settings/", 10) != 0 || !kiln_pct_decode(raw + 10, strlen(raw + 10), id, sizeof id))
            *res = kiln_reply_text(r, 400, "text/plain; charset=utf-8", "Invalid setting id");
        else
            *res = settings_route(r, id);
    } else if (!strcmp(u, "/userdata") && get) {
        *res = list_userdata(r);
    } else if (!strcmp(u, "/v2/userdata") && get) {
        *res = list_userdata_v2(r);
    } else if (!strncmp(u, "/userdata/", 10) && r->raw_path && !strncmp(r->raw_path, "/userdata/", 10)) {
        *res = userdata_file(r);
    } else {
        return false;
    }
    return true;
}
