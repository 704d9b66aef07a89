/* comm_nccl_logic.c - the NCCL communicator's host-side logic (comm_nccl.h): no NCCL, no GPU. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "compute/comm_nccl.h"

kiln_status kiln_nccl_dtype(kiln_dtype dt, int *out, kiln_err *err) {
    switch (dt) {
    case KILN_DT_F32: *out = KILN_NCCL_FLOAT32; return KILN_OK;
    case KILN_DT_BF16: *out = KILN_NCCL_BFLOAT16; return KILN_OK;
    case KILN_DT_F16: *out = KILN_NCCL_FLOAT16; return KILN_OK;
    case KILN_DT_I32: *out = KILN_NCCL_INT32; return KILN_OK;
    case KILN_DT_U8: case KILN_DT_BOOL: *out = KILN_NCCL_UINT8; return KILN_OK;
    default:
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "NCCL communicator: no NCCL type for %s (a collective moves "
                         "activations: f32, bf16, f16, u8 or i32)", kiln_dtype_name(dt));
    }
}

kiln_status kiln_nccl_status(int result, const char *what, const char *detail, kiln_err *err) {
    const char *d = detail && *detail ? detail : "no detail";
    switch (result) {
    case KILN_NCCL_SUCCESS: return KILN_OK;
    case KILN_NCCL_CUDA_ERROR:
        return KILN_FAIL(err, KILN_E_DEVICE, "NCCL %s: a CUDA call failed (%s)", what, d);
    case KILN_NCCL_SYSTEM_ERROR:
        return KILN_FAIL(err, KILN_E_IO, "NCCL %s: a system call or the network failed (%s)", what, d);
    case KILN_NCCL_INTERNAL_ERROR:
        return KILN_FAIL(err, KILN_E_INTERNAL, "NCCL %s: internal error (%s)", what, d);
    case KILN_NCCL_INVALID_ARGUMENT:
    case KILN_NCCL_INVALID_USAGE:
        return KILN_FAIL(err, KILN_E_INVALID, "NCCL %s: invalid %s (%s)", what,
                         result == KILN_NCCL_INVALID_ARGUMENT ? "argument" : "usage", d);
    case KILN_NCCL_REMOTE_ERROR:
        return KILN_FAIL(err, KILN_E_DEVICE, "NCCL %s: another rank failed or left (%s)", what, d);
    case KILN_NCCL_IN_PROGRESS:
        return KILN_FAIL(err, KILN_E_INTERNAL, "NCCL %s: still in progress where it should have completed", what);
    default:
        return KILN_FAIL(err, KILN_E_INTERNAL, "NCCL %s: unknown result %d (%s)", what, result, d);
    }
}

kiln_status kiln_nccl_local_device(int base, const char *local_rank, int n_devices, int *out, kiln_err *err) {
    long lr = 0;
    if (local_rank && *local_rank) {
        char *end;
        errno = 0;
        lr = strtol(local_rank, &end, 10);
        if (errno || *end || lr < 0 || lr > 65535)
            return KILN_FAIL(err, KILN_E_INVALID, "NCCL communicator: local rank \"%s\" (OMPI_COMM_WORLD_LOCAL_RANK) "
                             "is not a number >= 0", local_rank);
    }
    if (base < 0) return KILN_FAIL(err, KILN_E_INVALID, "NCCL communicator: device index %d", base);
    long dev = base + lr;
    if (dev >= n_devices)
        return KILN_FAIL(err, KILN_E_DEVICE, "NCCL communicator: local rank %ld needs GPU %ld (cuda:%d + %ld) but "
                         "this machine has %d: run at most one rank per GPU", lr, dev, base, lr, n_devices);
    *out = (int)dev;
    return KILN_OK;
}

kiln_status kiln_nccl_check_count(const char *what, size_t n, int size, size_t elem, size_t have, kiln_err *err) {
    if (size < 1 || elem == 0) return KILN_FAIL(err, KILN_E_INVALID, "NCCL %s: %d ranks, %zu-byte elements", what, size, elem);
    if (n > SIZE_MAX / (size_t)size / elem)
        return KILN_FAIL(err, KILN_E_LIMIT, "NCCL %s: %zu elements x %d ranks x %zu bytes overflows", what, n, size,
                         elem);
    size_t bytes = n * (size_t)size * elem;
    if (have && bytes > have)
        return KILN_FAIL(err, KILN_E_INVALID, "NCCL %s: %zu bytes (%zu elements x %d ranks) past the %zu-byte buffer",
                         what, bytes, n, size, have);
    return KILN_OK;
}
