/* emu_internal.h - what the emulator's runtime (emu_runtime.cc) and cuBLASLt (emu_cublaslt.cc) share: device
 * memory lookups, the device-work section, and stream enqueueing (run now, or record into a captured graph). */
#ifndef KILN_TESTS_CUDA_EMU_INTERNAL_H
#define KILN_TESTS_CUDA_EMU_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>

namespace kcu_emu {

/* Prints "kiln CUDA emulator: <message>" with the running kernel, block and thread if any, and aborts: the
 * emulator's verdict on what would fault, hang or corrupt on a GPU. */
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The device allocation holding [p, p + bytes), or false. */
bool device_range(const void *p, size_t bytes, uintptr_t *base = nullptr, size_t *size = nullptr);

/* Device work (a kernel, a copy, a GEMM) runs inside this section: device memory is readable and writable only
 * here, and only one host thread at a time runs device work (the one GPU). Nests. */
struct device_section {
    device_section();
    ~device_section();
};

/* Runs op on stream now, or appends it to the graph the stream is capturing. what names it in errors. */
cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> op);
/* The emulated devices' compute capability (KCU_EMU_CC, e.g. 90). */
long long device_cc();
/* The error of the last runtime call on this host thread (cudaGetLastError clears it). */
cudaError_t set_error(cudaError_t e);

} /* namespace kcu_emu */

#endif
