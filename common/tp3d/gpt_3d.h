// The GPT's walk on a 3D tensor-parallel cube (Bian et al. 2021; Colossal-AI's parallel_3d
// layers): embedding → L pre-LN blocks → ln_f → tied head + cross-entropy, and back, with every
// activation in layout A or B and every weight in the pieces of layout_3d.h.
//
// Why not common/nn's walk: there every matmul is a whole (or Megatron-1D) product and every
// LayerNorm sees whole rows; here every linear is a 3-collective SUMMA-like product
// (linear_3d.h), every LayerNorm's row is split over the l-axis group (grid_layernorm.h), the
// embedding's vocabulary over a plane and the head's vocabulary over the j-axis group
// (grid_cross_entropy.h). The per-element math is the same kernels (kernels/cpu); equivalence
// against the single-rank baseline (stages/tp_3d tests) is what shows it is the same model.
//
//   embed   x_A = reduce_scatter over plane(l) of wte_piece[tokens] (all M rows) + wpe[:, l]
//   block   h = x + c_proj(attn(c_attn(ln_1(x))));  y = h + mlp.c_proj(gelu(c_fc(ln_2(h))))
//           ln in A, c_attn/c_fc A→B, attention and GELU local in B, c_proj B→A
//   head    logits_B = ln_f(x) @ wteᵀ (A→B, transposed), loss by grid_cross_entropy over the
//           j-axis group, Σ over plane(j), × 1/(B·T)
// Then every layout-A vector's gradient is all-reduced over plane(l), every layout-B vector's
// over plane(j), each packed into one call.
//
// Flash attention (cfg.attention): the shared flash attention on the rank's q|k|v (layout B:
// whole sequences of H/q heads), lse kept instead of P; its backward reads the attention output
// as sub-block l of attn.c_proj's gathered input (kept anyway).
//
// Activation recomputation (cfg.recompute, common/nn/recompute.h), training walks only:
// selective drops each block's P and makes it again from q and k in the backward (local: the
// heads and whole sequences are the rank's); full keeps only the inputs x of blocks l % k == 0
// (k = cfg.recompute_every) and runs each segment's forwards again before its backward, their
// 3D linears' all_gathers and reduce_scatters and the LayerNorms' all_reduces with them
// (tp3d_formulas.h). Bit-identical to none.
//
// On a device (`device`, Device::kCUDA, fp32): params, grads and every activation and collective
// buffer are that device's memory, every kernel is kernel_ops(device)'s, and each call copies its
// ids up (all B·T tokens, the m targets of this rank's rows: 4(B·T + m) bytes). The loss's sum
// is a host double (the cross-entropy kernel returns it).
//
// Glossary: B batch (sequences, q² | B), T sequence, C channels, H heads, V vocab, L layers,
// q cube side, m = B·T/q² rows a rank holds in either layout.
#pragma once

#include <cstdint>
#include <vector>

#include "common/nn/gpt.h"
#include "common/tensor/tensor.h"
#include "common/tp3d/cube.h"
#include "common/tp3d/layout_3d.h"
#include "common/tp3d/linear_3d.h"
#include "common/tp_grid/local_attention.h"

namespace llmp {

/// What one block's forward keeps for its backward (all kActivations); m rows, Cq = C/q.
struct Block3dCache {
  Tensor x;                    ///< (m, Cq) the block input, layout A
  Tensor ln1_mean, ln1_rstd;   ///< (m)
  Tensor ln1_g;                ///< (q·m, Cq) ln_1(x) gathered over the j-axis (c_attn's X_g)
  Tensor qkv;                  ///< (m, 3Cq) layout B: q|k|v of H/q heads
  LocalAttentionKeep attn;     ///< P (B/q², H/q, T, T), or (flash) lse (B/q², H/q, T)
  Tensor atty_g;               ///< (q·m, Cq) attention output gathered over l (c_proj's X_g)
  Tensor res1;                 ///< (m, Cq) x + attention sub-layer, layout A
  Tensor ln2_mean, ln2_rstd;   ///< (m)
  Tensor ln2_g;                ///< (q·m, Cq) c_fc's X_g
  Tensor fch;                  ///< (m, 4Cq) layout B, before GELU
  Tensor fch_gelu_g;           ///< (q·m, 4Cq) GELU output gathered over l (mlp.c_proj's X_g)
  /// Bytes of the tensors held.
  int64_t bytes() const;
};

class Gpt3d {
 public:
  /// Throws std::invalid_argument as Layout3d. `cube` must outlive the model. `device`: where
  /// params, grads and the activations live and the kernels run.
  Gpt3d(const GPTConfig& cfg, Cube& cube, Device device = Device::kCPU);
  Device device() const { return dev_; }
  const GPTConfig& config() const { return cfg_; }
  const Layout3d& layout() const { return layout_; }

  /// Mean loss over the whole batch (the same on every rank). tokens, targets (B,T): every rank
  /// reads the whole batch (host memory). params: layout().num_params() floats on the model's
  /// device. With grads (same size, same device): grads += ∂loss/∂params, replicated vectors'
  /// gradients summed over their planes. Collective over the cube. Throws std::invalid_argument
  /// unless q² | B.
  double forward_backward(const Tensor& params, Tensor* grads, const int32_t* tokens,
                          const int32_t* targets, int B, int T);
  /// Bytes one block's forward kept in the last call (averaged over the L blocks): its cache,
  /// without P under selective recomputation, only the checkpoints x under full.
  double last_block_bytes() const { return block_bytes_; }

 private:
  Tensor block_forward(int layer, const Tensor& params, const Tensor& x, int Bl, int T,
                       Block3dCache* c);
  Tensor block_backward(int layer, const Tensor& params, Tensor& grads, Block3dCache* c,
                        const Tensor& dy, int Bl, int T);
  /// Full recomputation: the caches of `layer` and of its segment's earlier blocks made again
  /// from the nearest checkpoint (a cache holding only x); counted in RecomputeMeter.
  void recompute(int layer, const Tensor& params, std::vector<Block3dCache>& caches, int Bl,
                 int T);
  /// A view of tensor `name` in `buf` (this rank's block of it).
  Tensor view(const Tensor& buf, const std::string& name) const;
  Linear3dGroups a_to_b() const { return {cube_.j_axis.get(), cube_.i_axis.get(), cube_.l_axis.get()}; }
  Linear3dGroups b_to_a() const { return {cube_.l_axis.get(), cube_.i_axis.get(), cube_.j_axis.get()}; }
  void all_reduce_replicated_grads(Tensor& grads);
  /// An fp32 activation of `shape` on the model's device.
  Tensor act(std::vector<int64_t> shape) const;

  GPTConfig cfg_;
  Cube& cube_;
  Layout3d layout_;
  Device dev_;
  double block_bytes_ = 0;
};

}  // namespace llmp
