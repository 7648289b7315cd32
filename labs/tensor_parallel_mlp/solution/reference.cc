// Lab tensor_parallel_mlp, reference solution (for instructors; students start from ../starter.cc).
//
// Megatron's MLP (Shoeybi et al. 2019, §3): c_fc column-parallel, GELU local, c_proj row-parallel,
// f before c_fc and g after c_proj. Splitting W_fc by columns gives each rank whole columns of h,
// so GELU (elementwise) needs nothing from the other ranks; splitting W_proj by the matching rows
// makes a @ W_proj = Σ_r a_r @ W_proj,r, one all_reduce (g). Backward mirrors it: dy reaches every
// rank already whole (g' = identity), and dx = Σ_r dh_r @ W_fc,rᵀ is the one all_reduce (f').
//
// Glossary: t ranks, N rows, C channels, Fs = F/t this rank's hidden columns.
#include <vector>

#include "common/runtime/check.h"
#include "common/tp/mappings.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/matmul.h"
#include "labs/tensor_parallel_mlp/tensor_parallel_mlp.h"

namespace llmp {

namespace {

void check_shapes(const Tensor& x, const TpMlpShard& s) {
  const int64_t C = x.ndim() == 2 ? x.dim(1) : -1, Fs = s.w_fc.ndim() == 2 ? s.w_fc.dim(1) : -1;
  LLMP_CHECK(C > 0 && Fs > 0 && s.w_fc.shape() == std::vector<int64_t>({C, Fs}) &&
                 s.b_fc.shape() == std::vector<int64_t>({Fs}) &&
                 s.w_proj.shape() == std::vector<int64_t>({Fs, C}) &&
                 s.b_proj.shape() == std::vector<int64_t>({C}),
             "tp_mlp: want x (N, C), w_fc (C, F/t), b_fc (F/t), w_proj (F/t, C), b_proj (C); "
             "got x " + x.describe() + ", w_fc " + s.w_fc.describe() + ", b_fc " +
                 s.b_fc.describe() + ", w_proj " + s.w_proj.describe() + ", b_proj " +
                 s.b_proj.describe());
}

}  // namespace

Tensor tp_mlp_forward(const Tensor& x, const TpMlpShard& shard, TpMlpCache& cache,
                      ProcessGroup& tp) {
  check_shapes(x, shard);
  const int N = x.dim(0), C = x.dim(1), Fs = shard.w_fc.dim(1);
  Tensor xin = tp::CopyToTpRegion::forward(x, tp);  // f: identity
  cache.h = Tensor::empty({N, Fs}, DType::kF32, MemCategory::kActivations);
  cache.a = Tensor::empty({N, Fs}, DType::kF32, MemCategory::kActivations);
  // (N, C) @ (C, Fs) + (Fs) -> (N, Fs): this rank's columns of h
  cpu::matmul_forward(cache.h.f32(), xin.f32(), shard.w_fc.f32(), shard.b_fc.f32(), N, C, Fs);
  cpu::gelu_forward(cache.a.f32(), cache.h.f32(), long(N) * Fs);  // local: whole columns
  // (N, Fs) @ (Fs, C) -> (N, C): this rank's partial sum of y, no bias yet
  Tensor y = Tensor::empty({N, C}, DType::kF32, MemCategory::kActivations);
  cpu::matmul_forward(y.f32(), cache.a.f32(), shard.w_proj.f32(), nullptr, N, Fs, C);
  y = tp::ReduceFromTpRegion::forward(y, tp);  // g: all_reduce, 2(t-1)/t·4NC bytes
  for (int n = 0; n < N; ++n)                  // the replicated bias, once, after the sum
    for (int c = 0; c < C; ++c) y.f32()[n * C + c] += shard.b_proj.f32()[c];
  return y;
}

Tensor tp_mlp_backward(const Tensor& dy, const Tensor& x, TpMlpShard& shard,
                       const TpMlpCache& cache, ProcessGroup& tp) {
  check_shapes(x, shard);
  LLMP_CHECK(dy.shape() == x.shape(),
             "tp_mlp_backward: dy " + dy.describe() + " must have x's shape " + x.describe());
  const int N = x.dim(0), C = x.dim(1), Fs = shard.w_fc.dim(1);
  for (int n = 0; n < N; ++n)  // db_proj += Σ_rows dy: the full gradient, dy being replicated
    for (int c = 0; c < C; ++c) shard.db_proj.f32()[c] += dy.f32()[n * C + c];
  Tensor dyp = tp::ReduceFromTpRegion::backward(dy, tp);  // g': identity
  // c_proj: da (N, Fs) = dy @ w_projᵀ; dw_proj (Fs, C) += aᵀ @ dy
  Tensor dh = Tensor::empty({N, Fs}, DType::kF32, MemCategory::kActivations);
  cpu::matmul_backward(dh.f32(), shard.dw_proj.f32(), nullptr, dyp.f32(), cache.a.f32(),
                       shard.w_proj.f32(), N, Fs, C);
  cpu::gelu_backward(dh.f32(), cache.h.f32(), dh.f32(), long(N) * Fs);  // dh = gelu'(h)·da
  // c_fc: dx (N, C) = dh @ w_fcᵀ, this rank's part; dw_fc (C, Fs) += xᵀ @ dh; db_fc += Σ_rows dh
  Tensor dx = Tensor::empty({N, C}, DType::kF32, MemCategory::kActivations);
  cpu::matmul_backward(dx.f32(), shard.dw_fc.f32(), shard.db_fc.f32(), dh.f32(), x.f32(),
                       shard.w_fc.f32(), N, C, Fs);
  return tp::CopyToTpRegion::backward(dx, tp);  // f': all_reduce, 2(t-1)/t·4NC bytes
}

}  // namespace llmp
