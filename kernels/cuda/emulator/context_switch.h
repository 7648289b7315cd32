// Switching between the emulator's fibers (block_runner.cc): one stack per CUDA thread, and a
// switch that saves the running one's registers and resumes another's. On x86-64 the switch is
// ten instructions of assembly (the callee-saved registers, the stack pointer, MXCSR and the x87
// control word: what the System V ABI says a call preserves); elsewhere it is ucontext's
// swapcontext, which also saves the signal mask with two system calls per switch (about 40×
// slower: a launch of 300,000 threads that meet at two barriers took 1 s instead of 25 ms).
#pragma once

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace llmp::cuda::emu {

/// A suspended execution: where switch_context resumes it.
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;  ///< its stack pointer, the saved registers on top
#else
  ucontext_t uc;
#endif
};

/// Prepares ctx so that the first switch_context to it runs entry() on [stack, stack + bytes).
/// entry must never return (it ends by switching away for good).
void make_context(Context& ctx, char* stack, size_t bytes, void (*entry)());

/// Saves the running execution into `from` and resumes `to`; returns when something switches
/// back to `from`.
void switch_context(Context& from, Context& to);

}  // namespace llmp::cuda::emu
