// <cuda_bf16.h> for the CUDA emulator: __nv_bfloat16 and its conversions (cuda_emulator.h).
#pragma once

#include "kernels/cuda/emulator/cuda_emulator.h"
