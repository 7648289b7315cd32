// ZeRO-R's constant-size fused communication buffer (CB): gradients are packed into ONE buffer
// of a fixed number of bytes, whatever the model's size, and each collective runs on it.
//
// Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models", §6.2 ("Constant Size Buffers") and §7: fusing many small tensors into one buffer
// before an all_reduce or a reduce_scatter is what makes the collective efficient (one large
// message instead of many latency-bound small ones), but a fused buffer the size of the model
// (Megatron's fused all_reduce of all gradients, 4Ψ bytes in fp32) grows with the model: at
// 3B parameters it is 12 GB of temporary memory. ZeRO-R keeps the buffer at a constant size
// that is "large enough to remain efficient". DeepSpeed's reduce_bucket_size is that bound.
//
// How it works (the walk of common/nn/unit_runner.h finishes units L+1, L, ..., 0, and units
// are contiguous in the flat Ψ-element gradient layout, so backward produces the flat gradient
// from its top end downwards):
//
//   flat gradient:   [ unit 0 | unit 1 | ... | unit L | unit L+1 ]        Ψ elements
//   chunks:             ... |   chunk 2   |   chunk 1   |   chunk 0   |    c = ⌊cap / b⌋ each,
//                                                                          cut from the top
//   buffer:          [ ----------------- c elements, allocated once ----------------- ]
//
// add(first, g) copies the elements [first, first + n) of the flat gradient into the buffer,
// filling it from its END downwards, so that the buffer always holds ONE contiguous range
// [lo, lo + fill) of the flat layout in increasing order (a reduce_scatter_v of it then hands
// every rank the part of the range that lies inside its shard: ShardLayout::split_range). A unit
// larger than the free space is CUT: its top part fills the buffer, the buffer's collective
// runs, and the rest of the unit continues into the emptied buffer. When the buffer is full the
// collective runs on it (`Collective`: all_reduce and copy back for DDP; reduce_scatter_v into
// the shard for ZeRO); flush() runs it on the last, partially filled buffer. So the chunks are
// exactly [Ψ - (k+1)c, Ψ - kc) and a step runs ⌈Ψ/c⌉ collectives, whatever the units are.
//
// Results are bit-identical to one collective per unit (or per bucket, or on the whole buffer)
// when the backend's reduction of each element does not depend on the message it travels in:
// the sum is element-wise, packing only moves elements between messages. With MPI over 2 ranks
// that holds exactly (a + b is commutative in IEEE arithmetic); over more ranks MPICH picks its
// reduction algorithm (and so the order of the additions) by message size, so the sums can
// differ in the last bit, as they do between DDP bucket sizes. Bytes sent do not change: every
// collective's traffic is linear in its message (2(N-1)/N·S, (N-1)/N·S), and the chunks
// partition Ψ.
//
// How this differs from PyTorch DDP's gradient buckets (stages/ddp/bucketer.h, Li et al. 2020
// §3.2): a bucket there is made of WHOLE parameters (here: units) and closes once it holds at
// least bucket_cap_mb, so a bucket is as large as the largest parameter, and with
// gradient_as_bucket_view=True it is a VIEW of the gradients (no copy, no extra memory, but the
// "bucket" then is the gradient buffer itself, Ψ elements). CB is a separate buffer of exactly
// cap bytes (MemCategory::kCommBuffers): gradients are copied in and out, and a large unit is
// cut, so the communication memory is the bound whatever the model. The cost: a copy in (and,
// for all_reduce, a copy out), and with one buffer a collective must finish before the buffer
// is refilled (no overlap with backward here; DeepSpeed double-buffers for that, at 2·cap).
//
// Glossary: Ψ parameter count, cap the bound in bytes, b bytes per gradient element (4 f32, 2
// bf16 / f16), c = ⌊cap / b⌋ buffer elements, N ranks, L layers, S message bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/nn/gpt.h"
#include "common/nn/unit_runner.h"
#include "common/tensor/tensor.h"
#include "common/train/dp_util.h"
#include "kernels/cpu/convert.h"

namespace llmp {

/// Bytes of a --constant_buffer_mb value: ⌊mb · 2^20⌋ (0 for mb ≤ 0 or NaN).
int64_t constant_buffer_bytes(double mb);

/// "" when `mb` is a usable --constant_buffer_mb for gradients of `elem_bytes` bytes (finite,
/// > 0, at least one element); otherwise the one-line message naming the value, e.g.
/// "--constant_buffer_mb must be > 0, got -1" or "--constant_buffer_mb 1e-09 is 0 bytes, less
/// than one 4-byte gradient element".
std::string constant_buffer_mb_error(double mb, int elem_bytes = 4);

/// The buffer's bytes for a stage's `constant_buffer_mb` option and gradients of `dtype`: 0
/// (off) when mb == 0, else ⌊mb·2^20 / b⌋·b (whole elements). Throws std::invalid_argument with
/// constant_buffer_mb_error's message for any other bad value (negative, NaN, infinite, < b).
int64_t constant_buffer_cap(double mb, DType dtype);

/// One fused buffer of c = ⌊cap_bytes / b⌋ elements (b = dtype_size(dtype)), kCommBuffers,
/// allocated in the constructor and never resized. See the header comment.
class ConstantBuffer {
 public:
  /// Runs the collective on `packed`, the filled part of the buffer (a view of 1..c elements),
  /// which holds the flat gradient elements [first, first + packed.numel()) in order. The
  /// buffer is refilled once it returns (so it must have finished with `packed`).
  using Collective = std::function<void(Tensor& packed, int64_t first)>;

  /// Throws std::invalid_argument naming cap_bytes when it holds no element of `dtype`.
  ConstantBuffer(int64_t cap_bytes, DType dtype, Collective collective);

  /// Packs the flat gradient elements [first, first + g.numel()) (g contiguous, of the
  /// buffer's dtype), from the top down, running the collective each time the buffer fills. A
  /// range that does not end where the buffer's content begins (not the next one down) flushes
  /// the buffer first. Throws std::invalid_argument when g's dtype is not the buffer's.
  void add(int64_t first, const Tensor& g);
  /// Runs the collective on what the buffer holds (nothing when it is empty).
  void flush();

  int64_t capacity() const { return cap_; }        ///< c, elements
  int64_t bytes() const { return buf_.nbytes(); }  ///< c·b ≤ cap_bytes
  /// Collectives run so far, and the elements they carried (Ψ per step when a whole gradient
  /// went through).
  int collectives() const { return collectives_; }
  int64_t elements_sent() const { return elements_sent_; }

 private:
  Tensor buf_;
  int64_t cap_ = 0;
  int64_t fill_ = 0;  // elements held: buffer positions [cap_ - fill_, cap_)
  int64_t lo_ = 0;    // flat index of the first element held
  Collective collective_;
  int collectives_ = 0;
  int64_t elements_sent_ = 0;
};

/// The collective of ZeRO-1/2/3 on a packed range: every rank receives Σ_ranks of the part of
/// [first, first + packed.numel()) that lies in its shard, written at its place in
/// `grad_shard` (reduce_scatter_into_shard, dp_util.h). sends (N-1)/N · b·numel(packed)
ConstantBuffer::Collective reduce_scatter_collective(ProcessGroup& dp, const ShardLayout& shards,
                                                     Tensor& grad_shard);

/// ZeRO-2/3's gradient hook (the walk's GradSink, unit_runner.h) with CB: as ReduceScatterGrads
/// (dp_util.h), a unit's full gradient lives from the walk's first "+=" into it until it is
/// final, but then it is packed into `buffer` (whose collective reduce-scatters it into the
/// shard) instead of being reduce-scattered alone. f32: the unit's gradient is kGradients; a
/// 16-bit buffer: the walk accumulates in fp32 (kOther) and ready() rounds once into a 16-bit
/// copy (kGradients) that is packed and freed. The caller flush()es the buffer after the walk.
class ConstantBufferGrads : public GradSink {
 public:
  /// The references must outlive the sink. `stats` (optional, 16-bit only): counts what
  /// rounding the unit gradients did.
  ConstantBufferGrads(const GPTLayout& layout, ConstantBuffer& buffer, DType grad_dtype,
                      cpu::RoundStats* stats = nullptr);
  float* get(int unit) override;
  /// Packs unit u's gradient (the buffer runs its collective whenever it fills); frees it.
  void ready(int unit) override;

 private:
  const GPTLayout& layout_;
  ConstantBuffer& buffer_;
  DType dtype_;
  cpu::RoundStats* stats_;
  std::vector<Tensor> unit_;  // f32: the gradient; 16-bit: the fp32 accumulator
};

}  // namespace llmp
