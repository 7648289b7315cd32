// The CUDA language for device code: nvcc's own headers, or, compiled by g++ with
// -DLLMP_CUDA_EMULATOR, the CPU emulator's (kernels/cuda/emulator/cuda_emulator.h, wmma.h), so
// that a kernel in a header (attention_block_tc_kernels.h) runs on a GPU and, here, on the CPU
// against its kernels/cpu twin. LLMP_DYNAMIC_SMEM(name) declares a block's dynamic shared memory
// (128-byte aligned) the way each side can.
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#define LLMP_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#elif defined(LLMP_CUDA_EMULATOR)
#include "kernels/cuda/emulator/cuda_emulator.h"
#include "kernels/cuda/emulator/wmma.h"
#define LLMP_DYNAMIC_SMEM(name) unsigned char* const name = ::llmp::cuda::emu::dynamic_smem()
#else
#error "device code: compile it with nvcc, or with g++ and -DLLMP_CUDA_EMULATOR (the emulator)"
#endif
