// The CPU table of KernelOps: kernels/cpu behind every entry (kernel_ops(Device::kCPU)).
#include "kernels/ops/cpu_kernel_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/grad_norm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/permute_rows.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/ring_self_block.h"
#include "kernels/cpu/tp_grid.h"

namespace llmp {

namespace {

/// The CPU's side of set_matmul_operands: under a 16-bit declaration, every one of the n values
/// of `operand` (argument `name` of `kernel`) is exact in that dtype, else std::logic_error.
void check_operand(const KernelOps& ops, const char* kernel, const char* name, const float* p,
                   int64_t n) {
  const DType d = ops.matmul_operands();
  if (d == DType::kF32 || p == nullptr) return;
  const int64_t i = cpu::first_inexact(p, n, d);
  if (i >= 0)
      throw std::logic_error(std::string(kernel) + ": " + name + "[" + std::to_string(i) +
                             "] = " + std::to_string(p[i]) + " is not a " + to_string(d) +
                             " value, yet the products were declared " + to_string(d) +
                             " operands (MatmulOperands, kernels/ops/kernel_ops.h)");
}

/// check_operand on a strided operand: `rows` rows of `cols` floats, ld apart (the blockwise
/// attention's q, k, v, dO of every head, inside qkv or a ring block).
void check_rows(const KernelOps& ops, const char* kernel, const char* name, const float* p,
                int64_t rows, int cols, int ld) {
  for (int64_t r = 0; r < rows && ops.matmul_operands() != DType::kF32; ++r)
    check_operand(ops, kernel, name, p + r * ld, cols);
}

int64_t probs_elements(int B, int T, int H) { return int64_t{B} * H * T * T; }

// Each method forwards to the kernels/cpu function of the same name.
class CpuKernelOps final : public KernelOps {
 public:
  Device device() const override { return Device::kCPU; }
  // The linear layers' 16-bit activations (Act) through fp32 copies (Fp32Copy): bit for bit what
  // common/nn's F32In and F32Out did around these calls. The declared-operand checks read the
  // copies: the values a GPU's product reads.
  void matmul_forward(Act y, ActIn x, const float* W, const float* bias, int N, int C,
                      int OC) override {
    const Fp32Copy xf(x, int64_t{N} * C, device());
    check_operand(*this, "matmul_forward", "x", xf.get(), int64_t{N} * C);
    check_operand(*this, "matmul_forward", "W", W, int64_t{C} * OC);
    check_operand(*this, "matmul_forward", "bias", bias, OC);  // a GPU's 16-bit y starts as it
    Fp32Copy yf(y, int64_t{N} * OC, device());
    cpu::matmul_forward(yf.get(), xf.get(), W, bias, N, C, OC);
  }
  void matmul_backward_input(Act dx, ActIn dy, const float* W, int N, int C, int OC) override {
    const Fp32Copy dyf(dy, int64_t{N} * OC, device());
    check_operand(*this, "matmul_backward_input", "dy", dyf.get(), int64_t{N} * OC);
    check_operand(*this, "matmul_backward_input", "W", W, int64_t{C} * OC);
    Fp32Copy dxf(dx, int64_t{N} * C, device());
    cpu::matmul_backward_input(dxf.get(), dyf.get(), W, N, C, OC);
  }
  void matmul_backward_weight(float* dW, float* db, ActIn dy, ActIn x, int N, int C,
                              int OC) override {
    const Fp32Copy dyf(dy, int64_t{N} * OC, device()), xf(x, int64_t{N} * C, device());
    check_operand(*this, "matmul_backward_weight", "dy", dyf.get(), int64_t{N} * OC);
    check_operand(*this, "matmul_backward_weight", "x", xf.get(), int64_t{N} * C);
    cpu::matmul_backward_weight(dW, db, dyf.get(), xf.get(), N, C, OC);
  }
  void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC) override {
    check_operand(*this, "matmul_nt_forward", "x", x, int64_t{N} * C);
    check_operand(*this, "matmul_nt_forward", "Wt", Wt, int64_t{OC} * C);
    cpu::matmul_nt_forward(y, x, Wt, N, C, OC);
  }
  void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                          int N, int C, int OC) override {
    check_operand(*this, "matmul_nt_backward", "dy", dy, int64_t{N} * OC);
    check_operand(*this, "matmul_nt_backward", "x", x, int64_t{N} * C);
    check_operand(*this, "matmul_nt_backward", "Wt", Wt, int64_t{OC} * C);
    cpu::matmul_nt_backward(dx, dWt, dy, x, Wt, N, C, OC);
  }
  // 16-bit activations (Act) through fp32 copies (Fp32Copy): the forward writes the copy of P
  // and rounds it into att, the backward reads a widened copy; likewise out, qkv, dout, dqkv:
  // bit for bit what common/nn's F32Out and F32In did around these calls.
  void attention_forward(Act out, Act att, ActIn qkv, int B, int T, int C, int H,
                         DType probs_dtype) override {
    const int64_t n_qkv = int64_t{B} * T * 3 * C;
    const Fp32Copy q(qkv, n_qkv, device());
    check_operand(*this, "attention_forward", "qkv", q.get(), n_qkv);
    Fp32Copy P(att, probs_elements(B, T, H), device());
    Fp32Copy y(out, int64_t{B} * T * C, device());
    cpu::attention_forward(y.get(), P.get(), q.get(), B, T, C, H, probs_dtype);
  }
  void attention_probs(Act att, ActIn qkv, int B, int T, int C, int H,
                       DType probs_dtype) override {
    const int64_t n_qkv = int64_t{B} * T * 3 * C;
    const Fp32Copy q(qkv, n_qkv, device());
    check_operand(*this, "attention_probs", "qkv", q.get(), n_qkv);
    Fp32Copy P(att, probs_elements(B, T, H), device());
    cpu::attention_probs(P.get(), q.get(), B, T, C, H, probs_dtype);
  }
  void attention_backward(Act dqkv, ActIn dout, ActIn qkv, ActIn att, float* scratch, int B,
                          int T, int C, int H, DType probs_dtype) override {
    const int64_t n_qkv = int64_t{B} * T * 3 * C, n_out = int64_t{B} * T * C;
    const Fp32Copy dy(dout, n_out, device()), q(qkv, n_qkv, device());
    check_operand(*this, "attention_backward", "dout", dy.get(), n_out);
    check_operand(*this, "attention_backward", "qkv", q.get(), n_qkv);
    const int64_t n = probs_elements(B, T, H);
    const Fp32Copy P(att, n, device());
    check_operand(*this, "attention_backward", "att", P.get(), n);
    Fp32Copy dq(dqkv, n_qkv, device());
    cpu::attention_backward(dq.get(), dy.get(), q.get(), P.get(), scratch, B, T, C, H,
                            probs_dtype);
  }
  void attention_block_forward(float* o, int ld_o, float* m, float* l, float* scores,
                               const float* q, int ld_q, const float* k, const float* v, int ld_kv,
                               int B, int H, int Tl, int hs, cpu::BlockPairs pairs) override {
    // Under a bf16 declaration a GPU reads q, k, v as bf16 (kernels/cuda/attention_block_tc.h).
    const int64_t rows = int64_t{B} * Tl;
    check_rows(*this, "attention_block_forward", "q", q, rows, H * hs, ld_q);
    check_rows(*this, "attention_block_forward", "k", k, rows, H * hs, ld_kv);
    check_rows(*this, "attention_block_forward", "v", v, rows, H * hs, ld_kv);
    cpu::attention_block_forward(o, ld_o, m, l, scores, q, ld_q, k, v, ld_kv, B, H, Tl, hs, pairs);
  }
  void attention_block_finalize(float* o, int ld_o, float* lse, const float* m, const float* l,
                                int B, int H, int Tl, int hs) override {
    cpu::attention_block_finalize(o, ld_o, lse, m, l, B, H, Tl, hs);
  }
  void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o, int B,
                              int H, int Tl, int hs) override {
    cpu::attention_block_rowdot(D, dout, out, ld_o, B, H, Tl, hs);
  }
  void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* P, float* dS,
                                const float* q, int ld_q, const float* k, const float* v,
                                int ld_kv, const float* dout, int ld_o, const float* lse,
                                const float* D, int B, int H, int Tl, int hs,
                                cpu::BlockPairs pairs) override {
    const int64_t rows = int64_t{B} * Tl;
    check_rows(*this, "attention_block_backward", "q", q, rows, H * hs, ld_q);
    check_rows(*this, "attention_block_backward", "k", k, rows, H * hs, ld_kv);
    check_rows(*this, "attention_block_backward", "v", v, rows, H * hs, ld_kv);
    check_rows(*this, "attention_block_backward", "dout", dout, rows, H * hs, ld_o);
    cpu::attention_block_backward(dq, dk, dv, ld_dkv, P, dS, q, ld_q, k, v, ld_kv, dout, ld_o, lse,
                                  D, B, H, Tl, hs, pairs);
  }
  void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows,
                    int cols) override {
    cpu::copy_columns(dst, ld_dst, src, ld_src, rows, cols);
  }
  void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k, int64_t row_j,
                    int64_t row_t, bool to_slots, int64_t row_bytes) override {
    cpu::permute_rows(dst, src, slots, n, k, row_j, row_t, to_slots, row_bytes);
  }
  void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                            int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                            int batch) override {
    cpu::gemm_strided_batched(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb,
                              stride_b, beta, C, ldc, stride_c, batch);
  }
  void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0) override {
    cpu::causal_softmax_rows(s, rows, Tl, T, g0);
  }
  void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T,
                                    int g0, float scale) override {
    cpu::causal_softmax_rows_backward(dp, P, rows, Tl, T, g0, scale);
  }
  void layernorm_forward(Act y, float* mean, float* rstd, ActIn x, const float* w, const float* b,
                         int N, int C) override {
    const int64_t n = int64_t{N} * C;
    const Fp32Copy xf(x, n, device());
    Fp32Copy yf(y, n, device());
    cpu::layernorm_forward(yf.get(), mean, rstd, xf.get(), w, b, N, C);
  }
  // dx = dres + ∂L/∂x: dres widened into dx's copy (or dx's own floats), then accumulated.
  void layernorm_backward(Act dx, ActIn dres, float* dw, float* db, ActIn dy, ActIn x,
                          const float* w, const float* mean, const float* rstd, int N,
                          int C) override {
    const int64_t n = int64_t{N} * C;
    const Fp32Copy dyf(dy, n, device()), xf(x, n, device());
    Fp32Copy dxf(dx, dres, n, device());
    cpu::layernorm_backward(dxf.get(), dw, db, dyf.get(), xf.get(), w, mean, rstd, N, C);
  }
  void layernorm_backward_weight(float* dw, float* db, ActIn dy, ActIn x, const float* mean,
                                 const float* rstd, int N, int C) override {
    const Fp32Copy dyf(dy, int64_t{N} * C, device()), xf(x, int64_t{N} * C, device());
    cpu::layernorm_backward_weight(dw, db, dyf.get(), xf.get(), mean, rstd, N, C);
  }
  void gelu_forward(Act y, ActIn x, long N) override {
    const Fp32Copy xf(x, N, device());
    Fp32Copy yf(y, N, device());
    cpu::gelu_forward(yf.get(), xf.get(), N);
  }
  void gelu_backward(Act dx, ActIn x, const float* dy, long N) override {
    const Fp32Copy xf(x, N, device());
    Fp32Copy dxf(dx, N, device());
    cpu::gelu_backward(dxf.get(), xf.get(), dy, N);
  }
  // out may alias y (the walk adds in place): one copy then, widened and rounded back.
  void residual_bias_add(Act out, ActIn x, ActIn y, const float* b, long N, int C) override {
    const int64_t n = static_cast<int64_t>(N) * C;
    const Fp32Copy xf(x, n, device());
    if (out.p == y.p) {
      Fp32Copy of(out, n, device(), /*load=*/true);
      cpu::residual_bias_add(of.get(), xf.get(), of.get(), b, N, C);
      return;
    }
    const Fp32Copy yf(y, n, device());
    Fp32Copy of(out, n, device());
    cpu::residual_bias_add(of.get(), xf.get(), yf.get(), b, N, C);
  }
  void residual_bias_backward(float* db, ActIn dy, long N, int C) override {
    const Fp32Copy dyf(dy, static_cast<int64_t>(N) * C, device());
    cpu::residual_bias_backward(db, dyf.get(), N, C);
  }
  void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int v0, int Vr,
                               int N, int C) override {
    cpu::token_embedding_forward(out, tokens, wte, v0, Vr, N, C);
  }
  void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int v0,
                                int Vr, int N, int C) override {
    cpu::token_embedding_backward(dwte, dout, tokens, v0, Vr, N, C);
  }
  void position_embedding_forward(float* x, const float* wpe, int B, int Tl, int t0,
                                  int C) override {
    cpu::position_embedding_forward(x, wpe, B, Tl, t0, C);
  }
  void position_embedding_backward(float* dwpe, const float* dx, int B, int Tl, int t0,
                                   int C) override {
    cpu::position_embedding_backward(dwpe, dx, B, Tl, t0, C);
  }
  void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl,
                                     const int* positions, int C) override {
    cpu::position_embedding_forward_at(x, wpe, B, Tl, positions, C);
  }
  void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                      const int* positions, int C) override {
    cpu::position_embedding_backward_at(dwpe, dx, B, Tl, positions, C);
  }
  void cross_entropy_row_max(float* m, const float* z, int N, int Vr) override {
    cpu::cross_entropy_row_max(m, z, N, Vr);
  }
  void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0, int N, int Vr,
                              const float* m) override {
    cpu::cross_entropy_exp_sums(sums, z, y, v0, N, Vr, m);
  }
  void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y, int v0,
                              int N, int Vr) override {
    cpu::cross_entropy_max_sums(m, sums, z, y, v0, N, Vr);
  }
  double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                            const float* sums, float dloss, bool backward,
                            DType grad_dtype) override {
    return cpu::cross_entropy_loss(z, y, v0, N, Vr, m, sums, dloss, backward, grad_dtype);
  }
  void widen(const void* src, DType src_dtype, float* dst, int64_t n) override {
    cpu::widen(src, src_dtype, dst, n);
  }
  void round_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                cpu::RoundStats* stats) override {
    cpu::round_to(src, dst, dst_dtype, n, stats);
  }
  void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                     cpu::RoundStats* stats) override {
    cpu::accumulate_to(src, dst, dst_dtype, n, stats);
  }
  void adamw_update(float* p, const float* g, float* m, float* v,
                    const std::vector<cpu::DecayRun>& runs, const cpu::AdamWStep& s) override {
    cpu::adamw_update_runs(p, g, m, v, runs, s);
  }
  void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16,
                          DType grad_dtype, float* master, float* m, float* v,
                          const std::vector<cpu::DecayRun>& runs,
                          const cpu::AdamWStep& s) override {
    cpu::span_of(runs);
    const int64_t pb = dtype_size(param_dtype), gb = dtype_size(grad_dtype);
    int64_t e = 0;
    for (const cpu::DecayRun& r : runs) {
      update_mixed(static_cast<char*>(params16) + e * pb, param_dtype,
                   static_cast<const char*>(grads16) + e * gb, grad_dtype, master + e,
                   m + e, v + e, r.end - e, r.weight_decay, s);
      e = r.end;
    }
  }
  int64_t count_nonfinite(const float* x, int64_t n) override {
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) count += std::isfinite(x[i]) ? 0 : 1;
    return count;
  }
  double sum_of_squares(ActIn x, int64_t n) override {
    return cpu::sum_of_squares(x.p, x.dtype, n);
  }
  // ---- 2D / 2.5D tensor parallelism (kernels/cpu/tp_grid.h).
  void add_to(float* y, const float* x, int64_t n) override { cpu::add_to(y, x, n); }
  void bias_add(float* y, const float* b, long N, int C) override { cpu::bias_add(y, b, N, C); }
  void layernorm_partial_sum(float* s, const float* x, long N, int Cl) override {
    cpu::layernorm_partial_sum(s, x, N, Cl);
  }
  void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl,
                            int C) override {
    cpu::layernorm_partial_sq(mean, s, x, N, Cl, C);
  }
  void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                           const float* w, const float* b, const float* mean, const float* s,
                           long N, int Cl, int C) override {
    cpu::layernorm_normalize(y, mean_out, rstd_out, x, w, b, mean, s, N, Cl, C);
  }
  void layernorm_backward_partial(float* s, const float* dy, const float* x, const float* w,
                                  const float* mean, const float* rstd, long N, int Cl) override {
    cpu::layernorm_backward_partial(s, dy, x, w, mean, rstd, N, Cl);
  }
  void layernorm_backward_apply(float* dx, const float* s, const float* dy, const float* x,
                                const float* w, const float* mean, const float* rstd, long N,
                                int Cl, int C) override {
    cpu::layernorm_backward_apply(dx, s, dy, x, w, mean, rstd, N, Cl, C);
  }
  // ---- end of 2D / 2.5D tensor parallelism.
  // ---- rounding statistics (count_rounding): the same rounding into a scratch chunk, counted by
  // kernels/cpu/convert.h itself, so the counts are its round_to/accumulate_to's by construction.
  cpu::RoundStats count_rounding(const float* src, const void* dst, DType dst_dtype, int64_t n,
                                 bool accumulate) override {
    if (dst_dtype != DType::kF32 && dst_dtype != DType::kF16 && dst_dtype != DType::kBF16)
      throw std::invalid_argument(std::string("count_rounding: dtype ") + to_string(dst_dtype) +
                                  " is not f32, f16 or bf16");
    constexpr int64_t kChunk = 4096;
    alignas(16) char scratch[kChunk * sizeof(float)];
    const int64_t b = dtype_size(dst_dtype);
    cpu::RoundStats st;
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t k = std::min(kChunk, n - i0);
      if (accumulate) {
        std::memcpy(scratch, static_cast<const char*>(dst) + i0 * b, k * b);
        cpu::accumulate_to(src + i0, scratch, dst_dtype, k, &st);
      } else {
        cpu::round_to(src + i0, scratch, dst_dtype, k, &st);
      }
    }
    return st;
  }

 private:
  // One run of adamw_update_mixed, chunk by chunk: widen the gradients, update the master copy
  // from them times s.grad_scale (1/S, clipped), round it back.
  static void update_mixed(void* params16, DType param_dtype, const void* grads16,
                           DType grad_dtype, float* master, float* m, float* v,
                           int64_t n, float weight_decay, const cpu::AdamWStep& s) {
    constexpr int64_t kChunk = 4096;
    float g[kChunk];
    const int64_t pb = dtype_size(param_dtype), gb = dtype_size(grad_dtype);
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t k = std::min(kChunk, n - i0);
      cpu::widen(static_cast<const char*>(grads16) + i0 * gb, grad_dtype, g, k);
      for (int64_t i = 0; i < k; ++i) g[i] *= s.grad_scale;
      cpu::adamw_update(master + i0, g, m + i0, v + i0, k, s.lr, s.beta1, s.beta2, s.eps,
                        weight_decay, s.c1, s.c2);
      cpu::round_to(master + i0, static_cast<char*>(params16) + i0 * pb, param_dtype, k);
    }
  }
};

}  // namespace

KernelOps& cpu_kernel_ops() {
  static CpuKernelOps cpu;
  return cpu;
}

}  // namespace llmp
