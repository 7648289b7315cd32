// RingAttention (ring_attention.h) at every world size of the BUILD file (p = 1..4), both splits.
//
// Every rank draws the same random qkv (B,T,3A) and dout (B,T,A) of whole sequences (one seed),
// runs kernels/cpu/attention on them as the reference, and runs the core on the rows of its
// positions(T). The core's out and dqkv must equal the reference's rows to 1e-5 of the largest
// reference value. Then the closed forms are asserted against what the run did:
//   sends and their bytes   ProcessGroup::stats() of the core's own group ("send")
//   kept bytes              keep.bytes() after the forward
//   peak score bytes        MemoryTracker::peak(MemTag::kAttentionScores) over L = 2 blocks
//   forward FLOPs           the kernels/cpu/flops.h counter around this rank's forward
// and, gathered over the ranks, the balanced split's FLOPs equal on every rank while the
// contiguous split's grow with the rank. On a guarded FakeDevice the core equals the CPU core
// bit for bit, and the host <-> device bytes counted equal the ring's closed form.
//
// Glossary: B sequences, T positions, A channels, H heads, hs = A/H, p ranks, r this rank,
// Tl = T/p rows held here, L blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/cp/ring_attention.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/flops.h"

namespace llmp {
namespace {

using Split = RingAttention::Split;
constexpr int kB = 2, kH = 2, kA = 16;  // hs = 8

std::vector<float> random_vector(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

/// The rows of `whole` (B,T,width) at `pos`, as a (B,Tl,width) tensor.
Tensor rows_of(const std::vector<float>& whole, const std::vector<int>& pos, int T, int width) {
  const int Tl = static_cast<int>(pos.size());
  Tensor t = Tensor::empty({kB, Tl, width}, DType::kF32, MemCategory::kActivations);
  for (int b = 0; b < kB; ++b)
    for (int j = 0; j < Tl; ++j)
      std::copy_n(whole.data() + (static_cast<long>(b) * T + pos[j]) * width, width,
                  t.f32() + (static_cast<long>(b) * Tl + j) * width);
  return t;
}

/// max |mine − reference rows| / max |reference rows|.
double relative_error(const Tensor& mine, const std::vector<float>& whole,
                      const std::vector<int>& pos, int T, int width) {
  Tensor ref = rows_of(whole, pos, T, width);
  double diff = 0, scale = 0;
  for (int64_t e = 0; e < ref.numel(); ++e) {
    diff = std::max(diff, std::abs(double(mine.f32()[e]) - ref.f32()[e]));
    scale = std::max(scale, std::abs(double(ref.f32()[e])));
  }
  return diff / scale;
}

class RingAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world = ProcessGroup::world();
    p = world->size();
    r = world->rank();
  }
  bool splits(int T) const { return T % (2 * p) == 0; }
  std::shared_ptr<ProcessGroup> world;
  int p = 1, r = 0;
};

// out and dqkv against the whole-sequence kernel, T = 16 and 48, both splits.
TEST_F(RingAttentionTest, MatchesWholeSequenceKernel) {
  for (int T : {16, 48}) {
    if (!splits(T)) continue;  // p = 3, T = 16
    std::vector<float> qkv = random_vector(size_t(kB) * T * 3 * kA, 11 + T);
    std::vector<float> dout = random_vector(size_t(kB) * T * kA, 23 + T);
    std::vector<float> out(size_t(kB) * T * kA), att(size_t(kB) * kH * T * T),
        dqkv(qkv.size()), scratch(size_t(T) * T);
    cpu::attention_forward(out.data(), att.data(), qkv.data(), kB, T, kA, kH);
    cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), scratch.data(), kB,
                            T, kA, kH);
    for (Split split : {Split::kBalanced, Split::kContiguous}) {
      SCOPED_TRACE("T=" + std::to_string(T) +
                   (split == Split::kBalanced ? " balanced" : " contiguous"));
      auto group = world->duplicate();
      RingAttention core(*group, split);
      const std::vector<int> pos = core.positions(T);
      ASSERT_EQ(static_cast<int>(pos.size()), T / p);
      Tensor q = rows_of(qkv, pos, T, 3 * kA), dy = rows_of(dout, pos, T, kA);
      Tensor y = Tensor::empty({kB, T / p, kA}, DType::kF32, MemCategory::kActivations);
      Tensor dq = Tensor::empty({kB, T / p, 3 * kA}, DType::kF32, MemCategory::kActivations);
      AttentionKeep keep;
      core.forward(q, y, kB, T, kH, &keep);
      EXPECT_LT(relative_error(y, out, pos, T, kA), 1e-5) << "forward out";
      core.backward(dy, q, y, &keep, dq, kB, T, kH);
      EXPECT_LT(relative_error(dq, dqkv, pos, T, 3 * kA), 1e-5) << "backward dqkv";
      EXPECT_FALSE(keep.a.defined()) << "backward frees *keep";
    }
  }
}

// Every position on exactly one rank; the balanced split pairs chunk i with chunk 2p − 1 − i.
TEST_F(RingAttentionTest, PositionsCoverTheSequenceOnce) {
  const int T = 48;
  if (!splits(T)) GTEST_SKIP();
  const int c = T / (2 * p);
  for (Split split : {Split::kBalanced, Split::kContiguous}) {
    RingAttention core(*world, split);
    std::vector<int> seen(T, 0);
    for (int rank = 0; rank < p; ++rank)
      for (int chunk : core.chunks(rank))
        for (int o = 0; o < c; ++o) ++seen[chunk * c + o];
    for (int t = 0; t < T; ++t) EXPECT_EQ(seen[t], 1) << "position " << t;
    const std::vector<int> pos = core.positions(T);
    EXPECT_TRUE(std::is_sorted(pos.begin(), pos.end()));
    if (split == Split::kBalanced) {
      EXPECT_EQ(pos.front(), r * c);                    // chunk r ...
      EXPECT_EQ(pos.back(), (2 * p - r) * c - 1);       // ... and chunk 2p − 1 − r
    } else {
      EXPECT_EQ(pos.front(), r * T / p);
      EXPECT_EQ(pos.back(), (r + 1) * T / p - 1);
    }
  }
}

// One training step of L = 2 blocks (forward 1, forward 2, backward 2, backward 1): the sends,
// their bytes, the kept bytes and the attention-score peak equal the closed forms.
TEST_F(RingAttentionTest, CommunicationKeptBytesAndScorePeakMatchClosedForms) {
  const int T = 48, L = 2;
  if (!splits(T)) GTEST_SKIP();
  for (Split split : {Split::kBalanced, Split::kContiguous}) {
    auto group = world->duplicate();
    RingAttention core(*group, split);
    const std::vector<int> pos = core.positions(T);
    std::vector<Tensor> q, y;
    std::vector<AttentionKeep> keep(L);
    for (int l = 0; l < L; ++l) {
      q.push_back(rows_of(random_vector(size_t(kB) * T * 3 * kA, 5 + l), pos, T, 3 * kA));
      y.push_back(Tensor::empty({kB, T / p, kA}, DType::kF32, MemCategory::kActivations));
    }
    Tensor dy = rows_of(random_vector(size_t(kB) * T * kA, 3), pos, T, kA);
    Tensor dq = Tensor::empty({kB, T / p, 3 * kA}, DType::kF32, MemCategory::kActivations);
    ASSERT_EQ(MemoryTracker::instance().current(MemTag::kAttentionScores), 0);
    MemoryTracker::instance().reset_peak();
    for (int l = 0; l < L; ++l) {
      core.forward(q[l], y[l], kB, T, kH, &keep[l]);
      EXPECT_EQ(keep[l].bytes(), core.kept_bytes_per_block(kB, T, kA, kH));
    }
    for (int l = L - 1; l >= 0; --l) core.backward(dy, q[l], y[l], &keep[l], dq, kB, T, kH);
    EXPECT_EQ(MemoryTracker::instance().peak(MemTag::kAttentionScores),
              core.peak_score_bytes(kB, T, kA, kH, L));
    EXPECT_EQ(MemoryTracker::instance().current(MemTag::kAttentionScores), 0);
    const CommStats& st = group->stats();
    const double sent = st.bytes.count("send") ? st.bytes.at("send") : 0.0;
    const int64_t sends = st.calls.count("send") ? st.calls.at("send") : 0;
    EXPECT_EQ(sent, L * core.bytes_per_block(kB, T, kA, kH));
    EXPECT_EQ(sends, L * core.calls_per_block());
    EXPECT_EQ(st.total_bytes(), sent) << "the ring sends point to point only";
  }
}

// This rank's forward FLOPs, measured, equal the closed form; gathered over the ranks, the
// balanced split's are the same everywhere and the contiguous split's grow with the rank.
TEST_F(RingAttentionTest, ForwardFlopsOfThisRankMatchAndBalance) {
  const int T = 48;
  if (!splits(T)) GTEST_SKIP();
  std::vector<float> qkv = random_vector(size_t(kB) * T * 3 * kA, 7);
  for (Split split : {Split::kBalanced, Split::kContiguous}) {
    auto group = world->duplicate();
    RingAttention core(*group, split);
    Tensor q = rows_of(qkv, core.positions(T), T, 3 * kA);
    Tensor y = Tensor::empty({kB, T / p, kA}, DType::kF32, MemCategory::kActivations);
    AttentionKeep keep;
    const int64_t before = cpu::flops_done();
    core.forward(q, y, kB, T, kH, &keep);
    const double measured = static_cast<double>(cpu::flops_done() - before);
    EXPECT_EQ(measured, core.forward_flops_per_block(kB, T, kA, kH));
    Tensor mine = Tensor::empty({1}, DType::kF64), all = Tensor::empty({p}, DType::kF64);
    mine.f64()[0] = measured;
    world->all_gather(mine, all);
    for (int i = 1; i < p; ++i) {
      if (split == Split::kBalanced)
        EXPECT_EQ(all.f64()[i], all.f64()[0]) << "rank " << i;
      else
        EXPECT_GT(all.f64()[i], all.f64()[i - 1]) << "rank " << i;
    }
  }
}

// The core on a guarded FakeDevice (every buffer a device tensor, every operation a kernel of
// FakeKernelOps or a Tensor copy/fill; a host read of device memory is a SIGSEGV) against the
// CPU core on the same rows: out, lse and dqkv equal bit for bit (the fake device runs the same
// CPU kernels). The host <-> device bytes the FakeDevice counted equal the ring's closed form:
// every send of a device tensor is staged down at its sender and up at its receiver, and this
// rank sends and receives p − 1 K|V blocks in the forward, p − 1 K|V blocks and p dK|dV
// accumulators in the backward (3p − 2 in all; none at p = 1), each 8·B·Tl·A bytes.
TEST_F(RingAttentionTest, OnTheFakeDeviceEqualsTheCpuCoreBitForBit) {
  const int T = 24;
  if (!splits(T)) GTEST_SKIP();
  const int Tl = T / p;
  const double block = 8.0 * kB * Tl * kA;  // one K|V block or dK|dV accumulator, bytes
  const int forward_sends = p - 1, backward_sends = p > 1 ? 2 * p - 1 : 0;  // none at p = 1
  const std::vector<float> qkv = random_vector(size_t(kB) * T * 3 * kA, 31);
  const std::vector<float> dout = random_vector(size_t(kB) * T * kA, 37);
  for (Split split : {Split::kBalanced, Split::kContiguous}) {
    SCOPED_TRACE(split == Split::kBalanced ? "balanced" : "contiguous");
    auto cpu_group = world->duplicate();
    RingAttention cpu_core(*cpu_group, split);
    const std::vector<int> pos = cpu_core.positions(T);
    Tensor q = rows_of(qkv, pos, T, 3 * kA), dy = rows_of(dout, pos, T, kA);
    Tensor y = Tensor::empty({kB, Tl, kA}, DType::kF32, MemCategory::kActivations);
    Tensor dq = Tensor::empty({kB, Tl, 3 * kA}, DType::kF32, MemCategory::kActivations);
    AttentionKeep keep;
    cpu_core.forward(q, y, kB, T, kH, &keep);
    Tensor lse = Tensor::empty({kB, kH, Tl});
    lse.copy_from(keep.a);
    cpu_core.backward(dy, q, y, &keep, dq, kB, T, kH);

    testing::FakeDevice dev(/*guarded=*/true);
    testing::FakeKernelOps ops(dev);
    {
      auto dev_group = world->duplicate();
      RingAttention dev_core(*dev_group, split);
      auto on_dev = [](const Tensor& host) {
        Tensor d = Tensor::empty(host.shape(), DType::kF32, MemCategory::kActivations,
                                 Device::kCUDA);
        d.copy_from(host);
        return d;
      };
      Tensor qd = on_dev(q), dyd = on_dev(dy), yd = on_dev(y), dqd = on_dev(dq);
      AttentionKeep kd;
      const int64_t down0 = dev.d2h_bytes(), up0 = dev.h2d_bytes();
      dev_core.forward(qd, yd, kB, T, kH, &kd);
      const int64_t down1 = dev.d2h_bytes(), up1 = dev.h2d_bytes();
      EXPECT_EQ(down1 - down0, forward_sends * block) << "forward: K|V blocks staged down";
      EXPECT_EQ(up1 - up0, forward_sends * block) << "forward: K|V blocks staged up";
      EXPECT_EQ(kd.a.device(), Device::kCUDA) << "lse stays on the device";
      Tensor lse_d = Tensor::empty({kB, kH, Tl});
      lse_d.copy_from(kd.a);
      const int64_t down2 = dev.d2h_bytes(), up2 = dev.h2d_bytes();
      dev_core.backward(dyd, qd, yd, &kd, dqd, kB, T, kH);
      EXPECT_EQ(dev.d2h_bytes() - down2, backward_sends * block) << "backward: K|V + dK|dV down";
      EXPECT_EQ(dev.h2d_bytes() - up2, backward_sends * block) << "backward: K|V + dK|dV up";
      const StagingStats st = dev_group->staging_stats();
      EXPECT_EQ(st.to_host_bytes, (forward_sends + backward_sends) * block) << "the backend's own";
      EXPECT_EQ(st.to_device_bytes, (forward_sends + backward_sends) * block);
      Tensor y_back = Tensor::empty({kB, Tl, kA}), dq_back = Tensor::empty({kB, Tl, 3 * kA});
      y_back.copy_from(yd);
      dq_back.copy_from(dqd);
      EXPECT_EQ(std::memcmp(y_back.f32(), y.f32(), y.nbytes()), 0) << "out";
      EXPECT_EQ(std::memcmp(lse_d.f32(), lse.f32(), lse.nbytes()), 0) << "lse";
      EXPECT_EQ(std::memcmp(dq_back.f32(), dq.f32(), dq.nbytes()), 0) << "dqkv";
    }
  }
}

// 2p ∤ T: one line naming T and 2p, from positions() and from forward().
TEST_F(RingAttentionTest, SequenceNotDivisibleByTwoPThrows) {
  RingAttention core(*world);
  const int T = 2 * p * 3 + 1;
  try {
    core.positions(T);
    FAIL() << "no exception for T=" << T;
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("T=" + std::to_string(T)), std::string::npos) << msg;
    EXPECT_NE(msg.find("2p=" + std::to_string(2 * p)), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  Tensor q = Tensor::zeros({kB, 3, 3 * kA}), y = Tensor::zeros({kB, 3, kA});
  AttentionKeep keep;
  EXPECT_THROW(core.forward(q, y, kB, T, kH, &keep), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
