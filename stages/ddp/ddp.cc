#include "stages/ddp/ddp.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/runtime/log.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace {

int64_t all_reduce_calls(const ProcessGroup& g) { return g.stats().calls_of("all_reduce"); }

DDPOptions checked(DDPOptions o) {
  if (!(o.bucket_mb > 0)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", o.bucket_mb);
    throw std::invalid_argument(std::string("--bucket_mb must be > 0, got ") + got);
  }
  if (o.grad_accum < 1)
    throw std::invalid_argument("--grad_accum must be >= 1, got " + std::to_string(o.grad_accum));
  return o;
}

// Σ of the elements of `t` (f32, f16 or bf16), widened and summed in f64, through a small stack
// buffer: no allocation of the tensor's size.
double widened_sum(const Tensor& t) {
  constexpr int64_t kChunk = 256;
  float buf[kChunk];
  double sum = 0;
  for (int64_t i = 0; i < t.numel(); i += kChunk) {
    const int64_t n = std::min(kChunk, t.numel() - i);
    cpu::widen(t.narrow(i, n).raw(), t.dtype(), buf, n);
    for (int64_t j = 0; j < n; ++j) sum += buf[j];
  }
  return sum;
}

}  // namespace

DDPStrategy::DDPStrategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                         DDPOptions options, MixedPrecisionConfig mp)
    : MixedPrecisionStrategy(model, mp, &dp,
                             GradClip(opt.clip_grad, nullptr)),  // a replica owns the whole g
      model_(model),
      dp_(dp),
      options_(checked(options)),
      params_(mp_.new_buffer(model.layout().num_params(), MemCategory::kParameters)),
      grads_(mp_.new_buffer(model.layout().num_params(), MemCategory::kGradients)),
      opt_(model.layout().num_params(), opt, decay_ranges(model.layout(), opt.decay), mp_.dtype(),
           model.device()),  // --device cuda: m and v beside the parameters
      metrics_(dp),
      // --bucket_mb is a capacity in bytes (PyTorch's bucket_cap_mb): with 2-byte gradients a
      // bucket holds twice the elements.
      buckets_(make_buckets(model.layout(), options_.bucket_mb * 1024 * 1024,
                            static_cast<int>(dtype_size(mp_.dtype())))),
      launch_at_(launch_unit_table(buckets_, model.layout().num_units())) {
  // ZeRO-R's constant buffer instead of the buckets (0: off); whole elements of the gradients.
  cb_bytes_ = llmp::constant_buffer_cap(options_.constant_buffer_mb, mp_.dtype());
  // The buckets are views of the device gradients and their all_reduce_async runs on them (the
  // MPI backend stages each bucket through a host buffer until test()/wait() finds it done), so
  // they run on any device; there is no thread beside the walk that reads gradient memory. The
  // constant buffer is a host buffer (common/train/constant_buffer.h): refused on a device.
  if (cb_bytes_ > 0 && model.device() != Device::kCPU)
    throw std::invalid_argument("DDPStrategy: the constant buffer is host memory; --device " +
                                std::string(to_string(model.device())) +
                                " runs without --constant_buffer_mb");
  mp_.init(seed, params_, opt_);  // same seed on every rank: same replicas (and master copies)
}

BatchSlice DDPStrategy::batch_slice(int global_batch) const {
  return rank_slice(global_batch, dp_.rank(), dp_.size());  // [r·B/N, (r+1)·B/N)
}

void DDPStrategy::launch(int b) {
  Tensor bucket = grads_.narrow(buckets_[b].offset, buckets_[b].numel);  // a view, no copy
  // What is about to be sent (outside the MPI time), read on the host: on the CPU only. On a
  // device it would cost a copy of every bucket down per step, so it is not recorded there.
  if (bucket.device() == Device::kCPU) launch_sums_[b] = widened_sum(bucket);
  const auto t0 = OverlapMeter::Clock::now();
  // In the gradients' dtype: sends 2(N-1)/N·4·numel(b) in fp32, 2(N-1)/N·2·numel(b) in 16 bits.
  work_[b] = dp_.all_reduce_async(bucket, ReduceOp::kSum);
  meter_.launched(b);
  events_.push_back({DDPEvent::kBucketLaunched, b});
  meter_.add_in_mpi(OverlapMeter::ms(t0, OverlapMeter::Clock::now()));
}

void DDPStrategy::poll() {
  const auto t0 = OverlapMeter::Clock::now();
  for (size_t b = 0; b < work_.size(); ++b)
    if (work_[b] && !meter_.is_done(b) && work_[b]->test()) meter_.completed(b);
  meter_.add_in_mpi(OverlapMeter::ms(t0, OverlapMeter::Clock::now()));
}

void DDPStrategy::on_unit_ready(int u) {
  events_.push_back({DDPEvent::kUnitFinal, u});
  if (cb_) {  // constant buffer: pack the unit (an all_reduce runs each time the buffer fills)
    const int64_t off = model_.layout().unit_offset(u), n = model_.layout().unit_numel(u);
    cb_->add(off, grads_.narrow(off, n));
    return;
  }
  poll();  // progress the buckets already in flight (MPI moves bytes only inside MPI calls)
  if (launch_at_[u] >= 0) launch(launch_at_[u]);  // u completes this bucket: start it now
}

void DDPStrategy::wait_all() {
  const auto t0 = OverlapMeter::Clock::now();
  for (size_t b = 0; b < work_.size(); ++b) {
    work_[b]->wait();
    meter_.completed(b);  // ignored when a poll already saw it finish
  }
  meter_.add_in_mpi(OverlapMeter::ms(t0, OverlapMeter::Clock::now()));
  work_.clear();
}

double DDPStrategy::train_step(const int32_t* tokens, const int32_t* targets, int global_batch,
                               int T, int64_t step) {
  const int N = dp_.size(), K = options_.grad_accum;
  if (global_batch % (N * K) != 0)
    throw std::invalid_argument("global batch " + std::to_string(global_batch) +
                                " is not divisible by data-parallel size " + std::to_string(N) +
                                " × grad_accum " + std::to_string(K));
  const int micro = global_batch / (N * K);  // sequences per micro-batch on this rank
  // 1/(global B·T) on every micro-step of every rank: Σ_r Σ_k of the gradients is the gradient of
  // the global mean loss, exactly as in the baseline (no division by K needed afterwards).
  const float scale = 1.0f / (static_cast<float>(global_batch) * T);
  const std::function<void(int)> hook = [this](int u) { on_unit_ready(u); };

  grads_.fill(0.0f);
  mp_.begin_step();  // the 16-bit rounding counts of this step's K walks
  const float walk_scale = mp_.walk_loss_scale(scale, step);  // times fp16's S
  micro_bytes_.assign(K, 0.0);
  micro_calls_.assign(K, 0);
  if (cb_bytes_ > 0) MemoryTracker::instance().reset_peak();  // the step's kCommBuffers peak
  double local_loss = 0;
  for (int k = 0; k < K; ++k) {
    const bool sync = k == K - 1;  // the K-1 others run under no_sync(): accumulate locally
    const double bytes0 = dp_.stats().total_bytes();
    const int64_t calls0 = all_reduce_calls(dp_);
    const int64_t off = static_cast<int64_t>(k) * micro * T;  // micro-batch k: (micro, T)
    if (sync && cb_bytes_ > 0) {
      events_.clear();
      // One fused buffer of cap bytes for the whole micro-step. Its collective: the all_reduce
      // of the packed chunk, then the sums back to their place in grads_.
      //                                         sends 2(N-1)/N · b·numel(chunk)
      cb_ = std::make_unique<ConstantBuffer>(cb_bytes_, grads_.dtype(),
                                             [this](Tensor& packed, int64_t first) {
                                               dp_.all_reduce(packed, ReduceOp::kSum);
                                               grads_.narrow(first, packed.numel())
                                                   .copy_from(packed);
                                             });
    } else if (sync) {
      work_.assign(buckets_.size(), nullptr);
      events_.clear();
      meter_.begin_step(static_cast<int>(buckets_.size()));
      // On a device: none recorded (launch() reads no device memory on the host).
      launch_sums_.assign(grads_.device() == Device::kCPU ? buckets_.size() : 0, 0.0);
    }
    // 16-bit: each unit accumulates in fp32 and is rounded INTO grads_ (+=) when final, and only
    // then does the hook fire: a bucket launched from it sends final 16-bit values.
    FlatParams params(model_.layout(), params_);
    FlatGrads grads(model_.layout(), grads_, sync ? hook : std::function<void(int)>(),
                    mp_.round_stats());
    local_loss += UnitRunner(model_, params, &grads)
                      .forward_backward(tokens + off, targets + off, micro, T, walk_scale);
    if (sync && cb_) {
      events_.push_back({DDPEvent::kBackwardDone, -1});
      cb_->flush();  // the last, partial buffer (it holds unit 0's lowest elements)
      last_step_chunks_ = cb_->collectives();
      cb_.reset();
      last_step_peak_cb_ = MemoryTracker::instance().peak(MemCategory::kCommBuffers);
    } else if (sync) {
      meter_.backward_done();
      events_.push_back({DDPEvent::kBackwardDone, -1});
      wait_all();  // every bucket summed over ranks: grads_ is the global gradient
      meter_.end_step();
    }
    micro_bytes_[k] = dp_.stats().total_bytes() - bytes0;
    micro_calls_[k] = all_reduce_calls(dp_) - calls0;
  }

  // The same update on every rank; fp16 skips it on every rank when any summed gradient is inf
  // or nan (agreed over dp_).
  mp_.optimizer_step(opt_, params_, grads_, step, -1, &clip_);  // --clip_grad: ‖g‖ local

  last_step_bytes_ = 0;
  for (double b : micro_bytes_) last_step_bytes_ += b;
  // Σ_r of the local parts of the global mean (fp16: divided by the S the walks used).
  return metrics_.sum(mp_.unscale_loss(local_loss, scale, step));
}

double DDPStrategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                              int T) {
  // Every rank its B/N sequences; 16-bit parameters widened unit by unit (dp_util.h).
  return dp_eval_loss(model_, params_, tokens, targets, global_batch, T, dp_, metrics_);
}

void DDPStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  copy_replicated_state_out(params_, opt_, params, exp_avg, exp_avg_sq);  // replicated
}

void DDPStrategy::set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) {
  copy_replicated_state_in(params_, opt_, params, exp_avg, exp_avg_sq);
}

std::vector<ReportRow> DDPStrategy::report() const {
  const double psi = static_cast<double>(params_.numel());
  const int N = dp_.size();
  const MemoryPlan plan = plan_memory(DPStage::kDDP, psi, N, mp_.plan());
  const bool mixed = mp_.mixed();
  auto rows = mixed ? memory_rows(plan, "2Ψ", "2Ψ", "12Ψ") : memory_rows(plan, "4Ψ", "4Ψ", "8Ψ");
  rows.push_back({"sent per step", last_step_bytes_,
                  plan_bytes_per_step(DPStage::kDDP, psi, N, mp_.plan().grad_bytes),
                  mixed ? "2(N-1)/N·2Ψ" : "2(N-1)/N·4Ψ"});
  if (cb_bytes_ > 0)  // the one fused buffer, measured: nothing else communicates from memory
    rows.push_back({"comm buffer, peak in step", static_cast<double>(last_step_peak_cb_),
                    static_cast<double>(cb_bytes_), "cap"});
  return rows;
}

void DDPStrategy::finish() {
  if (cb_bytes_ > 0) {
    log_all_ranks("ddp: constant buffer of {} bytes, {} all_reduces per step (no overlap with "
                  "backward: one buffer)",
                  cb_bytes_, last_step_chunks_);
    return;
  }
  log_all_ranks("ddp: {} buckets of ≥ {} MiB | {}", buckets_.size(), options_.bucket_mb,
                meter_.summary());
}

}  // namespace llmp
