// The CUDA language for device code: the toolkit's headers, which are nvcc's own or, in a target
// built on //kernels/cuda/emulator (which defines LLMP_CUDA_EMULATOR), the CPU emulator's. So a
// kernel in a header (attention_block_tc_kernels.h), and every .cu file once cu_to_cc has
// rewritten its launches, runs on a GPU and, here, on the CPU against its kernels/cpu twin.
// LLMP_DYNAMIC_SMEM(name) declares a block's dynamic shared memory (128-byte aligned) the way
// each side can.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#if defined(LLMP_CUDA_EMULATOR)
#define LLMP_DYNAMIC_SMEM(name) unsigned char* const name = ::llmp::cuda::emu::dynamic_smem()
#elif defined(__CUDACC__)
#define LLMP_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#else
#error "device code: compile it with nvcc, or with g++ on //kernels/cuda/emulator"
#endif
