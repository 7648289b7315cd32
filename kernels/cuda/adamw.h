// The AdamW update on the GPU: the device twin of kernels/cpu/adamw.h (and of the CPU table's
// adamw_update_mixed, kernels/ops/cpu_kernel_ops.cc), on fp32 state m, v (and the fp32 master copy
// under mixed precision), over a span of elements in runs of constant weight decay.
//
// Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2:
//   m ← β1·m + (1-β1)·g            v ← β2·v + (1-β2)·g²
//   p ← p - lr·( m·c1 / (√(v·c2) + ε) + λ·p )      c1 = 1/(1-β1^t), c2 = 1/(1-β2^t)
// The element update is shared_math.h adamw_element (checked against AdamW::step on the host,
// shared_math_test). Mixed precision (Micikevicius et al. 2018 §3.1): g = widen(g16)·grad_scale,
// the update runs on the fp32 master, then p16 = round(master) (round to nearest even,
// shared_math.h), in one pass.
//
// One launch for the span: a GPT's λ changes ~8 times per layer (decayed matrices; undecayed
// biases and LayerNorm parameters), and a launch per run was ~8L + 2 launches a step (98 for
// GPT-2 small), most of them a few hundred elements (a bias: 3 blocks on a GPU of 132
// multiprocessors). The runs' ends and λs travel in the kernel's parameters, kMaxRunsPerLaunch
// at a time (within CUDA's 4 KiB of parameters): one launch up to 256 runs (L ≤ 31), one more per
// 256 beyond. A grid-stride loop over the span; each thread finds its first element's run by
// binary search over the ends and follows the later ones forward (shared_math.h run_containing),
// since its elements only increase. The technique is apex's multi_tensor_apply and PyTorch's
// fused (foreach) Adam, on a buffer that is already flat.
//
// Glossary: λ weight decay, t step (1-based). Every pointer is device memory.
#pragma once

#include <cstdint>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/adamw.h"

namespace llmp {
namespace cuda {

/// The most runs one launch takes (their ends and λs are kernel parameters).
constexpr int kMaxRunsPerLaunch = 256;

/// p, m, v (span_of(runs) each, fp32) updated in place from g, each run with its λ, with the
/// step's constants (the gradients times s.grad_scale). The twin of cpu::adamw_update_runs.
/// Throws std::invalid_argument for runs whose ends do not increase (cpu::span_of).
void adamw_update(float* p, const float* g, float* m, float* v,
                  const std::vector<cpu::DecayRun>& runs, const cpu::AdamWStep& s);

/// Mixed precision: g = widen(grads16[i])·s.grad_scale (grads in grad_dtype: f32, f16 or bf16),
/// the update of master[i] with m[i], v[i], then params16[i] = round(master[i]) in param_dtype
/// (f32, f16 or bf16). Throws std::invalid_argument naming a dtype that is none of these, or as
/// adamw_update for the runs.
void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16, DType grad_dtype,
                        float* master, float* m, float* v, const std::vector<cpu::DecayRun>& runs,
                        const cpu::AdamWStep& s);

}  // namespace cuda
}  // namespace llmp
