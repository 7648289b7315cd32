// Flash attention (--attention flash): the whole-sequence attention of a block without the
// (B,H,T,T) probabilities in memory.
//
// The materialized attention (attention.cc, kernels/cpu/attention.h) keeps P = softmax(QKᵀ/√hs)
// for the backward: B·H·T² values per block, the one activation that grows with T². Flash
// attention (Dao et al. 2022, Algorithm 1) never holds P: it walks the keys block by block with an
// online softmax (Milakov & Gimelshein 2018), keeping a running max m and sum l per query row,
// and keeps only lse = m + log l (B,H,T) for the backward, which makes P again from q, k and lse
// (Dao 2023, FlashAttention-2, Algorithm 2: D = rowsum(dO ⊙ O) replaces Σ_k P dP):
//
//   forward, per (b, h), query row i over the key blocks:
//     S = q_i·k_jᵀ/√hs;  m' = max(m, max S);  l = e^(m−m')·l + Σ e^(S−m');
//     O_i = e^(m−m')·O_i + Σ_j e^(S_j−m') v_j;  m = m'         then out_i = O_i / l, lse_i = m +
//     log l
//   backward:
//     D_i = dO_i·out_i;  P_ij = e^(S_ij − lse_i);  dV_j += Σ_i P_ij dO_i;  dP_ij = dO_i·v_j;
//     dS_ij = P_ij (dP_ij − D_i)/√hs;  dQ_i += Σ_j dS_ij k_j;  dK_j += Σ_i dS_ij q_i
//
// The kernels are ring attention's blockwise ones (kernels/cpu/attention_block.h, whose CUDA twins
// ran on an H100: kernels/cuda/README.md) on one block: the T positions of a sequence as two
// chunks of T/2, causal (the diagonal chunks masked, the second query chunk seeing the whole
// first key chunk). Ring attention on one rank is exactly this; ring attention on p ranks hands
// the same kernels one key block per ring step (common/cp/ring_attention.h).
//
// What it changes: the memory (kept per block: lse, 4·B·H·T bytes, instead of P, B·H·T² values;
// workspaces: one T×T score block forward and two backward, MemTag::kAttentionScores), and the
// order of attention's sums (the same math; fp32 results agree with the materialized attention
// to rounding: flash_attention_test). The kernels compute in fp32: 16-bit activations go through
// fp32 copies (f32_view.h), and P is never rounded to bf16 (as the materialized path's
// rounded_products does). FLOPs as the kernels count them (attention_block_flops): the diagonal
// chunks' full squares, so 3/4 of T² per product where the materialized kernels count T² for QKᵀ
// and the lower triangle for P V.
//
// Glossary: B sequences, T positions, H heads of this rank (H/t), hs head size, A = H·hs.
#pragma once

#include <string>

#include "common/tensor/tensor.h"

namespace llmp {

/// How the attention sub-layer attends over whole sequences (GPTConfig::attention). Not part of
/// the model: checkpoints are the same, results agree to rounding.
enum class AttentionMethod {
  kMaterialized,  ///< P (B,H,T,T) computed, kept for the backward (the default)
  kFlash,         ///< online softmax; lse (B,H,T) kept, P made again in the backward
};

/// "materialized", "flash".
const char* to_string(AttentionMethod m);
/// Inverse of to_string. Throws std::invalid_argument("--attention 'x' (expected materialized
/// or flash)") otherwise.
AttentionMethod parse_attention(const std::string& s);

/// "" when flash attention takes sequences of T positions, else one line naming T: the blockwise
/// kernels take two causal chunks of T/2, so T must be even. The trainers check it before any
/// rank starts (train_main's model_config); flash_attention_forward throws it.
std::string flash_attention_error(int T);

/// out (B,T,A) = causal multi-head attention of qkv (B,T,3A) (q | k | v, head h at channels
/// h·hs of each; kernels/cpu/attention.h's layout) over H heads, scaled 1/√hs; returns lse
/// (B,H,T) f32 (kActivations), what the backward needs. qkv and out of one dtype (f32, f16,
/// bf16), on one device, whose kernels run it. Throws std::invalid_argument naming T when T is
/// odd (the two causal chunks of T/2) or A % H != 0.
Tensor flash_attention_forward(const Tensor& qkv, const Tensor& out, int B, int T, int H);

/// dqkv (B,T,3A) = d(attention)/dqkv, OVERWRITTEN, from dout (B,T,A) and the forward's qkv, out
/// and lse. P and dS are made again per (b, h), one T×T block at a time (CPU workspaces).
void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                              const Tensor& out, const Tensor& lse, int B, int T, int H);

}  // namespace llmp
