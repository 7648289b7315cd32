// constant_buffer (see constant_buffer.h): ZeRO-R's constant-size fused buffer, its
// reduce_scatter for the ZeRO stages, and the gradient hook that packs units into it.
//
// Glossary: Ψ parameter count, c buffer elements, b bytes per element, N ranks.
#include "common/train/constant_buffer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "common/tensor/memory.h"

namespace llmp {
namespace {
std::string num(double v) {  // 0.25, not 0.250000
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

int64_t constant_buffer_bytes(double mb) {
  if (!(mb > 0) || !std::isfinite(mb)) return 0;
  return static_cast<int64_t>(std::floor(mb * 1024.0 * 1024.0));
}

std::string constant_buffer_mb_error(double mb, int elem_bytes) {
  if (!(mb > 0) || !std::isfinite(mb))
    return "--constant_buffer_mb must be a finite number > 0, got " + num(mb);
  const int64_t bytes = constant_buffer_bytes(mb);
  if (bytes < elem_bytes)
    return "--constant_buffer_mb " + num(mb) + " is " + std::to_string(bytes) +
           " bytes, less than one " + std::to_string(elem_bytes) + "-byte gradient element";
  return "";
}

int64_t constant_buffer_cap(double mb, DType dtype) {
  if (mb == 0) return 0;  // off
  const int64_t b = dtype_size(dtype);
  const std::string err = constant_buffer_mb_error(mb, static_cast<int>(b));
  if (!err.empty()) throw std::invalid_argument(err);
  return constant_buffer_bytes(mb) / b * b;
}

ConstantBuffer::ConstantBuffer(int64_t cap_bytes, DType dtype, Collective collective)
    : cap_(cap_bytes / dtype_size(dtype)), collective_(std::move(collective)) {
  if (cap_ < 1)
    throw std::invalid_argument("constant buffer of " + std::to_string(cap_bytes) +
                                " bytes holds no " + std::to_string(dtype_size(dtype)) +
                                "-byte gradient element");
  // The only allocation: c elements, whatever the model. It lives as long as this object.
  buf_ = Tensor::empty({cap_}, dtype, MemCategory::kCommBuffers);
}

void ConstantBuffer::add(int64_t first, const Tensor& g) {
  if (g.dtype() != buf_.dtype())
    throw std::invalid_argument("constant buffer of " + buf_.describe() + " given " +
                                g.describe());
  const int64_t n = g.numel();
  if (n == 0) return;
  // The buffer holds one contiguous flat range; a range that is not the next one down starts a
  // new message.
  if (fill_ > 0 && first + n != lo_) flush();
  int64_t top = first + n;  // the part [first, top) of g is still to pack
  while (top > first) {
    const int64_t len = std::min(cap_ - fill_, top - first);  // what fits: a chunk of the unit
    const int64_t a = top - len;                              // flat [a, top) goes in now
    // Just below what the buffer holds: positions [cap - fill - len, cap - fill).
    buf_.narrow(cap_ - fill_ - len, len).copy_from(g.narrow(a - first, len));
    fill_ += len;
    lo_ = a;
    top = a;
    if (fill_ == cap_) flush();  // full: its collective runs before the rest of g comes in
  }
}

void ConstantBuffer::flush() {
  if (fill_ == 0) return;
  Tensor packed = buf_.narrow(cap_ - fill_, fill_);  // flat [lo_, lo_ + fill_), in order
  collective_(packed, lo_);
  ++collectives_;
  elements_sent_ += fill_;
  fill_ = 0;
}

ConstantBuffer::Collective reduce_scatter_collective(ProcessGroup& dp, const ShardLayout& shards,
                                                     Tensor& grad_shard) {
  return [&dp, &shards, &grad_shard](Tensor& packed, int64_t first) {
    // Σ_ranks of the packed range; each rank keeps the part inside its shard, written in place
    // in grad_shard (overwritten: every element of the shard is in exactly one chunk).
    //                                                   sends (N-1)/N · b·numel(packed)
    reduce_scatter_into_shard(dp, shards, first, packed, grad_shard);
  };
}

ConstantBufferGrads::ConstantBufferGrads(const GPTLayout& layout, ConstantBuffer& buffer,
                                         DType grad_dtype, cpu::RoundStats* stats)
    : layout_(layout), buffer_(buffer), dtype_(grad_dtype), stats_(stats),
      unit_(layout.num_units()) {}

float* ConstantBufferGrads::get(int u) {
  // f32: the unit's gradient itself; 16-bit: the fp32 accumulator it is rounded from when final.
  const MemCategory cat = dtype_ == DType::kF32 ? MemCategory::kGradients : MemCategory::kOther;
  if (!unit_[u].defined()) unit_[u] = Tensor::zeros({layout_.unit_numel(u)}, DType::kF32, cat);
  return unit_[u].f32();
}

void ConstantBufferGrads::ready(int u) {
  Tensor g = std::move(unit_[u]);  // freed at the end of this call
  if (dtype_ != DType::kF32) {     // round once to 16 bits: what is packed and travels
    Tensor g16 = Tensor::empty({g.numel()}, dtype_, MemCategory::kGradients);
    cpu::round_to(g.f32(), g16.raw(), g16.dtype(), g.numel(), stats_);
    g = std::move(g16);  // the fp32 accumulator is freed here
  }
  buffer_.add(layout_.unit_offset(u), g);  // copied in: the unit's gradient can go
}

}  // namespace llmp
