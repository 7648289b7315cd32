// PipelineZero2Grads and its closed forms (see zero2_grads.h).
#include "stages/hybrid_3d/zero2_grads.h"

#include <algorithm>

#include "common/runtime/check.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

int64_t unit_numel_on_rank(const GPTLayout& layout, const GPTPartition& part, int rank, int u) {
  if (u == 0 && part.rank_of(0) != rank) return layout.find("wte.weight").numel;  // the copy
  return layout.unit_numel(u);
}

PipelineZero2Plan pipeline_zero2_plan(const GPTLayout& layout, const GPTPartition& part,
                                      int rank, int dp, int m, bool defer,
                                      double param_bytes) {
  PipelineZero2Plan out;
  out.psi_r = part.local_numel(rank);
  const bool holds_unit0 = part.unit_local_offset(rank, 0) >= 0;  // unit 0 or the wte copy
  out.unit0 = holds_unit0 ? unit_numel_on_rank(layout, part, rank, 0) : 0;
  out.deferred = defer ? out.unit0 : 0;
  // The units of the rank's chunks, each made final once per micro-batch (ready(u)).
  for (int c = 0; c < part.v(); ++c) {
    const int s = part.stage(rank, c).index;
    for (int u = part.unit_begin(s); u < part.unit_end(s); ++u) {
      if (u == 0 && defer) continue;
      ++out.units_per_microbatch;
      if (u != 0) out.largest_other = std::max(out.largest_other, layout.unit_numel(u));
    }
  }
  const double ring = double(dp - 1) / dp, g = 4.0;
  out.dp_bytes = ring * g * (double(m) * (out.psi_r - out.deferred) + out.deferred) +
                 ring * param_bytes * out.psi_r;
  out.dp_calls = m * out.units_per_microbatch + (out.deferred > 0 ? 1 : 0) + 1;
  // Unit 0's buffer is made by the head's forward (the rank holding the head) or by the first
  // micro-batch's embedding backward, after that micro-batch's block transients are freed: the
  // two coexist unless m = 1 on a first stage without the head.
  bool head = false;
  for (int c = 0; c < part.v(); ++c) head = head || part.stage(rank, c).last;
  const bool coexist = head || m > 1;
  const int64_t shard = (out.psi_r + dp - 1) / dp;
  out.grads_peak = g * double(shard + (coexist ? out.unit0 + out.largest_other
                                               : std::max(out.unit0, out.largest_other)));
  return out;
}

PipelineZero2Grads::PipelineZero2Grads(const GPTLayout& layout, const GPTPartition& part,
                                       int rank, ProcessGroup& dp, const ShardLayout& shards,
                                       Tensor& grad_shard, bool defer)
    : layout_(layout),
      part_(part),
      rank_(rank),
      dp_(dp),
      shards_(shards),
      grad_shard_(grad_shard),
      defer_(defer),
      unit_(layout.num_units()) {
  LLMP_CHECK(grad_shard.numel() == shards.padded,
             "gradient shard of " + std::to_string(grad_shard.numel()) + " elements, expected " +
                 std::to_string(shards.padded));
}

float* PipelineZero2Grads::get(int u) {
  if (!unit_[u].defined())
    unit_[u] = Tensor::zeros({unit_numel_on_rank(layout_, part_, rank_, u)}, DType::kF32,
                             MemCategory::kGradients, grad_shard_.device());  // beside the shard
  return unit_[u].f32();
}

void PipelineZero2Grads::ready(int u) {
  if (u == 0 && defer_) return;  // summed over the embedding pair first (flush_deferred)
  Tensor g = std::move(unit_[u]);  // freed at the end of this call
  reduce_scatter_add(part_.unit_local_offset(rank_, u), g);
}

void PipelineZero2Grads::flush_deferred() {
  if (!unit_[0].defined()) return;
  Tensor g = std::move(unit_[0]);
  reduce_scatter_add(part_.unit_local_offset(rank_, 0), g);
}

void PipelineZero2Grads::reduce_scatter_add(int64_t a, const Tensor& g) {
  const std::vector<int64_t> counts = shards_.split_range(a, a + g.numel());
  const int d = dp_.rank();
  // Where this rank's part of [a, a + n) lands inside its shard (nothing when it misses it).
  const int64_t at = counts[d] > 0 ? std::max(a, shards_.begin[d]) - shards_.begin[d] : 0;
  Tensor part = Tensor::empty({counts[d]}, DType::kF32, MemCategory::kCommBuffers,
                              grad_shard_.device());
  dp_.reduce_scatter_v(g, part, counts, ReduceOp::kSum);  // sends (dp-1)/dp·4·n
  // The accumulation over micro-batches, on the shard's device: shard[at..) += this micro-batch's
  // sum (f32 into f32: one float add per element, as a host loop would do it).
  if (counts[d] > 0)
    kernel_ops(grad_shard_.device())
        .accumulate_to(part.f32(), grad_shard_.f32() + at, DType::kF32, counts[d]);
}

}  // namespace llmp
