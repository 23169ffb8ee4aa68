// The fiber context switch of the kernel emulation (x86-64 System V): saves
// the callee-saved registers, the SSE and x87 control words and the stack
// pointer of the running fiber, and resumes another from its saved stack
// (its control words loaded where they differ; rax and rcx are scratch).
// Invariant: a fiber's saved stack pointer addresses, from low to high, the
// control words, r15, r14, r13, r12, rbx, rbp and the address to resume at;
// fiber.cpp lays out a new fiber's stack the same way, resuming at
// llm_fiber_entry with r12 = its argument and r13 = its function.

        .text

// void llm_fiber_switch(void** save_stack_pointer, void* load_stack_pointer)
        .globl  llm_fiber_switch
        .type   llm_fiber_switch, @function
llm_fiber_switch:
        .cfi_startproc
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        subq    $8, %rsp
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movl    (%rsp), %eax
        movzwl  4(%rsp), %ecx
        movq    %rsp, (%rdi)
        movq    %rsi, %rsp
        // Loaded only where they differ from the running ones: ldmxcsr and
        // above all fldcw stall the pipeline (20% of an emulated training
        // step when loaded at every switch), and kernels never change them.
        cmpl    (%rsp), %eax
        je      1f
        ldmxcsr (%rsp)
1:      cmpw    4(%rsp), %cx
        je      2f
        fldcw   4(%rsp)
2:      addq    $8, %rsp
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        ret
        .cfi_endproc
        .size   llm_fiber_switch, .-llm_fiber_switch

// A new fiber's first instructions: calls r13(r12); the function never returns.
        .globl  llm_fiber_entry
        .type   llm_fiber_entry, @function
llm_fiber_entry:
        .cfi_startproc
        .cfi_undefined rip
        movq    %r12, %rdi
        callq   *%r13
        ud2
        .cfi_endproc
        .size   llm_fiber_entry, .-llm_fiber_entry

        .section .note.GNU-stack,"",@progbits
