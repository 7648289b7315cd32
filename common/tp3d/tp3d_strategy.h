// Tp3dStrategy: 3D tensor parallelism (Bian et al. 2021; Colossal-AI's parallel_3d) as a Strategy
// (common/train/strategy.h): P = q³ ranks in a cube (cube.h), every activation and weight split
// three ways (layout_3d.h), the walk of gpt_3d.h. One step:
//   1. forward and backward over the cube (every rank reads the whole global batch: the
//      embedding looks up all tokens in its vocabulary piece; the loss picks its rows' targets);
//   2. the replicated vectors' gradients all-reduced over their planes (inside the walk);
//   3. --clip_grad: ‖g‖² summed over the cube from the elements each rank owns (every weight
//      piece is one rank's; a vector replicated over a plane is counted by the plane's first
//      rank), one 8-byte all_reduce (common/optim/grad_clip.h);
//   4. AdamW on this rank's Ψ_r parameters, the gradients times the clipping coefficient.
// get_state/set_state map the blocks to the whole model's GPT-2 names (GPTLayout(cfg) order), so
// checkpoints are interchangeable with every other stage.
//
// On a GPU (--device cuda, fp32): the walk runs on `device` (Gpt3d's kernel_ops(device)), and
// the parameters, gradients, AdamW's m and v and every activation and collective buffer are
// device memory; the cube's five groups get device tensors (an MPI backend stages them through
// host buffers, common/comm/process_group_staging.h). What else crosses to the host: the initial
// blocks, once (4Ψ_r up); each step's ids (all B·T tokens and this rank's B·T/q² targets, up);
// get_state's blocks (4Ψ_r down per state, gathered on the host over `all`) and set_state's (up).
//
// Glossary: q cube side, P = q³ ranks, Ψ_r parameters per rank (tp3d_formulas.h), B batch, T
// sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/optim/adamw.h"
#include "common/optim/grad_clip.h"
#include "common/tp3d/cube.h"
#include "common/tp3d/gpt_3d.h"
#include "common/train/strategy.h"

namespace llmp {

class Tp3dStrategy : public Strategy {
 public:
  /// Collective over `all` (P = q³ ranks, world order (i·q+j)·q+l). Every rank initialises the
  /// whole model from `seed` and keeps its blocks. Throws std::invalid_argument naming the values
  /// when P is not a cube, or q does not give whole heads, weight pieces and vocabulary pieces.
  /// `device`: where the walk, the parameters, gradients and optimizer state live
  /// (Device::kCUDA: --device cuda, fp32).
  Tp3dStrategy(const GPTConfig& cfg, ProcessGroup& all, AdamWConfig opt, uint64_t seed,
               Device device = Device::kCPU);

  /// The whole batch on every rank (the embedding reads every token; rows are split inside).
  BatchSlice batch_slice(int global_batch) const override { return {0, global_batch}; }
  double train_step(const int32_t* tokens, const int32_t* targets, int global_batch, int T,
                    int64_t step) override;
  double eval_loss(const int32_t* tokens, const int32_t* targets, int global_batch,
                   int T) override;
  void get_state(float* params, float* exp_avg, float* exp_avg_sq) override;
  void set_state(const float* params, const float* exp_avg, const float* exp_avg_sq) override;
  /// Memory rows against 4Ψ_r, 4Ψ_r, 8Ψ_r; activations per block; bytes sent in the last step
  /// per group of the cube; collective calls in the last step (tp3d_formulas.h).
  std::vector<ReportRow> report() const override;
  /// --clip_grad: the last step's global gradient norm (grad_clip.h), "" without clipping.
  std::string step_note() const override { return clip_.step_note(); }

  const Cube& cube() const { return cube_; }
  /// This rank's Ψ_r parameters (layout() order), on the strategy's device.
  const Tensor& local_params() const { return params_; }

 private:
  /// every rank's `local` buffer → the whole model's `full` (Ψ floats). Collective over all_.
  void to_full(const float* local, float* full);
  /// The gradient elements this rank counts in ‖g‖ (--clip_grad), runs of grads_: its weight
  /// pieces (no other rank holds them), the vectors replicated over the plane of its l (layout A)
  /// only at i = j = 0, those over the plane of its j (layout B) only at i = l = 0.
  std::vector<Tensor> owned_grads() const;

  ProcessGroup& all_;
  Cube cube_;
  std::unique_ptr<Gpt3d> model_;
  Tensor params_, grads_;
  std::unique_ptr<AdamW> opt_;
  GradClip clip_{0, nullptr};  // --clip_grad: ‖g‖² summed over all_ from owned_grads()
  double bytes_[5] = {0, 0, 0, 0, 0};  // i, j, l, plane(l), plane(j) in the last step
  int64_t calls_ = 0;
  int last_B_ = 0, last_T_ = 0;
};

}  // namespace llmp
