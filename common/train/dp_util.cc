// dp_util (see dp_util.h): shard layout, the metrics sum over a duplicate group, report rows of
// measured memory, and the state copies of the data-parallel stages.
//
// Glossary: Ψ parameter count, N ranks, S = ⌈Ψ/N⌉ shard size.
#include "common/train/dp_util.h"

#include "kernels/cpu/convert.h"

#include <algorithm>
#include <cstring>

#include "common/nn/unit_runner.h"
#include "common/tensor/memory.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

ShardLayout::ShardLayout(int64_t psi_, int ranks) : psi(psi_), padded(shard_size(psi_, ranks)) {
  for (int i = 0; i < ranks; ++i) {
    const int64_t b = std::min<int64_t>(i * padded, psi);
    begin.push_back(b);
    count.push_back(std::min<int64_t>(padded, psi - b));
  }
}

std::vector<int64_t> ShardLayout::split_range(int64_t a, int64_t b) const {
  std::vector<int64_t> counts(begin.size());
  for (size_t i = 0; i < begin.size(); ++i) {
    const int64_t lo = std::max(a, begin[i]), hi = std::min(b, begin[i] + count[i]);
    counts[i] = std::max<int64_t>(0, hi - lo);
  }
  return counts;
}

MetricsReducer::MetricsReducer(ProcessGroup& group) : book_(group.duplicate()) {}

double MetricsReducer::sum(double local) {
  Tensor t = Tensor::empty({1}, DType::kF64);
  t.f64()[0] = local;
  book_->all_reduce(t, ReduceOp::kSum);  // bookkeeping: counted in book_'s stats, never read
  return t.f64()[0];
}

std::vector<ReportRow> memory_rows(const MemoryPlan& plan, const char* params_text,
                                   const char* grads_text, const char* optimizer_text) {
  const auto& mt = MemoryTracker::instance();
  return {
      {"parameters", static_cast<double>(mt.current(MemCategory::kParameters)), plan.params,
       params_text},
      {"gradients", static_cast<double>(mt.current(MemCategory::kGradients)), plan.grads,
       grads_text},
      {"optimizer state", static_cast<double>(mt.current(MemCategory::kOptimizerState)),
       plan.optimizer, optimizer_text},
  };
}

double dp_eval_loss(const GPT& model, const Tensor& params, const int32_t* tokens,
                    const int32_t* targets, int global_batch, int T, const ProcessGroup& dp,
                    MetricsReducer& metrics) {
  const int B = global_batch / dp.size();  // this rank's sequences
  FlatParams flat(model.layout(), params);
  const double local_mean = UnitRunner(model, flat).forward_loss(tokens, targets, B, T);
  return metrics.sum(local_mean) / dp.size();  // equal slices: the mean of the means
}

void to_host(float* dst, const Tensor& src) {
  allocator_for(src.device()).copy(dst, Device::kCPU, src.raw(), src.device(), src.nbytes());
}

void from_host(const Tensor& dst, const float* src) {
  allocator_for(dst.device()).copy(dst.raw(), dst.device(), src, Device::kCPU, dst.nbytes());
}

void round_from_host(const Tensor& dst, const float* src) {
  if (dst.device() == Device::kCPU) {
    cpu::round_to(src, dst.raw(), dst.dtype(), dst.numel());
    return;
  }
  // Rounded on the host, then one copy of the 16-bit values up: 2 bytes per element cross, not 4.
  Tensor rounded = Tensor::empty({dst.numel()}, dst.dtype(), MemCategory::kOther);
  cpu::round_to(src, rounded.raw(), rounded.dtype(), rounded.numel());
  Tensor(dst).copy_from(rounded);  // a handle to the same storage
}

const Tensor& full_precision_params(const Tensor& params, AdamW& opt) {
  return opt.has_master_weights() ? opt.master() : params;
}

void params_from_host(const Tensor& params, AdamW& opt, const float* src) {
  if (opt.has_master_weights()) {  // the master copy, and the 16-bit working copy rounded from it
    from_host(opt.master(), src);
    round_from_host(params, src);
  } else {
    from_host(params, src);
  }
}

void copy_replicated_state_out(const Tensor& params, AdamW& opt, float* params_out, float* m_out,
                               float* v_out) {
  // Mixed precision: the full-precision state is the fp32 master copy, not the 16-bit one.
  to_host(params_out, full_precision_params(params, opt));  // from the state's device
  to_host(m_out, opt.exp_avg());
  to_host(v_out, opt.exp_avg_sq());
}

void copy_replicated_state_in(Tensor& params, AdamW& opt, const float* params_in,
                              const float* m_in, const float* v_in) {
  params_from_host(params, opt, params_in);
  from_host(opt.exp_avg(), m_in);
  from_host(opt.exp_avg_sq(), v_in);
}

void gather_shards_out(ProcessGroup& dp, const ShardLayout& shards,
                       std::initializer_list<std::pair<const Tensor*, float*>> states) {
  const int64_t psi = shards.psi, count = shards.count[dp.rank()];
  Tensor full;  // on each shard's device (the gather then runs where it is; ZeRO-Offload's
                // parameters are on the GPU, its m and v on the host)
  for (const auto& [shard, out] : states) {
    if (!full.defined() || full.device() != shard->device())
      full = Tensor::empty({psi}, DType::kF32, MemCategory::kCommBuffers, shard->device());
    dp.all_gather_v(shard->narrow(0, count), full, shards.count);
    to_host(out, full);
  }
}

void copy_shard_in(const ShardLayout& shards, int rank, const float* full, Tensor& shard) {
  from_host(shard.narrow(0, shards.count[rank]), full + shards.begin[rank]);
}

void copy_shard_in(const ShardLayout& shards, int rank, const Tensor& full, Tensor& shard) {
  const int64_t count = shards.count[rank];
  shard.narrow(0, count).copy_from(full.narrow(shards.begin[rank], count));
}

void reduce_scatter_into_shard(ProcessGroup& dp, const ShardLayout& shards, int64_t a,
                               const Tensor& g, Tensor& grad_shard) {
  const int64_t b = a + g.numel();
  const std::vector<int64_t> counts = shards.split_range(a, b);
  const int r = dp.rank();
  // Where this rank's part of [a, b) lands inside its shard (nothing when the range misses it).
  const int64_t at = counts[r] > 0 ? std::max(a, shards.begin[r]) - shards.begin[r] : 0;
  Tensor out = grad_shard.narrow(at, counts[r]);
  dp.reduce_scatter_v(g, out, counts, ReduceOp::kSum);  // sends (N-1)/N · bytes(g)
}

ReduceScatterGrads::ReduceScatterGrads(const GPTLayout& layout, ProcessGroup& dp,
                                       const ShardLayout& shards, Tensor& grad_shard,
                                       cpu::RoundStats* stats)
    : layout_(layout), dp_(dp), shards_(shards), grad_shard_(grad_shard), stats_(stats),
      unit_(layout.num_units()), unit_device_(grad_shard.device()) {}

float* ReduceScatterGrads::get(int u) {
  // f32: the unit's gradient itself; 16-bit: the fp32 accumulator it is rounded from when final.
  const MemCategory cat =
      grad_shard_.dtype() == DType::kF32 ? MemCategory::kGradients : MemCategory::kOther;
  if (!unit_[u].defined())  // on the walk's device (by default the shard's)
    unit_[u] = Tensor::zeros({layout_.unit_numel(u)}, DType::kF32, cat, unit_device_);
  return unit_[u].f32();
}

void ReduceScatterGrads::ready(int u) {
  Tensor g = std::move(unit_[u]);  // freed at the end of this call
  if (grad_shard_.dtype() != DType::kF32) {  // round once to 16 bits: what travels
    Tensor g16 =
        Tensor::empty({g.numel()}, grad_shard_.dtype(), MemCategory::kGradients, g.device());
    round_counted(kernel_ops(g.device()), g.f32(), g16.raw(), g16.dtype(), g.numel(),
                  /*accumulate=*/false, stats_);  // counted on any device (kernel_ops.h)
    g = std::move(g16);  // the fp32 accumulator is freed here
  }
  // Σ_ranks of unit u's gradient; this rank keeps its shard's part. sends (N-1)/N · bytes(g)
  reduce_scatter_into_shard(dp_, shards_, layout_.unit_offset(u), g, grad_shard_);
}  // only the shard's part of it remains, inside grad_shard

void copy_sharded_optimizer_state_out(ProcessGroup& dp, const ShardLayout& shards,
                                      const Tensor& params, AdamW& opt, float* params_out,
                                      float* m_out, float* v_out) {
  // Adam's m and v are sharded: gather them (sends (N-1)/N · 4Ψ each; not part of a step).
  // Mixed precision: so are the fp32 master weights, the parameters' full-precision state.
  if (opt.has_master_weights()) {
    gather_shards_out(dp, shards, {{&opt.master(), params_out},
                                   {&opt.exp_avg(), m_out},
                                   {&opt.exp_avg_sq(), v_out}});
    return;
  }
  to_host(params_out, params);  // replicated
  gather_shards_out(dp, shards, {{&opt.exp_avg(), m_out}, {&opt.exp_avg_sq(), v_out}});
}

void copy_sharded_optimizer_state_in(const ProcessGroup& dp, const ShardLayout& shards,
                                     Tensor& params, AdamW& opt, const float* params_in,
                                     const float* m_in, const float* v_in) {
  const int r = dp.rank();
  if (opt.has_master_weights()) {  // the master shard, and the 16-bit copy rounded from all of it
    copy_shard_in(shards, r, params_in, opt.master());
    round_from_host(params.narrow(0, shards.psi), params_in);
  } else {
    from_host(params, params_in);  // replicated
  }
  copy_shard_in(shards, r, m_in, opt.exp_avg());  // sharded: keep this rank's part
  copy_shard_in(shards, r, v_in, opt.exp_avg_sq());
}

}  // namespace llmp
