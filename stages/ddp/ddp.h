// DDP: data parallelism with bucketed all_reduce overlapped with backward, and gradient
// accumulation without communication (no_sync).
//
// Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
// VLDB, §3.2 (bucketing, overlap, skipping synchronisation) and Algorithm 1.
//
// Same model states as naive DP (stages/naive_dp): every rank holds the whole model, 4Ψ + 4Ψ +
// 8Ψ bytes in fp32, and sends one all_reduce's worth of gradients per step, 2(N-1)/N·4Ψ. What
// changes is WHEN the bytes move. One step of K micro-steps (--grad_accum K):
//
//   for k = 1..K, on micro-batch k of this rank's B/N sequences (B/(N·K) each):
//     forward; backward unit by unit (L+1, L, ..., 0). On the last micro-step only, as soon as
//     the lowest unit of a bucket (stages/ddp/bucketer.h) is final, that bucket's
//     all_reduce_async starts while backward goes on with the next units; between units the
//     in-flight buckets are test()ed, which is what makes MPI progress them. On the K-1 others
//     nothing is sent: gradients just accumulate locally (PyTorch's no_sync()).
//   wait for every bucket; AdamW over all Ψ on every rank.
//
// The loss is scaled by 1/(B·T) on every micro-step of every rank (B the GLOBAL batch), so
// Σ_ranks Σ_micro-steps of the gradients is exactly the gradient of the global mean loss:
// accumulation changes nothing but the order of the additions.
//
// With --precision bf16 / fp16 (common/train/mixed_precision.h): 16-bit parameters and gradients
// (2Ψ + 2Ψ), AdamW's fp32 master copy with m and v (12Ψ), K = 12. The buckets are views of the
// 16-bit gradient buffer, so they carry 2 bytes per element (sends 2(N-1)/N·2Ψ per step), and
// --bucket_mb stays a capacity in BYTES (as PyTorch's bucket_cap_mb): a bucket holds twice the
// elements of an fp32 one. A unit's gradients are rounded into the 16-bit buffer (FlatGrads::ready)
// BEFORE the hook fires, so a bucket launched from the hook sends final 16-bit values.
//
// ZeRO-R's constant buffer (--constant_buffer_mb X, common/train/constant_buffer.h): instead of
// the buckets, each unit's final gradients are copied into ONE fused buffer of cap = ⌊X·2^20⌋
// bytes (kCommBuffers), a unit larger than the free space is cut, and every time the buffer is
// full its all_reduce runs (blocking) and the sums are copied back into the gradient buffer;
// the last, partial buffer after backward. The communication memory is cap whatever Ψ and L;
// the bytes sent are the same 2(N-1)/N·bΨ; the overlap with backward is given up (one buffer).
//
// Glossary: B global batch (sequences), T sequence length, N ranks, K micro-steps per optimizer
// step, Ψ parameter count, L layers, cap the constant buffer's bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/constant_buffer.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"
#include "stages/ddp/bucketer.h"
#include "stages/ddp/overlap_meter.h"

namespace llmp {

struct DDPOptions {
  /// --bucket_mb: bucket capacity in MiB (PyTorch's bucket_cap_mb, default 25 there). 0.5 MiB
  /// gives the 0.83M-parameter "mini" preset (3.2 MiB of gradients) 5 buckets.
  double bucket_mb = 0.5;
  /// --grad_accum: K micro-steps per optimizer step; B must be divisible by N·K.
  int grad_accum = 1;
  /// --constant_buffer_mb: > 0 replaces the buckets by ZeRO-R's constant buffer of ⌊X·2^20⌋
  /// bytes (rounded down to whole gradient elements); 0: off (the buckets).
  double constant_buffer_mb = 0;
};

/// One entry of DDPStrategy's event log: what happened during the synchronising micro-step, in
/// the order it happened on this rank. A logical record (no clock), so tests can assert the
/// order deterministically: no bucket before all its gradients are final, and some bucket while
/// backward still has units to finish.
struct DDPEvent {
  enum Kind {
    kUnitFinal,       ///< the walk announced unit `index`'s gradients final (on_unit_ready)
    kBucketLaunched,  ///< bucket `index`'s all_reduce_async was issued
    kBackwardDone,    ///< forward_backward returned (index -1)
  };
  Kind kind;
  int index;
  bool operator==(const DDPEvent& o) const { return kind == o.kind && index == o.index; }
};

class DDPStrategy : public MixedPrecisionStrategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed`.
  /// Throws std::invalid_argument when bucket_mb ≤ 0, grad_accum < 1 or constant_buffer_mb is
  /// negative, NaN, infinite or below one gradient element, or when the model's
  /// activation dtype is not `mp`'s storage dtype. Buckets hold ≥ bucket_mb MiB of gradients in
  /// the precision's dtype (4 bytes per element in fp32, 2 in bf16 / fp16). On a device
  /// (model.device() != kCPU, fp32): every buffer on that device; throws std::invalid_argument
  /// when constant_buffer_mb > 0 there (the constant buffer is host memory).
  DDPStrategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
              DDPOptions options = {}, MixedPrecisionConfig mp = {});

  /// Rank r reads sequences [r·B/N, (r+1)·B/N).
  BatchSlice batch_slice(int global_batch) const override;
  /// Throws std::invalid_argument("global batch 12 is not divisible by data-parallel size 4 ×
  /// grad_accum 2") when N·K ∤ B.
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Memory rows (4Ψ, 4Ψ, 8Ψ; mixed: 2Ψ, 2Ψ, 12Ψ) and bytes sent in the last step against
  /// 2(N-1)/N·4Ψ (mixed: 2(N-1)/N·2Ψ, the sum over the buckets). With the constant buffer,
  /// also "comm buffer, peak in step": MemoryTracker's kCommBuffers peak during the last step
  /// next to the bound ("cap").
  std::vector<ReportRow> report() const override;
  /// fp16: " | loss scale S | skipped k" on the progress line; "" otherwise.
  /// Prints, on every rank, the OverlapMeter summary ("hidden communication: X% of Y ms"): the
  /// table has bytes columns only.
  void finish() override;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  /// Bytes sent during each of the K micro-steps of the last step (0 for all but the last).
  const std::vector<double>& last_micro_step_bytes() const { return micro_bytes_; }
  /// all_reduce calls issued during each micro-step of the last step (buckets, or 0).
  const std::vector<int64_t>& last_micro_step_calls() const { return micro_calls_; }
  double last_step_bytes() const { return last_step_bytes_; }
  const OverlapMeter& overlap() const { return meter_; }
  /// The event log of the last step's synchronising micro-step (see DDPEvent).
  const std::vector<DDPEvent>& last_step_events() const { return events_; }
  /// For each bucket, Σ of its gradient elements (widened to f32, summed in f64) on this rank at
  /// the moment its all_reduce was issued in the last step: what the bucket sent, as a
  /// fingerprint a test can recompute from a walk of its own (16-bit: the rounded values).
  /// Empty on a device (--device cuda): the sum is taken on the host, which never reads device
  /// memory.
  const std::vector<double>& last_launch_sums() const { return launch_sums_; }
  /// The working copy of the parameters: Ψ elements, f32 or 16-bit.
  const Tensor& params_tensor() const { return params_; }
  /// Constant buffer: its bytes (cap, whole elements; 0 when off), the kCommBuffers peak during
  /// the last step, and the all_reduces (chunks) the last step ran: ⌈Ψ/c⌉.
  int64_t constant_buffer_cap() const { return cb_bytes_; }
  int64_t last_step_peak_comm_buffers() const { return last_step_peak_cb_; }
  int last_step_chunks() const { return last_step_chunks_; }

 private:
  /// The backward hook (forward_backward's on_unit_ready, unit_runner.h) of the last micro-step.
  void on_unit_ready(int u);
  void launch(int b);  // all_reduce_async of bucket b   sends 2(N-1)/N·(4 or 2)·numel(b)
  void poll();         // test() every in-flight bucket: drives MPI's progress engine
  void wait_all();     // the exposed part: wait for every bucket

  const GPT& model_;
  ProcessGroup& dp_;
  DDPOptions options_;
  Tensor params_;  // Ψ, replicated, in mp_.dtype()
  Tensor grads_;   // Ψ, replicated after the sync, in mp_.dtype(); the buckets are views of it
  AdamW opt_;      // m, v (and the fp32 master weights when 16-bit): Ψ each, replicated
  MetricsReducer metrics_;
  std::vector<Bucket> buckets_;
  std::vector<int> launch_at_;                // unit -> bucket launched when it is ready, or -1
  std::vector<std::shared_ptr<Work>> work_;   // per bucket, during the last micro-step
  std::vector<double> micro_bytes_;
  std::vector<int64_t> micro_calls_;
  double last_step_bytes_ = 0;
  OverlapMeter meter_;
  std::vector<DDPEvent> events_;
  std::vector<double> launch_sums_;  // per bucket, the last step's
  int64_t cb_bytes_ = 0;                // the constant buffer's bytes (whole elements); 0: off
  std::unique_ptr<ConstantBuffer> cb_;  // during the synchronising micro-step only
  int64_t last_step_peak_cb_ = 0;
  int last_step_chunks_ = 0;
};

}  // namespace llmp
