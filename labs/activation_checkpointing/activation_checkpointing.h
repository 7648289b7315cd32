// Lab activation_checkpointing: the adapter header. The tests call checkpointed_forward_backward()
// with layers of their own (the Layer interface below) and nothing else, so you may organise your
// code as you like behind it.
//
// The layers are the tests' (labs/layer_chain/layer.h: forward gives an output and a cache,
// backward reads the cache). A backward needs, for every layer, what its forward computed (its cache: here one tensor per
// layer, e.g. the tanh of its input). Kept for all L layers that is L caches, the activation
// memory that grows with depth. Checkpointing (Chen, Xu, Zhang & Guestrin 2016, "Training Deep
// Nets with Sublinear Memory Cost", §3-4; PyTorch's checkpoint_sequential) keeps instead only the
// input of each segment of k layers (its checkpoint), drops the caches in the forward, and in the
// backward runs each segment's forward again from its checkpoint, right before the segment's
// backward: ⌈L/k⌉ checkpoints and one segment's k caches live at a time, O(√L) at k = √L, for one
// extra forward of most layers.
//
// Glossary: L = layers.size(), k the segment length, m = ⌈L/k⌉ segments, segment s = layers
// [s·k, min((s+1)·k, L)), S the bytes of one activation (every layer maps a tensor to one of the
// same shape), F i / B i the forward / backward of layer i.
#pragma once

#include <functional>
#include <vector>

#include "common/tensor/tensor.h"
#include "labs/layer_chain/layer.h"  // Layer, LayerForward: what the tests' layers implement

namespace llmp::lab {

/// The forward and the backward of the chain layers[0] → ... → layers[L−1] on x, with
/// checkpoints every k layers. Returns dx = ∂loss/∂x; the layers accumulate their parameter
/// gradients. loss_grad(y) gives dy = ∂loss/∂y of the chain's output y (a new tensor).
///
/// The calls, exactly, in this order (the tests compare the sequence):
///   forward    F 0, F 1, ..., F L−1, in which the caches of every segment but the last are
///              dropped at once; of each such segment only its first layer's input (the
///              checkpoint) is kept. The last segment keeps its caches: its backward comes next.
///   loss       dy = loss_grad(y of F L−1)
///   backward   B of the last segment's layers, last first; then for each earlier segment s, from
///              m−2 down to 0: F of its layers again from its checkpoint (keeping their caches),
///              then B of its layers, last first.
/// So F runs L + (m−1)·k times and B L times; k ≥ L is plain backpropagation (one segment, no
/// recomputation), k = 1 keeps every layer's input and recomputes every layer but the last.
/// The results are bit for bit those of plain backpropagation: the same calls on the same inputs.
///
/// Memory: the bytes of kActivations tensors alive at once, over the call (the tests read
/// MemoryTracker's peak), at most S·(m + k + 2): the m − 1 checkpoints after x, one segment's k
/// caches, and the few tensors in flight (an output, dy, dx). Keeping every cache is S·(L + 3).
///
/// Errors: no layers, or k < 1, throw std::invalid_argument naming the value, before any call:
///   "checkpointed_forward_backward: no layers"
///   "checkpointed_forward_backward: k = 0 (want k >= 1)"
Tensor checkpointed_forward_backward(const std::vector<Layer*>& layers, const Tensor& x, int k,
                                     const std::function<Tensor(const Tensor& y)>& loss_grad);

}  // namespace llmp::lab
