#include "stages/zero3/zero3.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/nn/unit_runner.h"

#include "common/optim/decay_mask.h"
#include "common/runtime/check.h"
#include "common/train/constant_buffer.h"
#include "stages/zero3/tile_gatherer.h"
#include "stages/zero3/unit_gatherer.h"

namespace llmp {

double zero3_bytes_per_step(const GPTLayout& layout, int N, double b) {
  const double psi = static_cast<double>(layout.num_params());
  const double lnf = static_cast<double>(layout.unit_numel(layout.num_units() - 1));
  // 3(N-1)/N·bΨ, less the one all-gather of ln_f that the fused head does not need.
  return plan_bytes_per_step(DPStage::kZeRO3, psi, N, b) - double(N - 1) / N * b * lnf;
}

double zero3_peak_param_bytes(const GPTLayout& layout, int N, double b, int segment) {
  const int L = layout.num_units() - 2;
  LLMP_CHECK(L >= 2, "the peak formula needs two blocks, L = " + std::to_string(L));
  const int64_t S = shard_size(layout.num_params(), N);
  const int64_t blk = layout.unit_numel(1), head = layout.unit_numel(0) + layout.unit_numel(L + 1);
  const int64_t m = std::min(segment, L);  // a recomputed segment's units, all held at once
  return b * static_cast<double>(S + std::max(blk + std::max(head, blk), m * blk));
}

double zero3_largest_tile_bytes(const GPTLayout& layout, int k, double b) {
  int64_t t = 0;
  for (int w = 0; w < kBlockLinears; ++w) {
    int64_t R, OC;
    block_linear_shape(static_cast<BlockLinear>(w), layout.block_shape(), &R, &OC);
    for (int i = 0; i < k; ++i)  // forward column tiles, backward row tiles
      t = std::max({t, R * tile_range(OC, k, i).size(), tile_range(R, k, i).size() * OC});
  }
  return b * static_cast<double>(t);
}

double zero3_tiled_peak_param_bytes(const GPTLayout& layout, int N, int k, double b) {
  const int L = layout.num_units() - 2;
  const double S = static_cast<double>(shard_size(layout.num_params(), N));
  const double rest = static_cast<double>(block_rest_numel(layout.block_shape()));
  const double head = static_cast<double>(layout.unit_numel(0) + layout.unit_numel(L + 1));
  return b * (S + rest + std::max(rest, head)) + zero3_largest_tile_bytes(layout, k, b);
}

Zero3Strategy::Zero3Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                             MixedPrecisionConfig mp, double constant_buffer_mb, int tile_factor,
                             bool offload_optimizer)
    : MixedPrecisionStrategy(model, mp, &dp,
                             GradClip(opt.clip_grad, &dp)),  // ‖g‖² = Σ over dp of the shards'
      model_(model),
      dp_(dp),
      shards_(model.layout().num_params(), dp.size()),
      param_shard_(mp_.new_buffer(shards_.padded, MemCategory::kParameters)),
      // Offloaded: the gradient shard and the optimizer on the host, whatever the model's device.
      // 16-bit: the shard stays 16-bit there (what crosses down, 2 bytes per element).
      grad_shard_(offload_optimizer
                      ? Tensor::zeros({shards_.padded}, mp_.dtype(), MemCategory::kGradients)
                      : mp_.new_buffer(shards_.padded, MemCategory::kGradients)),
      opt_(shards_.padded, opt,
           slice_ranges(decay_ranges(model.layout(), opt.decay), shards_.begin[dp.rank()],
                        shards_.count[dp.rank()]),
           mp_.dtype(),  // --device cuda: the shard's m and v on the GPU, unless offloaded
           offload_optimizer ? Device::kCPU : model.device()),
      offload_(offload_optimizer),
      metrics_(dp),
      cb_bytes_(llmp::constant_buffer_cap(constant_buffer_mb, mp_.dtype())),
      tile_factor_(tile_factor) {
  LLMP_CHECK(model.config().layers >= 1, "ZeRO-3 needs at least one block");
  LLMP_CHECK(tile_factor >= 1 && tile_factor <= model.config().d,
             "tile factor " + std::to_string(tile_factor) + " is not in [1, C]");
  // On a device the shards, m and v and every gathered unit (UnitGatherer) are device memory and
  // the collectives take device tensors (the MPI backend stages them). Two paths stay on the
  // host: the constant buffer (constant_buffer.h) and the weight tiles (tile_gatherer.h packs
  // them with host copies, and the tiled layers run the CPU kernels: GPT::with_weight_tiles).
  const std::string on = "; --device " + std::string(to_string(model.device())) + " runs without ";
  if (cb_bytes_ > 0 && model.device() != Device::kCPU)
    throw std::invalid_argument("Zero3Strategy: the constant buffer is host memory" + on +
                                "--constant_buffer_mb");
  if (tile_factor > 1 && model.device() != Device::kCPU)
    throw std::invalid_argument("Zero3Strategy: weight tiles are host memory" + on +
                                "--tile_factor");
  if (offload_) {
    const std::string err = offload_error("Zero3Strategy", model.device());
    if (!err.empty()) throw std::invalid_argument(err);
  }
  // Every rank builds the same full initialisation (same seed) once and keeps only its shard:
  // fp32 as it is; mixed, its 16-bit rounding, with the fp32 values as the master shard. On a
  // device only the shard goes up (4·S_r bytes): the full initialisation stays on the host.
  Tensor full = Tensor::empty({shards_.psi}, mp_.dtype(), MemCategory::kOther);
  mp_.init(seed, full, opt_, shards_.begin[dp_.rank()]);
  copy_shard_in(shards_, dp_.rank(), full, param_shard_);
  if (offload_)  // fp32: the host's master copy of the shard, copied down once (16-bit: AdamW's)
    offloaded_ = std::make_unique<OffloadedShard>(
        param_shard_.narrow(0, shards_.count[dp_.rank()]), shards_.padded);
}

BatchSlice Zero3Strategy::batch_slice(int global_batch) const {
  return rank_slice(global_batch, dp_.rank(), dp_.size());  // [r·B/N, (r+1)·B/N)
}

double Zero3Strategy::run_walk(const int32_t* tokens, const int32_t* targets, int B, int T,
                               float scale, bool grads) {
  const GPTLayout& lay = model_.layout();
  if (tile_factor_ > 1) {  // blocks as their rest + weight tiles (tile_gatherer.h)
    TileGatherer tiles(lay, shards_, dp_, param_shard_, tile_factor_);
    const GPT tiled = model_.with_weight_tiles(&tiles);
    if (!grads) return UnitRunner(tiled, tiles).forward_loss(tokens, targets, B, T);
    ReduceScatterGrads sink(lay, dp_, shards_, grad_shard_, mp_.round_stats());
    const double loss =
        UnitRunner(tiled, tiles, &sink).forward_backward(tokens, targets, B, T, scale);
    last_step_gathers_.assign(lay.num_units(), 0);
    for (int u = 0; u < lay.num_units(); ++u) last_step_gathers_[u] = tiles.gathers(u);
    last_step_peak_tile_bytes_ =
        tiles.peak_tile_numel() * static_cast<int64_t>(dtype_size(param_shard_.dtype()));
    last_step_tile_gathers_ = tiles.tile_gathers();
    return loss;
  }
  UnitGatherer gather(lay, shards_, dp_, param_shard_);  // where the walk gets unit parameters
  if (!grads) return UnitRunner(model_, gather).forward_loss(tokens, targets, B, T);
  double loss = 0;
  if (cb_bytes_ > 0) {  // ... and where its gradients go: packed, a reduce-scatter per chunk
    ConstantBuffer buffer(cb_bytes_, grad_shard_.dtype(),
                          reduce_scatter_collective(dp_, shards_, grad_shard_));
    ConstantBufferGrads sink(lay, buffer, grad_shard_.dtype(), mp_.round_stats());
    loss = UnitRunner(model_, gather, &sink).forward_backward(tokens, targets, B, T, scale);
    buffer.flush();  // the last, partial chunk
    last_step_chunks_ = buffer.collectives();
  } else {  // ... or one reduce-scatter per unit
    ReduceScatterGrads sink(lay, dp_, shards_, grad_shard_, mp_.round_stats());
    sink.set_unit_device(model_.device());  // offloaded: device units, host shard
    loss = UnitRunner(model_, gather, &sink).forward_backward(tokens, targets, B, T, scale);
  }
  last_step_gathers_.assign(lay.num_units(), 0);
  for (int u = 0; u < lay.num_units(); ++u) last_step_gathers_[u] = gather.gathers(u);
  return loss;
}

double Zero3Strategy::train_step(const int32_t* tokens, const int32_t* targets, int global_batch,
                                 int T, int64_t step) {
  const int B = global_batch / dp_.size();  // this rank's sequences
  const float scale = 1.0f / (static_cast<float>(global_batch) * T);  // global mean
  const double bytes_before = dp_.stats().total_bytes();
  MemoryTracker::instance().reset_peak();
  mp_.begin_step();

  // 1-2. Forward and backward unit by unit; grad_shard_ ends with Σ_ranks of this rank's shard.
  const double local_loss =
      run_walk(tokens, targets, B, T, mp_.walk_loss_scale(scale, step), /*grads=*/true);
  // Offloaded: the device's peaks (the host's master and gradient shards are always there).
  last_step_peak_params_ =
      offload_ ? MemoryTracker::instance().peak(model_.device(), MemCategory::kParameters)
               : MemoryTracker::instance().peak(MemCategory::kParameters);
  last_step_peak_grads_ =
      offload_ ? MemoryTracker::instance().peak(model_.device(), MemCategory::kGradients)
               : MemoryTracker::instance().peak(MemCategory::kGradients);
  last_step_peak_cb_ = MemoryTracker::instance().peak(MemCategory::kCommBuffers);

  // 3. AdamW on the shard (its valid part). Nothing to gather: the next step gathers units.
  //    Mixed: the master shard, rounded into the 16-bit shard; fp16 skips an overflowed step on
  //    every rank together.
  //    Offloaded: on the host's master shard, then copied up into the device shard.
  if (offload_)
    offloaded_->step(mp_, opt_, grad_shard_, step, &clip_);
  else  // --clip_grad: ‖g‖² is Σ over dp of each shard's valid part's Σ g² (8-byte all_reduce)
    mp_.optimizer_step(opt_, param_shard_, grad_shard_, step, shards_.count[dp_.rank()], &clip_);

  last_step_bytes_ = dp_.stats().total_bytes() - bytes_before;
  return metrics_.sum(mp_.mixed() ? mp_.unscale_loss(local_loss, scale, step) : local_loss);
}

double Zero3Strategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                                int T) {
  const int B = global_batch / dp_.size();
  const double local_mean = run_walk(tokens, targets, B, T, 1.0f, /*grads=*/false);
  return metrics_.sum(local_mean) / dp_.size();  // equal slices: mean of means
}

void Zero3Strategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Everything is sharded: gather each state (sends (N-1)/N · 4Ψ each; not part of a step).
  // Mixed precision: the parameters' full-precision state is the fp32 master shard.
  const Tensor& full_precision = mp_.mixed() ? opt_.master() : param_shard_;
  gather_shards_out(dp_, shards_, {{&full_precision, params},
                                   {&opt_.exp_avg(), exp_avg},
                                   {&opt_.exp_avg_sq(), exp_avg_sq}});
}

void Zero3Strategy::set_state(const float* params, const float* exp_avg,
                              const float* exp_avg_sq) {
  if (mp_.mixed()) {  // the master shard, and the 16-bit shard rounded from it
    copy_shard_in(shards_, dp_.rank(), params, opt_.master());
    const int r = dp_.rank();  // rounded on the host, 2·count(r) bytes up on a device
    round_from_host(param_shard_.narrow(0, shards_.count[r]), params + shards_.begin[r]);
  } else {
    copy_shard_in(shards_, dp_.rank(), params, param_shard_);  // everything sharded: my part
  }
  copy_shard_in(shards_, dp_.rank(), exp_avg, opt_.exp_avg());
  copy_shard_in(shards_, dp_.rank(), exp_avg_sq, opt_.exp_avg_sq());
  if (offload_) offloaded_->refresh();
}

std::vector<ReportRow> Zero3Strategy::report() const {
  const GPTLayout& lay = model_.layout();
  const double psi = static_cast<double>(shards_.psi);
  const int N = dp_.size();
  const MemoryPlan plan = plan_memory(DPStage::kZeRO3, psi, N, mp_.plan(), /*padded=*/true);
  const bool mixed = mp_.mixed();
  const double b = mixed ? 2.0 : 4.0;  // bytes of a parameter and of a gradient element
  auto rows = offload_ ? offload_memory_rows(model_.device(), b * shards_.padded,
                                             mixed ? "2⌈Ψ/N⌉" : "4⌈Ψ/N⌉", shards_.padded,
                                             mp_.dtype())
             : mixed    ? memory_rows(plan, "2⌈Ψ/N⌉", "2⌈Ψ/N⌉", "12⌈Ψ/N⌉")
                        : memory_rows(plan, "4⌈Ψ/N⌉", "4⌈Ψ/N⌉", "8⌈Ψ/N⌉");
  if (tile_factor_ > 1) {  // tiled: rest + one tile per block step (header)
    rows.push_back({"parameters, peak in step", static_cast<double>(last_step_peak_params_),
                    zero3_tiled_peak_param_bytes(lay, N, tile_factor_, b),
                    mixed ? "2(⌈Ψ/N⌉+r+4C²/k+max(r,n_0+n_f))"
                          : "4(⌈Ψ/N⌉+r+4C²/k+max(r,n_0+n_f))"});
    rows.push_back({"largest weight tile, peak", static_cast<double>(last_step_peak_tile_bytes_),
                    zero3_largest_tile_bytes(lay, tile_factor_, b),
                    mixed ? "2·4C²/k" : "4·4C²/k"});
  } else if (model_.config().layers >= 2) {
    const GPTConfig& c = model_.config();
    const int segment = c.recompute == Recompute::kFull ? c.recompute_every : 1;
    rows.push_back({"parameters, peak in step", static_cast<double>(last_step_peak_params_),
                    zero3_peak_param_bytes(lay, N, b, segment),
                    std::min(segment, c.layers) <= 2
                        ? std::string(mixed ? "2(⌈Ψ/N⌉+n_b+max(n_0+n_f,n_b))"
                                            : "4(⌈Ψ/N⌉+n_b+max(n_0+n_f,n_b))")
                        : std::string(mixed ? "2(⌈Ψ/N⌉+m·n_b)" : "4(⌈Ψ/N⌉+m·n_b)") + ", m = " +
                              std::to_string(std::min(segment, c.layers)) +
                              " blocks recomputed together"});
  }
  int64_t largest = 0;  // unit 0's gradient lives from H to Eb, next to one other unit's
  for (int u = 1; u < lay.num_units(); ++u) largest = std::max(largest, lay.unit_numel(u));
  // (report texts: n_b one block, n_f = n_{L+1} the final LayerNorm)
  if (mixed && offload_)  // the 16-bit shard is on the host: on the device one 16-bit unit
    rows.push_back({std::string("gradients on ") + to_string(model_.device()) + ", peak in step",
                    static_cast<double>(last_step_peak_grads_),
                    2.0 * std::max(lay.unit_numel(0), largest), "2·max(n_0,n_b,n_f)"});
  else if (mixed)  // fp32 accumulators are kOther; one 16-bit unit at a time next to the shard
    rows.push_back({"gradients, peak in step", static_cast<double>(last_step_peak_grads_),
                    2.0 * (shards_.padded + std::max(lay.unit_numel(0), largest)),
                    "2(⌈Ψ/N⌉+max(n_0,n_b,n_f))"});
  else if (offload_)  // the shard is on the host: on the device only the units, as they go
    rows.push_back({std::string("gradients on ") + to_string(model_.device()) + ", peak in step",
                    static_cast<double>(last_step_peak_grads_),
                    4.0 * (lay.unit_numel(0) + largest), "4(n_0+max(n_b,n_f))"});
  else
    rows.push_back({"gradients, peak in step", static_cast<double>(last_step_peak_grads_),
                    4.0 * (shards_.padded + lay.unit_numel(0) + largest),
                    "4(⌈Ψ/N⌉+n_0+max(n_b,n_f))"});
  // Tiled, full recomputation runs each block's forward again, gathering its column tiles again
  // (tiles are never kept): (N-1)/N·b·12C² more per block (the four linears' weights).
  const bool regather = tile_factor_ > 1 && model_.config().recompute == Recompute::kFull;
  const double C = model_.config().d;
  rows.push_back({"sent per step", last_step_bytes_,
                  zero3_bytes_per_step(lay, N, b) +
                      (regather ? model_.config().layers * (N - 1.0) / N * b * 12 * C * C : 0),
                  std::string(mixed ? "3(N-1)/N·2Ψ - (N-1)/N·2n_f" : "3(N-1)/N·4Ψ - (N-1)/N·4n_f") +
                      (regather ? " + L(N-1)/N·b·12C² (tiles again)" : "")});
  if (cb_bytes_ > 0)  // the one fused buffer, measured
    rows.push_back({"comm buffer, peak in step", static_cast<double>(last_step_peak_cb_),
                    static_cast<double>(cb_bytes_), "cap"});
  return rows;
}

}  // namespace llmp
