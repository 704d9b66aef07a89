/* cuda_graph.cu - stream capture into CUDA graphs, instantiate, launch, destroy. The policy (when to capture,
 * replay or evict) is host logic in cuda_graph_cache.c. */
#include "compute/cuda/cuda_kernels.cuh"

kiln_status kcu_capture_begin(kiln_cuda_backend *cb, kiln_err *err) {
    /* Thread-local mode: other host threads may still use the CUDA API (e.g. a server thread uploading). */
    KCU_CALL(err, cudaStreamBeginCapture(KCU_STREAM(cb), cudaStreamCaptureModeThreadLocal));
    cb->capturing = true;
    return KILN_OK;
}

kiln_status kcu_capture_end(kiln_cuda_backend *cb, void **exec, kiln_err *err) {
    *exec = NULL;
    cb->capturing = false;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(KCU_STREAM(cb), &g);
    if (e != cudaSuccess || !g) {
        cudaGetLastError();
        if (g) cudaGraphDestroy(g);
        return KILN_FAIL(err, KILN_E_DEVICE, "CUDA-graph capture failed: %s", cudaGetErrorString(e));
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return KILN_FAIL(err, KILN_E_DEVICE, "CUDA-graph instantiation failed: %s", cudaGetErrorString(e));
    }
    *exec = x;
    return KILN_OK;
}

kiln_status kcu_graph_launch(kiln_cuda_backend *cb, void *exec, kiln_err *err) {
    KCU_CALL(err, cudaGraphLaunch((cudaGraphExec_t)exec, KCU_STREAM(cb)));
    return KILN_OK;
}

void kcu_graph_destroy(void *ctx, void *exec) {
    if (exec) cudaGraphExecDestroy((cudaGraphExec_t)exec);
}
