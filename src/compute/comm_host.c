/* comm_host.c - host-side agreements over any communicator, built on its host broadcast (see comm.h). */
#include <stdint.h>
#include <string.h>

#include "compute/comm.h"

kiln_status kiln_comm_host_all_gather(kiln_comm *c, const void *mine, void *all, size_t bytes, kiln_err *err) {
    if (c->size < 1 || bytes > SIZE_MAX / (size_t)c->size)
        return KILN_FAIL(err, KILN_E_LIMIT, "host all-gather of %zu bytes x %d ranks", bytes, c->size);
    uint8_t *out = all;
    /* one broadcast per root, in rank order on every rank: the calls match without a new collective in each
     * implementation (and without device memory, which NCCL's own collectives would want) */
    for (int r = 0; r < c->size; r++) {
        uint8_t *slot = out + (size_t)r * bytes;
        if (r == c->rank) memmove(slot, mine, bytes);
        KILN_TRY(c->ops->broadcast(c, NULL, slot, bytes, r, err));
    }
    return KILN_OK;
}
