// <mma.h> for the CUDA emulator: nvcuda::wmma (wmma.h).
#pragma once

#include "kernels/cuda/emulator/wmma.h"
