// Tp2p5dStrategy: Tesseract's 2.5D tensor parallelism (Wang et al. 2021) on P = d·q² ranks, and
// Optimus's 2D (Xu et al. 2021, on SUMMA) as d = 1, as a Strategy (common/train/strategy.h). The
// stages tp_2d and tp_2p5d are this class.
//
// The global batch is split over depth (depth layer h reads sequences [h·B/d, (h+1)·B/d)) and,
// inside a layer, over the grid's rows; weights are in q×q blocks replicated over depth. One step:
//   1. the walk (gpt_2p5d.h) over this rank's blocks: SUMMA products, LayerNorm and
//      cross-entropy over the row group, embedding over the column group;
//   2. the vector parameters' gradients (wpe, LayerNorms, biases: column blocks held by every
//      row i) all_reduced over the column group, then every gradient all_reduced over the depth
//      group (Tesseract's replicas); none over rows/columns for the matrices (SUMMA's reduce
//      already summed them);
//   3. --clip_grad: ‖g‖² summed over all P ranks from the elements each owns (the matrix blocks on
//      depth layer 0, the vector blocks on its row 0: the same elements get_state writes), one
//      8-byte all_reduce (common/optim/grad_clip.h);
//   4. AdamW on this rank's Ψ_local parameters, the gradients times the clipping coefficient.
// The loss is summed over the row group (grid_cross_entropy), the column group and depth, so every
// rank returns the global mean. get_state/set_state use the whole model's GPT-2 order.
//
// On a GPU (--device cuda, fp32): the walk runs on `device` (Gpt2p5d's kernel_ops(device)), and
// the parameters, gradients, AdamW's m and v and every activation and broadcast/reduce buffer are
// device memory; the row, column and depth groups get device tensors (an MPI backend stages them
// through host buffers, common/comm/process_group_staging.h). What else crosses to the host: the
// initial blocks, once (4Ψ_local up); each step's ids (the depth layer's B/d·T tokens and the row
// block's targets, up); get_state's blocks (4Ψ_local down per state, gathered on the host) and
// set_state's (up).
//
// Glossary: P = d·q² ranks, q grid side, d depth, B global batch, T sequence, Ψ_local
// parameters per rank (tp2d_formulas.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/optim/adamw.h"
#include "common/optim/grad_clip.h"
#include "common/tp2d/gpt_2p5d.h"
#include "common/tp2d/grid_2p5d.h"
#include "common/train/strategy.h"

namespace llmp {

class Tp2p5dStrategy : public Strategy {
 public:
  /// Collective over `all` (P = depth·q² ranks). Every rank initialises the whole model from
  /// `seed` and keeps its blocks. Throws std::invalid_argument naming the values when P is not
  /// depth·q² or q does not divide H, C, 4C and V. `device`: where the walk, the parameters,
  /// gradients and optimizer state live (Device::kCUDA: --device cuda, fp32).
  Tp2p5dStrategy(const GPTConfig& cfg, ProcessGroup& all, int depth, AdamWConfig opt,
                 uint64_t seed, Device device = Device::kCPU);

  /// Depth layer h's B/d sequences (B must be divisible by d·q; train_step throws otherwise).
  BatchSlice batch_slice(int global_batch) const override;
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Memory against Ψ_local, activations per block, bytes per group and collective calls in the
  /// last step against tp2d_formulas.h.
  std::vector<ReportRow> report() const override;
  /// --clip_grad: the last step's global gradient norm (grad_clip.h), "" without clipping.
  std::string step_note() const override { return clip_.step_note(); }

  const Grid2p5d& grid() const { return *grid_; }
  const Layout2p5d& layout() const { return model_->layout(); }
  /// This rank's Ψ_local parameters (layout() order), on the strategy's device.
  const Tensor& local_params() const { return params_; }
  /// Bytes and calls of the last step on the row, column and depth group.
  double last_row_bytes() const { return row_bytes_; }
  double last_column_bytes() const { return col_bytes_; }
  double last_depth_bytes() const { return depth_bytes_; }
  double last_calls() const { return calls_; }

 private:
  void all_to_full(const float* local, float* full);  // get_state's gather
  /// The gradient elements this rank counts in ‖g‖ (--clip_grad): every tensor once over the
  /// P ranks. Depth layers are replicas (none on h > 0); a vector block is held by every row i
  /// of its column (row 0's); a matrix block by one rank of the layer.
  std::vector<Tensor> owned_grads() const;

  std::unique_ptr<Grid2p5d> grid_;
  std::shared_ptr<ProcessGroup> state_group_;  // get_state only: own CommStats
  std::unique_ptr<Gpt2p5d> model_;
  Tensor params_, grads_;       // Ψ_local each
  std::unique_ptr<AdamW> opt_;  // m, v: Ψ_local each
  GradClip clip_{0, nullptr};   // --clip_grad: ‖g‖² summed over all P ranks from owned_grads()
  double row_bytes_ = 0, col_bytes_ = 0, depth_bytes_ = 0, calls_ = 0;
  int last_B_ = 0, last_T_ = 0;
};

}  // namespace llmp
