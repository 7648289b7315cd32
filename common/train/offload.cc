// ZeRO-Offload's host side (see offload.h).
#include "common/train/offload.h"

#include <stdexcept>

#include "common/tensor/memory.h"

namespace llmp {

OffloadedShard::OffloadedShard(const Tensor& device_shard, int64_t padded)
    : device_shard_(device_shard) {
  const DType d = device_shard.dtype();
  if ((d != DType::kF32 && d != DType::kF16 && d != DType::kBF16) ||
      device_shard.numel() > padded)
    throw std::invalid_argument("OffloadedShard: an f32, f16 or bf16 shard of at most " +
                                std::to_string(padded) + " elements, got " +
                                device_shard.describe());
  if (d != DType::kF32) return;  // 16-bit: the fp32 master is the host AdamW's own
  master_ = Tensor::zeros({padded}, DType::kF32, MemCategory::kParameters);
  refresh();
}

void OffloadedShard::refresh() {
  if (!master_.defined()) return;  // 16-bit: set_state wrote the master on the host itself
  master_.narrow(0, device_shard_.numel()).copy_from(device_shard_);  // 4·count bytes down
}

bool OffloadedShard::step(MixedPrecision& mp, AdamW& opt, const Tensor& grad_shard, int64_t t,
                          GradClip* clip) {
  const int64_t count = device_shard_.numel();
  if (master_.defined()) {  // fp32: the update in place on the master copy, then all of it up
    Tensor master = master_.narrow(0, count);
    mp.optimizer_step(opt, master, grad_shard, t, count, clip);  // on the CPU
    device_shard_.copy_from(master);                        // 4·count bytes up
    return true;
  }
  // 16-bit: AdamW's master (host) updated from the 16-bit host gradient shard, widened and
  // unscaled inside the kernel, then rounded to nearest even on the host into the scratch.
  Tensor rounded = Tensor::empty({count}, device_shard_.dtype(), MemCategory::kOther);
  if (!mp.optimizer_step(opt, rounded, grad_shard, t, count, clip)) return false;  // skipped
  device_shard_.copy_from(rounded);  // 2·count bytes up
  return true;
}

std::string offload_error(const std::string& stage, Device device) {
  if (device != Device::kCPU) return "";
  return stage + ": --offload optimizer moves the optimizer from a GPU to the host; it needs "
                 "the model on a device (got --device " + to_string(device) + ")";
}

std::vector<ReportRow> offload_memory_rows(Device gpu, double device_params,
                                           const std::string& device_params_text,
                                           int64_t padded, DType dtype) {
  const auto& mt = MemoryTracker::instance();
  const std::string on = std::string(" on ") + to_string(gpu);
  auto at = [&](Device d, MemCategory c) { return static_cast<double>(mt.current(d, c)); };
  const double S = static_cast<double>(padded);
  std::vector<ReportRow> rows = {
      {"parameters" + on, at(gpu, MemCategory::kParameters), device_params, device_params_text},
      {"gradients" + on, at(gpu, MemCategory::kGradients), 0, "0 (offloaded)"},
      {"optimizer state" + on, at(gpu, MemCategory::kOptimizerState), 0, "0 (offloaded)"},
  };
  if (dtype == DType::kF32) {
    rows.push_back(
        {"master shard on host", at(Device::kCPU, MemCategory::kParameters), 4 * S, "4⌈Ψ/N⌉"});
    rows.push_back(
        {"gradients on host", at(Device::kCPU, MemCategory::kGradients), 4 * S, "4⌈Ψ/N⌉"});
    rows.push_back({"optimizer state on host", at(Device::kCPU, MemCategory::kOptimizerState),
                    8 * S, "8⌈Ψ/N⌉"});
  } else {  // the master shard is AdamW's: optimizer state with m and v (K = 12)
    rows.push_back({"parameters on host", at(Device::kCPU, MemCategory::kParameters), 0,
                    "0 (the fp32 master is optimizer state)"});
    rows.push_back({"gradients on host", at(Device::kCPU, MemCategory::kGradients), 2 * S,
                    "2⌈Ψ/N⌉ (16-bit, as copied down)"});
    rows.push_back({"optimizer state on host", at(Device::kCPU, MemCategory::kOptimizerState),
                    12 * S, "12⌈Ψ/N⌉ (fp32 master, m, v)"});
  }
  return rows;
}

}  // namespace llmp
