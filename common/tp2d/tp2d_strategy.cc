// Tp2p5dStrategy (see tp2d_strategy.h).
#include "common/tp2d/tp2d_strategy.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/plan/tp2d_formulas.h"
#include "common/tensor/memory.h"
#include "common/train/dp_util.h"

namespace llmp {
namespace {

int64_t calls(const ProcessGroup& g) {
  int64_t n = 0;
  for (const auto& kv : g.stats().calls) n += kv.second;
  return n;
}

}  // namespace

Tp2p5dStrategy::Tp2p5dStrategy(const GPTConfig& cfg, ProcessGroup& all, int depth,
                               AdamWConfig opt, uint64_t seed, Device device) {
  grid_ = std::make_unique<Grid2p5d>(all, depth);  // throws when P ≠ d·q²
  state_group_ = all.duplicate();
  // Throws when q does not divide H, C, V.
  model_ = std::make_unique<Gpt2p5d>(cfg, *grid_, device);
  const Layout2p5d& lay = model_->layout();
  const int64_t n = lay.num_params();
  params_ = Tensor::empty({n}, DType::kF32, MemCategory::kParameters, device);
  grads_ = Tensor::zeros({n}, DType::kF32, MemCategory::kGradients, device);
  opt_ = std::make_unique<AdamW>(n, opt, lay.decay_ranges(opt.decay), DType::kF32, device);
  const GPT whole(cfg);  // the same initialisation as every stage, then this rank's blocks
  std::vector<float> full(whole.layout().num_params()), local(n);
  whole.init_params(full.data(), seed);
  lay.copy_from_full(full.data(), local.data());
  from_host(params_, local.data());  // copied up once on a device: 4Ψ_local
  clip_ = GradClip(opt.clip_grad, &all);  // collective over all P ranks when clipping
}

std::vector<Tensor> Tp2p5dStrategy::owned_grads() const {
  if (grid_->h() != 0) return {};  // depth layers > 0: replicas of layer 0
  // Row i = 0: its vector blocks and matrices (the whole buffer, one view); other rows: the
  // matrix blocks after the vectors.
  OwnedRanges owned;
  const Layout2p5d& lay = model_->layout();
  for (const Part2p5d& p : lay.parts())
    if (lay.counts_once(p)) owned.add(p.offset, p.numel());
  return owned.views(grads_);
}

BatchSlice Tp2p5dStrategy::batch_slice(int global_batch) const {
  const int d = grid_->d();
  return {grid_->h() * (global_batch / d), global_batch / d};
}

double Tp2p5dStrategy::train_step(const int32_t* tokens, const int32_t* targets, int global_batch,
                                  int T, int64_t step) {
  const int d = grid_->d(), q = grid_->q();
  if (global_batch % (d * q) != 0)
    throw std::invalid_argument("global batch " + std::to_string(global_batch) +
                                " is not divisible by d·q = " + std::to_string(d * q));
  ProcessGroup &row = grid_->row(), &col = grid_->col(), &dep = grid_->depth();
  const double r0 = row.stats().total_bytes(), c0 = col.stats().total_bytes(),
               d0 = dep.stats().total_bytes();
  const int64_t n0 = calls(row) + calls(col) + calls(dep);
  // 1. The walk: loss summed over this depth layer, gradients of this rank's rows.
  grads_.fill(0.0f);
  double loss = model_->forward_backward(params_.f32(), grads_.f32(), tokens, targets,
                                         global_batch / d, T,
                                         1.0f / (static_cast<float>(global_batch) * T));
  Tensor total = Tensor::empty({1}, DType::kF64, MemCategory::kCommBuffers);
  total.f64()[0] = loss;
  dep.all_reduce(total);  // Σ over depth layers: 2(d-1)/d·8
  loss = total.f64()[0] / (double(global_batch) * T);
  // 2. Vectors (first in the buffer) over the column group, then everything over depth.
  const Layout2p5d& lay = model_->layout();
  Tensor vec = grads_.narrow(0, lay.num_vector_params());
  col.all_reduce(vec);     // 2(q-1)/q·4Ψ_vec
  dep.all_reduce(grads_);  // 2(d-1)/d·4Ψ_local
  // 3. --clip_grad: ‖g‖² = Σ over all P ranks of owned_grads()' squares (one 8-byte all_reduce
  //    on its own duplicate of the group: the row, column and depth counts stay the formulas').
  const float clip = clip_.coefficient(owned_grads());
  // 4. AdamW on this rank's blocks (replicas take the same step), times the coefficient.
  opt_->step(params_.f32(), grads_.f32(), step, -1, clip);
  row_bytes_ = row.stats().total_bytes() - r0;
  col_bytes_ = col.stats().total_bytes() - c0;
  depth_bytes_ = dep.stats().total_bytes() - d0;
  calls_ = double(calls(row) + calls(col) + calls(dep) - n0);
  last_B_ = global_batch, last_T_ = T;
  return loss;
}

double Tp2p5dStrategy::eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                                 int T) {
  const int d = grid_->d();
  double loss = model_->forward_backward(params_.f32(), nullptr, tokens, targets,
                                         global_batch / d, T, 1.0f);
  Tensor total = Tensor::empty({1}, DType::kF64, MemCategory::kCommBuffers);
  total.f64()[0] = loss;
  grid_->depth().all_reduce(total);
  return total.f64()[0] / (double(global_batch) * T);
}

void Tp2p5dStrategy::all_to_full(const float* local, float* full) {
  // Every tensor written once: matrices by depth layer 0, vectors by (h, i) = (0, 0); the rest
  // add zeros. One all_reduce of Ψ floats (not part of a step; its own group's CommStats).
  const Layout2p5d& lay = model_->layout();
  const int64_t psi = GPTLayout(model_->config()).num_params();
  Tensor buf = Tensor::zeros({psi}, DType::kF32, MemCategory::kCommBuffers);
  if (grid_->h() == 0) {
    for (const Part2p5d& a : lay.parts()) {
      if (!a.matrix && grid_->i() != 0) continue;
      for (int64_t r = 0; r < a.rows; ++r)
        for (int64_t c = 0; c < a.cols; ++c)
          buf.f32()[a.global_offset + (a.r0 + r) * a.Cw + a.global_col(c)] =
              local[a.offset + r * a.cols + c];
    }
  }
  state_group_->all_reduce(buf);
  std::copy(buf.f32(), buf.f32() + psi, full);
}

void Tp2p5dStrategy::get_state(float* params, float* exp_avg, float* exp_avg_sq) {
  // Each state's blocks down to the host (4Ψ_local bytes; a copy on the CPU), gathered there.
  std::vector<float> local(params_.numel());
  for (const auto& [state, out] : {std::pair<const Tensor*, float*>{&params_, params},
                                   {&opt_->exp_avg(), exp_avg},
                                   {&opt_->exp_avg_sq(), exp_avg_sq}}) {
    to_host(local.data(), *state);
    all_to_full(local.data(), out);
  }
}

void Tp2p5dStrategy::set_state(const float* params, const float* exp_avg,
                               const float* exp_avg_sq) {
  // This rank's blocks of each whole state, cut on the host and copied up (4Ψ_local each).
  const Layout2p5d& lay = model_->layout();
  std::vector<float> local(params_.numel());
  for (const auto& [full, state] : {std::pair<const float*, const Tensor*>{params, &params_},
                                    {exp_avg, &opt_->exp_avg()},
                                    {exp_avg_sq, &opt_->exp_avg_sq()}}) {
    lay.copy_from_full(full, local.data());
    from_host(*state, local.data());
  }
}

std::vector<ReportRow> Tp2p5dStrategy::report() const {
  const GPTConfig& c = model_->config();
  const TpModelDims m{c.vocab, c.ctx, c.layers, c.d, c.heads};
  const int q = grid_->q(), d = grid_->d();
  const double psi = tp2d_params_per_rank(m, q);
  const MemoryTracker& mt = MemoryTracker::instance();
  // Full recomputation runs every block's forward once more: its SUMMA broadcasts and LayerNorm
  // all_reduces again (tp2d_formulas.h). Selective sends nothing more (P is made locally).
  const bool full = c.recompute == Recompute::kFull;
  const bool flash = c.attention == AttentionMethod::kFlash;  // lse kept, not P
  const auto again = [full](std::string text, const char* extra) {
    return full ? text + " + recompute " + extra : text;
  };
  ReportRow calls_row{"collective calls per step", calls_,
                      tp2d_calls_per_step(m, q) + (full ? tp2d_recompute_calls_per_step(m, q) : 0),
                      full ? "row (12L+3)q+6L+5, column (12L+3)q+4, depth 2 + L(8q+4) (recompute)"
                           : "row (12L+3)q+6L+5, column (12L+3)q+4, depth 2"};
  calls_row.count = true;
  return {
      {"parameters", double(mt.current(MemCategory::kParameters)), 4 * psi,
       "4Ψ_local = 4((ctx·C+13LC+2C)/q + (VC+12LC²)/q²)"},
      {"gradients", double(mt.current(MemCategory::kGradients)), 4 * psi, "4Ψ_local"},
      {"optimizer state", double(mt.current(MemCategory::kOptimizerState)), 8 * psi, "8Ψ_local"},
      {"activations per block", double(model_->block_kept_bytes()),
       tp2d_activation_bytes_per_block(m, last_B_, last_T_, q, d, c.recompute,
                                       c.recompute_every, flash),
       tp2d_activation_formula_text(c.recompute, flash)},
      {"sent per step (row group)", row_bytes_,
       tp2d_row_bytes_per_step(m, last_B_, last_T_, q, d) +
           (full ? tp2d_recompute_row_bytes_per_step(m, last_B_, last_T_, q, d) : 0),
       again("84LNC + 12NV + 2(q-1)/q·(16(2L+1)N + 12N)", "L(28NC + 2(q-1)/q·16N)")},
      {"sent per step (column group)", col_bytes_,
       tp2d_column_bytes_per_step(m, last_B_, last_T_, q, d) +
           (full ? tp2d_recompute_column_bytes_per_step(m, q) : 0),
       again("(144LC² + 12VC)/q + 2(q-1)/q·(4NC + 8 + 4Ψ_vec)", "48LC²/q")},
      {"sent per step (depth group)", depth_bytes_, tp2d_depth_bytes_per_step(m, q, d),
       "2(d-1)/d·(8 + 4Ψ_local)"},
      calls_row};
}

}  // namespace llmp
