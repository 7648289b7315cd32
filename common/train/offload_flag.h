// --offload optimizer: ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale
// Model Training", §4) in the ZeRO stages that take it (zero2, zero3), written once for their main.cc.
//
// With --device cuda the GPU keeps the parameters and the walk (forward, backward); the host
// keeps this rank's shard of the gradients, the fp32 master copy of its parameter shard and
// AdamW's m and v, and runs the AdamW step on the CPU. Per step: the gradients are copied down
// (reduce-scattered into the host shard), the updated shard is copied up and all-gathered on
// the device. Device bytes of the model states drop from 4Ψ + 12⌈Ψ/N⌉ (ZeRO-2) to 4Ψ in fp32,
// from 2Ψ + 14⌈Ψ/N⌉ to 2Ψ in bf16/fp16 (the paper's setting: 16-bit gradients down, 16-bit
// parameters up; common/train/offload.h).
//
// Glossary: Ψ parameters, N data-parallel ranks.
#pragma once

#include <string>

#include "common/runtime/flags.h"  // TrainConfig; CLI::App declared

namespace llmp {

/// Binds --offload none|optimizer to a stage's options.
class OffloadFlag {
 public:
  /// Adds the option to `app` (the StageSpec's add_flags); CLI11 refuses other values.
  void add(CLI::App& app);
  /// The StageSpec's validate: --offload optimizer without a device (--device cpu: everything is
  /// already on the host) ends the run with one line naming the value, exit 2. Any --precision.
  void validate(const TrainConfig& cfg) const;
  /// True for --offload optimizer.
  bool optimizer() const { return what_ == "optimizer"; }

 private:
  std::string what_ = "none";
};

}  // namespace llmp
