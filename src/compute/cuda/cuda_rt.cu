/* cuda_rt.cu - thin wrappers over the CUDA runtime and cuBLASLt handle for the host C side: device discovery,
 * stream, memory, copies, scratch and workspace growth. */
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/cuda/cuda_kernels.cuh"

kiln_status kcu_device_count(int *n, kiln_err *err) {
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error so later calls are not confused */
        *n = 0;
        return KILN_FAIL(err, KILN_E_DEVICE, "no usable CUDA device: %s (%s)", cudaGetErrorString(e),
                         e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice
                             ? "is an NVIDIA GPU and its driver installed? use --device cpu"
                             : "see nvidia-smi");
    }
    if (*n == 0) return KILN_FAIL(err, KILN_E_DEVICE, "no CUDA device found; use --device cpu");
    return KILN_OK;
}

kiln_status kcu_open(kiln_cuda_backend *cb, int device, kiln_err *err) {
    KCU_CALL(err, cudaSetDevice(device));
    cudaDeviceProp p;
    KCU_CALL(err, cudaGetDeviceProperties(&p, device));
    cb->sm_count = p.multiProcessorCount;
    cb->cc_major = p.major;
    cb->cc_minor = p.minor;
    cb->smem_optin = p.sharedMemPerBlockOptin;
    cb->total_mem = p.totalGlobalMem;
    snprintf(cb->name, sizeof cb->name, "%.96s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor,
             p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    if (p.major < 8)
        return KILN_FAIL(err, KILN_E_DEVICE, "CUDA device %d is %s: kiln needs compute capability 8.0 or newer (bf16 "
                         "tensor cores)", device, cb->name);
    cudaStream_t s;
    KCU_CALL(err, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cb->stream = s;
    cublasLtHandle_t lt;
    cublasStatus_t bs = cublasLtCreate(&lt);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return KILN_FAIL(err, KILN_E_DEVICE, "cublasLtCreate failed: %s", cublasLtGetStatusString(bs));
    cb->lt = lt;
    return KILN_OK;
}

void kcu_close(kiln_cuda_backend *cb) {
    if (cb->stream) cudaStreamSynchronize((cudaStream_t)cb->stream);
    if (cb->lt) cublasLtDestroy((cublasLtHandle_t)cb->lt);
    cudaFree(cb->workspace);
    cudaFree(cb->scratch);
    cudaFree(cb->arena_base);
    if (cb->stream) cudaStreamDestroy((cudaStream_t)cb->stream);
    cb->lt = cb->stream = cb->workspace = cb->scratch = cb->arena_base = NULL;
}

kiln_status kcu_use(kiln_cuda_backend *cb, kiln_err *err) {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == cb->base.device) return KILN_OK;
    KCU_CALL(err, cudaSetDevice(cb->base.device));
    return KILN_OK;
}

/* ---- KILN_CUDA_PROFILE (cuda_profile.h) ---- */

static kiln_status prof_record(kiln_cuda_backend *cb, const char *name, kiln_err *err) {
    kcu_profile *p = cb->prof;
    if (p->n_marks == p->cap_marks) {
        size_t cap = p->cap_marks ? 2 * p->cap_marks : 256;
        void **pool = (void **)realloc(p->pool, cap * sizeof *pool);
        if (pool) p->pool = pool;
        const char **names = (const char **)realloc(p->names, cap * sizeof *names);
        if (names) p->names = names;
        if (!pool || !names) return KILN_FAIL(err, KILN_E_NOMEM, "KILN_CUDA_PROFILE: no memory for %zu marks", cap);
        p->cap_marks = cap;
    }
    if (p->n_marks == p->n_pool) {
        cudaEvent_t e;
        KCU_CALL(err, cudaEventCreate(&e));
        p->pool[p->n_pool++] = e;
    }
    KCU_CALL(err, cudaEventRecord((cudaEvent_t)p->pool[p->n_marks], KCU_STREAM(cb)));
    p->names[p->n_marks++] = name;
    return KILN_OK;
}

kiln_status kcu_prof_flush(kiln_cuda_backend *cb, kiln_err *err) {
    kcu_profile *p = cb->prof;
    if (!p || p->n_marks == 0 || cb->capturing) return KILN_OK;
    KILN_TRY(prof_record(cb, NULL, err)); /* where the last op ends */
    KCU_CALL(err, cudaEventSynchronize((cudaEvent_t)p->pool[p->n_marks - 1]));
    for (size_t i = 0; i + 1 < p->n_marks; i++) {
        float ms = 0;
        if (!p->names[i]) continue;
        KCU_CALL(err, cudaEventElapsedTime(&ms, (cudaEvent_t)p->pool[i], (cudaEvent_t)p->pool[i + 1]));
        kcu_prof_add(p, p->names[i], ms);
    }
    p->n_marks = 0;
    return KILN_OK;
}

kiln_status kcu_op_begin(kiln_cuda_backend *cb, const char *name, kiln_err *err) {
    KILN_TRY(kcu_use(cb, err));
    if (!cb->prof || cb->capturing) return KILN_OK;
    KILN_TRY(prof_record(cb, name, err));
    return cb->prof->n_marks >= 8192 ? kcu_prof_flush(cb, err) : KILN_OK; /* bounded: wait now and then */
}

void kcu_prof_free(kcu_profile *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_pool; i++) cudaEventDestroy((cudaEvent_t)p->pool[i]);
    free(p->pool);
    free(p->names);
    free(p);
}

void *kcu_malloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

void kcu_free(void *p) {
    if (p) cudaFree(p);
}

/* Host <-> device copies are synchronous with respect to the host buffer: the caller may reuse src (or read
 * dst) as soon as this returns, as with memcpy on the CPU backend. Pageable host memory makes cudaMemcpyAsync
 * synchronous anyway; the explicit stream sync makes it so for pinned memory too. */
kiln_status kcu_memcpy_h2d(kiln_cuda_backend *cb, void *dst, const void *src, size_t bytes, kiln_err *err) {
    if (!bytes) return KILN_OK;
    if (cb->capturing) return KILN_FAIL(err, KILN_E_INVALID, "upload during CUDA-graph capture is not allowed");
    KCU_CALL(err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, KCU_STREAM(cb)));
    KCU_CALL(err, cudaStreamSynchronize(KCU_STREAM(cb)));
    return KILN_OK;
}

/* Weight placement: mmapped checkpoint pages are pageable, so a plain cudaMemcpy stages them through the
 * driver's small internal buffer. Two pinned 32 MiB halves instead: the host copies chunk i+1 (faulting the
 * mapping in) while the DMA engine moves chunk i. Falls back to kcu_memcpy_h2d when pinned memory is refused. */
#define KCU_STAGE_BYTES ((size_t)32 << 20)
kiln_status kcu_upload_staged(kiln_cuda_backend *cb, void *dst, const void *src, size_t bytes, kiln_err *err) {
    if (bytes <= KCU_STAGE_BYTES) return kcu_memcpy_h2d(cb, dst, src, bytes, err);
    if (cb->capturing) return KILN_FAIL(err, KILN_E_INVALID, "upload during CUDA-graph capture is not allowed");
    void *pin = NULL;
    if (cudaHostAlloc(&pin, 2 * KCU_STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return kcu_memcpy_h2d(cb, dst, src, bytes, err);
    }
    cudaEvent_t done[2];
    cudaEventCreateWithFlags(&done[0], cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done[1], cudaEventDisableTiming);
    cudaError_t e = cudaSuccess;
    for (size_t off = 0, i = 0; off < bytes && e == cudaSuccess; off += KCU_STAGE_BYTES, i++) {
        size_t n = bytes - off < KCU_STAGE_BYTES ? bytes - off : KCU_STAGE_BYTES;
        char *half = (char *)pin + (i & 1) * KCU_STAGE_BYTES;
        if (i >= 2) e = cudaEventSynchronize(done[i & 1]); /* that half's previous DMA has finished */
        if (e != cudaSuccess) break;
        memcpy(half, (const char *)src + off, n);
        e = cudaMemcpyAsync((char *)dst + off, half, n, cudaMemcpyHostToDevice, KCU_STREAM(cb));
        if (e == cudaSuccess) e = cudaEventRecord(done[i & 1], KCU_STREAM(cb));
    }
    cudaError_t e2 = cudaStreamSynchronize(KCU_STREAM(cb));
    cudaEventDestroy(done[0]);
    cudaEventDestroy(done[1]);
    cudaFreeHost(pin);
    if (e == cudaSuccess) e = e2;
    if (e != cudaSuccess) {
        cudaGetLastError();
        return KILN_FAIL(err, KILN_E_DEVICE, "CUDA upload of %zu MiB of weights: %s", bytes >> 20, cudaGetErrorString(e));
    }
    return KILN_OK;
}

kiln_status kcu_memcpy_d2h(kiln_cuda_backend *cb, void *dst, const void *src, size_t bytes, kiln_err *err) {
    if (!bytes) return KILN_OK;
    if (cb->capturing) return KILN_FAIL(err, KILN_E_INVALID, "download during CUDA-graph capture is not allowed");
    KCU_CALL(err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, KCU_STREAM(cb)));
    KCU_CALL(err, cudaStreamSynchronize(KCU_STREAM(cb)));
    return KILN_OK;
}

kiln_status kcu_memset(kiln_cuda_backend *cb, void *dst, int byte, size_t bytes, kiln_err *err) {
    if (bytes) KCU_CALL(err, cudaMemsetAsync(dst, byte, bytes, KCU_STREAM(cb)));
    return KILN_OK;
}

kiln_status kcu_sync(kiln_cuda_backend *cb, kiln_err *err) {
    KCU_CALL(err, cudaStreamSynchronize(KCU_STREAM(cb)));
    return KILN_OK;
}

/* Grows a device buffer: waits for queued work that may still read the old one, then replaces it. Grows by at
 * least 1.5x so that a sequence of slightly larger requests does not reallocate every time. The buffer moves, and
 * captured graphs hold its old address: arena_gen bumps so that they are rebuilt instead of replayed (e.g. the
 * VAE's im2col grows the scratch after a denoising step was captured; the next request would replay it). */
static kiln_status grow(kiln_cuda_backend *cb, void **buf, size_t *cur, size_t bytes, const char *what, kiln_err *err) {
    if (bytes <= *cur) return KILN_OK;
    if (cb->capturing)
        return KILN_FAIL(err, KILN_E_INVALID, "%s must grow to %zu bytes during CUDA-graph capture; run the shape "
                         "once eagerly first", what, bytes);
    size_t want = *cur + *cur / 2 > bytes ? *cur + *cur / 2 : bytes;
    want = (want + 255) & ~(size_t)255;
    KCU_CALL(err, cudaStreamSynchronize(KCU_STREAM(cb)));
    cudaFree(*buf);
    *buf = NULL;
    *cur = 0;
    cb->arena_gen++;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return KILN_FAIL(err, KILN_E_NOMEM, "CUDA device out of memory growing the %s to %zu MiB: %s", what,
                         want >> 20, cudaGetErrorString(e));
    }
    *buf = p;
    *cur = want;
    return KILN_OK;
}

kiln_status kcu_scratch_reserve(kiln_cuda_backend *cb, size_t bytes, kiln_err *err) {
    return grow(cb, &cb->scratch, &cb->scratch_bytes, bytes, "GEMM/im2col scratch buffer", err);
}

kiln_status kcu_workspace_reserve(kiln_cuda_backend *cb, size_t bytes, kiln_err *err) {
    return grow(cb, &cb->workspace, &cb->workspace_bytes, bytes, "cuBLASLt workspace", err);
}

kiln_status kcu_mem_info(size_t *free_b, size_t *total_b, kiln_err *err) {
    KCU_CALL(err, cudaMemGetInfo(free_b, total_b));
    return KILN_OK;
}
