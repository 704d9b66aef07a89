/* value.c - freeing and deep-copying the values that flow along graph links (value.h). */
#include <string.h>

#include "base/alloc.h"
#include "graph/value.h"

static void rgb_clear(kiln_rgb *r) {
    kiln_free(r->pixels);
    memset(r, 0, sizeof *r);
}

void kiln_model_info_clear(kiln_model_info *m) {
    for (int i = 0; i < m->n_loras; i++) kiln_free(m->lora_path[i]);
    memset(m, 0, sizeof *m);
}

void kiln_cond_info_clear(kiln_cond_info *c) {
    kiln_free(c->text2);
    for (int i = 0; i < c->n_refs; i++) rgb_clear(&c->refs[i]);
    memset(c, 0, sizeof *c);
}

void kiln_value_clear(kiln_value *v) {
    if (!v) return;
    kiln_free(v->str);
    kiln_free(v->str2);
    kiln_free(v->str3);
    kiln_latent *l = &v->latent;
    kiln_free(l->model_path);
    kiln_free(l->clip_path);
    kiln_free(l->clip2_path);
    kiln_free(l->prompt);
    kiln_free(l->negative);
    kiln_free(l->sampler);
    kiln_free(l->sigmas);
    rgb_clear(&l->encoded);
    kiln_model_info_clear(&l->model);
    kiln_cond_info_clear(&l->pos);
    kiln_model_info_clear(&v->model);
    kiln_cond_info_clear(&v->cond);
    kiln_free(v->sigmas);
    kiln_free(v->pixels);
    memset(v, 0, sizeof *v);
}

bool kiln_rgb_copy(kiln_rgb *dst, const kiln_rgb *src) {
    *dst = *src;
    dst->pixels = NULL;
    if (!src->pixels) return true;
    size_t n = (size_t)src->width * (size_t)src->height * 3;
    if (!(dst->pixels = kiln_malloc(n))) return false;
    memcpy(dst->pixels, src->pixels, n);
    return true;
}

bool kiln_model_info_copy(kiln_model_info *dst, const kiln_model_info *src) {
    *dst = *src;
    for (int i = 0; i < src->n_loras; i++) dst->lora_path[i] = NULL;
    for (int i = 0; i < src->n_loras; i++)
        if (!(dst->lora_path[i] = kiln_strdup(src->lora_path[i]))) return false;
    return true;
}

bool kiln_cond_info_copy(kiln_cond_info *dst, const kiln_cond_info *src) {
    *dst = *src;
    dst->text2 = NULL;
    for (int i = 0; i < src->n_refs; i++) dst->refs[i].pixels = NULL;
    if (src->text2 && !(dst->text2 = kiln_strdup(src->text2))) return false;
    for (int i = 0; i < src->n_refs; i++)
        if (!kiln_rgb_copy(&dst->refs[i], &src->refs[i])) return false;
    return true;
}
