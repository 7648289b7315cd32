// Tensor-parallel region operators (mappings.h): Megatron's f and g, the last-dimension
// scatter/gather pair and the sequence-parallel pair (Shoeybi et al. 2019 §3; Korthikanti et al.
// 2022 §4.2.2).
//
// Both gathers and the reduce_scatter come down to one picture: the full tensor is `outer` rows of
// t blocks of `inner` elements, (outer, t, inner), and rank q owns block q of every row. The flat
// collectives of ProcessGroup move rank-major buffers, (t, outer, inner), so a gather permutes
// after the collective and a reduce_scatter before it; when outer = 1 the two layouts coincide
// and the collective works on the tensor directly.
//   last dimension:  (..., K)    = (numel/K rows, t, K/t)
//   sequence:        (B, T, C)   = (B, t, T/t·C)
//
// On a device (--device cuda) every buffer made here is on the input's device and each permute is
// a swap of the two leading dimensions, min(t, outer) strided copies (swap_leading_dims and
// copy_strided, common/tensor/tensor.h: one cudaMemcpy2DAsync each there, memmoves on the host);
// no host code touches the elements, and the collectives get device tensors (the MPI backend
// stages them through host buffers, common/comm/process_group_staging.h).
//
// Glossary: t = tp.size(), r = tp.rank(), K last dimension, B batch, T sequence, C channels,
// outer/inner as above.
#include "common/tp/mappings.h"

#include <string>
#include <vector>

#include "common/runtime/check.h"

namespace llmp::tp {

namespace {

// f32, or 16 bits under mixed precision (the collectives sum 16-bit values in fp32 and round
// once per pairwise addition: common/comm).
void check_f32(const Tensor& t, const char* where) {
  LLMP_CHECK(t.defined() && (t.dtype() == DType::kF32 || t.dtype() == DType::kBF16 ||
                             t.dtype() == DType::kF16),
             std::string(where) + ": tensors must be f32, bf16 or f16, got " +
                 (t.defined() ? t.describe() : "an undefined tensor"));
}

void check_ndim_at_least_1(const Tensor& t, const char* where) {
  check_f32(t, where);
  LLMP_CHECK(t.ndim() >= 1, std::string(where) + ": needs at least one dimension, got " +
                                t.describe() + " (ndim " + std::to_string(t.ndim()) + ")");
}

void check_btc(const Tensor& t, const char* where) {
  check_f32(t, where);
  LLMP_CHECK(t.ndim() == 3, std::string(where) + ": activations must be 3-D (B, T, C), got " +
                                t.describe() + " (ndim " + std::to_string(t.ndim()) + ")");
}

void check_divisible(int64_t n, const char* what, const Tensor& t, int size, const char* where) {
  LLMP_CHECK(n % size == 0,
             std::string(where) + ": " + what + " " + std::to_string(n) + " of " + t.describe() +
                 " is not divisible by the tensor-parallel size t = " + std::to_string(size));
}

// Copies block r of every row of x = (outer, t, inner) into a new (outer, inner) tensor of shape
// `shape`, on x's device: one strided copy (outer runs of inner elements). No communication.
Tensor keep_block(const Tensor& x, int r, int t, int64_t outer, int64_t inner,
                  std::vector<int64_t> shape) {
  Tensor out = Tensor::empty(std::move(shape), x.dtype(), MemCategory::kActivations, x.device());
  copy_strided(out, {0, inner}, x, {r * inner, t * inner}, inner, outer);  // [:, r, :]
  return out;
}

// all_gather of x = (outer, inner) into a new (outer, t, inner) tensor of shape `shape` on x's
// device, block q of every row from rank q. Sends (t-1)/t·S, S = bytes of the result.
Tensor gather_blocks(const Tensor& x, ProcessGroup& tp, int64_t outer, int64_t inner,
                     std::vector<int64_t> shape) {
  const int t = tp.size();
  Tensor out = Tensor::empty(std::move(shape), x.dtype(), MemCategory::kActivations, x.device());
  Tensor flat_out = out.view({out.numel()});
  if (outer == 1) {  // rank-major is already the layout we want
    tp.all_gather(x.view({x.numel()}), flat_out);
    return out;
  }
  Tensor staged = Tensor::empty({out.numel()}, x.dtype(), MemCategory::kCommBuffers, x.device());
  tp.all_gather(x.view({x.numel()}), staged);  // (t, outer, inner), rank-major
  swap_leading_dims(out, staged, t, outer);    // -> (outer, t, inner)
  return out;
}

// reduce_scatter (sum) of x = (outer, t, inner) into a new (outer, inner) tensor of shape
// `shape` on x's device: block r of every row, summed over the ranks. Sends (t-1)/t·S,
// S = x.nbytes().
Tensor reduce_scatter_blocks(const Tensor& x, ProcessGroup& tp, int64_t outer, int64_t inner,
                             std::vector<int64_t> shape) {
  const int t = tp.size();
  Tensor out = Tensor::empty(std::move(shape), x.dtype(), MemCategory::kActivations, x.device());
  Tensor flat_out = out.view({out.numel()});
  if (outer == 1) {  // already rank-major
    tp.reduce_scatter(x.view({x.numel()}), flat_out);
    return out;
  }
  Tensor staged = Tensor::empty({x.numel()}, x.dtype(), MemCategory::kCommBuffers, x.device());
  swap_leading_dims(staged, x, outer, t);  // (outer, t, inner) -> (t, outer, inner), rank-major
  tp.reduce_scatter(staged, flat_out);
  return out;
}

// Rows of a (..., K) tensor: the product of every dimension but the last.
int64_t rows_of(const Tensor& x) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim(); ++d) rows *= x.dim(d);
  return rows;
}

std::vector<int64_t> with_last_dim(std::vector<int64_t> shape, int64_t n) {
  shape.back() = n;
  return shape;
}

// Last dimension: (..., K), the full tensor -> (..., K/t), this rank's slice. No communication.
Tensor keep_last_dim_slice(const Tensor& x, ProcessGroup& tp, const char* where) {
  check_ndim_at_least_1(x, where);
  const int t = tp.size();
  const int64_t K = x.dim(-1);
  check_divisible(K, "last dimension", x, t, where);
  return keep_block(x, tp.rank(), t, rows_of(x), K / t, with_last_dim(x.shape(), K / t));
}

// Last dimension: (..., K/t), this rank's slice -> (..., K), all slices. all_gather.
Tensor gather_last_dim(const Tensor& x, ProcessGroup& tp, const char* where) {
  check_ndim_at_least_1(x, where);
  const int64_t k = x.dim(-1);
  return gather_blocks(x, tp, rows_of(x), k, with_last_dim(x.shape(), k * tp.size()));
}

// Sequence: (B, T/t, C) -> (B, T, C). all_gather.
Tensor gather_sequence(const Tensor& x, ProcessGroup& tp, const char* where) {
  check_btc(x, where);
  const int64_t B = x.dim(0), Tt = x.dim(1), C = x.dim(2);
  return gather_blocks(x, tp, B, Tt * C, {B, Tt * tp.size(), C});
}

// Sequence: (B, T, C) -> (B, T/t, C), summed over the ranks. reduce_scatter.
Tensor reduce_scatter_sequence(const Tensor& x, ProcessGroup& tp, const char* where) {
  check_btc(x, where);
  const int t = tp.size();
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
  check_divisible(T, "sequence length T (dimension 1)", x, t, where);
  return reduce_scatter_blocks(x, tp, B, T / t * C, {B, T / t, C});
}

}  // namespace

Tensor CopyToTpRegion::forward(const Tensor& x, ProcessGroup& /*tp*/) {
  check_f32(x, "CopyToTpRegion::forward");
  return x;  // identity: the same storage
}

Tensor CopyToTpRegion::backward(Tensor dy, ProcessGroup& tp) {
  check_f32(dy, "CopyToTpRegion::backward");
  tp.all_reduce(dy);  // in place, 2(t-1)/t·S; a no-op on one rank
  return dy;
}

Tensor ReduceFromTpRegion::forward(Tensor x, ProcessGroup& tp) {
  check_f32(x, "ReduceFromTpRegion::forward");
  tp.all_reduce(x);  // in place, 2(t-1)/t·S; a no-op on one rank
  return x;
}

Tensor ReduceFromTpRegion::backward(const Tensor& dy, ProcessGroup& /*tp*/) {
  check_f32(dy, "ReduceFromTpRegion::backward");
  return dy;  // identity: the same storage
}

Tensor ScatterToTpRegion::forward(const Tensor& x, ProcessGroup& tp) {
  return keep_last_dim_slice(x, tp, "ScatterToTpRegion::forward");
}
Tensor ScatterToTpRegion::backward(const Tensor& dy, ProcessGroup& tp) {
  return gather_last_dim(dy, tp, "ScatterToTpRegion::backward");
}

Tensor GatherFromTpRegion::forward(const Tensor& x, ProcessGroup& tp) {
  return gather_last_dim(x, tp, "GatherFromTpRegion::forward");
}
Tensor GatherFromTpRegion::backward(const Tensor& dy, ProcessGroup& tp) {
  return keep_last_dim_slice(dy, tp, "GatherFromTpRegion::backward");
}

Tensor GatherFromSequenceRegion::forward(const Tensor& x, ProcessGroup& tp) {
  return gather_sequence(x, tp, "GatherFromSequenceRegion::forward");
}
Tensor GatherFromSequenceRegion::backward(const Tensor& dy, ProcessGroup& tp) {
  return reduce_scatter_sequence(dy, tp, "GatherFromSequenceRegion::backward");
}

Tensor ReduceScatterToSequenceRegion::forward(const Tensor& x, ProcessGroup& tp) {
  return reduce_scatter_sequence(x, tp, "ReduceScatterToSequenceRegion::forward");
}
Tensor ReduceScatterToSequenceRegion::backward(const Tensor& dy, ProcessGroup& tp) {
  return gather_sequence(dy, tp, "ReduceScatterToSequenceRegion::backward");
}

}  // namespace llmp::tp
