// The emulator's fiber switch (context_switch.h).
#include "kernels/cuda/emulator/context_switch.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
// llmp_emu_switch(save, next): push the callee-saved registers and an 8-byte slot holding MXCSR
// and the x87 control word, store rsp in *save, load next as rsp, restore the same from there
// and return into whatever switched away from it (or, the first time, into the fiber's entry).
asm(R"(
  .pushsection .text
  .globl llmp_emu_switch
  .hidden llmp_emu_switch
  .type llmp_emu_switch, @function
llmp_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size llmp_emu_switch, .-llmp_emu_switch
  .popsection
)");
extern "C" void llmp_emu_switch(void** save, void* next);
#endif

namespace llmp::cuda::emu {

#if defined(__x86_64__)
void make_context(Context& ctx, char* stack, size_t bytes, void (*entry)()) {
  // From the top (16-byte aligned) down: a return address entry never uses, entry itself (the
  // switch's ret jumps there with rsp ≡ 8 mod 16, as after a call), six zero registers, and
  // the default MXCSR (0x1F80) and x87 control word (0x037F).
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void*>(entry);
  for (int r = 0; r < 6; ++r) *--sp = nullptr;
  --sp;
  const uint32_t mxcsr = 0x1F80;
  const uint16_t fpucw = 0x037F;
  std::memcpy(reinterpret_cast<char*>(sp), &mxcsr, 4);
  std::memcpy(reinterpret_cast<char*>(sp) + 4, &fpucw, 2);
  ctx.sp = sp;
}

void switch_context(Context& from, Context& to) { llmp_emu_switch(&from.sp, to.sp); }
#else
void make_context(Context& ctx, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = stack;
  ctx.uc.uc_stack.ss_size = bytes;
  ctx.uc.uc_link = nullptr;
  makecontext(&ctx.uc, entry, 0);
}

void switch_context(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

}  // namespace llmp::cuda::emu
