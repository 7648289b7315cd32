// AdamW with fp32 state: the same code updates the whole model (baseline, DDP) or one rank's
// shard of it (ZeRO). It only ever sees a flat range of n elements.
//
// Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", Algorithm 2:
//   m ← β1·m + (1-β1)·g            v ← β2·v + (1-β2)·g²
//   m̂ = m / (1-β1^t)               v̂ = v / (1-β2^t)
//   p ← p - lr·( m̂ / (√v̂ + ε) + λ·p )
// State: m and v, 8 bytes per element (K = 8 for fp32 training; with fp32 master weights for
// 16-bit parameters K = 12, the figure of the ZeRO paper).
//
// Glossary: n elements updated, t step (1-based), λ weight decay.
#pragma once

#include <cstdint>

#include "common/tensor/tensor.h"

namespace llmp {

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  ///< λ, applied to every element (decoupled)
};

class AdamW {
 public:
  /// Allocates m and v (n floats each, zero) counted as optimizer state.
  AdamW(int64_t n, AdamWConfig cfg);

  /// One update of params[0..n) from grads[0..n) at step t ≥ 1. n defaults to size(); a smaller
  /// n updates only the valid part of a padded shard (ZeRO's last rank).
  void step(float* params, const float* grads, int64_t t, int64_t n = -1);

  int64_t size() const { return n_; }
  Tensor& exp_avg() { return m_; }     ///< m, n floats
  Tensor& exp_avg_sq() { return v_; }  ///< v, n floats
  const AdamWConfig& config() const { return cfg_; }
  void set_lr(float lr) { cfg_.lr = lr; }

 private:
  int64_t n_;
  AdamWConfig cfg_;
  Tensor m_, v_;
};

}  // namespace llmp
