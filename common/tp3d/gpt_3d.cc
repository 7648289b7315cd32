// Gpt3d's walk: embedding, the blocks (gpt_3d_block.cc), ln_f, the tied head and the
// cross-entropy, and back (see gpt_3d.h).
#include "common/tp3d/gpt_3d.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/nn/recompute.h"
#include "common/tp_grid/grid_cross_entropy.h"
#include "common/tp_grid/grid_layernorm.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

Gpt3d::Gpt3d(const GPTConfig& cfg, Cube& cube, Device device)
    : cfg_(cfg), cube_(cube), layout_(cfg, cube.q, cube.i, cube.j, cube.l), dev_(device) {}

Tensor Gpt3d::act(std::vector<int64_t> shape) const {
  return Tensor::empty(std::move(shape), DType::kF32, MemCategory::kActivations, dev_);
}

Tensor Gpt3d::view(const Tensor& buf, const std::string& name) const {
  for (const Param3d& p : layout_.params())
    if (p.name == name) return buf.narrow(p.offset, p.numel);
  throw std::out_of_range("Gpt3d: no tensor " + name);
}

double Gpt3d::forward_backward(const Tensor& P, Tensor* G, const int32_t* tokens,
                               const int32_t* targets, int B, int T) {
  const int q = cube_.q, C = cfg_.d, Cq = C / q, V = cfg_.vocab, L = cfg_.layers;
  if (B % (q * q) != 0)
    throw std::invalid_argument("global batch " + std::to_string(B) +
                                " is not divisible by q² = " + std::to_string(q * q) +
                                " (3D tensor parallelism splits it into q² sequence sub-blocks)");
  const int Bl = B / (q * q);  // sequences per sub-block
  const int64_t M = static_cast<int64_t>(B) * T, m = static_cast<int64_t>(Bl) * T;
  const int Vr = V / (q * q), v0 = cube_.j * (V / q) + cube_.i * Vr;  // wte rows held
  Tensor wte = view(P, "wte.weight");  // (Vr, Cq): embedding rows and the head's Wᵀ piece
  KernelOps& ops = kernel_ops(dev_);
  // The ids where the kernels read them: all M tokens, this rank's m targets (layout B's rows:
  // sub-block i·q+l); on a device 4M + 4m bytes up per call.
  Tensor tokens_dev, targets_dev;
  tokens = ids_on(dev_, tokens, M, tokens_dev);
  const int32_t* y = ids_on(dev_, targets + static_cast<int64_t>(cube_.i * q + cube_.l) * m, m,
                            targets_dev);

  // Embedding: every rank looks up all M tokens in its vocabulary piece (zeros elsewhere); the
  // plane's reduce_scatter sums the q² pieces and leaves sub-block i·q+j: layout A (m, Cq).
  Tensor emb = act({M, Cq});
  ops.token_embedding_forward(emb.f32(), tokens, wte.f32(), v0, Vr, M, Cq);
  Tensor x = act({m, Cq});
  cube_.plane_l->reduce_scatter(emb, x);  // sends (q²-1)/q²·4·M·Cq
  emb = Tensor();
  ops.position_embedding_forward(x.f32(), view(P, "wpe.weight").f32(), Bl, T, 0, Cq);

  // What a training forward keeps (common/nn/recompute.h): none, every cache; selective, every
  // cache but P; full, only the checkpoints (the inputs of blocks l % k == 0, in caches[l].x).
  const Recompute policy = G != nullptr ? cfg_.recompute : Recompute::kNone;
  const int every = policy == Recompute::kFull ? std::max(1, cfg_.recompute_every) : 1;
  std::vector<Block3dCache> caches(L);
  int64_t kept = 0;
  for (int layer = 0; layer < L; ++layer) {
    Block3dCache& c = caches[layer];
    x = block_forward(layer, P, x, Bl, T, &c);
    if (policy == Recompute::kFull) {  // its forward runs again before its backward
      Tensor input = c.x;
      c = Block3dCache();
      if (layer % every == 0) c.x = std::move(input);  // a checkpoint
    }
    kept += c.bytes();
  }
  if (G != nullptr) block_bytes_ = static_cast<double>(kept) / L;  // a training forward's only

  // ln_f (layout A), then the tied head: an A→B linear with W = wteᵀ, logits (m, V/q) for
  // sequences sub-block i·q+l and vocabulary block j.
  Tensor lnf = act({m, Cq}), mean = act({m}), rstd = act({m});
  grid_layernorm_forward(*cube_.l_axis, lnf.f32(), mean.f32(), rstd.f32(), x.f32(),
                         view(P, "ln_f.weight").f32(), view(P, "ln_f.bias").f32(), m, Cq, C, dev_);
  Tensor lnf_g;
  Tensor logits = linear3d_forward(a_to_b(), lnf, wte, C, V, /*transposed=*/true, &lnf_g);
  const float dloss = 1.0f / (static_cast<float>(B) * T);
  // Σ over this sub-block's rows (the same on the j-axis group), then over the other sub-blocks.
  Tensor loss = Tensor::empty({1}, DType::kF64, MemCategory::kOther);
  loss.f64()[0] = grid_cross_entropy(*cube_.j_axis, logits.f32(), y, cube_.j * (V / q), m, V / q,
                                     dloss, G != nullptr, dev_);
  cube_.plane_j->all_reduce(loss, ReduceOp::kSum);  // sends 2(q²-1)/q²·8
  if (G == nullptr) return loss.f64()[0] * dloss;

  // Backward. logits now hold dloss·(softmax - onehot).
  Tensor dwte = view(*G, "wte.weight");
  Tensor dlnf = linear3d_backward(a_to_b(), logits, lnf_g, wte, dwte, C, V, true);
  Tensor dx = Tensor::zeros({m, Cq}, DType::kF32, MemCategory::kActivations, dev_);
  grid_layernorm_backward(*cube_.l_axis, dx.f32(), view(*G, "ln_f.weight").f32(),
                          view(*G, "ln_f.bias").f32(), dlnf.f32(), x.f32(),
                          view(P, "ln_f.weight").f32(), mean.f32(), rstd.f32(), m, Cq, C, dev_);
  for (int layer = L - 1; layer >= 0; --layer) {
    if (!caches[layer].qkv.defined()) recompute(layer, P, caches, Bl, T);
    dx = block_backward(layer, P, *G, &caches[layer], dx, Bl, T);
  }
  // Embedding backward: wpe from this rank's rows (summed over the plane below); wte from all M
  // rows, gathered over the plane (the mirror of the forward's reduce_scatter).
  ops.position_embedding_backward(view(*G, "wpe.weight").f32(), dx.f32(), Bl, T, 0, Cq);
  Tensor dx_all = act({M, Cq});
  cube_.plane_l->all_gather(dx, dx_all);  // sends (q²-1)/q²·4·M·Cq
  ops.token_embedding_backward(dwte.f32(), dx_all.f32(), tokens, v0, Vr, M, Cq);
  all_reduce_replicated_grads(*G);
  return loss.f64()[0] * dloss;
}

void Gpt3d::recompute(int layer, const Tensor& P, std::vector<Block3dCache>& caches, int Bl,
                      int T) {
  // From the nearest checkpoint at or before the block (block 0's input always is one): the
  // forwards of blocks c..layer run again, with their 3D linears' collectives and the grid
  // LayerNorms' all_reduces, each keeping its cache (its input in it) for its backward.
  CountRecomputedFlops count;
  int c = layer;
  while (!caches[c].x.defined()) --c;
  Tensor x = caches[c].x;
  for (int i = c; i <= layer; ++i) x = block_forward(i, P, x, Bl, T, &caches[i]);
  RecomputeMeter::instance().recomputed_blocks += layer - c + 1;
}

void Gpt3d::all_reduce_replicated_grads(Tensor& G) {
  // Layout-A vectors (wpe, LayerNorms, c_proj biases) over plane(l), layout-B vectors (c_attn,
  // c_fc biases) over plane(j): each packed into one buffer, one all_reduce of 2(q²-1)/q²·S.
  for (Replication which : {Replication::kPlaneL, Replication::kPlaneJ}) {
    int64_t n = 0;
    for (const Param3d& p : layout_.params()) n += p.replication == which ? p.numel : 0;
    Tensor packed = Tensor::empty({n}, DType::kF32, MemCategory::kCommBuffers, dev_);
    int64_t at = 0;  // packed and unpacked by copies between views, on G's device
    for (const Param3d& p : layout_.params())
      if (p.replication == which)
        packed.narrow(at, p.numel).copy_from(G.narrow(p.offset, p.numel)), at += p.numel;
    (which == Replication::kPlaneL ? cube_.plane_l : cube_.plane_j)->all_reduce(packed);
    at = 0;
    for (const Param3d& p : layout_.params())
      if (p.replication == which)
        G.narrow(p.offset, p.numel).copy_from(packed.narrow(at, p.numel)), at += p.numel;
  }
}

}  // namespace llmp
