// The 2.5D walk (see gpt_2p5d.h).
#include "common/tp2d/gpt_2p5d.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/nn/recompute.h"
#include "common/tp2d/summa.h"
#include "common/tp_grid/grid_cross_entropy.h"
#include "common/tp_grid/grid_layernorm.h"
#include "common/tp_grid/local_attention.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

Tensor Gpt2p5d::act(int64_t n) const {
  return Tensor::empty({n}, DType::kF32, MemCategory::kActivations, dev_);
}
Tensor Gpt2p5d::tmp(int64_t n) const {
  return Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, dev_);
}

/// What one block's forward keeps for its backward (the block input x is kept by the walk).
struct Gpt2p5d::Cache {
  Tensor ln1, m1, r1, qkv, atty, res1, ln2, m2, r2, fch, fchg;
  LocalAttentionKeep attn;                       // P, or (flash) lse
  bool filled() const { return qkv.defined(); }  // false: dropped by full recomputation
  int64_t bytes() const {
    int64_t s = attn.nbytes();
    for (const Tensor* t : {&ln1, &m1, &r1, &qkv, &atty, &res1, &ln2, &m2, &r2, &fch, &fchg})
      s += t->nbytes();
    return s;
  }
};

Gpt2p5d::Gpt2p5d(const GPTConfig& cfg, Grid2p5d& grid, Device device)
    : cfg_(cfg), g_(grid), layout_(cfg, grid.q(), grid.i(), grid.j()), dev_(device) {}

const float* Gpt2p5d::at(const float* p, int l, const char* name) const {
  return p + layout_.at(l < 0 ? std::string(name) : "h." + std::to_string(l) + "." + name).offset;
}
float* Gpt2p5d::at(float* p, int l, const char* name) const {
  return p + layout_.at(l < 0 ? std::string(name) : "h." + std::to_string(l) + "." + name).offset;
}

Tensor Gpt2p5d::block_forward(const float* p, int l, const Tensor& x, int Bl, int T, Cache& c) {
  const int q = g_.q(), C = cfg_.d, Cl = C / q, Hl = cfg_.heads / q;
  const int64_t N = int64_t(Bl) * T;
  ProcessGroup &row = g_.row(), &col = g_.col();
  KernelOps& ops = kernel_ops(dev_);
  c.ln1 = act(N * Cl), c.m1 = act(N), c.r1 = act(N);
  grid_layernorm_forward(row, c.ln1.f32(), c.m1.f32(), c.r1.f32(), x.f32(),
                         at(p, l, "ln_1.weight"), at(p, l, "ln_1.bias"), N, Cl, C, dev_);
  c.qkv = act(N * 3 * Cl);  // (N,Cl)@(Cl,3Cl): q, k, v of heads j·H/q ..
  summa_ab(row, col, c.qkv.f32(), c.ln1.f32(), at(p, l, "attn.c_attn.weight"), N, Cl, 3 * Cl, dev_);
  ops.bias_add(c.qkv.f32(), at(p, l, "attn.c_attn.bias"), N, 3 * Cl);
  c.atty = act(N * Cl);  // attention over whole sequences, Hl heads: local (local_attention.h)
  local_attention_forward(c.qkv, c.atty, Bl, T, Hl, cfg_.attention,
                          /*drop_probs=*/cfg_.recompute == Recompute::kSelective, &c.attn);
  Tensor proj = tmp(N * Cl);  // (N,Cl)@(Cl,Cl)
  summa_ab(row, col, proj.f32(), c.atty.f32(), at(p, l, "attn.c_proj.weight"), N, Cl, Cl, dev_);
  c.res1 = act(N * Cl);
  ops.residual_bias_add(c.res1.f32(), x.f32(), proj.f32(), at(p, l, "attn.c_proj.bias"), N, Cl);
  c.ln2 = act(N * Cl), c.m2 = act(N), c.r2 = act(N);
  grid_layernorm_forward(row, c.ln2.f32(), c.m2.f32(), c.r2.f32(), c.res1.f32(),
                         at(p, l, "ln_2.weight"), at(p, l, "ln_2.bias"), N, Cl, C, dev_);
  c.fch = act(N * 4 * Cl), c.fchg = act(N * 4 * Cl);  // (N,Cl)@(Cl,4Cl)
  summa_ab(row, col, c.fch.f32(), c.ln2.f32(), at(p, l, "mlp.c_fc.weight"), N, Cl, 4 * Cl, dev_);
  ops.bias_add(c.fch.f32(), at(p, l, "mlp.c_fc.bias"), N, 4 * Cl);
  ops.gelu_forward(c.fchg.f32(), c.fch.f32(), N * 4 * Cl);
  summa_ab(row, col, proj.f32(), c.fchg.f32(), at(p, l, "mlp.c_proj.weight"), N, 4 * Cl, Cl, dev_);
  Tensor y = act(N * Cl);  // the next block's input: kept by the walk
  ops.residual_bias_add(y.f32(), c.res1.f32(), proj.f32(), at(p, l, "mlp.c_proj.bias"), N, Cl);
  return y;
}

Tensor Gpt2p5d::block_backward(const float* p, float* g, int l, const Tensor& x, Cache& c,
                               const Tensor& dy, int Bl, int T) {
  const int q = g_.q(), C = cfg_.d, Cl = C / q, Hl = cfg_.heads / q;
  const int64_t N = int64_t(Bl) * T;
  ProcessGroup &row = g_.row(), &col = g_.col();
  KernelOps& ops = kernel_ops(dev_);
  // MLP: y = r1 + gelu(ln2·Wfc + bfc)·Wp2 + bp2.
  Tensor dres1 = tmp(N * Cl);
  dres1.copy_from(dy);  // the residual passes dy through
  ops.residual_bias_backward(at(g, l, "mlp.c_proj.bias"), dy.f32(), N, Cl);
  Tensor dh = tmp(N * 4 * Cl);  // dY·Wp2ᵀ: (N,Cl)@(Cl,4Cl)
  summa_abt(row, col, dh.f32(), dy.f32(), at(p, l, "mlp.c_proj.weight"), N, Cl, 4 * Cl, dev_);
  summa_atb(row, col, at(g, l, "mlp.c_proj.weight"), c.fchg.f32(), dy.f32(), N, 4 * Cl, Cl, dev_);
  ops.gelu_backward(dh.f32(), c.fch.f32(), dh.f32(), N * 4 * Cl);
  ops.residual_bias_backward(at(g, l, "mlp.c_fc.bias"), dh.f32(), N, 4 * Cl);
  Tensor dln = tmp(N * Cl);  // dfch·Wfcᵀ: (N,4Cl)@(4Cl,Cl)
  summa_abt(row, col, dln.f32(), dh.f32(), at(p, l, "mlp.c_fc.weight"), N, 4 * Cl, Cl, dev_);
  summa_atb(row, col, at(g, l, "mlp.c_fc.weight"), c.ln2.f32(), dh.f32(), N, Cl, 4 * Cl, dev_);
  grid_layernorm_backward(row, dres1.f32(), at(g, l, "ln_2.weight"), at(g, l, "ln_2.bias"),
                          dln.f32(), c.res1.f32(), at(p, l, "ln_2.weight"), c.m2.f32(),
                          c.r2.f32(), N, Cl, C, dev_);
  // Attention: r1 = x + attention(ln1·Wattn + battn)·Wproj + bproj.
  ops.residual_bias_backward(at(g, l, "attn.c_proj.bias"), dres1.f32(), N, Cl);
  Tensor datty = tmp(N * Cl);  // (N,Cl)@(Cl,Cl)
  summa_abt(row, col, datty.f32(), dres1.f32(), at(p, l, "attn.c_proj.weight"), N, Cl, Cl, dev_);
  summa_atb(row, col, at(g, l, "attn.c_proj.weight"), c.atty.f32(), dres1.f32(), N, Cl, Cl, dev_);
  Tensor dqkv = tmp(N * 3 * Cl);  // P made again first under selective recomputation
  local_attention_backward(dqkv, datty, c.qkv, c.atty, &c.attn, Bl, T, Hl);
  ops.residual_bias_backward(at(g, l, "attn.c_attn.bias"), dqkv.f32(), N, 3 * Cl);
  summa_abt(row, col, dln.f32(), dqkv.f32(), at(p, l, "attn.c_attn.weight"), N, 3 * Cl, Cl, dev_);
  summa_atb(row, col, at(g, l, "attn.c_attn.weight"), c.ln1.f32(), dqkv.f32(), N, Cl, 3 * Cl, dev_);
  grid_layernorm_backward(row, dres1.f32(), at(g, l, "ln_1.weight"), at(g, l, "ln_1.bias"),
                          dln.f32(), x.f32(), at(p, l, "ln_1.weight"), c.m1.f32(), c.r1.f32(), N,
                          Cl, C, dev_);
  c = Cache();
  return dres1;  // dx = dy + the two sub-layers' input gradients
}

void Gpt2p5d::recompute(const float* p, int l, std::vector<Tensor>& xs, std::vector<Cache>& caches,
                        int Bl, int T) {
  // From the nearest checkpoint at or before block l (x_0 always is one): the forwards of blocks
  // c..l run again, with their SUMMA broadcasts and LayerNorm all_reduces, and each keeps its
  // cache for its backward; each output but block l's (dy comes from above) is the next input.
  CountRecomputedFlops count;
  int c = l;
  while (!xs[c].defined()) --c;
  for (int i = c; i <= l; ++i) {
    Tensor y = block_forward(p, i, xs[i], Bl, T, caches[i]);
    if (i < l) xs[i + 1] = std::move(y);
  }
  RecomputeMeter::instance().recomputed_blocks += l - c + 1;
}

double Gpt2p5d::forward_backward(const float* p, float* g, const int32_t* tokens,
                                 const int32_t* targets, int Bd, int T, float loss_scale) {
  const int q = g_.q(), i = g_.i(), j = g_.j(), C = cfg_.d, Cl = C / q, V = cfg_.vocab,
            Vq = V / q, L = cfg_.layers;
  if (Bd % q != 0)
    throw std::invalid_argument("batch of " + std::to_string(Bd) +
                                " sequences per depth layer is not divisible by q = " +
                                std::to_string(q));
  const int Bl = Bd / q;
  const int64_t N = int64_t(Bl) * T;
  ProcessGroup &row = g_.row(), &col = g_.col();
  KernelOps& ops = kernel_ops(dev_);
  // The ids where the kernels read them: this depth layer's Bd·T tokens, this row block's N
  // targets (on a device, 4Bd·T + 4N bytes up per call).
  Tensor tokens_dev, targets_dev;
  tokens = ids_on(dev_, tokens, int64_t(Bd) * T, tokens_dev);
  const int32_t* row_targets = ids_on(dev_, targets + i * N, N, targets_dev);
  // Embedding: wte block (i,j) looks up all q·N rows of the layer's tokens in vocabulary block i,
  // and reduce_scatter over the column group sums the blocks, sequence block i to rank (h,i,j).
  Tensor look = tmp(q * N * Cl);
  ops.token_embedding_forward(look.f32(), tokens, at(p, -1, "wte.weight"), i * Vq, Vq, q * N, Cl);
  std::vector<Tensor> xs(L + 1);
  xs[0] = act(N * Cl);
  col.reduce_scatter(look, xs[0]);  // (q-1)/q·4·qN·Cl
  ops.position_embedding_forward(xs[0].f32(), at(p, -1, "wpe.weight"), Bl, T, 0, Cl);
  std::vector<Cache> caches(L);
  const bool backward = g != nullptr;
  // What a training forward keeps (common/nn/recompute.h): none, every cache; selective, every
  // cache but P; full, only the checkpoints x_l (l % k == 0), nothing of the blocks' caches.
  const Recompute policy = backward ? cfg_.recompute : Recompute::kNone;
  const int every = policy == Recompute::kFull ? std::max(1, cfg_.recompute_every) : 1;
  int64_t checkpoint_bytes = 0;
  for (int l = 0; l < L; ++l) {
    xs[l + 1] = block_forward(p, l, xs[l], Bl, T, caches[l]);
    if (backward) block_bytes_ = caches[l].bytes();  // a training forward's (not an evaluation's)
    if (policy == Recompute::kFull) {
      caches[l] = Cache();  // its forward runs again before its backward
      if (l % every != 0) xs[l] = Tensor();  // remade from its segment's checkpoint
      checkpoint_bytes += xs[l].nbytes();    // 0 for an undefined tensor
    }
  }
  if (policy == Recompute::kFull) block_bytes_ = checkpoint_bytes / L;  // kept per block
  // (An evaluation keeps every cache, whatever the policy: it has no backward to save for, and it
  // leaves block_bytes_ as the last training forward set it.)
  // Head: ln_f, logits block (i, vocabulary j) = Σ_k xf_ik·wte_jkᵀ, vocab-split cross-entropy.
  Tensor xf = act(N * Cl), mf = act(N), rf = act(N), z = act(N * Vq);
  grid_layernorm_forward(row, xf.f32(), mf.f32(), rf.f32(), xs[L].f32(), at(p, -1, "ln_f.weight"),
                         at(p, -1, "ln_f.bias"), N, Cl, C, dev_);
  // (N,Cl)@(Cl,Vq)
  summa_abt(row, col, z.f32(), xf.f32(), at(p, -1, "wte.weight"), N, Cl, Vq, dev_);
  double loss = grid_cross_entropy(row, z.f32(), row_targets, j * Vq, N, Vq, loss_scale,
                                   backward, dev_);
  Tensor total = Tensor::empty({1}, DType::kF64, MemCategory::kCommBuffers);
  total.f64()[0] = loss;
  col.all_reduce(total);  // Σ over the layer's q row blocks: 2(q-1)/q·8
  loss = total.f64()[0];
  if (!backward) return loss;
  // Head backward: dxf = dz·wte (summa_ab), dwte += dzᵀ·xf (summa_atb).
  Tensor dx = tmp(N * Cl), dxf = tmp(N * Cl);
  summa_ab(row, col, dxf.f32(), z.f32(), at(p, -1, "wte.weight"), N, Vq, Cl, dev_);
  summa_atb(row, col, at(g, -1, "wte.weight"), z.f32(), xf.f32(), N, Vq, Cl, dev_);
  dx.fill(0.0f);
  grid_layernorm_backward(row, dx.f32(), at(g, -1, "ln_f.weight"), at(g, -1, "ln_f.bias"),
                          dxf.f32(), xs[L].f32(), at(p, -1, "ln_f.weight"), mf.f32(), rf.f32(), N,
                          Cl, C, dev_);
  for (int l = L - 1; l >= 0; --l) {
    if (!caches[l].filled()) recompute(p, l, xs, caches, Bl, T);
    dx = block_backward(p, g, l, xs[l], caches[l], dx, Bl, T);
    xs[l + 1] = Tensor();  // neither this block's backward nor the ones below read it again
  }
  // Embedding backward: wpe's columns j from this rank's rows, then all_gather the layer's rows
  // over the column group and scatter-add those whose token is in vocabulary block i.
  ops.position_embedding_backward(at(g, -1, "wpe.weight"), dx.f32(), Bl, T, 0, Cl);
  col.all_gather(dx, look);  // (q-1)/q·4·qN·Cl
  ops.token_embedding_backward(at(g, -1, "wte.weight"), look.f32(), tokens, i * Vq, Vq, q * N, Cl);
  return loss;
}

}  // namespace llmp
