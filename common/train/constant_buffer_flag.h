// --constant_buffer_mb: the flag that turns on ZeRO-R's constant-size fused buffer
// (common/train/constant_buffer.h) in the stages that take it (ddp, zero1, zero2, zero3), written
// once for their main.cc files. Off unless given: the stages then communicate as before
// (DDP's --bucket_mb buckets, ZeRO's per-unit or whole-buffer reduce_scatter).
//
// Rajbhandari et al. 2020, §6.2 ("Constant Size Buffers").
//
// Glossary: cap the bound in bytes (⌊X · 2^20⌋ for --constant_buffer_mb X), b bytes per gradient
// element (4 fp32, 2 bf16 / fp16).
#pragma once

#include <string>

#include "common/runtime/flags.h"  // TrainConfig; CLI::App and CLI::Option declared

namespace llmp {

/// Binds --constant_buffer_mb X (MiB, like --bucket_mb) to a stage's options.
class ConstantBufferFlag {
 public:
  /// Adds the option to `app` (the StageSpec's add_flags).
  void add(CLI::App& app);
  /// The StageSpec's validate: when the flag was given, a value that is not finite and > 0, or
  /// that holds less than one gradient element of cfg's precision, ends the run with one line
  /// ("error: --constant_buffer_mb must be a finite number > 0, got nan"), exit 2.
  void validate(const TrainConfig& cfg) const;
  /// X in MiB when the flag was given, 0 (off) otherwise.
  double mb() const;

 private:
  double mb_ = 0;
  CLI::Option* option_ = nullptr;
};

}  // namespace llmp
