// AdamW with fp32 state: the same code updates the whole model (baseline, DDP) or one rank's
// shard of it (ZeRO). It only ever sees a flat range of n elements.
//
// Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2:
//   m ← β1·m + (1-β1)·g            v ← β2·v + (1-β2)·g²
//   m̂ = m / (1-β1^t)               v̂ = v / (1-β2^t)
//   p ← p - lr·( m̂ / (√v̂ + ε) + λ_i·p )
// λ_i = λ for the elements inside the decay ranges, 0 elsewhere. GPT-2 practice (nanoGPT's
// configure_optimizers, minGPT): decay every tensor with 2 or more dimensions (the weight
// matrices and the embeddings wte, wpe), not biases and LayerNorm parameters (DecayRule::kMatrices;
// the ranges of a GPT come from common/optim/decay_mask.h). DecayRule::kAll (--decay_all) decays
// every element, the behaviour before.
// State: m and v, 8 bytes per element (K = 8 for fp32 training); with 16-bit parameters AdamW
// also keeps the fp32 master weights and updates those (step_mixed): K = 12, the ZeRO paper's
// figure for mixed-precision Adam (§3.1).
//
// Glossary: n elements updated, t step (1-based), λ weight decay.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/adamw.h"

namespace llmp {

/// Which tensors weight decay applies to.
enum class DecayRule {
  kMatrices,  ///< tensors with ≥ 2 dimensions (nanoGPT): weights and embeddings, no biases/LN
  kAll,       ///< every element (--decay_all)
};

/// "dim>=2" or "all": the name a checkpoint's metadata records.
const char* decay_rule_name(DecayRule r);

/// Elements [begin, end) of the flat buffer AdamW updates.
struct ElementRange {
  int64_t begin = 0, end = 0;
  bool operator==(const ElementRange& o) const { return begin == o.begin && end == o.end; }
};

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  ///< λ, applied (decoupled) to the elements of the decay ranges
  DecayRule decay = DecayRule::kMatrices;  ///< how a stage builds the ranges (decay_mask.h)
  /// c of global gradient-norm clipping (--clip_grad; Megatron-Core's OptimizerConfig.clip_grad):
  /// g ← g·min(1, c/(‖g‖ + 1e-6)) with ‖g‖ the whole model's norm; 0 = off. AdamW never sees the
  /// whole gradient, so the stage computes ‖g‖ over its ranks and hands the coefficient to
  /// step()/step_mixed() as their grad_scale (common/optim/grad_clip.h).
  double clip_grad = 0.0;
};

class AdamW {
 public:
  /// Allocates m and v (n floats each, zero) counted as optimizer state. `decay`: the elements
  /// λ applies to, sorted, disjoint, inside [0, n); the others are updated with λ = 0. Throws
  /// std::invalid_argument naming the range when the ranges are unsorted, overlap or leave [0, n).
  /// There is no default: a stage states which of its elements are decayed ({{0, n}}: all).
  /// `param_dtype`: the dtype of the parameters it updates. f32 (the default): step() updates
  /// them in place. f16 or bf16 (mixed precision, Micikevicius et al. 2018 §3.1): AdamW also owns
  /// an fp32 MASTER copy of them (n floats, optimizer state: K = 12 bytes per parameter with m
  /// and v), set by master() before the first step, and step_mixed() updates the master copy and
  /// rounds it into the 16-bit parameters. Throws std::invalid_argument for another dtype.
  /// `device`: where m, v (and the parameters and gradients step() is given) live; the update
  /// runs through that device's kernels (kernels/ops/kernel_ops.h), one call per step for the
  /// whole span, in runs of constant λ (cpu::DecayRun). Mixed precision too: the master copy is
  /// on `device`, and step_mixed's parameters and gradients must be there
  /// (KernelOps::adamw_update_mixed).
  AdamW(int64_t n, AdamWConfig cfg, std::vector<ElementRange> decay,
        DType param_dtype = DType::kF32, Device device = Device::kCPU);

  /// One update of params[0..n) from grads[0..n)·grad_scale at step t ≥ 1. n defaults to size();
  /// a smaller n updates only the valid part of a padded shard (ZeRO's last rank). grad_scale:
  /// the clipping coefficient of --clip_grad (grad_clip.h), multiplied in as each gradient is
  /// read (1: none, bit for bit the unscaled update).
  void step(float* params, const float* grads, int64_t t, int64_t n = -1,
            float grad_scale = 1.0f);

  /// Mixed precision: one update of the master copy from the 16-bit (or f32) gradients times
  /// `grad_scale` (1/S: the loss scaler's unscaling, exact for S a power of two; times the
  /// clipping coefficient under --clip_grad), then
  /// params16[i] = round(master[i]). params16 and grads16: ≥ n elements, params16 in the
  /// constructor's param_dtype. Throws std::logic_error without master weights.
  void step_mixed(const Tensor& params16, const Tensor& grads16, float grad_scale, int64_t t,
                  int64_t n = -1);

  int64_t size() const { return n_; }
  Tensor& exp_avg() { return m_; }     ///< m, n floats
  Tensor& exp_avg_sq() { return v_; }  ///< v, n floats
  /// The fp32 master weights (n floats; undefined for fp32 parameters).
  Tensor& master() { return master_; }
  bool has_master_weights() const { return master_.defined(); }
  const AdamWConfig& config() const { return cfg_; }
  const std::vector<ElementRange>& decay_ranges() const { return decay_; }
  void set_lr(float lr) { cfg_.lr = lr; }

 private:
  int64_t n_;
  AdamWConfig cfg_;
  /// The update of elements [i0, i0 + count) of the buffer: p and g point at element i0.
  void update(float* p, const float* g, int64_t i0, int64_t count, int64_t t, float grad_scale);
  /// fn(e, stop, λ) for each run [e, stop) of constant λ inside [i0, i0 + count).
  template <typename Fn>
  void for_each_decay_run(int64_t i0, int64_t count, Fn&& fn) const;
  /// Those runs as the kernels take them: ends relative to i0.
  std::vector<cpu::DecayRun> decay_runs(int64_t i0, int64_t count) const;
  /// Step t's constants: the config's lr, betas and ε, the bias corrections, and grad_scale.
  cpu::AdamWStep step_constants(int64_t t, float grad_scale) const;

  std::vector<ElementRange> decay_;
  Tensor m_, v_;
  Tensor master_;  // mixed precision only
  Device device_ = Device::kCPU;
  DType master_dtype_ = DType::kF32;  // the 16-bit parameters' dtype
};

}  // namespace llmp
