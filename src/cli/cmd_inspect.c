/* cmd_inspect.c - `kiln inspect FILE|DIR... [--sha256] [--json] [--summary]`: what a checkpoint holds.
 *
 * For each checkpoint: its tensors (name, dtype, shape, bytes), the parameter count, the detected model
 * family and layout (io/detect.h), metadata, and on request the SHA-256 of every file (streamed). A folder is
 * searched (up to 3 levels) for checkpoints: *.safetensors.index.json files (which cover their shards), else
 * every *.safetensors file, and every *.gguf file - so a whole diffusers folder or a ComfyUI models folder
 * inspects in one call. safetensors files also get their fp8 quantisation layout (io/fp8_layout.h); GGUF files
 * (recognised by their magic) list their GGML tensor types and every metadata value. A layout or tensor type
 * kiln does not implement is listed and named on an "unsupported:" line (the file itself is valid: exit 0).
 * Every file is validated strictly while opening; a corrupt one prints the reader's message and makes the
 * exit code non-zero (kiln_status_exit_code of the first failure), but the others are still reported.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/sha256.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "io/detect.h"
#include "io/fp8_layout.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "tensor/quant.h"

typedef struct opts {
    bool sha, json, summary;
} opts;

typedef struct path_list {
    char **v;
    size_t n, cap;
} path_list;

static bool list_add(path_list *l, const char *p) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **nv = kiln_realloc(l->v, cap * sizeof *nv);
        if (!nv) return false;
        l->v = nv;
        l->cap = cap;
    }
    char *d = kiln_strdup(p);
    if (!d) return false;
    l->v[l->n++] = d;
    return true;
}

static void list_free(path_list *l) {
    for (size_t i = 0; i < l->n; i++) kiln_free(l->v[i]);
    kiln_free(l->v);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds the checkpoints under dir (sorted, so output is stable). */
static bool gather(const char *dir, int depth, path_list *out) {
    DIR *d = opendir(dir);
    if (!d) return true; /* unreadable subfolder: skip */
    path_list idx = {0}, single = {0}, sub = {0}, gguf = {0};
    bool ok = true;
    struct dirent *e;
    char full[4096];
    while (ok && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) ok = depth < 3 ? list_add(&sub, full) : true;
        else if (ends_with(e->d_name, ".safetensors.index.json")) ok = list_add(&idx, full);
        else if (ends_with(e->d_name, ".safetensors")) ok = list_add(&single, full);
        else if (ends_with(e->d_name, ".gguf")) ok = list_add(&gguf, full);
    }
    closedir(d);
    path_list *mine = idx.n ? &idx : &single;
    if (mine->n) qsort(mine->v, mine->n, sizeof *mine->v, cmp_str); /* (qsort of NULL is undefined) */
    if (sub.n) qsort(sub.v, sub.n, sizeof *sub.v, cmp_str);
    for (size_t i = 0; ok && i < mine->n; i++) ok = list_add(out, mine->v[i]);
    if (gguf.n) qsort(gguf.v, gguf.n, sizeof *gguf.v, cmp_str);
    for (size_t i = 0; ok && i < gguf.n; i++) ok = list_add(out, gguf.v[i]);
    for (size_t i = 0; ok && i < sub.n; i++) ok = gather(sub.v[i], depth + 1, out);
    list_free(&idx);
    list_free(&single);
    list_free(&sub);
    list_free(&gguf);
    return ok;
}

static void human_count(double v, char *buf, size_t cap) {
    if (v >= 1e9) snprintf(buf, cap, "%.2f B", v / 1e9);
    else if (v >= 1e6) snprintf(buf, cap, "%.2f M", v / 1e6);
    else if (v >= 1e3) snprintf(buf, cap, "%.1f K", v / 1e3);
    else snprintf(buf, cap, "%.0f", v);
}

static void human_bytes(double v, char *buf, size_t cap) {
    if (v >= 1024.0 * 1024 * 1024) snprintf(buf, cap, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else if (v >= 1024.0 * 1024) snprintf(buf, cap, "%.1f MiB", v / (1024.0 * 1024));
    else if (v >= 1024.0) snprintf(buf, cap, "%.1f KiB", v / 1024.0);
    else snprintf(buf, cap, "%.0f B", v);
}

/* ---- GGUF ------------------------------------------------------------------------------------------------- */

/* A metadata value as text: scalars in full (strings cut at 200 bytes), arrays as their first elements. */
static void kv_text(const kiln_gguf_kv *kv, char *buf, size_t cap) {
    size_t used = 0;
#define ADD(...) (used += (size_t)snprintf(buf + used, used < cap ? cap - used : 0, __VA_ARGS__))
    buf[0] = 0;
    if (kv->type == KILN_GGUF_STRING) {
        ADD("\"%.200s%s\"", kv->str, strlen(kv->str) > 200 ? "..." : "");
        return;
    }
    bool arr = kv->type == KILN_GGUF_ARRAY;
    uint64_t show = kv->count < 8 ? kv->count : 8;
    if (arr) ADD("[");
    for (uint64_t i = 0; i < show && used < cap; i++) {
        int64_t v;
        uint64_t u;
        double d;
        const char *str;
        size_t n;
        if (i) ADD(", ");
        if (kv->elem_type == KILN_GGUF_BOOL && kiln_gguf_kv_int(kv, i, &v)) ADD("%s", v ? "true" : "false");
        else if (kiln_gguf_kv_float(kv, i, &d)) ADD("%.9g", d);
        else if (kiln_gguf_kv_uint(kv, i, &u)) ADD("%llu", (unsigned long long)u);
        else if (kiln_gguf_kv_int(kv, i, &v)) ADD("%lld", (long long)v);
        else if (kiln_gguf_kv_array_str(kv, i, &str, &n)) ADD("\"%.*s\"", (int)(n < 40 ? n : 40), str);
    }
    if (arr) ADD("%s] (%llu x %s)", kv->count > show ? ", ..." : "", (unsigned long long)kv->count,
                 kiln_gguf_vtype_name(kv->elem_type));
#undef ADD
}

static kiln_status inspect_gguf(const char *path, const opts *o, json_t *arr, kiln_err *err) {
    kiln_gguf_file *g;
    KILN_TRY(kiln_gguf_open(path, &g, err));
    kiln_gguf_te te; /* a llama.cpp text encoder: validated like the header (strictly: a refusal is an error) */
    kiln_status tes = kiln_gguf_te_check(g, &te, err);
    if (tes != KILN_OK) {
        kiln_gguf_close(g);
        return tes;
    }
    kiln_detect_result d;
    kiln_detect_gguf(g, &d);
    size_t n = kiln_gguf_count(g);
    uint64_t params = 0, bytes = 0;
    size_t per_type[64] = {0}; /* by GGML id (all ids are < 64) */
    char unsupported[512] = "";
    for (size_t i = 0; i < n; i++) {
        const kiln_gguf_tensor *t = kiln_gguf_at(g, i);
        params += t->numel;
        bytes += t->nbytes;
        if (t->type < 64) per_type[t->type]++;
    }
    for (uint32_t t = 0; t < 64; t++) {
        const kiln_qtype_info *q = kiln_qtype_get(t);
        if (per_type[t] && q && !q->dequant)
            snprintf(unsupported + strlen(unsupported), sizeof unsupported - strlen(unsupported), "%s%s x %zu",
                     *unsupported ? ", " : "tensor types kiln cannot dequantise: ", q->name, per_type[t]);
    }
    char sha[65] = "";
    kiln_status s = o->sha ? kiln_sha256_path(path, sha, NULL, err) : KILN_OK;
    if (s != KILN_OK) {
        kiln_gguf_close(g);
        return s;
    }
    char pc[32], bc[32], val[1024];
    human_count((double)params, pc, sizeof pc);
    human_bytes((double)bytes, bc, sizeof bc);
    const char *arch = kiln_gguf_architecture(g);
    if (!o->json) {
        printf("%s\n", path);
        printf("  format:     GGUF v%u, alignment %u, data from byte %llu\n", kiln_gguf_version(g),
               kiln_gguf_alignment(g), (unsigned long long)kiln_gguf_data_offset(g));
        printf("  model:      %s (%s)\n", d.id, d.desc);
        printf("  layout:     %s    architecture: %s\n", kiln_layout_name(d.layout), arch ? arch : "(none)");
        printf("  tensors:    %zu    parameters: %llu (%s)    data: %llu bytes (%s)\n", n,
               (unsigned long long)params, pc, (unsigned long long)bytes, bc);
        printf("  types:     ");
        for (uint32_t t = 0; t < 64; t++)
            if (per_type[t]) printf(" %s x %zu", kiln_qtype_get(t)->name, per_type[t]);
        printf("\n");
        if (*unsupported) printf("  unsupported: %s\n", unsupported);
        if (te.kind != KILN_GGUF_TE_NONE)
            printf("  text encoder: llama.cpp names, read as transformers names (%s); the tokenizer stored in the "
                   "file is not used (kiln tokenises with data/tokenizer)\n", te.kind == KILN_GGUF_TE_QWEN3
                   ? "blk.N.* -> model.layers.N.*" : "enc.blk.N.* -> encoder.block.N.*");
        for (size_t i = 0; i < kiln_gguf_kv_count(g); i++) {
            const kiln_gguf_kv *kv = kiln_gguf_kv_at(g, i);
            kv_text(kv, val, sizeof val);
            printf("  metadata:   %s (%s) = %s\n", kv->key, kiln_gguf_vtype_name(kv->type), val);
        }
        if (o->sha) printf("  sha256:     %s\n", sha);
        if (!o->summary) {
            char sb[160];
            printf("  %-60s %-8s %-22s %s\n", "name", "type", "shape", "bytes");
            for (size_t i = 0; i < n; i++) {
                const kiln_gguf_tensor *t = kiln_gguf_at(g, i);
                size_t used = (size_t)snprintf(sb, sizeof sb, "[");
                for (int k = 0; k < t->ndim; k++)
                    used += (size_t)snprintf(sb + used, sizeof sb - used, "%s%lld", k ? ", " : "", (long long)t->shape[k]);
                snprintf(sb + used, sizeof sb - used, "]");
                printf("  %-60s %-8s %-22s %zu\n", t->name, kiln_qtype_get(t->type)->name, sb, t->nbytes);
            }
        }
        printf("\n");
    } else {
        json_t *j = json_object(), *types = json_object(), *meta = json_object();
        json_object_set_new(j, "path", json_string(path));
        json_object_set_new(j, "format", json_string("gguf"));
        json_object_set_new(j, "gguf_version", json_integer(kiln_gguf_version(g)));
        json_object_set_new(j, "alignment", json_integer(kiln_gguf_alignment(g)));
        json_object_set_new(j, "model", json_string(d.id));
        json_object_set_new(j, "family", json_string(kiln_family_name(d.family)));
        json_object_set_new(j, "layout", json_string(kiln_layout_name(d.layout)));
        json_object_set_new(j, "description", json_string(d.desc));
        json_object_set_new(j, "architecture", arch ? json_string(arch) : json_null());
        json_object_set_new(j, "tensor_count", json_integer((json_int_t)n));
        json_object_set_new(j, "parameters", json_integer((json_int_t)params));
        json_object_set_new(j, "bytes", json_integer((json_int_t)bytes));
        for (uint32_t t = 0; t < 64; t++)
            if (per_type[t]) json_object_set_new(types, kiln_qtype_get(t)->name, json_integer((json_int_t)per_type[t]));
        json_object_set_new(j, "types", types);
        if (*unsupported) json_object_set_new(j, "unsupported", json_string(unsupported));
        for (size_t i = 0; i < kiln_gguf_kv_count(g); i++) {
            const kiln_gguf_kv *kv = kiln_gguf_kv_at(g, i);
            kv_text(kv, val, sizeof val);
            json_object_set_new(meta, kv->key, json_string(val));
        }
        json_object_set_new(j, "metadata", meta);
        if (o->sha) json_object_set_new(j, "sha256", json_string(sha));
        if (!o->summary) {
            json_t *ts = json_array();
            for (size_t i = 0; i < n; i++) {
                const kiln_gguf_tensor *t = kiln_gguf_at(g, i);
                json_t *shape = json_array();
                for (int k = 0; k < t->ndim; k++) json_array_append_new(shape, json_integer(t->shape[k]));
                json_array_append_new(ts, json_pack("{s:s,s:s,s:o,s:I,s:I}", "name", t->name, "type",
                                                    kiln_qtype_get(t->type)->name, "shape", shape, "bytes",
                                                    (json_int_t)t->nbytes, "offset", (json_int_t)t->offset));
            }
            json_object_set_new(j, "tensors", ts);
        }
        json_array_append_new(arr, j);
    }
    kiln_gguf_close(g);
    return KILN_OK;
}

/* Inspects one checkpoint; prints text, or appends a JSON object to arr. Returns a status. */
static kiln_status inspect_one(const char *path, const opts *o, json_t *arr, kiln_err *err) {
    if (ends_with(path, ".gguf") || kiln_gguf_sniff(path)) return inspect_gguf(path, o, arr, err);
    kiln_st_file *f;
    KILN_TRY(kiln_st_open(path, &f, err));
    kiln_detect_result d;
    kiln_detect(f, &d);
    size_t n = kiln_st_count(f);
    uint64_t params = 0, bytes = 0;
    size_t per_dtype[KILN_DT_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        kiln_tensor v = kiln_st_view(t);
        params += (uint64_t)kiln_tensor_numel(&v);
        bytes += t->nbytes;
        per_dtype[t->dtype]++;
    }
    size_t n_shards = kiln_st_shard_count(f);
    char (*sha)[65] = NULL;
    kiln_fp8_info q8;
    kiln_err qerr = {0};
    kiln_status s = kiln_fp8_scan(f, &q8, &qerr);
    if (s == KILN_E_UNSUPPORTED) s = KILN_OK; /* listed below, by name */
    else if (s != KILN_OK) {
        *err = qerr;
        goto out;
    } else qerr.msg[0] = 0;
    if (o->sha) {
        sha = kiln_calloc(n_shards, sizeof *sha);
        if (!sha) s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        for (size_t i = 0; s == KILN_OK && i < n_shards; i++)
            s = kiln_sha256_path(kiln_st_shard_path(f, i), sha[i], NULL, err);
    }
    if (s != KILN_OK) goto out;
    char pc[32], bc[32], sb[160];
    human_count((double)params, pc, sizeof pc);
    human_bytes((double)bytes, bc, sizeof bc);
    if (!o->json) {
        printf("%s\n", path);
        printf("  model:      %s (%s)\n", d.id, d.desc);
        printf("  layout:     %s    prefix: %s\n", kiln_layout_name(d.layout),
               *kiln_st_prefix(f) ? kiln_st_prefix(f) : "(none)");
        printf("  tensors:    %zu    parameters: %llu (%s)    data: %llu bytes (%s)\n", n,
               (unsigned long long)params, pc, (unsigned long long)bytes, bc);
        printf("  dtypes:    ");
        for (int t = 0; t < KILN_DT_COUNT; t++)
            if (per_dtype[t]) printf(" %s x %zu", kiln_dtype_name((kiln_dtype)t), per_dtype[t]);
        printf("\n");
        if (q8.scheme != KILN_FP8_NONE)
            printf("  fp8:        %s layout: e4m3 x %zu, e5m2 x %zu, weight scales x %zu, input scales x %zu, "
                   "per-layer declarations x %zu%s%s\n", kiln_fp8_scheme_name(q8.scheme), q8.n_e4m3, q8.n_e5m2,
                   q8.n_weight_scales, q8.n_input_scales, q8.n_meta_layers,
                   q8.has_metadata_json ? " (_quantization_metadata)" : "",
                   q8.has_comfy_quant_tensors ? " (comfy_quant tensors)" : "");
        if (qerr.msg[0]) printf("  unsupported: %s\n", qerr.msg);
        for (size_t i = 0; i < kiln_st_metadata_count(f); i++) {
            const char *k, *v;
            kiln_st_metadata_at(f, i, &k, &v);
            printf("  metadata:   %s = %.200s\n", k, v);
        }
        printf("  files:      %zu\n", n_shards);
        for (size_t i = 0; i < n_shards; i++)
            printf("    %s%s%s\n", sha ? sha[i] : "", sha ? "  " : "", kiln_st_shard_path(f, i));
        if (!o->summary) {
            printf("  %-60s %-8s %-22s %s\n", "name", "dtype", "shape", "bytes");
            for (size_t i = 0; i < n; i++) {
                const kiln_st_tensor *t = kiln_st_at(f, i);
                kiln_tensor v = kiln_st_view(t);
                printf("  %-60s %-8s %-22s %zu\n", t->name, kiln_dtype_name(t->dtype),
                       kiln_shape_str(&v, sb, sizeof sb), t->nbytes);
            }
        }
        printf("\n");
    } else {
        json_t *j = json_object(), *files = json_array(), *dts = json_object(), *meta = json_object();
        json_object_set_new(j, "path", json_string(path));
        json_object_set_new(j, "model", json_string(d.id));
        json_object_set_new(j, "family", json_string(kiln_family_name(d.family)));
        json_object_set_new(j, "layout", json_string(kiln_layout_name(d.layout)));
        json_object_set_new(j, "description", json_string(d.desc));
        json_object_set_new(j, "prefix", json_string(kiln_st_prefix(f)));
        json_object_set_new(j, "tensor_count", json_integer((json_int_t)n));
        json_object_set_new(j, "parameters", json_integer((json_int_t)params));
        json_object_set_new(j, "bytes", json_integer((json_int_t)bytes));
        for (int t = 0; t < KILN_DT_COUNT; t++)
            if (per_dtype[t]) json_object_set_new(dts, kiln_dtype_name((kiln_dtype)t), json_integer((json_int_t)per_dtype[t]));
        json_object_set_new(j, "dtypes", dts);
        json_t *qj = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I}", "layout", kiln_fp8_scheme_name(q8.scheme), "e4m3",
                               (json_int_t)q8.n_e4m3, "e5m2", (json_int_t)q8.n_e5m2, "weight_scales",
                               (json_int_t)q8.n_weight_scales, "input_scales", (json_int_t)q8.n_input_scales,
                               "layer_declarations", (json_int_t)q8.n_meta_layers);
        if (qerr.msg[0]) json_object_set_new(qj, "unsupported", json_string(qerr.msg));
        json_object_set_new(j, "fp8", qj);
        for (size_t i = 0; i < kiln_st_metadata_count(f); i++) {
            const char *k, *v;
            kiln_st_metadata_at(f, i, &k, &v);
            json_object_set_new(meta, k, json_string(v));
        }
        json_object_set_new(j, "metadata", meta);
        for (size_t i = 0; i < n_shards; i++) {
            json_t *fj = json_pack("{s:s}", "path", kiln_st_shard_path(f, i));
            if (sha) json_object_set_new(fj, "sha256", json_string(sha[i]));
            json_array_append_new(files, fj);
        }
        json_object_set_new(j, "files", files);
        if (!o->summary) {
            json_t *ts = json_array();
            for (size_t i = 0; i < n; i++) {
                const kiln_st_tensor *t = kiln_st_at(f, i);
                json_t *shape = json_array();
                for (int k = 0; k < t->ndim; k++) json_array_append_new(shape, json_integer(t->shape[k]));
                json_t *tj = json_pack("{s:s,s:s,s:o,s:I}", "name", t->name, "dtype", kiln_dtype_name(t->dtype),
                                       "shape", shape, "bytes", (json_int_t)t->nbytes);
                if (n_shards > 1) json_object_set_new(tj, "file", json_integer(t->shard));
                json_array_append_new(ts, tj);
            }
            json_object_set_new(j, "tensors", ts);
        }
        json_array_append_new(arr, j);
    }
out:
    kiln_free(sha);
    kiln_st_close(f);
    return s;
}

int kiln_cmd_inspect(int argc, char **argv) {
    opts o = {0};
    path_list targets = {0};
    int rc = 0, n_pos = 0;
    const kiln_opt table[] = {
        KILN_OPT_FLAG("--sha256", NULL, "also print the SHA-256 of every file (streamed; slow on multi-GB files)",
                      &o.sha),
        KILN_OPT_FLAG("--json", NULL, "one JSON object {\"checkpoints\": [...]} on stdout", &o.json),
        KILN_OPT_FLAG("--summary", NULL, "leave out the per-tensor list", &o.summary),
    };
    const char **pos = kiln_calloc((size_t)argc + 1, sizeof *pos);
    if (!pos) return kiln_status_exit_code(KILN_E_NOMEM);
    const kiln_opts spec = {
        .cmd = "kiln inspect", .opts = table, .n = KILN_N(table), .pos_name = "paths", .max_pos = argc,
        .synopsis = "usage: kiln inspect FILE|DIR... [--sha256] [--json] [--summary]\n\n"
                    "  FILE      a .safetensors file, a *.safetensors.index.json (sharded checkpoint) or a .gguf file\n"
                    "  DIR       every checkpoint under the folder (3 levels deep; indexes cover their shards)\n",
        .epilogue = "exit status: 0 if every checkpoint opened cleanly, else the first failure's code (4 = corrupt)\n"};
    int prc = kiln_opts_parse(&spec, argc, argv, pos, &n_pos);
    if (prc == KILN_OPTS_CONTINUE && !n_pos) {
        kiln_opts_usage(&spec, stderr);
        prc = 2;
    }
    for (int i = 0; prc == KILN_OPTS_CONTINUE && i < n_pos; i++) {
        struct stat st;
        if (stat(pos[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            size_t before = targets.n;
            if (!gather(pos[i], 0, &targets)) {
                fprintf(stderr, "kiln inspect: out of memory\n");
                prc = kiln_status_exit_code(KILN_E_NOMEM);
            } else if (targets.n == before) {
                fprintf(stderr, "kiln inspect: %s: no .safetensors checkpoint (nor .gguf file) in this folder\n", pos[i]);
                if (!rc) rc = kiln_status_exit_code(KILN_E_NOT_FOUND);
            }
        } else if (!list_add(&targets, pos[i])) {
            prc = kiln_status_exit_code(KILN_E_NOMEM);
        }
    }
    kiln_free(pos);
    if (prc != KILN_OPTS_CONTINUE) {
        list_free(&targets);
        return prc;
    }
    json_t *arr = o.json ? json_array() : NULL;
    for (size_t i = 0; i < targets.n; i++) {
        kiln_err err = {0};
        kiln_status s = inspect_one(targets.v[i], &o, arr, &err);
        if (s != KILN_OK) {
            fprintf(stderr, "kiln inspect: %s\n", err.msg);
            if (arr)
                json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "path", targets.v[i], "error", err.msg,
                                                     "status", kiln_status_name(s)));
            if (!rc) rc = kiln_status_exit_code(s);
        }
    }
    if (arr) {
        json_t *root = json_pack("{s:o}", "checkpoints", arr);
        json_dumpf(root, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(root);
    }
    list_free(&targets);
    return rc;
}
