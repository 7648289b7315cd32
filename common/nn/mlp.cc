// The MLP sub-layer of a block (sublayer.h), forward and backward, line by line:
//
//   forward                                    shapes (n = B·Tl rows held, N = B·T)
//   ln2  = LN(res1; ln_2)                      (n,C)
//   ln2f = f(ln2)                              (N,C)      TpComm::enter_forward
//   fch  = ln2f @ c_fc.W + b                   (N,C) @ (C,ffn) -> (N,ffn)   column-parallel
//   fchg = gelu(fch)                           (N,ffn)                      local
//   y    = g(fchg @ mlp.c_proj.W)              (N,ffn) @ (ffn,C) -> (N,C), summed -> (n,C)
//   out  = res1 + y + mlp.c_proj.b             (n,C)
//
// GELU's tanh approximation (Hendrycks & Gimpel 2016) as GPT-2; the split of c_fc by columns and
// c_proj by rows is what lets GELU run on each rank's columns alone (Megatron-LM §3, Figure 3a).
//
// Glossary: B batch, T sequence, Tl rows of a sequence held, C channels, ffn = 4C/t, LN LayerNorm.
#include <cstring>

#include "common/nn/sublayer.h"
#include "common/nn/tiled_linear.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

Tensor mlp_forward(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                   const Tensor& res1, int B, int T, MlpCache* c, WeightTiles* tiles) {
  const int C = s.C, Tl = static_cast<int>(res1.dim(1));
  const long n = static_cast<long>(B) * Tl, N = static_cast<long>(B) * T;
  const DType dt = res1.dtype();  // f32, or mixed precision's 16-bit storage (f32_view.h)
  const Device dev = res1.device();     // the walk runs where its activations are
  KernelOps& ops = kernel_ops(dev);     // and with that device's kernels (kernel_ops.h)
  *c = MlpCache{};
  c->ln2 = activation({B, Tl, C}, dt, dev);
  c->ln2_mean = statistic({B, Tl}, dev);
  c->ln2_rstd = statistic({B, Tl}, dev);
  ops.layernorm_forward(as_stored(c->ln2), c->ln2_mean.f32(), c->ln2_rstd.f32(),
                        as_stored(res1), p.ln2_w, p.ln2_b, n, C);
  {
    const Tensor ln2f = tp.enter_forward(c->ln2);  // f: (n,C) -> (N,C)
    c->fch = activation({B, T, s.ffn}, dt, dev);
    linear_forward(ops, tiles, BlockLinear::kFc, as_stored(c->fch), as_stored(ln2f), p.fc_w, p.fc_b,
                   N, C, s.ffn);  // (N,ffn)
  }
  c->fch_gelu = activation({B, T, s.ffn}, dt, dev);
  ops.gelu_forward(as_stored(c->fch_gelu), as_stored(c->fch), N * s.ffn);
  Tensor y = activation({B, T, C}, dt, dev);
  linear_forward(ops, tiles, BlockLinear::kFcProj, as_stored(y), as_stored(c->fch_gelu), p.fcproj_w,
                 nullptr, N, s.ffn, C);  // partial
  y = tp.exit_forward(std::move(y));  // g: Σ over the tp ranks, (N,C) -> (n,C)
  ops.residual_bias_add(as_stored(y), as_stored(res1), as_stored(y), p.fcproj_b, n, C);  // in y
  return y;
}

Tensor mlp_backward_input(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                          const Tensor& res1, MlpCache* c, const Tensor& dout,
                          SublayerGrads* keep, WeightTiles* tiles) {
  const int C = s.C, B = static_cast<int>(c->fch.dim(0)), T = static_cast<int>(c->fch.dim(1));
  const long n = dout.numel() / C, N = static_cast<long>(B) * T;
  const DType dt = res1.dtype();
  const Device dev = res1.device();
  KernelOps& ops = kernel_ops(dev);
  keep->dy = dout;                         // c_proj's bias gradient (this rank's rows)
  keep->dy_full = tp.exit_backward(dout);  // g's backward: (n,C) -> (N,C)
  keep->dhidden = activation({B, T, s.ffn}, dt, dev);
  {
    // dfch_gelu stays fp32 for gelu_backward, which writes dfch rounded once (not twice) into
    // dhidden: an fp32 scratch under 16-bit activations, dhidden itself (in place) under fp32.
    const Tensor dfch_gelu =
        dt == DType::kF32 ? keep->dhidden
                          : Tensor::empty({B, T, s.ffn}, DType::kF32, MemCategory::kOther, dev);
    linear_backward_input(ops, tiles, BlockLinear::kFcProj, dfch_gelu.f32(),
                          as_stored(keep->dy_full), p.fcproj_w, N, s.ffn, C);
    ops.gelu_backward(as_stored(keep->dhidden), as_stored(c->fch), dfch_gelu.f32(),
                      N * s.ffn);  // dfch
  }
  c->fch = Tensor();  // W needs only GELU's output
  Tensor dln2 = activation({B, T, C}, dt, dev);
  linear_backward_input(ops, tiles, BlockLinear::kFc, as_stored(dln2), as_stored(keep->dhidden),
                        p.fc_w, N, C, s.ffn);
  keep->dln = tp.enter_backward(std::move(dln2));  // f's backward: Σ over ranks, -> (n,C)
  // dres1 = dout (residual path) + LN2ᵀ(dln2), written once as stored.
  Tensor dres1 = activation(res1.shape(), dt, dev);
  ops.layernorm_backward(as_stored(dres1), as_stored(dout), nullptr, nullptr, as_stored(keep->dln),
                         as_stored(res1), p.ln2_w, c->ln2_mean.f32(), c->ln2_rstd.f32(), n, C);
  return dres1;
}

void mlp_backward_weight(const BlockShape& s, TpComm& tp, const Tensor& res1, const MlpCache& c,
                         const SublayerGrads& keep, const BlockParams<float>& g) {
  const int C = s.C;
  const long n = res1.numel() / C, N = keep.dy_full.numel() / C;
  KernelOps& ops = kernel_ops(res1.device());
  // mlp.c_proj: dW (ffn,C) += fch_geluᵀ @ dy_full; b (C) += Σ dy over this rank's rows.
  ops.matmul_backward_weight(g.fcproj_w, nullptr, as_stored(keep.dy_full), as_stored(c.fch_gelu), N,
                             s.ffn, C);
  ops.residual_bias_backward(g.fcproj_b, as_stored(keep.dy), n, C);
  // c_fc: dW (C,ffn) += ln2fᵀ @ dfch, db (ffn) += Σ dfch (ln2f all-gathered again under SP).
  const Tensor ln2f = tp.regather(c.ln2);
  ops.matmul_backward_weight(g.fc_w, g.fc_b, as_stored(keep.dhidden), as_stored(ln2f), N, C, s.ffn);
  ops.layernorm_backward_weight(g.ln2_w, g.ln2_b, as_stored(keep.dln), as_stored(res1),
                                c.ln2_mean.f32(), c.ln2_rstd.f32(), n, C);
}

}  // namespace llmp
