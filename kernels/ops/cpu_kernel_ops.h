// The CPU table of KernelOps (kernel_ops.h): kernels/cpu behind every entry, the 16-bit
// activations through fp32 copies (Fp32Copy), and under a 16-bit declaration the check that every
// declared operand is a value of that dtype (what a GPU's 16-bit products rely on).
#pragma once

#include "kernels/ops/kernel_ops.h"

namespace llmp {

/// The one CPU table of the process: what kernel_ops(Device::kCPU) returns.
KernelOps& cpu_kernel_ops();

}  // namespace llmp
