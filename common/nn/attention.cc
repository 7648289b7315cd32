// The attention sub-layer of a block (sublayer.h), forward and backward, line by line:
//
//   forward                                    shapes (n = B·Tl rows held, N = B·T)
//   ln1  = LN(x; ln_1)                         (n,C)
//   ln1f = f(ln1)                              (N,C)      TpComm::enter_forward
//   qkv  = ln1f @ c_attn.W + b                 (N,C) @ (C,qkv) -> (N,qkv)   this rank's heads
//   atty = causal_attention(qkv)               (N,qkv) -> (N,attn), att (B,H/t,T,T)
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

#include "common/nn/sublayer.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/residual.h"

namespace llmp {

Tensor activation(std::vector<int64_t> shape) {
  return Tensor::empty(std::move(shape), DType::kF32, MemCategory::kActivations);
}

Tensor attention_forward(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                         const Tensor& x, int B, int T, AttentionCache* c) {
  const int C = s.C, Tl = static_cast<int>(x.dim(1));
  const long n = static_cast<long>(B) * Tl, N = static_cast<long>(B) * T;
  *c = AttentionCache{};  // release what the cache held before allocating anew (lower peak)
  c->ln1 = activation({B, Tl, C});
  c->ln1_mean = activation({B, Tl});
  c->ln1_rstd = activation({B, Tl});
  cpu::layernorm_forward(c->ln1.f32(), c->ln1_mean.f32(), c->ln1_rstd.f32(), x.f32(), p.ln1_w,
                         p.ln1_b, n, C);
  {
    const Tensor ln1f = tp.enter_forward(c->ln1);  // f: (n,C) -> (N,C)
    c->qkv = activation({B, T, s.qkv()});
    cpu::matmul_forward(c->qkv.f32(), ln1f.f32(), p.attn_w, p.attn_b, N, C, s.qkv());
  }
  c->att = activation({B, s.heads, T, T});
  c->atty = activation({B, T, s.attn()});
  cpu::attention_forward(c->atty.f32(), c->att.f32(), c->qkv.f32(), B, T, s.attn(), s.heads);
  Tensor y = activation({B, T, C});
  cpu::matmul_forward(y.f32(), c->atty.f32(), p.proj_w, nullptr, N, s.attn(), C);  // partial
  y = tp.exit_forward(std::move(y));  // g: Σ over the tp ranks, (N,C) -> (n,C)
  cpu::residual_bias_add(y.f32(), x.f32(), y.f32(), p.proj_b, n, C);  // res1 = x + y + b
  return y;
}

Tensor attention_backward_input(const BlockShape& s, TpComm& tp, const BlockParams<const float>& p,
                                const Tensor& x, AttentionCache* c, const Tensor& dres1,
                                SublayerGrads* keep) {
  const int C = s.C, B = static_cast<int>(c->qkv.dim(0)), T = static_cast<int>(c->qkv.dim(1));
  const long n = dres1.numel() / C, N = static_cast<long>(B) * T;
  keep->dy = dres1;                          // c_proj's bias gradient (this rank's rows)
  keep->dy_full = tp.exit_backward(dres1);   // g's backward: (n,C) -> (N,C)
  {
    Tensor datty = activation({B, T, s.attn()});
    cpu::matmul_backward_input(datty.f32(), keep->dy_full.f32(), p.proj_w, N, s.attn(), C);
    Tensor scratch = activation({T, T});  // attention's dP of one head
    keep->dhidden = activation({B, T, s.qkv()});
    cpu::attention_backward(keep->dhidden.f32(), datty.f32(), c->qkv.f32(), c->att.f32(),
                            scratch.f32(), B, T, s.attn(), s.heads);  // dqkv (N,qkv)
  }
  c->qkv = Tensor();  // W needs neither attention's inputs nor its probabilities
  c->att = Tensor();
  Tensor dln1 = activation({B, T, C});
  cpu::matmul_backward_input(dln1.f32(), keep->dhidden.f32(), p.attn_w, N, C, s.qkv());
  keep->dln = tp.enter_backward(std::move(dln1));  // f's backward: Σ over ranks, -> (n,C)
  // dx = dres1 (residual path) + LN1ᵀ(dln1); layernorm_backward accumulates into dx.
  Tensor dx = activation(x.shape());
  std::memcpy(dx.f32(), dres1.f32(), dx.nbytes());
  cpu::layernorm_backward(dx.f32(), nullptr, nullptr, keep->dln.f32(), x.f32(), p.ln1_w,
                          c->ln1_mean.f32(), c->ln1_rstd.f32(), n, C);
  return dx;
}

void attention_backward_weight(const BlockShape& s, TpComm& tp, const Tensor& x,
                               const AttentionCache& c, const SublayerGrads& keep,
                               const BlockParams<float>& g) {
  const int C = s.C;
  const long n = x.numel() / C, N = keep.dy_full.numel() / C;
  // attn.c_proj: dW (attn,C) += attyᵀ @ dy_full; b (C) += Σ dy over this rank's rows.
  cpu::matmul_backward_weight(g.proj_w, nullptr, keep.dy_full.f32(), c.atty.f32(), N, s.attn(), C);
  cpu::residual_bias_backward(g.proj_b, keep.dy.f32(), n, C);
  // c_attn: dW (C,qkv) += ln1fᵀ @ dqkv, db (qkv) += Σ dqkv. ln1f is all-gathered again under
  // sequence parallelism (only this rank's rows were kept).
  const Tensor ln1f = tp.regather(c.ln1);
  cpu::matmul_backward_weight(g.attn_w, g.attn_b, keep.dhidden.f32(), ln1f.f32(), N, C, s.qkv());
  cpu::layernorm_backward_weight(g.ln1_w, g.ln1_b, keep.dln.f32(), x.f32(), c.ln1_mean.f32(),
                                 c.ln1_rstd.f32(), n, C);
}

}  // namespace llmp
