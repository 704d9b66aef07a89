/* emu_fiber.c - see emu_fiber.h. Not for AddressSanitizer builds: it would need every switch announced
 * (CMake refuses KILN_CUDA_EMU with KILN_SANITIZE; the emulator's own guard pages check device memory). */
#include "emu_fiber.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)

/* kcu_emu_switch_(void **save_sp, void *load_sp): pushes rbp, rbx, r12-r15 (the callee-saved registers of the
 * System V ABI), stores rsp in *save_sp, loads load_sp, pops the same and returns on the other stack. The SSE and
 * x87 control words are left alone: nothing in a kernel changes them, and restoring them costs more than the
 * rest of the switch. */
__asm__(".text\n"
        ".globl kcu_emu_switch_\n"
        ".type kcu_emu_switch_,@function\n"
        "kcu_emu_switch_:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size kcu_emu_switch_, .-kcu_emu_switch_\n");
void kcu_emu_switch_(void **save_sp, void *load_sp);

void emu_fiber_init(emu_fiber *f, void *stack, size_t stack_bytes, void (*entry)(void)) {
    uintptr_t top = ((uintptr_t)stack + stack_bytes) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    *--sp = 0;                     /* entry's return address: it never returns */
    *--sp = (uint64_t)(uintptr_t)entry; /* popped by the first switch's ret; rsp is then 8 mod 16, as after a call */
    for (int i = 0; i < 6; i++) *--sp = 0; /* rbp rbx r12 r13 r14 r15 */
    f->sp = sp;
    f->stack = stack;
    f->stack_bytes = stack_bytes;
}

void emu_fiber_switch(emu_fiber *from, emu_fiber *to) {
    kcu_emu_switch_(&from->sp, to->sp);
}

#else

void emu_fiber_init(emu_fiber *f, void *stack, size_t stack_bytes, void (*entry)(void)) {
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = stack;
    f->uc.uc_stack.ss_size = stack_bytes;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, entry, 0);
    f->stack = stack;
    f->stack_bytes = stack_bytes;
}

void emu_fiber_switch(emu_fiber *from, emu_fiber *to) {
    swapcontext(&from->uc, &to->uc);
}

#endif
