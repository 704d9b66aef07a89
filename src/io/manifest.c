/* manifest.c - the kiln-manifest/1 reader (see manifest.h). */
#include "io/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/utf8.h"

bool kiln_ckpt_manifest_path_ok(const char *p) {
    if (!p || !*p || p[0] == '/' || strchr(p, '\\') || !kiln_utf8_valid(p, strlen(p), NULL)) return false;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return false;
        s += n + (e ? 1 : 0);
        if (e && !*s) return false; /* trailing slash */
    }
    return true;
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static bool one_of(const char *s, const char *const *set) {
    for (; *set; set++)
        if (strcmp(s, *set) == 0) return true;
    return false;
}

static void warn_unknown(const char *label, const char *where, json_t *obj, const char *const *known) {
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        if (!one_of(k, known)) log_warn("%s: ignoring unknown key '%s' in %s", label, k, where);
    }
}

#define BAD(...) KILN_FAIL(err, KILN_E_FORMAT, __VA_ARGS__)

static kiln_status parse_tensor(const char *label, const char *file, size_t i, json_t *jt, kiln_ckpt_manifest_tensor *t,
                                kiln_err *err) {
    if (!json_is_object(jt)) return BAD("%s: %s: tensor %zu is not an object", label, file, i);
    const char *name = json_string_value(json_object_get(jt, "name"));
    const char *dt = json_string_value(json_object_get(jt, "dtype"));
    json_t *shape = json_object_get(jt, "shape");
    if (!name || !*name) return BAD("%s: %s: tensor %zu has no name", label, file, i);
    if (!dt || !kiln_dtype_from_safetensors(dt, &t->dtype))
        return BAD("%s: %s: tensor '%s': unknown dtype '%s'", label, file, name, dt ? dt : "(missing)");
    if (!json_is_array(shape) || json_array_size(shape) > KILN_MAX_DIMS)
        return BAD("%s: %s: tensor '%s': shape must be a list of at most %d integers", label, file, name,
                   KILN_MAX_DIMS);
    t->name = name;
    t->ndim = (int)json_array_size(shape);
    size_t bytes = kiln_dtype_size(t->dtype), numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return BAD("%s: %s: tensor '%s': shape entry %d is not a non-negative integer", label, file, name, d);
        t->shape[d] = json_integer_value(v);
        if (!kiln_mul_size(numel, (size_t)t->shape[d], &numel) || !kiln_mul_size(bytes, (size_t)t->shape[d], &bytes))
            return BAD("%s: %s: tensor '%s': shape too large", label, file, name);
    }
    t->bytes = bytes;
    return KILN_OK;
}

static kiln_status parse_file(const char *label, size_t fi, json_t *jf, kiln_ckpt_manifest_file *f, kiln_ckpt_manifest *m,
                              kiln_err *err) {
    if (!json_is_object(jf)) return BAD("%s: files[%zu] is not an object", label, fi);
    static const char *const known[] = {"path", "metadata", "tensors", NULL};
    warn_unknown(label, "a file entry", jf, known);
    f->path = json_string_value(json_object_get(jf, "path"));
    if (!f->path || !kiln_ckpt_manifest_path_ok(f->path) || !ends_with(f->path, ".safetensors"))
        return BAD("%s: files[%zu].path must be a relative path ending in .safetensors without '..' (got '%s')",
                   label, fi, f->path ? f->path : "(missing)");
    json_t *meta = json_object_get(jf, "metadata");
    if (meta) {
        if (!json_is_object(meta)) return BAD("%s: %s: metadata is not an object", label, f->path);
        f->n_meta = json_object_size(meta);
        f->meta_keys = kiln_calloc(f->n_meta + 1, sizeof *f->meta_keys);
        f->meta_values = kiln_calloc(f->n_meta + 1, sizeof *f->meta_values);
        if (!f->meta_keys || !f->meta_values) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
        size_t k = 0;
        const char *key;
        json_t *v;
        json_object_foreach(meta, key, v) {
            if (!json_is_string(v)) return BAD("%s: %s: metadata '%s' is not a string", label, f->path, key);
            f->meta_keys[k] = key;
            f->meta_values[k++] = json_string_value(v);
        }
    }
    json_t *ts = json_object_get(jf, "tensors");
    if (!json_is_array(ts) || json_array_size(ts) == 0)
        return BAD("%s: %s: \"tensors\" must be a non-empty list", label, f->path);
    f->n_tensors = json_array_size(ts);
    f->tensors = kiln_calloc(f->n_tensors, sizeof *f->tensors);
    if (!f->tensors) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    for (size_t i = 0; i < f->n_tensors; i++) {
        KILN_TRY(parse_tensor(label, f->path, i, json_array_get(ts, i), &f->tensors[i], err));
        kiln_ckpt_manifest_tensor *t = &f->tensors[i];
        uint64_t numel = t->bytes / (kiln_dtype_size(t->dtype) ? kiln_dtype_size(t->dtype) : 1);
        if (f->bytes + t->bytes < f->bytes || m->total_bytes + t->bytes > INT64_MAX)
            return BAD("%s: total size overflows", label);
        f->bytes += t->bytes;
        m->total_bytes += t->bytes;
        m->total_params += numel;
        m->total_tensors++;
    }
    return KILN_OK;
}

/* Names must be unique across the manifest (a shard index maps each name to one file). */
static kiln_status check_unique_names(const char *label, kiln_ckpt_manifest *m, kiln_err *err) {
    json_t *seen = json_object();
    if (!seen) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    kiln_status s = KILN_OK;
    for (size_t f = 0; f < m->n_files && s == KILN_OK; f++) {
        for (size_t i = 0; i < f; i++)
            if (strcmp(m->files[i].path, m->files[f].path) == 0) {
                s = BAD("%s: file '%s' is listed twice", label, m->files[f].path);
                break;
            }
        for (size_t i = 0; i < m->files[f].n_tensors && s == KILN_OK; i++) {
            const char *name = m->files[f].tensors[i].name;
            json_t *prev = json_object_get(seen, name);
            if (prev) s = BAD("%s: tensor '%s' appears twice (%s and %s)", label, name, json_string_value(prev),
                              m->files[f].path);
            else if (json_object_set_new(seen, name, json_string(m->files[f].path)) != 0)
                s = BAD("%s: tensor name '%s' is not valid UTF-8", label, name);
        }
    }
    json_decref(seen);
    return s;
}

static kiln_status parse_root(const char *label, json_t *root, kiln_ckpt_manifest *m, kiln_err *err) {
    if (!json_is_object(root)) return BAD("%s: not a JSON object", label);
    static const char *const known[] = {"format", "model", "component", "layout", "source", "files", "index",
                                        "extra_files", "copy_tokenizer", NULL};
    warn_unknown(label, "the manifest", root, known);
    const char *format = json_string_value(json_object_get(root, "format"));
    if (!format || strcmp(format, "kiln-manifest/1") != 0)
        return BAD("%s: \"format\" must be \"kiln-manifest/1\" (got '%s')", label, format ? format : "(missing)");
    static const char *const components[] = {"dit", "text_encoder", "vae", "folder", NULL};
    static const char *const layouts[] = {"bfl", "diffusers", "hf", NULL};
    m->model = json_string_value(json_object_get(root, "model"));
    m->component = json_string_value(json_object_get(root, "component"));
    m->layout = json_string_value(json_object_get(root, "layout"));
    m->source = json_string_value(json_object_get(root, "source"));
    if (!m->source) m->source = "";
    if (!m->model || !*m->model) return BAD("%s: \"model\" is missing", label);
    if (!m->component || !one_of(m->component, components))
        return BAD("%s: \"component\" must be dit|text_encoder|vae|folder", label);
    if (!m->layout || !one_of(m->layout, layouts)) return BAD("%s: \"layout\" must be bfl|diffusers|hf", label);
    json_t *files = json_object_get(root, "files");
    if (!json_is_array(files) || json_array_size(files) == 0)
        return BAD("%s: \"files\" must be a non-empty list", label);
    m->n_files = json_array_size(files);
    m->files = kiln_calloc(m->n_files, sizeof *m->files);
    if (!m->files) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    for (size_t i = 0; i < m->n_files; i++) KILN_TRY(parse_file(label, i, json_array_get(files, i), &m->files[i], m, err));
    KILN_TRY(check_unique_names(label, m, err));

    json_t *index = json_object_get(root, "index");
    if (index) {
        m->index_path = json_string_value(json_object_get(index, "path"));
        if (!m->index_path || !kiln_ckpt_manifest_path_ok(m->index_path) || !ends_with(m->index_path, ".json"))
            return BAD("%s: index.path must be a relative .json path without '..'", label);
        json_t *which = json_object_get(index, "files");
        if (which && !json_is_array(which)) return BAD("%s: index.files must be a list of file paths", label);
        for (size_t i = 0; i < m->n_files; i++) m->files[i].in_index = !which;
        for (size_t k = 0; which && k < json_array_size(which); k++) {
            const char *p = json_string_value(json_array_get(which, k));
            size_t i = 0;
            while (i < m->n_files && (!p || strcmp(p, m->files[i].path) != 0)) i++;
            if (i == m->n_files) return BAD("%s: index.files[%zu] is not one of the manifest's files", label, k);
            m->files[i].in_index = true;
        }
        /* weight_map names files relative to the index's folder, so they must live under it */
        const char *slash = strrchr(m->index_path, '/');
        size_t dl = slash ? (size_t)(slash - m->index_path + 1) : 0;
        for (size_t i = 0; i < m->n_files; i++)
            if (m->files[i].in_index && strncmp(m->files[i].path, m->index_path, dl) != 0)
                return BAD("%s: indexed file %s is not in the index's folder", label, m->files[i].path);
    }
    json_t *extras = json_object_get(root, "extra_files");
    if (extras) {
        if (!json_is_array(extras)) return BAD("%s: extra_files must be a list", label);
        m->n_extras = json_array_size(extras);
        m->extras = kiln_calloc(m->n_extras + 1, sizeof *m->extras);
        if (!m->extras) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
        for (size_t i = 0; i < m->n_extras; i++) {
            json_t *e = json_array_get(extras, i);
            const char *p = json_string_value(json_object_get(e, "path"));
            json_t *body = json_object_get(e, "json");
            if (!p || !kiln_ckpt_manifest_path_ok(p) || !body)
                return BAD("%s: extra_files[%zu] needs a safe relative \"path\" and a \"json\" value", label, i);
            m->extras[i].path = p;
            m->extras[i].json_text = json_dumps(body, JSON_INDENT(2) | JSON_ENCODE_ANY);
            if (!m->extras[i].json_text) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
        }
    }
    json_t *tok = json_object_get(root, "copy_tokenizer");
    if (tok) {
        m->copy_tokenizer = json_string_value(tok);
        if (!m->copy_tokenizer || !kiln_ckpt_manifest_path_ok(m->copy_tokenizer))
            return BAD("%s: copy_tokenizer must be a safe relative folder name", label);
    }
    return KILN_OK;
}

static kiln_status finish(const char *label, json_t *root, kiln_ckpt_manifest **out, kiln_err *err) {
    kiln_ckpt_manifest *m = kiln_calloc(1, sizeof *m);
    if (!m) {
        json_decref(root);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", label);
    }
    m->json_ = root;
    kiln_status s = parse_root(label, root, m, err);
    if (s != KILN_OK) {
        kiln_ckpt_manifest_free(m);
        return s;
    }
    *out = m;
    return KILN_OK;
}

kiln_status kiln_ckpt_manifest_parse(const char *text, size_t len, const char *label, kiln_ckpt_manifest **out,
                                kiln_err *err) {
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return BAD("%s: not valid JSON: %s (line %d)", label, jerr.text, jerr.line);
    return finish(label, root, out, err);
}

kiln_status kiln_ckpt_manifest_load(const char *path, kiln_ckpt_manifest **out, kiln_err *err) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: cannot open: %s", path,
                         strerror(errno));
    fclose(fp);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return BAD("%s: not valid JSON: %s (line %d)", path, jerr.text, jerr.line);
    return finish(path, root, out, err);
}

void kiln_ckpt_manifest_free(kiln_ckpt_manifest *m) {
    if (!m) return;
    for (size_t i = 0; m->files && i < m->n_files; i++) {
        kiln_free(m->files[i].tensors);
        kiln_free(m->files[i].meta_keys);
        kiln_free(m->files[i].meta_values);
    }
    for (size_t i = 0; m->extras && i < m->n_extras; i++) free(m->extras[i].json_text); /* jansson's malloc */
    kiln_free(m->extras);
    kiln_free(m->files);
    json_decref(m->json_);
    kiln_free(m);
}
