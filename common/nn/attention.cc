// The attention sub-layer of a block (sublayer.h), forward and backward, line by line:
//
//   forward                                    shapes (n = B·Tl rows held, N = B·T)
//   ln1  = LN(x; ln_1)                         (n,C)
//   ln1f = f(ln1)                              (N,C)      TpComm::enter_forward
//   qkv  = ln1f @ c_attn.W + b                 (N,C) @ (C,qkv) -> (N,qkv)   this rank's heads
//   atty = causal_attention(qkv)               (N,qkv) -> (N,attn), att (B,H/t,T,T)
//                                              (flash: lse (B,H/t,T) instead, flash_attention.h)
//   y    = g(atty @ attn.c_proj.W)             (N,attn) @ (attn,C) -> (N,C), summed -> (n,C)
//   res1 = x + y + attn.c_proj.b               (n,C)
//
// The backward walks the same lines upwards; the residual means the incoming gradient passes
// straight through: dx = dres1 + LN1ᵀ(dln1). Vaswani et al. 2017 §3.2; Radford et al. 2019;
// llm.c's gpt2_forward/backward; Megatron-LM §3 for f and g.
//
// Glossary: B batch, T sequence, Tl rows of a sequence held, C channels, H heads, t tp ranks,
// attn = C/t, qkv = 3C/t, LN LayerNorm.
#include <cstring>

#include "common/nn/flash_attention.h"
#include "common/nn/recompute.h"
#include "common/nn/sublayer.h"
#include "common/nn/tiled_linear.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

Tensor activation(std::vector<int64_t> shape, DType dtype, Device device) {
  return Tensor::empty(std::move(shape), dtype, MemCategory::kActivations, device);
}

Tensor statistic(std::vector<int64_t> shape, Device device) {
  return Tensor::empty(std::move(shape), DType::kF32, MemCategory::kActivations, device);
}

DType rounded_products(DType activations) {
  return activations == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

Tensor attention_forward(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                         const Tensor& x, int B, int T, AttentionCache* c, ScoresKept kept,
                         WeightTiles* tiles, AttentionCore* core) {
  const int C = s.C, Tl = static_cast<int>(x.dim(1));
  const long n = static_cast<long>(B) * Tl, N = static_cast<long>(B) * T;
  const DType dt = x.dtype();  // f32, or the 16-bit storage of mixed precision (f32_view.h)
  const Device dev = x.device();        // the walk runs where its activations are
  KernelOps& ops = kernel_ops(dev);     // and with that device's kernels (kernel_ops.h)
  *c = AttentionCache{};  // release what the cache held before allocating anew (lower peak)
  c->ln1 = activation({B, Tl, C}, dt, dev);
  c->ln1_mean = statistic({B, Tl}, dev);
  c->ln1_rstd = statistic({B, Tl}, dev);
  ops.layernorm_forward(as_stored(c->ln1), c->ln1_mean.f32(), c->ln1_rstd.f32(), as_stored(x),
                        p.ln1_w, p.ln1_b, n, C);
  {
    const Tensor ln1f = tp.enter_forward(c->ln1);  // f: (n,C) -> (N,C)
    c->qkv = activation({B, T, s.qkv()}, dt, dev);
    linear_forward(ops, tiles, BlockLinear::kCAttn, as_stored(c->qkv), as_stored(ln1f), p.attn_w,
                   p.attn_b, N, C, s.qkv());
  }
  c->atty = activation({B, T, s.attn()}, dt, dev);
  if (core) {  // context parallelism: this rank's queries against every rank's keys
    core->forward(c->qkv, c->atty, B, T * core->shards(), s.heads, &c->keep);
  } else if (kept == ScoresKept::kLse) {  // flash attention: lse (B,H,T), no P kept
    c->lse = flash_attention_forward(c->qkv, c->atty, B, T, s.heads);
  } else {
    c->att = attention_scores({B, s.heads, T, T}, dt, dev);
    ops.attention_forward(as_stored(c->atty), as_stored(c->att), as_stored(c->qkv), B, T, s.attn(),
                          s.heads, rounded_products(dt));
    if (kept == ScoresKept::kNone) c->att = Tensor();  // selective: made again in the backward
  }
  Tensor y = activation({B, T, C}, dt, dev);
  linear_forward(ops, tiles, BlockLinear::kAttnProj, as_stored(y), as_stored(c->atty), p.proj_w,
                 nullptr, N, s.attn(), C);  // partial
  y = tp.exit_forward(std::move(y));  // g: Σ over the tp ranks, (N,C) -> (n,C)
  ops.residual_bias_add(as_stored(y), as_stored(x), as_stored(y), p.proj_b, n, C);  // x + y + b
  return y;
}

namespace {
/// dqkv (B,T,qkv) from datty (B,T,attn) on whole sequences, with the probabilities the forward
/// kept (or, under selective recomputation, makes again first).
void local_attention_backward(const BlockShape& s, AttentionCache* c, const Tensor& datty,
                              const Tensor& dqkv) {
  const int B = static_cast<int>(c->qkv.dim(0)), T = static_cast<int>(c->qkv.dim(1));
  const Device dev = c->qkv.device();
  KernelOps& ops = kernel_ops(dev);
  if (!c->att.defined()) {  // selective recomputation: P again from q and k (recompute.h)
    CountRecomputedFlops count;
    c->att = attention_scores({B, s.heads, T, T}, c->qkv.dtype(), dev);
    ops.attention_probs(as_stored(c->att), as_stored(c->qkv), B, T, s.attn(), s.heads,
                        rounded_products(c->qkv.dtype()));
    RecomputeMeter::instance().recomputed_probs += 1;
  }
  Tensor scratch = attention_scores({T, T}, DType::kF32, dev);  // attention's dP of one head
  ops.attention_backward(as_stored(dqkv), as_stored(datty), as_stored(c->qkv), as_stored(c->att),
                         scratch.f32(), B, T, s.attn(), s.heads,
                         rounded_products(c->qkv.dtype()));  // dqkv (N,qkv)
}
}  // namespace

Tensor attention_backward_input(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                                const Tensor& x, AttentionCache* c, const Tensor& dres1,
                                SublayerGrads* keep, WeightTiles* tiles, AttentionCore* core) {
  const int C = s.C, B = static_cast<int>(c->qkv.dim(0)), T = static_cast<int>(c->qkv.dim(1));
  const long n = dres1.numel() / C, N = static_cast<long>(B) * T;
  const DType dt = x.dtype();
  const Device dev = x.device();
  KernelOps& ops = kernel_ops(dev);
  keep->dy = dres1;                          // c_proj's bias gradient (this rank's rows)
  keep->dy_full = tp.exit_backward(dres1);   // g's backward: (n,C) -> (N,C)
  {
    Tensor datty = activation({B, T, s.attn()}, dt, dev);
    linear_backward_input(ops, tiles, BlockLinear::kAttnProj, as_stored(datty),
                          as_stored(keep->dy_full), p.proj_w, N, s.attn(), C);
    keep->dhidden = activation({B, T, s.qkv()}, dt, dev);
    if (core)  // context parallelism: the core's mirrored communication (attention_core.h)
      core->backward(datty, c->qkv, c->atty, &c->keep, keep->dhidden, B, T * core->shards(),
                     s.heads);
    else if (c->lse.defined())  // flash attention: P made again from q, k and lse
      flash_attention_backward(keep->dhidden, datty, c->qkv, c->atty, c->lse, B, T, s.heads);
    else
      local_attention_backward(s, c, datty, keep->dhidden);
  }
  c->qkv = Tensor();  // W needs neither attention's inputs nor its probabilities
  c->att = Tensor();
  c->lse = Tensor();
  Tensor dln1 = activation({B, T, C}, dt, dev);
  linear_backward_input(ops, tiles, BlockLinear::kCAttn, as_stored(dln1), as_stored(keep->dhidden),
                        p.attn_w, N, C, s.qkv());
  keep->dln = tp.enter_backward(std::move(dln1));  // f's backward: Σ over ranks, -> (n,C)
  // dx = dres1 (residual path) + LN1ᵀ(dln1), written once as stored.
  Tensor dx = activation(x.shape(), dt, dev);
  ops.layernorm_backward(as_stored(dx), as_stored(dres1), nullptr, nullptr, as_stored(keep->dln),
                         as_stored(x), p.ln1_w, c->ln1_mean.f32(), c->ln1_rstd.f32(), n, C);
  return dx;
}

void attention_backward_weight(const BlockShape& s, TpComm& tp, const Tensor& x,
                               const AttentionCache& c, const SublayerGrads& keep,
                               const BlockParams<float>& g) {
  const int C = s.C;
  const long n = x.numel() / C, N = keep.dy_full.numel() / C;
  KernelOps& ops = kernel_ops(x.device());
  // attn.c_proj: dW (attn,C) += attyᵀ @ dy_full; b (C) += Σ dy over this rank's rows.
  ops.matmul_backward_weight(g.proj_w, nullptr, as_stored(keep.dy_full), as_stored(c.atty), N,
                             s.attn(), C);
  ops.residual_bias_backward(g.proj_b, as_stored(keep.dy), n, C);
  // c_attn: dW (C,qkv) += ln1fᵀ @ dqkv, db (qkv) += Σ dqkv. ln1f is all-gathered again under
  // sequence parallelism (only this rank's rows were kept).
  const Tensor ln1f = tp.regather(c.ln1);
  ops.matmul_backward_weight(g.attn_w, g.attn_b, as_stored(keep.dhidden), as_stored(ln1f), N, C,
                             s.qkv());
  ops.layernorm_backward_weight(g.ln1_w, g.ln1_b, as_stored(keep.dln), as_stored(x),
                                c.ln1_mean.f32(), c.ln1_rstd.f32(), n, C);
}

}  // namespace llmp
