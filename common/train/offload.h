// ZeRO-Offload's host side (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model
// Training", §4), shared by zero2 and zero3 (--device cuda --offload optimizer; the flag:
// offload_flag.h). The GPU keeps the working parameters and runs forward and backward; the host
// keeps this rank's gradient shard (the reduce-scatter writes it there: the gradients copied
// down), an fp32 master copy of the rank's parameter shard, and AdamW's m and v, and steps AdamW
// on the CPU; the updated shard is copied up into the device parameters.
//
//   device model states:  ZeRO-2  4Ψ + 12⌈Ψ/N⌉  ->  4Ψ
//                         ZeRO-3  16⌈Ψ/N⌉       ->  4⌈Ψ/N⌉
//   host model states:    0 -> 4⌈Ψ/N⌉ master + 4⌈Ψ/N⌉ gradients + 8⌈Ψ/N⌉ m, v = 16⌈Ψ/N⌉
//   copies per step:      4⌈Ψ/N⌉ up (the updated shard), the gradients down inside the
//                         reduce-scatter
//
// The paper keeps 16-bit parameters on the GPU; the GPU path trains in fp32 so far, so here the
// device keeps fp32 parameters and the host master copy holds the same numbers: results are
// bit-identical to the stage without offload.
//
// Glossary: Ψ parameters, N data-parallel ranks, S = ⌈Ψ/N⌉ the padded shard.
#pragma once

#include <string>
#include <vector>

#include "common/optim/adamw.h"
#include "common/tensor/tensor.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// The host's fp32 master copy of one rank's parameter shard, whose working copy is on a device.
class OffloadedShard {
 public:
  /// `device_shard`: this rank's valid parameters (count elements, f32), a view of device memory
  /// kept for the strategy's lifetime. Allocates the master copy on the host (`padded` f32
  /// elements, kParameters) and copies the shard down into it (4·count bytes).
  OffloadedShard(const Tensor& device_shard, int64_t padded);

  /// AdamW on the host (`opt` on the CPU) with the host gradient shard (`grad_shard`, padded f32
  /// elements; its first count are used), then the updated shard copied up (4·count bytes).
  void step(MixedPrecision& mp, AdamW& opt, const Tensor& grad_shard, int64_t t);
  /// After the device shard was overwritten (set_state): the master copy from it again.
  void refresh();

 private:
  Tensor device_shard_;  // view of the device parameters: count
  Tensor master_;        // host: padded, the first count valid
};

/// "" when a stage may offload its optimizer from a model on `device` with parameters of `dtype`;
/// else the one-line reason, prefixed with `stage` ("Zero2Strategy"): ZeRO-Offload moves the
/// optimizer off a GPU, so it needs a device, and its host path is fp32.
std::string offload_error(const std::string& stage, Device device, DType dtype);

/// The report's model-state rows per device, measured by the MemoryTracker's per-device counts:
/// on `gpu` the parameters (`device_params` bytes, shown as `device_params_text`) and no
/// gradients or optimizer state between steps; on the host the master shard and the gradient
/// shard (4·padded bytes each) and m, v (8·padded).
std::vector<ReportRow> offload_memory_rows(Device gpu, double device_params,
                                           const std::string& device_params_text,
                                           int64_t padded);

}  // namespace llmp
