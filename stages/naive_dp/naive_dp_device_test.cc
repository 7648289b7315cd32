// Naive DP with --device cuda's placement, at 2 ranks, without a GPU: every rank's model, states
// and activations on a guarded FakeDevice (common/testing/fake_device.h) with the CPU kernels as
// the device's, and the gradients' all_reduce given a device tensor, which the MPI backend stages
// through a host buffer (common/comm/process_group_staging.h).
//
// Checked against naive DP on the CPU on the same ranks: losses and final state bit for bit, the
// same CommStats (the collective is the same), and the staging the backend must do for one
// all_reduce of the Ψ-float gradient per step: 4Ψ bytes down and 4Ψ up, nothing else.
#include <gtest/gtest.h>

#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "stages/naive_dp/naive_dp.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3;

struct Result {
  std::vector<double> losses;
  std::vector<float> state;  // params, m, v
  double bytes = 0;
};

Result train(const GPT& model, ProcessGroup& dp) {
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = 4, T = model.config().ctx;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  NaiveDPStrategy s(model, dp, opt, 11);
  const BatchSlice slice = s.batch_slice(B);
  std::vector<int32_t> tok(slice.num_seqs * T), tgt(slice.num_seqs * T);
  Result r;
  const double before = dp.stats().total_bytes();
  for (int t = 1; t <= kSteps; ++t) {
    sample(corpus.train(), 42, t, slice.first_seq, slice.num_seqs, T, tok.data(), tgt.data());
    r.losses.push_back(s.train_step(tok.data(), tgt.data(), B, T, t));
  }
  r.bytes = dp.stats().total_bytes() - before;
  const int64_t psi = model.layout().num_params();
  r.state.resize(3 * psi);
  s.get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  return r;
}

TEST(NaiveDPOnDevice, EqualsNaiveDPOnTheCpuWithTheAllReduceStaged) {
  const GPT model(GPTConfig::preset("tiny"));
  const int64_t psi = model.layout().num_params();
  auto cpu_group = test_world().duplicate();
  const Result cpu = train(model, *cpu_group);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  auto dev_group = test_world().duplicate();
  const Result gpu = train(model.with_device(Device::kCUDA), *dev_group);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.bytes, cpu.bytes);
  EXPECT_GT(cpu.bytes, 0);
  const StagingStats st = dev_group->staging_stats();
  EXPECT_EQ(st.to_host_bytes, kSteps * 4 * psi) << "one all_reduce of 4Ψ bytes per step, staged";
  EXPECT_EQ(st.to_device_bytes, kSteps * 4 * psi);
  EXPECT_EQ(cpu_group->staging_stats().to_host_bytes, 0) << "host tensors are never staged";
  // Everything that crossed between host and device: the initial parameters and each step's ids
  // (tokens twice, targets once; B/N sequences of T) up, get_state's parameters, m and v down,
  // and the staging above. Nothing else (a stray round trip through the host fails here).
  const int64_t T = model.config().ctx, ids = kSteps * 3 * 4 * (4 / dev_group->size()) * T;
  EXPECT_EQ(dev.h2d_bytes(), 4 * psi + ids + st.to_device_bytes);
  EXPECT_EQ(dev.d2h_bytes(), 12 * psi + st.to_host_bytes);
}

}  // namespace
}  // namespace llmp
