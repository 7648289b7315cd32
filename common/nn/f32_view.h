// fp32 views of activations for the kernels: how the model computes in fp32 on 16-bit storage.
//
// Under mixed precision (common/tensor/precision.h) every activation a layer keeps is stored in
// 16 bits, and every kernel computes in fp32: it widens its 16-bit inputs, computes, and rounds
// its output once (what a GPU's tensor cores do tile by tile in registers: 16-bit operands, fp32
// accumulation, a rounded result; Micikevicius et al. 2018, §3). The kernels (kernels/cpu) take
// float pointers, so a layer hands them
//
//   F32In  in(x);       const float*: x's own floats when x is f32, else a widened fp32 copy
//   F32Out out(y);      float*: y's own floats when y is f32, else an fp32 scratch rounded into y
//                       by store() (or the destructor); F32Out(y, /*load=*/true) widens y first,
//                       for kernels that accumulate into or update their output in place
//
// For f32 tensors both are the plain pointer, so fp32 training runs exactly the code it ran
// before. The scratch lives on the tensor's device and is widened and rounded by that device's
// kernels (kernels/ops/kernel_ops.h). The fp32 copies are temporaries, counted under
// MemCategory::kOther (a CPU's "conversion scratch", where a GPU uses registers) and freed with
// the view; the activations the model keeps are the 16-bit tensors.
//
// The exceptions (the views remain for the head and the embeddings): attention (P, qkv, out, dY,
// dqkv), the LayerNorm, GELU and residual forwards, the inputs of their backwards, the
// LayerNorm and GELU backwards' dx and the linear layers' x, y, dy, dx take activations as
// stored (as_stored(t), kernel_ops.h Act), so a GPU's kernels (and cuBLAS) read and write the 16
// bits themselves; the CPU's table makes the same fp32 copies there (Fp32Copy).
//
// Glossary: "16-bit" is f16 or bf16.
#pragma once

#include "common/tensor/tensor.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

/// A kernel's fp32 input (see above): kernel_ops.h's Fp32Copy of t, read only. Keep it alive while
/// the kernel runs. A widened copy is noted as t's exact widening while it lives (Fp32Copy does
/// it: KernelOps::note_source), so that a GPU's 16-bit product reads t's own 16-bit values
/// instead of rounding the copy back.
class F32In {
 public:
  explicit F32In(const Tensor& t)
      : source_(t), copy_(ActIn(t.raw(), t.dtype()), t.numel(), t.device()) {}
  F32In(const F32In&) = delete;
  F32In& operator=(const F32In&) = delete;
  operator const float*() const { return copy_.get(); }  // NOLINT: reads as the pointer it stands for
  const float* get() const { return copy_.get(); }

 private:
  Tensor source_;  // alive while its note is (declared first: released after the copy)
  Fp32Copy copy_;
};

/// A kernel's fp32 output into `t` (see above): kernel_ops.h's Fp32Copy of t, rounded into t by
/// store() (which frees the copy) or the destructor.
class F32Out {
 public:
  explicit F32Out(const Tensor& t, bool load = false)
      : t_(t), copy_(as_stored(t), t.numel(), t.device(), load) {}
  F32Out(const F32Out&) = delete;
  F32Out& operator=(const F32Out&) = delete;
  operator float*() const { return copy_.get(); }  // NOLINT
  float* get() const { return copy_.get(); }
  /// Rounds the fp32 result into the 16-bit tensor (once; later calls do nothing).
  void store() { copy_.store(); }

 private:
  Tensor t_;  // the destination, alive until the copy is rounded into it
  Fp32Copy copy_;
};

}  // namespace llmp
