// The model under mixed precision (f32_view.h, FlatParams / FlatGrads on 16-bit buffers): the
// activations a block keeps are 16-bit except LayerNorm's statistics (bytes measured by the walk),
// the fp32 copies are temporaries (kOther, all freed after the walk), bf16 and fp16 losses and
// gradients are the fp32 ones within 16-bit rounding, fp32 through the Tensor path is
// bit-identical to the float-pointer path, rounding the gradients counts what fp16 flushes
// to zero, and a 16-bit walk declares its products' operands 16-bit (checked on the CPU).
//
// Glossary: B batch, T sequence, Ψ parameter count, S loss scale.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"
#include "common/nn/unit_runner.h"
#include "common/tensor/memory.h"
#include "kernels/cpu/convert.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

/// One forward_backward of the tiny model on fixed data, in `dtype`, from the same fp32 init.
struct Walk {
  Walk(DType dtype, float scale = 0, int B_ = 4, int T_ = 16)
      : model(GPTConfig::preset("tiny"), TpComm::none(), dtype), B(B_), T(T_) {
    const int64_t psi = model.layout().num_params();
    std::vector<float> init(psi);
    model.init_params(init.data(), 1234);
    params = Tensor::empty({psi}, dtype, MemCategory::kParameters);
    cpu::round_to(init.data(), params.raw(), dtype, psi);
    grads = Tensor::zeros({psi}, dtype, MemCategory::kGradients);
    tok = random_ids(B * T, 1, model.config().vocab);
    tgt = random_ids(B * T, 2, model.config().vocab);
    const float mean = scale > 0 ? scale : 1.0f / (B * T);
    FlatParams p(model.layout(), params);
    FlatGrads g(model.layout(), grads, {}, &stats);
    UnitRunner runner(model, p, &g);
    loss = runner.forward_backward(tok.data(), tgt.data(), B, T, mean) / (mean * B * T);
    block_bytes = runner.stats().block_stored_bytes;
    g32.resize(psi);
    cpu::widen(grads.raw(), dtype, g32.data(), psi);
  }
  GPT model;
  int B, T;
  Tensor params, grads;
  std::vector<int32_t> tok, tgt;
  cpu::RoundStats stats;
  double loss = 0;
  int64_t block_bytes = 0;
  std::vector<float> g32;
};

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i],
                                        bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

TEST(MixedPrecision, BlockActivationsAreHalvedExceptLayerNormStatistics) {
  const Walk f32(DType::kF32), bf16(DType::kBF16), f16(DType::kF16);
  // A block keeps its 16-bit tensors and 4 fp32 statistics per token (ln_1/ln_2 mean and rstd).
  const int64_t stats_bytes = 4 * 4 * int64_t{f32.B} * f32.T;
  ASSERT_GT(f32.block_bytes, stats_bytes);
  EXPECT_EQ(bf16.block_bytes, (f32.block_bytes - stats_bytes) / 2 + stats_bytes);
  EXPECT_EQ(f16.block_bytes, bf16.block_bytes);
}

TEST(MixedPrecision, FloatCopiesAreTemporaries) {
  MemoryTracker& mt = MemoryTracker::instance();
  const int64_t other = mt.current(MemCategory::kOther);
  const int64_t acts = mt.current(MemCategory::kActivations);
  mt.reset_peak();
  {
    const Walk bf16(DType::kBF16);
    EXPECT_EQ(mt.current(MemCategory::kOther), other);  // widened units, fp32 accumulators: freed
    EXPECT_EQ(mt.current(MemCategory::kActivations), acts);
  }
  EXPECT_GT(mt.peak(MemCategory::kOther), other);  // they existed during the walk
}

TEST(MixedPrecision, LossAndGradientsMatchFp32WithinRounding) {
  const Walk f32(DType::kF32), bf16(DType::kBF16), f16(DType::kF16, /*scale=*/1024.0f / (4 * 16));
  // bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 2e-3 per stored value); the loss is
  // an fp32 reduction of values that each went through a few such roundings.
  EXPECT_NEAR(bf16.loss, f32.loss, 2e-2 * f32.loss);
  EXPECT_NEAR(f16.loss, f32.loss, 5e-3 * f32.loss);
  // The gradient direction survives (fp16's with S = 1024, so little underflows).
  EXPECT_GT(cosine(bf16.g32, f32.g32), 0.99);
  std::vector<float> f16g = f16.g32;
  for (float& g : f16g) g /= 1024.0f;
  EXPECT_GT(cosine(f16g, f32.g32), 0.995);
  EXPECT_NE(bf16.loss, f32.loss);  // 16-bit storage really happened
}

TEST(MixedPrecision, Fp32TensorPathIsTheFloatPointerPath) {
  const Walk t(DType::kF32);
  GPT model(GPTConfig::preset("tiny"));
  const int64_t psi = model.layout().num_params();
  std::vector<float> params(psi), grads(psi, 0.0f);
  model.init_params(params.data(), 1234);
  const double loss = forward_backward(model, params.data(), grads.data(), t.tok.data(),
                                       t.tgt.data(), t.B, t.T, 1.0f / (t.B * t.T));
  EXPECT_EQ(loss, t.loss);
  for (int64_t i = 0; i < psi; ++i) ASSERT_EQ(grads[i], t.g32[i]) << i;
}

TEST(MixedPrecision, Fp16UnderflowIsCountedAndScalingRemovesIt) {
  // A mean scale of 2^-16 (as 1/(B·T) for 65536 tokens) makes many fp16 gradients smaller than
  // 2^-25, half fp16's smallest subnormal: flushed to zero. S = 2^15 brings them back.
  const Walk tiny(DType::kF16, 1.0f / 65536.0f);
  const Walk scaled(DType::kF16, 1.0f / 65536.0f * 32768.0f);
  EXPECT_GT(tiny.stats.underflow, 0);
  EXPECT_EQ(tiny.stats.elements, tiny.model.layout().num_params());
  EXPECT_LT(scaled.stats.underflow, tiny.stats.underflow / 10);
  EXPECT_EQ(scaled.stats.overflow, 0);
  // bf16 has fp32's range: nothing at this scale underflows.
  const Walk bf(DType::kBF16, 1.0f / 65536.0f);
  EXPECT_EQ(bf.stats.underflow, 0);
}

TEST(MixedPrecision, SixteenBitGradientsAccumulateOverWalks) {
  // Two walks over the two halves of a batch into the same bf16 buffer (micro-batches) give the
  // one-walk gradient of the whole batch, up to one more rounding per element.
  const Walk whole(DType::kBF16, 0, 4, 16);
  GPT model(GPTConfig::preset("tiny"), TpComm::none(), DType::kBF16);
  Tensor grads = Tensor::zeros({whole.params.numel()}, DType::kBF16, MemCategory::kGradients);
  FlatParams p(model.layout(), whole.params);
  FlatGrads g(model.layout(), grads);
  for (int half = 0; half < 2; ++half)
    UnitRunner(model, p, &g).forward_backward(whole.tok.data() + half * 2 * 16,
                                              whole.tgt.data() + half * 2 * 16, 2, 16,
                                              1.0f / (4 * 16));
  std::vector<float> acc(whole.g32.size());
  cpu::widen(grads.raw(), DType::kBF16, acc.data(), grads.numel());
  EXPECT_GT(cosine(acc, whole.g32), 0.999);
  double na = 0, nw = 0;
  for (size_t i = 0; i < acc.size(); ++i) na += double(acc[i]) * acc[i], nw += double(whole.g32[i]) * whole.g32[i];
  EXPECT_NEAR(std::sqrt(na / nw), 1.0, 1e-2);  // the halves were added, not overwritten
}

TEST(MixedPrecision, Fp16OverflowBecomesInfInTheGradients) {
  const Walk huge(DType::kF16, 1e12f);
  EXPECT_GT(huge.stats.overflow + huge.stats.nonfinite, 0);
}

// ---- The matrix products' operand declaration (kernels/ops/kernel_ops.h MatmulOperands): a GPU
// runs declared 16-bit operands on TF32 tensor cores, so the CPU checks the declaration.

TEST(MatmulOperands, TheCpuRefusesAValueTheDeclaredDtypeCannotHold) {
  KernelOps& ops = kernel_ops(Device::kCPU);
  const int N = 3, C = 4, OC = 5;
  std::vector<float> x(N * C, 0.5f), W(C * OC, -1.25f), y(N * OC);  // exact in f16 and bf16
  {
    const MatmulOperands bf16(ops, DType::kBF16);
    ops.matmul_forward(y.data(), x.data(), W.data(), nullptr, N, C, OC);  // exact: accepted
    EXPECT_FLOAT_EQ(y[0], C * 0.5f * -1.25f);
    x[5] = 0.1f;  // 0.1 needs 23 mantissa bits
    try {
      ops.matmul_forward(y.data(), x.data(), W.data(), nullptr, N, C, OC);
      ADD_FAILURE() << "an inexact operand under a bf16 declaration was accepted";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("matmul_forward: x[5] = 0.1"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("not a bf16 value"), std::string::npos) << e.what();
    }
    {  // a nested fp32 declaration (the head's dlogits) accepts any value
      const MatmulOperands fp32(ops, DType::kF32);
      ops.matmul_forward(y.data(), x.data(), W.data(), nullptr, N, C, OC);
    }
    EXPECT_EQ(ops.matmul_operands(), DType::kBF16) << "the nested scope restored bf16";
    x[5] = 0.5f;
    W[7] = 1.0f + 1.0f / 512;  // 10 mantissa bits: an fp16 value, not a bf16 one
    EXPECT_THROW(ops.matmul_backward_input(x.data(), y.data(), W.data(), N, C, OC),
                 std::logic_error);
  }
  EXPECT_EQ(ops.matmul_operands(), DType::kF32);
  const MatmulOperands f16(ops, DType::kF16);
  ops.matmul_backward_input(x.data(), y.data(), W.data(), N, C, OC);  // W[7] is an fp16 value
  EXPECT_THROW(ops.set_matmul_operands(DType::kF64), std::invalid_argument);
}

/// A 16-bit source whose get() hands inexact fp32 weights: a walk that declares its operands
/// 16-bit must be stopped by the CPU's check.
class LyingParams : public ParamSource {
 public:
  LyingParams(const GPT& model, DType claimed)
      : layout_(model.layout()), claimed_(claimed), w_(layout_.num_params()) {
    model.init_params(w_.data(), 99);  // fp32 values: almost none is a 16-bit value
  }
  const float* get(int u) override { return w_.data() + layout_.unit_offset(u); }
  DType values() const override { return claimed_; }

 private:
  const GPTLayout& layout_;
  DType claimed_;
  std::vector<float> w_;
};

TEST(MatmulOperands, ASixteenBitWalkDeclaresItsProducts) {
  const GPT model(GPTConfig::preset("tiny"), TpComm::none(), DType::kBF16);
  const int B = 2, T = 8;
  const std::vector<int32_t> tok = random_ids(B * T, 1, model.config().vocab),
                             tgt = random_ids(B * T, 2, model.config().vocab);
  for (DType claimed : {DType::kBF16, DType::kF32}) {
    LyingParams p(model, claimed);
    UnitRunner runner(model, p, nullptr);
    if (claimed == DType::kBF16)  // bf16 params and activations: declared, checked, refused
      EXPECT_THROW(runner.forward_loss(tok.data(), tgt.data(), B, T), std::logic_error);
    else  // fp32 params with bf16 activations: nothing declared, the walk runs
      EXPECT_TRUE(std::isfinite(runner.forward_loss(tok.data(), tgt.data(), B, T)));
    EXPECT_EQ(kernel_ops(Device::kCPU).matmul_operands(), DType::kF32) << "restored after the walk";
  }
}

}  // namespace
}  // namespace llmp
