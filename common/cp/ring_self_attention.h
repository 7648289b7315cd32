// Ring self-attention (RSA): the attention core of Colossal-AI's sequence parallelism.
//
// Li et al. 2021, "Sequence Parallelism: Long Sequence Training from System Perspective", §3.1
// and Figure 2. Every sequence is split contiguously over the p ranks of a ring: rank r holds
// positions [r·Tl, (r+1)·Tl), Tl = T/p, for the whole model. Attention mixes them in two ring
// passes, each chunk travelling r -> r+1 (mod p), so that after p − 1 steps every rank has seen
// every chunk:
//
//   forward   S_c = Q Kcᵀ/√hs   ring of KEY chunks,   p − 1 sends     S, P: (B,H,Tl,T)
//             P   = causal softmax of the whole row S by GLOBAL position (query r·Tl+i sees
//                   key j iff j <= r·Tl+i); kept in keep->a
//             out = Σ_c P_c V_c ring of VALUE chunks, p − 1 sends     out: (B,Tl,A)
//   backward  dP_c = dO Vcᵀ     ring of [V_c | dV accumulator], p − 1 sends
//             dS   = P ⊙ (dP − rowsum(P ⊙ dP)) / √hs                  local, whole rows
//             dQ  += dS_c K_c   ring of [K_c | dK accumulator], p − 1 sends
//   The partial dV_c = P_cᵀ dO and dK_c = dS_cᵀ Q that rank r makes for chunk c belong to
//   chunk c's owner. They ride in the same message as the chunks, one hop AHEAD of their chunk:
//   the accumulator of chunk c starts (zero) at rank c+1, and at step s rank r holds chunk r − s
//   and the accumulator of chunk r − s − 1 (mod p); each rank adds its part and passes both on,
//   so after p − 1 steps the accumulator of chunk r is home at rank r with all p parts (a ring
//   reduce-scatter riding on the chunk ring, no extra send).
// Chunks c > r lie entirely in the future of every local query: they are not multiplied (P_c = 0)
// but still travel, the ring serves the other ranks. Chunk c = r is the diagonal block: all six
// of its products are computed on the full (Tl,Tl) square like the other chunks' (P and dS are
// exactly 0 above its diagonal, so the numbers are the triangle's): one path for both devices.
//
// Overlap (double buffering): at each step the next chunk's irecv and the current chunk's isend
// are issued BEFORE the products with the current chunk, and waited for after them, so a
// transfer runs under the block products (forward: Q Kcᵀ, P_c V_c; backward: dO Vcᵀ, dS_c K_c).
// In the backward the accumulator's own product (P_aᵀ dO, dS_aᵀ Q) must be done before the send,
// so only the chunk's product is overlapped there. MPI allows reading a buffer being sent.
//
// Memory: S/P (B,H,Tl,T) and the backward's dP/dS (B,H,Tl,T) are attention_scores (tagged). The
// two ring buffers, (B,Tl,A) in the forward and (B,Tl,2A) in the backward, are kCommBuffers and
// are freed when forward/backward returns; keep->a = P is all a block keeps (keep->b unused).
// FLOPs are counted by the product kernel itself (kernels/cpu/ring_self_block.h, and the CUDA
// table with the same formula): 2·Tl²·hs per (b, h) and product, squares for every chunk c <= r,
// nothing for c > r.
//
// Mixed precision (takes_16bit): q|k|v, out, dout and dqkv arrive in 16 bits as the walk stores
// them. The K and V chunks travel in 16 bits (exact: they hold 16-bit values), each widened into
// an fp32 scratch for its products; the products read a widened copy of q|k|v (and dout), out
// and dq|dk|dv are summed in fp32 and rounded once, and S/P, dP/dS and the accumulators stay
// fp32. A backward message is then two isends, the 16-bit chunk and its fp32 accumulator (in
// fp32 they are one buffer): per block (p − 1)(2e + 2(e + 4))·B·Tl·A bytes, 16(p − 1)·B·Tl·A at
// e = 2 against 24(p − 1)·B·Tl·A, in 6(p − 1) isends against 4(p − 1). The results are those of
// the fp32 core on widened copies (common/cp/widened_core.h), bit for bit.
//
// Devices (supports_device()): every buffer (S/P, dP/dS, the ring buffers, out, dqkv) is on
// qkv's device and every operation on them a kernel of kernel_ops(qkv.device()):
// copy_columns packs a chunk out of qkv and unpacks an accumulator into dqkv,
// gemm_strided_batched runs each block product per sequence over the H heads (cuBLAS's
// strided-batched GEMM on a GPU), causal_softmax_rows(_backward) the softmaxes; the ring's
// isend/irecv take the device buffers (the MPI backend stages them through the host).
//
// Glossary: B sequences, T positions, p ranks of the ring, r this rank, Tl = T/p, A channels,
// H heads, hs = A/H, c the chunk (= owner rank) of keys/values, s the ring step, L blocks,
// S scores, P probabilities, dO = ∂L/∂out.
#pragma once

#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/attention_core.h"

namespace llmp {

/// Ring self-attention (Li et al. 2021, §3.1) over `group` (p = group.size(), this rank =
/// group.rank()); contiguous split, rank r holds [r·T/p, (r+1)·T/p). All its traffic (isend /
/// irecv between ring neighbours) goes over `group`, which must outlive the core.
class RingSelfAttention : public AttentionCore {
 public:
  explicit RingSelfAttention(ProcessGroup& group) : group_(group) {}

  /// The one line why sequences of T positions cannot be split over p ranks ("" when p | T).
  static std::string split_error(int T, int H, int p);

  std::string name() const override { return "ring self-attention"; }
  /// Runs on any device with a KernelOps table: the tensors' device (see the file comment).
  bool supports_device() const override { return true; }
  /// 16-bit q|k|v: the chunks travel in 16 bits, the accumulators and P stay fp32 (see above).
  bool takes_16bit() const override { return true; }
  int shards() const override { return group_.size(); }
  int rank() const override { return group_.rank(); }
  /// [r·T/p, (r+1)·T/p). Throws std::invalid_argument naming T and p when p ∤ T or T < 1.
  std::vector<int> positions(int T) const override;
  /// qkv (B,Tl,3A) -> out (B,Tl,A) (allocated here, kActivations, if undefined), both f32, bf16
  /// or f16 alike; keep->a = P (B,H,Tl,T) f32 tagged kAttentionScores. Every tensor on qkv's
  /// device. 2(p − 1) isends of e·B·Tl·A bytes. Throws std::invalid_argument (one line) on p ∤ T,
  /// H ∤ A, shapes that do not match or an `out` on another device or in another dtype.
  void forward(const Tensor& qkv, Tensor& out, int B, int T, int H, AttentionKeep* keep) override;
  /// dqkv (B,Tl,3A) overwritten (allocated here, kActivations, if undefined) from dout (B,Tl,A),
  /// qkv and keep->a, all on qkv's device and in qkv's dtype (P f32; else std::invalid_argument
  /// naming the tensor); frees *keep. 2(p − 1) chunks of e·B·Tl·A bytes with their 4·B·Tl·A
  /// accumulators: one isend each in fp32, two in 16 bits.
  void backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, AttentionKeep* keep,
                Tensor& dqkv, int B, int T, int H) override;

  /// 6(p − 1)·4·B·(T/p)·A in fp32: forward 2(p − 1) chunks of 4·B·Tl·A, backward 2(p − 1) of
  /// twice that; 4(p − 1)·4·B·(T/p)·A with 16-bit chunks (e = 2, the accumulators 4 bytes).
  double bytes_per_block(int B, int T, int A, int H) const override;
  std::string bytes_formula_text() const override;
  /// 4(p − 1) isends in fp32, 6(p − 1) in 16 bits (the irecvs count under "recv", 0 bytes).
  int calls_per_block() const override;
  /// The forward's 2(p − 1) chunks (keys, then values) of e·B·Tl·A bytes, one isend each.
  double forward_bytes_per_block(int B, int T, int A, int H) const override;
  int forward_calls_per_block() const override { return 2 * (shards() - 1); }
  /// 4·B·H·(T/p)·T: P of the local rows against all keys.
  double kept_bytes_per_block(int B, int T, int A, int H) const override;
  /// 4·B·H·(T/p)·T·(L + 1): L blocks' P plus the last backward's dP/dS.
  double peak_score_bytes(int B, int T, int A, int H, int L) const override;
  std::string peak_score_formula_text() const override { return "4(L+1)·B·H·T²/p"; }
  /// 4(r+1)·B·A·Tl² for rank r: Q Kcᵀ and P_c V_c on r+1 squares of 2·B·H·Tl²·hs each
  /// (the diagonal block's P V on its square too).
  double forward_flops_per_block(int B, int T, int A, int H) const override;

 private:
  ProcessGroup& group_;
};

}  // namespace llmp
