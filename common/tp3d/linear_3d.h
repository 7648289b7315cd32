// The 3D linear layer: y = x @ W on a q×q×q cube with x, W and y all split three ways
// (Bian et al. 2021, §3.1, Algorithm 1; Colossal-AI's Linear3D / linear_3d).
//
// Three groups play three roles (cube.h names the axes):
//   gx: the ranks holding the other sequence sub-blocks of x's sequence block (same channels);
//   gw: the ranks holding the other row pieces of the weight block;
//   gy: the ranks holding the other input-channel blocks of the same sequences (the partial sums).
// An A→B linear uses (gx, gw, gy) = (j-axis, i-axis, l-axis); a B→A linear (j-axis, l-axis swapped)
// (l-axis, i-axis, j-axis). Per rank, M = B·T rows, K,N the weight's (in,out), f = (q-1)/q:
//
//   forward                                                     sent per rank
//     X_g (M/q, K/q)   = all_gather over gx of x (M/q², K/q)       f·4MK/q²
//     W_g (K/q, N/q)   = all_gather over gw of W's piece           f·4KN/q²
//     Y_p (M/q, N/q)   = X_g @ W_g       (a partial sum over gy)
//     y (M/q², N/q)    = reduce_scatter over gy of Y_p, by rows    f·4MN/q²
//   backward, given dy (M/q², N/q)
//     dY_g (M/q, N/q)  = all_gather over gy of dy                  f·4MN/q²
//     W_g              = all_gather over gw again (not kept)       f·4KN/q²
//     dx (M/q², K/q)   = reduce_scatter over gx of dY_g @ W_gᵀ     f·4MK/q²
//     dW piece        += reduce_scatter over gw of X_gᵀ @ dY_g     f·4KN/q²
// 3 calls forward, 4 backward; X_g is what the forward keeps (M/q·K/q floats).
// The weight may be stored transposed (the tied head: W = wteᵀ, pieces of wte's rows), then the
// products are X_g @ W_gtᵀ and so on (`transposed`).
//
// On a device: x (dy), w_piece, x_gathered and dw_piece are that device's memory; the gathered
// and scattered buffers are allocated there (the MPI backend stages each collective's input down
// and its output up) and the products and dW's accumulation are kernel_ops(x.device())'s.
//
// Glossary: q cube side, M rows (tokens), K in, N out features; pieces are K/q² rows of W (or
// N/q² rows of Wᵀ when transposed).
#pragma once

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

struct Linear3dGroups {
  ProcessGroup* gx;  ///< gathers x, scatters dx
  ProcessGroup* gw;  ///< gathers W, scatters dW
  ProcessGroup* gy;  ///< scatters y, gathers dy
};

/// x (m, K/q) with m = M/q² rows; w_piece: (K/q², N/q) row-major, or (N/q², K/q) when
/// `transposed`. Returns y (m, N/q) (kActivations) and sets *x_gathered (q·m, K/q) (kActivations),
/// what linear3d_backward needs. Collective over the three groups (3 calls).
Tensor linear3d_forward(const Linear3dGroups& g, const Tensor& x, const Tensor& w_piece, int K,
                        int N, bool transposed, Tensor* x_gathered);

/// Given dy (m, N/q): returns dx (m, K/q) and ACCUMULATES dW's piece into dw_piece (the shape of
/// w_piece). Collective over the three groups (4 calls).
Tensor linear3d_backward(const Linear3dGroups& g, const Tensor& dy, const Tensor& x_gathered,
                         const Tensor& w_piece, Tensor& dw_piece, int K, int N, bool transposed);

}  // namespace llmp
