// CudaKernelOps: the CUDA kernels (this directory) as the kernel table of Device::kCUDA.
//
// kernels/ops/kernel_ops.h is the one door from the model to the math; this file puts the CUDA
// twins behind it, registered when the target is linked (cuda_library sets alwayslink), as
// device_allocator.cc registers the allocator. Every method forwards to the cuda:: function of the
// same name and signature, except:
//   - the FLOP counter (kernels/cpu/flops.h): counted here, host-side, with the CPU kernels'
//     formulas (the model FLOPs of each product: attention's P·V on its lower triangle, though
//     cuBLAS multiplies the whole square), so that measured FLOPs (recomputation's report) mean
//     the same on both devices;
//   - mixed precision's RoundStats: not counted by round_to / accumulate_to on the GPU, which
//     throw naming the call when given one rather than return counts they did not take; they are
//     counted apart by count_rounding (round_stats.h), which kernels/ops round_counted calls
//     first when a RoundStats is wanted (the mixed_precision stage's report).
// unavailable_reason() asks the driver (cuda_device_available): the table is linked into
// binaries that also run on machines without a GPU.
#include <stdexcept>
#include <string>

#include "kernels/cpu/flops.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_block.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/permute_rows.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/ring_self_block.h"
#include "kernels/cuda/round_stats.h"
#include "kernels/cuda/tp_grid.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace cuda {
namespace {

int64_t attention_flops(int B, int T, int C, int H, int64_t squares, int64_t triangles) {
  const int64_t hs = C / H;
  return static_cast<int64_t>(B) * H *
         (squares * 2 * int64_t{T} * T * hs + triangles * int64_t{T} * (T + 1) * hs);
}

class CudaKernelOps final : public KernelOps {
 public:
  Device device() const override { return Device::kCUDA; }
  std::string unavailable_reason() const override {
    std::string why;
    return cuda_device_available(&why) ? "" : "no CUDA device (" + why + ")";
  }
  int device_count() const override {
    int n = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n));
    return n;
  }
  void set_device(int index) override { CUDA_CHECK(cudaSetDevice(index)); }
  void set_tf32(bool on) override { cuda::set_tf32(on); }
  int64_t logits_chunk_elements() const override { return int64_t{1} << 28; }  // kernel_ops.h

  // The matmul_* entries under a 16-bit declaration (kernel_ops.h MatmulOperands): 16-bit copies
  // of the operands on 16-bit tensor cores (context.h SixteenBitOperands), exact for them.
  cudaDataType_t sixteen_bit_type() const {
    switch (matmul_operands()) {
      case DType::kBF16: return CUDA_R_16BF;
      case DType::kF16: return CUDA_R_16F;
      default: return CUDA_R_32F;
    }
  }
  // The linear layers' activations as stored (kernel_ops.h Act): an f32 one, or a 16-bit one of
  // the declared dtype, is the product's operand or result as it is (matmul.h's stored
  // overloads); a 16-bit one of any other dtype (none declared: fp32 weights) goes through an
  // fp32 copy (Fp32Copy).
  bool as_stored_ok(ActIn a) const {
    return a.dtype == DType::kF32 || a.dtype == matmul_operands();
  }
  void matmul_forward(Act y, ActIn x, const float* W, const float* bias, int N, int C,
                      int OC) override {
    cpu::count_flops(2L * N * C * OC);
    const cuda::SixteenBitOperands operands(sixteen_bit_type());
    if (as_stored_ok(y) && as_stored_ok(x))
      return cuda::matmul_forward(y.p, y.dtype, x.p, x.dtype, W, bias, N, C, OC);
    const Fp32Copy xf(x, int64_t{N} * C, device());
    Fp32Copy yf(y, int64_t{N} * OC, device());
    cuda::matmul_forward(yf.get(), xf.get(), W, bias, N, C, OC);
  }
  void matmul_backward_input(Act dx, ActIn dy, const float* W, int N, int C, int OC) override {
    cpu::count_flops(2L * N * C * OC);
    const cuda::SixteenBitOperands operands(sixteen_bit_type());
    if (as_stored_ok(dx) && as_stored_ok(dy))
      return cuda::matmul_backward_input(dx.p, dx.dtype, dy.p, dy.dtype, W, N, C, OC);
    const Fp32Copy dyf(dy, int64_t{N} * OC, device());
    Fp32Copy dxf(dx, int64_t{N} * C, device());
    cuda::matmul_backward_input(dxf.get(), dyf.get(), W, N, C, OC);
  }
  void matmul_backward_weight(float* dW, float* db, ActIn dy, ActIn x, int N, int C,
                              int OC) override {
    cpu::count_flops(2L * N * C * OC);
    const cuda::SixteenBitOperands operands(sixteen_bit_type());
    if (as_stored_ok(dy) && as_stored_ok(x))
      return cuda::matmul_backward_weight(dW, db, dy.p, dy.dtype, x.p, x.dtype, N, C, OC);
    const Fp32Copy dyf(dy, int64_t{N} * OC, device()), xf(x, int64_t{N} * C, device());
    cuda::matmul_backward_weight(dW, db, dyf.get(), xf.get(), N, C, OC);
  }
  void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC) override {
    cpu::count_flops(2L * N * C * OC);
    const cuda::SixteenBitOperands operands(sixteen_bit_type());
    cuda::matmul_nt_forward(y, x, Wt, N, C, OC);
  }
  void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                          int N, int C, int OC) override {
    cpu::count_flops((dx ? 4L : 2L) * N * C * OC);
    const cuda::SixteenBitOperands operands(sixteen_bit_type());
    cuda::matmul_nt_backward(dx, dWt, dy, x, Wt, N, C, OC);
  }
  // Attention's activations (out, qkv, dout, dqkv) as stored when P is stored in their 16-bit
  // dtype and rounded to it (attention.h attention_takes_stored: the bf16 walk); otherwise each
  // 16-bit one goes through an fp32 copy (Fp32Copy; an input copy is noted as its widening, so
  // the products still read the 16 bits).
  void attention_forward(Act out, Act att, ActIn qkv, int B, int T, int C, int H,
                         DType probs_dtype) override {
    cpu::count_flops(attention_flops(B, T, C, H, 1, 1));  // Q Kᵀ square, P V triangle
    const bool declared = matmul_operands() != DType::kF32;
    if (cuda::attention_takes_stored(att.dtype, probs_dtype, {out.dtype, qkv.dtype}))
      return cuda::attention_forward(out.p, out.dtype, att.p, att.dtype, qkv.p, qkv.dtype, B, T,
                                     C, H, declared, probs_dtype);
    const Fp32Copy q(qkv, int64_t{B} * T * 3 * C, device());
    Fp32Copy y(out, int64_t{B} * T * C, device());
    cuda::attention_forward(y.get(), att.p, att.dtype, q.get(), B, T, C, H, declared, probs_dtype);
  }
  void attention_probs(Act att, ActIn qkv, int B, int T, int C, int H,
                       DType probs_dtype) override {
    cpu::count_flops(attention_flops(B, T, C, H, 1, 0));  // Q Kᵀ only
    const bool declared = matmul_operands() != DType::kF32;
    if (cuda::attention_takes_stored(att.dtype, probs_dtype, {qkv.dtype}))
      return cuda::attention_probs(att.p, att.dtype, qkv.p, qkv.dtype, B, T, C, H, declared,
                                   probs_dtype);
    const Fp32Copy q(qkv, int64_t{B} * T * 3 * C, device());
    cuda::attention_probs(att.p, att.dtype, q.get(), B, T, C, H, declared, probs_dtype);
  }
  void attention_backward(Act dqkv, ActIn dout, ActIn qkv, ActIn att, float* scratch, int B,
                          int T, int C, int H, DType probs_dtype) override {
    cpu::count_flops(attention_flops(B, T, C, H, 1, 3));  // dY Vᵀ square; three triangles
    const bool declared = matmul_operands() != DType::kF32;
    if (cuda::attention_takes_stored(att.dtype, probs_dtype, {dqkv.dtype, dout.dtype, qkv.dtype}))
      return cuda::attention_backward(dqkv.p, dqkv.dtype, dout.p, dout.dtype, qkv.p, qkv.dtype,
                                      att.p, att.dtype, scratch, B, T, C, H, declared,
                                      probs_dtype);
    const Fp32Copy dy(dout, int64_t{B} * T * C, device()), q(qkv, int64_t{B} * T * 3 * C, device());
    Fp32Copy dq(dqkv, int64_t{B} * T * 3 * C, device());
    cuda::attention_backward(dq.get(), dy.get(), q.get(), att.p, att.dtype, scratch, B, T, C, H,
                             declared, probs_dtype);
  }
  void attention_block_forward(float* o, int ld_o, float* m, float* l, float* scores,
                               const float* q, int ld_q, const float* k, const float* v, int ld_kv,
                               int B, int H, int Tl, int hs, cpu::BlockPairs pairs) override {
    cpu::count_flops(cpu::attention_block_flops(pairs, B, H, Tl, hs, 2));  // S, P~ V per pair
    const cuda::SixteenBitOperands operands(sixteen_bit_type());  // bf16: attention_block_tc.h
    cuda::attention_block_forward(o, ld_o, m, l, scores, q, ld_q, k, v, ld_kv, B, H, Tl, hs,
                                  pairs);
  }
  void attention_block_finalize(float* o, int ld_o, float* lse, const float* m, const float* l,
                                int B, int H, int Tl, int hs) override {
    cuda::attention_block_finalize(o, ld_o, lse, m, l, B, H, Tl, hs);
  }
  void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o, int B,
                              int H, int Tl, int hs) override {
    cuda::attention_block_rowdot(D, dout, out, ld_o, B, H, Tl, hs);
  }
  void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* P, float* dS,
                                const float* q, int ld_q, const float* k, const float* v,
                                int ld_kv, const float* dout, int ld_o, const float* lse,
                                const float* D, int B, int H, int Tl, int hs,
                                cpu::BlockPairs pairs) override {
    cpu::count_flops(cpu::attention_block_flops(pairs, B, H, Tl, hs, 5));  // S, dP, dV, dQ, dK
    const cuda::SixteenBitOperands operands(sixteen_bit_type());
    cuda::attention_block_backward(dq, dk, dv, ld_dkv, P, dS, q, ld_q, k, v, ld_kv, dout, ld_o,
                                   lse, D, B, H, Tl, hs, pairs);
  }
  void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows,
                    int cols) override {
    cuda::copy_columns(dst, ld_dst, src, ld_src, rows, cols);
  }
  void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k, int64_t row_j,
                    int64_t row_t, bool to_slots, int64_t row_bytes) override {
    cuda::permute_rows(dst, src, slots, n, k, row_j, row_t, to_slots, row_bytes);
  }
  void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                            int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                            int batch) override {
    if (M > 0 && N > 0 && batch > 0) cpu::count_flops(2L * M * N * K * batch);  // as the CPU's
    cuda::gemm_strided_batched(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb,
                               stride_b, beta, C, ldc, stride_c, batch);
  }
  void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0) override {
    cuda::causal_softmax_rows(s, rows, Tl, T, g0);
  }
  void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T,
                                    int g0, float scale) override {
    cuda::causal_softmax_rows_backward(dp, P, rows, Tl, T, g0, scale);
  }
  // The forwards of 16-bit activations load and store the 16 bits in the kernels when every
  // activation of the call shares one dtype (the model's walk); mixed ones go through fp32
  // copies (Fp32Copy).
  void layernorm_forward(Act y, float* mean, float* rstd, ActIn x, const float* w, const float* b,
                         int N, int C) override {
    if (y.dtype == x.dtype)
      return cuda::layernorm_forward(y.p, mean, rstd, x.p, w, b, N, C, x.dtype);
    const Fp32Copy xf(x, int64_t{N} * C, device());
    Fp32Copy yf(y, int64_t{N} * C, device());
    cuda::layernorm_forward(yf.get(), mean, rstd, xf.get(), w, b, N, C);
  }
  // dx and dres in one dtype, f32 or dy's and x's: the kernel reads and writes them as stored;
  // otherwise through fp32 copies (dres widened into dx's).
  void layernorm_backward(Act dx, ActIn dres, float* dw, float* db, ActIn dy, ActIn x,
                          const float* w, const float* mean, const float* rstd, int N,
                          int C) override {
    if (dy.dtype == x.dtype && dres.dtype == dx.dtype &&
        (dx.dtype == DType::kF32 || dx.dtype == x.dtype))
      return cuda::layernorm_backward(dx.p, dw, db, dy.p, x.p, w, mean, rstd, N, C, x.dtype,
                                      dx.dtype, dres.p);
    const int64_t n = int64_t{N} * C;
    const Fp32Copy dyf(dy, n, device()), xf(x, n, device());
    Fp32Copy dxf(dx, dres, n, device());
    cuda::layernorm_backward(dxf.get(), dw, db, dyf.get(), xf.get(), w, mean, rstd, N, C);
  }
  void layernorm_backward_weight(float* dw, float* db, ActIn dy, ActIn x, const float* mean,
                                 const float* rstd, int N, int C) override {
    if (dy.dtype == x.dtype)
      return cuda::layernorm_backward_weight(dw, db, dy.p, x.p, mean, rstd, N, C, x.dtype);
    const Fp32Copy dyf(dy, int64_t{N} * C, device()), xf(x, int64_t{N} * C, device());
    cuda::layernorm_backward_weight(dw, db, dyf.get(), xf.get(), mean, rstd, N, C);
  }
  void gelu_forward(Act y, ActIn x, long N) override {
    if (y.dtype == x.dtype) return cuda::gelu_forward(y.p, x.p, N, x.dtype);
    const Fp32Copy xf(x, N, device());
    Fp32Copy yf(y, N, device());
    cuda::gelu_forward(yf.get(), xf.get(), N);
  }
  void gelu_backward(Act dx, ActIn x, const float* dy, long N) override {
    if (dx.dtype == DType::kF32 || dx.dtype == x.dtype)
      return cuda::gelu_backward(dx.p, x.p, dy, N, x.dtype, dx.dtype);
    const Fp32Copy xf(x, N, device());
    Fp32Copy dxf(dx, N, device());
    cuda::gelu_backward(dxf.get(), xf.get(), dy, N);
  }
  void residual_bias_add(Act out, ActIn x, ActIn y, const float* b, long N, int C) override {
    if (out.dtype == x.dtype && out.dtype == y.dtype)
      return cuda::residual_bias_add(out.p, x.p, y.p, b, N, C, out.dtype);
    const int64_t n = static_cast<int64_t>(N) * C;
    const Fp32Copy xf(x, n, device()), yf(y, n, device());
    Fp32Copy of(out, n, device());
    cuda::residual_bias_add(of.get(), xf.get(), yf.get(), b, N, C);
  }
  void residual_bias_backward(float* db, ActIn dy, long N, int C) override {
    cuda::residual_bias_backward(db, dy.p, N, C, dy.dtype);
  }
  void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int v0, int Vr,
                               int N, int C) override {
    cuda::token_embedding_forward(out, tokens, wte, v0, Vr, N, C);
  }
  void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int v0,
                                int Vr, int N, int C) override {
    cuda::token_embedding_backward(dwte, dout, tokens, v0, Vr, N, C);
  }
  void position_embedding_forward(float* x, const float* wpe, int B, int Tl, int t0,
                                  int C) override {
    cuda::position_embedding_forward(x, wpe, B, Tl, t0, C);
  }
  void position_embedding_backward(float* dwpe, const float* dx, int B, int Tl, int t0,
                                   int C) override {
    cuda::position_embedding_backward(dwpe, dx, B, Tl, t0, C);
  }
  void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl,
                                     const int* positions, int C) override {
    cuda::position_embedding_forward_at(x, wpe, B, Tl, positions, C);
  }
  void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                      const int* positions, int C) override {
    cuda::position_embedding_backward_at(dwpe, dx, B, Tl, positions, C);
  }
  void cross_entropy_row_max(float* m, const float* z, int N, int Vr) override {
    cuda::cross_entropy_row_max(m, z, N, Vr);
  }
  void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0, int N, int Vr,
                              const float* m) override {
    cuda::cross_entropy_exp_sums(sums, z, y, v0, N, Vr, m);
  }
  void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y, int v0,
                              int N, int Vr) override {
    cuda::cross_entropy_max_sums(m, sums, z, y, v0, N, Vr);
  }
  double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                            const float* sums, float dloss, bool backward,
                            DType grad_dtype) override {
    return cuda::cross_entropy_loss(z, y, v0, N, Vr, m, sums, dloss, backward, grad_dtype);
  }
  void widen(const void* src, DType src_dtype, float* dst, int64_t n) override {
    cuda::widen(src, src_dtype, dst, n);
  }
  void note_source(const float* f32, const void* src, DType dtype, int64_t n) override {
    cuda::sixteen_bit_sources().note(f32, src, dtype, n);
  }
  void forget_source(const float* f32) override { cuda::sixteen_bit_sources().forget(f32); }
  void round_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                cpu::RoundStats* stats) override {
    if (stats)
      throw std::invalid_argument("round_to on cuda: rounding statistics are not counted here "
                                  "(kernels/ops round_counted counts them by count_rounding)");
    cuda::round_to(src, dst, dst_dtype, n);
  }
  void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                     cpu::RoundStats* stats) override {
    if (stats)
      throw std::invalid_argument("accumulate_to on cuda: rounding statistics are not counted "
                                  "here (kernels/ops round_counted counts them by count_rounding)");
    cuda::accumulate_to(src, dst, dst_dtype, n);
  }
  void adamw_update(float* p, const float* g, float* m, float* v,
                    const std::vector<cpu::DecayRun>& runs, const cpu::AdamWStep& s) override {
    cuda::adamw_update(p, g, m, v, runs, s);
  }
  void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16,
                          DType grad_dtype, float* master, float* m, float* v,
                          const std::vector<cpu::DecayRun>& runs,
                          const cpu::AdamWStep& s) override {
    cuda::adamw_update_mixed(params16, param_dtype, grads16, grad_dtype, master, m, v, runs, s);
  }
  double sum_of_squares(ActIn x, int64_t n) override {
    return cuda::sum_of_squares(x.p, x.dtype, n);
  }
  int64_t count_nonfinite(const float* x, int64_t n) override {
    return cuda::count_nonfinite(x, n);
  }
  // ---- 2D / 2.5D tensor parallelism (tp_grid.h).
  void add_to(float* y, const float* x, int64_t n) override { cuda::add_to(y, x, n); }
  void bias_add(float* y, const float* b, long N, int C) override { cuda::bias_add(y, b, N, C); }
  void layernorm_partial_sum(float* s, const float* x, long N, int Cl) override {
    cuda::layernorm_partial_sum(s, x, N, Cl);
  }
  void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl,
                            int C) override {
    cuda::layernorm_partial_sq(mean, s, x, N, Cl, C);
  }
  void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                           const float* w, const float* b, const float* mean, const float* s,
                           long N, int Cl, int C) override {
    cuda::layernorm_normalize(y, mean_out, rstd_out, x, w, b, mean, s, N, Cl, C);
  }
  void layernorm_backward_partial(float* s, const float* dy, const float* x, const float* w,
                                  const float* mean, const float* rstd, long N, int Cl) override {
    cuda::layernorm_backward_partial(s, dy, x, w, mean, rstd, N, Cl);
  }
  void layernorm_backward_apply(float* dx, const float* s, const float* dy, const float* x,
                                const float* w, const float* mean, const float* rstd, long N,
                                int Cl, int C) override {
    cuda::layernorm_backward_apply(dx, s, dy, x, w, mean, rstd, N, Cl, C);
  }
  // ---- end of 2D / 2.5D tensor parallelism.
  // ---- rounding statistics: counted apart from the rounding (round_stats.h), which
  // kernels/ops round_counted runs before round_to / accumulate_to on this device.
  cpu::RoundStats count_rounding(const float* src, const void* dst, DType dst_dtype, int64_t n,
                                 bool accumulate) override {
    return cuda::count_rounding(src, dst, dst_dtype, n, accumulate);
  }
};

CudaKernelOps& the_table() {
  static CudaKernelOps* t = new CudaKernelOps;  // never destroyed, as the allocator
  return *t;
}

// Registers the table when this object file is linked in (cuda_library: alwayslink).
[[maybe_unused]] const bool registered = (register_kernel_ops(Device::kCUDA, &the_table()), true);

}  // namespace
}  // namespace cuda
}  // namespace llmp
