// ZeRO-Offload's host side (see offload.h).
#include "common/train/offload.h"

#include <stdexcept>

#include "common/tensor/memory.h"

namespace llmp {

OffloadedShard::OffloadedShard(const Tensor& device_shard, int64_t padded)
    : device_shard_(device_shard),
      master_(Tensor::zeros({padded}, DType::kF32, MemCategory::kParameters)) {
  if (device_shard.dtype() != DType::kF32 || device_shard.numel() > padded)
    throw std::invalid_argument("OffloadedShard: an f32 shard of at most " +
                                std::to_string(padded) + " elements, got " +
                                device_shard.describe());
  refresh();
}

void OffloadedShard::refresh() {
  master_.narrow(0, device_shard_.numel()).copy_from(device_shard_);  // 4·count bytes down
}

void OffloadedShard::step(MixedPrecision& mp, AdamW& opt, const Tensor& grad_shard, int64_t t) {
  const int64_t count = device_shard_.numel();
  Tensor master = master_.narrow(0, count);
  mp.optimizer_step(opt, master, grad_shard, t, count);  // on the CPU
  device_shard_.copy_from(master);                        // 4·count bytes up
}

std::string offload_error(const std::string& stage, Device device, DType dtype) {
  if (device != Device::kCPU && dtype == DType::kF32) return "";
  return stage + ": --offload optimizer moves the optimizer from a GPU to the host; it needs "
                 "the model on a device in fp32 (got --device " + to_string(device) + ", " +
         to_string(dtype) + ")";
}

std::vector<ReportRow> offload_memory_rows(Device gpu, double device_params,
                                           const std::string& device_params_text,
                                           int64_t padded) {
  const auto& mt = MemoryTracker::instance();
  const std::string on = std::string(" on ") + to_string(gpu);
  auto at = [&](Device d, MemCategory c) { return static_cast<double>(mt.current(d, c)); };
  const double S = static_cast<double>(padded);
  return {
      {"parameters" + on, at(gpu, MemCategory::kParameters), device_params, device_params_text},
      {"gradients" + on, at(gpu, MemCategory::kGradients), 0, "0 (offloaded)"},
      {"optimizer state" + on, at(gpu, MemCategory::kOptimizerState), 0, "0 (offloaded)"},
      {"master shard on host", at(Device::kCPU, MemCategory::kParameters), 4 * S, "4⌈Ψ/N⌉"},
      {"gradients on host", at(Device::kCPU, MemCategory::kGradients), 4 * S, "4⌈Ψ/N⌉"},
      {"optimizer state on host", at(Device::kCPU, MemCategory::kOptimizerState), 8 * S,
       "8⌈Ψ/N⌉"},
  };
}

}  // namespace llmp
