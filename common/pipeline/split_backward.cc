// B and W passes of a transformer block (see split_backward.h), built from the kernels in
// kernels/cpu/ and walking the same lines as GPT::block_backward (common/nn/gpt_block.cc).
#include "common/pipeline/split_backward.h"

#include <Eigen/Core>
#include <cstring>
#include <stdexcept>

#include "common/nn/block_params.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"

namespace llmp {
namespace {

using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// The B half of matmul_backward: dx (N,C) = dy (N,OC) @ Wᵀ, W (C,OC). OVERWRITES dx.
void matmul_backward_input(float* dx, const float* dy, const float* W, int N, int C, int OC) {
  Eigen::Map<MatR>(dx, N, C).noalias() =
      Eigen::Map<const MatR>(dy, N, OC) * Eigen::Map<const MatR>(W, C, OC).transpose();
}

/// The W half of layernorm_backward: dw (C) += Σ_rows dy·x̂, db (C) += Σ_rows dy,
/// x̂ = (x - mean)·rstd recomputed from the forward's statistics.
void layernorm_backward_weight(float* dw, float* db, const float* dy, const float* x,
                               const float* mean, const float* rstd, int N, int C) {
  Eigen::Map<Eigen::ArrayXf> dW(dw, C), dB(db, C);
  Eigen::ArrayXf xhat(C);
  for (int n = 0; n < N; ++n) {
    const long o = static_cast<long>(n) * C;
    Eigen::Map<const Eigen::ArrayXf> xr(x + o, C), dyr(dy + o, C);
    xhat = (xr - mean[n]) * rstd[n];
    dW += dyr * xhat;
    dB += dyr;
  }
}

Tensor act(std::vector<int64_t> shape) {
  return Tensor::empty(std::move(shape), DType::kF32, MemCategory::kActivations);
}

}  // namespace

void block_backward_input(const GPT& model, const float* block_params_ptr, const float* x_in,
                          BlockCache* cache, const float* dx_out, float* dx_in,
                          BlockGradCache* keep) {
  const int C = model.config().d, H = model.config().heads, B = cache->B, T = cache->T;
  if (!cache->fch_gelu.defined())
    throw std::invalid_argument("block_backward_input: the cache was not filled by block_forward");
  const long N = static_cast<long>(B) * T;
  const auto p = block_params(block_params_ptr, C);
  const BlockCache& c = *cache;
  // LayerNorm's kernel also accumulates dw, db: they land here and are thrown away (W redoes them).
  Tensor ln_scratch = Tensor::zeros({2 * C}, DType::kF32, MemCategory::kActivations);
  Tensor scratch = act({T, T});  // attention's dP of one head

  keep->dx_out = act({B, T, C});
  std::memcpy(keep->dx_out.f32(), dx_out, sizeof(float) * N * C);

  // MLP: x_out = res1 + gelu(fch) @ Wp + bp.
  keep->dfch = act({B, T, 4 * C});
  matmul_backward_input(keep->dfch.f32(), dx_out, p.fcproj_w, N, 4 * C, C);  // dfch_gelu (N,4C)
  cpu::gelu_backward(keep->dfch.f32(), c.fch.f32(), keep->dfch.f32(), N * 4 * C);  // dfch
  keep->dln2 = act({B, T, C});
  matmul_backward_input(keep->dln2.f32(), keep->dfch.f32(), p.fc_w, N, C, 4 * C);  // dln2 (N,C)
  // dres1 = dx_out (residual path) + LN2ᵀ(dln2).
  keep->dres1 = act({B, T, C});
  std::memcpy(keep->dres1.f32(), dx_out, sizeof(float) * N * C);
  cpu::layernorm_backward(keep->dres1.f32(), ln_scratch.f32(), ln_scratch.f32() + C,
                          keep->dln2.f32(), c.res1.f32(), p.ln2_w, c.ln2_mean.f32(),
                          c.ln2_rstd.f32(), N, C);

  // Attention: res1 = x_in + atty @ Wo + bo.
  Tensor datty = act({B, T, C});
  matmul_backward_input(datty.f32(), keep->dres1.f32(), p.proj_w, N, C, C);  // datty (N,C)
  keep->dqkv = act({B, T, 3 * C});
  cpu::attention_backward(keep->dqkv.f32(), datty.f32(), c.qkv.f32(), c.att.f32(), scratch.f32(),
                          B, T, C, H);
  keep->dln1 = act({B, T, C});
  matmul_backward_input(keep->dln1.f32(), keep->dqkv.f32(), p.attn_w, N, C, 3 * C);  // dln1
  // dx_in = dres1 (residual path) + LN1ᵀ(dln1).
  if (dx_in != keep->dres1.f32()) std::memcpy(dx_in, keep->dres1.f32(), sizeof(float) * N * C);
  cpu::layernorm_backward(dx_in, ln_scratch.f32(), ln_scratch.f32() + C, keep->dln1.f32(), x_in,
                          p.ln1_w, c.ln1_mean.f32(), c.ln1_rstd.f32(), N, C);

  // W needs none of these: attention's inputs and probabilities, the pre-GELU activations.
  cache->qkv = Tensor();
  cache->att = Tensor();
  cache->fch = Tensor();
}

void block_backward_weight(const GPT& model, const float* block_params_ptr, const float* x_in,
                           const BlockCache& c, const BlockGradCache& keep, float* block_grads) {
  const int C = model.config().d;
  const long N = static_cast<long>(c.B) * c.T;
  if (!keep.dln1.defined())
    throw std::invalid_argument("block_backward_weight: B (block_backward_input) has not run");
  const auto p = block_params(block_params_ptr, C);
  const auto g = block_params(block_grads, C);
  // dW += xᵀ dy, db += Σ dy for the four weight layers (dx == nullptr: matmul_backward skips it).
  cpu::matmul_backward(nullptr, g.fcproj_w, g.fcproj_b, keep.dx_out.f32(), c.fch_gelu.f32(),
                       p.fcproj_w, N, 4 * C, C);  // (4C,N) @ (N,C) -> (4C,C)
  cpu::matmul_backward(nullptr, g.fc_w, g.fc_b, keep.dfch.f32(), c.ln2.f32(), p.fc_w, N, C,
                       4 * C);                    // (C,N) @ (N,4C) -> (C,4C)
  layernorm_backward_weight(g.ln2_w, g.ln2_b, keep.dln2.f32(), c.res1.f32(), c.ln2_mean.f32(),
                            c.ln2_rstd.f32(), N, C);
  cpu::matmul_backward(nullptr, g.proj_w, g.proj_b, keep.dres1.f32(), c.atty.f32(), p.proj_w, N,
                       C, C);                     // (C,N) @ (N,C) -> (C,C)
  cpu::matmul_backward(nullptr, g.attn_w, g.attn_b, keep.dqkv.f32(), c.ln1.f32(), p.attn_w, N, C,
                       3 * C);                    // (C,N) @ (N,3C) -> (C,3C)
  layernorm_backward_weight(g.ln1_w, g.ln1_b, keep.dln1.f32(), x_in, c.ln1_mean.f32(),
                            c.ln1_rstd.f32(), N, C);
}

}  // namespace llmp
