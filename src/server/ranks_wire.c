/* ranks_wire.c - encoding and checked decoding of the engine calls rank 0 broadcasts (see ranks_wire.h). */
#include <string.h>

#include "base/alloc.h"
#include "kiln.h"
#include "server/ranks_wire.h"

#define MAX_STRING (16u << 20) /* a prompt or a path; the payload cap bounds the sum */
#define MAX_SIGMAS 4097        /* --max-steps 4096 + the final 0 */
#define MAX_LORAS 8            /* graph/value.h KILN_GRAPH_MAX_LORAS, engine_kiln.c's limit */
#define MAX_SIDE 8192          /* kiln.h: the largest side kiln accepts */

kiln_ranks_header kiln_ranks_header_make(int kind, size_t payload_bytes) {
    return (kiln_ranks_header){KILN_RANKS_MAGIC, KILN_RANKS_VERSION, (uint16_t)kind, payload_bytes};
}

kiln_status kiln_ranks_header_check(const kiln_ranks_header *h, kiln_err *err) {
    if (h->magic != KILN_RANKS_MAGIC || h->version != KILN_RANKS_VERSION)
        return KILN_FAIL(err, KILN_E_FORMAT, "rank message: magic %08x version %u, want %08x version %u (every "
                         "rank must run the same kiln)", h->magic, h->version, KILN_RANKS_MAGIC, KILN_RANKS_VERSION);
    bool run = h->kind == KILN_RANKS_RUN, empty = h->kind == KILN_RANKS_UNLOAD || h->kind == KILN_RANKS_STOP;
    if (!run && !empty) return KILN_FAIL(err, KILN_E_FORMAT, "rank message: unknown kind %u", h->kind);
    if (run ? (h->payload_bytes == 0 || h->payload_bytes > KILN_RANKS_MAX_PAYLOAD) : h->payload_bytes != 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "rank message: kind %u with %llu payload bytes", h->kind,
                         (unsigned long long)h->payload_bytes);
    return KILN_OK;
}

/* ---- writing: measure, then fill (two passes of the same code, so the sizes cannot disagree) ---- */

typedef struct writer {
    uint8_t *p; /* NULL: measuring */
    size_t n;
} writer;

static void put(writer *w, const void *v, size_t n) {
    if (w->p && n) memcpy(w->p + w->n, v, n);
    w->n += n;
}
static void put_u8(writer *w, uint8_t v) { put(w, &v, 1); }
static void put_i32(writer *w, int32_t v) { put(w, &v, 4); }
static void put_f32(writer *w, float v) { put(w, &v, 4); }
static void put_str(writer *w, const char *s) {
    put_u8(w, s != NULL);
    if (!s) return;
    size_t n = strlen(s);
    put_i32(w, (int32_t)(n > MAX_STRING ? MAX_STRING + 1 : n)); /* an overlong string is refused by encode */
    put(w, s, n);
}
static void put_image(writer *w, const kiln_gen_image *im) {
    put_i32(w, im->width);
    put_i32(w, im->height);
    put(w, im->pixels, (size_t)im->width * (size_t)im->height * 3);
}

static void put_call(writer *w, const kiln_gen_params *p) {
    const char *s[9] = {p->unet_path, p->clip_path,       p->vae_path, p->clip2_path, p->prompt_2,
                        p->prompt,    p->negative_prompt, p->sampler,  p->request_id};
    for (int i = 0; i < 9; i++) put_str(w, s[i]);
    put_f32(w, p->guidance);
    put_f32(w, p->cfg);
    put_i32(w, p->width);
    put_i32(w, p->height);
    put_i32(w, p->steps);
    put_i32(w, p->batch);
    put(w, &p->seed, 8);
    put_u8(w, p->sigmas != NULL);
    if (p->sigmas) {
        put_i32(w, p->n_sigmas);
        put(w, p->sigmas, (size_t)p->n_sigmas * sizeof(float));
    }
    put_i32(w, p->n_loras);
    for (int i = 0; i < p->n_loras; i++) {
        put_str(w, p->loras[i].path);
        put_f32(w, p->loras[i].strength);
    }
    put_i32(w, p->n_refs);
    for (int i = 0; i < p->n_refs; i++) put_image(w, &p->refs[i]);
    put_u8(w, p->init_image != NULL);
    if (p->init_image) put_image(w, p->init_image);
    put_u8(w, (uint8_t)((p->comfy_noise ? 1 : 0) | (p->comfy_text ? 2 : 0))); /* ComfyUI's noise and text rules */
}

static bool image_ok(const kiln_gen_image *im) {
    return im->pixels && im->width >= 1 && im->height >= 1 && im->width <= MAX_SIDE && im->height <= MAX_SIDE;
}

kiln_status kiln_ranks_encode(const kiln_gen_params *ps, int n, uint8_t **buf, size_t *len, kiln_err *err) {
    *buf = NULL;
    *len = 0;
    if (n < 1 || n > KILN_RANKS_MAX_CALLS)
        return KILN_FAIL(err, KILN_E_LIMIT, "ranks: %d engine calls in one forward (at most %d)", n, KILN_RANKS_MAX_CALLS);
    for (int i = 0; i < n; i++) {
        const kiln_gen_params *p = &ps[i];
        bool ok = p->n_loras >= 0 && p->n_loras <= MAX_LORAS && p->n_refs >= 0 && p->n_refs <= KILN_MAX_REFS &&
                  (!p->sigmas || (p->n_sigmas >= 1 && p->n_sigmas <= MAX_SIGMAS)) && (!p->n_loras || p->loras) &&
                  (!p->n_refs || p->refs) && (!p->init_image || image_ok(p->init_image));
        for (int j = 0; ok && j < p->n_refs; j++) ok = image_ok(&p->refs[j]);
        const char *s[9] = {p->unet_path, p->clip_path,       p->vae_path, p->clip2_path, p->prompt_2,
                            p->prompt,    p->negative_prompt, p->sampler,  p->request_id};
        for (int j = 0; ok && j < 9; j++) ok = !s[j] || strlen(s[j]) <= MAX_STRING;
        for (int j = 0; ok && j < p->n_loras; j++) ok = p->loras[j].path && strlen(p->loras[j].path) <= MAX_STRING;
        if (!ok)
            return KILN_FAIL(err, KILN_E_LIMIT, "ranks: call %d cannot be sent to the other ranks (%d adapters, %d "
                             "references, %d sigmas, or a text over 16 MiB)", i, p->n_loras, p->n_refs, p->n_sigmas);
    }
    writer w = {0};
    put_i32(&w, n);
    for (int i = 0; i < n; i++) put_call(&w, &ps[i]);
    if (w.n > KILN_RANKS_MAX_PAYLOAD)
        return KILN_FAIL(err, KILN_E_LIMIT, "ranks: the call is %zu bytes, over the %u the other ranks accept", w.n,
                         KILN_RANKS_MAX_PAYLOAD);
    size_t total = w.n;
    w = (writer){kiln_malloc(total), 0};
    if (!w.p) return KILN_FAIL(err, KILN_E_NOMEM, "ranks: out of memory for a %zu-byte message", total);
    put_i32(&w, n);
    for (int i = 0; i < n; i++) put_call(&w, &ps[i]);
    *buf = w.p;
    *len = w.n;
    return KILN_OK;
}

/* ---- reading: every read checked against what is left ---- */

typedef struct reader {
    const uint8_t *p;
    size_t left;
    kiln_ranks_call *c;
    bool bad;
} reader;

static bool get(reader *r, void *v, size_t n) {
    if (r->bad || n > r->left) return r->bad = true, false;
    memcpy(v, r->p, n);
    r->p += n;
    r->left -= n;
    return true;
}
static int32_t get_i32(reader *r) {
    int32_t v = 0;
    get(r, &v, 4);
    return v;
}
static float get_f32(reader *r) {
    float v = 0;
    get(r, &v, 4);
    return v;
}
static uint8_t get_u8(reader *r) {
    uint8_t v = 0;
    get(r, &v, 1);
    return v;
}
static void *own(reader *r, size_t n) {
    if (r->bad) return NULL;
    if (r->c->n_owned == (int)(sizeof r->c->owned / sizeof *r->c->owned)) return r->bad = true, NULL;
    void *p = kiln_malloc(n ? n : 1);
    if (!p) return r->bad = true, NULL;
    r->c->owned[r->c->n_owned++] = p;
    return p;
}
/* A bytes block whose size the message states: checked against what is left before anything is allocated. */
static void *get_block(reader *r, size_t n) {
    if (r->bad || n > r->left) return r->bad = true, NULL;
    void *p = own(r, n);
    if (p) get(r, p, n);
    return p;
}
static const char *get_str(reader *r) {
    uint8_t present = get_u8(r);
    if (r->bad || present > 1) return r->bad = true, NULL;
    if (!present) return NULL;
    int32_t n = get_i32(r);
    if (r->bad || n < 0 || (uint32_t)n > MAX_STRING || (size_t)n > r->left) return r->bad = true, NULL;
    char *s = own(r, (size_t)n + 1);
    if (!s || !get(r, s, (size_t)n)) return NULL;
    s[n] = 0;
    if (memchr(s, 0, (size_t)n)) return r->bad = true, NULL; /* a NUL inside would cut the text short */
    return s;
}
static bool get_image(reader *r, kiln_gen_image *im) {
    im->width = get_i32(r);
    im->height = get_i32(r);
    if (r->bad || im->width < 1 || im->height < 1 || im->width > MAX_SIDE || im->height > MAX_SIDE)
        return r->bad = true, false;
    im->pixels = get_block(r, (size_t)im->width * (size_t)im->height * 3);
    return !r->bad;
}

static void get_call(reader *r, kiln_gen_params *p) {
    memset(p, 0, sizeof *p);
    const char **s[9] = {&p->unet_path, &p->clip_path,       &p->vae_path, &p->clip2_path, &p->prompt_2,
                         &p->prompt,    &p->negative_prompt, &p->sampler,  &p->request_id};
    for (int i = 0; i < 9; i++) *s[i] = get_str(r);
    /* the engine needs these three and a prompt; the server always sends them */
    if (!r->bad && (!p->unet_path || !p->clip_path || !p->vae_path || !p->prompt)) r->bad = true;
    p->guidance = get_f32(r);
    p->cfg = get_f32(r);
    p->width = get_i32(r);
    p->height = get_i32(r);
    p->steps = get_i32(r);
    p->batch = get_i32(r);
    get(r, &p->seed, 8);
    uint8_t has_sigmas = get_u8(r);
    if (has_sigmas > 1) r->bad = true;
    if (has_sigmas == 1 && !r->bad) {
        p->n_sigmas = get_i32(r);
        if (p->n_sigmas < 1 || p->n_sigmas > MAX_SIGMAS) r->bad = true;
        p->sigmas = r->bad ? NULL : get_block(r, (size_t)p->n_sigmas * sizeof(float));
    }
    p->n_loras = get_i32(r);
    if (!r->bad && (p->n_loras < 0 || p->n_loras > MAX_LORAS)) r->bad = true;
    if (!r->bad && p->n_loras) {
        kiln_gen_lora *l = own(r, (size_t)p->n_loras * sizeof *l);
        for (int i = 0; l && i < p->n_loras; i++) {
            l[i].path = get_str(r);
            l[i].strength = get_f32(r);
            if (!l[i].path) r->bad = true;
        }
        p->loras = l;
    }
    p->n_refs = get_i32(r);
    if (!r->bad && (p->n_refs < 0 || p->n_refs > KILN_MAX_REFS)) r->bad = true;
    if (!r->bad && p->n_refs) {
        kiln_gen_image *im = own(r, (size_t)p->n_refs * sizeof *im);
        for (int i = 0; im && i < p->n_refs; i++) get_image(r, &im[i]);
        p->refs = im;
    }
    uint8_t has_init = get_u8(r);
    if (has_init > 1) r->bad = true;
    if (has_init == 1 && !r->bad) {
        kiln_gen_image *im = own(r, sizeof *im);
        if (im) get_image(r, im);
        p->init_image = im;
    }
    uint8_t rules = get_u8(r);
    if (rules > 3) r->bad = true;
    p->comfy_noise = rules & 1;
    p->comfy_text = (rules & 2) != 0;
}

kiln_status kiln_ranks_decode(const uint8_t *buf, size_t len, kiln_ranks_call **out, kiln_err *err) {
    *out = NULL;
    kiln_ranks_call *c = kiln_calloc(1, sizeof *c);
    if (!c) return KILN_FAIL(err, KILN_E_NOMEM, "ranks: out of memory");
    reader r = {buf, len, c, false};
    c->n = get_i32(&r);
    if (r.bad || c->n < 1 || c->n > KILN_RANKS_MAX_CALLS) {
        int n = c->n;
        kiln_ranks_call_free(c);
        return KILN_FAIL(err, KILN_E_FORMAT, "rank message: %d engine calls (1..%d)", n, KILN_RANKS_MAX_CALLS);
    }
    int i = 0;
    for (; i < c->n && !r.bad; i++) get_call(&r, &c->ps[i]);
    if (r.bad || r.left) {
        size_t at = len - r.left;
        bool trailing = !r.bad;
        kiln_ranks_call_free(c);
        if (trailing) return KILN_FAIL(err, KILN_E_FORMAT, "rank message: %zu bytes after the last call", len - at);
        return KILN_FAIL(err, KILN_E_FORMAT, "rank message: call %d is cut short or out of bounds near byte %zu of %zu",
                         i - 1, at, len);
    }
    *out = c;
    return KILN_OK;
}

void kiln_ranks_call_free(kiln_ranks_call *c) {
    if (!c) return;
    for (int i = 0; i < c->n_owned; i++) kiln_free(c->owned[i]);
    kiln_free(c);
}
