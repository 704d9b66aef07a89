/* emu_fiber.h - cooperative fibers for the CUDA emulator: one per emulated GPU thread of the running block.
 *
 *     emu_fiber main_f = {0}, f;
 *     emu_fiber_init(&f, stack, stack_bytes, entry);   // entry() runs on f's stack at the first switch
 *     emu_fiber_switch(&main_f, &f);                   // runs f until it switches back
 *
 * x86-64: a hand-written switch of the callee-saved registers (tens of nanoseconds; glibc's swapcontext makes a
 * system call for the signal mask on every switch, which made a block of 256 threads with a few barriers cost
 * milliseconds). Elsewhere: ucontext. entry must never return: it switches away for the last time. */
#ifndef KILN_TESTS_CUDA_EMU_FIBER_H
#define KILN_TESTS_CUDA_EMU_FIBER_H

#include <stddef.h>

#if defined(__x86_64__)
typedef struct emu_fiber {
    void *sp;
    void *stack;
    size_t stack_bytes;
} emu_fiber;
#else
#include <ucontext.h>
typedef struct emu_fiber {
    ucontext_t uc;
    void *stack;
    size_t stack_bytes;
} emu_fiber;
#endif

#ifdef __cplusplus
extern "C" {
#endif
void emu_fiber_init(emu_fiber *f, void *stack, size_t stack_bytes, void (*entry)(void));
void emu_fiber_switch(emu_fiber *from, emu_fiber *to);
#ifdef __cplusplus
}
#endif

#endif
