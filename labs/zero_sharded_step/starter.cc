// Lab zero_sharded_step: your implementation. Read README.md first, then zero_sharded_step.h
// (the full spec); run the tests with
//     bazel test //labs/zero_sharded_step:student_test
// They fail until zero_shard() and zero_step() below are done. Add helpers here (or in new files,
// listed in BUILD's `starter` target) as you like; the tests only call these two.
//
// What you may use: ProcessGroup's reduce_scatter and all_gather (common/comm/process_group.h;
// ReduceOp::kAvg divides the sum by N), Tensor::empty / zeros / narrow / copy_from
// (common/tensor/tensor.h), AdamW::step (common/optim/adamw.h), LLMP_CHECK
// (common/runtime/check.h). What you may not: all_reduce, or any other communication (the tests
// count the calls and the bytes), or MPI directly.
//
// Glossary: Ψ parameters, N ranks, r this rank, Ψp padded size, k shard size, t step.
#include "common/runtime/check.h"
#include "labs/zero_sharded_step/zero_sharded_step.h"

namespace llmp {

// TODO(lab zero_sharded_step): the shard of rank r of n (spec: zero_sharded_step.h):
//   padded = n·⌈psi/n⌉, size = padded/n, begin = r·size, count = the shard's elements below psi
//   (0 for a shard of padding only). Check psi ≥ 1, n ≥ 1 and 0 ≤ r < n with LLMP_CHECK.
ZeroShard zero_shard(int64_t psi, int n, int r) {
  (void)n, (void)r;  // TODO(lab zero_sharded_step): remove, implement above.
  // Until then: one shard holding everything, which is right only on one rank.
  return {psi, psi, 0, psi};
}

// TODO(lab zero_sharded_step): one ZeRO-2 step (spec: zero_sharded_step.h). In short:
//   - s = zero_shard(Ψ, N, r);
//   - a padded gradient buffer (Ψp floats, MemCategory::kCommBuffers): this rank's grads, then
//     zeros; reduce_scatter it with ReduceOp::kAvg into a shard gradient of s.size floats;
//   - opt.step(params + s.begin, shard gradient, t, s.count): only the valid elements;
//   - a padded parameter buffer (Ψp floats) whose chunk r holds this rank's updated shard:
//     all_gather chunk r into it (in place is allowed: input = buffer.narrow(r·k, k)), then copy
//     its first Ψ elements into params.
void zero_step(ProcessGroup& dp, Tensor& params, const Tensor& grads, AdamW& opt, int64_t t) {
  (void)dp, (void)params, (void)grads, (void)opt, (void)t;  // TODO(lab zero_sharded_step)
  // Until then: no step at all, so the parameters the tests compare have not moved.
}

}  // namespace llmp
