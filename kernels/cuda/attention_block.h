// Ring attention's blockwise online softmax on the GPU: the twins of kernels/cpu/attention_block.h
// (same signatures, layouts, chunk pairs and math; read that header first).
//
//   forward step  per query row i:  S_ij = q_i·k_j/√hs;  m' = max(m_i, max_j S_ij);
//                 l_i = e^(m_i − m') l_i + Σ_j e^(S_ij − m');  O_i = e^(m_i − m') O_i + Σ_j ... v_j
//   finalize      out_i = O_i / l_i;  lse_i = m_i + log l_i
//   rowdot        D_i = dO_i·out_i
//   backward      P_ij = e^(S_ij − lse_i);  dS_ij = P_ij (dO_i·v_j − D_i)/√hs;
//                 dQ_i += Σ_j dS_ij k_j  (one kernel, a warp per query row)
//                 dV_j += Σ_i P_ij dO_i;  dK_j += Σ_i dS_ij q_i  (another, a warp per key row)
//
// Launch shape: ONE WARP PER ROW of one (b, h) (launch.h's warp_per_row_blocks over B·H·Tl
// rows), for every kernel. A warp walks the keys its row sees one after another; for each it
// forms the dot products q_i·k_j (and dO_i·v_j) with its 32 lanes over the hs channels and a
// butterfly (device_util.h warp_sum), then updates its own output row, lanes over channels.
// Each output row is written by exactly one warp, so the backward needs no atomics: dQ is
// accumulated by query-row warps, dK|dV by key-row warps, each recomputing the S and P it
// needs (FlashAttention-2's split of the backward into a dQ pass and a dK|dV pass, without its
// tiling). The forward's row max is a first pass over the keys, lanes over keys.
//
// Why not cuBLAS strided-batched GEMMs, as attention.cu: the chunk pairs differ per step (a
// skipped, diagonal or full pair) and the rows are strided inside qkv and the ring block, so
// the products would be four GEMM calls per (qi, ki) pair with a masked softmax between; the
// per-row form keeps the whole step in one launch (two for the backward), the math line by
// line as the CPU twin's, at the price of the FLOPs running on CUDA cores, not tensor cores.
// The CPU twin's scores, P, dS workspaces are not used (pass them or nullptr).
//
// Glossary: B sequences, H heads, hs head size, Tl rows of a block, c = Tl/2, ld a row stride in
// floats. Device pointers, on stream() (context.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/attention_block.h"

namespace llmp {
namespace cuda {

using cpu::BlockPairs;

void attention_block_forward(float* o, int ld_o, float* m, float* l, float* scores,
                             const float* q, int ld_q, const float* k, const float* v, int ld_kv,
                             int B, int H, int Tl, int hs, BlockPairs pairs);
void attention_block_finalize(float* o, int ld_o, float* lse, const float* m, const float* l,
                              int B, int H, int Tl, int hs);
void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o, int B,
                            int H, int Tl, int hs);
void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* P, float* dS,
                              const float* q, int ld_q, const float* k, const float* v,
                              int ld_kv, const float* dout, int ld_o, const float* lse,
                              const float* D, int B, int H, int Tl, int hs, BlockPairs pairs);
/// One cudaMemcpy2DAsync, device to device.
void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows, int cols);

}  // namespace cuda
}  // namespace llmp
