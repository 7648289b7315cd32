// Ring self-attention (ring_self_attention.h) against kernels/cpu/attention.h on whole sequences,
// at world sizes 1..4: every rank draws the same random qkv (B,T,3A) and dout (B,T,A), runs the
// core on its rows [r·T/p, (r+1)·T/p) and compares its out and dqkv rows with the reference's.
// Then what the run measured against the closed forms, exactly: the group's "send" bytes and
// calls for one forward + backward, the kept bytes, the peak of MemTag::kAttentionScores over
// two blocks' forwards and backwards, the FLOPs counted in one forward. And p ∤ T throws.
//
// Glossary: B sequences, T positions, Tl = T/p rows here, A channels, H heads, p ranks, r rank,
// L blocks.
#include "common/cp/ring_self_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "common/tensor/memory.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/flops.h"

namespace llmp {
namespace {

constexpr int A = 16;

/// One case: T positions, B sequences, H heads (hs = A/H).
struct Shape {
  int T, B, H;
};

Tensor random_tensor(std::vector<int64_t> shape, unsigned seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32, MemCategory::kOther);
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = n(gen);
  return t;
}

/// Rows [r0, r0 + Tl) of every sequence of x (B,T,W) -> (B,Tl,W).
Tensor rows(const Tensor& x, int r0, int Tl) {
  const int B = x.dim(0), T = x.dim(1), W = x.dim(2);
  Tensor y = Tensor::empty({B, Tl, W}, DType::kF32, MemCategory::kActivations);
  for (int b = 0; b < B; ++b)
    std::copy_n(x.f32() + (long(b) * T + r0) * W, long(Tl) * W, y.f32() + long(b) * Tl * W);
  return y;
}

/// max |got − want| / max |want|.
double rel_err(const Tensor& got, const Tensor& want) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, double(std::fabs(got.f32()[i] - want.f32()[i])));
    scale = std::max(scale, double(std::fabs(want.f32()[i])));
  }
  return diff / scale;
}

class RingSelfAttentionTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { group_ = ProcessGroup::world(); }  // fresh group: CommStats at zero
  std::shared_ptr<ProcessGroup> group_;
};

// Forward out and backward dqkv of this rank's rows equal the whole-sequence kernel's rows.
TEST_P(RingSelfAttentionTest, MatchesWholeSequenceKernel) {
  const auto [T, B, H] = GetParam();
  const int p = group_->size();
  if (T % p != 0) GTEST_SKIP() << "T=" << T << " does not split over p=" << p;
  RingSelfAttention core(*group_);
  const int Tl = T / p, r0 = core.positions(T).front();
  ASSERT_EQ(r0, core.rank() * Tl);

  Tensor qkv = random_tensor({B, T, 3 * A}, 7), dout = random_tensor({B, T, A}, 8);
  Tensor out_ref = Tensor::empty({B, T, A}), att = Tensor::empty({B, H, T, T}),
         dqkv_ref = Tensor::empty({B, T, 3 * A}), scratch = Tensor::empty({T, T});
  cpu::attention_forward(out_ref.f32(), att.f32(), qkv.f32(), B, T, A, H);
  cpu::attention_backward(dqkv_ref.f32(), dout.f32(), qkv.f32(), att.f32(), scratch.f32(), B, T,
                          A, H);

  Tensor x = rows(qkv, r0, Tl), out, dqkv;
  AttentionKeep keep;
  core.forward(x, out, B, T, H, &keep);
  EXPECT_LT(rel_err(out, rows(out_ref, r0, Tl)), 1e-5) << "forward out, T=" << T << " p=" << p;
  core.backward(rows(dout, r0, Tl), x, out, &keep, dqkv, B, T, H);
  EXPECT_LT(rel_err(dqkv, rows(dqkv_ref, r0, Tl)), 1e-5) << "backward dqkv, T=" << T << " p=" << p;
  EXPECT_FALSE(keep.a.defined()) << "backward frees *keep";
}

// Bytes, calls, kept bytes and FLOPs measured on one block == the closed forms.
TEST_P(RingSelfAttentionTest, TrafficKeepAndFlopsMatchClosedForms) {
  const auto [T, B, H] = GetParam();
  const int p = group_->size();
  if (T % p != 0) GTEST_SKIP() << "T=" << T << " does not split over p=" << p;
  RingSelfAttention core(*group_);
  const int Tl = T / p;
  Tensor x = rows(random_tensor({B, T, 3 * A}, 9), core.rank() * Tl, Tl);
  Tensor dy = rows(random_tensor({B, T, A}, 10), core.rank() * Tl, Tl), out, dqkv;
  AttentionKeep keep;
  group_->reset_stats();
  const int64_t f0 = cpu::flops_done();
  core.forward(x, out, B, T, H, &keep);
  EXPECT_EQ(double(cpu::flops_done() - f0), core.forward_flops_per_block(B, T, A, H));
  EXPECT_EQ(double(keep.bytes()), core.kept_bytes_per_block(B, T, A, H));
  core.backward(dy, x, out, &keep, dqkv, B, T, H);
  const CommStats& st = group_->stats();
  const double sent = st.bytes.count("send") ? st.bytes.at("send") : 0.0;
  const int64_t calls = st.calls.count("send") ? st.calls.at("send") : 0;
  EXPECT_EQ(sent, core.bytes_per_block(B, T, A, H)) << core.bytes_formula_text();
  EXPECT_EQ(calls, core.calls_per_block());
  EXPECT_EQ(st.total_bytes(), sent) << "only point-to-point sends";
  EXPECT_EQ(st.calls.count("recv") ? st.calls.at("recv") : 0, calls) << "one irecv per isend";
}

// Forward of L = 2 blocks, then their backwards: the peak of tagged score bytes == the formula.
TEST_P(RingSelfAttentionTest, PeakScoreBytesOverTwoBlocks) {
  const auto [T, B, H] = GetParam();
  const int p = group_->size();
  constexpr int L = 2;
  if (T % p != 0) GTEST_SKIP() << "T=" << T << " does not split over p=" << p;
  RingSelfAttention core(*group_);
  const int Tl = T / p;
  Tensor x[L], dy[L], out[L], dqkv[L];
  AttentionKeep keep[L];
  for (int l = 0; l < L; ++l) {
    x[l] = rows(random_tensor({B, T, 3 * A}, 20 + l), core.rank() * Tl, Tl);
    dy[l] = rows(random_tensor({B, T, A}, 30 + l), core.rank() * Tl, Tl);
  }
  MemoryTracker& mem = MemoryTracker::instance();
  const int64_t before = mem.current(MemTag::kAttentionScores);
  mem.reset_peak();
  for (int l = 0; l < L; ++l) core.forward(x[l], out[l], B, T, H, &keep[l]);
  for (int l = L - 1; l >= 0; --l) core.backward(dy[l], x[l], out[l], &keep[l], dqkv[l], B, T, H);
  EXPECT_EQ(double(mem.peak(MemTag::kAttentionScores) - before),
            core.peak_score_bytes(B, T, A, H, L))
      << core.peak_score_formula_text();
  EXPECT_EQ(mem.current(MemTag::kAttentionScores), before) << "every score buffer freed";
}

// T = 16 and 48 at B = 2, H = 2 (hs = 8); one more shape, B = 1, H = 4 (hs = 4), so that a core
// that mixes up B, H or hs fails.
INSTANTIATE_TEST_SUITE_P(Shapes, RingSelfAttentionTest,
                         ::testing::Values(Shape{16, 2, 2}, Shape{48, 2, 2}, Shape{24, 1, 4}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return "T" + std::to_string(i.param.T) + "_B" +
                                  std::to_string(i.param.B) + "_H" + std::to_string(i.param.H);
                         });

// p ∤ T: one line naming both (at p = 1 every T splits, so only T = 0 is refused).
TEST(RingSelfAttentionErrors, SplitThatDoesNotDivideThrowsNamingTAndP) {
  auto group = ProcessGroup::world();
  RingSelfAttention core(*group);
  const int B = 2, H = 2, p = group->size(), T = p > 1 ? 4 * p + 1 : 0;
  try {
    core.positions(T);
    FAIL() << "T=" << T << " p=" << p << " should throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("T=" + std::to_string(T)), std::string::npos) << msg;
    EXPECT_NE(msg.find("p=" + std::to_string(p)), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  Tensor x = Tensor::zeros({B, 1, 3 * A}), out;
  AttentionKeep keep;
  if (p > 1) {
    EXPECT_THROW(core.forward(x, out, B, T, H, &keep), std::invalid_argument);
  }
  EXPECT_THROW(core.forward(x, out, B, p, 3, &keep), std::invalid_argument);  // H=3 ∤ A=16
}

}  // namespace
}  // namespace llmp
