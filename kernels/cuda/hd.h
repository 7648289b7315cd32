// LLMP_HD: marks a function callable from host code and from CUDA kernels.
//
// Under nvcc (__CUDACC__) it is __host__ __device__ __forceinline__; under g++ plain `inline`.
// A header of LLMP_HD functions is then compiled by both compilers: the kernels call the
// functions on the GPU and the CPU tests call the very same source on the host
// (shared_math.h, launch.h).
#pragma once

#if defined(__CUDACC__)
#define LLMP_HD __host__ __device__ __forceinline__
#else
#define LLMP_HD inline
#endif
