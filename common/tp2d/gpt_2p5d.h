// Gpt2p5d: the GPT-2 walk (embedding → L pre-LN blocks → ln_f → tied head + cross-entropy, and
// back) on the d×q×q grid of Tesseract (Wang et al. 2021), Optimus's 2D (Xu et al. 2021) at
// d = 1. The same kernels as common/nn (kernels/cpu), but every linear layer is a SUMMA product
// (summa.h) and every LayerNorm's row is split over the row group (common/tp_grid): common/nn's
// walk (Megatron 1D shapes, whole rows on every rank) cannot express either, so the walk is here.
// Equivalence with the single-rank baseline is what shows it computes the same model.
//
// Rank (h,i,j) holds of the residual stream (B·T rows, C columns) the rows of sequence block
// h·q + i of the d·q blocks (Bl = B/(dq) whole sequences, N = Bl·T rows) and channel block j
// (Cl = C/q). Its weight blocks: layout_2p5d.h. One block, with (N,·) this rank's rows:
//   ln1 = LN(x)            grid_layernorm over the row group          (N,Cl)
//   qkv = ln1·Wattn + b    summa_ab                                   (N,Cl)@(Cl,3Cl) → (N,3Cl)
//   a   = attention(qkv)   local: q, k, v of heads j·H/q.. on whole sequences
//   r1  = x + a·Wproj + b  summa_ab                                   (N,Cl)@(Cl,Cl)
//   h   = gelu(LN(r1)·Wfc + b)                                        (N,Cl)@(Cl,4Cl)
//   y   = r1 + h·Wp2 + b                                              (N,4Cl)@(4Cl,Cl)
// backward: dX = summa_abt(dY, W), dW += summa_atb(X, dY), db += Σ_rows dY (this rank's rows).
// Embedding: rank (h,a,j) holds wte block (a,j) (vocabulary block a); it looks up the q·N rows
// of its depth layer's sequences masked to its vocabulary, and a reduce_scatter over the column
// group (h,*,j) sums the q vocabulary blocks and hands sequence block i to rank (h,i,j); the
// backward is the mirrored all_gather and a masked scatter-add. Head: logits_il =
// Σ_j ln_f(x)_ij·wte_ljᵀ (summa_abt), so rank (i,l) holds sequences block i × vocabulary block
// l, and grid_cross_entropy over the row group; no rank holds the (B,T,V) logits.
//
// Flash attention (cfg.attention, common/nn/flash_attention.h): the rank's attention is local
// (whole sequences of its H/q heads), so the shared flash attention runs on its q|k|v block and
// the cache keeps lse (Bl, H/q, T) instead of P.
//
// Activation recomputation (cfg.recompute, common/nn/recompute.h), training walks only:
//   selective  each cache without P (Bl, H/q, T, T); the backward makes it again from q and k
//              (attention_probs), locally: attention needs no communication in this walk.
//   full       only the block inputs x_l with l % k == 0 (k = cfg.recompute_every); right before
//              block l's backward the forwards from its segment's checkpoint run again, their
//              SUMMA broadcasts and LayerNorm all_reduces with them (tp2d_formulas.h has the
//              bytes). Bit-identical to none: the same kernels and collectives on the same inputs.
//
// Glossary: B global batch, Bd = B/d sequences of a depth layer, Bl = Bd/q of a row block,
// N = Bl·T rows, T sequence, C channels (Cl = C/q), H heads, V vocab, L layers, q grid side,
// d depth, (h,i,j) this rank.
#pragma once

#include <cstdint>
#include <vector>

#include "common/nn/gpt.h"
#include "common/tensor/tensor.h"
#include "common/tp2d/grid_2p5d.h"
#include "common/tp2d/layout_2p5d.h"

namespace llmp {

class Gpt2p5d {
 public:
  /// `grid` must outlive the walk. Throws std::invalid_argument as Layout2p5d. `device`: where
  /// params, grads, every activation and buffer of the walk live and its kernels run
  /// (kernel_ops(device)); tokens and targets stay host ids (copied up per call on a device).
  Gpt2p5d(const GPTConfig& cfg, Grid2p5d& grid, Device device = Device::kCPU);
  const GPTConfig& config() const { return cfg_; }
  const Layout2p5d& layout() const { return layout_; }
  Device device() const { return dev_; }

  /// tokens, targets: the Bd = B/d sequences (Bd,T) of this rank's depth layer. Returns the sum of
  /// the per-token losses of this depth layer's q row blocks (the same on every rank of the
  /// layer). With grads (layout().num_params() floats): grads += d(loss_scale·Σ loss)/dparams of
  /// this rank's rows (not yet reduced over the column group or depth). Collective over the
  /// row and column groups. Throws std::invalid_argument when q does not divide Bd.
  double forward_backward(const float* params, float* grads, const int32_t* tokens,
                          const int32_t* targets, int Bd, int T, float loss_scale);
  /// Bytes one block's forward kept for its backward in the last call (kActivations tensors):
  /// its cache (without P under selective recomputation; the block input, kept by the walk, not
  /// counted), or under full recomputation the checkpoints x_l kept over the L blocks, per block.
  int64_t block_kept_bytes() const { return block_bytes_; }

 private:
  struct Cache;  // one block's kept tensors (gpt_2p5d.cc)
  Tensor block_forward(const float* p, int l, const Tensor& x, int Bl, int T, Cache& c);
  Tensor block_backward(const float* p, float* g, int l, const Tensor& x, Cache& c,
                        const Tensor& dy, int Bl, int T);
  /// Full recomputation: block l's cache (and the inputs of its segment) made again from the
  /// nearest kept input at or before it; counted in RecomputeMeter.
  void recompute(const float* p, int l, std::vector<Tensor>& xs, std::vector<Cache>& caches,
                 int Bl, int T);
  const float* at(const float* p, int l, const char* name) const;
  float* at(float* p, int l, const char* name) const;
  Tensor act(int64_t n) const;  ///< an activation kept for the backward, on dev_
  Tensor tmp(int64_t n) const;  ///< a buffer of the walk, on dev_

  GPTConfig cfg_;
  Grid2p5d& g_;
  Layout2p5d layout_;
  Device dev_;
  int64_t block_bytes_ = 0;
};

}  // namespace llmp
