// Lab gpipe_step, reference solution (for instructors; students start from ../starter.cc).
//
// Two loops: the forwards of micro-batches 0 .. m−1, each input from the stage before (or the
// caller), each output to the stage after (or the loss), keeping each cache; then the backwards
// of m−1 .. 0, each dy from the stage after (or the loss), each dx to the stage before (or the
// caller). Blocking send and recv are enough: the chain of stages has no cycle.
//
// Glossary: p stages, r this stage, m micro-batches, n floats per activation.
#include "labs/gpipe_step/gpipe_step.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace llmp::lab {

std::vector<Tensor> gpipe_step(ProcessGroup& pp, Layer& stage, const std::vector<Tensor>& inputs,
                               int m, int64_t n, const LossGradFn& loss_grad) {
  const auto bad = [](const std::string& w) { return std::invalid_argument("gpipe_step: " + w); };
  if (m < 1) throw bad("m = " + std::to_string(m) + " (want m >= 1)");
  if (n < 1) throw bad("n = " + std::to_string(n) + " (want n >= 1)");
  const int p = pp.size(), r = pp.rank();
  const bool first = r == 0, last = r == p - 1;
  if (first) {
    if (static_cast<int>(inputs.size()) != m)
      throw bad(std::to_string(inputs.size()) + " inputs, m = " + std::to_string(m));
    for (int i = 0; i < m; ++i)
      if (inputs[i].numel() != n)
        throw bad("inputs[" + std::to_string(i) + "] has " + std::to_string(inputs[i].numel()) +
                  " elements, want n = " + std::to_string(n));
  }
  std::vector<Tensor> caches(m), dys(m);  // dys: the last stage's loss gradients
  for (int i = 0; i < m; ++i) {           // forward: micro-batches flow down
    Tensor x = first ? inputs[i] : Tensor::empty({n}, DType::kF32, MemCategory::kActivations);
    if (!first) pp.recv(x, r - 1);
    LayerForward f = stage.forward(x);
    caches[i] = f.cache;
    if (last) dys[i] = loss_grad(i, f.y);
    else pp.send(f.y, r + 1);
  }
  std::vector<Tensor> dx(first ? m : 0);
  for (int i = m - 1; i >= 0; --i) {  // backward: gradients flow up, last micro-batch first
    Tensor dy = last ? dys[i] : Tensor::empty({n}, DType::kF32, MemCategory::kActivations);
    if (!last) pp.recv(dy, r + 1);
    Tensor g = stage.backward(caches[i], dy);
    caches[i] = Tensor(), dys[i] = Tensor();
    if (first) dx[i] = g;
    else pp.send(g, r - 1);
  }
  return dx;
}

}  // namespace llmp::lab
