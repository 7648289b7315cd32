// Each CUDA kernel against its kernels/cpu twin on random inputs (fp32, TF32 off).
//
// Without a GPU (this project's build machines) every KernelsTwin test is SKIPPED with the
// runtime's reason, as fill_copy_test's: "[  SKIPPED ]" in test.log, result="skipped" in
// test.xml, while Bazel 4.2.3 shows the target PASSED. The KernelsHost tests run everywhere.
//
// Bounds (relative to max(1, max|ref|), printed by each test): the GPU sums the same fp32 terms
// as the CPU in another order (cuBLAS tiles, warp shuffles, FMA contraction), so a sum of k
// terms differs by up to ~k·2⁻²⁴·Σ|terms|: GEMMs here have k ≤ 80 with inputs in [-1, 1), hence
// 5e-5; row reductions 1e-5; element-wise maps with CUDA's libdevice (tanhf, expf: ≤ 2 ulp)
// 2e-6; copies and exact conversions 0. TF32 (10-bit mantissas) would need ~1e-3: it is off by
// default and TwinTf32IsOptIn checks the switch.
//
// Shapes: N = 64, C = 48, OC = 80 (matmul); B = 2, T = 33, C = 48, H = 4 (attention: T not a
// multiple of 32, so the warps' last lanes idle); rows of 100 channels (LayerNorm, > 32 and not a
// multiple of it); Vr = 1000 logits (> 256 threads per row block).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/optim/adamw.h"
#include "common/tensor/tensor.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/grad_norm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/residual.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/twin_test_util.h"

namespace llmp {
namespace {

using test::Dev;
using test::DevF;
using test::rel_err;
using test::rnd;
using test::Vec;
constexpr float kGemm = 5e-5f, kRow = 1e-5f, kElem = 2e-6f;

using KernelsTwin = test::GpuTwin;

constexpr int N = 64, C = 48, OC = 80;

TEST_F(KernelsTwin, MatmulForwardWithAndWithoutBias) {
  const Vec x = rnd(N * C, 1), W = rnd(C * OC, 2), b = rnd(OC, 3);
  DevF dx(x), dW(W), db(b), dy(N * OC);
  for (bool bias : {false, true}) {
    Vec ref(N * OC);
    cpu::matmul_forward(ref.data(), x.data(), W.data(), bias ? b.data() : nullptr, N, C, OC);
    cuda::matmul_forward(dy.p, dx.p, dW.p, bias ? db.p : nullptr, N, C, OC);
    EXPECT_LE(rel_err(dy.get(), ref, bias ? "matmul_forward +b" : "matmul_forward"), kGemm);
  }
}

TEST_F(KernelsTwin, MatmulBackwardOverwritesDxAndAccumulatesDwDb) {
  const Vec x = rnd(N * C, 4), W = rnd(C * OC, 5), dyv = rnd(N * OC, 6);
  Vec dx_ref(N * C), dW_ref = rnd(C * OC, 7), db_ref = rnd(OC, 8);  // nonzero: += is checked
  DevF x_d(x), W_d(W), dy_d(dyv), dx_d(rnd(N * C, 9)), dW_d(dW_ref), db_d(db_ref);
  cpu::matmul_backward(dx_ref.data(), dW_ref.data(), db_ref.data(), dyv.data(), x.data(), W.data(),
                       N, C, OC);
  cuda::matmul_backward(dx_d.p, dW_d.p, db_d.p, dy_d.p, x_d.p, W_d.p, N, C, OC);
  EXPECT_LE(rel_err(dx_d.get(), dx_ref, "matmul dx"), kGemm);
  EXPECT_LE(rel_err(dW_d.get(), dW_ref, "matmul dW"), kGemm);
  EXPECT_LE(rel_err(db_d.get(), db_ref, "matmul db"), kGemm);
}

TEST_F(KernelsTwin, MatmulNtForwardAndBackward) {
  const Vec x = rnd(N * C, 10), Wt = rnd(OC * C, 11), dyv = rnd(N * OC, 12);
  Vec y_ref(N * OC), dx_ref(N * C), dWt_ref = rnd(OC * C, 13);
  DevF x_d(x), Wt_d(Wt), dy_d(dyv), y_d(N * OC), dx_d(N * C), dWt_d(dWt_ref);
  cpu::matmul_nt_forward(y_ref.data(), x.data(), Wt.data(), N, C, OC);
  cpu::matmul_nt_backward(dx_ref.data(), dWt_ref.data(), dyv.data(), x.data(), Wt.data(), N, C, OC);
  cuda::matmul_nt_forward(y_d.p, x_d.p, Wt_d.p, N, C, OC);
  cuda::matmul_nt_backward(dx_d.p, dWt_d.p, dy_d.p, x_d.p, Wt_d.p, N, C, OC);
  EXPECT_LE(rel_err(y_d.get(), y_ref, "matmul_nt y"), kGemm);
  EXPECT_LE(rel_err(dx_d.get(), dx_ref, "matmul_nt dx"), kGemm);
  EXPECT_LE(rel_err(dWt_d.get(), dWt_ref, "matmul_nt dWt"), kGemm);
}

TEST_F(KernelsTwin, TwinTf32IsOptIn) {
  EXPECT_FALSE(cuda::tf32());
  const Vec x = rnd(N * C, 14), W = rnd(C * OC, 15);
  Vec ref(N * OC);
  cpu::matmul_forward(ref.data(), x.data(), W.data(), nullptr, N, C, OC);
  DevF x_d(x), W_d(W), y_d(N * OC);
  cuda::set_tf32(true);
  cuda::matmul_forward(y_d.p, x_d.p, W_d.p, nullptr, N, C, OC);
  const float tf32_err = rel_err(y_d.get(), ref, "matmul_forward TF32");
  cuda::set_tf32(false);
  EXPECT_LE(tf32_err, 1e-2f);  // 10-bit mantissas: ~2⁻¹¹ per product, not 2⁻²⁴
}

constexpr int AB = 2, AT = 33, AC = 48, AH = 4;

TEST_F(KernelsTwin, AttentionForwardAndProbs) {
  const Vec qkv = rnd(AB * AT * 3 * AC, 20, -2.0f, 2.0f);
  Vec out(AB * AT * AC), att(AB * AH * AT * AT);
  cpu::attention_forward(out.data(), att.data(), qkv.data(), AB, AT, AC, AH);
  DevF qkv_d(qkv), out_d(out.size()), att_d(att.size()), probs_d(att.size());
  cuda::attention_forward(out_d.p, att_d.p, DType::kF32, qkv_d.p, AB, AT, AC, AH);
  cuda::attention_probs(probs_d.p, DType::kF32, qkv_d.p, AB, AT, AC, AH);
  const Vec att_g = att_d.get();
  EXPECT_LE(rel_err(out_d.get(), out, "attention out"), kGemm);
  EXPECT_LE(rel_err(att_g, att, "attention P"), kGemm);
  EXPECT_EQ(probs_d.get(), att_g);  // recomputation gives the forward's bits
  int64_t above = 0;                // the masked part is exactly 0
  for (int64_t r = 0; r < AB * AH * AT; ++r)
    for (int j = r % AT + 1; j < AT; ++j) above += att_g[r * AT + j] != 0.0f;
  EXPECT_EQ(above, 0);
}

TEST_F(KernelsTwin, AttentionBackward) {
  const Vec qkv = rnd(AB * AT * 3 * AC, 21, -2.0f, 2.0f), dout = rnd(AB * AT * AC, 22);
  Vec out(AB * AT * AC), att(AB * AH * AT * AT), scratch(AT * AT), ref(qkv.size());
  cpu::attention_forward(out.data(), att.data(), qkv.data(), AB, AT, AC, AH);
  cpu::attention_backward(ref.data(), dout.data(), qkv.data(), att.data(), scratch.data(), AB, AT,
                          AC, AH);
  DevF qkv_d(qkv), dout_d(dout), att_d(att), dq(rnd(qkv.size(), 23));  // garbage: overwritten
  cuda::attention_backward(dq.p, dout_d.p, qkv_d.p, att_d.p, DType::kF32, nullptr, AB, AT, AC, AH);
  EXPECT_LE(rel_err(dq.get(), ref, "attention dqkv"), kGemm);
}

constexpr int LN = 70, LC = 100;

TEST_F(KernelsTwin, LayerNormForward) {
  const Vec x = rnd(LN * LC, 30, 1.0f, 5.0f), w = rnd(LC, 31), b = rnd(LC, 32);
  Vec y(LN * LC), mean(LN), rstd(LN);
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), LN, LC);
  DevF x_d(x), w_d(w), b_d(b), y_d(y.size()), m_d(LN), r_d(LN);
  cuda::layernorm_forward(y_d.p, m_d.p, r_d.p, x_d.p, w_d.p, b_d.p, LN, LC);
  EXPECT_LE(rel_err(y_d.get(), y, "layernorm y"), kRow);
  EXPECT_LE(rel_err(m_d.get(), mean, "layernorm mean"), kRow);
  EXPECT_LE(rel_err(r_d.get(), rstd, "layernorm rstd"), kRow);
}

TEST_F(KernelsTwin, LayerNormBackwardAccumulates) {
  const Vec x = rnd(LN * LC, 33, 1.0f, 5.0f), w = rnd(LC, 34), b = rnd(LC, 35),
            dy = rnd(LN * LC, 36);
  Vec y(LN * LC), mean(LN), rstd(LN);
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), LN, LC);
  Vec dx = rnd(LN * LC, 37), dw = rnd(LC, 38), db = rnd(LC, 39);  // nonzero: += is checked
  DevF x_d(x), w_d(w), dy_d(dy), m_d(mean), r_d(rstd), dx_d(dx), dw_d(dw), db_d(db), dw2_d(dw),
      db2_d(db);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), LN, LC);
  cuda::layernorm_backward(dx_d.p, dw_d.p, db_d.p, dy_d.p, x_d.p, w_d.p, m_d.p, r_d.p, LN, LC);
  cuda::layernorm_backward_weight(dw2_d.p, db2_d.p, dy_d.p, x_d.p, m_d.p, r_d.p, LN, LC);
  EXPECT_LE(rel_err(dx_d.get(), dx, "layernorm dx"), kRow);
  EXPECT_LE(rel_err(dw_d.get(), dw, "layernorm dw"), kRow);
  EXPECT_LE(rel_err(db_d.get(), db, "layernorm db"), kRow);
  EXPECT_EQ(dw2_d.get(), dw_d.get());  // the weight half alone: the same sums
  EXPECT_EQ(db2_d.get(), db_d.get());
}

TEST_F(KernelsTwin, GeluForwardAndBackward) {
  const long n = 100003;
  const Vec x = rnd(n, 40, -6.0f, 6.0f), dy = rnd(n, 41);
  Vec y(n), dx(n);
  cpu::gelu_forward(y.data(), x.data(), n);
  cpu::gelu_backward(dx.data(), x.data(), dy.data(), n);
  DevF x_d(x), dy_d(dy), y_d(n);
  cuda::gelu_forward(y_d.p, x_d.p, n);
  cuda::gelu_backward(dy_d.p, x_d.p, dy_d.p, n);          // in place, as allowed
  EXPECT_LE(rel_err(y_d.get(), y, "gelu y"), kElem * 7);  // relative to max|y| ≈ 6
  EXPECT_LE(rel_err(dy_d.get(), dx, "gelu dx"), kElem * 7);
}

TEST_F(KernelsTwin, ResidualBiasAddAndBackward) {
  const Vec x = rnd(N * C, 42), y = rnd(N * C, 43), b = rnd(C, 44), dy = rnd(N * C, 45);
  Vec out(N * C), db = rnd(C, 46);
  DevF x_d(x), y_d(y), b_d(b), dy_d(dy), db_d(db);
  cpu::residual_bias_add(out.data(), x.data(), y.data(), b.data(), N, C);
  cpu::residual_bias_backward(db.data(), dy.data(), N, C);
  cuda::residual_bias_add(x_d.p, x_d.p, y_d.p, b_d.p, N, C);  // out aliasing x
  cuda::residual_bias_backward(db_d.p, dy_d.p, N, C);
  EXPECT_EQ(x_d.get(), out);  // the same two additions in the same order: bit-identical
  EXPECT_LE(rel_err(db_d.get(), db, "residual db"), kRow);
}

TEST_F(KernelsTwin, TokenEmbeddingShardForwardAndBackward) {
  const int EN = 20, EC = 40, v0 = 10, Vr = 30;  // vocabulary rows [10, 40) of 50
  std::vector<int32_t> tok(EN);
  for (int n = 0; n < EN; ++n) tok[n] = (n * 7 + 3) % 50;  // some repeat, some off-shard
  tok[1] = tok[0];
  const Vec wte = rnd(Vr * EC, 50), dout = rnd(EN * EC, 51);
  Vec out(EN * EC), dwte = rnd(Vr * EC, 52);
  Dev<int32_t> tok_d(tok);
  DevF wte_d(wte), dout_d(dout), out_d(rnd(EN * EC, 53)), dwte_d(dwte);
  cpu::token_embedding_forward(out.data(), tok.data(), wte.data(), v0, Vr, EN, EC);
  cpu::token_embedding_backward(dwte.data(), dout.data(), tok.data(), v0, Vr, EN, EC);
  cuda::token_embedding_forward(out_d.p, tok_d.p, wte_d.p, v0, Vr, EN, EC);
  cuda::token_embedding_backward(dwte_d.p, dout_d.p, tok_d.p, v0, Vr, EN, EC);
  EXPECT_EQ(out_d.get(), out);                                  // copies and zeros: exact
  EXPECT_LE(rel_err(dwte_d.get(), dwte, "token dwte"), kElem);  // atomicAdd order only
}

TEST_F(KernelsTwin, PositionEmbeddingForwardBackwardAndAt) {
  const int PB = 3, Tl = 9, t0 = 5, PC = 40, ctx = 16;
  const std::vector<int> pos = {0, 1, 2, 3, 12, 13, 14, 15, 7};
  const Vec x = rnd(PB * Tl * PC, 60), wpe = rnd(ctx * PC, 61), dx = rnd(PB * Tl * PC, 62);
  Vec y = x, y_at = x, dwpe = rnd(ctx * PC, 63), dwpe_at = dwpe;
  Dev<int> pos_d(pos);
  DevF y_d(x), yat_d(x), wpe_d(wpe), dx_d(dx), dwpe_d(dwpe), dwpeat_d(dwpe);
  cpu::position_embedding_forward(y.data(), wpe.data(), PB, Tl, t0, PC);
  cpu::position_embedding_backward(dwpe.data(), dx.data(), PB, Tl, t0, PC);
  cpu::position_embedding_forward_at(y_at.data(), wpe.data(), PB, Tl, pos.data(), PC);
  cpu::position_embedding_backward_at(dwpe_at.data(), dx.data(), PB, Tl, pos.data(), PC);
  cuda::position_embedding_forward(y_d.p, wpe_d.p, PB, Tl, t0, PC);
  cuda::position_embedding_backward(dwpe_d.p, dx_d.p, PB, Tl, t0, PC);
  cuda::position_embedding_forward_at(yat_d.p, wpe_d.p, PB, Tl, pos_d.p, PC);
  cuda::position_embedding_backward_at(dwpeat_d.p, dx_d.p, PB, Tl, pos_d.p, PC);
  EXPECT_EQ(y_d.get(), y);  // one addition per element: exact
  EXPECT_EQ(yat_d.get(), y_at);
  EXPECT_LE(rel_err(dwpe_d.get(), dwpe, "position dwpe"), kElem);
  EXPECT_LE(rel_err(dwpeat_d.get(), dwpe_at, "position_at dwpe"), kElem);
}

// AdamW on the device (its m, v on Device::kCUDA: one cuda::adamw_update launch for the span's
// runs of constant λ, split by common/optim/adamw.cc) against AdamW on the host.
TEST_F(KernelsTwin, AdamWFp32WithDecayRanges) {
  const int64_t n = 6000;
  AdamWConfig cfg;
  cfg.lr = 3e-3f;
  cfg.weight_decay = 0.1f;
  const std::vector<ElementRange> decay = {{500, 1800}, {2500, 4000}, {5500, 6000}};
  AdamW opt(n, cfg, decay), opt_d(n, cfg, decay, DType::kF32, Device::kCUDA);
  Vec p = rnd(n, 80);
  DevF p_d(p), g_d(n);
  for (int64_t t = 1; t <= 3; ++t) {
    const Vec g = rnd(n, 81 + t);
    opt.step(p.data(), g.data(), t);
    CUDA_CHECK(cudaMemcpy(g_d.p, g.data(), 4 * n, cudaMemcpyHostToDevice));
    opt_d.step(p_d.p, g_d.p, t);
  }
  const Vec m_ref(opt.exp_avg().f32(), opt.exp_avg().f32() + n);
  EXPECT_LE(rel_err(p_d.get(), p, "adamw params"), kElem);
  EXPECT_LE(rel_err(test::from_device(opt_d.exp_avg().raw(), n), m_ref, "adamw m"), kElem);
}

TEST_F(KernelsTwin, AdamWMixedBf16ParamsF16Grads) {
  const int64_t n = 3000;
  AdamWConfig cfg;
  cfg.weight_decay = 0.05f;
  const std::vector<ElementRange> decay = {{0, 1000}};
  AdamW opt(n, cfg, decay, DType::kBF16), opt_d(n, cfg, decay, DType::kBF16, Device::kCUDA);
  const Vec init = rnd(n, 90);
  std::copy(init.begin(), init.end(), opt.master().f32());
  CUDA_CHECK(cudaMemcpy(opt_d.master().f32(), init.data(), 4 * n, cudaMemcpyHostToDevice));
  Tensor p16 = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters);
  Tensor g16 = Tensor::empty({n}, DType::kF16, MemCategory::kGradients);
  Tensor p16_d = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters, Device::kCUDA);
  Tensor g16_d = Tensor::empty({n}, DType::kF16, MemCategory::kGradients, Device::kCUDA);
  for (int64_t t = 1; t <= 2; ++t) {
    cpu::round_to(rnd(n, 91 + t, -8.0f, 8.0f).data(), g16.raw(), DType::kF16, n);
    opt.step_mixed(p16, g16, 0.125f, t, n);
    CUDA_CHECK(cudaMemcpy(g16_d.raw(), g16.raw(), 2 * n, cudaMemcpyHostToDevice));
    opt_d.step_mixed(p16_d, g16_d, 0.125f, t, n);
  }
  const std::vector<uint16_t> p = test::from_device<uint16_t>(p16_d.raw(), n);
  const Vec master_ref(opt.master().f32(), opt.master().f32() + n);
  EXPECT_LE(rel_err(test::from_device(opt_d.master().raw(), n), master_ref, "adamw master"),
            kElem);
  const uint16_t* ref = static_cast<const uint16_t*>(p16.raw());
  int64_t off_by_more = 0;  // a master a few ulp away may round to the neighbouring bf16
  for (int64_t i = 0; i < n; ++i) off_by_more += std::abs(int(p[i]) - int(ref[i])) > 1;
  EXPECT_EQ(off_by_more, 0);
}

TEST_F(KernelsTwin, SumOfSquaresAndNonfiniteCount) {
  const int64_t n = 3000001;  // more than kMaxReduceBlocks·kThreads: the grid-stride loop loops
  Vec x = rnd(n, 100);
  double ref = 0.0;
  for (float v : x) ref += static_cast<double>(v) * v;
  DevF x_d(x);
  // x² is exact in double; the n double additions in another order: ≤ n·2⁻⁵³ ≈ 3e-10 relative.
  EXPECT_NEAR(cuda::sum_of_squares(x_d.p, DType::kF32, n), ref, 1e-9 * ref);
  EXPECT_NEAR(cpu::sum_of_squares(x.data(), DType::kF32, n), ref, 1e-9 * ref);
  // 16-bit gradients (--clip_grad under bf16): widened exactly as they are read, so the sum is
  // that of the bf16 values themselves, on both devices.
  Tensor h = Tensor::empty({n}, DType::kBF16, MemCategory::kGradients);
  cpu::round_to(x.data(), h.raw(), DType::kBF16, n);
  Vec hw(n);
  cpu::widen(h.raw(), DType::kBF16, hw.data(), n);
  double ref16 = 0.0;
  for (float v : hw) ref16 += static_cast<double>(v) * v;
  ASSERT_GT(std::abs(ref16 - ref), 1e-6 * ref) << "the bf16 values are other values";
  Tensor h_d = Tensor::empty({n}, DType::kBF16, MemCategory::kGradients, Device::kCUDA);
  CUDA_CHECK(cudaMemcpy(h_d.raw(), h.raw(), 2 * n, cudaMemcpyHostToDevice));
  EXPECT_NEAR(cuda::sum_of_squares(h_d.raw(), DType::kBF16, n), ref16, 1e-9 * ref16);
  EXPECT_NEAR(cpu::sum_of_squares(h.raw(), DType::kBF16, n), ref16, 1e-9 * ref16);
  EXPECT_THROW(cuda::sum_of_squares(nullptr, DType::kU8, 4), std::invalid_argument);
  EXPECT_EQ(cuda::count_nonfinite(x_d.p, n), 0);
  x[7] = INFINITY;
  x[n - 1] = NAN;
  x[123456] = -INFINITY;
  DevF y_d(x);
  EXPECT_EQ(cuda::count_nonfinite(y_d.p, n), 3);
}

TEST_F(KernelsTwin, WidenAndRoundToMatchTheCpuBitForBit) {
  std::mt19937 gen(110);
  Vec x(1 << 20);
  for (float& v : x) {
    const uint32_t u = gen();
    std::memcpy(&v, &u, 4);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  DevF x_d(x), back_d(n);
  for (DType t : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> ref(n);
    Vec ref_back(n);
    cpu::round_to(x.data(), ref.data(), t, n);
    cpu::widen(ref.data(), t, ref_back.data(), n);
    Dev<uint16_t> h_d(n);
    cuda::round_to(x_d.p, h_d.p, t, n);
    cuda::widen(h_d.p, t, back_d.p, n);
    const std::vector<uint16_t> got = h_d.get();
    const Vec back = back_d.get();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i)
      wrong += std::isnan(ref_back[i]) ? !std::isnan(back[i])
                                       : (got[i] != ref[i] || back[i] != ref_back[i]);
    EXPECT_EQ(wrong, 0) << to_string(t);
  }
}

// 16-bit gradient accumulation, three micro-batches: dst = round(widen(dst) + src), bit for bit.
TEST_F(KernelsTwin, AccumulateToMatchesTheCpuBitForBit) {
  const int64_t n = 1 << 20;
  const Vec start = rnd(n, 120, -4.0f, 4.0f), src = rnd(n, 121, -1e-3f, 1e-3f);
  for (DType t : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> ref(n);
    cpu::round_to(start.data(), ref.data(), t, n);
    Dev<uint16_t> h_d(ref);  // the same start on the device
    DevF src_d(src);
    for (int k = 0; k < 3; ++k)
      cpu::accumulate_to(src.data(), ref.data(), t, n), cuda::accumulate_to(src_d.p, h_d.p, t, n);
    EXPECT_EQ(h_d.get(), ref) << to_string(t);
  }
}

// ---- Runs without a GPU ------------------------------------------------------------------------

TEST(KernelsHost, CublasErrorMessageNamesThePlaceAndTheStatus) {
  EXPECT_EQ(cuda::cublas_error_message(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm(...)", "a.cc", 3),
            "a.cc:3: cuBLAS error: cublasSgemm(...) failed: CUBLAS_STATUS_INVALID_VALUE: "
            "an unsupported value or parameter was passed to the function");
}

TEST(KernelsHost, BadDtypesAreRejectedBeforeAnyDeviceWork) {
  EXPECT_THROW(cuda::round_to(nullptr, nullptr, DType::kU8, 4), std::invalid_argument);
  EXPECT_THROW(cuda::accumulate_to(nullptr, nullptr, DType::kU8, 4), std::invalid_argument);
  EXPECT_THROW(cuda::widen(nullptr, DType::kF64, nullptr, 4), std::invalid_argument);
  try {  // n = 4: the dtype is checked before the launch (and before n = 0's early return)
    cuda::adamw_update_mixed(nullptr, DType::kU8, nullptr, DType::kF16, nullptr, nullptr, nullptr,
                             {{4, 0.0f}}, cpu::AdamWStep{});
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "cuda::adamw_update_mixed parameters: dtype u8 is not f32, f16 or bf16");
  }
}

}  // namespace
}  // namespace llmp
