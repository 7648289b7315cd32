// A block's backward split in two passes, B (input gradient) and W (weight gradient), for
// zero-bubble pipeline schedules.
//
// Qi et al. 2024, "Zero Bubble Pipeline Parallelism" (ICLR), §2: the backward of a linear layer
// y = x W + b is two independent products,
//     B:  dx = dy Wᵀ                  needed NOW by the previous stage (critical path)
//     W:  dW += xᵀ dy,  db += Σ dy    needed only by the optimizer step (can fill bubbles)
// GPT::block_backward (common/nn/gpt_block.cc) does both at once. Here B walks the same lines
// upwards computing only the input gradients (dx of every matmul and LayerNorm, attention's
// dqkv, GELU's dfch) and KEEPS the output gradient of each weight layer; W later turns them,
// with the forward's inputs still in the BlockCache, into the weight gradients:
//
//   layer        W needs (from the forward)      and (kept by B)     kept size per token
//   mlp.c_proj   fch_gelu (N,4C)                  dx_out (N,C)        C
//   mlp.c_fc     ln2 (N,C)                        dfch (N,4C)         4C
//   ln_2         res1, ln2_mean, ln2_rstd         dln2 (N,C)          C
//   attn.c_proj  atty (N,C)                       dres1 (N,C)         C
//   attn.c_attn  ln1 (N,C)                        dqkv (N,3C)         3C
//   ln_1         x_in, ln1_mean, ln1_rstd         dln1 (N,C)          C
//
// Cost, stated honestly: between B and W a micro-batch holds 11·N·C extra floats per block
// (the kept gradients), while B frees what only B needed (qkv, att, fch: 7C + H·T per token).
// FLOPs are unchanged: B does the 2·N·C·OC of each dx product, W the 2·N·C·OC of each dW.
// The LayerNorm backward kernel always accumulates dw, db too; B hands it scratch (2C floats)
// and W recomputes them (N·C, negligible next to the matmuls).
//
// Glossary: B batch, T sequence, C channels, H heads, N = B·T rows, OC output features.
#pragma once

#include "common/nn/gpt.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// The output gradients of a block's weight layers, kept by B for W (all kActivations).
struct BlockGradCache {
  Tensor dx_out;  ///< (B,T,C)  d(mlp.c_proj output) = the block's output gradient
  Tensor dfch;    ///< (B,T,4C) d(mlp.c_fc output)
  Tensor dln2;    ///< (B,T,C)  d(ln_2 output)
  Tensor dres1;   ///< (B,T,C)  d(attn.c_proj output) = gradient of the first residual stream
  Tensor dqkv;    ///< (B,T,3C) d(attn.c_attn output)
  Tensor dln1;    ///< (B,T,C)  d(ln_1 output)
};

/// B: dx_in (B,T,C) OVERWRITTEN with dL/dx_in from dx_out (B,T,C); fills `keep`; frees the parts
/// of `cache` that W does not need (qkv, att, fch). block_params: the block's unit.
void block_backward_input(const GPT& model, const float* block_params, const float* x_in,
                          BlockCache* cache, const float* dx_out, float* dx_in,
                          BlockGradCache* keep);

/// W: block_grads += dL/dparams of the block from the forward's cache and B's kept gradients.
void block_backward_weight(const GPT& model, const float* block_params, const float* x_in,
                           const BlockCache& cache, const BlockGradCache& keep,
                           float* block_grads);

}  // namespace llmp
