// The precision a run trains in (--precision): fp32, or mixed precision with 16-bit bf16 or fp16.
//
//   precision  parameters  gradients  activations  optimizer state (K)           loss scaling
//   fp32       f32 (4Ψ)    f32 (4Ψ)   f32          m, v in f32 (8Ψ)               none
//   bf16       bf16 (2Ψ)   bf16 (2Ψ)  bf16         fp32 master, m, v (12Ψ)        none needed
//   fp16       f16 (2Ψ)    f16 (2Ψ)   f16          fp32 master, m, v (12Ψ)        static or dynamic
//
// Mixed precision is Micikevicius et al. 2018 ("Mixed Precision Training"): 16-bit copies for the
// arithmetic, an fp32 master copy of the weights for the update. bf16 (Kalamkar et al. 2019) has
// fp32's 8 exponent bits, so its range needs no loss scaling; fp16 has 5 and does.
//
// Glossary: Ψ parameter count, K optimizer-state bytes per parameter (ZeRO paper, §3.1).
#pragma once

#include <string>

#include "common/tensor/tensor.h"

namespace llmp {

enum class TrainPrecision { kFP32, kBF16, kFP16 };

/// "fp32", "bf16", "fp16".
const char* to_string(TrainPrecision p);
/// Parses "fp32", "bf16" or "fp16"; throws std::invalid_argument naming the value otherwise.
TrainPrecision parse_precision(const std::string& s);
/// The dtype parameters, gradients and activations are stored in: f32, bf16 or f16.
DType storage_dtype(TrainPrecision p);
/// True for bf16 and fp16: an fp32 master copy of the weights lives in the optimizer.
inline bool is_mixed(TrainPrecision p) { return p != TrainPrecision::kFP32; }

}  // namespace llmp
