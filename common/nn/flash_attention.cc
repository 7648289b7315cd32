// Flash attention on whole sequences (flash_attention.h): ring attention's blockwise kernels on
// one block of T positions.
#include "common/nn/flash_attention.h"

#include <limits>
#include <stdexcept>

#include "common/nn/attention_core.h"
#include "common/nn/f32_view.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

const char* to_string(AttentionMethod m) {
  return m == AttentionMethod::kFlash ? "flash" : "materialized";
}

AttentionMethod parse_attention(const std::string& s) {
  if (s == "materialized") return AttentionMethod::kMaterialized;
  if (s == "flash") return AttentionMethod::kFlash;
  throw std::invalid_argument("--attention '" + s + "' (expected materialized or flash)");
}

std::string flash_attention_error(int T) {
  if (T % 2 == 0) return "";
  return "--attention flash: T=" + std::to_string(T) +
         " is odd (the blockwise kernels take two causal chunks of T/2)";
}

namespace {
// A whole causal sequence as the blockwise kernels' two chunks of T/2 rows (attention_block.h):
// each query chunk sees its own chunk under the causal mask; the second also the whole first.
constexpr cpu::BlockPairs kWholeCausal = {{{cpu::ChunkPair::kDiagonal, cpu::ChunkPair::kSkip},
                                           {cpu::ChunkPair::kFull, cpu::ChunkPair::kDiagonal}}};

// A, after checking T and the heads.
int channels(const Tensor& qkv, int T, int H) {
  const int A = static_cast<int>(qkv.dim(2) / 3);
  if (const std::string err = flash_attention_error(T); !err.empty())
    throw std::invalid_argument(err);
  if (H <= 0 || A % H != 0)
    throw std::invalid_argument("flash attention: " + std::to_string(A) +
                                " channels do not split into H=" + std::to_string(H) + " heads");
  return A;
}
}  // namespace

Tensor flash_attention_forward(const Tensor& qkv, const Tensor& out, int B, int T, int H) {
  const int A = channels(qkv, T, H), hs = A / H;
  const Device dev = qkv.device();
  KernelOps& ops = kernel_ops(dev);
  // The running max m (from −∞) and sum l (from 0) of every query row, and O (from 0) in out.
  Tensor m = Tensor::empty({B, H, T}, DType::kF32, MemCategory::kActivations, dev);
  Tensor l = Tensor::zeros({B, H, T}, DType::kF32, MemCategory::kActivations, dev);
  m.fill(-std::numeric_limits<float>::infinity());
  Tensor(out).fill(0.0f);  // a handle: the same storage
  Tensor lse = Tensor::empty({B, H, T}, DType::kF32, MemCategory::kActivations, dev);
  {
    const F32In q(qkv);            // q | k | v, fp32 (the tensor itself when f32)
    F32Out o(out, /*load=*/true);  // O accumulates from 0; rounded into out at the end
    Tensor S = attention_scores({T, T}, DType::kF32, dev);  // one (b, h)'s score block
    ops.attention_block_forward(o, A, m.f32(), l.f32(), S.f32(), q, 3 * A, q.get() + A,
                                q.get() + 2 * A, 3 * A, B, H, T, hs, kWholeCausal);
    // out = O / l, lse = m + log l.
    ops.attention_block_finalize(o, A, lse.f32(), m.f32(), l.f32(), B, H, T, hs);
  }
  return lse;
}

void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                              const Tensor& out, const Tensor& lse, int B, int T, int H) {
  const int A = channels(qkv, T, H), hs = A / H;
  const Device dev = qkv.device();
  KernelOps& ops = kernel_ops(dev);
  const F32In q(qkv), dO(dout), O(out);
  // D = rowsum(dO ⊙ out) per (b, h, row): the softmax backward's Σ_k P_ik dP_ik without P.
  Tensor D = Tensor::empty({B, H, T}, DType::kF32, MemCategory::kActivations, dev);
  ops.attention_block_rowdot(D.f32(), dO, O, A, B, H, T, hs);
  Tensor(dqkv).fill(0.0f);  // dQ, dK, dV accumulate over the chunk pairs
  F32Out d(dqkv, /*load=*/true);
  Tensor P = attention_scores({T, T}, DType::kF32, dev);   // P of one (b, h), made again
  Tensor dS = attention_scores({T, T}, DType::kF32, dev);  // and its dS
  ops.attention_block_backward(d, d.get() + A, d.get() + 2 * A, 3 * A, P.f32(), dS.f32(), q, 3 * A,
                               q.get() + A, q.get() + 2 * A, 3 * A, dO, A, lse.f32(), D.f32(), B, H,
                               T, hs, kWholeCausal);
}

}  // namespace llmp
