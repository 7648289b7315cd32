#include "common/tensor/precision.h"

#include <stdexcept>

namespace llmp {

const char* to_string(TrainPrecision p) {
  switch (p) {
    case TrainPrecision::kFP32: return "fp32";
    case TrainPrecision::kBF16: return "bf16";
    case TrainPrecision::kFP16: return "fp16";
  }
  return "?";
}

TrainPrecision parse_precision(const std::string& s) {
  if (s == "fp32") return TrainPrecision::kFP32;
  if (s == "bf16") return TrainPrecision::kBF16;
  if (s == "fp16") return TrainPrecision::kFP16;
  throw std::invalid_argument("unknown precision '" + s + "' (expected fp32, bf16 or fp16)");
}

DType storage_dtype(TrainPrecision p) {
  switch (p) {
    case TrainPrecision::kFP32: return DType::kF32;
    case TrainPrecision::kBF16: return DType::kBF16;
    case TrainPrecision::kFP16: return DType::kF16;
  }
  return DType::kF32;
}

}  // namespace llmp
