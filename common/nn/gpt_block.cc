// One pre-LN transformer block, forward and backward (GPT::block_forward / block_backward).
//
//   forward                                      shapes (N = B·T rows)
//   ln1  = LN(x_in; ln_1)                        (N,C)
//   qkv  = ln1 @ c_attn.W + b                    (N,C) @ (C,3C) -> (N,3C)
//   atty = causal_attention(qkv)                 (N,3C) -> (N,C), att (B,H,T,T)
//   res1 = x_in + atty @ attn.c_proj.W + b       (N,C) @ (C,C) -> (N,C)
//   ln2  = LN(res1; ln_2)                        (N,C)
//   fch  = ln2 @ c_fc.W + b                      (N,C) @ (C,4C) -> (N,4C)
//   x_out = res1 + gelu(fch) @ mlp.c_proj.W + b  (N,4C) @ (4C,C) -> (N,C)
//
// The backward walks the same lines upwards. Both residual additions mean the incoming gradient
// passes straight through: dres1 = dx_out + LN2ᵀ(...), dx_in = dres1 + LN1ᵀ(...), which is why
// layernorm_backward accumulates into its dx. Radford et al. 2019 (GPT-2); llm.c's gpt2_backward.
//
// Glossary: B batch, T sequence, C channels, H heads, N = B·T, LN LayerNorm.
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/nn/block_params.h"
#include "common/nn/checks.h"
#include "common/nn/gpt.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"

namespace llmp {
namespace {

/// A fresh activation tensor. The cache's previous tensors are released, never written into:
/// a caller may still hold them (a copy of the cache kept for a later backward).
Tensor act(std::vector<int64_t> shape) {
  return Tensor::empty(std::move(shape), DType::kF32, MemCategory::kActivations);
}

/// a (n) += b (n).
void add_inplace(float* __restrict a, const float* __restrict b, long n) {
  for (long i = 0; i < n; ++i) a[i] += b[i];
}

}  // namespace

void GPT::block_forward(const float* block_params_ptr, const float* x_in, int B, int T,
                        float* x_out, BlockCache* cache) const {
  const int C = cfg_.d, H = cfg_.heads;
  check_batch_shape("block_forward", cfg_, B, T);
  const long N = static_cast<long>(B) * T;
  const auto p = block_params(block_params_ptr, C);
  BlockCache& c = *cache;
  c = BlockCache{};  // release what the cache held before allocating anew (lower peak)
  c.ln1 = act({B, T, C});
  c.ln1_mean = act({B, T});
  c.ln1_rstd = act({B, T});
  c.qkv = act({B, T, 3 * C});
  c.att = act({B, H, T, T});
  c.atty = act({B, T, C});
  c.res1 = act({B, T, C});
  c.ln2 = act({B, T, C});
  c.ln2_mean = act({B, T});
  c.ln2_rstd = act({B, T});
  c.fch = act({B, T, 4 * C});
  c.fch_gelu = act({B, T, 4 * C});
  c.B = B;
  c.T = T;

  // Attention half: res1 = x_in + c_proj(attn(c_attn(ln_1(x_in)))).
  cpu::layernorm_forward(c.ln1.f32(), c.ln1_mean.f32(), c.ln1_rstd.f32(), x_in, p.ln1_w, p.ln1_b, N,
                         C);
  cpu::matmul_forward(c.qkv.f32(), c.ln1.f32(), p.attn_w, p.attn_b, N, C, 3 * C);  // -> (N,3C)
  cpu::attention_forward(c.atty.f32(), c.att.f32(), c.qkv.f32(), B, T, C, H);      // -> (N,C)
  cpu::matmul_forward(c.res1.f32(), c.atty.f32(), p.proj_w, p.proj_b, N, C, C);    // -> (N,C)
  add_inplace(c.res1.f32(), x_in, N * C);                                          // residual

  // MLP half: x_out = res1 + c_proj(gelu(c_fc(ln_2(res1)))).
  cpu::layernorm_forward(c.ln2.f32(), c.ln2_mean.f32(), c.ln2_rstd.f32(), c.res1.f32(), p.ln2_w,
                         p.ln2_b, N, C);
  cpu::matmul_forward(c.fch.f32(), c.ln2.f32(), p.fc_w, p.fc_b, N, C, 4 * C);  // -> (N,4C)
  cpu::gelu_forward(c.fch_gelu.f32(), c.fch.f32(), N * 4 * C);
  cpu::matmul_forward(x_out, c.fch_gelu.f32(), p.fcproj_w, p.fcproj_b, N, 4 * C, C);  // -> (N,C)
  add_inplace(x_out, c.res1.f32(), N * C);                                            // residual
}

void GPT::block_backward(const float* block_params_ptr, const float* x_in, const BlockCache& cache,
                         const float* dx_out, float* dx_in, float* block_grads) const {
  const int C = cfg_.d, H = cfg_.heads, B = cache.B, T = cache.T;
  if (!cache.fch_gelu.defined())
    throw std::invalid_argument("block_backward: the cache was not filled by block_forward");
  const long N = static_cast<long>(B) * T;
  const auto p = block_params(block_params_ptr, C);
  const auto g = block_params(block_grads, C);
  // Workspace: dh (N,4C) holds dfch, then (once that is dead) dqkv (N,3C); dc (N,C) holds dln2,
  // then datty, then dln1; scratch (T,T) is attention's dP of one head.
  Tensor dh = act({B, T, 4 * C}), dc = act({B, T, C}), scratch = act({T, T});

  // MLP: x_out = res1 + gelu(fch) @ Wp + bp.
  cpu::matmul_backward(dh.f32(), g.fcproj_w, g.fcproj_b, dx_out, cache.fch_gelu.f32(), p.fcproj_w,
                       N, 4 * C, C);                                   // dfch_gelu (N,4C)
  cpu::gelu_backward(dh.f32(), cache.fch.f32(), dh.f32(), N * 4 * C);  // dfch (N,4C), in place
  cpu::matmul_backward(dc.f32(), g.fc_w, g.fc_b, dh.f32(), cache.ln2.f32(), p.fc_w, N, C,
                       4 * C);  // dln2 (N,C)
  // dres1 = dx_out (residual path) + LN2ᵀ(dln2); it lives in dx_in from here on.
  if (dx_in != dx_out) std::memcpy(dx_in, dx_out, sizeof(float) * N * C);
  cpu::layernorm_backward(dx_in, g.ln2_w, g.ln2_b, dc.f32(), cache.res1.f32(), p.ln2_w,
                          cache.ln2_mean.f32(), cache.ln2_rstd.f32(), N, C);

  // Attention: res1 = x_in + atty @ Wo + bo.
  cpu::matmul_backward(dc.f32(), g.proj_w, g.proj_b, dx_in, cache.atty.f32(), p.proj_w, N, C,
                       C);  // datty (N,C)
  float* dqkv = dh.f32();   // (N,3C) view of dh
  cpu::attention_backward(dqkv, dc.f32(), cache.qkv.f32(), cache.att.f32(), scratch.f32(), B, T, C,
                          H);
  cpu::matmul_backward(dc.f32(), g.attn_w, g.attn_b, dqkv, cache.ln1.f32(), p.attn_w, N, C,
                       3 * C);  // dln1 (N,C)
  // dx_in = dres1 (residual path) + LN1ᵀ(dln1).
  cpu::layernorm_backward(dx_in, g.ln1_w, g.ln1_b, dc.f32(), x_in, p.ln1_w, cache.ln1_mean.f32(),
                          cache.ln1_rstd.f32(), N, C);
}

}  // namespace llmp
