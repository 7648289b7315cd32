#include "stages/zero3/zero3.h"

#include <algorithm>
#include <utility>

#include "common/runtime/check.h"
#include "stages/zero3/unit_gatherer.h"

namespace llmp {

std::vector<ComputeStep> zero3_schedule(int L, bool backward) {
  std::vector<ComputeStep> s;
  s.push_back({ComputeStep::kEmbed, -1, {0}});
  for (int l = 0; l < L; ++l) s.push_back({ComputeStep::kBlockForward, l, {1 + l}});
  s.push_back({ComputeStep::kHead, -1, {L + 1, 0}});  // ln_f, then the tied wte (unit 0)
  if (backward) {
    for (int l = L - 1; l >= 0; --l) s.push_back({ComputeStep::kBlockBackward, l, {1 + l}});
    s.push_back({ComputeStep::kEmbedBackward, -1, {}});  // a scatter of dx_0: no parameters
  }
  return s;
}

double zero3_bytes_per_step(const GPTLayout& layout, int N) {
  const double psi = static_cast<double>(layout.num_params());
  const double lnf = static_cast<double>(layout.unit_numel(layout.num_units() - 1));
  // 3(N-1)/N·4Ψ, less the one all-gather of ln_f that the fused head does not need.
  return plan_bytes_per_step(DPStage::kZeRO3, psi, N, 4.0) - double(N - 1) / N * 4.0 * lnf;
}

double zero3_peak_param_bytes(const GPTLayout& layout, int N) {
  const int L = layout.num_units() - 2;
  LLMP_CHECK(L >= 2, "the peak formula needs two blocks, L = " + std::to_string(L));
  const int64_t S = shard_size(layout.num_params(), N);
  const int64_t blk = layout.unit_numel(1), head = layout.unit_numel(0) + layout.unit_numel(L + 1);
  return 4.0 * static_cast<double>(S + blk + std::max(head, blk));
}

Zero3Strategy::Zero3Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed)
    : model_(model),
      dp_(dp),
      shards_(model.layout().num_params(), dp.size()),
      param_shard_(Tensor::zeros({shards_.padded}, DType::kF32, MemCategory::kParameters)),
      grad_shard_(Tensor::zeros({shards_.padded}, DType::kF32, MemCategory::kGradients)),
      opt_(shards_.padded, opt),
      metrics_(dp) {
  LLMP_CHECK(model.config().layers >= 1, "ZeRO-3 needs at least one block");
  // Every rank builds the same full initialisation (same seed) once and keeps only its shard.
  Tensor full = Tensor::empty({shards_.psi}, DType::kF32, MemCategory::kOther);
  model_.init_params(full.f32(), seed);
  copy_shard_in(shards_, dp_.rank(), full.f32(), param_shard_);
}

BatchSlice Zero3Strategy::batch_slice(int global_batch) const {
  return rank_slice(global_batch, dp_.rank(), dp_.size());  // [r·B/N, (r+1)·B/N)
}

void Zero3Strategy::reduce_scatter_unit(int u, const Tensor& g) {
  // Σ_ranks of unit u's gradient; this rank keeps the part inside its shard. sends (N-1)/N · 4·n_u
  reduce_scatter_into_shard(dp_, shards_, model_.layout().unit_offset(u), g, grad_shard_);
}

double Zero3Strategy::run_schedule(const int32_t* tokens, const int32_t* targets, int B, int T,
                                   float scale, bool grads) {
  const GPTLayout& lay = model_.layout();
  const int L = model_.config().layers, C = model_.config().d;
  const std::vector<ComputeStep> steps = zero3_schedule(L, grads);
  UnitGatherer gather(lay, shards_, dp_, param_shard_);

  std::vector<Tensor> x(L + 1);  // x_l (B,T,C): the input of block l; x_L feeds the head
  std::vector<BlockCache> cache(L);
  for (auto& t : x) t = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
  Tensor dx, dx_prev, g0;  // (B,T,C) gradients flowing back; unit 0's gradient (H .. Eb)
  if (grads) {
    dx = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
    dx_prev = Tensor::empty({B, T, C}, DType::kF32, MemCategory::kActivations);
  }
  double loss = 0;

  for (size_t k = 0; k < steps.size(); ++k) {
    const ComputeStep& s = steps[k];
    static const std::vector<int> kNone;
    const std::vector<int>& next = k + 1 < steps.size() ? steps[k + 1].units : kNone;
    for (int u : s.units) gather.prefetch(u);  // no-op: step k-1 prefetched it (k = 0 excepted)
    for (int u : next) gather.prefetch(u);     // in flight while this step computes
    const int l = s.layer;
    switch (s.kind) {
      case ComputeStep::kEmbed:  // (B,T) tokens -> x_0 (B,T,C)
        model_.embed_forward(gather.get(0), tokens, B, T, x[0].f32());
        break;
      case ComputeStep::kBlockForward:  // x_l (B,T,C) -> x_{l+1} (B,T,C)
        model_.block_forward(gather.get(1 + l), x[l].f32(), B, T, x[l + 1].f32(), &cache[l]);
        if (!grads) cache[l] = BlockCache();  // evaluation keeps nothing for a backward
        break;
      case ComputeStep::kHead: {  // x_L (B,T,C) @ wte^T (C,V) -> loss; with grads: dx_L
        const float* lnf = gather.get(L + 1);
        const float* wte = gather.get(0);  // rows [0, V·C) of unit 0
        if (!grads) {
          loss = model_.head_forward_backward(lnf, wte, x[L].f32(), targets, B, T, scale,
                                              nullptr, nullptr, nullptr);
          break;
        }
        Tensor gf = Tensor::zeros({lay.unit_numel(L + 1)}, DType::kF32, MemCategory::kGradients);
        g0 = Tensor::zeros({lay.unit_numel(0)}, DType::kF32, MemCategory::kGradients);
        loss = model_.head_forward_backward(lnf, wte, x[L].f32(), targets, B, T, scale, dx.f32(),
                                            gf.f32(), g0.f32());
        reduce_scatter_unit(L + 1, gf);  // ln_f is final; gf is freed at the end of this scope
        break;
      }
      case ComputeStep::kBlockBackward: {  // dx_{l+1} (B,T,C) -> dx_l (B,T,C)
        Tensor gb = Tensor::zeros({lay.unit_numel(1 + l)}, DType::kF32, MemCategory::kGradients);
        model_.block_backward(gather.get(1 + l), x[l].f32(), cache[l], dx.f32(), dx_prev.f32(),
                              gb.f32());
        std::swap(dx, dx_prev);
        cache[l] = BlockCache();  // block l's activations are no longer needed
        x[l + 1] = Tensor();
        reduce_scatter_unit(1 + l, gb);
        break;
      }
      case ComputeStep::kEmbedBackward:  // wte, wpe rows += dx_0 (B,T,C)
        model_.embed_backward(tokens, B, T, dx.f32(), g0.f32());
        reduce_scatter_unit(0, g0);
        g0 = Tensor();
        break;
    }
    // Reshard: free this step's units unless the next step reads them too.
    for (int u : s.units)
      if (std::find(next.begin(), next.end(), u) == next.end()) gather.release(u);
  }
  if (grads) {
    last_step_gathers_.assign(lay.num_units(), 0);
    for (int u = 0; u < lay.num_units(); ++u) last_step_gathers_[u] = gather.gathers(u);
  }
  return loss;
}

double Zero3Strategy::train_step(const int32_t* tokens, const int32_t* targets, int global_batch,
                                 int T, int64_t step) {
  const int B = global_batch / dp_.size();  // this rank's sequences
  const float scale = 1.0f / (static_cast<float>(global_batch) * T);  // global mean
  const double bytes_before = dp_.stats().total_bytes();
  MemoryTracker::instance().reset_peak();

  // 1-2. Forward and backward unit by unit; grad_shard_ ends with Σ_ranks of this rank's shard.
  const double local_loss = run_schedule(tokens, targets, B, T, scale, /*grads=*/true);
  last_step_peak_params_ = MemoryTracker::instance().peak(MemCategory::kParameters);
  last_step_peak_grads_ = MemoryTracker::instance().peak(MemCategory::kGradients);

  // 3. AdamW on the shard (its valid part). Nothing to gather: the next step gathers units.
  opt_.step(param_shard_.f32(), grad_shard_.f32(), step, shards_.count[dp_.rank()]);

  last_step_bytes_ = dp_.stats().total_bytes() - bytes_before;
  return metrics_.sum(local_loss);
}

double Zero3Strategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                                int T) {
  const int B = global_batch / dp_.size();
  const double local_mean = run_schedule(tokens, targets, B, T, 1.0f / (B * T), /*grads=*/false);
  return metrics_.sum(local_mean) / dp_.size();  // equal slices: mean of means
}

void Zero3Strategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Everything is sharded: gather each state (sends (N-1)/N · 4Ψ each; not part of a step).
  gather_shards_out(dp_, shards_, {{&param_shard_, params},
                                   {&opt_.exp_avg(), exp_avg},
                                   {&opt_.exp_avg_sq(), exp_avg_sq}});
}

void Zero3Strategy::set_state(const float* params, const float* exp_avg,
                              const float* exp_avg_sq) {
  copy_shard_in(shards_, dp_.rank(), params, param_shard_);  // everything sharded: my part
  copy_shard_in(shards_, dp_.rank(), exp_avg, opt_.exp_avg());
  copy_shard_in(shards_, dp_.rank(), exp_avg_sq, opt_.exp_avg_sq());
}

std::vector<ReportRow> Zero3Strategy::report() const {
  const GPTLayout& lay = model_.layout();
  const double psi = static_cast<double>(shards_.psi);
  const int N = dp_.size();
  auto rows = memory_rows(plan_memory(DPStage::kZeRO3, psi, N, Precision::fp32(), /*padded=*/true),
                          "4⌈Ψ/N⌉", "4⌈Ψ/N⌉", "8⌈Ψ/N⌉");
  if (model_.config().layers >= 2)
    rows.push_back({"parameters, peak in step", static_cast<double>(last_step_peak_params_),
                    zero3_peak_param_bytes(lay, N), "4(⌈Ψ/N⌉+n_b+max(n_0+n_f,n_b))"});
  int64_t largest = 0;  // unit 0's gradient lives from H to Eb, next to one other unit's
  for (int u = 1; u < lay.num_units(); ++u) largest = std::max(largest, lay.unit_numel(u));
  // (report texts: n_b one block, n_f = n_{L+1} the final LayerNorm)
  rows.push_back({"gradients, peak in step", static_cast<double>(last_step_peak_grads_),
                  4.0 * (shards_.padded + lay.unit_numel(0) + largest),
                  "4(⌈Ψ/N⌉+n_0+max(n_b,n_f))"});
  rows.push_back({"sent per step", last_step_bytes_, zero3_bytes_per_step(lay, N),
                  "3(N-1)/N·4Ψ - (N-1)/N·4n_f"});
  return rows;
}

}  // namespace llmp
