/* test_server_ranks_wire.c - the message rank 0 of a multi-rank kiln serve broadcasts (src/server/ranks_wire.h):
 * a call with every field set comes back field for field; every cut of the message, a trailing byte, a count or
 * size out of bounds, a NUL inside a string and a wrong header are refused (KILN_E_FORMAT), never read past. The
 * end-to-end runs are tests/cli/serve_ranks.sh. */
#include <string.h>

#include "base/alloc.h"
#include "server/ranks_wire.h"
#include "test.h"

static uint8_t px[2 * 3 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
static const float sig[3] = {1.0f, 0.5f, 0.0f};
static const kiln_gen_lora loras[2] = {{"/m/loras/a.safetensors", 0.5f}, {"/m/loras/b.safetensors", 1.25f}};
static const kiln_gen_image refs[2] = {{px, 2, 3}, {px, 3, 2}};
static const kiln_gen_image init = {px, 1, 6};

static kiln_gen_params full(void) {
    kiln_gen_params p;
    memset(&p, 0, sizeof p);
    p.unet_path = "/m/diffusion_models/u.safetensors";
    p.clip_path = "/m/text_encoders/c.safetensors";
    p.vae_path = "/m/vae/v.safetensors";
    p.clip2_path = "/m/text_encoders/t5.safetensors";
    p.prompt_2 = "t5 text";
    p.prompt = "a red fox \xc3\xa9";
    p.negative_prompt = "";
    p.sampler = "euler";
    p.request_id = "job-1";
    p.guidance = 3.5f;
    p.cfg = 2.0f;
    p.width = 96;
    p.height = 64;
    p.steps = 2;
    p.batch = 3;
    p.seed = 0x1234567890abcdefull;
    p.sigmas = sig;
    p.n_sigmas = 3;
    p.loras = loras;
    p.n_loras = 2;
    p.refs = refs;
    p.n_refs = 2;
    p.init_image = &init;
    p.comfy_noise = true;
    p.comfy_text = false;
    return p;
}

static bool str_eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }
static bool image_eq(const kiln_gen_image *a, const kiln_gen_image *b) {
    return a->width == b->width && a->height == b->height &&
           !memcmp(a->pixels, b->pixels, (size_t)a->width * (size_t)a->height * 3);
}

static void check_same(const kiln_gen_params *a, const kiln_gen_params *b) {
    CHECK(str_eq(a->unet_path, b->unet_path) && str_eq(a->clip_path, b->clip_path) && str_eq(a->vae_path, b->vae_path));
    CHECK(str_eq(a->clip2_path, b->clip2_path) && str_eq(a->prompt_2, b->prompt_2) && str_eq(a->prompt, b->prompt));
    CHECK(str_eq(a->negative_prompt, b->negative_prompt) && str_eq(a->sampler, b->sampler));
    CHECK(str_eq(a->request_id, b->request_id));
    CHECK(a->guidance == b->guidance && a->cfg == b->cfg);
    CHECK(a->width == b->width && a->height == b->height && a->steps == b->steps && a->batch == b->batch);
    CHECK(a->seed == b->seed);
    CHECK_EQ_INT(a->n_sigmas, b->n_sigmas);
    CHECK((a->sigmas == NULL) == (b->sigmas == NULL));
    if (a->sigmas && b->sigmas) CHECK(!memcmp(a->sigmas, b->sigmas, (size_t)a->n_sigmas * sizeof(float)));
    CHECK_EQ_INT(a->n_loras, b->n_loras);
    for (int i = 0; i < a->n_loras && i < b->n_loras; i++)
        CHECK(str_eq(a->loras[i].path, b->loras[i].path) && a->loras[i].strength == b->loras[i].strength);
    CHECK_EQ_INT(a->n_refs, b->n_refs);
    for (int i = 0; i < a->n_refs && i < b->n_refs; i++) CHECK(image_eq(&a->refs[i], &b->refs[i]));
    CHECK((a->init_image == NULL) == (b->init_image == NULL));
    if (a->init_image && b->init_image) CHECK(image_eq(a->init_image, b->init_image));
    CHECK(a->comfy_noise == b->comfy_noise && a->comfy_text == b->comfy_text);
    CHECK(b->latent == NULL);
}

static void test_round_trip(void) {
    kiln_gen_params ps[2] = {full(), full()};
    /* the second call: the optional parts absent (NULL strings, no sigmas, adapters or images) */
    ps[1].clip2_path = ps[1].prompt_2 = ps[1].negative_prompt = ps[1].sampler = ps[1].request_id = NULL;
    ps[1].sigmas = NULL;
    ps[1].n_sigmas = 0;
    ps[1].n_loras = ps[1].n_refs = 0;
    ps[1].loras = NULL;
    ps[1].refs = NULL;
    ps[1].init_image = NULL;
    ps[1].seed = 7;
    uint8_t *buf;
    size_t len;
    kiln_err err = {0};
    CHECK(kiln_ranks_encode(ps, 2, &buf, &len, &err) == KILN_OK);
    kiln_ranks_call *c = NULL;
    CHECK(kiln_ranks_decode(buf, len, &c, &err) == KILN_OK);
    if (c) {
        CHECK_EQ_INT(c->n, 2);
        check_same(&ps[0], &c->ps[0]);
        check_same(&ps[1], &c->ps[1]);
    }
    kiln_ranks_call_free(c);
    /* every cut is refused, and so is one byte too many */
    int cut_ok = 0;
    for (size_t n = 0; n < len; n++) {
        c = NULL;
        if (kiln_ranks_decode(buf, n, &c, &err) == KILN_E_FORMAT && !c) cut_ok++;
        kiln_ranks_call_free(c);
    }
    CHECK_EQ_INT(cut_ok, (int)len);
    uint8_t *more = kiln_malloc(len + 1);
    memcpy(more, buf, len);
    more[len] = 0;
    CHECK(kiln_ranks_decode(more, len + 1, &c, &err) == KILN_E_FORMAT);
    CHECK(strstr(err.msg, "after the last call") != NULL);
    kiln_free(more);
    kiln_free(buf);
}

/* A one-call message with its first string's length patched, a count patched, or a NUL inside the prompt. */
static void test_hostile(void) {
    kiln_gen_params p = full();
    uint8_t *buf;
    size_t len;
    kiln_err err = {0};
    kiln_ranks_call *c = NULL;
    CHECK(kiln_ranks_encode(&p, 1, &buf, &len, &err) == KILN_OK);
    /* [i32 n][u8 present][i32 length]...: a length past the message */
    int32_t huge = 0x7fffffff, neg = -1, many = 17;
    uint8_t *m = kiln_malloc(len);
    memcpy(m, buf, len);
    memcpy(m + 5, &huge, 4);
    CHECK(kiln_ranks_decode(m, len, &c, &err) == KILN_E_FORMAT);
    memcpy(m + 5, &neg, 4);
    CHECK(kiln_ranks_decode(m, len, &c, &err) == KILN_E_FORMAT);
    memcpy(m, buf, len);
    memcpy(m, &many, 4); /* 17 calls */
    CHECK(kiln_ranks_decode(m, len, &c, &err) == KILN_E_FORMAT);
    memcpy(m, buf, len);
    m[4] = 2; /* "present" is 0 or 1 */
    CHECK(kiln_ranks_decode(m, len, &c, &err) == KILN_E_FORMAT);
    memcpy(m, buf, len);
    m[9] = 0; /* a NUL inside the unet path */
    CHECK(kiln_ranks_decode(m, len, &c, &err) == KILN_E_FORMAT);
    CHECK(c == NULL);
    kiln_free(m);
    kiln_free(buf);
    /* a required string missing: refused on receive even though the sender could encode it */
    p.unet_path = NULL;
    CHECK(kiln_ranks_encode(&p, 1, &buf, &len, &err) == KILN_OK);
    CHECK(kiln_ranks_decode(buf, len, &c, &err) == KILN_E_FORMAT);
    kiln_free(buf);
    /* too many adapters: refused before anything is sent */
    p = full();
    p.n_loras = 9;
    CHECK(kiln_ranks_encode(&p, 1, &buf, &len, &err) == KILN_E_LIMIT);
    CHECK(kiln_ranks_encode(&p, 0, &buf, &len, &err) == KILN_E_LIMIT);
}

static void test_header(void) {
    kiln_err err = {0};
    kiln_ranks_header h = kiln_ranks_header_make(KILN_RANKS_RUN, 100);
    CHECK(kiln_ranks_header_check(&h, &err) == KILN_OK);
    h = kiln_ranks_header_make(KILN_RANKS_STOP, 0);
    CHECK(kiln_ranks_header_check(&h, &err) == KILN_OK);
    h = kiln_ranks_header_make(KILN_RANKS_STOP, 4);
    CHECK(kiln_ranks_header_check(&h, &err) == KILN_E_FORMAT);
    h = kiln_ranks_header_make(KILN_RANKS_RUN, 0);
    CHECK(kiln_ranks_header_check(&h, &err) == KILN_E_FORMAT);
    h = kiln_ranks_header_make(KILN_RANKS_RUN, (size_t)KILN_RANKS_MAX_PAYLOAD + 1);
    CHECK(kiln_ranks_header_check(&h, &err) == KILN_E_FORMAT);
    h = kiln_ranks_header_make(9, 0);
    CHECK(kiln_ranks_header_check(&h, &err) == KILN_E_FORMAT);
    h = kiln_ranks_header_make(KILN_RANKS_UNLOAD, 0);
    h.version = KILN_RANKS_VERSION + 1;
    CHECK(kiln_ranks_header_check(&h, &err) == KILN_E_FORMAT);
    CHECK(strstr(err.msg, "same kiln") != NULL);
}

int main(void) {
    RUN(test_round_trip);
    RUN(test_hostile);
    RUN(test_header);
    return test_summary();
}
