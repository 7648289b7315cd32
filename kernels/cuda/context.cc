// One cuBLAS handle, stream, TF32 mode, 16-bit operand declaration and workspace per process
// (see context.h).
#include "kernels/cuda/context.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_check.h"

namespace llmp {
namespace cuda {
namespace {

struct State {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = 0;
  bool tf32 = false;
  bool exact_tf32 = false;  // inside an ExactTf32Operands scope
  cudaDataType_t operands16 = CUDA_R_32F;  // inside a SixteenBitOperands scope: its type
  void* ws = nullptr;
  size_t ws_bytes = 0;
  SixteenBitSources sources;
};

State& state() {
  static State s;  // never destroyed: the driver may be gone at static destruction time
  return s;
}

cublasMath_t math_mode(bool tf32) {
  return tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
}

cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

// g as cublasGemmEx (batch 1) or cublasGemmStridedBatchedEx with A, B of `ab_type` (g's own
// pointers, or 16-bit copies of them laid out alike) and C of `c_type` (g.C fp32, or a 16-bit C
// laid out alike), accumulated in `compute`.
void gemm_ex(const GemmArgs& g, const void* A, const void* B, cudaDataType_t ab_type,
             cublasComputeType_t compute, void* C, cudaDataType_t c_type) {
  if (g.batch == 1)
    CUBLAS_CHECK(cublasGemmEx(handle(), op(g.transa), op(g.transb), g.m, g.n, g.k, &g.alpha, A,
                              ab_type, g.lda, B, ab_type, g.ldb, &g.beta, C, c_type, g.ldc,
                              compute, CUBLAS_GEMM_DEFAULT));
  else
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle(), op(g.transa), op(g.transb), g.m, g.n, g.k, &g.alpha, A, ab_type, g.lda,
        g.strideA, B, ab_type, g.ldb, g.strideB, &g.beta, C, c_type, g.ldc, g.strideC, g.batch,
        compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

std::string cublas_error_message(cublasStatus_t st, const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": cuBLAS error: " + call +
         " failed: " + cublasGetStatusName(st) + ": " + cublasGetStatusString(st);
}

void cublas_fail(cublasStatus_t st, const char* call, const char* file, int line) {
  std::fprintf(stderr, "%s\n", cublas_error_message(st, call, file, line).c_str());
  std::fflush(stderr);
  std::exit(1);
}

cublasHandle_t handle() {
  State& s = state();
  if (!s.handle) {
    CUBLAS_CHECK(cublasCreate(&s.handle));
    CUBLAS_CHECK(cublasSetStream(s.handle, s.stream));
    CUBLAS_CHECK(cublasSetMathMode(s.handle, math_mode(s.tf32)));
  }
  return s.handle;
}

void set_stream(cudaStream_t st) {
  State& s = state();
  s.stream = st;
  if (s.handle) CUBLAS_CHECK(cublasSetStream(s.handle, st));
}

cudaStream_t stream() { return state().stream; }

void set_tf32(bool on) {
  State& s = state();
  s.tf32 = on;
  if (s.handle) CUBLAS_CHECK(cublasSetMathMode(s.handle, math_mode(on)));
}

bool tf32() { return state().tf32; }

void* workspace(size_t bytes) {
  State& s = state();
  if (bytes > s.ws_bytes) {
    if (s.ws) CUDA_CHECK(cudaFree(s.ws));
    CUDA_CHECK(cudaMalloc(&s.ws, bytes));
    s.ws_bytes = bytes;
  }
  return s.ws;
}

cudaDataType_t sixteen_bit_operands() { return state().operands16; }

SixteenBitSources& sixteen_bit_sources() { return state().sources; }

bool sixteen_bit_sources_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LLMP_CUDA_COPY_16BIT_OPERANDS");
    return v == nullptr || std::string(v) != "1";
  }();
  return on;
}

const void* noted_sixteen_bit_source(const float* p, int64_t n, DType d) {
  return sixteen_bit_sources_enabled() ? sixteen_bit_sources().find(p, n, d) : nullptr;
}

SixteenBitOperands::SixteenBitOperands(cudaDataType_t type) : previous_(state().operands16) {
  state().operands16 = type;
}
SixteenBitOperands::~SixteenBitOperands() { state().operands16 = previous_; }

void run_gemm_16bit(const GemmArgs& g, const void* A16, const void* B16, cudaDataType_t type,
                    void* C16) {
  if (C16)
    gemm_ex(g, A16, B16, type, CUBLAS_COMPUTE_32F, C16, type);
  else
    gemm_ex(g, A16, B16, type, CUBLAS_COMPUTE_32F, g.C, CUDA_R_32F);
}

ExactTf32Operands::ExactTf32Operands(bool on) : previous_(state().exact_tf32) {
  state().exact_tf32 = on;
}
ExactTf32Operands::~ExactTf32Operands() { state().exact_tf32 = previous_; }

void run_gemm(const GemmArgs& g) {
  if (state().exact_tf32 && !state().tf32) {  // TF32 for these products alone
    gemm_ex(g, g.A, g.B, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, g.C, CUDA_R_32F);
    return;
  }
  if (g.batch == 1) {
    CUBLAS_CHECK(cublasSgemm(handle(), op(g.transa), op(g.transb), g.m, g.n, g.k, &g.alpha, g.A,
                             g.lda, g.B, g.ldb, &g.beta, g.C, g.ldc));
  } else {
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle(), op(g.transa), op(g.transb), g.m, g.n, g.k,
                                           &g.alpha, g.A, g.lda, g.strideA, g.B, g.ldb, g.strideB,
                                           &g.beta, g.C, g.ldc, g.strideC, g.batch));
  }
}

}  // namespace cuda
}  // namespace llmp
