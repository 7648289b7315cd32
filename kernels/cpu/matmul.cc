// y = x @ W + b and its backward as Eigen GEMMs on row-major Maps (see matmul.h).
//
// noalias() tells Eigen the destination does not overlap the operands, so the product is written
// straight into it instead of into a temporary that is then copied (Eigen's default, for safety).
#include "kernels/cpu/matmul.h"

#include "kernels/cpu/flops.h"

#include <Eigen/Core>
#include <cstring>

namespace llmp {
namespace cpu {
namespace {
using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<MatR>;
using CMap = Eigen::Map<const MatR>;
using VecMap = Eigen::Map<Eigen::RowVectorXf>;
}  // namespace

void matmul_forward(float* y, const float* x, const float* W, const float* bias, int N, int C,
                    int OC) {
  count_flops(2L * N * C * OC);
  Map Y(y, N, OC);
  CMap X(x, N, C), Wm(W, C, OC);
  if (bias) {
    // Broadcast b into every row (a plain copy per row: Eigen's rowwise() broadcast into a
    // row-major Map is not vectorised), then let the GEMM accumulate into Y.
    for (int n = 0; n < N; ++n)
      std::memcpy(y + static_cast<long>(n) * OC, bias, sizeof(float) * OC);
    Y.noalias() += X * Wm;  // (N,C) @ (C,OC) -> (N,OC)
  } else {
    Y.noalias() = X * Wm;
  }
}

void matmul_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                     const float* W, int N, int C, int OC) {
  if (dx) matmul_backward_input(dx, dy, W, N, C, OC);
  matmul_backward_weight(dW, db, dy, x, N, C, OC);
}

void matmul_backward_input(float* dx, const float* dy, const float* W, int N, int C, int OC) {
  count_flops(2L * N * C * OC);
  Map(dx, N, C).noalias() = CMap(dy, N, OC) * CMap(W, C, OC).transpose();  // (N,OC) @ (OC,C)
}

void matmul_backward_weight(float* dW, float* db, const float* dy, const float* x, int N, int C,
                            int OC) {
  count_flops(2L * N * C * OC);
  CMap dY(dy, N, OC), X(x, N, C);
  Map(dW, C, OC).noalias() += X.transpose() * dY;  // (C,N) @ (N,OC) -> (C,OC)
  if (db) {  // Σ over N rows -> (OC), row by row: contiguous and vectorised (colwise().sum() of a
             // row-major Map walks each column with stride OC, ~5x slower here)
    VecMap dB(db, OC);
    for (int n = 0; n < N; ++n) dB += dY.row(n);
  }
}

void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC) {
  count_flops(2L * N * C * OC);
  Map(y, N, OC).noalias() = CMap(x, N, C) * CMap(Wt, OC, C).transpose();  // (N,C) @ (C,OC)
}

void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                        int N, int C, int OC) {
  count_flops((dx ? 4L : 2L) * N * C * OC);
  CMap dY(dy, N, OC), X(x, N, C), Wm(Wt, OC, C);
  if (dx) Map(dx, N, C).noalias() = dY * Wm;        // (N,OC) @ (OC,C) -> (N,C)
  Map(dWt, OC, C).noalias() += dY.transpose() * X;  // (OC,N) @ (N,C) -> (OC,C)
}

}  // namespace cpu
}  // namespace llmp
