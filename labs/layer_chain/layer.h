// The layer interface of the labs that run a chain of layers (activation_checkpointing,
// gpipe_step): a layer's forward returns its output and the cache its backward reads, and its
// backward turns dy into dx from that cache. The tests write the layers (tanh_layer.h); the labs'
// code only calls them, so it can count neither on what a layer computes nor on its size.
//
// Glossary: x a layer's input, y its output, dy = ∂loss/∂y, dx = ∂loss/∂x.
#pragma once

#include "common/tensor/tensor.h"

namespace llmp::lab {

/// What one layer's forward returns: its output and the cache its backward reads.
struct LayerForward {
  Tensor y;      ///< the output, x's shape: the next layer's input
  Tensor cache;  ///< what backward() needs, x's shape
};

/// One layer of a chain, written by the tests (they count its calls).
class Layer {
 public:
  virtual ~Layer() = default;
  /// y = f(x) and the cache: two new tensors of x's shape, MemCategory::kActivations.
  virtual LayerForward forward(const Tensor& x) = 0;
  /// dx from dy = ∂loss/∂y and the cache of this layer's forward on its input: a new tensor,
  /// kActivations. Adds this layer's parameter gradients to its own accumulators.
  virtual Tensor backward(const Tensor& cache, const Tensor& dy) = 0;
};

}  // namespace llmp::lab
