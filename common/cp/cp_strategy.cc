// The context-parallel strategy (cp_strategy.h): the step, and the report of what it measured.
#include "common/cp/cp_strategy.h"

#include <stdexcept>
#include <string>

#include "common/cp/forwarding_core.h"
#include "common/cp/widened_core.h"
#include "common/nn/recompute.h"
#include "common/nn/unit_runner.h"
#include "common/optim/decay_mask.h"
#include "common/plan/memory_planner.h"
#include "common/plan/recompute_formulas.h"
#include "common/runtime/log.h"
#include "kernels/cpu/flops.h"

namespace llmp {
namespace {

/// The core, with the FLOPs its forwards ran counted (kernels/cpu/flops.h around each call):
/// what the load-balance row measures. Everything else is passed through.
class MeteredCore : public ForwardingCore {
 public:
  using ForwardingCore::ForwardingCore;
  int64_t forward_flops = 0;

  void forward(const Tensor& qkv, Tensor& out, int B, int T, int H, AttentionKeep* keep) override {
    const int64_t before = cpu::flops_done();
    ForwardingCore::forward(qkv, out, B, T, H, keep);
    forward_flops += cpu::flops_done() - before;
  }
};

/// The stage's core over `group` for activations in `dt`: as made when it takes them (its closed
/// forms then count dt's bytes), else inside a WidenedCore (fp32 inside, widened_core.h).
std::unique_ptr<AttentionCore> core_for(const CoreFactory& make, ProcessGroup& group, DType dt) {
  std::unique_ptr<AttentionCore> core = make(group);
  if (dt != DType::kF32 && !core->takes_16bit())
    return std::make_unique<WidenedCore>(std::move(core));
  core->set_storage(dt);
  return core;
}

int64_t call_count(const CommStats& s) {
  int64_t n = 0;
  for (const auto& [op, calls] : s.calls)
    if (op != "recv" && op != "barrier") n += calls;  // sends and collectives, not receives
  return n;
}

}  // namespace

GridShape context_parallel_grid(int world_size) { return {1, 1, world_size}; }

ContextParallelStrategy::ContextParallelStrategy(const GPT& model, ProcessGroup& group,
                                                 const CoreFactory& make_core, AdamWConfig opt,
                                                 uint64_t seed, MixedPrecisionConfig mp)
    : MixedPrecisionStrategy(model, mp, &group,
                             GradClip(opt.clip_grad, nullptr)),  // a replica owns the whole g
      base_(model),
      group_(group),
      attn_group_(group.duplicate()),
      core_(std::make_unique<MeteredCore>(
          core_for(make_core, *attn_group_, storage_dtype(mp.precision)))),
      model_(model.with_attention_core(core_.get())),
      // --device cuda: the parameters, gradients and AdamW's state on the model's device.
      params_(mp_.new_buffer(model.layout().num_params(), MemCategory::kParameters)),
      grads_(mp_.new_buffer(model.layout().num_params(), MemCategory::kGradients)),
      opt_(model.layout().num_params(), opt, decay_ranges(model.layout(), opt.decay), mp_.dtype(),
           model.device()),
      metrics_(group) {
  const GPTConfig& c = model.config();
  if (c.recompute == Recompute::kSelective)
    throw std::invalid_argument(
        "context parallelism recomputes whole blocks only (recompute full): selective "
        "recomputation drops the whole-sequence attention's probabilities, and a core keeps what "
        "its method keeps");
  // Same seed on every rank: same replicas (and master copies). On a device: initialised on the
  // host, one copy up (4Ψ bytes in fp32).
  mp_.init(seed, params_, opt_);
}

double ContextParallelStrategy::train_step(const int32_t* tokens, const int32_t* targets,
                                           int global_batch, int T, int64_t step) {
  const int B = global_batch;
  auto& metered = static_cast<MeteredCore&>(*core_);
  const double grad_bytes = group_.stats().total_bytes();
  const double attn_bytes = attn_group_->stats().total_bytes();
  const int64_t attn_calls = call_count(attn_group_->stats());
  metered.forward_flops = 0;
  MemoryTracker::instance().reset_peak();
  const RecomputeMeter& meter = RecomputeMeter::instance();
  const int64_t recomputed_flops = meter.recomputed_flops, recomputed = meter.recomputed_blocks,
                checkpoint_down = meter.checkpoint_bytes_down;
  // 1. Forward and backward of this rank's Tl positions of every sequence; the loss scale is the
  //    global 1/(B·T), so the ranks' gradients (and losses) sum to the global mean's. Mixed
  //    precision: each unit's gradient summed in fp32, rounded once into the 16-bit buffer
  //    (FlatGrads); fp16 scales the loss by S.
  grads_.fill(0.0f);
  mp_.begin_step();
  const float scale = 1.0f / (static_cast<float>(B) * T);
  FlatParams params(model_.layout(), params_);
  FlatGrads grads(model_.layout(), grads_, {}, mp_.round_stats());
  const double local = UnitRunner(model_, params, &grads)
                           .forward_backward(tokens, targets, B, T,
                                             mp_.walk_loss_scale(scale, step));
  last_score_peak_ = MemoryTracker::instance().peak(MemTag::kAttentionScores);
  last_kept_per_block_ = meter.bytes_per_block();
  last_recomputed_flops_ = meter.recomputed_flops - recomputed_flops;
  last_checkpoint_bytes_down_ = meter.checkpoint_bytes_down - checkpoint_down;
  last_recomputed_blocks_ = meter.recomputed_blocks - recomputed;
  // 2. Σ over the ranks of every weight's gradient: each rank saw other tokens of the same
  //    sequences with the same weights, in the buffer's dtype.           sends 2(p-1)/p·4Ψ
  //    (mixed: 2(p-1)/p·2Ψ; on a device the MPI backend stages the buffer down and up)
  group_.all_reduce(grads_, ReduceOp::kSum);
  // 3. The same update everywhere (--clip_grad: scaled by min(1, c/‖g‖), ‖g‖ of this rank's
  //    copy of the whole summed gradient, the same on every rank); fp16 skips it on every rank
  //    when any summed gradient is inf or nan (agreed over the group).
  mp_.optimizer_step(opt_, params_, grads_, step, -1, &clip_);
  last_grad_bytes_ = group_.stats().total_bytes() - grad_bytes;
  last_attn_bytes_ = attn_group_->stats().total_bytes() - attn_bytes;
  last_attn_calls_ = call_count(attn_group_->stats()) - attn_calls;
  last_attn_flops_ = metered.forward_flops;
  last_B_ = B, last_T_ = T;
  return metrics_.sum(mp_.unscale_loss(local, scale, step));  // fp16: divided by the S used
}

double ContextParallelStrategy::eval_loss(const int32_t* tokens, const int32_t* targets,
                                          int global_batch, int T) {
  // forward_loss is this rank's Σ over its tokens / (B·T): the ranks' parts sum to the mean.
  // 16-bit parameters are widened unit by unit as the walk reads them (FlatParams).
  FlatParams params(model_.layout(), params_);
  return metrics_.sum(UnitRunner(model_, params).forward_loss(tokens, targets, global_batch, T));
}

void ContextParallelStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  copy_replicated_state_out(params_, opt_, params, exp_avg, exp_avg_sq);
}

void ContextParallelStrategy::set_state(const float* params, const float* exp_avg,
                                        const float* exp_avg_sq) {
  copy_replicated_state_in(params_, opt_, params, exp_avg, exp_avg_sq);
}

std::vector<ReportRow> ContextParallelStrategy::report() const {
  const double psi = static_cast<double>(params_.numel());
  const int p = group_.size();
  const GPTConfig& c = base_.config();
  const int B = last_B_, T = last_T_, L = c.layers, A = c.d, H = c.heads;
  const bool mixed = mp_.mixed();
  // --recompute full: every block's forward runs twice (the walk drops its cache and runs it
  // again from the nearest kept input before its backward), the core's communication with it;
  // R = L block forwards recomputed per step. k: --recompute_every.
  const bool full = c.recompute == Recompute::kFull;
  const int R = full ? L : 0, k = c.recompute_every;
  const MemoryPlan plan = plan_memory(DPStage::kNaiveDP, psi, p, mp_.plan());
  auto rows = mixed ? memory_rows(plan, "2Ψ", "2Ψ", "12Ψ") : memory_rows(plan, "4Ψ", "4Ψ", "8Ψ");
  rows.push_back({"gradient all_reduce/step", last_grad_bytes_,
                  plan_bytes_per_step(DPStage::kNaiveDP, psi, p, mp_.plan().grad_bytes),
                  mixed ? "2(p-1)/p·2Ψ" : "2(p-1)/p·4Ψ"});
  rows.push_back({"attention sent/step", last_attn_bytes_,
                  L * core_->bytes_per_block(B, T, A, H) +
                      R * core_->forward_bytes_per_block(B, T, A, H),
                  "L·" + core_->bytes_formula_text() + (full ? " + L·forward's" : "")});
  // Recomputed, a block's scores live from its forward run again to its backward: those of one
  // segment of k blocks at a time (the formula's L read as k).
  rows.push_back({"peak attention scores", static_cast<double>(last_score_peak_),
                  core_->peak_score_bytes(B, T, A, H, full ? k : L),
                  core_->peak_score_formula_text() + (full ? ", L = k" : "")});
  // Kept per block: the per-token tensors of Tl rows without probabilities (the selective row
  // of recompute_formulas.h, in e-byte activations), plus what the core keeps instead.
  // Recomputed: the block inputs kept, every k-th (recompute_formulas.h's full row, s/p rows).
  const RecomputeDims d{B, T / p, A, H, L};
  const int e = static_cast<int>(dtype_size(mp_.dtype()));
  if (full) {
    rows.push_back({"activations kept per block (full" +
                        (k > 1 ? ", every " + std::to_string(k) : std::string()) + ")",
                    last_kept_per_block_, activation_bytes_per_block(d, Recompute::kFull, k, e),
                    std::string(activation_formula_text(Recompute::kFull, k, e, false)) +
                        ", s/p rows"});
  } else {
    rows.push_back({"activations kept per block", last_kept_per_block_,
                    activation_bytes_per_block(d, Recompute::kSelective, 1, e) +
                        core_->kept_bytes_per_block(B, T, A, H),
                    e == 4 ? "(s/p)b(64h+16) + keep" : "(s/p)b(32h+16) + keep"});
  }
  ReportRow flops{"attention fwd FLOPs/step", static_cast<double>(last_attn_flops_),
                  (L + R) * core_->forward_flops_per_block(B, T, A, H),
                  full ? "2L·core" : "L·core"};
  flops.flops = true;
  rows.push_back(flops);
  if (full) {
    // The blocks' forwards run again: their linear layers on B·T/p rows (24·h² per row: c_attn
    // 6h², attn.c_proj 2h², c_fc 8h², mlp.c_proj 8h²) and the core's attention, which is not
    // the whole-sequence walk's (recompute_report.h): so this stage reports the row itself.
    ReportRow rec{"recomputed forward FLOPs per step", static_cast<double>(last_recomputed_flops_),
                  R * (24.0 * B * (double(T) / p) * A * A +
                       core_->forward_flops_per_block(B, T, A, H)),
                  "L·(24b(s/p)h² + core)"};
    rec.flops = true;
    rows.push_back(rec);
    if (c.cpu_checkpoints && base_.device() != Device::kCPU) {
      // ZeRO-R's Pa+cpu: each kept block input (this rank's T/p rows) went down after its
      // forward and came back before its recomputation, once each per step.
      rows.push_back({"checkpoints copied to the host per step (and back)",
                      static_cast<double>(last_checkpoint_bytes_down_),
                      double((L + k - 1) / k) * B * (double(T) / p) * A * e,
                      "⌈L/k⌉·b·(s/p)·h·" + std::to_string(e)});
    }
  }
  return rows;
}

void ContextParallelStrategy::finish() {
  // --recompute full: each block's forward calls again.
  const bool full = base_.config().recompute == Recompute::kFull;
  const int calls = core_->calls_per_block(), again = full ? core_->forward_calls_per_block() : 0;
  const std::string form = full ? fmt::format("({} + {} recomputed)", calls, again)
                                : std::to_string(calls);
  log_all_ranks("{}: {} attention calls per step (sends and collectives; closed form L·{} = {})",
                core_->name(), last_attn_calls_, form, base_.config().layers * (calls + again));
}

}  // namespace llmp
