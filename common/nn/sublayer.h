// The two sub-layers of a pre-LN transformer block, attention (attention.cc) and MLP (mlp.cc),
// each with its forward, its backward in two halves, and its cache:
//
//   attention:  res1 = x    + c_proj(attn(c_attn(ln_1(x))))      (B,Tl,C) -> (B,Tl,C)
//   mlp:        out  = res1 + c_proj(gelu(c_fc(ln_2(res1))))     (B,Tl,C) -> (B,Tl,C)
//
// Both have the same shape: a LayerNorm, a column-parallel linear layer (c_attn, c_fc), a local
// non-linearity (causal attention over this rank's heads, GELU), a row-parallel linear layer
// (c_proj) and the residual. Under tensor parallelism the column-parallel layer's input passes
// through f (TpComm::enter_forward) and the row-parallel layer's output through g
// (TpComm::exit_forward), so one all_reduce forward and one backward per sub-layer (Megatron-LM,
// Shoeybi et al. 2019, §3, Figure 3); on one rank both are the identity.
//
// The backward is split as zero-bubble pipelines need it (Qi et al. 2024, §2): *_backward_input
// ("B", on the critical path) computes the input gradient and keeps in SublayerGrads what
// *_backward_weight ("W", needed only by the optimizer step) turns into the weight gradients.
// Calling one right after the other is the ordinary backward.
//
// The MLP is the seam of a mixture-of-experts layer: an MoE sub-layer replaces mlp_forward /
// mlp_backward_input / mlp_backward_weight with the same inputs and outputs.
//
// Memory-centric tiling (tiled_linear.h): with `tiles`, the four large weights of p are nullptr
// and each linear reads them tile by tile from `tiles` (forward by columns, B by rows); W needs
// no weight. nullptr (the default): the whole weights of p, as every stage but tiled ZeRO-3 runs.
//
// Glossary: B batch, T sequence, Tl = T/s rows of each sequence held (tp_comm.h), C channels,
// n = B·Tl, N = B·T rows, shapes per BlockShape (attn = C/t, qkv = 3C/t, ffn = 4C/t).
#pragma once

#include "common/nn/block_params.h"
#include "common/nn/gpt.h"
#include "common/nn/tiled_linear.h"
#include "common/nn/tp_comm.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// A fresh activation tensor (MemCategory::kActivations) in `dtype`: f32, or the 16-bit storage
/// of mixed precision (the block input's dtype decides; f32_view.h), on `device` (the block
/// input's: the walk runs where its activations are, kernels/ops/kernel_ops.h).
Tensor activation(std::vector<int64_t> shape, DType dtype, Device device = Device::kCPU);
/// A fresh f32 activation tensor whatever the precision: LayerNorm's mean and rstd, scratch.
Tensor statistic(std::vector<int64_t> shape, Device device = Device::kCPU);

/// The dtype the model rounds the fp32 operands it makes mid-layer to before their products:
/// attention's P and dS (KernelOps::attention_*'s probs_dtype) and the head's dlogits. bf16 for
/// bf16 activations: every activation and activation gradient of the recipe is 16-bit
/// (Micikevicius et al. 2018 §3; FlashAttention-2 casts P and dS, llm.c writes its dlogits, in
/// 16 bits), and then a GPU runs those products on tensor cores. bf16 has fp32's exponent range,
/// so this loses precision only. f32 otherwise: fp16 would also lose range (values under 2⁻¹⁴
/// become subnormal, under 2⁻²⁴ zero), and with it the mixed_precision stage's mini run at
/// S₀ = 2¹² ended 0.14 nats above fp32 instead of 0.04 (its tolerance test's bound is 0.05; one
/// run, and step 200 of mini is sensitive to small changes, so a reason for caution, not a
/// proof of harm).
DType rounded_products(DType activations);

/// What whole-sequence attention keeps for its backward (GPTConfig's recompute and attention).
enum class ScoresKept {
  kProbs,  ///< the softmax probabilities c->att (B,H/t,T,T): the default
  kNone,   ///< none: P freed at once, made again by the backward (selective recomputation)
  kLse,    ///< c->lse (B,H/t,T) only: flash attention, P never whole (flash_attention.h)
};

/// res1 (B,Tl,C) = x + attention(ln_1(x)); fills `c` anew. `kept` says what the attention
/// keeps (above). With `core` (context parallelism, attention_core.h) T is the rows held (Tl),
/// the attention between c_attn and c_proj is core->forward over all p·Tl positions, and its
/// keep goes to c->keep (`kept` does not apply: a core keeps what its method keeps).
Tensor attention_forward(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                         const Tensor& x, int B, int T, AttentionCache* c,
                         ScoresKept kept = ScoresKept::kProbs, WeightTiles* tiles = nullptr,
                         AttentionCore* core = nullptr);
/// B: dL/dx (B,Tl,C) from dres1 (B,Tl,C), keeping W's inputs in `keep`; frees c->qkv, c->att,
/// c->lse. When the forward dropped c->att it is made again first (cpu::attention_probs: the
/// same bits); with c->lse, flash attention's backward makes P again block by block.
/// With `core`: dqkv by core->backward (it frees c->keep).
Tensor attention_backward_input(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                                const Tensor& x, AttentionCache* c, const Tensor& dres1,
                                SublayerGrads* keep, WeightTiles* tiles = nullptr,
                                AttentionCore* core = nullptr);
/// W: ln_1, c_attn and attn.c_proj gradients += ... (ACCUMULATED into g).
void attention_backward_weight(const BlockShape& s, TpComm& tp, const Tensor& x,
                               const AttentionCache& c, const SublayerGrads& keep,
                               const BlockParams<float>& g);

/// out (B,Tl,C) = res1 + mlp(ln_2(res1)); fills `c` anew.
Tensor mlp_forward(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                   const Tensor& res1, int B, int T, MlpCache* c, WeightTiles* tiles = nullptr);
/// B: dL/dres1 (B,Tl,C) from dout (B,Tl,C), keeping W's inputs in `keep`; frees c->fch.
Tensor mlp_backward_input(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                          const Tensor& res1, MlpCache* c, const Tensor& dout,
                          SublayerGrads* keep, WeightTiles* tiles = nullptr);
/// W: ln_2, c_fc and mlp.c_proj gradients += ... (ACCUMULATED into g).
void mlp_backward_weight(const BlockShape& s, TpComm& tp, const Tensor& res1, const MlpCache& c,
                         const SublayerGrads& keep, const BlockParams<float>& g);

}  // namespace llmp
