/* mem_agree.c - the ranks' agreement on one memory limit (see mem_agree.h). */
#include "pipeline/mem_agree.h"

#include <stdint.h>
#include <stdio.h>

#include "base/alloc.h"
#include "pipeline/engine_internal.h"
#include "pipeline/memory.h"

/* What each rank sends: fixed-width fields, so that the bytes mean the same on every rank (one kiln binary). */
typedef struct mem_offer {
    uint64_t bytes;
    uint64_t fixed;
} mem_offer;

kiln_status kiln_mem_limit_agree(kiln_comm *c, size_t mine, bool fixed, kiln_mem_limit *out, kiln_err *err) {
    *out = (kiln_mem_limit){.bytes = mine, .rank = 0, .ranks = 1, .fixed = fixed};
    if (!c || c->size <= 1) return KILN_OK;
    mem_offer me = {(uint64_t)mine, fixed ? 1u : 0u};
    mem_offer *all = kiln_calloc((size_t)c->size, sizeof *all);
    if (!all) return KILN_FAIL(err, KILN_E_NOMEM, "memory agreement: out of memory");
    kiln_status s = kiln_comm_host_all_gather(c, &me, all, sizeof me, err);
    if (s == KILN_OK) {
        /* the same loop over the same bytes on every rank: the same answer everywhere */
        kiln_mem_limit l = {.bytes = 0, .rank = 0, .ranks = c->size, .fixed = true};
        for (int r = 0; r < c->size; r++) {
            l.fixed = l.fixed && all[r].fixed;
            if (all[r].bytes && (!l.bytes || all[r].bytes < l.bytes)) { /* 0 (unknown) bounds nothing */
                l.bytes = (size_t)all[r].bytes;
                l.rank = r;
            }
        }
        *out = l;
    }
    kiln_free(all);
    return s;
}

const char *kiln_mem_limit_where(const kiln_mem_limit *l, char *buf, size_t cap) {
    if (l->ranks > 1) snprintf(buf, cap, " (rank %d of %d, the tightest)", l->rank, l->ranks);
    else if (cap) buf[0] = '\0';
    return buf;
}

size_t kiln_engine_local_memory_limit(const struct kiln_engine *e) {
    return e->cfg.memory_limit ? e->cfg.memory_limit : kiln_mem_usable();
}

kiln_status kiln_engine_memory_limit(struct kiln_engine *e, kiln_mem_limit *out, kiln_err *err) {
    if (e->mem_agreed) { /* every rank cached it at the same request (the agreement said fixed on all) */
        *out = e->mem_limit;
        return KILN_OK;
    }
    KILN_TRY(kiln_mem_limit_agree(e->comm, kiln_engine_local_memory_limit(e), e->cfg.memory_limit != 0, out, err));
    if (out->ranks > 1 && out->fixed) {
        e->mem_limit = *out;
        e->mem_agreed = true;
    }
    return KILN_OK;
}
