// cuBLAS, emulated on the host (kernels/cuda/emulator/cublas.cc): the calls the project makes
// (context.cc run_gemm, run_gemm_16bit), with cuBLAS's column-major semantics
//   C = α·op(A)·op(B) + β·C,  op(A) m × k, op(B) k × n, C m × n, each column-major with its
//   leading dimension; a batch adds stride_a, stride_b, stride_c between consecutive matrices,
// its argument checks (CUBLAS_STATUS_INVALID_VALUE for m, n, k < 0 or a leading dimension below
// the rows it holds), A and B of f32, f16 or bf16 with fp32 accumulation, C of f32 or of the
// 16-bit type (rounded once, to nearest even), and TF32: under CUBLAS_TF32_TENSOR_OP_MATH (or
// CUBLAS_COMPUTE_32F_FAST_TF32) fp32 operands are rounded to TF32 (10 mantissa bits) first, as
// the tensor cores read them. Every pointer must lie in an emulated device allocation
// (CUBLAS_STATUS_INVALID_VALUE otherwise: cuBLAS would fault). The sums run in k order in fp32:
// cuBLAS's own order differs, so results agree with a GPU's to fp32 rounding, not bit for bit.
#pragma once

#include <cstdint>

#include "cuda_runtime.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct cublasContext;
using cublasHandle_t = cublasContext*;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long stride_a, const float* B, int ldb,
                                         long long stride_b, const float* beta, float* C, int ldc,
                                         long long stride_c, int batch);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta, void* C,
                            cudaDataType_t c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType_t a_type,
                                          int lda, long long stride_a, const void* B,
                                          cudaDataType_t b_type, int ldb, long long stride_b,
                                          const void* beta, void* C, cudaDataType_t c_type, int ldc,
                                          long long stride_c, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo);
