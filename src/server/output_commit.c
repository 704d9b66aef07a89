/* output_commit.c - staged output files and their idempotent commit (see output_commit.h). */
#define _GNU_SOURCE /* nftw */
#include "server/output_commit.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "base/log.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)f;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_tree(const char *path) {
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        log_warn("serve: removing %s: %s", path, strerror(errno));
}

static kiln_status mkdirs(const char *path, kiln_err *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return KILN_FAIL(err, KILN_E_LIMIT, "path too long");
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KILN_FAIL(err, KILN_E_IO, "mkdir %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KILN_FAIL(err, KILN_E_IO, "mkdir %s: %s", tmp, strerror(errno));
    return KILN_OK;
}

/* "name_00012_.png" -> name (cap bytes) and 12; false for any other shape. */
static bool split_name(const char *file, char *name, size_t cap, long *counter) {
    size_t l = strlen(file);
    /* file ends "_NNNNN_.png": the counter runs from the '_' before it to "_.png" */
    if (l < 8 || strcmp(file + l - 5, "_.png") != 0) return false;
    const char *end = file + l - 5, *us = end;
    while (us > file && us[-1] != '_') us--;
    if (us == file || us == end) return false;
    char *stop;
    long c = strtol(us, &stop, 10);
    if (stop != end || c < 0) return false;
    size_t nl = (size_t)(us - 1 - file);
    if (nl >= cap) return false;
    memcpy(name, file, nl);
    name[nl] = 0;
    *counter = c;
    return true;
}

/* One more than the largest {name}_{N}_.png in dir (ComfyUI's counter rule). */
static long next_free(const char *dir, const char *name) {
    long best = 0;
    DIR *d = opendir(dir);
    if (!d) return 1;
    struct dirent *e;
    char n[512];
    long c;
    while ((e = readdir(d)))
        if (split_name(e->d_name, n, sizeof n, &c) && !strcmp(n, name) && c > best && c < 10000000) best = c;
    closedir(d);
    return best + 1;
}

static kiln_status write_plan(const char *stage, const json_t *plan, kiln_err *err) {
    char path[4200], tmp[4200];
    snprintf(path, sizeof path, "%s/commit.json", stage);
    snprintf(tmp, sizeof tmp, "%s/commit.json.tmp", stage);
    char *txt = json_dumps(plan, JSON_COMPACT);
    if (!txt) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t len = strlen(txt), off = 0;
    while (fd >= 0 && off < len) {
        ssize_t w = write(fd, txt + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    free(txt);
    bool ok = fd >= 0 && off == len && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (!ok || rename(tmp, path) != 0) {
        kiln_status s = KILN_FAIL(err, KILN_E_IO, "writing the output plan of a job: %s", strerror(errno));
        unlink(tmp);
        return s;
    }
    return KILN_OK;
}

static json_t *read_plan(const char *stage) {
    char path[4200];
    snprintf(path, sizeof path, "%s/commit.json", stage);
    json_t *p = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    if (p && (!json_is_object(json_object_get(p, "outputs")) || !json_is_array(json_object_get(p, "links")))) {
        json_decref(p);
        return NULL;
    }
    return p;
}

kiln_status kiln_outputs_begin(const char *output_dir, const char *job_id, char *stage, bool *planned,
                               json_t **plan_outputs, kiln_err *err) {
    *planned = false;
    *plan_outputs = NULL;
    if (snprintf(stage, 4096, "%s/%s/%s", output_dir, KILN_STAGING_DIR, job_id) >= 4096)
        return KILN_FAIL(err, KILN_E_LIMIT, "output folder path too long");
    json_t *plan = read_plan(stage);
    if (plan) { /* a previous attempt finished the graph and planned its names: commit that, run nothing */
        *planned = true;
        *plan_outputs = json_incref(json_object_get(plan, "outputs"));
        json_decref(plan);
        return KILN_OK;
    }
    rm_tree(stage); /* a dead attempt's files, a half-written one included */
    return mkdirs(stage, err);
}

/* link(2) every planned file; a final name taken by someone else meanwhile moves to the next counter. */
static kiln_status make_links(const char *output_dir, const char *stage, json_t *plan, kiln_err *err) {
    json_t *links = json_object_get(plan, "links"), *outputs = json_object_get(plan, "outputs"), *l;
    size_t i;
    bool moved = false;
    json_array_foreach(links, i, l) {
        const char *node = json_string_value(json_array_get(l, 0)), *sub = json_string_value(json_array_get(l, 2));
        const char *sfile = json_string_value(json_array_get(l, 3)), *ffile = json_string_value(json_array_get(l, 4));
        size_t k = (size_t)json_integer_value(json_array_get(l, 1));
        if (!node || !sub || !sfile || !ffile) return KILN_FAIL(err, KILN_E_FORMAT, "a malformed output plan");
        char sp[4600], dir[4300], fp[4600], name[512];
        snprintf(sp, sizeof sp, "%s/%s%s%s", stage, sub, *sub ? "/" : "", sfile);
        snprintf(dir, sizeof dir, "%s%s%s", output_dir, *sub ? "/" : "", sub);
        struct stat ss, fs;
        if (stat(sp, &ss) != 0) return KILN_FAIL(err, KILN_E_IO, "staged output %s: %s", sfile, strerror(errno));
        KILN_TRY(mkdirs(dir, err));
        char cur[512];
        snprintf(cur, sizeof cur, "%s", ffile);
        for (int tries = 0;; tries++) {
            snprintf(fp, sizeof fp, "%s/%s", dir, cur);
            if (link(sp, fp) == 0) break;
            if (errno != EEXIST) return KILN_FAIL(err, KILN_E_IO, "committing output %s: %s", cur, strerror(errno));
            if (stat(fp, &fs) == 0 && fs.st_ino == ss.st_ino && fs.st_dev == ss.st_dev) break; /* ours already */
            long c;
            if (tries > 1000 || !split_name(cur, name, sizeof name, &c))
                return KILN_FAIL(err, KILN_E_IO, "committing output %s: no free name", cur);
            snprintf(cur, sizeof cur, "%s_%05ld_.png", name, next_free(dir, name));
            moved = true;
        }
        if (strcmp(cur, ffile) != 0) {
            json_array_set_new(l, 4, json_string(cur));
            json_t *img = json_array_get(json_object_get(json_object_get(outputs, node), "images"), k);
            json_object_set_new(img, "filename", json_string(cur));
        }
    }
    return moved ? write_plan(stage, plan, err) : KILN_OK;
}

kiln_status kiln_outputs_commit(const char *output_dir, const char *stage, const json_t *outputs, bool planned,
                                json_t **final_outputs, kiln_err *err) {
    *final_outputs = NULL;
    /* A plan that appeared while this attempt ran is another attempt's (a node whose lease expired under load
     * but that was still alive): adopt it, so that only one set of files is ever committed. */
    json_t *plan = read_plan(stage);
    if (planned && !plan) return KILN_FAIL(err, KILN_E_IO, "the output plan of a resumed job is gone");
    if (plan && !planned) log_warn("serve: another attempt committed this job's outputs first; adopting its files");
    if (!plan) {
        json_t *out = json_deep_copy(outputs ? outputs : json_object()), *links = json_array();
        plan = json_pack("{s:o, s:o}", "outputs", out, "links", links);
        if (!plan) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        const char *node;
        json_t *o;
        json_object_foreach(out, node, o) {
            json_t *imgs = json_object_get(o, "images"), *img;
            size_t k;
            json_array_foreach(imgs, k, img) {
                const char *type = json_string_value(json_object_get(img, "type"));
                const char *sub = json_string_value(json_object_get(img, "subfolder"));
                const char *file = json_string_value(json_object_get(img, "filename"));
                char name[512], dir[4300], final[600];
                long c;
                if (!type || strcmp(type, "output") != 0 || !file) continue;
                if (!sub) sub = "";
                if (!split_name(file, name, sizeof name, &c)) {
                    json_decref(plan);
                    return KILN_FAIL(err, KILN_E_INTERNAL, "a staged output named %s", file);
                }
                snprintf(dir, sizeof dir, "%s%s%s", output_dir, *sub ? "/" : "", sub);
                /* the next free counter, past the names this plan already took in the same folder */
                long n = next_free(dir, name);
                json_t *l;
                size_t j;
                json_array_foreach(links, j, l) {
                    long lc;
                    char ln[512];
                    if (!strcmp(json_string_value(json_array_get(l, 2)), sub) &&
                        split_name(json_string_value(json_array_get(l, 4)), ln, sizeof ln, &lc) && !strcmp(ln, name) &&
                        lc >= n)
                        n = lc + 1;
                }
                snprintf(final, sizeof final, "%s_%05ld_.png", name, n);
                json_array_append_new(links, json_pack("[s, I, s, s, s]", node, (json_int_t)k, sub, file, final));
                json_object_set_new(img, "filename", json_string(final));
            }
        }
        kiln_status s = write_plan(stage, plan, err);
        if (s != KILN_OK) {
            json_decref(plan);
            return s;
        }
    }
    kiln_status s = make_links(output_dir, stage, plan, err);
    if (s == KILN_OK) *final_outputs = json_incref(json_object_get(plan, "outputs"));
    json_decref(plan);
    return s;
}

void kiln_outputs_done(const char *stage) { rm_tree(stage); }
