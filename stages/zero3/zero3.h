// ZeRO stage 3 (P_os+g+p): Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", §5.3 and §7.2.3; the same algorithm as PyTorch FSDP with
// FULL_SHARD (Zhao et al. 2023).
//
// Every rank keeps only its 1/N shard of the parameters, of the gradients and of the optimizer
// state: 4⌈Ψ/N⌉ + 4⌈Ψ/N⌉ + 8⌈Ψ/N⌉ bytes in fp32. A unit's full parameters exist only while it
// computes (UnitGatherer). One step is the shared walk over the units (common/nn/unit_runner.h),
// with the UnitGatherer as its ParamSource and ReduceScatterGrads (dp_util.h) as its GradSink:
//
//   forward    E  embed          needs unit 0           x_0 = wte[tokens] + wpe
//              F_l block l fwd   needs unit 1+l         x_{l+1} = block_l(x_l),  l = 0..L-1
//              H  head           needs units L+1 and 0  loss and its backward (fused, llm.c):
//                                                       dx_L, grads of ln_f and of wte (tied)
//   backward   G_l block l bwd   needs unit 1+l         dx_l, grads of block l,  l = L-1..0
//              Eb embed bwd      needs nothing          grads of wte, wpe (a scatter of dx_0)
//
// Before a step of the walk runs, the all-gathers of the next step's units are started (prefetch:
// communication overlaps computation); after it, its units are freed unless the next step needs
// them. So a rank holds at most the units of two consecutive steps. Right after a unit's
// gradients are final (H for L+1, G_l for 1+l, Eb for 0) they are reduce-scattered into the
// gradient shard and the full unit gradient is freed, as in ZeRO-2. Unit 0's gradient lives from
// H (tied head adds to wte) to Eb (embedding adds to wte, wpe). Then AdamW updates the shard.
// No all-gather of the updated parameters: the next step gathers what it needs.
//
// How often each unit is gathered per training step, and why:
//   unit 0 (wte, wpe)    2×  for E (forward) and for H (the head's forward+backward); freed in
//                            between; Eb needs no parameters (its gradient is a scatter of dx_0)
//   units 1..L (blocks)  2×  for F_l (forward) and for G_l (backward)
//   unit L+1 (ln_f)      1×  for H only: the fused head is its forward and its backward at once
// Traffic per rank and step, exactly (CommStats):
//   all_gather (N-1)/N·4·(2Ψ - n_{L+1}) + reduce_scatter (N-1)/N·4Ψ
//   = 3(N-1)/N·4Ψ - (N-1)/N·4·n_{L+1}          (n_{L+1} = 2C; 1.5× DDP less ln_f's 2C, §7.2.3)
// Peak parameter memory per rank (held = units of the step computing ∪ the step prefetched):
//   4·(⌈Ψ/N⌉ + n_blk + max(n_0 + n_{L+1}, n_blk))   for L ≥ 2
// from the pairs (F_{L-1}, H) and (H, G_{L-1}) (block + head units) and (F_l, F_{l+1}) (two
// blocks). mini: two blocks (n_blk = 198,272 > n_0 + n_{L+1} = 41,216).
//
// Mixed precision (--precision bf16 | fp16, common/train/mixed_precision.h): the parameter
// shard is 16-bit (2⌈Ψ/N⌉) and units are all-gathered as 16 bits, 2 bytes per element, then
// widened to fp32 for the walk (kOther scratch, UnitGatherer); unit gradients accumulate in fp32
// and are rounded once to 16 bits before their reduce-scatter into the 16-bit gradient shard
// (2⌈Ψ/N⌉, ReduceScatterGrads); the optimizer shard holds the fp32 master weights with m and
// v: 12⌈Ψ/N⌉ (K = 12, the paper's Table 1: (2 + 2 + 12)Ψ/N). Every byte count above holds with
// 2 for 4: traffic 3(N-1)/N·2Ψ - (N-1)/N·2n_f, peak parameters 2(⌈Ψ/N⌉ + n_b + max(n_0+n_f,n_b)).
// fp16's overflow check sees only this rank's gradient shard, so the skip is agreed over the group.
// On a device (--device cuda --precision bf16|fp16) all of it stays there: the widening, the
// rounding of unit gradients, fp16's overflow count and the mixed AdamW run as the device's
// kernels (kernel_ops); only the initial 16-bit shard (2·S_r) and master shard (4·S_r) go up.
//
// ZeRO-R's constant buffer (--constant_buffer_mb X, common/train/constant_buffer.h, §6.2): the
// units' final gradients are packed into ONE fused buffer of cap = ⌊X·2^20⌋ bytes, cut into
// chunks, one reduce-scatter per full buffer (as in ZeRO-2); the parameter gathers unchanged.
//
// Memory-centric tiling (--tile_factor k ≥ 2; ZeRO-Infinity, Rajbhandari et al. 2021, §5.1.3;
// tile_gatherer.h, common/nn/tiled_linear.h): a block is gathered as its rest (r = 13C LayerNorm
// and bias elements, prefetched like a unit) plus its four large linears in k tiles each, one
// tile alive at a time, gathered while the layer computes. Results are bit-identical to k = 1;
// the bytes sent per step are unchanged (the tiles of a pass add up to the weight). With
// t = 4C²/k the largest tile (of c_fc or mlp.c_proj), the pairs of consecutive steps become
// (F_l: r + t, F_{l+1}: r), (F_{L-1}: r + t, H: n_0 + n_f), ..., so
//   peak parameters = b·(⌈Ψ/N⌉ + r + t + max(r, n_0 + n_f))      (k ≥ 2, L ≥ 1)
// and the largest linear's gathered weights peak at b·4C²/k instead of b·4C² (inside the unit).
//
// ZeRO-Offload (--device cuda --offload optimizer, common/train/offload.h): the gradient shard,
// an fp32 master copy of the parameter shard and m, v on the host (16⌈Ψ/N⌉ bytes), AdamW on the
// CPU, the updated shard copied up into the device parameter shard (4⌈Ψ/N⌉ bytes per step). The
// device's model states: 4⌈Ψ/N⌉ instead of 16⌈Ψ/N⌉; results bit-identical. In bf16/fp16 (the
// paper's setting): the 16-bit gradient shard on the host (2 bytes per element cross down), the
// fp32 master, m, v there as AdamW's state, the update rounded on the host and copied up in 16
// bits (2⌈Ψ/N⌉); device 2⌈Ψ/N⌉ instead of 16⌈Ψ/N⌉, host 14⌈Ψ/N⌉; bit-identical to ZeRO-3 in
// the same precision.
//
// Glossary: B global batch, T sequence length, C channels, L layers, N ranks, Ψ parameters,
// S = ⌈Ψ/N⌉ shard size, r this rank, cap the constant buffer's bytes, n_u elements of unit u
// (n_blk = n_b: one block, 12C² + 13C; n_f = n_{L+1} = 2C: the final LayerNorm).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/train/dp_util.h"
#include "common/train/mixed_precision.h"
#include "common/train/offload.h"
#include "common/train/strategy.h"

namespace llmp {

/// Bytes one rank sends per training step: 3(N-1)/N·bΨ - (N-1)/N·b·n_{L+1} (header), b the
/// bytes of a parameter and of a gradient element (4 in fp32, 2 under mixed precision).
double zero3_bytes_per_step(const GPTLayout& layout, int ranks, double b = 4.0);

/// Peak parameter bytes per rank during a step: b·(⌈Ψ/N⌉ + n_blk + max(n_0 + n_{L+1}, n_blk)),
/// b bytes per parameter (4 or 2). Requires L ≥ 2 (fails otherwise: the pair of two blocks does
/// not exist). `segment` m: with full recomputation every k blocks (common/nn/recompute.h), the
/// backward of a segment's last block runs the forwards of its m = min(k, L) blocks again, each
/// unit gathered for it and held until its own backward: b·(⌈Ψ/N⌉ + max(that pair, m·n_blk)).
double zero3_peak_param_bytes(const GPTLayout& layout, int ranks, double b = 4.0,
                              int segment = 1);

/// The largest weight tile at tile factor k: max over the four linears and both passes of
/// |tile| = rows·cols/k (4C²/k when k divides C), times b bytes per parameter.
double zero3_largest_tile_bytes(const GPTLayout& layout, int k, double b = 4.0);

/// Peak parameter bytes per rank during a tiled step (k ≥ 2; header):
/// b·(⌈Ψ/N⌉ + r + t + max(r, n_0 + n_{L+1})), r = 13C the rest of a block, t the largest tile.
double zero3_tiled_peak_param_bytes(const GPTLayout& layout, int ranks, int k, double b = 4.0);

/// ZeRO-3 data parallelism over `dp`. Memory per rank (between steps): (4 + 4 + 8)⌈Ψ/N⌉ bytes in
/// fp32, (2 + 2 + 12)⌈Ψ/N⌉ mixed = plan_memory(DPStage::kZeRO3, Ψ, N, mp.plan(), padded).
class Zero3Strategy : public MixedPrecisionStrategy {
 public:
  /// Collective over `dp`. Every rank initialises the same parameters from `seed` and keeps its
  /// shard (mixed: the 16-bit shard rounded from it and the fp32 master shard). `mp`: the
  /// precision (the model's activation dtype must match it).
  /// `constant_buffer_mb` > 0: ZeRO-R's constant buffer for the gradients (0: off; a bad value
  /// throws std::invalid_argument with constant_buffer_mb_error's message). `tile_factor` k: 1
  /// gathers whole units; k ≥ 2 tiles each block linear into k (TileGatherer; k ≤ C). Requires
  /// L ≥ 1. On a device (model.device() != kCPU; fp32, bf16 or fp16): the shards, m, v (the
  /// master shard) and every gathered unit on it; throws std::invalid_argument naming the flag when constant_buffer_mb > 0 or k > 1
  /// there (both are host buffers). `offload_optimizer`: ZeRO-Offload (common/train/offload.h):
  /// the gradient shard, an fp32 master shard and m, v on the host, AdamW on the CPU, the updated
  /// shard copied up (16-bit: rounded on the host, 2 bytes per element); needs a model on a
  /// device (else std::invalid_argument).
  Zero3Strategy(const GPT& model, ProcessGroup& dp, AdamWConfig opt, uint64_t seed,
                MixedPrecisionConfig mp = {}, double constant_buffer_mb = 0, int tile_factor = 1,
                bool offload_optimizer = false);

  BatchSlice batch_slice(int global_batch) const override;
  /// Collective. tokens/targets: (B/N, T). Sends zero3_bytes_per_step(layout, N) bytes.
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  /// Collective (gathers every unit once: the forward part of the schedule).
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  /// Collective. Mixed precision: `params` are the fp32 master weights (gathered from the shards).
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  /// Mixed precision: the master shard from `params`, the 16-bit shard rounded from it.
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Steady-state memory against (4+4+8)⌈Ψ/N⌉ (mixed (2+2+12)⌈Ψ/N⌉), peak parameters and
  /// gradients in the last step, and bytes sent in the last step, each next to its closed form.
  /// With the constant buffer also "comm buffer, peak in step" next to the bound "cap".
  std::vector<ReportRow> report() const override;

  const ShardLayout& shards() const { return shards_; }
  /// This rank's parameter shard: S elements, f32 or 16-bit.
  const Tensor& param_shard() const { return param_shard_; }
  AdamW& optimizer() { return opt_; }
  double last_step_bytes() const { return last_step_bytes_; }
  /// Peak bytes counted as kParameters during the last train_step.
  int64_t last_step_peak_params() const { return last_step_peak_params_; }
  /// all-gathers of unit u during the last train_step (of a tiled block: its rest).
  int last_step_gathers(int u) const { return last_step_gathers_.at(u); }
  /// The constant buffer's bytes (0: off) and the reduce-scatters (chunks) of the last step.
  int64_t constant_buffer_cap() const { return cb_bytes_; }
  int last_step_chunks() const { return last_step_chunks_; }
  int tile_factor() const { return tile_factor_; }
  /// Tiled (k ≥ 2): the most tile bytes alive at once in the last train_step, and the tiles
  /// all-gathered in it (TileGatherer's counts). 0 when k = 1.
  int64_t last_step_peak_tile_bytes() const { return last_step_peak_tile_bytes_; }
  int last_step_tile_gathers() const { return last_step_tile_gathers_; }

 private:
  /// The walk (unit_runner.h) with the UnitGatherer as its ParamSource and, when `grads`,
  /// ReduceScatterGrads as its GradSink. Returns this rank's loss_scale·Σ loss (training) or
  /// its mean loss (evaluation).
  double run_walk(const int32_t* tokens, const int32_t* targets, int B, int T, float loss_scale,
                  bool grads);

  const GPT& model_;
  ProcessGroup& dp_;
  ShardLayout shards_;
  Tensor param_shard_;  // S: parameters [r·S, r·S + count(r)) (padded), in mp_.dtype()
  Tensor grad_shard_;   // S: the summed gradients of this rank's shard, in mp_.dtype()
  AdamW opt_;           // m, v (and the fp32 master weights when 16-bit): S each
  bool offload_;        // ZeRO-Offload: grad_shard_ and opt_ on the host, and offloaded_
  std::unique_ptr<OffloadedShard> offloaded_;  // the host side of the shard (offload.h)
  MetricsReducer metrics_;
  double last_step_bytes_ = 0;
  int64_t last_step_peak_params_ = 0, last_step_peak_grads_ = 0;
  std::vector<int> last_step_gathers_;
  int64_t cb_bytes_ = 0;  // the constant buffer's bytes; 0: one reduce-scatter per unit
  int64_t last_step_peak_cb_ = 0;
  int last_step_chunks_ = 0;
  int tile_factor_ = 1;
  int64_t last_step_peak_tile_bytes_ = 0;
  int last_step_tile_gathers_ = 0;
};

}  // namespace llmp
