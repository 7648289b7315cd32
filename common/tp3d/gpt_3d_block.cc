// Gpt3d's block forward and backward (see gpt_3d.h): one pre-LN transformer block with x in
// layout A (sequences sub-block i·q+j, channels block l) and the hidden layers in layout B
// (sequences sub-block i·q+l, columns block j). m = B·T/q² rows, Cq = C/q, Hq = H/q.
#include "common/tp3d/gpt_3d.h"

#include <string>

#include "common/tp_grid/grid_layernorm.h"
#include "common/tp_grid/local_attention.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

// y (m, n) += b (n) on every row, on y's device.
void add_bias(Tensor& y, const Tensor& b) {
  const int64_t n = b.numel(), m = y.numel() / n;
  kernel_ops(y.device()).bias_add(y.f32(), b.f32(), m, static_cast<int>(n));
}

}  // namespace

int64_t Block3dCache::bytes() const {
  int64_t b = attn.nbytes();
  for (const Tensor* t : {&x, &ln1_mean, &ln1_rstd, &ln1_g, &qkv, &atty_g, &res1, &ln2_mean,
                          &ln2_rstd, &ln2_g, &fch, &fch_gelu_g})
    b += t->nbytes();
  return b;
}

Tensor Gpt3d::block_forward(int layer, const Tensor& P, const Tensor& x, int Bl, int T,
                            Block3dCache* c) {
  const int q = cube_.q, C = cfg_.d, Cq = C / q, Hq = cfg_.heads / q;
  const int64_t m = static_cast<int64_t>(Bl) * T;
  const std::string h = "h." + std::to_string(layer) + ".";
  ProcessGroup& lg = *cube_.l_axis;
  KernelOps& ops = kernel_ops(dev_);
  c->x = x;
  // ln_1 over the l-axis group (the other channel blocks of these rows): (m, Cq) layout A.
  Tensor ln1 = act({m, Cq});
  c->ln1_mean = act({m}), c->ln1_rstd = act({m});
  grid_layernorm_forward(lg, ln1.f32(), c->ln1_mean.f32(), c->ln1_rstd.f32(), x.f32(),
                         view(P, h + "ln_1.weight").f32(), view(P, h + "ln_1.bias").f32(), m, Cq, C,
                         dev_);
  // c_attn, A→B: (m, Cq) → (m, 3Cq), q|k|v of heads j·Hq..; bias added after the reduce_scatter.
  c->qkv = linear3d_forward(a_to_b(), ln1, view(P, h + "attn.c_attn.weight"), C, 3 * C, false,
                            &c->ln1_g);
  add_bias(c->qkv, view(P, h + "attn.c_attn.bias"));
  // Attention on whole sequences and whole heads: local. (Bl,T,3Cq) → (Bl,T,Cq).
  Tensor atty = act({m, Cq});
  local_attention_forward(c->qkv, atty, Bl, T, Hq, cfg_.attention,
                          /*drop_probs=*/cfg_.recompute == Recompute::kSelective, &c->attn);
  // attn.c_proj, B→A: (m, Cq) → (m, Cq); res1 = x + y + b.
  Tensor proj = linear3d_forward(b_to_a(), atty, view(P, h + "attn.c_proj.weight"), C, C, false,
                                 &c->atty_g);
  c->res1 = act({m, Cq});
  ops.residual_bias_add(c->res1.f32(), x.f32(), proj.f32(), view(P, h + "attn.c_proj.bias").f32(),
                         m, Cq);
  // ln_2, c_fc (A→B, (m, Cq) → (m, 4Cq)), GELU local, mlp.c_proj (B→A), residual.
  Tensor ln2 = act({m, Cq});
  c->ln2_mean = act({m}), c->ln2_rstd = act({m});
  grid_layernorm_forward(lg, ln2.f32(), c->ln2_mean.f32(), c->ln2_rstd.f32(), c->res1.f32(),
                         view(P, h + "ln_2.weight").f32(), view(P, h + "ln_2.bias").f32(), m, Cq, C,
                         dev_);
  c->fch = linear3d_forward(a_to_b(), ln2, view(P, h + "mlp.c_fc.weight"), C, 4 * C, false,
                            &c->ln2_g);
  add_bias(c->fch, view(P, h + "mlp.c_fc.bias"));
  Tensor gelu = act({m, 4 * Cq});
  ops.gelu_forward(gelu.f32(), c->fch.f32(), m * 4 * Cq);
  Tensor mproj = linear3d_forward(b_to_a(), gelu, view(P, h + "mlp.c_proj.weight"), 4 * C, C,
                                  false, &c->fch_gelu_g);
  Tensor y = act({m, Cq});
  ops.residual_bias_add(y.f32(), c->res1.f32(), mproj.f32(),
                         view(P, h + "mlp.c_proj.bias").f32(), m, Cq);
  return y;
}

Tensor Gpt3d::block_backward(int layer, const Tensor& P, Tensor& G, Block3dCache* c,
                             const Tensor& dy, int Bl, int T) {
  const int q = cube_.q, C = cfg_.d, Cq = C / q, Hq = cfg_.heads / q;
  const int64_t m = static_cast<int64_t>(Bl) * T;
  const std::string h = "h." + std::to_string(layer) + ".";
  ProcessGroup& lg = *cube_.l_axis;
  KernelOps& ops = kernel_ops(dev_);
  // y = res1 + mproj + b: the gradient passes to res1 and to mproj unchanged.
  ops.residual_bias_backward(view(G, h + "mlp.c_proj.bias").f32(), dy.f32(), m, Cq);
  Tensor dw = view(G, h + "mlp.c_proj.weight");
  Tensor dfch = linear3d_backward(b_to_a(), dy, c->fch_gelu_g, view(P, h + "mlp.c_proj.weight"),
                                  dw, 4 * C, C, false);  // (m, 4Cq) layout B
  ops.gelu_backward(dfch.f32(), c->fch.f32(), dfch.f32(), m * 4 * Cq);
  ops.residual_bias_backward(view(G, h + "mlp.c_fc.bias").f32(), dfch.f32(), m, 4 * Cq);
  dw = view(G, h + "mlp.c_fc.weight");
  Tensor dln2 = linear3d_backward(a_to_b(), dfch, c->ln2_g, view(P, h + "mlp.c_fc.weight"), dw, C,
                                  4 * C, false);  // (m, Cq) layout A
  Tensor dres1 = act({m, Cq});
  dres1.copy_from(dy);  // the residual path; ln_2's input gradient is added to it
  grid_layernorm_backward(lg, dres1.f32(), view(G, h + "ln_2.weight").f32(),
                          view(G, h + "ln_2.bias").f32(), dln2.f32(), c->res1.f32(),
                          view(P, h + "ln_2.weight").f32(), c->ln2_mean.f32(), c->ln2_rstd.f32(), m,
                          Cq, C, dev_);
  // res1 = x + proj + b.
  ops.residual_bias_backward(view(G, h + "attn.c_proj.bias").f32(), dres1.f32(), m, Cq);
  dw = view(G, h + "attn.c_proj.weight");
  Tensor datty = linear3d_backward(b_to_a(), dres1, c->atty_g, view(P, h + "attn.c_proj.weight"),
                                   dw, C, C, false);  // (m, Cq) layout B
  Tensor dqkv = act({m, 3 * Cq});
  // Flash's D = rowsum(dO·O) reads this rank's attention output: sub-block l of attn.c_proj's
  // gathered input (the l-axis all_gather stacks the sub-blocks in the group's rank order).
  const Tensor atty = c->atty_g.narrow(cube_.l_axis->rank() * m * Cq, m * Cq);
  local_attention_backward(dqkv, datty, c->qkv, atty, &c->attn, Bl, T, Hq);
  ops.residual_bias_backward(view(G, h + "attn.c_attn.bias").f32(), dqkv.f32(), m, 3 * Cq);
  dw = view(G, h + "attn.c_attn.weight");
  Tensor dln1 = linear3d_backward(a_to_b(), dqkv, c->ln1_g, view(P, h + "attn.c_attn.weight"), dw,
                                  C, 3 * C, false);
  Tensor dx = act({m, Cq});
  dx.copy_from(dres1);
  grid_layernorm_backward(lg, dx.f32(), view(G, h + "ln_1.weight").f32(),
                          view(G, h + "ln_1.bias").f32(), dln1.f32(), c->x.f32(),
                          view(P, h + "ln_1.weight").f32(), c->ln1_mean.f32(), c->ln1_rstd.f32(), m,
                          Cq, C, dev_);
  *c = Block3dCache();  // the block's activations are no longer needed
  return dx;
}

}  // namespace llmp
