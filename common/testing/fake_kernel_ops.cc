// FakeKernelOps: kernels/cpu as the kernels of a FakeDevice. See the header.
#include "common/testing/fake_kernel_ops.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "kernels/ops/sixteen_bit_sources.h"

namespace llmp {
namespace testing {
namespace {

// Each method opens the device memory (FakeDevice::Access) and runs the CPU kernel of that name.
// Before that, every pointer argument (but RoundStats, a host result) must be nullptr or device
// memory: a kernel handed a host buffer is the bug a GPU port makes by allocating an activation
// without its device; a real GPU faults on it, so this table stops the process naming the kernel.
class Table final : public KernelOps {
 public:
  Table(FakeDevice& dev, std::map<std::string, int64_t>& calls, SixteenBitSources& sources)
      : dev_(dev), cpu_(kernel_ops(Device::kCPU)), calls_(calls), sources_(sources) {}
  Device device() const override { return Device::kCUDA; }
  // The declaration reaches the CPU table that runs the products, which checks it.
  void set_matmul_operands(DType d) override {
    KernelOps::set_matmul_operands(d);
    cpu_.set_matmul_operands(d);
  }
  // The linear layers' activations as stored (Act) go to the CPU table as they are, like the
  // ones below; each is counted by dtype ("linear act bf16"), and an fp32 one inside a noted
  // widening is checked against its source.
  void matmul_forward(Act y, ActIn x, const float* W, const float* bias, int N, int C,
                      int OC) override {
    act("linear", "matmul_forward", "y", y);
    act("linear", "matmul_forward", "x", x, int64_t{N} * C);
    check_source("matmul_forward", "W", W, int64_t{C} * OC);
    run("matmul_forward", {y.p, x.p, W, bias},
        [&] { cpu_.matmul_forward(y, x, W, bias, N, C, OC); });
  }
  void matmul_backward_input(Act dx, ActIn dy, const float* W, int N, int C, int OC) override {
    act("linear", "matmul_backward_input", "dx", dx);
    act("linear", "matmul_backward_input", "dy", dy, int64_t{N} * OC);
    check_source("matmul_backward_input", "W", W, int64_t{C} * OC);
    run("matmul_backward_input", {dx.p, dy.p, W},
        [&] { cpu_.matmul_backward_input(dx, dy, W, N, C, OC); });
  }
  void matmul_backward_weight(float* dW, float* db, ActIn dy, ActIn x, int N, int C,
                              int OC) override {
    act("linear", "matmul_backward_weight", "dy", dy, int64_t{N} * OC);
    act("linear", "matmul_backward_weight", "x", x, int64_t{N} * C);
    run("matmul_backward_weight", {dW, db, dy.p, x.p},
        [&] { cpu_.matmul_backward_weight(dW, db, dy, x, N, C, OC); });
  }
  void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC) override {
    on_device("matmul_nt_forward", {y, x, Wt});
    check_source("matmul_nt_forward", "x", x, int64_t{N} * C);
    check_source("matmul_nt_forward", "Wt", Wt, int64_t{OC} * C);
    FakeDevice::Access a(dev_);
    cpu_.matmul_nt_forward(y, x, Wt, N, C, OC);
  }
  void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                          int N, int C, int OC) override {
    on_device("matmul_nt_backward", {dx, dWt, dy, x, Wt});
    check_source("matmul_nt_backward", "dy", dy, int64_t{N} * OC);
    check_source("matmul_nt_backward", "x", x, int64_t{N} * C);
    check_source("matmul_nt_backward", "Wt", Wt, int64_t{OC} * C);
    FakeDevice::Access a(dev_);
    cpu_.matmul_nt_backward(dx, dWt, dy, x, Wt, N, C, OC);
  }
  // Activations as stored (Act) go to the CPU table as they are: its fp32 copies of 16-bit ones
  // (Fp32Copy) are then host memory, so the device holds no fp32 copy of them, as on a GPU whose
  // kernels load and store the 16 bits. Counted as "attention act <dtype>" (P not included); an
  // fp32 qkv or dout inside a noted widening is checked against its source.
  void attention_forward(Act out, Act att, ActIn qkv, int B, int T, int C, int H,
                         DType probs_dtype) override {
    count("attention_forward", probs_dtype);
    act("attention", "attention_forward", "out", out);
    act("attention", "attention_forward", "qkv", qkv, int64_t{B} * T * 3 * C);
    run("attention_forward", {out.p, att.p, qkv.p},
        [&] { cpu_.attention_forward(out, att, qkv, B, T, C, H, probs_dtype); });
  }
  void attention_probs(Act att, ActIn qkv, int B, int T, int C, int H,
                       DType probs_dtype) override {
    count("attention_probs", probs_dtype);
    act("attention", "attention_probs", "qkv", qkv, int64_t{B} * T * 3 * C);
    run("attention_probs", {att.p, qkv.p},
        [&] { cpu_.attention_probs(att, qkv, B, T, C, H, probs_dtype); });
  }
  void attention_backward(Act dqkv, ActIn dout, ActIn qkv, ActIn att, float* scratch, int B,
                          int T, int C, int H, DType probs_dtype) override {
    count("attention_backward", probs_dtype);
    act("attention", "attention_backward", "dqkv", dqkv);
    act("attention", "attention_backward", "dout", dout, int64_t{B} * T * C);
    act("attention", "attention_backward", "qkv", qkv, int64_t{B} * T * 3 * C);
    run("attention_backward", {dqkv.p, dout.p, qkv.p, att.p, scratch}, [&] {
      cpu_.attention_backward(dqkv, dout, qkv, att, scratch, B, T, C, H, probs_dtype);
    });
  }
  void attention_block_forward(float* o, int ld_o, float* m, float* l, float* scores,
                               const float* q, int ld_q, const float* k, const float* v, int ld_kv,
                               int B, int H, int Tl, int hs, cpu::BlockPairs pairs) override {
    on_device("attention_block_forward", {o, m, l, scores, q, k, v});
    FakeDevice::Access a(dev_);
    cpu_.attention_block_forward(o, ld_o, m, l, scores, q, ld_q, k, v, ld_kv, B, H, Tl, hs, pairs);
  }
  void attention_block_finalize(float* o, int ld_o, float* lse, const float* m, const float* l,
                                int B, int H, int Tl, int hs) override {
    run("attention_block_finalize", {o, lse, m, l},
        [&] { cpu_.attention_block_finalize(o, ld_o, lse, m, l, B, H, Tl, hs); });
  }
  void attention_block_rowdot(float* D, const float* dout, const float* out, int ld_o, int B,
                              int H, int Tl, int hs) override {
    run("attention_block_rowdot", {D, dout, out},
        [&] { cpu_.attention_block_rowdot(D, dout, out, ld_o, B, H, Tl, hs); });
  }
  void attention_block_backward(float* dq, float* dk, float* dv, int ld_dkv, float* P, float* dS,
                                const float* q, int ld_q, const float* k, const float* v,
                                int ld_kv, const float* dout, int ld_o, const float* lse,
                                const float* D, int B, int H, int Tl, int hs,
                                cpu::BlockPairs pairs) override {
    on_device("attention_block_backward", {dq, dk, dv, P, dS, q, k, v, dout, lse, D});
    FakeDevice::Access a(dev_);
    cpu_.attention_block_backward(dq, dk, dv, ld_dkv, P, dS, q, ld_q, k, v, ld_kv, dout, ld_o, lse,
                                  D, B, H, Tl, hs, pairs);
  }
  void copy_columns(float* dst, int ld_dst, const float* src, int ld_src, int64_t rows,
                    int cols) override {
    run("copy_columns", {dst, src},
        [&] { cpu_.copy_columns(dst, ld_dst, src, ld_src, rows, cols); });
  }
  void permute_rows(void* dst, const void* src, const int32_t* slots, int n, int k, int64_t row_j,
                    int64_t row_t, bool to_slots, int64_t row_bytes) override {
    run("permute_rows", {dst, src, slots},
        [&] { cpu_.permute_rows(dst, src, slots, n, k, row_j, row_t, to_slots, row_bytes); });
  }
  void gemm_strided_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                            int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                            int batch) override {
    on_device("gemm_strided_batched", {A, B, C});
    FakeDevice::Access a(dev_);
    cpu_.gemm_strided_batched(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb,
                              stride_b, beta, C, ldc, stride_c, batch);
  }
  void causal_softmax_rows(float* s, int64_t rows, int Tl, int T, int g0) override {
    run("causal_softmax_rows", {s}, [&] { cpu_.causal_softmax_rows(s, rows, Tl, T, g0); });
  }
  void causal_softmax_rows_backward(float* dp, const float* P, int64_t rows, int Tl, int T,
                                    int g0, float scale) override {
    run("causal_softmax_rows_backward", {dp, P},
        [&] { cpu_.causal_softmax_rows_backward(dp, P, rows, Tl, T, g0, scale); });
  }
  void layernorm_forward(Act y, float* mean, float* rstd, ActIn x, const float* w, const float* b,
                         int N, int C) override {
    run("layernorm_forward", {y.p, mean, rstd, x.p, w, b},
        [&] { cpu_.layernorm_forward(y, mean, rstd, x, w, b, N, C); });
  }
  void layernorm_backward(Act dx, ActIn dres, float* dw, float* db, ActIn dy, ActIn x,
                          const float* w, const float* mean, const float* rstd, int N,
                          int C) override {
    act("layernorm", "layernorm_backward", "dx", dx);
    run("layernorm_backward", {dx.p, dres.p, dw, db, dy.p, x.p, w, mean, rstd},
        [&] { cpu_.layernorm_backward(dx, dres, dw, db, dy, x, w, mean, rstd, N, C); });
  }
  void layernorm_backward_weight(float* dw, float* db, ActIn dy, ActIn x, const float* mean,
                                 const float* rstd, int N, int C) override {
    run("layernorm_backward_weight", {dw, db, dy.p, x.p, mean, rstd},
        [&] { cpu_.layernorm_backward_weight(dw, db, dy, x, mean, rstd, N, C); });
  }
  void gelu_forward(Act y, ActIn x, long N) override {
    run("gelu_forward", {y.p, x.p}, [&] { cpu_.gelu_forward(y, x, N); });
  }
  void gelu_backward(Act dx, ActIn x, const float* dy, long N) override {
    act("gelu", "gelu_backward", "dx", dx);
    run("gelu_backward", {dx.p, x.p, dy}, [&] { cpu_.gelu_backward(dx, x, dy, N); });
  }
  void residual_bias_add(Act out, ActIn x, ActIn y, const float* b, long N, int C) override {
    run("residual_bias_add", {out.p, x.p, y.p, b},
        [&] { cpu_.residual_bias_add(out, x, y, b, N, C); });
  }
  void residual_bias_backward(float* db, ActIn dy, long N, int C) override {
    run("residual_bias_backward", {db, dy.p}, [&] { cpu_.residual_bias_backward(db, dy, N, C); });
  }
  void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int v0, int Vr,
                               int N, int C) override {
    run("token_embedding_forward", {out, tokens, wte},
        [&] { cpu_.token_embedding_forward(out, tokens, wte, v0, Vr, N, C); });
  }
  void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int v0,
                                int Vr, int N, int C) override {
    run("token_embedding_backward", {dwte, dout, tokens},
        [&] { cpu_.token_embedding_backward(dwte, dout, tokens, v0, Vr, N, C); });
  }
  void position_embedding_forward(float* x, const float* wpe, int B, int Tl, int t0,
                                  int C) override {
    run("position_embedding_forward", {x, wpe},
        [&] { cpu_.position_embedding_forward(x, wpe, B, Tl, t0, C); });
  }
  void position_embedding_backward(float* dwpe, const float* dx, int B, int Tl, int t0,
                                   int C) override {
    run("position_embedding_backward", {dwpe, dx},
        [&] { cpu_.position_embedding_backward(dwpe, dx, B, Tl, t0, C); });
  }
  void position_embedding_forward_at(float* x, const float* wpe, int B, int Tl,
                                     const int* positions, int C) override {
    run("position_embedding_forward_at", {x, wpe, positions},
        [&] { cpu_.position_embedding_forward_at(x, wpe, B, Tl, positions, C); });
  }
  void position_embedding_backward_at(float* dwpe, const float* dx, int B, int Tl,
                                      const int* positions, int C) override {
    run("position_embedding_backward_at", {dwpe, dx, positions},
        [&] { cpu_.position_embedding_backward_at(dwpe, dx, B, Tl, positions, C); });
  }
  void cross_entropy_row_max(float* m, const float* z, int N, int Vr) override {
    run("cross_entropy_row_max", {m, z}, [&] { cpu_.cross_entropy_row_max(m, z, N, Vr); });
  }
  void cross_entropy_exp_sums(float* sums, const float* z, const int32_t* y, int v0, int N, int Vr,
                              const float* m) override {
    run("cross_entropy_exp_sums", {sums, z, y, m},
        [&] { cpu_.cross_entropy_exp_sums(sums, z, y, v0, N, Vr, m); });
  }
  void cross_entropy_max_sums(float* m, float* sums, const float* z, const int32_t* y, int v0,
                              int N, int Vr) override {
    run("cross_entropy_max_sums", {m, sums, z, y},
        [&] { cpu_.cross_entropy_max_sums(m, sums, z, y, v0, N, Vr); });
  }
  double cross_entropy_loss(float* z, const int32_t* y, int v0, int N, int Vr, const float* m,
                            const float* sums, float dloss, bool backward,
                            DType grad_dtype) override {
    count("cross_entropy_loss", grad_dtype);
    return run("cross_entropy_loss", {z, y, m, sums}, [&] {
      return cpu_.cross_entropy_loss(z, y, v0, N, Vr, m, sums, dloss, backward, grad_dtype);
    });
  }
  void widen(const void* src, DType src_dtype, float* dst, int64_t n) override {
    run("widen", {src, dst}, [&] { cpu_.widen(src, src_dtype, dst, n); });
  }
  void round_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                cpu::RoundStats* stats) override {
    run("round_to", {src, dst}, [&] { cpu_.round_to(src, dst, dst_dtype, n, stats); });
  }
  void accumulate_to(const float* src, void* dst, DType dst_dtype, int64_t n,
                     cpu::RoundStats* stats) override {
    run("accumulate_to", {src, dst}, [&] { cpu_.accumulate_to(src, dst, dst_dtype, n, stats); });
  }
  void adamw_update(float* p, const float* g, float* m, float* v,
                    const std::vector<cpu::DecayRun>& runs, const cpu::AdamWStep& s) override {
    run("adamw_update", {p, g, m, v}, [&] { cpu_.adamw_update(p, g, m, v, runs, s); });
  }
  void adamw_update_mixed(void* params16, DType param_dtype, const void* grads16,
                          DType grad_dtype, float* master, float* m, float* v,
                          const std::vector<cpu::DecayRun>& runs,
                          const cpu::AdamWStep& s) override {
    on_device("adamw_update_mixed", {params16, grads16, master, m, v});
    FakeDevice::Access a(dev_);
    cpu_.adamw_update_mixed(params16, param_dtype, grads16, grad_dtype, master, m, v, runs, s);
  }
  int64_t count_nonfinite(const float* x, int64_t n) override {
    return run("count_nonfinite", {x}, [&] { return cpu_.count_nonfinite(x, n); });
  }
  double sum_of_squares(ActIn x, int64_t n) override {
    return run("sum_of_squares", {x.p}, [&] { return cpu_.sum_of_squares(x, n); });
  }
  // ---- rounding statistics (kernel_ops.h count_rounding): read-only on both buffers.
  cpu::RoundStats count_rounding(const float* src, const void* dst, DType dst_dtype, int64_t n,
                                 bool accumulate) override {
    return run("count_rounding", {src, dst},
               [&] { return cpu_.count_rounding(src, dst, dst_dtype, n, accumulate); });
  }

  // ---- 2D / 2.5D tensor parallelism (kernels/cpu/tp_grid.h).
  void add_to(float* y, const float* x, int64_t n) override {
    run("add_to", {y, x}, [&] { cpu_.add_to(y, x, n); });
  }
  void bias_add(float* y, const float* b, long N, int C) override {
    run("bias_add", {y, b}, [&] { cpu_.bias_add(y, b, N, C); });
  }
  void layernorm_partial_sum(float* s, const float* x, long N, int Cl) override {
    run("layernorm_partial_sum", {s, x}, [&] { cpu_.layernorm_partial_sum(s, x, N, Cl); });
  }
  void layernorm_partial_sq(float* mean, float* s, const float* x, long N, int Cl,
                            int C) override {
    run("layernorm_partial_sq", {mean, s, x},
        [&] { cpu_.layernorm_partial_sq(mean, s, x, N, Cl, C); });
  }
  void layernorm_normalize(float* y, float* mean_out, float* rstd_out, const float* x,
                           const float* w, const float* b, const float* mean, const float* s,
                           long N, int Cl, int C) override {
    run("layernorm_normalize", {y, mean_out, rstd_out, x, w, b, mean, s},
        [&] { cpu_.layernorm_normalize(y, mean_out, rstd_out, x, w, b, mean, s, N, Cl, C); });
  }
  void layernorm_backward_partial(float* s, const float* dy, const float* x, const float* w,
                                  const float* mean, const float* rstd, long N, int Cl) override {
    run("layernorm_backward_partial", {s, dy, x, w, mean, rstd},
        [&] { cpu_.layernorm_backward_partial(s, dy, x, w, mean, rstd, N, Cl); });
  }
  void layernorm_backward_apply(float* dx, const float* s, const float* dy, const float* x,
                                const float* w, const float* mean, const float* rstd, long N,
                                int Cl, int C) override {
    run("layernorm_backward_apply", {dx, s, dy, x, w, mean, rstd},
        [&] { cpu_.layernorm_backward_apply(dx, s, dy, x, w, mean, rstd, N, Cl, C); });
  }
  // ---- end of 2D / 2.5D tensor parallelism.

  void note_source(const float* f32, const void* src, DType dtype, int64_t n) override {
    on_device("note_source", {f32, src});
    sources_.note(f32, src, dtype, n);
    count("note_source", dtype);
  }
  void forget_source(const float* f32) override { sources_.forget(f32); }

 private:
  void count(const char* entry, DType d) { ++calls_[std::string(entry) + " " + to_string(d)]; }
  /// A 16-bit product's operand inside a noted widening (sixteen_bit_sources.h) must equal its
  /// source widened, else the note is stale and a GPU would multiply other values. Counted.
  void check_source(const char* kernel, const char* name, const float* p, int64_t n) {
    const DType d = matmul_operands();
    if (d == DType::kF32 || p == nullptr) return;
    const void* src = sources_.find(p, n, d);
    if (src == nullptr) return;
    std::vector<float> w(static_cast<size_t>(n));
    FakeDevice::Access a(dev_);
    cpu_.widen(src, d, w.data(), n);
    if (std::memcmp(w.data(), p, w.size() * sizeof(float)) == 0) return count("source hit", d);
    std::fprintf(stderr, "FakeKernelOps: %s: %s differs from its noted 16-bit source (a stale "
                 "note_source)\n", kernel, name);
    std::abort();
  }
  /// An activation handed over as stored, counted by dtype under `group` ("linear act bf16");
  /// an fp32 operand (not an output: `n` 0) is checked against a noted source like any other.
  void act(const char* group, const char* kernel, const char* name, ActIn a, int64_t n = 0) {
    count((std::string(group) + " act").c_str(), a.dtype);
    if (n > 0 && a.dtype == DType::kF32)
      check_source(kernel, name, static_cast<const float*>(a.p), n);
  }
  /// Stops the process unless every pointer is device memory (on_device), then runs f with the
  /// device's memory open.
  template <class F>
  auto run(const char* kernel, std::initializer_list<const void*> pointers, F f)
      -> decltype(f()) {
    on_device(kernel, pointers);
    FakeDevice::Access a(dev_);
    return f();
  }
  void on_device(const char* kernel, std::initializer_list<const void*> pointers) const {
    int i = 0;
    for (const void* p : pointers) {
      if (p && !dev_.owns(p)) {
        std::fprintf(stderr, "FakeKernelOps: %s: pointer argument %d is not device memory\n",
                     kernel, i);
        std::abort();
      }
      ++i;
    }
  }

  FakeDevice& dev_;
  KernelOps& cpu_;
  std::map<std::string, int64_t>& calls_;
  SixteenBitSources& sources_;
};

}  // namespace

FakeKernelOps::FakeKernelOps(FakeDevice& dev)
    : sources_(std::make_unique<SixteenBitSources>()),
      table_(std::make_unique<Table>(dev, calls_, *sources_)) {
  try {
    previous_ = &kernel_ops(Device::kCUDA);
  } catch (const std::runtime_error&) {
    previous_ = nullptr;
  }
  register_kernel_ops(Device::kCUDA, table_.get());
}

FakeKernelOps::~FakeKernelOps() { register_kernel_ops(Device::kCUDA, previous_); }

size_t FakeKernelOps::noted_sources() const { return sources_->size(); }

int64_t FakeKernelOps::calls(const std::string& entry_and_dtype) const {
  const auto it = calls_.find(entry_and_dtype);
  return it == calls_.end() ? 0 : it->second;
}

}  // namespace testing
}  // namespace llmp
