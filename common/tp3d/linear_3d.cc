// linear3d_forward / linear3d_backward (see linear_3d.h).
#include "common/tp3d/linear_3d.h"

#include "kernels/ops/kernel_ops.h"

namespace llmp {

Tensor linear3d_forward(const Linear3dGroups& g, const Tensor& x, const Tensor& w_piece, int K,
                        int N, bool transposed, Tensor* x_gathered) {
  const int q = g.gx->size();
  const int64_t m = x.numel() / (K / q), mg = m * q;  // rows held, rows of the sequence block
  const int Kq = K / q, Nq = N / q;
  const Device d = x.device();  // every buffer and product on x's device
  KernelOps& ops = kernel_ops(d);
  // X_g (mg, K/q): the sequence block's rows, sub-block by sub-block in gx's rank order.
  *x_gathered = Tensor::empty({mg, Kq}, DType::kF32, MemCategory::kActivations, d);
  g.gx->all_gather(x, *x_gathered);  // sends (q-1)/q·4·mg·K/q
  // W_g: (K/q, N/q), or (N/q, K/q) transposed; pieces concatenate by rows.
  Tensor wg = Tensor::empty({w_piece.numel() * q}, DType::kF32, MemCategory::kCommBuffers, d);
  g.gw->all_gather(w_piece, wg);  // sends (q-1)/q·4·KN/q²
  Tensor yp = Tensor::empty({mg, Nq}, DType::kF32, MemCategory::kActivations, d);
  if (transposed)  // (mg, K/q) @ (N/q, K/q)ᵀ -> (mg, N/q)
    ops.matmul_nt_forward(yp.f32(), x_gathered->f32(), wg.f32(), mg, Kq, Nq);
  else  // (mg, K/q) @ (K/q, N/q) -> (mg, N/q)
    ops.matmul_forward(yp.f32(), x_gathered->f32(), wg.f32(), nullptr, mg, Kq, Nq);
  Tensor y = Tensor::empty({m, Nq}, DType::kF32, MemCategory::kActivations, d);
  g.gy->reduce_scatter(yp, y);  // Σ over gy, rows chunk gy.rank(); sends (q-1)/q·4·mg·N/q
  return y;
}

Tensor linear3d_backward(const Linear3dGroups& g, const Tensor& dy, const Tensor& x_gathered,
                         const Tensor& w_piece, Tensor& dw_piece, int K, int N, bool transposed) {
  const int q = g.gx->size();
  const int Kq = K / q, Nq = N / q;
  const int64_t m = dy.numel() / Nq, mg = m * q;
  const Device d = dy.device();  // every buffer and product on dy's device
  KernelOps& ops = kernel_ops(d);
  Tensor dyg = Tensor::empty({mg, Nq}, DType::kF32, MemCategory::kActivations, d);
  g.gy->all_gather(dy, dyg);  // sends (q-1)/q·4·mg·N/q
  Tensor wg = Tensor::empty({w_piece.numel() * q}, DType::kF32, MemCategory::kCommBuffers, d);
  g.gw->all_gather(w_piece, wg);  // gathered again rather than kept: (q-1)/q·4·KN/q²
  // dX_p (mg, K/q) = dY_g @ W_gᵀ: the share of the N/q output columns held; the other column
  // blocks' shares (same rows, same input channels) sit on gx's ranks.
  Tensor dxp = Tensor::empty({mg, Kq}, DType::kF32, MemCategory::kActivations, d);
  if (transposed)  // (mg, N/q) @ (N/q, K/q)
    ops.matmul_forward(dxp.f32(), dyg.f32(), wg.f32(), nullptr, mg, Nq, Kq);
  else  // (mg, N/q) @ (K/q, N/q)ᵀ
    ops.matmul_backward_input(dxp.f32(), dyg.f32(), wg.f32(), mg, Kq, Nq);
  Tensor dx = Tensor::empty({mg / q, Kq}, DType::kF32, MemCategory::kActivations, d);
  g.gx->reduce_scatter(dxp, dx);  // sends (q-1)/q·4·mg·K/q
  // dW_g = X_gᵀ @ dY_g (K/q, N/q) over this sequence block; Σ over the blocks on gw's ranks.
  Tensor dwg = Tensor::zeros({w_piece.numel() * q}, DType::kF32, MemCategory::kCommBuffers, d);
  if (transposed)  // dW_gt (N/q, K/q) += dY_gᵀ @ X_g
    ops.matmul_backward_weight(dwg.f32(), nullptr, x_gathered.f32(), dyg.f32(), mg, Nq, Kq);
  else
    ops.matmul_backward_weight(dwg.f32(), nullptr, dyg.f32(), x_gathered.f32(), mg, Kq, Nq);
  Tensor dwp = Tensor::empty({w_piece.numel()}, DType::kF32, MemCategory::kCommBuffers, d);
  g.gw->reduce_scatter(dwg, dwp);  // sends (q-1)/q·4·KN/q²
  ops.add_to(dw_piece.f32(), dwp.f32(), dwp.numel());  // dW piece += the reduced share
  return dx;
}

}  // namespace llmp
