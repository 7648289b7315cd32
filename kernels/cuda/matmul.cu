// y = x W + b and its backward through cuBLAS (see matmul.h; the arguments: gemm_args.cc).
#include "kernels/cuda/matmul.h"

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/residual.h"

namespace llmp {
namespace cuda {
namespace {

// y[n, o] = b[o] for every row n: the bias the GEMM then accumulates onto (β = 1).
__global__ void broadcast_rows_kernel(float* __restrict__ y, const float* __restrict__ b,
                                      int64_t N, int OC) {
  for (int64_t i = gs_begin(); i < N * OC; i += gs_step()) y[i] = b[i % OC];
}

}  // namespace

void matmul_forward(float* y, const float* x, const float* W, const float* bias, int N, int C,
                    int OC) {
  if (bias) {
    const int64_t n = static_cast<int64_t>(N) * OC;
    broadcast_rows_kernel<<<elementwise_blocks(n), kThreads, 0, stream()>>>(y, bias, N, OC);
    LLMP_LAUNCH_CHECK();
  }
  run_gemm(matmul_forward_gemm(y, x, W, N, C, OC, bias ? 1.0f : 0.0f));
}

void matmul_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                     const float* W, int N, int C, int OC) {
  if (dx) matmul_backward_input(dx, dy, W, N, C, OC);
  matmul_backward_weight(dW, db, dy, x, N, C, OC);
}

void matmul_backward_input(float* dx, const float* dy, const float* W, int N, int C, int OC) {
  run_gemm(matmul_backward_input_gemm(dx, dy, W, N, C, OC));
}

void matmul_backward_weight(float* dW, float* db, const float* dy, const float* x, int N, int C,
                            int OC) {
  run_gemm(matmul_backward_weight_gemm(dW, dy, x, N, C, OC));
  if (db) residual_bias_backward(db, dy, N, OC);  // db (OC) += Σ_rows dy (N,OC)
}

void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC) {
  run_gemm(matmul_nt_forward_gemm(y, x, Wt, N, C, OC));
}

void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                        int N, int C, int OC) {
  if (dx) run_gemm(matmul_nt_backward_input_gemm(dx, dy, Wt, N, C, OC));
  run_gemm(matmul_nt_backward_weight_gemm(dWt, dy, x, N, C, OC));
}

}  // namespace cuda
}  // namespace llmp
