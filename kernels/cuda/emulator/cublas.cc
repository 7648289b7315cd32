// The emulated cuBLAS (include/cublas_v2.h): column-major GEMMs on host memory, checked as cuBLAS
// checks its arguments and against the emulated device's allocations.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/tensor/tensor.h"
#include "cublas_v2.h"
#include "kernels/cuda/emulator/api_counts.h"
#include "kernels/cpu/convert.h"

struct cublasContext {
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

size_t elem_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

llmp::DType dtype_of(cudaDataType_t t) {
  return t == CUDA_R_16BF  ? llmp::DType::kBF16
         : t == CUDA_R_16F ? llmp::DType::kF16
                           : llmp::DType::kF32;
}

/// x rounded to TF32 (fp32's 8 exponent bits and top 10 mantissa bits, to nearest even), as the
/// tensor cores read an fp32 operand under TF32 math.
float tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) != 0x7F800000u) u = (u + 0x0FFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
  std::memcpy(&x, &u, 4);
  return x;
}

/// One operand: `rows` × `cols` as stored (column-major, ld), `batch` matrices `stride` apart.
struct Operand {
  const void* p;
  cudaDataType_t type;
  int rows, cols, ld;
  long long stride;
  /// Element (r, c) of matrix b as fp32.
  float at(int b, int r, int c) const {
    const int64_t i = b * stride + int64_t{c} * ld + r;
    if (type == CUDA_R_32F) return static_cast<const float*>(p)[i];
    float x;
    llmp::cpu::widen(static_cast<const uint16_t*>(p) + i, dtype_of(type), &x, 1);
    return x;
  }
  /// Whether every element it holds lies in one emulated device allocation.
  bool on_device(int batch) const {
    if (rows == 0 || cols == 0 || batch == 0) return true;
    const int64_t last = (batch - 1) * stride + int64_t{cols - 1} * ld + rows - 1;
    return llmp::cuda::emu::is_device_range(p, static_cast<size_t>(last + 1) * elem_bytes(type));
  }
};

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, const float* alpha, const void* A, cudaDataType_t at, int lda,
                    long long sa, const void* B, cudaDataType_t bt, int ldb, long long sb,
                    const float* beta, void* C, cudaDataType_t ct, int ldc, long long sc, int batch,
                    bool tf32_math) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Operand a{A, at, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, sa};
  const Operand b{B, bt, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, sb};
  const Operand c{C, ct, m, n, ldc, sc};
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1, a.rows) ||
      ldb < std::max(1, b.rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (at != bt || (ct != CUDA_R_32F && ct != at)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!a.on_device(batch) || !b.on_device(batch) || !c.on_device(batch))
    return CUBLAS_STATUS_INVALID_VALUE;  // cuBLAS would read or write off the device's memory
  const bool round_tf32 = tf32_math && at == CUDA_R_32F;
  llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kGemm,
                              at == CUDA_R_16BF  ? "bf16 operands"
                              : at == CUDA_R_16F ? "fp16 operands"
                              : round_tf32       ? "fp32 operands, TF32"
                                                 : "fp32 operands",
                              0, 2.0 * m * n * k * batch);
  std::vector<float> opa(size_t(m) * k), opb(size_t(k) * n);
  for (int bi = 0; bi < batch; ++bi) {
    for (int i = 0; i < m; ++i)  // op(A) row-major m × k
      for (int l = 0; l < k; ++l) {
        const float x = ta == CUBLAS_OP_N ? a.at(bi, i, l) : a.at(bi, l, i);
        opa[size_t(i) * k + l] = round_tf32 ? tf32(x) : x;
      }
    for (int l = 0; l < k; ++l)  // op(B) row-major k × n
      for (int j = 0; j < n; ++j) {
        const float x = tb == CUBLAS_OP_N ? b.at(bi, l, j) : b.at(bi, j, l);
        opb[size_t(l) * n + j] = round_tf32 ? tf32(x) : x;
      }
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (int l = 0; l < k; ++l) acc += opa[size_t(i) * k + l] * opb[size_t(l) * n + j];
        float v = *alpha * acc;
        if (*beta != 0.0f) v += *beta * c.at(bi, i, j);  // β = 0: C is not read
        const int64_t at_c = bi * sc + int64_t{j} * ldc + i;
        if (ct == CUDA_R_32F)
          static_cast<float*>(C)[at_c] = v;
        else
          llmp::cpu::round_to(&v, static_cast<uint16_t*>(C) + at_c, dtype_of(ct), 1);
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}

/// TF32 for an Ex call: asked for by the compute type, or by the handle's math mode for fp32
/// compute (cublasSetMathMode's CUBLAS_TF32_TENSOR_OP_MATH covers cublasGemmEx's 32F compute).
bool tf32_math(cublasHandle_t h, cublasComputeType_t compute) {
  return compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
         (h && h->math == CUBLAS_TF32_TENSOR_OP_MATH && compute == CUBLAS_COMPUTE_32F);
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
  }
  return "unknown status";
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float* alpha, const float* A, int lda,
                           const float* B, int ldb, const float* beta, float* C, int ldc) {
  return gemm(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, beta, C,
              CUDA_R_32F, ldc, 0, 1, h && h->math == CUBLAS_TF32_TENSOR_OP_MATH);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda, long long sa,
                                         const float* B, int ldb, long long sb, const float* beta,
                                         float* C, int ldc, long long sc, int batch) {
  return gemm(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb, beta, C,
              CUDA_R_32F, ldc, sc, batch, h && h->math == CUBLAS_TF32_TENSOR_OP_MATH);
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void* alpha, const void* A, cudaDataType_t at,
                            int lda, const void* B, cudaDataType_t bt, int ldb, const void* beta,
                            void* C, cudaDataType_t ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
  return gemm(h, ta, tb, m, n, k, static_cast<const float*>(alpha), A, at, lda, 0, B, bt, ldb, 0,
              static_cast<const float*>(beta), C, ct, ldc, 0, 1, tf32_math(h, compute));
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType_t at,
                                          int lda, long long sa, const void* B, cudaDataType_t bt,
                                          int ldb, long long sb, const void* beta, void* C,
                                          cudaDataType_t ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm(h, ta, tb, m, n, k, static_cast<const float*>(alpha), A, at, lda, sa, B, bt, ldb, sb,
              static_cast<const float*>(beta), C, ct, ldc, sc, batch, tf32_math(h, compute));
}
