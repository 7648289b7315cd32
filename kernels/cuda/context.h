// The per-process CUDA state the kernels share: one cuBLAS handle, one stream, the TF32 switch,
// one grow-only device workspace, and run_gemm() (a GemmArgs made into the cuBLAS call).
//
// One handle per process (created lazily on the first handle() call: cublasCreate costs ~100 ms
// and allocates device memory, so a CPU-only run never pays it). Every kernel of kernels/cuda
// and every cuBLAS call runs on stream(), which set_stream() changes (the default is the legacy
// default stream 0). Calls are asynchronous; functions that return a host value (cross-entropy
// loss, gradient norm) synchronise the stream.
//
// TF32 (set_tf32): on A100/H100 the tensor cores multiply fp32 inputs rounded to 10-bit mantissas
// (TF32) and accumulate in fp32, ~8x the fp32 throughput at ~1e-3 relative error. OFF by default,
// so the GPU results match kernels/cpu to fp32 rounding (kernels_twin_test's bounds assume it).
//
// Glossary: workspace = scratch device memory reused by consecutive calls on stream().
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/cuda/gemm_args.h"
#include "kernels/ops/sixteen_bit_sources.h"

namespace llmp {
namespace cuda {

/// "file:line: cuBLAS error: call failed: CUBLAS_STATUS_...". Host-only, needs no GPU.
std::string cublas_error_message(cublasStatus_t st, const char* call, const char* file, int line);
/// Prints cublas_error_message() and exits with status 1.
[[noreturn]] void cublas_fail(cublasStatus_t st, const char* call, const char* file, int line);

/// The process's cuBLAS handle, created on first use on stream() with the current TF32 mode.
cublasHandle_t handle();

/// Every later kernel and cuBLAS call of kernels/cuda runs on `s` (0: the legacy default stream).
void set_stream(cudaStream_t s);
cudaStream_t stream();

/// TF32 tensor-core math for the fp32 GEMMs (CUBLAS_TF32_TENSOR_OP_MATH) or not
/// (CUBLAS_DEFAULT_MATH, pure fp32: the default).
void set_tf32(bool on);
bool tf32();

/// At least `bytes` of device memory, valid until the next workspace() call that grows it
/// (growing frees the old buffer with cudaFree, which waits for the device first).
void* workspace(size_t bytes);

/// Issues g as cublasSgemm (batch 1) or cublasSgemmStridedBatched on stream(); inside an
/// ExactTf32Operands scope, as cublasGemmEx / cublasGemmStridedBatchedEx with
/// CUBLAS_COMPUTE_32F_FAST_TF32 (TF32 tensor cores, fp32 accumulation) whatever set_tf32 says.
void run_gemm(const GemmArgs& g);

/// cuBLAS's 16-bit product of g: A16 and B16 are 16-bit copies (`type`: CUDA_R_16BF or
/// CUDA_R_16F) of g.A's and g.B's first a_extent(g) / b_extent(g) elements, laid out as they are
/// (the same lda, ldb, batch strides); CUBLAS_COMPUTE_32F: 16-bit tensor cores with fp32
/// accumulation (cublasGemmEx / cublasGemmStridedBatchedEx). C16 nullptr: C is g.C, fp32 (read
/// with β, written). Otherwise C is C16, of `type`, laid out as g.C would be (ldc, strideC): read
/// with β, and α·AB + β·C is computed in fp32 and rounded once to `type` (to nearest even).
void run_gemm_16bit(const GemmArgs& g, const void* A16, const void* B16, cudaDataType_t type,
                    void* C16 = nullptr);

/// The 16-bit type every operand of the matmul products in flight IS a value of (CUDA_R_16BF or
/// CUDA_R_16F; set by a SixteenBitOperands scope), or CUDA_R_32F: none declared (the default).
cudaDataType_t sixteen_bit_operands();

/// While alive, matmul.cu's products (the linear layers' and the tied head's) copy their two
/// operands to `type` and multiply the copies on 16-bit tensor cores (run_gemm_16bit) instead of
/// reading fp32: the caller promises every operand is exactly a value of `type` (mixed
/// precision's widened activations and parameters, KernelOps::set_matmul_operands), so the copies
/// are exact and the products are the fp32 ones, summed in the tensor cores' order, as on TF32
/// below; at twice TF32's dense rate (H100 SXM: 989 against 495 TFLOP/s) and half the operand
/// bytes, for one extra pass over each operand (read 4 bytes, write 2 per element). CUDA_R_32F:
/// no declaration.
class SixteenBitOperands {
 public:
  explicit SixteenBitOperands(cudaDataType_t type);
  ~SixteenBitOperands();
  SixteenBitOperands(const SixteenBitOperands&) = delete;
  SixteenBitOperands& operator=(const SixteenBitOperands&) = delete;

 private:
  cudaDataType_t previous_;
};

/// The fp32 buffers noted as exact widenings of 16-bit buffers (KernelOps::note_source, from the
/// model's F32In and FlatParams): matmul.cu's 16-bit products read an operand inside one from
/// its 16-bit source and copy only the others.
SixteenBitSources& sixteen_bit_sources();
/// false when the environment sets LLMP_CUDA_COPY_16BIT_OPERANDS=1: run_product then copies
/// every operand as before the sources existed (a benchmark's A/B in one sitting,
/// tools/gpu_bench.sh; the results are the same bits either way). Read once.
bool sixteen_bit_sources_enabled();
/// The 16-bit source of the fp32 operand p[0..n) (values of dtype d) when a noted widening holds
/// it and the sources are enabled (above); else nullptr, and the caller rounds a copy itself.
const void* noted_sixteen_bit_source(const float* p, int64_t n, DType d);

/// While alive, run_gemm's products use TF32 tensor cores: the caller promises that every operand
/// is exactly a TF32 value (mixed precision's widened bf16/fp16 values, KernelOps::
/// set_matmul_operands), so the products are the fp32 ones, summed in the tensor cores' order.
class ExactTf32Operands {
 public:
  explicit ExactTf32Operands(bool on);
  ~ExactTf32Operands();
  ExactTf32Operands(const ExactTf32Operands&) = delete;
  ExactTf32Operands& operator=(const ExactTf32Operands&) = delete;

 private:
  bool previous_;
};

}  // namespace cuda
}  // namespace llmp

#define CUBLAS_CHECK(call)                                                     \
  do {                                                                         \
    const cublasStatus_t llmp_cublas_st_ = (call);                             \
    if (llmp_cublas_st_ != CUBLAS_STATUS_SUCCESS)                              \
      ::llmp::cuda::cublas_fail(llmp_cublas_st_, #call, __FILE__, __LINE__);   \
  } while (0)
