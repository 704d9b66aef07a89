/* lora.c - LoRA adapter files onto the FLUX.2 DiT (see lora.h). */
#include "models/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "tensor/convert.h"
#include "tensor/quant.h"

/* A weight of the model a module can land on: its tensor, the BFL name of the whole weight it belongs to, and
 * where its rows start in that weight (the split q/k/v of a diffusers folder, the final adaLN halves). */
typedef struct slot {
    kiln_tensor *t;
    char name[96];
    int64_t row0;
} slot;

/* One adapter module, normalised to BFL names: rows [row0, row0 + B rows) of the BFL weight `name`. */
typedef struct module {
    char name[96];
    int64_t row0;
    float *a, *b; /* f32 [r, K], [nb, r] (b already times strength * scale) */
    int64_t r, k, nb;
} module;

struct kiln_lora_set {
    kiln_backend *be;
    kiln_lora_term *terms;
    int n_terms;
    kiln_tensor **touched;
    int n_touched;
    void **bufs; /* placed buffers (A, B, merged weights) */
    int n_bufs, cap_bufs;
    kiln_tensor *saved; /* merged: the loaded tensors, restored on detach (touched[i] <- saved[i]) */
};

typedef struct slots {
    slot *v;
    int n, cap;
    int64_t D;
} slots;

static void add_slot(slots *s, kiln_tensor *t, int64_t row0, const char *name) {
    if (s->n == s->cap) return; /* sized up front */
    slot *o = &s->v[s->n++];
    o->t = t;
    o->row0 = row0;
    snprintf(o->name, sizeof o->name, "%s", name);
}

static kiln_status build_slots(kiln_flux2_dit *m, slots *s, kiln_err *err) {
    s->cap = 16 + 20 * m->n_double + 2 * m->n_single;
    s->v = kiln_calloc((size_t)s->cap, sizeof *s->v);
    if (!s->v) return KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
    const int64_t D = m->hidden;
    s->D = D;
    for (int i = 0; i < m->n_double; i++) {
        for (int j = 0; j < 2; j++) {
            kiln_flux2_stream *st = j ? &m->dbl[i].txt : &m->dbl[i].img;
            const char *p = j ? "txt" : "img";
            char f[96];
            snprintf(f, sizeof f, "double_blocks.%d.%s_attn.qkv", i, p);
            if (st->qkv.data) add_slot(s, &st->qkv, 0, f);
            else {
                add_slot(s, &st->q, 0, f);
                add_slot(s, &st->k, D, f);
                add_slot(s, &st->v, 2 * D, f);
            }
            snprintf(f, sizeof f, "double_blocks.%d.%s_attn.proj", i, p);
            add_slot(s, &st->proj, 0, f);
            snprintf(f, sizeof f, "double_blocks.%d.%s_mlp.0", i, p);
            add_slot(s, &st->mlp_in, 0, f);
            snprintf(f, sizeof f, "double_blocks.%d.%s_mlp.2", i, p);
            add_slot(s, &st->mlp_out, 0, f);
        }
    }
    for (int i = 0; i < m->n_single; i++) {
        char f[96];
        snprintf(f, sizeof f, "single_blocks.%d.linear1", i);
        add_slot(s, &m->sgl[i].linear1, 0, f);
        snprintf(f, sizeof f, "single_blocks.%d.linear2", i);
        add_slot(s, &m->sgl[i].linear2, 0, f);
    }
    add_slot(s, &m->img_in, 0, "img_in");
    add_slot(s, &m->txt_in, 0, "txt_in");
    add_slot(s, &m->t_in, 0, "time_in.in_layer");
    add_slot(s, &m->t_out, 0, "time_in.out_layer");
    add_slot(s, &m->mod_img, 0, "double_stream_modulation_img.lin");
    add_slot(s, &m->mod_txt, 0, "double_stream_modulation_txt.lin");
    add_slot(s, &m->mod_single, 0, "single_stream_modulation.lin");
    add_slot(s, &m->final_shift, 0, "final_layer.adaLN_modulation.1");
    add_slot(s, &m->final_scale, D, "final_layer.adaLN_modulation.1");
    add_slot(s, &m->final_out, 0, "final_layer.linear");
    return KILN_OK;
}

/* The rows of the whole BFL weight `name` and its width, from the slots; false if the model has no such weight. */
static bool weight_dims(const slots *s, const char *name, int64_t *rows, int64_t *cols) {
    bool found = false;
    *rows = 0;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, name)) {
            found = true;
            int64_t e = s->v[i].row0 + s->v[i].t->shape[0];
            if (e > *rows) *rows = e;
            *cols = s->v[i].t->shape[1];
        }
    return found;
}

/* diffusers module names -> BFL (block-relative part; the row offset inside a fused weight, in units of D). */
static const struct { const char *dif, *bfl; int third; } dif_double[] = {
    {"attn.to_q", "img_attn.qkv", 0},        {"attn.to_k", "img_attn.qkv", 1},
    {"attn.to_v", "img_attn.qkv", 2},        {"attn.add_q_proj", "txt_attn.qkv", 0},
    {"attn.add_k_proj", "txt_attn.qkv", 1},  {"attn.add_v_proj", "txt_attn.qkv", 2},
    {"attn.to_out.0", "img_attn.proj", 0},   {"attn.to_add_out", "txt_attn.proj", 0},
    {"ff.linear_in", "img_mlp.0", 0},        {"ff.linear_out", "img_mlp.2", 0},
    {"ff_context.linear_in", "txt_mlp.0", 0}, {"ff_context.linear_out", "txt_mlp.2", 0},
};
static const struct { const char *dif, *bfl; } dif_top[] = {
    {"x_embedder", "img_in"},
    {"context_embedder", "txt_in"},
    {"time_guidance_embed.timestep_embedder.linear_1", "time_in.in_layer"},
    {"time_guidance_embed.timestep_embedder.linear_2", "time_in.out_layer"},
    {"proj_out", "final_layer.linear"},
    {"double_stream_modulation_img.linear", "double_stream_modulation_img.lin"},
    {"double_stream_modulation_txt.linear", "double_stream_modulation_txt.lin"},
    {"single_stream_modulation.linear", "single_stream_modulation.lin"},
};

/* A diffusers module path -> BFL name and row offset (norm_out: *swap = the (scale; shift) halves). */
static bool from_diffusers(const char *mod, int64_t D, char *bfl, size_t cap, int64_t *row0, int64_t *part,
                           bool *swap) {
    int i, n = 0;
    *row0 = 0, *part = 0, *swap = false;
    if (sscanf(mod, "transformer_blocks.%d.%n", &i, &n) == 1 && n > 0) {
        for (size_t j = 0; j < sizeof dif_double / sizeof *dif_double; j++)
            if (!strcmp(mod + n, dif_double[j].dif)) {
                snprintf(bfl, cap, "double_blocks.%d.%s", i, dif_double[j].bfl);
                *row0 = dif_double[j].third * D;
                if (strstr(dif_double[j].bfl, "qkv")) *part = D; /* one of q, k, v */
                return true;
            }
        return false;
    }
    n = 0;
    if (sscanf(mod, "single_transformer_blocks.%d.%n", &i, &n) == 1 && n > 0) {
        if (!strcmp(mod + n, "attn.to_qkv_mlp_proj")) snprintf(bfl, cap, "single_blocks.%d.linear1", i);
        else if (!strcmp(mod + n, "attn.to_out")) snprintf(bfl, cap, "single_blocks.%d.linear2", i);
        else return false;
        return true;
    }
    if (!strcmp(mod, "norm_out.linear")) {
        snprintf(bfl, cap, "final_layer.adaLN_modulation.1");
        *swap = true;
        return true;
    }
    for (size_t j = 0; j < sizeof dif_top / sizeof *dif_top; j++)
        if (!strcmp(mod, dif_top[j].dif)) {
            snprintf(bfl, cap, "%s", dif_top[j].bfl);
            return true;
        }
    return false;
}

/* kohya: "lora_unet_" + the BFL name with '_' for '.': found by spelling every weight of the model that way. */
static bool from_kohya(const char *mod, const slots *s, char *bfl, size_t cap) {
    if (strncmp(mod, "lora_unet_", 10)) return false;
    for (int i = 0; i < s->n; i++) {
        char k[128];
        snprintf(k, sizeof k, "%s", s->v[i].name);
        for (char *c = k; *c; c++)
            if (*c == '.') *c = '_';
        if (!strcmp(mod + 10, k)) {
            snprintf(bfl, cap, "%s", s->v[i].name);
            return true;
        }
    }
    return false;
}

typedef enum fmt { FMT_DIFFUSERS, FMT_BFL, FMT_KOHYA } fmt;

static bool ends(const char *s, const char *suf, size_t *stem) {
    size_t n = strlen(s), m = strlen(suf);
    if (n < m || strcmp(s + n - m, suf)) return false;
    *stem = n - m;
    return true;
}

/* A float tensor as an f32 copy (or one value for alpha). */
static float *to_f32(const kiln_st_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    float *o = kiln_malloc((n ? n : 1) * sizeof(float));
    if (o) kiln_to_f32(o, t->data, t->dtype, n);
    return o;
}

static bool float_dt(kiln_dtype d) { return d == KILN_DT_F32 || d == KILN_DT_BF16 || d == KILN_DT_F16; }

/* Reads one opened adapter file into modules (appended to *mods). */
static kiln_status read_st(const kiln_st_file *f, const kiln_lora_spec *sp, const slots *s, module **mods,
                           int *n_mods, int *cap, kiln_err *err) {
    const char *L = sp->path;
    kiln_status st = KILN_OK;
    size_t n = kiln_st_count(f), stem;
    if (!n) st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: no tensors", L);
    fmt fm = FMT_DIFFUSERS;
    for (size_t i = 0; i < n; i++) {
        const char *k = kiln_st_at(f, i)->name;
        if (strstr(k, ".lora_down.weight") && !strncmp(k, "lora_unet_", 10)) fm = FMT_KOHYA;
        else if (!strncmp(k, "diffusion_model.", 16) || !strncmp(k, "base_model.model.", 17)) fm = fm == FMT_KOHYA ? fm : FMT_BFL;
    }
    for (size_t i = 0; st == KILN_OK && i < n; i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        const char *k = t->name;
        if (strstr(k, "dora_scale"))
            st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "LoRA %s: '%s': DoRA adapters are not supported", L, k);
        else if (strstr(k, ".lokr_") || strstr(k, ".hada_"))
            st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "LoRA %s: '%s': LoKr/LoHa adapters are not supported", L, k);
        else if (!strncmp(k, "lora_te", 7) || !strncmp(k, "text_encoder", 12))
            st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "LoRA %s: '%s': text-encoder adapters are not supported (kiln "
                           "applies DiT adapters)", L, k);
        else if (!float_dt(t->dtype))
            st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' is %s (want f32, bf16 or f16)", L, k,
                           kiln_dtype_name(t->dtype));
        if (st != KILN_OK) break;
        const bool is_a = ends(k, fm == FMT_KOHYA ? ".lora_down.weight" : ".lora_A.weight", &stem) ||
                          (fm == FMT_BFL && ends(k, ".lora_down.weight", &stem));
        if (!is_a) {
            size_t s2;
            bool known = ends(k, ".lora_B.weight", &s2) || ends(k, ".lora_up.weight", &s2);
            if (!known && ends(k, ".alpha", &s2) && fm != FMT_KOHYA)
                st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "LoRA %s: '%s': an alpha outside the kohya format (its scale "
                               "is not defined there)", L, k);
            else if (!known && !ends(k, ".alpha", &s2))
                st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' is not a LoRA tensor (lora_A/lora_B, "
                               "lora_down/lora_up, alpha)", L, k);
            continue; /* B and alpha are read with their A (an orphan B is found below) */
        }
        char base[400], mod[400], bfl[96];
        snprintf(base, sizeof base, "%.*s", (int)stem, k);
        const char *mp = base;
        if (!strncmp(mp, "diffusion_model.", 16)) mp += 16;
        else if (!strncmp(mp, "base_model.model.", 17)) mp += 17;
        else if (!strncmp(mp, "transformer.", 12)) mp += 12;
        snprintf(mod, sizeof mod, "%s", mp);
        int64_t row0 = 0, part = 0, rows = 0, cols = 0;
        bool swap = false, ok;
        if (fm == FMT_KOHYA) ok = from_kohya(mod, s, bfl, sizeof bfl);
        else {
            int64_t r2, c2;
            snprintf(bfl, sizeof bfl, "%s", mod);
            ok = weight_dims(s, bfl, &r2, &c2) || from_diffusers(mod, s->D, bfl, sizeof bfl, &row0, &part, &swap);
        }
        if (!ok || !weight_dims(s, bfl, &rows, &cols)) {
            st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' targets '%s', which is not a weight of this DiT", L, k,
                           mod);
            break;
        }
        char bname[440];
        snprintf(bname, sizeof bname, "%s.%s", base, fm == FMT_KOHYA || strstr(k, "lora_down") ? "lora_up.weight" : "lora_B.weight");
        const kiln_st_tensor *tb = kiln_st_find(f, bname);
        if (!tb) {
            st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' has no '%s'", L, k, bname);
            break;
        }
        if (!float_dt(tb->dtype) || t->ndim != 2 || tb->ndim != 2) {
            st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' and '%s' must be 2-D float matrices", L, k, bname);
            break;
        }
        const int64_t r = t->shape[0], K = t->shape[1], nb = tb->shape[0];
        if (tb->shape[1] != r) {
            st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: rank mismatch: '%s' has rank %lld, '%s' %lld", L, k,
                           (long long)r, bname, (long long)tb->shape[1]);
            break;
        }
        const int64_t want = part ? part : rows; /* B's rows: the whole weight, or its q/k/v third */
        if (K != cols || nb != want) {
            st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' is B [%lld, %lld] x A [%lld, %lld]: does not fit '%s' "
                           "(%lld rows of width %lld wanted)", L, base, (long long)nb, (long long)r, (long long)r,
                           (long long)K, bfl, (long long)want, (long long)cols);
            break;
        }
        float scale = 1.0f;
        if (fm == FMT_KOHYA) {
            char an[440];
            snprintf(an, sizeof an, "%s.alpha", base);
            const kiln_st_tensor *ta = kiln_st_find(f, an);
            if (ta) {
                size_t ne = 1;
                for (int d = 0; d < ta->ndim; d++) ne *= (size_t)ta->shape[d];
                float *av = ne == 1 ? to_f32(ta) : NULL;
                float al = av ? av[0] : NAN;
                kiln_free(av);
                if (!(al > 0 && isfinite(al))) {
                    st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' must be one positive finite value", L, an);
                    break;
                }
                scale = al / (float)r;
            }
        }
        if (*n_mods == *cap) {
            int c2 = *cap ? 2 * *cap : 64;
            module *p = kiln_realloc(*mods, (size_t)c2 * sizeof *p);
            if (!p) {
                st = KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
                break;
            }
            *mods = p, *cap = c2;
        }
        module *md = &(*mods)[(*n_mods)++];
        memset(md, 0, sizeof *md);
        snprintf(md->name, sizeof md->name, "%s", bfl);
        md->row0 = row0, md->r = r, md->k = K, md->nb = nb;
        md->a = to_f32(t);
        float *b = to_f32(tb);
        md->b = b ? kiln_malloc((size_t)(nb * r) * sizeof(float) + 4) : NULL;
        if (!md->a || !md->b) {
            kiln_free(b);
            st = KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
            break;
        }
        const float sc = scale * sp->strength;
        for (int64_t row = 0; row < nb; row++) { /* norm_out: (scale; shift) rows into BFL's (shift; scale) */
            int64_t src = swap ? (row + nb / 2) % nb : row;
            for (int64_t j = 0; j < r; j++) md->b[row * r + j] = b[src * r + j] * sc;
        }
        kiln_free(b);
    }
    /* every B / up / alpha has its A */
    for (size_t i = 0; st == KILN_OK && i < n; i++) {
        const char *k = kiln_st_at(f, i)->name;
        size_t sb;
        const char *want = NULL;
        if (ends(k, ".lora_B.weight", &sb)) want = ".lora_A.weight";
        else if (ends(k, ".lora_up.weight", &sb) || ends(k, ".alpha", &sb)) want = ".lora_down.weight";
        if (!want) continue;
        char an[440];
        snprintf(an, sizeof an, "%.*s%s", (int)sb, k, want);
        if (!kiln_st_find(f, an))
            st = KILN_FAIL(err, KILN_E_FORMAT, "LoRA %s: '%s' has no '%s'", L, k, an);
    }
    return st;
}

/* One adapter: its file (spec->path), or when image is set an in-memory safetensors image labelled spec->path. */
static kiln_status read_file(const kiln_lora_spec *sp, const void *image, size_t len, const slots *s, module **mods,
                             int *n_mods, int *cap, kiln_err *err) {
    if (!(isfinite(sp->strength)))
        return KILN_FAIL(err, KILN_E_INVALID, "LoRA %s: strength %g is not a finite number", sp->path,
                         (double)sp->strength);
    kiln_st_file *f;
    kiln_status st = image ? kiln_st_open_memory(image, len, sp->path, &f, err) : kiln_st_open(sp->path, &f, err);
    if (st != KILN_OK) return kiln_err_prefix(err, "LoRA");
    st = read_st(f, sp, s, mods, n_mods, cap, err);
    kiln_st_close(f);
    return st;
}

static void free_mods(module *m, int n) {
    for (int i = 0; i < n; i++) kiln_free(m[i].a), kiln_free(m[i].b);
    kiln_free(m);
}

void kiln_lora_detach(kiln_lora_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n_touched; i++) set->touched[i]->lora = NULL;
    for (int i = 0; set->saved && i < set->n_touched; i++) *set->touched[i] = set->saved[i];
    for (int i = 0; i < set->n_bufs; i++) {
        if (set->be) set->be->ops->unplace(set->be, set->bufs[i]);
        kiln_free(set->bufs[i]);
    }
    kiln_free(set->bufs);
    kiln_free(set->terms);
    kiln_free(set->touched);
    kiln_free(set->saved);
    kiln_free(set);
}

int kiln_lora_term_count(const kiln_lora_set *set) { return set ? set->n_terms : 0; }

int64_t kiln_lora_max_rank(const kiln_lora_set *set) {
    int64_t best = 0;
    for (int i = 0; set && i < set->n_touched; i++)
        for (const kiln_lora_term *t = set->touched[i]->lora; t; t = t->next)
            if (t->a.shape[0] > best) best = t->a.shape[0];
    return best;
}

static kiln_status own(kiln_lora_set *set, void *buf, size_t bytes, kiln_err *err) {
    if (set->n_bufs == set->cap_bufs) {
        int c = set->cap_bufs ? 2 * set->cap_bufs : 64;
        void **p = kiln_realloc(set->bufs, (size_t)c * sizeof *p);
        if (!p) {
            kiln_free(buf);
            return KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
        }
        set->bufs = p, set->cap_bufs = c;
    }
    set->bufs[set->n_bufs++] = buf;
    return set->be->ops->place(set->be, buf, bytes, err);
}

/* Row n of weight w (any dtype a DiT weight can have) widened to f32. */
static void widen_row(const kiln_tensor *w, int64_t n, float *dst) {
    const int64_t K = w->shape[1];
    if (w->dtype == KILN_DT_QBLOCK) {
        (void)kiln_dequant_rows(dst, K, w->qtype, w->data, K, n, n + 1, 0, K, NULL); /* checked at load */
        return;
    }
    const char *p = (const char *)w->data + (size_t)(n * w->stride[0]) * kiln_dtype_size(w->dtype);
    if (w->dtype == KILN_DT_F8_E4M3 || w->dtype == KILN_DT_F8_E5M2) {
        if (w->dtype == KILN_DT_F8_E4M3) kiln_e4m3_to_f32_n(dst, (const uint8_t *)p, (size_t)K);
        else kiln_e5m2_to_f32_n(dst, (const uint8_t *)p, (size_t)K);
        const float sc = w->qscale != 0.0f ? w->qscale : 1.0f;
        for (int64_t k = 0; k < K; k++) dst[k] *= sc;
        return;
    }
    kiln_to_f32(dst, p, w->dtype, (size_t)K);
}

/* Replaces each touched tensor by W + its terms' B A (see kiln_lora_attach_merged). */
static kiln_status merge_all(kiln_lora_set *set, kiln_err *err) {
    set->saved = kiln_calloc((size_t)set->n_touched + 1, sizeof *set->saved);
    if (!set->saved) return KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
    const bool fast = set->be->precision == KILN_PREC_FAST;
    for (int i = 0; i < set->n_touched; i++) {
        kiln_tensor *w = set->touched[i];
        set->saved[i] = *w;
        set->saved[i].lora = NULL;
        const int64_t N = w->shape[0], K = w->shape[1];
        float *m = kiln_malloc((size_t)(N * K) * sizeof(float) + 4);
        if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory merging a [%lld, %lld] weight",
                                 (long long)N, (long long)K);
        for (int64_t n = 0; n < N; n++) widen_row(w, n, m + n * K);
        for (const kiln_lora_term *t = w->lora; t; t = t->next) {
            const int64_t r = t->a.shape[0];
            const float *A = t->a.data, *B = t->b.data;
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < r; j++) {
                    const float bj = B[n * r + j];
                    if (bj == 0.0f) continue;
                    for (int64_t k = 0; k < K; k++) m[n * K + k] += bj * A[j * K + k];
                }
        }
        const bool to_bf16 = fast && w->dtype == KILN_DT_BF16;
        void *data = m;
        if (to_bf16) {
            uint16_t *h = kiln_malloc((size_t)(N * K) * 2 + 4);
            if (h) kiln_f32_to_bf16_n(h, m, (size_t)(N * K));
            kiln_free(m);
            if (!h) return KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory merging a weight");
            data = h;
        }
        KILN_TRY(own(set, data, (size_t)(N * K) * (to_bf16 ? 2 : 4), err));
        *w = kiln_tensor_make(data, to_bf16 ? KILN_DT_BF16 : KILN_DT_F32, 2, (int64_t[]){N, K});
    }
    return KILN_OK;
}

static kiln_status attach(kiln_flux2_dit *dit, kiln_backend *be, const kiln_lora_spec *specs, int n,
                          const void *image, size_t len, bool merge, kiln_lora_set **out, kiln_err *err);

kiln_status kiln_lora_attach(kiln_flux2_dit *dit, kiln_backend *be, const kiln_lora_spec *specs, int n,
                             kiln_lora_set **out, kiln_err *err) {
    return attach(dit, be, specs, n, NULL, 0, false, out, err);
}

kiln_status kiln_lora_attach_merged(kiln_flux2_dit *dit, kiln_backend *be, const kiln_lora_spec *specs, int n,
                                    kiln_lora_set **out, kiln_err *err) {
    return attach(dit, be, specs, n, NULL, 0, true, out, err);
}

kiln_status kiln_lora_attach_image(kiln_flux2_dit *dit, kiln_backend *be, const void *image, size_t len,
                                   float strength, bool merge, kiln_lora_set **out, kiln_err *err) {
    kiln_lora_spec sp = {"<memory>", strength};
    return attach(dit, be, &sp, 1, image, len, merge, out, err);
}

static kiln_status attach(kiln_flux2_dit *dit, kiln_backend *be, const kiln_lora_spec *specs, int n,
                          const void *image, size_t len, bool merge, kiln_lora_set **out, kiln_err *err) {
    *out = NULL;
    slots s = {0};
    KILN_TRY(build_slots(dit, &s, err));
    module *mods = NULL;
    int n_mods = 0, cap = 0;
    kiln_status st = KILN_OK;
    for (int i = 0; st == KILN_OK && i < n; i++) st = read_file(&specs[i], image, len, &s, &mods, &n_mods, &cap, err);
    for (int i = 0; st == KILN_OK && i < s.n; i++)
        if (s.v[i].t->lora)
            st = KILN_FAIL(err, KILN_E_INVALID, "LoRA: the DiT already has adapters attached (detach them first)");
    kiln_lora_set *set = st == KILN_OK ? kiln_calloc(1, sizeof *set) : NULL;
    if (st == KILN_OK && !set) st = KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
    if (set) {
        set->be = be;
        set->terms = kiln_calloc((size_t)(n_mods * 3 + 1), sizeof *set->terms);
        set->touched = kiln_calloc((size_t)(n_mods * 3 + 1), sizeof *set->touched);
        if (!set->terms || !set->touched) st = KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
    }
    /* one term per (module, slot) overlap: A shared, B the slot's rows of the module (zero where it has none) */
    for (int mi = 0; st == KILN_OK && mi < n_mods; mi++) {
        module *md = &mods[mi];
        float *a = md->a;
        md->a = NULL; /* owned by the set from here */
        st = own(set, a, (size_t)(md->r * md->k) * sizeof(float), err);
        for (int si = 0; st == KILN_OK && si < s.n; si++) {
            slot *sl = &s.v[si];
            const int64_t N = sl->t->shape[0], lo = md->row0 > sl->row0 ? md->row0 : sl->row0;
            const int64_t hi = md->row0 + md->nb < sl->row0 + N ? md->row0 + md->nb : sl->row0 + N;
            if (strcmp(sl->name, md->name) || lo >= hi) continue;
            float *b = kiln_calloc((size_t)(N * md->r) + 1, sizeof(float));
            if (!b) {
                st = KILN_FAIL(err, KILN_E_NOMEM, "LoRA: out of memory");
                break;
            }
            for (int64_t row = lo; row < hi; row++)
                memcpy(b + (row - sl->row0) * md->r, md->b + (row - md->row0) * md->r, (size_t)md->r * sizeof(float));
            st = own(set, b, (size_t)(N * md->r) * sizeof(float), err);
            if (st != KILN_OK) break;
            kiln_lora_term *t = &set->terms[set->n_terms++];
            t->a = kiln_tensor_make(a, KILN_DT_F32, 2, (int64_t[]){md->r, md->k});
            t->b = kiln_tensor_make(b, KILN_DT_F32, 2, (int64_t[]){N, md->r});
            t->next = sl->t->lora;
            bool seen = false;
            for (int j = 0; j < set->n_touched; j++) seen |= set->touched[j] == sl->t;
            if (!seen) set->touched[set->n_touched++] = sl->t;
            sl->t->lora = t;
        }
    }
    free_mods(mods, n_mods);
    kiln_free(s.v);
    if (st == KILN_OK && merge) st = merge_all(set, err);
    if (st != KILN_OK) {
        kiln_lora_detach(set);
        return st;
    }
    *out = set;
    return KILN_OK;
}

kiln_status kiln_lora_parse_arg(const char *arg, char *path, size_t cap, float *strength, kiln_err *err) {
    *strength = 1.0f;
    const char *colon = arg ? strrchr(arg, ':') : NULL;
    size_t len = arg ? strlen(arg) : 0;
    if (colon && colon[1]) {
        char *end;
        double v = strtod(colon + 1, &end);
        if (*end == 0) {
            if (!isfinite(v))
                return KILN_FAIL(err, KILN_E_INVALID, "--lora %s: the strength is not a finite number", arg);
            *strength = (float)v;
            len = (size_t)(colon - arg);
        }
    }
    if (!len) return KILN_FAIL(err, KILN_E_INVALID, "--lora: no adapter file given (FILE[:STRENGTH])");
    if (len >= cap) return KILN_FAIL(err, KILN_E_INVALID, "--lora: path too long");
    memcpy(path, arg, len);
    path[len] = 0;
    return KILN_OK;
}
