// The emulator's bf16 rounding: the CPU twins' own (kernels/cpu/convert.h), so that a kernel
// emulated here rounds exactly as kernels/cpu does and as the GPU's __float2bfloat16 (to nearest,
// ties to even).
#include "kernels/cuda/emulator/cuda_emulator.h"

#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"

namespace llmp::cuda::emu {

float round_bf16(float x) { return cpu::round_trip(x, DType::kBF16); }

}  // namespace llmp::cuda::emu
