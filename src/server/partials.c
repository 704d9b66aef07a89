/* partials.c - the board between the worker and an OpenAI stream: a request with stream:true and
 * partial_images:P registers its job; after each denoising step the worker offers the step's preview and the
 * board keeps it when the step is one of the P chosen ones (evenly spread, never the last step, which the
 * completed image follows at once). The stream handler takes them in order. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "server/openai.h"

#define BOARD_SLOTS 64
#define MAX_PARTIALS 3

typedef struct slot {
    char id[64];
    int want, steps, step, have;
    uint8_t *rgb[MAX_PARTIALS];
    int w[MAX_PARTIALS], h[MAX_PARTIALS];
} slot;

struct kiln_partials {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot s[BOARD_SLOTS];
};

kiln_partials *kiln_partials_new(void) {
    kiln_partials *b = kiln_calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    return b;
}

static void slot_clear(slot *s) {
    for (int i = 0; i < MAX_PARTIALS; i++) kiln_free(s->rgb[i]);
    memset(s, 0, sizeof *s);
}

void kiln_partials_free(kiln_partials *b) {
    if (!b) return;
    for (int i = 0; i < BOARD_SLOTS; i++) slot_clear(&b->s[i]);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    kiln_free(b);
}

static slot *find(kiln_partials *b, const char *id) {
    for (int i = 0; i < BOARD_SLOTS; i++)
        if (b->s[i].id[0] && !strcmp(b->s[i].id, id)) return &b->s[i];
    return NULL;
}

bool kiln_partials_want(kiln_partials *b, const char *id, int n, int steps) {
    if (!b || n <= 0 || strlen(id) >= 64) return false;
    if (n > MAX_PARTIALS) n = MAX_PARTIALS;
    pthread_mutex_lock(&b->mu);
    slot *s = find(b, id);
    for (int i = 0; !s && i < BOARD_SLOTS; i++)
        if (!b->s[i].id[0]) s = &b->s[i];
    if (s && !s->id[0]) {
        snprintf(s->id, sizeof s->id, "%s", id);
        s->want = n;
        s->steps = steps > 0 ? steps : 1;
    }
    pthread_mutex_unlock(&b->mu);
    return s != NULL;
}

void kiln_partials_forget(kiln_partials *b, const char *id) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    slot *s = find(b, id);
    if (s) slot_clear(s);
    pthread_mutex_unlock(&b->mu);
}

bool kiln_partials_wanted(kiln_partials *b, const char *id) {
    if (!b) return false;
    pthread_mutex_lock(&b->mu);
    bool yes = find(b, id) != NULL;
    pthread_mutex_unlock(&b->mu);
    return yes;
}

void kiln_partials_step(kiln_partials *b, const char *id, const uint8_t *rgb, int w, int h) {
    if (!b || !rgb || w <= 0 || h <= 0) return;
    pthread_mutex_lock(&b->mu);
    slot *s = find(b, id);
    if (s) {
        int i = ++s->step, slots = s->want + 1;
        /* step i is chosen when it crosses one of the want+1 equal divisions of the run; the last division ends
         * at the final step, which is not a partial */
        if (s->have < s->want && (int64_t)i * slots / s->steps > (int64_t)(i - 1) * slots / s->steps) {
            size_t n = (size_t)w * (size_t)h * 3;
            uint8_t *c = kiln_malloc(n);
            if (c) {
                memcpy(c, rgb, n);
                s->rgb[s->have] = c;
                s->w[s->have] = w;
                s->h[s->have] = h;
                s->have++;
                pthread_cond_broadcast(&b->cv);
            }
        }
    }
    pthread_mutex_unlock(&b->mu);
}

bool kiln_partials_take(kiln_partials *b, const char *id, int next, double timeout_s, uint8_t **rgb, int *w,
                        int *h) {
    *rgb = NULL;
    if (!b || next < 0 || next >= MAX_PARTIALS) return false;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)timeout_s;
    until.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&b->mu);
    slot *s;
    while ((s = find(b, id)) && s->have <= next)
        if (pthread_cond_timedwait(&b->cv, &b->mu, &until) != 0) break;
    s = find(b, id);
    if (s && s->have > next) {
        size_t n = (size_t)s->w[next] * (size_t)s->h[next] * 3;
        if ((*rgb = kiln_malloc(n))) {
            memcpy(*rgb, s->rgb[next], n);
            *w = s->w[next];
            *h = s->h[next];
        }
    }
    pthread_mutex_unlock(&b->mu);
    return *rgb != NULL;
}
