// y = x W + b and its backward through cuBLAS (see matmul.h; the arguments: gemm_args.cc), on
// 16-bit tensor cores under a SixteenBitOperands declaration (context.h).
#include "kernels/cuda/matmul.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/residual.h"

namespace llmp {
namespace cuda {
namespace {

// y[n, o] = b[o] for every row n: the bias the GEMM then accumulates onto (β = 1).
__global__ void broadcast_rows_kernel(float* __restrict__ y, const float* __restrict__ b,
                                      int64_t N, int OC) {
  for (int64_t i = gs_begin(); i < N * OC; i += gs_step()) y[i] = b[i % OC];
}

// g, on 16-bit tensor cores when a SixteenBitOperands scope declared the operands 16-bit values
// (context.h): an operand inside a noted widening is read from its 16-bit source
// (sixteen_bit_sources()); any other has its extent rounded (exactly, it is such a value) into
// the workspace, A's copy first and B's 256 bytes aligned after it; then one run_gemm_16bit.
// Else run_gemm.
void run_product(const GemmArgs& g) {
  const cudaDataType_t type = sixteen_bit_operands();
  if (type == CUDA_R_32F) {
    run_gemm(g);
    return;
  }
  const DType d = type == CUDA_R_16BF ? DType::kBF16 : DType::kF16;
  const int64_t na = a_extent(g), nb = b_extent(g);
  const void* a16 = noted_sixteen_bit_source(g.A, na, d);
  const void* b16 = noted_sixteen_bit_source(g.B, nb, d);
  const int64_t a_bytes = a16 ? 0 : (na * 2 + 255) / 256 * 256, b_bytes = b16 ? 0 : nb * 2;
  if (a_bytes + b_bytes > 0) {
    char* ws = static_cast<char*>(workspace(static_cast<size_t>(a_bytes + b_bytes)));
    if (!a16) {
      round_to(g.A, ws, d, na);
      a16 = ws;
    }
    if (!b16) {
      round_to(g.B, ws + a_bytes, d, nb);
      b16 = ws + a_bytes;
    }
  }
  run_gemm_16bit(g, a16, b16, type);
}

}  // namespace

void matmul_forward(float* y, const float* x, const float* W, const float* bias, int N, int C,
                    int OC) {
  if (bias) {
    const int64_t n = static_cast<int64_t>(N) * OC;
    broadcast_rows_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(y, bias, N, OC);
    LLMP_LAUNCH_CHECK();
  }
  run_product(matmul_forward_gemm(y, x, W, N, C, OC, bias ? 1.0f : 0.0f));
}

void matmul_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                     const float* W, int N, int C, int OC) {
  if (dx) matmul_backward_input(dx, dy, W, N, C, OC);
  matmul_backward_weight(dW, db, dy, x, N, C, OC);
}

void matmul_backward_input(float* dx, const float* dy, const float* W, int N, int C, int OC) {
  run_product(matmul_backward_input_gemm(dx, dy, W, N, C, OC));
}

void matmul_backward_weight(float* dW, float* db, const float* dy, const float* x, int N, int C,
                            int OC) {
  run_product(matmul_backward_weight_gemm(dW, dy, x, N, C, OC));
  if (db) residual_bias_backward(db, dy, N, OC);  // db (OC) += Σ_rows dy (N,OC)
}

void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC) {
  run_product(matmul_nt_forward_gemm(y, x, Wt, N, C, OC));
}

void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                        int N, int C, int OC) {
  if (dx) run_product(matmul_nt_backward_input_gemm(dx, dy, Wt, N, C, OC));
  run_product(matmul_nt_backward_weight_gemm(dWt, dy, x, N, C, OC));
}

}  // namespace cuda
}  // namespace llmp
