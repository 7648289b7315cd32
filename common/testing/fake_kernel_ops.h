// FakeKernelOps: kernels/cpu registered as the Device::kCUDA kernels, over a FakeDevice's memory.
//
// With a FakeDevice (fake_device.h) the model can be placed "on the GPU" on a machine without
// one: GPT::with_device(Device::kCUDA) then allocates its activations on the FakeDevice and calls
// kernel_ops(Device::kCUDA), which is this table: the CPU kernels, each run inside a
// FakeDevice::Access scope. A guarded FakeDevice thus checks that the device walk touches device
// memory only through kernels and the allocator's operations, and the results, computed by the
// same kernels, must equal the CPU walk's bit for bit. What it cannot check is the CUDA kernels
// themselves (kernels/cuda, tested against these CPU twins on a GPU).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/testing/fake_device.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
class SixteenBitSources;
namespace testing {

class FakeKernelOps {
 public:
  /// Registers the table for Device::kCUDA (the previous one is restored on destruction).
  /// `dev` must outlive this object.
  explicit FakeKernelOps(FakeDevice& dev);
  ~FakeKernelOps();
  FakeKernelOps(const FakeKernelOps&) = delete;
  FakeKernelOps& operator=(const FakeKernelOps&) = delete;

  /// How often the entries that take a rounding dtype were called with it since construction:
  /// key "attention_forward bf16", "attention_probs f32", "attention_backward bf16",
  /// "cross_entropy_loss bf16" (its gradient's rounding), "note_source bf16", ... (the entry, a
  /// space, to_string of its dtype).
  /// What the model asked for is what a GPU's kernels get, so a test sees which products the
  /// walk hands 16-bit values (common/nn/sublayer.h rounded_products). "source hit bf16": the
  /// operands of 16-bit matmul_* calls that lie inside a noted widening (a GPU reads those from
  /// the 16-bit source); each is checked to equal its source's widening bit for bit (else the
  /// process aborts naming the entry: a stale note).
  int64_t calls(const std::string& entry_and_dtype) const;
  /// Widenings noted (KernelOps::note_source) and not yet forgotten: 0 after a walk, else a GPU
  /// would some day read a freed buffer's address as a 16-bit source.
  size_t noted_sources() const;

 private:
  std::map<std::string, int64_t> calls_;
  std::unique_ptr<SixteenBitSources> sources_;
  std::unique_ptr<KernelOps> table_;
  KernelOps* previous_ = nullptr;
};

}  // namespace testing
}  // namespace llmp
