// Lab sequence_parallel_mlp, reference solution (for instructors; students start from
// ../starter.cc).
//
// tensor_parallel_mlp's reference with f and g changed (Korthikanti et al. 2022, §4.2.2): the
// rows arrive split, an all_gather makes them whole for c_fc, and c_proj's partial sums are
// reduce-scattered instead of all-reduced, so each rank ends with the sum of its own rows only.
// The backward mirrors it and gathers x again for dw_fc, rather than keeping the (N, C) copy.
//
// Glossary: t ranks, N rows, Nl = N/t this rank's rows, C channels, Fs = F/t.
#include <vector>

#include "common/runtime/check.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/matmul.h"
#include "labs/sequence_parallel_mlp/sequence_parallel_mlp.h"

namespace llmp {
namespace {

void check_shapes(const Tensor& x_s, const TpMlpShard& s) {
  const int64_t C = x_s.ndim() == 2 ? x_s.dim(1) : -1;
  const int64_t Fs = s.w_fc.ndim() == 2 ? s.w_fc.dim(1) : -1;
  LLMP_CHECK(C > 0 && Fs > 0 && s.w_fc.shape() == std::vector<int64_t>({C, Fs}) &&
                 s.b_fc.shape() == std::vector<int64_t>({Fs}) &&
                 s.w_proj.shape() == std::vector<int64_t>({Fs, C}) &&
                 s.b_proj.shape() == std::vector<int64_t>({C}),
             "sp_mlp: want x_s (N/t, C), w_fc (C, F/t), b_fc (F/t), w_proj (F/t, C), b_proj (C); "
             "got x_s " + x_s.describe() + ", w_fc " + s.w_fc.describe() + ", b_fc " +
                 s.b_fc.describe() + ", w_proj " + s.w_proj.describe() + ", b_proj " +
                 s.b_proj.describe());
}

// The (N, C) rows of every rank, in rank order: f's forward (and the backward's second gather).
Tensor gather_rows(const Tensor& rows, ProcessGroup& tp) {
  Tensor all = Tensor::empty({tp.size() * rows.dim(0), rows.dim(1)}, DType::kF32,
                             MemCategory::kActivations);
  tp.all_gather(rows, all);
  return all;
}

// This rank's (Nl, C) rows of the sum over the ranks of `partial` (N, C): g's forward.
Tensor scatter_rows(const Tensor& partial, ProcessGroup& tp) {
  Tensor mine = Tensor::empty({partial.dim(0) / tp.size(), partial.dim(1)}, DType::kF32,
                              MemCategory::kActivations);
  tp.reduce_scatter(partial, mine);
  return mine;
}

}  // namespace

Tensor sp_mlp_forward(const Tensor& x_s, const TpMlpShard& shard, TpMlpCache& cache,
                      ProcessGroup& tp) {
  check_shapes(x_s, shard);
  const int C = x_s.dim(1), Fs = shard.w_fc.dim(1), N = tp.size() * x_s.dim(0);
  cache.h = Tensor::empty({N, Fs}, DType::kF32, MemCategory::kActivations);
  cache.a = Tensor::empty({N, Fs}, DType::kF32, MemCategory::kActivations);
  Tensor yp = Tensor::empty({N, C}, DType::kF32, MemCategory::kActivations);
  {
    const Tensor x = gather_rows(x_s, tp);  // f: all_gather, (t-1)/t·4NC bytes; freed below
    cpu::matmul_forward(cache.h.f32(), x.f32(), shard.w_fc.f32(), shard.b_fc.f32(), N, C, Fs);
  }
  cpu::gelu_forward(cache.a.f32(), cache.h.f32(), long(N) * Fs);
  cpu::matmul_forward(yp.f32(), cache.a.f32(), shard.w_proj.f32(), nullptr, N, Fs, C);
  Tensor y_s = scatter_rows(yp, tp);  // g: reduce_scatter, (t-1)/t·4NC bytes
  for (int64_t n = 0; n < y_s.dim(0); ++n)  // the bias once, on this rank's rows
    for (int c = 0; c < C; ++c) y_s.f32()[n * C + c] += shard.b_proj.f32()[c];
  return y_s;
}

Tensor sp_mlp_backward(const Tensor& dy_s, const Tensor& x_s, TpMlpShard& shard,
                       const TpMlpCache& cache, ProcessGroup& tp) {
  check_shapes(x_s, shard);
  LLMP_CHECK(dy_s.shape() == x_s.shape(),
             "sp_mlp_backward: dy_s " + dy_s.describe() + " must have x_s's shape " +
                 x_s.describe());
  const int C = x_s.dim(1), Fs = shard.w_fc.dim(1), N = tp.size() * x_s.dim(0);
  for (int64_t n = 0; n < dy_s.dim(0); ++n)  // db_proj: this rank's rows' part
    for (int c = 0; c < C; ++c) shard.db_proj.f32()[c] += dy_s.f32()[n * C + c];
  const Tensor dy = gather_rows(dy_s, tp);  // g's backward: all_gather
  Tensor dh = Tensor::empty({N, Fs}, DType::kF32, MemCategory::kActivations);
  cpu::matmul_backward(dh.f32(), shard.dw_proj.f32(), nullptr, dy.f32(), cache.a.f32(),
                       shard.w_proj.f32(), N, Fs, C);
  cpu::gelu_backward(dh.f32(), cache.h.f32(), dh.f32(), long(N) * Fs);
  const Tensor x = gather_rows(x_s, tp);  // the rows again, for dw_fc
  Tensor dxp = Tensor::empty({N, C}, DType::kF32, MemCategory::kActivations);
  cpu::matmul_backward(dxp.f32(), shard.dw_fc.f32(), shard.db_fc.f32(), dh.f32(), x.f32(),
                       shard.w_fc.f32(), N, C, Fs);
  return scatter_rows(dxp, tp);  // f's backward: reduce_scatter
}

}  // namespace llmp
