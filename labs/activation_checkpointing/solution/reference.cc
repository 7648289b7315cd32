// Lab activation_checkpointing, reference solution (for instructors; students start from
// ../starter.cc).
//
// The forward walks the layers once, keeping each segment's input and, for the last segment
// only, the caches. The backward of a segment is the same loop for every segment: its caches
// (kept, or made again by a forward from its checkpoint), then its backwards, last first, each
// cache released as soon as its backward has read it. Tensors are handles: a cache or an input
// is freed when the last handle to it goes (assigning a new Tensor, or leaving scope).
//
// Glossary: L layers, k segment length, m segments, s a segment, [b, e) its layers.
#include "labs/activation_checkpointing/activation_checkpointing.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmp::lab {
namespace {

// F b .. F e−1 from the input x_b, keeping their caches; returns the last output.
Tensor forward_keeping(const std::vector<Layer*>& layers, int b, int e, Tensor x,
                       std::vector<Tensor>& caches) {
  for (int i = b; i < e; ++i) {
    LayerForward f = layers[i]->forward(x);
    caches[i] = std::move(f.cache);
    x = std::move(f.y);  // x_i is no longer needed: its layer's cache holds what B i reads
  }
  return x;
}

}  // namespace

Tensor checkpointed_forward_backward(const std::vector<Layer*>& layers, const Tensor& x, int k,
                                     const std::function<Tensor(const Tensor& y)>& loss_grad) {
  const char* kName = "checkpointed_forward_backward: ";
  if (layers.empty()) throw std::invalid_argument(std::string(kName) + "no layers");
  if (k < 1)
    throw std::invalid_argument(kName + ("k = " + std::to_string(k) + " (want k >= 1)"));
  const int L = static_cast<int>(layers.size());
  const int m = (L + k - 1) / k;
  const int last = (m - 1) * k;  // the last segment's first layer
  std::vector<Tensor> checkpoints(m), caches(L);

  // Forward: the checkpoints of segments 0 .. m−2, dropping their caches; the last segment
  // keeps its caches.
  Tensor h = x;
  for (int s = 0; s < m - 1; ++s) {
    checkpoints[s] = h;
    for (int i = s * k; i < (s + 1) * k; ++i) h = layers[i]->forward(h).y;  // cache dropped
  }
  h = forward_keeping(layers, last, L, h, caches);
  Tensor dy = loss_grad(h);
  h = Tensor();  // the output: loss_grad has read it

  // Backward, last segment first; each earlier one recomputed from its checkpoint.
  for (int s = m - 1; s >= 0; --s) {
    const int b = s * k, e = std::min(b + k, L);
    if (s < m - 1) {
      forward_keeping(layers, b, e, checkpoints[s], caches);  // its output is not needed
      checkpoints[s] = Tensor();
    }
    for (int i = e - 1; i >= b; --i) {
      dy = layers[i]->backward(caches[i], dy);
      caches[i] = Tensor();
    }
  }
  return dy;
}

}  // namespace llmp::lab
