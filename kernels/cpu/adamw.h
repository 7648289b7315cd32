// The AdamW update of a contiguous span of elements, in runs of constant weight decay.
//
// Loshchilov & Hutter 2019, Algorithm 2, with the bias corrections given as factors:
//   m ← β1·m + (1-β1)·g      v ← β2·v + (1-β2)·g²
//   p ← p - lr·( m·c1 / (√(v·c2) + ε) + λ·p )      c1 = 1/(1-β1^t), c2 = 1/(1-β2^t)
// common/optim/adamw.h owns the optimizer (its state, the decay ranges, the step count). It hands
// a call's span to the kernels of the state's device (kernels/ops/kernel_ops.h) as one list of
// runs, each with its λ (decayed matrices, undecayed biases and LayerNorm parameters): a GPU
// updates the whole span in one launch (kernels/cuda/adamw.h), where a launch per run cost ~8 per
// layer. The CUDA twin is kernels/cuda.
//
// Glossary: n elements, p parameters, g gradients, m and v Adam's moments, λ weight decay.
#pragma once

#include <cstdint>
#include <vector>

namespace llmp {
namespace cpu {

/// One run of constant weight decay in a span: elements [previous run's end (0 for the first),
/// end), relative to the span's first element, updated with λ = weight_decay.
struct DecayRun {
  int64_t end = 0;
  float weight_decay = 0.0f;
};

/// One step's constants: learning rate, β1, β2, ε, the bias corrections c1, c2, and grad_scale,
/// what each gradient is multiplied by as it is read (g ← g·grad_scale before the update): the
/// loss scaler's 1/S under mixed precision times the clipping coefficient of --clip_grad
/// (common/optim/grad_clip.h), folded into the update instead of a pass over the gradients
/// (DeepSpeed's "combined scale"). 1: the gradients as they are (g·1 is g, bit for bit).
struct AdamWStep {
  float lr = 0.0f, beta1 = 0.0f, beta2 = 0.0f, eps = 0.0f, c1 = 1.0f, c2 = 1.0f;
  float grad_scale = 1.0f;
};

/// The elements a span of runs covers: the last run's end (0 for no runs). Throws
/// std::invalid_argument naming the run when the ends do not increase from above 0.
int64_t span_of(const std::vector<DecayRun>& runs);

/// p, m, v (n each) updated in place from g (n)·grad_scale. Element-wise, in fp32.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float c1, float c2,
                  float grad_scale = 1.0f);

/// The span [0, span_of(runs)) of p, g, m, v, run by run with each run's λ, the gradients
/// times s.grad_scale. Throws as span_of.
void adamw_update_runs(float* p, const float* g, float* m, float* v,
                       const std::vector<DecayRun>& runs, const AdamWStep& s);

}  // namespace cpu
}  // namespace llmp
