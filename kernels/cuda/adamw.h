// The AdamW update on the GPU: the device twin of AdamW::update and AdamW::step_mixed
// (common/optim/adamw.h/.cc), on fp32 state m, v (and the fp32 master copy under mixed precision).
//
// Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2:
//   m ← β1·m + (1-β1)·g            v ← β2·v + (1-β2)·g²
//   m̂ = m / (1-β1^t)               v̂ = v / (1-β2^t)
//   p ← p - lr·( m̂ / (√v̂ + ε) + λ_i·p )
// λ_i = λ inside the decay ranges, 0 outside. The bias corrections c = 1/(1-β^t) are computed
// once on the host per step (shared_math.h adamw_bias_correction, double pow as adamw.cc); the
// element update is shared_math.h adamw_element, checked against AdamW::step on the host.
// Mixed precision (Micikevicius et al. 2018 §3.1): g = widen(g16)·grad_scale, the update runs on
// the fp32 master, then p16 = round(master) (round to nearest even, shared_math.h).
//
// Launch shape: the span [i0, i0 + count) is split into runs of equal λ (launch.h
// adamw_segments, from the host-side decay ranges), one grid-stride launch per run: a GPT has
// two runs per block (matrices decayed, biases and LayerNorm not), so ~2L+3 launches a step.
// Glossary: n elements, i0 the span's first element in the flat buffer (it locates the decay
// ranges), t step (1-based). Device pointers (params, grads, m, v, master point at element i0).
#pragma once

#include <cstdint>
#include <vector>

#include "common/optim/adamw.h"
#include "common/tensor/tensor.h"

namespace llmp {
namespace cuda {

/// One AdamW step of params[0..count) (fp32) from grads[0..count), with m, v[0..count), all at
/// element i0 of their flat buffers; λ = cfg.weight_decay inside `decay`, 0 elsewhere. t ≥ 1.
void adamw_update(float* params, const float* grads, float* m, float* v, int64_t i0,
                  int64_t count, int64_t t, const AdamWConfig& cfg,
                  const std::vector<ElementRange>& decay);

/// Mixed precision: g = widen(grads16[i])·grad_scale (grads in grad_dtype: f32, f16 or bf16),
/// the update of master[i], then params16[i] = round(master[i]) in param_dtype (f16 or bf16, or
/// f32). Throws std::invalid_argument naming a dtype that is none of these.
void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16, DType grad_dtype,
                        float grad_scale, float* master, float* m, float* v, int64_t i0,
                        int64_t count, int64_t t, const AdamWConfig& cfg,
                        const std::vector<ElementRange>& decay);

}  // namespace cuda
}  // namespace llmp
