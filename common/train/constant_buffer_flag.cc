// --constant_buffer_mb (see constant_buffer_flag.h).
#include "common/train/constant_buffer_flag.h"

#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/tensor/precision.h"
#include "common/tensor/tensor.h"
#include "common/train/constant_buffer.h"

namespace llmp {

void ConstantBufferFlag::add(CLI::App& app) {
  option_ = add_option_no_default(
      app, "--constant_buffer_mb", mb_,
      "ZeRO-R constant buffer: pack gradients into one fused buffer of this many MiB (cut "
      "into chunks, one collective per chunk) instead of the stage's default; off unless given");
}

void ConstantBufferFlag::validate(const TrainConfig& cfg) const {
  if (!given(option_)) return;
  const int b = static_cast<int>(dtype_size(storage_dtype(parse_precision(cfg.precision))));
  if (const std::string err = constant_buffer_mb_error(mb_, b); !err.empty()) user_error(err);
}

double ConstantBufferFlag::mb() const {
  return given(option_) ? mb_ : 0.0;
}

}  // namespace llmp
