// Ring self-attention's kernels (ring_self_block.h) on strided Eigen maps.
//
// The softmaxes are the loops common/cp/ring_self_attention.cc ran inline, moved here with the
// same Eigen expressions. The product writes alpha into the left operand, (alpha·op(A))·op(B),
// as the core's (Q/√hs) K_cᵀ did, so the scores keep their order of operations too.
#include "kernels/cpu/ring_self_block.h"

#include <Eigen/Core>

#include "kernels/cpu/flops.h"

namespace llmp {
namespace cpu {
namespace {

using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using Map = Eigen::Map<MatR, 0, Stride>;
using CMap = Eigen::Map<const MatR, 0, Stride>;

/// C = alpha·a·b + beta·C for one batch entry, a and b already op()-applied expressions.
template <class OpA, class OpB>
void product(Map& C, float alpha, const OpA& a, const OpB& b, float beta) {
  if (beta == 0.0f) {
    C.noalias() = (alpha * a) * b;  // C not read: whatever it held (NaN included) is gone
  } else {
    if (beta != 1.0f) C *= beta;
    C.noalias() += (alpha * a) * b;
  }
}

}  // namespace

void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                          int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                          int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  count_flops(2L * M * N * K * batch);
  for (int i = 0; i < batch; ++i) {
    // Stored shapes: A (M,K) or (K,M) when transposed; B (K,N) or (N,K).
    CMap a(A + i * stride_a, trans_a ? K : M, trans_a ? M : K, Stride(lda));
    CMap b(B + i * stride_b, trans_b ? N : K, trans_b ? K : N, Stride(ldb));
    Map c(C + i * stride_c, M, N, Stride(ldc));
    if (!trans_a && !trans_b) product(c, alpha, a, b, beta);
    if (!trans_a && trans_b) product(c, alpha, a, b.transpose(), beta);
    if (trans_a && !trans_b) product(c, alpha, a.transpose(), b, beta);
    if (trans_a && trans_b) product(c, alpha, a.transpose(), b.transpose(), beta);
  }
}

void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0) {
  for (int64_t k = 0; k < rows; ++k) {
    const int g = g0 + static_cast<int>(k % Tl);  // global position of local row k mod Tl
    Eigen::Map<Eigen::RowVectorXf> row(s + k * T, T);
    auto live = row.head(g + 1).array();  // keys j <= g
    live = (live - live.maxCoeff()).exp();
    live *= 1.0f / live.sum();
    row.tail(T - 1 - g).setZero();  // masked: exactly 0
  }
}

void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                                  float scale) {
  for (int64_t k = 0; k < rows; ++k) {
    const int g = g0 + static_cast<int>(k % Tl);
    auto p = Eigen::Map<const Eigen::RowVectorXf>(P + k * T, T).head(g + 1).array();
    Eigen::Map<Eigen::RowVectorXf> row(dp + k * T, T);
    auto ds = row.head(g + 1).array();
    const float dot = (p * ds).sum();  // Σ_j P_j dP_j over the live keys
    ds = scale * p * (ds - dot);
    row.tail(T - 1 - g).setZero();
  }
}

}  // namespace cpu
}  // namespace llmp
