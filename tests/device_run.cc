// A stage on a FakeDevice against the same stage on the CPU (device_run.h).
#include "tests/device_run.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kGlobalBatch = 4;

struct Result {
  std::vector<double> losses;
  std::vector<float> state;  // params, m, v
  double bytes = 0;
};

Result train(const DpStrategyFactory& make, const GPT& model, ProcessGroup& dp, int steps) {
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int T = model.config().ctx;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  const std::unique_ptr<Strategy> s = make(model, dp, opt, 11);
  const BatchSlice slice = s->batch_slice(kGlobalBatch);
  std::vector<int32_t> tok(slice.num_seqs * T), tgt(slice.num_seqs * T);
  Result r;
  const double before = dp.stats().total_bytes();
  for (int t = 1; t <= steps; ++t) {
    sample(corpus.train(), 42, t, slice.first_seq, slice.num_seqs, T, tok.data(), tgt.data());
    r.losses.push_back(s->train_step(tok.data(), tgt.data(), kGlobalBatch, T, t));
  }
  r.bytes = dp.stats().total_bytes() - before;
  const int64_t psi = model.layout().num_params();
  r.state.resize(3 * psi);
  s->get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  return r;
}

}  // namespace

StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps) {
  return expect_device_run_equals_cpu(make, steps, DirectCopies{});
}

StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies) {
  return expect_device_run_equals_cpu(make, steps, copies, TrainPrecision::kFP32);
}

StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies, TrainPrecision precision) {
  const GPT model(GPTConfig::preset("tiny"), TpComm::none(), storage_dtype(precision));
  const int64_t psi = model.layout().num_params();
  auto cpu_group = test_world().duplicate();
  const Result cpu = train(make, model, *cpu_group, steps);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  auto dev_group = test_world().duplicate();
  const GPT on_device = model.with_device(Device::kCUDA);  // strategies keep a reference
  const Result gpu = train(make, on_device, *dev_group, steps);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.bytes, cpu.bytes);
  EXPECT_GT(cpu.bytes, 0);
  EXPECT_EQ(cpu_group->staging_stats().to_host_bytes, 0) << "host tensors are never staged";
  const StagingStats st = dev_group->staging_stats();
  // Everything that crossed between host and device: the initial parameters and each step's ids
  // (tokens twice, targets once; B/N sequences of T) up, get_state's parameters, m and v down,
  // and the staging. Nothing else (a stray round trip through the host fails here).
  const int64_t T = model.config().ctx;
  const int64_t ids = int64_t{steps} * 3 * 4 * (kGlobalBatch / dev_group->size()) * T;
  const int64_t params_up = dtype_size(storage_dtype(precision)) * psi;  // 16-bit: rounded first
  EXPECT_EQ(dev.h2d_bytes(), params_up + ids + copies.up + st.to_device_bytes);
  EXPECT_EQ(dev.d2h_bytes(), (copies.down < 0 ? 12 * psi : copies.down) + st.to_host_bytes);
  return st;
}

}  // namespace llmp
