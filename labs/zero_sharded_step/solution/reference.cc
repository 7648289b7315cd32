// Lab zero_sharded_step: the instructors' solution (spec: ../zero_sharded_step.h). Don't read it
// before trying the lab.
#include <algorithm>
#include <string>

#include "common/runtime/check.h"
#include "labs/zero_sharded_step/zero_sharded_step.h"

namespace llmp {

ZeroShard zero_shard(int64_t psi, int n, int r) {
  LLMP_CHECK(psi >= 1 && n >= 1 && r >= 0 && r < n,
             "zero_shard: psi " + std::to_string(psi) + ", n " + std::to_string(n) + ", r " +
                 std::to_string(r) + " (need psi >= 1, n >= 1, 0 <= r < n)");
  ZeroShard s;
  s.size = (psi + n - 1) / n;  // ⌈Ψ/N⌉
  s.padded = s.size * n;       // Ψp
  s.begin = r * s.size;
  s.count = std::min(s.size, std::max<int64_t>(0, psi - s.begin));
  return s;
}

void zero_step(ProcessGroup& dp, Tensor& params, const Tensor& grads, AdamW& opt, int64_t t) {
  const int64_t psi = params.numel();
  LLMP_CHECK(grads.numel() == psi, "zero_step: params hold " + std::to_string(psi) +
                                       " elements, grads " + std::to_string(grads.numel()));
  const ZeroShard s = zero_shard(psi, dp.size(), dp.rank());
  LLMP_CHECK(opt.size() == s.size, "zero_step: the optimizer updates " +
                                       std::to_string(opt.size()) + " elements, the shard has " +
                                       std::to_string(s.size));
  // 1. reduce_scatter: the mean gradient of this rank's shard. (N-1)/N·4Ψp bytes.
  Tensor padded = Tensor::zeros({s.padded}, DType::kF32, MemCategory::kCommBuffers);
  padded.narrow(0, psi).copy_from(grads);
  Tensor shard_grad = Tensor::empty({s.size}, DType::kF32, MemCategory::kGradients);
  dp.reduce_scatter(padded, shard_grad, ReduceOp::kAvg);
  // 2. AdamW on this rank's shard of the parameters: its valid elements only.
  opt.step(params.f32() + s.begin, shard_grad.f32(), t, s.count);
  // 3. all_gather: every updated shard to every rank, in place in a padded buffer (the padding
  //    is never read). (N-1)/N·4Ψp bytes.
  Tensor gathered = Tensor::zeros({s.padded}, DType::kF32, MemCategory::kCommBuffers);
  if (s.count > 0) gathered.narrow(s.begin, s.count).copy_from(params.narrow(s.begin, s.count));
  dp.all_gather(gathered.narrow(s.begin, s.size), gathered);
  params.copy_from(gathered.narrow(0, psi));
}

}  // namespace llmp
