// Lab gpipe_step: your implementation. Read README.md first, then gpipe_step.h (the full spec);
// run the tests with
//     bazel test //labs/gpipe_step:student_test
// They fail until the function below is done. Add helpers here as you like; the tests only call
// gpipe_step().
//
// What you may use: ProcessGroup::send / recv (common/comm/process_group.h), Tensor::empty
// (common/tensor/tensor.h), the stage's forward and backward (labs/layer_chain/layer.h). What you
// may not: collectives (the tests count the calls and the bytes), or MPI directly.
//
// Glossary: p stages, r this stage, m micro-batches, n floats per activation, S = 4n bytes.
#include "labs/gpipe_step/gpipe_step.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace llmp::lab {

// TODO(lab gpipe_step): one GPipe step of this stage (spec: gpipe_step.h):
//   - check m, n and (on rank 0) the inputs, with the header's messages, before anything else;
//   - forward, i = 0 .. m−1: the input (rank 0: inputs[i]; else recv from r−1 into a new (n)
//     tensor), F i keeping its cache, the output sent to r+1 (the last rank: dy = loss_grad(i, y),
//     kept for the backward);
//   - backward, i = m−1 .. 0: dy (the last rank: the kept one; else recv from r+1), B i from its
//     cache, dx sent to r−1 (rank 0: returned, dx[i]).
std::vector<Tensor> gpipe_step(ProcessGroup& pp, Layer& stage, const std::vector<Tensor>& inputs,
                               int m, int64_t n, const LossGradFn& loss_grad) {
  (void)pp, (void)stage, (void)inputs, (void)m, (void)n, (void)loss_grad;  // TODO(lab gpipe_step)
  return {};
}

}  // namespace llmp::lab
