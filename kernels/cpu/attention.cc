// Causal multi-head attention forward/backward (see attention.h).
//
// Each (b,h) pair is a handful of small GEMMs on strided Eigen Maps: Q, K, V are (T,hs) views into
// qkv with row stride 3C, Y is a (T,hs) view into out with row stride C; Eigen packs them, so no
// copies are needed. The row-wise softmax works on the causal prefix P[i, 0..i] only, with Eigen's
// vectorised exp(); the masked part is set to exactly 0. P and dS are then lower triangular, so
// P V, Pᵀ dY, dS K and dSᵀ Q are Eigen triangular products (half the FLOPs of a full GEMM); only
// Q Kᵀ and dY Vᵀ are computed on the full square.
#include "kernels/cpu/attention.h"

#include "kernels/cpu/convert.h"
#include "kernels/cpu/flops.h"

#include <Eigen/Core>
#include <cmath>
#include <stdexcept>
#include <string>

namespace llmp {
namespace cpu {
namespace {
using MatR = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using HeadMap = Eigen::Map<MatR, 0, Stride>;  // (T,hs) slice of a (B,T,k·C) buffer
using CHeadMap = Eigen::Map<const MatR, 0, Stride>;
using SqMap = Eigen::Map<MatR>;  // (T,T)
using CSqMap = Eigen::Map<const MatR>;

/// P (T,T) of one (b,h): S = (Q/√hs) Kᵀ, then the causal softmax row by row. The one place the
/// probabilities are made, so that attention_probs (selective recomputation) gives the bits the
/// forward gave. Each row ends as probs_dtype values (attention.h).
void head_probs(SqMap& P, const CHeadMap& Q, const CHeadMap& K, float scale, int T,
                DType probs_dtype) {
  P.noalias() = (scale * Q) * K.transpose();  // (T,hs) @ (hs,T) -> (T,T) scores S
  for (int i = 0; i < T; ++i) {               // causal softmax of row i over j <= i
    auto row = P.row(i).head(i + 1).array();
    const float m = row.maxCoeff();
    row = (row - m).exp();
    row *= 1.0f / row.sum();
    round_values(P.row(i).data(), i + 1, probs_dtype);  // P as its product will read it
    P.row(i).tail(T - 1 - i).setZero();  // masked: exactly 0
  }
}

void check_probs_dtype(const char* fn, DType d) {
  if (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16)
    throw std::invalid_argument(std::string(fn) + ": probs_dtype " + to_string(d) +
                                " is not f32, f16 or bf16");
}
}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int H,
                       DType probs_dtype) {
  check_probs_dtype("attention_forward", probs_dtype);
  const int hs = C / H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const long C3 = 3L * C;
  // Q Kᵀ on the full square, P V on the lower triangle (flops.h).
  count_flops(static_cast<int64_t>(B) * H * (2L * T * T * hs + static_cast<int64_t>(T) * (T + 1) * hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const float* base = qkv + b * T * C3 + h * hs;
      CHeadMap Q(base, T, hs, Stride(C3)), K(base + C, T, hs, Stride(C3)),
          V(base + 2 * C, T, hs, Stride(C3));
      SqMap P(att + (static_cast<long>(b) * H + h) * T * T, T, T);
      head_probs(P, Q, K, scale, T, probs_dtype);
      HeadMap Y(out + static_cast<long>(b) * T * C + h * hs, T, hs, Stride(C));
      Y.noalias() = P.triangularView<Eigen::Lower>() * V;  // (T,T) @ (T,hs) -> (T,hs)
    }
  }
}

void attention_probs(float* att, const float* qkv, int B, int T, int C, int H,
                     DType probs_dtype) {
  check_probs_dtype("attention_probs", probs_dtype);
  const int hs = C / H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const long C3 = 3L * C;
  count_flops(static_cast<int64_t>(B) * H * 2L * T * T * hs);  // Q Kᵀ only
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const float* base = qkv + b * T * C3 + h * hs;
      CHeadMap Q(base, T, hs, Stride(C3)), K(base + C, T, hs, Stride(C3));
      SqMap P(att + (static_cast<long>(b) * H + h) * T * T, T, T);
      head_probs(P, Q, K, scale, T, probs_dtype);
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                        float* scratch, int B, int T, int C, int H, DType probs_dtype) {
  check_probs_dtype("attention_backward", probs_dtype);
  const int hs = C / H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const long C3 = 3L * C;
  SqMap dP(scratch, T, T);
  // dY Vᵀ on the full square; Pᵀ dY, dS K and dSᵀ Q on triangles (flops.h).
  count_flops(static_cast<int64_t>(B) * H *
              (2L * T * T * hs + 3L * static_cast<int64_t>(T) * (T + 1) * hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const long qo = b * T * C3 + h * hs;
      CHeadMap Q(qkv + qo, T, hs, Stride(C3)), K(qkv + qo + C, T, hs, Stride(C3)),
          V(qkv + qo + 2 * C, T, hs, Stride(C3));
      HeadMap dQ(dqkv + qo, T, hs, Stride(C3)), dK(dqkv + qo + C, T, hs, Stride(C3)),
          dV(dqkv + qo + 2 * C, T, hs, Stride(C3));
      CHeadMap dY(dout + static_cast<long>(b) * T * C + h * hs, T, hs, Stride(C));
      CSqMap P(att + (static_cast<long>(b) * H + h) * T * T, T, T);

      dP.noalias() = dY * V.transpose();                                 // (T,hs) @ (hs,T) -> (T,T)
      dV.noalias() = P.transpose().triangularView<Eigen::Upper>() * dY;  // (T,T) @ (T,hs) -> (T,hs)
      // Softmax backward, row i: dS_ij = P_ij·(dP_ij - Σ_k P_ik·dP_ik), times the 1/√hs of S.
      for (int i = 0; i < T; ++i) {
        auto p = P.row(i).head(i + 1).array();
        auto d = dP.row(i).head(i + 1).array();
        const float dot = (p * d).sum();
        d = scale * p * (d - dot);
        round_values(dP.row(i).data(), i + 1, probs_dtype);  // dS as its products read it
        dP.row(i).tail(T - 1 - i).setZero();
      }
      dQ.noalias() = dP.triangularView<Eigen::Lower>() * K;              // (T,T) @ (T,hs) -> (T,hs)
      dK.noalias() = dP.transpose().triangularView<Eigen::Upper>() * Q;  // (T,T) @ (T,hs) -> (T,hs)
    }
  }
}

}  // namespace cpu
}  // namespace llmp
